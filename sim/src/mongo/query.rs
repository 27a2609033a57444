//! The query and update language, the subset the lock commands use, with the server's
//! own errors for what it refuses.
//!
//! Filters: `{field: value}` (equality; a document or array compares whole), and
//! `{field: {$eq|$ne|$lt|$lte|$gt|$gte: value}}`, `{field: {$exists: bool}}`,
//! `$and`/`$or` of filters. Comparison follows MongoDB's type bracketing: numbers
//! (int32, int64, double) compare with each other by value, dates with dates,
//! strings with strings (binary order, no collation); `$lt` and friends never match
//! across types; a missing field equals `null`. Dotted paths are not supported (the
//! lock documents are flat): a dotted field name is refused.
//!
//! Updates: an operator document with `$set`, `$unset`, `$inc`, `$setOnInsert`, or a
//! replacement document. `_id` cannot be changed.

use std::cmp::Ordering;

use lock_impl::mongo::{Document, Value};

/// A refused query or update: `code`, `codeName` and `errmsg` as mongod answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// `code`.
    pub code: i32,
    /// `codeName`.
    pub code_name: &'static str,
    /// `errmsg`.
    pub errmsg: String,
}

fn bad_value(msg: String) -> QueryError {
    QueryError {
        code: 2,
        code_name: "BadValue",
        errmsg: msg,
    }
}

fn failed_to_parse(msg: String) -> QueryError {
    QueryError {
        code: 9,
        code_name: "FailedToParse",
        errmsg: msg,
    }
}

/// The bracket a value's type sorts in, and its ordering within it.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Value::DateTime(x), Value::DateTime(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Null, Value::Null) => Some(Ordering::Equal),
        (Value::Timestamp { t: t1, i: i1 }, Value::Timestamp { t: t2, i: i2 }) => {
            Some((t1, i1).cmp(&(t2, i2)))
        }
        (Value::ObjectId(x), Value::ObjectId(y)) => Some(x.cmp(y)),
        _ => {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            // Integers beyond 2^53 are compared exactly when both are integers.
            if let (Some(i), Some(j)) = (int_of(a), int_of(b)) {
                return Some(i.cmp(&j));
            }
            x.partial_cmp(&y)
        }
    }
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Int32(i) => Some(i64::from(*i)),
        Value::Int64(i) => Some(*i),
        _ => None,
    }
}

/// Equality as `{field: value}` tests it.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Document(x), Value::Document(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        _ => compare(a, b) == Some(Ordering::Equal),
    }
}

fn check_field(name: &str) -> Result<(), QueryError> {
    if name.contains('.') {
        return Err(bad_value(format!(
            "dotted field names are not supported by this model: '{name}'"
        )));
    }
    Ok(())
}

/// Whether `doc` matches `filter`.
pub fn matches(doc: &Document, filter: &Document) -> Result<bool, QueryError> {
    for (field, cond) in filter.iter() {
        let ok = match field {
            "$and" | "$or" => {
                let Some(Value::Array(list)) = Some(cond) else {
                    return Err(bad_value(format!("{field} must be an array")));
                };
                if list.is_empty() {
                    return Err(bad_value(
                        "$and/$or/$nor must be a nonempty array".to_string(),
                    ));
                }
                let mut results = Vec::with_capacity(list.len());
                for f in list {
                    let Value::Document(f) = f else {
                        return Err(bad_value(format!(
                            "{field} argument's entries must be objects"
                        )));
                    };
                    results.push(matches(doc, f)?);
                }
                if field == "$and" {
                    results.iter().all(|r| *r)
                } else {
                    results.iter().any(|r| *r)
                }
            }
            f if f.starts_with('$') => {
                return Err(bad_value(format!("unknown top level operator: {f}")));
            }
            _ => {
                check_field(field)?;
                let have = doc.get(field);
                match cond {
                    Value::Document(ops)
                        if ops.first().is_some_and(|(k, _)| k.starts_with('$')) =>
                    {
                        let mut all = true;
                        for (op, arg) in ops.iter() {
                            all &= operator(have, op, arg)?;
                        }
                        all
                    }
                    v => values_equal(have.unwrap_or(&Value::Null), v),
                }
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn operator(have: Option<&Value>, op: &str, arg: &Value) -> Result<bool, QueryError> {
    let v = have.unwrap_or(&Value::Null);
    let ord = compare(v, arg);
    Ok(match op {
        "$eq" => values_equal(v, arg),
        "$ne" => !values_equal(v, arg),
        "$lt" => have.is_some() && ord == Some(Ordering::Less),
        "$lte" => have.is_some() && matches!(ord, Some(Ordering::Less | Ordering::Equal)),
        "$gt" => have.is_some() && ord == Some(Ordering::Greater),
        "$gte" => have.is_some() && matches!(ord, Some(Ordering::Greater | Ordering::Equal)),
        "$exists" => have.is_some() == arg.truthy(),
        other => return Err(bad_value(format!("unknown operator: {other}"))),
    })
}

/// The fields an upsert's new document takes from the filter: its top-level
/// equalities (and `$eq`s).
pub fn equalities(filter: &Document) -> Document {
    let mut out = Document::new();
    for (field, cond) in filter.iter() {
        if field.starts_with('$') {
            continue;
        }
        match cond {
            Value::Document(ops) if ops.first().is_some_and(|(k, _)| k.starts_with('$')) => {
                if let Some(v) = ops.get("$eq") {
                    out.set(field, v.clone());
                }
            }
            v => out.set(field, v.clone()),
        }
    }
    out
}

/// Whether `update` is an operator update (its first key starts with `$`).
pub fn is_operator_update(update: &Document) -> bool {
    update.first().is_some_and(|(k, _)| k.starts_with('$'))
}

/// Applies `update` to `doc` (`inserting`: the document is an upsert's new one, so
/// `$setOnInsert` applies).
pub fn apply_update(
    doc: &mut Document,
    update: &Document,
    inserting: bool,
) -> Result<(), QueryError> {
    if !is_operator_update(update) {
        // A replacement keeps `_id`.
        if let Some(k) = update
            .iter()
            .find(|(k, _)| k.starts_with('$'))
            .map(|(k, _)| k)
        {
            return Err(bad_value(format!(
                "The dollar ($) prefixed field '{k}' in '{k}' is not allowed in the context of an update's replacement document."
            )));
        }
        let id = doc.get("_id").cloned();
        if let (Some(old), Some(new)) = (&id, update.get("_id"))
            && !values_equal(old, new)
        {
            return Err(immutable_id());
        }
        let mut next = Document::new();
        if let Some(id) = id {
            next.set("_id", id);
        }
        for (k, v) in update.iter() {
            next.set(k, v.clone());
        }
        *doc = next;
        return Ok(());
    }
    for (op, arg) in update.iter() {
        let Value::Document(fields) = arg else {
            return Err(failed_to_parse(format!(
                "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{op}: {arg}}}",
                type_name(arg)
            )));
        };
        for (field, v) in fields.iter() {
            check_field(field)?;
            if field == "_id" && op != "$setOnInsert" {
                if doc.get("_id").is_some_and(|old| !values_equal(old, v)) || op != "$set" {
                    return Err(immutable_id());
                }
                continue;
            }
            match op {
                "$set" => doc.set(field, v.clone()),
                "$setOnInsert" => {
                    if inserting {
                        doc.set(field, v.clone());
                    }
                }
                "$unset" => {
                    doc.remove(field);
                }
                "$inc" => {
                    let Some(by) = v.as_f64() else {
                        return Err(QueryError {
                            code: 14,
                            code_name: "TypeMismatch",
                            errmsg: format!(
                                "Cannot increment with non-numeric argument: {{{field}: {v}}}"
                            ),
                        });
                    };
                    let next = match (doc.get(field), v) {
                        (None, v) => v.clone(),
                        (Some(Value::Int32(a)), Value::Int32(b)) => match a.checked_add(*b) {
                            Some(s) => Value::Int32(s),
                            None => Value::Int64(i64::from(*a) + i64::from(*b)),
                        },
                        (Some(Value::Int32(a)), Value::Int64(b)) => {
                            Value::Int64(i64::from(*a).saturating_add(*b))
                        }
                        (Some(Value::Int64(a)), Value::Int32(b)) => {
                            Value::Int64(a.saturating_add(i64::from(*b)))
                        }
                        (Some(Value::Int64(a)), Value::Int64(b)) => {
                            Value::Int64(a.saturating_add(*b))
                        }
                        (Some(have), _) => match have.as_f64() {
                            Some(h) => Value::Double(h + by),
                            None => {
                                return Err(QueryError {
                                    code: 14,
                                    code_name: "TypeMismatch",
                                    errmsg: format!(
                                        "Cannot apply $inc to a value of non-numeric type. {{_id: {}}} has the field '{field}' of non-numeric type {}",
                                        doc.get("_id").map(|v| v.to_string()).unwrap_or_default(),
                                        type_name(have)
                                    ),
                                });
                            }
                        },
                    };
                    doc.set(field, next);
                }
                other => {
                    return Err(failed_to_parse(format!(
                        "Unknown modifier: {other}. Expected a valid update modifier or pipeline-style update specified as an array"
                    )));
                }
            }
        }
    }
    Ok(())
}

fn immutable_id() -> QueryError {
    QueryError {
        code: 66,
        code_name: "ImmutableField",
        errmsg: "Performing an update on the path '_id' would modify the immutable field '_id'"
            .into(),
    }
}

/// The type's name as server messages give it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Double(_) => "double",
        Value::String(_) => "string",
        Value::Document(_) => "object",
        Value::Array(_) => "array",
        Value::ObjectId(_) => "objectId",
        Value::Bool(_) => "bool",
        Value::DateTime(_) => "date",
        Value::Null => "null",
        Value::Int32(_) => "int",
        Value::Timestamp { .. } => "timestamp",
        Value::Int64(_) => "long",
    }
}

//! The clients' reads and writes: `findAndModify` (with upsert), `insert` with a
//! unique `_id`, `delete`, `find`, and the oplog `find` a secondary pulls with.

use super::commands::Concern;
use super::*;

impl Member {
    /// What every write checks first, in mongod's order: the collection's name, that
    /// this member is primary, then the write concern. The namespace and the concern,
    /// or the error to answer.
    fn start_write(
        &self,
        db: &str,
        arg: &Value,
        body: &Document,
    ) -> Result<(String, Concern), Document> {
        let coll = Self::collection_name(arg)?;
        if self.role != Role::Primary {
            return Err(not_primary());
        }
        let concern = self.concern(body)?;
        Ok((format!("{db}.{coll}"), concern))
    }

    /// `doc` and its `_id`: one made (a new ObjectId, as the first field, as mongod
    /// adds it) if it had none.
    fn with_id(&mut self, doc: Document) -> (Document, Value) {
        if let Some(id) = doc.get("_id") {
            let id = id.clone();
            return (doc, id);
        }
        let id = self.new_object_id();
        let mut with_id = Document::new().with("_id", id.clone());
        for (k, v) in doc.iter() {
            with_id.set(k, v.clone());
        }
        (with_id, id)
    }

    pub(super) fn find_and_modify(
        &mut self,
        host: &str,
        db: &str,
        arg: &Value,
        body: &Document,
    ) -> Handled {
        let (ns, concern) = match self.start_write(db, arg, body) {
            Ok(w) => w,
            Err(e) => return Handled::Reply(e),
        };
        let empty = Document::new();
        let filter = match body.get("query") {
            None | Some(Value::Null) => &empty,
            Some(Value::Document(d)) => d,
            Some(v) => {
                return Handled::Reply(error_reply(
                    14,
                    "TypeMismatch",
                    format!(
                        "BSON field 'findAndModify.query' is the wrong type '{}', expected type 'object'",
                        query::type_name(v)
                    ),
                ));
            }
        };
        if body.get_document("sort").is_some_and(|s| !s.is_empty()) {
            return Handled::Reply(error_reply(
                2,
                "BadValue",
                "sort is not supported by this model",
            ));
        }
        let remove = body.get("remove").is_some_and(Value::truthy);
        let update = body.get_document("update");
        let (upsert, new) = (
            body.get("upsert").is_some_and(Value::truthy),
            body.get("new").is_some_and(Value::truthy),
        );
        if let Some(refused) = modify_options_refused(remove, update.is_some(), upsert || new) {
            return Handled::Reply(error_reply(9, "FailedToParse", refused));
        }
        // The filter and the update are parsed before anything is looked up, as mongod
        // parses them: a malformed one is refused even when no document matches.
        if let Err(e) = query::matches(&Document::new(), filter) {
            return Handled::Reply(query_error(e));
        }
        if let Some(u) = update
            && let Err(e) = query::apply_update(&mut Document::new(), u, true)
        {
            return Handled::Reply(query_error(e));
        }
        let mut found = None;
        for doc in self.documents(&ns) {
            match query::matches(doc, filter) {
                Ok(true) => {
                    found = Some(doc.clone());
                    break;
                }
                Ok(false) => {}
                Err(e) => return Handled::Reply(query_error(e)),
            }
        }
        let optime = self.next_optime();
        let origin = Origin::Client(host.to_string());
        let ok = |value: Value, last: Document| {
            Document::new()
                .with("lastErrorObject", last)
                .with("value", value)
                .with("ok", 1.0)
        };
        match (found, update) {
            (Some(doc), None) => {
                let id = doc.get("_id").cloned().unwrap_or(Value::Null);
                self.append(Op::Delete { ns, id }, origin, optime);
                let reply = ok(Value::Document(doc), Document::new().with("n", 1));
                self.finish_write(reply, concern, true)
            }
            (Some(doc), Some(update)) => {
                let mut next = doc.clone();
                if let Err(e) = query::apply_update(&mut next, update, false) {
                    return Handled::Reply(query_error(e));
                }
                let changed = next != doc;
                if changed {
                    self.append(
                        Op::Update {
                            ns,
                            doc: next.clone(),
                        },
                        origin,
                        optime,
                    );
                }
                let value = if new { next } else { doc };
                let reply = ok(
                    Value::Document(value),
                    Document::new().with("n", 1).with("updatedExisting", true),
                );
                self.finish_write(reply, concern, changed)
            }
            (None, Some(update)) if upsert => {
                let mut doc = query::equalities(filter);
                if let Err(e) = query::apply_update(&mut doc, update, true) {
                    return Handled::Reply(query_error(e));
                }
                let (doc, id) = self.with_id(doc);
                if self.document(&ns, &id).is_some() {
                    return Handled::Reply(Self::dup_key(&ns, &id));
                }
                self.append(
                    Op::Insert {
                        ns,
                        doc: doc.clone(),
                    },
                    origin,
                    optime,
                );
                let value = if new {
                    Value::Document(doc)
                } else {
                    Value::Null
                };
                let reply = ok(
                    value,
                    Document::new()
                        .with("n", 1)
                        .with("updatedExisting", false)
                        .with("upserted", id),
                );
                self.finish_write(reply, concern, true)
            }
            (None, _) => {
                let mut last = Document::new().with("n", 0);
                if update.is_some() {
                    last.set("updatedExisting", false);
                }
                Handled::Reply(ok(Value::Null, last))
            }
        }
    }

    pub(super) fn insert(&mut self, host: &str, db: &str, arg: &Value, body: &Document) -> Handled {
        let (ns, concern) = match self.start_write(db, arg, body) {
            Ok(w) => w,
            Err(e) => return Handled::Reply(e),
        };
        let docs = match required_array(body, "insert", "documents") {
            Ok(d) => d,
            Err(e) => return Handled::Reply(e),
        };
        let ordered = body.get("ordered").is_none_or(Value::truthy);
        let mut n = 0;
        let mut errors = Vec::new();
        for (i, v) in docs.iter().enumerate() {
            let Value::Document(doc) = v else {
                return Handled::Reply(error_reply(
                    14,
                    "TypeMismatch",
                    "BSON field 'insert.documents' is the wrong type, expected type 'object'",
                ));
            };
            let (doc, id) = self.with_id(doc.clone());
            if self.document(&ns, &id).is_some() {
                let e = Self::dup_key(&ns, &id);
                errors.push(Value::Document(
                    Document::new()
                        .with("index", i as i32)
                        .with("code", 11000)
                        .with("keyPattern", Document::new().with("_id", 1))
                        .with("keyValue", Document::new().with("_id", id))
                        .with("errmsg", e.get_str("errmsg").unwrap_or("")),
                ));
                if ordered {
                    break;
                }
                continue;
            }
            let optime = self.next_optime();
            self.append(
                Op::Insert {
                    ns: ns.clone(),
                    doc,
                },
                Origin::Client(host.to_string()),
                optime,
            );
            n += 1;
        }
        let mut reply = Document::new().with("n", n);
        if !errors.is_empty() {
            reply.set("writeErrors", errors);
        }
        reply.set("ok", 1.0);
        self.finish_write(reply, concern, n > 0)
    }

    pub(super) fn delete(&mut self, host: &str, db: &str, arg: &Value, body: &Document) -> Handled {
        let (ns, concern) = match self.start_write(db, arg, body) {
            Ok(w) => w,
            Err(e) => return Handled::Reply(e),
        };
        let deletes = match required_array(body, "delete", "deletes") {
            Ok(d) => d,
            Err(e) => return Handled::Reply(e),
        };
        let mut n = 0;
        for v in &deletes {
            let Some(d) = v.as_document() else {
                return Handled::Reply(error_reply(
                    14,
                    "TypeMismatch",
                    "BSON field 'delete.deletes' is the wrong type, expected type 'object'",
                ));
            };
            let (Some(q), Some(limit)) = (d.get_document("q"), d.get_i64("limit")) else {
                return Handled::Reply(error_reply(
                    40414,
                    "Location40414",
                    "BSON field 'delete.deletes.q' is missing but a required field",
                ));
            };
            if limit != 0 && limit != 1 {
                return Handled::Reply(error_reply(
                    9,
                    "FailedToParse",
                    format!("The limit field in delete objects must be 0 or 1. Got {limit}"),
                ));
            }
            if let Err(e) = query::matches(&Document::new(), q) {
                return Handled::Reply(query_error(e));
            }
            let mut ids = Vec::new();
            for doc in self.documents(&ns) {
                match query::matches(doc, q) {
                    Ok(true) => {
                        ids.push(doc.get("_id").cloned().unwrap_or(Value::Null));
                        if limit == 1 {
                            break;
                        }
                    }
                    Ok(false) => {}
                    Err(e) => return Handled::Reply(query_error(e)),
                }
            }
            for id in ids {
                let optime = self.next_optime();
                self.append(
                    Op::Delete { ns: ns.clone(), id },
                    Origin::Client(host.to_string()),
                    optime,
                );
                n += 1;
            }
        }
        let reply = Document::new().with("n", n).with("ok", 1.0);
        self.finish_write(reply, concern, n > 0)
    }

    pub(super) fn find(&mut self, db: &str, arg: &Value, body: &Document) -> Handled {
        let coll = match Self::collection_name(arg) {
            Ok(c) => c.to_string(),
            Err(e) => return Handled::Reply(e),
        };
        let empty = Document::new();
        let filter = body.get_document("filter").unwrap_or(&empty);
        if db == "local" && coll == "oplog.rs" {
            return self.find_oplog(filter, body);
        }
        let secondary_ok = body
            .get_document("$readPreference")
            .and_then(|r| r.get_str("mode"))
            .is_some_and(|m| m != "primary");
        if self.role != Role::Primary && !secondary_ok {
            return Handled::Reply(error_reply(
                13435,
                "NotPrimaryNoSecondaryOk",
                "not primary and secondaryOk=false",
            ));
        }
        let level = body
            .get_document("readConcern")
            .and_then(|r| r.get_str("level"))
            .unwrap_or("local");
        let ns = format!("{db}.{coll}");
        let snapshot;
        let docs: Vec<&Document> = match level {
            "local" | "available" => self.documents(&ns),
            "majority" => {
                snapshot = self.replay(self.commit.ts as usize);
                snapshot
                    .get(&ns)
                    .map(|c| c.values().collect())
                    .unwrap_or_default()
            }
            other => {
                return Handled::Reply(error_reply(
                    9,
                    "FailedToParse",
                    format!("readConcern level '{other}' is not supported by this model"),
                ));
            }
        };
        if let Err(e) = query::matches(&Document::new(), filter) {
            return Handled::Reply(query_error(e));
        }
        let limit = body.get_i64("limit").unwrap_or(0).max(0) as usize;
        let mut batch = Vec::new();
        for doc in docs {
            match query::matches(doc, filter) {
                Ok(true) => batch.push(Value::Document(doc.clone())),
                Ok(false) => {}
                Err(e) => return Handled::Reply(query_error(e)),
            }
            if limit > 0 && batch.len() >= limit {
                break;
            }
        }
        Handled::Reply(
            Document::new()
                .with(
                    "cursor",
                    Document::new()
                        .with("firstBatch", batch)
                        .with("id", 0i64)
                        .with("ns", ns),
                )
                .with("ok", 1.0),
        )
    }

    pub(super) fn find_oplog(&mut self, filter: &Document, body: &Document) -> Handled {
        if let Some(t) = body.get_i64("term") {
            self.see_term(t, "an oplog read with a higher term");
        }
        let from = filter
            .get_document("ts")
            .and_then(|c| c.get("$gte"))
            .and_then(|v| match v {
                Value::Timestamp { i, .. } => Some(u64::from(*i)),
                _ => None,
            })
            .unwrap_or(1)
            .max(1);
        let last = self.last_applied();
        let await_data = body.get("awaitData").is_some_and(Value::truthy);
        // Nothing new past the reader's own last entry (which we have too): wait.
        if await_data
            && last.ts <= from
            && self.entry_at(from).is_some()
            && let Some(max) = body.get_i64("maxTimeMS").filter(|m| *m > 0)
            && !body.get("$retried").is_some_and(Value::truthy)
        {
            return Handled::WaitOplog {
                body: body.clone().with("$retried", true),
                after: last,
                max_ms: max as u64,
            };
        }
        let batch: Vec<Value> = self
            .durable
            .oplog
            .iter()
            .skip(from as usize - 1)
            .map(|e| Value::Document(e.to_doc()))
            .collect();
        Handled::Reply(
            Document::new()
                .with(
                    "cursor",
                    Document::new()
                        .with("firstBatch", batch)
                        .with("id", 0i64)
                        .with("ns", "local.oplog.rs"),
                )
                .with(
                    "$replData",
                    Document::new()
                        .with("term", self.durable.term)
                        .with("lastOpCommitted", self.commit.to_doc())
                        .with("lastOpVisible", last.to_doc())
                        .with("primaryIndex", self.primary().map_or(-1, |p| p as i32)),
                )
                .with("ok", 1.0),
        )
    }
}

/// The array `field` a write command `cmd` requires (its documents or statements), or
/// mongod's error for a missing one.
fn required_array(body: &Document, cmd: &str, field: &str) -> Result<Vec<Value>, Document> {
    body.get_array(field).map(<[Value]>::to_vec).ok_or_else(|| {
        error_reply(
            40414,
            "Location40414",
            format!("BSON field '{cmd}.{field}' is missing but a required field"),
        )
    })
}

/// Why mongod refuses a `findAndModify`'s combination of `remove`, an update and
/// `upsert`/`new`, if it does.
fn modify_options_refused(remove: bool, update: bool, upsert_or_new: bool) -> Option<&'static str> {
    match (remove, update) {
        (true, true) => Some("Cannot specify both an update and remove=true"),
        (false, false) => Some("Either an update or remove=true must be specified"),
        (true, false) if upsert_or_new => Some("Cannot specify both upsert=true and remove=true "),
        _ => None,
    }
}

//! BSON (<https://bsonspec.org/spec.html>), the subset the lock commands and the
//! replica-set model use: double (0x01), string (0x02), embedded document (0x03),
//! array (0x04), ObjectId (0x07), boolean (0x08), UTC datetime (0x09), null (0x0A),
//! int32 (0x10), timestamp (0x11), int64 (0x12). Any other element type is refused
//! with an error naming it, never skipped: a reply this code cannot read whole is not
//! half-read.
//!
//! A [`Document`] keeps its fields in order (BSON documents are ordered: the command
//! name must be the first field of a command), so encoding is deterministic.

use std::fmt;

/// One BSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// 0x01: 64-bit IEEE 754 floating point.
    Double(f64),
    /// 0x02: UTF-8 string.
    String(String),
    /// 0x03: embedded document.
    Document(Document),
    /// 0x04: array (a document keyed "0", "1", …).
    Array(Vec<Value>),
    /// 0x07: ObjectId, 12 bytes.
    ObjectId([u8; 12]),
    /// 0x08: boolean.
    Bool(bool),
    /// 0x09: UTC datetime, milliseconds since the Unix epoch.
    DateTime(i64),
    /// 0x0A: null.
    Null,
    /// 0x10: 32-bit integer.
    Int32(i32),
    /// 0x11: timestamp (the oplog's `ts`): seconds and an increment.
    Timestamp {
        /// Seconds since the epoch (the high 32 bits).
        t: u32,
        /// Ordinal within the second (the low 32 bits).
        i: u32,
    },
    /// 0x12: 64-bit integer.
    Int64(i64),
}

impl Value {
    /// The BSON type byte.
    pub fn type_byte(&self) -> u8 {
        match self {
            Value::Double(_) => 0x01,
            Value::String(_) => 0x02,
            Value::Document(_) => 0x03,
            Value::Array(_) => 0x04,
            Value::ObjectId(_) => 0x07,
            Value::Bool(_) => 0x08,
            Value::DateTime(_) => 0x09,
            Value::Null => 0x0a,
            Value::Int32(_) => 0x10,
            Value::Timestamp { .. } => 0x11,
            Value::Int64(_) => 0x12,
        }
    }

    /// The value as a number (double, int32 or int64), if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(d) => Some(*d),
            Value::Int32(i) => Some(f64::from(*i)),
            Value::Int64(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The value as an integer (an int32, an int64 or an integral double).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int32(i) => Some(i64::from(*i)),
            Value::Int64(i) => Some(*i),
            Value::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Some(*d as i64),
            _ => None,
        }
    }

    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The document, if it is one.
    pub fn as_document(&self) -> Option<&Document> {
        match self {
            Value::Document(d) => Some(d),
            _ => None,
        }
    }

    /// Truthiness as the server reads a flag (`ok`, `upsert`, `new`): a boolean, or a
    /// number other than zero.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Null => false,
            v => v.as_f64().is_some_and(|n| n != 0.0),
        }
    }
}

impl fmt::Display for Value {
    /// The shell's notation (`"x"`, `{ a: 1 }`, `new Date(…)`), as server messages
    /// print values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Double(d) => write!(f, "{d:?}"),
            Value::String(s) => write!(f, "\"{s}\""),
            Value::Document(d) => write!(f, "{d}"),
            Value::Array(a) => {
                f.write_str("[ ")?;
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str(" ]")
            }
            Value::ObjectId(b) => {
                f.write_str("ObjectId('")?;
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                f.write_str("')")
            }
            Value::Bool(b) => write!(f, "{b}"),
            Value::DateTime(ms) => write!(f, "new Date({ms})"),
            Value::Null => f.write_str("null"),
            Value::Int32(i) => write!(f, "{i}"),
            Value::Timestamp { t, i } => write!(f, "Timestamp({t}, {i})"),
            Value::Int64(i) => write!(f, "{i}"),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}
impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int32(i)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int64(i)
    }
}
impl From<f64> for Value {
    fn from(d: f64) -> Self {
        Value::Double(d)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<Document> for Value {
    fn from(d: Document) -> Self {
        Value::Document(d)
    }
}
impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Self {
        Value::Array(a)
    }
}

/// An ordered BSON document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    fields: Vec<(String, Value)>,
}

impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fields.is_empty() {
            return f.write_str("{}");
        }
        f.write_str("{ ")?;
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k}: {v}")?;
        }
        f.write_str(" }")
    }
}

/// A BSON document that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid BSON: {0}")]
pub struct BsonError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, BsonError> {
    Err(BsonError(msg.into()))
}

/// Nesting deeper than this is refused (the server's own limit is 100 levels for
/// user documents, a little more for commands).
const MAX_DEPTH: usize = 100;

impl Document {
    /// An empty document.
    pub fn new() -> Self {
        Document::default()
    }

    /// Builder: appends `key: value`.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.push((key.to_string(), value.into()));
        self
    }

    /// Sets `key` to `value`: in place if present, appended otherwise.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        let value = value.into();
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.fields.push((key.to_string(), value)),
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.fields.iter().position(|(k, _)| k == key)?;
        Some(self.fields.remove(i).1)
    }

    /// The value of `key` (the first, if a document repeats a key).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A string field.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// An integer field (int32, int64 or integral double).
    pub fn get_i64(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(Value::as_i64)
    }

    /// A document field.
    pub fn get_document(&self, key: &str) -> Option<&Document> {
        self.get(key).and_then(Value::as_document)
    }

    /// An array field.
    pub fn get_array(&self, key: &str) -> Option<&[Value]> {
        match self.get(key) {
            Some(Value::Array(a)) => Some(a),
            _ => None,
        }
    }

    /// The first field (a command's name and argument).
    pub fn first(&self) -> Option<(&str, &Value)> {
        self.fields.first().map(|(k, v)| (k.as_str(), v))
    }

    /// The fields in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether it has no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Its BSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(&mut out);
        out
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        for (k, v) in &self.fields {
            out.push(v.type_byte());
            cstring(out, k);
            encode_value(out, v);
        }
        out.push(0);
        let len = (out.len() - start) as i32;
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Reads one document that fills `bytes` exactly.
    pub fn from_bytes(bytes: &[u8]) -> Result<Document, BsonError> {
        let (doc, used) = Document::read(bytes, 0)?;
        if used != bytes.len() {
            return err(format!(
                "{} bytes after the document's end",
                bytes.len() - used
            ));
        }
        Ok(doc)
    }

    /// Reads one document at the start of `bytes`: it and its length.
    pub fn read_prefix(bytes: &[u8]) -> Result<(Document, usize), BsonError> {
        Document::read(bytes, 0)
    }

    fn read(bytes: &[u8], depth: usize) -> Result<(Document, usize), BsonError> {
        if depth > MAX_DEPTH {
            return err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        if bytes.len() < 5 {
            return err("a document is at least 5 bytes");
        }
        let len = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if len < 5 || len as usize > bytes.len() {
            return err(format!(
                "document length {len} with {} bytes available",
                bytes.len()
            ));
        }
        let len = len as usize;
        if bytes[len - 1] != 0 {
            return err("a document must end with a 0 byte");
        }
        let body = &bytes[4..len - 1];
        let mut pos = 0;
        let mut fields = Vec::new();
        while pos < body.len() {
            let t = body[pos];
            pos += 1;
            let (key, n) = read_cstring(&body[pos..])?;
            pos += n;
            let (v, n) = read_value(t, &body[pos..], depth, &key)?;
            pos += n;
            fields.push((key, v));
        }
        Ok((Document { fields }, len))
    }
}

fn cstring(out: &mut Vec<u8>, s: &str) {
    // A key with a NUL byte cannot be written as a cstring; cut it there, as the spec
    // forbids NUL in keys (callers never build such keys).
    out.extend(s.bytes().take_while(|b| *b != 0));
    out.push(0);
}

fn encode_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Double(d) => out.extend_from_slice(&d.to_le_bytes()),
        Value::String(s) => {
            out.extend_from_slice(&((s.len() + 1) as i32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        }
        Value::Document(d) => d.encode_into(out),
        Value::Array(a) => {
            let doc = Document {
                fields: a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), v.clone()))
                    .collect(),
            };
            doc.encode_into(out);
        }
        Value::ObjectId(b) => out.extend_from_slice(b),
        Value::Bool(b) => out.push(u8::from(*b)),
        Value::DateTime(ms) => out.extend_from_slice(&ms.to_le_bytes()),
        Value::Null => {}
        Value::Int32(i) => out.extend_from_slice(&i.to_le_bytes()),
        Value::Timestamp { t, i } => {
            out.extend_from_slice(&i.to_le_bytes());
            out.extend_from_slice(&t.to_le_bytes());
        }
        Value::Int64(i) => out.extend_from_slice(&i.to_le_bytes()),
    }
}

fn read_cstring(bytes: &[u8]) -> Result<(String, usize), BsonError> {
    let Some(end) = bytes.iter().position(|b| *b == 0) else {
        return err("an element name without its terminating 0");
    };
    let s = std::str::from_utf8(&bytes[..end])
        .map_err(|_| BsonError("an element name that is not UTF-8".into()))?;
    Ok((s.to_string(), end + 1))
}

fn fixed<const N: usize>(bytes: &[u8], key: &str) -> Result<[u8; N], BsonError> {
    bytes
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| BsonError(format!("element {key} is cut short")))
}

fn read_value(t: u8, b: &[u8], depth: usize, key: &str) -> Result<(Value, usize), BsonError> {
    Ok(match t {
        0x01 => (Value::Double(f64::from_le_bytes(fixed(b, key)?)), 8),
        0x02 => {
            let len = i32::from_le_bytes(fixed(b, key)?);
            if len < 1 || 4 + len as usize > b.len() {
                return err(format!("string {key} has length {len}"));
            }
            let len = len as usize;
            if b[4 + len - 1] != 0 {
                return err(format!("string {key} does not end with 0"));
            }
            let s = std::str::from_utf8(&b[4..4 + len - 1])
                .map_err(|_| BsonError(format!("string {key} is not UTF-8")))?;
            (Value::String(s.to_string()), 4 + len)
        }
        0x03 => {
            let (d, n) = Document::read(b, depth + 1)?;
            (Value::Document(d), n)
        }
        0x04 => {
            let (d, n) = Document::read(b, depth + 1)?;
            (
                Value::Array(d.fields.into_iter().map(|(_, v)| v).collect()),
                n,
            )
        }
        0x07 => (Value::ObjectId(fixed(b, key)?), 12),
        0x08 => match b.first() {
            Some(0) => (Value::Bool(false), 1),
            Some(1) => (Value::Bool(true), 1),
            _ => return err(format!("boolean {key} is neither 0 nor 1")),
        },
        0x09 => (Value::DateTime(i64::from_le_bytes(fixed(b, key)?)), 8),
        0x0a => (Value::Null, 0),
        0x10 => (Value::Int32(i32::from_le_bytes(fixed(b, key)?)), 4),
        0x11 => {
            let raw: [u8; 8] = fixed(b, key)?;
            let i = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
            let t = u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]);
            (Value::Timestamp { t, i }, 8)
        }
        0x12 => (Value::Int64(i64::from_le_bytes(fixed(b, key)?)), 8),
        other => {
            return err(format!(
                "element {key} has type 0x{other:02x}, not supported"
            ));
        }
    })
}

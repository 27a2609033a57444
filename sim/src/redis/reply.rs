//! Replies of the Redis model, before encoding.
//!
//! One value type for both protocols: the encoder writes RESP2 or RESP3 depending on
//! what the connection negotiated with `HELLO`, as Redis does (a map is a flat array in
//! RESP2, a nil is `$-1` or `*-1` in RESP2 and `_` in RESP3, a push is a plain array in
//! RESP2).

/// One reply (or, for [`Reply::Frames`], several) as the command engine produced it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text`
    Simple(String),
    /// `-text`: the full error line including its code, e.g. `ERR syntax error`.
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$len\r\nbytes`
    Bulk(Vec<u8>),
    /// The null bulk string: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// The null array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    /// `*n` followed by the elements.
    Array(Vec<Reply>),
    /// RESP3 `%n`; a flat `*2n` array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `,double`; a bulk string in RESP2.
    Double(f64),
    /// RESP3 `>n` (pub/sub messages); a plain array in RESP2.
    Push(Vec<Reply>),
    /// Several top-level replies written back to back (e.g. `SUBSCRIBE a b` answers
    /// once per channel). Never nested inside another reply.
    Frames(Vec<Reply>),
    /// Bytes written as they are: the replication stream and a full sync's payload.
    /// Never nested inside another reply.
    Raw(Vec<u8>),
    /// Not a reply: the server closes the connection (`CLIENT KILL`, a replica dropped
    /// when its master becomes a replica). Writes nothing.
    Close,
}

impl Reply {
    /// `+OK`
    pub fn ok() -> Self {
        Reply::Simple("OK".into())
    }

    /// An error reply with Redis's `ERR` prefix.
    pub fn err(text: impl AsRef<str>) -> Self {
        Reply::Error(format!("ERR {}", text.as_ref()))
    }

    /// A bulk reply from anything byte-like.
    pub fn bulk(bytes: impl AsRef<[u8]>) -> Self {
        Reply::Bulk(bytes.as_ref().to_vec())
    }
}

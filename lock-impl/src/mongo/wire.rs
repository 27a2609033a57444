//! The wire protocol's `OP_MSG` (opcode 2013), as
//! <https://www.mongodb.com/docs/manual/reference/mongodb-wire-protocol/> and the
//! driver specification `OP_MSG.md` define it: a 16-byte header (`messageLength`,
//! `requestID`, `responseTo`, `opCode`, little-endian int32s), `flagBits` (uint32),
//! then sections: kind 0 (one BSON document, the command body) and kind 1 (a document
//! sequence: int32 size, a cstring identifier, documents), and a CRC-32C checksum
//! when `checksumPresent` (bit 0) is set.
//!
//! What is supported: kind 0 and kind 1 sections (a kind 1 sequence is folded into the
//! body as an array field named by its identifier, as the server does); a checksum is
//! accepted and skipped, not verified (nothing here sends one). Refused with an error:
//! `moreToCome` (bit 1: fire-and-forget and exhaust cursors), unknown required flag
//! bits (0-15), other opcodes (the legacy `OP_QUERY` handshake included), and
//! messages over 48 MB (`maxMessageSizeBytes`).

use super::bson::{BsonError, Document, Value};

/// `OP_MSG`.
pub const OP_MSG: i32 = 2013;
/// `flagBits` bit 0: a CRC-32C checksum follows the sections.
pub const CHECKSUM_PRESENT: u32 = 1;
/// `flagBits` bit 1: the sender will not wait for a reply.
pub const MORE_TO_COME: u32 = 1 << 1;
/// `flagBits` bit 16: the client accepts several replies (exhaust cursors).
pub const EXHAUST_ALLOWED: u32 = 1 << 16;
/// The server's `maxMessageSizeBytes` (48 000 000).
pub const MAX_MESSAGE_BYTES: usize = 48_000_000;

/// One `OP_MSG` message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The sender's id for this message.
    pub request_id: i32,
    /// The id of the message this one answers (0 for a request).
    pub response_to: i32,
    /// `flagBits`.
    pub flags: u32,
    /// The body (the kind 0 section), with any kind 1 sequences folded in.
    pub body: Document,
}

impl Message {
    /// The message's bytes, header included: one kind 0 section, no checksum.
    pub fn encode(&self) -> Vec<u8> {
        let body = self.body.to_bytes();
        let len = 16 + 4 + 1 + body.len();
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&(len as i32).to_le_bytes());
        out.extend_from_slice(&self.request_id.to_le_bytes());
        out.extend_from_slice(&self.response_to.to_le_bytes());
        out.extend_from_slice(&OP_MSG.to_le_bytes());
        out.extend_from_slice(&(self.flags & !CHECKSUM_PRESENT).to_le_bytes());
        out.push(0);
        out.extend_from_slice(&body);
        out
    }

    /// Reads one whole message (`bytes` is exactly one, as [`split_message`] cut it).
    pub fn decode(bytes: &[u8]) -> Result<Message, WireError> {
        if bytes.len() < 21 {
            return Err(WireError(format!(
                "a message of {} bytes is shorter than an OP_MSG header",
                bytes.len()
            )));
        }
        let int = |at: usize| {
            i32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let len = int(0) as usize;
        if len != bytes.len() {
            return Err(WireError(format!(
                "messageLength {len} but {} bytes",
                bytes.len()
            )));
        }
        let opcode = int(12);
        if opcode != OP_MSG {
            return Err(WireError(format!(
                "opCode {opcode} is not OP_MSG ({OP_MSG})"
            )));
        }
        let flags = int(16) as u32;
        if flags & MORE_TO_COME != 0 {
            return Err(WireError("moreToCome is not supported".into()));
        }
        let unknown_required = flags & 0xffff & !(CHECKSUM_PRESENT | MORE_TO_COME);
        if unknown_required != 0 {
            return Err(WireError(format!(
                "unknown required flag bits 0x{unknown_required:x}"
            )));
        }
        let end = if flags & CHECKSUM_PRESENT != 0 {
            len.checked_sub(4)
                .filter(|e| *e >= 20)
                .ok_or_else(|| WireError("a checksum flag without room for one".into()))?
        } else {
            len
        };
        let mut pos = 20;
        let mut body: Option<Document> = None;
        let mut sequences: Vec<(String, Vec<Value>)> = Vec::new();
        while pos < end {
            let kind = bytes[pos];
            pos += 1;
            match kind {
                0 => {
                    let (doc, n) =
                        Document::read_prefix(&bytes[pos..end]).map_err(WireError::bson)?;
                    if body.replace(doc).is_some() {
                        return Err(WireError("two kind 0 sections".into()));
                    }
                    pos += n;
                }
                1 => {
                    if end - pos < 4 {
                        return Err(WireError("a kind 1 section cut short".into()));
                    }
                    let size = int(pos);
                    if size < 5 || pos + size as usize > end {
                        return Err(WireError(format!("a kind 1 section of size {size}")));
                    }
                    let section = &bytes[pos + 4..pos + size as usize];
                    let Some(nul) = section.iter().position(|b| *b == 0) else {
                        return Err(WireError("a kind 1 identifier without its 0".into()));
                    };
                    let id = String::from_utf8_lossy(&section[..nul]).into_owned();
                    let mut at = nul + 1;
                    let mut docs = Vec::new();
                    while at < section.len() {
                        let (doc, n) =
                            Document::read_prefix(&section[at..]).map_err(WireError::bson)?;
                        docs.push(Value::Document(doc));
                        at += n;
                    }
                    sequences.push((id, docs));
                    pos += size as usize;
                }
                other => return Err(WireError(format!("section kind {other}"))),
            }
        }
        let Some(mut body) = body else {
            return Err(WireError("no kind 0 section".into()));
        };
        for (id, docs) in sequences {
            if body.get(&id).is_some() {
                return Err(WireError(format!(
                    "'{id}' is both a body field and a document sequence"
                )));
            }
            body.set(&id, Value::Array(docs));
        }
        Ok(Message {
            request_id: int(4),
            response_to: int(8),
            flags,
            body,
        })
    }
}

/// A message that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad OP_MSG: {0}")]
pub struct WireError(pub String);

impl WireError {
    fn bson(e: BsonError) -> WireError {
        WireError(e.0)
    }
}

/// The first whole message in `buf`: its length, `None` if more bytes are needed.
pub fn split_message(buf: &[u8]) -> Result<Option<usize>, WireError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 16 || len as usize > MAX_MESSAGE_BYTES {
        return Err(WireError(format!("messageLength {len}")));
    }
    Ok((buf.len() >= len as usize).then_some(len as usize))
}

//! Jute's primitive encodings: [`Reader`] and [`Writer`] over one frame's payload,
//! and [`split_frame`], which cuts frames off a byte stream.

use super::*;

/// Why bytes could not be read as the record expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed ZooKeeper record: {what} at byte {at}: {why}")]
pub struct DecodeError {
    /// The field being read.
    pub what: &'static str,
    /// Its offset in the frame.
    pub at: usize,
    /// What was wrong.
    pub why: String,
}

/// Reads jute primitives from one frame's payload.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn err(&self, what: &'static str, why: impl Into<String>) -> DecodeError {
        DecodeError {
            what,
            at: self.pos,
            why: why.into(),
        }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(self.err(what, format!("needs {n} bytes, {} left", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A jute `int`.
    pub fn int(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A jute `long`.
    pub fn long(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// A jute `boolean` (any non-zero byte is true, as `DataInput.readBoolean`).
    pub fn boolean(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        Ok(self.take(1, what)?[0] != 0)
    }

    fn length(&mut self, what: &'static str) -> Result<Option<usize>, DecodeError> {
        let n = self.int(what)?;
        if n < 0 {
            return Ok(None);
        }
        let n = n as usize;
        if n > self.remaining() {
            return Err(self.err(
                what,
                format!("length {n} exceeds the {} bytes left", self.remaining()),
            ));
        }
        Ok(Some(n))
    }

    /// A jute `buffer` (`None`: null).
    pub fn buffer(&mut self, what: &'static str) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.length(what)? {
            None => Ok(None),
            Some(n) => Ok(Some(self.take(n, what)?.to_vec())),
        }
    }

    /// A jute `ustring` (null reads as the empty string, as the server's paths do not
    /// distinguish them).
    pub fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        match self.length(what)? {
            None => Ok(String::new()),
            Some(n) => {
                let at = self.pos;
                let b = self.take(n, what)?;
                String::from_utf8(b.to_vec()).map_err(|e| DecodeError {
                    what,
                    at,
                    why: format!("not UTF-8: {e}"),
                })
            }
        }
    }

    /// A jute `vector<ustring>` (null reads as empty).
    pub fn strings(&mut self, what: &'static str) -> Result<Vec<String>, DecodeError> {
        let n = self.int(what)?;
        if n < 0 {
            return Ok(Vec::new());
        }
        // Each element takes at least 4 bytes: a count beyond that is a lie, and must
        // not size an allocation.
        if n as usize > self.remaining() / 4 {
            return Err(self.err(what, format!("count {n} exceeds the frame")));
        }
        (0..n).map(|_| self.string(what)).collect()
    }

    /// Fails unless every byte was read.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(self.err(what, format!("{} trailing bytes", self.remaining())))
        }
    }
}

/// Writes jute primitives.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer that reserves the 4-byte frame length, filled in by
    /// [`Writer::into_frame`].
    pub fn frame() -> Self {
        Self {
            buf: vec![0, 0, 0, 0],
        }
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// The frame, its length prefix filled in (for a writer made by
    /// [`Writer::frame`]).
    pub fn into_frame(mut self) -> Vec<u8> {
        let len = (self.buf.len() - 4) as i32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }

    /// A jute `int`.
    pub fn int(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A jute `long`.
    pub fn long(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// A jute `boolean`.
    pub fn boolean(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    /// A jute `buffer` (`None`: null, length -1).
    pub fn buffer(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            None => self.int(-1),
            Some(b) => {
                self.int(b.len() as i32);
                self.buf.extend_from_slice(b);
                self
            }
        }
    }

    /// A jute `ustring`.
    pub fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(Some(v.as_bytes()))
    }

    /// A jute `vector<ustring>`.
    pub fn strings(&mut self, v: &[String]) -> &mut Self {
        self.int(v.len() as i32);
        for s in v {
            self.string(s);
        }
        self
    }

    /// Raw bytes (an already-encoded record).
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
}

/// Splits the first complete frame off `buf`: `Ok(Some((payload, consumed)))`,
/// `Ok(None)` if more bytes are needed, or an error for a length the protocol forbids.
pub fn split_frame(buf: &[u8]) -> Result<Option<(&[u8], usize)>, DecodeError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 0 || len as usize > MAX_FRAME_LEN {
        return Err(DecodeError {
            what: "frame length",
            at: 0,
            why: format!("{len} is outside 0..={MAX_FRAME_LEN}"),
        });
    }
    let len = len as usize;
    if buf.len() < 4 + len {
        return Ok(None);
    }
    Ok(Some((&buf[4..4 + len], 4 + len)))
}

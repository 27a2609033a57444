//! The MySQL client/server protocol's packets, as MariaDB 10.11 speaks them
//! (<https://mariadb.com/kb/en/clientserver-protocol/>, and MySQL's
//! `include/mysql_com.h`), shared by the client ([`super::client`]) and locksim's server
//! model.
//!
//! Framing: every packet is a 3-byte little-endian payload length, a 1-byte sequence
//! id, then the payload. A command starts a new sequence at 0; each packet of its
//! exchange (request and replies alike) takes the next id. Payloads of 16 MiB − 1 or
//! more (split over several packets) are refused: no lock statement comes near that.
//!
//! Encoders and decoders never panic: a short or malformed payload is a
//! [`ProtoError`] naming what was missing.

use std::fmt;

/// The largest payload of one packet (`0xffffff` means "continued").
pub const MAX_PAYLOAD: usize = 0xff_ffff - 1;

/// `COM_QUIT`.
pub const COM_QUIT: u8 = 0x01;
/// `COM_QUERY`.
pub const COM_QUERY: u8 = 0x03;
/// `COM_PING`.
pub const COM_PING: u8 = 0x0e;

/// Capability flags (`mysql_com.h`).
pub mod cap {
    /// `CLIENT_LONG_PASSWORD` (`CLIENT_MYSQL` in MariaDB).
    pub const LONG_PASSWORD: u32 = 1;
    /// `CLIENT_FOUND_ROWS`.
    pub const FOUND_ROWS: u32 = 2;
    /// `CLIENT_LONG_FLAG`.
    pub const LONG_FLAG: u32 = 4;
    /// `CLIENT_CONNECT_WITH_DB`.
    pub const CONNECT_WITH_DB: u32 = 8;
    /// `CLIENT_PROTOCOL_41`.
    pub const PROTOCOL_41: u32 = 0x200;
    /// `CLIENT_TRANSACTIONS`.
    pub const TRANSACTIONS: u32 = 0x2000;
    /// `CLIENT_SECURE_CONNECTION`.
    pub const SECURE_CONNECTION: u32 = 0x8000;
    /// `CLIENT_MULTI_STATEMENTS`.
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    /// `CLIENT_MULTI_RESULTS`.
    pub const MULTI_RESULTS: u32 = 1 << 17;
    /// `CLIENT_PLUGIN_AUTH`.
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    /// `CLIENT_CONNECT_ATTRS`.
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    /// `CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA`.
    pub const PLUGIN_AUTH_LENENC: u32 = 1 << 21;
    /// `CLIENT_SESSION_TRACK`.
    pub const SESSION_TRACK: u32 = 1 << 23;
    /// `CLIENT_DEPRECATE_EOF`.
    pub const DEPRECATE_EOF: u32 = 1 << 24;
}

/// Server status flags (`SERVER_STATUS_*`).
pub mod status {
    /// `SERVER_STATUS_IN_TRANS`.
    pub const IN_TRANS: u16 = 1;
    /// `SERVER_STATUS_AUTOCOMMIT`.
    pub const AUTOCOMMIT: u16 = 2;
}

/// Column types (`enum_field_types`).
pub mod column_type {
    /// `MYSQL_TYPE_LONG`.
    pub const LONG: u8 = 3;
    /// `MYSQL_TYPE_LONGLONG`.
    pub const LONGLONG: u8 = 8;
    /// `MYSQL_TYPE_VAR_STRING`.
    pub const VAR_STRING: u8 = 0xfd;
}

/// The `mysql_native_password` plugin name.
pub const NATIVE_PASSWORD: &str = "mysql_native_password";

/// A packet that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed MySQL packet: {0}")]
pub struct ProtoError(pub String);

fn short(what: &str) -> ProtoError {
    ProtoError(format!("truncated before {what}"))
}

/// One packet split off a buffer: `(sequence id, payload, bytes used)`.
pub type Split<'a> = (u8, &'a [u8], usize);

/// Splits one packet off the front of `buf`, `None` if it is not complete yet.
pub fn split_packet(buf: &[u8]) -> Result<Option<Split<'_>>, ProtoError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = usize::from(buf[0]) | usize::from(buf[1]) << 8 | usize::from(buf[2]) << 16;
    if len > MAX_PAYLOAD {
        return Err(ProtoError(
            "a payload of 16 MiB or more (split packets are not supported)".into(),
        ));
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    Ok(Some((buf[3], &buf[4..4 + len], 4 + len)))
}

/// Frames `payload` with sequence id `seq`.
pub fn frame(seq: u8, payload: &[u8]) -> Vec<u8> {
    let len = payload.len().min(MAX_PAYLOAD);
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
    out.push(seq);
    out.extend_from_slice(&payload[..len]);
    out
}

/// A cursor over a payload.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// What is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let r = &self.buf[self.pos..];
        self.pos = self.buf.len();
        r
    }

    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], ProtoError> {
        let end = self.pos.checked_add(n).ok_or_else(|| short(what))?;
        let r = self.buf.get(self.pos..end).ok_or_else(|| short(what))?;
        self.pos = end;
        Ok(r)
    }

    /// One byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, ProtoError> {
        Ok(self.bytes(1, what)?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, what: &str) -> Result<u16, ProtoError> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, ProtoError> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length-encoded integer (`None`: the NULL marker `0xfb`).
    pub fn lenenc_or_null(&mut self, what: &str) -> Result<Option<u64>, ProtoError> {
        let first = self.u8(what)?;
        Ok(Some(match first {
            0xfb => return Ok(None),
            0xfc => u64::from(self.u16(what)?),
            0xfd => {
                let b = self.bytes(3, what)?;
                u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16
            }
            0xfe => {
                let b = self.bytes(8, what)?;
                u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            }
            0xff => return Err(ProtoError(format!("0xff as a length before {what}"))),
            n => u64::from(n),
        }))
    }

    /// A length-encoded integer.
    pub fn lenenc(&mut self, what: &str) -> Result<u64, ProtoError> {
        self.lenenc_or_null(what)?
            .ok_or_else(|| ProtoError(format!("NULL where {what} was expected")))
    }

    /// A length-encoded string (`None`: NULL).
    pub fn lenenc_bytes_or_null(&mut self, what: &str) -> Result<Option<&'a [u8]>, ProtoError> {
        match self.lenenc_or_null(what)? {
            None => Ok(None),
            Some(n) => {
                let n = usize::try_from(n).map_err(|_| short(what))?;
                self.bytes(n, what).map(Some)
            }
        }
    }

    /// A length-encoded string.
    pub fn lenenc_bytes(&mut self, what: &str) -> Result<&'a [u8], ProtoError> {
        self.lenenc_bytes_or_null(what)?
            .ok_or_else(|| ProtoError(format!("NULL where {what} was expected")))
    }

    /// A NUL-terminated string (without its NUL).
    pub fn nul_str(&mut self, what: &str) -> Result<&'a [u8], ProtoError> {
        let rest = &self.buf[self.pos.min(self.buf.len())..];
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| ProtoError(format!("{what} has no terminating NUL")))?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }
}

/// Appends a length-encoded integer.
pub fn put_lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=250 => out.push(n as u8),
        251..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Appends a length-encoded string.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// The server's first packet: Handshake V10.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handshake {
    /// Always 10.
    pub protocol_version: u8,
    /// `5.5.5-10.11.19-MariaDB-0+deb12u1` (MariaDB prefixes `5.5.5-` for old replicas).
    pub server_version: String,
    /// The connection (thread) id.
    pub connection_id: u32,
    /// The 20-byte scramble (both parts, without the trailing NUL).
    pub scramble: Vec<u8>,
    /// Capability flags (lower and upper halves).
    pub capabilities: u32,
    /// The default collation id.
    pub charset: u8,
    /// Status flags.
    pub status: u16,
    /// MariaDB's extended capabilities (the last 4 of the 10 reserved bytes).
    pub mariadb_capabilities: u32,
    /// The default authentication plugin.
    pub auth_plugin: String,
}

impl Handshake {
    /// Reads a Handshake V10 payload.
    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let protocol_version = r.u8("protocol version")?;
        if protocol_version != 10 {
            return Err(ProtoError(format!(
                "handshake protocol version {protocol_version}, expected 10"
            )));
        }
        let server_version = String::from_utf8_lossy(r.nul_str("server version")?).into_owned();
        let connection_id = r.u32("connection id")?;
        let mut scramble = r.bytes(8, "scramble part 1")?.to_vec();
        r.u8("filler")?;
        let cap_low = r.u16("capabilities")?;
        let charset = r.u8("charset")?;
        let status = r.u16("status")?;
        let cap_high = r.u16("capabilities (upper)")?;
        let capabilities = u32::from(cap_low) | u32::from(cap_high) << 16;
        let auth_len = r.u8("auth data length")?;
        r.bytes(6, "reserved")?;
        let mariadb_capabilities = r.u32("MariaDB capabilities")?;
        if capabilities & cap::SECURE_CONNECTION != 0 {
            let n = (usize::from(auth_len).saturating_sub(8)).max(13);
            let part2 = r.bytes(n, "scramble part 2")?;
            let part2 = part2.strip_suffix(&[0]).unwrap_or(part2);
            scramble.extend_from_slice(part2);
        }
        let auth_plugin = if capabilities & cap::PLUGIN_AUTH != 0 {
            let rest = r.rest();
            let rest = rest.strip_suffix(&[0]).unwrap_or(rest);
            String::from_utf8_lossy(rest).into_owned()
        } else {
            String::new()
        };
        Ok(Handshake {
            protocol_version,
            server_version,
            connection_id,
            scramble,
            capabilities,
            charset,
            status,
            mariadb_capabilities,
            auth_plugin,
        })
    }

    /// The payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![self.protocol_version];
        out.extend_from_slice(self.server_version.as_bytes());
        out.push(0);
        out.extend_from_slice(&self.connection_id.to_le_bytes());
        let (p1, p2) = self.scramble.split_at(self.scramble.len().min(8));
        out.extend_from_slice(p1);
        out.push(0);
        out.extend_from_slice(&(self.capabilities as u16).to_le_bytes());
        out.push(self.charset);
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&((self.capabilities >> 16) as u16).to_le_bytes());
        out.push((self.scramble.len() + 1) as u8);
        out.extend_from_slice(&[0; 6]);
        out.extend_from_slice(&self.mariadb_capabilities.to_le_bytes());
        out.extend_from_slice(p2);
        out.push(0);
        out.extend_from_slice(self.auth_plugin.as_bytes());
        out.push(0);
        out
    }
}

/// The client's answer: HandshakeResponse41.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeResponse {
    /// Capability flags.
    pub capabilities: u32,
    /// Max packet size.
    pub max_packet: u32,
    /// Collation id.
    pub charset: u8,
    /// User name.
    pub user: String,
    /// The auth plugin's answer (20 bytes for `mysql_native_password`, empty for no
    /// password).
    pub auth: Vec<u8>,
    /// Initial database (`CLIENT_CONNECT_WITH_DB`).
    pub database: Option<String>,
    /// Auth plugin name (`CLIENT_PLUGIN_AUTH`).
    pub auth_plugin: Option<String>,
}

impl HandshakeResponse {
    /// The payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.capabilities.to_le_bytes());
        out.extend_from_slice(&self.max_packet.to_le_bytes());
        out.push(self.charset);
        out.extend_from_slice(&[0; 23]);
        out.extend_from_slice(self.user.as_bytes());
        out.push(0);
        if self.capabilities & cap::PLUGIN_AUTH_LENENC != 0 {
            put_lenenc_bytes(&mut out, &self.auth);
        } else {
            out.push(self.auth.len() as u8);
            out.extend_from_slice(&self.auth);
        }
        if let Some(db) = &self.database {
            out.extend_from_slice(db.as_bytes());
            out.push(0);
        }
        if let Some(p) = &self.auth_plugin {
            out.extend_from_slice(p.as_bytes());
            out.push(0);
        }
        out
    }

    /// Reads a HandshakeResponse41 payload (connection attributes are skipped).
    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let capabilities = r.u32("capabilities")?;
        if capabilities & cap::PROTOCOL_41 == 0 {
            return Err(ProtoError("a pre-4.1 handshake response".into()));
        }
        let max_packet = r.u32("max packet size")?;
        let charset = r.u8("charset")?;
        r.bytes(23, "filler")?;
        let user = String::from_utf8_lossy(r.nul_str("user")?).into_owned();
        let auth = if capabilities & cap::PLUGIN_AUTH_LENENC != 0 {
            r.lenenc_bytes("auth response")?.to_vec()
        } else if capabilities & cap::SECURE_CONNECTION != 0 {
            let n = r.u8("auth response length")?;
            r.bytes(usize::from(n), "auth response")?.to_vec()
        } else {
            r.nul_str("auth response")?.to_vec()
        };
        let database = if capabilities & cap::CONNECT_WITH_DB != 0 && !r.is_empty() {
            Some(String::from_utf8_lossy(r.nul_str("database")?).into_owned())
        } else {
            None
        };
        let auth_plugin = if capabilities & cap::PLUGIN_AUTH != 0 && !r.is_empty() {
            Some(String::from_utf8_lossy(r.nul_str("auth plugin")?).into_owned())
        } else {
            None
        };
        Ok(HandshakeResponse {
            capabilities,
            max_packet,
            charset,
            user,
            auth,
            database,
            auth_plugin,
        })
    }
}

/// `mysql_native_password`'s answer to `scramble`:
/// `SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password)))`; empty for an empty
/// password.
pub fn native_password(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha1_smol::Sha1::from(password).digest().bytes();
    let stage2 = sha1_smol::Sha1::from(stage1).digest().bytes();
    let mut h = sha1_smol::Sha1::new();
    h.update(scramble);
    h.update(&stage2);
    let mix = h.digest().bytes();
    stage1.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect()
}

/// Whether `answer` is `mysql_native_password`'s answer to `scramble` for a stored
/// `SHA1(SHA1(password))` (the server's check: `check_scramble`).
pub fn check_native_password(answer: &[u8], scramble: &[u8], stage2: &[u8; 20]) -> bool {
    if answer.len() != 20 {
        return false;
    }
    let mut h = sha1_smol::Sha1::new();
    h.update(scramble);
    h.update(stage2);
    let mix = h.digest().bytes();
    let stage1: Vec<u8> = answer.iter().zip(mix.iter()).map(|(a, b)| a ^ b).collect();
    sha1_smol::Sha1::from(&stage1).digest().bytes() == *stage2
}

/// `SHA1(SHA1(password))`, as `mysql.user` stores a native password.
pub fn native_password_hash(password: &[u8]) -> [u8; 20] {
    let stage1 = sha1_smol::Sha1::from(password).digest().bytes();
    sha1_smol::Sha1::from(stage1).digest().bytes()
}

/// An OK packet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OkPacket {
    /// Affected rows.
    pub affected_rows: u64,
    /// Last insert id.
    pub last_insert_id: u64,
    /// Status flags.
    pub status: u16,
    /// Warnings.
    pub warnings: u16,
    /// Human-readable info (`Rows matched: 1  Changed: 1  Warnings: 0` for an UPDATE).
    pub info: String,
}

impl OkPacket {
    /// The payload. The info, when there is one, is a length-encoded string, as
    /// MariaDB's `net_send_ok` writes it (`net_store_data`), with or without
    /// `CLIENT_SESSION_TRACK`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0x00];
        put_lenenc(&mut out, self.affected_rows);
        put_lenenc(&mut out, self.last_insert_id);
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&self.warnings.to_le_bytes());
        if !self.info.is_empty() {
            put_lenenc_bytes(&mut out, self.info.as_bytes());
        }
        out
    }

    /// Reads an OK payload (first byte `0x00`).
    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        if r.u8("OK header")? != 0 {
            return Err(ProtoError("not an OK packet".into()));
        }
        Ok(OkPacket {
            affected_rows: r.lenenc("affected rows")?,
            last_insert_id: r.lenenc("last insert id")?,
            status: r.u16("status")?,
            warnings: r.u16("warnings")?,
            info: if r.is_empty() {
                String::new()
            } else {
                String::from_utf8_lossy(r.lenenc_bytes("info")?).into_owned()
            },
        })
    }
}

/// An ERR packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrPacket {
    /// The error number (`1062`).
    pub code: u16,
    /// The SQLSTATE (`23000`).
    pub sql_state: String,
    /// The message.
    pub message: String,
}

impl fmt::Display for ErrPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ERROR {} ({}): {}",
            self.code, self.sql_state, self.message
        )
    }
}

impl ErrPacket {
    /// An error with its SQLSTATE.
    pub fn new(code: u16, sql_state: &str, message: impl Into<String>) -> Self {
        ErrPacket {
            code,
            sql_state: sql_state.into(),
            message: message.into(),
        }
    }

    /// The payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0xff];
        out.extend_from_slice(&self.code.to_le_bytes());
        out.push(b'#');
        let mut state = self.sql_state.as_bytes().to_vec();
        state.resize(5, b'0');
        out.extend_from_slice(&state);
        out.extend_from_slice(self.message.as_bytes());
        out
    }

    /// Reads an ERR payload (first byte `0xff`).
    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        if r.u8("ERR header")? != 0xff {
            return Err(ProtoError("not an ERR packet".into()));
        }
        let code = r.u16("error code")?;
        let rest = r.rest();
        let (sql_state, message) = match rest.split_first() {
            Some((b'#', tail)) if tail.len() >= 5 => (
                String::from_utf8_lossy(&tail[..5]).into_owned(),
                String::from_utf8_lossy(&tail[5..]).into_owned(),
            ),
            _ => ("HY000".into(), String::from_utf8_lossy(rest).into_owned()),
        };
        Ok(ErrPacket {
            code,
            sql_state,
            message,
        })
    }
}

/// An EOF packet (`0xfe`, shorter than 9 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EofPacket {
    /// Warnings.
    pub warnings: u16,
    /// Status flags.
    pub status: u16,
}

impl EofPacket {
    /// The payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0xfe];
        out.extend_from_slice(&self.warnings.to_le_bytes());
        out.extend_from_slice(&self.status.to_le_bytes());
        out
    }

    /// Whether `payload` is an EOF packet.
    pub fn is_eof(payload: &[u8]) -> bool {
        payload.first() == Some(&0xfe) && payload.len() < 9
    }

    /// Reads an EOF payload.
    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        if r.u8("EOF header")? != 0xfe {
            return Err(ProtoError("not an EOF packet".into()));
        }
        Ok(EofPacket {
            warnings: r.u16("warnings")?,
            status: r.u16("status")?,
        })
    }
}

/// A column definition (`Protocol::ColumnDefinition41`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Always `def`.
    pub catalog: String,
    /// Database.
    pub schema: String,
    /// Table alias.
    pub table: String,
    /// Table.
    pub org_table: String,
    /// Column alias (for an expression: the expression as written).
    pub name: String,
    /// Column.
    pub org_name: String,
    /// Collation id (63: binary).
    pub charset: u16,
    /// Display length.
    pub length: u32,
    /// [`column_type`].
    pub column_type: u8,
    /// Column flags.
    pub flags: u16,
    /// Decimals.
    pub decimals: u8,
}

impl Column {
    /// The payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for s in [
            &self.catalog,
            &self.schema,
            &self.table,
            &self.org_table,
            &self.name,
            &self.org_name,
        ] {
            put_lenenc_bytes(&mut out, s.as_bytes());
        }
        out.push(0x0c);
        out.extend_from_slice(&self.charset.to_le_bytes());
        out.extend_from_slice(&self.length.to_le_bytes());
        out.push(self.column_type);
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.push(self.decimals);
        out.extend_from_slice(&[0, 0]);
        out
    }

    /// Reads a column definition payload.
    pub fn decode(payload: &[u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let mut s = |what: &str| -> Result<String, ProtoError> {
            Ok(String::from_utf8_lossy(r.lenenc_bytes(what)?).into_owned())
        };
        let catalog = s("catalog")?;
        let schema = s("schema")?;
        let table = s("table")?;
        let org_table = s("org_table")?;
        let name = s("name")?;
        let org_name = s("org_name")?;
        let fixed = r.lenenc("fixed fields length")?;
        if fixed < 0x0c {
            return Err(ProtoError(format!("fixed fields of length {fixed}")));
        }
        Ok(Column {
            catalog,
            schema,
            table,
            org_table,
            name,
            org_name,
            charset: r.u16("charset")?,
            length: r.u32("column length")?,
            column_type: r.u8("column type")?,
            flags: r.u16("column flags")?,
            decimals: r.u8("decimals")?,
        })
    }
}

/// One text-protocol row: each value a string, or NULL.
pub type Row = Vec<Option<Vec<u8>>>;

/// Encodes a text-protocol row.
pub fn encode_row(row: &Row) -> Vec<u8> {
    let mut out = Vec::new();
    for v in row {
        match v {
            None => out.push(0xfb),
            Some(b) => put_lenenc_bytes(&mut out, b),
        }
    }
    out
}

/// Reads a text-protocol row of `columns` values.
pub fn decode_row(payload: &[u8], columns: usize) -> Result<Row, ProtoError> {
    let mut r = Reader::new(payload);
    let mut row = Vec::with_capacity(columns);
    for _ in 0..columns {
        row.push(r.lenenc_bytes_or_null("row value")?.map(<[u8]>::to_vec));
    }
    if !r.is_empty() {
        return Err(ProtoError("a row longer than its columns".into()));
    }
    Ok(row)
}

/// A text resultset, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultSet {
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows.
    pub rows: Vec<Row>,
    /// The final EOF.
    pub eof: EofPacket,
}

/// A command's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// OK.
    Ok(OkPacket),
    /// ERR.
    Err(ErrPacket),
    /// A resultset.
    Rows(ResultSet),
}

/// Frames a whole reply starting at sequence id `seq` (the packets a server sends,
/// with the column-count packet, EOFs after the columns and after the rows).
pub fn encode_reply(reply: &Reply, mut seq: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let mut push = |payload: Vec<u8>| {
        out.extend_from_slice(&frame(seq, &payload));
        seq = seq.wrapping_add(1);
    };
    match reply {
        Reply::Ok(ok) => push(ok.encode()),
        Reply::Err(err) => push(err.encode()),
        Reply::Rows(rs) => {
            let mut count = Vec::new();
            put_lenenc(&mut count, rs.columns.len() as u64);
            push(count);
            for c in &rs.columns {
                push(c.encode());
            }
            push(
                EofPacket {
                    warnings: 0,
                    status: rs.eof.status,
                }
                .encode(),
            );
            for r in &rs.rows {
                push(encode_row(r));
            }
            push(rs.eof.encode());
        }
    }
    out
}

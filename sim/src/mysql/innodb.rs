//! The model's InnoDB: tables keyed by a string primary key, transactions, and the row
//! locks that order them, as the lock designs meet them.
//!
//! Rules, from MariaDB's documentation (InnoDB lock modes, `innodb_lock_wait_timeout`,
//! `innodb_rollback_on_timeout`) and source (`storage/innobase/row/row0ins.cc`:
//! `row_ins_duplicate_error_in_clust`; `lock0lock.cc`), checked against Debian's
//! `mariadb-server` 10.11 by `sim/tests/real/mysql_real.rs`:
//!
//! - Changes are written in place and undone on rollback; a row a transaction inserted,
//!   updated, deleted or read `FOR UPDATE` is locked by it until it commits or rolls
//!   back. Outside `BEGIN` ... `COMMIT` every statement is its own transaction
//!   (autocommit): its locks last as long as the statement.
//! - A statement that needs a row another transaction has locked waits (an `INSERT`
//!   whose key exists waits too: its duplicate check locks the existing row) until the
//!   holder ends, or answers `ER_LOCK_WAIT_TIMEOUT` (1205, HY000) after the session's
//!   `innodb_lock_wait_timeout` seconds (0: at once). The statement is rolled back,
//!   not the transaction (`innodb_rollback_on_timeout` is off).
//! - `BEGIN` inside a transaction, and `CREATE TABLE`, commit the open one first.
//! - A connection that ends rolls its transaction back, freeing its locks.
//!
//! Simplifications (stated): every row lock is exclusive (InnoDB's duplicate check
//! takes a shared lock; two shared holders never meet in the designs); no gap or
//! next-key locks (a locking read that finds no row locks nothing); no deadlock
//! detection (a design's transaction locks one row, so no cycle can form; a cycle would
//! end by lock-wait timeouts); a plain `SELECT` (a consistent read) is not in the
//! subset; the key is the first column and compares under `utf8mb4_general_ci`.
//! Waiters for one row are granted in the order they began to wait, as InnoDB's
//! queue does (the server keeps the queue: [`super::server`]).

use std::collections::BTreeMap;

use lock_impl::mysql::proto::{Column, EofPacket, ErrPacket, OkPacket, Reply, ResultSet};
use lock_impl::mysql::proto::{column_type, status};

use super::sql::{ColumnType, Cond, Op, SetExpr, Statement, Value, parse_error};
use super::types::{ConnId, ServerEvent};

/// A table: its columns (the first is the primary key) and rows by folded key.
#[derive(Debug, Clone)]
pub struct Table {
    /// Columns as created.
    pub columns: Vec<(String, ColumnType)>,
    /// Folded key → the row's values, in column order.
    pub rows: BTreeMap<Vec<u8>, Vec<Value>>,
}

/// A row: (table, folded key).
type RowId = (String, Vec<u8>);

/// An open transaction.
#[derive(Debug, Default)]
struct Trx {
    /// Row images before this transaction changed them, oldest first.
    undo: Vec<(RowId, Option<Vec<Value>>)>,
    /// The rows it has locked, in order; with the key as written.
    locks: Vec<(RowId, String)>,
    /// What it changed, recorded once it commits.
    events: Vec<ServerEvent>,
    /// Its row images, written to the binary log once it commits.
    binlog: Vec<BinlogEvent>,
}

/// One event of the binary log (row-based, as `binlog_format=ROW` writes it): what a
/// replica applies, in commit order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinlogEvent {
    /// A table was created.
    Create {
        /// The table.
        table: String,
        /// Its columns.
        columns: Vec<(String, ColumnType)>,
    },
    /// A row's image after a committed change (`None`: deleted).
    Row {
        /// The table.
        table: String,
        /// The row's key, as written.
        name: Vec<u8>,
        /// The row after the change.
        row: Option<Vec<Value>>,
    },
}

/// Why a statement did not run.
#[derive(Debug)]
pub enum Refusal {
    /// An error reply.
    Err(ErrPacket),
    /// A row it needs (table, folded key) is locked by another connection's
    /// transaction: wait.
    Locked(String, Vec<u8>),
}

impl From<ErrPacket> for Refusal {
    fn from(e: ErrPacket) -> Self {
        Refusal::Err(e)
    }
}

/// The storage engine.
#[derive(Debug, Default)]
pub struct Engine {
    tables: BTreeMap<String, Table>,
    /// Row → the connection whose transaction holds its lock.
    locks: BTreeMap<RowId, ConnId>,
    /// Explicit transactions (after `BEGIN`), by connection.
    trxs: BTreeMap<ConnId, Trx>,
    events: Vec<ServerEvent>,
    /// The binary log: every committed change, in commit order. It stands for the
    /// redo log too: a crash recovery replays a prefix of it (see
    /// [`super::server::MySqlModel::durable_log`]).
    binlog: Vec<BinlogEvent>,
    /// How much of it the last once-per-second log flush (the master thread's
    /// `log_write_up_to` with an fsync) put on disk.
    flushed: usize,
}

/// The `utf8mb4_general_ci` comparison key of a `VARCHAR` value (PAD SPACE; ASCII
/// case folded).
pub fn fold(v: &[u8]) -> Vec<u8> {
    let mut end = v.len();
    while end > 0 && v[end - 1] == b' ' {
        end -= 1;
    }
    v[..end].iter().map(u8::to_ascii_uppercase).collect()
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// The text of a value as a resultset row carries it.
fn cell(v: &Value) -> Vec<u8> {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(n) => n.to_string().into_bytes(),
    }
}

impl Engine {
    /// Whether connection `id` is inside `BEGIN` ... `COMMIT`.
    pub fn in_trx(&self, id: ConnId) -> bool {
        self.trxs.contains_key(&id)
    }

    /// The status flags of a reply to connection `id`.
    pub fn status(&self, id: ConnId) -> u16 {
        if self.in_trx(id) {
            status::AUTOCOMMIT | status::IN_TRANS
        } else {
            status::AUTOCOMMIT
        }
    }

    /// A table, if created.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.get(name)
    }

    /// Takes the events since the last call.
    pub fn take_events(&mut self) -> Vec<ServerEvent> {
        std::mem::take(&mut self.events)
    }

    /// `BEGIN`: commits an open transaction first.
    pub fn begin(&mut self, id: ConnId) {
        self.end(id, true, false);
        self.trxs.insert(id, Trx::default());
    }

    /// Ends connection `id`'s transaction, if any: commits it (its changes recorded) or
    /// rolls it back; frees its locks. `closed`: it ended because the connection did
    /// (then the freed locks are returned, not recorded one by one).
    pub fn end(&mut self, id: ConnId, commit: bool, closed: bool) -> Vec<String> {
        let Some(trx) = self.trxs.remove(&id) else {
            return Vec::new();
        };
        if commit {
            self.events.extend(trx.events);
            self.binlog.extend(trx.binlog);
        } else {
            for ((table, key), before) in trx.undo.into_iter().rev() {
                if let Some(t) = self.tables.get_mut(&table) {
                    match before {
                        Some(row) => {
                            t.rows.insert(key, row);
                        }
                        None => {
                            t.rows.remove(&key);
                        }
                    }
                }
            }
        }
        let mut freed = Vec::new();
        for (row, name) in trx.locks {
            self.locks.remove(&row);
            if !closed {
                self.events.push(ServerEvent::RowUnlocked {
                    conn: id,
                    table: row.0.clone(),
                    name: name.clone(),
                    committed: commit,
                });
            }
            freed.push(name);
        }
        freed
    }

    /// `CREATE TABLE IF NOT EXISTS`: whether it was created (else: it existed).
    pub fn create(&mut self, id: ConnId, table: &str, columns: &[(String, ColumnType)]) -> bool {
        self.end(id, true, false);
        if self.tables.contains_key(table) {
            return false;
        }
        self.tables.insert(
            table.to_string(),
            Table {
                columns: columns.to_vec(),
                rows: BTreeMap::new(),
            },
        );
        self.binlog.push(BinlogEvent::Create {
            table: table.to_string(),
            columns: columns.to_vec(),
        });
        true
    }

    /// The `owner` of the row named `name` in the first table (by name) with an
    /// `owner` column that has one, if non-empty.
    pub fn lock_row(&self, name: &str) -> Option<String> {
        let key = fold(name.as_bytes());
        self.tables.values().find_map(|t| {
            let col = t.columns.iter().position(|(c, _)| c == "owner")?;
            match t.rows.get(&key)?.get(col)? {
                Value::Str(s) if !s.is_empty() => Some(text(s)),
                _ => None,
            }
        })
    }

    /// The once-per-second flush: everything committed so far is on disk.
    pub fn flush_log(&mut self) {
        self.flushed = self.binlog.len();
    }

    /// The log's length and how much of it the last once-per-second flush wrote.
    pub fn log_positions(&self) -> (usize, usize) {
        (self.binlog.len(), self.flushed)
    }

    /// The binary log from position `from` on.
    pub fn binlog_from(&self, from: usize) -> &[BinlogEvent] {
        self.binlog.get(from..).unwrap_or(&[])
    }

    /// Applies a primary's binlog event, as a replica's SQL thread does (its changes
    /// recorded as made by connection 0, the replication thread; written to this
    /// server's own binlog too, as `log_slave_updates` does).
    pub fn apply(&mut self, event: &BinlogEvent) {
        match event {
            BinlogEvent::Create { table, columns } => {
                self.create(0, table, columns);
            }
            BinlogEvent::Row { table, name, row } => {
                if !self.tables.contains_key(table) {
                    return;
                }
                let row_id = (table.clone(), fold(name));
                self.write(0, &row_id, name, row.clone());
            }
        }
    }

    /// Runs a DML statement or a locking read for connection `id`.
    pub fn run(
        &mut self,
        id: ConnId,
        stmt: &Statement,
        sql: &str,
        database: &str,
    ) -> Result<Reply, Refusal> {
        let (table, conds_or_key) = match stmt {
            Statement::Insert { table, .. } => (table, None),
            Statement::Delete { table, conds }
            | Statement::Update { table, conds, .. }
            | Statement::SelectForUpdate { table, conds, .. } => (table, Some(conds)),
            _ => return Err(parse_error(sql, 0).into()),
        };
        let Some(t) = self.tables.get(table) else {
            return Err(ErrPacket::new(
                1146,
                "42S02",
                format!("Table '{database}.{table}' doesn't exist"),
            )
            .into());
        };
        let columns = t.columns.clone();
        let index = |c: &str| column_index(&columns, c);
        // The statement's key: the primary key's value (INSERT) or the one `key = '...'`
        // of its WHERE (the subset looks rows up by key only).
        let subset = || Refusal::Err(parse_error(sql, 0));
        let (conds_ix, key) = match conds_or_key {
            None => (Vec::new(), None),
            Some(conds) => {
                let (conds_ix, key) = where_key(&columns, conds, sql)?;
                (conds_ix, Some(key))
            }
        };
        match stmt {
            Statement::Insert {
                ignore,
                columns: cols,
                values,
                ..
            } => {
                let full = full_row(&columns, cols, values, sql)?;
                let Value::Str(name) = &full[0] else {
                    return Err(subset());
                };
                let name = name.clone();
                let row_id = (table.clone(), fold(&name));
                self.lockable(id, &row_id)?;
                if self.tables[table].rows.contains_key(&row_id.1) {
                    if *ignore {
                        self.lock(id, &row_id, &name);
                        return Ok(self.ok(id, 0, 0, 1, String::new()));
                    }
                    let shown: String = text(&name).chars().take(192).collect();
                    return Err(ErrPacket::new(
                        1062,
                        "23000",
                        format!("Duplicate entry '{shown}' for key 'PRIMARY'"),
                    )
                    .into());
                }
                self.write(id, &row_id, &name, Some(full));
                Ok(self.ok(id, 1, 0, 0, String::new()))
            }
            Statement::Delete { .. } => {
                let key = key.unwrap_or_default();
                let row_id = (table.clone(), fold(&key));
                self.lockable(id, &row_id)?;
                let Some(row) = self.tables[table].rows.get(&row_id.1).cloned() else {
                    return Ok(self.ok(id, 0, 0, 0, String::new()));
                };
                self.lock(id, &row_id, &key);
                let mut affected = 0;
                if matches(&row, &conds_ix) {
                    self.write(id, &row_id, &key, None);
                    affected = 1;
                }
                Ok(self.ok(id, affected, 0, 0, String::new()))
            }
            Statement::Update { sets, .. } => {
                let mut sets_ix = Vec::new();
                for (c, e) in sets {
                    let i = index(c).ok_or_else(|| unknown(c, "SET"))?;
                    if i == 0 {
                        // Changing the key: valid SQL the subset does not take.
                        return Err(subset());
                    }
                    sets_ix.push((i, e.clone()));
                }
                let key = key.unwrap_or_default();
                let row_id = (table.clone(), fold(&key));
                self.lockable(id, &row_id)?;
                let Some(row) = self.tables[table].rows.get(&row_id.1).cloned() else {
                    return Ok(self.ok(id, 0, 0, 0, update_info(0, 0)));
                };
                self.lock(id, &row_id, &key);
                if !matches(&row, &conds_ix) {
                    return Ok(self.ok(id, 0, 0, 0, update_info(0, 0)));
                }
                let mut new = row.clone();
                let mut insert_id = 0;
                for (i, e) in &sets_ix {
                    let (v, last) = eval(e, &row, &index).ok_or_else(subset)?;
                    if !matches!(
                        (columns[*i].1, &v),
                        (ColumnType::Varchar, Value::Str(_)) | (ColumnType::Bigint, Value::Int(_))
                    ) {
                        return Err(subset());
                    }
                    if let Some(n) = last {
                        insert_id = n as u64;
                    }
                    new[*i] = v;
                }
                let changed = u64::from(new != row);
                if changed == 1 {
                    self.write(id, &row_id, &key, Some(new));
                }
                Ok(self.ok(id, changed, insert_id, 0, update_info(1, changed)))
            }
            Statement::SelectForUpdate { columns: want, .. } => {
                let mut pick = Vec::new();
                for c in want {
                    pick.push(index(c).ok_or_else(|| unknown(c, "SELECT"))?);
                }
                let key = key.unwrap_or_default();
                let row_id = (table.clone(), fold(&key));
                self.lockable(id, &row_id)?;
                let row = self.tables[table].rows.get(&row_id.1).cloned();
                let mut rows = Vec::new();
                if let Some(row) = row {
                    self.lock(id, &row_id, &key);
                    if matches(&row, &conds_ix) {
                        rows.push(pick.iter().map(|&i| Some(cell(&row[i]))).collect());
                    }
                }
                let defs = want
                    .iter()
                    .zip(&pick)
                    .map(|(as_written, &i)| column_def(database, table, as_written, &columns, i))
                    .collect();
                Ok(Reply::Rows(ResultSet {
                    columns: defs,
                    rows,
                    eof: EofPacket {
                        warnings: 0,
                        status: self.status(id),
                    },
                }))
            }
            _ => Err(subset()),
        }
    }

    /// Whether connection `id` may lock `row` (free, or its own already).
    fn lockable(&self, id: ConnId, row: &RowId) -> Result<(), Refusal> {
        match self.locks.get(row) {
            Some(&holder) if holder != id => Err(Refusal::Locked(row.0.clone(), row.1.clone())),
            _ => Ok(()),
        }
    }

    /// Locks `row` for connection `id`'s transaction; an autocommit statement's lock
    /// ends with it, so only an explicit transaction keeps (and records) one.
    fn lock(&mut self, id: ConnId, row: &RowId, name: &[u8]) {
        let Some(trx) = self.trxs.get_mut(&id) else {
            return;
        };
        if self.locks.insert(row.clone(), id).is_none() {
            trx.locks.push((row.clone(), text(name)));
            self.events.push(ServerEvent::RowLocked {
                conn: id,
                table: row.0.clone(),
                name: text(name),
            });
        }
    }

    /// Writes (or, with `None`, deletes) a row for connection `id`: undo kept and the
    /// row locked in an explicit transaction; recorded at once under autocommit.
    fn write(&mut self, id: ConnId, row: &RowId, name: &[u8], new: Option<Vec<Value>>) {
        self.lock(id, row, name);
        let Some(t) = self.tables.get_mut(&row.0) else {
            return;
        };
        let owner = |r: &Vec<Value>| -> Option<String> {
            let i = t
                .columns
                .iter()
                .position(|(n, _)| n.eq_ignore_ascii_case("owner"))?;
            match r.get(i) {
                Some(Value::Str(s)) => Some(text(s)),
                _ => None,
            }
        };
        let before = t.rows.get(&row.1).cloned();
        let event = match (&before, &new) {
            (None, Some(r)) => ServerEvent::Inserted {
                conn: id,
                table: row.0.clone(),
                name: text(name),
                owner: owner(r),
            },
            (Some(b), None) => ServerEvent::Deleted {
                conn: id,
                table: row.0.clone(),
                name: text(name),
                owner: owner(b),
            },
            (Some(b), Some(r)) => ServerEvent::Updated {
                conn: id,
                table: row.0.clone(),
                name: text(name),
                before: owner(b),
                owner: owner(r),
            },
            (None, None) => return,
        };
        match &new {
            Some(r) => t.rows.insert(row.1.clone(), r.clone()),
            None => t.rows.remove(&row.1),
        };
        let image = BinlogEvent::Row {
            table: row.0.clone(),
            name: name.to_vec(),
            row: new,
        };
        match self.trxs.get_mut(&id) {
            Some(trx) => {
                trx.undo.push((row.clone(), before));
                trx.events.push(event);
                trx.binlog.push(image);
            }
            None => {
                self.events.push(event);
                self.binlog.push(image);
            }
        }
    }

    fn ok(&self, id: ConnId, affected: u64, insert_id: u64, warnings: u16, info: String) -> Reply {
        Reply::Ok(OkPacket {
            affected_rows: affected,
            last_insert_id: insert_id,
            status: self.status(id),
            warnings,
            info,
        })
    }
}

/// An UPDATE's info text, as MariaDB's `ER_UPDATE_INFO` reads.
fn update_info(matched: u64, changed: u64) -> String {
    format!("Rows matched: {matched}  Changed: {changed}  Warnings: 0")
}

/// A WHERE clause's conditions, each with its column's index.
type IndexedConds = Vec<(usize, Cond)>;

/// A WHERE clause's conditions by column index, and its key: the one `key = '...'` on
/// the primary key (the subset looks rows up by key only).
fn where_key(
    columns: &[(String, ColumnType)],
    conds: &[Cond],
    sql: &str,
) -> Result<(IndexedConds, Vec<u8>), Refusal> {
    let subset = || Refusal::Err(parse_error(sql, 0));
    let mut conds_ix = Vec::new();
    for c in conds {
        let i = column_index(columns, &c.column).ok_or_else(|| unknown(&c.column, "WHERE"))?;
        if !matches!(
            (columns[i].1, &c.value),
            (ColumnType::Varchar, Value::Str(_)) | (ColumnType::Bigint, Value::Int(_))
        ) {
            return Err(subset());
        }
        conds_ix.push((i, c.clone()));
    }
    let keys: Vec<Vec<u8>> = conds_ix
        .iter()
        .filter_map(|(i, c)| match (&c.value, c.op) {
            (Value::Str(s), Op::Eq) if *i == 0 => Some(s.clone()),
            _ => None,
        })
        .collect();
    match <[Vec<u8>; 1]>::try_from(keys) {
        Ok([k]) => Ok((conds_ix, k)),
        Err(_) => Err(subset()),
    }
}

/// The position of column `c` (as written) in a table's `columns`.
fn column_index(columns: &[(String, ColumnType)], c: &str) -> Option<usize> {
    columns.iter().position(|(n, _)| n.eq_ignore_ascii_case(c))
}

/// `ER_BAD_FIELD_ERROR` for column `c` in `clause`.
fn unknown(c: &str, clause: &str) -> ErrPacket {
    ErrPacket::new(1054, "42S22", format!("Unknown column '{c}' in '{clause}'"))
}

/// An INSERT's row in the table's column order, checked as strict mode checks it.
fn full_row(
    columns: &[(String, ColumnType)],
    cols: &[String],
    values: &[Value],
    sql: &str,
) -> Result<Vec<Value>, Refusal> {
    let subset = || Refusal::Err(parse_error(sql, 0));
    let index = |c: &str| column_index(columns, c);
    if cols.len() != values.len() {
        return Err(ErrPacket::new(
            1136,
            "21S01",
            "Column count doesn't match value count at row 1",
        )
        .into());
    }
    let mut row: Vec<Option<Value>> = vec![None; columns.len()];
    for (c, v) in cols.iter().zip(values) {
        let i = index(c).ok_or_else(|| unknown(c, "INSERT INTO"))?;
        if row[i].is_some() {
            return Err(ErrPacket::new(
                1110,
                "42000",
                format!("Column '{}' specified twice", columns[i].0),
            )
            .into());
        }
        row[i] = Some(v.clone());
    }
    let mut full = Vec::new();
    for (i, v) in row.into_iter().enumerate() {
        let (cname, ty) = &columns[i];
        let Some(v) = v else {
            // Strict mode: a NOT NULL column without a default.
            return Err(ErrPacket::new(
                1364,
                "HY000",
                format!("Field '{cname}' doesn't have a default value"),
            )
            .into());
        };
        match (ty, &v) {
            (ColumnType::Varchar, Value::Str(s)) => {
                if String::from_utf8_lossy(s).chars().count() > 255 {
                    return Err(ErrPacket::new(
                        1406,
                        "22001",
                        format!("Data too long for column '{cname}' at row 1"),
                    )
                    .into());
                }
            }
            (ColumnType::Bigint, Value::Int(_)) => {}
            _ => return Err(subset()),
        }
        full.push(v);
    }
    Ok(full)
}

/// Whether `row` satisfies every condition.
fn matches(row: &[Value], conds: &[(usize, Cond)]) -> bool {
    conds.iter().all(|(i, c)| {
        let ord = match (&row[*i], &c.value) {
            (Value::Str(a), Value::Str(b)) => fold(a).cmp(&fold(b)),
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            _ => return false,
        };
        match c.op {
            Op::Eq => ord.is_eq(),
            Op::Lt => ord.is_lt(),
        }
    })
}

/// A `SET` expression's value on `row`, and the `LAST_INSERT_ID(...)` argument if
/// it is one; `None` for what the subset does not compute.
fn eval(
    e: &SetExpr,
    row: &[Value],
    index: &dyn Fn(&str) -> Option<usize>,
) -> Option<(Value, Option<i64>)> {
    match e {
        SetExpr::Value(v) => Some((v.clone(), None)),
        SetExpr::Plus(c, n) => match row.get(index(c)?)? {
            Value::Int(v) => Some((Value::Int(v.checked_add(*n)?), None)),
            Value::Str(_) => None,
        },
        SetExpr::LastInsertId(inner) => match eval(inner, row, index)? {
            (Value::Int(v), _) => Some((Value::Int(v), Some(v))),
            _ => None,
        },
    }
}

/// A table column's definition in a resultset, as MariaDB sends it.
fn column_def(
    database: &str,
    table: &str,
    as_written: &str,
    columns: &[(String, ColumnType)],
    i: usize,
) -> Column {
    // `NOT_NULL_FLAG` 1, `NO_DEFAULT_VALUE_FLAG` 4096; the key adds `PRI_KEY_FLAG` 2
    // and `PART_KEY_FLAG` 16384.
    let (charset, length, ty, mut flags) = match columns[i].1 {
        ColumnType::Varchar => (45, 1020, column_type::VAR_STRING, 1 | 4096),
        ColumnType::Bigint => (63, 20, column_type::LONGLONG, 1 | 4096),
    };
    if i == 0 {
        flags |= 2 | 16384;
    }
    Column {
        catalog: "def".into(),
        schema: database.into(),
        table: table.into(),
        org_table: table.into(),
        name: as_written.into(),
        org_name: columns[i].0.clone(),
        charset,
        length,
        column_type: ty,
        flags,
        decimals: 0,
    }
}

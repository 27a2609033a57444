//! The SQL the MySQL lock designs send, parsed strictly: a tokenizer as MariaDB's lexer
//! reads these statements (case-insensitive keywords, `'...'` strings with backslash
//! escapes and `''`, integers, punctuation), and a parser for exactly these shapes:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS <t> (<c> VARCHAR(255) NOT NULL PRIMARY KEY, <c> VARCHAR(255) NOT NULL | <c> BIGINT NOT NULL, ...)
//! INSERT [IGNORE] INTO <t> (<c>, ...) VALUES (<literal>, ...)
//! DELETE FROM <t> WHERE <c> = | < <literal> [AND ...]
//! UPDATE <t> SET <c> = <literal> | <c> + <n> | LAST_INSERT_ID(<c> + <n>), ... WHERE ...
//! SELECT <c>, ... FROM <t> WHERE ... FOR UPDATE
//! BEGIN | START TRANSACTION | COMMIT | ROLLBACK
//! SELECT GET_LOCK('<name>' | NULL, <integer>)
//! SELECT RELEASE_LOCK('<name>' | NULL)
//! SELECT IS_USED_LOCK('<name>' | NULL)
//! SET SESSION wait_timeout | innodb_lock_wait_timeout = <integer>
//! ```
//!
//! Anything else is MariaDB's syntax error (`ER_PARSE_ERROR`, 1064, SQLSTATE 42000:
//! "You have an error in your SQL syntax; check the manual that corresponds to your
//! MariaDB server version for the right syntax to use near '%-.80s' at line %d"), the
//! quoted text running from the first token this grammar cannot accept to the end of
//! the statement (80 characters at most), as `MYSQLerror` reports it from the lexer's
//! position. Simplification: for a statement that is valid in MariaDB's full grammar
//! but outside this subset (`SELECT 1`, a `SELECT` without `FOR UPDATE`), the real
//! server answers otherwise; the model still answers 1064, naming where the subset
//! ended.
//!
//! Names (tables, columns) are resolved by the server after parsing, as MariaDB does:
//! see [`super::server`]. A wrong argument count to the lock functions is
//! `ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT` (1582, 42000).

use lock_impl::mysql::ErrPacket;

/// A token and where it starts in the statement (byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(Vec<u8>),
    Int(i64),
    /// A number the subset does not take (decimals, too large).
    Num,
    Punct(char),
    End,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    at: usize,
    end: usize,
}

/// A literal value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    /// A string (`'...'`), as bytes.
    Str(Vec<u8>),
    /// An integer.
    Int(i64),
}

/// A column's type in `CREATE TABLE` (the subset: the lock tables' types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// `VARCHAR(255)`.
    Varchar,
    /// `BIGINT`.
    Bigint,
}

/// A comparison in a `WHERE` conjunction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`.
    Eq,
    /// `<`.
    Lt,
}

/// `column op literal`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    /// The column, as written.
    pub column: String,
    /// The comparison.
    pub op: Op,
    /// The literal.
    pub value: Value,
}

/// The right side of an `UPDATE`'s `SET column = ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetExpr {
    /// A literal.
    Value(Value),
    /// `column + n` (a version column counted up).
    Plus(String, i64),
    /// `LAST_INSERT_ID(expr)`: `expr`, also returned as the OK packet's insert id.
    LastInsertId(Box<SetExpr>),
}

/// A parsed statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `CREATE TABLE IF NOT EXISTS t (...)`: the first column is the primary key.
    Create {
        /// The table.
        table: String,
        /// Its columns.
        columns: Vec<(String, ColumnType)>,
    },
    /// `INSERT [IGNORE] INTO t (c, ...) VALUES (v, ...)`.
    Insert {
        /// The table.
        table: String,
        /// `IGNORE`: a duplicate key is a warning, not an error.
        ignore: bool,
        /// The columns, as written.
        columns: Vec<String>,
        /// The values, one per column.
        values: Vec<Value>,
    },
    /// `DELETE FROM t WHERE c op v AND ...`.
    Delete {
        /// The table.
        table: String,
        /// The conjunction.
        conds: Vec<Cond>,
    },
    /// `UPDATE t SET c = e, ... WHERE c op v AND ...`.
    Update {
        /// The table.
        table: String,
        /// The assignments.
        sets: Vec<(String, SetExpr)>,
        /// The conjunction.
        conds: Vec<Cond>,
    },
    /// `SELECT c, ... FROM t WHERE c op v AND ... FOR UPDATE`.
    SelectForUpdate {
        /// The table.
        table: String,
        /// The columns, as written.
        columns: Vec<String>,
        /// The conjunction.
        conds: Vec<Cond>,
    },
    /// `BEGIN` or `START TRANSACTION`.
    Begin,
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// `SELECT GET_LOCK(name, timeout)`; `column` is the expression as written.
    GetLock {
        /// The name, `None` for NULL.
        name: Option<Vec<u8>>,
        /// The timeout, seconds.
        timeout: i64,
        /// The result column's name.
        column: String,
    },
    /// `SELECT RELEASE_LOCK(name)`.
    ReleaseLock {
        /// The name, `None` for NULL.
        name: Option<Vec<u8>>,
        /// The result column's name.
        column: String,
    },
    /// `SET SESSION wait_timeout = n`.
    SetWaitTimeout {
        /// Seconds, as written.
        seconds: i64,
    },
    /// `SET SESSION innodb_lock_wait_timeout = n`.
    SetLockWaitTimeout {
        /// Seconds, as written.
        seconds: i64,
    },
    /// `SELECT IS_USED_LOCK(name)`.
    IsUsedLock {
        /// The name, `None` for NULL.
        name: Option<Vec<u8>>,
        /// The result column's name.
        column: String,
    },
}

/// `ER_PARSE_ERROR` near `at` in `sql`.
pub fn parse_error(sql: &str, at: usize) -> ErrPacket {
    let at = at.min(sql.len());
    let line = 1 + sql.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
    let near: String = sql.get(at..).unwrap_or("").chars().take(80).collect();
    ErrPacket::new(
        1064,
        "42000",
        format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your \
             MariaDB server version for the right syntax to use near '{near}' at line {line}"
        ),
    )
}

fn tokenize(sql: &str) -> Result<Vec<Token>, usize> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let at = i;
        if c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80 {
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Word(sql[at..i].to_string()),
                at,
                end: i,
            });
        } else if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let mut tok = sql[at..i].parse::<i64>().map(Tok::Int).unwrap_or(Tok::Num);
            if i < b.len() && (b[i] == b'.' || b[i].is_ascii_alphabetic()) {
                while i < b.len() && (b[i] == b'.' || b[i].is_ascii_alphanumeric()) {
                    i += 1;
                }
                tok = Tok::Num;
            }
            out.push(Token { tok, at, end: i });
        } else if c == b'\'' {
            i += 1;
            let mut s = Vec::new();
            loop {
                match b.get(i) {
                    None => return Err(at),
                    Some(b'\\') => {
                        let Some(&e) = b.get(i + 1) else {
                            return Err(at);
                        };
                        s.push(match e {
                            b'0' => 0,
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'Z' => 0x1a,
                            other => other,
                        });
                        i += 2;
                    }
                    Some(b'\'') if b.get(i + 1) == Some(&b'\'') => {
                        s.push(b'\'');
                        i += 2;
                    }
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(&o) => {
                        s.push(o);
                        i += 1;
                    }
                }
            }
            out.push(Token {
                tok: Tok::Str(s),
                at,
                end: i,
            });
        } else {
            // One character of punctuation (the subset needs `( ) , = -`); the rest of
            // MariaDB's operators never fit its grammar, so any single character will do
            // to report the error at the right place.
            let ch = sql[at..].chars().next().unwrap_or('?');
            i += ch.len_utf8();
            out.push(Token {
                tok: Tok::Punct(ch),
                at,
                end: i,
            });
        }
    }
    out.push(Token {
        tok: Tok::End,
        at: sql.len(),
        end: sql.len(),
    });
    Ok(out)
}

struct Parser<'a> {
    sql: &'a str,
    toks: Vec<Token>,
    pos: usize,
}

type P<T> = Result<T, ErrPacket>;

impl<'a> Parser<'a> {
    fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn fail(&self) -> ErrPacket {
        parse_error(self.sql, self.peek().at)
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn keyword(&mut self, kw: &str) -> P<()> {
        match &self.peek().tok {
            Tok::Word(w) if w.eq_ignore_ascii_case(kw) => {
                self.next();
                Ok(())
            }
            _ => Err(self.fail()),
        }
    }

    fn punct(&mut self, p: char) -> P<()> {
        match &self.peek().tok {
            Tok::Punct(c) if *c == p => {
                self.next();
                Ok(())
            }
            _ => Err(self.fail()),
        }
    }

    fn word(&mut self) -> P<String> {
        match &self.peek().tok {
            Tok::Word(w) => {
                let w = w.clone();
                self.next();
                Ok(w)
            }
            _ => Err(self.fail()),
        }
    }

    fn int(&mut self) -> P<i64> {
        let neg = matches!(self.peek().tok, Tok::Punct('-'));
        if neg {
            self.next();
        }
        match self.peek().tok {
            Tok::Int(n) => {
                self.next();
                Ok(if neg { -n } else { n })
            }
            _ => Err(self.fail()),
        }
    }

    fn end(&mut self) -> P<()> {
        match self.peek().tok {
            Tok::End => Ok(()),
            _ => Err(self.fail()),
        }
    }

    /// A literal: a string, or an integer with an optional minus sign.
    fn literal(&mut self) -> P<Value> {
        if let Tok::Str(s) = &self.peek().tok {
            let s = s.clone();
            self.next();
            return Ok(Value::Str(s));
        }
        self.int().map(Value::Int)
    }

    /// `c op v [AND c op v ...]`: the subset's `WHERE`.
    fn conds(&mut self) -> P<Vec<Cond>> {
        let mut conds = Vec::new();
        loop {
            let column = self.word()?;
            let op = match self.peek().tok {
                Tok::Punct('=') => Op::Eq,
                Tok::Punct('<') => Op::Lt,
                _ => return Err(self.fail()),
            };
            self.next();
            let value = self.literal()?;
            conds.push(Cond { column, op, value });
            match &self.peek().tok {
                Tok::Word(w) if w.eq_ignore_ascii_case("AND") => {
                    self.next();
                }
                // `OR` continues MariaDB's expression grammar: the error, if any, is
                // at the token after it (the subset takes conjunctions only).
                Tok::Word(w) if w.eq_ignore_ascii_case("OR") => {
                    self.next();
                    return Err(self.fail());
                }
                _ => return Ok(conds),
            }
        }
    }

    fn statement(&mut self) -> P<Statement> {
        let first = self.word()?;
        let stmt = match first.to_ascii_uppercase().as_str() {
            "SELECT" => return self.select(),
            "INSERT" => return self.insert(),
            "DELETE" => return self.delete(),
            "UPDATE" => return self.update(),
            "CREATE" => return self.create(),
            "SET" => return self.set(),
            "BEGIN" => Statement::Begin,
            "START" => {
                self.keyword("TRANSACTION")?;
                Statement::Begin
            }
            "COMMIT" => Statement::Commit,
            "ROLLBACK" => Statement::Rollback,
            _ => return Err(parse_error(self.sql, self.toks[0].at)),
        };
        self.end()?;
        Ok(stmt)
    }

    fn select(&mut self) -> P<Statement> {
        let start = self.peek().at;
        let func = self.word()?;
        if !matches!(self.peek().tok, Tok::Punct('(')) {
            return self.select_rows(func);
        }
        let upper = func.to_ascii_uppercase();
        let want = match upper.as_str() {
            "GET_LOCK" => 2,
            "RELEASE_LOCK" | "IS_USED_LOCK" => 1,
            _ => return Err(parse_error(self.sql, start)),
        };
        self.punct('(')?;
        // Arguments: literals (a string, NULL or an integer); the count is checked
        // after the call parsed, as the server checks it when it builds the function.
        let mut args: Vec<Tok> = Vec::new();
        loop {
            let neg = matches!(self.peek().tok, Tok::Punct('-'));
            if neg {
                self.next();
            }
            let t = self.peek().tok.clone();
            match t {
                Tok::Str(_) | Tok::Int(_) if !neg || matches!(t, Tok::Int(_)) => {
                    self.next();
                    args.push(match t {
                        Tok::Int(n) if neg => Tok::Int(-n),
                        t => t,
                    });
                }
                Tok::Word(ref w) if w.eq_ignore_ascii_case("NULL") && !neg => {
                    self.next();
                    args.push(Tok::Word("NULL".into()));
                }
                _ => return Err(self.fail()),
            }
            if matches!(self.peek().tok, Tok::Punct(',')) {
                self.next();
            } else {
                break;
            }
        }
        let close = self.peek().end;
        self.punct(')')?;
        self.end()?;
        if args.len() != want {
            return Err(ErrPacket::new(
                1582,
                "42000",
                format!("Incorrect parameter count in the call to native function '{func}'"),
            ));
        }
        let name = match &args[0] {
            Tok::Str(s) => Some(s.clone()),
            Tok::Word(_) => None,
            // A number as a lock name: valid SQL the subset does not take.
            _ => return Err(parse_error(self.sql, start)),
        };
        let timeout = match args.get(1) {
            None => None,
            Some(Tok::Int(n)) => Some(*n),
            // A string or NULL timeout: valid SQL the subset does not take.
            Some(_) => return Err(parse_error(self.sql, start)),
        };
        let column = self.sql[start..close].to_string();
        Ok(match upper.as_str() {
            "GET_LOCK" => Statement::GetLock {
                name,
                timeout: timeout.unwrap_or(0),
                column,
            },
            "RELEASE_LOCK" => Statement::ReleaseLock { name, column },
            _ => Statement::IsUsedLock { name, column },
        })
    }

    /// `SELECT c, ... FROM t WHERE ... FOR UPDATE`, after the first column.
    fn select_rows(&mut self, first: String) -> P<Statement> {
        let mut columns = vec![first];
        while matches!(self.peek().tok, Tok::Punct(',')) {
            self.next();
            columns.push(self.word()?);
        }
        self.keyword("FROM")?;
        let table = self.word()?;
        self.keyword("WHERE")?;
        let conds = self.conds()?;
        // A plain (consistent, non-locking) read is valid SQL the subset does not
        // take: the error is where `FOR UPDATE` should have been.
        self.keyword("FOR")?;
        self.keyword("UPDATE")?;
        self.end()?;
        Ok(Statement::SelectForUpdate {
            table,
            columns,
            conds,
        })
    }

    fn insert(&mut self) -> P<Statement> {
        let ignore = matches!(&self.peek().tok, Tok::Word(w) if w.eq_ignore_ascii_case("IGNORE"));
        if ignore {
            self.next();
        }
        self.keyword("INTO")?;
        let table = self.word()?;
        self.punct('(')?;
        let mut columns = vec![self.word()?];
        while matches!(self.peek().tok, Tok::Punct(',')) {
            self.next();
            columns.push(self.word()?);
        }
        self.punct(')')?;
        self.keyword("VALUES")?;
        self.punct('(')?;
        let mut values = vec![self.literal()?];
        while matches!(self.peek().tok, Tok::Punct(',')) {
            self.next();
            values.push(self.literal()?);
        }
        self.punct(')')?;
        self.end()?;
        Ok(Statement::Insert {
            table,
            ignore,
            columns,
            values,
        })
    }

    fn delete(&mut self) -> P<Statement> {
        self.keyword("FROM")?;
        let table = self.word()?;
        self.keyword("WHERE")?;
        let conds = self.conds()?;
        self.end()?;
        Ok(Statement::Delete { table, conds })
    }

    /// `SET`'s right side: a literal, `c + n`, or `LAST_INSERT_ID(` either `)`.
    fn set_expr(&mut self, nested: bool) -> P<SetExpr> {
        if let Tok::Word(w) = &self.peek().tok {
            let w = w.clone();
            self.next();
            if !nested
                && w.eq_ignore_ascii_case("LAST_INSERT_ID")
                && matches!(self.peek().tok, Tok::Punct('('))
            {
                self.next();
                let inner = self.set_expr(true)?;
                self.punct(')')?;
                return Ok(SetExpr::LastInsertId(Box::new(inner)));
            }
            self.punct('+')?;
            let n = match self.peek().tok {
                Tok::Int(n) => n,
                _ => return Err(self.fail()),
            };
            self.next();
            return Ok(SetExpr::Plus(w, n));
        }
        self.literal().map(SetExpr::Value)
    }

    fn update(&mut self) -> P<Statement> {
        let table = self.word()?;
        self.keyword("SET")?;
        let mut sets = Vec::new();
        loop {
            let column = self.word()?;
            self.punct('=')?;
            sets.push((column, self.set_expr(false)?));
            if matches!(self.peek().tok, Tok::Punct(',')) {
                self.next();
            } else {
                break;
            }
        }
        self.keyword("WHERE")?;
        let conds = self.conds()?;
        self.end()?;
        Ok(Statement::Update { table, sets, conds })
    }

    fn set(&mut self) -> P<Statement> {
        self.keyword("SESSION")?;
        let at = self.peek().at;
        let var = self.word()?;
        self.punct('=')?;
        let seconds = self.int()?;
        self.end()?;
        if var.eq_ignore_ascii_case("wait_timeout") {
            Ok(Statement::SetWaitTimeout { seconds })
        } else if var.eq_ignore_ascii_case("innodb_lock_wait_timeout") {
            Ok(Statement::SetLockWaitTimeout { seconds })
        } else {
            // Another variable: valid SQL the subset does not take.
            Err(parse_error(self.sql, at))
        }
    }

    /// `CREATE TABLE IF NOT EXISTS t (c VARCHAR(255) NOT NULL PRIMARY KEY, c
    /// VARCHAR(255) NOT NULL | c BIGINT NOT NULL, ...)`: the subset's tables have their
    /// primary key first, a string.
    fn create(&mut self) -> P<Statement> {
        for kw in ["TABLE", "IF", "NOT", "EXISTS"] {
            self.keyword(kw)?;
        }
        let start = self.peek().at;
        let table = self.word()?;
        self.punct('(')?;
        let mut columns = Vec::new();
        loop {
            let name = self.word()?;
            let at = self.peek().at;
            let ty = match self.word()?.to_ascii_uppercase().as_str() {
                "VARCHAR" => {
                    self.punct('(')?;
                    let at = self.peek().at;
                    if self.int()? != 255 {
                        return Err(parse_error(self.sql, at));
                    }
                    self.punct(')')?;
                    ColumnType::Varchar
                }
                "BIGINT" => ColumnType::Bigint,
                _ => return Err(parse_error(self.sql, at)),
            };
            self.keyword("NOT")?;
            self.keyword("NULL")?;
            let primary =
                matches!(&self.peek().tok, Tok::Word(w) if w.eq_ignore_ascii_case("PRIMARY"));
            if primary {
                self.next();
                self.keyword("KEY")?;
            }
            if primary != columns.is_empty() || (primary && ty != ColumnType::Varchar) {
                return Err(parse_error(self.sql, start));
            }
            columns.push((name, ty));
            if matches!(self.peek().tok, Tok::Punct(',')) {
                self.next();
            } else {
                break;
            }
        }
        self.punct(')')?;
        self.end()?;
        Ok(Statement::Create { table, columns })
    }
}

/// Parses one statement.
pub fn parse(sql: &str) -> Result<Statement, ErrPacket> {
    let toks = tokenize(sql).map_err(|at| parse_error(sql, at))?;
    if matches!(toks[0].tok, Tok::End) {
        // An empty query: ER_EMPTY_QUERY.
        return Err(ErrPacket::new(1065, "42000", "Query was empty"));
    }
    let mut p = Parser { sql, toks, pos: 0 };
    p.statement()
}

//! The SQL the MySQL lock designs send, parsed strictly: a tokenizer as MariaDB's lexer
//! reads these statements (case-insensitive keywords, `'...'` strings with backslash
//! escapes and `''`, integers, punctuation), and a parser for exactly these statements:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS locks (name VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL)
//! INSERT INTO locks (name, owner) VALUES ('<name>', '<owner>')
//! DELETE FROM locks WHERE name = '<name>' AND owner = '<owner>'
//! SELECT GET_LOCK('<name>' | NULL, <integer>)
//! SELECT RELEASE_LOCK('<name>' | NULL)
//! SELECT IS_USED_LOCK('<name>' | NULL)
//! SET SESSION wait_timeout = <integer>
//! ```
//!
//! Anything else is MariaDB's syntax error (`ER_PARSE_ERROR`, 1064, SQLSTATE 42000:
//! "You have an error in your SQL syntax; check the manual that corresponds to your
//! MariaDB server version for the right syntax to use near '%-.80s' at line %d"), the
//! quoted text running from the first token this grammar cannot accept to the end of
//! the statement (80 characters at most), as `MYSQLerror` reports it from the lexer's
//! position. Simplification: for a statement that is valid in MariaDB's full grammar
//! but outside this subset (`SELECT 1`), the real server answers otherwise; the model
//! still answers 1064, naming where the subset ended.
//!
//! Two errors come from name resolution rather than the grammar, as on the server: a
//! table other than `locks` in `INSERT`/`DELETE` is `ER_NO_SUCH_TABLE` (1146, 42S02,
//! "Table 'locksim.x' doesn't exist") and an unknown column is `ER_BAD_FIELD_ERROR`
//! (1054, 42S22, "Unknown column 'x' in 'INSERT INTO'" / "in 'WHERE'"). A wrong
//! argument count to the lock functions is `ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT` (1582,
//! 42000).

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

/// A parsed statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `CREATE TABLE IF NOT EXISTS locks (...)`.
    CreateLocks,
    /// `INSERT INTO locks (name, owner) VALUES (...)`.
    Insert {
        /// The `name` value.
        name: Vec<u8>,
        /// The `owner` value.
        owner: Vec<u8>,
    },
    /// `DELETE FROM locks WHERE name = ... AND owner = ...`.
    Delete {
        /// The `name` value.
        name: Vec<u8>,
        /// The `owner` value.
        owner: Vec<u8>,
    },
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
    database: &'a str,
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

    fn string(&mut self) -> P<Vec<u8>> {
        match &self.peek().tok {
            Tok::Str(s) => {
                let s = s.clone();
                self.next();
                Ok(s)
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

    /// The table name: `locks`, or `ER_NO_SUCH_TABLE` (checked after the whole
    /// statement parsed, as the server resolves names after parsing).
    fn table(&mut self) -> P<Option<String>> {
        let w = self.word()?;
        Ok(if w == "locks" { None } else { Some(w) })
    }

    fn no_such_table(&self, t: &str) -> ErrPacket {
        ErrPacket::new(
            1146,
            "42S02",
            format!("Table '{}.{t}' doesn't exist", self.database),
        )
    }

    fn statement(&mut self) -> P<Statement> {
        let first = self.word()?;
        match first.to_ascii_uppercase().as_str() {
            "SELECT" => self.select(),
            "INSERT" => self.insert(),
            "DELETE" => self.delete(),
            "CREATE" => self.create(),
            "SET" => self.set(),
            _ => Err(parse_error(self.sql, self.toks[0].at)),
        }
    }

    fn select(&mut self) -> P<Statement> {
        let start = self.peek().at;
        let func = self.word()?;
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

    fn column(&mut self, clause: &str, bad: &mut Option<ErrPacket>) -> P<String> {
        let c = self.word()?;
        let lower = c.to_ascii_lowercase();
        if lower != "name" && lower != "owner" && bad.is_none() {
            *bad = Some(ErrPacket::new(
                1054,
                "42S22",
                format!("Unknown column '{c}' in '{clause}'"),
            ));
        }
        Ok(lower)
    }

    fn insert(&mut self) -> P<Statement> {
        self.keyword("INTO")?;
        let table = self.table()?;
        self.punct('(')?;
        let mut bad = None;
        let c1 = self.column("INSERT INTO", &mut bad)?;
        self.punct(',')?;
        let c2 = self.column("INSERT INTO", &mut bad)?;
        self.punct(')')?;
        self.keyword("VALUES")?;
        self.punct('(')?;
        let v1 = self.string()?;
        self.punct(',')?;
        let v2 = self.string()?;
        self.punct(')')?;
        self.end()?;
        if let Some(t) = table {
            return Err(self.no_such_table(&t));
        }
        if let Some(e) = bad {
            return Err(e);
        }
        match (c1.as_str(), c2.as_str()) {
            ("name", "owner") => Ok(Statement::Insert {
                name: v1,
                owner: v2,
            }),
            ("owner", "name") => Ok(Statement::Insert {
                name: v2,
                owner: v1,
            }),
            // `(name, name)`: the server's ER_FIELD_SPECIFIED_TWICE.
            _ => Err(ErrPacket::new(
                1110,
                "42000",
                format!("Column '{c1}' specified twice"),
            )),
        }
    }

    fn delete(&mut self) -> P<Statement> {
        self.keyword("FROM")?;
        let table = self.table()?;
        self.keyword("WHERE")?;
        let mut bad = None;
        let c1 = self.column("WHERE", &mut bad)?;
        self.punct('=')?;
        let v1 = self.string()?;
        self.keyword("AND")?;
        let c2 = self.column("WHERE", &mut bad)?;
        self.punct('=')?;
        let v2 = self.string()?;
        // A further `AND` / `OR` continues MariaDB's expression grammar: the error, if
        // any, is at the token after it.
        if matches!(&self.peek().tok, Tok::Word(w) if w.eq_ignore_ascii_case("AND") || w.eq_ignore_ascii_case("OR"))
        {
            self.next();
            return Err(self.fail());
        }
        self.end()?;
        if let Some(t) = table {
            return Err(self.no_such_table(&t));
        }
        if let Some(e) = bad {
            return Err(e);
        }
        match (c1.as_str(), c2.as_str()) {
            ("name", "owner") => Ok(Statement::Delete {
                name: v1,
                owner: v2,
            }),
            ("owner", "name") => Ok(Statement::Delete {
                name: v2,
                owner: v1,
            }),
            // `name = 'a' AND name = 'b'` is valid SQL the subset does not take.
            _ => Err(parse_error(self.sql, self.toks[0].at)),
        }
    }

    fn set(&mut self) -> P<Statement> {
        self.keyword("SESSION")?;
        self.keyword("wait_timeout")?;
        self.punct('=')?;
        let seconds = self.int()?;
        self.end()?;
        Ok(Statement::SetWaitTimeout { seconds })
    }

    fn create(&mut self) -> P<Statement> {
        for kw in ["TABLE", "IF", "NOT", "EXISTS"] {
            self.keyword(kw)?;
        }
        let start = self.peek().at;
        if self.word()? != "locks" {
            return Err(parse_error(self.sql, start));
        }
        self.punct('(')?;
        for (i, col) in ["name", "owner"].into_iter().enumerate() {
            if i == 1 {
                self.punct(',')?;
            }
            let at = self.peek().at;
            if !self.word()?.eq_ignore_ascii_case(col) {
                return Err(parse_error(self.sql, at));
            }
            self.keyword("VARCHAR")?;
            self.punct('(')?;
            let at = self.peek().at;
            if self.int()? != 255 {
                return Err(parse_error(self.sql, at));
            }
            self.punct(')')?;
            self.keyword("NOT")?;
            self.keyword("NULL")?;
            if i == 0 {
                self.keyword("PRIMARY")?;
                self.keyword("KEY")?;
            }
        }
        self.punct(')')?;
        self.end()?;
        Ok(Statement::CreateLocks)
    }
}

/// Parses one statement; `database` names the current database in messages.
pub fn parse(sql: &str, database: &str) -> Result<Statement, ErrPacket> {
    let toks = tokenize(sql).map_err(|at| parse_error(sql, at))?;
    if matches!(toks[0].tok, Tok::End) {
        // An empty query: ER_EMPTY_QUERY.
        return Err(ErrPacket::new(1065, "42000", "Query was empty"));
    }
    let mut p = Parser {
        sql,
        toks,
        pos: 0,
        database,
    };
    p.statement()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_designs_statements() {
        assert_eq!(
            parse(
                "INSERT INTO locks (name, owner) VALUES ('k', 'o\\'1')",
                "db"
            )
            .unwrap(),
            Statement::Insert {
                name: b"k".to_vec(),
                owner: b"o'1".to_vec()
            }
        );
        assert_eq!(
            parse("select get_lock('k',0)", "db").unwrap(),
            Statement::GetLock {
                name: Some(b"k".to_vec()),
                timeout: 0,
                column: "get_lock('k',0)".into()
            }
        );
        assert!(matches!(
            parse("DELETE FROM locks WHERE name = 'k' AND owner = 'o'", "db").unwrap(),
            Statement::Delete { .. }
        ));
    }

    #[test]
    fn refuses_with_mariadbs_errors() {
        let e = parse("FOO BAR", "db").unwrap_err();
        assert_eq!(e.code, 1064);
        assert!(e.message.ends_with("near 'FOO BAR' at line 1"), "{e}");
        let e = parse(
            "DELETE FROM locks WHERE name = 'k' AND owner = 'o1' AND",
            "db",
        )
        .unwrap_err();
        assert!(e.message.ends_with("near '' at line 1"), "{e}");
        let e = parse(
            "INSERT INTO lockz (name, owner) VALUES ('k', 'o')",
            "locksim",
        )
        .unwrap_err();
        assert_eq!(e.message, "Table 'locksim.lockz' doesn't exist");
        let e = parse("INSERT INTO locks (nme, owner) VALUES ('k', 'o')", "db").unwrap_err();
        assert_eq!(e.message, "Unknown column 'nme' in 'INSERT INTO'");
        let e = parse("SELECT GET_LOCK('k')", "db").unwrap_err();
        assert_eq!(e.code, 1582);
        assert!(parse("SELECT 'unterminated", "db").is_err());
        assert_eq!(parse("  ", "db").unwrap_err().code, 1065);
    }
}

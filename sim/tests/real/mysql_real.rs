//! Differential test: every statement the MySQL designs send, and the error cases
//! around them, sent to a real MariaDB 10.11 (a private `mariadbd` from Debian's
//! `mariadb-server` on a free loopback port, user and database `locksim`;
//! `lock_impl::testing::real_mysql`) and to the model on a real loopback port, with
//! the replies compared field by field (OK: affected rows, insert id, status,
//! warnings, info; ERR: code, SQLSTATE, message; resultsets: every column definition
//! field, every value, the final EOF). Connection ids differ between the two servers,
//! so a value that is a connection id is replaced by the name of the connection it
//! belongs to. Skips without the package unless `LOCKSIM_REQUIRE_MYSQL` is set.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lock_impl::mysql::{MySqlConn, MySqlError, MySqlServer, Reply};
use lock_impl::testing::{mysql_server, real_mysql};
use lock_impl::{Clock, TokioClock};
use sim::mysql::{MySqlConfig, spawn_tokio_mysql};

/// One step of a script.
enum Step {
    /// Connection `n` sends `sql`.
    Sql(usize, String),
    /// Connection `n` is closed abruptly (no `COM_QUIT`).
    Drop(usize),
    /// Connection `n` sends `COM_QUIT`.
    Quit(usize),
    /// Connection `n` asks `IS_USED_LOCK(name)` until it is NULL (the server frees a
    /// closed connection's locks once its thread notices), at most 2 s.
    AwaitFree(usize, String),
    /// Connection `n` is opened (again).
    Open(usize),
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(TokioClock::new())
}

async fn connect(server: &MySqlServer) -> MySqlConn {
    MySqlConn::connect(server, clock())
        .await
        .unwrap_or_else(|e| panic!("login to {}: {e}", server.addr()))
}

/// Runs `script` on `server`, returning one line per reply.
async fn transcript(server: &MySqlServer, script: &[Step]) -> Vec<String> {
    let mut conns: Vec<Option<MySqlConn>> = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    let mut lines = Vec::new();
    let name_of = |ids: &[u32], v: &[u8]| -> Option<String> {
        let n: u32 = std::str::from_utf8(v).ok()?.parse().ok()?;
        ids.iter()
            .position(|&i| i == n)
            .map(|p| format!("<connection {p}>"))
    };
    for step in script {
        match step {
            Step::Open(n) => {
                let c = connect(server).await;
                if conns.len() <= *n {
                    conns.resize_with(n + 1, || None);
                    ids.resize(n + 1, 0);
                }
                ids[*n] = c.connection_id();
                conns[*n] = Some(c);
            }
            Step::Drop(n) => {
                conns[*n] = None;
            }
            Step::Quit(n) => {
                if let Some(c) = conns[*n].take() {
                    c.quit().await;
                }
            }
            Step::AwaitFree(n, name) => {
                let sql = format!("SELECT IS_USED_LOCK('{name}')");
                let c = conns[*n].as_mut().expect("open connection");
                let mut freed = false;
                for _ in 0..200 {
                    if let Ok(Reply::Rows(rs)) = c.query(&sql).await
                        && rs.rows[0][0].is_none()
                    {
                        freed = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                lines.push(format!("await-free {name}: {freed}"));
            }
            Step::Sql(n, sql) => {
                let c = conns[*n].as_mut().expect("open connection");
                let line = match c.query_reply(sql).await {
                    Ok(Reply::Rows(mut rs)) => {
                        for row in &mut rs.rows {
                            for v in row.iter_mut() {
                                if sql.contains("IS_USED_LOCK")
                                    && let Some(name) = v.as_deref().and_then(|v| name_of(&ids, v))
                                {
                                    *v = Some(name.into_bytes());
                                }
                            }
                        }
                        format!("{:?}", Reply::Rows(rs))
                    }
                    Ok(r) => format!("{r:?}"),
                    Err(e) => format!("client error: {e}"),
                };
                lines.push(format!("[{n}] {sql}\n    -> {line}"));
            }
        }
    }
    lines
}

fn script(tag: &str) -> Vec<Step> {
    use Step::*;
    let k = format!("difftest:{tag}");
    let k2 = format!("difftest:{tag}:other");
    let s = |n: usize, sql: String| Sql(n, sql);
    vec![
        Open(0),
        Open(1),
        // The unique-index design's statements.
        s(0, lock_impl::designs::MYSQL_LOCKS_TABLE.to_string()),
        s(
            0,
            format!("DELETE FROM locks WHERE name = '{k}' AND owner = 'o1'"),
        ),
        s(
            0,
            format!("INSERT INTO locks (name, owner) VALUES ('{k}', 'o1')"),
        ),
        // Duplicate key, from another connection and from the holder.
        s(
            1,
            format!("INSERT INTO locks (name, owner) VALUES ('{k}', 'o2')"),
        ),
        s(
            0,
            format!("INSERT INTO locks (name, owner) VALUES ('{k}', 'o1')"),
        ),
        // The collation: case and trailing spaces do not make another key.
        s(
            1,
            format!(
                "INSERT INTO locks (name, owner) VALUES ('{}  ', 'o2')",
                k.to_uppercase()
            ),
        ),
        // A foreign owner deletes nothing; the owner deletes its row.
        s(
            1,
            format!("DELETE FROM locks WHERE name = '{k}' AND owner = 'o2'"),
        ),
        s(
            0,
            format!("DELETE FROM locks WHERE name = '{k}' AND owner = 'o1'"),
        ),
        s(
            0,
            format!("DELETE FROM locks WHERE name = '{k}' AND owner = 'o1'"),
        ),
        // An escaped quote in a value.
        s(
            0,
            format!("INSERT INTO locks (name, owner) VALUES ('{k}', 'it\\'s')"),
        ),
        s(
            0,
            format!("DELETE FROM locks WHERE name = '{k}' AND owner = 'it\\'s'"),
        ),
        s(
            0,
            format!("insert into locks (owner, name) values ('o3', '{k}')"),
        ),
        s(
            0,
            format!("delete from locks where owner = 'o3' and name = '{k}'"),
        ),
        // Values too long.
        s(
            0,
            format!(
                "INSERT INTO locks (name, owner) VALUES ('{}', 'o')",
                "n".repeat(256)
            ),
        ),
        // The get-lock design's statements.
        s(0, format!("SELECT GET_LOCK('{k}', 0)")),
        s(1, format!("SELECT GET_LOCK('{k}', 0)")),
        s(1, format!("SELECT IS_USED_LOCK('{k}')")),
        s(0, format!("SELECT GET_LOCK('{k}', 0)")),
        s(1, format!("SELECT RELEASE_LOCK('{k}')")),
        s(0, format!("SELECT RELEASE_LOCK('{k}')")),
        s(0, format!("SELECT RELEASE_LOCK('{k}')")),
        s(0, format!("SELECT RELEASE_LOCK('{k}')")),
        s(0, format!("SELECT IS_USED_LOCK('{k}')")),
        s(0, format!("SELECT RELEASE_LOCK('{k2}')")),
        // Nested holds (MariaDB 10.0.2 and later): three GET_LOCKs by one connection
        // are three holds; each RELEASE_LOCK answers 1 and only the third frees the
        // lock, as IS_USED_LOCK and the other connection's GET_LOCK show after each.
        s(0, format!("SELECT GET_LOCK('{k}', 0)")),
        s(0, format!("SELECT GET_LOCK('{k}', 0)")),
        s(0, format!("SELECT GET_LOCK('{k}', 0)")),
        s(0, format!("SELECT RELEASE_LOCK('{k}')")),
        s(1, format!("SELECT IS_USED_LOCK('{k}')")),
        s(1, format!("SELECT GET_LOCK('{k}', 0)")),
        s(0, format!("SELECT RELEASE_LOCK('{k}')")),
        s(1, format!("SELECT IS_USED_LOCK('{k}')")),
        s(1, format!("SELECT GET_LOCK('{k}', 0)")),
        s(1, format!("SELECT RELEASE_LOCK('{k}')")),
        s(0, format!("SELECT RELEASE_LOCK('{k}')")),
        s(1, format!("SELECT IS_USED_LOCK('{k}')")),
        s(1, format!("SELECT GET_LOCK('{k}', 0)")),
        s(0, format!("SELECT RELEASE_LOCK('{k}')")),
        s(1, format!("SELECT RELEASE_LOCK('{k}')")),
        s(1, format!("SELECT IS_USED_LOCK('{k}')")),
        s(0, format!("select get_lock( '{k2}' ,0 )")),
        s(0, format!("SELECT GET_LOCK('{}', 0)", k2.to_uppercase())),
        s(0, format!("SELECT RELEASE_LOCK('{}')", k2.to_uppercase())),
        s(0, "SELECT GET_LOCK('', 0)".into()),
        s(0, "SELECT GET_LOCK(NULL, 0)".into()),
        s(0, "SELECT RELEASE_LOCK(NULL)".into()),
        s(0, "SELECT IS_USED_LOCK('')".into()),
        // A wait that runs out (1 s) while another connection holds the lock.
        s(0, format!("SELECT GET_LOCK('{k2}', 0)")),
        s(1, format!("SELECT GET_LOCK('{k2}', 1)")),
        s(0, format!("SELECT RELEASE_LOCK('{k2}')")),
        // Lock released when its connection drops (no COM_QUIT) ...
        s(1, format!("SELECT GET_LOCK('{k}', 0)")),
        Drop(1),
        AwaitFree(0, k.clone()),
        s(0, format!("SELECT GET_LOCK('{k}', 0)")),
        // ... and when it quits.
        Open(1),
        s(1, format!("SELECT GET_LOCK('{k}', 0)")),
        s(1, format!("SELECT RELEASE_LOCK('{k2}')")),
        Quit(0),
        AwaitFree(1, k.clone()),
        s(1, format!("SELECT GET_LOCK('{k}', 0)")),
        s(1, format!("SELECT RELEASE_LOCK('{k}')")),
        // Errors: MariaDB's own.
        s(1, "FOO BAR".into()),
        s(
            1,
            format!("DELETE FROM locks WHERE name = '{k}' AND owner = 'o1' AND"),
        ),
        s(
            1,
            "INSERT INTO lockz (name, owner) VALUES ('a', 'b')".into(),
        ),
        s(1, "INSERT INTO locks (nme, owner) VALUES ('a', 'b')".into()),
        s(
            1,
            "DELETE FROM locks WHERE nme = 'a' AND owner = 'b'".into(),
        ),
        s(1, "SELECT GET_LOCK('a')".into()),
        s(1, "SELECT RELEASE_LOCK('a', 'b')".into()),
        s(1, "SELECT GET_LOCK('a', 0".into()),
        s(1, "SELECT GET_LOCK('unterminated, 0)".into()),
        s(1, "GET_LOCK('a', 0)".into()),
        s(1, "".into()),
    ]
}

/// The tables of the transaction script (dropped on the real server first: its
/// database is shared by this binary's tests, the model starts empty).
const TRX_TABLES: [&str; 2] = ["difftest_trx_rows", "difftest_trx_leases"];

/// Transactions, row locks and the statements of the row-lock and expiry designs:
/// `SELECT ... FOR UPDATE` held until the transaction ends, a second locker waiting
/// until `innodb_lock_wait_timeout` (1205), a dropped connection rolling back, an
/// `INSERT` waiting on a locked duplicate, `UPDATE`'s info and `LAST_INSERT_ID(expr)`.
fn trx_script() -> Vec<Step> {
    use Step::*;
    let [rows, leases] = TRX_TABLES;
    let s = |n: usize, sql: &str| Sql(n, sql.to_string());
    let create_rows =
        format!("CREATE TABLE IF NOT EXISTS {rows} (name VARCHAR(255) NOT NULL PRIMARY KEY)");
    let lock_k = format!("SELECT name FROM {rows} WHERE name = 'k' FOR UPDATE");
    let take = |owner: &str, until: i64, now: i64| {
        format!(
            "UPDATE {leases} SET owner = '{owner}', expires_at = {until}, \
             fence = LAST_INSERT_ID(fence + 1) WHERE name = 'k' AND expires_at < {now}"
        )
    };
    vec![
        Open(0),
        Open(1),
        s(0, &create_rows),
        s(0, &create_rows),
        s(
            0,
            &format!(
                "CREATE TABLE IF NOT EXISTS {leases} (name VARCHAR(255) NOT NULL PRIMARY KEY, \
                 owner VARCHAR(255) NOT NULL, expires_at BIGINT NOT NULL, fence BIGINT NOT NULL)"
            ),
        ),
        s(0, &format!("INSERT IGNORE INTO {rows} (name) VALUES ('k')")),
        s(
            0,
            &format!("INSERT IGNORE INTO {rows} (name) VALUES ('K ')"),
        ),
        // innodb_lock_wait_timeout's range.
        s(0, "SET SESSION innodb_lock_wait_timeout = 99999999999"),
        s(0, "SET SESSION innodb_lock_wait_timeout = -1"),
        s(0, "SET SESSION innodb_lock_wait_timeout = 0"),
        s(1, "set session innodb_lock_wait_timeout=1"),
        // A row lock held by a transaction: the other connection waits and times out.
        s(0, "BEGIN"),
        s(0, &lock_k),
        s(
            0,
            &format!("SELECT name FROM {rows} WHERE name = 'K  ' FOR UPDATE"),
        ),
        s(1, &lock_k),
        s(1, &format!("INSERT IGNORE INTO {rows} (name) VALUES ('k')")),
        s(
            1,
            &format!("SELECT name FROM {rows} WHERE name = 'missing' FOR UPDATE"),
        ),
        s(0, "COMMIT"),
        s(1, &lock_k),
        // The lock lives as long as the transaction; a dropped connection rolls back.
        s(1, "START TRANSACTION"),
        s(1, &lock_k),
        s(0, &lock_k),
        Drop(1),
        s(0, "SET SESSION innodb_lock_wait_timeout = 1"),
        s(0, "BEGIN"),
        s(0, &lock_k),
        s(0, "ROLLBACK"),
        s(0, "COMMIT"),
        s(0, "ROLLBACK"),
        // BEGIN inside a transaction commits it.
        s(0, "BEGIN"),
        s(0, "BEGIN"),
        s(0, "COMMIT"),
        // The expiry and fenced designs' statements.
        Open(1),
        s(1, "SET SESSION innodb_lock_wait_timeout = 1"),
        s(
            0,
            &format!(
                "INSERT INTO {leases} (name, owner, expires_at, fence) VALUES ('k', 'o1', 1000, 1)"
            ),
        ),
        s(
            1,
            &format!(
                "INSERT INTO {leases} (name, owner, expires_at, fence) VALUES ('k', 'o2', 2000, 1)"
            ),
        ),
        s(1, &take("o2", 3000, 500)),
        s(1, &take("o2", 3000, 1500)),
        s(
            1,
            &format!("UPDATE {leases} SET expires_at = 3000 WHERE name = 'k' AND owner = 'o2'"),
        ),
        s(
            1,
            &format!(
                "UPDATE {leases} SET owner = '', expires_at = 0 WHERE name = 'k' AND owner = 'o2'"
            ),
        ),
        s(
            1,
            &format!(
                "SELECT name, owner, expires_at, fence FROM {leases} WHERE name = 'k' FOR UPDATE"
            ),
        ),
        s(1, &take("o3", 4000, 1)),
        s(
            1,
            &format!("DELETE FROM {leases} WHERE name = 'k' AND owner = 'o9'"),
        ),
        s(
            1,
            &format!("DELETE FROM {leases} WHERE name = 'k' AND owner = 'o3'"),
        ),
        // An uncommitted insert: another connection's insert of the key waits for it.
        s(0, "BEGIN"),
        s(
            0,
            &format!(
                "INSERT INTO {leases} (name, owner, expires_at, fence) VALUES ('r', 'o1', 1, 1)"
            ),
        ),
        s(
            1,
            &format!(
                "INSERT INTO {leases} (name, owner, expires_at, fence) VALUES ('r', 'o2', 1, 1)"
            ),
        ),
        s(0, "ROLLBACK"),
        s(
            1,
            &format!(
                "INSERT INTO {leases} (name, owner, expires_at, fence) VALUES ('r', 'o2', 1, 1)"
            ),
        ),
        s(
            1,
            &format!("DELETE FROM {leases} WHERE name = 'r' AND owner = 'o2'"),
        ),
        // Errors.
        s(
            0,
            &format!("INSERT INTO {leases} (name, owner) VALUES ('x', 'o')"),
        ),
        s(
            0,
            &format!("INSERT INTO {leases} (name, owner, expires_at, fence) VALUES ('x', 'o', 1)"),
        ),
        s(0, &format!("UPDATE {leases} SET nope = 1 WHERE name = 'x'")),
        s(
            0,
            &format!("UPDATE {leases} SET owner = 'a' WHERE nope = 'x'"),
        ),
        s(
            0,
            &format!("SELECT nope FROM {rows} WHERE name = 'k' FOR UPDATE"),
        ),
        s(
            0,
            "SELECT name FROM difftest_trx_nope WHERE name = 'k' FOR UPDATE",
        ),
        s(0, &format!("DELETE FROM {rows} WHERE name = 'k' OR")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_answers_transactions_and_row_locks_as_mariadb_does() {
    let Some(real) = real_mysql() else {
        return;
    };
    let real = mysql_server(real);
    let (_, model) = model_server().await;
    let mut c = connect(&real).await;
    for t in TRX_TABLES {
        c.query(&format!("DROP TABLE IF EXISTS {t}"))
            .await
            .expect("drop a table of the script");
    }
    c.quit().await;
    let script = trx_script();
    let want = transcript(&real, &script).await;
    let got = transcript(&model, &script).await;
    let mut diffs = Vec::new();
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        if w != g {
            diffs.push(format!("step {i}:\n  real:  {w}\n  model: {g}"));
        }
    }
    assert_eq!(want.len(), got.len());
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    println!(
        "mysql transactions differential: {} replies identical",
        want.len()
    );
}

async fn model_server() -> (SocketAddr, MySqlServer) {
    let (addr, _shared) = spawn_tokio_mysql(MySqlConfig::default())
        .await
        .expect("model on a loopback port");
    (addr, mysql_server(addr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_answers_the_designs_statements_as_mariadb_does() {
    let Some(real) = real_mysql() else {
        return;
    };
    let real = mysql_server(real);
    let (_, model) = model_server().await;
    // The table exists on both before the script (the real server, shared by this
    // binary's tests, may have it already), so `CREATE TABLE IF NOT EXISTS` answers
    // alike: OK with one warning.
    for server in [&real, &model] {
        let mut c = connect(server).await;
        c.query(lock_impl::designs::MYSQL_LOCKS_TABLE)
            .await
            .expect("create the table");
        c.quit().await;
    }
    let tag = format!("{}", std::process::id());
    let script = script(&tag);
    let want = transcript(&real, &script).await;
    let got = transcript(&model, &script).await;
    let mut diffs = Vec::new();
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        if w != g {
            diffs.push(format!("step {i}:\n  real:  {w}\n  model: {g}"));
        }
    }
    assert_eq!(want.len(), got.len());
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    println!("mysql differential: {} replies identical", want.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_handshake_and_login_errors_match_mariadbs() {
    let Some(real) = real_mysql() else {
        return;
    };
    let real = mysql_server(real);
    let (_, model) = model_server().await;
    let mut lines = Vec::new();
    for server in [&real, &model] {
        let c = connect(server).await;
        let h = c.handshake();
        let mut line = format!(
            "version={} caps={:#x} charset={} status={} mariadb_caps={:#x} plugin={} scramble_len={}",
            h.server_version,
            h.capabilities,
            h.charset,
            h.status,
            h.mariadb_capabilities,
            h.auth_plugin,
            h.scramble.len()
        );
        let wrong_password = MySqlServer {
            password: "wrong".into(),
            ..server.clone()
        };
        let wrong_user = MySqlServer {
            user: "nobody".into(),
            ..server.clone()
        };
        let wrong_db = MySqlServer {
            database: "elsewhere".into(),
            ..server.clone()
        };
        for s in [wrong_password, wrong_user, wrong_db] {
            match MySqlConn::connect(&s, clock()).await {
                Err(MySqlError::Server(e)) => line.push_str(&format!("\n{e}")),
                other => line.push_str(&format!("\nunexpected: {other:?}")),
            }
        }
        let mut c = c;
        line.push_str(&format!("\nping: {:?}", c.ping().await));
        c.quit().await;
        lines.push(line);
    }
    assert_eq!(lines[0], lines[1], "real (left) and model (right) differ");
}

/// A `GET_LOCK` waiting on a lock held elsewhere gets it (1) as soon as the holder
/// releases it, on both servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_get_lock_gets_the_lock_when_it_is_released() {
    let Some(real) = real_mysql() else {
        return;
    };
    let real = mysql_server(real);
    let (_, model) = model_server().await;
    let name = format!("difftest:{}:wait", std::process::id());
    let mut lines = Vec::new();
    for server in [&real, &model] {
        let mut holder = connect(server).await;
        let mut waiter = connect(server).await;
        let take = format!("SELECT GET_LOCK('{name}', 0)");
        let waits = format!("SELECT GET_LOCK('{name}', 10)");
        let first = holder.query(&take).await.expect("the holder's GET_LOCK");
        let started = std::time::Instant::now();
        let waiting = tokio::spawn(async move {
            let r = waiter.query(&waits).await;
            (r, waiter)
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let released = holder
            .query(&format!("SELECT RELEASE_LOCK('{name}')"))
            .await
            .expect("the holder's RELEASE_LOCK");
        let (got, mut waiter) = waiting.await.expect("the waiter");
        let elapsed = started.elapsed();
        assert!(
            elapsed < Duration::from_secs(5),
            "{}: the waiter waited {elapsed:?}",
            server.addr()
        );
        let _ = waiter
            .query(&format!("SELECT RELEASE_LOCK('{name}')"))
            .await;
        lines.push(format!("{first:?}\n{released:?}\n{got:?}"));
        holder.quit().await;
        waiter.quit().await;
    }
    assert_eq!(lines[0], lines[1], "real (left) and model (right) differ");
}

/// `wait_timeout`: a connection idle longer than its session's timeout is closed by
/// the server, and its `GET_LOCK` released, on both servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_past_wait_timeout_loses_its_lock() {
    let Some(real) = real_mysql() else {
        return;
    };
    let real = mysql_server(real);
    let (_, model) = model_server().await;
    let name = format!("difftest:{}:idle", std::process::id());
    let mut lines = Vec::new();
    for server in [&real, &model] {
        let mut idle = connect(server).await;
        let mut other = connect(server).await;
        let mut line = Vec::new();
        for sql in [
            "SET SESSION wait_timeout = 0".to_string(),
            "SET SESSION wait_timeout = 99999999999".to_string(),
            "set session wait_timeout=1".to_string(),
            format!("SELECT GET_LOCK('{name}', 0)"),
        ] {
            line.push(format!("{:?}", idle.query_reply(&sql).await));
        }
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let used = format!("SELECT IS_USED_LOCK('{name}')");
        line.push(format!("{:?}", other.query_reply(&used).await));
        line.push(format!(
            "idle connection usable: {}",
            idle.query_reply(&used).await.is_ok()
        ));
        other.quit().await;
        lines.push(line.join("\n"));
    }
    assert_eq!(lines[0], lines[1], "real (left) and model (right) differ");
}

/// On real MariaDB, three nested `GET_LOCK`s by `mysql-get-lock` are three holds: each
/// `RELEASE_LOCK` answers `1`, the design reports the holds left, and another client
/// gets the lock only after the third release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_get_lock_counts_nested_holds_as_real_mariadb_does() {
    use lock_impl::testing::{Backend, MySqlBackend};
    use lock_impl::{Acquire, AcquireOptions, Release};
    let Some(addr) = real_mysql() else {
        return;
    };
    let info = lock_impl::designs_on(lock_impl::Backend::MySql)
        .find(|d| d.name == "mysql-get-lock")
        .expect("the design");
    let backend = MySqlBackend {
        server: mysql_server(addr),
    };
    let (a, b) = (
        (info.build)(backend.deps().await),
        (info.build)(backend.deps().await),
    );
    let key = lock_impl::testing::fresh_key("nested");
    let opts = AcquireOptions::new(10_000, 0).unwrap();
    let mut guards = Vec::new();
    for _ in 0..3 {
        match a.acquire(&key, opts).await.unwrap() {
            Acquire::Acquired(g) => guards.push(g),
            other => panic!("nested acquire: {other:?}"),
        }
    }
    let mut said = Vec::new();
    while let Some(g) = guards.pop() {
        let other = matches!(b.acquire(&key, opts).await.unwrap(), Acquire::Acquired(_));
        assert!(
            !other,
            "another client got the lock with {} holds left",
            guards.len() + 1
        );
        said.push(a.release(&g).await.unwrap());
    }
    assert_eq!(
        said,
        [
            Release::StillHeld { count: 2 },
            Release::StillHeld { count: 1 },
            Release::Removed
        ]
    );
    match b.acquire(&key, opts).await.unwrap() {
        Acquire::Acquired(g) => assert_eq!(b.release(&g).await.unwrap(), Release::Removed),
        other => panic!("after the last release: {other:?}"),
    }
}

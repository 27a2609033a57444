//! MariaDB in a real run: Debian's `mariadb-server`, one server (a replica is not
//! started yet). Only the clients' links go through the fault proxy. The runner reads
//! MariaDB's own record through Debian's `mariadb` client, over its own connection: a
//! unique-index row's owner, `GET_LOCK`'s holder (`IS_USED_LOCK`), the sessions whose
//! transactions hold row locks, and whether a session is still alive.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;

use lock_impl::Backend;
use lock_impl::testing::{MariaDbOptions, MariaDbServer};
use sim::faults::{FaultPlan, Target};
use sim::history::ServerEvent;
use sim::world::Workload;

use crate::real::system::{
    ClientCtx, DepsFuture, Login, Owner, RealServers, RealSystem, SessionWatch, StartCtx, Started,
    writer_of,
};

/// MariaDB.
pub(crate) struct MariaDb;

impl RealSystem for MariaDb {
    fn backend(&self) -> Backend {
        Backend::MySql
    }

    fn refuses_world(&self, w: &Workload) -> Option<String> {
        w.systems
            .mysql
            .as_ref()
            .is_some_and(|m| m.replica.is_some())
            .then(|| "a MariaDB replica is not started by the real runner yet".into())
    }

    fn refuses_plan(&self, design: &str, _w: &Workload, plan: &FaultPlan) -> Vec<String> {
        let owner_faults = plan.faults.iter().any(|f| {
            f.kind
                .targets()
                .into_iter()
                .any(|t| matches!(t, Target::LockOwner))
        });
        // The lock's owner is read off a unique-index row, the one design whose lock is
        // a row holding its owner value.
        if owner_faults && !design.starts_with("mysql-unique-index") {
            return vec![
                "target LockOwner on MariaDB reads a unique-index row's owner; a GET_LOCK's \
                 owner (IS_USED_LOCK's connection id) is not mapped to its client yet"
                    .into(),
            ];
        }
        Vec::new()
    }

    fn start(&self, w: &Workload, _ctx: &StartCtx) -> Result<Started, String> {
        let spec = w
            .systems
            .mysql
            .as_ref()
            .ok_or("a MariaDB world without its spec")?;
        if spec.replica.is_some() {
            return Err(
                "a MariaDB replica is not started by the real runner yet (mysql-failover \
                 stays model-only)"
                    .into(),
            );
        }
        let opts = MariaDbOptions {
            extra_args: vec![
                format!(
                    "--innodb-flush-log-at-trx-commit={}",
                    spec.innodb_flush_log_at_trx_commit
                ),
                format!("--wait-timeout={}", spec.wait_timeout_s.max(1)),
            ],
        };
        let server = MariaDbServer::start_with(&opts).map_err(|e| e.to_string())?;
        let addr = server.addr();
        Ok(Started {
            servers: Box::new(MariaDbServers {
                name: spec.name.clone(),
                server,
                ask: Ask {
                    addr,
                    login: ("locksim".into(), "locksim".into(), "locksim".into()),
                },
            }),
            addrs: BTreeMap::from([(spec.name.clone(), addr)]),
            net: None,
            precut_ids: Vec::new(),
        })
    }

    fn client_deps<'a>(&'a self, w: &'a Workload, ctx: ClientCtx<'a>) -> DepsFuture<'a> {
        Box::pin(async move {
            let my = w
                .systems
                .mysql
                .as_ref()
                .ok_or("a MariaDB world without its spec")?;
            let a = ctx.addr(&my.name)?;
            let (user, password, database) = ctx.login.clone().unwrap_or((
                my.user.clone(),
                my.password.clone(),
                my.database.clone(),
            ));
            Ok(lock_impl::mysql_deps(
                lock_impl::mysql::MySqlServer {
                    host: a.ip().to_string(),
                    port: a.port(),
                    user,
                    password,
                    database,
                    dialer: Arc::new(lock_impl::zk::TokioDialer),
                    timeout_ms: w.response_timeout_ms,
                },
                ctx.clock,
                ctx.entropy,
                ctx.spawner,
            ))
        })
    }
}

/// The parent's own way to ask MariaDB (outside the fault proxy).
#[derive(Clone)]
struct Ask {
    addr: SocketAddr,
    login: Login,
}

impl Ask {
    /// One statement through Debian's `mariadb` client: its rows, tab-separated, one
    /// a line; `None` if it could not be asked.
    fn query(&self, sql: &str) -> Option<String> {
        let (user, password, database) = &self.login;
        let out = Command::new("mariadb")
            .args([
                "--protocol=tcp",
                "-h",
                &self.addr.ip().to_string(),
                "-P",
                &self.addr.port().to_string(),
                "-u",
                user,
                &format!("-p{password}"),
                "-D",
                database,
                "-N",
                "-B",
                "-e",
                sql,
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The owner value of `key`'s unique-index row (`locks (name, owner)`); `None` if
    /// there is no row (or no answer).
    fn row_owner(&self, key: &str) -> Option<String> {
        let out = self.query(&format!(
            "SELECT owner FROM locks WHERE name = {}",
            sql_quote(key)
        ))?;
        let owner = out.trim();
        (!owner.is_empty()).then(|| owner.to_string())
    }

    /// The connection holding `GET_LOCK(key)` (`IS_USED_LOCK`): `Some(None)` if it is
    /// free.
    fn lock_holder(&self, key: &str) -> Option<Option<u32>> {
        let out = self.query(&format!("SELECT IS_USED_LOCK({})", sql_quote(key)))?;
        Some(out.trim().parse().ok())
    }

    /// The connections whose open transactions hold row locks
    /// (`information_schema.INNODB_TRX`: a running transaction with rows locked, as a
    /// `SELECT … FOR UPDATE` holder's is until its `COMMIT`).
    fn row_lock_holders(&self) -> Option<Vec<u32>> {
        let out = self.query(
            "SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX \
             WHERE trx_state = 'RUNNING' AND trx_rows_locked > 0",
        )?;
        Some(out.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// Whether MariaDB still has a session with connection id `id` (its process list).
    fn session_alive(&self, id: u32) -> Option<bool> {
        let out = self.query(&format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {id}"
        ))?;
        Some(out.trim() != "0")
    }
}

/// What a session held that its end releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// A `GET_LOCK` (`IS_USED_LOCK` named the session).
    GetLock,
    /// Row locks of its open transaction (`INNODB_TRX` named the session): the lock
    /// key's row, in a world whose lock is a row.
    RowLock,
}

/// A world's MariaDB server.
struct MariaDbServers {
    name: String,
    server: MariaDbServer,
    ask: Ask,
}

impl MariaDbServers {
    /// A watch for the end of session `id` after `client`'s reset: once MariaDB ends
    /// it (its process list), its record as the simulator's MySQL server writes it
    /// (`MySqlConnection`, `closed`, releasing `key` or its row lock, as `held` says).
    fn watch_end(&self, client: &str, key: &str, id: u32, held: Held) -> SessionWatch {
        let (ask, name) = (self.ask.clone(), self.name.clone());
        let (client, key) = (client.to_string(), key.to_string());
        Box::new(move || {
            if ask.session_alive(id) != Some(false) {
                return None;
            }
            let (released, row_locks) = match held {
                Held::GetLock => (vec![key.clone()], Vec::new()),
                Held::RowLock => (Vec::new(), vec![key.clone()]),
            };
            Some((
                name.clone(),
                ServerEvent::MySqlConnection {
                    connection: id,
                    client: client.clone(),
                    event: "closed".into(),
                    released,
                    row_locks,
                },
            ))
        })
    }
}

impl RealServers for MariaDbServers {
    fn lock_servers(&self) -> Vec<String> {
        vec![self.name.clone()]
    }

    fn pid(&self, name: &str) -> Option<u32> {
        (name == self.name).then(|| self.server.pid())
    }

    fn kill(&mut self, name: &str) -> bool {
        if name != self.name {
            return false;
        }
        self.server.kill();
        true
    }

    fn restart(&mut self, name: &str) -> Option<Result<(), String>> {
        (name == self.name).then(|| self.server.restart().map_err(|e| e.to_string()))
    }

    fn lock_server(&self, _key: &str) -> Option<String> {
        Some(self.name.clone())
    }

    /// The row's owner, by one answer, names the owner and is the server's record of
    /// the lock at this moment (what the crash probes read).
    fn lock_owner(&self, key: &str) -> Owner {
        let Some(owner) = self.ask.row_owner(key) else {
            return Owner::default();
        };
        let client = writer_of(&owner);
        let record = ServerEvent::Written {
            by: client.clone().unwrap_or_else(|| self.name.clone()),
            key: key.to_string(),
            value: owner,
        };
        Owner {
            client,
            record: Some((self.name.clone(), record)),
        }
    }

    fn logs(&self) -> Vec<(String, PathBuf)> {
        vec![(self.name.clone(), self.server.log_path().to_path_buf())]
    }

    fn login(&self) -> Option<Login> {
        Some(self.ask.login.clone())
    }

    /// `GET_LOCK`'s holder and the sessions whose transactions hold row locks (a
    /// `FOR UPDATE` holder's), by MariaDB's answers before the reset.
    fn sessions_holding(&self, client: &str, key: &str) -> Vec<SessionWatch> {
        let holder = self.ask.lock_holder(key).flatten();
        let rows = self.ask.row_lock_holders().unwrap_or_default();
        let mut watches = Vec::new();
        if let Some(id) = holder {
            watches.push(self.watch_end(client, key, id, Held::GetLock));
        }
        for id in rows.into_iter().filter(|id| Some(*id) != holder) {
            watches.push(self.watch_end(client, key, id, Held::RowLock));
        }
        watches
    }
}

/// `text` as an SQL string literal.
fn sql_quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

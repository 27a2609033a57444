//! The server's own commands: `PING`, `ECHO`, `SELECT`, `TIME`, `INFO`, `PUBLISH`.

use crate::redis::keyspace::DATABASES;
use crate::redis::reply::Reply;

use super::{Core, Ctx, NOT_INTEGER, REDIS_VERSION, hex_id, parse_i64};

impl Core {
    /// The server commands (`PING`, `ECHO`, `SELECT`, `TIME`, `INFO`, `PUBLISH`); `None` for another family's command.
    pub(super) fn server(&mut self, ctx: &mut Ctx, name: &str, argv: &[Vec<u8>]) -> Option<Reply> {
        Some(match name {
            "ping" => match argv.len() {
                1 => Reply::Simple("PONG".into()),
                2 => Reply::Bulk(argv[1].clone()),
                _ => Reply::err("wrong number of arguments for 'ping' command"),
            },
            "echo" => Reply::Bulk(argv[1].clone()),
            "select" => match parse_i64(&argv[1]).map(i32::try_from) {
                None => Reply::err(NOT_INTEGER),
                Some(Err(_)) => Reply::err(
                    "value is out of range, value must between -2147483648 and 2147483647",
                ),
                Some(Ok(id)) => self.select(ctx, id),
            },
            "publish" => {
                let n = self.publish(&argv[1], &argv[2]);
                // Always propagated to replicas (`forceCommandPropagation`).
                self.propagate(ctx.db, argv.to_vec());
                Reply::Integer(n as i64)
            }
            "time" => Reply::Array(vec![
                Reply::bulk((ctx.now_us / 1_000_000).to_string()),
                Reply::bulk((ctx.now_us % 1_000_000).to_string()),
            ]),
            "info" => Reply::Bulk(self.info(&argv[1..], ctx.now_us).into_bytes()),
            _ => return None,
        })
    }

    fn select(&mut self, ctx: &mut Ctx, id: i32) -> Reply {
        if id < 0 || id as usize >= DATABASES {
            return Reply::err("DB index is out of range");
        }
        ctx.db = id as usize;
        Reply::ok()
    }

    /// Delivers `message` on `channel`; returns the number of receivers.
    pub fn publish(&mut self, channel: &[u8], message: &[u8]) -> usize {
        let Some(ids) = self.channels.get(channel) else {
            return 0;
        };
        for &id in ids {
            self.pushes.push((
                id,
                Reply::Push(vec![
                    Reply::bulk("message"),
                    Reply::bulk(channel),
                    Reply::bulk(message),
                ]),
            ));
        }
        ids.len()
    }

    /// The `INFO` text for the requested sections (none / `default` / `all` /
    /// `everything`: server, replication, cluster, keyspace).
    pub fn info(&mut self, sections: &[Vec<u8>], now_us: u64) -> String {
        let wanted: Vec<String> = sections
            .iter()
            .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
            .collect();
        let all = wanted.is_empty()
            || wanted
                .iter()
                .any(|s| s == "default" || s == "all" || s == "everything");
        let want = |name: &str| all || wanted.iter().any(|s| s == name);
        let start = *self.start_us.get_or_insert(now_us);
        let uptime = now_us.saturating_sub(start) / 1_000_000;
        let mut out = String::new();
        let section = |out: &mut String, title: &str, body: String| {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            out.push_str(&format!("# {title}\r\n{body}"));
        };
        if want("server") {
            let lines = [
                format!("redis_version:{REDIS_VERSION}"),
                "redis_git_sha1:00000000".into(),
                "redis_git_dirty:0".into(),
                "redis_build_id:0000000000000000".into(),
                "redis_mode:standalone".into(),
                "os:locksim".into(),
                "arch_bits:64".into(),
                "monotonic_clock:POSIX clock_gettime".into(),
                "multiplexing_api:epoll".into(),
                "atomicvar_api:c11-builtin".into(),
                "gcc_version:0.0.0".into(),
                format!("process_id:{}", 1000 + self.seed % 30000),
                "process_supervised:no".into(),
                format!("run_id:{}", hex_id(self.seed, "run_id")),
                format!("tcp_port:{}", self.tcp_port),
                format!("server_time_usec:{now_us}"),
                format!("uptime_in_seconds:{uptime}"),
                format!("uptime_in_days:{}", uptime / 86400),
                "hz:10".into(),
                "configured_hz:10".into(),
                format!("lru_clock:{}", (now_us / 1_000_000) & ((1 << 24) - 1)),
                "executable:/usr/bin/redis-server".into(),
                "config_file:".into(),
                "io_threads_active:0".into(),
            ];
            section(
                &mut out,
                "Server",
                lines.iter().map(|l| format!("{l}\r\n")).collect(),
            );
        }
        if want("replication") {
            let lines = self.repl.info_lines(now_us);
            section(
                &mut out,
                "Replication",
                lines.iter().map(|l| format!("{l}\r\n")).collect(),
            );
        }
        if want("cluster") {
            section(&mut out, "Cluster", "cluster_enabled:0\r\n".into());
        }
        if want("keyspace") {
            let mut body = String::new();
            for db in 0..DATABASES {
                let n = self.ks.len(db);
                if n > 0 {
                    let x = self.ks.expires(db);
                    body.push_str(&format!("db{db}:keys={n},expires={x},avg_ttl=0\r\n"));
                }
            }
            section(&mut out, "Keyspace", body);
        }
        out
    }
}

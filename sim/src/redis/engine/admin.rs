//! `CLIENT KILL` and `CONFIG GET`/`SET`: the administration Sentinel and clients send.

use super::{Engine, Session, SessionKind};
use crate::redis::commands;
use crate::redis::reply::Reply;

impl Engine {
    pub(super) fn client_kill(&mut self, session: &Session, argv: &[Vec<u8>]) -> Reply {
        if argv.len() == 3 {
            // The old form, `CLIENT KILL addr:port`: the model does not name clients by
            // address.
            return Reply::err("No such client");
        }
        let mut kind: Option<&[u8]> = None;
        let mut skipme = true;
        for pair in argv[2..].chunks(2) {
            if pair.len() < 2 {
                return Reply::err("syntax error");
            }
            match pair[0].to_ascii_lowercase().as_slice() {
                b"type" => kind = Some(&pair[1]),
                b"skipme" => match pair[1].to_ascii_lowercase().as_slice() {
                    b"yes" => skipme = true,
                    b"no" => skipme = false,
                    _ => return Reply::err("syntax error"),
                },
                _ => return Reply::err("syntax error"),
            }
        }
        let wanted = match kind.map(|k| k.to_ascii_lowercase()) {
            None => None,
            Some(k) => match k.as_slice() {
                b"normal" => Some("normal"),
                b"master" => Some("master"),
                b"replica" | b"slave" => Some("replica"),
                b"pubsub" => Some("pubsub"),
                _ => {
                    return Reply::err(format!(
                        "Unknown client type '{}'",
                        String::from_utf8_lossy(kind.unwrap_or_default())
                    ));
                }
            },
        };
        let victims: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(id, _)| !(skipme && **id == session.id))
            .filter(|(_, (k, subscribed))| {
                let t = match (k, subscribed) {
                    (SessionKind::Replica, _) => "replica",
                    (SessionKind::Master, _) => "master",
                    (SessionKind::Normal, true) => "pubsub",
                    (SessionKind::Normal, false) => "normal",
                };
                wanted.is_none_or(|w| w == t)
            })
            .map(|(id, _)| *id)
            .collect();
        for &id in &victims {
            self.core.pushes.push((id, Reply::Close));
        }
        Reply::Integer(victims.len() as i64)
    }

    pub(super) fn config_get(&mut self, patterns: &[Vec<u8>]) -> Reply {
        let repl = &self.core.repl;
        let params: [(&str, String); 4] = [
            (
                "min-replicas-to-write",
                repl.min_replicas_to_write.to_string(),
            ),
            (
                "min-replicas-max-lag",
                repl.min_replicas_max_lag_s.to_string(),
            ),
            ("replica-priority", repl.priority.to_string()),
            ("replica-read-only", "yes".into()),
        ];
        let mut out = Vec::new();
        for (name, value) in &params {
            if patterns
                .iter()
                .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes()))
            {
                out.push((Reply::bulk(name), Reply::bulk(value)));
            }
        }
        Reply::Map(out)
    }

    pub(super) fn config_set(&mut self, args: &[Vec<u8>], now_us: u64) -> Reply {
        if !args.len().is_multiple_of(2) {
            return Reply::err("wrong number of arguments for 'config|set' command");
        }
        for pair in args.chunks(2) {
            let name = pair[0].to_ascii_lowercase();
            let value = commands::parse_i64(&pair[1]);
            let repl = &mut self.core.repl;
            let slot = match name.as_slice() {
                b"min-replicas-to-write" | b"min-slaves-to-write" => {
                    &mut repl.min_replicas_to_write
                }
                b"min-replicas-max-lag" | b"min-slaves-max-lag" => &mut repl.min_replicas_max_lag_s,
                b"replica-priority" | b"slave-priority" => &mut repl.priority,
                _ => {
                    return Reply::err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{}'",
                        String::from_utf8_lossy(&pair[0])
                    ));
                }
            };
            match value {
                Some(v) if v >= 0 && v <= i64::from(i32::MAX) => *slot = v as u64,
                _ => {
                    return Reply::err(format!(
                        "CONFIG SET failed (possibly related to argument '{}') - argument couldn't be parsed into an integer",
                        String::from_utf8_lossy(&pair[0])
                    ));
                }
            }
        }
        self.core.repl.refresh_good_replicas(now_us / 1000);
        Reply::ok()
    }
}

/// Redis's `stringmatchlen` for the patterns `CONFIG GET` sees: `*`, `?`, literals.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob_match(rest, &text[i..])),
        Some((b'?', rest)) => !text.is_empty() && glob_match(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob_match(rest, &text[1..]),
    }
}

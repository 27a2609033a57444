//! Connection commands: `HELLO` and the pub/sub subscriptions.

use super::{
    BAD_CLIENT_NAME, Engine, Session, SessionKind, WRONGPASS, one_or_frames, valid_client_name,
};
use crate::redis::commands::{self, REDIS_VERSION};
use crate::redis::reply::Reply;

impl Engine {
    /// The connection commands (`QUIT`, `HELLO`, `RESET`, `AUTH`, `CLIENT`, the subscriptions); `None` for another command.
    pub(super) fn session_command(
        &mut self,
        session: &mut Session,
        name: &str,
        argv: &[Vec<u8>],
    ) -> Option<Reply> {
        Some(match name {
            "quit" => {
                session.close_after_reply = true;
                Reply::ok()
            }
            "hello" => self.hello(session, argv),
            "reset" => {
                self.disconnect(session);
                self.sessions
                    .insert(session.id, (SessionKind::Normal, false));
                session.channels.clear();
                session.protocol = 2;
                session.name = None;
                session.multi = None;
                session.multi_failed = false;
                Reply::Simple("RESET".into())
            }
            "auth" => match argv.len() {
                2 => Reply::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ),
                3 if argv[1] == b"default" => Reply::ok(),
                3 => Reply::Error(WRONGPASS.into()),
                _ => Reply::err("syntax error"),
            },
            "client|id" => Reply::Integer(session.id as i64),
            "client|getname" => session.name.clone().map_or(Reply::Nil, Reply::Bulk),
            "client|setname" => {
                if !valid_client_name(&argv[2]) {
                    return Some(Reply::err(BAD_CLIENT_NAME));
                }
                session.name = if argv[2].is_empty() {
                    None
                } else {
                    Some(argv[2].clone())
                };
                Reply::ok()
            }
            "client|kill" => self.client_kill(session, argv),
            "subscribe" => {
                let reply = self.subscribe(session, &argv[1..]);
                self.sessions.insert(session.id, (session.kind, true));
                reply
            }
            "unsubscribe" => {
                let reply = self.unsubscribe(session, &argv[1..]);
                let subscribing = !session.channels.is_empty();
                self.sessions
                    .insert(session.id, (session.kind, subscribing));
                reply
            }
            _ => return None,
        })
    }

    pub(super) fn hello(&mut self, session: &mut Session, argv: &[Vec<u8>]) -> Reply {
        let mut ver = None;
        if argv.len() >= 2 {
            match commands::parse_i64(&argv[1]) {
                None => return Reply::err("Protocol version is not an integer or out of range"),
                Some(v) if !(2..=3).contains(&v) => {
                    return Reply::Error("NOPROTO unsupported protocol version".into());
                }
                Some(v) => ver = Some(v as u8),
            }
        }
        let mut auth: Option<(&[u8], &[u8])> = None;
        let mut name: Option<&[u8]> = None;
        let mut j = 2;
        while j < argv.len() {
            let more = argv.len() - 1 - j;
            if argv[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                auth = Some((&argv[j + 1], &argv[j + 2]));
                j += 2;
            } else if argv[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                name = Some(&argv[j + 1]);
                j += 1;
            } else {
                return Reply::err(format!(
                    "Syntax error in HELLO option '{}'",
                    commands::c_str(&argv[j], usize::MAX)
                ));
            }
            j += 1;
        }
        if let Some((user, _)) = auth
            && user != b"default"
        {
            return Reply::Error(WRONGPASS.into());
        }
        if let Some(name) = name {
            if !valid_client_name(name) {
                return Reply::err(BAD_CLIENT_NAME);
            }
            session.name = if name.is_empty() {
                None
            } else {
                Some(name.to_vec())
            };
        }
        if let Some(v) = ver {
            session.protocol = v;
        }
        Reply::Map(vec![
            (Reply::bulk("server"), Reply::bulk("redis")),
            (Reply::bulk("version"), Reply::bulk(REDIS_VERSION)),
            (
                Reply::bulk("proto"),
                Reply::Integer(i64::from(session.protocol)),
            ),
            (Reply::bulk("id"), Reply::Integer(session.id as i64)),
            (Reply::bulk("mode"), Reply::bulk("standalone")),
            (
                Reply::bulk("role"),
                Reply::bulk(if self.core.repl.is_replica() {
                    "replica"
                } else {
                    "master"
                }),
            ),
            (Reply::bulk("modules"), Reply::Array(Vec::new())),
        ])
    }

    pub(super) fn subscribe(&mut self, session: &mut Session, channels: &[Vec<u8>]) -> Reply {
        let mut frames = Vec::new();
        for ch in channels {
            if !session.channels.contains(ch) {
                session.channels.push(ch.clone());
                self.core
                    .channels
                    .entry(ch.clone())
                    .or_default()
                    .push(session.id);
            }
            frames.push(Reply::Push(vec![
                Reply::bulk("subscribe"),
                Reply::Bulk(ch.clone()),
                Reply::Integer(session.channels.len() as i64),
            ]));
        }
        one_or_frames(frames)
    }

    pub(super) fn unsubscribe(&mut self, session: &mut Session, channels: &[Vec<u8>]) -> Reply {
        let targets: Vec<Vec<u8>> = if channels.is_empty() {
            session.channels.clone()
        } else {
            channels.to_vec()
        };
        if targets.is_empty() {
            return Reply::Push(vec![
                Reply::bulk("unsubscribe"),
                Reply::Nil,
                Reply::Integer(0),
            ]);
        }
        let mut frames = Vec::new();
        for ch in targets {
            if let Some(pos) = session.channels.iter().position(|c| *c == ch) {
                session.channels.remove(pos);
                if let Some(ids) = self.core.channels.get_mut(&ch) {
                    ids.retain(|&id| id != session.id);
                    if ids.is_empty() {
                        self.core.channels.remove(&ch);
                    }
                }
            }
            frames.push(Reply::Push(vec![
                Reply::bulk("unsubscribe"),
                Reply::Bulk(ch),
                Reply::Integer(session.channels.len() as i64),
            ]));
        }
        one_or_frames(frames)
    }
}

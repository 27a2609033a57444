//! The string commands: `GET`, `SET` and its options, `SETNX`, `GETSET`, `GETDEL`,
//! `INCR` and friends.

use crate::redis::keyspace::{Entry, Value};
use crate::redis::reply::Reply;

use super::{Core, Ctx, NOT_INTEGER, OVERFLOW, parse_i64, wrongtype};

impl Core {
    /// The string commands (`GET`, `SET`, `SETNX`, `GETSET`, `GETDEL`, `INCR`, ...); `None` for another family's command.
    pub(super) fn strings(&mut self, ctx: &mut Ctx, name: &str, argv: &[Vec<u8>]) -> Option<Reply> {
        Some(match name {
            "get" => self.get_reply(ctx, &argv[1]),
            "set" => self.set(ctx, argv),
            "setnx" => {
                if self.ks.get(ctx.db, &argv[1], ctx.now_us).is_some() {
                    Reply::Integer(0)
                } else {
                    self.ks.set_string(
                        ctx.db,
                        &argv[1],
                        argv[2].clone(),
                        None,
                        ctx.now_us,
                        &ctx.peer,
                    );
                    self.propagate(ctx.db, argv.to_vec());
                    Reply::Integer(1)
                }
            }
            // t_string.c getsetCommand: the old value (WRONGTYPE before any change),
            // then a plain SET that drops any TTL, propagated as `SET key value`.
            "getset" => {
                let old = self.get_reply(ctx, &argv[1]);
                if matches!(old, Reply::Error(_)) {
                    return Some(old);
                }
                self.ks.set_string(
                    ctx.db,
                    &argv[1],
                    argv[2].clone(),
                    None,
                    ctx.now_us,
                    &ctx.peer,
                );
                self.propagate(
                    ctx.db,
                    vec![b"SET".to_vec(), argv[1].clone(), argv[2].clone()],
                );
                old
            }
            "getdel" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Nil,
                Some(Entry {
                    value: Value::Str(s),
                    ..
                }) => {
                    let s = s.clone();
                    self.ks.delete(ctx.db, &argv[1], ctx.now_us, &ctx.peer);
                    self.propagate(ctx.db, vec![b"DEL".to_vec(), argv[1].clone()]);
                    Reply::Bulk(s)
                }
                Some(_) => wrongtype(),
            },
            "incr" => self.incr(ctx, argv, 1),
            "decr" => self.incr(ctx, argv, -1),
            "incrby" | "decrby" => match parse_i64(&argv[2]) {
                None => Reply::err(NOT_INTEGER),
                Some(by) if name == "decrby" => match by.checked_neg() {
                    // Redis: "decrement would overflow" for DECRBY LLONG_MIN.
                    None => Reply::err("decrement would overflow"),
                    Some(by) => self.incr(ctx, argv, by),
                },
                Some(by) => self.incr(ctx, argv, by),
            },
            _ => return None,
        })
    }

    /// `GET key`'s reply: the string, nil, or `WRONGTYPE`.
    fn get_reply(&mut self, ctx: &Ctx, key: &[u8]) -> Reply {
        match self.ks.get(ctx.db, key, ctx.now_us) {
            None => Reply::Nil,
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => Reply::Bulk(s.clone()),
            Some(_) => wrongtype(),
        }
    }

    fn set(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        #[derive(PartialEq, Clone, Copy)]
        enum Unit {
            Ex,
            Px,
            ExAt,
            PxAt,
        }
        let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
        let mut expire: Option<(Unit, &[u8])> = None;
        let mut j = 3;
        while j < argv.len() {
            let opt = argv[j].to_ascii_lowercase();
            let next = argv.get(j + 1).map(Vec::as_slice);
            let current = expire.map(|(u, _)| u);
            // Redis's parseExtendedStringArgumentsOrReply: an expiry option is refused
            // after KEEPTTL or after a *different* expiry option.
            let exp_ok = |me: Unit| !keepttl && current.is_none_or(|u| u == me) && next.is_some();
            let unit = match opt.as_slice() {
                b"ex" => Some(Unit::Ex),
                b"px" => Some(Unit::Px),
                b"exat" => Some(Unit::ExAt),
                b"pxat" => Some(Unit::PxAt),
                _ => None,
            };
            match (opt.as_slice(), unit) {
                (b"nx", _) if !xx => nx = true,
                (b"xx", _) if !nx => xx = true,
                (b"get", _) => get = true,
                (b"keepttl", _) if current.is_none() => keepttl = true,
                (_, Some(u)) if exp_ok(u) => {
                    expire = Some((u, next.unwrap_or_default()));
                    j += 1;
                }
                _ => return Reply::err("syntax error"),
            }
            j += 1;
        }
        let mut expire_at: Option<i64> = None;
        if let Some((unit, raw)) = expire {
            let Some(mut ms) = parse_i64(raw) else {
                return Reply::err(NOT_INTEGER);
            };
            let seconds = matches!(unit, Unit::Ex | Unit::ExAt);
            if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
                return Reply::err("invalid expire time in 'set' command");
            }
            if seconds {
                ms *= 1000;
            }
            if matches!(unit, Unit::Ex | Unit::Px) {
                ms = ms.wrapping_add(ctx.now_ms());
            }
            if ms <= 0 {
                return Reply::err("invalid expire time in 'set' command");
            }
            expire_at = Some(ms);
        }
        let old = self.ks.get(ctx.db, &argv[1], ctx.now_us).cloned();
        let get_reply = if get {
            match &old {
                None => Some(Reply::Nil),
                Some(Entry {
                    value: Value::Str(s),
                    ..
                }) => Some(Reply::Bulk(s.clone())),
                Some(_) => return wrongtype(),
            }
        } else {
            None
        };
        let found = old.is_some();
        if (nx && found) || (xx && !found) {
            return get_reply.unwrap_or(Reply::Nil);
        }
        let explicit = expire_at;
        if keepttl {
            expire_at = old.and_then(|e| e.expire_at_ms);
        }
        self.ks.set_string(
            ctx.db,
            &argv[1],
            argv[2].clone(),
            expire_at,
            ctx.now_us,
            &ctx.peer,
        );
        let propagated = match explicit {
            // `SET key value PXAT ms`, whatever the options were.
            Some(ms) => vec![
                b"SET".to_vec(),
                argv[1].clone(),
                argv[2].clone(),
                b"PXAT".to_vec(),
                ms.to_string().into_bytes(),
            ],
            // Without an expiry, as sent minus any `GET`.
            None => argv
                .iter()
                .enumerate()
                .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
                .map(|(_, a)| a.clone())
                .collect(),
        };
        self.propagate(ctx.db, propagated);
        get_reply.unwrap_or_else(Reply::ok)
    }

    fn incr(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>], by: i64) -> Reply {
        let key = &argv[1];
        let current = match self.ks.get(ctx.db, key, ctx.now_us) {
            None => 0,
            Some(Entry {
                value: Value::Str(s),
                ..
            }) => match parse_i64(s) {
                Some(v) => v,
                None => return Reply::err(NOT_INTEGER),
            },
            Some(_) => return wrongtype(),
        };
        let Some(new) = current.checked_add(by) else {
            return Reply::err(OVERFLOW);
        };
        self.ks.update_string(
            ctx.db,
            key,
            new.to_string().into_bytes(),
            ctx.now_us,
            &ctx.peer,
        );
        self.propagate(ctx.db, argv.to_vec());
        Reply::Integer(new)
    }
}

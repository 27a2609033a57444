//! The keyspace commands: `TYPE`, `DEL`, `EXISTS`, expiry (`EXPIRE` and friends,
//! `TTL`, `PERSIST`), `DBSIZE`, `FLUSHALL`/`FLUSHDB`.

use crate::redis::keyspace::{Entry, Value};
use crate::redis::reply::Reply;

use super::{Core, Ctx, NOT_INTEGER, c_str, parse_i64};

impl Core {
    /// The keyspace commands (`TYPE`, `DEL`, `EXISTS`, expiry, `DBSIZE`, `FLUSHALL`); `None` for another family's command.
    pub(super) fn keys(&mut self, ctx: &mut Ctx, name: &str, argv: &[Vec<u8>]) -> Option<Reply> {
        Some(match name {
            "type" => Reply::Simple(
                match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                    None => "none",
                    Some(Entry {
                        value: Value::Str(_),
                        ..
                    }) => "string",
                    Some(_) => "hash",
                }
                .into(),
            ),
            "del" | "unlink" => {
                let mut n = 0;
                for key in &argv[1..] {
                    if self.ks.delete(ctx.db, key, ctx.now_us, &ctx.peer) {
                        n += 1;
                    }
                }
                if n > 0 {
                    self.propagate(ctx.db, argv.to_vec());
                }
                Reply::Integer(n)
            }
            "exists" => {
                let mut n = 0;
                for key in &argv[1..] {
                    if self.ks.get(ctx.db, key, ctx.now_us).is_some() {
                        n += 1;
                    }
                }
                Reply::Integer(n)
            }
            "expire" => self.expire(ctx, argv, ctx.now_ms(), true, "expire"),
            "pexpire" => self.expire(ctx, argv, ctx.now_ms(), false, "pexpire"),
            "expireat" => self.expire(ctx, argv, 0, true, "expireat"),
            "pexpireat" => self.expire(ctx, argv, 0, false, "pexpireat"),
            "ttl" | "pttl" => {
                let now_ms = ctx.now_ms();
                match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                    None => Reply::Integer(-2),
                    Some(Entry {
                        expire_at_ms: None, ..
                    }) => Reply::Integer(-1),
                    Some(Entry {
                        expire_at_ms: Some(when),
                        ..
                    }) => {
                        let ttl = when.saturating_sub(now_ms).max(0);
                        Reply::Integer(if name == "pttl" {
                            ttl
                        } else {
                            (ttl + 500) / 1000
                        })
                    }
                }
            }
            "persist" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                Some(e) if e.expire_at_ms.is_some() => {
                    self.ks
                        .set_expiry(ctx.db, &argv[1], None, ctx.now_us, &ctx.peer);
                    self.propagate(ctx.db, argv.to_vec());
                    Reply::Integer(1)
                }
                _ => Reply::Integer(0),
            },
            "dbsize" => Reply::Integer(self.ks.len(ctx.db) as i64),
            "flushall" | "flushdb" => {
                if argv.len() > 2
                    || (argv.len() == 2
                        && !argv[1].eq_ignore_ascii_case(b"sync")
                        && !argv[1].eq_ignore_ascii_case(b"async"))
                {
                    return Some(Reply::err("syntax error"));
                }
                let db = if name == "flushdb" {
                    Some(ctx.db)
                } else {
                    None
                };
                self.ks.flush(db, ctx.now_us, &ctx.peer);
                self.propagate(ctx.db, argv.to_vec());
                Reply::ok()
            }
            _ => return None,
        })
    }

    fn expire(
        &mut self,
        ctx: &mut Ctx,
        argv: &[Vec<u8>],
        base_ms: i64,
        seconds: bool,
        name: &str,
    ) -> Reply {
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for opt in &argv[3..] {
            match opt.to_ascii_lowercase().as_slice() {
                b"nx" => nx = true,
                b"xx" => xx = true,
                b"gt" => gt = true,
                b"lt" => lt = true,
                _ => return Reply::err(format!("Unsupported option {}", c_str(opt, usize::MAX))),
            }
        }
        if nx && (xx || gt || lt) {
            return Reply::err("NX and XX, GT or LT options at the same time are not compatible");
        }
        if gt && lt {
            return Reply::err("GT and LT options at the same time are not compatible");
        }
        let Some(mut when) = parse_i64(&argv[2]) else {
            return Reply::err(NOT_INTEGER);
        };
        let invalid = || Reply::err(format!("invalid expire time in '{name}' command"));
        if seconds {
            if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
                return invalid();
            }
            when *= 1000;
        }
        if when > i64::MAX - base_ms {
            return invalid();
        }
        when += base_ms;
        let now_ms = ctx.now_ms();
        let Some(entry) = self.ks.get(ctx.db, &argv[1], ctx.now_us) else {
            return Reply::Integer(0);
        };
        let current = entry.expire_at_ms;
        if (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|c| when <= c))
            || (lt && current.is_some_and(|c| when >= c))
        {
            return Reply::Integer(0);
        }
        // `checkAlreadyExpired`: a replica keeps a key with a past expiry and waits for
        // its master's DEL.
        if when <= now_ms && !self.repl.is_replica() {
            self.ks.delete(ctx.db, &argv[1], ctx.now_us, &ctx.peer);
            self.propagate(ctx.db, vec![b"DEL".to_vec(), argv[1].clone()]);
        } else {
            self.ks
                .set_expiry(ctx.db, &argv[1], Some(when), ctx.now_us, &ctx.peer);
            let mut propagated = argv.to_vec();
            propagated[0] = b"PEXPIREAT".to_vec();
            propagated[2] = when.to_string().into_bytes();
            self.propagate(ctx.db, propagated);
        }
        Reply::Integer(1)
    }
}

//! The hash commands: `HSET`, `HGET`, `HEXISTS`, `HLEN`, `HGETALL`, `HKEYS`,
//! `HINCRBY`, `HDEL`.

use crate::redis::keyspace::{Entry, Value};
use crate::redis::reply::Reply;

use super::{Core, Ctx, NOT_INTEGER, OVERFLOW, parse_i64, wrongtype};

impl Core {
    /// The hash commands (`HSET`, `HGET`, ..., `HINCRBY`, `HDEL`); `None` for another family's command.
    pub(super) fn hashes(&mut self, ctx: &mut Ctx, name: &str, argv: &[Vec<u8>]) -> Option<Reply> {
        Some(match name {
            "hset" => self.hset(ctx, argv),
            "hget" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Nil,
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => h
                    .get(&argv[2])
                    .map_or(Reply::Nil, |v| Reply::Bulk(v.clone())),
                Some(_) => wrongtype(),
            },
            "hexists" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Integer(0),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Integer(i64::from(h.contains_key(&argv[2]))),
                Some(_) => wrongtype(),
            },
            "hlen" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Integer(0),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Integer(h.len() as i64),
                Some(_) => wrongtype(),
            },
            "hgetall" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Map(Vec::new()),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Map(
                    h.iter()
                        .map(|(f, v)| (Reply::Bulk(f.clone()), Reply::Bulk(v.clone())))
                        .collect(),
                ),
                Some(_) => wrongtype(),
            },
            // `hkeysCommand` (`genericHgetallCommand` with `OBJ_HASH_KEY`): the fields in
            // the hash's order (a listpack's insertion order, which the model keeps for
            // every hash), an empty array for a missing key.
            "hkeys" => match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
                None => Reply::Array(Vec::new()),
                Some(Entry {
                    value: Value::Hash(h),
                    ..
                }) => Reply::Array(h.keys().map(|f| Reply::Bulk(f.clone())).collect()),
                Some(_) => wrongtype(),
            },
            "hincrby" => self.hincrby(ctx, argv),
            "hdel" => self.hdel(ctx, argv),
            _ => return None,
        })
    }

    fn hset(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        if argv.len() % 2 == 1 {
            return Reply::err("wrong number of arguments for 'hset' command");
        }
        if let Some(e) = self.ks.get(ctx.db, &argv[1], ctx.now_us)
            && !matches!(e.value, Value::Hash(_))
        {
            return wrongtype();
        }
        let mut created = 0;
        for pair in argv[2..].chunks(2) {
            match self.ks.hash_write(
                ctx.db,
                &argv[1],
                &pair[0],
                pair[1].clone(),
                ctx.now_us,
                &ctx.peer,
            ) {
                Ok(true) => created += 1,
                Ok(false) => {}
                Err(_) => return wrongtype(),
            }
        }
        self.propagate(ctx.db, argv.to_vec());
        Reply::Integer(created)
    }

    fn hincrby(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        let Some(by) = parse_i64(&argv[3]) else {
            return Reply::err(NOT_INTEGER);
        };
        let current = match self.ks.get(ctx.db, &argv[1], ctx.now_us) {
            None => 0,
            Some(Entry {
                value: Value::Hash(h),
                ..
            }) => match h.get(&argv[2]) {
                None => 0,
                Some(v) => match parse_i64(v) {
                    Some(v) => v,
                    None => return Reply::err("hash value is not an integer"),
                },
            },
            Some(_) => return wrongtype(),
        };
        let Some(new) = current.checked_add(by) else {
            return Reply::err(OVERFLOW);
        };
        match self.ks.hash_write(
            ctx.db,
            &argv[1],
            &argv[2],
            new.to_string().into_bytes(),
            ctx.now_us,
            &ctx.peer,
        ) {
            Ok(_) => {
                self.propagate(ctx.db, argv.to_vec());
                Reply::Integer(new)
            }
            Err(_) => wrongtype(),
        }
    }

    fn hdel(&mut self, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Reply {
        match self
            .ks
            .hash_delete(ctx.db, &argv[1], &argv[2..], ctx.now_us, &ctx.peer)
        {
            Ok(n) => {
                if n > 0 {
                    self.propagate(ctx.db, argv.to_vec());
                }
                Reply::Integer(n)
            }
            Err(_) => wrongtype(),
        }
    }
}

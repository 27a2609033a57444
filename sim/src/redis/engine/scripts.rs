//! Script commands: `EVAL`, `EVALSHA` and their read-only forms, and `SCRIPT`
//! (`LOAD`, `EXISTS`, `FLUSH`, `KILL`), with the busy script a spent budget leaves.

use super::{BusyScript, Engine, NOTBUSY, Session, UNKILLABLE, compile_error};
use crate::redis::commands::{self, Ctx};
use crate::redis::reply::Reply;

impl Engine {
    /// The script commands (`EVAL` and its kin, `SCRIPT`); `None` for another command.
    pub(super) fn script_command(
        &mut self,
        session: &mut Session,
        ctx: &mut Ctx,
        name: &str,
        argv: &[Vec<u8>],
    ) -> Option<Reply> {
        Some(match name {
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" => {
                ctx.read_only = name.ends_with("_ro");
                let writes_before = self.core.ks.pending_events();
                let reply = self.eval(ctx, name.starts_with("evalsha"), argv);
                if !self.lua.budget_spent() {
                    return Some(reply);
                }
                // The script ran past its budget: the server is busy until SCRIPT KILL;
                // the caller hears nothing until then (its reply is held).
                self.busy = Some(BusyScript {
                    session: session.id,
                    reply,
                    wrote: self.core.ks.pending_events() > writes_before,
                });
                Reply::Frames(Vec::new())
            }
            "script|kill" => match self.busy.take() {
                None => Reply::Error(NOTBUSY.into()),
                Some(busy) if busy.wrote => {
                    self.busy = Some(busy);
                    Reply::Error(UNKILLABLE.into())
                }
                Some(busy) => {
                    self.core.pushes.push((busy.session, busy.reply));
                    Reply::ok()
                }
            },
            "script|load" => match self.lua.load(&argv[2]) {
                Ok(sha) => Reply::bulk(sha),
                Err(e) => compile_error(&e),
            },
            "script|exists" => Reply::Array(
                argv[2..]
                    .iter()
                    .map(|sha| {
                        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                        Reply::Integer(i64::from(self.lua.exists(&sha)))
                    })
                    .collect(),
            ),
            "script|flush" => {
                if argv.len() > 3
                    || (argv.len() == 3
                        && !argv[2].eq_ignore_ascii_case(b"sync")
                        && !argv[2].eq_ignore_ascii_case(b"async"))
                {
                    return Some(Reply::err("SCRIPT FLUSH only support SYNC|ASYNC option"));
                }
                self.lua.flush();
                Reply::ok()
            }
            _ => return None,
        })
    }

    fn eval(&mut self, ctx: &mut Ctx, by_sha: bool, argv: &[Vec<u8>]) -> Reply {
        let Some(numkeys) = commands::parse_i64(&argv[2]) else {
            return Reply::err("value is not an integer or out of range");
        };
        if numkeys > (argv.len() - 3) as i64 {
            return Reply::err("Number of keys can't be greater than number of args");
        }
        if numkeys < 0 {
            return Reply::err("Number of keys can't be negative");
        }
        let sha = if by_sha {
            let sha = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
            if sha.len() != 40 || !self.lua.exists(&sha) {
                return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into());
            }
            sha
        } else {
            match self.lua.load(&argv[1]) {
                Ok(sha) => sha,
                Err(e) => return compile_error(&e),
            }
        };
        let split = 3 + numkeys as usize;
        self.lua
            .run(&mut self.core, ctx, &sha, &argv[3..split], &argv[split..])
    }
}

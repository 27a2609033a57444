//! The commands a Sentinel answers: what clients ask (`SENTINEL
//! GET-MASTER-ADDR-BY-NAME`, `SENTINEL MASTER`, `SENTINEL REPLICAS`, `ROLE`, `INFO`) and
//! what the other Sentinels send (`SENTINEL IS-MASTER-DOWN-BY-ADDR`, `PUBLISH
//! __sentinel__:hello`). Replies and errors as Redis 7.0's Sentinel gives them;
//! anything else gets Redis's unknown-command error.

use crate::redis::Reply;
use crate::redis::commands::{unknown_command, unknown_subcommand};

use super::{Addr, Failover, Instance, Role, Sentinel};

fn bulk(s: impl AsRef<str>) -> Reply {
    Reply::bulk(s.as_ref().as_bytes())
}

fn arity(name: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{name}' command"))
}

fn text(a: &[u8]) -> String {
    String::from_utf8_lossy(a).into_owned()
}

impl Sentinel {
    /// Answers one command at `now_ms`. Actions it causes (a master switched by a
    /// hello) are handed out by the next [`Sentinel::timer`] or [`Sentinel::take_actions`].
    pub fn command(&mut self, argv: &[Vec<u8>], now: u64) -> Reply {
        let Some(name) = argv.first() else {
            return Reply::err("empty command");
        };
        match name.to_ascii_lowercase().as_slice() {
            b"ping" => match argv.len() {
                1 => Reply::Simple("PONG".into()),
                2 => Reply::bulk(&argv[1]),
                _ => arity("ping"),
            },
            b"role" => {
                if argv.len() != 1 {
                    return arity("role");
                }
                Reply::Array(vec![
                    bulk("sentinel"),
                    Reply::Array(vec![bulk(&self.cfg.master_name)]),
                ])
            }
            b"info" => Reply::bulk(self.info(now).as_bytes()),
            b"publish" => {
                if argv.len() != 3 {
                    return arity("publish");
                }
                if argv[1] != super::HELLO_CHANNEL.as_bytes() {
                    return Reply::err(
                        "ERR Only HELLO messages are accepted by Sentinel instances.",
                    );
                }
                self.process_hello(&text(&argv[2]), now);
                Reply::Integer(1)
            }
            b"sentinel" => self.sentinel_command(argv, now),
            b"client" => match argv.get(1).map(|a| a.to_ascii_lowercase()) {
                Some(sub) if sub == b"setname" && argv.len() == 3 => Reply::ok(),
                Some(_) => unknown_subcommand(argv),
                None => arity("client"),
            },
            _ => unknown_command(argv),
        }
    }

    /// Actions decided outside the timer (a hello that switched the master).
    pub fn take_actions(&mut self) -> Vec<super::Action> {
        std::mem::take(&mut self.outbox)
    }

    fn sentinel_command(&mut self, argv: &[Vec<u8>], now: u64) -> Reply {
        let Some(sub) = argv.get(1) else {
            return arity("sentinel");
        };
        let sub = text(sub).to_ascii_lowercase();
        let need = |n: usize| -> Option<Reply> {
            (argv.len() != n).then(|| arity(&format!("sentinel|{sub}")))
        };
        match sub.as_str() {
            "get-master-addr-by-name" => {
                if let Some(e) = need(3) {
                    return e;
                }
                if argv[2] != self.cfg.master_name.as_bytes() {
                    return Reply::NilArray;
                }
                let a = self.master_addr();
                Reply::Array(vec![bulk(&a.host), bulk(a.port.to_string())])
            }
            "is-master-down-by-addr" => {
                if let Some(e) = need(6) {
                    return e;
                }
                let (Ok(port), Ok(epoch)) =
                    (text(&argv[3]).parse::<i64>(), text(&argv[4]).parse::<i64>())
                else {
                    return Reply::err("value is not an integer or out of range");
                };
                let is_master = self.master.addr.host == text(&argv[2])
                    && i64::from(self.master.addr.port) == port;
                let down =
                    self.tilt_since.is_none() && is_master && self.master.sdown_since.is_some();
                let mut leader = None;
                let mut leader_epoch = 0;
                let runid = text(&argv[5]);
                if is_master && runid != "*" {
                    (leader, leader_epoch) = self.vote_leader(epoch as u64, &runid, now);
                }
                Reply::Array(vec![
                    Reply::Integer(i64::from(down)),
                    bulk(leader.unwrap_or_else(|| "*".into())),
                    Reply::Integer(leader_epoch as i64),
                ])
            }
            "myid" => need(2).unwrap_or_else(|| bulk(&self.myid)),
            "masters" => need(2).unwrap_or_else(|| Reply::Array(vec![self.master_fields(now)])),
            "master" => {
                if let Some(e) = need(3) {
                    return e;
                }
                if argv[2] != self.cfg.master_name.as_bytes() {
                    return Reply::err("No such master with that name");
                }
                self.master_fields(now)
            }
            "replicas" | "slaves" => {
                if let Some(e) = need(3) {
                    return e;
                }
                if argv[2] != self.cfg.master_name.as_bytes() {
                    return Reply::err("No such master with that name");
                }
                Reply::Array(
                    self.replicas
                        .values()
                        .map(|r| self.instance_fields(r, false, now))
                        .collect(),
                )
            }
            "ckquorum" => {
                if let Some(e) = need(3) {
                    return e;
                }
                if argv[2] != self.cfg.master_name.as_bytes() {
                    return Reply::err("No such master with that name");
                }
                let usable = 1 + self.peers.values().filter(|p| !p.link.disconnected).count();
                let voters = self.peers.len() + 1;
                let majority = voters / 2 + 1;
                if usable < self.cfg.quorum as usize {
                    Reply::Error(format!(
                        "NOQUORUM {usable} usable Sentinels. Not enough available Sentinels to reach the specified quorum for this master. Not enough available Sentinels to reach the majority and authorize a failover"
                    ))
                } else if usable < majority {
                    Reply::Error(format!(
                        "NOQUORUM {usable} usable Sentinels. Not enough available Sentinels to reach the majority and authorize a failover"
                    ))
                } else {
                    Reply::Simple(format!(
                        "OK {usable} usable Sentinels. Quorum and failover authorization can be reached"
                    ))
                }
            }
            _ => unknown_subcommand(argv),
        }
    }

    fn flags(&self, inst: &Instance, is_master: bool) -> String {
        let mut f = Vec::new();
        if inst.sdown_since.is_some() {
            f.push("s_down");
        }
        if is_master && self.odown_since.is_some() {
            f.push("o_down");
        }
        f.push(if is_master { "master" } else { "slave" });
        if inst.link.disconnected {
            f.push("disconnected");
        }
        if is_master && self.failover != Failover::None {
            f.push("failover_in_progress");
        }
        if inst.promoted {
            f.push("promoted");
        }
        if inst.reconf_sent.is_some() {
            f.push("reconf_sent");
        }
        if inst.reconf_inprog {
            f.push("reconf_inprog");
        }
        if inst.reconf_done {
            f.push("reconf_done");
        }
        f.join(",")
    }

    fn master_fields(&self, now: u64) -> Reply {
        self.instance_fields(&self.master, true, now)
    }

    /// The field list of `SENTINEL MASTER` / `REPLICAS` (`addReplySentinelRedisInstance`),
    /// the fields clients read; the rest are left out.
    fn instance_fields(&self, inst: &Instance, is_master: bool, now: u64) -> Reply {
        let mut kv: Vec<(&str, String)> = vec![
            (
                "name",
                if is_master {
                    self.cfg.master_name.clone()
                } else {
                    inst.addr.to_string()
                },
            ),
            ("ip", inst.addr.host.clone()),
            ("port", inst.addr.port.to_string()),
            ("runid", inst.runid.clone().unwrap_or_default()),
            ("flags", self.flags(inst, is_master)),
            ("link-pending-commands", inst.link.pending.to_string()),
            ("link-refcount", "1".into()),
            (
                "last-ping-sent",
                if inst.link.act_ping_ms != 0 {
                    now.saturating_sub(inst.link.act_ping_ms).to_string()
                } else {
                    "0".into()
                },
            ),
            (
                "last-ok-ping-reply",
                now.saturating_sub(inst.link.last_avail_ms).to_string(),
            ),
            (
                "last-ping-reply",
                now.saturating_sub(inst.link.last_pong_ms).to_string(),
            ),
        ];
        if let Some(t) = inst.sdown_since {
            kv.push(("s-down-time", now.saturating_sub(t).to_string()));
        }
        if is_master && let Some(t) = self.odown_since {
            kv.push(("o-down-time", now.saturating_sub(t).to_string()));
        }
        kv.push((
            "down-after-milliseconds",
            self.cfg.down_after_ms.to_string(),
        ));
        kv.push((
            "info-refresh",
            if inst.info_refresh == 0 {
                "0".into()
            } else {
                now.saturating_sub(inst.info_refresh).to_string()
            },
        ));
        kv.push((
            "role-reported",
            match inst.role_reported {
                Role::Replica => "slave",
                _ => "master",
            }
            .into(),
        ));
        kv.push((
            "role-reported-time",
            now.saturating_sub(inst.role_reported_ms).to_string(),
        ));
        if is_master {
            kv.push(("config-epoch", self.config_epoch.to_string()));
            kv.push(("num-slaves", self.replicas.len().to_string()));
            kv.push(("num-other-sentinels", self.peers.len().to_string()));
            kv.push(("quorum", self.cfg.quorum.to_string()));
            kv.push(("failover-timeout", self.cfg.failover_timeout_ms.to_string()));
            kv.push(("parallel-syncs", self.cfg.parallel_syncs.to_string()));
        } else {
            kv.push((
                "master-link-down-time",
                inst.master_link_down_ms.to_string(),
            ));
            kv.push((
                "master-link-status",
                if inst.slave_link_up { "ok" } else { "err" }.into(),
            ));
            let m = inst
                .slave_master
                .clone()
                .unwrap_or_else(|| Addr::new("?", 0));
            kv.push(("master-host", m.host));
            kv.push(("master-port", m.port.to_string()));
            kv.push(("slave-priority", inst.priority.to_string()));
            kv.push(("slave-repl-offset", inst.repl_offset.to_string()));
            kv.push(("replica-announced", "1".into()));
        }
        Reply::Array(
            kv.into_iter()
                .flat_map(|(k, v)| [bulk(k), bulk(v)])
                .collect(),
        )
    }

    fn info(&self, _now: u64) -> String {
        let status = if self.odown_since.is_some() {
            "odown"
        } else if self.master.sdown_since.is_some() {
            "sdown"
        } else {
            "ok"
        };
        let a = &self.master.addr;
        format!(
            "# Sentinel\r\nsentinel_masters:1\r\nsentinel_tilt:{}\r\nsentinel_running_scripts:0\r\nsentinel_scripts_queue_length:0\r\nsentinel_simulate_failure_flags:0\r\nmaster0:name={},status={status},address={}:{},slaves={},sentinels={}\r\n",
            u8::from(self.tilt_since.is_some()),
            self.cfg.master_name,
            a.host,
            a.port,
            self.replicas.len(),
            self.peers.len() + 1
        )
    }

    /// `sentinelProcessHelloMessage`, for a hello sent straight to this Sentinel.
    fn process_hello(&mut self, hello: &str, now: u64) {
        let t: Vec<&str> = hello.split(',').collect();
        if t.len() != 8 || t[4] != self.cfg.master_name {
            return;
        }
        let (Ok(port), Ok(epoch), Ok(master_port), Ok(config_epoch)) = (
            t[1].parse::<u16>(),
            t[3].parse::<u64>(),
            t[6].parse::<u16>(),
            t[7].parse::<u64>(),
        ) else {
            return;
        };
        let from = Addr::new(t[0], port);
        let Some(peer) = self.peers.get_mut(&from) else {
            return;
        };
        peer.runid = Some(t[2].to_string());
        if epoch > self.current_epoch {
            self.current_epoch = epoch;
            self.event(now, "+new-epoch", epoch.to_string());
        }
        if self.config_epoch < config_epoch {
            self.config_epoch = config_epoch;
            let to = Addr::new(t[5], master_port);
            if to != self.master.addr {
                self.event(now, "+config-update-from", format!("sentinel {from}"));
                let mut out = Vec::new();
                self.switch_master(to, now, &mut out);
                self.outbox.extend(out);
            }
        }
    }
}

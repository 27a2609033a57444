//! The engine's replication side: `WAIT`, `REPLICAOF`, `REPLCONF`, `PSYNC`, the
//! replication cron, and the API a replica's link drives (`link.rs`). The rules are
//! in `replication.rs`.

use super::{Engine, Session, SessionKind};
use crate::redis::commands;
use crate::redis::replication::{LinkState, ReplicaInfo, Role, Waiter, encode_snapshot};
use crate::redis::reply::Reply;

impl Engine {
    /// Writes the stream bytes fed since the last call to every replica.
    pub(super) fn ship_stream(&mut self) {
        if self.core.repl.get_ack && !self.core.repl.replicas.is_empty() {
            self.core.repl.get_ack = false;
            self.core
                .repl
                .feed_raw(&[b"REPLCONF".as_slice(), b"GETACK", b"*"]);
        }
        let bytes = self.core.repl.take_stream();
        if bytes.is_empty() {
            return;
        }
        for &id in self.core.repl.replicas.keys() {
            self.core.pushes.push((id, Reply::Raw(bytes.clone())));
        }
    }

    pub(super) fn wait(&mut self, session: &mut Session, argv: &[Vec<u8>], now_us: u64) -> Reply {
        if self.core.repl.is_replica() {
            return Reply::err(
                "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
            );
        }
        let Some(numreplicas) = commands::parse_i64(&argv[1]) else {
            return Reply::err("value is not an integer or out of range");
        };
        let Some(timeout) = commands::parse_i64(&argv[2]) else {
            return Reply::err("timeout is not an integer or out of range");
        };
        if timeout < 0 {
            return Reply::err("timeout is negative");
        }
        let offset = self.woff.get(&session.id).copied().unwrap_or(0);
        let acks = self.core.repl.acks_for(offset);
        if acks as i64 >= numreplicas || self.in_exec {
            return Reply::Integer(acks as i64);
        }
        self.core.repl.waiters.push(Waiter {
            session: session.id,
            offset,
            numreplicas: numreplicas as u64,
            deadline_us: (timeout > 0).then(|| now_us.saturating_add(timeout as u64 * 1000)),
        });
        self.core.repl.get_ack = true;
        session.blocked = true;
        Reply::Frames(Vec::new())
    }

    /// Answers the `WAIT`s that are satisfied, or whose timeout passed by `now_us`.
    pub fn serve_waiters(&mut self, now_us: u64) {
        let repl = &mut self.core.repl;
        let mut still = Vec::new();
        for w in std::mem::take(&mut repl.waiters) {
            let acks = repl.acks_for(w.offset);
            if acks >= w.numreplicas || w.deadline_us.is_some_and(|d| now_us >= d) {
                self.core
                    .pushes
                    .push((w.session, Reply::Integer(acks as i64)));
            } else {
                still.push(w);
            }
        }
        self.core.repl.waiters = still;
    }

    /// When the next `WAIT` times out (server clock, us), if any waits with a timeout.
    pub fn next_wait_deadline(&self) -> Option<u64> {
        self.core
            .repl
            .waiters
            .iter()
            .filter_map(|w| w.deadline_us)
            .min()
    }

    pub(super) fn replicaof(&mut self, argv: &[Vec<u8>], now_us: u64) -> Reply {
        if argv[1].eq_ignore_ascii_case(b"no") && argv[2].eq_ignore_ascii_case(b"one") {
            if self.core.repl.is_replica() {
                self.promote(now_us);
            }
            return Reply::ok();
        }
        let Some(port) = commands::parse_i64(&argv[2]) else {
            return Reply::err("value is not an integer or out of range");
        };
        let Ok(port) = u16::try_from(port) else {
            return Reply::err("Invalid master port");
        };
        let host = String::from_utf8_lossy(&argv[1]).into_owned();
        if let Role::Replica {
            host: h, port: p, ..
        } = &self.core.repl.role
            && h.eq_ignore_ascii_case(&host)
            && *p == port
        {
            return Reply::Simple("OK Already connected to specified master".into());
        }
        self.follow(host, port, now_us);
        Reply::ok()
    }

    /// Becomes a replica of `host:port` (`replicationSetMaster`): replicas of ours are
    /// dropped, clients blocked in `WAIT` are released with an error, and the link
    /// connects at the next cron.
    pub fn follow(&mut self, host: String, port: u16, now_us: u64) {
        let repl = &mut self.core.repl;
        let was_master = !repl.is_replica();
        repl.role = Role::Replica {
            host,
            port,
            link: LinkState::Connect,
        };
        repl.generation += 1;
        repl.link_down_since_us = Some(now_us);
        for id in std::mem::take(&mut repl.replicas).into_keys() {
            self.core.pushes.push((id, Reply::Close));
        }
        for w in std::mem::take(&mut self.core.repl.waiters) {
            self.core.pushes.push((
                w.session,
                Reply::Error(
                    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
                        .into(),
                ),
            ));
        }
        if was_master {
            // The old replication history continues as the secondary id.
            let repl = &mut self.core.repl;
            repl.replid2 = repl.replid.clone();
            repl.second_offset = repl.offset as i64 + 1;
        }
        self.master_session = None;
    }

    /// `REPLICAOF NO ONE` (`replicationUnsetMaster`): a new replication id, the old one
    /// kept as the secondary; the data stays.
    pub fn promote(&mut self, now_us: u64) {
        let generation = self.core.repl.generation + 1;
        let repl = &mut self.core.repl;
        repl.replid2 = repl.replid.clone();
        repl.second_offset = repl.offset as i64 + 1;
        repl.replid = commands::hex_id(self.core.seed ^ generation.rotate_left(17), "promoted");
        repl.role = Role::Master;
        repl.generation = generation;
        repl.link_down_since_us = None;
        repl.reset_seldb();
        repl.backlog_start.get_or_insert(repl.offset + 1);
        repl.last_io_us = now_us;
        self.master_session = None;
    }

    pub(super) fn replconf(
        &mut self,
        session: &mut Session,
        argv: &[Vec<u8>],
        now_us: u64,
    ) -> Reply {
        if argv.len().is_multiple_of(2) {
            return Reply::err("syntax error");
        }
        for pair in argv[1..].chunks(2) {
            let opt = pair[0].to_ascii_lowercase();
            match opt.as_slice() {
                b"listening-port" => match commands::parse_i64(&pair[1]) {
                    Some(p) => session.listening_port = p.clamp(0, 65535) as u16,
                    None => return Reply::err("value is not an integer or out of range"),
                },
                b"ack" => {
                    // Never answered.
                    let Some(offset) = commands::parse_i64(&pair[1]) else {
                        return Reply::Frames(Vec::new());
                    };
                    if let Some(r) = self.core.repl.replicas.get_mut(&session.id) {
                        r.ack_offset = r.ack_offset.max(offset.max(0) as u64);
                        r.ack_ms = now_us / 1000;
                    }
                    self.serve_waiters(now_us);
                    return Reply::Frames(Vec::new());
                }
                b"getack" => return Reply::Frames(Vec::new()),
                b"capa" | b"ip-address" | b"rdb-only" => {}
                _ => {
                    return Reply::err(format!(
                        "Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(&pair[0])
                    ));
                }
            }
        }
        Reply::ok()
    }

    /// `PSYNC`/`SYNC` from a replica: always a full resynchronisation, the dataset
    /// sent at once, then the stream.
    pub(super) fn sync(&mut self, session: &mut Session, psync: bool, now_us: u64) -> Reply {
        if self.core.repl.is_replica() {
            // Chained replication is not modelled.
            return Reply::Error(
                "NOMASTERLINK Can't SYNC while not connected with my master".into(),
            );
        }
        let repl = &mut self.core.repl;
        repl.backlog_start.get_or_insert(repl.offset + 1);
        repl.reset_seldb();
        let ip = match session.peer.rsplit_once(':') {
            Some((ip, port)) if port.parse::<u16>().is_ok() => ip.to_string(),
            _ => session.peer.clone(),
        };
        repl.replicas.insert(
            session.id,
            ReplicaInfo {
                ip,
                port: session.listening_port,
                ack_offset: 0,
                ack_ms: now_us / 1000,
            },
        );
        // `putSlaveOnline`: a replica that just synced counts as good at once, not at
        // the next cron (a master with `min-replicas-to-write` refused writes for up
        // to a second after its replica had synced).
        repl.refresh_good_replicas(now_us / 1000);
        session.kind = SessionKind::Replica;
        self.sessions
            .insert(session.id, (SessionKind::Replica, false));
        let snapshot = encode_snapshot(&self.core.ks.entries());
        let mut payload = format!("${}\r\n", snapshot.len()).into_bytes();
        payload.extend_from_slice(&snapshot);
        let mut frames = Vec::new();
        if psync {
            frames.push(Reply::Simple(format!(
                "FULLRESYNC {} {}",
                self.core.repl.replid, self.core.repl.offset
            )));
        }
        frames.push(Reply::Raw(payload));
        Reply::Frames(frames)
    }

    /// The replication cron (`replicationCron`, once a second at server time
    /// `now_us`, `tick` counting seconds): a master counts its good replicas and PINGs
    /// them every `repl-ping-replica-period`; `WAIT`s whose time is up are answered.
    pub fn replication_cron(&mut self, now_us: u64, tick: u64) {
        let repl = &mut self.core.repl;
        if !repl.is_replica() {
            repl.refresh_good_replicas(now_us / 1000);
            if tick.is_multiple_of(crate::redis::replication::REPL_PING_PERIOD_S)
                && !repl.replicas.is_empty()
            {
                repl.feed_raw(&[b"PING".as_slice()]);
            }
        }
        self.serve_waiters(now_us);
        self.ship_stream();
    }

    /// Whom this replica should follow, and the generation of that order.
    pub fn link_target(&self) -> Option<(String, u16, u64)> {
        match &self.core.repl.role {
            Role::Replica { host, port, .. } => {
                Some((host.clone(), *port, self.core.repl.generation))
            }
            Role::Master => None,
        }
    }

    /// The replica's link of `generation` moved to `state`; false if that link is
    /// stale (a `REPLICAOF` since).
    pub fn set_link(&mut self, generation: u64, state: LinkState, now_us: u64) -> bool {
        let repl = &mut self.core.repl;
        if repl.generation != generation {
            return false;
        }
        if let Role::Replica { link, .. } = &mut repl.role {
            if *link == LinkState::Connected && state != LinkState::Connected {
                repl.link_down_since_us = Some(now_us);
            }
            *link = state;
        }
        if state != LinkState::Connected {
            self.master_session = None;
        }
        true
    }

    /// A full sync arrived on the link of `generation` from `master`: the dataset is
    /// replaced by the master's, and the stream continues from `offset`.
    pub fn full_sync(
        &mut self,
        generation: u64,
        replid: &str,
        offset: u64,
        snapshot: &[u8],
        master: &str,
        now_us: u64,
    ) -> Result<(), String> {
        if self.core.repl.generation != generation {
            return Err("stale link".into());
        }
        let entries = crate::redis::replication::decode_snapshot(snapshot)
            .ok_or_else(|| "the master's payload is not a model snapshot".to_string())?;
        self.core.ks.replace_all(entries, now_us, master);
        let repl = &mut self.core.repl;
        repl.offset = offset;
        // A synced replica keeps a backlog too (for its own replicas, and a promotion).
        repl.backlog_start = Some(offset + 1);
        repl.replid = replid.to_string();
        // A new history: the secondary id is cleared (`clearReplicationId2`).
        repl.replid2 = "0".repeat(40);
        repl.second_offset = -1;
        repl.last_io_us = now_us;
        repl.link_down_since_us = None;
        if let Role::Replica { link, .. } = &mut repl.role {
            *link = LinkState::Connected;
        }
        let mut session = self.connect(master);
        session.kind = SessionKind::Master;
        self.sessions
            .insert(session.id, (SessionKind::Master, false));
        self.master_session = Some(session);
        Ok(())
    }

    /// Applies one command of the master's stream (`nbytes` long) on the link of
    /// `generation`. Returns `Some(offset)` when the master asked for an ACK
    /// (`REPLCONF GETACK`), `None` otherwise; `Err` if the link is stale.
    pub fn apply_from_master(
        &mut self,
        generation: u64,
        argv: &[Vec<u8>],
        nbytes: u64,
        now_us: u64,
    ) -> Result<Option<u64>, String> {
        if self.core.repl.generation != generation {
            return Err("stale link".into());
        }
        let Some(mut session) = self.master_session.take() else {
            return Err("no master session".into());
        };
        let getack = argv.len() >= 2
            && argv[0].eq_ignore_ascii_case(b"replconf")
            && argv[1].eq_ignore_ascii_case(b"getack");
        let events_before = self.core.ks.pending_events();
        if !argv.is_empty() {
            let _ = self.dispatch(&mut session, argv, now_us);
        }
        self.touch_watched(events_before);
        self.master_session = Some(session);
        let repl = &mut self.core.repl;
        let ack = getack.then_some(repl.offset);
        repl.offset += nbytes;
        repl.last_io_us = now_us;
        Ok(ack)
    }

    /// The replica's processed offset (what its `REPLCONF ACK` reports).
    pub fn replica_offset(&self) -> u64 {
        self.core.repl.offset
    }

    /// The replication state, for observers and tests.
    pub fn replication(&self) -> &crate::redis::replication::Repl {
        &self.core.repl
    }

    /// Mutable replication settings (`min-replicas-to-write`, priority), for the
    /// server's configuration at start.
    pub fn replication_mut(&mut self) -> &mut crate::redis::replication::Repl {
        &mut self.core.repl
    }
}

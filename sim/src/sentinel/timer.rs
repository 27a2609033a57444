//! `sentinelTimer`: monitoring, SDOWN/ODOWN, the election and the failover state
//! machine, in `sentinel.c`'s order.

use std::collections::BTreeMap;

use rand::RngExt;

use super::{
    ASK_PERIOD, Action, Addr, ELECTION_TIMEOUT, Expect, Failover, INFO_PERIOD, Instance,
    MAX_DESYNC, MIN_LINK_RECONNECT_PERIOD, PING_PERIOD, PUBLISH_PERIOD, Role, SLAVE_RECONF_TIMEOUT,
    Sentinel, TILT_PERIOD, TILT_TRIGGER, argv,
};

/// Which instance a step is about.
#[derive(Clone)]
enum Which {
    Master,
    Replica(Addr),
}

fn elapsed(now: u64, since: u64) -> i64 {
    now as i64 - since as i64
}

impl Sentinel {
    /// One timer call at `now_ms`: what to send, dial or close.
    pub fn timer(&mut self, now: u64) -> Vec<Action> {
        let mut out = std::mem::take(&mut self.outbox);
        if let Some(prev) = self.previous_ms {
            let delta = elapsed(now, prev);
            if delta < 0 || delta > TILT_TRIGGER as i64 {
                self.tilt_since = Some(now);
                self.event(now, "+tilt", "#tilt mode entered".into());
            }
        }
        self.previous_ms = Some(now);

        self.handle(Which::Master, now, &mut out);
        let replicas: Vec<Addr> = self.replicas.keys().cloned().collect();
        for r in replicas {
            self.handle(Which::Replica(r), now, &mut out);
        }
        let peers: Vec<Addr> = self.peers.keys().cloned().collect();
        for p in peers {
            self.handle_peer(&p, now, &mut out);
        }
        if self.failover == Failover::UpdateConfig {
            self.switch_to_promoted(now, &mut out);
        }
        out.append(&mut self.outbox);
        out
    }

    fn instance(&mut self, which: &Which) -> Option<&mut Instance> {
        match which {
            Which::Master => Some(&mut self.master),
            Which::Replica(a) => self.replicas.get_mut(a),
        }
    }

    /// `sentinelHandleRedisInstance`.
    fn handle(&mut self, which: Which, now: u64, out: &mut Vec<Action>) {
        self.reconnect_and_send_periodic(&which, now, out);
        if let Some(since) = self.tilt_since {
            if now.saturating_sub(since) < TILT_PERIOD {
                return;
            }
            self.tilt_since = None;
            self.event(now, "-tilt", "#tilt mode exited".into());
        }
        self.check_sdown(&which, now, out);
        if matches!(which, Which::Master) {
            self.check_odown(now);
            if self.start_failover_if_needed(now) {
                self.ask_others(true, now, out);
            }
            self.failover_state_machine(now, out);
            self.ask_others(false, now, out);
        }
    }

    fn reconnect_and_send_periodic(&mut self, which: &Which, now: u64, out: &mut Vec<Action>) {
        let in_failover_or_odown = self.odown_since.is_some() || self.failover != Failover::None;
        let down_after = self.cfg.down_after_ms;
        let is_replica = matches!(which, Which::Replica(_));
        let Some(inst) = self.instance(which) else {
            return;
        };
        let addr = inst.addr.clone();
        let link = &mut inst.link;
        if link.disconnected {
            if !link.dialling && now.saturating_sub(link.last_reconn_ms) >= PING_PERIOD {
                link.last_reconn_ms = now;
                link.dialling = true;
                out.push(Action::Connect(addr));
            }
            return;
        }
        if link.pending >= 100 {
            return;
        }
        let info_period = if is_replica && (in_failover_or_odown || inst.master_link_down_ms != 0) {
            1_000
        } else {
            INFO_PERIOD
        };
        let ping_period = down_after.min(PING_PERIOD);
        if inst.info_refresh == 0 || now.saturating_sub(inst.info_refresh) > info_period {
            inst.link.pending += 1;
            out.push(Action::Send {
                to: addr.clone(),
                commands: vec![argv(&["INFO"])],
                expect: Expect::Info,
            });
        }
        let link = &inst.link;
        if now.saturating_sub(link.last_pong_ms) > ping_period
            && now.saturating_sub(link.last_ping_ms) > ping_period / 2
            && let Some(a) = self.ping(&addr, now)
        {
            out.push(a);
        }
    }

    fn handle_peer(&mut self, addr: &Addr, now: u64, out: &mut Vec<Action>) {
        let hello = self.hello();
        let down_after = self.cfg.down_after_ms;
        let Some(peer) = self.peers.get_mut(addr) else {
            return;
        };
        let link = &mut peer.link;
        if link.disconnected {
            if !link.dialling && now.saturating_sub(link.last_reconn_ms) >= PING_PERIOD {
                link.last_reconn_ms = now;
                link.dialling = true;
                out.push(Action::Connect(addr.clone()));
            }
            return;
        }
        if link.pending >= 100 {
            return;
        }
        let ping_period = down_after.min(PING_PERIOD);
        let (last_pong, last_ping) = (link.last_pong_ms, link.last_ping_ms);
        if now.saturating_sub(peer.last_pub_ms) > PUBLISH_PERIOD {
            peer.last_pub_ms = now;
            peer.link.pending += 1;
            out.push(Action::Send {
                to: addr.clone(),
                commands: vec![argv(&["PUBLISH", super::HELLO_CHANNEL, &hello])],
                expect: Expect::Discard,
            });
        }
        if now.saturating_sub(last_pong) > ping_period
            && now.saturating_sub(last_ping) > ping_period / 2
            && let Some(a) = self.ping(addr, now)
        {
            out.push(a);
        }
    }

    /// The hello message about the current configuration.
    pub(super) fn hello(&self) -> String {
        let m = self.master_addr();
        format!(
            "{},{},{},{},{},{},{},{}",
            self.cfg.me.host,
            self.cfg.me.port,
            self.myid,
            self.current_epoch,
            self.cfg.master_name,
            m.host,
            m.port,
            self.config_epoch
        )
    }

    /// `sentinelCheckSubjectivelyDown`.
    fn check_sdown(&mut self, which: &Which, now: u64, out: &mut Vec<Action>) {
        let down_after = self.cfg.down_after_ms;
        let is_master = matches!(which, Which::Master);
        let describe = {
            let Some(inst) = self.instance(which) else {
                return;
            };
            let addr = inst.addr.clone();
            self.describe(&addr)
        };
        let Some(inst) = self.instance(which) else {
            return;
        };
        let link = &mut inst.link;
        let idle = if link.act_ping_ms != 0 {
            now.saturating_sub(link.act_ping_ms)
        } else if link.disconnected {
            now.saturating_sub(link.last_avail_ms)
        } else {
            0
        };
        if !link.disconnected
            && now.saturating_sub(link.conn_ms) > MIN_LINK_RECONNECT_PERIOD
            && link.act_ping_ms != 0
            && now.saturating_sub(link.act_ping_ms) > down_after / 2
            && now.saturating_sub(link.last_pong_ms) > down_after / 2
        {
            link.disconnected = true;
            link.pending = 0;
            out.push(Action::Close(inst.addr.clone()));
        }
        let down = idle > down_after
            || (is_master
                && inst.role_reported == Role::Replica
                && now.saturating_sub(inst.role_reported_ms) > down_after + INFO_PERIOD * 2);
        if down {
            if inst.sdown_since.is_none() {
                inst.sdown_since = Some(now);
                self.event(now, "+sdown", describe);
            }
        } else if inst.sdown_since.is_some() {
            inst.sdown_since = None;
            self.event(now, "-sdown", describe);
        }
    }

    /// `sentinelCheckObjectivelyDown`.
    fn check_odown(&mut self, now: u64) {
        let mut odown = false;
        let mut votes = 0;
        if self.master.sdown_since.is_some() {
            votes = 1 + self.peers.values().filter(|p| p.master_down).count() as u32;
            odown = votes >= self.cfg.quorum;
        }
        let describe = self.describe(&self.master.addr.clone());
        if odown {
            if self.odown_since.is_none() {
                self.odown_since = Some(now);
                self.event(
                    now,
                    "+odown",
                    format!("{describe} #quorum {votes}/{}", self.cfg.quorum),
                );
            }
        } else if self.odown_since.is_some() {
            self.odown_since = None;
            self.event(now, "-odown", describe);
        }
    }

    /// `sentinelStartFailoverIfNeeded` and `sentinelStartFailover`.
    fn start_failover_if_needed(&mut self, now: u64) -> bool {
        if self.odown_since.is_none() || self.failover != Failover::None {
            return false;
        }
        if let Some(start) = self.failover_start_ms
            && elapsed(now, start) < (self.cfg.failover_timeout_ms * 2) as i64
        {
            return false;
        }
        self.failover = Failover::WaitStart;
        self.current_epoch += 1;
        self.failover_epoch = self.current_epoch;
        let describe = self.describe(&self.master.addr.clone());
        self.event(now, "+new-epoch", self.current_epoch.to_string());
        self.event(now, "+try-failover", describe);
        self.failover_start_ms = Some(now + self.rng.random_range(0..MAX_DESYNC));
        self.failover_state_change_ms = now;
        true
    }

    /// `sentinelAskMasterStateToOtherSentinels`.
    fn ask_others(&mut self, forced: bool, now: u64, out: &mut Vec<Action>) {
        let master_sdown = self.master.sdown_since.is_some();
        let runid = if self.failover != Failover::None {
            self.myid.clone()
        } else {
            "*".to_string()
        };
        let (host, port) = (self.master.addr.host.clone(), self.master.addr.port);
        let epoch = self.current_epoch;
        for (addr, peer) in &mut self.peers {
            let since = now.saturating_sub(peer.last_master_down_reply_ms);
            if since > ASK_PERIOD * 5 {
                peer.master_down = false;
                peer.leader = None;
            }
            if !master_sdown || peer.link.disconnected {
                continue;
            }
            if !forced && since < ASK_PERIOD {
                continue;
            }
            peer.link.pending += 1;
            out.push(Action::Send {
                to: addr.clone(),
                commands: vec![argv(&[
                    "SENTINEL",
                    "is-master-down-by-addr",
                    &host,
                    &port.to_string(),
                    &epoch.to_string(),
                    &runid,
                ])],
                expect: Expect::IsMasterDown,
            });
        }
    }

    /// `sentinelVoteLeader`: this Sentinel's vote for `req_epoch` (given to `req_runid`
    /// if it has not voted in that epoch or later).
    pub(super) fn vote_leader(
        &mut self,
        req_epoch: u64,
        req_runid: &str,
        now: u64,
    ) -> (Option<String>, u64) {
        if req_epoch > self.current_epoch {
            self.current_epoch = req_epoch;
            self.event(now, "+new-epoch", req_epoch.to_string());
        }
        if self.leader_epoch < req_epoch && self.current_epoch <= req_epoch {
            self.leader = Some(req_runid.to_string());
            self.leader_epoch = self.current_epoch;
            let describe = self.describe(&self.master.addr.clone());
            self.event(
                now,
                "+vote-for-leader",
                format!("{describe} {req_runid} {}", self.leader_epoch),
            );
            if !req_runid.eq_ignore_ascii_case(&self.myid) {
                self.failover_start_ms = Some(now + self.rng.random_range(0..MAX_DESYNC));
            }
        }
        (self.leader.clone(), self.leader_epoch)
    }

    /// `sentinelGetLeader`.
    fn get_leader(&mut self, epoch: u64, now: u64) -> Option<String> {
        let mut counters: BTreeMap<String, u64> = BTreeMap::new();
        for p in self.peers.values() {
            if let Some(l) = &p.leader
                && p.leader_epoch == self.current_epoch
            {
                *counters.entry(l.clone()).or_default() += 1;
            }
        }
        let mut winner: Option<String> = None;
        let mut max_votes = 0;
        for (runid, votes) in &counters {
            if *votes > max_votes {
                max_votes = *votes;
                winner = Some(runid.clone());
            }
        }
        let candidate = winner.clone().unwrap_or_else(|| self.myid.clone());
        let (myvote, leader_epoch) = self.vote_leader(epoch, &candidate, now);
        if let Some(myvote) = myvote
            && leader_epoch == epoch
        {
            let votes = counters.entry(myvote.clone()).or_default();
            *votes += 1;
            if *votes > max_votes {
                max_votes = *votes;
                winner = Some(myvote);
            }
        }
        let voters = self.peers.len() as u64 + 1;
        let needed = voters / 2 + 1;
        if max_votes < needed || max_votes < u64::from(self.cfg.quorum) {
            winner = None;
        }
        winner
    }

    fn failover_state_machine(&mut self, now: u64, out: &mut Vec<Action>) {
        let master = self.describe(&self.master.addr.clone());
        match self.failover {
            Failover::WaitStart => {
                let leader = self.get_leader(self.failover_epoch, now);
                let is_leader = leader.is_some_and(|l| l.eq_ignore_ascii_case(&self.myid));
                if !is_leader {
                    let timeout = ELECTION_TIMEOUT.min(self.cfg.failover_timeout_ms);
                    let start = self.failover_start_ms.unwrap_or(now);
                    if elapsed(now, start) > timeout as i64 {
                        self.event(now, "-failover-abort-not-elected", master);
                        self.abort_failover(now);
                    }
                    return;
                }
                self.event(now, "+elected-leader", master.clone());
                self.failover = Failover::SelectSlave;
                self.failover_state_change_ms = now;
                self.event(now, "+failover-state-select-slave", master);
            }
            Failover::SelectSlave => match self.select_slave(now) {
                None => {
                    self.event(now, "-failover-abort-no-good-slave", master);
                    self.abort_failover(now);
                }
                Some(addr) => {
                    let describe = self.describe(&addr);
                    if let Some(r) = self.replicas.get_mut(&addr) {
                        r.promoted = true;
                    }
                    self.promoted = Some(addr);
                    self.failover = Failover::SendSlaveofNoOne;
                    self.failover_state_change_ms = now;
                    self.event(now, "+selected-slave", describe.clone());
                    self.event(now, "+failover-state-send-slaveof-noone", describe);
                }
            },
            Failover::SendSlaveofNoOne => {
                let Some(addr) = self.promoted.clone() else {
                    return;
                };
                let disconnected = self.replicas.get(&addr).is_none_or(|r| r.link.disconnected);
                if disconnected {
                    if now.saturating_sub(self.failover_state_change_ms)
                        > self.cfg.failover_timeout_ms
                    {
                        self.event(now, "-failover-abort-slave-timeout", master);
                        self.abort_failover(now);
                    }
                    return;
                }
                out.push(self.slaveof(&addr, None));
                let describe = self.describe(&addr);
                self.event(now, "+failover-state-wait-promotion", describe);
                self.failover = Failover::WaitPromotion;
                self.failover_state_change_ms = now;
            }
            Failover::WaitPromotion => {
                if now.saturating_sub(self.failover_state_change_ms) > self.cfg.failover_timeout_ms
                {
                    self.event(now, "-failover-abort-slave-timeout", master);
                    self.abort_failover(now);
                }
            }
            Failover::ReconfSlaves => self.reconf_next_slave(now, out),
            Failover::None | Failover::UpdateConfig => {}
        }
    }

    fn abort_failover(&mut self, now: u64) {
        self.failover = Failover::None;
        self.failover_state_change_ms = now;
        if let Some(p) = self.promoted.take()
            && let Some(r) = self.replicas.get_mut(&p)
        {
            r.promoted = false;
        }
    }

    /// `sentinelSelectSlave`.
    pub(super) fn select_slave(&self, now: u64) -> Option<Addr> {
        let down_after = self.cfg.down_after_ms;
        let master_sdown = self.master.sdown_since;
        let max_master_down = master_sdown.map_or(0, |t| now.saturating_sub(t)) + down_after * 10;
        let info_validity = if master_sdown.is_some() {
            PING_PERIOD * 5
        } else {
            INFO_PERIOD * 3
        };
        let mut candidates: Vec<&Instance> = self
            .replicas
            .values()
            .filter(|r| {
                r.sdown_since.is_none()
                    && !r.link.disconnected
                    && now.saturating_sub(r.link.last_avail_ms) <= PING_PERIOD * 5
                    && r.priority != 0
                    && now.saturating_sub(r.info_refresh) <= info_validity
                    && r.master_link_down_ms <= max_master_down
            })
            .collect();
        candidates.sort_by(|a, b| {
            a.priority
                .cmp(&b.priority)
                .then(b.repl_offset.cmp(&a.repl_offset))
                .then_with(|| match (&a.runid, &b.runid) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (Some(x), Some(y)) => x.to_ascii_lowercase().cmp(&y.to_ascii_lowercase()),
                })
        });
        candidates.first().map(|r| r.addr.clone())
    }

    /// `sentinelFailoverReconfNextSlave`.
    fn reconf_next_slave(&mut self, now: u64, out: &mut Vec<Action>) {
        let Some(promoted) = self.promoted.clone() else {
            return;
        };
        let mut in_progress = self
            .replicas
            .values()
            .filter(|r| r.reconf_sent.is_some() || r.reconf_inprog)
            .count() as u32;
        let addrs: Vec<Addr> = self.replicas.keys().cloned().collect();
        for addr in addrs {
            if in_progress >= self.cfg.parallel_syncs {
                break;
            }
            let describe = self.describe(&addr);
            let r = self.replicas.get_mut(&addr).expect("listed");
            if r.promoted || r.reconf_done {
                continue;
            }
            if let Some(sent) = r.reconf_sent
                && now.saturating_sub(sent) > SLAVE_RECONF_TIMEOUT
            {
                r.reconf_sent = None;
                r.reconf_done = true;
                self.event(now, "-slave-reconf-sent-timeout", describe.clone());
            }
            let r = self.replicas.get_mut(&addr).expect("listed");
            if r.reconf_sent.is_some() || r.reconf_inprog || r.link.disconnected {
                continue;
            }
            r.reconf_sent = Some(now);
            out.push(self.slaveof(&addr, Some(&promoted)));
            self.event(now, "+slave-reconf-sent", describe);
            in_progress += 1;
        }
        self.detect_end(now, out);
    }

    /// `sentinelFailoverDetectEnd`.
    fn detect_end(&mut self, now: u64, out: &mut Vec<Action>) {
        let Some(promoted) = self.promoted.clone() else {
            return;
        };
        if self
            .replicas
            .get(&promoted)
            .is_none_or(|r| r.sdown_since.is_some())
        {
            return;
        }
        let mut not_reconfigured = self
            .replicas
            .values()
            .filter(|r| !(r.promoted || r.reconf_done) && r.sdown_since.is_none())
            .count();
        let master = self.describe(&self.master.addr.clone());
        let timeout =
            now.saturating_sub(self.failover_state_change_ms) > self.cfg.failover_timeout_ms;
        if timeout {
            not_reconfigured = 0;
            self.event(now, "+failover-end-for-timeout", master.clone());
        }
        if not_reconfigured == 0 {
            self.event(now, "+failover-end", master);
            self.failover = Failover::UpdateConfig;
            self.failover_state_change_ms = now;
        }
        if timeout {
            let addrs: Vec<Addr> = self.replicas.keys().cloned().collect();
            for addr in addrs {
                let r = &self.replicas[&addr];
                if r.promoted || r.reconf_done || r.reconf_sent.is_some() || r.link.disconnected {
                    continue;
                }
                out.push(self.slaveof(&addr, Some(&promoted)));
                let describe = self.describe(&addr);
                self.replicas.get_mut(&addr).expect("listed").reconf_sent = Some(now);
                self.event(now, "+slave-reconf-sent-be", describe);
            }
        }
    }

    /// `sentinelFailoverSwitchToPromotedSlave`.
    fn switch_to_promoted(&mut self, now: u64, out: &mut Vec<Action>) {
        let to = self
            .promoted
            .clone()
            .unwrap_or_else(|| self.master.addr.clone());
        self.switch_master(to, now, out);
    }

    /// `+switch-master`: the master is now `to`.
    pub(super) fn switch_master(&mut self, to: Addr, now: u64, out: &mut Vec<Action>) {
        let old = self.master.addr.clone();
        self.event(
            now,
            "+switch-master",
            format!(
                "{} {} {} {} {}",
                self.cfg.master_name, old.host, old.port, to.host, to.port
            ),
        );
        self.reset_and_change_address(to, now, out);
    }

    /// `sentinelResetMasterAndChangeAddress`: the master is now `to`; its replicas are
    /// the old ones (but `to`) and the old master.
    fn reset_and_change_address(&mut self, to: Addr, now: u64, out: &mut Vec<Action>) {
        let old = self.master.addr.clone();
        let mut replicas: Vec<Addr> = self
            .replicas
            .keys()
            .filter(|a| **a != to)
            .cloned()
            .collect();
        if to != old {
            replicas.push(old.clone());
        }
        out.push(Action::Close(old));
        for a in self.replicas.keys() {
            out.push(Action::Close(a.clone()));
        }
        self.replicas.clear();
        self.master = Instance::new(to, now);
        self.odown_since = None;
        self.leader = None;
        self.failover = Failover::None;
        self.failover_state_change_ms = 0;
        self.failover_start_ms = None;
        self.promoted = None;
        for a in replicas {
            self.add_replica(a, now);
        }
    }
}

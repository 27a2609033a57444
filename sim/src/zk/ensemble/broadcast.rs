//! Zab's sync and broadcast (`Leader.lead`, `LearnerHandler`, `Learner`): the leader
//! fixing the epoch and syncing its learners, proposals, acks and commits in zxid
//! order, the follower's side of each, and applying committed txns (see the parent
//! module's doc).

use super::*;

impl Peer {
    pub(super) fn leading(&mut self) -> Option<&mut Leading> {
        match &mut self.role {
            Role::Leading(l) => Some(l),
            _ => None,
        }
    }

    pub(super) fn try_fix_epoch(&mut self, now: ZkNow) {
        let quorum = {
            let Some(l) = self.leading() else { return };
            if l.epoch.is_some() {
                return;
            }
            l.infos.len()
        };
        if !self.cfg.quorum(quorum) {
            return;
        }
        let me = self.me;
        let Some(l) = self.leading() else { return };
        let epoch = l.infos.values().map(|(e, _)| *e).max().unwrap_or(0) + 1;
        l.epoch = Some(epoch);
        let waiting: Vec<(Sid, i64)> = l
            .infos
            .iter()
            .filter(|(s, _)| **s != me)
            .map(|(s, (_, z))| (*s, *z))
            .collect();
        lock(&self.disk).accepted_epoch = epoch;
        for (sid, last) in waiting {
            self.send_sync(sid, last, now);
        }
        self.try_establish(now);
    }

    fn send_sync(&mut self, sid: Sid, last: i64, now: ZkNow) {
        let committed = self.tree.last_zxid();
        let (snap, txns) = {
            let d = lock(&self.disk);
            let has = last == 0 || d.log.iter().any(|t| t.zxid == last);
            if has {
                let from = d.log.partition_point(|t| t.zxid <= last);
                (false, d.log[from..].to_vec())
            } else {
                (true, d.log.clone())
            }
        };
        let Some(l) = self.leading() else { return };
        let Some(epoch) = l.epoch else { return };
        let learner = l.learners.entry(sid).or_default();
        learner.forwarding = true;
        learner.synced = false;
        learner.last_heard_ms = now.elapsed_ms;
        self.to(
            sid,
            PeerMsg::Sync {
                epoch,
                snap,
                after: last,
                txns,
                committed,
            },
        );
    }

    fn try_establish(&mut self, now: ZkNow) {
        let tick = self.tick_ms();
        let sessions = self.sessions.clone();
        let Some(l) = self.leading() else { return };
        let Some(epoch) = l.epoch else { return };
        if l.established {
            return;
        }
        let synced = 1 + l.learners.values().filter(|x| x.synced).count();
        if !self.cfg.quorum(synced) {
            return;
        }
        let Some(l) = self.leading() else { return };
        l.established = true;
        for (id, timeout) in sessions {
            l.tracker.add(tick, id, timeout, now.elapsed_ms);
        }
        let synced = l.learners_where(|x| x.synced);
        lock(&self.disk).current_epoch = epoch;
        self.vote.epoch = epoch;
        for s in synced {
            self.to(s, PeerMsg::UpToDate);
        }
        self.roles.push(RoleEvent::Leading { epoch });
    }

    /// Proposes `body` for `session` (answering `origin`): logged, sent to the
    /// learners, committed once a quorum logged it.
    pub(super) fn propose(
        &mut self,
        session: i64,
        body: TxnBody,
        origin: Option<Origin>,
        now: ZkNow,
    ) {
        let Some(l) = self.leading() else { return };
        let Some(epoch) = l.epoch else { return };
        l.counter += 1;
        let txn = Txn {
            zxid: (i64::from(epoch) << 32) | l.counter,
            time_ms: now.wall_ms,
            session_id: session,
            body,
        };
        l.prep_tree.apply(&txn);
        l.outstanding.insert(txn.zxid);
        let to = l.learners_where(|x| x.forwarding);
        if let Some(o) = origin {
            self.origins.insert(txn.zxid, o);
        }
        lock(&self.disk).log.push(txn.clone());
        for s in to {
            self.to(
                s,
                PeerMsg::Proposal {
                    txn: txn.clone(),
                    origin,
                },
            );
        }
        self.try_commit();
    }

    fn try_commit(&mut self) {
        loop {
            let Some(l) = self.leading() else { return };
            let Some(&z) = l.outstanding.first() else {
                return;
            };
            let acks = 1 + l
                .learners
                .values()
                .filter(|x| x.forwarding && x.acked >= z)
                .count();
            if !self.cfg.quorum(acks) {
                return;
            }
            let Some(l) = self.leading() else { return };
            l.outstanding.remove(&z);
            let to = l.learners_where(|x| x.forwarding);
            for s in to {
                self.to(s, PeerMsg::Commit { zxid: z });
            }
            self.apply_committed(z);
        }
    }

    /// The leader takes a client write (from its own client or forwarded).
    pub(super) fn submit(&mut self, origin: Origin, req: Request, now: ZkNow) {
        let Some(l) = self.leading() else { return };
        let body = match &req {
            Request::CloseSession => {
                l.tracker.closing.insert(origin.session);
                TxnBody::CloseSession
            }
            Request::Create { op: code, req } => {
                let one = MultiOp::Create {
                    op: *code,
                    req: req.clone(),
                };
                prep(&l.prep_tree, &one, origin.session).map_or_else(TxnBody::Error, |(b, _)| b)
            }
            Request::Delete { path, version } => prep(
                &l.prep_tree,
                &MultiOp::Delete {
                    path: path.clone(),
                    version: *version,
                },
                origin.session,
            )
            .map_or_else(TxnBody::Error, |(b, _)| b),
            Request::SetData {
                path,
                data,
                version,
            } => prep(
                &l.prep_tree,
                &MultiOp::SetData {
                    path: path.clone(),
                    data: data.clone(),
                    version: *version,
                },
                origin.session,
            )
            .map_or_else(TxnBody::Error, |(b, _)| b),
            Request::Multi(ops) => prep_multi(&l.prep_tree, ops, origin.session, now.wall_ms).0,
            _ => return,
        };
        self.propose(origin.session, body, Some(origin), now);
    }

    pub(super) fn on_leader_msg(&mut self, from: Sid, msg: PeerMsg, now: ZkNow) {
        let tick = self.tick_ms();
        let Some(l) = self.leading() else { return };
        if let Some(x) = l.learners.get_mut(&from) {
            x.last_heard_ms = now.elapsed_ms;
        }
        match msg {
            PeerMsg::FollowerInfo {
                accepted_epoch,
                last_zxid,
            } => {
                l.infos.insert(from, (accepted_epoch, last_zxid));
                l.learners.insert(
                    from,
                    Learner {
                        last_heard_ms: now.elapsed_ms,
                        ..Learner::default()
                    },
                );
                if l.epoch.is_some() {
                    self.send_sync(from, last_zxid, now);
                } else {
                    self.try_fix_epoch(now);
                }
            }
            PeerMsg::AckNewLeader { last_zxid } => {
                let established = l.established;
                if let Some(x) = l.learners.get_mut(&from) {
                    x.synced = true;
                    x.acked = x.acked.max(last_zxid);
                }
                if established {
                    self.to(from, PeerMsg::UpToDate);
                } else {
                    self.try_establish(now);
                }
                self.try_commit();
            }
            PeerMsg::Ack { zxid } => {
                if let Some(x) = l.learners.get_mut(&from) {
                    x.acked = x.acked.max(zxid);
                }
                self.try_commit();
            }
            PeerMsg::Ping { touches } => {
                for (s, t) in touches {
                    l.tracker.touch(tick, s, t, now.elapsed_ms);
                }
            }
            PeerMsg::Request { origin, payload } => {
                if !l.established {
                    return;
                }
                if let Ok((_, req)) = Request::read(&payload) {
                    self.submit(origin, req, now);
                }
            }
            PeerMsg::CreateSession { origin, timeout_ms } => {
                if !l.established {
                    return;
                }
                l.tracker
                    .add(tick, origin.session, timeout_ms, now.elapsed_ms);
                self.propose(
                    origin.session,
                    TxnBody::CreateSession { timeout_ms },
                    Some(origin),
                    now,
                );
            }
            PeerMsg::SyncRequest { origin } => {
                // Behind every commit already sent on this link.
                self.to(from, PeerMsg::SyncDone { origin });
            }
            _ => {}
        }
    }

    pub(super) fn on_follower_msg(&mut self, from: Sid, msg: PeerMsg, now: ZkNow) {
        let Role::Following(f) = &mut self.role else {
            return;
        };
        if from != f.leader {
            return;
        }
        f.last_heard_ms = now.elapsed_ms;
        match msg {
            PeerMsg::Sync {
                epoch,
                snap,
                after,
                txns,
                committed,
            } => {
                let last = {
                    let mut d = lock(&self.disk);
                    if epoch < d.accepted_epoch {
                        drop(d);
                        return self.look(now, "the leader proposed an older epoch");
                    }
                    d.accepted_epoch = epoch;
                    d.current_epoch = epoch;
                    if snap {
                        d.log = txns;
                    } else {
                        d.log.retain(|t| t.zxid <= after);
                        d.log.extend(txns);
                    }
                    let (tree, sessions) = replay(&d.log, committed);
                    self.tree = tree;
                    self.sessions = sessions;
                    d.last_zxid()
                };
                if let Role::Following(f) = &mut self.role {
                    f.epoch = epoch;
                }
                self.vote = Vote {
                    leader: from,
                    zxid: last,
                    epoch,
                };
                self.to(from, PeerMsg::AckNewLeader { last_zxid: last });
            }
            PeerMsg::UpToDate if !f.uptodate => {
                f.uptodate = true;
                let (leader, epoch) = (f.leader, f.epoch);
                self.roles.push(RoleEvent::Following { leader, epoch });
            }
            PeerMsg::Proposal { txn, origin } => {
                let zxid = txn.zxid;
                {
                    let mut d = lock(&self.disk);
                    if zxid <= d.last_zxid() {
                        return;
                    }
                    d.log.push(txn);
                }
                if let Some(o) = origin {
                    self.origins.insert(zxid, o);
                }
                self.to(from, PeerMsg::Ack { zxid });
            }
            PeerMsg::Commit { zxid } => self.apply_committed(zxid),
            PeerMsg::Ping { .. } => {
                let touches = std::mem::take(&mut f.touched).into_iter().collect();
                self.to(from, PeerMsg::Ping { touches });
            }
            PeerMsg::SyncDone { origin } => self.finish_origin(origin, None),
            _ => {}
        }
    }

    /// Applies every logged txn up to `zxid` not applied yet, in order.
    fn apply_committed(&mut self, zxid: i64) {
        let txns = {
            let d = lock(&self.disk);
            let done = self.tree.last_zxid();
            let from = d.log.partition_point(|t| t.zxid <= done);
            d.log[from..]
                .iter()
                .take_while(|t| t.zxid <= zxid)
                .cloned()
                .collect::<Vec<_>>()
        };
        for txn in txns {
            let triggers = self.tree.apply(&txn);
            track_session(&mut self.sessions, &txn);
            self.fire(&triggers);
            let origin = self.origins.remove(&txn.zxid);
            if let TxnBody::CloseSession = txn.body {
                let expired = self
                    .leading()
                    .and_then(|l| {
                        l.tracker.sessions.remove(&txn.session_id);
                        l.tracker.closing.remove(&txn.session_id);
                        l.expiring.remove(&txn.session_id)
                    })
                    .map(|e| (txn.session_id, e));
                if let Some((session_id, ephemerals)) = expired {
                    self.events.push(ServerEvent::SessionExpired {
                        session_id,
                        ephemerals,
                    });
                } else if origin.is_some_and(|o| o.sid == self.me) {
                    self.events.push(ServerEvent::SessionClosed {
                        session_id: txn.session_id,
                    });
                }
            }
            if let Some(o) = origin.filter(|o| o.sid == self.me) {
                self.finish_origin(o, Some(&txn));
            }
            if let TxnBody::CloseSession = txn.body {
                let conns: Vec<ConnId> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.session == Some(txn.session_id))
                    .map(|(id, _)| *id)
                    .collect();
                for c in conns {
                    self.close_conn(c);
                }
            }
        }
    }
}

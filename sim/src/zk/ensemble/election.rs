//! `FastLeaderElection`: a LOOKING server's votes and rounds, the decision after
//! `finalizeWait`, and the turn to leading or following (see the parent module's doc).

use super::*;

impl Peer {
    fn my_initial_vote(&self) -> Vote {
        let d = lock(&self.disk);
        Vote {
            leader: self.me,
            zxid: d.last_zxid(),
            epoch: d.current_epoch,
        }
    }

    pub(super) fn broadcast_vote(&mut self, now_ms: u64) {
        let (vote, round) = (self.vote, self.round);
        for s in self.others() {
            self.to(
                s,
                PeerMsg::Vote {
                    vote,
                    round,
                    state: PeerState::Looking,
                },
            );
        }
        if let Role::Looking { last_sent_ms, .. } = &mut self.role {
            *last_sent_ms = now_ms;
        }
    }

    /// Goes back to electing: every client connection closes, the tree is rebuilt
    /// from the log as a restart would (`ZooKeeperServer.shutdown`, then
    /// `loadDataBase` at the next start).
    pub(super) fn look(&mut self, now: ZkNow, why: &str) {
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.close_conn(c);
        }
        {
            let d = lock(&self.disk);
            let (tree, sessions) = replay(&d.log, i64::MAX);
            self.tree = tree;
            self.sessions = sessions;
        }
        self.origins.clear();
        self.round += 1;
        self.vote = self.my_initial_vote();
        let mut round_votes = BTreeMap::new();
        round_votes.insert(self.me, self.vote);
        self.role = Role::Looking {
            round_votes,
            last_sent_ms: now.elapsed_ms,
            decide_at_ms: None,
        };
        self.roles.push(RoleEvent::Looking { why: why.into() });
        self.broadcast_vote(now.elapsed_ms);
        self.try_decide(now);
    }

    pub(super) fn try_decide(&mut self, now: ZkNow) {
        let quorum = &self.cfg;
        let vote = self.vote;
        let Role::Looking {
            round_votes,
            decide_at_ms,
            ..
        } = &mut self.role
        else {
            return;
        };
        let agree = round_votes.values().filter(|v| **v == vote).count();
        if !quorum.quorum(agree) {
            *decide_at_ms = None;
            return;
        }
        // `finalizeWait`: a quorum agrees; a better vote may still be on its way.
        match decide_at_ms {
            None => {
                *decide_at_ms = Some(now.elapsed_ms + FINALIZE_WAIT_MS);
                return;
            }
            Some(at) if now.elapsed_ms < *at => return,
            Some(_) => {}
        }
        let leader = self.vote.leader;
        if leader == self.me {
            self.lead(now);
        } else {
            self.follow(leader, now);
        }
    }

    pub(super) fn on_vote(
        &mut self,
        from: Sid,
        vote: Vote,
        round: u64,
        their: PeerState,
        now: ZkNow,
    ) {
        let looking = matches!(self.role, Role::Looking { .. });
        if !looking {
            // A LOOKING peer is told who leads.
            if their == PeerState::Looking
                && let Some(leader) = self.leader()
            {
                let v = Vote {
                    leader,
                    zxid: self.vote.zxid,
                    epoch: self.vote.epoch,
                };
                let (round, state) = (self.round, self.state());
                self.to(
                    from,
                    PeerMsg::Vote {
                        vote: v,
                        round,
                        state,
                    },
                );
            }
            return;
        }
        if their != PeerState::Looking {
            // Told by the leader itself that it leads: follow it.
            if their == PeerState::Leading && vote.leader == from {
                self.vote = vote;
                self.follow(from, now);
            }
            return;
        }
        if round > self.round {
            self.round = round;
            let initial = self.my_initial_vote();
            self.vote = if vote.beats(&initial) { vote } else { initial };
            if let Role::Looking { round_votes, .. } = &mut self.role {
                round_votes.clear();
            }
            self.broadcast_vote(now.elapsed_ms);
        } else if round < self.round {
            let (v, r) = (self.vote, self.round);
            self.to(
                from,
                PeerMsg::Vote {
                    vote: v,
                    round: r,
                    state: PeerState::Looking,
                },
            );
            return;
        } else if vote.beats(&self.vote) {
            self.vote = vote;
            if let Role::Looking { decide_at_ms, .. } = &mut self.role {
                *decide_at_ms = None;
            }
            self.broadcast_vote(now.elapsed_ms);
        }
        let mine = self.vote;
        if let Role::Looking { round_votes, .. } = &mut self.role {
            round_votes.insert(from, vote);
            round_votes.insert(self.me, mine);
        }
        self.try_decide(now);
    }

    fn lead(&mut self, now: ZkNow) {
        let (accepted, last) = {
            let d = lock(&self.disk);
            (d.accepted_epoch, d.last_zxid())
        };
        let mut infos = BTreeMap::new();
        infos.insert(self.me, (accepted, last));
        let tick = self.tick_ms();
        self.role = Role::Leading(Box::new(Leading {
            since_ms: now.elapsed_ms,
            epoch: None,
            infos,
            established: false,
            counter: 0,
            prep_tree: self.tree.clone(),
            outstanding: BTreeSet::new(),
            learners: BTreeMap::new(),
            tracker: Tracker {
                next_expiration_ms: (now.elapsed_ms / tick + 1) * tick,
                ..Tracker::default()
            },
            expiring: BTreeMap::new(),
        }));
        self.try_fix_epoch(now);
    }

    fn follow(&mut self, leader: Sid, now: ZkNow) {
        let (accepted_epoch, last_zxid) = {
            let d = lock(&self.disk);
            (d.accepted_epoch, d.last_zxid())
        };
        self.role = Role::Following(Following {
            leader,
            epoch: 0,
            last_heard_ms: now.elapsed_ms,
            uptodate: false,
            touched: BTreeMap::new(),
        });
        self.to(
            leader,
            PeerMsg::FollowerInfo {
                accepted_epoch,
                last_zxid,
            },
        );
    }
}

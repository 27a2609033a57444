//! What a member does with its peers: election timers, standing for election and
//! voting, heartbeats, pulling the oplog from the primary, rolling back what the
//! sync source never had, and reporting how far it applied (the commit point and
//! write concerns follow from it).

use super::*;

impl Member {
    /// Whether it should stand for election now.
    pub fn election_due(&self, now: Duration) -> bool {
        self.role != Role::Primary
            && now
                >= self.primary_contact
                    + Duration::from_millis(self.config.election_timeout_ms + self.offset_ms)
    }

    /// When it will stand for election if it hears from no primary (`None`: it is
    /// primary).
    pub fn election_deadline(&self) -> Option<Duration> {
        (self.role != Role::Primary).then(|| {
            self.primary_contact
                + Duration::from_millis(self.config.election_timeout_ms + self.offset_ms)
        })
    }

    /// Makes a new set's oplog and, for member `primary`, its role as a replica set
    /// whose `rs.initiate()` already ran when the run starts: every member has the
    /// "initiating set" entry of term 1, and `primary` is primary in term 1 (a running
    /// deployment has a primary; the run does not wait for the first election). A
    /// no-op on a member that has an oplog.
    pub fn initiate(&mut self, primary: usize, now: Duration) {
        if !self.durable.oplog.is_empty() {
            return;
        }
        self.durable.term = 1;
        self.durable.last_vote = Some((1, primary));
        self.durable.oplog.push(Entry {
            optime: OpTime { t: 1, ts: 1 },
            op: Op::Noop("initiating set".into()),
        });
        let me = self.config.me;
        self.applied[me] = OpTime { t: 1, ts: 1 };
        self.primary_contact = now;
        if me == primary {
            self.role = Role::Primary;
            self.primary = Some(me);
            for h in self.heard.iter_mut() {
                *h = Some(now);
            }
            self.events.push(MemberEvent::Role {
                role: "PRIMARY",
                term: 1,
                why: "the set was initiated with it as primary".into(),
            });
        } else {
            self.primary = Some(primary);
        }
    }

    /// Stands for election: its vote request to send every other member.
    pub fn start_election(&mut self, now: Duration) -> Document {
        self.durable.term += 1;
        self.durable.last_vote = Some((self.durable.term, self.config.me));
        self.role = Role::Candidate;
        self.primary = None;
        self.votes = BTreeSet::from([self.config.me]);
        self.primary_contact = now;
        self.offset_ms = self
            .rng
            .random_range(0..=self.config.election_timeout_ms * 15 / 100);
        let last = self.last_applied();
        let req = Document::new()
            .with("replSetRequestVotes", 1)
            .with("setName", self.config.set_name.as_str())
            .with("dryRun", false)
            .with("term", self.durable.term)
            .with("candidateIndex", self.config.me as i32)
            .with("configVersion", 1)
            .with("lastAppliedOpTime", last.to_doc());
        if self.votes.len() >= self.majority() {
            self.win(now);
        }
        req
    }

    pub(super) fn win(&mut self, now: Duration) {
        self.role = Role::Primary;
        self.primary = Some(self.config.me);
        self.primary_contact = now;
        for h in self.heard.iter_mut() {
            *h = Some(now);
        }
        let term = self.durable.term;
        self.events.push(MemberEvent::Role {
            role: "PRIMARY",
            term,
            why: format!(
                "election succeeded with {} of {} votes",
                self.votes.len(),
                self.config.members.len()
            ),
        });
        let optime = self.next_optime();
        self.append(Op::Noop("new primary".into()), Origin::Replicated, optime);
        self.advance_commit();
    }

    /// A vote reply from member `from`.
    pub fn on_vote_reply(&mut self, from: usize, reply: &Document, term: i64, now: Duration) {
        if let Some(t) = reply.get_i64("term") {
            self.see_term(t, "a vote reply with a higher term");
        }
        if self.role == Role::Candidate
            && self.durable.term == term
            && reply.get("voteGranted").is_some_and(Value::truthy)
        {
            self.votes.insert(from);
            if self.votes.len() >= self.majority() {
                self.win(now);
            }
        }
    }

    /// Whether a primary has lost touch with a majority for the election timeout:
    /// then it steps down.
    pub fn check_liveness(&mut self, now: Duration) {
        if self.role != Role::Primary {
            return;
        }
        let limit = Duration::from_millis(self.config.election_timeout_ms);
        let me = self.config.me;
        let seen = (0..self.config.members.len())
            .filter(|&i| i == me || self.heard[i].is_some_and(|t| now < t + limit))
            .count();
        if seen < self.majority() {
            self.step_down("can't see a majority of the set, relinquishing primary");
        }
    }

    /// A heartbeat to send a peer.
    pub fn heartbeat_request(&self) -> Document {
        Document::new()
            .with("replSetHeartbeat", self.config.set_name.as_str())
            .with("configVersion", 1)
            .with("from", self.me_addr())
            .with("fromId", self.config.me as i32)
            .with("term", self.durable.term)
    }

    /// A peer's heartbeat reply.
    pub fn on_heartbeat_reply(&mut self, from: usize, reply: &Document, now: Duration) {
        if reply.get("ok").is_none_or(|v| !v.truthy()) {
            return;
        }
        let term = reply.get_i64("term").unwrap_or(0);
        self.see_term(term, "a heartbeat reply with a higher term");
        self.heard[from] = Some(now);
        if let Some(op) = reply.get_document("opTime").and_then(OpTime::from_doc)
            && op > self.applied[from]
        {
            self.applied[from] = op;
            self.advance_commit();
        }
        if reply.get_i64("state") == Some(1) && term == self.durable.term {
            if self.role == Role::Candidate {
                self.role = Role::Secondary;
            }
            if self.role != Role::Primary {
                self.primary = Some(from);
                self.primary_contact = now;
            }
        }
        if let Some(c) = reply
            .get_document("$replData")
            .and_then(|r| r.get_document("lastOpCommitted"))
            .and_then(OpTime::from_doc)
            && term == self.durable.term
            && self.role != Role::Primary
        {
            self.learn_commit(c);
        }
    }

    /// The oplog read a secondary sends its sync source: entries from `from_ts` on.
    pub fn fetch_request(&self, from_ts: u64, await_ms: u64) -> Document {
        Document::new()
            .with("find", "oplog.rs")
            .with(
                "filter",
                Document::new().with(
                    "ts",
                    Document::new().with(
                        "$gte",
                        Value::Timestamp {
                            t: 1,
                            i: from_ts as u32,
                        },
                    ),
                ),
            )
            .with("tailable", true)
            .with("awaitData", true)
            .with("maxTimeMS", await_ms as i64)
            .with("term", self.durable.term)
    }

    /// Where the next fetch starts: the last entry's timestamp (so the source's first
    /// entry must be it).
    pub fn fetch_from(&self) -> u64 {
        self.last_applied().ts.max(1)
    }

    /// The sync source's answer to a fetch that started at `from_ts`.
    pub fn on_fetch_reply(
        &mut self,
        source: usize,
        from_ts: u64,
        reply: &Document,
        now: Duration,
    ) -> Fetched {
        let repl = reply.get_document("$replData");
        let term = repl.and_then(|r| r.get_i64("term")).unwrap_or(0);
        self.see_term(term, "an oplog batch with a higher term");
        if self.role == Role::Primary {
            return Fetched::Applied(0);
        }
        if term == self.durable.term {
            self.primary_contact = now;
        }
        let batch: Vec<Entry> = reply
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| v.as_document().and_then(Entry::from_doc))
            .collect();
        let mine = self.last_applied();
        if mine.ts >= 1 {
            // Our last entry must be the source's first.
            let first_ok = batch.first().is_some_and(|e| {
                e.optime.ts == from_ts
                    && self.entry_at(from_ts).is_some_and(|m| m.optime == e.optime)
            });
            if from_ts == mine.ts && !first_ok {
                let floor = self.commit.ts.max(1);
                return Fetched::Diverged { from_ts: floor };
            }
        }
        let mut applied = 0;
        for e in batch {
            if e.optime.ts <= self.last_applied().ts {
                continue;
            }
            if e.optime.ts != self.last_applied().ts + 1 {
                break;
            }
            self.append(e.op, Origin::Replicated, e.optime);
            applied += 1;
        }
        if let Some(c) = repl
            .and_then(|r| r.get_document("lastOpCommitted"))
            .and_then(OpTime::from_doc)
        {
            self.learn_commit(c);
        }
        let _ = source;
        Fetched::Applied(applied)
    }

    pub(super) fn entry_at(&self, ts: u64) -> Option<&Entry> {
        self.durable.oplog.get(ts.checked_sub(1)? as usize)
    }

    /// Rolls back to the last entry shared with the source, whose entries from
    /// `from_ts` on are in `reply` (a fetch answered for [`Fetched::Diverged`]).
    pub fn rollback(&mut self, source: usize, reply: &Document) {
        let theirs: BTreeMap<u64, OpTime> = reply
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| v.as_document().and_then(Entry::from_doc))
            .map(|e| (e.optime.ts, e.optime))
            .collect();
        let mut common = 0usize;
        for e in &self.durable.oplog {
            match theirs.get(&e.optime.ts) {
                Some(o) if *o == e.optime => common = e.optime.ts as usize,
                Some(_) => break,
                // Before the source's batch: shared (committed) history.
                None if theirs
                    .keys()
                    .next()
                    .is_some_and(|first| e.optime.ts < *first) =>
                {
                    common = e.optime.ts as usize
                }
                None => break,
            }
        }
        if common >= self.durable.oplog.len() {
            return;
        }
        let before = std::mem::take(&mut self.data);
        let last_undone = self.last_applied();
        let undone = self.durable.oplog.len() - common;
        self.durable.oplog.truncate(common);
        self.data = self.replay(common);
        let common_op = self.last_applied();
        let me = self.config.me;
        self.applied[me] = common_op;
        if self.commit > common_op {
            self.commit = common_op;
        }
        self.events.push(MemberEvent::Rollback {
            common: common_op,
            undone,
            last_undone,
            source: self.config.members[source].clone(),
        });
        // Every document the rollback changed.
        let namespaces: BTreeSet<String> = before.keys().chain(self.data.keys()).cloned().collect();
        for ns in namespaces {
            let empty = BTreeMap::new();
            let old = before.get(&ns).unwrap_or(&empty);
            let new = self.data.get(&ns).unwrap_or(&empty);
            let ids: BTreeSet<&Vec<u8>> = old.keys().chain(new.keys()).collect();
            for k in ids {
                let (b, a) = (old.get(k), new.get(k));
                if b != a {
                    let id = b
                        .or(a)
                        .and_then(|d| d.get("_id").cloned())
                        .unwrap_or(Value::Null);
                    self.events.push(MemberEvent::Changed {
                        ns: ns.clone(),
                        id,
                        before: b.cloned(),
                        after: a.cloned(),
                        optime: common_op,
                        origin: Origin::RolledBack,
                    });
                }
            }
        }
    }

    /// What to tell the sync source after applying (`replSetUpdatePosition`).
    pub fn update_position(&self) -> Document {
        let me = self.config.me;
        Document::new()
            .with("replSetUpdatePosition", 1)
            .with(
                "optimes",
                vec![Value::Document(
                    Document::new()
                        .with("memberId", me as i32)
                        .with("cfgver", 1)
                        .with("appliedOpTime", self.last_applied().to_doc())
                        .with("durableOpTime", self.last_applied().to_doc()),
                )],
            )
            .with("term", self.durable.term)
    }

    /// Where a write waiting for its concern stands.
    pub fn concern_met(&self, w: &Waiter) -> ConcernState {
        if self.role != Role::Primary || self.durable.term != w.term {
            return ConcernState::Failed(
                Document::new()
                    .with("code", 189)
                    .with("codeName", "PrimarySteppedDown")
                    .with(
                        "errmsg",
                        "Primary stepped down while waiting for replication",
                    )
                    .with(
                        "errInfo",
                        Document::new().with("writeConcern", w.concern.clone()),
                    ),
            );
        }
        // Is the write still in our oplog (a step-down and back cannot have lost it
        // without a term change, checked above)?
        let have = self.applied.iter().filter(|o| **o >= w.optime).count();
        let majority_ok = w.members == usize::MAX && self.commit >= w.optime;
        if majority_ok || (w.members != usize::MAX && have >= w.members) {
            ConcernState::Met
        } else {
            ConcernState::Waiting
        }
    }

    /// The `writeConcernError` of a write whose `wtimeout` passed.
    pub fn wtimeout_error(w: &Waiter) -> Document {
        Document::new()
            .with("code", 64)
            .with("codeName", "WriteConcernFailed")
            .with("errmsg", "waiting for replication timed out")
            .with(
                "errInfo",
                Document::new()
                    .with("wtimeout", true)
                    .with("writeConcern", w.concern.clone()),
            )
    }
}

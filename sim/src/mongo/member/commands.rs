//! The commands a member answers: the dispatch, `hello`, the peers' replication
//! commands (`replSetHeartbeat`, `replSetRequestVotes`, `replSetUpdatePosition`),
//! and what every write shares (write concern, acknowledgement, errors).

use super::*;

/// A write's concern: the members to wait for (`usize::MAX`: a majority), its
/// `wtimeout` in ms, and the concern as the reply echoes it.
pub(super) type Concern = (usize, Option<u64>, Document);

impl Member {
    /// Runs one command from `host` (a client, or a peer member).
    pub fn command(&mut self, host: &str, body: &Document, now: Duration) -> Handled {
        let Some((name, arg)) = body.first() else {
            return Handled::Reply(error_reply(59, "CommandNotFound", "no such command: ''"));
        };
        let db = body.get_str("$db").unwrap_or("");
        if db.is_empty() {
            return Handled::Reply(error_reply(
                40571,
                "Location40571",
                "OP_MSG requests require a $db argument",
            ));
        }
        let arg = arg.clone();
        match name {
            "hello" | "isMaster" | "ismaster" => Handled::Reply(self.hello(name == "hello")),
            "ping" => Handled::Reply(Document::new().with("ok", 1.0)),
            "findAndModify" | "findandmodify" => self.find_and_modify(host, db, &arg, body),
            "insert" => self.insert(host, db, &arg, body),
            "delete" => self.delete(host, db, &arg, body),
            "find" => self.find(db, &arg, body),
            "replSetHeartbeat" => Handled::Reply(self.heartbeat(body, now)),
            "replSetRequestVotes" => Handled::Reply(self.request_votes(body, now)),
            "replSetUpdatePosition" => Handled::Reply(self.update_position_cmd(body)),
            other => Handled::Reply(error_reply(
                59,
                "CommandNotFound",
                format!("no such command: '{other}'"),
            )),
        }
    }

    pub(super) fn hello(&self, modern: bool) -> Document {
        let primary = self.role == Role::Primary;
        let mut d = Document::new();
        d.set(
            if modern {
                "isWritablePrimary"
            } else {
                "ismaster"
            },
            primary,
        );
        d.set("topologyVersion", Document::new().with("counter", 0i64));
        d.set(
            "hosts",
            self.config
                .members
                .iter()
                .map(|m| Value::from(m.as_str()))
                .collect::<Vec<_>>(),
        );
        d.set("setName", self.config.set_name.as_str());
        d.set("setVersion", 1);
        d.set("secondary", !primary);
        if let Some(p) = self.primary() {
            d.set("primary", self.config.members[p].as_str());
        }
        d.set("me", self.me_addr());
        d.set(
            "lastWrite",
            Document::new()
                .with("opTime", self.last_applied().to_doc())
                .with("majorityOpTime", self.commit.to_doc()),
        );
        d.set("maxBsonObjectSize", 16_777_216);
        d.set("maxMessageSizeBytes", 48_000_000);
        d.set("maxWriteBatchSize", 100_000);
        d.set("logicalSessionTimeoutMinutes", 30);
        d.set("minWireVersion", 0);
        d.set("maxWireVersion", 21);
        d.set("readOnly", false);
        d.set("ok", 1.0);
        d
    }

    pub(super) fn heartbeat(&mut self, body: &Document, now: Duration) -> Document {
        if body.get_str("replSetHeartbeat") != Some(self.config.set_name.as_str()) {
            return error_reply(
                93,
                "InconsistentReplicaSetNames",
                format!(
                    "Our set name of {} does not match name {} reported by remote node",
                    self.config.set_name,
                    body.get("replSetHeartbeat")
                        .map(|v| v.to_string())
                        .unwrap_or_default()
                ),
            );
        }
        if let Some(t) = body.get_i64("term") {
            self.see_term(t, "a heartbeat with a higher term");
        }
        if let Some(from) = body.get_i64("fromId").map(|i| i as usize)
            && from < self.heard.len()
        {
            self.heard[from] = Some(now);
        }
        Document::new()
            .with("ok", 1.0)
            .with("set", self.config.set_name.as_str())
            .with("state", self.role.code())
            .with("term", self.durable.term)
            .with("configVersion", 1)
            .with("opTime", self.last_applied().to_doc())
            .with("durableOpTime", self.last_applied().to_doc())
            .with(
                "$replData",
                Document::new()
                    .with("term", self.durable.term)
                    .with("lastOpCommitted", self.commit.to_doc())
                    .with("primaryIndex", self.primary().map_or(-1, |p| p as i32)),
            )
    }

    pub(super) fn request_votes(&mut self, body: &Document, now: Duration) -> Document {
        let term = body.get_i64("term").unwrap_or(0);
        let dry = body.get("dryRun").is_some_and(Value::truthy);
        if !dry {
            self.see_term(term, "a vote request with a higher term");
        }
        let candidate = body.get_i64("candidateIndex").unwrap_or(-1);
        let their_last = body
            .get_document("lastAppliedOpTime")
            .or_else(|| body.get_document("lastWrittenOpTime"))
            .and_then(OpTime::from_doc)
            .unwrap_or_default();
        let mine = self.last_applied();
        let (granted, reason) = if term < self.durable.term {
            (false, "candidate's term is lower than mine".to_string())
        } else if body.get_i64("configVersion") != Some(1) {
            (
                false,
                "candidate's config version differs from mine".to_string(),
            )
        } else if body.get_str("setName") != Some(self.config.set_name.as_str()) {
            (false, "candidate's set name differs from mine".to_string())
        } else if their_last < mine {
            (
                false,
                format!(
                    "candidate's data is staler than mine. candidate's last applied OpTime: {their_last}, my last applied OpTime: {mine}"
                ),
            )
        } else if !dry && self.durable.last_vote.is_some_and(|(t, _)| t >= term) {
            let (t, c) = self.durable.last_vote.unwrap_or_default();
            (
                false,
                format!("already voted for another candidate ({c}) this term ({t})"),
            )
        } else {
            if !dry {
                self.durable.last_vote = Some((term, candidate.max(0) as usize));
                // A vote cast restarts the wait for an election.
                self.primary_contact = now;
            }
            (true, String::new())
        };
        Document::new()
            .with("term", self.durable.term)
            .with("voteGranted", granted)
            .with("reason", reason)
            .with("ok", 1.0)
    }

    pub(super) fn update_position_cmd(&mut self, body: &Document) -> Document {
        if let Some(t) = body.get_i64("term") {
            self.see_term(t, "a position update with a higher term");
        }
        for v in body.get_array("optimes").unwrap_or(&[]) {
            let Some(d) = v.as_document() else { continue };
            let (Some(id), Some(op)) = (
                d.get_i64("memberId"),
                d.get_document("appliedOpTime").and_then(OpTime::from_doc),
            ) else {
                continue;
            };
            let id = id as usize;
            if id < self.applied.len() && op > self.applied[id] {
                self.applied[id] = op;
            }
        }
        self.advance_commit();
        Document::new().with("ok", 1.0)
    }

    /// Parses `writeConcern`: the members to wait for (`usize::MAX`: majority) and
    /// `wtimeout`.
    pub(super) fn concern(&self, body: &Document) -> Result<Concern, Document> {
        let Some(wc) = body.get("writeConcern") else {
            // The default write concern of a replica set since 5.0: majority.
            return Ok((usize::MAX, None, Document::new().with("w", "majority")));
        };
        let Some(wc) = wc.as_document() else {
            return Err(error_reply(
                14,
                "TypeMismatch",
                "BSON field 'writeConcern' is the wrong type, expected type 'object'",
            ));
        };
        let members = match wc.get("w") {
            None => usize::MAX,
            Some(Value::String(s)) if s == "majority" => usize::MAX,
            Some(Value::String(s)) => {
                return Err(error_reply(
                    79,
                    "UnknownReplWriteConcern",
                    format!("No write concern mode named '{s}' found in replica set configuration"),
                ));
            }
            Some(v) => match v.as_i64() {
                Some(n) if n >= 0 => n as usize,
                _ => {
                    return Err(error_reply(
                        9,
                        "FailedToParse",
                        format!(
                            "w has to be a non-negative number and not greater than 50; found: {v}"
                        ),
                    ));
                }
            },
        };
        let wtimeout = wc.get_i64("wtimeout").filter(|t| *t > 0).map(|t| t as u64);
        Ok((members, wtimeout, wc.clone()))
    }

    pub(super) fn finish_write(&self, reply: Document, concern: Concern, wrote: bool) -> Handled {
        let (members, wtimeout_ms, concern) = concern;
        if !wrote || members <= 1 && members != usize::MAX {
            return Handled::Reply(reply);
        }
        if members != usize::MAX && members > self.config.members.len() {
            let mut reply = reply;
            reply.set(
                "writeConcernError",
                Document::new()
                    .with("code", 100)
                    .with("codeName", "UnsatisfiableWriteConcern")
                    .with("errmsg", "Not enough data-bearing nodes"),
            );
            return Handled::Reply(reply);
        }
        Handled::WaitConcern(Waiter {
            reply,
            optime: self.last_applied(),
            members,
            wtimeout_ms,
            concern,
            term: self.durable.term,
        })
    }

    pub(super) fn collection_name(arg: &Value) -> Result<&str, Document> {
        match arg {
            Value::String(s) if !s.is_empty() => Ok(s),
            Value::String(_) => Err(error_reply(
                73,
                "InvalidNamespace",
                "Invalid namespace specified",
            )),
            _ => Err(error_reply(
                73,
                "InvalidNamespace",
                format!("collection name has invalid type {}", query::type_name(arg)),
            )),
        }
    }

    pub(super) fn new_object_id(&mut self) -> Value {
        self.object_ids += 1;
        let mut b = [0u8; 12];
        b[..8].copy_from_slice(&self.config.seed.to_be_bytes());
        b[8..].copy_from_slice(&self.object_ids.to_be_bytes());
        b[0] = self.config.me as u8;
        Value::ObjectId(b)
    }

    pub(super) fn dup_key(ns: &str, id: &Value) -> Document {
        error_reply(
            11000,
            "DuplicateKey",
            format!(
                "E11000 duplicate key error collection: {ns} index: _id_ dup key: {{ _id: {id} }}"
            ),
        )
        .with("keyPattern", Document::new().with("_id", 1))
        .with("keyValue", Document::new().with("_id", id.clone()))
    }
}

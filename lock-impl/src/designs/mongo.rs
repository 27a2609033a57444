//! The MongoDB designs: the lock-service comparison's `findAndModify` lock ("加锁：执行findAndModify原子命令
//! 查找document，若不存在则新增 2.解锁：删除document"), with the expiry field that common
//! libraries add, in three variants.
//!
//! The acquisition is ShedLock's `MongoLockProvider` (and the npm/Go lock packages
//! built like it): one atomic `findAndModify` on collection `locks`,
//!
//! ```text
//! { findAndModify: "locks",
//!   query:  { _id: <key>, expiresAt: { $lt: <client's now> } },
//!   update: { $set: { owner: <owner>, expiresAt: <client's now + lease> }, $inc: { version: 1 } },
//!   upsert: true, new: true, writeConcern: { w: … } }
//! ```

use async_trait::async_trait;

use super::{check_guard, guard};
use crate::lock::Attempt;
use crate::mongo::client::{DUPLICATE_KEY, NOT_PRIMARY_NO_SECONDARY_OK, NOT_WRITABLE_PRIMARY};
use crate::mongo::{
    CommandError, Document, MongoConn, MongoError, MongoServer, Value, first_write_error, is_ok,
    write_concern_error,
};
use crate::scale::{MONGO_MIN_HEARTBEAT_FREQUENCY, MONGO_SERVER_SELECTION_TIMEOUT};
use crate::{Acquire, AcquireOptions, Deps, Guard, LockDesign, LockError, Release, retry_acquire};

/// The collection the MongoDB designs lock in.
pub const MONGO_LOCKS_COLLECTION: &str = "locks";

/// Which write concern a design asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Concern {
    One,
    Majority,
}

/// What became of one command.
enum Outcome {
    /// The primary's reply (`ok: 0` included).
    Reply(Document),
    /// Never sent, or refused before doing anything (no primary, not primary).
    NotSent(String),
    /// Sent, reply lost: the outcome is unknown.
    Unknown(String),
}

/// One connection to the member believed primary, found again when it fails.
struct Session {
    deps: Deps,
    server: Option<MongoServer>,
    conn: tokio::sync::Mutex<Option<MongoConn>>,
}

fn mongo_error(command: &str, e: MongoError) -> LockError {
    LockError::Mongo {
        command: command.to_string(),
        source: e,
    }
}

impl Session {
    fn new(deps: Deps) -> Self {
        Session {
            server: deps.system::<MongoServer>().cloned(),
            deps,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    fn server(&self, design: &'static str) -> Result<&MongoServer, LockError> {
        self.server.as_ref().ok_or(LockError::NoMongo { design })
    }

    /// A server selection for a write, as a driver runs it (the server-selection and
    /// SDAM specifications): every member is checked at once with `hello`, each on its
    /// own (a member that cannot be reached, its dial hanging across a partition or to
    /// a dead machine until the timeout, holds up none of the others); the first that
    /// answers as the writable primary is selected, its connection used. A member that
    /// answers otherwise (a secondary, a refused dial) is checked again no sooner than
    /// `minHeartbeatFrequencyMS` after its last check began, as a selection that found
    /// no primary asks every monitor for an immediate check, so a newly elected
    /// primary is found within one such interval. The selection gives up after
    /// `serverSelectionTimeoutMS` (both constants at the world's scale).
    async fn find_primary(&self, server: &MongoServer) -> Result<MongoConn, String> {
        use futures_util::StreamExt;
        use std::time::Duration;
        let clock = &self.deps.clock;
        let interval = self.deps.scale.of(&MONGO_MIN_HEARTBEAT_FREQUENCY);
        let selection = self.deps.scale.of(&MONGO_SERVER_SELECTION_TIMEOUT);
        let started = clock.now();
        // One check of member `i`, `delay` from now, over `conn` if the last check left
        // one open: the member's index and a writable primary's connection, or why not
        // (with the connection, to check again over it).
        let check = |i: usize, conn: Option<MongoConn>, delay: Duration| {
            let (host, port) = server.seeds[i].clone();
            async move {
                clock.sleep(delay).await;
                let began = clock.now();
                let addr = format!("{host}:{port}");
                let mut conn = match conn.filter(|c| c.broken().is_none()) {
                    Some(c) => c,
                    None => match MongoConn::connect(
                        server.dialer.as_ref(),
                        &host,
                        port,
                        clock.clone(),
                        server.timeout_ms,
                    )
                    .await
                    {
                        Ok(c) => c,
                        Err(e) => return (i, began, Err((None, format!("{addr}: {e}")))),
                    },
                };
                match conn
                    .command("admin", Document::new().with("hello", 1))
                    .await
                {
                    Ok(hello) if hello.get("isWritablePrimary").is_some_and(Value::truthy) => {
                        (i, began, Ok(conn))
                    }
                    Ok(_) => (i, began, Err((Some(conn), format!("{addr}: not primary")))),
                    Err(e) => (i, began, Err((None, format!("{addr}: hello: {e}")))),
                }
            }
        };
        let mut checks: futures_util::stream::FuturesUnordered<_> = (0..server.seeds.len())
            .map(|i| check(i, None, Duration::ZERO))
            .collect();
        let mut last: Vec<String> = vec![String::new(); server.seeds.len()];
        let deadline = clock.sleep(selection);
        futures_util::pin_mut!(deadline);
        loop {
            tokio::select! {
                biased;
                next = checks.next() => match next {
                    Some((_, _, Ok(conn))) => return Ok(conn),
                    Some((i, began, Err((conn, why)))) => {
                        last[i] = why;
                        let since = clock.now().saturating_sub(began);
                        checks.push(check(i, conn, interval.saturating_sub(since)));
                    }
                    None => break,
                },
                _ = &mut deadline => break,
            }
        }
        let waited = clock.now().saturating_sub(started);
        let tried: Vec<&str> = last
            .iter()
            .filter(|w| !w.is_empty())
            .map(String::as_str)
            .collect();
        Err(format!(
            "no writable primary within {} ms: {}",
            waited.as_millis(),
            tried.join("; ")
        ))
    }

    async fn run(&self, design: &'static str, body: Document) -> Result<Outcome, LockError> {
        let server = self.server(design)?;
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|c| c.broken().is_some()) {
            *slot = None;
        }
        if slot.is_none() {
            match self.find_primary(server).await {
                Ok(c) => *slot = Some(c),
                Err(why) => return Ok(Outcome::NotSent(why)),
            }
        }
        let Some(conn) = slot.as_mut() else {
            return Ok(Outcome::NotSent("no connection".into()));
        };
        let name = body.first().map(|(k, _)| k.to_string()).unwrap_or_default();
        match conn.command(&server.database, body).await {
            Ok(reply) => {
                if !is_ok(&reply) {
                    let e = CommandError::from_doc(&reply);
                    if e.code == NOT_WRITABLE_PRIMARY || e.code == NOT_PRIMARY_NO_SECONDARY_OK {
                        // The member stepped down: find the primary again next time.
                        *slot = None;
                        return Ok(Outcome::NotSent(format!("{name}: {e}")));
                    }
                }
                Ok(Outcome::Reply(reply))
            }
            Err(e) if e.outcome_unknown() => {
                *slot = None;
                Ok(Outcome::Unknown(format!("{name}: {e}")))
            }
            Err(e @ MongoError::Connection { .. }) => {
                *slot = None;
                Ok(Outcome::NotSent(format!("{name}: {e}")))
            }
            Err(e) => Err(mongo_error(&name, e)),
        }
    }

    fn write_concern(&self, concern: Concern) -> Document {
        match concern {
            Concern::One => Document::new().with("w", 1),
            Concern::Majority => {
                let timeout = self.server.as_ref().map_or(1_000, |s| s.timeout_ms);
                Document::new()
                    .with("w", "majority")
                    .with("wtimeout", (timeout / 2).max(1) as i64)
            }
        }
    }
}

/// The `findAndModify` lock (see the module doc).
///
/// A free key has no document: the upsert inserts `{_id: key, owner, expiresAt,
/// version: 1}` and the lock is ours. An expired lock's document matches the query
/// and is taken over. A live lock's document does not match, so the upsert tries to
/// insert a second document with the same `_id` and the server refuses it with
/// `DuplicateKey` (11000, "E11000 duplicate key error …"): held (retried within the
/// wait budget). `expiresAt` is a date computed on the *client's* wall clock and
/// compared with another client's wall clock: the server never looks at its own.
///
/// - `mongo-find-and-modify` (`w: 1`): the primary acknowledges the write as soon as it
///   applied it. Known failure: the acknowledged lock lives on one member until a
///   secondary copies it. If the primary fails before that, a secondary without the
///   lock is elected, grants it to the next client, and the old primary, rejoining,
///   rolls the write back (Jepsen: every write concern below majority loses
///   acknowledged writes): two holders. Like every lease lock without fencing, a
///   holder paused past its lease also overlaps the next one.
/// - `mongo-find-and-modify-majority` (`w: "majority"`, `wtimeout` half the response
///   timeout): acknowledged once a majority of members have the write, so any member
///   that can be elected has it (a voter refuses a candidate whose oplog is behind its
///   own). A `writeConcernError` (timed out, or the primary stepped down) leaves the
///   outcome unknown: the write may survive or be rolled back. Known failure: the
///   lease is still measured on client clocks, so a pause past the lease (or clocks
///   apart) gives two holders.
/// - `mongo-find-and-modify-fenced` (`w: "majority"`): the document's `version`,
///   incremented by every acquisition, is the fencing token; release keeps the
///   document (sets `expiresAt` to the epoch) so the counter never restarts. Known
///   failure: two holders in belief after a pause; a fencing storage refuses the stale
///   one.
///
/// Release (`-find-and-modify`, `-majority`): `delete` of `{_id: key, owner: <owner>}`
/// (limit 1) with the design's write concern: one deleted is ours released, none
/// means it was not ours (taken over after expiry, or gone).
///
/// Finding the primary: a driver's server selection, `hello` on every member of the
/// seed list at once, each member checked again every `minHeartbeatFrequencyMS` until
/// one answers as writable primary (or `serverSelectionTimeoutMS` passes); see
/// `Session::find_primary`. A command answered
/// `NotWritablePrimary` (10107) did nothing: the connection is dropped and the next
/// attempt looks for the primary again, as a driver marks the server unknown.
pub struct MongoFindAndModify {
    name: &'static str,
    concern: Concern,
    fenced: bool,
    session: Session,
}

impl MongoFindAndModify {
    /// `w: 1`.
    pub const NAME: &'static str = "mongo-find-and-modify";
    /// `w: "majority"`.
    pub const MAJORITY_NAME: &'static str = "mongo-find-and-modify-majority";
    /// `w: "majority"` with the document's `version` as fencing token.
    pub const FENCED_NAME: &'static str = "mongo-find-and-modify-fenced";

    /// `mongo-find-and-modify`, over the world's replica set (`deps.system::<MongoServer>()`).
    pub fn new(deps: Deps) -> Self {
        Self::build(Self::NAME, Concern::One, false, deps)
    }

    /// `mongo-find-and-modify-majority`.
    pub fn majority(deps: Deps) -> Self {
        Self::build(Self::MAJORITY_NAME, Concern::Majority, false, deps)
    }

    /// `mongo-find-and-modify-fenced`.
    pub fn fenced(deps: Deps) -> Self {
        Self::build(Self::FENCED_NAME, Concern::Majority, true, deps)
    }

    fn build(name: &'static str, concern: Concern, fenced: bool, deps: Deps) -> Self {
        MongoFindAndModify {
            name,
            concern,
            fenced,
            session: Session::new(deps),
        }
    }

    fn now_ms(&self) -> i64 {
        self.session.deps.clock.wall().as_millis() as i64
    }

    /// The acquisition's `findAndModify`.
    pub fn acquire_command(
        key: &str,
        owner: &str,
        now_ms: i64,
        lease_ms: u64,
        wc: Document,
    ) -> Document {
        Document::new()
            .with("findAndModify", MONGO_LOCKS_COLLECTION)
            .with(
                "query",
                Document::new().with("_id", key).with(
                    "expiresAt",
                    Document::new().with("$lt", Value::DateTime(now_ms)),
                ),
            )
            .with(
                "update",
                Document::new()
                    .with(
                        "$set",
                        Document::new().with("owner", owner).with(
                            "expiresAt",
                            Value::DateTime(now_ms.saturating_add(lease_ms as i64)),
                        ),
                    )
                    .with("$inc", Document::new().with("version", 1i64)),
            )
            .with("upsert", true)
            .with("new", true)
            .with("writeConcern", wc)
    }
}

fn unexpected(command: &str, e: CommandError) -> LockError {
    mongo_error(command, MongoError::Command(e))
}

#[async_trait]
impl LockDesign for MongoFindAndModify {
    fn name(&self) -> &str {
        self.name
    }

    async fn acquire(&self, key: &str, options: AcquireOptions) -> Result<Acquire, LockError> {
        self.session.server(self.name)?;
        if key.is_empty() {
            return Err(LockError::EmptyKey);
        }
        let deps = &self.session.deps;
        retry_acquire(deps, key, options, || async move {
            let owner = deps.entropy.owner_value();
            let sent_at = deps.clock.now();
            let cmd = Self::acquire_command(
                key,
                &owner,
                self.now_ms(),
                options.lease_ms,
                self.session.write_concern(self.concern),
            );
            let reply = match self.session.run(self.name, cmd).await? {
                Outcome::Reply(r) => r,
                Outcome::NotSent(_) => return Ok(Attempt::Held),
                Outcome::Unknown(why) => return Ok(Attempt::Unknown(why)),
            };
            if !is_ok(&reply) {
                let e = CommandError::from_doc(&reply);
                if e.code == DUPLICATE_KEY {
                    return Ok(Attempt::Held);
                }
                return Err(unexpected("findAndModify", e));
            }
            if let Some(wce) = write_concern_error(&reply) {
                // Written on the primary, not (yet) on a majority: it may be rolled back.
                return Ok(Attempt::Unknown(format!(
                    "findAndModify: writeConcernError {wce}"
                )));
            }
            let Some(doc) = reply.get_document("value") else {
                return Err(mongo_error(
                    "findAndModify",
                    MongoError::Protocol(format!("no document in the reply {reply}")),
                ));
            };
            if doc.get_str("owner") != Some(owner.as_str()) {
                return Err(mongo_error(
                    "findAndModify",
                    MongoError::Protocol(format!("the new document is not ours: {doc}")),
                ));
            }
            let mut g = guard(self.name, key, owner, sent_at, Some(options.lease_ms));
            if self.fenced {
                g.token = doc.get_i64("version").and_then(|v| u64::try_from(v).ok());
            }
            Ok(Attempt::Acquired(g))
        })
        .await
    }

    async fn release(&self, guard: &Guard) -> Result<Release, LockError> {
        check_guard(self.name, guard)?;
        let wc = self.session.write_concern(self.concern);
        let filter = Document::new()
            .with("_id", guard.key.as_str())
            .with("owner", guard.owner.as_str());
        let (name, cmd) = if self.fenced {
            (
                "findAndModify",
                Document::new()
                    .with("findAndModify", MONGO_LOCKS_COLLECTION)
                    .with("query", filter)
                    .with(
                        "update",
                        Document::new().with(
                            "$set",
                            Document::new().with("expiresAt", Value::DateTime(0)),
                        ),
                    )
                    .with("writeConcern", wc),
            )
        } else {
            (
                "delete",
                Document::new()
                    .with("delete", MONGO_LOCKS_COLLECTION)
                    .with(
                        "deletes",
                        vec![Value::Document(
                            Document::new().with("q", filter).with("limit", 1),
                        )],
                    )
                    .with("writeConcern", wc),
            )
        };
        let reply = match self.session.run(self.name, cmd).await? {
            Outcome::Reply(r) => r,
            Outcome::NotSent(why) => {
                return Err(mongo_error(
                    name,
                    MongoError::Connection { sent: false, why },
                ));
            }
            Outcome::Unknown(why) => return Ok(Release::Unknown(why)),
        };
        if !is_ok(&reply) {
            return Err(unexpected(name, CommandError::from_doc(&reply)));
        }
        if let Some(e) = first_write_error(&reply) {
            return Err(unexpected(name, e));
        }
        if let Some(wce) = write_concern_error(&reply) {
            return Ok(Release::Unknown(format!("{name}: writeConcernError {wce}")));
        }
        let done = if self.fenced {
            matches!(reply.get("value"), Some(Value::Document(_)))
        } else {
            reply.get_i64("n") == Some(1)
        };
        Ok(if done {
            Release::Removed
        } else {
            Release::NotRemoved
        })
    }
}

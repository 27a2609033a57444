//! What a connection's statements do: [`MySqlModel::query`] by statement, the user
//! locks of `GET_LOCK` and `RELEASE_LOCK`, and the statements that wait for a lock.

use lock_impl::mysql::proto::{ErrPacket, OkPacket, Reply, encode_reply};

use super::{
    ConnId, MySqlModel, ServerEvent, WaitKind, Waiting, int_result, lock_wait_timeout, ok,
    same_lock, text,
};
use crate::mysql::innodb::Refusal;
use crate::mysql::sql::{Statement, parse};

impl MySqlModel {
    /// Runs one statement for connection `id`.
    pub fn query(&mut self, id: ConnId, sql: &str) -> Reply {
        let stmt = match parse(sql) {
            Ok(s) => s,
            Err(e) => return Reply::Err(e),
        };
        let st = self.engine.status(id);
        let reply = match stmt {
            Statement::Create { table, columns } => {
                let created = self.engine.create(id, &table, &columns);
                // An existing table: `ER_TABLE_EXISTS_ERROR` as a note.
                Reply::Ok(OkPacket {
                    status: self.engine.status(id),
                    warnings: u16::from(!created),
                    ..OkPacket::default()
                })
            }
            Statement::Begin => {
                self.engine.begin(id);
                ok(self.engine.status(id))
            }
            Statement::Commit | Statement::Rollback => {
                self.engine.end(id, stmt == Statement::Commit, false);
                ok(self.engine.status(id))
            }
            Statement::Insert { .. }
            | Statement::Delete { .. }
            | Statement::Update { .. }
            | Statement::SelectForUpdate { .. } => self.row_statement(id, &stmt, sql, st),
            Statement::GetLock {
                name,
                timeout,
                column,
            } => {
                let name = match name {
                    Some(n) if !n.is_empty() => n,
                    _ => return int_result(column, 1, None, st),
                };
                self.get_lock(id, name, timeout, column, st)
            }
            Statement::ReleaseLock { name, column } => {
                let name = match name {
                    Some(n) if !n.is_empty() => n,
                    _ => return int_result(column, 1, None, st),
                };
                self.release_lock(id, name, column, st)
            }
            Statement::SetWaitTimeout { seconds } => {
                // The variable's range is 1..=31536000; a value outside is clamped with
                // a warning (`ER_TRUNCATED_WRONG_VALUE` as a note).
                let clamped = seconds.clamp(1, 31_536_000);
                if let Some(c) = self.conns.get_mut(&id) {
                    c.wait_timeout_s = clamped as u64;
                }
                Reply::Ok(OkPacket {
                    status: st,
                    warnings: u16::from(clamped != seconds),
                    ..OkPacket::default()
                })
            }
            Statement::SetLockWaitTimeout { seconds } => {
                // MariaDB 10.11's range: 0..=100000000, clamped with a warning.
                let clamped = seconds.clamp(0, 100_000_000);
                if let Some(c) = self.conns.get_mut(&id) {
                    c.lock_wait_timeout_s = clamped as u64;
                }
                Reply::Ok(OkPacket {
                    status: st,
                    warnings: u16::from(clamped != seconds),
                    ..OkPacket::default()
                })
            }
            Statement::IsUsedLock { name, column } => {
                let holder = name
                    .filter(|n| !n.is_empty())
                    .and_then(|n| self.user_locks.get(&n).map(|(h, _)| i64::from(*h)));
                int_result(column, 10, holder, st)
            }
        };
        self.events.extend(self.engine.take_events());
        reply
    }

    /// Runs connection `id`'s waiting statement again: its reply if it ran now
    /// (`GET_LOCK` took its lock; a statement got its row), `None` if it still waits.
    pub fn retry(&mut self, id: ConnId, wait: &Waiting) -> Option<Vec<u8>> {
        // Someone has waited longer for the same lock: it goes first.
        if self
            .queue
            .range(..wait.ticket)
            .any(|(_, (_, kind))| same_lock(kind, &wait.kind))
        {
            return None;
        }
        let reply = self.run_waiting(id, wait)?;
        self.queue.remove(&wait.ticket);
        Some(reply)
    }

    /// A waiter gives up (its timeout ran out): it leaves the queue.
    pub fn leave_queue(&mut self, ticket: u64) {
        self.queue.remove(&ticket);
    }

    fn run_waiting(&mut self, id: ConnId, wait: &Waiting) -> Option<Vec<u8>> {
        match &wait.kind {
            WaitKind::GetLock { name, column } => {
                if self.user_locks.contains_key(name) {
                    return None;
                }
                self.user_locks.insert(name.clone(), (id, 1));
                self.events.push(ServerEvent::LockTaken {
                    conn: id,
                    name: text(name),
                });
                Some(encode_reply(
                    &int_result(column.clone(), 1, Some(1), self.engine.status(id)),
                    wait.seq,
                ))
            }
            WaitKind::Row { sql, .. } => {
                self.waiting = None;
                let reply = self.query(id, sql);
                if self.waiting.take().is_some() {
                    return None;
                }
                Some(encode_reply(&reply, wait.seq))
            }
        }
    }

    /// A statement on a table (`INSERT`, `DELETE`, `UPDATE`, `SELECT ... FOR UPDATE`):
    /// InnoDB's reply, or a wait for a row lock another transaction holds.
    fn row_statement(&mut self, id: ConnId, stmt: &Statement, sql: &str, st: u16) -> Reply {
        let database = self.config.database.clone();
        match self.engine.run(id, stmt, sql, &database) {
            Ok(r) => r,
            Err(Refusal::Err(e)) => Reply::Err(e),
            Err(Refusal::Locked(table, key)) => {
                let timeout_s = self.conns.get(&id).map_or(0, |c| c.lock_wait_timeout_s);
                if timeout_s == 0 {
                    Reply::Err(lock_wait_timeout())
                } else {
                    self.waiting = Some(Waiting {
                        kind: WaitKind::Row {
                            sql: sql.to_string(),
                            table,
                            key,
                        },
                        timeout_ms: timeout_s.saturating_mul(1000),
                        seq: 1,
                        status: st,
                        ticket: 0,
                    });
                    // Not sent: `receive` turns it into a wait.
                    ok(st)
                }
            }
        }
    }

    /// `GET_LOCK(name, timeout)` of a non-empty name.
    fn get_lock(
        &mut self,
        id: ConnId,
        name: Vec<u8>,
        timeout: i64,
        column: String,
        st: u16,
    ) -> Reply {
        match self.user_locks.get_mut(&name) {
            Some((holder, holds)) if *holder == id => {
                *holds += 1;
                int_result(column, 1, Some(1), st)
            }
            Some(_) if timeout == 0 => int_result(column, 1, Some(0), st),
            // A negative timeout would wait forever (as in MySQL 5.7+); the
            // model does not take it.
            Some(_) if timeout < 0 => Reply::Err(ErrPacket::new(
                1235,
                "42000",
                "This version of MariaDB doesn't yet support \
                 'GET_LOCK with a negative timeout in the locksim model'",
            )),
            Some(_) => {
                self.waiting = Some(Waiting {
                    kind: WaitKind::GetLock { name, column },
                    timeout_ms: (timeout as u64).saturating_mul(1000),
                    seq: 1,
                    status: st,
                    ticket: 0,
                });
                // Not sent: `receive` turns it into a wait.
                ok(st)
            }
            None => {
                self.user_locks.insert(name.clone(), (id, 1));
                self.events.push(ServerEvent::LockTaken {
                    conn: id,
                    name: text(&name),
                });
                int_result(column, 1, Some(1), st)
            }
        }
    }

    /// `RELEASE_LOCK(name)` of a non-empty name.
    fn release_lock(&mut self, id: ConnId, name: Vec<u8>, column: String, st: u16) -> Reply {
        match self.user_locks.get_mut(&name) {
            None => int_result(column, 1, None, st),
            Some((holder, _)) if *holder != id => int_result(column, 1, Some(0), st),
            Some((_, holds)) => {
                *holds -= 1;
                if *holds == 0 {
                    self.user_locks.remove(&name);
                    self.events.push(ServerEvent::LockReleased {
                        conn: id,
                        name: text(&name),
                    });
                }
                int_result(column, 1, Some(1), st)
            }
        }
    }
}

//! The servers' own record of the lock in a real run, sampled by the parent from the
//! servers' answers (the simulator's servers record it as they serve): what each
//! server holds under the lock key, its role, a session's end, each as its system's
//! watchers and answers give it. The checkers that judge by this record still say
//! `Unknown` on a real run (a sample can miss a short-lived value); the scenarios'
//! probes read it to say whether their fault happened.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sim::history::{EventKind, ServerEvent};

use super::Run;
use super::system::{SessionWatch, Sink, Watcher, writer_of};

impl Run {
    /// Records what server `host` holds under the lock key when it differs from
    /// what was last recorded: a `Written` (by the client its owner value names or
    /// was granted to, else the server itself) or a `Removed` (`cause`: `lost` when a restart lost it, else
    /// `gone`, for a key seen absent: deleted or expired, the sample does not say).
    /// A real server's record is sampled (every 20 ms, and at each crash): a value held
    /// for less than that can be missed, so the checkers that judge by the servers'
    /// record still say `Unknown` on a real run (`RunParams::server_records`); the
    /// scenarios' probes read it to say whether the fault happened.
    pub(super) fn note_lock_value(&self, host: &str, value: Option<String>, cause: &str) {
        let key = &self.cfg.workload.key;
        let mut values = self.lock_values.lock().expect("lock values");
        let event = match (values.get(host), value) {
            (Some(old), Some(v)) if *old == v => return,
            (None, None) => return,
            (_, Some(v)) => {
                values.insert(host.to_string(), v.clone());
                ServerEvent::Written {
                    by: writer_of(&v)
                        .or_else(|| self.owners.lock().expect("owners").get(&v).cloned())
                        .unwrap_or_else(|| host.to_string()),
                    key: key.clone(),
                    value: v,
                }
            }
            (Some(_), None) => ServerEvent::Removed {
                by: host.to_string(),
                key: key.clone(),
                value: values.remove(host).expect("held"),
                cause: cause.to_string(),
            },
        };
        self.recorder
            .record_at(self.now_us(), host, EventKind::Server(event));
    }

    /// Samples the lock value of each server among `hosts` its system answers for
    /// now (see [`Run::note_lock_value`]).
    pub(super) fn sample_lock_values<'a>(&self, hosts: impl Iterator<Item = &'a String>) {
        let key = self.cfg.workload.key.clone();
        for host in hosts {
            let ask = self.servers.lock().expect("servers").ask(host);
            if let Some(value) = ask.and_then(|mut a| a.lock_value(&key))
                && !self.down.lock().expect("down").contains(host)
            {
                self.note_lock_value(host, value, "gone");
            }
        }
    }

    /// After a client's connections were reset: polls `watch` (a session that held
    /// the lock) every 20 ms for up to 2 s, and records the session's end once the
    /// server says it ended; a session that lives on (the lock was another client's,
    /// or released by a command) records nothing.
    pub(super) fn watch_session_end(self: &Arc<Self>, mut watch: SessionWatch) {
        let run = self.clone();
        std::thread::spawn(move || {
            for _ in 0..100 {
                if run.over.load(Ordering::Relaxed) {
                    return;
                }
                if let Some((host, event)) = watch() {
                    run.recorder
                        .record_at(run.now_us(), &host, EventKind::Server(event));
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    }

    /// Runs each system's watchers (their servers' lock values and roles, by their
    /// own answers), each on its own thread, until the run is over.
    pub(super) fn watch_servers(&self, watchers: Vec<Watcher>) {
        std::thread::scope(|scope| {
            for w in watchers {
                scope.spawn(move || w(self));
            }
        });
    }

    /// Records server `host`'s `role` if it is not the last one recorded (`last`).
    fn note_role(&self, last: &mut BTreeMap<String, String>, host: String, role: String) {
        if last.get(&host) != Some(&role) {
            self.recorder.record_at(
                self.now_us(),
                &host,
                EventKind::Server(ServerEvent::Role { role: role.clone() }),
            );
            last.insert(host, role);
        }
    }
}

impl Sink for Run {
    fn now_us(&self) -> u64 {
        Run::now_us(self)
    }

    fn over(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }

    fn is_down(&self, host: &str) -> bool {
        self.down.lock().expect("down").contains(host)
    }

    fn note_lock_value(&self, host: &str, value: Option<String>, cause: &str) {
        Run::note_lock_value(self, host, value, cause);
    }

    fn note_role(&self, last: &mut BTreeMap<String, String>, host: String, role: String) {
        Run::note_role(self, last, host, role);
    }
}

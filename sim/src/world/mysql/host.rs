//! One MySQL host of the world: its running server, what a crash leaves on its disk
//! (the durable prefix of the redo log) and the recovery from it at the next start.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::{HostClock, SimClock};
use crate::mysql::innodb::BinlogEvent;
use crate::mysql::{ConnId, MYSQL_PORT, MySqlConfig, MySqlModel, SharedMySql, serve_connection};
use crate::net::NetFaults;
use crate::pause::PauseGate;

/// What a crashed server left on disk, for its next start: the durable prefix of its
/// log (see [`crate::mysql::MySqlModel::durable_log`]) and what the crash was.
pub(super) struct Disk {
    pub(super) log: Vec<BinlogEvent>,
    /// Committed log entries the crash lost (written after the last flush).
    pub(super) lost: usize,
    pub(super) next_conn_id: ConnId,
    pub(super) machine: bool,
    pub(super) crash_at_us: u64,
    /// The last once-per-second flush before the crash, µs of true time (`None`: none
    /// since the server started).
    pub(super) flushed_at_us: Option<u64>,
}

/// A start that recovered from a crash, for the observer to record.
pub(super) struct Recovered {
    pub(super) lost: usize,
    pub(super) machine: bool,
    pub(super) crash_at_us: u64,
    pub(super) flushed_at_us: Option<u64>,
}

/// One MySQL host: its name and its running server (`None` before it started).
#[derive(Clone)]
pub(super) struct Host {
    pub(super) name: String,
    pub(super) slot: Arc<Mutex<Option<SharedMySql>>>,
    /// Set by a crash, taken by the next start.
    pub(super) disk: Arc<Mutex<Option<Disk>>>,
    /// Set by a start that recovered, taken by the observer.
    pub(super) recovered: Arc<Mutex<Option<Recovered>>>,
    /// The running server's last once-per-second log flush, µs of true time.
    pub(super) flushed_at_us: Arc<Mutex<Option<u64>>>,
    /// Its pause gate: every task of the server (connections, the log flusher, a
    /// replica's applier) freezes with its host.
    pub(super) gate: PauseGate,
    /// Its clock, which the server's timeouts and the log flusher run on (set when the
    /// host is added).
    pub(super) clock: Arc<Mutex<Option<HostClock>>>,
}

pub(super) fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Host {
    pub(super) fn new(name: &str) -> Self {
        Host {
            name: name.to_string(),
            slot: Arc::default(),
            disk: Arc::default(),
            recovered: Arc::default(),
            flushed_at_us: Arc::default(),
            gate: PauseGate::new(),
            clock: Arc::default(),
        }
    }

    /// A server on this host's clock (the runtime's if it has none).
    pub(super) fn on_clock(&self, shared: SharedMySql) -> SharedMySql {
        match locked(&self.clock).clone() {
            Some(clock) => shared.on_clock(Arc::new(SimClock::new(clock))),
            None => shared,
        }
    }

    pub(super) fn shared(&self) -> Option<SharedMySql> {
        locked(&self.slot).clone()
    }

    /// The server this start runs: a fresh one on the first start, else one that
    /// recovered from what the crash left on disk. With
    /// `innodb_flush_log_at_trx_commit` 0 or 2 it runs InnoDB's once-per-second log
    /// flush (with 1 or 3 every commit is flushed as it commits, so the flush changes
    /// nothing and is not run).
    pub(super) fn start(&self, config: MySqlConfig) -> SharedMySql {
        let shared = match locked(&self.disk).take() {
            Some(disk) => {
                *locked(&self.recovered) = Some(Recovered {
                    lost: disk.lost,
                    machine: disk.machine,
                    crash_at_us: disk.crash_at_us,
                    flushed_at_us: disk.flushed_at_us,
                });
                SharedMySql::from_model(MySqlModel::recover(
                    config.clone(),
                    &disk.log,
                    disk.next_conn_id,
                ))
            }
            None => SharedMySql::new(config.clone()),
        };
        let shared = self.on_clock(shared);
        *locked(&self.flushed_at_us) = None;
        if matches!(config.flush_log_at_trx_commit, 0 | 2) {
            let (flusher, flushed_at) = (shared.clone(), self.flushed_at_us.clone());
            tokio::task::spawn_local(self.gate.wrap(async move {
                loop {
                    flusher.sleep(Duration::from_secs(1)).await;
                    flusher.with(|m| m.flush_log());
                    let now = turmoil::sim_elapsed().unwrap_or_default();
                    *locked(&flushed_at) = Some(now.as_micros() as u64);
                }
            }));
        }
        shared
    }

    /// The host crashed (its machine, with `machine`): what its server had on disk is
    /// kept for the next start.
    pub(super) fn crashed(&self, machine: bool, now: Duration) {
        let Some(shared) = self.shared() else { return };
        let ((log, lost), next_conn_id) =
            shared.with(|m| (m.durable_log(machine), m.next_conn_id()));
        *locked(&self.disk) = Some(Disk {
            log,
            lost,
            next_conn_id,
            machine,
            crash_at_us: now.as_micros() as u64,
            flushed_at_us: *locked(&self.flushed_at_us),
        });
    }

    /// Runs the server on this host, accepting connections until the host goes.
    pub(super) async fn serve(
        &self,
        shared: SharedMySql,
        net: NetFaults,
    ) -> Result<(), Box<dyn std::error::Error>> {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(shared.clone());
        let listener =
            turmoil::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, MYSQL_PORT)).await?;
        loop {
            let Ok((stream, addr)) = listener.accept().await else {
                continue;
            };
            let peer = turmoil::reverse_lookup(addr.ip()).unwrap_or_else(|| addr.to_string());
            let stream = net.wrap(stream, &self.name, &peer);
            tokio::task::spawn_local(self.gate.wrap(serve_connection(
                shared.clone(),
                stream,
                peer,
            )));
        }
    }
}

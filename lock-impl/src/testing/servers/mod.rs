//! Private servers: a ZooKeeper 3.8 server or ensemble, a MariaDB 10.11 server and an
//! etcd 3.4 member, each
//! started from Debian's installed packages as a child process on free loopback ports,
//! with its own configuration, data directory and log in a temporary directory, and
//! stopped (`SIGKILL`) with its directory removed when its handle drops.
//!
//! The tests use them through [`super::real_zookeeper`] and [`super::real_mysql`] (one
//! server per test binary), so a fresh clone with the packages installed runs every
//! real-server test without a system service; the real-process runner can use the
//! handles directly ([`ZkServer::start`], [`ZkEnsembleServers::start`],
//! [`MariaDbServer::start`]: address, data directory, log path, `pid()` for
//! `SIGSTOP`/`SIGKILL`, `restart()` on the same port and data).
//!
//! No process is left behind on any exit path this process can see:
//! - a handle's `Drop` kills its process and removes its directory (a panicking test
//!   still drops its locals while unwinding);
//! - every child is spawned by one long-lived thread with `PR_SET_PDEATHSIG = SIGKILL`
//!   (Linux), so the kernel kills it when this process dies in any way (an abort,
//!   `SIGKILL`, Ctrl-C);
//! - servers shared through a `static` (never dropped) are killed and their directories
//!   removed by an `atexit` handler when the process exits normally (as the test
//!   harness does, pass or fail);
//! - a directory left by a process that died abruptly is removed by the next launch in
//!   any process (its name carries the pid of the process that made it).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock, mpsc};
use std::time::Duration;

mod etcd;
mod mariadb;
mod sentinel;
mod zk;

/// What `lock-impl-tests`' unit tests (`tests/units`) reach inside the launchers'
/// private modules. Not an API.
#[doc(hidden)]
pub mod internals {
    pub use super::mariadb::mariadb_install_named;
    pub use super::zk::zookeeper_install_from;
}

pub use etcd::*;
pub use mariadb::*;
pub use sentinel::*;
pub use zk::*;

/// How long a server may take to answer after it is spawned (a JVM on a loaded
/// two-core machine can take seconds).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How many fresh ports a launch tries when another process takes its port first.
const PORT_ATTEMPTS: usize = 5;

/// Why a private server could not be started.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LaunchError {
    /// A binary or jar the server needs is not installed.
    #[error(
        "{what} is not installed ({path} is missing); install it with \
         `apt-get install -y {package}` (Debian)"
    )]
    Missing {
        /// What is missing, for people.
        what: &'static str,
        /// The file looked for.
        path: String,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The server is installed but did not come up.
    #[error("{what} did not start: {reason}\n--- the end of {log} ---\n{tail}")]
    Failed {
        /// Which server.
        what: &'static str,
        /// What went wrong.
        reason: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of its log.
        tail: String,
    },
}

impl LaunchError {
    fn failed(what: &'static str, reason: impl Into<String>, log: &Path) -> Self {
        let text = fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        Self::Failed {
            what,
            reason: reason.into(),
            log: log.to_path_buf(),
            tail,
        }
    }
}

// ---------------------------------------------------------------------------------
// Process keeping: one spawner thread, a registry for the `atexit` sweep, and
// directories named after the pid that made them.

type SpawnJob = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from one thread that lives as long as the process, with the kernel
/// told to `SIGKILL` the child when that thread (so the process) dies. The parent-death
/// signal follows the thread that forked, not the process: spawned from a test's own
/// thread, a server shared by the binary would die with the first test that started it.
pub fn spawn_kept(mut cmd: Command) -> std::io::Result<Child> {
    static KEEPER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("locksim-server-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the server keeper thread");
        tx
    });
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes two system
        // calls (async-signal-safe).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the prctl: do not outlive it.
                if libc::getppid() as u32 != parent {
                    return Err(std::io::Error::other("the parent process is gone"));
                }
                Ok(())
            });
        }
    }
    let (tx, rx) = mpsc::channel();
    keeper
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the server keeper thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the server keeper thread is gone"))?
}

/// Servers alive in this process (`pid`, directory; pid 0 for a directory alone): what
/// the `atexit` sweep kills and removes.
static LIVE: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<(u32, PathBuf)>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

fn register(pid: u32, dir: &Path) {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function.
        unsafe {
            libc::atexit(kill_live_at_exit);
        }
    });
    live().push((pid, dir.to_path_buf()));
}

fn unregister(pid: u32) {
    live().retain(|(p, _)| *p != pid || pid == 0);
}

/// Kills every server still registered (those shared through a `static`, which never
/// drops) and removes its directory, as the process exits.
extern "C" fn kill_live_at_exit() {
    // `try_lock`: a thread that held the lock when `exit` was called will never let it
    // go; then the parent-death signal still kills the servers and the next launch
    // removes their directories.
    let Ok(mut list) = LIVE.try_lock() else {
        return;
    };
    for (pid, dir) in list.drain(..) {
        // Pid 0: a directory without a process (a template).
        if pid != 0 {
            // SAFETY: plain system calls on a child's pid.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        let _ = fs::remove_dir_all(dir);
    }
}

/// A new empty directory `$TMPDIR/locksim-<kind>-<pid>-<n>` for one server. The first
/// call in a process first removes directories of this form whose process is gone.
pub fn server_dir(kind: &str) -> PathBuf {
    static SWEEP: Once = Once::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    SWEEP.call_once(sweep_orphaned_dirs_now);
    let dir = std::env::temp_dir().join(format!(
        "locksim-{kind}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Removes `$TMPDIR/locksim-<kind>-<pid>-<n>` directories whose pid is not alive (a
/// test process killed before it could clean up). Linux only (reads `/proc`). The first
/// [`server_dir`] in a process calls it.
pub fn sweep_orphaned_dirs_now() {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("locksim-")) else {
            continue;
        };
        let parts: Vec<&str> = rest.split('-').collect();
        let [kind, pid, n] = parts.as_slice() else {
            continue;
        };
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphabetic()) {
            continue;
        }
        if !numeric(pid) || !numeric(n) || Path::new("/proc").join(pid).exists() {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// `count` distinct free loopback ports (each bound at once, then all released),
/// below the kernel's ephemeral range (`ip_local_port_range`): a port the kernel
/// hands out (to any process's outgoing connection, or to a `:0` listener) could be
/// taken between this pick and the server's own bind, and a real Sentinel once died
/// of that (`EADDRINUSE`) while other tests dialled. Below the range only another
/// pick can take it: each process starts at its own place (by its id) and walks on.
pub fn free_ports(count: usize) -> Vec<u16> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    const LOW: u64 = 10_000;
    let high = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(32_768)
        .min(65_536);
    let mut listeners: Vec<TcpListener> = Vec::new();
    if high > LOW + 1_000 {
        let span = high - LOW;
        let start = u64::from(std::process::id()).wrapping_mul(7_919) % span;
        for _ in 0..span {
            if listeners.len() == count {
                break;
            }
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = LOW + (start + n) % span;
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port as u16)) {
                listeners.push(l);
            }
        }
    }
    // A machine whose ephemeral range starts low: the kernel's own picks.
    while listeners.len() < count {
        listeners.push(TcpListener::bind("127.0.0.1:0").expect("cannot bind a loopback port"));
    }
    listeners
        .iter()
        .map(|l| l.local_addr().expect("a bound address").port())
        .collect()
}

/// The first of `name` on `PATH`, then in `extra` directories.
fn find_binary(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    // SAFETY: a system call without arguments.
    unsafe { libc::geteuid() == 0 }
}

fn kill_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

//! A private MariaDB server (Debian's `mariadb-server`).

use std::ffi::OsString;
use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::*;

// ---------------------------------------------------------------------------------
// MariaDB.

/// The database, user and password a private MariaDB is set up with (the account the
/// tests log in with; `.ci/run` used to create the same on the system server).
pub const MARIADB_DATABASE: &str = "locksim";
/// See [`MARIADB_DATABASE`].
pub const MARIADB_USER: &str = "locksim";
/// See [`MARIADB_DATABASE`].
pub const MARIADB_PASSWORD: &str = "locksim";

/// Run by the server at each start (`--init-file`): the database and the user, over TCP
/// from `127.0.0.1` and over the socket, with `mysql_native_password` (what the
/// client speaks). `PROCESS` lets the real runner read `information_schema.INNODB_TRX`
/// (which session's transaction holds row locks).
const MARIADB_INIT_SQL: &str = "\
CREATE DATABASE IF NOT EXISTS locksim;
CREATE USER IF NOT EXISTS 'locksim'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('locksim');
CREATE USER IF NOT EXISTS 'locksim'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('locksim');
GRANT ALL PRIVILEGES ON locksim.* TO 'locksim'@'127.0.0.1';
GRANT ALL PRIVILEGES ON locksim.* TO 'locksim'@'localhost';
GRANT PROCESS ON *.* TO 'locksim'@'127.0.0.1';
GRANT PROCESS ON *.* TO 'locksim'@'localhost';
";

/// Settings of a private MariaDB server.
#[derive(Debug, Clone, Default)]
pub struct MariaDbOptions {
    /// More `mariadbd` options (`--innodb-flush-log-at-trx-commit=2`, ...).
    pub extra_args: Vec<String>,
}

/// A private MariaDB server: `mariadbd` (Debian's `mariadb-server`) with a data
/// directory made by `mariadb-install-db`, on a free loopback port and its own socket,
/// with the database and user `locksim`/`locksim`; killed and its directory removed
/// on drop.
#[derive(Debug)]
pub struct MariaDbServer {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
    data_dir: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    mariadbd: PathBuf,
    args: Vec<OsString>,
    keep_files: bool,
}

/// `mariadbd` and `mariadb-install-db`, or the package that is missing.
fn mariadb_install() -> Result<(PathBuf, PathBuf), LaunchError> {
    mariadb_install_named("mariadbd")
}

/// The MariaDB install whose server is `mariadbd`, or which package to install.
pub fn mariadb_install_named(mariadbd: &str) -> Result<(PathBuf, PathBuf), LaunchError> {
    let missing = |path: &str| LaunchError::Missing {
        what: "MariaDB",
        path: path.into(),
        package: "mariadb-server",
    };
    let server =
        find_binary(mariadbd, &["/usr/sbin", "/usr/local/sbin"]).ok_or(missing(mariadbd))?;
    let install = find_binary("mariadb-install-db", &["/usr/bin", "/usr/local/bin"])
        .or_else(|| find_binary("mysql_install_db", &["/usr/bin", "/usr/local/bin"]))
        .ok_or(missing("mariadb-install-db"))?;
    Ok((server, install))
}

impl MariaDbServer {
    /// A server with Debian's character set settings (`utf8mb4`,
    /// `utf8mb4_general_ci`, from its `50-server.cnf`) and otherwise MariaDB's
    /// defaults, answering when this returns.
    pub fn start() -> Result<Self, LaunchError> {
        Self::start_with(&MariaDbOptions::default())
    }

    /// [`MariaDbServer::start`] with more `mariadbd` options.
    pub fn start_with(opts: &MariaDbOptions) -> Result<Self, LaunchError> {
        let (mariadbd, install_db) = mariadb_install()?;
        let dir = server_dir("mariadb");
        let data_dir = dir.join("data");
        let log = dir.join("mariadb.log");
        let root = is_root();
        let template = match mariadb_template(&install_db) {
            Ok(t) => t,
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        if let Err(e) = copy_dir(template, &data_dir) {
            let _ = fs::remove_dir_all(&dir);
            return Err(LaunchError::failed(
                "MariaDB",
                format!("copy {} to {}: {e}", template.display(), data_dir.display()),
                &template.with_file_name("install.log"),
            ));
        }
        let init = dir.join("init.sql");
        fs::write(&init, MARIADB_INIT_SQL).expect("write init.sql");
        // A Unix socket path is at most 107 bytes.
        let mut socket = dir.join("mysqld.sock");
        if socket.as_os_str().len() > 100 {
            socket = PathBuf::from(format!(
                "/tmp/locksim-{}.sock",
                dir.file_name().unwrap().to_string_lossy()
            ));
        }
        // A temporary directory of its own: a starting MariaDB deletes every `#sql*`
        // file in its tmpdir (`mysql_rm_tmp_tables`), another server's live temporary
        // tables among them when they share `/tmp`.
        let tmp = dir.join("tmp");
        fs::create_dir_all(&tmp).map_err(|e| {
            LaunchError::failed("MariaDB", format!("create {}: {e}", tmp.display()), &log)
        })?;
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_ports(1)[0];
            let mut args: Vec<OsString> = vec!["--no-defaults".into()];
            if root {
                args.push("--user=root".into());
            }
            for a in [
                format!("--datadir={}", data_dir.display()),
                format!("--socket={}", socket.display()),
                format!("--port={port}"),
                "--bind-address=127.0.0.1".into(),
                format!("--pid-file={}", dir.join("mariadbd.pid").display()),
                format!("--log-error={}", log.display()),
                format!("--tmpdir={}", tmp.display()),
                "--character-set-server=utf8mb4".into(),
                "--collation-server=utf8mb4_general_ci".into(),
                format!("--init-file={}", init.display()),
                "--innodb-log-file-size=8M".into(),
            ]
            .into_iter()
            .chain(opts.extra_args.iter().cloned())
            {
                args.push(a.into());
            }
            // Only what this attempt writes counts (an earlier one may have failed).
            let from = fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            let child = match spawn_mariadbd(&mariadbd, &args, &log) {
                Ok(c) => c,
                Err(e) => {
                    let _ = fs::remove_dir_all(&dir);
                    return Err(e);
                }
            };
            let mut server = Self {
                child,
                addr: ([127, 0, 0, 1], port).into(),
                dir: dir.clone(),
                data_dir: data_dir.clone(),
                socket: socket.clone(),
                log: log.clone(),
                mariadbd: mariadbd.clone(),
                args,
                keep_files: false,
            };
            register(server.child.id(), &dir);
            match server.wait_ready(from) {
                Ok(()) => return Ok(server),
                Err(e) => {
                    // Leave the directory (the data) to the next attempt.
                    server.keep_files = true;
                    drop(server);
                    last = Some(e);
                }
            }
        }
        let _ = fs::remove_dir_all(&dir);
        Err(last.expect("at least one attempt"))
    }

    /// Waits until the server wrote (past `from` in its log) that it is ready on its
    /// port, which only it can have bound, and answers there.
    fn wait_ready(&mut self, from: u64) -> Result<(), LaunchError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let ready = format!("port: {}", self.addr.port());
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LaunchError::failed(
                    "MariaDB",
                    format!("mariadbd exited ({status}) on port {}", self.addr.port()),
                    &self.log,
                ));
            }
            let text = fs::read(&self.log).unwrap_or_default();
            let text = String::from_utf8_lossy(&text[(from as usize).min(text.len())..]);
            if text.contains("ready for connections")
                && text.contains(&ready)
                && TcpStream::connect_timeout(&self.addr, Duration::from_millis(500)).is_ok()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err(LaunchError::failed(
            "MariaDB",
            format!("not ready on {} within {READY_TIMEOUT:?}", self.addr),
            &self.log,
        ))
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its TCP port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Its Unix socket.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Its directory: `data/`, `mariadb.log`, `init.sql`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its `datadir`.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Its error log (`--log-error`; kept across restarts).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `mariadbd`'s process id (for `SIGSTOP`/`SIGCONT`/`SIGKILL`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Keeps its directory after it stops.
    pub fn keep_files(&mut self, keep: bool) {
        self.keep_files = keep;
    }

    /// Kills it (`SIGKILL`, a crash: InnoDB recovers from its redo log at the next
    /// start) and starts it again on the same port and data; returns when it answers.
    pub fn restart(&mut self) -> Result<(), LaunchError> {
        self.kill();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let from = fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
            self.child = spawn_mariadbd(&self.mariadbd, &self.args, &self.log)?;
            register(self.child.id(), &self.dir);
            match self.wait_ready(from) {
                Ok(()) => return Ok(()),
                Err(_) if Instant::now() < deadline => {
                    self.kill();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Kills the process (`SIGKILL`) and reaps it; its files stay.
    pub fn kill(&mut self) {
        unregister(self.child.id());
        kill_child(&mut self.child);
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_files {
            let _ = fs::remove_dir_all(&self.dir);
            if !self.socket.starts_with(&self.dir) {
                let _ = fs::remove_file(&self.socket);
            }
        }
    }
}

/// A data directory fresh from `mariadb-install-db`, made once per process and copied
/// for each server (the install runs a bootstrap server over the system tables' SQL:
/// about 0.5 s on an idle machine, 3 to 5 s on a loaded one; a copy takes milliseconds).
///
/// It has the accounts Debian's postinst makes (`mysql_install_db --user=mysql
/// --skip-test-db`: `root@localhost` and `mysql@localhost`, each by `unix_socket` or an
/// invalid password, and `mariadb.sys`), whoever runs this: a login as an unknown user
/// fails the way the account the server picks to fake it fails (MariaDB 10.11
/// `sql/sql_acl.cc`, `find_mpvio_user`), so the set of accounts shows in the error the
/// client sees. A small redo log, as nothing here needs Debian's 96 MiB.
fn mariadb_template(install_db: &Path) -> Result<&'static Path, LaunchError> {
    static TEMPLATE: OnceLock<Result<PathBuf, LaunchError>> = OnceLock::new();
    let made = TEMPLATE.get_or_init(|| {
        let dir = server_dir("mariadbtpl");
        // No process; the `atexit` sweep removes the directory.
        register(0, &dir);
        let data_dir = dir.join("data");
        let install_log = dir.join("install.log");
        let out = fs::File::create(&install_log).expect("create the install log");
        // The bootstrap server's own tmpdir (passed through to it): with the default
        // `/tmp`, another MariaDB starting meanwhile deletes its temporary tables
        // (`#sql-temptable-…`) and the install fails ("Unknown table
        // 'mysql.tmp_user_sys'"), as it did for one test in three with four tests
        // starting their servers at once.
        let tmp = dir.join("tmp");
        fs::create_dir_all(&tmp).expect("create the bootstrap's tmpdir");
        let mut cmd = Command::new(install_db);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data_dir.display()))
            .arg("--auth-root-authentication-method=socket")
            .arg("--auth-root-socket-user=mysql")
            .arg("--skip-test-db")
            .arg("--innodb-log-file-size=8M")
            .arg(format!("--tmpdir={}", tmp.display()))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone the log handle"))
            .stderr(out);
        if is_root() {
            cmd.arg("--user=root");
        }
        match spawn_kept(cmd).and_then(|mut c| c.wait()) {
            Ok(s) if s.success() => Ok(data_dir),
            other => Err(LaunchError::failed(
                "MariaDB",
                format!("mariadb-install-db: {other:?}"),
                &install_log,
            )),
        }
    });
    match made {
        Ok(dir) => Ok(dir.as_path()),
        Err(e) => Err(e.clone()),
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn spawn_mariadbd(mariadbd: &Path, args: &[OsString], log: &Path) -> Result<Child, LaunchError> {
    let mut cmd = Command::new(mariadbd);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    spawn_kept(cmd).map_err(|e| LaunchError::failed("MariaDB", format!("spawn mariadbd: {e}"), log))
}

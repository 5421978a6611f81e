//! A throwaway PostgreSQL cluster for the tests of the shared user store: `initdb` into a
//! temporary directory, the server on a random loopback port (no Unix socket), as `nobody` when
//! the tests run as root (PostgreSQL refuses to run as root), readiness by polling a real
//! connection with a deadline, stop and restart on the same port and data, and on drop the
//! server stopped and its files removed. The server is this process's child (not detached by
//! `pg_ctl`), so a test that fails cannot leave it running. Never the system service.
//!
//! Binaries: `$MUSEUM_AGENT_PG_BIN` (a directory holding `initdb` and `postgres`), else the
//! newest `/usr/lib/postgresql/*/bin` (Debian's `postgresql` package; `scripts/test.sh` installs
//! it when missing), else `PATH`. Without them the tests fail saying how to install them, unless
//! `MUSEUM_AGENT_SKIP_POSTGRES=1`, which makes them print "skipped" and pass.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// The environment variable that lets these tests skip themselves when PostgreSQL is missing.
pub const SKIP_VAR: &str = "MUSEUM_AGENT_SKIP_POSTGRES";
/// How long a start or restart may take before the test fails.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(20);

pub struct Postgres {
    child: Option<Child>,
    /// Data directory and logs; removed on drop.
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// (uid, gid) the server runs as when the tests run as root.
    run_as: Option<(u32, u32)>,
    pub port: u16,
    starts: u32,
}

/// A fresh cluster, or `None` when PostgreSQL is not installed and the test command said to skip
/// (then the test prints "skipped" and returns). Missing and not told to skip: the test fails.
pub async fn postgres() -> Option<Postgres> {
    let Some(bin) = bin_dir() else {
        let skip = std::env::var(SKIP_VAR).is_ok_and(|v| v == "1");
        assert!(
            skip,
            "PostgreSQL binaries (initdb, postgres) not found in $MUSEUM_AGENT_PG_BIN, \
             /usr/lib/postgresql/*/bin or PATH: install them (apt-get install \
             --no-install-recommends postgresql; scripts/test.sh does), or run with {SKIP_VAR}=1 \
             to skip the PostgreSQL tests"
        );
        eprintln!("skipped: PostgreSQL not found and {SKIP_VAR}=1");
        return None;
    };
    Some(Postgres::start(bin).await.expect("starting PostgreSQL"))
}

/// The directory holding `initdb` and `postgres`.
pub fn bin_dir() -> Option<PathBuf> {
    let has = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(d) = std::env::var_os("MUSEUM_AGENT_PG_BIN").map(PathBuf::from) {
        return has(&d).then_some(d);
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has(d))
        .collect();
    debian.sort();
    if let Some((_, d)) = debian.pop() {
        return Some(d);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|d| has(d))
}

/// `nobody`'s uid and gid when this process is root (PostgreSQL will not run as root).
fn unprivileged() -> anyhow::Result<Option<(u32, u32)>> {
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        return Ok(None);
    }
    // SAFETY: getpwnam with a NUL-terminated name; the result is read at once, before any other
    // call that could reuse its static buffer.
    let pw = unsafe { libc::getpwnam(c"nobody".as_ptr()) };
    if pw.is_null() {
        bail!("running as root and there is no user `nobody` to run PostgreSQL as");
    }
    // SAFETY: pw is non-null and points to a passwd record.
    Ok(Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) }))
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Postgres {
    async fn start(bin: PathBuf) -> anyhow::Result<Postgres> {
        let dir = tempfile::Builder::new().prefix("pg-test-").tempdir()?;
        let run_as = unprivileged()?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let mut pg = Postgres {
            child: None,
            dir,
            bin,
            run_as,
            port: 0,
            starts: 0,
        };
        pg.initdb()?;
        // A port picked free may be taken before the server binds it: try another.
        let mut last = None;
        for _ in 0..3 {
            pg.port = free_port()?;
            match pg.spawn_and_wait().await {
                Ok(()) => return Ok(pg),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap())
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.current_dir(self.dir.path())
            .stdin(Stdio::null())
            .env_remove("PGDATA");
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn initdb(&self) -> anyhow::Result<()> {
        let log = self.dir.path().join("initdb.log");
        let out = std::fs::File::create(&log)?;
        let status = self
            .command("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C"])
            .arg("--no-sync")
            .stdout(out.try_clone()?)
            .stderr(out)
            .status()
            .context("running initdb")?;
        if !status.success() {
            bail!("initdb failed ({status}):\n{}", tail(&log));
        }
        Ok(())
    }

    async fn spawn_and_wait(&mut self) -> anyhow::Result<()> {
        self.starts += 1;
        let log = self.dir.path().join(format!("server-{}.log", self.starts));
        let out = std::fs::File::create(&log)?;
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(&log, Some(uid), Some(gid))?;
        }
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "unix_socket_directories="])
            // A throwaway cluster: no fsync (the machine does not crash under the tests), but
            // a commit still reaches the WAL before it returns, so what the server under test
            // stored survives the server process being killed (`crash`).
            .args(["-c", "fsync=off", "-c", "synchronous_commit=on"])
            .args(["-c", "full_page_writes=off"])
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .context("spawning postgres")?;
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait()? {
                self.child = None;
                bail!("postgres exited early ({status}):\n{}", tail(&log));
            }
            if self.ready().await {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "postgres not ready after {READY_TIMEOUT:?}:\n{}",
                    tail(&log)
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A connection answers `SELECT 1`.
    async fn ready(&self) -> bool {
        let Ok(Ok((client, conn))) = tokio::time::timeout(
            Duration::from_secs(2),
            tokio_postgres::connect(&self.url(), tokio_postgres::NoTls),
        )
        .await
        else {
            return false;
        };
        let driver = tokio::spawn(conn);
        let ok = client.simple_query("SELECT 1").await.is_ok();
        drop(client);
        let _ = driver.await;
        ok
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication on loopback).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Fast shutdown (SIGINT: open connections are closed), waiting for the server to exit.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        self.signal_and_wait(libc::SIGINT).await
    }

    /// Immediate shutdown (SIGQUIT), as close to a crash as a child process allows: backends
    /// exit at once and their connections are cut without a goodbye; the next start recovers
    /// from the WAL. What was committed survives (commits reach the WAL before they return:
    /// `synchronous_commit` stays on).
    pub async fn crash(&mut self) -> anyhow::Result<()> {
        self.signal_and_wait(libc::SIGQUIT).await
    }

    async fn signal_and_wait(&mut self, signal: libc::c_int) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, signal);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("postgres did not stop within 30 s; killed");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Starts the server again on the same port and data directory.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await?;
        self.spawn_and_wait().await
    }

    /// Starts the server again after [`Postgres::stop`] or [`Postgres::crash`].
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.child.is_none(), "postgres is running");
        self.spawn_and_wait().await
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the server and every backend: connections stay
    /// open and nothing answers, as when the database host hangs or the network drops packets.
    ///
    /// The postmaster stops first and its children are listed only once it is stopped: a
    /// backend it forks between a listing and its own stop (a pool connection still being
    /// opened) would otherwise escape and keep answering.
    pub fn freeze(&self, frozen: bool) -> anyhow::Result<()> {
        let child = self.child.as_ref().context("postgres is not running")?;
        let postmaster = child.id();
        let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
        let send = |pid: u32| {
            // SAFETY: kill(2) on our child or one of its children, found in /proc just now.
            unsafe {
                libc::kill(pid as libc::pid_t, signal);
            }
        };
        send(postmaster);
        if frozen {
            // kill(2) returns before the stop takes effect; a fork under way completes first.
            let deadline = Instant::now() + Duration::from_secs(5);
            while process_state(postmaster) != Some('T') {
                anyhow::ensure!(Instant::now() < deadline, "postgres did not stop");
                std::thread::yield_now();
            }
        }
        let mut done = std::collections::HashSet::new();
        loop {
            let fresh: Vec<u32> = children_of(postmaster)
                .into_iter()
                .filter(|p| done.insert(*p))
                .collect();
            if fresh.is_empty() {
                break;
            }
            fresh.into_iter().for_each(send);
        }
        Ok(())
    }

    /// Runs SQL on the cluster directly (bypassing the server under test).
    pub async fn execute(&self, sql: &str) -> anyhow::Result<()> {
        let (client, conn) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls).await?;
        let driver = tokio::spawn(conn);
        client.batch_execute(sql).await?;
        drop(client);
        let _ = driver.await;
        Ok(())
    }

    /// The first column of the one row `sql` returns, as an integer.
    pub async fn query_i64(&self, sql: &str) -> anyhow::Result<i64> {
        let (client, conn) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls).await?;
        let driver = tokio::spawn(conn);
        let v = client.query_one(sql, &[]).await?.try_get(0)?;
        drop(client);
        let _ = driver.await;
        Ok(v)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // A test that failed while the server was frozen: thaw it so it can stop.
        let _ = self.freeze(false);
        if let Some(mut child) = self.child.take() {
            // Immediate shutdown (SIGQUIT), then make sure it is gone before the data directory
            // is removed.
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGQUIT);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(POLL);
            }
        }
    }
}

/// The processes whose parent is `pid` (PostgreSQL's backends and helpers), from /proc.
/// The state letter of a process (`T` once stopped), from `/proc/<pid>/stat`.
fn process_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..].chars().next()
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // After "pid (comm) state ": the parent's pid.
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

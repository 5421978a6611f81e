//! A real `nats-server` (Debian 2.9.10, JetStream) for the hub-across-processes tests: random
//! ports, a temporary store dir, readiness by polling (ports file, INFO line, /healthz), stop and
//! restart on the same ports and store.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// How long `start`/`restart` wait for readiness before failing.
pub const READY_TIMEOUT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(5);

/// The environment variable that tells the NATS tests to skip themselves when `nats-server` is
/// not installed (`MUSEUM_AGENT_SKIP_NATS=1 cargo test`).
pub const SKIP_VAR: &str = "MUSEUM_AGENT_SKIP_NATS";

/// A fresh `nats-server`, or `None` when it is not installed and the test command said to skip
/// (then the test prints "skipped" and returns). Not installed and not told to skip: the test
/// fails, saying how to install it.
pub async fn nats() -> Option<NatsServer> {
    if !NatsServer::installed() {
        let skip = std::env::var(SKIP_VAR).is_ok_and(|v| v == "1");
        assert!(
            skip,
            "nats-server not found on PATH: install it (apt-get install --no-install-recommends \
             nats-server; scripts/test.sh does), or run with {SKIP_VAR}=1 to skip the NATS tests"
        );
        eprintln!("skipped: nats-server not found and {SKIP_VAR}=1");
        return None;
    }
    Some(
        NatsServer::start()
            .await
            .expect("nats-server with JetStream did not start"),
    )
}

pub struct NatsServer {
    child: Option<Child>,
    /// Holds the store dir, ports dir and log files; removed on drop.
    dir: tempfile::TempDir,
    pub port: u16,
    pub monitor_port: u16,
    /// Wall time of the last start until ready.
    pub last_startup: Duration,
    starts: u32,
}

impl NatsServer {
    /// Whether an executable `nats-server` is on PATH.
    pub fn installed() -> bool {
        use std::os::unix::fs::PermissionsExt;
        std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|dir| {
                std::fs::metadata(dir.join("nats-server"))
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
        })
    }

    /// Starts a fresh server on random ports with an empty temp store dir.
    pub async fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("nats-test-").tempdir()?;
        std::fs::create_dir_all(dir.path().join("ports"))?;
        let mut s = NatsServer {
            child: None,
            dir,
            port: 0,
            monitor_port: 0,
            last_startup: Duration::ZERO,
            starts: 0,
        };
        s.spawn_and_wait(None).await?;
        Ok(s)
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    /// The exact argv used for the current process (for reports / debugging).
    pub fn args(&self, fixed: Option<(u16, u16)>) -> Vec<String> {
        let (p, m) = match fixed {
            Some((p, m)) => (p.to_string(), m.to_string()),
            None => ("-1".into(), "-1".into()),
        };
        vec![
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            p,
            "-m".into(),
            m,
            "-js".into(),
            "-sd".into(),
            self.store_dir().display().to_string(),
            "--ports_file_dir".into(),
            self.dir.path().join("ports").display().to_string(),
        ]
    }

    async fn spawn_and_wait(&mut self, fixed: Option<(u16, u16)>) -> anyhow::Result<()> {
        self.starts += 1;
        let log_path = self.dir.path().join(format!("server-{}.log", self.starts));
        let log = std::fs::File::create(&log_path)?;
        let t0 = Instant::now();
        let child = Command::new("nats-server")
            .args(self.args(fixed))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("spawning nats-server (apt-get install nats-server)")?;
        let pid = child.id().context("no pid")?;
        self.child = Some(child);
        let ports_file = self
            .dir
            .path()
            .join("ports")
            .join(format!("nats-server_{pid}.ports"));
        let deadline = t0 + READY_TIMEOUT;

        // 1. ports file (written once the listeners are up).
        let (port, mport) = loop {
            self.check_alive(&log_path)?;
            if let Ok(text) = std::fs::read_to_string(&ports_file)
                && let Ok(pf) = serde_json::from_str::<PortsFile>(&text)
            {
                break (port_of(&pf.nats)?, port_of(&pf.monitoring)?);
            }
            if Instant::now() > deadline {
                bail!(
                    "nats-server: no ports file after {READY_TIMEOUT:?}; log:\n{}",
                    tail(&log_path)
                );
            }
            tokio::time::sleep(POLL).await;
        };
        self.port = port;
        self.monitor_port = mport;

        // 2. client port speaks NATS (INFO line).
        loop {
            self.check_alive(&log_path)?;
            if read_info(port).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                bail!("nats-server: no INFO on {port}; log:\n{}", tail(&log_path));
            }
            tokio::time::sleep(POLL).await;
        }
        // 3. JetStream enabled according to the monitoring endpoint.
        loop {
            self.check_alive(&log_path)?;
            if http_status(mport, "/healthz?js-enabled-only=true")
                .await
                .ok()
                == Some(200)
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("nats-server: healthz not 200; log:\n{}", tail(&log_path));
            }
            tokio::time::sleep(POLL).await;
        }
        self.last_startup = t0.elapsed();
        Ok(())
    }

    fn check_alive(&mut self, log: &Path) -> anyhow::Result<()> {
        if let Some(child) = self.child.as_mut()
            && let Some(status) = child.try_wait()?
        {
            self.child = None;
            bail!("nats-server exited early ({status}); log:\n{}", tail(log));
        }
        Ok(())
    }

    /// SIGTERM (graceful shutdown) and wait for the process to exit.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                // SAFETY: plain kill(2) on our own child's pid.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGTERM);
                }
            }
            match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
                Ok(r) => {
                    r?;
                }
                Err(_) => {
                    child.kill().await?;
                }
            }
        }
        Ok(())
    }

    /// Starts the server again on the same client/monitoring ports and the same store dir.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if self.child.is_some() {
            self.stop().await?;
        }
        self.spawn_and_wait(Some((self.port, self.monitor_port)))
            .await
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            // kill_on_drop would do this too; start_kill is synchronous.
            let _ = child.start_kill();
        }
    }
}

#[derive(serde::Deserialize)]
struct PortsFile {
    nats: Vec<String>,
    monitoring: Vec<String>,
}

fn port_of(urls: &[String]) -> anyhow::Result<u16> {
    let u = urls.first().context("empty url list")?;
    let p = u.rsplit(':').next().context("no port")?;
    Ok(p.trim_end_matches('/').parse()?)
}

async fn read_info(port: u16) -> anyhow::Result<()> {
    let s = TcpStream::connect(("127.0.0.1", port)).await?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(1), r.read_line(&mut line)).await??;
    if line.starts_with("INFO ") {
        Ok(())
    } else {
        bail!("unexpected first line {line:?}")
    }
}

/// The monitoring endpoint's HTTP status for `path`.
async fn http_status(port: u16, path: &str) -> anyhow::Result<u16> {
    let client = museum_agent::util::http_client_builder().build()?;
    let r = tokio::time::timeout(
        Duration::from_secs(2),
        client.get(format!("http://127.0.0.1:{port}{path}")).send(),
    )
    .await??;
    Ok(r.status().as_u16())
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

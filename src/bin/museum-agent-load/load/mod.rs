//! The load tool (`museum-agent-load`): drives any server that speaks the client protocol, by
//! URL and API key, through bounded scenarios on loopback, and reports figures as a table and
//! JSON. It can start its own timing-controlled fake OpenAI-compatible upstream and, for
//! one-command runs, start a `museum-agent` server pointed at it.
//!
//! Scenarios: `echo` (raw WebSocket baseline), `idle`, `stream`, `interrupt`, `churn`, `voice`,
//! `resume` (sockets cut mid-reply and resumed, on the same or another node) and `hub` (routed
//! messages through the agent hub).
//!
//! The API tests compile this same module tree (`tests/api/load.rs` includes it with `#[path]`),
//! so it reaches the server only as `museum_agent::…`, never `crate::…`.

pub mod client;
pub mod compare;
pub mod hub;
pub mod resume;
pub mod scenarios;
pub mod stats;
pub mod upstream;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Map, Value};

/// The generator's WebSocket settings: a 4 KiB read buffer. tungstenite's default (128 KiB) is
/// zero-filled up to its capacity before every read, which was ~4 % of the generator's CPU in
/// the hub scenario (perf, 2026-11-24): cost that is the tool's, not the server's.
pub fn ws_config() -> Option<tokio_tungstenite::tungstenite::protocol::WebSocketConfig> {
    Some(
        tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(4096),
    )
}

/// What a scenario measured.
#[derive(Debug, Clone)]
pub struct Report {
    pub scenario: String,
    pub params: Value,
    /// (name, value, unit), in display order.
    pub figures: Vec<(String, f64, String)>,
}

impl Report {
    pub fn new(scenario: &str, params: Value) -> Self {
        Report {
            scenario: scenario.into(),
            params,
            figures: Vec::new(),
        }
    }

    pub fn add(&mut self, name: &str, value: f64, unit: &str) {
        self.figures.push((name.into(), value, unit.into()));
    }

    /// One figure by name (the API tests read figures this way; the tool itself prints them).
    #[allow(dead_code)]
    pub fn get(&self, name: &str) -> Option<f64> {
        self.figures.iter().find(|f| f.0 == name).map(|f| f.1)
    }

    pub fn table(&self) -> String {
        let mut s = format!("== {}  {}\n", self.scenario, self.params);
        for (name, v, unit) in &self.figures {
            let val = if v.is_nan() {
                "-".to_string()
            } else if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v:.0}")
            } else {
                format!("{v:.3}")
            };
            s.push_str(&format!("  {name:<40} {val:>14} {unit}\n"));
        }
        s
    }

    pub fn json(&self) -> Value {
        let mut figs = Map::new();
        for (name, v, unit) in &self.figures {
            figs.insert(
                name.clone(),
                serde_json::json!({"value": if v.is_nan() { Value::Null } else { serde_json::json!(v) }, "unit": unit}),
            );
        }
        serde_json::json!({"scenario": self.scenario, "params": self.params, "figures": figs})
    }
}

/// A `museum-agent` server started by the tool, pointed at the tool's fake upstream.
pub struct SpawnedServer {
    pub child: tokio::process::Child,
    pub url: String,
    pub api_key: String,
    pub pid: u32,
    _dir: tempfile::TempDir,
}

impl SpawnedServer {
    /// Where scenarios send their load: this server.
    pub fn target(&self) -> scenarios::Target {
        scenarios::Target {
            url: self.url.clone(),
            api_key: self.api_key.clone(),
            pid: Some(self.pid),
        }
    }

    pub async fn start(
        binary: &Path,
        llm_base_url: &str,
        extra_env: &[(String, String)],
    ) -> anyhow::Result<SpawnedServer> {
        Self::start_with_key(binary, llm_base_url, extra_env, None).await
    }

    /// As [`SpawnedServer::start`]; with `api_key`, no key is created and that one is used (a
    /// further node of a cluster whose nodes share their user store).
    pub async fn start_with_key(
        binary: &Path,
        llm_base_url: &str,
        extra_env: &[(String, String)],
        api_key: Option<&str>,
    ) -> anyhow::Result<SpawnedServer> {
        // The server runs in a temporary directory: resolve a relative binary path first.
        let binary = &std::fs::canonicalize(binary)
            .map_err(|e| anyhow::anyhow!("server binary {}: {e}", binary.display()))?;
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("load.db");
        let env = |cmd: &mut tokio::process::Command| {
            cmd.env("MUSEUM_AGENT__DATABASE__PATH", &db)
                .env("MUSEUM_AGENT__LLM__PROVIDER", "openai")
                .env("MUSEUM_AGENT__LLM__BASE_URL", llm_base_url)
                .env("MUSEUM_AGENT__LLM__API_KEY_ENV", "\"\"")
                .env("MUSEUM_AGENT__LLM__MAX_RETRIES", "0")
                .env("MUSEUM_AGENT__STT__PROVIDER", "openai")
                .env("MUSEUM_AGENT__STT__BASE_URL", llm_base_url)
                .env("MUSEUM_AGENT__STT__API_KEY_ENV", "\"\"")
                .env("MUSEUM_AGENT__TTS__PROVIDER", "openai")
                .env("MUSEUM_AGENT__TTS__BASE_URL", llm_base_url)
                .env("MUSEUM_AGENT__TTS__API_KEY_ENV", "\"\"")
                .env("MUSEUM_AGENT__SRS__LOAD_DEMO", "false")
                .env("MUSEUM_AGENT__HUB__ENABLED", "true")
                .env("MUSEUM_AGENT__HUB__INBOX_DEPTH", "100000")
                .env("MUSEUM_AGENT__LIMITS__MAX_SESSIONS", "100000")
                .env("MUSEUM_AGENT__LIMITS__MAX_CONNECTIONS", "100000")
                .env(
                    "MUSEUM_AGENT__LIMITS__MAX_CONNECTIONS_PER_ADDRESS",
                    "100000",
                )
                .env("RUST_LOG", "warn")
                .current_dir(dir.path());
            for (k, v) in extra_env {
                cmd.env(k, v);
            }
        };
        let api_key = match api_key {
            Some(k) => k.to_string(),
            None => {
                let mut key_cmd = tokio::process::Command::new(binary);
                env(&mut key_cmd);
                // A name of its own per run: with `--server-env` pointing at a shared
                // PostgreSQL store, an earlier run's key of the same name is still there.
                let name = format!(
                    "load-{}-{}",
                    std::process::id(),
                    museum_agent::util::now_ms()
                );
                let out = key_cmd
                    .args(["key", "create", "--name", &name])
                    .output()
                    .await?;
                anyhow::ensure!(
                    out.status.success(),
                    "key create failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8(out.stdout)?.trim().to_string()
            }
        };
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?.port()
        };
        let mut serve = tokio::process::Command::new(binary);
        env(&mut serve);
        serve
            .env("MUSEUM_AGENT__SERVER__BIND", format!("127.0.0.1:{port}"))
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let child = serve.spawn()?;
        let pid = child.id().unwrap_or(0);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        // Wait until it accepts connections (bounded; generous, for a server started under
        // valgrind on a busy machine).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                break;
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the server did not start listening within 180 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(SpawnedServer {
            child,
            url: format!("ws://{addr}/ws/agent/stream"),
            api_key,
            pid,
            _dir: dir,
        })
    }
}

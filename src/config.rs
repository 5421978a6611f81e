//! Typed configuration: defaults < `config.toml` < `MUSEUM_AGENT__SECTION__KEY` environment
//! variables. Unknown keys are refused (a typo must not silently fall back to a default).
//! Secrets are never stored here: `[llm] api_key_env` names the environment variable that holds
//! the key, and [`LlmConfig::api_key`] reads it when the provider is built.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub const ENV_PREFIX: &str = "MUSEUM_AGENT__";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub session: SessionConfig,
    pub limits: LimitsConfig,
    pub auth: AuthConfig,
    pub llm: LlmConfig,
    pub srs: SrsConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on.
    pub bind: String,
    /// Directory served at `/` (the kiosk page).
    pub static_dir: PathBuf,
    /// On SIGTERM/Ctrl-C, how long in-flight requests may run on after SHUTDOWN was sent.
    pub shutdown_grace_seconds: f64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1:8080".into(),
            static_dir: "static".into(),
            shutdown_grace_seconds: 10.0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// SQLite file; created and migrated at start.
    pub path: PathBuf,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            path: "data/museum-agent.db".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// Idle time after which a session expires (REGISTER_ACK `session_timeout_seconds`).
    pub timeout_seconds: u64,
    /// HEARTBEAT period.
    pub heartbeat_interval_seconds: u64,
    /// SESSION_WARN is sent once when fewer seconds than this remain.
    pub warn_before_seconds: u64,
    /// A connection that has not registered within this time is closed.
    pub register_timeout_seconds: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            timeout_seconds: 3600,
            heartbeat_interval_seconds: 30,
            warn_before_seconds: 300,
            register_timeout_seconds: 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest accepted text frame; larger gets PAYLOAD_TOO_LARGE (connection stays open).
    pub max_text_frame_bytes: usize,
    /// Largest accepted binary frame; larger gets PAYLOAD_TOO_LARGE (connection stays open).
    pub max_binary_frame_bytes: usize,
    /// Frames above this are not even buffered: the WebSocket is closed with 1009.
    pub hard_frame_bytes: usize,
    /// Registered sessions on this server; more get SERVER_BUSY.
    pub max_sessions: usize,
    /// Open WebSocket connections (registered or not); more are refused with HTTP 503.
    pub max_connections: usize,
    /// Requests in flight per session; more get SERVER_BUSY.
    pub max_requests_in_flight: usize,
    /// Longest `content.text` in characters; longer gets PAYLOAD_TOO_LARGE.
    pub max_text_chars: usize,
    /// Largest voice upload in bytes of PCM (default 60 s of 16 kHz s16le mono).
    pub max_upload_bytes: usize,
    /// Frames queued for one socket's writer.
    pub outbound_queue_frames: usize,
    /// A client that keeps its queue full (or a write blocked) this long is disconnected.
    pub slow_client_timeout_seconds: f64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_text_frame_bytes: 1024 * 1024,
            max_binary_frame_bytes: 64 * 1024,
            hard_frame_bytes: 4 * 1024 * 1024,
            max_sessions: 20_000,
            max_connections: 25_000,
            max_requests_in_flight: 8,
            max_text_chars: 4000,
            max_upload_bytes: 1_920_000,
            outbound_queue_frames: 256,
            slow_client_timeout_seconds: 10.0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Failed REGISTERs allowed per peer address within `failure_window_seconds`.
    pub max_failures_per_address: u32,
    pub failure_window_seconds: u64,
    /// Once over the limit, the address is refused (without checking credentials) this long.
    pub lockout_seconds: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            max_failures_per_address: 10,
            failure_window_seconds: 60,
            lockout_seconds: 300,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmProviderKind {
    /// No LLM: text requests get a clear ERROR.
    None,
    /// Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, DeepSeek, DashScope compatible
    /// mode, vLLM, llama.cpp server, Ollama, ...).
    Openai,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    pub provider: LlmProviderKind,
    /// Base URL up to and including the version segment, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key (empty: send no key).
    pub api_key_env: String,
    pub system_prompt: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// Conversation messages kept per session (oldest dropped first).
    pub history_messages: usize,
    pub connect_timeout_seconds: f64,
    /// From sending the request to the first streamed chunk.
    pub first_token_timeout_seconds: f64,
    /// Longest silence between two chunks once streaming.
    pub idle_timeout_seconds: f64,
    /// Whole reply.
    pub total_timeout_seconds: f64,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            provider: LlmProviderKind::None,
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key_env: "OPENAI_API_KEY".into(),
            system_prompt: DEFAULT_SYSTEM_PROMPT.into(),
            temperature: None,
            max_tokens: None,
            history_messages: 20,
            connect_timeout_seconds: 10.0,
            first_token_timeout_seconds: 30.0,
            idle_timeout_seconds: 30.0,
            total_timeout_seconds: 120.0,
        }
    }
}

pub const DEFAULT_SYSTEM_PROMPT: &str = "You are the museum's guide. Answer visitors' questions about \
the collection briefly and warmly, in the visitor's language. Use only facts from the museum's \
collection or the conversation; when you do not know, say so. Keep spoken answers short. When a \
client function fits (for example showing an exhibit on screen), call it.";

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key itself is never held here; api_key_env is only a variable name.
        f.debug_struct("LlmConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("history_messages", &self.history_messages)
            .finish_non_exhaustive()
    }
}

impl LlmConfig {
    /// Reads the API key from the environment variable named by `api_key_env`.
    pub fn api_key(&self) -> Option<String> {
        if self.api_key_env.is_empty() {
            return None;
        }
        std::env::var(&self.api_key_env)
            .ok()
            .filter(|k| !k.is_empty())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SrsProviderKind {
    /// No retrieval: answers are not grounded in the collection.
    None,
    /// The collection in this server's SQLite file (FTS5/BM25, optional embeddings).
    Embedded,
    /// An external retrieval service over HTTP (see `providers/srs/remote.rs`).
    Remote,
}

/// `[srs]`: retrieval over the museum's collection.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SrsConfig {
    pub provider: SrsProviderKind,
    /// Exhibits put into the prompt per question.
    pub top_k: usize,
    /// Hits scoring below this (0–1: the IDF-weighted share of the question found in the
    /// exhibit, discounted by BM25 rank) are dropped; no hit left = "the collection has no answer".
    pub no_answer_threshold: f64,
    /// BM25 candidates re-ranked per question.
    pub candidates: usize,
    /// Longer questions are cut to this many characters before analysis.
    pub max_query_chars: usize,
    /// Ingest `demo_path` at start when the collection is empty (or the file changed since).
    pub load_demo: bool,
    pub demo_path: PathBuf,
    /// Base URL of the external service for `provider = "remote"`.
    pub remote_url: String,
    /// Environment variable holding the remote service's bearer token ("" = none).
    pub remote_api_key_env: String,
    /// Bound on each remote call; on failure the answer goes on without retrieval.
    pub remote_timeout_seconds: f64,
    /// OpenAI-compatible base URL (…/v1) for embeddings; "" = embeddings off (lexical only).
    pub embeddings_url: String,
    pub embeddings_model: String,
    /// Environment variable holding the embeddings API key ("" = none).
    pub embeddings_api_key_env: String,
    pub embeddings_timeout_seconds: f64,
    /// Texts per embeddings request at ingest.
    pub embeddings_batch: usize,
    /// With embeddings, a hit below the lexical threshold is kept when its cosine similarity
    /// reaches this.
    pub embeddings_min_similarity: f64,
    /// Reciprocal rank fusion constant (score = Σ 1/(rrf_k + rank)).
    pub rrf_k: f64,
}

impl Default for SrsConfig {
    fn default() -> Self {
        SrsConfig {
            provider: SrsProviderKind::Embedded,
            top_k: 5,
            no_answer_threshold: 0.3,
            candidates: 50,
            max_query_chars: 500,
            load_demo: true,
            demo_path: "fixtures/collection/exhibits.jsonl".into(),
            remote_url: String::new(),
            remote_api_key_env: String::new(),
            remote_timeout_seconds: 2.0,
            embeddings_url: String::new(),
            embeddings_model: "text-embedding-3-small".into(),
            embeddings_api_key_env: "OPENAI_API_KEY".into(),
            embeddings_timeout_seconds: 10.0,
            embeddings_batch: 64,
            embeddings_min_similarity: 0.5,
            rrf_k: 60.0,
        }
    }
}

/// The value of the environment variable `name` (None when `name` is empty, unset or empty).
pub fn env_secret(name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    std::env::var(name).ok().filter(|k| !k.is_empty())
}

pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config: {0}")]
    Invalid(String),
}

impl Config {
    /// Loads defaults, then `path` (if given, or `config.toml` if it exists), then the environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let default_path = Path::new("config.toml");
        let file = match path {
            Some(p) => Some(p.to_path_buf()),
            None if default_path.exists() => Some(default_path.to_path_buf()),
            None => None,
        };
        let text = match &file {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.clone(),
                source,
            })?,
            None => String::new(),
        };
        Self::from_sources(&text, std::env::vars())
    }

    /// Builds a config from TOML text and `(name, value)` environment pairs.
    pub fn from_sources(
        toml_text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut table: toml::Table = toml::from_str(toml_text)
            .map_err(|e| ConfigError::Invalid(format!("config.toml: {e}")))?;
        for (name, value) in env {
            let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let parts: Vec<String> = rest.split("__").map(|p| p.to_ascii_lowercase()).collect();
            let [section, key] = parts.as_slice() else {
                return Err(ConfigError::Invalid(format!(
                    "{name}: expected {ENV_PREFIX}SECTION__KEY"
                )));
            };
            let entry = table
                .entry(section.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(sec) = entry else {
                return Err(ConfigError::Invalid(format!(
                    "{name}: [{section}] is not a table"
                )));
            };
            sec.insert(key.clone(), parse_env_value(&value));
        }
        let config: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let s = &self.session;
        if s.timeout_seconds == 0 || s.heartbeat_interval_seconds == 0 {
            return Err(ConfigError::Invalid(
                "session.timeout_seconds and session.heartbeat_interval_seconds must be > 0".into(),
            ));
        }
        let l = &self.limits;
        if l.outbound_queue_frames == 0 || l.max_requests_in_flight == 0 {
            return Err(ConfigError::Invalid(
                "limits.outbound_queue_frames and limits.max_requests_in_flight must be > 0".into(),
            ));
        }
        if l.hard_frame_bytes < l.max_text_frame_bytes.max(l.max_binary_frame_bytes) {
            return Err(ConfigError::Invalid(
                "limits.hard_frame_bytes must be at least the text and binary frame limits".into(),
            ));
        }
        if self.llm.provider != LlmProviderKind::None && self.llm.base_url.is_empty() {
            return Err(ConfigError::Invalid("llm.base_url is empty".into()));
        }
        let r = &self.srs;
        if !(0.0..=1.0).contains(&r.no_answer_threshold)
            || !(-1.0..=1.0).contains(&r.embeddings_min_similarity)
        {
            return Err(ConfigError::Invalid(
                "srs.no_answer_threshold must be in 0..=1 and srs.embeddings_min_similarity in -1..=1"
                    .into(),
            ));
        }
        if r.top_k == 0 || r.candidates == 0 || r.max_query_chars == 0 || r.embeddings_batch == 0 {
            return Err(ConfigError::Invalid(
                "srs.top_k, srs.candidates, srs.max_query_chars and srs.embeddings_batch must be > 0"
                    .into(),
            ));
        }
        if r.rrf_k < 0.0 {
            return Err(ConfigError::Invalid("srs.rrf_k must be >= 0".into()));
        }
        if r.provider == SrsProviderKind::Remote && r.remote_url.trim().is_empty() {
            return Err(ConfigError::Invalid(
                "srs.provider = \"remote\" needs srs.remote_url".into(),
            ));
        }
        Ok(())
    }
}

/// An environment value is read as a TOML value when it parses as one (numbers, booleans,
/// arrays, quoted strings), otherwise as a plain string.
fn parse_env_value(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match toml::from_str::<toml::Table>(&doc) {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_file_then_env() {
        let toml_text =
            "[server]\nbind = \"0.0.0.0:9000\"\n[llm]\nprovider = \"openai\"\nmodel = \"m1\"\n";
        let env = vec![
            ("MUSEUM_AGENT__LLM__MODEL".to_string(), "m2".to_string()),
            ("MUSEUM_AGENT__SESSION__TIMEOUT_SECONDS".into(), "90".into()),
            (
                "MUSEUM_AGENT__LLM__BASE_URL".into(),
                "http://127.0.0.1:1/v1".into(),
            ),
            ("UNRELATED".into(), "x".into()),
        ];
        let c = Config::from_sources(toml_text, env).unwrap();
        assert_eq!(c.server.bind, "0.0.0.0:9000");
        assert_eq!(c.llm.model, "m2");
        assert_eq!(c.llm.base_url, "http://127.0.0.1:1/v1");
        assert_eq!(c.session.timeout_seconds, 90);
        assert_eq!(c.session.heartbeat_interval_seconds, 30);
        assert_eq!(c.llm.provider, LlmProviderKind::Openai);
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(Config::from_sources("[server]\nbnd = \"x\"\n", vec![]).is_err());
        assert!(Config::from_sources("[nope]\n", vec![]).is_err());
        let env = vec![("MUSEUM_AGENT__LLM__MODLE".to_string(), "x".to_string())];
        assert!(Config::from_sources("", env).is_err());
        let env = vec![("MUSEUM_AGENT__LLM".to_string(), "x".to_string())];
        assert!(Config::from_sources("", env).is_err());
    }

    #[test]
    fn srs_settings_are_checked() {
        let c = Config::from_sources("[srs]\nprovider = \"none\"\ntop_k = 3\n", vec![]).unwrap();
        assert_eq!((c.srs.provider, c.srs.top_k), (SrsProviderKind::None, 3));
        assert!(Config::from_sources("[srs]\nprovider = \"remote\"\n", vec![]).is_err());
        assert!(Config::from_sources("[srs]\nno_answer_threshold = 1.5\n", vec![]).is_err());
        assert!(Config::from_sources("[srs]\ntop_k = 0\n", vec![]).is_err());
        let env = vec![(
            "MUSEUM_AGENT__SRS__LOAD_DEMO".to_string(),
            "false".to_string(),
        )];
        assert!(!Config::from_sources("", env).unwrap().srs.load_demo);
    }

    #[test]
    fn shipped_config_toml_matches_defaults() {
        let text = include_str!("../config.toml");
        let c = Config::from_sources(text, vec![]).unwrap();
        let d = Config::default();
        assert_eq!(
            toml::to_string(&c).unwrap(),
            toml::to_string(&d).unwrap(),
            "config.toml documents every key with its default"
        );
    }
}

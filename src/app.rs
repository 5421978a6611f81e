//! Server-wide state shared by every connection: config, authenticator, pipeline dependencies,
//! counters, and the two shutdown tokens.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Authenticator;
use crate::config::{Config, LlmProviderKind, secs};
use crate::pipeline::Deps;
use crate::protocol::{HealthState, HealthStatus};
use crate::providers::llm::LlmProvider;
use crate::providers::llm::openai::{OpenAiOptions, OpenAiProvider};
use crate::providers::srs::Retriever;
use crate::store::Store;
use crate::util::CpuSampler;

/// Live counters.
#[derive(Default)]
pub struct Stats {
    /// Open WebSocket connections.
    pub connections: AtomicU64,
    /// Registered sessions.
    pub sessions: AtomicU64,
    pub cpu: CpuSampler,
}

pub struct AppState {
    pub config: Arc<Config>,
    pub auth: Authenticator,
    pub deps: Arc<Deps>,
    pub stats: Stats,
    pub started: Instant,
    /// Cancelled when shutdown begins: sessions send SHUTDOWN and stop taking requests.
    pub draining: CancellationToken,
    /// Cancelled when the grace period is over: everything still running stops.
    pub hard_stop: CancellationToken,
    /// Every connection task, so shutdown can wait for them (axum does not track upgraded sockets).
    pub tracker: TaskTracker,
}

/// Builds the configured LLM provider (None when `[llm] provider = "none"`).
pub fn build_llm(config: &Config) -> anyhow::Result<Option<Arc<dyn LlmProvider>>> {
    let c = &config.llm;
    match c.provider {
        LlmProviderKind::None => Ok(None),
        LlmProviderKind::Openai => {
            let api_key = c.api_key();
            if api_key.is_none() && !c.api_key_env.is_empty() {
                tracing::warn!(
                    env = %c.api_key_env,
                    "LLM API key variable is not set; requests are sent without a key"
                );
            }
            let p = OpenAiProvider::new(OpenAiOptions {
                base_url: c.base_url.clone(),
                model: c.model.clone(),
                api_key,
                temperature: c.temperature,
                max_tokens: c.max_tokens,
                connect_timeout: secs(c.connect_timeout_seconds),
            })?;
            Ok(Some(Arc::new(p)))
        }
    }
}

impl AppState {
    pub fn new(config: Config, store: Store, llm: Option<Arc<dyn LlmProvider>>) -> Arc<AppState> {
        Self::with_retriever(config, store, llm, None)
    }

    /// Like [`AppState::new`], with the collection retriever (see
    /// [`crate::providers::srs::build_retriever`]).
    pub fn with_retriever(
        config: Config,
        store: Store,
        llm: Option<Arc<dyn LlmProvider>>,
        retriever: Option<Arc<dyn Retriever>>,
    ) -> Arc<AppState> {
        let auth = Authenticator::new(store, config.auth.clone());
        let deps = Arc::new(Deps {
            llm,
            llm_config: config.llm.clone(),
            retriever,
        });
        Arc::new(AppState {
            config: Arc::new(config),
            auth,
            deps,
            stats: Stats::default(),
            started: Instant::now(),
            draining: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            tracker: TaskTracker::new(),
        })
    }

    pub fn store(&self) -> &Store {
        self.auth.store()
    }

    pub fn health_state(&self) -> HealthState {
        if self.draining.is_cancelled() {
            return HealthState::Unhealthy;
        }
        let sessions = self.stats.sessions.load(Ordering::Relaxed) as f64;
        let conns = self.stats.connections.load(Ordering::Relaxed) as f64;
        let l = &self.config.limits;
        if sessions >= 0.9 * l.max_sessions as f64 || conns >= 0.9 * l.max_connections as f64 {
            HealthState::Degraded
        } else {
            HealthState::Healthy
        }
    }

    /// HEALTH_CHECK_ACK `health_status`; `fields` empty = all (spec §4.8). Unknown names ignored.
    pub fn health(&self, fields: &[String]) -> HealthStatus {
        let want = |f: &str| fields.is_empty() || fields.iter().any(|x| x == f);
        HealthStatus {
            cpu_usage: want("cpu_usage").then(|| self.stats.cpu.sample()),
            conn_count: want("conn_count").then(|| self.stats.connections.load(Ordering::Relaxed)),
            status: want("status").then(|| self.health_state()),
            session_count: want("session_count")
                .then(|| self.stats.sessions.load(Ordering::Relaxed)),
            uptime_seconds: want("uptime_seconds").then(|| self.started.elapsed().as_secs()),
        }
    }
}

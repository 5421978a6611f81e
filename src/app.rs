//! Server-wide state shared by every connection: config, authenticator, pipeline dependencies,
//! counters, and the two shutdown tokens.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::{Authenticator, Principal};
use crate::config::{Config, LlmProviderKind, SttProviderKind, TtsProviderKind, secs};
use crate::metrics::Metrics;
use crate::pipeline::Deps;
use crate::protocol::{HealthState, HealthStatus};
use crate::providers::llm::LlmProvider;
use crate::providers::llm::gemini::GeminiProvider;
use crate::providers::llm::offline::OfflineProvider;
use crate::providers::llm::openai::OpenAiProvider;
use crate::providers::llm::sse::HttpOptions;
use crate::providers::stt::SttProvider;
use crate::providers::stt::funasr::{FunAsrOptions, FunAsrStt};
use crate::providers::stt::openai::{OpenAiStt, OpenAiSttOptions};
use crate::providers::tts::TtsProvider;
use crate::providers::tts::openai::{OpenAiTts, OpenAiTtsOptions, SpeechFormat};
use crate::retrieval::Retriever;
use crate::store::Store;
use crate::util::CpuSampler;

/// A live session as the server sees it from outside its task.
pub struct SessionEntry {
    pub principal: Principal,
    /// Ends the session with SHUTDOWN {reason}.
    pub kick: Kick,
}

/// How the server ends a live session from outside its task (a revoked credential).
pub enum Kick {
    /// A visitor session: one reason slot and a wake-up (`KickCell`, ~100 bytes), where a
    /// `mpsc::channel(1)` cost ~1.3 KiB of every idle session (its first 32-slot block is
    /// allocated with the channel).
    Session(Arc<KickCell>),
    /// A hub connection, whose loop (`hub::conn`) reads its kick from a channel.
    Channel(tokio::sync::mpsc::Sender<String>),
}

impl Kick {
    /// Delivers `reason`; false when the session was already kicked (the reason not yet read)
    /// or is gone.
    fn send(&self, reason: &str) -> bool {
        match self {
            Kick::Session(cell) => cell.kick(reason),
            Kick::Channel(tx) => tx.try_send(reason.to_string()).is_ok(),
        }
    }
}

/// A session's kick: set at most once from outside, awaited by whichever task owns the session
/// (its connection, or its parked task while a resume is awaited).
#[derive(Default)]
pub struct KickCell {
    reason: std::sync::Mutex<Option<String>>,
    wake: tokio::sync::Notify,
}

impl KickCell {
    /// Stores the reason and wakes the owner; false when a kick was already delivered.
    pub fn kick(&self, reason: &str) -> bool {
        let mut slot = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return false;
        }
        *slot = Some(reason.to_string());
        drop(slot);
        // Stores a permit when the owner is not waiting right now: it is not lost.
        self.wake.notify_one();
        true
    }

    /// The kick's reason, once there is one. Cancel-safe and ready again every time after a kick
    /// (the reason stays), so it may sit in a `select!` loop: unlike a `oneshot::Receiver`, it
    /// never panics when polled after it completed.
    pub async fn kicked(&self) -> String {
        loop {
            if let Some(r) = self
                .reason
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
            {
                return r.clone();
            }
            self.wake.notified().await;
        }
    }
}

/// Live sessions by id.
#[derive(Default)]
pub struct Registry(std::sync::Mutex<std::collections::HashMap<String, SessionEntry>>);

impl Registry {
    pub fn insert(&self, id: &str, entry: SessionEntry) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), entry);
    }

    pub fn remove(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }

    /// Kicks every session whose principal matches; returns how many.
    pub fn kick_where(&self, matches: impl Fn(&Principal) -> bool, reason: &str) -> usize {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = 0;
        for e in map.values().filter(|e| matches(&e.principal)) {
            if e.kick.send(reason) {
                n += 1;
            }
        }
        n
    }
}

/// Closes live sessions whose API key was revoked or account disabled since they registered:
/// every `revocation_check_seconds`, and at once when the user store reports a revocation (with
/// PostgreSQL, one made on any node).
pub async fn revocation_watch(app: Arc<AppState>) {
    let period = secs(app.config.auth.revocation_check_seconds.max(0.05));
    let users = app.auth.users().clone();
    let mut events = Some(users.revocation_events());
    loop {
        let event = async {
            match events.as_mut() {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = app.hard_stop.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
            // The engine dropped its sender: polling alone from now on.
            alive = event => if !alive { events = None },
        }
        let res = tokio::time::timeout(
            period.max(std::time::Duration::from_secs(2)),
            users.revoked_principals(),
        )
        .await;
        let Ok(Ok((keys, accounts))) = res else {
            tracing::warn!("revocation check failed; will retry");
            continue;
        };
        if let Some(c) = &app.cluster {
            c.revoked(&keys, &accounts);
        }
        let n = app.sessions.kick_where(
            |p| match p {
                Principal::ApiKey { id, .. } => keys.contains(id),
                Principal::Account { id, .. } => accounts.contains(id),
            },
            "credential revoked",
        );
        if n > 0 {
            tracing::info!(sessions = n, "closed sessions whose credential was revoked");
        }
    }
}

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
    pub metrics: Arc<Metrics>,
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
    pub sessions: Registry,
    /// Sessions a new socket may resume (`[session] resume_window_seconds`).
    pub resumable: crate::session::resume::Resumable,
    /// The agent hub, when `[hub] enabled`.
    pub hub: Option<Arc<crate::hub::Hub>>,
    /// This node's link to the others, when `[cluster] nats_url` is set.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// Builds the configured LLM provider (None when `[llm] provider = "none"`).
pub fn build_llm(config: &Config) -> anyhow::Result<Option<Arc<dyn LlmProvider>>> {
    let c = &config.llm;
    let options = || HttpOptions {
        base_url: c.base_url(),
        model: c.model(),
        api_key: key_or_warn("LLM", &c.api_key_env, c.api_key()),
        temperature: c.temperature,
        max_tokens: c.max_tokens,
        connect_timeout: secs(c.connect_timeout_seconds),
    };
    Ok(match c.provider {
        LlmProviderKind::None => None,
        LlmProviderKind::Offline => Some(Arc::new(OfflineProvider::new(&c.show_exhibit_function))),
        LlmProviderKind::Openai => Some(Arc::new(OpenAiProvider::new(options())?)),
        LlmProviderKind::Gemini => Some(Arc::new(GeminiProvider::new(options())?)),
    })
}

/// The key read from `env`, with a warning when the variable is named but unset.
fn key_or_warn(what: &str, env: &str, key: Option<String>) -> Option<String> {
    if key.is_none() && !env.is_empty() {
        tracing::warn!(%env, "{what} API key variable is not set; requests are sent without a key");
    }
    key
}

/// Builds the configured speech-to-text provider (None when `[stt] provider = "none"`).
pub fn build_stt(config: &Config) -> anyhow::Result<Option<Arc<dyn SttProvider>>> {
    let c = &config.stt;
    Ok(match c.provider {
        SttProviderKind::None => None,
        SttProviderKind::Openai => {
            let api_key = key_or_warn("STT", &c.api_key_env, c.api_key());
            Some(Arc::new(OpenAiStt::new(OpenAiSttOptions {
                base_url: c.base_url.clone(),
                model: c.model.clone(),
                api_key,
                language: c.language.clone(),
                prompt: c.prompt.clone(),
                send_model_name: c.send_model_name,
                connect_timeout: secs(c.connect_timeout_seconds),
            })?))
        }
        SttProviderKind::Funasr => Some(Arc::new(FunAsrStt::new(FunAsrOptions {
            url: c.funasr_url.clone(),
            mode: c.funasr_mode.clone(),
            itn: c.funasr_itn,
            hotwords: c.funasr_hotwords.clone(),
            frame_ms: 100,
            connect_timeout: secs(c.connect_timeout_seconds),
        })?)),
    })
}

/// Builds the configured text-to-speech provider (None when `[tts] provider = "none"`).
pub fn build_tts(config: &Config) -> anyhow::Result<Option<Arc<dyn TtsProvider>>> {
    let c = &config.tts;
    Ok(match c.provider {
        TtsProviderKind::None => None,
        TtsProviderKind::Openai => {
            let api_key = key_or_warn("TTS", &c.api_key_env, c.api_key());
            let format = if c.response_format == "wav" {
                SpeechFormat::Wav
            } else {
                SpeechFormat::Pcm {
                    sample_rate: c.sample_rate,
                }
            };
            Some(Arc::new(OpenAiTts::new(OpenAiTtsOptions {
                base_url: c.base_url.clone(),
                model: c.model.clone(),
                voice: c.voice.clone(),
                api_key,
                format,
                speed: c.speed,
                instructions: c.instructions.clone(),
                connect_timeout: secs(c.connect_timeout_seconds),
            })?))
        }
        TtsProviderKind::Command => {
            Some(Arc::new(crate::providers::tts::command::CommandTts::new(
                crate::providers::tts::command::CommandTtsOptions {
                    argv: c.command.clone(),
                    format: if c.command_output == "wav" {
                        SpeechFormat::Wav
                    } else {
                        SpeechFormat::Pcm {
                            sample_rate: c.sample_rate,
                        }
                    },
                    timeout: secs(c.command_timeout_seconds),
                },
            )?))
        }
    })
}

impl AppState {
    /// Builds the state; the STT and TTS providers come from `config` (a provider that cannot
    /// be built is logged as an error and left out, so voice requests then say it is not
    /// configured).
    pub fn new(config: Config, store: Store, llm: Option<Arc<dyn LlmProvider>>) -> Arc<AppState> {
        Self::with_retriever(config, store, llm, None)
    }

    /// Like [`AppState::new`], with the collection retriever (see
    /// [`crate::retrieval::build_retriever`]).
    pub fn with_retriever(
        config: Config,
        store: Store,
        llm: Option<Arc<dyn LlmProvider>>,
        retriever: Option<Arc<dyn Retriever>>,
    ) -> Arc<AppState> {
        let stt = build_stt(&config).unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot build the STT provider; voice input is off");
            None
        });
        let tts = build_tts(&config).unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot build the TTS provider; speech output is off");
            None
        });
        if let Some(s) = &stt {
            tracing::info!(provider = s.name(), "speech recognition on");
        }
        if let Some(t) = &tts {
            tracing::info!(provider = t.name(), "speech output on");
        }
        let hub = config.hub.enabled.then(|| {
            crate::hub::Hub::new(config.hub.clone(), store.clone())
                .map(Arc::new)
                .map_err(|e| tracing::error!(error = %e, "cannot load the agent hub; it is off"))
                .ok()
        });
        let auth = Authenticator::new(store, config.auth.clone());
        let metrics = Arc::new(Metrics::default());
        let deps = Arc::new(Deps {
            llm,
            llm_config: config.llm.clone(),
            retriever,
            retrieval_k: config.srs.top_k,
            facts: crate::retrieval::facts::FactsStore::from_config(&config.srs),
            facts_verbatim: config.srs.facts_verbatim,
            metrics: metrics.clone(),
            stt,
            tts,
            tts_config: config.tts.clone(),
            voice: crate::pipeline::speech::Voice::new(&config.stt),
        });
        let (config_cluster, config_session) = (config.cluster.clone(), config.session.clone());
        Arc::new(AppState {
            config: Arc::new(config),
            metrics,
            auth,
            deps,
            stats: Stats::default(),
            started: Instant::now(),
            draining: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
            tracker: TaskTracker::new(),
            sessions: Registry::default(),
            resumable: Default::default(),
            hub: hub.flatten(),
            cluster: crate::cluster::Cluster::new(&config_cluster, &config_session),
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
        let hub_degraded = self.hub.as_ref().is_some_and(|h| !h.healthy());
        let cluster_degraded = self.cluster.as_ref().is_some_and(|c| !c.healthy());
        if hub_degraded
            || cluster_degraded
            || sessions >= 0.9 * l.max_sessions as f64
            || conns >= 0.9 * l.max_connections as f64
        {
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

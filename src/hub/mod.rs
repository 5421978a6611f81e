//! The agent hub: the product's second face, where guide agents, the halls' systems
//! (environments), robots and human docents exchange messages (seeds 000, 001, 002). The wire
//! contract and every decision follow the module map below (`README.md` beside this file).
//!
//! ```text
//! envelope.rs  Star envelope + ClawOS fields: decode (payload kept raw), delivery bodies, errors. Pure
//! policy.rs    scope and tier permission policy. Pure
//! mailbox.rs   per-connection queue: control first, priority lanes, seq at write, unacked window
//! route.rs     one client frame: decode, sender check, scope, tiers, correlation, delivery
//! inbox.rs     attach (resume from stored inboxes), detach (store what was not acked), offline store
//! society.rs   agent society (seed 001): task briefs, contact registries, formatting. Pure
//! services.rs  messages addressed to the hub itself: ack, spawn_agent, send_message, contacts…
//! conn.rs      one connection over any inbound stream: attach/resume, heartbeats, kicks, detach,
//!              and `Outgoing`, the frames its writer takes (the endpoints are the transport's)
//! nats.rs      the NATS backend: subjects, JetStream inbox, KV streams and presence
//! cluster.rs   the hub across processes: subscriptions, remote deliveries, kicks, outages
//! shared_society.rs  the agent societies across processes: shared, watched, held in outages
//! client.rs    the Rust client library (agents, environments, humans)
//! metrics.rs   hub counters, latency histogram, queue depths
//! ```
//!
//! Invariants:
//! - The hub never parses a routed `payload` to route it; it reads one only for messages
//!   addressed to the hub itself, and to render `formatted` for `format=llm` recipients.
//! - The sender of a routed message is always the connection's own identity.
//! - Sequence numbers are assigned when a message is written, so they follow delivery order and
//!   an acknowledgement of `n` covers everything up to `n`.
//! - Every inbox change of one address (attach, detach, storing for an offline recipient) runs
//!   under that address's async lock, so nothing slips between "offline" and "online".
#![doc = include_str!("README.md")]

pub mod client;
mod cluster;
pub mod conn;
pub mod envelope;
mod inbox;
pub mod mailbox;
pub mod metrics;
pub mod nats;
pub mod policy;
mod route;
mod services;
mod shared_society;
pub mod society;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::config::{HubConfig, secs};
use crate::store::Store;
use crate::store::hub::AgentRow;
use crate::util::{now_ms, random_id};
use envelope::{HubError, OutMessage, OutPeer, PeerType, Tier};
use mailbox::{Control, Mailbox};
use metrics::HubMetrics;
use policy::TierPolicy;

/// Where a client lives: its type, environment (agents and environments) and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub ty: PeerType,
    pub env: Option<Arc<str>>,
    pub id: Arc<str>,
    /// `agent/{env}/{id}`, `environment/{env}` or `human/{id}`: the routing and storage key.
    pub key: Arc<str>,
}

impl Address {
    pub fn agent(env: &str, id: &str) -> Self {
        Address {
            ty: PeerType::Agent,
            env: Some(env.into()),
            id: id.into(),
            key: format!("agent/{env}/{id}").into(),
        }
    }

    pub fn environment(env: &str) -> Self {
        Address {
            ty: PeerType::Environment,
            env: Some(env.into()),
            id: env.into(),
            key: format!("environment/{env}").into(),
        }
    }

    pub fn human(id: &str) -> Self {
        Address {
            ty: PeerType::Human,
            env: None,
            id: id.into(),
            key: format!("human/{id}").into(),
        }
    }

    fn peer(&self, tier: Option<Tier>) -> OutPeer<'_> {
        OutPeer {
            id: &self.id,
            ty: self.ty.as_str(),
            env: self.env.as_deref(),
            tier: tier.map(Tier::as_str),
        }
    }
}

/// How a client asked to be served (query parameters of its endpoint).
#[derive(Debug, Clone, Default)]
pub struct ConnOptions {
    pub tier: Option<Tier>,
    /// Society role (for contacts and the formatted header); defaults to the client type.
    pub role: String,
    /// `ack=manual`: messages stay unacknowledged until the client acks them.
    pub manual_ack: bool,
    /// `format=llm`: deliveries carry the seed-001 `formatted` text.
    pub llm_format: bool,
    /// `last_seq`: the last sequence number the client saw (resume point).
    pub last_seq: Option<u64>,
}

/// One live hub connection.
pub struct Conn {
    pub address: Address,
    pub opts: ConnOptions,
    pub mailbox: Mailbox,
    /// Cancelled to close the connection.
    pub token: CancellationToken,
    serial: u64,
    /// Its deliveries to other processes waiting for their answers, in the order sent (NATS
    /// backend; started at the first one, closed at detach).
    pipe: Mutex<Option<tokio::sync::mpsc::Sender<cluster::Piped>>>,
    /// Delivery ids of the messages other processes sent it lately (to drop a retry).
    seen: Mutex<cluster::Seen>,
    /// When and where it attached: the tie-break between two attaches of one identity.
    stamp: nats::Stamp,
    /// Replaced by a connection on another process (which owns the presence entry now).
    kicked: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("address", &self.address.key)
            .field("serial", &self.serial)
            .finish()
    }
}

impl Conn {
    /// Queues a hub `error` envelope for this client.
    pub fn send_error(&self, hub: &Hub, original_id: Option<&str>, trace: &str, err: &HubError) {
        hub.metrics.error(err.code.star());
        tracing::debug!(to = %self.address.key, trace_id = trace, original = ?original_id, code = err.code.as_str(), message = %err.message, "hub error");
        let payload = envelope::error_payload(err, original_id, trace);
        self.control_envelope("error", trace, &payload);
    }

    /// Queues an unsequenced envelope from the hub.
    fn control_envelope(&self, ty: &'static str, trace: &str, payload: &str) {
        let payload = RawValue::from_string(payload.to_string())
            .unwrap_or_else(|_| RawValue::from_string("{}".into()).expect("valid"));
        self.hub_frame(ty, None, trace, &payload);
    }

    /// Queues a hub reply to a hub-addressed message (`kind: response`, `requestId`).
    fn reply(&self, request_id: &str, trace: &str, payload: &serde_json::Value) {
        let payload = RawValue::from_string(payload.to_string()).expect("serialized JSON");
        self.hub_frame("message", Some(request_id), trace, &payload);
    }

    /// Queues a frame from the hub; closes a client that lets them pile up (not reading).
    fn hub_frame(&self, ty: &'static str, reply_to: Option<&str>, trace: &str, payload: &RawValue) {
        let ts = hub_timestamp();
        let id = random_id("hub_");
        let body = envelope::body(&OutMessage {
            kind: reply_to.map(|_| "response"),
            request_id: reply_to,
            ..OutMessage::new(
                ty,
                &id,
                hub_peer(),
                self.address.peer(self.opts.tier),
                &ts,
                trace,
                payload,
            )
        });
        if !self
            .mailbox
            .control(Control::Text(envelope::unsequenced(&body)))
        {
            self.token.cancel();
        }
    }
}

fn hub_peer() -> OutPeer<'static> {
    OutPeer {
        id: "hub",
        ty: "hub",
        env: None,
        tier: None,
    }
}

fn hub_timestamp() -> Box<RawValue> {
    RawValue::from_string(format!("\"{}\"", envelope::iso8601(now_ms()))).expect("valid")
}

/// A `kind: "request"` waiting for its response.
struct Pending {
    /// Who may answer (None: a broadcast request, anyone of the group).
    responder: Option<Arc<str>>,
    expires_at: i64,
    /// Also in the shared pending bucket (NATS backend: the request left its process), where
    /// a response must take it too. False for a request whose two ends share this process:
    /// checked here alone, without a NATS round trip.
    shared: bool,
    /// The shared entry's revision once a response took it (given back with it if the
    /// response is not delivered).
    taken_rev: Option<u64>,
}

impl Pending {
    /// Request `id` of `requester` as the shared pending registry records it (not taken).
    fn record(&self, requester: &str, id: &str) -> nats::SharedPending {
        nats::SharedPending {
            requester: requester.to_string(),
            id: id.to_string(),
            responder: self.responder.as_deref().map(str::to_owned),
            until: self.expires_at,
            taken: false,
        }
    }
}

#[derive(Default)]
struct State {
    online: HashMap<Arc<str>, Arc<Conn>>,
    /// Broadcast groups: (env or "" for humans, type) → connections.
    groups: HashMap<(Arc<str>, PeerType), Vec<Arc<Conn>>>,
    /// Attaches in progress here, with their stamps (a kick arriving meanwhile compares them).
    attaching: HashMap<Arc<str>, nats::Stamp>,
    /// Addresses with a stream, and the tier each last connected with.
    known: HashMap<Arc<str>, Option<Tier>>,
    /// Stored (offline) message counts, loaded lazily.
    stored: HashMap<Arc<str>, usize>,
    locks: HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>,
    /// NATS subscriptions of the local clients (NATS backend).
    subs: cluster::Subs,
}

pub struct Hub {
    pub config: HubConfig,
    policy: TierPolicy,
    store: Store,
    pub metrics: HubMetrics,
    state: Mutex<State>,
    pending: Mutex<HashMap<(Arc<str>, String), Pending>>,
    societies: Mutex<HashMap<String, society::Society>>,
    serial: AtomicU64,
    /// The NATS backend once connected and set up (`[hub] backend = "nats"`).
    nats: std::sync::OnceLock<Arc<nats::Nats>>,
    /// This process's id among the hub's processes.
    pub node: String,
    /// Messages for other processes held while NATS is unreachable.
    held: Mutex<std::collections::VecDeque<cluster::Held>>,
    held_notify: tokio::sync::Notify,
    /// Society changes stored here and not yet shared with the other processes (NATS was
    /// unreachable): shared again, in order, by the society watch (see `cluster.rs`).
    society_held: Mutex<std::collections::VecDeque<(String, society::Change)>>,
    /// This hub, for the tasks it starts (set by [`Hub::start`]).
    me: std::sync::OnceLock<std::sync::Weak<Hub>>,
}

/// Where inboxes live and how other processes are reached, right now.
pub(crate) enum Backend<'a> {
    /// This process is the whole hub; inboxes in SQLite.
    Embedded,
    Nats(&'a Arc<nats::Nats>),
    /// `backend = "nats"` but NATS is unreachable (or not set up yet).
    NatsDown,
}

/// The group key of broadcasts to `ty` in `env`.
fn group_key(env: Option<&Arc<str>>, ty: PeerType) -> (Arc<str>, PeerType) {
    (env.cloned().unwrap_or_else(|| Arc::from("")), ty)
}

impl Hub {
    /// Builds the hub, loading known addresses and the agent societies from `store`.
    pub fn new(config: HubConfig, store: Store) -> anyhow::Result<Hub> {
        let policy =
            TierPolicy::from_config(&config.policy, &config.allow).map_err(anyhow::Error::msg)?;
        let mut state = State::default();
        for (addr, tier) in store.hub_known_addresses()? {
            state
                .known
                .insert(addr.into(), tier.as_deref().and_then(Tier::parse));
        }
        let mut societies: HashMap<String, society::Society> = HashMap::new();
        let mut agents: HashMap<String, Vec<society::AgentRecord>> = HashMap::new();
        for a in store.hub_agents()? {
            agents.entry(a.env).or_default().push(society::AgentRecord {
                id: a.agent_id,
                role: a.role,
                parent: a.parent,
                task_brief: a.task_brief.and_then(|t| serde_json::from_str(&t).ok()),
            });
        }
        let mut contacts: HashMap<String, Vec<(String, society::ContactEntry)>> = HashMap::new();
        for (env, owner, entry) in store.hub_contacts()? {
            match serde_json::from_str(&entry) {
                Ok(e) => contacts.entry(env).or_default().push((owner, e)),
                Err(e) => {
                    tracing::warn!(%env, %owner, error = %e, "unreadable stored contact skipped")
                }
            }
        }
        for env in agents
            .keys()
            .chain(contacts.keys())
            .cloned()
            .collect::<HashSet<_>>()
        {
            let mut s = society::Society::default();
            s.restore(
                agents.remove(&env).unwrap_or_default(),
                contacts.remove(&env).unwrap_or_default(),
            );
            societies.insert(env, s);
        }
        Ok(Hub {
            config,
            policy,
            store,
            metrics: HubMetrics::default(),
            state: Mutex::new(state),
            pending: Mutex::new(HashMap::new()),
            societies: Mutex::new(societies),
            serial: AtomicU64::new(1),
            nats: std::sync::OnceLock::new(),
            node: random_id("node-")[..17].to_string(),
            held: Mutex::new(Default::default()),
            held_notify: tokio::sync::Notify::new(),
            society_held: Mutex::new(Default::default()),
            me: std::sync::OnceLock::new(),
        })
    }

    pub(crate) fn backend(&self) -> Backend<'_> {
        match (self.config.backend, self.nats.get()) {
            (crate::config::HubBackend::Embedded, _) => Backend::Embedded,
            (_, Some(n)) if n.connected() => Backend::Nats(n),
            _ => Backend::NatsDown,
        }
    }

    /// False while the NATS backend is unreachable: new connections are refused (their
    /// inboxes cannot be read) and health is DEGRADED.
    pub fn healthy(&self) -> bool {
        !matches!(self.backend(), Backend::NatsDown)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn address_lock(&self, key: &Arc<str>) -> Arc<tokio::sync::Mutex<()>> {
        self.state().locks.entry(key.clone()).or_default().clone()
    }

    /// Whether `key` is online now.
    pub fn is_online(&self, key: &str) -> bool {
        self.state().online.contains_key(key)
    }

    /// Ids of the connected clients of `ty` in `env`.
    pub fn online_in(&self, env: Option<&str>, ty: PeerType) -> Vec<String> {
        let st = self.state();
        let key = (Arc::<str>::from(env.unwrap_or("")), ty);
        st.groups
            .get(&key)
            .map(|v| v.iter().map(|c| c.address.id.to_string()).collect())
            .unwrap_or_default()
    }

    fn heartbeat_payload(&self, conn: &Conn, welcome: bool) -> String {
        let mut v = serde_json::json!({
            "timestamp": envelope::iso8601(now_ms()),
            "server_status": "running",
            "ping": "pong",
            "interval_seconds": self.config.heartbeat_interval_seconds,
        });
        if welcome {
            v["identity"] = serde_json::json!({
                "id": &*conn.address.id,
                "type": conn.address.ty.as_str(),
                "env": conn.address.env.as_deref(),
                "tier": conn.opts.tier.map(Tier::as_str),
                "role": conn.opts.role,
            });
            v["ack"] = if conn.opts.manual_ack {
                "manual"
            } else {
                "auto"
            }
            .into();
            if let (PeerType::Agent, Some(env)) = (conn.address.ty, &conn.address.env) {
                let socs = self.societies.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(ctx) = socs.get(&**env).and_then(|s| s.context(&conn.address.id)) {
                    v["context"] = ctx;
                }
            }
        }
        v.to_string()
    }

    /// Queues the periodic heartbeat (the caller also sends a WebSocket ping).
    pub fn heartbeat(&self, conn: &Conn) {
        conn.control_envelope(
            "heartbeat",
            &route::new_trace(),
            &self.heartbeat_payload(conn, false),
        );
    }

    /// The deepest recipients (queued, unacked, stored), for `/metrics`.
    pub fn depths(&self, limit: usize) -> Vec<(String, usize, usize, usize)> {
        let st = self.state();
        let mut v: Vec<(String, usize, usize, usize)> = st
            .online
            .values()
            .map(|c| {
                let (q, u) = c.mailbox.depth();
                (c.address.key.to_string(), q, u, 0)
            })
            .chain(
                st.stored
                    .iter()
                    .filter(|(k, n)| **n > 0 && !st.online.contains_key(*k))
                    .map(|(k, n)| (k.to_string(), 0, 0, *n)),
            )
            .filter(|(_, q, u, s)| q + u + s > 0)
            .collect();
        v.sort_by_key(|(_, q, u, s)| std::cmp::Reverse(q + u + s));
        v.truncate(limit);
        v
    }

    /// The agent society of `env` as this process sees it (records, then registry entries by
    /// owner), for operators' checks and tests; `None` when it has none.
    pub fn society_snapshot(&self, env: &str) -> Option<society::Snapshot> {
        let socs = self.societies.lock().unwrap_or_else(|p| p.into_inner());
        socs.get(env).map(society::Society::snapshot)
    }

    /// Persists society changes and reports a storage failure as an error.
    async fn persist_society(
        &self,
        env: &str,
        changes: Vec<society::Change>,
    ) -> Result<(), HubError> {
        if changes.is_empty() {
            return Ok(());
        }
        let shared = if self.config.backend == crate::config::HubBackend::Nats {
            changes.clone()
        } else {
            Vec::new()
        };
        let mut agents = Vec::new();
        let mut contacts = Vec::new();
        for c in changes {
            match c {
                society::Change::Agent(a) => {
                    let k = Address::agent(env, &a.id).key;
                    self.state().known.entry(k).or_insert(None);
                    agents.push(AgentRow {
                        env: env.to_string(),
                        agent_id: a.id,
                        role: a.role,
                        parent: a.parent,
                        task_brief: a.task_brief.map(|b| b.to_string()),
                    })
                }
                society::Change::Contact { owner, entry } => contacts.push((
                    env.to_string(),
                    owner,
                    entry.id.clone(),
                    serde_json::to_string(&entry).unwrap_or_default(),
                )),
            }
        }
        self.store
            .call(move |s| s.hub_society_apply(&agents, &contacts))
            .await
            .map_err(inbox::store_failed)?;
        if !shared.is_empty() {
            self.share_society(env, shared).await;
        }
        Ok(())
    }

    async fn society_join(&self, conn: &Conn) {
        let Some(env) = conn.address.env.as_deref() else {
            return;
        };
        let changes = {
            let mut socs = self.societies.lock().unwrap_or_else(|p| p.into_inner());
            socs.entry(env.to_string()).or_default().join(
                &conn.address.id,
                &conn.opts.role,
                &envelope::iso8601(now_ms()),
            )
        };
        if let Err(e) = self.persist_society(env, changes).await {
            tracing::warn!(error = %e.message, "hub: could not store a society join");
        }
    }
}

/// Frames above this are not read at all: the socket layer refuses them and the connection is
/// closed with 1009 (twice `max_message_bytes`, which gets a VALIDATION_ERROR and goes on).
pub fn hard_frame_limit(config: &HubConfig) -> usize {
    config.max_message_bytes.max(1024) * 2
}

/// How often the periodic heartbeat runs.
pub fn heartbeat_period(config: &HubConfig) -> std::time::Duration {
    secs(config.heartbeat_interval_seconds)
}

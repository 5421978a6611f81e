//! The agent hub: the product's second face, where guide agents, the halls' systems
//! (environments), robots and human docents exchange messages (seeds 000, 001, 002; README
//! "Agent hub" has the wire contract and every decision).
//!
//! ```text
//! envelope.rs  Star envelope + ClawOS fields: decode (payload kept raw), delivery bodies, errors. Pure
//! policy.rs    scope and tier permission policy. Pure
//! mailbox.rs   per-connection queue: control first, priority lanes, seq at write, unacked window
//! society.rs   agent society (seed 001): task briefs, contact registries, formatting. Pure
//! services.rs  messages addressed to the hub itself: ack, spawn_agent, send_message, contacts…
//! conn.rs      the three WebSocket endpoints: auth, attach/resume, reader, writer, heartbeats
//! client.rs    the Rust client library (agents, environments, humans)
//! metrics.rs   hub counters, latency histogram, queue depths
//! ```
//!
//! Invariants:
//! - The hub never parses a routed `payload` (only messages addressed to the hub itself).
//! - The sender of a routed message is always the connection's own identity.
//! - Sequence numbers are assigned when a message is written, so they follow delivery order and
//!   an acknowledgement of `n` covers everything up to `n`.
//! - Every inbox change of one address (attach, detach, storing for an offline recipient) runs
//!   under that address's async lock, so nothing slips between "offline" and "online".

pub mod client;
pub mod conn;
pub mod envelope;
pub mod mailbox;
pub mod metrics;
pub mod policy;
mod services;
pub mod society;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::config::{HubConfig, secs};
use crate::store::Store;
use crate::store::hub::{AgentRow, InboxRow};
use crate::util::{now_ms, random_id};
use envelope::{ClawCode, HubError, Inbound, Kind, OutMessage, OutPeer, PeerType, Priority, Tier};
use mailbox::{Control, Entry, Mailbox, PushError};
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
        let ts = hub_timestamp();
        let id = random_id("hub_");
        let body = envelope::body(&OutMessage {
            ty,
            id: &id,
            sender: hub_peer(),
            recipient: self.address.peer(self.opts.tier),
            timestamp: &ts,
            version: "1",
            trace_id: trace,
            priority: "normal",
            ttl: None,
            kind: None,
            request_id: None,
            metadata: None,
            formatted: None,
            payload: &payload,
        });
        if !self
            .mailbox
            .control(Control::Text(envelope::unsequenced(&body)))
        {
            // Not reading its socket (or already closing): end it.
            self.token.cancel();
        }
    }

    /// Queues a hub reply to a hub-addressed message (`kind: response`, `requestId`).
    fn reply(&self, request_id: &str, trace: &str, payload: &serde_json::Value) {
        let payload = RawValue::from_string(payload.to_string()).expect("serialized JSON");
        let ts = hub_timestamp();
        let id = random_id("hub_");
        let body = envelope::body(&OutMessage {
            ty: "message",
            id: &id,
            sender: hub_peer(),
            recipient: self.address.peer(self.opts.tier),
            timestamp: &ts,
            version: "1",
            trace_id: trace,
            priority: "normal",
            ttl: None,
            kind: Some("response"),
            request_id: Some(request_id),
            metadata: None,
            formatted: None,
            payload: &payload,
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
}

#[derive(Default)]
struct State {
    online: HashMap<Arc<str>, Arc<Conn>>,
    /// Broadcast groups: (env or "" for humans, type) → connections.
    groups: HashMap<(Arc<str>, PeerType), Vec<Arc<Conn>>>,
    /// Addresses with a stream, and the tier each last connected with.
    known: HashMap<Arc<str>, Option<Tier>>,
    /// Stored (offline) message counts, loaded lazily.
    stored: HashMap<Arc<str>, usize>,
    locks: HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>,
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
}

/// The group key of broadcasts to `ty` in `env`.
fn group_key(env: Option<&Arc<str>>, ty: PeerType) -> (Arc<str>, PeerType) {
    (env.cloned().unwrap_or_else(|| Arc::from("")), ty)
}

/// Where a message goes, once its recipient is resolved against the sender.
enum Dest {
    Hub,
    One(Address),
    Group(Option<Arc<str>>, PeerType),
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
        })
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

    /// Registers a connection: replaces an older connection of the same address, restores its
    /// stored inbox from the resume point, and queues the welcome heartbeat and resume report.
    pub async fn attach(
        &self,
        address: Address,
        opts: ConnOptions,
        token: CancellationToken,
    ) -> anyhow::Result<Arc<Conn>> {
        let lock = self.address_lock(&address.key);
        let _guard = lock.lock().await;
        let old = self.state().online.get(&address.key).cloned();
        if let Some(old) = old {
            tracing::info!(address = %address.key, "hub: a new connection replaces the old one");
            old.send_error(
                self,
                None,
                "-",
                &HubError::new(
                    ClawCode::E002,
                    "another connection with this identity replaced this one",
                    "do not run two clients with the same identity",
                ),
            );
            old.token.cancel();
            self.take_offline(&old).await;
        }
        let key = address.key.to_string();
        let tier = opts.tier.map(|t| t.as_str().to_string());
        let (stream, rows) = self
            .store
            .call(move |s| {
                let st = s.hub_open_stream(&key, tier.as_deref())?;
                Ok((st, s.hub_inbox_load(&key)?))
            })
            .await?;
        let (mut next_seq, acked) = stream;
        // Resume: the client says what it last saw; by default, what it last acknowledged.
        let claimed = opts.last_seq.unwrap_or(acked);
        let mut complete = true;
        let mut notes = Vec::new();
        if claimed >= next_seq {
            complete = false;
            notes.push(format!(
                "last_seq {claimed} is beyond the last sequence this hub assigned ({}); numbering continues after it",
                next_seq - 1
            ));
            next_seq = claimed + 1;
        }
        let missing = acked.saturating_sub(claimed);
        if missing > 0 {
            complete = false;
            notes.push(format!(
                "{missing} message(s) after {claimed} were acknowledged earlier and are no longer kept"
            ));
        }
        let acked_now = acked.max(claimed);
        let now = now_ms();
        let (mut drop_rows, mut expired) = (Vec::new(), 0u64);
        let mut resend = Vec::new();
        let mut fresh = Vec::new();
        for r in rows {
            if r.expires_at.is_some_and(|t| t <= now) {
                expired += 1;
                drop_rows.push(r.id);
                continue;
            }
            let entry = Arc::new(Entry {
                body: r.body.into(),
                priority: Priority::from_index(r.priority),
                expires_at: r.expires_at,
                received: Instant::now(),
                seq: r.seq,
                row: Some(r.id),
            });
            match r.seq {
                Some(s) if s <= acked_now => drop_rows.push(r.id),
                Some(_) => resend.push(entry),
                None => fresh.push(entry),
            }
        }
        resend.sort_by_key(|e| e.seq);
        self.metrics.expired.fetch_add(expired, Ordering::Relaxed);
        let resent = resend.len();
        let pending = fresh.len();
        let conn = Arc::new(Conn {
            mailbox: Mailbox::new(
                self.config.inbox_depth,
                opts.manual_ack,
                next_seq,
                acked_now,
            ),
            address,
            opts,
            token,
            serial: self.serial.fetch_add(1, Ordering::Relaxed),
        });
        // The seed's lifecycle: the hub greets a new connection with a heartbeat.
        conn.control_envelope("heartbeat", "-", &self.heartbeat_payload(&conn, true));
        conn.reply(
            "resume",
            "-",
            &serde_json::json!({
                "type": "resume",
                "last_seq": claimed,
                "next_seq": next_seq,
                "complete": complete,
                "missing": missing,
                "resent": resent,
                "pending": pending,
                "expired": expired,
                "notes": notes,
            }),
        );
        for e in resend.into_iter().chain(fresh) {
            // Stored inboxes are bounded by the same depth, so these fit; a failure means the
            // bound was lowered since, and the row simply stays stored for the next connection.
            let _ = conn.mailbox.push(e);
        }
        {
            let mut st = self.state();
            let k = conn.address.key.clone();
            st.online.insert(k.clone(), conn.clone());
            st.known.insert(k.clone(), conn.opts.tier);
            st.stored.remove(&k);
            st.groups
                .entry(group_key(conn.address.env.as_ref(), conn.address.ty))
                .or_default()
                .push(conn.clone());
        }
        self.metrics.connections.fetch_add(1, Ordering::Relaxed);
        if !drop_rows.is_empty() || claimed != acked || next_seq != stream.0 {
            let key = conn.address.key.to_string();
            self.store
                .call(move |s| {
                    s.hub_inbox_delete(&drop_rows)?;
                    s.hub_save_stream(&key, next_seq, acked_now)
                })
                .await?;
        }
        if conn.address.ty == PeerType::Agent {
            self.society_join(&conn).await;
        }
        Ok(conn)
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
        conn.control_envelope("heartbeat", "-", &self.heartbeat_payload(conn, false));
    }

    /// Unregisters a finished connection and stores whatever it had not acknowledged.
    pub async fn detach(&self, conn: &Arc<Conn>) {
        let lock = self.address_lock(&conn.address.key);
        let _guard = lock.lock().await;
        self.take_offline(conn).await;
    }

    /// Removes `conn` from routing (if still registered) and stores its mailbox. Idempotent.
    /// Caller holds the address lock.
    async fn take_offline(&self, conn: &Arc<Conn>) {
        {
            let mut st = self.state();
            let k = &conn.address.key;
            if st.online.get(k).is_some_and(|c| c.serial == conn.serial) {
                st.online.remove(k);
                self.metrics.connections.fetch_sub(1, Ordering::Relaxed);
            }
            let g = group_key(conn.address.env.as_ref(), conn.address.ty);
            if let Some(v) = st.groups.get_mut(&g) {
                v.retain(|c| c.serial != conn.serial);
                if v.is_empty() {
                    st.groups.remove(&g);
                }
            }
        }
        if conn.mailbox.is_closed() {
            return;
        }
        let d = conn.mailbox.close();
        let key = conn.address.key.to_string();
        let mut inserts = Vec::new();
        let mut seqs = d.sequenced_rows;
        let mut kept = 0usize;
        for (seq, e) in &d.unacked {
            kept += 1;
            match e.row {
                Some(r) => seqs.push((r, *seq)),
                None => inserts.push(row_of(&key, Some(*seq), e)),
            }
        }
        for e in &d.queued {
            kept += 1;
            if e.row.is_none() {
                inserts.push(row_of(&key, None, e));
            }
        }
        self.metrics
            .stored
            .fetch_add(inserts.len() as u64, Ordering::Relaxed);
        let released = d.released_rows;
        let (next_seq, acked) = (d.next_seq, d.acked);
        let k2 = key.clone();
        let res = self
            .store
            .call(move |s| {
                s.hub_inbox_delete(&released)?;
                s.hub_inbox_set_seqs(&seqs)?;
                s.hub_inbox_append(&inserts)?;
                s.hub_save_stream(&k2, next_seq, acked)
            })
            .await;
        match res {
            Ok(()) => {
                self.state().stored.insert(conn.address.key.clone(), kept);
            }
            Err(e) => {
                tracing::error!(address = %key, error = %e, "hub: could not store an inbox at disconnect")
            }
        }
    }

    /// Flushes a live connection's stored-row bookkeeping (acknowledged rows, new seqs).
    pub async fn flush_bookkeeping(&self, conn: &Conn) {
        let (released, seqs, expired) = conn.mailbox.take_bookkeeping();
        self.metrics.expired.fetch_add(expired, Ordering::Relaxed);
        if released.is_empty() && seqs.is_empty() {
            return;
        }
        let n = released.len();
        let res = self
            .store
            .call(move |s| {
                s.hub_inbox_delete(&released)?;
                s.hub_inbox_set_seqs(&seqs)
            })
            .await;
        if let Err(e) = res {
            tracing::warn!(error = %e, "hub: stored inbox bookkeeping failed; will redeliver");
        } else if n > 0 {
            let mut st = self.state();
            if let Some(c) = st.stored.get_mut(&conn.address.key) {
                *c = c.saturating_sub(n);
            }
        }
    }

    /// Handles one text frame from `conn`.
    pub async fn handle_text(&self, conn: &Arc<Conn>, text: &str) {
        self.metrics.received.fetch_add(1, Ordering::Relaxed);
        if text.len() > self.config.max_message_bytes {
            let err = HubError::validation(
                format!(
                    "message of {} bytes is over the limit of {}",
                    text.len(),
                    self.config.max_message_bytes
                ),
                "send large content by reference, or split it into stream messages",
            );
            conn.send_error(self, None, "-", &err);
            return;
        }
        match envelope::decode(text, self.config.max_ttl_seconds) {
            Err(e) => conn.send_error(self, e.original_id.as_deref(), "-", &e.error),
            Ok(envelope::Frame::Heartbeat) => {}
            Ok(envelope::Frame::Message(m)) => {
                let trace: String = match &m.trace_id {
                    Some(t) => t.to_string(),
                    None => random_id("trace-"),
                };
                if let Err(err) = self.route(conn, &m, &trace).await {
                    conn.send_error(self, m.id.as_deref(), &trace, &err);
                }
            }
        }
    }

    /// Resolves the recipient of `m` against the sender `from`.
    fn resolve(&self, from: &Address, m: &Inbound<'_>) -> Result<Dest, HubError> {
        let t = &m.recipient;
        let own_env = from.env.clone();
        let env_of = |explicit: &Option<std::borrow::Cow<'_, str>>| -> Result<Arc<str>, HubError> {
            match (explicit, &own_env) {
                (Some(e), _) => Ok(Arc::from(&**e)),
                (None, Some(e)) => Ok(e.clone()),
                (None, None) => Err(HubError::validation(
                    "recipient.env is required: a human belongs to no environment",
                    "add recipient.env (the environment id)",
                )),
            }
        };
        let dest = match t.ty {
            PeerType::Hub => return Ok(Dest::Hub),
            PeerType::Human if t.is_broadcast() => Dest::Group(None, PeerType::Human),
            PeerType::Human => Dest::One(Address::human(&t.id)),
            PeerType::Agent => {
                let env = env_of(&t.env)?;
                if t.is_broadcast() {
                    Dest::Group(Some(env), PeerType::Agent)
                } else {
                    Dest::One(Address::agent(&env, &t.id))
                }
            }
            PeerType::Environment => {
                if t.is_broadcast() {
                    Dest::Group(Some(env_of(&t.env)?), PeerType::Environment)
                } else {
                    if let Some(e) = &t.env
                        && **e != *t.id
                    {
                        return Err(HubError::validation(
                            format!("an environment's id is its env: {:?} is not {:?}", t.id, e),
                            "omit recipient.env for environments",
                        ));
                    }
                    Dest::One(Address::environment(&t.id))
                }
            }
        };
        // Scope: agents and environments speak inside their own environment.
        if let Some(own) = &from.env {
            let target_env = match &dest {
                Dest::One(a) => a.env.clone(),
                Dest::Group(e, _) => e.clone(),
                Dest::Hub => None,
            };
            if let Some(te) = target_env
                && te != *own
            {
                return Err(HubError::denied(
                    format!("a client of environment {own:?} cannot address environment {te:?}"),
                    "agents and environments speak inside their own environment; ask a human or the environment to relay",
                ));
            }
        }
        Ok(dest)
    }

    async fn route(&self, conn: &Arc<Conn>, m: &Inbound<'_>, trace: &str) -> Result<(), HubError> {
        let me = &conn.address;
        if let Some(s) = &m.sender {
            let forged = s.id.as_deref().is_some_and(|i| i != &*me.id)
                || s.ty.as_deref().is_some_and(|t| t != me.ty.as_str())
                || s.env
                    .as_deref()
                    .is_some_and(|e| Some(e) != me.env.as_deref())
                || s.tier
                    .as_deref()
                    .is_some_and(|t| Some(t) != conn.opts.tier.map(Tier::as_str));
            if forged {
                return Err(HubError::denied(
                    format!(
                        "sender does not match this connection (you are {} {:?})",
                        me.ty.as_str(),
                        &*me.id
                    ),
                    "omit sender (the hub fills it) or give this connection's own identity",
                ));
            }
        }
        let dest = self.resolve(me, m)?;
        let id: String =
            m.id.as_deref()
                .map(str::to_owned)
                .unwrap_or_else(|| random_id("msg_"));
        let target_key = match &dest {
            Dest::Hub => return services::handle(self, conn, m, &id, trace).await,
            Dest::One(a) => Some(a.key.clone()),
            Dest::Group(..) => None,
        };
        if let Dest::One(a) = &dest {
            if a.key == me.key {
                return Err(HubError::validation(
                    "a client cannot send a message to itself",
                    "address another client",
                ));
            }
            let their_tier = self.state().known.get(&a.key).copied().flatten();
            if !self.policy.allows(conn.opts.tier, their_tier) {
                return Err(HubError::denied(
                    format!(
                        "tier {} may not message tier {}",
                        conn.opts.tier.map(Tier::as_str).unwrap_or("-"),
                        their_tier.map(Tier::as_str).unwrap_or("-")
                    ),
                    "go through the tier in between (pm↔pm via command, worker↔worker via pm)",
                ));
            }
        }
        self.correlate(conn, m, &id, target_key.as_ref())?;
        let now = now_ms();
        let ts_owned;
        let timestamp = match m.timestamp {
            Some(t) => t,
            None => {
                ts_owned = hub_timestamp();
                &ts_owned
            }
        };
        let recipient_peer = OutPeer {
            id: &m.recipient.id,
            ty: m.recipient.ty.as_str(),
            env: match &dest {
                Dest::One(a) => a.env.as_deref(),
                Dest::Group(e, _) => e.as_deref(),
                Dest::Hub => None,
            },
            tier: None,
        };
        let out = OutMessage {
            ty: "message",
            id: &id,
            sender: me.peer(conn.opts.tier),
            recipient: recipient_peer,
            timestamp,
            version: "1",
            trace_id: trace,
            priority: m.priority.as_str(),
            ttl: m.ttl,
            kind: m.kind.map(Kind::as_str),
            request_id: m.request_id.as_deref(),
            metadata: m.metadata,
            formatted: None,
            payload: m.payload,
        };
        let body: Arc<str> = envelope::body(&out).into();
        let formatted_body = || -> Arc<str> {
            let payload: serde_json::Value =
                serde_json::from_str(m.payload.get()).unwrap_or(serde_json::Value::Null);
            let text = society::format_message_for_agent(
                if me.ty == PeerType::Human {
                    "user"
                } else {
                    &me.id
                },
                Some(&conn.opts.role),
                &payload,
            );
            envelope::body(&OutMessage {
                formatted: Some(&text),
                ..out_clone(&out)
            })
            .into()
        };
        let entry = |body: Arc<str>| {
            Arc::new(Entry {
                body,
                priority: m.priority,
                expires_at: m.ttl.map(|t| now + (t * 1000.0) as i64),
                received: Instant::now(),
                seq: None,
                row: None,
            })
        };
        tracing::trace!(trace_id = trace, msg_id = %id, from = %me.key, "hub: routing");
        match &dest {
            Dest::Hub => unreachable!("handled above"),
            Dest::One(a) => {
                let target = self.state().online.get(&a.key).cloned();
                let b = match target {
                    Some(t) if t.opts.llm_format => formatted_body(),
                    _ => body,
                };
                self.deliver(a, entry(b)).await
            }
            Dest::Group(env, ty) => {
                let members: Vec<Arc<Conn>> = self
                    .state()
                    .groups
                    .get(&group_key(env.as_ref(), *ty))
                    .cloned()
                    .unwrap_or_default();
                let mut full_ids = Vec::new();
                let mut plain: Option<Arc<Entry>> = None;
                for c in members.iter().filter(|c| c.serial != conn.serial) {
                    if !self.policy.allows(conn.opts.tier, c.opts.tier) {
                        continue;
                    }
                    let e = if c.opts.llm_format {
                        entry(formatted_body())
                    } else {
                        plain.get_or_insert_with(|| entry(body.clone())).clone()
                    };
                    if c.mailbox.push(e) == Err(PushError::Full) {
                        full_ids.push(c.address.id.to_string());
                    }
                }
                if full_ids.is_empty() {
                    Ok(())
                } else {
                    Err(HubError::unavailable(
                        format!(
                            "broadcast not delivered to {} recipient(s) whose inbox is full",
                            full_ids.len()
                        ),
                        "retry later; those recipients are not acknowledging",
                    )
                    .with_extra(serde_json::json!({ "undelivered": full_ids })))
                }
            }
        }
    }

    /// Request/response correlation by (requester, id).
    fn correlate(
        &self,
        conn: &Conn,
        m: &Inbound<'_>,
        id: &str,
        target: Option<&Arc<str>>,
    ) -> Result<(), HubError> {
        let now = now_ms();
        match m.kind {
            Some(Kind::Request) => {
                let ttl = m.ttl.unwrap_or(self.config.request_timeout_seconds);
                let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                if p.len() >= 100_000 {
                    p.retain(|_, v| v.expires_at > now);
                    if p.len() >= 100_000 {
                        return Err(HubError::unavailable(
                            "too many requests waiting for a response",
                            "retry later",
                        ));
                    }
                }
                p.insert(
                    (conn.address.key.clone(), id.to_string()),
                    Pending {
                        responder: target.cloned(),
                        expires_at: now + (ttl * 1000.0) as i64,
                    },
                );
                Ok(())
            }
            Some(Kind::Response | Kind::Error) => {
                let rid = m.request_id.as_deref().unwrap_or_default();
                let Some(requester) = target else {
                    return Err(HubError::validation(
                        "a response goes to one requester, not a broadcast",
                        "address the client that sent the request",
                    ));
                };
                let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let k = (requester.clone(), rid.to_string());
                match p.get(&k) {
                    Some(pend)
                        if pend.expires_at > now
                            && pend
                                .responder
                                .as_ref()
                                .is_none_or(|r| *r == conn.address.key) =>
                    {
                        p.remove(&k);
                        Ok(())
                    }
                    Some(pend) if pend.expires_at <= now => {
                        p.remove(&k);
                        Err(HubError::new(
                            ClawCode::E004,
                            format!(
                                "request {rid:?} of {requester} timed out before this response"
                            ),
                            "the requester has given up; send a notification instead if it still matters",
                        ))
                    }
                    _ => Err(HubError::validation(
                        format!(
                            "requestId {rid:?} matches no pending request from {requester} to you"
                        ),
                        "answer a request you received, once, with its id as requestId",
                    )),
                }
            }
            _ => Ok(()),
        }
    }

    /// Delivers to one address: its live connection, or its stored inbox.
    async fn deliver(&self, a: &Address, entry: Arc<Entry>) -> Result<(), HubError> {
        let target = self.state().online.get(&a.key).cloned();
        if let Some(t) = target {
            match t.mailbox.push(entry.clone()) {
                Ok(()) => return Ok(()),
                Err(PushError::Full) => return Err(full(a, self.config.inbox_depth)),
                Err(PushError::Closed) => {} // it is leaving: store below
            }
        }
        self.store_for(a, entry).await
    }

    /// Stores a message for an offline (or leaving) recipient.
    async fn store_for(&self, a: &Address, entry: Arc<Entry>) -> Result<(), HubError> {
        if !self.state().known.contains_key(&a.key) {
            return Err(not_found(a));
        }
        let lock = self.address_lock(&a.key);
        let _guard = lock.lock().await;
        // It may have connected while we waited for the lock.
        let target = self.state().online.get(&a.key).cloned();
        if let Some(t) = target {
            match t.mailbox.push(entry.clone()) {
                Ok(()) => return Ok(()),
                Err(PushError::Full) => return Err(full(a, self.config.inbox_depth)),
                Err(PushError::Closed) => {}
            }
        }
        let cached = self.state().stored.get(&a.key).copied();
        let count = match cached {
            Some(n) => n,
            None => {
                let k = a.key.to_string();
                let n = self
                    .store
                    .call(move |s| s.hub_inbox_count(&k))
                    .await
                    .map_err(store_failed)?;
                self.state().stored.insert(a.key.clone(), n);
                n
            }
        };
        if count >= self.config.inbox_depth {
            return Err(full(a, self.config.inbox_depth));
        }
        let row = row_of(&a.key, None, &entry);
        self.store
            .call(move |s| s.hub_inbox_append(&[row]))
            .await
            .map_err(store_failed)?;
        *self.state().stored.entry(a.key.clone()).or_insert(0) += 1;
        self.metrics.stored.fetch_add(1, Ordering::Relaxed);
        Ok(())
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

    /// Persists society changes and reports a storage failure as an error.
    async fn persist_society(
        &self,
        env: &str,
        changes: Vec<society::Change>,
    ) -> Result<(), HubError> {
        if changes.is_empty() {
            return Ok(());
        }
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
            .map_err(store_failed)
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

fn out_clone<'a>(o: &OutMessage<'a>) -> OutMessage<'a> {
    OutMessage {
        ty: o.ty,
        id: o.id,
        sender: OutPeer { ..o.sender },
        recipient: OutPeer { ..o.recipient },
        timestamp: o.timestamp,
        version: o.version,
        trace_id: o.trace_id,
        priority: o.priority,
        ttl: o.ttl,
        kind: o.kind,
        request_id: o.request_id,
        metadata: o.metadata,
        formatted: o.formatted,
        payload: o.payload,
    }
}

fn row_of(key: &str, seq: Option<u64>, e: &Entry) -> InboxRow {
    InboxRow {
        id: 0,
        address: key.to_string(),
        seq,
        priority: e.priority as i64,
        expires_at: e.expires_at,
        body: e.body.to_string(),
    }
}

fn full(a: &Address, depth: usize) -> HubError {
    HubError::unavailable(
        format!(
            "the inbox of {} {:?} is full ({depth} unacknowledged messages)",
            a.ty.as_str(),
            &*a.id
        ),
        "retry later; the recipient is not acknowledging",
    )
}

fn not_found(a: &Address) -> HubError {
    let mut e = HubError::unavailable(
        format!(
            "{} {:?} is unknown to this hub (it never connected and was not spawned)",
            a.ty.as_str(),
            &*a.id
        ),
        "check the id and environment; an agent must connect (or be spawned) once before it can receive",
    );
    if a.ty == PeerType::Agent {
        e = e.with_extra(serde_json::json!({"error": "agent_not_found", "agentId": &*a.id}));
    }
    e
}

fn store_failed(e: crate::store::StoreError) -> HubError {
    tracing::error!(error = %e, "hub: storage failed");
    HubError::new(
        ClawCode::E006,
        "the hub could not store the message",
        "retry later",
    )
}

/// How often the periodic heartbeat runs.
pub fn heartbeat_period(config: &HubConfig) -> std::time::Duration {
    secs(config.heartbeat_interval_seconds)
}

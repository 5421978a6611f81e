//! The visitor server as one node of several (`[cluster] nats_url`): sessions that resume on any
//! node, and revocations that reach every node at once, through NATS with JetStream (the official
//! `async-nats` client, as the hub's `hub::nats`). docs/protocol.md "Session resume", "Across
//! nodes" is the client-facing story; in short:
//!
//! - **Snapshots**: a resumable session's snapshot ([`snapshot::Snapshot`]: id, credential,
//!   resume-token hash, history, attributes, function list, owner node, expiry) is written to
//!   the KV bucket `<PREFIX>_SESSIONS` when it changes (registered, resumed, a reply finished,
//!   attributes changed, socket dropped), bounded to `snapshot_max_bytes`, and deleted when the
//!   session ends. Writes go through one writer task (the latest value of a key wins, up to
//!   [`WRITES_IN_FLIGHT`] keys at once; a write that fails while NATS is down is retried), so no
//!   session waits on NATS, with one exception: a new session's first snapshot is written
//!   before its REGISTER_ACK ([`Cluster::save_first`], bounded), so the resume token the client
//!   gets is one every node can find.
//! - **Release**: a node asked to resume a session it does not hold reads the snapshot, checks
//!   the token (constant time) and the credential, subscribes a fresh forward subject
//!   `<p>.fwd.<node>.<nonce>`, and asks the owner on `<p>.release.<owner>` (request/reply). The
//!   owner takes the session over exactly as a local resume does (a still-open socket is closed
//!   with 4001), answers with a fresh snapshot, then publishes on the forward subject, in order
//!   and numbered (`Fwd-Seq`), the replay-buffer frames the client has not seen (per
//!   `last_seen`) and the live frames of every reply still running; when they have all ended it
//!   publishes `done` with the turns they added to the history, and drops the session. The new
//!   node writes the frames to its client; a gap in the numbering or a silent owner ends the
//!   forwarded replies as interrupted.
//! - **Dead owner**: no answer within [`RELEASE_TIMEOUT`] (no responders, or a timeout): the
//!   session resumes from the snapshot alone; every reply the client listed in `last_seen` is
//!   reported interrupted (ERROR SERVER_BUSY, retryable), as the replay-overflow rule does.
//! - **Revocations**: a node whose user store reports revoked keys or disabled accounts
//!   publishes the new ones on `<p>.revoked`; every node shuts the matching live (and parked)
//!   sessions at once. The store's own notification and polling stay as the fallback.
//! - **Trust**: every node trusts what comes over NATS under the cluster's prefix (releases,
//!   revocations): NATS access is cluster membership (use `nats_credentials` or a token, and TLS
//!   in the URL across hosts). Snapshots and release requests carry token digests, never tokens.
//!   Credential ids are the shared user store's (`[database] url`): nodes of one cluster share it.
//! - **NATS down**: everything local goes on (same-node resume, registration); cross-node resume
//!   answers a retryable INTERNAL_ERROR, and `/readyz` says `"cluster": "degraded"` (degraded,
//!   not unready).

pub mod snapshot;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_nats::jetstream::kv;
use async_nats::jetstream::stream::{self, DiscardPolicy, StorageType};
use async_nats::{Client, HeaderMap};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;
use crate::config::{ClusterConfig, SessionConfig};
use crate::hub::nats::{self, within};
use crate::protocol::SeenUpTo;
use crate::retrieval::Retriever;
use snapshot::{Message, Snapshot};

/// How long a node waits for the owner to release a session; silence past it means the owner
/// is gone.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(4);
/// How long the node a session moved to waits for the owner to confirm a forwarded INTERRUPT
/// (the client has its INTERRUPT_ACK already; this bounds only the message to the owner).
pub const INTERRUPT_TIMEOUT: Duration = Duration::from_secs(2);
/// JetStream API calls (KV reads and writes).
/// How long a release waits for this node's snapshot write of the session under way to end.
const SETTLE_TIMEOUT: Duration = Duration::from_millis(500);
/// The handed-away sessions past their window are dropped once this many are remembered.
const HANDED_PRUNE_AT: usize = 4096;
const JS_TIMEOUT: Duration = Duration::from_secs(3);
/// Snapshot writes the writer has on the wire at once.
const WRITES_IN_FLIGHT: usize = 64;

/// Headers of the forward subject.
pub const H_SEQ: &str = "Fwd-Seq";
pub const H_KIND: &str = "Fwd-Kind";

/// A request to release a session, from the node its client came back on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReleaseRequest {
    pub session_id: String,
    /// SHA-256 of the resume token the client presented, hex (the token itself never crosses
    /// NATS).
    pub token_sha256: String,
    #[serde(default)]
    pub last_seen: std::collections::BTreeMap<String, SeenUpTo>,
    /// Where the owner publishes the frames the client has not seen.
    pub forward_to: String,
    /// The asking node: the owner remembers who holds the session now, so a client that comes
    /// back to it before the new owner's snapshot is written is sent on, not refused.
    #[serde(default)]
    pub taker: String,
}

/// The owner's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ReleaseAnswer {
    /// Taken over; forwarding starts on `forward_to`.
    Released { snapshot: Box<Snapshot> },
    /// Not held here any more (ended, resumed elsewhere, or the token is not its token).
    Gone,
}

/// What asking the owner came to.
pub enum Release {
    Released(Box<Snapshot>),
    Gone,
    /// No answer: the owner is dead or cut off.
    NoAnswer,
}

/// The end of a forward stream: the turns the forwarded replies added to the history.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Done {
    pub history: Vec<Message>,
}

/// A client's INTERRUPT of a reply the old owner still streams, sent to that owner by the node
/// its session moved to (on `<p>.interrupt.<owner>.<session>`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemoteInterrupt {
    pub request_id: String,
}

/// The owner's answer: whether the request was still running there (and is cancelled now).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InterruptAnswer {
    pub cancelled: bool,
}

/// Files `museum-agent ingest` loaded on one node: every serve node of the cluster loads them
/// into its own collection (on `<p>.ingest`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IngestNotice {
    pub files: Vec<IngestedFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IngestedFile {
    /// Absolute path.
    pub path: String,
    /// SHA-256 of the content ingested, hex.
    pub sha256: String,
}

/// Tells the serve nodes of the cluster `cfg` names to reload `paths` (called by the `ingest`
/// command after a successful ingest). Connects once, bounded by [`JS_TIMEOUT`]; Ok(false)
/// without `[cluster] nats_url`.
pub async fn announce_ingest(
    cfg: &ClusterConfig,
    paths: &[std::path::PathBuf],
) -> anyhow::Result<bool> {
    if cfg.nats_url.trim().is_empty() {
        return Ok(false);
    }
    let mut files = Vec::new();
    for p in paths {
        let abs = std::path::absolute(p)?;
        let bytes = tokio::fs::read(&abs).await?;
        files.push(IngestedFile {
            path: abs.display().to_string(),
            sha256: hex::encode(sha2::Sha256::digest(&bytes)),
        });
    }
    let body = serde_json::to_vec(&IngestNotice { files })?;
    let client = within(connect_once(cfg)).await?;
    within(client.publish(ingest_subject(&cfg.nats_prefix), body.into())).await?;
    within(client.flush()).await?;
    Ok(true)
}

fn ingest_subject(prefix: &str) -> String {
    format!("{prefix}.ingest")
}

/// Revoked credentials, by the shared store's ids.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Revoked {
    keys: Vec<i64>,
    accounts: Vec<i64>,
}

/// This node's link to the others.
pub struct Cluster {
    cfg: ClusterConfig,
    /// This node's id (subjects, snapshot owner).
    pub node: String,
    window_ms: i64,
    idle_ms: i64,
    client: OnceLock<Client>,
    kv: OnceLock<kv::Store>,
    /// Pending KV writes by key (None: delete); the writer task takes them.
    writes: Mutex<HashMap<String, Option<Bytes>>>,
    wake: Notify,
    /// Per session, the fingerprint of the last snapshot queued and when (unix ms).
    written: Mutex<HashMap<String, (u64, i64)>>,
    /// Sessions handed to another node: their end here must not delete the snapshot.
    released: Mutex<HashSet<String>>,
    /// Sessions handed to another node, to which and when (unix ms), kept for a resume window:
    /// the snapshot may still name this node for a moment, and no write of this node may land
    /// over the new owner's.
    handed: Mutex<HashMap<String, (String, i64)>>,
    /// The keys the snapshot writer is writing now (a release waits until the session's is not
    /// among them, so no older write of this node lands after the new owner's).
    writing: tokio::sync::watch::Sender<HashSet<String>>,
    /// Revocations published already (keys, accounts).
    published: Mutex<(HashSet<i64>, HashSet<i64>)>,
    next_forward: AtomicU64,
    /// Cancelled by [`Cluster::halt`]: this node stops answering the cluster.
    halted: CancellationToken,
    /// Per file path, the SHA-256 of the content this node last reloaded on a notice.
    reloaded: Mutex<HashMap<String, String>>,
    /// How many ingest notices this node has handled (tests and logs wait on it).
    reloads: tokio::sync::watch::Sender<u64>,
    /// Why the link is not up yet, when setting it up failed (shown by `/readyz`).
    problem: Mutex<Option<String>>,
}

impl Cluster {
    /// The cluster link `config` asks for (None: `[cluster] nats_url` is empty). Nothing
    /// connects until [`Cluster::start`].
    pub fn new(cfg: &ClusterConfig, session: &SessionConfig) -> Option<Arc<Cluster>> {
        if cfg.nats_url.trim().is_empty() {
            return None;
        }
        let node = if cfg.node_id.is_empty() {
            crate::util::random_id("node_")
        } else {
            cfg.node_id.clone()
        };
        Some(Arc::new(Cluster {
            cfg: cfg.clone(),
            node,
            window_ms: (session.resume_window_seconds * 1000) as i64,
            idle_ms: (session.timeout_seconds * 1000) as i64,
            client: OnceLock::new(),
            kv: OnceLock::new(),
            writes: Mutex::default(),
            wake: Notify::new(),
            written: Mutex::default(),
            released: Mutex::default(),
            handed: Mutex::default(),
            writing: tokio::sync::watch::Sender::new(HashSet::new()),
            published: Mutex::default(),
            next_forward: AtomicU64::new(1),
            halted: CancellationToken::new(),
            reloaded: Mutex::default(),
            reloads: tokio::sync::watch::Sender::new(0),
            problem: Mutex::default(),
        }))
    }

    fn bucket(&self) -> String {
        format!(
            "{}_SESSIONS",
            self.cfg.nats_prefix.to_ascii_uppercase().replace('-', "_")
        )
    }

    fn release_subject(&self, node: &str) -> String {
        format!(
            "{}.release.{}",
            self.cfg.nats_prefix,
            crate::hub::nats::token(node)
        )
    }

    fn interrupt_subject(&self, node: &str, session: &str) -> String {
        format!(
            "{}.interrupt.{}.{}",
            self.cfg.nats_prefix,
            crate::hub::nats::token(node),
            crate::hub::nats::token(session)
        )
    }

    /// Where this node, forwarding `session`'s replies to another node, hears the INTERRUPTs
    /// its client sends there (subscribed before the release is answered, so none is missed).
    pub async fn interrupts(&self, session: &str) -> anyhow::Result<async_nats::Subscriber> {
        let client = self.client()?;
        within(client.subscribe(self.interrupt_subject(&self.node, session))).await
    }

    /// Forwards an INTERRUPT of `request_id` to `owner`, which still streams it: Some(whether
    /// the owner cancelled it), None when the owner did not answer within
    /// [`INTERRUPT_TIMEOUT`].
    pub async fn interrupt(&self, owner: &str, session: &str, request_id: &str) -> Option<bool> {
        let client = self.client().ok()?;
        let body = serde_json::to_vec(&RemoteInterrupt {
            request_id: request_id.to_string(),
        })
        .ok()?;
        let ask = client.request(self.interrupt_subject(owner, session), body.into());
        match tokio::time::timeout(INTERRUPT_TIMEOUT, ask).await {
            Ok(Ok(m)) => serde_json::from_slice::<InterruptAnswer>(&m.payload)
                .ok()
                .map(|a| a.cancelled),
            _ => None,
        }
    }

    /// Answers a forwarded INTERRUPT (on the owner).
    pub async fn answer(&self, reply: async_nats::Subject, cancelled: bool) {
        let (Ok(client), Ok(body)) = (
            self.client(),
            serde_json::to_vec(&InterruptAnswer { cancelled }),
        ) else {
            return;
        };
        let _ = within(client.publish(reply, body.into())).await;
    }

    fn revoked_subject(&self) -> String {
        format!("{}.revoked", self.cfg.nats_prefix)
    }

    /// Connects (in the background: NATS may be down at start and come later), then serves
    /// release requests, revocations and ingest notices through `local` and writes snapshots,
    /// until `stop`.
    pub fn start(self: &Arc<Self>, local: Arc<dyn Local>, stop: CancellationToken) {
        let me = self.clone();
        tokio::spawn(async move {
            let client = match connect(&me.cfg, &me.node).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "cluster: cannot connect to NATS; cross-node resume is off");
                    me.set_problem(Some(format!("cannot connect to NATS: {e:#}")));
                    return;
                }
            };
            let _ = me.client.set(client.clone());
            tracing::info!(node = %me.node, url = %me.cfg.nats_url, "cluster: node started");
            let serve = |local: &Arc<dyn Local>| (local.clone(), stop.clone());
            tokio::spawn(me.clone().serve_releases(client.clone(), serve(&local)));
            tokio::spawn(me.clone().serve_revocations(client.clone(), serve(&local)));
            // Subscribed before the bucket is set up, so a node that says "ok" hears notices.
            match client.subscribe(ingest_subject(&me.cfg.nats_prefix)).await {
                Ok(sub) => {
                    tokio::spawn(me.clone().serve_ingests(sub, serve(&local)));
                }
                Err(e) => tracing::error!(error = %e, "cluster: cannot hear ingest notices"),
            }
            tokio::spawn(me.clone().write_loop(stop.clone()));
            // The bucket, retried until NATS has JetStream for us.
            loop {
                match me.setup(&client).await {
                    Ok(kv) => {
                        let _ = me.kv.set(kv);
                        me.set_problem(None);
                        me.wake.notify_one();
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cluster: session bucket not ready; retrying");
                        me.set_problem(Some(format!("session bucket not ready: {e:#}")));
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
    }

    async fn setup(&self, client: &Client) -> anyhow::Result<kv::Store> {
        let js = async_nats::jetstream::ContextBuilder::new()
            .timeout(JS_TIMEOUT)
            .build(client.clone());
        let name = self.bucket();
        // An entry outlives its last write by the idle timeout plus the window at most (each
        // entry also carries its own expiry, checked on read).
        let max_age = Duration::from_millis((self.idle_ms + self.window_ms).max(1000) as u64);
        // Created as a stream directly, as the hub's buckets are (nats-server 2.9).
        within(js.create_or_update_stream(stream::Config {
            name: format!("KV_{name}"),
            subjects: vec![format!("$KV.{name}.>")],
            max_messages_per_subject: 1,
            max_age,
            max_message_size: (self.cfg.snapshot_max_bytes + 1024) as i32,
            duplicate_window: max_age.min(Duration::from_secs(120)),
            storage: StorageType::File,
            num_replicas: 1,
            allow_rollup: true,
            deny_delete: false,
            allow_direct: true,
            discard: DiscardPolicy::New,
            ..Default::default()
        }))
        .await?;
        within(js.get_key_value(name)).await
    }

    /// "ok" when connected with the bucket ready, else "degraded".
    pub fn state(&self) -> &'static str {
        if self.healthy() { "ok" } else { "degraded" }
    }

    /// Why the link is degraded, for a technician (None when it is up).
    pub fn detail(&self) -> Option<String> {
        if self.healthy() {
            return None;
        }
        if self.halted.is_cancelled() {
            return Some("halted: this node has left the cluster".into());
        }
        if let Some(p) = self
            .problem
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Some(p);
        }
        Some(
            match self.client.get().map(|c| c.connection_state()) {
                Some(async_nats::connection::State::Connected) => "setting up the session bucket",
                Some(_) => "not connected to NATS (reconnecting)",
                None => "connecting to NATS",
            }
            .into(),
        )
    }

    fn set_problem(&self, p: Option<String>) {
        *self.problem.lock().unwrap_or_else(|p| p.into_inner()) = p;
    }

    pub fn healthy(&self) -> bool {
        !self.halted.is_cancelled()
            && self.kv.get().is_some()
            && self
                .client
                .get()
                .is_some_and(|c| c.connection_state() == async_nats::connection::State::Connected)
    }

    /// Stops answering the cluster, as a dead node would (no more releases, revocations or
    /// snapshot writes from this node). Used when the process must leave the cluster at once;
    /// the tests use it to play a node that died.
    pub fn halt(&self) {
        self.halted.cancel();
    }

    /// Queues a session's snapshot (skipped when nothing changed since the last one, unless
    /// that is old enough to need refreshing).
    pub fn save(&self, s: Snapshot, parked: bool) {
        if let Some((id, bytes)) = self.prepare(s, parked) {
            self.queue(id, Some(bytes));
        }
    }

    /// Writes a new session's first snapshot now, bypassing the queue, and returns when it is
    /// stored or after [`SETTLE_TIMEOUT`] (then it is queued as any other write). The caller
    /// holds the session's REGISTER_ACK until then, so no client can ask another node for a
    /// session whose snapshot the writer has not reached yet.
    pub async fn save_first(&self, s: Snapshot) {
        let Some((id, bytes)) = self.prepare(s, false) else {
            return;
        };
        if let (Some(kv), false) = (self.kv.get(), self.halted.is_cancelled()) {
            let put = within(kv.put(&id, bytes.clone()));
            if let Ok(Ok(_)) = tokio::time::timeout(SETTLE_TIMEOUT, put).await {
                return;
            }
        }
        self.queue(id, Some(bytes));
    }

    /// The snapshot's key and bytes, stamped with this node and its expiry; None when it is
    /// unchanged since the last one queued (and that one is recent) or too large.
    fn prepare(&self, mut s: Snapshot, parked: bool) -> Option<(String, Bytes)> {
        let now = crate::util::now_ms();
        s.owner = self.node.clone();
        s.expires_ms = 0;
        let plain = serde_json::to_vec(&s).ok()?;
        let fp = fingerprint(&plain) ^ u64::from(parked);
        {
            let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((old, at)) = w.get(&s.session_id)
                && *old == fp
                && now - at < self.idle_ms / 2
            {
                return None;
            }
            w.insert(s.session_id.clone(), (fp, now));
        }
        s.expires_ms = now
            + if parked {
                self.window_ms
            } else {
                self.idle_ms + self.window_ms
            };
        let id = s.session_id.clone();
        match s.encode(self.cfg.snapshot_max_bytes) {
            Some(bytes) => Some((id, bytes.into())),
            None => {
                tracing::warn!(session = %id, "cluster: snapshot too large even without history; not written");
                None
            }
        }
    }

    /// The session ended here: its snapshot goes (unless another node holds it now).
    pub fn forget(&self, id: &str) {
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if self
            .released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            return;
        }
        self.queue(id.to_string(), None);
    }

    /// The session was handed to `taker`: no write of this node may replace its snapshot (one
    /// under way is waited for, at most [`SETTLE_TIMEOUT`]), and a client that comes back here
    /// is sent on to `taker` ([`Cluster::handed_to`]).
    pub async fn released(&self, id: &str, taker: &str) {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        self.released
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string());
        let now = crate::util::now_ms();
        {
            let mut handed = self.handed.lock().unwrap_or_else(|p| p.into_inner());
            if handed.len() >= HANDED_PRUNE_AT {
                let window = self.window_ms.max(self.idle_ms);
                handed.retain(|_, (_, at)| now - *at < window);
            }
            handed.insert(id.to_string(), (taker.to_string(), now));
        }
        let mut writing = self.writing.subscribe();
        let _ = tokio::time::timeout(SETTLE_TIMEOUT, writing.wait_for(|w| !w.contains(id))).await;
    }

    /// The node this one handed `id` to within the resume window, if it did.
    pub fn handed_to(&self, id: &str) -> Option<String> {
        let handed = self.handed.lock().unwrap_or_else(|p| p.into_inner());
        let (taker, at) = handed.get(id)?;
        (crate::util::now_ms() - at < self.window_ms.max(self.idle_ms) && !taker.is_empty())
            .then(|| taker.clone())
    }

    /// This node holds `id` (again): its writes of the snapshot count from now on.
    pub fn held(&self, id: &str) {
        self.handed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    fn queue(&self, key: String, value: Option<Bytes>) {
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, value);
        self.wake.notify_one();
    }

    /// Writes one key; true when it failed (it is queued again unless a newer value came).
    async fn write_one(&self, kv: &kv::Store, key: String, value: Option<Bytes>) -> bool {
        // Handed to another node since it was queued: its snapshot is not ours to write.
        if value.is_some()
            && self
                .handed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&key)
        {
            return false;
        }
        self.writing.send_modify(|w| {
            w.insert(key.clone());
        });
        let done = match &value {
            Some(v) => within(kv.put(&key, v.clone())).await.map(|_| ()),
            None => within(kv.delete(&key)).await,
        };
        self.writing.send_modify(|w| {
            w.remove(&key);
        });
        match done {
            Ok(()) => false,
            Err(e) => {
                tracing::debug!(session = %key, error = %e, "cluster: snapshot write failed; will retry");
                self.writes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(key)
                    .or_insert(value);
                true
            }
        }
    }

    async fn write_loop(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.halted.cancelled() => return,
                _ = self.wake.notified() => {}
            }
            let Some(kv) = self.kv.get() else { continue };
            let batch: Vec<(String, Option<Bytes>)> = self
                .writes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .drain()
                .collect();
            // One write per key per batch, so writes of one key never overtake each other;
            // the keys of a batch go out together (a round trip each, in parallel), or a
            // thousand sessions' changes would wait on one another's round trips.
            let me: &Cluster = &self;
            let failed = futures_util::stream::iter(batch)
                .map(|(key, value)| async move { me.write_one(kv, key, value).await })
                .buffer_unordered(WRITES_IN_FLIGHT)
                .fold(false, |any, failed| async move { any | failed })
                .await;
            if failed {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
                self.wake.notify_one();
            }
        }
    }

    /// A session's snapshot. `Err`: NATS cannot be asked now.
    pub async fn lookup(&self, id: &str) -> anyhow::Result<Option<Snapshot>> {
        if self.halted.is_cancelled() {
            anyhow::bail!("this node left the cluster");
        }
        let kv = self
            .kv
            .get()
            .ok_or_else(|| anyhow::anyhow!("the cluster's session bucket is not ready"))?;
        let Some(bytes) = within(kv.get(id)).await? else {
            return Ok(None);
        };
        let s: Snapshot = match serde_json::from_slice(&bytes) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "cluster: unreadable snapshot");
                return Ok(None);
            }
        };
        Ok((s.session_id == id && s.expires_ms > crate::util::now_ms()).then_some(s))
    }

    /// A fresh subject for an owner to forward a session's frames on, subscribed already.
    pub async fn forward_inbox(&self) -> anyhow::Result<(String, async_nats::Subscriber)> {
        let client = self.client()?;
        let subject = format!(
            "{}.fwd.{}.{}",
            self.cfg.nats_prefix,
            crate::hub::nats::token(&self.node),
            self.next_forward.fetch_add(1, Ordering::Relaxed)
        );
        let sub = within(client.subscribe(subject.clone())).await?;
        Ok((subject, sub))
    }

    fn client(&self) -> anyhow::Result<&Client> {
        if self.halted.is_cancelled() {
            anyhow::bail!("this node left the cluster");
        }
        self.client
            .get()
            .ok_or_else(|| anyhow::anyhow!("not connected to NATS"))
    }

    /// Asks `owner` to release a session.
    pub async fn release(&self, owner: &str, req: &ReleaseRequest) -> Release {
        let Ok(client) = self.client() else {
            return Release::NoAnswer;
        };
        let Ok(body) = serde_json::to_vec(req) else {
            return Release::NoAnswer;
        };
        let ask = client.request(self.release_subject(owner), body.into());
        match tokio::time::timeout(RELEASE_TIMEOUT, ask).await {
            Ok(Ok(m)) => match serde_json::from_slice::<ReleaseAnswer>(&m.payload) {
                Ok(ReleaseAnswer::Released { snapshot }) => Release::Released(snapshot),
                Ok(ReleaseAnswer::Gone) => Release::Gone,
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: unreadable release answer");
                    Release::NoAnswer
                }
            },
            Ok(Err(e)) => {
                tracing::info!(%owner, error = %e, "cluster: the owner did not release the session");
                Release::NoAnswer
            }
            Err(_) => Release::NoAnswer,
        }
    }

    /// Publishes one forwarded frame (`kind` "frame") or the end ("done").
    pub async fn forward(&self, to: &str, seq: u64, kind: &str, body: Bytes) -> bool {
        let Ok(client) = self.client() else {
            return false;
        };
        let mut h = HeaderMap::new();
        h.insert(H_SEQ, seq.to_string().as_str());
        h.insert(H_KIND, kind);
        within(client.publish_with_headers(to.to_string(), h, body))
            .await
            .is_ok()
    }

    /// Flushes what was published (the end of a forward).
    pub async fn flush(&self) {
        if let Ok(c) = self.client() {
            let _ = within(c.flush()).await;
        }
    }

    async fn serve_releases(self: Arc<Self>, client: Client, (local, stop): Serving) {
        let subject = self.release_subject(&self.node);
        let mut sub = match client.subscribe(subject.clone()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, %subject, "cluster: cannot serve releases");
                return;
            }
        };
        loop {
            let m = tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.halted.cancelled() => { let _ = sub.unsubscribe().await; return }
                m = sub.next() => match m { Some(m) => m, None => return },
            };
            let Some(reply) = m.reply.clone() else {
                continue;
            };
            let (local, me, client) = (local.clone(), self.clone(), client.clone());
            tokio::spawn(async move {
                let answer = match serde_json::from_slice::<ReleaseRequest>(&m.payload) {
                    Ok(req) => local.release(me, req).await,
                    Err(_) => ReleaseAnswer::Gone,
                };
                if let Ok(body) = serde_json::to_vec(&answer) {
                    let _ = within(client.publish(reply, body.into())).await;
                }
            });
        }
    }

    /// Publishes the revoked credentials not published yet (called by the revocation watch).
    pub fn revoked(&self, keys: &[i64], accounts: &[i64]) {
        let msg = {
            let mut p = self.published.lock().unwrap_or_else(|p| p.into_inner());
            let msg = Revoked {
                keys: keys.iter().filter(|k| !p.0.contains(k)).copied().collect(),
                accounts: accounts
                    .iter()
                    .filter(|a| !p.1.contains(a))
                    .copied()
                    .collect(),
            };
            if msg.keys.is_empty() && msg.accounts.is_empty() {
                return;
            }
            p.0.extend(&msg.keys);
            p.1.extend(&msg.accounts);
            msg
        };
        let Ok(client) = self.client().cloned() else {
            // Not published: the next check tries again.
            let mut p = self.published.lock().unwrap_or_else(|p| p.into_inner());
            msg.keys.iter().for_each(|k| {
                p.0.remove(k);
            });
            msg.accounts.iter().for_each(|a| {
                p.1.remove(a);
            });
            return;
        };
        let subject = self.revoked_subject();
        tokio::spawn(async move {
            if let Ok(body) = serde_json::to_vec(&msg) {
                let _ = within(client.publish(subject, body.into())).await;
            }
        });
    }

    /// How many ingest notices this node has handled so far (each one fully: files reloaded
    /// or skipped, caches refreshed).
    pub fn reloads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    async fn serve_ingests(
        self: Arc<Self>,
        mut sub: async_nats::Subscriber,
        (local, stop): Serving,
    ) {
        loop {
            let m = tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.halted.cancelled() => return,
                m = sub.next() => match m { Some(m) => m, None => return },
            };
            match serde_json::from_slice::<IngestNotice>(&m.payload) {
                Ok(n) => self.reload(local.retriever(), n).await,
                Err(e) => tracing::warn!(error = %e, "cluster: unreadable ingest notice"),
            }
            self.reloads.send_modify(|n| *n += 1);
        }
    }

    /// Loads the files of a notice into this node's own collection: a file this node cannot
    /// read is skipped (warned), one whose content it reloaded already is left alone (and the
    /// ingest itself leaves unchanged records as they are).
    async fn reload(&self, retriever: Option<Arc<dyn Retriever>>, notice: IngestNotice) {
        let Some(retriever) = retriever else {
            tracing::info!("cluster: ingest notice ignored: this node has no collection");
            return;
        };
        for f in notice.files {
            let sha = match tokio::fs::read(&f.path).await {
                Ok(b) => hex::encode(sha2::Sha256::digest(&b)),
                Err(e) => {
                    tracing::warn!(path = %f.path, error = %e, "cluster: ingest notice names a file this node cannot read; skipped");
                    continue;
                }
            };
            if sha != f.sha256 {
                tracing::warn!(path = %f.path, "cluster: this node's copy of the file differs from the one ingested on the other node; loading this node's copy");
            }
            let done = self
                .reloaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&f.path)
                .is_some_and(|s| *s == sha);
            if done {
                tracing::info!(path = %f.path, "cluster: ingest notice: this content was loaded here already; nothing to do");
                continue;
            }
            // The running retriever itself: its name dictionary follows the new records and
            // its semantic worker is kicked for their vectors; records are read from the store
            // per request (`/api/exhibits` keeps no card cache; ETags follow the content).
            let Some(load) = retriever.reload_file(std::path::Path::new(&f.path)) else {
                tracing::info!("cluster: ingest notice ignored: this node's collection is remote");
                return;
            };
            match load.await {
                Ok(r) => {
                    tracing::info!(path = %f.path, rows = r.rows, inserted = r.inserted, updated = r.updated, unchanged = r.unchanged, rejected = r.rejected.len(), seconds = r.seconds, "cluster: reloaded a file ingested on another node");
                    self.reloaded
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(f.path, sha);
                }
                Err(e) => {
                    tracing::warn!(path = %f.path, error = %e, "cluster: reloading a file ingested on another node failed")
                }
            }
        }
    }

    async fn serve_revocations(self: Arc<Self>, client: Client, (local, stop): Serving) {
        let mut sub = match client.subscribe(self.revoked_subject()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cluster: cannot hear revocations");
                return;
            }
        };
        loop {
            let m = tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.halted.cancelled() => return,
                m = sub.next() => match m { Some(m) => m, None => return },
            };
            let Ok(r) = serde_json::from_slice::<Revoked>(&m.payload) else {
                continue;
            };
            let n = local.revoke(&|p| match p {
                Principal::ApiKey { id, .. } => r.keys.contains(id),
                Principal::Account { id, .. } => r.accounts.contains(id),
            });
            if n > 0 {
                tracing::info!(
                    sessions = n,
                    "cluster: closed sessions whose credential was revoked on another node"
                );
            }
        }
    }
}

/// What this node does when the others ask, supplied by the layers above at [`Cluster::start`]:
/// the cluster moves snapshots and frames and knows neither sessions nor the server's state.
pub trait Local: Send + Sync + 'static {
    /// Hands a session held here over to `req.forward_to` (the session's resume does it).
    fn release(&self, cluster: Arc<Cluster>, req: ReleaseRequest) -> ReleaseFuture;
    /// Closes every live session whose credential matches; how many were closed.
    fn revoke(&self, matches: &dyn Fn(&Principal) -> bool) -> usize;
    /// The running retriever, for ingest notices (None: no collection on this node).
    fn retriever(&self) -> Option<Arc<dyn Retriever>>;
}

/// The answer to a release request, sent when the session is handed over or refused.
pub type ReleaseFuture = std::pin::Pin<Box<dyn Future<Output = ReleaseAnswer> + Send>>;

/// What every serving loop gets: the node's own side and the server's stop.
type Serving = (Arc<dyn Local>, CancellationToken);

fn fingerprint(b: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

/// Connects once (the `ingest` command: NATS down is an error to report, not to wait out).
async fn connect_once(cfg: &ClusterConfig) -> anyhow::Result<Client> {
    let opts = nats::credentials(&cfg.nats_credentials, &cfg.nats_token_env, "cluster").await?;
    Ok(opts
        .name("museum-agent ingest")
        .connection_timeout(JS_TIMEOUT)
        .connect(&cfg.nats_url)
        .await?)
}

/// Connects (retrying in the background while NATS is down).
async fn connect(cfg: &ClusterConfig, node: &str) -> anyhow::Result<Client> {
    let opts = nats::credentials(&cfg.nats_credentials, &cfg.nats_token_env, "cluster").await?;
    Ok(nats::reconnecting(opts)
        .name(format!("museum-agent cluster {node}"))
        .request_timeout(Some(RELEASE_TIMEOUT))
        .connect(&cfg.nats_url)
        .await?)
}

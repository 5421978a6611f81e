//! The hub across processes (`[hub] backend = "nats"`): several server processes share one hub
//! through NATS with JetStream, via the official `async-nats` client. src/hub/README.md, "Hub across
//! processes" has the whole design; in short:
//!
//! - **Interest-based routing**: a process subscribes only to the subjects of its own connected
//!   clients, `<p>.u.<type>.<env>.<id>`, and to one broadcast subject `<p>.b.<type>.<env>` per
//!   (type, environment) it has clients of. A unicast is a NATS request: the process holding the
//!   client answers `ok`, `full` or `closed`; "no responders" means no process holds it.
//! - **Durable inboxes**: JetStream stream `<P>_INBOX` (subjects `<p>.inbox.>`, file storage,
//!   `max_age` = the largest ttl, `Nats-Msg-Id` dedup), one durable pull consumer per recipient
//!   with explicit acks (ack = processed). A message's own ttl travels in a header and is
//!   enforced at delivery (nats-server 2.9 has no per-message TTL).
//! - **Streams and presence**: KV bucket `<P>_STREAMS` holds each recipient's sequence counters
//!   (and marks the address known); KV bucket `<P>_PRESENCE` (bucket TTL) says which process
//!   serves which client, refreshed every third of the TTL.
//! - **Pending requests**: KV bucket `<P>_PENDING` holds each request that left its process
//!   ([`SharedPending`]) until a response takes it with compare-and-set ([`Nats::take_pending`]).
//! - **Outages**: while NATS is unreachable the hub serves local clients, reports DEGRADED,
//!   refuses new connections (their inbox is not reachable), and holds messages for other
//!   processes in a bounded buffer that is replayed when NATS is back, in order with the
//!   records the pending bucket missed (requests registered before they are sent).
//!
//! Subject tokens: an id made of ASCII letters, digits, `_` and `-` that starts with a letter or
//! digit is used as is; any other id becomes `_` + the hex of its UTF-8 (ids may hold `.`, `:`,
//! `@` and any script, which are not subject-safe).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::jetstream::kv;
use async_nats::jetstream::message::AckKind;
use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy, StorageType};
use async_nats::{Client, ConnectOptions, HeaderMap};
use bytes::Bytes;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::Address;
use super::envelope::{PeerType, Priority};
use super::mailbox::Entry;
use super::society::{AgentRecord, Change, ContactEntry};
use crate::config::{HubConfig, secs};

pub const H_PRIORITY: &str = "Hub-Priority";
pub const H_EXPIRES: &str = "Hub-Expires-At";
pub const H_SEQ: &str = "Hub-Seq";
pub const H_ROLE: &str = "Hub-Sender-Role";
pub const H_ORIGIN: &str = "Hub-Origin";
/// The hub's id of one routed message, the same on every retry of it (see [`Meta`]).
pub const H_DELIVERY: &str = "Hub-Delivery";
pub const H_RETRY: &str = "Hub-Retry";
/// Correlation of a request or response crossing processes (see [`Corr`]).
pub const H_CORR: &str = "Hub-Corr";
pub const H_SENDER: &str = "Hub-Sender";
pub const H_REQUEST_ID: &str = "Hub-Request-Id";
pub const H_UNTIL: &str = "Hub-Pending-Until";
/// A request registered in the shared pending bucket (see [`Corr::Request`]).
pub const H_SHARED: &str = "Hub-Pending-Shared";

/// The most the shared registry of pending requests may hold on the NATS server (entries are
/// ~200 bytes: about 300,000 requests in flight across processes).
pub const PENDING_MAX_BYTES: i64 = 64 * 1024 * 1024;
/// How long a cross-process request waits for the holder's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// JetStream API calls and publish acknowledgements.
const JS_TIMEOUT: Duration = Duration::from_secs(3);

/// Bounds a NATS call: a full client buffer (NATS down) would otherwise block it.
pub async fn within<T, E: Into<anyhow::Error>>(
    f: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T> {
    tokio::time::timeout(JS_TIMEOUT, f)
        .await
        .map_err(|_| anyhow::anyhow!("NATS did not answer within {JS_TIMEOUT:?}"))?
        .map_err(Into::into)
}

/// A subject-safe token for an id.
pub fn token(id: &str) -> String {
    let plain = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        id.to_string()
    } else {
        format!("_{}", hex::encode(id.as_bytes()))
    }
}

/// The society bucket's key of a change: `a.<env>.<agent>` for a record,
/// `c.<env>.<owner>.<contact>` for a registry entry (in tokens).
pub fn society_key(env: &str, change: &Change) -> String {
    match change {
        Change::Agent(a) => format!("a.{}.{}", token(env), token(&a.id)),
        Change::Contact { owner, entry } => {
            format!("c.{}.{}.{}", token(env), token(owner), token(&entry.id))
        }
    }
}

/// The inverse of [`society_key`] with the stored value: `(env, change)`; `None` for a key or
/// value this version does not read.
pub fn society_change(key: &str, value: &[u8]) -> Option<(String, Change)> {
    let mut parts = key.split('.');
    let kind = parts.next()?;
    let env = untoken(parts.next()?)?;
    let change = match (kind, parts.next(), parts.next(), parts.next()) {
        ("a", Some(_), None, None) => Change::Agent(serde_json::from_slice(value).ok()?),
        ("c", Some(owner), Some(_), None) => Change::Contact {
            owner: untoken(owner)?,
            entry: serde_json::from_slice(value).ok()?,
        },
        _ => return None,
    };
    Some((env, change))
}

/// The node id as a subject token.
fn token_of_node(node: &str) -> String {
    token(node)
}

/// The inverse of [`token`].
pub fn untoken(t: &str) -> Option<String> {
    match t.strip_prefix('_') {
        Some(h) => String::from_utf8(hex::decode(h).ok()?).ok(),
        None => Some(t.to_string()),
    }
}

/// `agent.<env>.<id>`, `environment.<env>` or `human.<id>` in tokens.
pub fn addr_tokens(a: &Address) -> String {
    match a.ty {
        PeerType::Agent => format!(
            "agent.{}.{}",
            token(a.env.as_deref().unwrap_or("")),
            token(&a.id)
        ),
        PeerType::Environment => format!("environment.{}", token(&a.id)),
        _ => format!("human.{}", token(&a.id)),
    }
}

/// A recipient's stream counters as kept in the streams bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StreamState {
    pub next_seq: u64,
    pub acked: u64,
    #[serde(default)]
    pub tier: Option<u8>,
}

/// What the process holding a client answered to a cross-process delivery.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Remote {
    /// Delivered (or delivered already: a retry the holder recognised).
    Delivered,
    Full,
    /// No process holds the client (or it was leaving): use its durable inbox.
    NotHere,
    /// NATS is unreachable or did not answer in time.
    Unavailable,
    /// A response whose request timed out at the requester's process.
    Expired,
    /// A response that matches no pending request at the requester's process.
    Uncorrelated,
}

impl Remote {
    /// The holder's answer, as written on the wire.
    pub fn answer(self) -> &'static [u8] {
        match self {
            Remote::Delivered => b"ok",
            Remote::Full => b"full",
            Remote::NotHere | Remote::Unavailable => b"closed",
            Remote::Expired => b"expired",
            Remote::Uncorrelated => b"uncorrelated",
        }
    }

    fn of_answer(a: &[u8]) -> Remote {
        match a {
            b"ok" => Remote::Delivered,
            b"full" => Remote::Full,
            b"expired" => Remote::Expired,
            b"uncorrelated" => Remote::Uncorrelated,
            _ => Remote::NotHere,
        }
    }
}

/// The last subject token of a batch of answers (reply tokens are numbers).
const BATCH: &str = "batch";

/// One answer in a batch: the reply token (8 bytes, big-endian) and the answer's code.
fn encode_answer(buf: &mut Vec<u8>, token: u64, r: Remote) {
    buf.extend_from_slice(&token.to_be_bytes());
    buf.push(match r {
        Remote::Delivered => 0,
        Remote::Full => 1,
        Remote::NotHere | Remote::Unavailable => 2,
        Remote::Expired => 3,
        Remote::Uncorrelated => 4,
    });
}

/// The answers of a batch (a truncated tail is ignored: its deliveries time out and retry).
fn decode_answers(b: &[u8]) -> impl Iterator<Item = (u64, Remote)> + '_ {
    b.chunks_exact(9).map(|c| {
        let mut t = [0u8; 8];
        t.copy_from_slice(&c[..8]);
        let r = match c[8] {
            0 => Remote::Delivered,
            1 => Remote::Full,
            3 => Remote::Expired,
            4 => Remote::Uncorrelated,
            _ => Remote::NotHere,
        };
        (u64::from_be_bytes(t), r)
    })
}

/// Request/response correlation carried with a cross-process unicast, so a response is
/// checked like a local one wherever requester and responder are.
#[derive(Debug, Clone, PartialEq)]
pub enum Corr {
    /// A request of `requester`: the process holding the responder registers it as pending
    /// (until `until_ms`), so the response is checked where it is sent.
    /// `shared`: it is also in the shared pending bucket, where its response is taken.
    Request {
        requester: Arc<str>,
        id: String,
        until_ms: i64,
        shared: bool,
    },
    /// A response the sending process matched with its pending entry (and took it): the
    /// requester's process drops its own entry for the request.
    Checked {
        responder: Arc<str>,
        request_id: String,
    },
    /// A response the sending process has no entry for: the requester's process checks it
    /// against the entry it registered when the request was sent.
    Check {
        responder: Arc<str>,
        request_id: String,
    },
}

/// The shared pending bucket's key of request `id` of `requester`: `r.` and the hex SHA-256 of
/// both (bounded and subject-safe whatever the ids; the value names them).
pub fn pending_key(requester: &str, id: &str) -> String {
    let mut h = Sha256::new();
    h.update(requester.as_bytes());
    // Never in UTF-8: where the requester ends is unambiguous.
    h.update([0xff]);
    h.update(id.as_bytes());
    format!("r.{}", hex::encode(h.finalize()))
}

/// A request waiting for its response, as the shared pending bucket holds it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SharedPending {
    pub requester: String,
    pub id: String,
    /// Who may answer (None: a broadcast request, anyone of the group).
    pub responder: Option<String>,
    /// The request's deadline (ms since the epoch).
    pub until: i64,
    /// A response was accepted (the entry was taken).
    #[serde(default)]
    pub taken: bool,
}

/// What the shared pending bucket said about a response.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum SharedTake {
    /// Taken by this response, at revision `rev` (given back with it if the response is not
    /// delivered); `until` is the request's deadline.
    Taken { rev: u64, until: i64 },
    /// Answered already (a second response).
    Answered,
    /// The request timed out (E004).
    Expired,
    /// Addressed to another client.
    NotYours,
    /// Not in the bucket: not registered (yet: it left its process while the registry could
    /// not be reached, and is owed to it), or aged out.
    Absent,
    /// NATS did not answer (in time).
    Unavailable,
}

impl SharedPending {
    /// Whether `responder` may answer it now: the local rule (`route::take_pending`), with
    /// "answered already" first (locally an answered request is gone).
    pub fn judge(&self, responder: &str, now: i64) -> Result<(), SharedTake> {
        if self.taken {
            Err(SharedTake::Answered)
        } else if self.until <= now {
            Err(SharedTake::Expired)
        } else if self.responder.as_deref().is_some_and(|r| r != responder) {
            Err(SharedTake::NotYours)
        } else {
            Ok(())
        }
    }
}

/// An attach's place in the tie-break between two connections of one identity: the later
/// attach wins; at the same millisecond, the greater process id. Both processes compare the
/// same two stamps, so they agree on the winner without asking each other again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    pub ms: i64,
    pub node: String,
}

/// A kick: the address another process is attaching, and that attach's stamp.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Kick {
    pub key: String,
    pub stamp: Stamp,
}

/// What an attach learned from the presence bucket and the holder it kicked.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// This attach holds the identity now.
    Won,
    /// A newer attach of the same identity (on another process) keeps it: this one is replaced.
    Lost,
}

/// What travels with a cross-process unicast besides the entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    /// The hub's id of the routed message, fixed when it is first sent and kept by every retry.
    pub delivery: u64,
    /// A retry (after a timeout or an outage): the holder does not deliver it twice.
    pub retry: bool,
    pub corr: Option<Corr>,
}

impl Meta {
    fn write(&self, h: &mut HeaderMap) {
        h.insert(H_DELIVERY, self.delivery.to_string().as_str());
        if self.retry {
            h.insert(H_RETRY, "1");
        }
        match &self.corr {
            None => {}
            Some(Corr::Request {
                requester,
                id,
                until_ms,
                shared,
            }) => {
                h.insert(H_CORR, "request");
                h.insert(H_SENDER, &**requester);
                h.insert(H_REQUEST_ID, id.as_str());
                h.insert(H_UNTIL, until_ms.to_string().as_str());
                if *shared {
                    h.insert(H_SHARED, "1");
                }
            }
            Some(Corr::Checked {
                responder,
                request_id,
            }) => {
                h.insert(H_CORR, "checked");
                h.insert(H_SENDER, &**responder);
                h.insert(H_REQUEST_ID, request_id.as_str());
            }
            Some(Corr::Check {
                responder,
                request_id,
            }) => {
                h.insert(H_CORR, "check");
                h.insert(H_SENDER, &**responder);
                h.insert(H_REQUEST_ID, request_id.as_str());
            }
        }
    }

    /// Reads the meta of a received unicast (absent members: defaults).
    pub fn read(h: Option<&HeaderMap>) -> Meta {
        let get = |k: &'static str| hget(h, k);
        let sender = || get(H_SENDER).map(Arc::<str>::from);
        let rid = || get(H_REQUEST_ID).map(str::to_owned);
        let corr = match get(H_CORR) {
            Some("request") => match (sender(), rid()) {
                (Some(requester), Some(id)) => Some(Corr::Request {
                    requester,
                    id,
                    until_ms: get(H_UNTIL).and_then(|u| u.parse().ok()).unwrap_or(0),
                    shared: get(H_SHARED) == Some("1"),
                }),
                _ => None,
            },
            Some(mode @ ("checked" | "check")) => match (sender(), rid()) {
                (Some(responder), Some(request_id)) if mode == "checked" => Some(Corr::Checked {
                    responder,
                    request_id,
                }),
                (Some(responder), Some(request_id)) => Some(Corr::Check {
                    responder,
                    request_id,
                }),
                _ => None,
            },
            _ => None,
        };
        Meta {
            delivery: get(H_DELIVERY).and_then(|d| d.parse().ok()).unwrap_or(0),
            retry: get(H_RETRY) == Some("1"),
            corr,
        }
    }
}

/// A header's value. The name is built without the checks and the allocation that looking up
/// by `&str` costs (several lookups per message received from another process).
fn hget<'a>(h: Option<&'a HeaderMap>, k: &'static str) -> Option<&'a str> {
    h?.get(async_nats::header::HeaderName::from_static(k))
        .map(|v| v.as_str())
}

#[derive(Default)]
pub struct NatsMetrics {
    /// Unicast and broadcast messages this process received from other processes.
    pub received: AtomicU64,
    /// Messages this process sent to other processes or to inboxes.
    pub published: AtomicU64,
    /// Messages held while NATS was unreachable and replayed after.
    pub replayed: AtomicU64,
    /// Held messages that could not be delivered after the outage (unknown or full inbox).
    pub dropped: AtomicU64,
}

pub struct Nats {
    pub client: Client,
    js: async_nats::jetstream::Context,
    inbox: stream::Stream,
    presence: kv::Store,
    streams: kv::Store,
    /// The agent societies' records and registries, shared by every process.
    society: kv::Store,
    /// Requests that left their process, until answered or expired ([`SharedPending`]).
    pending: kv::Store,
    prefix: String,
    /// This process's id (presence values, kick messages).
    pub node: String,
    depth: usize,
    ack_wait: Duration,
    pub metrics: NatsMetrics,
    /// Answers awaited from the processes holding recipients, by reply token.
    replies: std::sync::Mutex<std::collections::HashMap<u64, tokio::sync::oneshot::Sender<Remote>>>,
    /// `<p>.rb.<node>`: this process's reply subjects are `<reply_base>.<token>`, batches of
    /// answers come to `<reply_base>.batch`.
    reply_base: String,
    /// `<p>.rb.`: a reply subject that accepts batched answers starts with it.
    batch_marker: String,
    /// Answers to other processes' deliveries not sent yet, by their reply base.
    answers: std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>,
    answers_ready: Arc<tokio::sync::Notify>,
    next_token: AtomicU64,
    /// Delivery ids: a random base per process plus a counter.
    next_delivery: AtomicU64,
    /// Deliveries this process has published and not yet seen answered, all senders together
    /// ([`PROCESS_WINDOW`]).
    pub inflight: std::sync::Arc<tokio::sync::Semaphore>,
}

/// Deliveries to other processes this process may have unanswered at once, all senders
/// together. Each sender's own window ([`super::cluster::PIPE_WINDOW`]) keeps its order and
/// bounds its memory; this one keeps the holders' queues short enough to answer inside
/// [`REQUEST_TIMEOUT`]: a thousand senders' windows together would queue far more than a
/// process routes in that time, and every message past it would time out and be refused
/// (measured: 120,000+ errors at saturation without it). A sender past it waits, and reads
/// its client's frames more slowly, as it does at its own window.
pub const PROCESS_WINDOW: usize = 2048;

/// Connect options with the configured credentials: a credentials file, or a token read from
/// the environment variable `token_env` (`section` names the config section in the error).
pub async fn credentials(
    file: &std::path::Path,
    token_env: &str,
    section: &str,
) -> anyhow::Result<ConnectOptions> {
    let mut opts = if file.as_os_str().is_empty() {
        ConnectOptions::new()
    } else {
        ConnectOptions::with_credentials_file(file).await?
    };
    if !token_env.is_empty() {
        let token = crate::config::env_secret(token_env)
            .ok_or_else(|| anyhow::anyhow!("{section}.nats_token_env: {token_env} is not set"))?;
        opts = opts.token(token);
    }
    Ok(opts)
}

/// A long-lived connection's policy: connects in the background if NATS is down at start and
/// reconnects for ever (0, 10 ms, 20 ms, 40 ms … capped at 1 s), pinging every 5 s.
pub fn reconnecting(opts: ConnectOptions) -> ConnectOptions {
    opts.retry_on_initial_connect()
        .max_reconnects(None)
        .reconnect_delay_callback(|attempts| {
            if attempts <= 1 {
                Duration::ZERO
            } else {
                (Duration::from_millis(10) * 2u32.pow((attempts as u32 - 1).min(10) - 1))
                    .min(Duration::from_secs(1))
            }
        })
        .connection_timeout(Duration::from_secs(3))
        .ping_interval(Duration::from_secs(5))
        .subscription_capacity(65_536)
}

/// Connects (retrying in the background if NATS is down at start). Returns at once; use
/// [`Nats::setup`] once connected.
pub async fn connect(
    cfg: &HubConfig,
    node: &str,
) -> anyhow::Result<(
    Client,
    tokio::sync::mpsc::UnboundedReceiver<async_nats::Event>,
)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let opts = credentials(&cfg.nats_credentials, &cfg.nats_token_env, "hub").await?;
    let client = reconnecting(opts)
        .name(format!("museum-agent {node}"))
        .request_timeout(Some(REQUEST_TIMEOUT))
        .client_capacity(cfg.nats_outage_buffer.max(2048))
        .event_callback(move |ev| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(ev);
            }
        })
        .connect(&cfg.nats_url)
        .await?;
    Ok((client, rx))
}

impl Nats {
    /// Creates (or updates) the inbox stream and the two buckets.
    pub async fn setup(client: Client, cfg: &HubConfig, node: &str) -> anyhow::Result<Nats> {
        let js = async_nats::jetstream::ContextBuilder::new()
            .timeout(JS_TIMEOUT)
            .build(client.clone());
        let p = cfg.nats_prefix.clone();
        let upper = p.to_ascii_uppercase().replace('-', "_");
        let max_age = secs(cfg.max_ttl_seconds);
        js.create_or_update_stream(stream::Config {
            name: format!("{upper}_INBOX"),
            subjects: vec![format!("{p}.inbox.>")],
            retention: RetentionPolicy::Limits,
            storage: StorageType::File,
            max_age,
            duplicate_window: max_age.min(Duration::from_secs(120)),
            discard: DiscardPolicy::Old,
            num_replicas: 1,
            ..Default::default()
        })
        .await?;
        let inbox = js.get_stream(format!("{upper}_INBOX")).await?;
        // Buckets are created as streams directly: async-nats' create_key_value first queries
        // account info in a shape nats-server 2.9 does not send.
        let bucket = |name: String, ttl: Duration| stream::Config {
            name: format!("KV_{name}"),
            subjects: vec![format!("$KV.{name}.>")],
            max_messages_per_subject: 1,
            max_age: ttl,
            duplicate_window: if ttl.is_zero() {
                Duration::from_secs(120)
            } else {
                ttl.min(Duration::from_secs(120))
            },
            storage: StorageType::File,
            num_replicas: 1,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: DiscardPolicy::New,
            ..Default::default()
        };
        let ttl = secs(cfg.presence_ttl_seconds);
        js.create_or_update_stream(bucket(format!("{upper}_PRESENCE"), ttl))
            .await?;
        js.create_or_update_stream(bucket(format!("{upper}_STREAMS"), Duration::ZERO))
            .await?;
        js.create_or_update_stream(bucket(format!("{upper}_SOCIETY"), Duration::ZERO))
            .await?;
        // Entries outlive the longest request by a minute: past its deadline an entry still
        // says "timed out" (E004) rather than nothing.
        let pending_age = secs(cfg.max_ttl_seconds.max(cfg.request_timeout_seconds) + 60.0);
        // Bounded: when full, the oldest entries go first (the requests most likely answered or
        // timed out); a response whose entry went is checked per process, as in an outage.
        let pending_cfg = stream::Config {
            max_bytes: PENDING_MAX_BYTES,
            discard: DiscardPolicy::Old,
            ..bucket(format!("{upper}_PENDING"), pending_age)
        };
        js.create_or_update_stream(pending_cfg).await?;
        let presence = js.get_key_value(format!("{upper}_PRESENCE")).await?;
        let streams = js.get_key_value(format!("{upper}_STREAMS")).await?;
        let society = js.get_key_value(format!("{upper}_SOCIETY")).await?;
        let pending = js.get_key_value(format!("{upper}_PENDING")).await?;
        Ok(Nats {
            client,
            js,
            inbox,
            presence,
            streams,
            society,
            pending,
            prefix: p,
            node: node.to_string(),
            depth: cfg.inbox_depth,
            // Heartbeats send Progress for held messages: keep ack_wait well above their period.
            ack_wait: secs((cfg.heartbeat_interval_seconds * 3.0).max(30.0)),
            metrics: NatsMetrics::default(),
            replies: Default::default(),
            reply_base: format!("{}.rb.{}", cfg.nats_prefix, token_of_node(node)),
            batch_marker: format!("{}.rb.", cfg.nats_prefix),
            answers: Default::default(),
            answers_ready: Arc::new(tokio::sync::Notify::new()),
            next_token: AtomicU64::new(1),
            next_delivery: AtomicU64::new(rand::random::<u64>() >> 1),
            inflight: std::sync::Arc::new(tokio::sync::Semaphore::new(PROCESS_WINDOW)),
        })
    }

    /// Shares one society change with every process. An agent record is merged into the
    /// shared one (as the SQLite store does: a non-empty role replaces, a parent or task brief
    /// is kept when the change has none) with compare-and-set, so two processes changing one
    /// record at once both count; with `only_new` (publishing a process's stored society at
    /// start) nothing present is touched. A contact entry is created only when absent: the first
    /// recorded anywhere holds, and is returned when it is not `change`'s (the caller settles it).
    pub async fn share_society(
        &self,
        env: &str,
        change: &Change,
        only_new: bool,
    ) -> anyhow::Result<Option<ContactEntry>> {
        let key = society_key(env, change);
        match change {
            Change::Agent(a) => {
                for _ in 0..8 {
                    let now = within(self.society.entry(key.clone())).await?;
                    let old = now
                        .as_ref()
                        .filter(|e| e.operation == kv::Operation::Put)
                        .and_then(|e| serde_json::from_slice::<AgentRecord>(&e.value).ok());
                    let merged = match old {
                        Some(_) if only_new => return Ok(None),
                        Some(old) => AgentRecord {
                            id: a.id.clone(),
                            role: if a.role.is_empty() {
                                old.role
                            } else {
                                a.role.clone()
                            },
                            parent: a.parent.clone().or(old.parent),
                            task_brief: a.task_brief.clone().or(old.task_brief),
                        },
                        None => a.clone(),
                    };
                    let value: Bytes = serde_json::to_vec(&merged)?.into();
                    let r = match &now {
                        Some(e) => within(self.society.update(&key, value, e.revision)).await,
                        None => within(self.society.create(&key, value)).await,
                    };
                    match r {
                        Ok(_) => return Ok(None),
                        // Another process wrote it in between: merge with that.
                        Err(_) => continue,
                    }
                }
                anyhow::bail!("agent record {key} kept changing under eight merges")
            }
            Change::Contact { entry, .. } => {
                let value: Bytes = serde_json::to_vec(entry)?.into();
                let created = tokio::time::timeout(JS_TIMEOUT, self.society.create(&key, value))
                    .await
                    .map_err(|_| anyhow::anyhow!("NATS did not answer"))?;
                match created {
                    Ok(_) => Ok(None),
                    Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                        let first = within(self.society.get(key)).await?;
                        Ok(first
                            .and_then(|b| serde_json::from_slice::<ContactEntry>(&b).ok())
                            .filter(|f| f != entry))
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Registers a request leaving its process in the shared pending bucket (a newer request
    /// with the same id replaces it, as locally). False when NATS did not store it.
    pub async fn register_pending(&self, p: &SharedPending) -> bool {
        let key = pending_key(&p.requester, &p.id);
        let value: Bytes = match serde_json::to_vec(p) {
            Ok(v) => v.into(),
            Err(_) => return false,
        };
        match within(self.pending.put(key, value)).await {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(error = %e, "hub: shared pending request not registered");
                false
            }
        }
    }

    /// Registers a request after the fact: it left its process while the registry could not
    /// be reached (an outage, or a registration that did not answer), or its two ends were on
    /// one process. Created only if absent, so a record a response wrote meanwhile (taken, see
    /// `claim` in [`Nats::take_pending`]) is never overwritten; the record of an older request
    /// with the same requester and id (another deadline) is replaced, as locally. False when
    /// NATS did not answer (in time).
    pub async fn register_pending_late(&self, p: &SharedPending) -> bool {
        let key = pending_key(&p.requester, &p.id);
        for _ in 0..4 {
            match self.create_pending(&key, p).await {
                Ok(_) => return true,
                Err(Some(kv::CreateErrorKind::AlreadyExists)) => {}
                Err(_) => return false,
            }
            match self.read_pending(&key).await {
                Ok(Some((v, _))) if v.until == p.until => return true,
                Ok(Some((_, rev))) => match self.write_pending(&key, p, rev).await {
                    Ok(_) => return true,
                    Err(Some(kv::UpdateErrorKind::WrongLastRevision)) => continue,
                    Err(_) => return false,
                },
                // Deleted in between: create it again.
                Ok(None) => continue,
                Err(()) => return false,
            }
        }
        false
    }

    /// Takes the shared entry of request `id` of `requester` for a response from `responder`,
    /// with compare-and-set: of two responses racing on any processes, one takes it and the
    /// other finds it answered. `claim`: the request as this process knows it (it has an entry
    /// for it): if the bucket has no record, one is created already taken, so a late
    /// registration of the request ([`Nats::register_pending_late`]) cannot open it again.
    pub async fn take_pending(
        &self,
        requester: &str,
        id: &str,
        responder: &str,
        now: i64,
        claim: Option<&SharedPending>,
    ) -> SharedTake {
        let key = pending_key(requester, id);
        for _ in 0..4 {
            let (mut v, revision) = match self.read_pending(&key).await {
                Ok(Some(found)) => found,
                Ok(None) => {
                    let Some(c) = claim else {
                        return SharedTake::Absent;
                    };
                    let taken = SharedPending {
                        taken: true,
                        ..c.clone()
                    };
                    match self.create_pending(&key, &taken).await {
                        Ok(rev) => {
                            return SharedTake::Taken {
                                rev,
                                until: taken.until,
                            };
                        }
                        // Registered in between: read it again.
                        Err(Some(kv::CreateErrorKind::AlreadyExists)) => continue,
                        Err(_) => return SharedTake::Unavailable,
                    }
                }
                Err(()) => return SharedTake::Unavailable,
            };
            if let Err(t) = v.judge(responder, now) {
                return t;
            }
            v.taken = true;
            match self.write_pending(&key, &v, revision).await {
                Ok(rev) => {
                    return SharedTake::Taken {
                        rev,
                        until: v.until,
                    };
                }
                // Written in between (another response, or the request again): read it again.
                Err(Some(kv::UpdateErrorKind::WrongLastRevision)) => continue,
                Err(_) => return SharedTake::Unavailable,
            }
        }
        SharedTake::Unavailable
    }

    /// Gives back an entry taken at revision `rev` by a response that was not delivered (the
    /// responder may send it again). Nothing if it changed since.
    pub async fn untake_pending(&self, requester: &str, id: &str, rev: u64) {
        let key = pending_key(requester, id);
        let Ok(Some((mut v, revision))) = self.read_pending(&key).await else {
            return;
        };
        if revision != rev {
            return;
        }
        v.taken = false;
        if let Err(e) = self.write_pending(&key, &v, rev).await {
            tracing::debug!(error = ?e, "hub: shared pending request not given back");
        }
    }

    /// A shared pending entry and its revision (None: absent, deleted or unreadable; Err: NATS
    /// did not answer in time).
    async fn read_pending(&self, key: &str) -> Result<Option<(SharedPending, u64)>, ()> {
        let entry = within(self.pending.entry(key)).await.map_err(|_| ())?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .and_then(|e| Some((serde_json::from_slice(&e.value).ok()?, e.revision))))
    }

    /// Creates a shared pending entry where there is none; its revision.
    /// Err(Some(kind)): NATS refused it; Err(None): no answer in time, or not encodable.
    async fn create_pending(
        &self,
        key: &str,
        v: &SharedPending,
    ) -> Result<u64, Option<kv::CreateErrorKind>> {
        let value = serde_json::to_vec(v).map_err(|_| None)?;
        kv_write(self.pending.create(key, value.into())).await
    }

    /// Writes a shared pending entry over revision `rev` (compare-and-set); its new revision.
    /// Err(Some(kind)): NATS refused it; Err(None): no answer in time, or not encodable.
    async fn write_pending(
        &self,
        key: &str,
        v: &SharedPending,
        rev: u64,
    ) -> Result<u64, Option<kv::UpdateErrorKind>> {
        let value = serde_json::to_vec(v).map_err(|_| None)?;
        kv_write(self.pending.update(key, value.into(), rev)).await
    }

    /// Every society change shared so far (the last value of each key), then each new one.
    pub async fn watch_society(&self) -> anyhow::Result<kv::Watch> {
        within(self.society.watch_with_history(">")).await
    }

    /// A new delivery id (see [`Meta::delivery`]).
    pub fn next_delivery(&self) -> u64 {
        self.next_delivery.fetch_add(1, Ordering::Relaxed)
    }

    /// Where the holders' answers to this process's deliveries come back: `<p>.rb.<node>.<token>`.
    /// The `rb` form tells the holder it may gather its answers into batches
    /// ([`Nats::answer_to`]); NATS's "no responders" still comes to the subject itself.
    fn reply_subject(&self, token: u64) -> String {
        let mut s = String::with_capacity(self.reply_base.len() + 21);
        s.push_str(&self.reply_base);
        s.push('.');
        s.push_str(&token.to_string());
        s
    }

    /// Listens for the holders' answers (batches, single ones, and NATS's "no responders")
    /// until the client closes, completing the deliveries that wait for them; and sends this
    /// process's own answers to other processes' deliveries, gathered per sender process
    /// ([`Nats::answer_to`]), one message per batch.
    pub async fn serve_replies(self: &Arc<Self>) -> anyhow::Result<()> {
        let subject = format!("{}.*", self.reply_base);
        let mut sub = self.client.subscribe(subject).await?;
        let weak = Arc::downgrade(self);
        let ready = self.answers_ready.clone();
        tokio::spawn(async move {
            loop {
                let m = tokio::select! {
                    m = sub.next() => match m {
                        Some(m) => m,
                        None => return,
                    },
                    _ = ready.notified() => {
                        let Some(n) = weak.upgrade() else { return };
                        n.flush_answers().await;
                        continue;
                    }
                };
                let Some(n) = weak.upgrade() else { return };
                let Some(last) = m.subject.rsplit('.').next() else {
                    continue;
                };
                if last == BATCH {
                    let mut replies = n.replies();
                    let waiters: Vec<_> = decode_answers(&m.payload)
                        .filter_map(|(token, r)| replies.remove(&token).map(|w| (w, r)))
                        .collect();
                    drop(replies);
                    for (w, r) in waiters {
                        let _ = w.send(r);
                    }
                    continue;
                }
                let Ok(token) = last.parse::<u64>() else {
                    continue;
                };
                let waiter = n.replies().remove(&token);
                let Some(waiter) = waiter else { continue }; // timed out already
                let r = if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
                    Remote::NotHere
                } else {
                    Remote::of_answer(&m.payload)
                };
                let _ = waiter.send(r);
            }
        });
        self.barrier().await;
        Ok(())
    }

    /// Answers a delivery from another process. A sender that asked for batches (its reply
    /// subject is `<p>.rb.<node>.<token>`) gets the answer in the next batch to its process:
    /// one NATS message for every answer gathered while the previous batch was being sent,
    /// instead of one each (at saturation the answers were half of all NATS traffic). Any
    /// other reply subject is answered at once, on its own.
    pub async fn answer_to(&self, reply: async_nats::Subject, r: Remote) {
        if let Some((base, token)) = reply
            .strip_prefix(self.batch_marker.as_str())
            .and_then(|_| reply.rsplit_once('.'))
            .and_then(|(base, t)| Some((base, t.parse::<u64>().ok()?)))
        {
            let first = {
                let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
                let first = answers.is_empty();
                let buf = match answers.get_mut(base) {
                    Some(b) => b,
                    None => answers.entry(base.to_string()).or_default(),
                };
                encode_answer(buf, token, r);
                first
            };
            if first {
                self.answers_ready.notify_one();
            }
            return;
        }
        // Bounded: a full client buffer (NATS down) blocks publish.
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.client.publish(reply, r.answer().into()),
        )
        .await;
    }

    /// Sends every batch of answers gathered so far (one message per sender process).
    async fn flush_answers(&self) {
        let batches = std::mem::take(&mut *self.answers.lock().unwrap_or_else(|p| p.into_inner()));
        for (base, buf) in batches {
            // Bounded: a full client buffer (NATS down) blocks publish. A lost batch makes
            // its deliveries time out at the sender, which retries them with their ids (a
            // retry of a delivery made is answered ok, not delivered twice).
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                self.client.publish(format!("{base}.{BATCH}"), buf.into()),
            )
            .await;
        }
    }

    fn replies(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<u64, tokio::sync::oneshot::Sender<Remote>>,
    > {
        self.replies.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes a delivery to the process holding `a` without waiting for its answer:
    /// returns the reply token and where the answer (or "no responders") will come.
    /// Deliveries published one after another by one task reach the holder in that order.
    pub async fn send_remote(
        &self,
        a: &Address,
        e: &Entry,
        role: &str,
        meta: &Meta,
    ) -> Result<(u64, tokio::sync::oneshot::Receiver<Remote>), Remote> {
        if !self.connected() {
            return Err(Remote::Unavailable);
        }
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.replies().insert(token, tx);
        let mut h = self.headers(e, None, role);
        meta.write(&mut h);
        let sent = tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.client.publish_with_reply_and_headers(
                self.unicast_subject(a),
                self.reply_subject(token),
                h,
                Bytes::copy_from_slice(e.body.as_bytes()),
            ),
        )
        .await;
        match sent {
            Ok(Ok(())) => {
                self.metrics.published.fetch_add(1, Ordering::Relaxed);
                Ok((token, rx))
            }
            _ => {
                self.forget(token);
                Err(Remote::Unavailable)
            }
        }
    }

    /// Stops waiting for the answer of `token` (it timed out): a late answer is ignored.
    pub fn forget(&self, token: u64) {
        self.replies().remove(&token);
    }

    /// How long a delivery waits for the holder's answer.
    pub fn answer_deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + REQUEST_TIMEOUT
    }

    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    pub fn unicast_subject(&self, a: &Address) -> String {
        format!("{}.u.{}", self.prefix, addr_tokens(a))
    }

    /// The broadcast subject of `ty` in `env` (humans: no environment).
    pub fn broadcast_subject(&self, env: Option<&str>, ty: PeerType) -> String {
        match env {
            Some(e) if ty != PeerType::Human => {
                format!("{}.b.{}.{}", self.prefix, ty.as_str(), token(e))
            }
            _ => format!("{}.b.{}", self.prefix, ty.as_str()),
        }
    }

    /// Where this process is asked to close a connection that connected again elsewhere.
    pub fn kick_subject(&self) -> String {
        format!("{}.kick.{}", self.prefix, token(&self.node))
    }

    fn inbox_subject(&self, a: &Address) -> String {
        format!("{}.inbox.{}", self.prefix, addr_tokens(a))
    }

    fn durable(&self, a: &Address) -> String {
        let h = Sha256::digest(a.key.as_bytes());
        format!("in_{}", &hex::encode(h)[..32])
    }

    /// The headers that carry an entry across processes.
    fn headers(&self, e: &Entry, seq: Option<u64>, role: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        // Absent: normal (the most common; every header costs on the hot path).
        if e.priority != Priority::Normal {
            h.insert(H_PRIORITY, (e.priority as u8).to_string().as_str());
        }
        if let Some(t) = e.expires_at {
            h.insert(H_EXPIRES, t.to_string().as_str());
        }
        if let Some(s) = seq {
            h.insert(H_SEQ, s.to_string().as_str());
        }
        if !role.is_empty() {
            h.insert(H_ROLE, role);
        }
        h
    }

    /// Rebuilds an entry from a NATS message (unicast, broadcast or stored).
    pub fn entry_of(
        headers: Option<&HeaderMap>,
        payload: &Bytes,
        row: Option<super::mailbox::StoredRef>,
    ) -> Option<(Entry, String)> {
        let get = |k: &'static str| hget(headers, k);
        // Straight into the entry's shared body (one copy).
        let body: Arc<str> = Arc::from(std::str::from_utf8(payload).ok()?);
        Some((
            Entry {
                body,
                priority: Priority::from_index(
                    get(H_PRIORITY).and_then(|p| p.parse().ok()).unwrap_or(1),
                ),
                expires_at: get(H_EXPIRES).and_then(|t| t.parse().ok()),
                received: std::time::Instant::now(),
                seq: get(H_SEQ).and_then(|s| s.parse().ok()),
                row,
            },
            get(H_ROLE).unwrap_or_default().to_string(),
        ))
    }

    /// Delivers to the process holding `a`, if any, and waits for its answer.
    pub async fn deliver_remote(&self, a: &Address, e: &Entry, role: &str, meta: &Meta) -> Remote {
        let (token, rx) = match self.send_remote(a, e, role, meta).await {
            Ok(x) => x,
            Err(r) => return r,
        };
        match tokio::time::timeout_at(self.answer_deadline(), rx).await {
            Ok(Ok(r)) => r,
            _ => {
                self.forget(token);
                Remote::Unavailable
            }
        }
    }

    /// Publishes a broadcast for the other processes (each fans it out to its own clients).
    pub async fn broadcast(
        &self,
        env: Option<&str>,
        ty: PeerType,
        e: &Entry,
        role: &str,
        sender_key: &str,
        sender_tier: Option<super::envelope::Tier>,
    ) -> anyhow::Result<()> {
        let mut h = self.headers(e, None, role);
        h.insert(H_SENDER, sender_key);
        h.insert(H_ORIGIN, self.node.as_str());
        if let Some(t) = sender_tier {
            h.insert("Hub-Sender-Tier", t.as_str());
        }
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.client.publish_with_headers(
                self.broadcast_subject(env, ty),
                h,
                Bytes::copy_from_slice(e.body.as_bytes()),
            ),
        )
        .await??;
        self.metrics.published.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The recipient's stream counters (None: never seen).
    pub async fn stream_state(&self, a: &Address) -> anyhow::Result<Option<StreamState>> {
        let v = within(self.streams.get(addr_tokens(a))).await?;
        Ok(v.map(|b| serde_json::from_slice(&b).unwrap_or_default()))
    }

    pub async fn save_stream_state(&self, a: &Address, s: StreamState) -> anyhow::Result<()> {
        within(
            self.streams
                .put(addr_tokens(a), serde_json::to_vec(&s)?.into()),
        )
        .await?;
        Ok(())
    }

    async fn consumer(&self, a: &Address) -> anyhow::Result<PullConsumer> {
        let name = self.durable(a);
        Ok(self
            .inbox
            .get_or_create_consumer(
                &name,
                pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: self.inbox_subject(a),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: self.ack_wait,
                    max_ack_pending: self.depth as i64 * 2,
                    ..Default::default()
                },
            )
            .await?)
    }

    /// Everything stored for `a` that can be delivered now, in stream order. Expired messages
    /// are terminated (never redelivered) and counted.
    /// `held`: stream sequences the caller already holds (a redelivery of one of them after
    /// `ack_wait` is not a new message; it is left alone).
    pub async fn load(
        &self,
        a: &Address,
        held: &std::collections::HashSet<u64>,
    ) -> anyhow::Result<(Vec<(Entry, String)>, u64)> {
        let mut consumer = within(self.consumer(a)).await?;
        let mut out = Vec::new();
        let mut expired = 0u64;
        let now = crate::util::now_ms();
        // Given-back (NAK) and timed-out messages count as "ack pending", not "pending", yet
        // a fetch returns them: fetch while either is non-zero, until a batch comes back empty.
        let info = within(consumer.info()).await?;
        if info.num_pending == 0 && info.num_ack_pending == 0 {
            return Ok((out, 0));
        }
        loop {
            let mut batch = within(
                consumer
                    .fetch()
                    .max_messages(self.depth.max(1))
                    .expires(Duration::from_millis(100))
                    .messages(),
            )
            .await?;
            let mut got = 0;
            while let Some(m) = batch.next().await {
                let m = m.map_err(|e| anyhow::anyhow!("inbox fetch: {e}"))?;
                got += 1;
                if m.info().is_ok_and(|i| held.contains(&i.stream_sequence)) {
                    continue;
                }
                let m = Arc::new(m);
                let Some((entry, role)) = Self::entry_of(
                    m.headers.as_ref(),
                    &m.payload,
                    Some(super::mailbox::StoredRef::Js(m.clone())),
                ) else {
                    let _ = m.ack_with(AckKind::Term).await;
                    continue;
                };
                if entry.expires_at.is_some_and(|t| t <= now) {
                    expired += 1;
                    let _ = m.ack_with(AckKind::Term).await;
                    continue;
                }
                out.push((entry, role));
            }
            if got == 0 || out.len() >= self.depth {
                break;
            }
        }
        Ok((out, expired))
    }

    /// Messages stored for `a` and not yet acknowledged.
    pub async fn stored_count(&self, a: &Address) -> anyhow::Result<usize> {
        let mut c = within(self.consumer(a)).await?;
        let info = within(c.info()).await?;
        Ok((info.num_pending + info.num_ack_pending as u64) as usize)
    }

    /// Stores a message in `a`'s inbox and waits for JetStream's acknowledgement.
    pub async fn store(
        &self,
        a: &Address,
        e: &Entry,
        seq: Option<u64>,
        role: &str,
        dedup_id: &str,
    ) -> anyhow::Result<()> {
        let mut h = self.headers(e, seq, role);
        h.insert(async_nats::header::NATS_MESSAGE_ID, dedup_id);
        let ack = within(self.js.publish_with_headers(
            self.inbox_subject(a),
            h,
            Bytes::copy_from_slice(e.body.as_bytes()),
        ))
        .await?;
        within(ack.into_future()).await?;
        self.metrics.published.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Tells JetStream the connection still works on these messages, so `ack_wait` does not
    /// make them redeliverable while a (slow, manual-ack) client holds them.
    pub async fn in_progress(&self, held: Vec<Arc<async_nats::jetstream::Message>>) {
        for m in held {
            let _ = tokio::time::timeout(JS_TIMEOUT, m.ack_with(AckKind::Progress)).await;
        }
    }

    /// Acknowledges (processed) or gives back (redeliver first) stored messages.
    pub async fn settle(&self, acks: Vec<Arc<async_nats::jetstream::Message>>, nak: bool) {
        for m in acks {
            let kind = if nak {
                AckKind::Nak(None)
            } else {
                AckKind::Ack
            };
            if let Err(e) = m.double_ack_with(kind).await {
                tracing::warn!(error = %e, "hub: inbox ack failed; the message will be redelivered");
            }
        }
    }

    /// Marks `a` as served by this process (the bucket's TTL ends it if we stop refreshing).
    pub async fn present(&self, a: &Address) {
        if let Err(e) = within(
            self.presence
                .put(addr_tokens(a), self.node.clone().into_bytes().into()),
        )
        .await
        {
            tracing::debug!(error = %e, "hub: presence update failed");
        }
    }

    /// The process that serves `a` now, per the presence bucket.
    pub async fn holder(&self, a: &Address) -> Option<String> {
        match within(self.presence.get(addr_tokens(a))).await {
            Ok(Some(v)) => String::from_utf8(v.to_vec()).ok(),
            _ => None,
        }
    }

    pub async fn absent(&self, a: &Address) {
        let _ = within(self.presence.delete(addr_tokens(a))).await;
    }

    /// Whether some process serves `a` now.
    pub async fn is_present(&self, a: &Address) -> bool {
        matches!(within(self.presence.get(addr_tokens(a))).await, Ok(Some(_)))
    }

    /// Ids of clients of `ty` present in `env`, on any process.
    pub async fn present_in(&self, env: Option<&str>, ty: PeerType) -> anyhow::Result<Vec<String>> {
        let prefix = match (ty, env) {
            (PeerType::Agent, Some(e)) => format!("agent.{}.", token(e)),
            (PeerType::Environment, Some(e)) => {
                return Ok(if self.is_present(&Address::environment(e)).await {
                    vec![e.to_string()]
                } else {
                    vec![]
                });
            }
            (PeerType::Human, _) => "human.".to_string(),
            _ => return Ok(vec![]),
        };
        let mut keys = self.presence.keys().await?;
        let mut out = Vec::new();
        while let Some(k) = keys.next().await {
            let k = k?;
            if let Some(rest) = k.strip_prefix(&prefix)
                && let Some(id) = untoken(rest)
            {
                out.push(id);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Returns once the server has processed everything this client sent before (a request
    /// to a subject nobody listens on is answered "no responders" after the earlier commands).
    pub async fn barrier(&self) {
        let subject = format!("{}.barrier.{}", self.prefix, self.node);
        let _ =
            tokio::time::timeout(REQUEST_TIMEOUT, self.client.request(subject, Bytes::new())).await;
    }

    /// Claims `a` for this process's attach stamped `stamp`, in the presence bucket with
    /// compare-and-set, so two processes attaching one identity at once see each other: the
    /// holder found there is kicked (it yields, after storing what it held, if its attach is
    /// older; otherwise it answers "kept" and this attach has lost). Bounded retries; if NATS
    /// does not answer, the attach goes on (the last writer holds, as before).
    pub async fn claim(&self, a: &Address, stamp: &Stamp) -> Claim {
        let key = addr_tokens(a);
        let mine = || Bytes::from(self.node.clone().into_bytes());
        for _ in 0..5 {
            let current = match within(self.presence.entry(key.clone())).await {
                Ok(e) => e,
                Err(_) => return Claim::Won,
            };
            let live = current
                .as_ref()
                .filter(|e| e.operation == kv::Operation::Put);
            if let Some(e) = live {
                let holder = String::from_utf8_lossy(&e.value).to_string();
                if holder != self.node && self.kick(&holder, a, stamp).await {
                    return Claim::Lost;
                }
            }
            let claimed = match &current {
                Some(e) => within(self.presence.update(&key, mine(), e.revision)).await,
                None => within(self.presence.create(&key, mine())).await,
            };
            if claimed.is_ok() {
                return Claim::Won;
            }
            // Someone wrote it meanwhile (another attach): read it again.
        }
        self.present(a).await;
        Claim::Won
    }

    /// Asks process `node` to close its connection of `a` as replaced, and waits (bounded)
    /// until it has stored what that connection held. True when it answered "kept": its own
    /// attach of `a` is newer, and this one is the one replaced.
    async fn kick(&self, node: &str, a: &Address, stamp: &Stamp) -> bool {
        let subject = format!("{}.kick.{}", self.prefix, token(node));
        let kick = Kick {
            key: a.key.to_string(),
            stamp: stamp.clone(),
        };
        let Ok(payload) = serde_json::to_vec(&kick) else {
            return false;
        };
        match tokio::time::timeout(JS_TIMEOUT, self.client.request(subject, payload.into())).await {
            Ok(Ok(reply)) => &reply.payload[..] == b"kept",
            _ => false,
        }
    }
}

/// A KV create or update under [`JS_TIMEOUT`]: the new revision; Err(Some(kind)) when NATS
/// refused it, Err(None) when it did not answer in time.
async fn kv_write<K>(
    write: impl std::future::Future<Output = Result<u64, async_nats::error::Error<K>>>,
) -> Result<u64, Option<K>>
where
    K: Clone + std::fmt::Debug + std::fmt::Display + PartialEq,
{
    match tokio::time::timeout(JS_TIMEOUT, write).await {
        Ok(Ok(rev)) => Ok(rev),
        Ok(Err(e)) => Err(Some(e.kind())),
        Err(_) => Err(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn society_keys_round_trip_any_ids() {
        use crate::hub::society::ContactSource;
        let rec = AgentRecord {
            id: "guide.kid 1".into(),
            role: "guide".into(),
            parent: Some("curator".into()),
            task_brief: None,
        };
        let entry = ContactEntry::new("a.b>c", "文物修复师", ContactSource::Preset, "t");
        for env in ["hall_a", "", "展厅.一"] {
            for change in [
                Change::Agent(rec.clone()),
                Change::Contact {
                    owner: "guide.kid 1".into(),
                    entry: entry.clone(),
                },
            ] {
                let key = society_key(env, &change);
                assert!(
                    key.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                    "{key}"
                );
                let value = match &change {
                    Change::Agent(a) => serde_json::to_vec(a).unwrap(),
                    Change::Contact { entry, .. } => serde_json::to_vec(entry).unwrap(),
                };
                assert_eq!(
                    society_change(&key, &value),
                    Some((env.to_string(), change))
                );
            }
        }
        assert_eq!(society_change("x._.a", b"{}"), None);
        assert_eq!(society_change("a._.a.extra", b"{}"), None);
        assert_eq!(society_change("a._.a", b"not json"), None);
    }

    #[test]
    fn pending_keys_are_bounded_subject_safe_and_unambiguous() {
        let k = pending_key("agent/hall.a/asker", "q:1 二");
        assert_eq!(k.len(), 2 + 64);
        assert!(k[2..].chars().all(|c| c.is_ascii_hexdigit()), "{k}");
        assert_eq!(k, pending_key("agent/hall.a/asker", "q:1 二"));
        // Where the requester ends matters.
        assert_ne!(pending_key("ab", "c"), pending_key("a", "bc"));
        assert_ne!(k, pending_key("agent/hall.a/other", "q:1 二"));
    }

    #[test]
    fn a_request_says_whether_it_is_shared() {
        for shared in [false, true] {
            let m = Meta {
                delivery: 7,
                retry: false,
                corr: Some(Corr::Request {
                    requester: "agent/e/r".into(),
                    id: "q1".into(),
                    until_ms: 42,
                    shared,
                }),
            };
            let mut h = HeaderMap::new();
            m.write(&mut h);
            assert_eq!(Meta::read(Some(&h)), m);
        }
    }

    #[test]
    fn shared_pending_is_judged_like_a_local_entry() {
        let p = SharedPending {
            requester: "agent/e/r".into(),
            id: "q1".into(),
            responder: Some("agent/e/s".into()),
            until: 1_000,
            taken: false,
        };
        assert_eq!(p.judge("agent/e/s", 999), Ok(()));
        assert_eq!(p.judge("agent/e/t", 999), Err(SharedTake::NotYours));
        assert_eq!(p.judge("agent/e/s", 1_000), Err(SharedTake::Expired));
        let answered = SharedPending {
            taken: true,
            ..p.clone()
        };
        // Answered comes first: a second response is a second response, even late.
        assert_eq!(
            answered.judge("agent/e/s", 2_000),
            Err(SharedTake::Answered)
        );
        let anyone = SharedPending {
            responder: None,
            ..p
        };
        assert_eq!(anyone.judge("agent/e/t", 999), Ok(()));
        let v: SharedPending =
            serde_json::from_str(r#"{"requester":"a","id":"b","responder":null,"until":5}"#)
                .unwrap();
        assert!(!v.taken);
    }

    #[test]
    fn batched_answers_round_trip() {
        let all = [
            (1, Remote::Delivered),
            (u64::MAX, Remote::Full),
            (7, Remote::NotHere),
            (8, Remote::Expired),
            (9, Remote::Uncorrelated),
        ];
        let mut buf = Vec::new();
        for (t, r) in all {
            encode_answer(&mut buf, t, r);
        }
        // "closed" on the wire, as a single answer says it.
        encode_answer(&mut buf, 10, Remote::Unavailable);
        buf.extend_from_slice(&[1, 2, 3]); // a truncated tail is ignored
        let got: Vec<_> = decode_answers(&buf).collect();
        assert_eq!(&got[..5], &all[..]);
        assert_eq!(got[5], (10, Remote::NotHere));
        assert_eq!(got.len(), 6);
        // Each code means what the single answer of the same outcome means.
        for (t, r) in all {
            let mut one = Vec::new();
            encode_answer(&mut one, t, r);
            let (_, decoded) = decode_answers(&one).next().unwrap();
            assert_eq!(decoded, Remote::of_answer(r.answer()));
        }
    }

    #[test]
    fn tokens_are_subject_safe_and_reversible() {
        for id in [
            "agent_001",
            "demo-world",
            "a.b",
            "展品导览员",
            "x:y@z",
            "_under",
        ] {
            let t = token(id);
            assert!(
                t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{t}"
            );
            assert_eq!(untoken(&t).as_deref(), Some(id));
        }
        assert_eq!(token("agent_001"), "agent_001");
        let stamp = |ms, node: &str| Stamp {
            ms,
            node: node.into(),
        };
        // The later attach wins; at the same millisecond, the greater process id.
        assert!(stamp(2, "node-a") > stamp(1, "node-z"));
        assert!(stamp(1, "node-b") > stamp(1, "node-a"));
        assert_ne!(token("_under"), "_under");
        assert_eq!(
            addr_tokens(&Address::agent("hall.1", "guide")),
            format!("agent.{}.guide", token("hall.1"))
        );
    }
}

//! Session resume on the same node (docs/protocol.md "Session resume"): the registry of
//! resumable sessions, resume tokens, the parked session, and the takeover of a session by a
//! new socket.
//!
//! A registered session is always owned by exactly one task: the connection task while a socket
//! is attached, a *parked* task (this module's [`park`]) for `resume_window_seconds` after the
//! socket dropped. Either one listens for a [`Takeover`]: a new connection that presented the
//! session's resume token gets the whole [`Session`] moved to it (its in-flight requests keep
//! running, their frames kept by the session's outbox meanwhile), and the old socket, if still
//! open, is closed with [`close_code::RESUMED_ELSEWHERE`]. What a parked session is made of
//! besides running tasks (id, attributes, history, replay buffer, credential) sits in `Session`
//! and its outbox, so it can be moved to another node as data.
//!
//! Across nodes (`[cluster] nats_url`; `crate::cluster` has the design) this module also writes
//! the session's snapshot ([`save`]), releases a session to another node that asks for it
//! ([`release`]: the takeover above, then the unseen and live frames forwarded over NATS until
//! the replies end), and on the asking node rebuilds the session from the snapshot and writes the
//! forwarded frames to its client (`find_remote`, `take_remote`, `attach_remote`). The same-node
//! path is untouched: a node asks the cluster only for a session it does not hold.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures_util::StreamExt;
use rand::TryRngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::Session;
use crate::app::AppState;
use crate::auth::Principal;
use crate::cluster::snapshot::{Credential, Message, Snapshot, added};
use crate::cluster::{Cluster, Done, Release, ReleaseAnswer, ReleaseRequest};
use crate::protocol::{ErrorCode, ErrorPayload, RegisterAck, SeenUpTo, ServerMessage};
use crate::providers::llm::ChatMessage;
use crate::request::attributes::Attributes;
use crate::request::inflight::{InFlight, RequestCtx};
use crate::request::outbox::{OutKind, Outbox};
use tokio_util::sync::CancellationToken;

/// Close code and reason for a socket whose session was resumed from another socket.
pub mod close_code {
    pub const RESUMED_ELSEWHERE: u16 = 4001;
    pub const RESUMED_ELSEWHERE_REASON: &str = "session resumed on another connection";
}

/// A new connection asking for the session: the session is sent back on `reply`.
pub(super) struct Takeover {
    pub reply: oneshot::Sender<Box<Session>>,
}

/// Where a takeover waits for the session's owner: one slot and a wake-up (a few dozen bytes
/// per session, where a channel would cost a kilobyte of every idle session's memory).
#[derive(Default)]
pub(super) struct Takeovers {
    slot: Mutex<Option<Takeover>>,
    wake: Notify,
}

impl Takeovers {
    /// Hands a takeover to the owner; gives it back when another one is already waiting.
    pub(super) fn offer(&self, t: Takeover) -> Result<(), Takeover> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return Err(t);
        }
        *slot = Some(t);
        drop(slot);
        self.wake.notify_one();
        Ok(())
    }

    /// The next takeover (a wake-up stored by `offer` is not lost between the check and the wait).
    pub(super) async fn next(&self) -> Takeover {
        loop {
            if let Some(t) = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                return t;
            }
            self.wake.notified().await;
        }
    }
}

struct Handle {
    token_hash: [u8; 32],
    principal: Principal,
    takeovers: Arc<Takeovers>,
}

/// Resumable sessions by id (those registered while `resume_window_seconds` > 0).
#[derive(Default)]
pub struct Resumable(Mutex<HashMap<String, Handle>>);

/// Why a resume was refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// No such session here (never, ended, or its window ran out).
    Unknown,
    /// The session exists; the token is not its token.
    WrongToken,
}

impl Resumable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Handle>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a session; returns its first resume token and where its takeovers arrive.
    /// The session removes itself ([`Resumable::remove`]) when it ends.
    pub(super) fn insert(&self, id: &str, principal: Principal) -> (String, Arc<Takeovers>) {
        let takeovers = Arc::new(Takeovers::default());
        let token = new_token();
        self.lock().insert(
            id.to_string(),
            Handle {
                token_hash: hash(&token),
                principal,
                takeovers: takeovers.clone(),
            },
        );
        (token, takeovers)
    }

    pub(super) fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Checks a resume request: the session's credential and where to ask for it.
    pub(super) fn check(
        &self,
        id: &str,
        token: &str,
    ) -> Result<(Principal, Arc<Takeovers>), Refused> {
        let map = self.lock();
        let h = map.get(id).ok_or(Refused::Unknown)?;
        if bool::from(h.token_hash.ct_eq(&hash(token))) {
            Ok((h.principal.clone(), h.takeovers.clone()))
        } else {
            Err(Refused::WrongToken)
        }
    }

    /// The credential and token hash of a session held here (for its snapshot).
    pub(super) fn export(&self, id: &str) -> Option<(Principal, [u8; 32])> {
        let map = self.lock();
        let h = map.get(id)?;
        Some((h.principal.clone(), h.token_hash))
    }

    /// [`Resumable::check`] with the token's digest (a release asked by another node).
    pub(super) fn check_digest(
        &self,
        id: &str,
        digest: &[u8; 32],
    ) -> Result<(Principal, Arc<Takeovers>), Refused> {
        let map = self.lock();
        let h = map.get(id).ok_or(Refused::Unknown)?;
        if bool::from(h.token_hash.ct_eq(digest)) {
            Ok((h.principal.clone(), h.takeovers.clone()))
        } else {
            Err(Refused::WrongToken)
        }
    }

    /// A fresh token for a resumed session (the old one stops working).
    pub(super) fn rotate(&self, id: &str) -> Option<String> {
        let token = new_token();
        let mut map = self.lock();
        map.get_mut(id)?.token_hash = hash(&token);
        Some(token)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// 256 random bits from the OS, base64url.
fn new_token() -> String {
    let mut b = [0u8; 32];
    if rand::rngs::OsRng.try_fill_bytes(&mut b).is_err() {
        // The OS generator failing is fatal for every secret we make; rand's thread generator is
        // seeded from it and reseeds, and is what session ids use.
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut b);
    }
    format!(
        "rt_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
    )
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Keeps a session whose socket dropped until its client resumes it, its window runs out, its
/// credential is revoked, or the server stops. Runs as a tracked task.
pub(super) async fn park(mut session: Box<Session>, window: Duration) {
    session.conn.outbox.detach();
    save(&session, true);
    let app = session.conn.app.clone();
    let until = Instant::now() + window;
    tracing::info!(session = %session.id, window_s = window.as_secs(), "socket gone: session parked for resume");
    let outcome = loop {
        let token = session.token.clone();
        let Some(takeovers) = session.takeovers.clone() else {
            break "resume off";
        };
        tokio::select! {
            biased;
            _ = token.cancelled() => break "server stopped",
            _ = app.draining.cancelled() => break "server shutting down",
            _ = session.kick.kicked() => break "credential revoked",
            t = takeovers.next() => match t.reply.send(session) {
                Ok(()) => return,
                Err(back) => session = back, // the new connection gave up: park on
            },
            _ = tokio::time::sleep_until(until) => break "resume window over",
        }
    };
    tracing::info!(session = %session.id, why = outcome, "parked session ended");
}

// ---------------------------------------------------------------------------------------------
// Across nodes (`[cluster] nats_url`, `crate::cluster` has the design): the snapshot a session
// writes, the owner's side of a release (take the session over, forward what the client has not
// seen, drop it), and the new node's side (a session rebuilt from the snapshot, the forwarded
// frames written to its client).

/// The session's snapshot (None: it is not resumable here).
fn snapshot_of(s: &Session) -> Option<Snapshot> {
    let (principal, token_hash) = s.conn.app.resumable.export(&s.id)?;
    let history = s
        .history
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .messages()
        .map(Message::from)
        .collect();
    Some(snapshot(
        &s.id,
        &principal,
        token_hash,
        s.create_time,
        &s.attrs,
        history,
    ))
}

fn snapshot(
    id: &str,
    principal: &Principal,
    token_hash: [u8; 32],
    create_time: i64,
    attrs: &Attributes,
    history: Vec<Message>,
) -> Snapshot {
    Snapshot {
        session_id: id.to_string(),
        owner: String::new(),
        credential: Credential::from(principal),
        token_hash: hex::encode(token_hash),
        create_time,
        platform: attrs.platform,
        require_tts: attrs.require_tts,
        enable_srs: attrs.enable_srs,
        functions: attrs.functions.clone(),
        history,
        expires_ms: 0,
    }
}

/// Writes a new session's first snapshot before its client learns the resume token (the caller
/// sends REGISTER_ACK after this): a client that drops at once and comes back on another node
/// finds the session there, however far the snapshot writer lags. Bounded
/// ([`Cluster::save_first`]); nothing without a cluster.
pub(super) async fn save_first(
    app: &AppState,
    id: &str,
    principal: &Principal,
    token: &str,
    create_time: i64,
    attrs: &Attributes,
) {
    if let Some(cluster) = &app.cluster {
        let snap = snapshot(id, principal, hash(token), create_time, attrs, Vec::new());
        cluster.save_first(snap).await;
    }
}

/// Writes the session's snapshot to the cluster when it changed (nothing without a cluster or
/// without resume). `parked`: its socket is gone (the snapshot expires with the window).
pub(super) fn save(s: &Session, parked: bool) {
    if let (Some(cluster), Some(_)) = (&s.conn.app.cluster, &s.takeovers)
        && let Some(snap) = snapshot_of(s)
    {
        cluster.save(snap, parked);
    }
}

/// A copy of the session's conversation (what the forwarded end compares to say what was added).
fn history_of(session: &Session) -> Vec<ChatMessage> {
    let h = session.history.lock().unwrap_or_else(|p| p.into_inner());
    h.messages().cloned().collect()
}

/// This node's side of the cluster: releases its sessions, closes those of a credential
/// revoked elsewhere, and reloads ingested files into its running retriever.
pub struct ClusterNode(pub Arc<AppState>);

impl crate::cluster::Local for ClusterNode {
    fn release(&self, cluster: Arc<Cluster>, req: ReleaseRequest) -> crate::cluster::ReleaseFuture {
        let app = self.0.clone();
        Box::pin(async move { release(&app, &cluster, req).await })
    }

    fn revoke(&self, matches: &dyn Fn(&Principal) -> bool) -> usize {
        self.0.sessions.kick_where(matches, "credential revoked")
    }

    fn retriever(&self) -> Option<Arc<dyn crate::retrieval::Retriever>> {
        self.0.deps.retriever.clone()
    }
}

/// The owner's side of a release: checks the token, takes the session over as a local resume
/// does (a still-open socket is closed with 4001), and forwards to `req.forward_to`.
pub async fn release(
    app: &Arc<AppState>,
    cluster: &Arc<Cluster>,
    req: ReleaseRequest,
) -> ReleaseAnswer {
    let digest = hex::decode(&req.token_sha256).ok();
    let checked = digest
        .as_deref()
        .and_then(|d| <[u8; 32]>::try_from(d).ok())
        .map(|d| app.resumable.check_digest(&req.session_id, &d));
    let Some(Ok((_, takeovers))) = checked else {
        return ReleaseAnswer::Gone;
    };
    let (tx, rx) = oneshot::channel();
    if takeovers.offer(Takeover { reply: tx }).is_err() {
        return ReleaseAnswer::Gone;
    }
    let handed = tokio::time::timeout(RELEASE_TAKEOVER, rx).await;
    let Ok(Ok(mut session)) = handed else {
        return ReleaseAnswer::Gone;
    };
    let Some(mut snap) = snapshot_of(&session) else {
        return ReleaseAnswer::Gone;
    };
    snap.owner = cluster.node.clone();
    // The client's INTERRUPTs of the replies forwarded from here reach this node through the
    // other one; heard from before the other node knows it holds the session.
    let interrupts = match cluster.interrupts(&session.id).await {
        Ok(sub) => Some(sub),
        Err(e) => {
            tracing::warn!(session = %session.id, error = %e, "cluster: cannot hear forwarded interrupts; the replies run to their end");
            None
        }
    };
    // The session is the other node's from now on: not resumable here, and its end here does
    // not delete the snapshot.
    cluster.released(&session.id, &req.taker).await;
    app.resumable.remove(&session.id);
    session.takeovers = None;
    let before = history_of(&session);
    tracing::info!(session = %session.id, to = %req.forward_to, "cluster: session released to another node");
    app.tracker.spawn(forward(
        session,
        req.last_seen,
        req.forward_to,
        cluster.clone(),
        before,
        interrupts,
    ));
    ReleaseAnswer::Released {
        snapshot: Box::new(snap),
    }
}

/// How long a release waits for the session's current owner task to hand it over (below the
/// asking node's [`crate::cluster::RELEASE_TIMEOUT`]).
const RELEASE_TAKEOVER: Duration = Duration::from_secs(3);
/// How long the forwarding owner waits, once no request is in flight, for their tasks to end.
const FORWARD_SETTLE: Duration = Duration::from_secs(5);
/// How often the forwarding owner checks whether the replies have ended.
const FORWARD_TICK: Duration = Duration::from_millis(10);

/// Publishes, in order and numbered, what the client has not seen: the kept frames after
/// `seen`, then the live frames of the replies still running; when they have all ended (their
/// tasks gone, their turns in the history), `done` with the turns they added. Then the session
/// ends here.
async fn forward(
    mut session: Box<Session>,
    seen: BTreeMap<String, SeenUpTo>,
    to: String,
    cluster: Arc<Cluster>,
    before: Vec<ChatMessage>,
    interrupts: Option<async_nats::Subscriber>,
) {
    let app = session.conn.app.clone();
    let token = app.hard_stop.child_token();
    let hearing = token.child_token();
    if let Some(sub) = interrupts {
        tokio::spawn(serve_interrupts(
            sub,
            session.inflight.clone(),
            cluster.clone(),
            hearing.clone(),
        ));
    }
    let slow = crate::config::secs(app.config.limits.slow_client_timeout_seconds);
    let (sock, mut rx) = Outbox::new(app.config.limits.outbound_queue_frames, token.clone(), slow);
    session.conn.outbox.attach(&sock);
    session.conn.token = token.clone();
    let outbox = session.conn.outbox.clone();
    let (c, dest) = (cluster.clone(), to.clone());
    // The "socket": every frame is published; a ping is answered at once (the frames before it
    // are out), so the replay buffer lets them go.
    let writer = tokio::spawn(async move {
        let mut seq = 0u64;
        while let Some(f) = rx.recv().await {
            match &f.kind {
                OutKind::Text(t) => {
                    if !f.live() {
                        continue;
                    }
                    seq += 1;
                    if !c.forward(&dest, seq, "frame", Bytes::from(t.clone())).await {
                        tracing::warn!(to = %dest, "cluster: forwarding failed; the new node reports the replies interrupted");
                        return None;
                    }
                    f.written();
                }
                OutKind::Ping(mark) => outbox.pong(Some(*mark)),
                OutKind::Close { .. } => return Some(seq),
            }
        }
        Some(seq)
    });
    let plan = session
        .conn
        .outbox
        .resume(seen.iter().map(|(r, s)| (r.as_str(), s)));
    report_plan(&mut session, &plan).await;
    while let Some(frame) = session.conn.outbox.next_replay() {
        if !session.conn.outbox.push(frame).await {
            break;
        }
    }
    // The replies still running go on into `sock`; wait for their ends (a request leaves the
    // in-flight set before its final frame is queued and its turn recorded: its task's handle
    // on the history says when it is done).
    let limit = Instant::now() + Duration::from_secs(app.config.session.timeout_seconds.max(1));
    let mut settle: Option<Instant> = None;
    let stopped = loop {
        if session.inflight.is_empty() {
            if Arc::strong_count(&session.history) == 1 {
                break None;
            }
            // A task that left the in-flight set still holds the history: its end is near; not
            // waited for past FORWARD_SETTLE (its turn would then be missing on the new node).
            if Instant::now() >= *settle.get_or_insert(Instant::now() + FORWARD_SETTLE) {
                tracing::warn!(session = %session.id, "cluster: a reply task outlived its request; forwarding ends without its turn");
                break None;
            }
        }
        session.conn.outbox.ping();
        tokio::select! {
            _ = token.cancelled() => break Some("server stopped"),
            _ = session.kick.kicked() => break Some("credential revoked"),
            _ = tokio::time::sleep_until(limit) => break Some("took too long"),
            _ = tokio::time::sleep(FORWARD_TICK) => {}
        }
    };
    if let Some(why) = stopped {
        tracing::info!(session = %session.id, why, "cluster: forwarding stopped");
        session.inflight.cancel_all();
    }
    let after = history_of(&session);
    let done = Done {
        history: added(&before, &after).iter().map(Message::from).collect(),
    };
    // Stops hearing interrupts: nothing runs here any more.
    hearing.cancel();
    sock.close(close_code::RESUMED_ELSEWHERE, "forwarded").await;
    if let Ok(Some(seq)) = writer.await
        && stopped.is_none()
        && let Ok(body) = serde_json::to_vec(&done)
    {
        cluster.forward(&to, seq + 1, "done", body.into()).await;
        cluster.flush().await;
    }
    tracing::info!(session = %session.id, "cluster: forwarded replies ended; session dropped here");
}

/// The owner's side of an INTERRUPT its former client sent to the node the session moved to:
/// the request is cancelled as a local INTERRUPT cancels it (removed from the in-flight table,
/// its token cancelled: the upstream stream is dropped and its queued frames are never
/// forwarded). The INTERRUPT_ACK and the interrupted RESPONSE are the other node's to send,
/// so nothing is queued here. Ends with `stop` (the forwarding ended).
async fn serve_interrupts(
    mut sub: async_nats::Subscriber,
    inflight: InFlight,
    cluster: Arc<Cluster>,
    stop: CancellationToken,
) {
    loop {
        let m = tokio::select! {
            _ = stop.cancelled() => break,
            m = sub.next() => match m { Some(m) => m, None => return },
        };
        let Ok(req) = serde_json::from_slice::<crate::cluster::RemoteInterrupt>(&m.payload) else {
            continue;
        };
        let cancelled = inflight.cancel(&req.request_id).is_some();
        tracing::info!(request = %req.request_id, cancelled, "cluster: interrupt forwarded by the session's new node");
        if let Some(reply) = m.reply {
            cluster.answer(reply, cancelled).await;
        }
    }
    let _ = sub.unsubscribe().await;
}

/// Tells the client what it must know about the requests it listed (same as a local resume).
async fn report_plan(session: &mut Session, plan: &crate::request::replay::ResumePlan) {
    let cfg = &session.conn.app.config.session;
    let (frames, bytes) = (cfg.replay_max_frames, cfg.replay_max_bytes);
    for id in &plan.overflowed {
        session.inflight.cancel(id);
        let detail = format!(
            "the reply outgrew the replay buffer ({frames} frames / {bytes} bytes) while the connection was away, and was stopped; ask again"
        );
        session
            .conn
            .error(ErrorPayload::new(ErrorCode::ServerBusy, detail).with_request(Some(id.clone())))
            .await;
    }
    for id in plan
        .nothing_kept
        .iter()
        .filter(|id| !session.inflight.contains(id))
    {
        let detail = "the server has no record of this request: it did not arrive before the connection dropped; send it again";
        session
            .conn
            .error(
                ErrorPayload::new(ErrorCode::InternalError, detail).with_request(Some(id.clone())),
            )
            .await;
    }
    session.inflight.remove_cancelled();
}

/// Why a session held elsewhere cannot be resumed here.
pub(super) enum RemoteRefused {
    /// No snapshot (never, ended, expired), or its owner no longer holds it.
    Unknown,
    WrongToken,
    /// NATS cannot be asked now.
    Unavailable,
}

/// A session held by another node, ready to be rebuilt here.
pub(super) struct Handoff {
    pub snapshot: Snapshot,
    /// The owner forwards what the client has not seen here (None: the owner is gone).
    forward: Option<async_nats::Subscriber>,
    /// The replies the client listed (it has not seen their ends).
    listed: Vec<String>,
    /// The owner did not answer: the listed replies are lost.
    owner_gone: bool,
    /// The session's new resume token (set by the caller once it is registered here).
    pub token: Option<String>,
}

/// Finds the session in the cluster and checks its token against the snapshot's (constant
/// time). The snapshot may lag its owner (a token renewed there a moment ago), so a mismatch
/// is not a refusal yet: the owner, which holds the live token, decides ([`take_remote`]).
pub(super) async fn find_remote(
    cluster: &Cluster,
    r: &crate::protocol::ResumeRequest,
) -> Result<(Snapshot, bool), RemoteRefused> {
    let snap = match cluster.lookup(&r.session_id).await {
        Ok(Some(s)) => s,
        Ok(None) => return Err(RemoteRefused::Unknown),
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot look the session up");
            return Err(RemoteRefused::Unavailable);
        }
    };
    let Ok(stored) = hex::decode(&snap.token_hash) else {
        return Err(RemoteRefused::Unknown);
    };
    let token_ok =
        stored.len() == 32 && bool::from(stored.as_slice().ct_eq(&hash(&r.resume_token)));
    Ok((snap, token_ok))
}

/// Asks the owner to release the session and forward here (the owner checks the token against
/// the live one); from the snapshot alone when the owner does not answer and the snapshot's
/// token is the client's (`token_ok`).
pub(super) async fn take_remote(
    cluster: &Cluster,
    snap: Snapshot,
    token_ok: bool,
    r: &crate::protocol::ResumeRequest,
) -> Result<Handoff, RemoteRefused> {
    let owner = if snap.owner == cluster.node {
        // Written by this node, which no longer holds it: handed on a moment ago (the new
        // owner's snapshot is not written yet), or it ended here.
        cluster
            .handed_to(&r.session_id)
            .ok_or(RemoteRefused::Unknown)?
    } else {
        snap.owner.clone()
    };
    let refused = if token_ok {
        RemoteRefused::Unknown
    } else {
        RemoteRefused::WrongToken
    };
    let (subject, sub) = cluster
        .forward_inbox()
        .await
        .map_err(|_| RemoteRefused::Unavailable)?;
    let req = ReleaseRequest {
        session_id: r.session_id.clone(),
        token_sha256: hex::encode(hash(&r.resume_token)),
        last_seen: r.last_seen.clone(),
        forward_to: subject,
        taker: cluster.node.clone(),
    };
    match cluster.release(&owner, &req).await {
        Release::Released(fresh) => Ok(Handoff {
            snapshot: *fresh,
            forward: Some(sub),
            listed: r.last_seen.keys().cloned().collect(),
            owner_gone: false,
            token: None,
        }),
        Release::Gone => Err(refused),
        Release::NoAnswer if !token_ok => Err(refused),
        Release::NoAnswer => {
            tracing::info!(session = %r.session_id, owner = %snap.owner, "cluster: the owner did not answer; resuming from the snapshot");
            Ok(Handoff {
                snapshot: snap,
                forward: None,
                listed: r.last_seen.keys().cloned().collect(),
                owner_gone: true,
                token: None,
            })
        }
    }
}

/// Attaches a session rebuilt from another node's snapshot: REGISTER_ACK (same session id, a
/// fresh token), then the replies lost with a dead owner, or the owner's forwarded frames.
pub(super) async fn attach_remote(session: Box<Session>, h: Handoff) -> Box<Session> {
    let app = session.conn.app.clone();
    if let Some(cluster) = &app.cluster {
        // Handed away from here earlier and back now: this node's snapshot writes count again.
        cluster.held(&session.id);
    }
    *session.history.lock().unwrap_or_else(|p| p.into_inner()) =
        h.snapshot.history(app.config.llm.history_messages);
    session
        .conn
        .send(ServerMessage::RegisterAck(RegisterAck {
            status: "SUCCESS".into(),
            message: super::text::RESUMED.into(),
            session_id: session.id.clone(),
            session_timeout_seconds: app.config.session.timeout_seconds,
            capabilities: Some(crate::pipeline::capabilities::of(&app.deps)),
            resume_token: h.token,
        }))
        .await;
    let owner_gone = h.owner_gone;
    for id in h.listed.iter().filter(|_| owner_gone) {
        session
            .conn
            .error(
                ErrorPayload::new(ErrorCode::ServerBusy, OWNER_GONE).with_request(Some(id.clone())),
            )
            .await;
    }
    if let (Some(sub), Some(cluster)) = (h.forward, app.cluster.clone()) {
        let link = Forwarded {
            outbox: session.conn.outbox.clone(),
            inflight: session.inflight.clone(),
            token: session.token.clone(),
            cluster,
            owner: h.snapshot.owner.clone(),
            session: session.id.clone(),
            ended: session.token.child_token(),
        };
        // The listed replies are in flight here from now on: an INTERRUPT of one (before any
        // of its frames came) is the session's own INTERRUPT, forwarded to the owner.
        let open: HashMap<String, Option<Arc<RequestCtx>>> = h
            .listed
            .into_iter()
            .map(|id| {
                let ctx = link.track(&id);
                (id, ctx)
            })
            .collect();
        app.tracker.spawn(relay(
            sub,
            link,
            session.history.clone(),
            open,
            crate::config::secs(app.config.llm.idle_timeout_seconds).max(RELAY_IDLE),
        ));
    }
    tracing::info!(session = %session.id, peer = %session.conn.peer, owner_gone, "session resumed from another node");
    session
}

const OWNER_GONE: &str =
    "the reply was interrupted: the server that was streaming it is gone; ask again";
const FORWARD_LOST: &str =
    "the reply was interrupted while it was moved from another server; ask again";
/// How long the end of the last forwarded reply waits for the owner's `done` (its turn).
const HOLD_FINAL: Duration = Duration::from_secs(2);
/// The longest silence of a forwarding owner before its replies count as interrupted.
const RELAY_IDLE: Duration = Duration::from_secs(60);

/// The new node's hold on the replies its session's old owner still streams.
struct Forwarded {
    outbox: Outbox,
    /// The session's requests: a forwarded reply sits there as if it ran here, so the
    /// session's INTERRUPT handling (`control::on_interrupt`) acknowledges and ends it as a
    /// local one, and its frames still coming from the owner are dropped from then on.
    inflight: InFlight,
    /// The session's token.
    token: CancellationToken,
    cluster: Arc<Cluster>,
    owner: String,
    session: String,
    /// Cancelled when the relay ends (its watchers stop).
    ended: CancellationToken,
}

impl Forwarded {
    /// Enters a forwarded reply in the session's in-flight table and watches it: cancelled
    /// there (an INTERRUPT), the owner is told to cancel it too. None when the id is in flight
    /// here already (the client reused it for a request of its own).
    fn track(&self, id: &str) -> Option<Arc<RequestCtx>> {
        let ctx = self.inflight.insert(id, &self.token, usize::MAX).ok()?;
        let (watched, cluster, token, ended) = (
            ctx.clone(),
            self.cluster.clone(),
            self.token.clone(),
            self.ended.clone(),
        );
        let (owner, session) = (self.owner.clone(), self.session.clone());
        tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = watched.token.cancelled() => {}
                _ = ended.cancelled() => return,
            }
            if token.is_cancelled() {
                return; // the session ended, not an INTERRUPT
            }
            let id = &watched.request_id;
            tokio::select! {
                _ = token.cancelled() => {}
                answer = cluster.interrupt(&owner, &session, id) => match answer {
                    Some(cancelled) => tracing::info!(session = %session, request = %id, %owner, cancelled, "cluster: interrupt forwarded to the owner"),
                    None => tracing::warn!(session = %session, request = %id, %owner, "cluster: the owner did not confirm a forwarded interrupt; its frames are dropped here"),
                },
            }
        });
        Some(ctx)
    }
}

/// A forwarded reply's final frame, and its request's entry in the in-flight table.
struct Held {
    frame: ServerMessage,
    /// Sent by then even without the owner's `done`.
    until: tokio::time::Instant,
    ctx: Option<Arc<RequestCtx>>,
}

impl Held {
    /// Sends the final frame unless an INTERRUPT here ended the request already (whoever
    /// takes the request out of the in-flight table owns its final frame).
    async fn send(self, link: &Forwarded) {
        if self.ctx.is_none_or(|c| link.inflight.finish(&c)) {
            link.outbox.send(&self.frame).await;
        }
    }
}

/// Writes the owner's forwarded frames to this node's client, in their numbered order, until
/// `done` (its turns join the history); a gap, a silence or the end of the subscription ends
/// the replies still open with an ERROR.
async fn relay(
    mut sub: async_nats::Subscriber,
    link: Forwarded,
    history: Arc<std::sync::Mutex<crate::pipeline::history::History>>,
    mut open: HashMap<String, Option<Arc<RequestCtx>>>,
    idle: Duration,
) {
    let mut next = 1u64;
    let outbox = &link.outbox;
    // The final frame of the last open reply waits for `done` (at most HOLD_FINAL), so the
    // client that asks again the moment the reply ends is answered with that turn in the
    // history. Its request stays in the in-flight table meanwhile: a release or a resume of
    // the session in that moment counts it as running (not "no record of this request"), and
    // an INTERRUPT still owns it.
    let mut held: Option<Held> = None;
    let lost = loop {
        let wait = held.as_ref().map_or(idle, |h| {
            h.until
                .saturating_duration_since(tokio::time::Instant::now())
        });
        let m = tokio::select! {
            _ = link.token.cancelled() => return,
            m = tokio::time::timeout(wait, sub.next()) => m,
        };
        if m.is_err()
            && let Some(last) = held.take()
        {
            tracing::warn!(session = %link.session, "cluster: the owner's end of forwarding is late; the reply's end is sent without its turn");
            last.send(&link).await;
            continue;
        }
        let Ok(Some(m)) = m else {
            break true;
        };
        let header = |k: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(k))
                .map(|v| v.as_str().to_string())
        };
        if header(crate::cluster::H_SEQ).and_then(|s| s.parse::<u64>().ok()) != Some(next) {
            tracing::warn!(expected = next, "cluster: a forwarded frame is missing");
            break true;
        }
        next += 1;
        if header(crate::cluster::H_KIND).as_deref() == Some("done") {
            if let Ok(d) = serde_json::from_slice::<Done>(&m.payload) {
                let turn: Vec<ChatMessage> =
                    d.history.iter().filter_map(Message::to_chat).collect();
                if !turn.is_empty() {
                    history
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push_turn(turn);
                }
            }
            if let Some(last) = held.take() {
                last.send(&link).await;
            }
            break !open.is_empty();
        }
        // Any frame after the held end goes after it: the order stays the owner's.
        if let Some(earlier) = held.take() {
            earlier.send(&link).await;
        }
        let Ok(text) = std::str::from_utf8(&m.payload) else {
            continue;
        };
        let Ok(frame) = crate::protocol::decode_server(text) else {
            continue;
        };
        let (id, end) = match &frame.message {
            ServerMessage::Response(r) => (
                Some(r.request_id.clone()),
                r.text_stream_seq == Some(-1)
                    || r.voice_stream_seq == Some(-1)
                    || r.interrupted == Some(true),
            ),
            ServerMessage::Error(e) => (e.request_id.clone(), true),
            _ => (None, false),
        };
        let Some(id) = id else {
            outbox.send(&frame.message).await;
            continue;
        };
        if end {
            // Whoever takes the request out of the in-flight table owns its final frame: an
            // INTERRUPT here did already (and sent the interrupted RESPONSE).
            let ctx = open.remove(&id).flatten();
            let end = Held {
                frame: frame.message,
                until: tokio::time::Instant::now() + HOLD_FINAL,
                ctx,
            };
            if open.is_empty() {
                held = Some(end);
            } else {
                end.send(&link).await;
            }
            continue;
        }
        let ctx = open
            .entry(id.clone())
            .or_insert_with(|| link.track(&id))
            .clone();
        match ctx {
            // Dropped once the request is interrupted here (also when queued already).
            Some(ctx) => {
                let bytes = match &frame.message {
                    ServerMessage::Response(r) => r
                        .content
                        .as_ref()
                        .map_or(0, |c| c.text.as_deref().map_or(0, str::len)),
                    _ => 0,
                };
                outbox.send_for(&ctx, &frame.message, bytes).await;
            }
            None => {
                outbox.send(&frame.message).await;
            }
        }
    };
    link.ended.cancel();
    let _ = sub.unsubscribe().await;
    if let Some(last) = held.take() {
        last.send(&link).await;
    }
    if lost {
        let mut ends: Vec<(String, Option<Arc<RequestCtx>>)> = open.into_iter().collect();
        ends.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, ctx) in ends {
            if ctx.is_none_or(|c| link.inflight.finish(&c)) {
                outbox
                    .send(&ServerMessage::Error(
                        ErrorPayload::new(ErrorCode::ServerBusy, FORWARD_LOST)
                            .with_request(Some(id)),
                    ))
                    .await;
            }
        }
    }
}

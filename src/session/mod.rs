//! The per-connection session: its state machine and the task that drives it.
//!
//! [`run`] reads [`Inbound`] frames from any `Stream` (the WebSocket in production, a channel in
//! tests) and answers through an [`Outbox`]; it never imports axum or rusqlite. The states are
//! types: `Unregistered` (only REGISTER and HEALTH_CHECK served, registration
//! deadline running) becomes a `Session` on REGISTER (attributes, requests in flight,
//! heartbeats, idle expiry), which may be *draining* (server shutdown: SHUTDOWN sent, no new
//! requests, in-flight ones may finish within the grace) → closed.
//!
//! Every request in flight has a child token of the connection's token; INTERRUPT cancels one or
//! all of them, closing the session cancels every one.
//!
//! The handlers are split by concern: `register` (REGISTER, authentication, admission),
//! `requests` (REQUEST, attributes, spawning the pipeline), `voice` (uploads, binary frames,
//! live STT), `control` (INTERRUPT, SESSION_QUERY, SHUTDOWN, heartbeats and expiry, drain),
//! `text` (what the visitor reads), `resume` (resumable sessions, the parked session, takeover
//! by a new socket). This file holds the event loop of a registered session.
//!
//! A session outlives its socket when resume is on: a socket that drops *parks* the session
//! (`resume::park`) instead of ending it; its requests keep running (their tokens are children
//! of the session's token, not of the socket's) and their frames are kept by the session's
//! outbox until a new socket resumes it or the window runs out.

mod control;
mod register;
mod requests;
pub mod resume;
mod text;
pub mod timers;
pub mod upload;
mod voice;

#[cfg(test)]
mod testkit;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::pipeline::history::History;
use crate::protocol::{
    ClientFrame, ClientMessage, DecodeError, ErrorCode, ErrorPayload, HealthCheckAck,
    HealthCheckPayload, ServerMessage, decode_client,
};
use crate::request::attributes::Attributes;
use crate::request::inflight::InFlight;
use crate::request::outbox::Outbox;
use register::{SessionSlot, Unregistered};
use resume::{Takeover, Takeovers};
use timers::Liveness;
use voice::OpenUpload;

/// A frame from the client, transport-neutral.
#[derive(Debug, Clone)]
pub enum Inbound {
    Text(String),
    Binary(Bytes),
    /// A WebSocket pong with the mark its payload carries (8 bytes, big-endian; None for any
    /// other payload): when it echoes the outbox's last ping, the client has every frame
    /// written before it.
    Pong(Option<u64>),
    /// The transport failed to read a frame (e.g. invalid UTF-8 in a text frame, RFC 6455
    /// §8.1); the connection is closed with this code. Always the last item.
    Broken {
        code: u16,
        reason: String,
    },
}

/// WebSocket close codes used when the server ends a connection.
pub mod close_code {
    pub const NORMAL: u16 = 1000;
    pub const GOING_AWAY: u16 = 1001;
    pub const POLICY: u16 = 1008;
}

/// What a handler tells the event loop.
enum Flow {
    Continue,
    /// Close the socket and end the session.
    Close(u16, String),
    /// Close the socket; the session may be resumed (parked when resume is on).
    Drop(u16, String),
}

/// How a registered session's time on one socket ended.
enum Exit {
    Ended,
    /// The socket is gone; the session lives on if it can be resumed.
    Dropped,
    /// A new socket resumed the session: it is handed over.
    TakenOver(Takeover),
}

/// How often, at most, a session with replies in flight asks its client (a WebSocket ping) to
/// acknowledge the frames written so far, so the replay buffer can let them go.
const ACK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// How long after a request ended its snapshot is written (its final frame and turn come just
/// after it leaves the in-flight set).
const SNAPSHOT_SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

/// The connection, in every state.
struct Conn {
    app: Arc<AppState>,
    outbox: Outbox,
    /// The connection's token (child of the server's hard stop); cancelling it ends every
    /// request of this connection.
    token: CancellationToken,
    peer: IpAddr,
}

impl Conn {
    async fn send(&self, msg: ServerMessage) -> bool {
        self.outbox.send(&msg).await
    }

    async fn error(&self, e: ErrorPayload) {
        self.send(ServerMessage::Error(e)).await;
    }

    async fn health_check(&self, p: HealthCheckPayload) -> Flow {
        let fields = p.check_fields.unwrap_or_default();
        let health_status = self.app.health(&fields);
        self.send(ServerMessage::HealthCheckAck(HealthCheckAck {
            health_status,
        }))
        .await;
        Flow::Continue
    }

    /// Checks a text frame's size and decodes it; on failure answers the ERROR itself. A
    /// `request_id` that belongs to a request in flight is left out of that ERROR (an ERROR
    /// with a request_id ends that request for the client).
    async fn decode(&self, text: &str, inflight: Option<&InFlight>) -> Option<ClientFrame> {
        let max = self.app.config.limits.max_text_frame_bytes;
        if text.len() > max {
            self.error(ErrorPayload::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "text frame of {} bytes exceeds the limit of {max} bytes",
                    text.len()
                ),
            ))
            .await;
            return None;
        }
        match decode_client(text) {
            Ok(f) => Some(f),
            Err(e) => {
                self.frame_error(e, inflight).await;
                None
            }
        }
    }

    async fn frame_error(&self, mut e: DecodeError, inflight: Option<&InFlight>) {
        if let (Some(id), Some(f)) = (&e.request_id, inflight)
            && f.contains(id)
        {
            e.detail = format!("{} (request_id {id:?})", e.detail);
            e.request_id = None;
        }
        self.error(e.into_payload()).await;
    }

    /// Ends the connection: the close frame (if the server ends it), then the socket's token
    /// (its writer; the requests of a registered session hang off the session's own token).
    async fn end(&self, close: Option<(u16, String)>, label: &str) {
        if let Some((code, reason)) = close {
            tracing::info!(session = %label, code, %reason, "closing connection");
            self.outbox.close(code, &reason).await;
        } else {
            tracing::info!(session = %label, "connection ended");
        }
        self.token.cancel();
    }
}

/// Drives one connection until it closes. The caller owns the writer task.
pub async fn run<S>(
    mut inbound: S,
    outbox: Outbox,
    token: CancellationToken,
    peer: IpAddr,
    app: Arc<AppState>,
) where
    S: Stream<Item = Inbound> + Unpin,
{
    let conn = Conn {
        app,
        outbox,
        token,
        peer,
    };
    // This future lives as long as the connection, and its size is the largest state of any
    // await in it: the ones that happen once (registration with authentication, a resume, the
    // end) are boxed, so an idle session holds only the event loop's own state.
    let registering = Box::pin(Unregistered::new(conn).drive(&mut inbound));
    let Some(mut session) = registering.await else {
        return;
    };
    resume::save(&session, false);
    match session.drive(&mut inbound).await {
        Exit::Ended => {} // dropping the session ends it
        Exit::Dropped => Box::pin(session.park_or_end()).await,
        Exit::TakenOver(t) => {
            session.conn.outbox.detach();
            if let Err(session) = t.reply.send(session) {
                Box::pin(session.park_or_end()).await;
            }
        }
    }
}

/// A registered session: the connection after a successful REGISTER.
struct Session {
    conn: Conn,
    id: String,
    create_time: i64,
    attrs: Attributes,
    inflight: InFlight,
    history: Arc<Mutex<History>>,
    live: Liveness,
    /// The one open voice upload, if any; its request is in `inflight`. Boxed: an idle session
    /// (nearly every session, nearly all the time) keeps one pointer, not the upload's state.
    upload: Option<Box<OpenUpload>>,
    /// Receives a reason when the server ends this session from outside (credential revoked).
    kick: Arc<crate::app::KickCell>,
    /// Set once server shutdown has begun: when the grace ends.
    drain_deadline: Option<Instant>,
    /// The session's own token (child of the server's hard stop): the parent of every request's
    /// token. Cancelled when the session ends (dropped), not when a socket drops.
    token: CancellationToken,
    /// Takeovers by a resuming socket (None: resume is off).
    takeovers: Option<Arc<Takeovers>>,
    /// When the next acknowledgement ping may go.
    next_ack: Instant,
    _slot: SessionSlot,
}

impl Drop for Session {
    /// The session ends (not handed over: a handover moves it): its requests stop and it can no
    /// longer be resumed.
    fn drop(&mut self) {
        self.token.cancel();
        if self.takeovers.is_some() {
            self.conn.app.resumable.remove(&self.id);
            if let Some(c) = &self.conn.app.cluster {
                c.forget(&self.id);
            }
        }
    }
}

enum Event {
    Cancelled,
    Frame(Option<Inbound>),
    Timer,
    DrainStart,
    Removed,
    Kicked(String),
    Takeover(Takeover),
    Ack,
    /// Time to write the session's snapshot for the cluster (`resume::save`).
    Snapshot,
}

/// The next takeover, or pending forever when resume is off.
async fn next_takeover(takeovers: Option<Arc<Takeovers>>) -> Takeover {
    match takeovers {
        Some(t) => t.next().await,
        None => std::future::pending().await,
    }
}

impl Session {
    /// The event loop of a registered session on one socket; returns when the socket is closed
    /// (the session ended, dropped, or taken over by another socket).
    async fn drive<S>(&mut self, inbound: &mut S) -> Exit
    where
        S: Stream<Item = Inbound> + Unpin,
    {
        // With a cluster: when to write the snapshot (after a client frame, or shortly after a
        // request ended, once its turn is in the history).
        let snapshots = self.conn.app.cluster.is_some() && self.takeovers.is_some();
        let mut snapshot_due: Option<Instant> = None;
        let (close, exit) = loop {
            let deadline = self.next_deadline();
            let token = self.conn.token.clone();
            let draining = self.conn.app.draining.clone();
            let drain_started = self.drain_deadline.is_some();
            let inflight = self.inflight.clone();
            let acking = self.takeovers.is_some()
                && (!self.inflight.is_empty() || self.conn.outbox.has_kept());
            let event = tokio::select! {
                biased;
                _ = token.cancelled() => Event::Cancelled,
                reason = self.kick.kicked() => Event::Kicked(reason),
                t = next_takeover(self.takeovers.clone()) => Event::Takeover(t),
                _ = draining.cancelled(), if !drain_started => Event::DrainStart,
                _ = inflight.removed(), if drain_started || snapshots => Event::Removed,
                f = inbound.next() => Event::Frame(f),
                _ = tokio::time::sleep_until(deadline) => Event::Timer,
                _ = tokio::time::sleep_until(self.next_ack), if acking => Event::Ack,
                _ = tokio::time::sleep_until(snapshot_due.unwrap_or(deadline)), if snapshot_due.is_some() => Event::Snapshot,
            };
            if snapshots && matches!(event, Event::Frame(Some(Inbound::Text(_)))) {
                snapshot_due = Some(Instant::now());
            }
            let flow = match event {
                Event::Cancelled if self.token.is_cancelled() => break (None, Exit::Ended),
                Event::Cancelled | Event::Frame(None) => break (None, Exit::Dropped),
                Event::Takeover(t) => {
                    let reason = resume::close_code::RESUMED_ELSEWHERE_REASON.to_string();
                    break (
                        Some((resume::close_code::RESUMED_ELSEWHERE, reason)),
                        Exit::TakenOver(t),
                    );
                }
                // The handlers' futures are boxed: inlined, the largest of them would size the
                // state every idle session keeps while it waits here (see `run`).
                Event::Frame(Some(Inbound::Text(t))) => Box::pin(self.on_text(t)).await,
                Event::Frame(Some(Inbound::Binary(b))) => Box::pin(self.on_binary(b)).await,
                Event::Frame(Some(Inbound::Pong(mark))) => {
                    self.conn.outbox.pong(mark);
                    Flow::Continue
                }
                Event::Frame(Some(Inbound::Broken { code, reason })) => Flow::Drop(code, reason),
                Event::Timer => Box::pin(self.on_timer()).await,
                Event::DrainStart => Box::pin(self.on_drain_start()).await,
                Event::Removed if !drain_started => {
                    snapshot_due = Some(Instant::now() + SNAPSHOT_SETTLE);
                    Flow::Continue
                }
                Event::Removed => self.drain_check(),
                Event::Snapshot => {
                    snapshot_due = None;
                    resume::save(self, false);
                    Flow::Continue
                }
                Event::Kicked(reason) => Box::pin(self.on_kicked(reason)).await,
                Event::Ack => {
                    self.conn.outbox.ping();
                    self.next_ack = Instant::now() + ACK_INTERVAL;
                    Flow::Continue
                }
            };
            match flow {
                Flow::Continue => {}
                Flow::Close(code, reason) => break (Some((code, reason)), Exit::Ended),
                Flow::Drop(code, reason) => break (Some((code, reason)), Exit::Dropped),
            }
        };
        Box::pin(self.conn.end(close, &self.id)).await;
        exit
    }

    /// The socket is gone: parks the session for a resume when it can be resumed, else ends it.
    async fn park_or_end(mut self: Box<Self>) {
        let app = self.conn.app.clone();
        let window = app.config.session.resume_window_seconds;
        if window == 0
            || self.takeovers.is_none()
            || self.token.is_cancelled()
            || app.draining.is_cancelled()
        {
            return; // dropped: the session ends
        }
        self.conn.outbox.detach();
        // An upload cannot go on without its socket: its request ends (the client hears of
        // it on resume).
        if self.upload.is_some() {
            self.fail_upload(
                crate::protocol::ErrorCode::StreamSeqError,
                "the connection dropped during the voice upload; it was discarded".into(),
            )
            .await;
        }
        app.tracker
            .spawn(resume::park(self, std::time::Duration::from_secs(window)));
    }

    fn next_deadline(&self) -> Instant {
        let base = match &self.upload {
            Some(u) => self
                .live
                .next_deadline()
                .min(u.touched + self.conn.app.deps.voice.upload_idle_timeout),
            None => self.live.next_deadline(),
        };
        match self.drain_deadline {
            Some(d) => base.min(d),
            None => base,
        }
    }

    async fn on_text(&mut self, text: String) -> Flow {
        let Some(frame) = self.conn.decode(&text, Some(&self.inflight)).await else {
            return Flow::Continue;
        };
        if let ClientMessage::Register(_) = frame.message {
            // Before the session id check: a REGISTER carries `session_id: ""` by rule.
            self.conn
                .error(ErrorPayload::new(
                    ErrorCode::MalformedPayload,
                    "this connection is already registered; the session is unchanged",
                ))
                .await;
            return Flow::Continue;
        }
        let sid = frame.session_id.as_deref().unwrap_or("");
        let sid_ok = sid == self.id
            || (sid.is_empty() && matches!(frame.message, ClientMessage::HealthCheck(_)));
        if !sid_ok {
            let detail = if sid.is_empty() {
                "field `session_id`: required after REGISTER"
            } else {
                "field `session_id`: does not match this connection's session"
            };
            self.conn
                .error(ErrorPayload::new(ErrorCode::SessionInvalid, detail))
                .await;
            return Flow::Continue;
        }
        self.live.touch(Instant::now());
        match frame.message {
            ClientMessage::Register(_) => Flow::Continue, // answered above
            ClientMessage::Request(p) => self.on_request(p).await,
            ClientMessage::Interrupt(p) => self.on_interrupt(p).await,
            ClientMessage::SessionQuery(p) => self.on_query(p).await,
            ClientMessage::Shutdown(p) => self.on_client_shutdown(p),
            ClientMessage::HeartbeatReply(_) => Flow::Continue,
            ClientMessage::HealthCheck(p) => self.conn.health_check(p).await,
        }
    }
}

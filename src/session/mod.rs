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
//! `text` (what the visitor reads). This file holds the event loop of a registered session.

mod control;
mod register;
mod requests;
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
use timers::Liveness;
use voice::OpenUpload;

/// A frame from the client, transport-neutral.
#[derive(Debug, Clone)]
pub enum Inbound {
    Text(String),
    Binary(Bytes),
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
    Close(u16, String),
}

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

    /// Ends the connection: the close frame (if the server ends it), then every request.
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
    if let Some(mut session) = Unregistered::new(conn).drive(&mut inbound).await {
        session.drive(&mut inbound).await;
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
    /// The one open voice upload, if any; its request is in `inflight`.
    upload: Option<OpenUpload>,
    /// Receives a reason when the server ends this session from outside (credential revoked).
    kick: tokio::sync::mpsc::Receiver<String>,
    /// Set once server shutdown has begun: when the grace ends.
    drain_deadline: Option<Instant>,
    _slot: SessionSlot,
}

enum Event {
    Cancelled,
    Frame(Option<Inbound>),
    Timer,
    DrainStart,
    Removed,
    Kicked(String),
}

impl Session {
    /// The event loop of a registered session; returns when the connection is closed.
    async fn drive<S>(&mut self, inbound: &mut S)
    where
        S: Stream<Item = Inbound> + Unpin,
    {
        let close = loop {
            let deadline = self.next_deadline();
            let token = self.conn.token.clone();
            let draining = self.conn.app.draining.clone();
            let drain_started = self.drain_deadline.is_some();
            let inflight = self.inflight.clone();
            let event = tokio::select! {
                biased;
                _ = token.cancelled() => Event::Cancelled,
                Some(reason) = self.kick.recv() => Event::Kicked(reason),
                _ = draining.cancelled(), if !drain_started => Event::DrainStart,
                _ = inflight.removed(), if drain_started => Event::Removed,
                f = inbound.next() => Event::Frame(f),
                _ = tokio::time::sleep_until(deadline) => Event::Timer,
            };
            let flow = match event {
                Event::Cancelled | Event::Frame(None) => break None,
                Event::Frame(Some(Inbound::Text(t))) => self.on_text(t).await,
                Event::Frame(Some(Inbound::Binary(b))) => self.on_binary(b).await,
                Event::Frame(Some(Inbound::Broken { code, reason })) => Flow::Close(code, reason),
                Event::Timer => self.on_timer().await,
                Event::DrainStart => self.on_drain_start().await,
                Event::Removed => self.drain_check(),
                Event::Kicked(reason) => self.on_kicked(reason).await,
            };
            if let Flow::Close(code, reason) = flow {
                break Some((code, reason));
            }
        };
        self.conn.end(close, &self.id).await;
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
            ClientMessage::Register(_) => {
                self.conn
                    .error(ErrorPayload::new(
                        ErrorCode::MalformedPayload,
                        "this connection is already registered; the session is unchanged",
                    ))
                    .await;
                Flow::Continue
            }
            ClientMessage::Request(p) => self.on_request(p).await,
            ClientMessage::Interrupt(p) => self.on_interrupt(p).await,
            ClientMessage::SessionQuery(p) => self.on_query(p).await,
            ClientMessage::Shutdown(p) => self.on_client_shutdown(p),
            ClientMessage::HeartbeatReply(_) => Flow::Continue,
            ClientMessage::HealthCheck(p) => self.conn.health_check(p).await,
        }
    }
}

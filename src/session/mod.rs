//! The per-connection session: its state machine and the task that drives it.
//!
//! [`run`] reads [`Inbound`] frames from any `Stream` (the WebSocket in production, a channel in
//! tests) and answers through an [`Outbox`]; it never imports axum or rusqlite. States:
//! *unregistered* (only REGISTER and HEALTH_CHECK served, registration deadline running) →
//! *registered* (attributes, requests in flight, heartbeats, idle expiry) → *draining* (server
//! shutdown: SHUTDOWN sent, no new requests, in-flight ones may finish within the grace) → closed.
//!
//! Every request in flight has a child token of the connection's token; INTERRUPT cancels one or
//! all of them, closing the session cancels every one.

pub mod attributes;
pub mod inflight;
pub mod outbox;
pub mod timers;
pub mod upload;

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::auth::{AuthError, Principal};
use crate::config::secs;
use crate::pipeline::history::History;
use crate::pipeline::speech::LiveStt;
use crate::pipeline::{self, Input, Job};
use crate::protocol::{
    AckStatus, ClientMessage, DecodeError, ErrorCode, ErrorPayload, HealthCheckAck, Heartbeat,
    InterruptAck, InterruptPayload, RegisterAck, RegisterPayload, RequestKind, RequestPayload,
    Response, ResponseContent, ServerMessage, SessionData, SessionInfo, SessionQueryPayload,
    SessionWarn, ShutdownPayload, decode_client,
};
use attributes::{Attributes, apply_function_op};
use inflight::{InFlight, InsertError, RequestCtx};
use outbox::Outbox;
use timers::{Liveness, TimerEvent};
use upload::{Upload, UploadError, UploadMode};

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

/// Registered-session state.
struct Session {
    id: String,
    principal: Principal,
    create_time: i64,
    attrs: Attributes,
    inflight: InFlight,
    history: Arc<Mutex<History>>,
    live: Liveness,
    /// The one open voice upload, if any; its request is in `inflight`.
    upload: Option<(Upload, Arc<RequestCtx>)>,
    /// Receives a reason when the server ends this session from outside (credential revoked).
    kick: tokio::sync::mpsc::Receiver<String>,
    /// The open upload's streaming recognition (providers that take audio as it arrives).
    /// Dropping it closes the upstream connection; it is always cleared with `upload`.
    upload_live: Option<LiveStt>,
    /// When the open upload last received something (the idle timeout runs from here).
    upload_touched: Instant,
    _slot: SessionSlot,
}

/// Holds one unit of the server's session count and the session's registry entry.
struct SessionSlot(Arc<AppState>, String);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.stats.sessions.fetch_sub(1, Ordering::Relaxed);
        self.0.sessions.remove(&self.1);
    }
}

enum Flow {
    Continue,
    Close(u16, String),
}

enum Event {
    Cancelled,
    Frame(Option<Inbound>),
    Timer,
    DrainStart,
    Removed,
    Kicked(String),
}

struct Conn {
    app: Arc<AppState>,
    outbox: Outbox,
    /// The connection's token (child of the server's hard stop); cancelling it ends every
    /// request of this connection.
    token: CancellationToken,
    peer: IpAddr,
    session: Option<Session>,
    register_deadline: Instant,
    /// Set once server shutdown has begun: when the grace ends.
    drain_deadline: Option<Instant>,
}

/// Drives one connection until it closes. The caller owns the writer task.
pub async fn run<S>(
    inbound: S,
    outbox: Outbox,
    token: CancellationToken,
    peer: IpAddr,
    app: Arc<AppState>,
) where
    S: Stream<Item = Inbound> + Unpin,
{
    let register_deadline =
        Instant::now() + Duration::from_secs(app.config.session.register_timeout_seconds);
    let mut conn = Conn {
        app,
        outbox,
        token,
        peer,
        session: None,
        register_deadline,
        drain_deadline: None,
    };
    conn.drive(inbound).await;
}

impl Conn {
    async fn drive<S>(&mut self, mut inbound: S)
    where
        S: Stream<Item = Inbound> + Unpin,
    {
        let flow = loop {
            let deadline = self.next_deadline();
            let token = self.token.clone();
            let draining = self.app.draining.clone();
            let drain_started = self.drain_deadline.is_some();
            let inflight = self.session.as_ref().map(|s| s.inflight.clone());
            let kick = self.session.as_mut().map(|s| &mut s.kick);
            let event = tokio::select! {
                biased;
                _ = token.cancelled() => Event::Cancelled,
                Some(reason) = async { match kick { Some(k) => k.recv().await, None => std::future::pending().await } } => Event::Kicked(reason),
                _ = draining.cancelled(), if !drain_started => Event::DrainStart,
                _ = async { match &inflight { Some(f) => f.removed().await, None => std::future::pending().await } }, if drain_started => Event::Removed,
                f = inbound.next() => Event::Frame(f),
                _ = tokio::time::sleep_until(deadline) => Event::Timer,
            };
            let flow = match event {
                Event::Cancelled => break None,
                Event::Frame(None) => break None,
                Event::Frame(Some(Inbound::Text(t))) => self.on_text(t).await,
                Event::Frame(Some(Inbound::Binary(b))) => self.on_binary(b).await,
                Event::Frame(Some(Inbound::Broken { code, reason })) => Flow::Close(code, reason),
                Event::Timer => self.on_timer().await,
                Event::DrainStart => self.on_drain_start().await,
                Event::Removed => self.drain_check(),
                Event::Kicked(reason) => {
                    self.send(ServerMessage::Shutdown(ShutdownPayload {
                        reason: reason.clone(),
                    }))
                    .await;
                    Flow::Close(close_code::POLICY, reason)
                }
            };
            if let Flow::Close(code, reason) = flow {
                break Some((code, reason));
            }
        };
        if let Some((code, reason)) = flow {
            tracing::info!(session = %self.session_label(), code, %reason, "closing connection");
            self.outbox.close(code, &reason).await;
        } else {
            tracing::info!(session = %self.session_label(), "connection ended");
        }
        // Ends every request of this connection at once.
        self.token.cancel();
    }

    fn session_label(&self) -> String {
        self.session
            .as_ref()
            .map(|s| s.id.clone())
            .unwrap_or_else(|| "-".into())
    }

    fn next_deadline(&self) -> Instant {
        let base = match &self.session {
            Some(s) if s.upload.is_some() => s
                .live
                .next_deadline()
                .min(s.upload_touched + self.app.deps.voice.upload_idle_timeout),
            Some(s) => s.live.next_deadline(),
            None => self.register_deadline,
        };
        match self.drain_deadline {
            Some(d) => base.min(d),
            None => base,
        }
    }

    async fn send(&self, msg: ServerMessage) -> bool {
        self.outbox.send(&msg).await
    }

    async fn error(&self, e: ErrorPayload) {
        self.send(ServerMessage::Error(e)).await;
    }

    /// An error about a frame whose `request_id` may belong to a request still in flight: then
    /// the id is left out (an ERROR with a request_id ends that request for the client).
    async fn frame_error(&self, mut e: DecodeError) {
        if let (Some(id), Some(s)) = (&e.request_id, &self.session)
            && s.inflight.contains(id)
        {
            e.detail = format!("{} (request_id {id:?})", e.detail);
            e.request_id = None;
        }
        self.error(e.into_payload()).await;
    }

    async fn on_timer(&mut self) -> Flow {
        let now = Instant::now();
        if let Some(d) = self.drain_deadline
            && now >= d
        {
            return Flow::Close(close_code::GOING_AWAY, "server shutting down".into());
        }
        if let Some(s) = self.session.as_ref()
            && s.upload.is_some()
            && now >= s.upload_touched + self.app.deps.voice.upload_idle_timeout
        {
            let idle = self.app.deps.voice.upload_idle_timeout.as_secs_f64();
            self.fail_upload(
                ErrorCode::RequestTimeout,
                format!("the voice upload received nothing for {idle} s; it was discarded"),
            )
            .await;
        }
        let Some(s) = self.session.as_mut() else {
            if now >= self.register_deadline {
                self.send(ServerMessage::Shutdown(ShutdownPayload {
                    reason: "no REGISTER received in time".into(),
                }))
                .await;
                return Flow::Close(close_code::POLICY, "registration timeout".into());
            }
            return Flow::Continue;
        };
        let events = s.live.due(now);
        for ev in events {
            match ev {
                TimerEvent::Heartbeat { remaining_seconds } => {
                    self.send(ServerMessage::Heartbeat(Heartbeat { remaining_seconds }))
                        .await;
                }
                TimerEvent::Warn { remaining_seconds } => {
                    self.send(ServerMessage::SessionWarn(SessionWarn {
                        warn_type: "EXPIRE_SOON".into(),
                        remaining_seconds,
                        message: format!(
                            "会话即将在 {} 后超时，请发送请求刷新",
                            human_duration(remaining_seconds)
                        ),
                    }))
                    .await;
                }
                TimerEvent::Unresponsive => {
                    tracing::info!(session = %self.session_label(), "no client frame for several heartbeats; closing");
                    self.send(ServerMessage::Shutdown(ShutdownPayload {
                        reason: "no reply to heartbeats".into(),
                    }))
                    .await;
                    return Flow::Close(close_code::GOING_AWAY, "no reply to heartbeats".into());
                }
                TimerEvent::Expire => {
                    self.send(ServerMessage::Shutdown(ShutdownPayload {
                        reason: "会话超时".into(),
                    }))
                    .await;
                    return Flow::Close(close_code::NORMAL, "session expired".into());
                }
            }
        }
        Flow::Continue
    }

    async fn on_drain_start(&mut self) -> Flow {
        self.send(ServerMessage::Shutdown(ShutdownPayload {
            reason: "服务器正在关闭 (server shutting down)".into(),
        }))
        .await;
        self.drain_deadline =
            Some(Instant::now() + secs(self.app.config.server.shutdown_grace_seconds));
        self.drain_check()
    }

    fn drain_check(&self) -> Flow {
        let idle = self.session.as_ref().is_none_or(|s| s.inflight.is_empty());
        if idle {
            Flow::Close(close_code::GOING_AWAY, "server shutting down".into())
        } else {
            Flow::Continue
        }
    }

    async fn on_binary(&mut self, data: Bytes) -> Flow {
        let max = self.app.config.limits.max_binary_frame_bytes;
        let Some(s) = self.session.as_mut() else {
            self.error(ErrorPayload::new(
                ErrorCode::SessionInvalid,
                "binary frame before REGISTER; register first",
            ))
            .await;
            return Flow::Continue;
        };
        s.live.touch(Instant::now());
        if data.len() > max {
            let detail = format!(
                "binary frame of {} bytes exceeds the limit of {max} bytes",
                data.len()
            );
            if self.session.as_ref().is_some_and(|s| s.upload.is_some()) {
                self.fail_upload(
                    ErrorCode::PayloadTooLarge,
                    format!("{detail}; the upload was discarded"),
                )
                .await;
            } else {
                self.error(ErrorPayload::new(ErrorCode::PayloadTooLarge, detail))
                    .await;
            }
            return Flow::Continue;
        }
        let res = match &mut s.upload {
            None => {
                self.error(ErrorPayload::new(
                    ErrorCode::StreamSeqError,
                    "binary frame with no open VOICE + BINARY upload (send the start REQUEST first)",
                ))
                .await;
                return Flow::Continue;
            }
            Some((u, _)) => u.push_binary(&data),
        };
        match res {
            Ok(()) => {
                s.upload_touched = Instant::now();
                if let Some(l) = &s.upload_live {
                    l.feed(&data);
                }
            }
            Err(e) => self.fail_upload_with(e).await,
        }
        Flow::Continue
    }

    async fn on_text(&mut self, text: String) -> Flow {
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
            return Flow::Continue;
        }
        let frame = match decode_client(&text) {
            Ok(f) => f,
            Err(e) => {
                self.frame_error(e).await;
                return Flow::Continue;
            }
        };
        let sid = frame.session_id.as_deref().unwrap_or("");
        let Some(session) = self.session.as_mut() else {
            return match frame.message {
                ClientMessage::Register(p) => self.register(sid, p).await,
                ClientMessage::HealthCheck(p) => {
                    let fields = p.check_fields.unwrap_or_default();
                    let h = self.app.health(&fields);
                    self.send(ServerMessage::HealthCheckAck(HealthCheckAck {
                        health_status: h,
                    }))
                    .await;
                    Flow::Continue
                }
                other => {
                    self.error(ErrorPayload::new(
                        ErrorCode::SessionInvalid,
                        format!("{} before REGISTER; register first", other.msg_type()),
                    ))
                    .await;
                    Flow::Continue
                }
            };
        };
        let sid_ok = sid == session.id
            || (sid.is_empty() && matches!(frame.message, ClientMessage::HealthCheck(_)));
        if !sid_ok {
            let detail = if sid.is_empty() {
                "field `session_id`: required after REGISTER".to_string()
            } else {
                "field `session_id`: does not match this connection's session".to_string()
            };
            self.error(ErrorPayload::new(ErrorCode::SessionInvalid, detail))
                .await;
            return Flow::Continue;
        }
        session.live.touch(Instant::now());
        match frame.message {
            ClientMessage::Register(_) => {
                self.error(ErrorPayload::new(
                    ErrorCode::MalformedPayload,
                    "this connection is already registered; the session is unchanged",
                ))
                .await;
                Flow::Continue
            }
            ClientMessage::Request(p) => self.on_request(p).await,
            ClientMessage::Interrupt(p) => self.on_interrupt(p).await,
            ClientMessage::SessionQuery(p) => self.on_query(p).await,
            ClientMessage::Shutdown(p) => {
                tracing::info!(session = %session.id, reason = %p.reason, "client SHUTDOWN");
                Flow::Close(close_code::NORMAL, "client shutdown".into())
            }
            ClientMessage::HeartbeatReply(_) => Flow::Continue,
            ClientMessage::HealthCheck(p) => {
                let fields = p.check_fields.unwrap_or_default();
                let h = self.app.health(&fields);
                self.send(ServerMessage::HealthCheckAck(HealthCheckAck {
                    health_status: h,
                }))
                .await;
                Flow::Continue
            }
        }
    }

    async fn register(&mut self, sid: &str, p: RegisterPayload) -> Flow {
        if !sid.is_empty() {
            self.error(ErrorPayload::new(
                ErrorCode::MalformedPayload,
                "field `session_id`: must be empty in REGISTER",
            ))
            .await;
            return Flow::Continue;
        }
        if self.app.draining.is_cancelled() {
            self.error(ErrorPayload::new(
                ErrorCode::ServerBusy,
                "the server is shutting down",
            ))
            .await;
            return Flow::Continue;
        }
        let auth = tokio::select! {
            _ = self.token.cancelled() => return Flow::Close(close_code::GOING_AWAY, "closed".into()),
            r = tokio::time::timeout(Duration::from_secs(10), self.app.auth.authenticate(self.peer, &p.auth)) => r,
        };
        let principal = match auth {
            Ok(Ok(principal)) => principal,
            Ok(Err(e @ (AuthError::Invalid | AuthError::Locked))) => {
                tracing::info!(peer = %self.peer, reason = %e, "REGISTER refused");
                let detail = match e {
                    AuthError::Locked => {
                        "too many failed attempts from this address; try again later"
                    }
                    _ => "invalid credentials",
                };
                self.error(ErrorPayload::new(ErrorCode::AuthFailed, detail))
                    .await;
                return Flow::Close(close_code::POLICY, "authentication failed".into());
            }
            Ok(Err(AuthError::Internal(e))) => {
                tracing::error!(error = %e, "authentication backend failed");
                self.error(ErrorPayload::new(
                    ErrorCode::InternalError,
                    "authentication is unavailable; retry later",
                ))
                .await;
                return Flow::Continue;
            }
            Err(_) => {
                self.error(ErrorPayload::new(
                    ErrorCode::RequestTimeout,
                    "authentication took too long; retry",
                ))
                .await;
                return Flow::Continue;
            }
        };
        let max = self.app.config.limits.max_sessions as u64;
        if self.app.stats.sessions.fetch_add(1, Ordering::Relaxed) >= max {
            self.app.stats.sessions.fetch_sub(1, Ordering::Relaxed);
            self.error(ErrorPayload::new(
                ErrorCode::ServerBusy,
                format!("the server holds its maximum of {max} sessions; retry later"),
            ))
            .await;
            return Flow::Continue;
        }
        let cfg = &self.app.config.session;
        let id = crate::util::random_id("sess_");
        let slot = SessionSlot(self.app.clone(), id.clone());
        let (kick_tx, kick) = tokio::sync::mpsc::channel(1);
        self.app.sessions.insert(
            &id,
            crate::app::SessionEntry {
                principal: principal.clone(),
                kick: kick_tx,
            },
        );
        let now = Instant::now();
        let session = Session {
            id: id.clone(),
            principal,
            create_time: crate::util::now_ms(),
            attrs: Attributes {
                platform: p.platform,
                require_tts: p.require_tts,
                enable_srs: p.enable_srs.unwrap_or(true),
                functions: p.function_calling,
            },
            inflight: InFlight::default(),
            history: Arc::new(Mutex::new(History::new(
                self.app.config.llm.history_messages,
            ))),
            live: Liveness::new(
                now,
                Duration::from_secs(cfg.timeout_seconds),
                Duration::from_secs(cfg.heartbeat_interval_seconds),
                Duration::from_secs(cfg.warn_before_seconds),
            )
            .with_max_missed(cfg.max_missed_heartbeats),
            upload: None,
            kick,
            upload_live: None,
            upload_touched: now,
            _slot: slot,
        };
        tracing::info!(session = %id, who = %session.principal.label(), platform = ?p.platform, peer = %self.peer, "session registered");
        self.outbox.set_session_id(&id);
        self.session = Some(session);
        self.send(ServerMessage::RegisterAck(RegisterAck {
            status: "SUCCESS".into(),
            message: "会话创建成功".into(),
            session_id: id,
            session_timeout_seconds: cfg.timeout_seconds,
            capabilities: Some(crate::pipeline::capabilities::of(&self.app.deps)),
        }))
        .await;
        Flow::Continue
    }

    async fn on_query(&mut self, p: SessionQueryPayload) -> Flow {
        let s = self.session.as_ref().expect("registered");
        let fields = p.query_fields.unwrap_or_default();
        let want = |f: &str| fields.is_empty() || fields.iter().any(|x| x == f);
        let unknown: Vec<&str> = fields
            .iter()
            .map(String::as_str)
            .filter(|f| !SessionData::FIELDS.contains(f))
            .collect();
        let data = SessionData {
            platform: want("platform").then_some(s.attrs.platform),
            require_tts: want("require_tts").then_some(s.attrs.require_tts),
            enable_srs: want("enable_srs").then_some(s.attrs.enable_srs),
            function_calling: want("function_calling").then(|| s.attrs.functions.clone()),
            create_time: want("create_time").then_some(s.create_time),
            remaining_seconds: want("remaining_seconds")
                .then(|| s.live.remaining_seconds(Instant::now())),
        };
        let message = if unknown.is_empty() {
            "查询成功".to_string()
        } else {
            format!(
                "查询成功；已忽略未知字段 (unknown fields ignored): {}",
                unknown.join(", ")
            )
        };
        self.send(ServerMessage::SessionInfo(SessionInfo {
            status: "SUCCESS".into(),
            message,
            session_data: data,
        }))
        .await;
        Flow::Continue
    }

    async fn on_interrupt(&mut self, p: InterruptPayload) -> Flow {
        let received = std::time::Instant::now();
        let s = self.session.as_mut().expect("registered");
        let target = p.interrupt_request_id.filter(|id| !id.is_empty());
        let cancelled: Vec<Arc<RequestCtx>> = match &target {
            Some(id) => s.inflight.cancel(id).into_iter().collect(),
            None => s.inflight.cancel_all(),
        };
        if s.upload
            .as_ref()
            .is_some_and(|(_, ctx)| ctx.token.is_cancelled())
        {
            s.upload = None;
            s.upload_live = None;
        }
        let ids: Vec<String> = cancelled.iter().map(|c| c.request_id.clone()).collect();
        let (status, message) = if ids.is_empty() {
            let what = match &target {
                Some(id) => format!("请求 {id} 不存在或已完成 (not in flight)"),
                None => "没有进行中的请求 (nothing in flight)".to_string(),
            };
            (AckStatus::Failed, what)
        } else {
            (AckStatus::Success, format!("已中断 {} 个请求", ids.len()))
        };
        tracing::info!(session = %s.id, ?ids, reason = ?p.reason, "interrupt");
        self.send(ServerMessage::InterruptAck(InterruptAck {
            interrupted_request_ids: ids.clone(),
            status,
            message,
        }))
        .await;
        for id in &ids {
            self.send(ServerMessage::Response(Response::interrupted(id, p.reason)))
                .await;
            self.app
                .metrics
                .request(crate::metrics::Outcome::Interrupted);
        }
        self.app
            .metrics
            .interrupt_seconds
            .observe(received.elapsed().as_secs_f64());
        Flow::Continue
    }

    async fn on_request(&mut self, p: RequestPayload) -> Flow {
        let id = p.request_id.clone();
        if self.app.draining.is_cancelled() {
            self.error(
                ErrorPayload::new(
                    ErrorCode::ServerBusy,
                    "the server is shutting down; no new requests",
                )
                .with_request(Some(id)),
            )
            .await;
            return Flow::Continue;
        }
        let kind = match p.kind(self.app.config.limits.max_text_chars) {
            Ok(k) => k,
            Err(e) => {
                if self
                    .session
                    .as_ref()
                    .and_then(|s| s.upload.as_ref())
                    .is_some_and(|(u, _)| u.request_id == id)
                {
                    let code = e.code;
                    self.fail_upload(code, e.detail).await;
                } else {
                    self.frame_error(e).await;
                }
                return Flow::Continue;
            }
        };
        let starts_upload = matches!(
            kind,
            RequestKind::BinaryStart | RequestKind::VoiceChunk { seq: 0, .. }
        );
        let continues_upload = matches!(kind, RequestKind::BinaryEnd)
            || matches!(kind, RequestKind::VoiceChunk { seq, .. } if seq != 0);
        let s = self.session.as_mut().expect("registered");
        if starts_upload && let Some((open, _)) = &s.upload {
            let open_id = open.request_id.clone();
            self.fail_upload(
                ErrorCode::StreamSeqError,
                format!(
                    "upload {open_id:?} was still open when upload {id:?} started; it was discarded"
                ),
            )
            .await;
            if open_id != id {
                self.error(
                    ErrorPayload::new(
                        ErrorCode::StreamSeqError,
                        format!("upload {open_id:?} was still open; start again"),
                    )
                    .with_request(Some(id)),
                )
                .await;
            }
            return Flow::Continue;
        }
        let s = self.session.as_mut().expect("registered");
        if !continues_upload && s.inflight.contains(&id) {
            self.error(ErrorPayload::new(
                ErrorCode::MalformedPayload,
                format!("field `payload.request_id`: {id:?} is already in flight; use a new id"),
            ))
            .await;
            return Flow::Continue;
        }
        // Attributes first (spec §6.2 step 2), all or nothing.
        if let (Some(op), Some(list)) = (p.function_calling_op, &p.function_calling) {
            match apply_function_op(&s.attrs.functions, op, list) {
                Ok(new) => s.attrs.functions = new,
                Err(detail) => {
                    self.error(
                        ErrorPayload::new(ErrorCode::MalformedPayload, detail)
                            .with_request(Some(id)),
                    )
                    .await;
                    return Flow::Continue;
                }
            }
        }
        if let Some(v) = p.require_tts {
            s.attrs.require_tts = v;
        }
        if let Some(v) = p.enable_srs {
            s.attrs.enable_srs = v;
        }
        if p.clear_history == Some(true) {
            // A new Arc: replies still in flight record their turn in the old one, not here.
            s.history = crate::pipeline::capabilities::fresh_history(&self.app.deps);
        }
        match kind {
            RequestKind::AttributesOnly => {
                self.send(ServerMessage::Response(Response {
                    request_id: id,
                    text_stream_seq: Some(-1),
                    content: Some(ResponseContent::default()),
                    ..Default::default()
                }))
                .await;
            }
            RequestKind::Text(t) => {
                if let Some(ctx) = self.admit(&id).await {
                    self.spawn(ctx, Input::Text(t));
                }
            }
            RequestKind::FunctionResult(fr, t) => {
                if let Some(ctx) = self.admit(&id).await {
                    self.spawn(ctx, Input::FunctionResult(fr, t));
                }
            }
            RequestKind::VoiceWhole(b64) => {
                let pcm = upload::decode_b64(&b64).and_then(|pcm| {
                    let max = self.app.config.limits.max_upload_bytes;
                    if pcm.len() > max {
                        return Err(UploadError::TooLarge(format!(
                            "the upload exceeds {max} bytes"
                        )));
                    }
                    upload::check_pcm(&pcm).map(|_| pcm)
                });
                match pcm {
                    Ok(pcm) => {
                        if let Some(ctx) = self.admit(&id).await {
                            self.spawn(ctx, Input::Voice(pcm));
                        }
                    }
                    Err(e) => {
                        let (code, detail) = upload_error_code(e);
                        self.error(ErrorPayload::new(code, detail).with_request(Some(id)))
                            .await;
                    }
                }
            }
            RequestKind::BinaryStart | RequestKind::VoiceChunk { seq: 0, .. } => {
                let Some(ctx) = self.admit(&id).await else {
                    return Flow::Continue;
                };
                let mode = if matches!(kind, RequestKind::BinaryStart) {
                    UploadMode::Binary
                } else {
                    UploadMode::Base64Chunks
                };
                let mut up = Upload::new(&id, mode, self.app.config.limits.max_upload_bytes);
                let live = self
                    .app
                    .deps
                    .stt
                    .as_ref()
                    .filter(|stt| stt.streams_input())
                    .map(|stt| LiveStt::start(stt, &ctx));
                let s = self.session.as_mut().expect("registered");
                s.upload_touched = Instant::now();
                if let RequestKind::VoiceChunk { data, .. } = &kind
                    && let Err(e) = up.push_chunk(0, data.as_deref())
                {
                    s.upload = Some((up, ctx));
                    self.fail_upload_with(e).await;
                    return Flow::Continue;
                }
                if let Some(l) = &live {
                    l.feed(up.pcm_since(0));
                }
                s.upload_live = live;
                s.upload = Some((up, ctx));
            }
            RequestKind::VoiceChunk { seq, data } => {
                self.continue_upload(&id, Some((seq, data))).await;
            }
            RequestKind::BinaryEnd => {
                self.continue_upload(&id, None).await;
            }
        }
        Flow::Continue
    }

    /// Next chunk (`Some`) or the BINARY end frame (`None`) of the open upload.
    async fn continue_upload(&mut self, id: &str, chunk: Option<(i64, Option<String>)>) {
        let s = self.session.as_mut().expect("registered");
        let open_matches = s.upload.as_ref().is_some_and(|(u, _)| {
            u.request_id == id
                && match chunk {
                    Some(_) => u.mode == UploadMode::Base64Chunks,
                    None => u.mode == UploadMode::Binary,
                }
        });
        if !open_matches {
            let open_id = s.upload.as_ref().map(|(u, _)| u.request_id.clone());
            let detail = match &open_id {
                None => format!("no open upload for request {id:?}; start with stream_seq 0"),
                Some(o) if o == id => {
                    format!("request {id:?}: the frame does not fit its upload's mode")
                }
                Some(o) => format!("request {id:?} does not continue the open upload {o:?}"),
            };
            if open_id.is_some() {
                self.fail_upload(
                    ErrorCode::StreamSeqError,
                    format!("{detail}; the upload was discarded"),
                )
                .await;
            }
            if open_id.as_deref() != Some(id) {
                // Tie the error to the id only when that id is not some other live request.
                let s = self.session.as_ref().expect("registered");
                let tie = (!s.inflight.contains(id)).then(|| id.to_string());
                self.error(ErrorPayload::new(ErrorCode::StreamSeqError, detail).with_request(tie))
                    .await;
            }
            return;
        }
        let (up, _) = s.upload.as_mut().expect("checked");
        let before = up.len();
        let complete = match chunk {
            Some((seq, data)) => up.push_chunk(seq, data.as_deref()),
            None => Ok(true),
        };
        if complete.is_ok() {
            s.upload_touched = Instant::now();
            if let Some(l) = &s.upload_live {
                l.feed(up.pcm_since(before));
            }
        }
        match complete {
            Ok(false) => {}
            Ok(true) => {
                let (up, ctx) = s.upload.take().expect("checked");
                let live = s.upload_live.take();
                match up.finish() {
                    Ok(pcm) => {
                        if let Some(l) = live {
                            self.app.deps.voice.hand_over(&ctx, l);
                        }
                        self.spawn(ctx, Input::Voice(pcm))
                    }
                    Err(e) => {
                        let (code, detail) = upload_error_code(e);
                        self.end_with_error(&ctx, code, detail).await;
                    }
                }
            }
            Err(e) => self.fail_upload_with(e).await,
        }
    }

    async fn fail_upload_with(&mut self, e: UploadError) {
        let (code, detail) = upload_error_code(e);
        self.fail_upload(code, format!("{detail}; the upload was discarded"))
            .await;
    }

    /// Discards the open upload and ends its request with an ERROR.
    async fn fail_upload(&mut self, code: ErrorCode, detail: String) {
        let s = self.session.as_mut().expect("registered");
        s.upload_live = None;
        if let Some((_, ctx)) = s.upload.take() {
            self.end_with_error(&ctx, code, detail).await;
        }
    }

    /// Ends a request that this task still owns with an ERROR tied to it.
    async fn end_with_error(&self, ctx: &Arc<RequestCtx>, code: ErrorCode, detail: String) {
        let s = self.session.as_ref().expect("registered");
        if s.inflight.finish(ctx) {
            ctx.token.cancel();
            self.error(ErrorPayload::new(code, detail).with_request(Some(ctx.request_id.clone())))
                .await;
        }
    }

    /// Registers a new request in flight, or answers SERVER_BUSY.
    async fn admit(&mut self, id: &str) -> Option<Arc<RequestCtx>> {
        let max = self.app.config.limits.max_requests_in_flight;
        let s = self.session.as_ref().expect("registered");
        match s.inflight.insert(id, &self.token, max) {
            Ok(ctx) => Some(ctx),
            Err(InsertError::Busy { max }) => {
                self.error(
                    ErrorPayload::new(
                        ErrorCode::ServerBusy,
                        format!("this session already has {max} requests in flight"),
                    )
                    .with_request(Some(id.to_string())),
                )
                .await;
                None
            }
            Err(InsertError::Duplicate) => {
                self.error(ErrorPayload::new(
                    ErrorCode::MalformedPayload,
                    format!(
                        "field `payload.request_id`: {id:?} is already in flight; use a new id"
                    ),
                ))
                .await;
                None
            }
        }
    }

    fn spawn(&self, ctx: Arc<RequestCtx>, input: Input) {
        let s = self.session.as_ref().expect("registered");
        let job = Job {
            ctx,
            inflight: s.inflight.clone(),
            outbox: self.outbox.clone(),
            history: s.history.clone(),
            attrs: s.attrs.clone(),
            input,
            metrics: self.app.metrics.clone(),
        };
        let deps = self.app.deps.clone();
        self.app.tracker.spawn(pipeline::run(job, deps));
    }
}

fn upload_error_code(e: UploadError) -> (ErrorCode, String) {
    match e {
        UploadError::Seq(d) => (ErrorCode::StreamSeqError, d),
        UploadError::TooLarge(d) => (ErrorCode::PayloadTooLarge, d),
        UploadError::Malformed(d) => (ErrorCode::MalformedPayload, d),
    }
}

fn human_duration(secs: u64) -> String {
    if secs >= 60 && secs.is_multiple_of(60) {
        format!("{} 分钟", secs / 60)
    } else if secs >= 60 {
        format!("{} 分 {} 秒", secs / 60, secs % 60)
    } else {
        format!("{secs} 秒")
    }
}

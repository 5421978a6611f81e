//! The connection before REGISTER, and REGISTER itself: authentication (under the connection's
//! token and a timeout), admission against `limits.max_sessions`, and the registered
//! [`Session`] it becomes; or, with `resume`, the takeover of an existing session
//! (`super::resume`) and the replay of what its client missed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

use super::resume::{Refused, Takeover, Takeovers};
use super::{Conn, Flow, Inbound, Session, close_code, text};
use crate::app::{AppState, Kick, KickCell, SessionEntry};
use crate::auth::{AuthError, Principal};
use crate::pipeline::history::History;
use crate::protocol::{
    ClientMessage, ErrorCode, ErrorPayload, RegisterAck, RegisterPayload, ResumeRequest, SeenUpTo,
    ServerMessage, ShutdownPayload,
};
use crate::request::attributes::Attributes;
use crate::request::inflight::InFlight;
use crate::request::replay::Limits;
use crate::session::timers::Liveness;
use crate::store::StoreError;

/// How long a resume waits for the session's current owner to hand it over.
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a resume waits for the user store to say whether its credential was revoked.
const REVOCATION_CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// The user store's revoked key ids and disabled account ids, or why it could not say.
type RevocationAnswer =
    Result<Result<(Vec<i64>, Vec<i64>), StoreError>, tokio::time::error::Elapsed>;

/// Holds one unit of the server's session count and the session's registry entry.
pub(super) struct SessionSlot(Arc<AppState>, String);

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.0.stats.sessions.fetch_sub(1, Ordering::Relaxed);
        self.0.sessions.remove(&self.1);
    }
}

/// A connection that has not registered: only REGISTER and HEALTH_CHECK are served, and the
/// registration deadline runs.
pub(super) struct Unregistered {
    conn: Conn,
    deadline: Instant,
}

/// What a frame did to an unregistered connection.
enum Step {
    Stay(Flow),
    Registered(Box<Registration>),
    /// A resume: the session, taken over from its previous owner, and what the client saw.
    Resumed(Box<Session>, std::collections::BTreeMap<String, SeenUpTo>),
    /// A resume of a session another node held (`super::resume::take_remote`).
    ResumedRemote(Box<Registration>, Box<super::resume::Handoff>),
}

/// A successful REGISTER: the session, but for the connection it will own.
struct Registration {
    id: String,
    create_time: i64,
    attrs: Attributes,
    live: Liveness,
    kick: Arc<KickCell>,
    slot: SessionSlot,
    token: tokio_util::sync::CancellationToken,
    takeovers: Option<Arc<Takeovers>>,
}

impl Registration {
    fn into_session(self, conn: Conn) -> Session {
        let history = History::shared(conn.app.config.llm.history_messages);
        Session {
            conn,
            id: self.id,
            create_time: self.create_time,
            attrs: self.attrs,
            inflight: InFlight::default(),
            history,
            live: self.live,
            upload: None,
            kick: self.kick,
            drain_deadline: None,
            token: self.token,
            takeovers: self.takeovers,
            next_ack: Instant::now(),
            _slot: self.slot,
        }
    }
}

impl Unregistered {
    pub(super) fn new(conn: Conn) -> Self {
        let secs = conn.app.config.session.register_timeout_seconds;
        Unregistered {
            deadline: Instant::now() + Duration::from_secs(secs),
            conn,
        }
    }

    /// Serves the connection until it registers (the session is returned) or closes (`None`).
    pub(super) async fn drive<S>(self, inbound: &mut S) -> Option<Box<Session>>
    where
        S: Stream<Item = Inbound> + Unpin,
    {
        let close = loop {
            let token = self.conn.token.clone();
            let draining = self.conn.app.draining.clone();
            let flow = tokio::select! {
                biased;
                _ = token.cancelled() => break None,
                _ = draining.cancelled() => {
                    self.shutdown(text::SERVER_SHUTTING_DOWN).await;
                    Flow::Close(close_code::GOING_AWAY, "server shutting down".into())
                }
                f = inbound.next() => match f {
                    None => break None,
                    Some(Inbound::Text(t)) => match self.on_text(t).await {
                        Step::Stay(flow) => flow,
                        Step::Registered(r) => return Some(Box::new(r.into_session(self.conn))),
                        Step::Resumed(s, seen) => return Some(s.resume_on(self.conn, seen).await),
                        Step::ResumedRemote(r, h) => {
                            let s = Box::new(r.into_session(self.conn));
                            return Some(super::resume::attach_remote(s, *h).await);
                        }
                    },
                    Some(Inbound::Binary(_)) => {
                        self.conn
                            .error(ErrorPayload::new(
                                ErrorCode::SessionInvalid,
                                "binary frame before REGISTER; register first",
                            ))
                            .await;
                        Flow::Continue
                    }
                    Some(Inbound::Pong(_)) => Flow::Continue,
                    Some(Inbound::Broken { code, reason }) => Flow::Close(code, reason),
                },
                _ = tokio::time::sleep_until(self.deadline) => {
                    self.shutdown("no REGISTER received in time").await;
                    Flow::Close(close_code::POLICY, "registration timeout".into())
                }
            };
            if let Flow::Close(code, reason) = flow {
                break Some((code, reason));
            }
        };
        self.conn.end(close, "-").await;
        None
    }

    async fn shutdown(&self, reason: &str) {
        let reason = reason.to_string();
        self.conn
            .send(ServerMessage::Shutdown(ShutdownPayload { reason }))
            .await;
    }

    async fn on_text(&self, text: String) -> Step {
        let Some(frame) = self.conn.decode(&text, None).await else {
            return Step::Stay(Flow::Continue);
        };
        let sid = frame.session_id.as_deref().unwrap_or("");
        match frame.message {
            ClientMessage::Register(p) => self.register(sid, p).await,
            ClientMessage::HealthCheck(p) => Step::Stay(self.conn.health_check(p).await),
            other => {
                self.conn
                    .error(ErrorPayload::new(
                        ErrorCode::SessionInvalid,
                        format!("{} before REGISTER; register first", other.msg_type()),
                    ))
                    .await;
                Step::Stay(Flow::Continue)
            }
        }
    }

    async fn register(&self, sid: &str, p: RegisterPayload) -> Step {
        let conn = &self.conn;
        let app = &conn.app;
        if !sid.is_empty() {
            conn.error(ErrorPayload::new(
                ErrorCode::MalformedPayload,
                "field `session_id`: must be empty in REGISTER",
            ))
            .await;
            return Step::Stay(Flow::Continue);
        }
        if app.draining.is_cancelled() {
            conn.error(ErrorPayload::new(
                ErrorCode::ServerBusy,
                "the server is shutting down",
            ))
            .await;
            return Step::Stay(Flow::Continue);
        }
        if let Some(r) = p.resume {
            return self.resume(r).await;
        }
        let auth = tokio::select! {
            _ = conn.token.cancelled() => {
                return Step::Stay(Flow::Close(close_code::GOING_AWAY, "closed".into()));
            }
            r = tokio::time::timeout(Duration::from_secs(10), app.auth.authenticate(conn.peer, &p.auth)) => r,
        };
        let principal = match auth {
            Ok(Ok(principal)) => principal,
            Ok(Err(e @ (AuthError::Invalid | AuthError::Locked))) => {
                tracing::info!(peer = %conn.peer, reason = %e, "REGISTER refused");
                let detail = match e {
                    AuthError::Locked => {
                        "too many failed attempts from this address; try again later"
                    }
                    _ => "invalid credentials",
                };
                conn.error(ErrorPayload::new(ErrorCode::AuthFailed, detail))
                    .await;
                return Step::Stay(Flow::Close(
                    close_code::POLICY,
                    "authentication failed".into(),
                ));
            }
            Ok(Err(AuthError::Internal(e))) => {
                tracing::error!(error = %e, "authentication backend failed");
                conn.error(ErrorPayload::new(
                    ErrorCode::InternalError,
                    "authentication is unavailable; retry later",
                ))
                .await;
                return Step::Stay(Flow::Continue);
            }
            Err(_) => {
                conn.error(ErrorPayload::new(
                    ErrorCode::RequestTimeout,
                    "authentication took too long; retry",
                ))
                .await;
                return Step::Stay(Flow::Continue);
            }
        };
        if let Some(full) = self.refuse_if_full().await {
            return full;
        }
        let cfg = &app.config.session;
        let id = crate::util::random_id("sess_");
        let slot = SessionSlot(app.clone(), id.clone());
        let kick = Arc::new(KickCell::default());
        app.sessions.insert(
            &id,
            SessionEntry {
                principal: principal.clone(),
                kick: Kick::Session(kick.clone()),
            },
        );
        tracing::info!(session = %id, who = %principal.label(), platform = ?p.platform, peer = %conn.peer, "session registered");
        let resume = (cfg.resume_window_seconds > 0).then(|| {
            conn.outbox.enable_replay(Limits {
                max_frames: cfg.replay_max_frames,
                max_bytes: cfg.replay_max_bytes,
            });
            app.resumable.insert(&id, principal.clone())
        });
        let resume_token = resume.as_ref().map(|(t, _)| t.clone());
        let timeout_seconds = cfg.timeout_seconds;
        let live = liveness(cfg);
        let registration = Registration {
            id: id.clone(),
            create_time: crate::util::now_ms(),
            attrs: Attributes {
                platform: p.platform,
                require_tts: p.require_tts,
                enable_srs: p.enable_srs.unwrap_or(true),
                functions: p.function_calling,
            },
            live,
            kick,
            slot,
            token: app.hard_stop.child_token(),
            takeovers: resume.map(|(_, t)| t),
        };
        if let Some(token) = &resume_token {
            super::resume::save_first(
                app,
                &id,
                &principal,
                token,
                registration.create_time,
                &registration.attrs,
            )
            .await;
        }
        conn.outbox.set_session_id(&id);
        conn.send(ServerMessage::RegisterAck(RegisterAck {
            status: "SUCCESS".into(),
            message: text::REGISTERED.into(),
            session_id: id,
            session_timeout_seconds: timeout_seconds,
            capabilities: Some(crate::pipeline::capabilities::of(&conn.app.deps)),
            resume_token,
        }))
        .await;
        Step::Registered(Box::new(registration))
    }

    /// REGISTER with `resume`: checks the token and the credential, then takes the session over
    /// from whoever holds it (its parked task, or the connection of its other socket).
    async fn resume(&self, r: ResumeRequest) -> Step {
        let conn = &self.conn;
        let app = &conn.app;
        let invalid = |detail: &str| ErrorPayload::new(ErrorCode::SessionInvalid, detail);
        if app.config.session.resume_window_seconds == 0 {
            conn.error(invalid(
                "session resume is off on this server; REGISTER without `resume`",
            ))
            .await;
            return Step::Stay(Flow::Continue);
        }
        let (principal, takeover) = match app.resumable.check(&r.session_id, &r.resume_token) {
            Ok(found) => found,
            Err(Refused::Unknown) if app.cluster.is_some() => return self.resume_remote(r).await,
            Err(Refused::Unknown) => {
                conn.error(invalid(
                    "no session to resume with this session_id (it ended, or its resume window is over); REGISTER without `resume`",
                ))
                .await;
                return Step::Stay(Flow::Continue);
            }
            Err(Refused::WrongToken) => {
                tracing::info!(peer = %conn.peer, session = %r.session_id, "resume refused: wrong token");
                return self.auth_failed("invalid resume token").await;
            }
        };
        if let Some(refused) = self.refuse_if_revoked(&principal, &r.session_id).await {
            return refused;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        if takeover.offer(Takeover { reply: tx }).is_err() {
            conn.error(ErrorPayload::new(
                ErrorCode::ServerBusy,
                "the session is being resumed from another connection right now; retry",
            ))
            .await;
            return Step::Stay(Flow::Continue);
        }
        let handed = async { rx.await.ok() };
        let session = tokio::select! {
            _ = conn.token.cancelled() => {
                return Step::Stay(Flow::Close(close_code::GOING_AWAY, "closed".into()));
            }
            s = tokio::time::timeout(TAKEOVER_TIMEOUT, handed) => s.ok().flatten(),
        };
        match session {
            Some(s) => Step::Resumed(s, r.last_seen),
            None => {
                conn.error(invalid(
                    "the session ended while it was being resumed; REGISTER without `resume`",
                ))
                .await;
                Step::Stay(Flow::Continue)
            }
        }
    }

    async fn auth_failed(&self, detail: &str) -> Step {
        self.conn
            .error(ErrorPayload::new(ErrorCode::AuthFailed, detail))
            .await;
        Step::Stay(Flow::Close(
            close_code::POLICY,
            "authentication failed".into(),
        ))
    }

    /// Counts the new session in (a [`SessionSlot`] must then own that count); SERVER_BUSY and
    /// Some when the server already holds `limits.max_sessions`.
    async fn refuse_if_full(&self) -> Option<Step> {
        let app = &self.conn.app;
        let max = app.config.limits.max_sessions as u64;
        if app.stats.sessions.fetch_add(1, Ordering::Relaxed) < max {
            return None;
        }
        app.stats.sessions.fetch_sub(1, Ordering::Relaxed);
        self.conn
            .error(ErrorPayload::new(
                ErrorCode::ServerBusy,
                format!("the server holds its maximum of {max} sessions; retry later"),
            ))
            .await;
        Some(Step::Stay(Flow::Continue))
    }

    /// A resume of a session whose credential was revoked is refused with AUTH_FAILED; None when
    /// it may go on.
    async fn refuse_if_revoked(&self, who: &Principal, session_id: &str) -> Option<Step> {
        let revoked = self.revoked(who).await;
        self.refuse_if(revoked, session_id).await
    }

    /// The answer to a revocation check as the next step: none when the credential stands.
    async fn refuse_if(&self, revoked: Result<bool, Flow>, session_id: &str) -> Option<Step> {
        match revoked {
            Ok(false) => None,
            Ok(true) => {
                tracing::info!(peer = %self.conn.peer, session = %session_id, "resume refused: credential revoked");
                Some(
                    self.auth_failed("the session's credential was revoked")
                        .await,
                )
            }
            Err(flow) => Some(Step::Stay(flow)),
        }
    }

    /// Whether the session's API key was revoked or account disabled (asked of the store now, not
    /// left to the periodic check). `Err`: the store could not say; the client was told to retry.
    async fn revoked(&self, who: &Principal) -> Result<bool, Flow> {
        let conn = &self.conn;
        // Through the user store, so a key revoked on another node (PostgreSQL) counts too.
        let users = conn.app.auth.users().clone();
        let ask = tokio::time::timeout(REVOCATION_CHECK_TIMEOUT, users.revoked_principals());
        let answer = tokio::select! {
            _ = conn.token.cancelled() => {
                return Err(Flow::Close(close_code::GOING_AWAY, "closed".into()));
            }
            a = ask => a,
        };
        self.judge_revocations(who, answer).await
    }

    /// Reads the store's answer (revoked key ids, disabled account ids) for `who`.
    async fn judge_revocations(
        &self,
        who: &Principal,
        answer: RevocationAnswer,
    ) -> Result<bool, Flow> {
        let conn = &self.conn;
        match answer {
            Ok(Ok((keys, accounts))) => Ok(match who {
                Principal::ApiKey { id, .. } => keys.contains(id),
                Principal::Account { id, .. } => accounts.contains(id),
            }),
            _ => {
                conn.error(ErrorPayload::new(
                    ErrorCode::InternalError,
                    "the session's credential cannot be checked right now; retry",
                ))
                .await;
                Err(Flow::Continue)
            }
        }
    }
}

/// Resume of a session another node held (`[cluster] nats_url`; `super::resume` and
/// `crate::cluster` have the design). Kept apart from `register` and `resume` above so the
/// single-node path stays as it is.
impl Unregistered {
    async fn resume_remote(&self, r: ResumeRequest) -> Step {
        use super::resume::{RemoteRefused, find_remote, take_remote};
        let conn = &self.conn;
        let app = &conn.app;
        let Some(cluster) = app.cluster.clone() else {
            return Step::Stay(Flow::Continue);
        };
        let invalid = |detail: &str| ErrorPayload::new(ErrorCode::SessionInvalid, detail);
        let unknown = "no session to resume with this session_id (it ended, or its resume window is over); REGISTER without `resume`";
        let unavailable = || {
            ErrorPayload::new(
                ErrorCode::InternalError,
                "the session is held by another server, which cannot be reached right now; retry",
            )
        };
        // The snapshot and the store's revocations are independent: both asked at once (each a
        // round trip to another server, NATS and the user store).
        let users = app.auth.users().clone();
        let (found, revocations) = tokio::select! {
            _ = conn.token.cancelled() => {
                return Step::Stay(Flow::Close(close_code::GOING_AWAY, "closed".into()));
            }
            both = async {
                tokio::join!(
                    find_remote(&cluster, &r),
                    tokio::time::timeout(REVOCATION_CHECK_TIMEOUT, users.revoked_principals()),
                )
            } => both,
        };
        let (snap, token_ok) = match found {
            Ok(s) => s,
            Err(RemoteRefused::Unknown) => {
                conn.error(invalid(unknown)).await;
                return Step::Stay(Flow::Continue);
            }
            Err(RemoteRefused::WrongToken) => {
                tracing::info!(peer = %conn.peer, session = %r.session_id, "resume refused: wrong token");
                return self.auth_failed("invalid resume token").await;
            }
            Err(RemoteRefused::Unavailable) => {
                conn.error(unavailable()).await;
                return Step::Stay(Flow::Continue);
            }
        };
        let principal = Principal::from(&snap.credential);
        let revoked = self.judge_revocations(&principal, revocations).await;
        if let Some(refused) = self.refuse_if(revoked, &r.session_id).await {
            return refused;
        }
        if let Some(full) = self.refuse_if_full().await {
            return full;
        }
        let id = snap.session_id.clone();
        let slot = SessionSlot(app.clone(), id.clone());
        let mut handoff = match take_remote(&cluster, snap, token_ok, &r).await {
            Ok(h) => h,
            Err(RemoteRefused::Unavailable) => {
                conn.error(unavailable()).await;
                return Step::Stay(Flow::Continue);
            }
            Err(RemoteRefused::WrongToken) => {
                tracing::info!(peer = %conn.peer, session = %r.session_id, "resume refused: wrong token");
                return self.auth_failed("invalid resume token").await;
            }
            Err(_) => {
                conn.error(invalid(unknown)).await;
                return Step::Stay(Flow::Continue);
            }
        };
        let cfg = &app.config.session;
        let kick = Arc::new(KickCell::default());
        app.sessions.insert(
            &id,
            SessionEntry {
                principal: principal.clone(),
                kick: Kick::Session(kick.clone()),
            },
        );
        conn.outbox.enable_replay(Limits {
            max_frames: cfg.replay_max_frames,
            max_bytes: cfg.replay_max_bytes,
        });
        conn.outbox.set_session_id(&id);
        let (token, takeovers) = app.resumable.insert(&id, principal);
        handoff.token = Some(token);
        let live = liveness(cfg);
        let registration = Registration {
            id,
            create_time: handoff.snapshot.create_time,
            attrs: handoff.snapshot.attributes(),
            live,
            kick,
            slot,
            token: app.hard_stop.child_token(),
            takeovers: Some(takeovers),
        };
        Step::ResumedRemote(Box::new(registration), Box::new(handoff))
    }
}

impl Session {
    /// Attaches a resumed session to `conn`: REGISTER_ACK (same session id, a fresh resume
    /// token), what the client must be told about requests it listed, then every kept frame it
    /// did not see, in order; the outbox is live again once they are all queued.
    async fn resume_on(
        mut self: Box<Self>,
        conn: Conn,
        seen: std::collections::BTreeMap<String, SeenUpTo>,
    ) -> Box<Session> {
        let started = std::time::Instant::now();
        self.conn.outbox.attach(&conn.outbox);
        self.conn = Conn {
            outbox: self.conn.outbox.clone(),
            app: conn.app,
            token: conn.token,
            peer: conn.peer,
        };
        let app = self.conn.app.clone();
        self.live.touch(Instant::now());
        let plan = self
            .conn
            .outbox
            .resume(seen.iter().map(|(r, s)| (r.as_str(), s)));
        let resume_token = app.resumable.rotate(&self.id);
        self.conn
            .send(ServerMessage::RegisterAck(RegisterAck {
                status: "SUCCESS".into(),
                message: text::RESUMED.into(),
                session_id: self.id.clone(),
                session_timeout_seconds: app.config.session.timeout_seconds,
                capabilities: Some(crate::pipeline::capabilities::of(&app.deps)),
                resume_token,
            }))
            .await;
        let cfg = &app.config.session;
        for id in &plan.overflowed {
            self.inflight.cancel(id);
            let detail = format!(
                "the reply outgrew the replay buffer ({} frames / {} bytes) while the connection was away, and was stopped; ask again",
                cfg.replay_max_frames, cfg.replay_max_bytes
            );
            self.conn
                .error(
                    ErrorPayload::new(ErrorCode::ServerBusy, detail).with_request(Some(id.clone())),
                )
                .await;
        }
        for id in plan
            .nothing_kept
            .iter()
            .filter(|id| !self.inflight.contains(id))
        {
            let detail = "the server has no record of this request: it did not arrive before the connection dropped; send it again";
            self.conn
                .error(
                    ErrorPayload::new(ErrorCode::InternalError, detail)
                        .with_request(Some(id.clone())),
                )
                .await;
        }
        self.inflight.remove_cancelled();
        let mut replayed = 0usize;
        while let Some(frame) = self.conn.outbox.next_replay() {
            if !self.conn.outbox.push(frame).await {
                break;
            }
            replayed += 1;
        }
        tracing::info!(session = %self.id, peer = %self.conn.peer, replayed, overflowed = plan.overflowed.len(), us = started.elapsed().as_micros() as u64, "session resumed");
        self
    }
}

/// A new session's liveness timers, from `[session]`.
fn liveness(cfg: &crate::config::SessionConfig) -> Liveness {
    Liveness::new(
        Instant::now(),
        Duration::from_secs(cfg.timeout_seconds),
        Duration::from_secs(cfg.heartbeat_interval_seconds),
        Duration::from_secs(cfg.warn_before_seconds),
    )
    .with_max_missed(cfg.max_missed_heartbeats)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use serde_json::json;
    use tokio::time::Instant;

    use crate::session::Inbound;
    use crate::session::testkit::{Scripted, start, text_request};

    #[tokio::test(start_paused = true)]
    async fn request_before_register_is_refused_then_served_after() {
        let mut h = start(Scripted(Some("hello")), |_| {});
        h.send("REQUEST", text_request("r1", "hi")).await;
        h.expect_error_saying("SESSION_INVALID", "REQUEST before REGISTER")
            .await;
        h.send_inbound(Inbound::Binary(vec![0u8; 4].into())).await;
        h.expect_error("SESSION_INVALID").await;
        h.send("HEALTH_CHECK", json!({})).await;
        h.expect("HEALTH_CHECK_ACK").await;
        h.register().await;
        h.send("REQUEST", text_request("r1", "hi")).await;
        let (text, last) = h.reply("r1").await;
        assert_eq!(text, "hello");
        assert_eq!(last["msg_type"], "RESPONSE", "{last}");
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn registration_deadline_closes_an_idle_connection() {
        let h = start(Scripted(None), |c| c.session.register_timeout_seconds = 5);
        let t0 = Instant::now();
        h.expect_ended("no REGISTER received in time", 1008).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn bad_credentials_close_with_policy() {
        let mut h = start(Scripted(None), |_| {});
        let mut p = h.register_payload();
        p["auth"]["api_key"] = json!("mk_wrong");
        h.send("REGISTER", p).await;
        h.expect_error("AUTH_FAILED").await;
        h.expect_close(1008).await;
        h.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn register_needs_an_empty_session_id_and_happens_once() {
        let mut h = start(Scripted(None), |_| {});
        h.sid = "sess_made_up".into();
        h.send("REGISTER", h.register_payload()).await;
        h.expect_error_saying("MALFORMED_PAYLOAD", "must be empty")
            .await;
        h.sid.clear();
        h.register().await;
        let sid = std::mem::take(&mut h.sid);
        // A REGISTER carries `session_id: ""` by rule: still "already registered".
        h.send("REGISTER", h.register_payload()).await;
        h.expect_error_saying("MALFORMED_PAYLOAD", "already registered")
            .await;
        h.sid = sid.clone();
        // The session is unchanged and still serves.
        h.send("SESSION_QUERY", json!({})).await;
        let info = h.expect("SESSION_INFO").await;
        assert_eq!(info["session_id"], sid.as_str());
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn session_limit_answers_busy_and_a_slot_is_given_back() {
        let mut h = start(Scripted(None), |c| c.limits.max_sessions = 1);
        let app = h.app.clone();
        h.register().await;
        assert_eq!(app.stats.sessions.load(Ordering::Relaxed), 1);
        let mut second = h.another();
        second.send("REGISTER", second.register_payload()).await;
        second
            .expect_error_saying("SERVER_BUSY", "maximum of 1 sessions")
            .await;
        assert_eq!(app.stats.sessions.load(Ordering::Relaxed), 1);
        // The refused connection stays open, unregistered, and may try again later.
        second.send("HEALTH_CHECK", json!({})).await;
        second.expect("HEALTH_CHECK_ACK").await;
        // A dropped socket parks its session for the resume window: it still holds its slot.
        h.finish().await;
        assert_eq!(app.stats.sessions.load(Ordering::Relaxed), 1);
        let window = Duration::from_secs(app.config.session.resume_window_seconds);
        tokio::time::sleep(window).await;
        tokio::task::yield_now().await;
        assert_eq!(app.stats.sessions.load(Ordering::Relaxed), 0);
        assert!(app.resumable.is_empty());
        // (`second` met its registration deadline meanwhile.)
        let mut third = second.another();
        third.register().await;
        assert_eq!(app.stats.sessions.load(Ordering::Relaxed), 1);
        // A client SHUTDOWN ends the session at once.
        third.send("SHUTDOWN", json!({"reason": "bye"})).await;
        third.expect_close(1000).await;
        third.task.await.unwrap();
        assert_eq!(app.stats.sessions.load(Ordering::Relaxed), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn drain_before_register_closes_going_away() {
        let h = start(Scripted(None), |_| {});
        h.app.draining.cancel();
        h.expect_ended(crate::session::text::SERVER_SHUTTING_DOWN, 1001)
            .await;
    }
}

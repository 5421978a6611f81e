//! A registered session's control frames and timers: INTERRUPT, SESSION_QUERY, the client's
//! SHUTDOWN, heartbeats / SESSION_WARN / expiry, the idle upload timeout, the server's drain
//! and a kick from outside (credential revoked).

use std::sync::Arc;

use tokio::time::Instant;

use super::{Flow, Session, close_code, text};
use crate::config::secs;
use crate::protocol::{
    AckStatus, ErrorCode, Heartbeat, InterruptAck, InterruptPayload, Response, ServerMessage,
    SessionData, SessionInfo, SessionQueryPayload, SessionWarn, ShutdownPayload,
};
use crate::request::inflight::RequestCtx;
use crate::session::timers::TimerEvent;

impl Session {
    async fn shutdown(&self, reason: &str) {
        let reason = reason.to_string();
        self.conn
            .send(ServerMessage::Shutdown(ShutdownPayload { reason }))
            .await;
    }

    pub(super) async fn on_timer(&mut self) -> Flow {
        let now = Instant::now();
        if let Some(d) = self.drain_deadline
            && now >= d
        {
            return Flow::Close(close_code::GOING_AWAY, "server shutting down".into());
        }
        let idle = self.conn.app.deps.voice.upload_idle_timeout;
        if self
            .upload
            .as_ref()
            .is_some_and(|u| now >= u.touched + idle)
        {
            let idle = idle.as_secs_f64();
            self.fail_upload(
                ErrorCode::RequestTimeout,
                format!("the voice upload received nothing for {idle} s; it was discarded"),
            )
            .await;
        }
        for ev in self.live.due(now) {
            match ev {
                TimerEvent::Heartbeat { remaining_seconds } => {
                    self.conn
                        .send(ServerMessage::Heartbeat(Heartbeat { remaining_seconds }))
                        .await;
                }
                TimerEvent::Warn { remaining_seconds } => {
                    self.conn
                        .send(ServerMessage::SessionWarn(SessionWarn {
                            warn_type: "EXPIRE_SOON".into(),
                            remaining_seconds,
                            message: text::expire_soon(remaining_seconds),
                        }))
                        .await;
                }
                TimerEvent::Unresponsive => {
                    tracing::info!(session = %self.id, "no client frame for several heartbeats; closing");
                    self.shutdown("no reply to heartbeats").await;
                    return Flow::Close(close_code::GOING_AWAY, "no reply to heartbeats".into());
                }
                TimerEvent::Expire => {
                    self.shutdown(text::SESSION_EXPIRED).await;
                    return Flow::Close(close_code::NORMAL, "session expired".into());
                }
            }
        }
        Flow::Continue
    }

    pub(super) async fn on_drain_start(&mut self) -> Flow {
        self.shutdown(text::SERVER_SHUTTING_DOWN).await;
        let grace = secs(self.conn.app.config.server.shutdown_grace_seconds);
        self.drain_deadline = Some(Instant::now() + grace);
        self.drain_check()
    }

    /// While draining: closes once nothing is in flight.
    pub(super) fn drain_check(&self) -> Flow {
        if self.inflight.is_empty() {
            Flow::Close(close_code::GOING_AWAY, "server shutting down".into())
        } else {
            Flow::Continue
        }
    }

    pub(super) async fn on_kicked(&mut self, reason: String) -> Flow {
        self.shutdown(&reason).await;
        Flow::Close(close_code::POLICY, reason)
    }

    pub(super) fn on_client_shutdown(&mut self, p: ShutdownPayload) -> Flow {
        tracing::info!(session = %self.id, reason = %p.reason, "client SHUTDOWN");
        Flow::Close(close_code::NORMAL, "client shutdown".into())
    }

    pub(super) async fn on_query(&mut self, p: SessionQueryPayload) -> Flow {
        let fields = p.query_fields.unwrap_or_default();
        let want = |f: &str| fields.is_empty() || fields.iter().any(|x| x == f);
        let unknown: Vec<&str> = fields
            .iter()
            .map(String::as_str)
            .filter(|f| !SessionData::FIELDS.contains(f))
            .collect();
        let a = &self.attrs;
        let data = SessionData {
            platform: want("platform").then_some(a.platform),
            require_tts: want("require_tts").then_some(a.require_tts),
            enable_srs: want("enable_srs").then_some(a.enable_srs),
            function_calling: want("function_calling").then(|| a.functions.clone()),
            create_time: want("create_time").then_some(self.create_time),
            remaining_seconds: want("remaining_seconds")
                .then(|| self.live.remaining_seconds(Instant::now())),
        };
        let message = if unknown.is_empty() {
            text::QUERY_OK.to_string()
        } else {
            text::query_ok_ignoring(&unknown)
        };
        self.conn
            .send(ServerMessage::SessionInfo(SessionInfo {
                status: "SUCCESS".into(),
                message,
                session_data: data,
            }))
            .await;
        Flow::Continue
    }

    /// INTERRUPT_ACK first, then one interrupted RESPONSE per cancelled request (whoever
    /// removes a request from the table owns its final frame).
    pub(super) async fn on_interrupt(&mut self, p: InterruptPayload) -> Flow {
        let received = std::time::Instant::now();
        let target = p.interrupt_request_id.filter(|id| !id.is_empty());
        let cancelled: Vec<Arc<RequestCtx>> = match &target {
            Some(id) => self.inflight.cancel(id).into_iter().collect(),
            None => self.inflight.cancel_all(),
        };
        if self
            .upload
            .as_ref()
            .is_some_and(|u| u.ctx.token.is_cancelled())
        {
            self.upload = None;
        }
        let ids: Vec<String> = cancelled.iter().map(|c| c.request_id.clone()).collect();
        let (status, message) = match (&target, ids.len()) {
            (Some(id), 0) => (AckStatus::Failed, text::not_in_flight(id)),
            (None, 0) => (AckStatus::Failed, text::NOTHING_IN_FLIGHT.to_string()),
            (_, n) => (AckStatus::Success, text::interrupted(n)),
        };
        tracing::info!(session = %self.id, ?ids, reason = ?p.reason, "interrupt");
        self.conn
            .send(ServerMessage::InterruptAck(InterruptAck {
                interrupted_request_ids: ids.clone(),
                status,
                message,
            }))
            .await;
        let metrics = &self.conn.app.metrics;
        for id in &ids {
            self.conn
                .send(ServerMessage::Response(Response::interrupted(id, p.reason)))
                .await;
            metrics.request(crate::metrics::Outcome::Interrupted);
        }
        metrics
            .interrupt_seconds
            .observe(received.elapsed().as_secs_f64());
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use tokio::time::Instant;

    use crate::session::testkit::{Scripted, start, text_request};
    use crate::session::{Inbound, text};

    #[tokio::test(start_paused = true)]
    async fn interrupt_acks_first_then_one_interrupted_frame_each() {
        let mut h = start(Scripted(None), |_| {});
        h.register().await;
        h.send("REQUEST", text_request("r2", "hello")).await;
        h.send("REQUEST", text_request("r1", "hello")).await;
        h.send("INTERRUPT", json!({"reason": "USER_STOP"})).await;
        let ack = h.expect("INTERRUPT_ACK").await;
        assert_eq!(
            ack["payload"]["interrupted_request_ids"],
            json!(["r1", "r2"])
        );
        assert_eq!(ack["payload"]["status"], "SUCCESS");
        assert_eq!(ack["payload"]["message"], text::interrupted(2));
        for id in ["r1", "r2"] {
            let r = h.expect("RESPONSE").await;
            assert_eq!(r["payload"]["request_id"], id);
            assert_eq!(r["payload"]["interrupted"], true);
            assert_eq!(r["payload"]["interrupt_reason"], "USER_STOP");
            assert_eq!(r["payload"]["text_stream_seq"], -1);
        }
        // The cancelled pipelines send nothing more.
        tokio::time::sleep(Duration::from_secs(1)).await;
        h.assert_quiet();
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn interrupt_with_nothing_to_stop_fails() {
        let mut h = start(Scripted(None), |_| {});
        h.register().await;
        h.send(
            "INTERRUPT",
            json!({"interrupt_request_id": "nope", "reason": "USER_STOP"}),
        )
        .await;
        let ack = h.expect("INTERRUPT_ACK").await;
        assert_eq!(ack["payload"]["status"], "FAILED");
        assert_eq!(ack["payload"]["message"], text::not_in_flight("nope"));
        h.send("INTERRUPT", json!({"reason": "USER_NEW_INPUT"}))
            .await;
        let ack = h.expect("INTERRUPT_ACK").await;
        assert_eq!(ack["payload"]["message"], text::NOTHING_IN_FLIGHT);
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn interrupt_closes_an_open_upload() {
        let mut h = start(Scripted(None), |_| {});
        h.register().await;
        let start_upload = json!({"request_id": "v1", "data_type": "VOICE", "stream_flag": true,
                                  "stream_seq": 0, "content": {"voice_mode": "BINARY"}});
        h.send("REQUEST", start_upload).await;
        h.send(
            "INTERRUPT",
            json!({"interrupt_request_id": "v1", "reason": "USER_STOP"}),
        )
        .await;
        h.expect("INTERRUPT_ACK").await;
        assert_eq!(h.expect("RESPONSE").await["payload"]["interrupted"], true);
        h.send_inbound(Inbound::Binary(vec![0u8; 320].into())).await;
        h.expect_error("STREAM_SEQ_ERROR").await;
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn session_query_answers_what_was_asked() {
        let mut h = start(Scripted(None), |c| c.session.timeout_seconds = 100);
        h.register().await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        // The query is a client frame too: it refreshes the session before the answer.
        let fields = json!(["platform", "remaining_seconds", "bogus"]);
        h.send("SESSION_QUERY", json!({"query_fields": fields}))
            .await;
        let info = h.expect("SESSION_INFO").await;
        let d = &info["payload"]["session_data"];
        assert_eq!(d["platform"], "WEB");
        assert_eq!(d["remaining_seconds"], 100);
        assert!(d.get("require_tts").is_none_or(|v| v.is_null()), "{info}");
        assert_eq!(
            info["payload"]["message"],
            text::query_ok_ignoring(&["bogus"])
        );
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn unanswered_heartbeats_close_and_a_reply_resets_the_count() {
        let mut h = start(Scripted(None), |c| {
            c.session.heartbeat_interval_seconds = 10;
            c.session.warn_before_seconds = 0;
            c.session.max_missed_heartbeats = 2;
        });
        h.register().await;
        let t0 = Instant::now();
        h.expect("HEARTBEAT").await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        h.send("HEARTBEAT_REPLY", json!({})).await;
        h.expect("HEARTBEAT").await;
        h.expect("HEARTBEAT").await;
        assert_eq!(t0.elapsed(), Duration::from_secs(30));
        h.expect_ended("no reply to heartbeats", 1001).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(40));
    }

    #[tokio::test(start_paused = true)]
    async fn client_shutdown_and_kick_close_the_session() {
        let mut h = start(Scripted(None), |_| {});
        h.register().await;
        h.send("SHUTDOWN", json!({"reason": "bye"})).await;
        h.expect_close(1000).await;
        let mut k = h.another();
        h.task.await.unwrap();
        k.register().await;
        let n = k.app.sessions.kick_where(|_| true, "credential revoked");
        assert_eq!(n, 1);
        k.expect_ended("credential revoked", 1008).await;
    }

    #[tokio::test(start_paused = true)]
    async fn drain_waits_for_requests_in_flight() {
        let mut h = start(Scripted(None), |_| {});
        h.register().await;
        h.send("REQUEST", text_request("r1", "hello")).await;
        // Once this is answered, r1 is in flight.
        h.send("SESSION_QUERY", json!({})).await;
        h.expect("SESSION_INFO").await;
        h.app.draining.cancel();
        let s = h.expect("SHUTDOWN").await;
        assert_eq!(s["payload"]["reason"], text::SERVER_SHUTTING_DOWN);
        h.send("REQUEST", text_request("r2", "hello")).await;
        let e = h.expect_error("SERVER_BUSY").await;
        assert_eq!(e["payload"]["request_id"], "r2");
        // The last request in flight ends: the session closes at once.
        h.send("INTERRUPT", json!({"reason": "USER_STOP"})).await;
        h.expect("INTERRUPT_ACK").await;
        h.expect("RESPONSE").await;
        h.expect_close(1001).await;
        h.task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn drain_grace_ends_requests_that_do_not_finish() {
        let mut h = start(Scripted(None), |c| c.server.shutdown_grace_seconds = 5.0);
        h.register().await;
        h.send("REQUEST", text_request("r1", "hello")).await;
        // Once this is answered, r1 is in flight.
        h.send("SESSION_QUERY", json!({})).await;
        h.expect("SESSION_INFO").await;
        h.app.draining.cancel();
        h.expect("SHUTDOWN").await;
        let t0 = Instant::now();
        h.expect_close(1001).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
        h.task.await.unwrap();
    }
}

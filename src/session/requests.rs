//! REQUEST on a registered session: the checks that depend on session state, the attribute
//! update (spec §6.2 step 2, all or nothing), admission against
//! `limits.max_requests_in_flight`, and handing the request to the pipeline. Voice uploads
//! continue in `voice`.

use std::sync::Arc;

use super::upload::{self, UploadError, UploadMode};
use super::voice::upload_error_code;
use super::{Flow, Session};
use crate::pipeline::{self, Input, Job};
use crate::protocol::{
    ErrorCode, ErrorPayload, RequestKind, RequestPayload, Response, ResponseContent, ServerMessage,
};
use crate::request::attributes::apply_function_op;
use crate::request::inflight::{InsertError, RequestCtx};

impl Session {
    pub(super) async fn on_request(&mut self, p: RequestPayload) -> Flow {
        let id = p.request_id.clone();
        let app = self.conn.app.clone();
        if app.draining.is_cancelled() {
            self.conn
                .error(
                    ErrorPayload::new(
                        ErrorCode::ServerBusy,
                        "the server is shutting down; no new requests",
                    )
                    .with_request(Some(id)),
                )
                .await;
            return Flow::Continue;
        }
        let kind = match p.kind(app.config.limits.max_text_chars) {
            Ok(k) => k,
            Err(e) => {
                if self
                    .upload
                    .as_ref()
                    .is_some_and(|u| u.upload.request_id == id)
                {
                    self.fail_upload(e.code, e.detail).await;
                } else {
                    self.conn.frame_error(e, Some(&self.inflight)).await;
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
        if starts_upload && let Some(open) = &self.upload {
            let open_id = open.upload.request_id.clone();
            self.fail_upload(
                ErrorCode::StreamSeqError,
                format!(
                    "upload {open_id:?} was still open when upload {id:?} started; it was discarded"
                ),
            )
            .await;
            if open_id != id {
                self.conn
                    .error(
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
        if !continues_upload && self.inflight.contains(&id) {
            self.conn
                .error(ErrorPayload::new(
                    ErrorCode::MalformedPayload,
                    format!(
                        "field `payload.request_id`: {id:?} is already in flight; use a new id"
                    ),
                ))
                .await;
            return Flow::Continue;
        }
        // Attributes first (spec §6.2 step 2), all or nothing.
        if let (Some(op), Some(list)) = (p.function_calling_op, &p.function_calling) {
            match apply_function_op(&self.attrs.functions, op, list) {
                Ok(new) => self.attrs.functions = new,
                Err(detail) => {
                    self.conn
                        .error(
                            ErrorPayload::new(ErrorCode::MalformedPayload, detail)
                                .with_request(Some(id)),
                        )
                        .await;
                    return Flow::Continue;
                }
            }
        }
        if let Some(v) = p.require_tts {
            self.attrs.require_tts = v;
        }
        if let Some(v) = p.enable_srs {
            self.attrs.enable_srs = v;
        }
        if p.clear_history == Some(true) {
            // A new Arc: replies still in flight record their turn in the old one, not here.
            self.history = crate::pipeline::history::History::shared(
                self.conn.app.deps.llm_config.history_messages,
            );
        }
        match kind {
            RequestKind::AttributesOnly => {
                self.conn
                    .send(ServerMessage::Response(Response {
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
                let max = app.config.limits.max_upload_bytes;
                let pcm = upload::decode_b64(&b64).and_then(|pcm| {
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
                            self.spawn(ctx, Input::Voice { pcm, live: None });
                        }
                    }
                    Err(e) => {
                        let (code, detail) = upload_error_code(e);
                        self.conn
                            .error(ErrorPayload::new(code, detail).with_request(Some(id)))
                            .await;
                    }
                }
            }
            RequestKind::BinaryStart => {
                if let Some(ctx) = self.admit(&id).await {
                    self.start_upload(ctx, UploadMode::Binary, None).await;
                }
            }
            RequestKind::VoiceChunk { seq: 0, data } => {
                if let Some(ctx) = self.admit(&id).await {
                    self.start_upload(ctx, UploadMode::Base64Chunks, Some(data))
                        .await;
                }
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

    /// Ends a request that this task still owns with an ERROR tied to it.
    pub(super) async fn end_with_error(
        &self,
        ctx: &Arc<RequestCtx>,
        code: ErrorCode,
        detail: String,
    ) {
        if self.inflight.finish(ctx) {
            ctx.token.cancel();
            let e = ErrorPayload::new(code, detail).with_request(Some(ctx.request_id.clone()));
            self.conn.error(e).await;
        }
    }

    /// Registers a new request in flight, or answers SERVER_BUSY.
    async fn admit(&self, id: &str) -> Option<Arc<RequestCtx>> {
        let max = self.conn.app.config.limits.max_requests_in_flight;
        let e = match self.inflight.insert(id, &self.token, max) {
            Ok(ctx) => return Some(ctx),
            Err(InsertError::Busy { max }) => ErrorPayload::new(
                ErrorCode::ServerBusy,
                format!("this session already has {max} requests in flight"),
            )
            .with_request(Some(id.to_string())),
            Err(InsertError::Duplicate) => ErrorPayload::new(
                ErrorCode::MalformedPayload,
                format!("field `payload.request_id`: {id:?} is already in flight; use a new id"),
            ),
        };
        self.conn.error(e).await;
        None
    }

    /// Runs the request on the pipeline, tracked for shutdown.
    pub(super) fn spawn(&self, ctx: Arc<RequestCtx>, input: Input) {
        let app = &self.conn.app;
        let job = Job {
            ctx,
            inflight: self.inflight.clone(),
            outbox: self.conn.outbox.clone(),
            history: self.history.clone(),
            attrs: self.attrs.clone(),
            metrics: app.metrics.clone(),
        };
        app.tracker
            .spawn(pipeline::run(job, input, app.deps.clone()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::session::testkit::{Scripted, start, text_request};

    /// A REQUEST with no text that sets `require_tts` and ADDs the `show_exhibit` tool.
    fn add_exhibit_tool(id: &str, require_tts: bool) -> serde_json::Value {
        let tool = json!({"name": "show_exhibit", "description": "Show an exhibit card",
                          "parameters": [{"name": "exhibit_id", "type": "string", "required": true}]});
        json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
               "require_tts": require_tts, "function_calling_op": "ADD",
               "function_calling": [tool], "content": {"text": ""}})
    }

    #[tokio::test(start_paused = true)]
    async fn attributes_only_request_ends_at_once_and_updates_the_session() {
        let mut h = start(Scripted(None), |_| {});
        h.register().await;
        h.send("REQUEST", add_exhibit_tool("a1", true)).await;
        let r = h.expect("RESPONSE").await;
        assert_eq!(r["payload"]["request_id"], "a1");
        assert_eq!(r["payload"]["text_stream_seq"], -1);
        h.send("SESSION_QUERY", json!({})).await;
        let d = h.expect("SESSION_INFO").await["payload"]["session_data"].clone();
        assert_eq!(d["require_tts"], true);
        assert_eq!(d["function_calling"][0]["name"], "show_exhibit");
        // A failing op changes nothing, not even the other attributes of that request.
        h.send("REQUEST", add_exhibit_tool("a2", false)).await;
        let e = h.expect_error("MALFORMED_PAYLOAD").await;
        assert_eq!(e["payload"]["request_id"], "a2");
        h.send("SESSION_QUERY", json!({"query_fields": ["require_tts"]}))
            .await;
        let d = h.expect("SESSION_INFO").await["payload"]["session_data"].clone();
        assert_eq!(d["require_tts"], true);
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn duplicate_ids_and_the_in_flight_limit_are_refused() {
        let mut h = start(Scripted(None), |c| c.limits.max_requests_in_flight = 1);
        h.register().await;
        h.send("REQUEST", text_request("r1", "hello")).await;
        h.send("REQUEST", text_request("r1", "again")).await;
        let e = h
            .expect_error_saying("MALFORMED_PAYLOAD", "already in flight")
            .await;
        // Not tied to r1: that would end r1 for the client.
        assert_ne!(e["payload"]["request_id"], "r1", "{e}");
        h.send("REQUEST", text_request("r2", "hello")).await;
        let e = h.expect_error("SERVER_BUSY").await;
        assert_eq!(e["payload"]["request_id"], "r2");
        h.send("INTERRUPT", json!({"reason": "USER_STOP"})).await;
        let ack = h.expect("INTERRUPT_ACK").await;
        assert_eq!(ack["payload"]["interrupted_request_ids"], json!(["r1"]));
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn frames_must_carry_this_session_id() {
        let mut h = start(Scripted(Some("ok")), |_| {});
        h.register().await;
        let sid = std::mem::take(&mut h.sid);
        h.send("REQUEST", text_request("r1", "hello")).await;
        h.expect_error_saying("SESSION_INVALID", "required").await;
        h.sid = "sess_other".into();
        h.send("REQUEST", text_request("r1", "hello")).await;
        h.expect_error_saying("SESSION_INVALID", "does not match")
            .await;
        // HEALTH_CHECK is served without one.
        h.sid.clear();
        h.send("HEALTH_CHECK", json!({})).await;
        h.expect("HEALTH_CHECK_ACK").await;
        h.sid = sid;
        h.send("REQUEST", text_request("r1", "hello")).await;
        assert_eq!(h.reply("r1").await.0, "ok");
        h.finish().await;
    }
}

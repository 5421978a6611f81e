//! Voice uploads of a registered session: the start REQUEST (VOICE + BINARY, or base64 chunks
//! from `stream_seq` 0), binary frames, continuation chunks and the end frame, the upload's idle
//! timeout (in `control`), and the live recognition fed while the audio arrives. A complete
//! upload becomes [`Input::Voice`] with its live recognition, if any.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::upload::{Upload, UploadError, UploadMode};
use super::{Flow, Session};
use crate::pipeline::Input;
use crate::pipeline::speech::LiveStt;
use crate::protocol::{ErrorCode, ErrorPayload};
use crate::request::inflight::RequestCtx;

/// The one open upload of a session; its request is in flight.
pub(super) struct OpenUpload {
    pub upload: Upload,
    pub ctx: Arc<RequestCtx>,
    /// The upload's streaming recognition (providers that take audio as it arrives). Dropping
    /// it closes the upstream connection.
    pub live: Option<LiveStt>,
    /// When the upload last received something (the idle timeout runs from here).
    pub touched: Instant,
}

/// The protocol's error code and detail for an upload failure.
pub(super) fn upload_error_code(e: UploadError) -> (ErrorCode, String) {
    match e {
        UploadError::Seq(d) => (ErrorCode::StreamSeqError, d),
        UploadError::TooLarge(d) => (ErrorCode::PayloadTooLarge, d),
        UploadError::Malformed(d) => (ErrorCode::MalformedPayload, d),
    }
}

impl Session {
    pub(super) async fn on_binary(&mut self, data: Bytes) -> Flow {
        let max = self.conn.app.config.limits.max_binary_frame_bytes;
        self.live.touch(Instant::now());
        if data.len() > max {
            let detail = format!(
                "binary frame of {} bytes exceeds the limit of {max} bytes",
                data.len()
            );
            if self.upload.is_some() {
                self.fail_upload(
                    ErrorCode::PayloadTooLarge,
                    format!("{detail}; the upload was discarded"),
                )
                .await;
            } else {
                self.conn
                    .error(ErrorPayload::new(ErrorCode::PayloadTooLarge, detail))
                    .await;
            }
            return Flow::Continue;
        }
        let Some(open) = self.upload.as_mut() else {
            self.conn
                .error(ErrorPayload::new(
                    ErrorCode::StreamSeqError,
                    "binary frame with no open VOICE + BINARY upload (send the start REQUEST first)",
                ))
                .await;
            return Flow::Continue;
        };
        match open.upload.push_binary(&data) {
            Ok(()) => {
                open.touched = Instant::now();
                if let Some(l) = &open.live {
                    l.feed(&data);
                }
            }
            Err(e) => self.fail_upload_with(e).await,
        }
        Flow::Continue
    }

    /// Opens the upload of request `ctx` (already admitted); `first` is the data of a base64
    /// chunk 0 (`None` for BINARY mode).
    pub(super) async fn start_upload(
        &mut self,
        ctx: Arc<RequestCtx>,
        mode: UploadMode,
        first: Option<Option<String>>,
    ) {
        let app = &self.conn.app;
        let mut upload = Upload::new(&ctx.request_id, mode, app.config.limits.max_upload_bytes);
        let live = app
            .deps
            .stt
            .as_ref()
            .filter(|stt| stt.streams_input())
            .map(|stt| LiveStt::start(stt, &ctx));
        let touched = Instant::now();
        if let Some(data) = first
            && let Err(e) = upload.push_chunk(0, data.as_deref())
        {
            self.upload = Some(Box::new(OpenUpload {
                upload,
                ctx,
                live: None,
                touched,
            }));
            self.fail_upload_with(e).await;
            return;
        }
        if let Some(l) = &live {
            l.feed(upload.pcm_since(0));
        }
        self.upload = Some(Box::new(OpenUpload {
            upload,
            ctx,
            live,
            touched,
        }));
    }

    /// Next chunk (`Some`) or the BINARY end frame (`None`) of the open upload.
    pub(super) async fn continue_upload(&mut self, id: &str, chunk: Option<(i64, Option<String>)>) {
        let fits = |u: &OpenUpload| {
            u.upload.request_id == id
                && match chunk {
                    Some(_) => u.upload.mode == UploadMode::Base64Chunks,
                    None => u.upload.mode == UploadMode::Binary,
                }
        };
        let Some(open) = self.upload.as_mut().filter(|u| fits(u)) else {
            self.wrong_upload(id).await;
            return;
        };
        let before = open.upload.len();
        let complete = match chunk {
            Some((seq, data)) => open.upload.push_chunk(seq, data.as_deref()),
            None => Ok(true),
        };
        if complete.is_ok() {
            open.touched = Instant::now();
            if let Some(l) = &open.live {
                l.feed(open.upload.pcm_since(before));
            }
        }
        match complete {
            Ok(false) => {}
            Ok(true) => {
                let Some(open) = self.upload.take() else {
                    return;
                };
                let OpenUpload {
                    upload, ctx, live, ..
                } = *open;
                match upload.finish() {
                    Ok(pcm) => self.spawn(ctx, Input::Voice { pcm, live }),
                    Err(e) => {
                        let (code, detail) = upload_error_code(e);
                        self.end_with_error(&ctx, code, detail).await;
                    }
                }
            }
            Err(e) => self.fail_upload_with(e).await,
        }
    }

    /// A continuation frame for request `id` that does not fit the open upload (if any).
    async fn wrong_upload(&mut self, id: &str) {
        let open_id = self.upload.as_ref().map(|u| u.upload.request_id.clone());
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
            let tie = (!self.inflight.contains(id)).then(|| id.to_string());
            self.conn
                .error(ErrorPayload::new(ErrorCode::StreamSeqError, detail).with_request(tie))
                .await;
        }
    }

    pub(super) async fn fail_upload_with(&mut self, e: UploadError) {
        let (code, detail) = upload_error_code(e);
        self.fail_upload(code, format!("{detail}; the upload was discarded"))
            .await;
    }

    /// Discards the open upload and ends its request with an ERROR.
    pub(super) async fn fail_upload(&mut self, code: ErrorCode, detail: String) {
        if let Some(open) = self.upload.take() {
            let OpenUpload { ctx, live, .. } = *open;
            drop(live); // closes the upstream recognition first
            self.end_with_error(&ctx, code, detail).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::time::Instant;

    use crate::session::Inbound;
    use crate::session::testkit::{Harness, Scripted, start};

    fn binary(id: &str, seq: i64) -> Value {
        json!({"request_id": id, "data_type": "VOICE", "stream_flag": true, "stream_seq": seq,
               "content": {"voice_mode": "BINARY"}})
    }

    async fn registered() -> Harness {
        let mut h = start(Scripted(Some("ok")), |c| {
            c.session.heartbeat_interval_seconds = 1000;
            c.stt.upload_idle_timeout_seconds = 15.0;
        });
        h.register().await;
        h
    }

    #[tokio::test(start_paused = true)]
    async fn binary_frames_need_an_open_upload() {
        let mut h = registered().await;
        h.send_inbound(Inbound::Binary(vec![0u8; 320].into())).await;
        h.expect_error_saying("STREAM_SEQ_ERROR", "no open").await;
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_complete_upload_reaches_the_pipeline() {
        // No STT configured: the pipeline ends the request with that ERROR (not retryable: asking
        // again cannot help), tied to it.
        let mut h = registered().await;
        h.send("REQUEST", binary("v1", 0)).await;
        h.send_inbound(Inbound::Binary(vec![0u8; 3200].into()))
            .await;
        h.send("REQUEST", binary("v1", -1)).await;
        let e = h.expect_error("MALFORMED_PAYLOAD").await;
        assert_eq!(e["payload"]["request_id"], "v1");
        assert_eq!(e["payload"]["retryable"], false);
        assert_eq!(
            e["payload"]["error_detail"],
            crate::pipeline::capabilities::NO_SPEECH_INPUT
        );
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_upload_is_discarded_after_its_timeout() {
        let mut h = registered().await;
        h.send("REQUEST", binary("v1", 0)).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        h.send_inbound(Inbound::Binary(vec![0u8; 320].into())).await;
        let t0 = Instant::now();
        let e = h.expect_error("REQUEST_TIMEOUT").await;
        assert_eq!(e["payload"]["request_id"], "v1");
        // Counted from the last frame of the upload.
        assert_eq!(t0.elapsed(), Duration::from_secs(15));
        h.send("REQUEST", binary("v1", -1)).await;
        h.expect_error("STREAM_SEQ_ERROR").await;
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_upload_discards_the_open_one() {
        let mut h = registered().await;
        h.send("REQUEST", binary("v1", 0)).await;
        h.send("REQUEST", binary("v2", 0)).await;
        let e = h.expect_error("STREAM_SEQ_ERROR").await;
        assert_eq!(e["payload"]["request_id"], "v1");
        let e = h.expect_error("STREAM_SEQ_ERROR").await;
        assert_eq!(e["payload"]["request_id"], "v2");
        // Nothing is open now.
        h.send("REQUEST", binary("v2", -1)).await;
        h.expect_error_saying("STREAM_SEQ_ERROR", "no open upload")
            .await;
        h.finish().await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_end_frame_of_another_request_discards_the_upload() {
        let mut h = registered().await;
        h.send("REQUEST", binary("v1", 0)).await;
        h.send("REQUEST", binary("v2", -1)).await;
        let e = h.expect_error("STREAM_SEQ_ERROR").await;
        assert_eq!(e["payload"]["request_id"], "v1");
        let e = h
            .expect_error_saying("STREAM_SEQ_ERROR", "does not continue")
            .await;
        assert_eq!(e["payload"]["request_id"], "v2");
        h.finish().await;
    }
}

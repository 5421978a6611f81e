//! The outgoing side of one request: turns the model's output into RESPONSE frames.
//!
//! Text deltas go out as they arrive with `text_stream_seq` 0, 1, 2, …; client function calls go
//! out as their own frames; [`ReplyStream::final_frame`] closes the streams that were opened.
//! This is where speech output plugs in: with `require_tts` the text is also cut into speakable
//! pieces, synthesised, and sent as `voice_stream_seq` chunks interleaved with the text. Until a
//! TTS provider is configured the voice stream is closed empty and the final frame says why.

use std::sync::Arc;

use crate::protocol::{FunctionCall, Response, ResponseContent, ServerMessage};
use crate::session::inflight::RequestCtx;
use crate::session::outbox::Outbox;

use super::{Deps, Failure};

pub const NO_TTS_NOTICE: &str =
    "speech output (TTS) is not configured on this server; this reply is text only";

pub struct ReplyStream {
    ctx: Arc<RequestCtx>,
    outbox: Outbox,
    require_tts: bool,
    text_seq: i64,
    /// Everything sent as text so far (for the history).
    text: String,
}

impl ReplyStream {
    pub fn new(ctx: Arc<RequestCtx>, outbox: Outbox, require_tts: bool, _deps: &Deps) -> Self {
        ReplyStream {
            ctx,
            outbox,
            require_tts,
            text_seq: 0,
            text: String::new(),
        }
    }

    /// The reply text produced so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Sends one text delta. Frames of a cancelled request are never sent.
    pub async fn push_text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        let frame =
            ServerMessage::Response(Response::text(&self.ctx.request_id, self.text_seq, delta));
        self.text.push_str(delta);
        self.text_seq += 1;
        self.outbox.send_for(&self.ctx, &frame, delta.len()).await;
    }

    /// Sends a function call for the client to execute.
    pub async fn push_function_call(&mut self, call: FunctionCall) {
        let frame = ServerMessage::Response(Response {
            request_id: self.ctx.request_id.clone(),
            function_call: Some(call),
            ..Default::default()
        });
        self.outbox.send_for(&self.ctx, &frame, 0).await;
    }

    /// Waits for work still producing frames (speech synthesis) to finish, under the request's
    /// token. Call before claiming the request's end.
    pub async fn flush(&mut self) -> Result<(), Failure> {
        Ok(())
    }

    /// The last frame: closes the text stream and, with `require_tts`, the voice stream.
    pub fn final_frame(&self) -> Response {
        Response {
            request_id: self.ctx.request_id.clone(),
            text_stream_seq: Some(-1),
            voice_stream_seq: self.require_tts.then_some(-1),
            content: Some(ResponseContent::default()),
            notice: self.require_tts.then(|| NO_TTS_NOTICE.to_string()),
            ..Default::default()
        }
    }
}

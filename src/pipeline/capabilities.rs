//! What this server can do beyond text, as the session tells clients (REGISTER_ACK
//! `capabilities`, an extension), and the early refusal of a voice request it cannot serve.
//! Called from the session with one line each, so the session code does not grow.

use std::sync::{Arc, Mutex};

use crate::protocol::{Capabilities, ErrorCode, ErrorPayload, RequestKind};

use super::Deps;
use super::history::History;

/// `error_detail` of a voice request on a server without speech recognition. Stable: clients
/// may match its start to show the visitor a message in their own language.
pub const NO_SPEECH_INPUT: &str =
    "speech input is not available on this server (no STT is configured); send text instead";

/// REGISTER_ACK `capabilities`.
pub fn of(deps: &Deps) -> Capabilities {
    Capabilities {
        speech_input: deps.stt.is_some(),
        speech_output: deps.tts.is_some(),
    }
}

/// A VOICE request (any frame of an upload) on a server without STT: refused at once with
/// MALFORMED_PAYLOAD (not retryable: retrying cannot help), before any audio is collected.
pub fn refuse_voice(deps: &Deps, kind: &RequestKind, request_id: &str) -> Option<ErrorPayload> {
    let voice = matches!(
        kind,
        RequestKind::VoiceWhole(_)
            | RequestKind::VoiceChunk { .. }
            | RequestKind::BinaryStart
            | RequestKind::BinaryEnd
    );
    (voice && deps.stt.is_none()).then(|| {
        ErrorPayload::new(ErrorCode::MalformedPayload, NO_SPEECH_INPUT)
            .with_message("语音输入不可用 (speech input is not available)")
            .with_request(Some(request_id.to_string()))
    })
}

/// An empty conversation history for a session (`clear_history: true`).
pub fn fresh_history(deps: &Deps) -> Arc<Mutex<History>> {
    Arc::new(Mutex::new(History::new(deps.llm_config.history_messages)))
}

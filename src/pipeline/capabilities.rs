//! What this server can do beyond text, as the session tells clients (REGISTER_ACK
//! `capabilities`, an extension), and the error of a voice request it cannot serve.
//! Called from the session with one line each, so the session code does not grow.

use std::sync::{Arc, Mutex};

use crate::protocol::{Capabilities, ErrorCode, ErrorPayload};

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

/// The ERROR for a request's failure: the spec's message for its code, except for a voice
/// request on a server without STT, whose `error_msg` says so (MALFORMED_PAYLOAD, not
/// retryable: asking again cannot help).
pub fn error_payload(code: ErrorCode, detail: String) -> ErrorPayload {
    let speech = code == ErrorCode::MalformedPayload && detail == NO_SPEECH_INPUT;
    let e = ErrorPayload::new(code, detail);
    if speech {
        e.with_message("语音输入不可用 (speech input is not available)")
    } else {
        e
    }
}

/// An empty conversation history for a session (`clear_history: true`).
pub fn fresh_history(deps: &Deps) -> Arc<Mutex<History>> {
    Arc::new(Mutex::new(History::new(deps.llm_config.history_messages)))
}

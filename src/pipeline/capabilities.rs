//! What this server can do beyond text, as the session tells clients (REGISTER_ACK
//! `capabilities`, an extension), and the texts of the error for a voice request it cannot
//! serve.

use crate::protocol::Capabilities;

use super::Deps;

/// `error_detail` of a voice request on a server without speech recognition. Stable: clients
/// may match its start to show the visitor a message in their own language.
pub const NO_SPEECH_INPUT: &str =
    "speech input is not available on this server (no STT is configured); send text instead";

/// REGISTER_ACK `capabilities`.
pub fn of(deps: &Deps) -> Capabilities {
    Capabilities {
        speech_input: deps.stt.is_some(),
        speech_output: deps.tts.is_some(),
        speech_output_chinese: deps.tts.is_some() && deps.tts_config.reads_cjk,
    }
}

/// `error_msg` of that ERROR: the spec's MALFORMED_PAYLOAD message ("报文格式错误") would tell
/// the visitor their request was malformed.
pub const NO_SPEECH_INPUT_MESSAGE: &str = "语音输入不可用 (speech input is not available)";

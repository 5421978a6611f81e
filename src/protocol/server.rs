//! Server → client payloads (spec §5). Field order follows the spec's examples.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{InterruptReason, Platform, ShutdownPayload};
use super::error::ErrorPayload;
use super::function::FunctionDef;

/// REGISTER_ACK payload (spec §5.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterAck {
    pub status: String,
    pub message: String,
    pub session_id: String,
    pub session_timeout_seconds: u64,
    /// **Extension**: what this server can do beyond text (docs/protocol.md "Kiosk capabilities /
    /// visitor reset"). Clients that do not know it ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// **Extension** (docs/protocol.md "Session resume"): the secret that lets this client take
    /// the session over from a new socket within `[session] resume_window_seconds`. A new one
    /// with every REGISTER_ACK; absent when resume is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
}

/// REGISTER_ACK `capabilities` (**extension**): whether a VOICE request can be recognised
/// (an STT provider is configured) and whether `require_tts` replies carry voice (a TTS
/// provider is configured), and whether that voice reads Chinese (`[tts] reads_cjk`; false
/// without TTS): a Chinese page hides its spoken-replies control when it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub speech_input: bool,
    pub speech_output: bool,
    pub speech_output_chinese: bool,
}

/// `function_call` of a RESPONSE (spec §5.3). `call_id` is an **extension**: the id the client
/// echoes in `function_result` so the model can match the result to its call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    pub parameters: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// RESPONSE `content` (spec §5.3). The interrupted final frame carries it empty: `{}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
}

/// RESPONSE payload (spec §5.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_stream_seq: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_stream_seq: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_reason: Option<InterruptReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<ResponseContent>,
    /// **Extension**: a human-readable notice about this reply (e.g. "speech output is not
    /// configured, text only"). Clients that do not know it ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// **Extension**: what speech recognition heard, sent once (in a frame of its own, before
    /// the reply) for a VOICE request, so the client can show the visitor's question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

impl Response {
    /// The final frame of an interrupted request (spec §5.3.3, docs/protocol.md "Interrupt").
    pub fn interrupted(request_id: &str, reason: InterruptReason) -> Self {
        Response {
            request_id: request_id.to_string(),
            text_stream_seq: Some(-1),
            voice_stream_seq: Some(-1),
            interrupted: Some(true),
            interrupt_reason: Some(reason),
            content: Some(ResponseContent::default()),
            ..Default::default()
        }
    }

    /// A text chunk with its sequence number.
    pub fn text(request_id: &str, seq: i64, text: impl Into<String>) -> Self {
        Response {
            request_id: request_id.to_string(),
            text_stream_seq: Some(seq),
            content: Some(ResponseContent {
                text: Some(text.into()),
                voice: None,
            }),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum AckStatus {
    Success,
    Partial,
    Failed,
}

/// INTERRUPT_ACK payload (spec §5.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterruptAck {
    pub interrupted_request_ids: Vec<String>,
    pub status: AckStatus,
    pub message: String,
}

/// `session_data` of SESSION_INFO (spec §5.5); only the asked-for fields are present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_tts: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_srs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_calling: Option<Vec<FunctionDef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_time: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_seconds: Option<u64>,
}

impl SessionData {
    pub const FIELDS: [&'static str; 6] = [
        "platform",
        "require_tts",
        "enable_srs",
        "function_calling",
        "create_time",
        "remaining_seconds",
    ];
}

/// SESSION_INFO payload (spec §5.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub status: String,
    pub message: String,
    pub session_data: SessionData,
}

/// HEARTBEAT payload (spec §5.7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub remaining_seconds: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HealthState {
    Healthy,
    Degraded,
    Unhealthy,
}

/// `health_status` of HEALTH_CHECK_ACK (spec §5.8); only the asked-for fields are present.
/// `session_count` and `uptime_seconds` are **extensions**.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usage: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<HealthState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<u64>,
}

impl HealthStatus {
    pub const FIELDS: [&'static str; 5] = [
        "cpu_usage",
        "conn_count",
        "status",
        "session_count",
        "uptime_seconds",
    ];
}

/// HEALTH_CHECK_ACK payload (spec §5.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthCheckAck {
    pub health_status: HealthStatus,
}

/// SESSION_WARN payload (spec §5.9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionWarn {
    pub warn_type: String,
    pub remaining_seconds: u64,
    pub message: String,
}

/// Every server → client message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ServerMessage {
    RegisterAck(RegisterAck),
    Response(Response),
    InterruptAck(InterruptAck),
    SessionInfo(SessionInfo),
    Shutdown(ShutdownPayload),
    Heartbeat(Heartbeat),
    HealthCheckAck(HealthCheckAck),
    SessionWarn(SessionWarn),
    Error(ErrorPayload),
}

impl ServerMessage {
    pub const TYPES: [&'static str; 9] = [
        "REGISTER_ACK",
        "RESPONSE",
        "INTERRUPT_ACK",
        "SESSION_INFO",
        "SHUTDOWN",
        "HEARTBEAT",
        "HEALTH_CHECK_ACK",
        "SESSION_WARN",
        "ERROR",
    ];

    pub fn msg_type(&self) -> &'static str {
        match self {
            ServerMessage::RegisterAck(_) => "REGISTER_ACK",
            ServerMessage::Response(_) => "RESPONSE",
            ServerMessage::InterruptAck(_) => "INTERRUPT_ACK",
            ServerMessage::SessionInfo(_) => "SESSION_INFO",
            ServerMessage::Shutdown(_) => "SHUTDOWN",
            ServerMessage::Heartbeat(_) => "HEARTBEAT",
            ServerMessage::HealthCheckAck(_) => "HEALTH_CHECK_ACK",
            ServerMessage::SessionWarn(_) => "SESSION_WARN",
            ServerMessage::Error(_) => "ERROR",
        }
    }
}

/// The RESPONSE frame of one streamed text chunk, written by hand from borrowed parts: the same
/// bytes as [`super::encode_server`] of [`Response::text`] (tests hold them equal), in one
/// allocation of exactly the frame's length. This is the frame sent once per streamed token;
/// serde_json would escape each of its nine keys and six strings byte by byte, and its buffer
/// (sized by a guess) would cost the socket writer one more allocation when it becomes `Bytes`
/// (a `Vec` whose length is not its capacity is not converted in place).
pub fn encode_text_chunk(
    session_id: &str,
    request_id: &str,
    seq: i64,
    text: &str,
    timestamp_ms: i64,
) -> String {
    const HEAD: &[u8] = concat!(
        r#"{"version":""#,
        "1.0",
        r#"","msg_type":"RESPONSE","session_id":"#
    )
    .as_bytes();
    const RID: &[u8] = br#","payload":{"request_id":"#;
    const SEQ: &[u8] = br#","text_stream_seq":"#;
    const TEXT: &[u8] = br#","content":{"text":"#;
    const TS: &[u8] = br#"}},"timestamp":"#;
    debug_assert_eq!(super::PROTOCOL_VERSION, "1.0");
    let mut seq_buf = itoa::Buffer::new();
    let seq = seq_buf.format(seq).as_bytes();
    let mut ts_buf = itoa::Buffer::new();
    let ts = ts_buf.format(timestamp_ms).as_bytes();
    // One scan per string: plain text (the rule) is then copied without a second look.
    let extra = [
        escape_extra(session_id.as_bytes()),
        escape_extra(request_id.as_bytes()),
        escape_extra(text.as_bytes()),
    ];
    let len = HEAD.len()
        + session_id.len()
        + RID.len()
        + request_id.len()
        + SEQ.len()
        + seq.len()
        + TEXT.len()
        + text.len()
        + TS.len()
        + ts.len()
        + 1
        + 6
        + extra.iter().sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(HEAD);
    push_json_str_with(&mut out, session_id, extra[0]);
    out.extend_from_slice(RID);
    push_json_str_with(&mut out, request_id, extra[1]);
    out.extend_from_slice(SEQ);
    out.extend_from_slice(seq);
    out.extend_from_slice(TEXT);
    push_json_str_with(&mut out, text, extra[2]);
    out.extend_from_slice(TS);
    out.extend_from_slice(ts);
    out.push(b'}');
    debug_assert_eq!(out.len(), len);
    // Only whole UTF-8 strings and ASCII were appended.
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// What serde_json writes for byte `b` inside a string: 0 for the byte itself, else the letter
/// of its short escape (`\n`), or `u` for `\u00XX`.
const fn escape_of(b: u8) -> u8 {
    match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x09 => b't',
        0x0A => b'n',
        0x0C => b'f',
        0x0D => b'r',
        0..=0x1F => b'u',
        _ => 0,
    }
}

/// The index of the first byte of `s` that JSON escapes (a control character, `"` or `\`).
/// Eight bytes at a time (the last few padded with spaces): plain text is the rule, so it is
/// skipped a word per step, and only a word that holds such a byte is looked at byte by byte.
#[inline]
fn first_escape(s: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // Exact for "some byte is below n" when n <= 0x80 (and for "some byte is zero").
    const fn below(x: u64, n: u8) -> u64 {
        x.wrapping_sub(ONES * n as u64) & !x & HIGHS
    }
    const fn hit(x: u64) -> bool {
        (below(x, 0x20) | below(x ^ (ONES * b'"' as u64), 1) | below(x ^ (ONES * b'\\' as u64), 1))
            != 0
    }
    let mut i = 0;
    while i < s.len() {
        let word = if i + 8 <= s.len() {
            u64::from_ne_bytes(s[i..i + 8].try_into().expect("eight bytes"))
        } else {
            let mut w = [b' '; 8];
            w[..s.len() - i].copy_from_slice(&s[i..]);
            u64::from_ne_bytes(w)
        };
        if hit(word)
            && let Some(p) = s[i..s.len().min(i + 8)]
                .iter()
                .position(|&b| escape_of(b) != 0)
        {
            return Some(i + p);
        }
        i += 8;
    }
    None
}

/// How many bytes escaping adds to `b` (0 for plain text), as [`push_json_str`] escapes it.
fn escape_extra(b: &[u8]) -> usize {
    let mut extra = 0;
    let mut from = 0;
    while let Some(p) = first_escape(&b[from..]) {
        let at = from + p;
        extra += if escape_of(b[at]) == b'u' { 5 } else { 1 };
        from = at + 1;
    }
    extra
}

/// [`push_json_str`] when [`escape_extra`] of `s` is known: plain text is copied whole.
fn push_json_str_with(out: &mut Vec<u8>, s: &str, extra: usize) {
    if extra == 0 {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        push_json_str(out, s);
    }
}

/// Appends `s` as a JSON string, quotes included, escaped exactly as serde_json escapes it
/// (`\"`, `\\`, the short escapes `\b \t \n \f \r`, other control characters as lowercase
/// `\u00xx`; everything else, non-ASCII included, as is). Runs without escapes are copied whole.
pub(crate) fn push_json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    out.push(b'"');
    let mut from = 0;
    while let Some(p) = first_escape(&b[from..]) {
        let at = from + p;
        out.extend_from_slice(&b[from..at]);
        match escape_of(b[at]) {
            b'u' => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b[at] >> 4) as usize],
                HEX[(b[at] & 0xF) as usize],
            ]),
            e => out.extend_from_slice(&[b'\\', e]),
        }
        from = at + 1;
    }
    out.extend_from_slice(&b[from..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_byte_escapes_as_serde_json_escapes_it() {
        for c in (0u32..0x250).filter_map(char::from_u32) {
            for s in [
                c.to_string(),
                format!("abcdefgh{c}ijklmnop"),
                format!("{c}{c}{c}{c}{c}{c}{c}{c}{c}"),
            ] {
                let mut out = Vec::new();
                push_json_str(&mut out, &s);
                let want = serde_json::to_string(&s).unwrap();
                assert_eq!(String::from_utf8(out).unwrap(), want, "{c:?}");
                assert_eq!(
                    s.len() + 2 + escape_extra(s.as_bytes()),
                    want.len(),
                    "{c:?}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn strings_escape_as_serde_json_escapes_them(s in "(\\PC|[\\x00-\\x1f\"\\\\\\x7f])*") {
            let mut out = Vec::new();
            push_json_str(&mut out, &s);
            let want = serde_json::to_string(&s).unwrap();
            prop_assert_eq!(s.len() + 2 + escape_extra(s.as_bytes()), want.len());
            prop_assert_eq!(String::from_utf8(out).unwrap(), want);
        }

        #[test]
        fn text_chunks_encode_as_the_general_encoder_does(
            sid in "[\\PC\"\\\\\\x00-\\x1f]{0,40}",
            rid in "[\\PC\"\\\\\\x00-\\x1f]{1,20}",
            text in "(\\PC|[\\x00-\\x1f\"\\\\])*",
            seq in any::<i64>(),
            ts in any::<i64>(),
        ) {
            let general = super::super::encode_server(
                &sid,
                &ServerMessage::Response(Response::text(&rid, seq, text.as_str())),
                ts,
            );
            let fast = encode_text_chunk(&sid, &rid, seq, &text, ts);
            prop_assert_eq!(fast.len(), fast.capacity());
            prop_assert_eq!(fast, general);
        }
    }
}

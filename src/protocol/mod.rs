//! Wire types for every message of the client protocol (spec §3–§5) and their JSON codec.
//!
//! Pure: no tokio, no I/O. [`decode_client`] turns one text frame into a typed
//! [`ClientFrame`] or a [`DecodeError`] that already carries the error code and a detail naming
//! the offending field (docs/protocol.md "Frames"). [`encode_server`] writes the five-field
//! envelope `{version, msg_type, session_id, payload, timestamp}` that every server frame carries.
//! The reverse directions ([`ClientFrame::encode`], [`decode_server`]) exist for clients, tests
//! and the load tool, so both directions round-trip.

pub mod client;
pub mod error;
pub mod function;
pub mod server;

pub use client::*;
pub use error::{ErrorCode, ErrorPayload};
pub use function::FunctionDef;
pub use server::*;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};

/// The version the server writes in its frames.
pub const PROTOCOL_VERSION: &str = "1.0";
/// Accepted major version: any `1.x`.
pub const SUPPORTED_MAJOR: &str = "1";
/// Longest `request_id` accepted.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// A decoded client frame.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFrame {
    pub version: String,
    /// `None` when absent or null; `Some("")` when sent empty.
    pub session_id: Option<String>,
    pub timestamp: Number,
    pub message: ClientMessage,
}

/// Why a frame was refused, ready to become an ERROR payload.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub code: ErrorCode,
    pub detail: String,
    /// The frame's `payload.request_id` when one could be read, so the error can be tied to it.
    pub request_id: Option<String>,
}

impl DecodeError {
    fn malformed(detail: impl Into<String>) -> Self {
        DecodeError {
            code: ErrorCode::MalformedPayload,
            detail: detail.into(),
            request_id: None,
        }
    }

    pub fn into_payload(self) -> ErrorPayload {
        ErrorPayload::new(self.code, self.detail).with_request(self.request_id)
    }
}

fn field_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The checked envelope of a frame, payload not yet typed.
struct Envelope {
    version: String,
    msg_type: String,
    session_id: Option<String>,
    timestamp: Number,
    payload: Value,
}

fn decode_envelope(text: &str, known_types: &[&str]) -> Result<Envelope, DecodeError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| DecodeError::malformed(format!("frame is not valid JSON: {e}")))?;
    let Value::Object(mut obj) = value else {
        return Err(DecodeError::malformed(format!(
            "frame must be a JSON object, got {}",
            field_type(&value)
        )));
    };
    let version = match obj.remove("version") {
        Some(Value::String(v)) => v,
        Some(other) => {
            return Err(DecodeError::malformed(format!(
                "field `version`: expected a string, got {}",
                field_type(&other)
            )));
        }
        None => return Err(DecodeError::malformed("missing field `version`")),
    };
    if version.split('.').next() != Some(SUPPORTED_MAJOR)
        || !version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(DecodeError::malformed(format!(
            "field `version`: unsupported version {version:?}; supported: 1.x (e.g. \"1.0\")"
        )));
    }
    let msg_type = match obj.remove("msg_type") {
        Some(Value::String(t)) => t,
        Some(other) => {
            return Err(DecodeError::malformed(format!(
                "field `msg_type`: expected a string, got {}",
                field_type(&other)
            )));
        }
        None => return Err(DecodeError::malformed("missing field `msg_type`")),
    };
    if !known_types.contains(&msg_type.as_str()) {
        return Err(DecodeError::malformed(format!(
            "field `msg_type`: unknown message type {msg_type:?}; expected one of {}",
            known_types.join(", ")
        )));
    }
    let session_id = match obj.remove("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(DecodeError::malformed(format!(
                "field `session_id`: expected a string, got {}",
                field_type(&other)
            )));
        }
    };
    let timestamp = match obj.remove("timestamp") {
        Some(Value::Number(n)) => n,
        Some(other) => {
            return Err(DecodeError::malformed(format!(
                "field `timestamp`: expected a number (Unix milliseconds), got {}",
                field_type(&other)
            )));
        }
        None => return Err(DecodeError::malformed("missing field `timestamp`")),
    };
    let payload = match obj.remove("payload") {
        Some(p @ Value::Object(_)) => p,
        Some(other) => {
            return Err(DecodeError::malformed(format!(
                "field `payload`: expected an object, got {}",
                field_type(&other)
            )));
        }
        None => return Err(DecodeError::malformed("missing field `payload`")),
    };
    Ok(Envelope {
        version,
        msg_type,
        session_id,
        timestamp,
        payload,
    })
}

/// The payload's `request_id` when it is one, so an error can be tied to it.
fn readable_request_id(payload: &Value) -> Option<String> {
    payload
        .get("request_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= MAX_REQUEST_ID_LEN)
        .map(str::to_string)
}

/// Members serde would also read from a shape the protocol does not have: a struct from an
/// array (positionally), `auth` from an array, an enum from a one-member object
/// (`{"WEB": null}`). Per message type: members that must be objects, then members that must
/// be strings; `[]` means each element, `?` that null (absent) is fine.
const SHAPES: &[(&str, &[&str], &[&str])] = &[
    (
        "REGISTER",
        &["auth", "function_calling[]"],
        &[
            "platform",
            "auth.type",
            "auth.api_key",
            "auth.account",
            "auth.password",
        ],
    ),
    (
        "REQUEST",
        &["content", "content.function_result?", "function_calling[]"],
        &["data_type", "function_calling_op?", "content.voice_mode?"],
    ),
    ("INTERRUPT", &[], &["reason"]),
];

/// Refuses the shapes of [`SHAPES`], naming the member.
fn check_shapes(msg_type: &str, payload: &Value) -> Result<(), DecodeError> {
    let Some((_, objects, strings)) = SHAPES.iter().find(|(t, ..)| *t == msg_type) else {
        return Ok(());
    };
    let rules = objects
        .iter()
        .map(|p| (p, "an object"))
        .chain(strings.iter().map(|p| (p, "a string")));
    for (path, want) in rules {
        let (path, null_ok) = path.strip_suffix('?').map_or((*path, false), |p| (p, true));
        let mut found = vec![(String::new(), payload)];
        for seg in path.split('.') {
            let (key, each) = seg.strip_suffix("[]").map_or((seg, false), |k| (k, true));
            let mut next = Vec::new();
            for (name, v) in found {
                let name = if name.is_empty() {
                    key.to_string()
                } else {
                    format!("{name}.{key}")
                };
                match v.get(key) {
                    Some(Value::Array(items)) if each => next.extend(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, x)| (format!("{name}[{i}]"), x)),
                    ),
                    Some(x) if !each => next.push((name, x)),
                    _ => {}
                }
            }
            found = next;
        }
        for (name, v) in found {
            let ok = match want {
                "an object" => v.is_object(),
                _ => v.is_string(),
            } || (null_ok && v.is_null());
            if !ok {
                return Err(DecodeError {
                    code: ErrorCode::MalformedPayload,
                    detail: format!(
                        "field `payload.{name}`: expected {want}, got {}",
                        field_type(v)
                    ),
                    request_id: readable_request_id(payload),
                });
            }
        }
    }
    Ok(())
}

/// Deserializes a payload, naming the failing field as `payload.<path>`.
fn typed_payload<T: DeserializeOwned>(payload: Value) -> Result<T, DecodeError> {
    let request_id = readable_request_id(&payload);
    serde_path_to_error::deserialize(payload).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let detail = if path == "." || path.is_empty() {
            format!("payload: {inner}")
        } else {
            format!("field `payload.{path}`: {inner}")
        };
        DecodeError {
            code: ErrorCode::MalformedPayload,
            detail,
            request_id: request_id.clone(),
        }
    })
}

/// Decodes one client text frame (docs/protocol.md "Frames").
pub fn decode_client(text: &str) -> Result<ClientFrame, DecodeError> {
    let env = decode_envelope(text, &ClientMessage::TYPES)?;
    check_shapes(&env.msg_type, &env.payload)?;
    let message = match env.msg_type.as_str() {
        "REGISTER" => {
            let p: RegisterPayload = typed_payload(env.payload)?;
            function::validate_list(&p.function_calling, "payload.function_calling").map_err(
                |(field, why)| DecodeError::malformed(format!("field `{field}`: {why}")),
            )?;
            ClientMessage::Register(p)
        }
        "REQUEST" => {
            let p: RequestPayload = typed_payload(env.payload)?;
            if p.request_id.is_empty() || p.request_id.len() > MAX_REQUEST_ID_LEN {
                return Err(DecodeError::malformed(format!(
                    "field `payload.request_id`: must be 1-{MAX_REQUEST_ID_LEN} bytes"
                )));
            }
            ClientMessage::Request(p)
        }
        "INTERRUPT" => ClientMessage::Interrupt(typed_payload(env.payload)?),
        "SESSION_QUERY" => ClientMessage::SessionQuery(typed_payload(env.payload)?),
        "SHUTDOWN" => ClientMessage::Shutdown(typed_payload(env.payload)?),
        "HEARTBEAT_REPLY" => ClientMessage::HeartbeatReply(typed_payload(env.payload)?),
        "HEALTH_CHECK" => ClientMessage::HealthCheck(typed_payload(env.payload)?),
        _ => unreachable!("decode_envelope checked msg_type"),
    };
    Ok(ClientFrame {
        version: env.version,
        session_id: env.session_id,
        timestamp: env.timestamp,
        message,
    })
}

#[derive(Serialize)]
struct WireOut<'a, P: Serialize> {
    version: &'a str,
    msg_type: &'a str,
    session_id: &'a str,
    payload: &'a P,
    timestamp: &'a Number,
}

/// Encodes a server frame with all five envelope fields, into a buffer sized for the payload
/// (a voice chunk's base64 is written without the buffer doubling its way up).
pub fn encode_server(session_id: &str, msg: &ServerMessage, timestamp_ms: i64) -> String {
    let hint = match msg {
        ServerMessage::Response(r) => {
            let c = r.content.as_ref();
            r.request_id.len()
                + c.and_then(|c| c.text.as_ref())
                    .map_or(0, |t| t.len() + t.len() / 8)
                + c.and_then(|c| c.voice.as_ref()).map_or(0, String::len)
        }
        _ => 0,
    };
    encode_sized(session_id, msg.msg_type(), msg, timestamp_ms, hint)
}

/// Room for a frame's envelope and a small payload, so most frames are encoded without
/// growing the buffer (serde_json's own `to_string` starts at 128 bytes and doubles).
const ENVELOPE_BYTES: usize = 192;

fn encode_sized<P: Serialize>(
    session_id: &str,
    msg_type: &str,
    payload: &P,
    timestamp_ms: i64,
    payload_hint: usize,
) -> String {
    let ts = Number::from(timestamp_ms);
    let mut buf = Vec::with_capacity(ENVELOPE_BYTES + session_id.len() + payload_hint);
    serde_json::to_writer(
        &mut buf,
        &WireOut {
            version: PROTOCOL_VERSION,
            msg_type,
            session_id,
            payload,
            timestamp: &ts,
        },
    )
    .expect("server messages always serialize");
    String::from_utf8(buf).expect("serde_json writes UTF-8")
}

impl ClientFrame {
    pub fn new(session_id: Option<&str>, message: ClientMessage, timestamp_ms: i64) -> Self {
        ClientFrame {
            version: PROTOCOL_VERSION.into(),
            session_id: session_id.map(str::to_string),
            timestamp: Number::from(timestamp_ms),
            message,
        }
    }

    /// Encodes the frame as a client would send it. `session_id` is written as `""` when `None`.
    pub fn encode(&self) -> String {
        serde_json::to_string(&WireOut {
            version: &self.version,
            msg_type: self.message.msg_type(),
            session_id: self.session_id.as_deref().unwrap_or(""),
            payload: &self.message,
            timestamp: &self.timestamp,
        })
        .expect("client messages always serialize")
    }
}

/// A decoded server frame (for clients, tests and the load tool).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerFrame {
    pub version: String,
    pub session_id: String,
    pub timestamp: Number,
    pub message: ServerMessage,
}

/// Decodes a server frame.
pub fn decode_server(text: &str) -> Result<ServerFrame, DecodeError> {
    let env = decode_envelope(text, &ServerMessage::TYPES)?;
    let p = env.payload;
    let message = match env.msg_type.as_str() {
        "REGISTER_ACK" => ServerMessage::RegisterAck(typed_payload(p)?),
        "RESPONSE" => ServerMessage::Response(typed_payload(p)?),
        "INTERRUPT_ACK" => ServerMessage::InterruptAck(typed_payload(p)?),
        "SESSION_INFO" => ServerMessage::SessionInfo(typed_payload(p)?),
        "SHUTDOWN" => ServerMessage::Shutdown(typed_payload(p)?),
        "HEARTBEAT" => ServerMessage::Heartbeat(typed_payload(p)?),
        "HEALTH_CHECK_ACK" => ServerMessage::HealthCheckAck(typed_payload(p)?),
        "SESSION_WARN" => ServerMessage::SessionWarn(typed_payload(p)?),
        "ERROR" => ServerMessage::Error(typed_payload(p)?),
        _ => unreachable!("decode_envelope checked msg_type"),
    };
    Ok(ServerFrame {
        version: env.version,
        session_id: env.session_id.unwrap_or_default(),
        timestamp: env.timestamp,
        message,
    })
}

/// What a REQUEST asks for, after the per-kind rules of spec §4.3 and docs/protocol.md are checked.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestKind {
    /// TEXT with `""` (or only whitespace): attribute update only (spec §4.3.4).
    AttributesOnly,
    /// TEXT with a question.
    Text(String),
    /// **Extension**: TEXT carrying `content.function_result`.
    FunctionResult(FunctionResult, Option<String>),
    /// VOICE + BASE64 + `stream_flag:false`: the whole utterance.
    VoiceWhole(String),
    /// VOICE + BASE64 + `stream_flag:true`: one chunk (`seq` -1 is the last, may carry data).
    VoiceChunk { seq: i64, data: Option<String> },
    /// VOICE + BINARY start frame (`stream_seq` 0).
    BinaryStart,
    /// VOICE + BINARY end frame (`stream_seq` -1).
    BinaryEnd,
}

impl RequestPayload {
    /// Classifies the request and checks the rules that do not depend on session state.
    pub fn kind(&self, max_text_chars: usize) -> Result<RequestKind, DecodeError> {
        let err = |code: ErrorCode, detail: String| DecodeError {
            code,
            detail,
            request_id: Some(self.request_id.clone()),
        };
        let malformed = |detail: String| err(ErrorCode::MalformedPayload, detail);
        if self.function_calling_op.is_some() != self.function_calling.is_some() {
            let missing = if self.function_calling_op.is_none() {
                "function_calling_op"
            } else {
                "function_calling"
            };
            return Err(malformed(format!(
                "field `payload.{missing}`: `function_calling_op` and `function_calling` must be given together"
            )));
        }
        if let Some(list) = &self.function_calling
            && self.function_calling_op != Some(FunctionOp::Delete)
        {
            function::validate_list(list, "payload.function_calling")
                .map_err(|(f, why)| malformed(format!("field `{f}`: {why}")))?;
        }
        if self.stream_seq < -1 {
            return Err(err(
                ErrorCode::StreamSeqError,
                format!(
                    "field `payload.stream_seq`: {} is not a valid sequence number (0, 1, 2, ... or -1)",
                    self.stream_seq
                ),
            ));
        }
        match self.data_type {
            DataType::Text => {
                if self.stream_flag {
                    return Err(malformed(
                        "field `payload.stream_flag`: must be false for TEXT requests".into(),
                    ));
                }
                if self.stream_seq != 0 {
                    return Err(err(
                        ErrorCode::StreamSeqError,
                        "field `payload.stream_seq`: must be 0 for TEXT requests".into(),
                    ));
                }
                if let Some(fr) = &self.content.function_result {
                    let text = self.content.text.clone().filter(|t| !t.trim().is_empty());
                    return Ok(RequestKind::FunctionResult(fr.clone(), text));
                }
                let Some(text) = &self.content.text else {
                    return Err(malformed(
                        "field `payload.content.text`: required for TEXT requests".into(),
                    ));
                };
                if text.chars().count() > max_text_chars {
                    return Err(err(
                        ErrorCode::PayloadTooLarge,
                        format!(
                            "field `payload.content.text`: longer than {max_text_chars} characters"
                        ),
                    ));
                }
                if text.trim().is_empty() {
                    Ok(RequestKind::AttributesOnly)
                } else {
                    Ok(RequestKind::Text(text.clone()))
                }
            }
            DataType::Voice => {
                let Some(mode) = self.content.voice_mode else {
                    return Err(malformed(
                        "field `payload.content.voice_mode`: required for VOICE requests".into(),
                    ));
                };
                match mode {
                    VoiceMode::Base64 if !self.stream_flag => {
                        if self.stream_seq != 0 {
                            return Err(err(
                                ErrorCode::StreamSeqError,
                                "field `payload.stream_seq`: must be 0 for a whole BASE64 upload (stream_flag false)".into(),
                            ));
                        }
                        match &self.content.voice {
                            Some(v) => Ok(RequestKind::VoiceWhole(v.clone())),
                            None => Err(malformed(
                                "field `payload.content.voice`: required for VOICE + BASE64".into(),
                            )),
                        }
                    }
                    VoiceMode::Base64 => Ok(RequestKind::VoiceChunk {
                        seq: self.stream_seq,
                        data: self.content.voice.clone(),
                    }),
                    VoiceMode::Binary => {
                        if !self.stream_flag {
                            return Err(malformed(
                                "field `payload.stream_flag`: must be true for VOICE + BINARY"
                                    .into(),
                            ));
                        }
                        if self.content.voice.as_deref().is_some_and(|v| !v.is_empty()) {
                            return Err(malformed(
                                "field `payload.content.voice`: must be empty for VOICE + BINARY (audio goes in binary frames)".into(),
                            ));
                        }
                        match self.stream_seq {
                            0 => Ok(RequestKind::BinaryStart),
                            -1 => Ok(RequestKind::BinaryEnd),
                            n => Err(err(
                                ErrorCode::StreamSeqError,
                                format!(
                                    "field `payload.stream_seq`: {n} is not valid for VOICE + BINARY control frames (0 = start, -1 = end)"
                                ),
                            )),
                        }
                    }
                }
            }
        }
    }
}

/// Builds a frame's payload object for tests and tools that need to send odd frames.
pub fn raw_frame(msg_type: &str, session_id: &str, payload: Value, timestamp_ms: i64) -> String {
    let mut m = Map::new();
    m.insert("version".into(), Value::from(PROTOCOL_VERSION));
    m.insert("msg_type".into(), Value::from(msg_type));
    m.insert("session_id".into(), Value::from(session_id));
    m.insert("payload".into(), payload);
    m.insert("timestamp".into(), Value::from(timestamp_ms));
    Value::Object(m).to_string()
}

#[cfg(test)]
mod tests;

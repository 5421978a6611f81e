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
/// provider is configured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    pub speech_input: bool,
    pub speech_output: bool,
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

//! Client → server payloads (spec §4).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::function::FunctionDef;

/// `platform` (spec §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Platform {
    #[serde(rename = "WEB")]
    Web,
    #[serde(rename = "APP")]
    App,
    #[serde(rename = "MINI_PROGRAM")]
    MiniProgram,
    #[serde(rename = "TV")]
    Tv,
}

/// `auth` (spec §4.2), tagged by `auth.type`. `Debug` never prints the secret.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Auth {
    #[serde(rename = "API_KEY")]
    ApiKey { api_key: String },
    #[serde(rename = "ACCOUNT")]
    Account { account: String, password: String },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::ApiKey { .. } => f.write_str("ApiKey { api_key: <hidden> }"),
            Auth::Account { account, .. } => {
                write!(f, "Account {{ account: {account:?}, password: <hidden> }}")
            }
        }
    }
}

/// REGISTER payload (spec §4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterPayload {
    pub auth: Auth,
    pub platform: Platform,
    pub require_tts: bool,
    /// Defaults to true when absent (spec §4.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_srs: Option<bool>,
    pub function_calling: Vec<FunctionDef>,
    /// **Extension** (docs/protocol.md "Session resume"): take over a session whose socket
    /// dropped, instead of creating a new one. The other fields are still required and are
    /// ignored: the session keeps its own attributes and function list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<ResumeRequest>,
}

/// REGISTER `resume` (**extension**).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeRequest {
    pub session_id: String,
    pub resume_token: String,
    /// Per request the client has not seen the end of: `[text_seq, voice_seq]` or
    /// `[text_seq, voice_seq, unsequenced]` (see [`SeenUpTo`]).
    #[serde(default)]
    pub last_seen: std::collections::BTreeMap<String, SeenUpTo>,
}

/// What a client saw of one request's reply: the highest `text_stream_seq` and
/// `voice_stream_seq` it received (-1 or null: none), and optionally how many frames with
/// neither seq (transcript, function_call) it received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "SeenWire", into = "SeenWire")]
pub struct SeenUpTo {
    pub text: i64,
    pub voice: i64,
    pub unsequenced: Option<u32>,
}

impl Default for SeenUpTo {
    /// Nothing seen.
    fn default() -> Self {
        SeenUpTo {
            text: -1,
            voice: -1,
            unsequenced: None,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SeenWire(Option<i64>, Option<i64>, #[serde(default)] Option<u32>);

impl From<SeenWire> for SeenUpTo {
    fn from(w: SeenWire) -> Self {
        SeenUpTo {
            text: w.0.unwrap_or(-1).max(-1),
            voice: w.1.unwrap_or(-1).max(-1),
            unsequenced: w.2,
        }
    }
}

impl From<SeenUpTo> for SeenWire {
    fn from(s: SeenUpTo) -> Self {
        SeenWire(Some(s.text), Some(s.voice), s.unsequenced)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DataType {
    Text,
    Voice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum VoiceMode {
    Base64,
    Binary,
}

/// `function_calling_op` (spec §4.3, semantics in docs/protocol.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum FunctionOp {
    Replace,
    Add,
    Update,
    Delete,
}

/// **Extension** (docs/protocol.md): what a client function returned, reported back so the model
/// can continue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionResult {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default)]
    pub result: Value,
}

/// REQUEST `content` (spec §4.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestContent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_mode: Option<VoiceMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_result: Option<FunctionResult>,
}

/// REQUEST payload (spec §4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestPayload {
    pub request_id: String,
    pub data_type: DataType,
    pub stream_flag: bool,
    pub stream_seq: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_tts: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_srs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_calling_op: Option<FunctionOp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_calling: Option<Vec<FunctionDef>>,
    /// **Extension**: `true` starts a new conversation history for the session (a kiosk's
    /// "new visitor"), applied with the other attributes before the request runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear_history: Option<bool>,
    pub content: RequestContent,
}

/// `reason` of INTERRUPT (spec §4.4); echoed as `interrupt_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum InterruptReason {
    UserNewInput,
    UserStop,
    ClientError,
}

/// INTERRUPT payload (spec §4.4). Absent, null or `""` id = every request in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterruptPayload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt_request_id: Option<String>,
    pub reason: InterruptReason,
}

/// SESSION_QUERY payload (spec §4.5).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionQueryPayload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_fields: Option<Vec<String>>,
}

/// SHUTDOWN payload, both directions (spec §4.6, §5.6).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShutdownPayload {
    #[serde(default)]
    pub reason: String,
}

/// HEARTBEAT_REPLY payload (spec §4.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatReplyPayload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_status: Option<String>,
}

/// HEALTH_CHECK payload (spec §4.8).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthCheckPayload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_fields: Option<Vec<String>>,
}

/// Every client → server message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ClientMessage {
    Register(RegisterPayload),
    Request(RequestPayload),
    Interrupt(InterruptPayload),
    SessionQuery(SessionQueryPayload),
    Shutdown(ShutdownPayload),
    HeartbeatReply(HeartbeatReplyPayload),
    HealthCheck(HealthCheckPayload),
}

impl ClientMessage {
    pub const TYPES: [&'static str; 7] = [
        "REGISTER",
        "REQUEST",
        "INTERRUPT",
        "SESSION_QUERY",
        "SHUTDOWN",
        "HEARTBEAT_REPLY",
        "HEALTH_CHECK",
    ];

    pub fn msg_type(&self) -> &'static str {
        match self {
            ClientMessage::Register(_) => "REGISTER",
            ClientMessage::Request(_) => "REQUEST",
            ClientMessage::Interrupt(_) => "INTERRUPT",
            ClientMessage::SessionQuery(_) => "SESSION_QUERY",
            ClientMessage::Shutdown(_) => "SHUTDOWN",
            ClientMessage::HeartbeatReply(_) => "HEARTBEAT_REPLY",
            ClientMessage::HealthCheck(_) => "HEALTH_CHECK",
        }
    }
}

//! The hub's wire format: the Star Protocol envelope (seed 000) with the ClawOS fields (seed 002)
//! as optional top-level members. Pure: no I/O.
//!
//! Decoding borrows from the frame and keeps `payload` as raw JSON, so the hub never parses
//! business content (Star: "Hub 不解析此字段，直接透传"). Encoding writes a delivery *body*: the
//! JSON object without its opening brace, so one body is shared by every recipient of a
//! broadcast and each recipient's writer prefixes its own `{"seq":N,`.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Identifier rules of the Star endpoints: 3–50 characters. We also refuse characters that would
/// make routing keys or URLs ambiguous (`/`, `*`, whitespace, control characters) and the
/// reserved id `hub`.
pub fn valid_id(id: &str) -> Result<(), String> {
    let n = id.chars().count();
    if !(3..=50).contains(&n) {
        return Err(format!("id {id:?} must be 3 to 50 characters (has {n})"));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '@')))
    {
        return Err(format!(
            "id {id:?} contains {c:?}; allowed: letters, digits, _ - . : @"
        ));
    }
    if id.eq_ignore_ascii_case("hub") {
        return Err("id \"hub\" is reserved for the hub".into());
    }
    Ok(())
}

/// The four client types of the Star Protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerType {
    Agent,
    Environment,
    Human,
    Hub,
}

impl PeerType {
    pub fn as_str(self) -> &'static str {
        match self {
            PeerType::Agent => "agent",
            PeerType::Environment => "environment",
            PeerType::Human => "human",
            PeerType::Hub => "hub",
        }
    }

    pub fn parse(s: &str) -> Option<PeerType> {
        Some(match s {
            "agent" => PeerType::Agent,
            "environment" => PeerType::Environment,
            "human" => PeerType::Human,
            "hub" => PeerType::Hub,
            _ => return None,
        })
    }
}

/// ClawOS tiers (defined with the config's tier table, which names them too).
pub use crate::config::tiers::Tier;

/// ClawOS priorities; a higher one overtakes lower ones in each recipient's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    Low = 0,
    #[default]
    Normal = 1,
    High = 2,
    Critical = 3,
}

impl Priority {
    pub const ALL: [Priority; 4] = [
        Priority::Critical,
        Priority::High,
        Priority::Normal,
        Priority::Low,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }

    pub fn parse(s: &str) -> Option<Priority> {
        Some(match s {
            "low" => Priority::Low,
            "normal" => Priority::Normal,
            "high" => Priority::High,
            "critical" => Priority::Critical,
            _ => return None,
        })
    }

    pub fn from_index(i: i64) -> Priority {
        match i {
            0 => Priority::Low,
            2 => Priority::High,
            3 => Priority::Critical,
            _ => Priority::Normal,
        }
    }
}

/// The ClawOS message `type`, carried as `kind` (the Star `type` is the routing type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Request,
    Response,
    Notification,
    Error,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Request => "request",
            Kind::Response => "response",
            Kind::Notification => "notification",
            Kind::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "request" => Kind::Request,
            "response" => Kind::Response,
            "notification" => Kind::Notification,
            "error" => Kind::Error,
            _ => return None,
        })
    }
}

/// A Star error code, with the ClawOS code it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    Validation,
    Connection,
    PermissionDenied,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Validation => "VALIDATION_ERROR",
            ErrorCode::Connection => "CONNECTION_ERROR",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
        }
    }
}

/// ClawOS E001–E006 and the Star code each maps onto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClawCode {
    /// E001 权限不足 (not recoverable) → PERMISSION_DENIED
    E001,
    /// E002 资源不可用 → CONNECTION_ERROR
    E002,
    /// E003 参数错误 → VALIDATION_ERROR
    E003,
    /// E004 超时 → CONNECTION_ERROR
    E004,
    /// E005 依赖失败 → CONNECTION_ERROR
    E005,
    /// E006 系统错误 → CONNECTION_ERROR
    E006,
}

impl ClawCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ClawCode::E001 => "E001",
            ClawCode::E002 => "E002",
            ClawCode::E003 => "E003",
            ClawCode::E004 => "E004",
            ClawCode::E005 => "E005",
            ClawCode::E006 => "E006",
        }
    }

    pub fn star(self) -> ErrorCode {
        match self {
            ClawCode::E001 => ErrorCode::PermissionDenied,
            ClawCode::E003 => ErrorCode::Validation,
            _ => ErrorCode::Connection,
        }
    }

    pub fn recoverable(self) -> bool {
        !matches!(self, ClawCode::E001)
    }
}

/// An error the hub sends back to the sender of a refused message.
#[derive(Debug, Clone, PartialEq)]
pub struct HubError {
    pub code: ClawCode,
    pub message: String,
    pub suggested_action: String,
    /// Extra members of `details` (e.g. the agent-society error object).
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
}

impl HubError {
    pub fn new(code: ClawCode, message: impl Into<String>, suggested: impl Into<String>) -> Self {
        HubError {
            code,
            message: message.into(),
            suggested_action: suggested.into(),
            extra: None,
        }
    }

    pub fn validation(message: impl Into<String>, suggested: impl Into<String>) -> Self {
        Self::new(ClawCode::E003, message, suggested)
    }

    pub fn denied(message: impl Into<String>, suggested: impl Into<String>) -> Self {
        Self::new(ClawCode::E001, message, suggested)
    }

    pub fn unavailable(message: impl Into<String>, suggested: impl Into<String>) -> Self {
        Self::new(ClawCode::E002, message, suggested)
    }

    /// Adds the members of a JSON object (the seed-001 error objects) to `details`.
    pub fn with_extra(mut self, v: serde_json::Value) -> Self {
        if let serde_json::Value::Object(m) = v {
            self.extra = Some(m);
        }
        self
    }
}

/// One side of a message as written in the envelope.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WirePeer<'a> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    /// Extension: the environment of an agent or environment recipient. Defaults to the
    /// sender's own environment; humans (who belong to none) must give it.
    #[serde(borrow, default)]
    pub env: Option<Cow<'a, str>>,
    /// ClawOS `from.tier`: if given it must be the connection's tier (never trusted).
    #[serde(borrow, default)]
    pub tier: Option<Cow<'a, str>>,
}

/// A client frame as received, before validation. Unknown members are ignored.
#[derive(Debug, Deserialize)]
pub struct WireEnvelope<'a> {
    #[serde(rename = "type", borrow, default)]
    pub ty: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "peer")]
    pub sender: Option<WirePeer<'a>>,
    #[serde(borrow, default, deserialize_with = "peer")]
    pub recipient: Option<WirePeer<'a>>,
    #[serde(borrow, default)]
    pub timestamp: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub payload: Option<&'a RawValue>,
    /// The seed's other name for `payload`.
    #[serde(borrow, default)]
    pub message: Option<&'a RawValue>,
    #[serde(rename = "traceId", borrow, default)]
    pub trace_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub priority: Option<Cow<'a, str>>,
    #[serde(default)]
    pub ttl: Option<f64>,
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(rename = "requestId", borrow, default)]
    pub request_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub metadata: Option<&'a RawValue>,
}

/// `sender` and `recipient` are JSON objects (or null: absent); serde alone would also read a
/// struct from an array, positionally.
fn peer<'de: 'a, 'a, D: serde::Deserializer<'de>>(d: D) -> Result<Option<WirePeer<'a>>, D::Error> {
    struct ObjectOnly<'a>(std::marker::PhantomData<WirePeer<'a>>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for ObjectOnly<'a> {
        type Value = Option<WirePeer<'a>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object {id, type}")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(self, m: M) -> Result<Self::Value, M::Error> {
            WirePeer::deserialize(serde::de::value::MapAccessDeserializer::new(m)).map(Some)
        }
    }
    d.deserialize_any(ObjectOnly(std::marker::PhantomData))
}

/// A recipient after validation. `env` is resolved later by the router (it depends on the
/// sender's own address).
#[derive(Debug, Clone, PartialEq)]
pub struct Target<'a> {
    pub ty: PeerType,
    /// `"*"`: every client of `ty` in the environment.
    pub id: Cow<'a, str>,
    pub env: Option<Cow<'a, str>>,
}

impl Target<'_> {
    pub fn is_broadcast(&self) -> bool {
        self.id == "*"
    }
}

/// A validated `message` frame.
#[derive(Debug)]
pub struct Inbound<'a> {
    pub id: Option<Cow<'a, str>>,
    pub sender: Option<WirePeer<'a>>,
    pub recipient: Target<'a>,
    pub timestamp: Option<&'a RawValue>,
    pub payload: &'a RawValue,
    pub trace_id: Option<Cow<'a, str>>,
    pub priority: Priority,
    pub ttl: Option<f64>,
    pub kind: Option<Kind>,
    pub request_id: Option<Cow<'a, str>>,
    pub metadata: Option<&'a RawValue>,
}

/// What a client frame is.
#[derive(Debug)]
pub enum Frame<'a> {
    /// The client's answer to the hub's heartbeat (any frame counts as liveness).
    Heartbeat,
    Message(Box<Inbound<'a>>),
}

/// A refused frame: the error and, when they could be read, the frame's own id and traceId.
#[derive(Debug, PartialEq)]
pub struct DecodeError {
    pub original_id: Option<Box<str>>,
    /// The sender's traceId when it is a valid one (1 to 128 characters); the error carries it.
    pub trace_id: Option<Box<str>>,
    pub error: HubError,
}

fn invalid(id: Option<&Cow<'_, str>>, message: String, suggested: &str) -> DecodeError {
    DecodeError {
        original_id: id.map(|s| Box::from(&**s)),
        trace_id: None,
        error: HubError::validation(message, suggested),
    }
}

/// Whether `t` is usable as a traceId (the rule `decode` enforces).
pub fn valid_trace(t: &str) -> bool {
    !t.is_empty() && t.len() <= 128
}

/// The `id` and `traceId` of a frame the typed decode refused (a member of the wrong JSON type,
/// a frame over the size limit): read leniently, every other member ignored. An id is taken
/// when it is a string of 1 to 128 characters, a traceId when [`valid_trace`]; anything else
/// (or JSON that does not parse) gives None.
pub fn loose_ids(text: &str) -> (Option<String>, Option<String>) {
    #[derive(Deserialize)]
    struct Loose {
        #[serde(default)]
        id: Option<serde_json::Value>,
        #[serde(default, rename = "traceId")]
        trace_id: Option<serde_json::Value>,
    }
    let Ok(l) = serde_json::from_str::<Loose>(text) else {
        return (None, None);
    };
    let id =
        l.id.and_then(|v| v.as_str().map(str::to_owned))
            .filter(|i| !i.is_empty() && i.chars().count() <= 128);
    let trace = l
        .trace_id
        .and_then(|v| v.as_str().map(str::to_owned))
        .filter(|t| valid_trace(t));
    (id, trace)
}

/// Decodes and validates one client text frame.
pub fn decode(text: &str, max_ttl_seconds: f64) -> Result<Frame<'_>, DecodeError> {
    // serde would also read a struct from a JSON array (positionally): only objects are envelopes.
    if !text.trim_start().starts_with('{') {
        return Err(DecodeError {
            original_id: None,
            trace_id: None,
            error: HubError::validation(
                "not a valid envelope: expected a JSON object",
                "send a JSON object {type, id, sender, recipient, payload}",
            ),
        });
    }
    let de = &mut serde_json::Deserializer::from_str(text);
    let w: WireEnvelope<'_> = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // serde_path_to_error says "?" when the JSON itself broke before any field.
        let msg =
            if path == "." || path == "?" || path.is_empty() || inner.is_syntax() || inner.is_eof()
            {
                format!("not a valid envelope: {inner}")
            } else {
                format!("field {path}: {inner}")
            };
        // A member of the wrong type refuses the whole frame, but its id and traceId may
        // still be readable: the error names them (only a broken JSON text has neither).
        let (original_id, trace_id) = loose_ids(text);
        DecodeError {
            original_id: original_id.map(String::into_boxed_str),
            trace_id: trace_id.map(String::into_boxed_str),
            error: HubError::validation(
                msg,
                "send a JSON object {type, id, sender, recipient, payload}",
            ),
        }
    })?;
    let trace = w
        .trace_id
        .as_deref()
        .filter(|t| valid_trace(t))
        .map(Box::<str>::from);
    decode_checked(w, max_ttl_seconds).map_err(|mut e| {
        e.trace_id = trace;
        e
    })
}

/// The rules between members, once every member has its JSON type.
fn decode_checked(w: WireEnvelope<'_>, max_ttl_seconds: f64) -> Result<Frame<'_>, DecodeError> {
    let id = w.id.as_ref();
    let ty = w.ty.as_deref().unwrap_or("");
    match ty {
        "heartbeat" => return Ok(Frame::Heartbeat),
        "message" => {}
        "error" => {
            return Err(invalid(
                id,
                "clients do not send type \"error\": that is the hub's".into(),
                "to report a failure to another client send type \"message\" with kind \"error\" and requestId",
            ));
        }
        "" => {
            return Err(invalid(
                id,
                "missing field type".into(),
                "type must be \"message\" or \"heartbeat\"",
            ));
        }
        other => {
            return Err(invalid(
                id,
                format!("unknown type {other:?}"),
                "type must be \"message\" or \"heartbeat\"",
            ));
        }
    }
    if let Some(i) = id
        && (i.is_empty() || i.chars().count() > 128)
    {
        return Err(invalid(
            id,
            "id must be 1 to 128 characters".into(),
            "use a unique id per message, e.g. a UUID",
        ));
    }
    let Some(r) = w.recipient.as_ref() else {
        return Err(invalid(
            id,
            "missing field recipient".into(),
            "add recipient {id, type}",
        ));
    };
    let rty = r.ty.as_deref().unwrap_or("");
    let Some(rtype) = PeerType::parse(rty) else {
        return Err(invalid(
            id,
            format!("recipient.type {rty:?} is not agent, environment, human or hub"),
            "set recipient.type to agent, environment, human or hub",
        ));
    };
    let rid = r.id.clone().unwrap_or_default();
    if rtype == PeerType::Hub {
        if rid != "hub" {
            return Err(invalid(
                id,
                "the hub's id is \"hub\"".into(),
                "address the hub as {id:\"hub\", type:\"hub\"}",
            ));
        }
    } else if rid != "*"
        && let Err(e) = valid_id(&rid)
    {
        return Err(invalid(
            id,
            format!("recipient: {e}"),
            "use the recipient's id, or \"*\" to broadcast",
        ));
    }
    if let Some(env) = &r.env
        && let Err(e) = valid_id(env)
    {
        return Err(invalid(
            id,
            format!("recipient.env: {e}"),
            "use the id of an environment",
        ));
    }
    let payload = match (w.payload, w.message) {
        (Some(p), None) | (None, Some(p)) => p,
        (Some(_), Some(_)) => {
            return Err(invalid(
                id,
                "both payload and message given".into(),
                "send the business content once, in payload",
            ));
        }
        (None, None) => {
            return Err(invalid(
                id,
                "missing field payload".into(),
                "put the business content in payload",
            ));
        }
    };
    let priority = match w.priority.as_deref() {
        None => Priority::Normal,
        Some(p) => Priority::parse(p).ok_or_else(|| {
            invalid(
                id,
                format!("priority {p:?} is not low, normal, high or critical"),
                "use low, normal, high or critical",
            )
        })?,
    };
    let kind = match w.kind.as_deref() {
        None => None,
        Some(k) => Some(Kind::parse(k).ok_or_else(|| {
            invalid(
                id,
                format!("kind {k:?} is not request, response, notification or error"),
                "use request, response, notification or error",
            )
        })?),
    };
    if let Some(t) = w.ttl
        && !(t > 0.0 && t <= max_ttl_seconds)
    {
        return Err(invalid(
            id,
            format!("ttl {t} must be above 0 and at most {max_ttl_seconds} seconds"),
            "give ttl in seconds",
        ));
    }
    if matches!(kind, Some(Kind::Response | Kind::Error)) && w.request_id.is_none() {
        return Err(invalid(
            id,
            "a response or error needs requestId".into(),
            "set requestId to the id of the request being answered",
        ));
    }
    if matches!(kind, Some(Kind::Request)) && w.id.is_none() {
        return Err(invalid(
            id,
            "a request needs an id".into(),
            "set id so the response can name it in requestId",
        ));
    }
    if let Some(t) = &w.trace_id
        && (t.is_empty() || t.len() > 128)
    {
        return Err(invalid(
            id,
            "traceId must be 1 to 128 characters".into(),
            "omit traceId to have one generated",
        ));
    }
    Ok(Frame::Message(Box::new(Inbound {
        id: w.id,
        sender: w.sender,
        recipient: Target {
            ty: rtype,
            id: rid,
            env: r.env.clone(),
        },
        timestamp: w.timestamp,
        payload,
        trace_id: w.trace_id,
        priority,
        ttl: w.ttl,
        kind,
        request_id: w.request_id,
        metadata: w.metadata,
    })))
}

/// A peer as written in outgoing envelopes.
#[derive(Debug, Serialize)]
pub struct OutPeer<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub ty: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<&'static str>,
}

/// A routed message as delivered.
#[derive(Debug, Serialize)]
pub struct OutMessage<'a> {
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub id: &'a str,
    pub sender: OutPeer<'a>,
    pub recipient: OutPeer<'a>,
    pub timestamp: &'a RawValue,
    pub version: &'static str,
    #[serde(rename = "traceId")]
    pub trace_id: &'a str,
    pub priority: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    #[serde(rename = "requestId", skip_serializing_if = "Option::is_none")]
    pub request_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<&'a RawValue>,
    /// The seed-001 rendering for LLM agents (only for connections that asked for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formatted: Option<&'a str>,
    pub payload: &'a RawValue,
}

impl<'a> OutMessage<'a> {
    /// A `ty` envelope with normal priority and none of the optional members.
    pub fn new(
        ty: &'static str,
        id: &'a str,
        sender: OutPeer<'a>,
        recipient: OutPeer<'a>,
        timestamp: &'a RawValue,
        trace_id: &'a str,
        payload: &'a RawValue,
    ) -> Self {
        OutMessage {
            ty,
            id,
            sender,
            recipient,
            timestamp,
            version: "1",
            trace_id,
            priority: "normal",
            ttl: None,
            kind: None,
            request_id: None,
            metadata: None,
            formatted: None,
            payload,
        }
    }
}

/// Serializes `v` as a delivery body: the JSON object without its leading `{`.
pub fn body<T: Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
    s.remove(0);
    s
}

/// Prefixes a delivery body with its stream sequence number.
pub fn with_seq(seq: u64, body: &str) -> String {
    let mut s = String::with_capacity(body.len() + 24);
    let _ = write!(s, "{{\"seq\":{seq},");
    s.push_str(body);
    s
}

/// Prefixes a body with nothing (control frames carry no sequence number).
pub fn unsequenced(body: &str) -> String {
    let mut s = String::with_capacity(body.len() + 1);
    s.push('{');
    s.push_str(body);
    s
}

/// The payload of a hub `error` envelope (Star §error, with the ClawOS code in `details`).
pub fn error_payload(err: &HubError, original_id: Option<&str>, trace_id: &str) -> String {
    let mut details = serde_json::Map::new();
    details.insert("original_message_id".into(), original_id.into());
    details.insert(
        "suggested_action".into(),
        err.suggested_action.clone().into(),
    );
    details.insert("clawos_code".into(), err.code.as_str().into());
    details.insert("recoverable".into(), err.code.recoverable().into());
    details.insert("traceId".into(), trace_id.into());
    if let Some(extra) = &err.extra {
        for (k, v) in extra {
            details.insert(k.clone(), v.clone());
        }
    }
    serde_json::json!({
        "error_code": err.code.star().as_str(),
        "message": err.message,
        "details": details,
    })
    .to_string()
}

/// Formats Unix milliseconds as ISO 8601 UTC (`2025-08-19T10:30:00.000Z`), the seed's format.
pub fn iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = crate::util::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> Box<Inbound<'_>> {
        match decode(text, 86_400.0).unwrap() {
            Frame::Message(m) => m,
            Frame::Heartbeat => panic!("heartbeat"),
        }
    }

    fn err(text: &str) -> DecodeError {
        decode(text, 86_400.0).unwrap_err()
    }

    #[test]
    fn seed_action_example_decodes_and_payload_stays_raw() {
        let text = r#"{"type":"message","id":"msg_12345","sender":{"id":"agent_001","type":"agent"},
            "recipient":{"id":"demo_world","type":"environment"},"timestamp":"2025-08-19T10:30:00Z",
            "payload":{"type":"action","action":"move","id":"action_67890","parameters":{"direction":"north","distance":2.5}}}"#;
        let m = msg(text);
        assert_eq!(m.id.as_deref(), Some("msg_12345"));
        assert_eq!(m.recipient.ty, PeerType::Environment);
        assert_eq!(m.recipient.id, "demo_world");
        assert_eq!(m.priority, Priority::Normal);
        assert!(
            m.payload
                .get()
                .starts_with(r#"{"type":"action","action":"move""#)
        );
        assert_eq!(m.timestamp.unwrap().get(), r#""2025-08-19T10:30:00Z""#);
    }

    #[test]
    fn message_is_an_alias_of_payload_but_not_both() {
        let m =
            msg(r#"{"type":"message","recipient":{"id":"abc","type":"agent"},"message":{"x":1}}"#);
        assert_eq!(m.payload.get(), r#"{"x":1}"#);
        let e = err(
            r#"{"type":"message","id":"m1","recipient":{"id":"abc","type":"agent"},"message":{},"payload":{}}"#,
        );
        assert_eq!(e.original_id.as_deref(), Some("m1"));
        assert!(e.error.message.contains("both"));
    }

    #[test]
    fn heartbeat_and_bad_types() {
        assert!(matches!(
            decode(r#"{"type":"heartbeat"}"#, 1.0),
            Ok(Frame::Heartbeat)
        ));
        assert!(
            err(r#"{"type":"error","id":"x"}"#)
                .error
                .message
                .contains("hub's")
        );
        assert!(err(r#"{"type":"bogus"}"#).error.message.contains("bogus"));
        assert!(err(r#"{"id":"q"}"#).error.message.contains("type"));
        assert!(err("[1,2]").error.message.contains("envelope"));
        assert!(err("not json").original_id.is_none());
        let e = err(r#"{"type":"message","ttl":"soon"}"#);
        assert!(e.error.message.contains("ttl"), "{}", e.error.message);
        assert_eq!(e.error.code.star(), ErrorCode::Validation);
    }

    #[test]
    fn refused_frames_keep_their_readable_id_and_trace() {
        // A member of the wrong JSON type: the typed decode fails, the id and trace are read.
        let e = err(r#"{"type":"message","id":"w1","traceId":"tr-9","ttl":"soon"}"#);
        assert!(e.error.message.contains("field ttl"), "{}", e.error.message);
        assert_eq!(e.original_id.as_deref(), Some("w1"));
        assert_eq!(e.trace_id.as_deref(), Some("tr-9"));
        // The id itself of the wrong type, or a trace that is not a valid one: not named.
        let e = err(r#"{"type":"message","id":7,"traceId":"","ttl":"soon"}"#);
        assert_eq!((e.original_id, e.trace_id), (None, None));
        // A rule between members: the trace comes along too.
        let e = err(r#"{"type":"gossip","id":"g1","traceId":"tr-2"}"#);
        assert_eq!(e.original_id.as_deref(), Some("g1"));
        assert_eq!(e.trace_id.as_deref(), Some("tr-2"));
        // Broken JSON: nothing readable.
        assert_eq!(loose_ids(r#"{"id":"x","#), (None, None));
        let long = "x".repeat(129);
        assert_eq!(
            loose_ids(&format!(r#"{{"id":"{long}","traceId":"{long}"}}"#)),
            (None, None)
        );
    }

    #[test]
    fn recipient_rules() {
        let base =
            |r: &str| format!(r#"{{"type":"message","id":"m","recipient":{r},"payload":{{}}}}"#);
        assert!(
            err(&base(r#"{"id":"ab","type":"agent"}"#))
                .error
                .message
                .contains("3 to 50")
        );
        assert!(
            err(&base(r#"{"id":"abc","type":"robot"}"#))
                .error
                .message
                .contains("robot")
        );
        assert!(
            err(&base(r#"{"id":"a/bc","type":"agent"}"#))
                .error
                .message
                .contains("'/'")
        );
        assert!(
            err(&base(r#"{"id":"someone","type":"hub"}"#))
                .error
                .message
                .contains("hub")
        );
        assert!(
            err(&base(r#"{"id":"abc","type":"agent","env":"x"}"#))
                .error
                .message
                .contains("env")
        );
        let long = "a".repeat(51);
        assert!(
            err(&base(&format!(r#"{{"id":"{long}","type":"agent"}}"#)))
                .error
                .message
                .contains("51")
        );
        let t = base(r#"{"id":"*","type":"agent"}"#);
        let m = msg(&t);
        assert!(m.recipient.is_broadcast());
        let t = base(r#"{"id":"展品导览员","type":"agent","env":"hall_1"}"#);
        let m = msg(&t);
        assert_eq!(m.recipient.env.as_deref(), Some("hall_1"));
        let t = base(r#"{"id":"hub","type":"hub"}"#);
        let m = msg(&t);
        assert_eq!(m.recipient.ty, PeerType::Hub);
        assert!(err(&base("{}")).error.message.contains("recipient.type"));
    }

    #[test]
    fn clawos_fields() {
        let m = msg(
            r#"{"type":"message","id":"r1","traceId":"t-9","priority":"critical","ttl":30,"kind":"request",
            "recipient":{"id":"pm_1","type":"agent"},"payload":{"action":"task.assign"},"metadata":{"a":1}}"#,
        );
        assert_eq!(m.priority, Priority::Critical);
        assert_eq!(m.ttl, Some(30.0));
        assert_eq!(m.kind, Some(Kind::Request));
        assert_eq!(m.trace_id.as_deref(), Some("t-9"));
        assert_eq!(m.metadata.unwrap().get(), r#"{"a":1}"#);
        let base = r#""recipient":{"id":"pm_1","type":"agent"},"payload":{}"#;
        assert!(
            err(&format!(
                r#"{{"type":"message","priority":"urgent",{base}}}"#
            ))
            .error
            .message
            .contains("urgent")
        );
        assert!(
            err(&format!(r#"{{"type":"message","ttl":0,{base}}}"#))
                .error
                .message
                .contains("ttl")
        );
        assert!(
            err(&format!(r#"{{"type":"message","ttl":1e9,{base}}}"#))
                .error
                .message
                .contains("ttl")
        );
        assert!(
            err(&format!(r#"{{"type":"message","kind":"response",{base}}}"#))
                .error
                .message
                .contains("requestId")
        );
        assert!(
            err(&format!(r#"{{"type":"message","kind":"request",{base}}}"#))
                .error
                .message
                .contains("id")
        );
        assert!(
            err(&format!(r#"{{"type":"message","kind":"gossip",{base}}}"#))
                .error
                .message
                .contains("gossip")
        );
    }

    #[test]
    fn ids() {
        assert!(valid_id("agent_001").is_ok());
        assert!(valid_id("demo_world").is_ok());
        assert!(valid_id("大厅一号").is_ok());
        assert!(valid_id("a b c").is_err());
        assert!(valid_id("HUB").is_err());
        assert!(valid_id(&"x".repeat(50)).is_ok());
    }

    #[test]
    fn bodies_compose() {
        let ts = RawValue::from_string("\"t\"".into()).unwrap();
        let payload = RawValue::from_string(r#"{"type":"event"}"#.into()).unwrap();
        let b = body(&OutMessage {
            ty: "message",
            id: "m1",
            sender: OutPeer {
                id: "w1x",
                ty: "environment",
                env: None,
                tier: None,
            },
            recipient: OutPeer {
                id: "*",
                ty: "agent",
                env: Some("w1x"),
                tier: None,
            },
            timestamp: &ts,
            version: "1",
            trace_id: "tr",
            priority: "normal",
            ttl: None,
            kind: None,
            request_id: None,
            metadata: None,
            formatted: None,
            payload: &payload,
        });
        let v: serde_json::Value = serde_json::from_str(&with_seq(7, &b)).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["payload"]["type"], "event");
        assert_eq!(v["recipient"]["id"], "*");
        let v: serde_json::Value = serde_json::from_str(&unsequenced(&b)).unwrap();
        assert!(v.get("seq").is_none());
    }

    #[test]
    fn error_payload_maps_clawos_codes() {
        let e = HubError::denied("no", "ask").with_extra(serde_json::json!({"error":"x"}));
        let v: serde_json::Value =
            serde_json::from_str(&error_payload(&e, Some("m1"), "t")).unwrap();
        assert_eq!(v["error_code"], "PERMISSION_DENIED");
        assert_eq!(v["details"]["original_message_id"], "m1");
        assert_eq!(v["details"]["suggested_action"], "ask");
        assert_eq!(v["details"]["clawos_code"], "E001");
        assert_eq!(v["details"]["recoverable"], false);
        assert_eq!(v["details"]["error"], "x");
        for (c, s) in [
            (ClawCode::E002, "CONNECTION_ERROR"),
            (ClawCode::E003, "VALIDATION_ERROR"),
            (ClawCode::E004, "CONNECTION_ERROR"),
            (ClawCode::E005, "CONNECTION_ERROR"),
            (ClawCode::E006, "CONNECTION_ERROR"),
        ] {
            assert_eq!(c.star().as_str(), s);
            assert!(c.recoverable());
        }
    }

    proptest::proptest! {
        /// Valid envelopes with random ids, types and fields: accepted exactly when every
        /// field is within the rules.
        #[test]
        fn decode_accepts_exactly_the_valid_envelopes(
            rid in "[a-z_*]{1,60}",
            rty in proptest::sample::select(vec!["agent", "environment", "human", "hub", "robot"]),
            prio in proptest::sample::select(vec!["low", "normal", "high", "critical", "urgent"]),
            ttl in proptest::option::of(-10.0f64..100.0),
        ) {
            let mut v = serde_json::json!({"type": "message", "id": "m1",
                "recipient": {"id": rid, "type": rty}, "payload": {"x": 1}, "priority": prio});
            if let Some(t) = ttl { v["ttl"] = t.into(); }
            let text = v.to_string();
            let ok = decode(&text, 60.0).is_ok();
            let rid_ok = match rty {
                "hub" => rid == "hub",
                "robot" => false,
                _ => rid == "*" || valid_id(&rid).is_ok(),
            };
            let want = rid_ok && prio != "urgent" && ttl.is_none_or(|t| t > 0.0 && t <= 60.0);
            proptest::prop_assert_eq!(ok, want, "{}", text);
        }
    }

    /// Random near-valid envelopes: a valid `message` with exactly one member broken (wrong
    /// JSON type, missing, out of range, a value outside its enumeration, a rule between
    /// members). Decoding must refuse it with VALIDATION_ERROR (E003), a message naming the
    /// member and a suggestion, and the frame's own id when the envelope could be read (a
    /// member of the wrong JSON type stops serde before the id is known). Valid envelopes
    /// decode to what was sent and their delivery body carries it on unchanged; unknown
    /// members are ignored.
    mod near_valid {
        use super::*;
        use proptest::prelude::*;
        use proptest::sample::select;
        use proptest::strategy::Union;
        use serde_json::{Value, json};

        const MAX_TTL: f64 = 86_400.0;

        fn peer_id() -> impl Strategy<Value = String> {
            "[a-z][a-z0-9_.:@-]{2,20}".prop_filter("reserved", |s| !s.eq_ignore_ascii_case("hub"))
        }

        fn any_json() -> impl Strategy<Value = Value> {
            prop_oneof![
                proptest::collection::btree_map("[a-z]{1,6}", "\\PC{0,8}", 0..4)
                    .prop_map(|m| json!(m)),
                "\\PC{0,12}".prop_map(Value::from),
                any::<i32>().prop_map(Value::from),
                Just(json!([1, "two", {"three": null}])),
                Just(Value::Null),
            ]
        }

        /// A valid `message` envelope.
        fn envelope() -> impl Strategy<Value = Value> {
            let recipient = prop_oneof![
                (
                    select(vec!["agent", "environment", "human"]),
                    prop_oneof![peer_id(), Just("*".to_string())],
                    proptest::option::of(peer_id()),
                )
                    .prop_map(|(t, id, env)| {
                        let mut r = json!({"id": id, "type": t});
                        if let Some(e) = env {
                            r["env"] = e.into();
                        }
                        r
                    }),
                Just(json!({"id": "hub", "type": "hub"})),
            ];
            let sender = proptest::option::of(
                (
                    "[a-z_]{1,10}",
                    select(vec!["agent", "environment", "human"]),
                )
                    .prop_map(|(id, t)| json!({"id": id, "type": t})),
            );
            let kind =
                proptest::option::of(select(vec!["request", "response", "notification", "error"]));
            (
                (
                    proptest::option::of("[a-zA-Z0-9_-]{1,64}"),
                    recipient,
                    sender,
                    // A null payload reads as no payload (refused), so it is never null here.
                    any_json().prop_filter("null", |x| !x.is_null()),
                    any::<bool>(),
                    proptest::option::of(prop_oneof![
                        Just(json!("2025-08-19T10:30:00Z")),
                        any::<u32>().prop_map(Value::from)
                    ]),
                ),
                (
                    proptest::option::of("[a-zA-Z0-9-]{1,128}"),
                    proptest::option::of(select(vec!["low", "normal", "high", "critical"])),
                    // Milliseconds: decimal values that parse back to the same f64.
                    proptest::option::of((1u32..=86_400_000).prop_map(|ms| f64::from(ms) / 1000.0)),
                    kind,
                    proptest::option::of("[a-z0-9_-]{1,30}"),
                    proptest::option::of(any_json()),
                ),
            )
                .prop_map(
                    |(
                        (id, recipient, sender, payload, as_message, timestamp),
                        (trace, priority, ttl, kind, request_id, metadata),
                    )| {
                        let mut v = json!({"type": "message", "recipient": recipient});
                        v[if as_message { "message" } else { "payload" }] = payload;
                        // The rules between members hold: a request has an id, a response or
                        // error a requestId.
                        let id = id.or_else(|| (kind == Some("request")).then(|| "req-1".into()));
                        let request_id = request_id.or_else(|| {
                            matches!(kind, Some("response" | "error")).then(|| "req-0".into())
                        });
                        for (k, x) in [
                            ("id", id.map(Value::from)),
                            ("sender", sender),
                            ("timestamp", timestamp),
                            ("traceId", trace.map(Value::from)),
                            ("priority", priority.map(Value::from)),
                            ("ttl", ttl.map(Value::from)),
                            ("kind", kind.map(Value::from)),
                            ("requestId", request_id.map(Value::from)),
                            ("metadata", metadata),
                        ] {
                            if let Some(x) = x {
                                v[k] = x;
                            }
                        }
                        v
                    },
                )
        }

        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Json {
            Str,
            Num,
            Obj,
        }
        use Json::*;

        /// A value of another JSON type than `t` (never null: null reads as absent).
        fn wrong_value(t: Json) -> BoxedStrategy<Value> {
            let mut o: Vec<BoxedStrategy<Value>> = vec![
                any::<bool>().prop_map(Value::from).boxed(),
                proptest::collection::vec(any::<i32>(), 0..3)
                    .prop_map(|v| json!(v))
                    .boxed(),
            ];
            if t != Str {
                o.push("[a-z ]{0,8}".prop_map(Value::from).boxed());
            }
            if t != Num {
                o.push(any::<i64>().prop_map(Value::from).boxed());
                o.push((-1e6f64..1e6).prop_map(Value::from).boxed());
            }
            if t != Obj {
                o.push(
                    proptest::collection::btree_map("[a-z]{1,6}", any::<i32>(), 0..3)
                        .prop_map(|m| json!(m))
                        .boxed(),
                );
            }
            Union::new(o).boxed()
        }

        /// Members serde reads with a type (the rest, payload, timestamp and metadata, are raw).
        const TYPED: &[(&str, Json)] = &[
            ("/type", Str),
            ("/id", Str),
            ("/recipient", Obj),
            ("/recipient/id", Str),
            ("/recipient/type", Str),
            ("/recipient/env", Str),
            ("/recipient/tier", Str),
            ("/sender", Obj),
            ("/sender/id", Str),
            ("/sender/type", Str),
            ("/sender/env", Str),
            ("/sender/tier", Str),
            ("/traceId", Str),
            ("/priority", Str),
            ("/ttl", Num),
            ("/kind", Str),
            ("/requestId", Str),
        ];

        /// `/recipient/id` → `recipient.id`.
        fn dotted(ptr: &str) -> String {
            ptr.trim_start_matches('/').replace('/', ".")
        }

        fn parent(ptr: &str) -> &str {
            &ptr[..ptr.rfind('/').unwrap()]
        }

        fn leaf(ptr: &str) -> &str {
            &ptr[ptr.rfind('/').unwrap() + 1..]
        }

        fn set(v: &Value, ptr: &str, x: Value) -> Value {
            let mut v = v.clone();
            if let Some(Value::Object(o)) = v.pointer_mut(parent(ptr)) {
                o.insert(leaf(ptr).to_string(), x);
            }
            v
        }

        fn remove(v: &Value, ptr: &str) -> Value {
            let mut v = v.clone();
            if let Some(Value::Object(o)) = v.pointer_mut(parent(ptr)) {
                o.remove(leaf(ptr));
            }
            v
        }

        #[derive(Debug, Clone)]
        struct Broken {
            what: String,
            text: String,
            /// Each must appear in the message.
            names: Vec<String>,
            original_id: Option<String>,
        }

        fn broken(what: String, v: Value, names: &[&str], original_id: Option<String>) -> Broken {
            Broken {
                what,
                text: v.to_string(),
                names: names.iter().map(|s| s.to_string()).collect(),
                original_id,
            }
        }

        /// A string outside `allowed`.
        fn other_word(allowed: &'static [&'static str]) -> BoxedStrategy<String> {
            prop_oneof![
                "[a-z_]{1,12}",
                select(allowed.to_vec()).prop_map(|s| s.to_uppercase()),
            ]
            .prop_filter("allowed", move |s| !allowed.contains(&s.as_str()))
            .boxed()
        }

        fn breakages(base: &Value) -> Vec<BoxedStrategy<Broken>> {
            let id = base["id"].as_str().map(str::to_string);
            let mut out: Vec<BoxedStrategy<Broken>> = Vec::new();
            // A member of the wrong JSON type: serde refuses the frame, naming the member.
            // The id is still named when it is not the member that is wrong.
            for &(ptr, t) in TYPED {
                if base.pointer(parent(ptr)).is_some() {
                    let field = format!("field {}", dotted(ptr));
                    let named = if ptr == "/id" { None } else { id.clone() };
                    out.push(vary(base, ptr, wrong_value(t), field, named));
                }
            }
            // One member missing or contradicting another: (what, frame, wording, original id).
            let hub_recipient = base["recipient"]["type"] == "hub";
            let bad_recipient_id = if hub_recipient {
                "the hub's id"
            } else {
                "recipient: id"
            };
            let both = set(&set(base, "/payload", json!({})), "/message", json!({}));
            let fixed = [
                ("no type", remove(base, "/type"), "missing field type"),
                (
                    "no recipient",
                    remove(base, "/recipient"),
                    "missing field recipient",
                ),
                (
                    "no recipient.type",
                    remove(base, "/recipient/type"),
                    "recipient.type",
                ),
                (
                    "no recipient.id",
                    remove(base, "/recipient/id"),
                    bad_recipient_id,
                ),
                (
                    "no payload",
                    remove(&remove(base, "/payload"), "/message"),
                    "missing field payload",
                ),
                ("payload and message", both, "both payload and message"),
                (
                    "type error",
                    set(base, "/type", "error".into()),
                    "clients do not send type \"error\"",
                ),
            ];
            for (what, v, wording) in fixed {
                out.push(Just(broken(what.into(), v, &[wording], id.clone())).boxed());
            }
            out.push(
                Just(broken(
                    "kind request without id".into(),
                    set(&remove(base, "/id"), "/kind", "request".into()),
                    &["a request needs an id"],
                    None,
                ))
                .boxed(),
            );
            let no_request_id = remove(base, "/requestId");
            let kinds = select(vec![json!("response"), json!("error")]).boxed();
            out.push(vary(
                &no_request_id,
                "/kind",
                kinds,
                "needs requestId".into(),
                id.clone(),
            ));
            // Words outside an enumeration: the message quotes the word after the member.
            for (ptr, allowed, wording) in [
                (
                    "/type",
                    &["message", "heartbeat", "error"][..],
                    "unknown type",
                ),
                (
                    "/recipient/type",
                    &["agent", "environment", "human", "hub"][..],
                    "recipient.type",
                ),
                (
                    "/priority",
                    &["low", "normal", "high", "critical"][..],
                    "priority",
                ),
                (
                    "/kind",
                    &["request", "response", "notification", "error"][..],
                    "kind",
                ),
            ] {
                let (b, i) = (base.clone(), id.clone());
                out.push(
                    other_word(allowed)
                        .prop_map(move |w| {
                            let needle = format!("{wording} {w:?}");
                            broken(
                                format!("{ptr} {w:?}"),
                                set(&b, ptr, w.into()),
                                &[&needle],
                                i.clone(),
                            )
                        })
                        .boxed(),
                );
            }
            // Values out of range.
            let long = || prop_oneof![Just(String::new()), "[a-z]{129,140}"];
            let b = base.clone();
            out.push(
                long()
                    .prop_map(move |bad| {
                        let what = format!("id of {} chars", bad.len());
                        let v = set(&b, "/id", bad.clone().into());
                        broken(what, v, &["id must be 1 to 128 characters"], Some(bad))
                    })
                    .boxed(),
            );
            let trace = long().prop_map(Value::from).boxed();
            let trace_wording = "traceId must be 1 to 128 characters".to_string();
            out.push(vary(base, "/traceId", trace, trace_wording, id.clone()));
            let ttl = prop_oneof![-1e6f64..=0.0, MAX_TTL + 0.001..1e9]
                .prop_map(Value::from)
                .boxed();
            out.push(vary(base, "/ttl", ttl, "ttl ".into(), id.clone()));
            let bad_id = prop_oneof![
                "[a-z]{0,2}",
                "[a-z]{51,60}",
                "[a-z]{1,4}[/ *#\u{0}][a-z]{1,4}",
                Just("HUB".to_string()),
            ];
            let bad_id = bad_id.prop_map(Value::from).boxed();
            out.push(vary(
                base,
                "/recipient/id",
                bad_id,
                bad_recipient_id.into(),
                id.clone(),
            ));
            let bad_env = prop_oneof!["[a-z]{0,2}", "[a-z]{51,60}", "[a-z]{1,4}[/ *][a-z]{1,4}"]
                .prop_map(Value::from)
                .boxed();
            out.push(vary(
                base,
                "/recipient/env",
                bad_env,
                "recipient.env".into(),
                id,
            ));
            out
        }

        /// `ptr` set to each value of `values`; the message must contain `wording`.
        fn vary(
            base: &Value,
            ptr: &'static str,
            values: BoxedStrategy<Value>,
            wording: String,
            original_id: Option<String>,
        ) -> BoxedStrategy<Broken> {
            let b = base.clone();
            values
                .prop_map(move |x| {
                    let what = format!("{ptr} = {x}");
                    broken(what, set(&b, ptr, x), &[&wording], original_id.clone())
                })
                .boxed()
        }

        fn broken_envelope() -> impl Strategy<Value = Broken> {
            envelope().prop_flat_map(|v| Union::new(breakages(&v)))
        }

        fn message(text: &str) -> Result<Box<Inbound<'_>>, String> {
            match decode(text, MAX_TTL) {
                Ok(Frame::Message(m)) => Ok(m),
                Ok(Frame::Heartbeat) => Err("decoded as a heartbeat".into()),
                Err(e) => Err(format!("{e:?}")),
            }
        }

        proptest::proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// One broken member: a VALIDATION_ERROR naming it, never a panic.
            #[test]
            fn one_broken_member_gets_a_validation_error_naming_it(b in broken_envelope()) {
                let e = match decode(&b.text, MAX_TTL) {
                    Ok(f) => return Err(TestCaseError::fail(format!("{}: accepted as {f:?}\n{}", b.what, b.text))),
                    Err(e) => e,
                };
                prop_assert_eq!(e.error.code, ClawCode::E003, "{}: {}", b.what, b.text);
                prop_assert_eq!(e.error.code.star(), ErrorCode::Validation);
                prop_assert!(!e.error.suggested_action.is_empty());
                for n in &b.names {
                    prop_assert!(e.error.message.contains(n.as_str()),
                        "{}: message {:?} does not name {:?}\n{}", b.what, e.error.message, n, b.text);
                }
                prop_assert_eq!(e.original_id.as_deref(), b.original_id.as_deref(), "{}: {}\n{}", b.what, e.error.message, b.text);
            }

            /// Valid envelopes decode to what was sent, and the delivery body built from the
            /// decoded frame carries every member on unchanged.
            #[test]
            fn valid_envelopes_round_trip_into_the_delivery_body(v in envelope()) {
                let text = v.to_string();
                let m = message(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
                prop_assert_eq!(m.id.as_deref(), v["id"].as_str());
                prop_assert_eq!(m.recipient.ty.as_str(), v["recipient"]["type"].as_str().unwrap());
                prop_assert_eq!(&*m.recipient.id, v["recipient"]["id"].as_str().unwrap());
                prop_assert_eq!(m.recipient.env.as_deref(), v["recipient"]["env"].as_str());
                prop_assert_eq!(m.priority.as_str(), v["priority"].as_str().unwrap_or("normal"));
                prop_assert_eq!(m.ttl, v["ttl"].as_f64());
                prop_assert_eq!(m.kind.map(Kind::as_str), v["kind"].as_str());
                prop_assert_eq!(m.request_id.as_deref(), v["requestId"].as_str());
                prop_assert_eq!(m.trace_id.as_deref(), v["traceId"].as_str());
                let sent_payload = v.get("payload").or(v.get("message")).unwrap();
                let payload: Value = serde_json::from_str(m.payload.get()).unwrap();
                prop_assert_eq!(&payload, sent_payload);

                let no_ts = RawValue::from_string("null".into()).unwrap();
                let mut out = OutMessage::new(
                    "message",
                    m.id.as_deref().unwrap_or("generated"),
                    OutPeer { id: "sender_1", ty: "agent", env: Some("hall_a"), tier: None },
                    OutPeer {
                        id: &m.recipient.id,
                        ty: m.recipient.ty.as_str(),
                        env: m.recipient.env.as_deref(),
                        tier: None,
                    },
                    m.timestamp.unwrap_or(&no_ts),
                    m.trace_id.as_deref().unwrap_or("generated"),
                    m.payload,
                );
                out.priority = m.priority.as_str();
                out.ttl = m.ttl;
                out.kind = m.kind.map(Kind::as_str);
                out.request_id = m.request_id.as_deref();
                out.metadata = m.metadata;
                let d: Value = serde_json::from_str(&with_seq(9, &body(&out))).unwrap();
                prop_assert_eq!(&d["seq"], &json!(9));
                prop_assert_eq!(&d["recipient"], &v["recipient"]);
                prop_assert_eq!(&d["payload"], sent_payload);
                prop_assert_eq!(&d["priority"], &json!(v["priority"].as_str().unwrap_or("normal")));
                for k in ["id", "traceId", "timestamp"] {
                    if let Some(x) = v.get(k) {
                        prop_assert_eq!(&d[k], x, "{}\n{}", k, text);
                    }
                }
                // Optional members: carried when given (a null metadata reads as absent).
                for k in ["ttl", "kind", "requestId", "metadata"] {
                    prop_assert_eq!(d.get(k).filter(|x| !x.is_null()), v.get(k).filter(|x| !x.is_null()), "{}\n{}", k, text);
                }
            }

            /// Unknown members, at the top or inside recipient or sender, are ignored.
            #[test]
            fn unknown_members_are_ignored(
                v in envelope(),
                at in select(vec!["", "/recipient", "/sender"]),
                key in "x_[a-z]{1,8}",
                extra in any_json(),
            ) {
                let mut w = v.clone();
                if let Some(Value::Object(o)) = w.pointer_mut(at) {
                    o.insert(key, extra);
                }
                let (a, b) = (v.to_string(), w.to_string());
                let ma = message(&a).map_err(|e| TestCaseError::fail(format!("{e}\n{a}")))?;
                let mb = message(&b).map_err(|e| TestCaseError::fail(format!("{e}\n{b}")))?;
                // Everything decoded is the same (the extra member is neither kept nor refused).
                prop_assert_eq!(format!("{ma:?}"), format!("{mb:?}"));
            }

            /// A heartbeat is a heartbeat whatever else it carries.
            #[test]
            fn heartbeats_decode(extra in any_json()) {
                let text = json!({"type": "heartbeat", "x_extra": extra}).to_string();
                prop_assert!(matches!(decode(&text, MAX_TTL), Ok(Frame::Heartbeat)));
            }
        }
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_755_599_400_123), "2025-08-19T10:30:00.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}

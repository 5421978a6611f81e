//! LLM providers: each turns its vendor's streaming API into one stream of [`Segment`]s
//! (seed 003: ordered text and tool_call segments, metadata at the end).
//!
//! Providers know nothing of WebSockets or sessions. Cancellation is by dropping the stream:
//! that drops the HTTP response and closes its connection at once. Timeouts between chunks are
//! applied by the caller (the pipeline), the same for every provider; providers report signs of
//! life that carry no content as [`Segment::KeepAlive`] so those timers measure the endpoint's
//! silence, not the text's.

pub mod gemini;
pub mod offline;
pub mod openai;
pub mod sse;

use std::pin::Pin;

use futures_util::Stream;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One complete tool call. `id` is the vendor's, or generated when the vendor gives none.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Parsed arguments (an object); `Err` holds the raw text when it was not valid JSON.
    pub arguments: Result<Value, String>,
}

impl ToolCall {
    /// The arguments as the vendor sent them (JSON text), for the history.
    pub fn raw_arguments(&self) -> String {
        match &self.arguments {
            Ok(v) => v.to_string(),
            Err(raw) => raw.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// Assistant messages: the calls it made.
    pub tool_calls: Vec<ToolCall>,
    /// Tool messages: which call this answers.
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool the model may call (JSON Schema parameters).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// What the collection search found for this question (`None`: retrieval did not run).
    /// Vendor providers see it as text in the system message; the offline provider answers
    /// from it directly.
    pub retrieved: Option<Vec<crate::retrieval::Hit>>,
    /// The visitor-services fact this question asks for (toilets, hours, …), if any: vendor
    /// providers see it in the system message; the offline provider answers with it word for
    /// word.
    pub fact: Option<crate::retrieval::facts::Fact>,
    /// A browse question about a kind of object ("Do you have any ceramics?"): the kind's
    /// total and name; `retrieved` then holds a few of its exhibits. Vendor providers see it
    /// in the system message; the offline provider lists them with the total.
    pub browse: Option<crate::retrieval::Browse>,
    /// The title the visitor picked from the guide's list ("Tell me about the second one"); the
    /// search puts that exhibit first. Vendor providers see it in the system message; the
    /// offline provider names it as the visitor's pick.
    pub picked: Option<String>,
    /// The exhibit a follow-up is about ("How big is it?": the one the guide's latest answer
    /// named), which the search puts first. The offline provider answers about it alone, with
    /// no other exhibits suggested; vendor providers read the conversation itself.
    pub about: Option<String>,
    /// The visitor asked for more of the list the guide gave ("Any more?"): `retrieved` (and
    /// `browse`, for a kind) holds the exhibits not listed yet, none when there are no more.
    /// Vendor providers see it in the system message; the offline provider lists them as more.
    pub more: bool,
}

/// Usage and timing reported at the end of a reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata {
    pub finish_reason: Option<String>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    Text(String),
    ToolCall(ToolCall),
    /// The endpoint sent something that completes no text or call yet (a keep-alive comment,
    /// a role-only chunk, a tool-call fragment, usage): it is alive and working. Carries no
    /// content; the caller's timers use it (see `llm.keepalive_timeout_seconds`).
    KeepAlive,
    /// Always the last item of a successful stream.
    Done(Metadata),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("cannot reach the LLM endpoint: {0}")]
    Connect(String),
    #[error("the LLM endpoint timed out: {0}")]
    Timeout(String),
    #[error("the LLM endpoint answered HTTP {status}")]
    Status { status: u16, body: String },
    #[error("the LLM stream was malformed: {0}")]
    Malformed(String),
    #[error("the LLM stream ended early: {0}")]
    Closed(String),
    #[error("the LLM endpoint reported an error: {0}")]
    Upstream(String),
}

impl LlmError {
    /// Whether the protocol error for this is REQUEST_TIMEOUT (else INTERNAL_ERROR).
    pub fn is_timeout(&self) -> bool {
        matches!(self, LlmError::Timeout(_))
    }

    /// Whether trying the same call again may succeed (refused or dropped connections, 429,
    /// 5xx, timeouts). Malformed streams and the vendor's own refusals are not retried.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Connect(_) | LlmError::Timeout(_) | LlmError::Closed(_) => true,
            LlmError::Status { status, .. } => *status == 429 || (500..=599).contains(status),
            LlmError::Malformed(_) | LlmError::Upstream(_) => false,
        }
    }
}

pub type SegmentStream = Pin<Box<dyn Stream<Item = Result<Segment, LlmError>> + Send>>;

pub trait LlmProvider: Send + Sync {
    /// Vendor name for logs and metrics.
    fn name(&self) -> &'static str;
    /// Starts a streamed reply. Dropping the stream cancels the upstream call.
    fn stream(&self, request: ChatRequest) -> SegmentStream;
}

//! One request, from input to its last RESPONSE frame: (audio → STT →) prompt → LLM stream →
//! RESPONSE frames, under the request's cancellation token and the configured timeouts.
//!
//! The pipeline owns the end of its request only if it wins [`InFlight::finish`]; when an
//! INTERRUPT got there first it sends nothing more (the session already sent the final
//! interrupted frame) and records the reply in the history only as far as it was delivered.
//!
//! Seams for later stages: STT (voice input) and TTS (voice output) plug in here; today a voice
//! upload gets a clear ERROR and `require_tts` gets a text-only reply with a `notice`.

pub mod history;
pub mod reply;
pub mod speech;

use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use crate::config::{LlmConfig, secs};
use crate::protocol::{ErrorCode, ErrorPayload, FunctionCall, FunctionResult, ServerMessage};
use crate::providers::llm::{
    ChatMessage, ChatRequest, LlmError, LlmProvider, Role, Segment, ToolSpec,
};
use crate::providers::srs::Retriever;
use crate::session::attributes::Attributes;
use crate::session::inflight::{InFlight, RequestCtx};
use crate::session::outbox::Outbox;
use history::{CUT_OFF_MARKER, History};
use reply::ReplyStream;

/// What the pipeline needs from the server, built once.
pub struct Deps {
    pub llm: Option<Arc<dyn LlmProvider>>,
    pub llm_config: LlmConfig,
    /// The collection search (None: retrieval off for every session).
    pub retriever: Option<Arc<dyn Retriever>>,
    /// Speech recognition for voice input (None: voice requests get a clear ERROR).
    pub stt: Option<Arc<dyn crate::providers::stt::SttProvider>>,
    /// Speech synthesis for `require_tts` replies (None: text with a `notice`).
    pub tts: Option<Arc<dyn crate::providers::tts::TtsProvider>>,
    pub tts_config: crate::config::TtsConfig,
    /// Voice timeouts, timings and the hand-over of streaming recognitions.
    pub voice: speech::Voice,
}

/// The visitor's input for one request.
#[derive(Debug, Clone)]
pub enum Input {
    Text(String),
    /// **Extension**: a client function's result, optionally with more text from the visitor.
    FunctionResult(FunctionResult, Option<String>),
    /// A complete PCM utterance (16 kHz s16le mono).
    Voice(Vec<u8>),
}

/// One request to run.
pub struct Job {
    pub ctx: Arc<RequestCtx>,
    pub inflight: InFlight,
    pub outbox: Outbox,
    pub history: Arc<Mutex<History>>,
    /// The session's attributes when the request arrived.
    pub attrs: Attributes,
    pub input: Input,
}

/// Why a request failed, as the protocol will say it.
#[derive(Debug)]
pub struct Failure {
    pub code: ErrorCode,
    pub detail: String,
}

impl From<LlmError> for Failure {
    fn from(e: LlmError) -> Self {
        let code = if e.is_timeout() {
            ErrorCode::RequestTimeout
        } else {
            ErrorCode::InternalError
        };
        // Never pass the upstream's body to the client: it may echo request data or keys.
        let detail = match &e {
            LlmError::Status { status, .. } => format!("the LLM endpoint answered HTTP {status}"),
            other => other.to_string(),
        };
        Failure { code, detail }
    }
}

/// Runs one request to its end. Never panics on upstream data; every await is under the
/// request's token and a timeout.
pub async fn run(job: Job, deps: Arc<Deps>) {
    let id = job.ctx.request_id.clone();
    let started = Instant::now();
    let outcome = run_inner(&job, &deps).await;
    match outcome {
        Ok(()) => {
            tracing::debug!(request_id = %id, ms = started.elapsed().as_millis() as u64, "request finished")
        }
        Err(f) => {
            tracing::warn!(request_id = %id, code = %f.code, detail = %f.detail, "request failed");
            if job.inflight.finish(&job.ctx) {
                let e = ErrorPayload::new(f.code, f.detail).with_request(Some(id));
                job.outbox.send(&ServerMessage::Error(e)).await;
            }
        }
    }
}

async fn run_inner(job: &Job, deps: &Deps) -> Result<(), Failure> {
    let user_turn = match &job.input {
        Input::Voice(pcm) => {
            let text = speech::transcribe(deps, pcm, &job.ctx).await?;
            vec![ChatMessage::new(Role::User, text)]
        }
        Input::Text(t) => vec![ChatMessage::new(Role::User, t.clone())],
        Input::FunctionResult(fr, text) => {
            let known = job
                .history
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .has_call(fr.call_id.as_deref().unwrap_or(""));
            let result_text = match &fr.result {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut turn = Vec::new();
            if known {
                let mut m = ChatMessage::new(Role::Tool, result_text);
                m.tool_call_id = fr.call_id.clone();
                turn.push(m);
            } else {
                turn.push(ChatMessage::new(
                    Role::User,
                    format!(
                        "[The function {} on my device returned: {result_text}]",
                        fr.name
                    ),
                ));
            }
            if let Some(t) = text {
                turn.push(ChatMessage::new(Role::User, t.clone()));
            }
            turn
        }
    };
    let Some(llm) = deps.llm.clone() else {
        return Err(Failure {
            code: ErrorCode::InternalError,
            detail: "no LLM is configured on this server (set [llm] provider in config.toml)"
                .into(),
        });
    };

    let mut messages = vec![ChatMessage::new(
        Role::System,
        deps.llm_config.system_prompt.clone(),
    )];
    messages.extend(
        job.history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .for_prompt_with(&user_turn),
    );
    let tools: Vec<ToolSpec> = job
        .attrs
        .functions
        .iter()
        .map(|f| ToolSpec {
            name: f.name.clone(),
            description: f.description.clone().unwrap_or_default(),
            parameters: f.json_schema(),
        })
        .collect();
    let request = ChatRequest { messages, tools };

    let cfg = &deps.llm_config;
    let deadline = Instant::now() + secs(cfg.total_timeout_seconds);
    let mut stream = llm.stream(request);
    let ctx = &job.ctx;
    let mut reply = ReplyStream::new(ctx.clone(), job.outbox.clone(), job.attrs.require_tts, deps);
    let mut calls = Vec::new();
    let mut first = true;
    loop {
        let wait = if first {
            secs(cfg.first_token_timeout_seconds)
        } else {
            secs(cfg.idle_timeout_seconds)
        };
        let until = (Instant::now() + wait).min(deadline);
        let next = tokio::select! {
            biased;
            _ = ctx.token.cancelled() => {
                drop(stream); // closes the upstream connection now
                record_cut_off(job, user_turn, reply.text(), calls);
                return Ok(());
            }
            r = tokio::time::timeout_at(until, stream.next()) => r,
        };
        let item = match next {
            Err(_) => {
                let what = if first {
                    "first token"
                } else if Instant::now() >= deadline {
                    "whole reply"
                } else {
                    "next chunk"
                };
                return Err(Failure {
                    code: ErrorCode::RequestTimeout,
                    detail: format!("the LLM endpoint did not send the {what} in time"),
                });
            }
            Ok(None) => break,
            Ok(Some(item)) => item?,
        };
        first = false;
        match item {
            Segment::Text(t) => reply.push_text(&t).await,
            Segment::ToolCall(call) => {
                let known = job.attrs.functions.iter().any(|f| f.name == call.name);
                match (&call.arguments, known) {
                    (Ok(args), true) => {
                        reply
                            .push_function_call(FunctionCall {
                                name: call.name.clone(),
                                parameters: args.clone(),
                                call_id: Some(call.id.clone()),
                            })
                            .await;
                        calls.push(call);
                    }
                    (Err(raw), _) => {
                        tracing::warn!(tool = %call.name, args = %raw.chars().take(200).collect::<String>(), "LLM sent unparsable tool arguments; call not forwarded")
                    }
                    (Ok(_), false) => {
                        tracing::warn!(tool = %call.name, "LLM called a function the session does not have; call not forwarded")
                    }
                }
            }
            Segment::Done(meta) => {
                tracing::debug!(finish = ?meta.finish_reason, prompt_tokens = ?meta.prompt_tokens, completion_tokens = ?meta.completion_tokens, "LLM reply done");
                break;
            }
        }
    }
    drop(stream);
    tokio::select! {
        biased;
        _ = ctx.token.cancelled() => {
            record_cut_off(job, user_turn, reply.text(), calls);
            return Ok(());
        }
        r = reply.flush() => r?,
    }

    if job.inflight.finish(ctx) {
        job.outbox
            .send(&ServerMessage::Response(reply.final_frame()))
            .await;
        let mut turn = user_turn;
        let mut answer = ChatMessage::new(Role::Assistant, reply.text());
        answer.tool_calls = calls;
        turn.push(answer);
        job.history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_turn(turn);
    } else {
        // Interrupted between the last chunk and the end: keep what was delivered.
        record_cut_off(job, user_turn, reply.text(), calls);
    }
    Ok(())
}

/// Keeps an interrupted turn in the history, cut where the visitor stopped seeing it.
fn record_cut_off(
    job: &Job,
    mut turn: Vec<ChatMessage>,
    text: &str,
    calls: Vec<crate::providers::llm::ToolCall>,
) {
    let mut upto = job.ctx.delivered().min(text.len());
    while !text.is_char_boundary(upto) {
        upto -= 1;
    }
    let mut reply = ChatMessage::new(
        Role::Assistant,
        format!("{}{CUT_OFF_MARKER}", &text[..upto]),
    );
    reply.tool_calls = calls;
    turn.push(reply);
    job.history
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_turn(turn);
}

//! One request, from input to its last RESPONSE frame: (audio → STT →) prompt → LLM stream →
//! RESPONSE frames, under the request's cancellation token and the configured timeouts.
//!
//! The pipeline owns the end of its request only if it wins [`InFlight::finish`]; when an
//! INTERRUPT got there first it sends nothing more (the session already sent the final
//! interrupted frame) and records the reply in the history only as far as it was delivered.
//!
//! Seams for later stages: STT (voice input) and TTS (voice output) plug in here; today a voice
//! upload gets a clear ERROR and `require_tts` gets a text-only reply with a `notice`.

pub mod capabilities;
pub mod follow_up;
pub mod history;
pub mod prompt;
pub mod reply;
pub mod slash;
pub mod small_talk;
pub mod speech;
pub mod tools;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use crate::config::{LlmConfig, secs};
use crate::metrics::{Metrics, Outcome};
use crate::protocol::{ErrorCode, ErrorPayload, FunctionCall, FunctionResult, ServerMessage};
use crate::providers::llm::offline;
use crate::providers::llm::{
    ChatMessage, ChatRequest, LlmError, LlmProvider, Role, Segment, ToolCall, ToolSpec,
};
use crate::request::attributes::Attributes;
use crate::request::inflight::{InFlight, RequestCtx};
use crate::request::outbox::Outbox;
use crate::retrieval::facts::Service;
use crate::retrieval::{Browse, Hit, Retriever};
use history::{CUT_OFF_MARKER, History};
use reply::ReplyStream;
use tools::CallKind;

/// What the pipeline needs from the server, built once.
pub struct Deps {
    pub llm: Option<Arc<dyn LlmProvider>>,
    pub llm_config: LlmConfig,
    /// The collection search (None: retrieval off for every session).
    pub retriever: Option<Arc<dyn Retriever>>,
    /// Exhibits retrieved into the prompt per question (`[srs] top_k`).
    pub retrieval_k: usize,
    /// Visitor-services answers (`[srs] facts_path`; None: off).
    pub facts: Option<Arc<crate::retrieval::facts::FactsStore>>,
    /// Facts answered word for word, without the model (`[srs] facts_verbatim`).
    pub facts_verbatim: bool,
    pub metrics: Arc<Metrics>,
    /// Speech recognition for voice input (None: voice requests get a clear ERROR).
    pub stt: Option<Arc<dyn crate::providers::stt::SttProvider>>,
    /// Speech synthesis for `require_tts` replies (None: text with a `notice`).
    pub tts: Option<Arc<dyn crate::providers::tts::TtsProvider>>,
    pub tts_config: crate::config::TtsConfig,
    /// Voice timeouts and timings.
    pub voice: speech::Voice,
}

/// The visitor's input for one request.
#[derive(Debug)]
pub enum Input {
    Text(String),
    /// **Extension**: a client function's result, optionally with more text from the visitor.
    FunctionResult(FunctionResult, Option<String>),
    /// A complete PCM utterance (16 kHz s16le mono), with the streaming recognition that heard
    /// it while it was uploaded, if the STT provider streams input.
    Voice {
        pcm: Vec<u8>,
        live: Option<speech::LiveStt>,
    },
}

/// One request to run: what the session hands its task besides the input.
pub struct Job {
    pub ctx: Arc<RequestCtx>,
    pub inflight: InFlight,
    pub outbox: Outbox,
    pub history: Arc<Mutex<History>>,
    /// The session's attributes when the request arrived.
    pub attrs: Attributes,
    pub metrics: Arc<Metrics>,
}

/// Why a request failed, as the protocol will say it.
#[derive(Debug)]
pub struct Failure {
    pub code: ErrorCode,
    pub detail: String,
    /// `error_msg` when the spec's message for `code` would mislead the visitor.
    pub message: Option<&'static str>,
}

impl Failure {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Failure {
            code,
            detail: detail.into(),
            message: None,
        }
    }

    /// An upstream call failed: REQUEST_TIMEOUT when it timed out, else INTERNAL_ERROR (both
    /// retryable). `detail` must never carry upstream bodies or credentials.
    pub fn upstream(timed_out: bool, detail: String) -> Self {
        let code = if timed_out {
            ErrorCode::RequestTimeout
        } else {
            ErrorCode::InternalError
        };
        Failure::new(code, detail)
    }
}

impl From<LlmError> for Failure {
    fn from(e: LlmError) -> Self {
        // Never pass the upstream's body to the client: it may echo request data or keys.
        let detail = match &e {
            LlmError::Status { status, .. } => format!("the LLM endpoint answered HTTP {status}"),
            other => other.to_string(),
        };
        Failure::upstream(e.is_timeout(), detail)
    }
}

/// Runs one request to its end. Never panics on upstream data; every await is under the
/// request's token and a timeout.
pub async fn run(job: Job, input: Input, deps: Arc<Deps>) {
    let id = job.ctx.request_id.clone();
    let started = Instant::now();
    let outcome = run_inner(&job, input, &deps).await;
    match outcome {
        Ok(()) if job.ctx.token.is_cancelled() => {} // counted by whoever cancelled it
        Ok(()) => {
            deps.metrics.request(Outcome::Completed);
            tracing::debug!(request_id = %id, ms = started.elapsed().as_millis() as u64, "request finished")
        }
        Err(f) if job.ctx.token.is_cancelled() => {
            // Interrupted or disconnected while a stage was failing: nothing to report.
            tracing::debug!(request_id = %id, detail = %f.detail, "request ended after cancellation");
        }
        Err(f) => {
            tracing::warn!(request_id = %id, code = %f.code, detail = %f.detail, "request failed");
            if job.inflight.finish(&job.ctx) {
                deps.metrics.request(Outcome::Error);
                let mut e = ErrorPayload::new(f.code, f.detail).with_request(Some(id));
                if let Some(m) = f.message {
                    e = e.with_message(m);
                }
                job.outbox.send(&ServerMessage::Error(e)).await;
            }
        }
    }
}

async fn run_inner(job: &Job, input: Input, deps: &Deps) -> Result<(), Failure> {
    // `stt_done`: when the transcript was ready (voice input), for the STT → first token hop.
    let (user_turn, stt_done) = match input {
        Input::Voice { pcm, live } => {
            let heard = speech::transcribe(deps, &pcm, live, &job.ctx).await?;
            let frame = ServerMessage::Response(crate::protocol::Response {
                request_id: job.ctx.request_id.clone(),
                transcript: Some(heard.text.clone()),
                ..Default::default()
            });
            job.outbox.send_for(&job.ctx, &frame, 0).await;
            (
                vec![ChatMessage::new(Role::User, heard.text)],
                Some(heard.ready),
            )
        }
        Input::Text(t) => (vec![ChatMessage::new(Role::User, t)], None),
        Input::FunctionResult(fr, text) => (function_result_turn(job, &fr, text.as_deref()), None),
    };
    // The visitor's own words this turn (for slash commands, retrieval and tool selection).
    let said = user_turn
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let mut reply = ReplyStream::new(
        job.ctx.clone(),
        job.outbox.clone(),
        job.attrs.require_tts,
        deps,
    )
    .with_stt_done(stt_done);

    // Answers made without the model (a slash command, a verbatim fact) enter the history as the
    // assistant's turn, so the model later sees what the visitor was told, and roles alternate
    // (some chat templates refuse two user messages in a row).
    if let Some((cmd, args)) = slash::parse(&said) {
        let text = slash::run(&cmd, &args, deps.retriever.as_deref()).await;
        return answer_without_model(job, reply, user_turn, &text).await;
    }
    // A visitor-service question (toilets, hours, ...) is answered from the facts file, never
    // from exhibit records. With `facts_verbatim` (the default) the museum's text is the answer,
    // word for word in the visitor's language and script, and no model is called; otherwise the
    // fact goes to the provider (a model gets it as the prompt's authority) and no passages are
    // retrieved.
    // A built-in topic the file has no entry for (or with no file) gets "I don't have that
    // information", never an exhibit that shares a word ("Is there parking?" → a park).
    let facts_now = deps.facts.as_ref().map(|f| f.current()).unwrap_or_default();
    // Small talk, read once: for the highlights here, for its own reply below.
    let talk = small_talk::classify(&said);
    let fact = match crate::retrieval::facts::classify(&said, &facts_now) {
        Some(Service::Fact(f)) => Some(f.clone()),
        Some(Service::NoEntry(topic)) => {
            tracing::info!(
                topic,
                "a visitor-services question the facts file does not cover"
            );
            let text = crate::providers::llm::offline::fact_answer(
                &crate::retrieval::facts::no_entry_fact(topic),
                &said,
            );
            return answer_without_model(job, reply, user_turn, &text).await;
        }
        // "What do you recommend?", 有什么好看的？: small talk about the collection as a whole
        // that asks what is worth seeing gets the curators' highlights when the file has them
        // (the collection's figures otherwise, below).
        None => small_talk::highlights_for(talk, &said, &facts_now).cloned(),
    };
    // A fact about exhibits of the collection (the highlights' stops) names their records and
    // shows the first one's card.
    let fact_exhibits = match &fact {
        Some(f) => fact_exhibits(job, deps, f).await,
        None => Vec::new(),
    };
    if let Some(f) = fact.as_ref().filter(|_| deps.facts_verbatim) {
        let exhibits: Vec<crate::retrieval::Exhibit> =
            fact_exhibits.iter().map(|h| h.exhibit.clone()).collect();
        let text = crate::providers::llm::offline::fact_answer_with(f, &said, &exhibits);
        let show = fact_exhibits.first().and_then(|hit| {
            let client_tools = tools::select_client_tools(
                &job.attrs.functions,
                &said,
                deps.llm_config.max_client_tools,
            );
            let offered = tools::specs(&client_tools);
            offline::show_call(&deps.llm_config.show_exhibit_function, &offered, hit)
        });
        return answer_and_show(job, reply, user_turn, &text, show).await;
    }
    // Only "hello", "thanks", "bye" or "what can you do?": no search. The offline answerer
    // replies with a line of its own; a model gets the conversation and no search result.
    let offline = deps.llm.as_ref().is_some_and(|l| l.name() == "offline");
    // "Any more?" after a list ("Do you have any ceramics?", "Do you have any swords?"): the
    // next few of the kind or of the search's matches, none of those listed before. Not small
    // talk even when it reads as such ("What else do you have?").
    let more = match fact {
        None if follow_up::asks_for_more_of_a_list(&said) => {
            let origin = {
                let history = job.history.lock().unwrap_or_else(|p| p.into_inner());
                follow_up::list_origin(history.messages())
            };
            match origin {
                Some((question, shown)) => more_of_list(job, deps, &question, &shown).await,
                None => None,
            }
        }
        _ => None,
    };
    let small_talk = talk.filter(|_| more.is_none());
    // The collection as a whole ("What do you have?", "How many objects?", 你们有哪些藏品？): its
    // total and largest departments when the retriever can tell.
    let overview = match small_talk {
        Some(small_talk::SmallTalk::Overview) if fact.is_none() => {
            collection_overview(job, deps).await
        }
        _ => None,
    };
    if let Some(kind) = small_talk
        && offline
    {
        let text = small_talk::reply(kind, &said, overview.as_ref(), deps.facts.is_some());
        return answer_without_model(job, reply, user_turn, &text).await;
    }
    // A follow-up with no earlier question to follow ("Where can I see it?" first) is not
    // searched: any record it matched would share only generic words. The offline answerer asks
    // which exhibit is meant; a model gets no search result.
    let (query, picked, about) = match search_query(job, &said) {
        Some(SearchQuery {
            query,
            pinned,
            picked,
        }) => {
            // "Tell me about the second one": the title picked from the guide's own list; any
            // other pinned title is the exhibit a follow-up is about.
            let title = pinned.clone().filter(|_| picked);
            let about = pinned.clone().filter(|_| !picked);
            (Some((query, pinned)), title, about)
        }
        None => (None, None, None),
    };
    if query.is_none() && small_talk.is_none() && more.is_none() && offline {
        let text = follow_up::which_exhibit(&said);
        return answer_without_model(job, reply, user_turn, &text).await;
    }
    let Some(llm) = deps.llm.clone() else {
        return Err(Failure::new(
            ErrorCode::InternalError,
            "no LLM is configured on this server (set [llm] provider in config.toml)",
        ));
    };
    let cfg = &deps.llm_config;
    let deadline = Instant::now() + secs(cfg.total_timeout_seconds);
    // A browse question about a kind of object ("Do you have any ceramics?") lists the kind's
    // exhibits with their total; any other question, or a kind the collection lacks, is
    // searched.
    let browse = match (&fact, small_talk, &query) {
        _ if more.is_some() => more.as_ref().and_then(More::kind).cloned(),
        (None, None, Some((query, None))) if query == &said && offline::may_name_a_kind(&said) => {
            browse_kind(job, deps, &said, deps.retrieval_k.min(offline::BROWSE_MAX)).await
        }
        _ => None,
    };
    let retrieved = match (&fact, small_talk, query) {
        // A fact's exhibits are its passages for the model (and the cards it may show).
        (Some(_), _, _) if !fact_exhibits.is_empty() => Some(fact_exhibits.clone()),
        _ if browse.is_some() => browse.as_ref().map(|b| b.hits.clone()),
        _ if more.is_some() => more.as_ref().and_then(More::matches).map(<[Hit]>::to_vec),
        (None, None, Some((query, None))) => retrieve(job, deps, &query).await,
        (None, None, Some((query, Some(title)))) => {
            let hits = retrieve(job, deps, &query).await;
            pin_title(job, deps, hits, &title).await
        }
        _ => None,
    };

    // Tools: the client's (at most max_client_tools, best matches first) and the server's.
    let client_tools =
        tools::select_client_tools(&job.attrs.functions, &said, cfg.max_client_tools);
    let client_names: HashSet<String> = client_tools.iter().map(|f| f.name.clone()).collect();
    let mut offered = tools::specs(&client_tools);
    if deps.retriever.is_some() {
        offered.extend(tools::server_tool_specs());
    }
    let mut system = prompt::system_message(&cfg.system_prompt, retrieved.as_deref());
    if let Some(f) = &fact {
        system.push_str(&prompt::visitor_fact(f));
    }
    if let Some(b) = &browse {
        system.push_str(&prompt::browse_total(b));
    }
    if let Some(o) = &overview {
        system.push_str(&prompt::overview(o));
    }
    if let Some(t) = &picked {
        system.push_str(&prompt::picked(t));
    }
    if more.as_ref().and_then(More::matches).is_some() {
        system.push_str(prompt::more_of_list());
    }

    // The tool loop: the model answers, server tools and error observations go back to it, until
    // it answers without needing them or the step limit is reached.
    let mut turn = user_turn;
    let mut step = 0;
    loop {
        step += 1;
        let mut messages = vec![ChatMessage::new(Role::System, system.clone())];
        messages.extend(
            job.history
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .for_prompt_with(&turn),
        );
        let request = ChatRequest {
            messages,
            tools: offered.clone(),
            retrieved: retrieved.clone(),
            fact: fact.clone(),
            browse: browse.clone(),
            picked: picked.clone(),
            about: about.clone(),
            more: more.is_some(),
        };
        let Some(out) = stream_step(
            job,
            &llm,
            request,
            &mut reply,
            &offered,
            &client_names,
            cfg,
            deadline,
        )
        .await?
        else {
            record_cut_off(job, turn, reply.text());
            return Ok(());
        };
        let mut answer = ChatMessage::new(Role::Assistant, out.text);
        answer.tool_calls = out.calls.iter().map(|(c, _)| c.clone()).collect();
        turn.push(answer);
        let mut observations = Vec::new();
        for (call, kind) in out.calls {
            let content = match kind {
                CallKind::Client(_) => continue, // already sent; its result comes from the client
                CallKind::Invalid(obs) => {
                    tracing::info!(tool = %call.name, observation = %obs, "tool call refused; told the model");
                    obs
                }
                CallKind::Server(args) => {
                    let run = tools::run_server_tool(&call.name, &args, deps.retriever.as_deref());
                    tokio::select! {
                        biased;
                        _ = job.ctx.token.cancelled() => {
                            record_cut_off(job, turn, reply.text());
                            return Ok(());
                        }
                        r = tokio::time::timeout(SERVER_TOOL_TIMEOUT, run) => r.unwrap_or_else(|_| {
                            serde_json::json!({"error": "the tool timed out"}).to_string()
                        }),
                    }
                }
            };
            let mut m = ChatMessage::new(Role::Tool, content);
            m.tool_call_id = Some(call.id.clone());
            observations.push(m);
        }
        if observations.is_empty() {
            break;
        }
        turn.extend(observations);
        if step >= cfg.max_tool_steps {
            tracing::warn!(
                steps = step,
                "tool loop reached max_tool_steps; ending the reply"
            );
            break;
        }
    }
    if cfg.show_mentioned_exhibit && !offline {
        show_mentioned(
            &mut reply,
            &mut turn,
            &offered,
            &client_names,
            retrieved.as_deref(),
            &cfg.show_exhibit_function,
        )
        .await;
    }
    finish(job, reply, turn).await
}

/// With a model, the card of the exhibit its answer talks about. When the model called no client
/// function this turn, the session offers the show function (one parameter), and the reply names
/// one of the exhibits the search found (its id, or its title or the title's head before a
/// comma, colon or bracket, four characters or more, compared after normalisation, so
/// Traditional and Simplified match), the server calls the show function for the one named
/// first, as the offline answerer does. The call is recorded in the turn like the model's own.
async fn show_mentioned(
    reply: &mut ReplyStream,
    turn: &mut [ChatMessage],
    offered: &[ToolSpec],
    client_names: &HashSet<String>,
    retrieved: Option<&[Hit]>,
    show_function: &str,
) {
    let called = turn
        .iter()
        .any(|m| m.tool_calls.iter().any(|c| client_names.contains(&c.name)));
    let Some(hits) = retrieved.filter(|h| !h.is_empty()) else {
        return;
    };
    if called || !client_names.contains(show_function) {
        return;
    }
    let said = crate::retrieval::text::normalize(reply.text());
    let first = hits
        .iter()
        .filter_map(|h| {
            // The whole title, or its head before a comma, colon or bracket ("Toilet of Helen,
            // La Belle Hélène", 荷蘭瓷器資料(打字稿)): models shorten titles so.
            let title = crate::retrieval::text::normalize(h.exhibit.title.trim());
            let head = title
                .split([',', '(', ':', ';', '，', '（', '：', '；'])
                .next()
                .unwrap_or("")
                .trim();
            let by_title = [title.as_str(), head]
                .into_iter()
                .filter(|t| t.chars().count() >= 4)
                .filter_map(|t| said.find(t))
                .min();
            let by_id = said.find(&h.exhibit.id.to_lowercase());
            by_title.into_iter().chain(by_id).min().map(|at| (at, h))
        })
        .min_by_key(|(at, _)| *at);
    let Some((_, hit)) = first else {
        return;
    };
    let Some(call) = crate::providers::llm::offline::show_call(show_function, offered, hit) else {
        return;
    };
    tracing::debug!(exhibit = %hit.exhibit.id, "the model named an exhibit without showing it; showing it");
    send_call(reply, &call).await;
    if let Some(m) = turn.iter_mut().rev().find(|m| m.role == Role::Assistant) {
        m.tool_calls.push(call);
    }
}

/// Sends a client function call the server makes itself (an exhibit's card) as a FUNCTION_CALL
/// frame of the reply.
async fn send_call(reply: &mut ReplyStream, call: &ToolCall) {
    reply
        .push_function_call(FunctionCall {
            name: call.name.clone(),
            parameters: call.arguments.clone().unwrap_or_default(),
            call_id: Some(call.id.clone()),
        })
        .await;
}

/// Streams `text` as the whole reply and records it as the assistant's answer to `turn`.
async fn answer_without_model(
    job: &Job,
    reply: ReplyStream,
    turn: Vec<ChatMessage>,
    text: &str,
) -> Result<(), Failure> {
    answer_and_show(job, reply, turn, text, None).await
}

/// [`answer_without_model`], then the client function call `show` (an exhibit's card), recorded
/// in the turn like a model's own call.
async fn answer_and_show(
    job: &Job,
    mut reply: ReplyStream,
    mut turn: Vec<ChatMessage>,
    text: &str,
    show: Option<ToolCall>,
) -> Result<(), Failure> {
    reply.push_text(text).await;
    let mut m = ChatMessage::new(Role::Assistant, text.to_string());
    if let Some(call) = show {
        send_call(&mut reply, &call).await;
        m.tool_calls.push(call);
    }
    turn.push(m);
    finish(job, reply, turn).await
}

/// The collection's exhibits a fact is about ([`crate::retrieval::facts::Fact::exhibits`]), in
/// the file's order, as hits (the card and a model's passages read them), each looked up under
/// the search's bound and cancellation; an id the collection lacks is logged and left out.
async fn fact_exhibits(job: &Job, deps: &Deps, f: &crate::retrieval::facts::Fact) -> Vec<Hit> {
    let Some(r) = deps.retriever.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for id in &f.exhibits {
        match bounded(
            job,
            r.name(),
            "exhibit lookup",
            "answering without it",
            r.get(id),
        )
        .await
        {
            Some(Some(exhibit)) => out.push(Hit {
                exhibit,
                score: 1.0,
                passages: Vec::new(),
            }),
            Some(None) => tracing::warn!(
                topic = %f.topic,
                exhibit = %id,
                "the facts file names an exhibit the collection lacks; leaving it out"
            ),
            None => {}
        }
    }
    out
}

async fn finish(job: &Job, mut reply: ReplyStream, turn: Vec<ChatMessage>) -> Result<(), Failure> {
    tokio::select! {
        biased;
        _ = job.ctx.token.cancelled() => {
            record_cut_off(job, turn, reply.text());
            return Ok(());
        }
        r = reply.flush() => r?,
    }
    if job.inflight.finish(&job.ctx) {
        job.outbox
            .send(&ServerMessage::Response(reply.final_frame()))
            .await;
        job.history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_turn(turn);
    } else {
        // Interrupted between the last chunk and the end: keep what was delivered.
        record_cut_off(job, turn, reply.text());
    }
    Ok(())
}

/// The turn for a reported client function result (extension).
fn function_result_turn(job: &Job, fr: &FunctionResult, text: Option<&str>) -> Vec<ChatMessage> {
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
        turn.push(ChatMessage::new(Role::User, t.to_string()));
    }
    turn
}

/// What the collection is searched for when the visitor said `said`: a follow-up ("When was it
/// made?") together with the visitor's last question that named something (follow_up.rs);
/// None for a follow-up with no such question. A pick from a list the guide gave ("Tell me
/// about the second one") is searched as the title it points at, with the question that asked
/// for the list (a short title such as "Vase" then finds the exhibit listed); that title comes
/// back too, as does a picked title a follow-up refers to, for [`pin_title`].
fn search_query(job: &Job, said: &str) -> Option<SearchQuery> {
    let history = job.history.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(title) = follow_up::pick_from_list(said, history.messages()) {
        let query = match follow_up::anchor(history.messages()) {
            Some(anchor) => format!("{title} {anchor}"),
            None => title.clone(),
        };
        return Some(SearchQuery {
            query,
            pinned: Some(title),
            picked: true,
        });
    }
    // "The second one" with no list to pick from names nothing to search (searched alone,
    // 第二个是什么时候的？ found a rubbing through 第二); "the first one" after an answer about
    // one exhibit is that exhibit, a follow-up.
    let ordinal = follow_up::ordinal(said);
    if ordinal.is_some_and(|n| n > 0) {
        return None;
    }
    // "When was this vase made?": the exhibit of the conversation when its title says vase; at
    // a fresh start, an exhibit the guide cannot see (asked which is meant, as for "it").
    let pointed = follow_up::pointed_at(said).filter(|_| ordinal.is_none());
    let about_the_last = match (&pointed, follow_up::last_answer_title(history.messages())) {
        (Some(terms), Some(title)) => follow_up::title_holds(&title, terms),
        (Some(_), None) if follow_up::anchor(history.messages()).is_none() => return None,
        _ => false,
    };
    if ordinal.is_none() && !follow_up::is_follow_up(said) && !about_the_last {
        return Some(SearchQuery {
            query: said.to_string(),
            pinned: None,
            picked: false,
        });
    }
    follow_up::anchor_with_pick(history.messages()).map(|(anchor, picked)| SearchQuery {
        // "The first one" adds nothing to search for but its ordinal word.
        query: if ordinal.is_some() {
            anchor.clone()
        } else {
            format!("{anchor} {said}")
        },
        // The exhibit picked from a list, else the one the guide has just talked about.
        pinned: if picked {
            Some(anchor)
        } else {
            follow_up::last_answer_title(history.messages())
        },
        picked: false,
    })
}

/// What [`search_query`] found: the text to search, the title of an exhibit picked from a list
/// that the search puts first ([`pin_title`]), and whether this very question is the pick ("the
/// second one", not a later "When was it made?").
struct SearchQuery {
    query: String,
    pinned: Option<String>,
    picked: bool,
}

/// Puts the exhibit titled `title` (picked from a list) first among `hits`, searching the title
/// alone when the question's search did not return it: the list's words around the title can
/// rank another exhibit first ("And the last one?" after "Do you have any swords?" found a
/// sword guard whose title has "Sword"). Unchanged when no exhibit has that title.
async fn pin_title(
    job: &Job,
    deps: &Deps,
    hits: Option<Vec<Hit>>,
    title: &str,
) -> Option<Vec<Hit>> {
    let key = |t: &str| crate::retrieval::text::normalize(t.trim());
    let wanted = key(title);
    let same = |h: &Hit| key(&h.exhibit.title) == wanted;
    let mut hits = hits;
    if let Some(list) = hits.as_mut()
        && let Some(i) = list.iter().position(same)
    {
        let h = list.remove(i);
        list.insert(0, h);
        return hits;
    }
    let found = retrieve(job, deps, title)
        .await
        .and_then(|more| more.into_iter().find(same));
    match (hits, found) {
        (Some(mut hits), Some(h)) => {
            hits.insert(0, h);
            hits.truncate(deps.retrieval_k.max(1));
            Some(hits)
        }
        (None, Some(h)) => Some(vec![h]),
        (hits, None) => hits,
    }
}

/// Searches the collection for the visitor's words when the session has `enable_srs`.
/// A failing search never fails the request: it is logged and the answer goes on without it.
async fn retrieve(job: &Job, deps: &Deps, said: &str) -> Option<Vec<Hit>> {
    retrieve_k(job, deps, said, deps.retrieval_k).await
}

/// [`retrieve`], `k` hits at most.
async fn retrieve_k(job: &Job, deps: &Deps, said: &str, k: usize) -> Option<Vec<Hit>> {
    let r = deps.retriever.as_ref()?;
    if !job.attrs.enable_srs || said.trim().is_empty() {
        return None;
    }
    bounded(
        job,
        r.name(),
        "collection search",
        "answering without it",
        r.search(said, k),
    )
    .await
}

/// What the collection holds as a whole ([`Retriever::overview`]), under the same bound and
/// cancellation as a search; None when the session has no search or the retriever cannot tell.
async fn collection_overview(job: &Job, deps: &Deps) -> Option<crate::retrieval::Overview> {
    let r = deps.retriever.as_ref()?;
    if !job.attrs.enable_srs {
        return None;
    }
    bounded(
        job,
        r.name(),
        "collection overview",
        "answering without it",
        r.overview(),
    )
    .await
    .flatten()
}

/// The kind a browse question names and a few of its exhibits ([`Retriever::browse`]), under
/// the same bound and cancellation as a search; None (searched as usual) when the kind is not
/// the collection's, the session has no search, or the lookup fails.
async fn browse_kind(job: &Job, deps: &Deps, said: &str, k: usize) -> Option<Browse> {
    let r = deps.retriever.as_ref()?;
    if !job.attrs.enable_srs {
        return None;
    }
    bounded(
        job,
        r.name(),
        "kind lookup",
        "searching instead",
        r.browse(said, k),
    )
    .await
    .flatten()
}

/// Most exhibits the guide lists for one question over the visitor's requests for more.
const MORE_MAX_LISTED: usize = 40;

/// The next few exhibits of a list ([`more_of_list`]): of a kind (with its total) or of the
/// search's matches.
enum More {
    Kind(Browse),
    Matches(Vec<Hit>),
}

impl More {
    fn kind(&self) -> Option<&Browse> {
        match self {
            More::Kind(b) => Some(b),
            More::Matches(_) => None,
        }
    }

    fn matches(&self) -> Option<&[Hit]> {
        match self {
            More::Kind(_) => None,
            More::Matches(hits) => Some(hits),
        }
    }
}

/// The next few exhibits of the list `question` got, none of whose titles is in `shown` (the
/// guide's earlier lists for it): a kind's listing taken further ([`Retriever::browse`] with a
/// larger `k`), or for a browse question that names no kind, the search's further matches near
/// its best ([`offline::more_matches`]). None when `question` asked for no list (a topic
/// answered about one exhibit) or the lookup fails: the request is then answered as before.
async fn more_of_list(job: &Job, deps: &Deps, question: &str, shown: &[String]) -> Option<More> {
    let k = (shown.len() + offline::BROWSE_MAX).min(MORE_MAX_LISTED);
    if offline::may_name_a_kind(question)
        && let Some(mut b) = browse_kind(job, deps, question, k).await
    {
        b.hits = offline::not_listed(std::mem::take(&mut b.hits), shown);
        b.shown = shown.len();
        return Some(More::Kind(b));
    }
    if !offline::is_browse(question) {
        return None;
    }
    let hits = retrieve_k(job, deps, question, k).await?;
    Some(More::Matches(offline::more_matches(hits, shown)))
}

/// A retriever call under the request's cancellation and [`SERVER_TOOL_TIMEOUT`]: None when
/// cancelled, failed or late (logged as `what` failed / timed out, then what happens instead).
async fn bounded<T>(
    job: &Job,
    retriever: &str,
    what: &str,
    instead: &str,
    call: impl std::future::Future<Output = Result<T, crate::retrieval::RetrievalError>>,
) -> Option<T> {
    tokio::select! {
        biased;
        _ = job.ctx.token.cancelled() => None,
        res = tokio::time::timeout(SERVER_TOOL_TIMEOUT, call) => match res {
            Ok(Ok(v)) => Some(v),
            Ok(Err(e)) => {
                tracing::warn!(retriever, error = %e, "{what} failed; {instead}");
                None
            }
            Err(_) => {
                tracing::warn!(retriever, "{what} timed out; {instead}");
                None
            }
        },
    }
}

/// What one model call produced.
struct StepOutput {
    text: String,
    calls: Vec<(ToolCall, CallKind)>,
}

/// One model call, streamed to the client as it comes. Client tool calls are sent at once.
/// Retries (connection refused, 429, 5xx, cut-off, no first token) happen only while nothing
/// of this step has reached the client. `Ok(None)`: the request was cancelled.
#[allow(clippy::too_many_arguments)]
async fn stream_step(
    job: &Job,
    llm: &Arc<dyn LlmProvider>,
    request: ChatRequest,
    reply: &mut ReplyStream,
    offered: &[ToolSpec],
    client_names: &HashSet<String>,
    cfg: &LlmConfig,
    deadline: Instant,
) -> Result<Option<StepOutput>, Failure> {
    let ctx = &job.ctx;
    let mut attempt = 0;
    'attempt: loop {
        let call_started = Instant::now();
        let mut stream = llm.stream(request.clone());
        let mut out = StepOutput {
            text: String::new(),
            calls: Vec::new(),
        };
        let mut first = true;
        // The endpoint's last sign of life carried no text (keep-alive, call fragment).
        let mut busy = false;
        loop {
            let wait = if busy {
                secs(cfg.keepalive_timeout_seconds)
            } else if first {
                secs(cfg.first_token_timeout_seconds)
            } else {
                secs(cfg.idle_timeout_seconds)
            };
            let until = (Instant::now() + wait).min(deadline);
            let next = tokio::select! {
                biased;
                _ = ctx.token.cancelled() => return Ok(None), // drops the stream: upstream closed now
                r = tokio::time::timeout_at(until, stream.next()) => r,
            };
            let error = match next {
                Err(_) => {
                    let what = if Instant::now() >= deadline {
                        "whole reply"
                    } else if busy {
                        "next chunk after its keep-alive"
                    } else if first {
                        "first token"
                    } else {
                        "next chunk"
                    };
                    LlmError::Timeout(format!("the LLM endpoint did not send the {what} in time"))
                }
                Ok(None) => return Ok(Some(out)),
                Ok(Some(Err(e))) => e,
                Ok(Some(Ok(Segment::KeepAlive))) => {
                    busy = true;
                    continue;
                }
                Ok(Some(Ok(segment))) => {
                    busy = false;
                    let received = Instant::now();
                    if first {
                        let s = received.duration_since(call_started).as_secs_f64();
                        job_metrics(job).upstream(llm.name(), "first_segment", s);
                    }
                    first = false;
                    match segment {
                        Segment::Text(t) => {
                            reply.push_text(&t).await;
                            out.text.push_str(&t);
                            job_metrics(job)
                                .relay_seconds
                                .observe(received.elapsed().as_secs_f64());
                        }
                        Segment::ToolCall(call) => {
                            let kind = tools::classify(&call, offered, client_names);
                            if let CallKind::Client(args) = &kind {
                                reply
                                    .push_function_call(FunctionCall {
                                        name: call.name.clone(),
                                        parameters: args.clone(),
                                        call_id: Some(call.id.clone()),
                                    })
                                    .await;
                            }
                            out.calls.push((call, kind));
                        }
                        Segment::KeepAlive => {}
                        Segment::Done(meta) => {
                            let s = call_started.elapsed().as_secs_f64();
                            job_metrics(job).upstream(llm.name(), "call", s);
                            tracing::debug!(provider = llm.name(), finish = ?meta.finish_reason, prompt_tokens = ?meta.prompt_tokens, completion_tokens = ?meta.completion_tokens, "LLM step done");
                            return Ok(Some(out));
                        }
                    }
                    continue;
                }
            };
            drop(stream);
            let nothing_sent = out.text.is_empty()
                && !out
                    .calls
                    .iter()
                    .any(|(_, k)| matches!(k, CallKind::Client(_)));
            if nothing_sent
                && error.is_retryable()
                && attempt < cfg.max_retries
                && Instant::now() < deadline
            {
                let backoff = RETRY_BASE * 2u32.pow(attempt);
                attempt += 1;
                tracing::warn!(provider = llm.name(), error = %error, attempt, backoff_ms = backoff.as_millis() as u64, "LLM call failed before any output; retrying");
                tokio::select! {
                    biased;
                    _ = ctx.token.cancelled() => return Ok(None),
                    _ = tokio::time::sleep(backoff.min(deadline.saturating_duration_since(Instant::now()))) => {}
                }
                continue 'attempt;
            }
            tracing::warn!(provider = llm.name(), error = %error, "LLM call failed");
            return Err(error.into());
        }
    }
}

fn job_metrics(job: &Job) -> &Metrics {
    &job.metrics
}

const SERVER_TOOL_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_BASE: Duration = Duration::from_millis(250);

/// Keeps an interrupted turn in the history, cut where the visitor stopped seeing it. Tool
/// calls and results of the cut turn are left out; the visitor's words and what they saw stay.
fn record_cut_off(job: &Job, turn: Vec<ChatMessage>, text: &str) {
    let mut upto = job.ctx.delivered().min(text.len());
    while !text.is_char_boundary(upto) {
        upto -= 1;
    }
    let mut kept: Vec<ChatMessage> = turn.into_iter().filter(|m| m.role == Role::User).collect();
    kept.push(ChatMessage::new(
        Role::Assistant,
        format!("{}{CUT_OFF_MARKER}", &text[..upto]),
    ));
    job.history
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_turn(kept);
}

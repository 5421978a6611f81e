//! A local OpenAI-compatible chat-completions server speaking real SSE `chat.completion.chunk`
//! frames. Each incoming request takes the next [`Script`]; requests and disconnects are recorded.
//!
//! Like llama.cpp's server (checked against it, see `scripts/interop/FINDINGS.md`): a request
//! with `stream_options.include_usage` gets a last chunk with `"choices": []` and `usage` before
//! `[DONE]`; [`Script::Paced`] sends keep-alive comments (`:` + blank line, what llama.cpp writes
//! every `--sse-ping-interval` seconds while it reads a prompt or holds back a tool call).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

#[derive(Debug, Clone)]
pub enum Script {
    /// Stream these `data:` payloads `delay` apart, then `data: [DONE]` when `done`.
    Stream {
        chunks: Vec<Value>,
        delay: Duration,
        done: bool,
    },
    /// Send these chunks, then hang until the client goes away.
    StallAfter(Vec<Value>),
    /// Accept the request and never answer.
    Stall,
    /// Answer with this status and body.
    Status(u16, String),
    /// Send raw SSE bytes as they are.
    Raw(String),
    /// Data chunks, keep-alive comments and pauses in this order, then `data: [DONE]`.
    Paced(Vec<Ev>),
}

/// One step of a [`Script::Paced`] stream.
#[derive(Debug, Clone)]
pub enum Ev {
    Data(Value),
    /// llama.cpp's keep-alive: the comment line `:` and a blank line.
    Ping,
    Sleep(Duration),
    /// Hang until the client goes away.
    Hang,
}

/// What llama.cpp reports as usage (`choices` empty).
pub fn usage_chunk() -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
           "choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 33, "total_tokens": 36}})
}

#[derive(Default)]
struct Inner {
    scripts: Mutex<VecDeque<Script>>,
    requests: Mutex<Vec<Value>>,
    auth_headers: Mutex<Vec<Option<String>>>,
    paths: Mutex<Vec<String>>,
    disconnects: AtomicUsize,
    completed: AtomicUsize,
    changed: Notify,
}

#[derive(Clone)]
pub struct FakeLlm {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

/// A chunk with text content.
pub fn text_chunk(text: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

/// The closing chunk of a choice.
pub fn finish_chunk(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
           "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

/// A tool-call fragment.
pub fn tool_chunk(index: u64, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut call = json!({"index": index, "function": {"arguments": args}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(n) = name {
        call["function"]["name"] = json!(n);
    }
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
           "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
}

/// A Gemini `GenerateContentResponse` chunk with these parts (and a finishReason when given).
pub fn gemini_chunk(parts: Value, finish: Option<&str>) -> Value {
    let mut cand = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        cand["finishReason"] = json!(f);
    }
    json!({"candidates": [cand], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3}})
}

/// The system prompt (the first message) of a request the fake model received.
pub fn system_prompt(req: &Value) -> String {
    req["messages"][0]["content"].as_str().unwrap().to_string()
}

/// A whole text reply: role chunk, the pieces, the finish chunk.
pub fn text_reply(pieces: &[&str]) -> Script {
    let mut chunks = vec![
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "fake", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}),
    ];
    chunks.extend(pieces.iter().map(|p| text_chunk(p)));
    chunks.push(finish_chunk("stop"));
    Script::Stream {
        chunks,
        delay: Duration::ZERO,
        done: true,
    }
}

struct DisconnectGuard {
    inner: Arc<Inner>,
    finished: bool,
}

impl DisconnectGuard {
    /// The reply was sent whole.
    fn complete(mut self) {
        self.finished = true;
    }
}

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        if self.finished {
            self.inner.completed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.inner.disconnects.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.changed.notify_waiters();
    }
}

fn sse(data: &str) -> Result<Bytes, Infallible> {
    Ok(Bytes::from(format!("data: {data}\n\n")))
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: String,
) -> Response {
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let wants_usage = v["stream_options"]["include_usage"] == true;
    inner.requests.lock().unwrap().push(v);
    let auth = headers
        .get(header::AUTHORIZATION)
        .or_else(|| headers.get("x-goog-api-key"))
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    inner.auth_headers.lock().unwrap().push(auth);
    inner.paths.lock().unwrap().push(uri.to_string());
    inner.changed.notify_waiters();
    let script = inner
        .scripts
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| text_reply(&["(no script)"]));
    let mut guard = DisconnectGuard {
        inner: inner.clone(),
        finished: false,
    };
    match script {
        Script::Status(code, body) => {
            guard.finished = true;
            (StatusCode::from_u16(code).unwrap(), body).into_response()
        }
        Script::Stall => {
            let _g = guard;
            std::future::pending::<()>().await;
            unreachable!()
        }
        Script::Raw(text) => {
            guard.finished = true;
            sse_response(Body::from(text))
        }
        Script::Stream {
            mut chunks,
            delay,
            done,
        } => {
            if done && wants_usage {
                chunks.push(usage_chunk());
            }
            let stream = futures_util::stream::unfold(
                (chunks.into_iter(), guard, done, true),
                move |(mut it, guard, done, first)| async move {
                    if !first && !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    match it.next() {
                        Some(c) => Some((sse(&c.to_string()), (it, guard, done, false))),
                        None if done => {
                            Some((sse("[DONE]"), (Vec::new().into_iter(), guard, false, false)))
                        }
                        None => {
                            guard.complete();
                            None
                        }
                    }
                },
            );
            sse_response(Body::from_stream(stream))
        }
        Script::Paced(mut evs) => {
            if wants_usage {
                evs.push(Ev::Data(usage_chunk()));
            }
            let stream = futures_util::stream::unfold(
                (evs.into_iter(), Some(guard)),
                |(mut it, guard)| async move {
                    let guard = guard?;
                    loop {
                        match it.next() {
                            Some(Ev::Data(c)) => {
                                return Some((sse(&c.to_string()), (it, Some(guard))));
                            }
                            Some(Ev::Ping) => {
                                return Some((Ok(Bytes::from_static(b":\n\n")), (it, Some(guard))));
                            }
                            Some(Ev::Sleep(d)) => tokio::time::sleep(d).await,
                            Some(Ev::Hang) => {
                                let _g = guard;
                                match std::future::pending::<Infallible>().await {}
                            }
                            None => {
                                guard.complete();
                                return Some((sse("[DONE]"), (it, None)));
                            }
                        }
                    }
                },
            );
            sse_response(Body::from_stream(stream))
        }
        Script::StallAfter(chunks) => {
            let head = futures_util::stream::iter(chunks.into_iter().map(|c| sse(&c.to_string())));
            let tail = futures_util::stream::once(async move {
                let _g = guard;
                std::future::pending::<()>().await;
                sse("never")
            });
            sse_response(Body::from_stream(head.chain(tail)))
        }
    }
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
        .unwrap()
}

impl FakeLlm {
    pub async fn start() -> FakeLlm {
        let inner = Arc::new(Inner::default());
        let router = Router::new()
            .route("/v1/chat/completions", post(handle))
            // Gemini: /v1beta/models/{model}:streamGenerateContent?alt=sse
            .route("/v1beta/models/{*rest}", post(handle))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        FakeLlm { addr, inner }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, s: Script) {
        self.inner.scripts.lock().unwrap().push_back(s);
    }

    pub fn requests(&self) -> Vec<Value> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// Paths (with query) of the requests, in order.
    pub fn paths(&self) -> Vec<String> {
        self.inner.paths.lock().unwrap().clone()
    }

    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.inner.auth_headers.lock().unwrap().clone()
    }

    pub fn disconnects(&self) -> usize {
        self.inner.disconnects.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until `n` clients went away before their reply was complete.
    pub async fn wait_disconnects(&self, n: usize) {
        self.wait_for(|| self.disconnects() >= n, "upstream disconnect")
            .await
    }

    /// Waits (bounded) until `n` requests arrived.
    pub async fn wait_requests(&self, n: usize) {
        self.wait_for(|| self.requests().len() >= n, "upstream request")
            .await
    }

    async fn wait_for(&self, cond: impl Fn() -> bool, what: &str) {
        let fut = async {
            loop {
                let notified = self.inner.changed.notified();
                if cond() {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), fut)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }
}

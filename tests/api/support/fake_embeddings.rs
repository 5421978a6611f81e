//! A local OpenAI-compatible `/v1/embeddings` server. Vectors are deterministic "concept"
//! counts, so words that share a concept (cat, feline, kitten, 猫) get similar vectors without
//! sharing a single letter: only the dense half of hybrid search can connect them. Requests and
//! their Authorization headers are recorded; the server can be switched to fail or to stall.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// Concept groups; a text's vector counts the words of each group it contains, plus a constant
/// last component so no vector is zero.
pub const CONCEPTS: &[&[&str]] = &[
    &["cat", "cats", "feline", "kitten", "猫"],
    &["ship", "boat", "vessel", "junk", "船"],
    &["moon", "lunar", "月"],
    &["sword", "blade", "katana", "刀", "剑"],
];

pub fn concept_vector(text: &str) -> Vec<f32> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut v: Vec<f32> = CONCEPTS
        .iter()
        .map(|group| {
            group
                .iter()
                .filter(|g| {
                    if g.is_ascii() {
                        words.contains(g)
                    } else {
                        lower.contains(*g)
                    }
                })
                .count() as f32
        })
        .collect();
    v.push(0.05);
    v
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ok = 0,
    Fail = 1,
    Stall = 2,
}

#[derive(Default)]
struct Inner {
    requests: Mutex<Vec<Value>>,
    auth: Mutex<Vec<Option<String>>>,
    mode: AtomicU8,
    /// The model name the server reports (None: the request's).
    reported: Mutex<Option<String>>,
    /// Requests still answered before the server starts failing (None: no limit).
    ok_left: Mutex<Option<usize>>,
}

#[derive(Clone)]
pub struct FakeEmbeddings {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

async fn embeddings(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    inner.requests.lock().unwrap().push(body.0.clone());
    inner.auth.lock().unwrap().push(
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(String::from),
    );
    {
        let mut left = inner.ok_left.lock().unwrap();
        if let Some(n) = left.as_mut() {
            if *n == 0 {
                return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
            }
            *n -= 1;
        }
    }
    match inner.mode.load(Ordering::SeqCst) {
        1 => return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        2 => std::future::pending::<()>().await,
        _ => {}
    }
    let inputs: Vec<String> = body.0["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    // Answer in reverse order: clients must use `index`, not position.
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": concept_vector(t)}))
        .collect();
    let model = inner
        .reported
        .lock()
        .unwrap()
        .clone()
        .map_or(body.0["model"].clone(), Value::from);
    axum::Json(json!({"object": "list", "data": data, "model": model,
                      "usage": {"prompt_tokens": 1, "total_tokens": 1}}))
    .into_response()
}

impl FakeEmbeddings {
    pub async fn start() -> FakeEmbeddings {
        let inner = Arc::new(Inner::default());
        let app = Router::new()
            .route("/v1/embeddings", post(embeddings))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeEmbeddings { addr, inner }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set_mode(&self, m: Mode) {
        self.inner.mode.store(m as u8, Ordering::SeqCst);
    }

    /// The model name the server reports from now on.
    pub fn report_model(&self, name: &str) {
        *self.inner.reported.lock().unwrap() = Some(name.to_string());
    }

    /// Answer `n` more requests, then fail every one (None: no limit).
    pub fn fail_after(&self, n: Option<usize>) {
        *self.inner.ok_left.lock().unwrap() = n;
    }

    /// The texts of every request so far, in order (one Vec per request).
    pub fn inputs(&self) -> Vec<Vec<String>> {
        self.requests()
            .iter()
            .map(|r| {
                r["input"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| x.as_str().unwrap_or_default().to_string())
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect()
    }

    pub fn requests(&self) -> Vec<Value> {
        self.inner.requests.lock().unwrap().clone()
    }

    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.inner.auth.lock().unwrap().clone()
    }
}

//! The load tool's own OpenAI-compatible upstream, whose timing it controls: each reply is
//! `chunks` text chunks sent at `rate` chunks per second, each chunk's text being `@<ns>#<i>;`
//! — the moment it was written, in nanoseconds since the tool's epoch, and its index in the
//! reply — so the client can measure relay latency (chunk written upstream → RESPONSE frame
//! received) and check that every chunk arrived once and in order. It records, keyed by the
//! question's text, how many chunks it wrote for each reply and when it finished, and when a
//! client went away before its reply was complete.
//!
//! With [`FakeUpstream::set_stagger`] each reply's first chunk waits a random part of one chunk
//! period, so replies started together do not tick together: real visitors ask at random
//! moments, while a thousand replies started at once would write a thousand chunks in the same
//! millisecond every period for as long as they run (a burst that any connect or REGISTER
//! arriving then queues behind).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy)]
pub struct UpstreamTiming {
    pub chunks: usize,
    /// Chunks per second; 0 = as fast as possible.
    pub rate: f64,
}

struct Inner {
    epoch: Instant,
    timing: Mutex<UpstreamTiming>,
    /// Each reply starts at a random offset within its first chunk period.
    stagger: std::sync::atomic::AtomicBool,
    disconnects: Mutex<HashMap<String, Instant>>,
    sent: Mutex<HashMap<String, Sent>>,
}

/// What the upstream wrote for one reply.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Text chunks written (indices 0..chunks).
    pub chunks: usize,
    /// Whether the reply was written to its end (`[DONE]`), rather than dropped by the server.
    pub complete: bool,
    /// When the reply ended (written whole, or dropped).
    pub at: Instant,
}

#[derive(Clone)]
pub struct FakeUpstream {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

struct Guard {
    inner: Arc<Inner>,
    tag: String,
    done: bool,
    chunks: usize,
}

impl Guard {
    fn complete(mut self) {
        self.done = true;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let now = Instant::now();
        self.inner
            .sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                self.tag.clone(),
                Sent {
                    chunks: self.chunks,
                    complete: self.done,
                    at: now,
                },
            );
        if !self.done {
            let mut d = self
                .inner
                .disconnects
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            d.insert(std::mem::take(&mut self.tag), now);
        }
    }
}

fn sse(v: &str) -> Result<Bytes, Infallible> {
    Ok(Bytes::from(format!("data: {v}\n\n")))
}

async fn chat(State(inner): State<Arc<Inner>>, body: String) -> Response {
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let tag = v["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let timing = *inner.timing.lock().unwrap_or_else(|p| p.into_inner());
    let guard = Guard {
        inner: inner.clone(),
        tag,
        done: false,
        chunks: 0,
    };
    let period = (timing.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / timing.rate));
    let offset = period
        .filter(|_| inner.stagger.load(std::sync::atomic::Ordering::Relaxed))
        .map(|p| p.mul_f64(rand::random::<f64>()));
    let stream = futures_util::stream::unfold((0usize, guard), move |(i, mut guard)| async move {
        if i > timing.chunks + 1 {
            guard.complete();
            return None;
        }
        let wait = match i {
            0 => offset,
            i if i <= timing.chunks => period,
            _ => None,
        };
        if let Some(w) = wait {
            tokio::time::sleep(w).await;
        }
        let item = if i < timing.chunks {
            let ns = guard.inner.epoch.elapsed().as_nanos();
            guard.chunks = i + 1;
            sse(&json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": format!("@{ns}#{i};")}, "finish_reason": null}]}).to_string())
        } else if i == timing.chunks {
            sse(&json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string())
        } else {
            sse("[DONE]")
        };
        Some((item, (i + 1, guard)))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .expect("valid response")
}

/// OpenAI-compatible transcription: answers at once with a fixed question.
async fn transcribe(body: axum::body::Bytes) -> axum::Json<Value> {
    // The multipart body holds the WAV; its size is all the tool needs to know it arrived.
    axum::Json(json!({"text": format!("load voice question of {} bytes", body.len())}))
}

/// OpenAI-compatible speech with `response_format: "pcm"`: 600 ms of 24 kHz s16le tone per
/// piece, streamed in 100 ms chunks as fast as the client reads.
async fn speech(_body: String) -> Response {
    let chunk: Vec<u8> = (0..2400u32)
        .flat_map(|i| (((i as f32 * 0.05).sin() * 8000.0) as i16).to_le_bytes())
        .collect();
    let chunks = futures_util::stream::iter(
        (0..6).map(move |_| Ok::<_, Infallible>(Bytes::from(chunk.clone()))),
    );
    Response::builder()
        .header("content-type", "audio/pcm")
        .body(Body::from_stream(chunks))
        .expect("valid response")
}

impl FakeUpstream {
    pub async fn start(epoch: Instant, timing: UpstreamTiming) -> std::io::Result<FakeUpstream> {
        let inner = Arc::new(Inner {
            epoch,
            timing: Mutex::new(timing),
            stagger: Default::default(),
            disconnects: Mutex::new(HashMap::new()),
            sent: Mutex::new(HashMap::new()),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/audio/transcriptions", post(transcribe))
            .route("/v1/audio/speech", post(speech))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(
                axum::serve::ListenerExt::tap_io(listener, |tcp| {
                    let _ = tcp.set_nodelay(true);
                }),
                router,
            )
            .await;
        });
        Ok(FakeUpstream { addr, inner })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn set_timing(&self, t: UpstreamTiming) {
        *self.inner.timing.lock().unwrap_or_else(|p| p.into_inner()) = t;
    }

    /// Whether replies from now on start at a random offset within one chunk period (off:
    /// every reply writes its first chunk at once, so replies asked together tick together).
    pub fn set_stagger(&self, on: bool) {
        self.inner
            .stagger
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// When the server dropped the reply to the question `tag`, if it did.
    pub fn disconnected_at(&self, tag: &str) -> Option<Instant> {
        self.inner
            .disconnects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(tag)
            .copied()
    }

    /// What the upstream wrote for the reply to the question `tag`, once that reply ended.
    pub fn sent(&self, tag: &str) -> Option<Sent> {
        self.inner
            .sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(tag)
            .copied()
    }
}

/// The stamps `@<ns>` of the chunks `@<ns>#<i>;` (or `@<ns>;`) in a text.
pub fn stamps(text: &str) -> impl Iterator<Item = u128> + '_ {
    marks(text).map(|(ns, _)| ns)
}

/// The chunks `@<ns>#<i>;` in a text: (stamp, index); `@<ns>;` has no index.
pub fn marks(text: &str) -> impl Iterator<Item = (u128, Option<usize>)> + '_ {
    text.split(';')
        .filter_map(|p| p.strip_prefix('@'))
        .filter_map(|m| match m.split_once('#') {
            Some((ns, i)) => Some((ns.parse().ok()?, Some(i.parse().ok()?))),
            None => Some((m.parse().ok()?, None)),
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn stamps_parse() {
        let v: Vec<u128> = super::stamps("@12;@345#7;junk;@9#x;").collect();
        assert_eq!(v, vec![12, 345]);
        let m: Vec<_> = super::marks("@12#0;@345#1;@6;").collect();
        assert_eq!(m, vec![(12, Some(0)), (345, Some(1)), (6, None)]);
    }
}

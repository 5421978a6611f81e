//! Voice benchmarks (`cargo bench --bench voice`), plain `harness = false` timing:
//!
//! 1. Micro-benchmarks of the pure parts: sentence splitting, PCM upload assembly, voice chunk
//!    encoding, 24 → 16 kHz resampling.
//! 2. The server's own added latency on the voice hops, measured inside the server (see
//!    `pipeline::speech::Hop`) for voice requests run end to end over a real WebSocket against
//!    local fake upstreams that answer at once (OpenAI-compatible STT, chat and speech).
//!
//! `VOICE_BENCH_REQUESTS` sets the number of end-to-end requests (default 300).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use museum_agent::audio::Chunker;
use museum_agent::audio::resample::StreamResampler;
use museum_agent::audio::splitter::{Splitter, SplitterConfig};
use museum_agent::config::{LlmProviderKind, SttProviderKind, TtsProviderKind};
use museum_agent::pipeline::speech::Hop;
use museum_agent::session::upload::{Upload, UploadMode, decode_b64};
use museum_agent::{AppState, Config};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99))
}

fn bench(name: &str, unit: &str, per: f64, runs: usize, mut f: impl FnMut()) {
    for _ in 0..runs.min(10) {
        f();
    }
    let mut t = Vec::with_capacity(runs);
    for _ in 0..runs {
        let s = Instant::now();
        f();
        t.push(s.elapsed());
    }
    let (p50, p99) = percentiles(t);
    println!(
        "{name:<44} p50 {:>9.1} µs  p99 {:>9.1} µs  ({:.1} ns/{unit} at p50)",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        p50.as_secs_f64() * 1e9 / per
    );
}

fn micro() {
    println!("== micro-benchmarks");
    let reply = "您好，这件青铜鼎是西周早期的礼器，距今约三千年。它高八十厘米，重约四十公斤！\
The vessel was cast in several pieces, then joined. Visitors often ask: who used it? \
**Priests** did, see [the catalogue](https://museum.example/ding). 还有别的问题吗？"
        .repeat(4);
    let chars: Vec<char> = reply.chars().collect();
    let deltas: Vec<String> = chars.chunks(3).map(|c| c.iter().collect()).collect();
    bench(
        "splitter: reply in 3-char deltas",
        "char",
        chars.len() as f64,
        2000,
        || {
            let mut s = Splitter::new(SplitterConfig::default());
            let mut n = 0;
            for d in &deltas {
                n += s.push(d).len();
            }
            n += s.finish().len();
            std::hint::black_box(n);
        },
    );

    let pcm = vec![7u8; 32_000 * 10];
    bench(
        "upload: 10 s as 100 ms binary frames",
        "frame",
        100.0,
        500,
        || {
            let mut u = Upload::new("r", UploadMode::Binary, 1_920_000);
            for f in pcm.chunks(3200) {
                u.push_binary(f).unwrap();
            }
            std::hint::black_box(u.finish().unwrap());
        },
    );
    let b64: Vec<String> = pcm
        .chunks(6400)
        .map(|c| base64::engine::general_purpose::STANDARD.encode(c))
        .collect();
    bench(
        "upload: 10 s as 200 ms base64 chunks",
        "chunk",
        b64.len() as f64,
        300,
        || {
            let mut u = Upload::new("r", UploadMode::Base64Chunks, 1_920_000);
            for (i, c) in b64.iter().enumerate() {
                u.push_chunk(i as i64, Some(c)).unwrap();
            }
            u.push_chunk(-1, None).unwrap();
            std::hint::black_box(u.finish().unwrap());
        },
    );
    let whole = base64::engine::general_purpose::STANDARD.encode(&pcm);
    bench(
        "upload: decode 10 s whole base64",
        "byte",
        pcm.len() as f64,
        300,
        || {
            std::hint::black_box(decode_b64(&whole).unwrap());
        },
    );
    bench(
        "voice out: 10 s into 160 ms base64 chunks",
        "chunk",
        62.5,
        500,
        || {
            let mut c = Chunker::new(160);
            let mut n = 0;
            for piece in pcm.chunks(4800) {
                for f in c.push(piece) {
                    n += base64::engine::general_purpose::STANDARD.encode(&f).len();
                }
            }
            std::hint::black_box(n);
        },
    );
    let tts: Vec<i16> = (0..240_000)
        .map(|i| ((i as f32 * 0.05).sin() * 8000.0) as i16)
        .collect();
    bench(
        "resample: 10 s 24 kHz → 16 kHz",
        "sample",
        tts.len() as f64,
        100,
        || {
            let mut r = StreamResampler::new(24_000).unwrap();
            let mut n = 0;
            for piece in tts.chunks(2400) {
                n += r.push(piece).unwrap().len();
            }
            n += r.finish().unwrap().len();
            std::hint::black_box(n);
        },
    );
}

/// Fake upstreams answering at once: chat (SSE), transcription (JSON), speech (24 kHz PCM).
async fn fake_upstreams() -> SocketAddr {
    async fn chat() -> Response {
        let chunk = |t: &str| {
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]})
        };
        let mut body = String::new();
        for t in ["这件青铜鼎是西周早期的，", "距今约三千年。"] {
            body.push_str(&format!("data: {}\n\n", chunk(t)));
        }
        body.push_str("data: [DONE]\n\n");
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(body))
            .unwrap()
    }
    async fn transcribe(_body: Bytes) -> Response {
        axum::Json(json!({"text": "这件青铜鼎是什么年代的？"})).into_response()
    }
    async fn speech(body: Bytes) -> Response {
        let v: Value = serde_json::from_slice(&body).unwrap();
        let n = v["input"].as_str().unwrap().chars().count() * 2400;
        Response::builder()
            .header("content-type", "audio/pcm")
            .body(Body::from(vec![0u8; n * 2]))
            .unwrap()
    }
    let router = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/audio/transcriptions", post(transcribe))
        .route("/v1/audio/speech", post(speech));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, router).await.unwrap() });
    addr
}

async fn hops() {
    let requests: usize = std::env::var("VOICE_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let up = fake_upstreams().await;
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::default();
    c.server.bind = "127.0.0.1:0".into();
    c.database.path = dir.path().join("bench.db");
    c.llm.provider = LlmProviderKind::Openai;
    c.llm.base_url = format!("http://{up}/v1");
    c.llm.api_key_env = String::new();
    c.stt.provider = SttProviderKind::Openai;
    c.stt.base_url = format!("http://{up}/v1");
    c.stt.api_key_env = String::new();
    c.tts.provider = TtsProviderKind::Openai;
    c.tts.base_url = format!("http://{up}/v1");
    c.tts.api_key_env = String::new();
    let store = museum_agent::store::Store::open(&c.database.path).unwrap();
    let key = museum_agent::auth::generate_api_key();
    store
        .insert_api_key("bench", &key.prefix, &key.hash)
        .unwrap();
    let llm = museum_agent::app::build_llm(&c).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = AppState::new(c, store, llm);
    tokio::spawn(museum_agent::run(
        listener,
        app.clone(),
        std::future::pending(),
    ));

    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws/agent/stream"))
        .await
        .unwrap();
    let frame = |t: &str, sid: &str, p: Value| {
        json!({"version": "1.0", "msg_type": t, "session_id": sid, "payload": p,
               "timestamp": 0})
        .to_string()
    };
    ws.send(Message::Text(
        frame(
            "REGISTER",
            "",
            json!({"auth": {"type": "API_KEY", "api_key": key.key}, "platform": "WEB",
                   "require_tts": true, "function_calling": []}),
        )
        .into(),
    ))
    .await
    .unwrap();
    let ack: Value = match ws.next().await.unwrap().unwrap() {
        Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
        m => panic!("{m:?}"),
    };
    let sid = ack["payload"]["session_id"].as_str().unwrap().to_string();
    // Two seconds of audio, sent as BINARY frames of 100 ms.
    let pcm = vec![1u8; 64_000];
    let started = Instant::now();
    for i in 0..requests {
        let id = format!("r{i}");
        ws.send(Message::Text(
            frame(
                "REQUEST",
                &sid,
                json!({"request_id": id, "data_type": "VOICE", "stream_flag": true,
                       "stream_seq": 0, "content": {"voice_mode": "BINARY"}}),
            )
            .into(),
        ))
        .await
        .unwrap();
        for f in pcm.chunks(3200) {
            ws.send(Message::Binary(Bytes::copy_from_slice(f)))
                .await
                .unwrap();
        }
        ws.send(Message::Text(
            frame(
                "REQUEST",
                &sid,
                json!({"request_id": id, "data_type": "VOICE", "stream_flag": true,
                       "stream_seq": -1, "content": {"voice_mode": "BINARY"}}),
            )
            .into(),
        ))
        .await
        .unwrap();
        loop {
            let Message::Text(t) = ws.next().await.unwrap().unwrap() else {
                continue;
            };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["msg_type"] == "ERROR" {
                panic!("{v}");
            }
            if v["payload"]["request_id"] == id.as_str() && v["payload"]["text_stream_seq"] == -1 {
                break;
            }
        }
    }
    let wall = started.elapsed();
    println!(
        "== voice hops, server-side, {requests} sequential requests (2 s BINARY upload, 2 TTS pieces each) in {:.1} s",
        wall.as_secs_f64()
    );
    let mut total_p99 = Duration::ZERO;
    for hop in Hop::ALL {
        let s = app.deps.voice.timings.summary(hop).expect("hop measured");
        total_p99 += s.p99;
        println!(
            "{:<40} n {:>5}  p50 {:>8.1} µs  p99 {:>8.1} µs  max {:>8.1} µs",
            hop.name(),
            s.count,
            s.p50.as_secs_f64() * 1e6,
            s.p99.as_secs_f64() * 1e6,
            s.max.as_secs_f64() * 1e6
        );
    }
    println!(
        "sum of the four p99s: {:.2} ms (includes the fake upstreams' own answer time on loopback)",
        total_p99.as_secs_f64() * 1e3
    );
    let _ = Arc::strong_count(&app);
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    micro();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(hops());
}

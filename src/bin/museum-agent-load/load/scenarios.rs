//! The scenarios. Each is bounded in count and time and talks only to loopback addresses.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message as AxMessage, WebSocketUpgrade};
use futures_util::{SinkExt, StreamExt};
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;

use super::Report;
use super::client::Client;
use super::stats::{Samples, cpu_seconds, cpu_times};
use super::upstream::{FakeUpstream, UpstreamTiming, stamps};
use museum_agent::util::rss_kib;

/// Where the scenarios send their load.
#[derive(Clone)]
pub struct Target {
    pub url: String,
    pub api_key: String,
    /// The server's pid, for RSS and CPU readings (same machine only).
    pub pid: Option<u32>,
}

fn rss(pid: Option<u32>) -> f64 {
    pid.and_then(rss_kib).map(|k| k as f64).unwrap_or(f64::NAN)
}

fn cpu(pid: Option<u32>) -> f64 {
    pid.and_then(cpu_seconds).unwrap_or(f64::NAN)
}

/// The server's RSS once its start-up work is over: sampled every 100 ms until, over the last
/// half second, its CPU time grew by under 10 ms and its RSS moved by under 256 KiB (at most
/// 20 s), and how long that took. A server answers before it has finished warming up (this one
/// loads its ~17 MB search dictionaries on a blocking thread), and memory it takes for that is
/// not the sessions'. Without a pid: NaN at once.
async fn settled_rss(pid: Option<u32>) -> (f64, f64) {
    let Some(pid) = pid else {
        return (f64::NAN, 0.0);
    };
    let start = Instant::now();
    let mut window: std::collections::VecDeque<(f64, f64)> = Default::default();
    loop {
        let now = (rss(Some(pid)), cpu(Some(pid)));
        window.push_back(now);
        if window.len() > 6 {
            window.pop_front();
        }
        let (r0, c0) = window[0];
        if window.len() == 6 && now.1 - c0 < 0.010 && (now.0 - r0).abs() < 256.0 {
            return (now.0, start.elapsed().as_secs_f64());
        }
        if start.elapsed() > Duration::from_secs(20) || now.0.is_nan() {
            return (now.0, start.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// (user, system) CPU seconds of the server, NaN when unknown.
fn cpu_split(pid: Option<u32>) -> (f64, f64) {
    pid.and_then(cpu_times).unwrap_or((f64::NAN, f64::NAN))
}

/// Raw WebSocket echo on loopback, measured by the same client code: the machine's baseline.
pub async fn echo(conns: usize, messages: usize) -> anyhow::Result<Report> {
    let router = axum::Router::new().route(
        "/echo",
        axum::routing::get(|ws: WebSocketUpgrade| async move {
            ws.read_buffer_size(4096)
                .on_upgrade(|mut socket| async move {
                    while let Some(Ok(m)) = socket.next().await {
                        if let AxMessage::Text(_) | AxMessage::Binary(_) = m
                            && socket.send(m).await.is_err()
                        {
                            break;
                        }
                    }
                })
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        axum::serve(
            axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            router,
        )
        .await
    });
    let url = format!("ws://{addr}/echo");
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::default();
            let (mut ws, _) =
                tokio_tungstenite::connect_async_with_config(&url, super::ws_config(), true)
                    .await?;
            let payload = "x".repeat(100);
            for _ in 0..messages {
                let t = Instant::now();
                ws.send(Message::Text(payload.clone().into())).await?;
                loop {
                    match ws.next().await {
                        Some(Ok(Message::Text(_))) => break,
                        Some(Ok(_)) => continue,
                        _ => anyhow::bail!("echo connection closed"),
                    }
                }
                s.push_micros(t.elapsed().as_secs_f64() * 1e6);
            }
            anyhow::Ok(s)
        }));
    }
    let mut all = Samples::default();
    for t in tasks {
        all.extend(t.await??);
    }
    let secs = start.elapsed().as_secs_f64();
    server.abort();
    let mut r = Report::new("echo", json!({"conns": conns, "messages": messages}));
    r.add("round trips", all.len() as f64, "");
    r.add("round trips per second", all.len() as f64 / secs, "/s");
    r.add("round trip p50", all.pct(0.5), "us");
    r.add("round trip p99", all.pct(0.99), "us");
    r.add("round trip p99.9", all.pct(0.999), "us");
    Ok(r)
}

/// Hold `sessions` registered sessions for `hold` (heartbeats answered).
pub async fn idle(
    t: &Target,
    sessions: usize,
    hold: Duration,
    concurrency: usize,
) -> anyhow::Result<Report> {
    let (rss_before, settle_secs) = settled_rss(t.pid).await;
    let sem = Arc::new(Semaphore::new(concurrency.max(1)));
    let failures = Arc::new(AtomicU64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let start = Instant::now();
    let connected = Arc::new(AtomicU64::new(0));
    let all_up = Arc::new(tokio::sync::Notify::new());
    let mut tasks = Vec::new();
    for _ in 0..sessions {
        let (t, sem, failures, stop, connected, all_up) = (
            t.clone(),
            sem.clone(),
            failures.clone(),
            stop.clone(),
            connected.clone(),
            all_up.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let permit = sem.acquire_owned().await.expect("semaphore open");
            let mut c = match Client::connect(&t.url).await {
                Ok(c) => c,
                Err(_) => {
                    failures.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            if c.register(&t.api_key).await.is_err() {
                failures.fetch_add(1, Ordering::Relaxed);
                return;
            }
            drop(permit);
            if connected.fetch_add(1, Ordering::Relaxed) + 1 == sessions as u64 {
                all_up.notify_one();
            }
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    r = c.recv() => if r.is_err() { failures.fetch_add(1, Ordering::Relaxed); break },
                }
            }
            c.close().await;
        }));
    }
    // Wait until every session is up (or failed), bounded.
    let up_deadline = Instant::now() + Duration::from_secs(120);
    while connected.load(Ordering::Relaxed) + failures.load(Ordering::Relaxed) < sessions as u64
        && Instant::now() < up_deadline
    {
        let _ = tokio::time::timeout(Duration::from_millis(200), all_up.notified()).await;
    }
    let connect_secs = start.elapsed().as_secs_f64();
    tokio::time::sleep(hold).await;
    let rss_after = rss(t.pid);
    let up = connected.load(Ordering::Relaxed);
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    let mut r = Report::new(
        "idle",
        json!({"sessions": sessions, "hold_s": hold.as_secs_f64(), "concurrency": concurrency}),
    );
    r.add("sessions registered", up as f64, "");
    r.add("failures", failures.load(Ordering::Relaxed) as f64, "");
    r.add("connect+register rate", up as f64 / connect_secs, "/s");
    r.add(
        "server settled before (CPU and RSS still)",
        settle_secs,
        "s",
    );
    r.add("server RSS before", rss_before, "KiB");
    r.add("server RSS while holding", rss_after, "KiB");
    r.add(
        "server RSS per session",
        (rss_after - rss_before) / up.max(1) as f64,
        "KiB",
    );
    Ok(r)
}

/// `sessions` sessions each asking `requests` questions in turn; the upstream streams `chunks`
/// chunks at `rate`/s stamped with their send time.
pub async fn stream(
    t: &Target,
    up: &FakeUpstream,
    epoch: Instant,
    sessions: usize,
    requests: usize,
    chunks: usize,
    rate: f64,
) -> anyhow::Result<Report> {
    up.set_timing(UpstreamTiming { chunks, rate });
    let cpu_before = cpu(t.pid);
    let split_before = cpu_split(t.pid);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Samples::default();
            let (mut frames, mut errors) = (0u64, 0u64);
            let mut c = Client::connect(&t.url).await?;
            c.register(&t.api_key).await?;
            for q in 0..requests {
                let id = format!("s{s}q{q}");
                c.text_request(&id, &format!("load {id}")).await?;
                loop {
                    let v = c.recv().await?;
                    let now = epoch.elapsed().as_nanos();
                    if v["msg_type"] == "ERROR" {
                        errors += 1;
                        break;
                    }
                    frames += 1;
                    if let Some(text) = v["payload"]["content"]["text"].as_str() {
                        for st in stamps(text) {
                            lat.push_micros(now.saturating_sub(st) as f64 / 1000.0);
                        }
                    }
                    if v["payload"]["text_stream_seq"] == -1 {
                        break;
                    }
                }
            }
            c.close().await;
            anyhow::Ok((lat, frames, errors))
        }));
    }
    let mut lat = Samples::default();
    let (mut frames, mut errors, mut failed) = (0u64, 0u64, 0u64);
    for task in tasks {
        match task.await? {
            Ok((l, f, e)) => {
                lat.extend(l);
                frames += f;
                errors += e;
            }
            Err(_) => failed += 1,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_used = cpu(t.pid) - cpu_before;
    let split_after = cpu_split(t.pid);
    let mut r = Report::new(
        "stream",
        json!({"sessions": sessions, "requests": requests, "chunks": chunks, "rate": rate}),
    );
    r.add("chunks relayed", lat.len() as f64, "");
    r.add("frames received per second", frames as f64 / secs, "/s");
    r.add("relay latency p50", lat.pct(0.5), "us");
    r.add("relay latency p99", lat.pct(0.99), "us");
    r.add("relay latency p99.9", lat.pct(0.999), "us");
    r.add("relay latency max", lat.max(), "us");
    r.add("errors", errors as f64, "");
    r.add("failed sessions", failed as f64, "");
    r.add("server CPU", cpu_used / secs * 100.0, "% of one core");
    // The figure the relay is judged by: server CPU time over the chunks that reached a
    // client (everything the server did meanwhile, registration and requests included).
    r.add(
        "server CPU per relayed chunk",
        cpu_used * 1e6 / lat.len().max(1) as f64,
        "us",
    );
    // The same, split: the server's own work, and the kernel's on its behalf (socket reads
    // and writes, polling, thread wake-ups).
    let per_chunk = |t: f64| t * 1e6 / lat.len().max(1) as f64;
    r.add(
        "server user CPU per relayed chunk",
        per_chunk(split_after.0 - split_before.0),
        "us",
    );
    r.add(
        "server kernel CPU per relayed chunk",
        per_chunk(split_after.1 - split_before.1),
        "us",
    );
    r.add("duration", secs, "s");
    Ok(r)
}

/// Requests interrupted at random points.
pub async fn interrupt(
    t: &Target,
    up: &FakeUpstream,
    sessions: usize,
    requests: usize,
) -> anyhow::Result<Report> {
    up.set_timing(UpstreamTiming {
        chunks: 2000,
        rate: 200.0,
    });
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let t = t.clone();
        let up = up.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ack, mut fin, mut drop_lat) =
                (Samples::default(), Samples::default(), Samples::default());
            let mut strays = 0u64;
            let mut missing_disconnects = 0u64;
            let mut c = Client::connect(&t.url).await?;
            c.register(&t.api_key).await?;
            for q in 0..requests {
                let id = format!("i{s}q{q}");
                let tag = format!("load {id}");
                c.text_request(&id, &tag).await?;
                let wait_chunks = rand::rng().random_range(1..=8);
                let mut got = 0;
                while got < wait_chunks {
                    let v = c.recv().await?;
                    if v["payload"]["request_id"] == id.as_str()
                        && v["payload"]["content"]["text"].is_string()
                    {
                        got += 1;
                    }
                }
                let t0 = Instant::now();
                c.send(
                    "INTERRUPT",
                    json!({"interrupt_request_id": id, "reason": "USER_NEW_INPUT"}),
                )
                .await?;
                loop {
                    let v = c.recv().await?;
                    let p = &v["payload"];
                    if v["msg_type"] == "INTERRUPT_ACK" {
                        ack.push_micros(t0.elapsed().as_secs_f64() * 1e6);
                    } else if p["request_id"] == id.as_str() && p["interrupted"] == true {
                        fin.push_micros(t0.elapsed().as_secs_f64() * 1e6);
                        break;
                    }
                }
                // Frames for the request after its final frame would arrive before this reply.
                c.send(
                    "SESSION_QUERY",
                    json!({"query_fields": ["remaining_seconds"]}),
                )
                .await?;
                loop {
                    let v = c.recv().await?;
                    if v["msg_type"] == "SESSION_INFO" {
                        break;
                    }
                    if v["payload"]["request_id"] == id.as_str() {
                        strays += 1;
                    }
                }
                // When did the upstream see its connection closed?
                let mut seen = None;
                for _ in 0..100 {
                    if let Some(at) = up.disconnected_at(&tag) {
                        seen = Some(at);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                match seen {
                    Some(at) => {
                        drop_lat.push_micros(at.saturating_duration_since(t0).as_secs_f64() * 1e6)
                    }
                    None => missing_disconnects += 1,
                }
            }
            c.close().await;
            anyhow::Ok((ack, fin, drop_lat, strays, missing_disconnects))
        }));
    }
    let (mut ack, mut fin, mut drop_lat) =
        (Samples::default(), Samples::default(), Samples::default());
    let (mut strays, mut missing, mut failed) = (0u64, 0u64, 0u64);
    for task in tasks {
        match task.await? {
            Ok((a, f, d, s, m)) => {
                ack.extend(a);
                fin.extend(f);
                drop_lat.extend(d);
                strays += s;
                missing += m;
            }
            Err(_) => failed += 1,
        }
    }
    let mut r = Report::new(
        "interrupt",
        json!({"sessions": sessions, "requests": requests}),
    );
    r.add("interrupts", fin.len() as f64, "");
    r.add("INTERRUPT -> ACK p50", ack.pct(0.5), "us");
    r.add("INTERRUPT -> ACK p99", ack.pct(0.99), "us");
    r.add("INTERRUPT -> final frame p50", fin.pct(0.5), "us");
    r.add("INTERRUPT -> final frame p99", fin.pct(0.99), "us");
    r.add("frames after the final frame", strays as f64, "");
    r.add("INTERRUPT -> upstream closed p50", drop_lat.pct(0.5), "us");
    r.add("INTERRUPT -> upstream closed p99", drop_lat.pct(0.99), "us");
    r.add("upstream never closed", missing as f64, "");
    r.add("failed sessions", failed as f64, "");
    Ok(r)
}

/// `cycles` connect → register → request → disconnect cycles, `concurrency` at a time.
pub async fn churn(
    t: &Target,
    up: &FakeUpstream,
    cycles: usize,
    concurrency: usize,
) -> anyhow::Result<Report> {
    up.set_timing(UpstreamTiming {
        chunks: 5,
        rate: 0.0,
    });
    // Warm up allocator pools before the "before" reading.
    let warm = (concurrency * 2).min(cycles);
    run_cycles(t, warm, concurrency).await;
    let rss_before = rss(t.pid);
    let start = Instant::now();
    let failures = run_cycles(t, cycles, concurrency).await;
    let secs = start.elapsed().as_secs_f64();
    // Let the server finish tearing the last connections down.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = rss(t.pid);
    let mut r = Report::new(
        "churn",
        json!({"cycles": cycles, "concurrency": concurrency}),
    );
    r.add("cycles per second", cycles as f64 / secs, "/s");
    r.add("failures", failures as f64, "");
    r.add("server RSS before", rss_before, "KiB");
    r.add("server RSS after", rss_after, "KiB");
    r.add(
        "server RSS growth",
        (rss_after - rss_before) / rss_before * 100.0,
        "%",
    );
    Ok(r)
}

async fn run_cycles(t: &Target, cycles: usize, concurrency: usize) -> u64 {
    let sem = Arc::new(Semaphore::new(concurrency.max(1)));
    let failures = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..cycles {
        let (t, sem, failures) = (t.clone(), sem.clone(), failures.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore open");
            let res: anyhow::Result<()> = async {
                let mut c = Client::connect(&t.url).await?;
                c.register(&t.api_key).await?;
                c.text_request("c", &format!("churn {i}")).await?;
                loop {
                    let v: Value = c.recv().await?;
                    anyhow::ensure!(v["msg_type"] != "ERROR", "error: {v}");
                    if v["payload"]["text_stream_seq"] == -1 {
                        break;
                    }
                }
                c.close().await;
                Ok(())
            }
            .await;
            if res.is_err() {
                failures.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    failures.load(Ordering::Relaxed)
}

/// N concurrent voice requests: a BINARY upload of `seconds` of 16 kHz s16le audio sent at
/// real-time pace (100 ms frames), answered with text and voice (`require_tts`), against the
/// tool's fake STT/LLM/TTS. Times are from the end frame; the server's own hop timings are read
/// from its `/metrics` when it exposes them.
pub async fn voice(
    t: &Target,
    up: &FakeUpstream,
    sessions: usize,
    seconds: f64,
) -> anyhow::Result<Report> {
    up.set_timing(UpstreamTiming {
        chunks: 20,
        rate: 0.0,
    });
    let cpu_before = cpu(t.pid);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(&t.url).await?;
            c.register(&t.api_key).await?;
            let id = format!("v{s}");
            c.send("REQUEST", json!({"request_id": id, "data_type": "VOICE", "stream_flag": true, "stream_seq": 0,
                "require_tts": true, "content": {"voice_mode": "BINARY"}})).await?;
            let frame: Vec<u8> = (0..1600u32).flat_map(|i| (((i as f32 * 0.07).sin() * 6000.0) as i16).to_le_bytes()).collect();
            let frames = (seconds * 10.0).round() as usize;
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            for _ in 0..frames {
                tick.tick().await;
                tokio::time::timeout(super::client::IO_TIMEOUT, c.ws.send(Message::Binary(frame.clone().into()))).await??;
            }
            c.send("REQUEST", json!({"request_id": id, "data_type": "VOICE", "stream_flag": true, "stream_seq": -1,
                "content": {"voice_mode": "BINARY"}})).await?;
            let end = Instant::now();
            let (mut transcript, mut first_text, mut first_voice) = (None, None, None);
            let (mut text_done, mut voice_done) = (false, false);
            let mut voice_bytes = 0usize;
            while !(text_done && voice_done) {
                let v = c.recv().await?;
                anyhow::ensure!(v["msg_type"] != "ERROR", "voice request failed: {v}");
                let p = &v["payload"];
                if p["transcript"].is_string() && transcript.is_none() {
                    transcript = Some(end.elapsed());
                }
                if let Some(seq) = p["text_stream_seq"].as_i64() {
                    if seq >= 0 && first_text.is_none() {
                        first_text = Some(end.elapsed());
                    }
                    text_done |= seq == -1;
                }
                if let Some(seq) = p["voice_stream_seq"].as_i64() {
                    if seq >= 0 && first_voice.is_none() {
                        first_voice = Some(end.elapsed());
                    }
                    if let Some(b) = p["content"]["voice"].as_str() {
                        voice_bytes += b.len() * 3 / 4;
                    }
                    voice_done |= seq == -1;
                }
            }
            let done = end.elapsed();
            c.close().await;
            anyhow::Ok((transcript, first_text, first_voice, done, voice_bytes))
        }));
    }
    let (mut tr, mut ft, mut fv, mut dn) = (
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    );
    let (mut failed, mut audio_bytes) = (0u64, 0usize);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for task in tasks {
        match task.await? {
            Ok((a, b, v, d, bytes)) => {
                if let Some(a) = a {
                    tr.push_micros(us(a));
                }
                if let Some(b) = b {
                    ft.push_micros(us(b));
                }
                if let Some(v) = v {
                    fv.push_micros(us(v));
                }
                dn.push_micros(us(d));
                audio_bytes += bytes;
            }
            Err(_) => failed += 1,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu_used = cpu(t.pid) - cpu_before;
    let mut r = Report::new(
        "voice",
        json!({"sessions": sessions, "upload_seconds": seconds}),
    );
    r.add("voice requests completed", dn.len() as f64, "");
    r.add("failed sessions", failed as f64, "");
    r.add("end frame -> transcript p50", tr.pct(0.5), "us");
    r.add("end frame -> transcript p99", tr.pct(0.99), "us");
    r.add("end frame -> first text p50", ft.pct(0.5), "us");
    r.add("end frame -> first text p99", ft.pct(0.99), "us");
    r.add("end frame -> first voice p50", fv.pct(0.5), "us");
    r.add("end frame -> first voice p99", fv.pct(0.99), "us");
    r.add("end frame -> reply complete p99", dn.pct(0.99), "us");
    r.add(
        "voice received",
        audio_bytes as f64 / 32000.0,
        "s of 16 kHz audio",
    );
    r.add("server CPU", cpu_used / secs * 100.0, "% of one core");
    // The server's own hops, if it exports them.
    let metrics_url = t
        .url
        .replace("ws://", "http://")
        .replace(museum_agent::transport::WS_PATH, "/metrics");
    let client = museum_agent::util::http_client_builder().build()?;
    if let Ok(Ok(resp)) =
        tokio::time::timeout(Duration::from_secs(5), client.get(&metrics_url).send()).await
        && let Ok(text) = resp.text().await
    {
        for line in text.lines().filter(|l| {
            l.starts_with("museum_agent_voice_hop_seconds{") && l.contains("quantile=\"0.99\"")
        }) {
            let hop = line
                .split("hop=\"")
                .nth(1)
                .and_then(|x| x.split('"').next());
            let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
            if let (Some(h), Some(v)) = (hop, value) {
                r.add(&format!("server hop {h} p99"), v * 1e6, "us");
            }
        }
    }
    Ok(r)
}

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
use super::stats::{Samples, cpu_seconds};
use super::upstream::{FakeUpstream, UpstreamTiming, stamps};
use crate::util::rss_kib;

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
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let url = format!("ws://{addr}/echo");
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::default();
            let (mut ws, _) = tokio_tungstenite::connect_async(&url).await?;
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
    let rss_before = rss(t.pid);
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

//! The `hub` scenario: N agents spread over E environments, each sending to the next agent of
//! its environment (a ring), through the server's agent hub. Two modes:
//! - `--rate R` (messages/s over all agents): paced open-loop load; latency is the hub's
//!   routing latency plus both WebSocket hops at that load.
//! - `--rate 0`: saturation. Each sender keeps at most `--window` messages in flight to its
//!   receiver, so queues stay bounded and the figure is the routed throughput the machine
//!   sustains (generator and server share the cores).
//!
//! Each payload carries the send time (ns since the run's epoch); the receiver reads it back
//! with a substring search, not a JSON parse, to keep the generator's cost low.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::Report;
use super::scenarios::Target;
use super::stats::{Samples, cpu_seconds};
use museum_agent::util::rss_kib;

/// The hub's base URL (`ws://host:port`) from the client-protocol URL.
pub fn hub_base(url: &str) -> String {
    url.trim_end_matches('/')
        .trim_end_matches(museum_agent::transport::WS_PATH)
        .to_string()
}

/// Reads the `"t":<ns>` stamp of a delivery.
fn stamp(text: &str) -> Option<u128> {
    let i = text.rfind("{\"t\":")? + 5;
    let digits = &text[i..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// The hub's own latency histogram (`le` bound in seconds → cumulative count) from `/metrics`.
async fn hub_histogram(base: &str) -> Option<Vec<(f64, f64)>> {
    let url = format!("{}/metrics", base.replacen("ws", "http", 1));
    let client = museum_agent::util::http_client_builder().build().ok()?;
    let text = tokio::time::timeout(Duration::from_secs(5), async {
        client.get(url).send().await.ok()?.text().await.ok()
    })
    .await
    .ok()??;
    let mut v = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("hub_message_latency_seconds_bucket{le=\"") else {
            continue;
        };
        let (le, count) = rest.split_once("\"} ")?;
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        v.push((le, count.trim().parse().ok()?));
    }
    Some(v)
}

/// The bucket bound under which fraction `q` of the observations between two scrapes fall.
fn histogram_quantile(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> f64 {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|(le, n)| {
            let b = before
                .iter()
                .find(|(l, _)| l == le)
                .map(|(_, n)| *n)
                .unwrap_or(0.0);
            (*le, n - b)
        })
        .collect();
    let total = delta.last().map(|(_, n)| *n).unwrap_or(0.0);
    if total <= 0.0 {
        return f64::NAN;
    }
    delta
        .iter()
        .find(|(_, n)| *n >= q * total)
        .map(|(le, _)| *le * 1e6)
        .unwrap_or(f64::NAN)
}

pub struct HubParams {
    pub agents: usize,
    pub envs: usize,
    pub seconds: f64,
    pub warmup: f64,
    /// Total messages per second; 0 = saturation with a window per sender.
    pub rate: f64,
    pub window: usize,
}

/// Runs the scenario against one server, or several sharing one hub (NATS backend): agent `i`
/// connects to server `(i / envs) % n`, so its successor `i + envs` is on the next server.
pub async fn hub(targets: &[Target], p: HubParams) -> anyhow::Result<Report> {
    let t = &targets[0];
    anyhow::ensure!(
        p.envs > 0 && p.agents >= 2 * p.envs && p.agents.is_multiple_of(p.envs),
        "agents must be a multiple of envs, with at least two agents per environment"
    );
    let base = hub_base(&t.url);
    let bases: Vec<(String, String)> = targets
        .iter()
        .map(|t| (hub_base(&t.url), t.api_key.clone()))
        .collect();
    let pids: Vec<u32> = targets.iter().filter_map(|t| t.pid).collect();
    let cpu_all = || -> Option<f64> {
        if pids.is_empty() {
            return None;
        }
        pids.iter().map(|p| cpu_seconds(*p)).sum()
    };
    // Each server's hub must be ready (the NATS backend connects in the background).
    let http = museum_agent::util::http_client_builder().build()?;
    for (b, _) in &bases {
        let url = format!("{}/readyz", b.replacen("ws", "http", 1));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let body =
                match tokio::time::timeout(Duration::from_secs(2), http.get(&url).send()).await {
                    Ok(Ok(r)) => r.text().await.unwrap_or_default(),
                    _ => String::new(),
                };
            if body.contains("\"hub\":\"ok\"") {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{url}: the hub is not ready after 30 s (is [hub] enabled, and NATS reachable?): {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let epoch = Instant::now();
    // Connect everyone first (bounded concurrency).
    let gate = Arc::new(Semaphore::new(64));
    let mut connecting = Vec::new();
    for i in 0..p.agents {
        let (b, key) = bases[(i / p.envs) % bases.len()].clone();
        let url = format!("{b}/env/hall{}/agent/a{i:05}", i % p.envs);
        let gate = gate.clone();
        connecting.push(tokio::spawn(async move {
            let _permit = gate.acquire().await?;
            let mut req = url.into_client_request()?;
            req.headers_mut()
                .insert("authorization", format!("Bearer {key}").parse()?);
            let (mut ws, _) = tokio::time::timeout(
                Duration::from_secs(30),
                tokio_tungstenite::connect_async_with_config(req, super::ws_config(), true),
            )
            .await??;
            // The welcome heartbeat and the resume report.
            for _ in 0..2 {
                tokio::time::timeout(Duration::from_secs(30), ws.next())
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("closed during welcome"))??;
            }
            anyhow::Ok(ws)
        }));
    }
    let mut sockets = Vec::with_capacity(p.agents);
    for c in connecting {
        sockets.push(c.await??);
    }
    let connect_s = epoch.elapsed().as_secs_f64();
    let rss_connected = t
        .pid
        .and_then(rss_kib)
        .map(|k| k as f64)
        .unwrap_or(f64::NAN);

    let received = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let measure_from = epoch.elapsed() + Duration::from_secs_f64(p.warmup);
    let measure_to = measure_from + Duration::from_secs_f64(p.seconds);
    // Window permits: windows[i] = messages agent i may still send to its successor.
    let windows: Vec<Arc<Semaphore>> = (0..p.agents)
        .map(|_| Arc::new(Semaphore::new(p.window.max(1))))
        .collect();
    let mut tasks = Vec::new();
    for (i, ws) in sockets.into_iter().enumerate() {
        let (mut sink, mut stream) = ws.split();
        let next = (i + p.envs) % p.agents;
        let prev = (i + p.agents - p.envs) % p.agents;
        // Receiver: counts, measures, returns window permits to its predecessor.
        let (received, errors, stop_r) = (received.clone(), errors.clone(), stop.clone());
        let give_back = windows[prev].clone();
        let saturate = p.rate <= 0.0;
        tasks.push(tokio::spawn(async move {
            let mut lat = Samples::default();
            while !stop_r.load(Ordering::Relaxed) {
                let msg =
                    match tokio::time::timeout(Duration::from_millis(200), stream.next()).await {
                        Err(_) => continue,
                        Ok(None) | Ok(Some(Err(_))) => break,
                        Ok(Some(Ok(m))) => m,
                    };
                let Message::Text(text) = msg else { continue };
                if text.starts_with("{\"seq\":") {
                    let now = epoch.elapsed();
                    if saturate {
                        give_back.add_permits(1);
                    }
                    if now >= measure_from && now < measure_to {
                        received.fetch_add(1, Ordering::Relaxed);
                        if let Some(st) = stamp(&text) {
                            lat.push_micros(now.as_nanos().saturating_sub(st) as f64 / 1000.0);
                        }
                    }
                } else if text.starts_with("{\"type\":\"error\"") {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            lat
        }));
        // Sender.
        let (sent, stop_s) = (sent.clone(), stop.clone());
        let window = windows[i].clone();
        let rate_each = p.rate / p.agents as f64;
        let prefix = format!(
            "{{\"type\":\"message\",\"recipient\":{{\"id\":\"a{next:05}\",\"type\":\"agent\"}},\"payload\":{{\"t\":"
        );
        tokio::spawn(async move {
            let frame = |prefix: &str| {
                let mut s = String::with_capacity(prefix.len() + 24);
                s.push_str(prefix);
                s.push_str(&epoch.elapsed().as_nanos().to_string());
                s.push_str("}}");
                Message::Text(s.into())
            };
            if rate_each > 0.0 {
                let period = Duration::from_secs_f64(1.0 / rate_each);
                // Spread the senders' phases over one period.
                let offset = period.mul_f64(i as f64 / 997.0 % 1.0);
                let mut tick =
                    tokio::time::interval_at(tokio::time::Instant::now() + offset, period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                while !stop_s.load(Ordering::Relaxed) {
                    tick.tick().await;
                    if sink.send(frame(&prefix)).await.is_err() {
                        break;
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                while !stop_s.load(Ordering::Relaxed) {
                    let Ok(Ok(permit)) =
                        tokio::time::timeout(Duration::from_millis(200), window.acquire()).await
                    else {
                        continue;
                    };
                    permit.forget();
                    // Send what the window allows in one flush.
                    let mut n = 1;
                    if sink.feed(frame(&prefix)).await.is_err() {
                        break;
                    }
                    while n < 64 {
                        match window.try_acquire() {
                            Ok(p) => {
                                p.forget();
                                if sink.feed(frame(&prefix)).await.is_err() {
                                    break;
                                }
                                n += 1;
                            }
                            Err(_) => break,
                        }
                    }
                    if sink.flush().await.is_err() {
                        break;
                    }
                    sent.fetch_add(n, Ordering::Relaxed);
                }
            }
            let _ = sink.close().await;
        });
    }
    let cpu0 = cpu_all();
    let own0 = cpu_seconds(std::process::id());
    tokio::time::sleep_until(tokio::time::Instant::from_std(epoch + measure_from)).await;
    let hist_start = hub_histogram(&base).await;
    let cpu_start = cpu_all().or(cpu0);
    let own_start = cpu_seconds(std::process::id()).or(own0);
    tokio::time::sleep_until(tokio::time::Instant::from_std(epoch + measure_to)).await;
    let cpu_end = cpu_all();
    let hist_end = hub_histogram(&base).await;
    let own_end = cpu_seconds(std::process::id());
    let rss_loaded = t
        .pid
        .and_then(rss_kib)
        .map(|k| k as f64)
        .unwrap_or(f64::NAN);
    stop.store(true, Ordering::Relaxed);
    let mut lat = Samples::default();
    for task in tasks {
        lat.extend(task.await?);
    }
    let n = received.load(Ordering::Relaxed) as f64;
    let pct = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (b - a) / p.seconds * 100.0,
        _ => f64::NAN,
    };
    let mut r = Report::new(
        "hub",
        json!({"agents": p.agents, "envs": p.envs, "seconds": p.seconds, "rate": p.rate, "window": p.window, "processes": targets.len()}),
    );
    r.add("connect all agents", connect_s, "s");
    r.add("messages routed per second", n / p.seconds, "/s");
    r.add(
        "messages sent (whole run)",
        sent.load(Ordering::Relaxed) as f64,
        "",
    );
    r.add("end-to-end latency p50", lat.pct(0.5), "us");
    r.add("end-to-end latency p99", lat.pct(0.99), "us");
    r.add("end-to-end latency p99.9", lat.pct(0.999), "us");
    r.add("end-to-end latency max", lat.max(), "us");
    let (hub_p50, hub_p99) = match (&hist_start, &hist_end) {
        (Some(a), Some(b)) => (
            histogram_quantile(a, b, 0.5),
            histogram_quantile(a, b, 0.99),
        ),
        _ => (f64::NAN, f64::NAN),
    };
    r.add("in-hub latency p50 (bucket bound)", hub_p50, "us");
    r.add("in-hub latency p99 (bucket bound)", hub_p99, "us");
    r.add(
        "hub errors received",
        errors.load(Ordering::Relaxed) as f64,
        "",
    );
    r.add(
        "server CPU (all processes)",
        pct(cpu_start, cpu_end),
        "% of one core",
    );
    r.add(
        "server CPU per hub message",
        match (cpu_start, cpu_end) {
            (Some(a), Some(b)) if n > 0.0 => (b - a) * 1e6 / n,
            _ => f64::NAN,
        },
        "us",
    );
    r.add("load tool CPU", pct(own_start, own_end), "% of one core");
    r.add("server RSS, agents connected", rss_connected, "KiB");
    r.add("server RSS, under load", rss_loaded, "KiB");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_and_base() {
        assert_eq!(
            stamp(r#"{"seq":3,"x":{"t":9},"payload":{"t":123456}}"#),
            Some(123456)
        );
        assert_eq!(stamp("{}"), None);
        assert_eq!(
            hub_base("ws://127.0.0.1:8080/ws/agent/stream"),
            "ws://127.0.0.1:8080"
        );
        let before = [(0.001, 10.0), (0.01, 10.0), (f64::INFINITY, 10.0)];
        let after = [(0.001, 60.0), (0.01, 109.0), (f64::INFINITY, 110.0)];
        assert_eq!(histogram_quantile(&before, &after, 0.5), 1000.0);
        assert_eq!(histogram_quantile(&before, &after, 0.99), 10000.0);
    }
}

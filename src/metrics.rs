//! Prometheus metrics, rendered at `GET /metrics`. A small registry of atomic counters and
//! fixed-bucket histograms owned by each `AppState` (no global recorder, so every server in a
//! test process has its own). Recording is a few relaxed atomic adds: cheap enough for the hot
//! path.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::protocol::ErrorCode;

/// The server-side hops of a voice request that are timed (recorded by `pipeline::speech`,
/// rendered by the `/metrics` endpoint; defined here so the endpoint needs no pipeline import).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hop {
    /// End of the upload → recognised text.
    UploadToText,
    /// Recognised text → first LLM token.
    TextToFirstToken,
    /// First speakable piece → its TTS request sent.
    PieceToTtsRequest,
    /// First TTS audio byte → first voice frame queued for the socket.
    TtsByteToVoiceFrame,
}

impl Hop {
    pub const ALL: [Hop; 4] = [
        Hop::UploadToText,
        Hop::TextToFirstToken,
        Hop::PieceToTtsRequest,
        Hop::TtsByteToVoiceFrame,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Hop::UploadToText => "upload_end_to_stt_text",
            Hop::TextToFirstToken => "stt_text_to_first_llm_token",
            Hop::PieceToTtsRequest => "first_piece_to_tts_request",
            Hop::TtsByteToVoiceFrame => "first_tts_byte_to_first_voice_frame",
        }
    }
}

/// A histogram with fixed upper bounds (in the metric's unit).
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    /// Sum in millionths of the unit.
    sum_micro: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micro: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_micro
            .fetch_add((v.max(0.0) * 1e6) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let sum = self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {count}");
    }
}

const SECONDS_FINE: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];
const SECONDS_UPSTREAM: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const DEPTH: &[f64] = &[
    0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0,
];

/// How a request ended.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    Completed = 0,
    Error = 1,
    Interrupted = 2,
}

const OUTCOMES: [&str; 3] = ["completed", "error", "interrupted"];

pub struct Metrics {
    requests: [AtomicU64; 3],
    errors: [AtomicU64; 8],
    /// INTERRUPT received → ACK and final frames queued.
    pub interrupt_seconds: Histogram,
    /// Provider segment received → RESPONSE frame queued.
    pub relay_seconds: Histogram,
    /// Frames already waiting when a frame is queued for a socket.
    pub outbox_depth: Histogram,
    /// Per provider: request sent → first segment, and the whole call.
    upstream: Mutex<Vec<(String, &'static str, Histogram)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Default::default(),
            errors: Default::default(),
            interrupt_seconds: Histogram::new(SECONDS_FINE),
            relay_seconds: Histogram::new(SECONDS_FINE),
            outbox_depth: Histogram::new(DEPTH),
            upstream: Mutex::new(Vec::new()),
        }
    }
}

impl Metrics {
    pub fn request(&self, o: Outcome) {
        self.requests[o as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn error(&self, code: ErrorCode) {
        let i = ErrorCode::ALL.iter().position(|c| *c == code).unwrap_or(0);
        self.errors[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Records an upstream latency. `stage` is `first_segment` or `call`.
    pub fn upstream(&self, provider: &str, stage: &'static str, seconds: f64) {
        let mut list = self.upstream.lock().unwrap_or_else(|p| p.into_inner());
        match list.iter().find(|(p, s, _)| p == provider && *s == stage) {
            Some((_, _, h)) => h.observe(seconds),
            None => {
                let h = Histogram::new(SECONDS_UPSTREAM);
                h.observe(seconds);
                list.push((provider.to_string(), stage, h));
            }
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self, gauges: &[(&str, &str, f64)]) -> String {
        let mut out = String::with_capacity(4096);
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let _ = writeln!(
            out,
            "# HELP museum_agent_requests_total Requests by how they ended.\n# TYPE museum_agent_requests_total counter"
        );
        for (i, o) in OUTCOMES.iter().enumerate() {
            let _ = writeln!(
                out,
                "museum_agent_requests_total{{outcome=\"{o}\"}} {}",
                self.requests[i].load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP museum_agent_errors_total ERROR frames sent, by error code.\n# TYPE museum_agent_errors_total counter"
        );
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            let _ = writeln!(
                out,
                "museum_agent_errors_total{{code=\"{}\"}} {}",
                c.as_str(),
                self.errors[i].load(Ordering::Relaxed)
            );
        }
        for (name, help, h) in [
            (
                "museum_agent_interrupt_seconds",
                "INTERRUPT received to ACK and final frames queued.",
                &self.interrupt_seconds,
            ),
            (
                "museum_agent_relay_seconds",
                "Provider segment received to RESPONSE frame queued.",
                &self.relay_seconds,
            ),
            (
                "museum_agent_outbox_depth",
                "Frames already queued for the socket when one more is queued.",
                &self.outbox_depth,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            h.render(&mut out, name, "");
        }
        let _ = writeln!(
            out,
            "# HELP museum_agent_upstream_seconds Upstream latency by provider and stage.\n# TYPE museum_agent_upstream_seconds histogram"
        );
        for (p, stage, h) in self
            .upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            h.render(
                &mut out,
                "museum_agent_upstream_seconds",
                &format!("provider=\"{p}\",stage=\"{stage}\""),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.request(Outcome::Completed);
        m.error(ErrorCode::ServerBusy);
        m.relay_seconds.observe(0.0003);
        m.upstream("openai", "first_segment", 0.2);
        let text = m.render(&[("museum_agent_sessions", "Registered sessions.", 3.0)]);
        assert!(text.contains("museum_agent_sessions 3"));
        assert!(text.contains("museum_agent_requests_total{outcome=\"completed\"} 1"));
        assert!(text.contains("museum_agent_errors_total{code=\"SERVER_BUSY\"} 1"));
        assert!(text.contains("museum_agent_relay_seconds_bucket{le=\"0.0005\"} 1"));
        assert!(text.contains("museum_agent_relay_seconds_bucket{le=\"0.00025\"} 0"));
        assert!(text.contains("museum_agent_upstream_seconds_bucket{provider=\"openai\",stage=\"first_segment\",le=\"0.25\"} 1"));
        assert!(text.contains(
            "museum_agent_upstream_seconds_count{provider=\"openai\",stage=\"first_segment\"} 1"
        ));
    }
}

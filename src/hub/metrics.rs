//! The hub's Prometheus metrics (seed 002 "监控指标"): per-message latency (received by the hub →
//! written to the recipient's socket), queue depth per recipient, and the counters an error rate
//! is computed from (`hub_errors_total / hub_messages_received_total`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use super::envelope::ErrorCode;
use crate::metrics::Histogram;

const LATENCY: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0,
];

pub struct HubMetrics {
    pub received: AtomicU64,
    /// Messages written to a recipient's socket (a broadcast counts once per recipient).
    pub delivered: AtomicU64,
    /// Messages put in a stored inbox because the recipient was offline (or left).
    pub stored: AtomicU64,
    /// Messages whose ttl ran out before delivery (never delivered).
    pub expired: AtomicU64,
    errors: [AtomicU64; 3],
    pub connections: AtomicU64,
    pub latency_seconds: Histogram,
}

impl Default for HubMetrics {
    fn default() -> Self {
        HubMetrics {
            received: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            errors: Default::default(),
            connections: AtomicU64::new(0),
            latency_seconds: Histogram::new(LATENCY),
        }
    }
}

impl HubMetrics {
    pub fn error(&self, code: ErrorCode) {
        self.errors[code as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn errors(&self) -> u64 {
        self.errors.iter().map(|e| e.load(Ordering::Relaxed)).sum()
    }

    /// Renders the counters, the latency histogram and the given per-recipient depths
    /// (`(recipient, queued, unacked, stored)`).
    pub fn render(&self, depths: &[(String, usize, usize, usize)]) -> String {
        let mut out = String::with_capacity(2048);
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        counter(
            &mut out,
            "hub_messages_received_total",
            "Message frames received from hub clients.",
            load(&self.received),
        );
        counter(
            &mut out,
            "hub_messages_delivered_total",
            "Messages written to a recipient (per recipient).",
            load(&self.delivered),
        );
        counter(
            &mut out,
            "hub_messages_stored_total",
            "Messages stored for an offline recipient.",
            load(&self.stored),
        );
        counter(
            &mut out,
            "hub_messages_expired_total",
            "Messages whose ttl ran out before delivery.",
            load(&self.expired),
        );
        let _ = writeln!(
            out,
            "# HELP hub_errors_total Errors sent to hub clients, by Star error code.\n# TYPE hub_errors_total counter"
        );
        for code in [
            ErrorCode::Validation,
            ErrorCode::Connection,
            ErrorCode::PermissionDenied,
        ] {
            let _ = writeln!(
                out,
                "hub_errors_total{{code=\"{}\"}} {}",
                code.as_str(),
                load(&self.errors[code as usize])
            );
        }
        let _ = writeln!(
            out,
            "# HELP hub_connections Open hub connections.\n# TYPE hub_connections gauge\nhub_connections {}",
            load(&self.connections)
        );
        let _ = writeln!(
            out,
            "# HELP hub_message_latency_seconds Hub receipt to write on the recipient's socket.\n# TYPE hub_message_latency_seconds histogram"
        );
        self.latency_seconds
            .render(&mut out, "hub_message_latency_seconds", "");
        let _ = writeln!(
            out,
            "# HELP hub_queue_depth Messages waiting per recipient (the deepest recipients), by state.\n# TYPE hub_queue_depth gauge"
        );
        for (r, q, u, s) in depths {
            let r = r.replace('\\', "\\\\").replace('"', "\\\"");
            for (state, v) in [("queued", q), ("unacked", u), ("stored", s)] {
                let _ = writeln!(
                    out,
                    "hub_queue_depth{{recipient=\"{r}\",state=\"{state}\"}} {v}"
                );
            }
        }
        out
    }
}

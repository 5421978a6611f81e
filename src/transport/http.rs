//! Plain HTTP endpoints for load balancers and operators.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::protocol::HealthState;

/// Liveness: the process is up and serving HTTP.
pub async fn healthz() -> &'static str {
    "ok"
}

/// Prometheus metrics.
pub async fn metrics(State(app): State<Arc<AppState>>) -> impl axum::response::IntoResponse {
    use std::sync::atomic::Ordering;
    let s = &app.stats;
    let body = app.metrics.render(&[
        (
            "museum_agent_sessions",
            "Registered sessions.",
            s.sessions.load(Ordering::Relaxed) as f64,
        ),
        (
            "museum_agent_connections",
            "Open WebSocket connections.",
            s.connections.load(Ordering::Relaxed) as f64,
        ),
        (
            "museum_agent_uptime_seconds",
            "Seconds since start.",
            app.started.elapsed().as_secs_f64(),
        ),
    ]) + &voice_hops(&app)
        + &app
            .hub
            .as_ref()
            .map(|h| h.metrics.render(&h.depths(50)) + &h.nats_metrics())
            .unwrap_or_default();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        body,
    )
}

/// Readiness: the database answers and the server is not shutting down.
pub async fn readyz(State(app): State<Arc<AppState>>) -> (StatusCode, Json<Value>) {
    let db_ok = tokio::time::timeout(Duration::from_secs(2), async {
        app.store().call(|s| s.ping()).await?;
        app.auth.users().ping().await
    })
    .await
    .is_ok_and(|r| r.is_ok());
    let state = app.health_state();
    let ready = db_ok && state != HealthState::Unhealthy;
    let body = json!({
        "status": if ready { "ready" } else { "not ready" },
        "database": if db_ok { "ok" } else { "unavailable" },
        "health": state,
        "llm": app.deps.llm.as_ref().map(|l| l.name()).unwrap_or("none"),
        "hub": match &app.hub {
            None => "off",
            Some(h) if h.healthy() => "ok",
            Some(_) => "degraded",
        },
        // Cross-node resume and revocations (`[cluster]`): off / ok / degraded (NATS down:
        // same-node resume still works, the server stays ready).
        "cluster": app.cluster.as_ref().map_or("off", |c| c.state()),
        // Why the cluster is degraded (null when it is off or ok).
        "cluster_detail": app.cluster.as_ref().and_then(|c| c.detail()),
        // Embeddings: starting / embedding (progress) / ready / down; search stays lexical
        // (and the server ready) while it is not "ready".
        "semantic": app.deps.retriever.as_ref().and_then(|r| r.semantic()).map(|s| s.status()),
    });
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

/// The voice hop timings (recent window) as a Prometheus summary.
fn voice_hops(app: &AppState) -> String {
    use crate::metrics::Hop;
    use std::fmt::Write;
    let mut out = String::from(
        "# HELP museum_agent_voice_hop_seconds Server-side voice hops over the recent window.\n# TYPE museum_agent_voice_hop_seconds summary\n",
    );
    for hop in Hop::ALL {
        if let Some(s) = app.deps.voice.timings.summary(hop) {
            let name = hop.name();
            for (q, d) in [("0.5", s.p50), ("0.99", s.p99)] {
                let _ = writeln!(
                    out,
                    "museum_agent_voice_hop_seconds{{hop=\"{name}\",quantile=\"{q}\"}} {}",
                    d.as_secs_f64()
                );
            }
            let _ = writeln!(
                out,
                "museum_agent_voice_hop_seconds_count{{hop=\"{name}\"}} {}",
                s.count
            );
        }
    }
    out
}

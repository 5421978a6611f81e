//! HTTP and WebSocket transport. No business state lives here: `ws` adapts axum's socket to the
//! session's [`Inbound`](crate::session::Inbound) stream and runs the one writer task per socket;
//! `http` serves health, readiness and the static kiosk page.

pub mod http;
pub mod server;
pub mod ws;

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use tower_http::services::ServeDir;

use crate::app::AppState;

/// The path of the client protocol (spec §2).
pub const WS_PATH: &str = "/ws/agent/stream";

pub fn router(app: Arc<AppState>) -> Router {
    let static_dir = app.config.server.static_dir.clone();
    Router::new()
        .route(WS_PATH, get(ws::upgrade))
        .route("/healthz", get(http::healthz))
        .route("/readyz", get(http::readyz))
        .route("/metrics", get(http::metrics))
        .fallback_service(ServeDir::new(static_dir))
        .with_state(app)
}

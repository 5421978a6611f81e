//! HTTP and WebSocket transport. No business state lives here: `ws` holds the checks and the
//! upgrade every WebSocket goes through, adapts axum's socket to the session's
//! [`Inbound`](crate::session::Inbound) stream and runs the one writer task per socket; `hub`
//! does the same for the agent hub's endpoints (checks and API key before the upgrade, then the
//! hub's own inbound stream and outgoing frames); `http` serves health, readiness and the static
//! kiosk page.

pub mod exhibits;
pub mod http;
pub mod hub;
pub mod server;
pub mod ws;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::routing::get;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::app::AppState;

/// The path of the client protocol (spec §2).
pub const WS_PATH: &str = "/ws/agent/stream";

pub fn router(app: Arc<AppState>) -> Router {
    let static_dir = app.config.server.static_dir.clone();
    let mut router = Router::new()
        .route(WS_PATH, get(ws::upgrade))
        .route("/healthz", get(http::healthz))
        .route("/readyz", get(http::readyz))
        .route("/metrics", get(http::metrics))
        .route("/api/exhibits", get(exhibits::search))
        .route("/api/exhibits/{id}", get(exhibits::get_one))
        .route("/api/{*rest}", get(exhibits::not_found));
    if app.hub.is_some() {
        // The agent hub (src/hub/README.md); absent (404) unless `[hub] enabled`.
        router = router
            .route("/env/{env_id}", get(hub::environment))
            .route("/env/{env_id}/agent/{agent_id}", get(hub::agent))
            .route("/human/{human_id}", get(hub::human));
    }
    router
        // no-cache: a kiosk that runs for weeks picks up a new page version on its next load.
        .fallback_service(
            tower::ServiceBuilder::new()
                .layer(SetResponseHeaderLayer::if_not_present(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("no-cache"),
                ))
                .service(ServeDir::new(static_dir)),
        )
        .layer(axum::middleware::from_fn(exhibits::long_paths_404))
        .with_state(app)
}

/// The key of an `Authorization: Bearer <key>` header (the scheme in either case, the key
/// trimmed; none when empty): the hub endpoints and `/api/exhibits` read credentials alike.
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let key = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))?
        .trim();
    (!key.is_empty()).then_some(key)
}

//! The hub's three WebSocket endpoints. Everything is checked before the upgrade (ids, query,
//! API key, origin, connection caps), so a refused client gets a plain HTTP status. After the
//! upgrade one reader loop feeds [`Hub::handle_text`] and sends heartbeats; one writer task owns
//! the sink and drains the connection's [`Mailbox`](super::mailbox::Mailbox).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;

use super::envelope::{self, ClawCode, HubError, Tier};
use super::mailbox::{Control, Next};
use super::{Address, Conn, ConnOptions, Hub};
use crate::app::{AppState, SessionEntry};
use crate::auth::{AuthError, Principal};
use crate::config::secs;
use crate::protocol::Auth;
use crate::transport::server::AddressSlot;
use crate::transport::ws::{ConnSlot, READ_BUFFER, origin_allowed};
use crate::util::{now_ms, random_id};

/// Query parameters of the hub endpoints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubQuery {
    /// ClawOS tier: command, pm or worker.
    pub tier: Option<String>,
    /// auto (default): written = acknowledged; manual: the client sends `ack`.
    pub ack: Option<String>,
    /// Resume point: the last sequence number the client saw.
    pub last_seq: Option<u64>,
    /// Society role name (agents).
    pub role: Option<String>,
    /// llm: deliveries carry the seed-001 `formatted` text.
    pub format: Option<String>,
    /// For browsers, which cannot set headers on a WebSocket: the API key. Prefer the
    /// `Authorization: Bearer` header (query strings end up in proxies' logs).
    pub api_key: Option<String>,
}

/// Everything an endpoint reads besides its path (one extractor: axum extracts tuples).
type Extras = (
    Result<Query<HubQuery>, axum::extract::rejection::QueryRejection>,
    WebSocketUpgrade,
    ConnectInfo<SocketAddr>,
    State<Arc<AppState>>,
    Option<axum::Extension<Arc<AddressSlot>>>,
    HeaderMap,
);

pub async fn environment(Path(env): Path<String>, x: Extras) -> Response {
    endpoint(
        envelope::valid_id(&env).map(|()| Address::environment(&env)),
        x,
    )
    .await
}

pub async fn agent(Path((env, agent)): Path<(String, String)>, x: Extras) -> Response {
    let addr = envelope::valid_id(&env)
        .map_err(|e| format!("env_id: {e}"))
        .and_then(|()| envelope::valid_id(&agent).map_err(|e| format!("agent_id: {e}")))
        .map(|()| Address::agent(&env, &agent));
    endpoint(addr, x).await
}

pub async fn human(Path(id): Path<String>, x: Extras) -> Response {
    endpoint(envelope::valid_id(&id).map(|()| Address::human(&id)), x).await
}

fn refuse(code: StatusCode, msg: impl Into<String>) -> Response {
    (code, msg.into()).into_response()
}

/// Parses the query into connection options.
pub fn options(q: &HubQuery, address: &Address) -> Result<ConnOptions, String> {
    let tier = match q.tier.as_deref() {
        None | Some("") => None,
        Some(t) => Some(
            Tier::parse(t).ok_or_else(|| format!("tier {t:?}: expected command, pm or worker"))?,
        ),
    };
    let manual_ack = match q.ack.as_deref() {
        None | Some("auto") => false,
        Some("manual") => true,
        Some(a) => return Err(format!("ack {a:?}: expected auto or manual")),
    };
    let llm_format = match q.format.as_deref() {
        None | Some("json") => false,
        Some("llm") => true,
        Some(f) => return Err(format!("format {f:?}: expected json or llm")),
    };
    // Sequence numbers stay below 2^53 (exact in every JSON reader, and in SQLite's i64).
    if q.last_seq.is_some_and(|s| s > (1 << 53)) {
        return Err("last_seq is beyond any sequence number this hub assigns".into());
    }
    let role = q
        .role
        .clone()
        .unwrap_or_else(|| address.ty.as_str().to_string());
    if role.is_empty() || role.chars().count() > 100 {
        return Err("role must be 1 to 100 characters".into());
    }
    Ok(ConnOptions {
        tier,
        role,
        manual_ack,
        llm_format,
        last_seq: q.last_seq,
    })
}

async fn endpoint(
    addr: Result<Address, String>,
    (query, ws, ConnectInfo(peer), State(app), address_slot, headers): Extras,
) -> Response {
    let Some(hub) = app.hub.clone() else {
        return refuse(
            StatusCode::NOT_FOUND,
            "the agent hub is not enabled on this server",
        );
    };
    let address = match addr {
        Ok(a) => a,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let q = match query {
        Ok(Query(q)) => q,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e.body_text()),
    };
    let opts = match options(&q, &address) {
        Ok(o) => o,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let h = |n: header::HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    if !origin_allowed(
        h(header::ORIGIN),
        h(header::HOST),
        &app.config.server.allowed_origins,
    ) {
        return refuse(StatusCode::FORBIDDEN, "origin not allowed");
    }
    if app.draining.is_cancelled() {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "server shutting down");
    }
    if !hub.healthy() {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the hub's message store (NATS) is unreachable; retry shortly",
        );
    }
    let key = h(header::AUTHORIZATION)
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned)
        .or(q.api_key);
    let Some(api_key) = key else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "an API key is required: Authorization: Bearer <key> (or ?api_key= for browsers)",
        );
    };
    let principal = match app
        .auth
        .authenticate(peer.ip(), &Auth::ApiKey { api_key })
        .await
    {
        Ok(p) => p,
        Err(AuthError::Invalid) => return refuse(StatusCode::UNAUTHORIZED, "invalid API key"),
        Err(AuthError::Locked) => {
            return refuse(StatusCode::TOO_MANY_REQUESTS, AuthError::Locked.to_string());
        }
        Err(AuthError::Internal(_)) => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "authentication unavailable",
            );
        }
    };
    // A key may pin the tier: a connection then has that tier, and declaring another is refused.
    let mut opts = opts;
    if let Principal::ApiKey { id, .. } = &principal {
        let id = *id;
        let pinned = match app.store().call(move |s| s.api_key_hub_tier(id)).await {
            Ok(p) => p.as_deref().and_then(Tier::parse),
            Err(_) => {
                return refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "authentication unavailable",
                );
            }
        };
        match (pinned, opts.tier) {
            (Some(p), Some(d)) if p != d => {
                return refuse(
                    StatusCode::FORBIDDEN,
                    format!("this API key is pinned to tier {}", p.as_str()),
                );
            }
            (Some(p), _) => opts.tier = Some(p),
            (None, _) => {}
        }
    }
    let Some(slot) = ConnSlot::acquire(&app) else {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "too many connections");
    };
    let max = app.config.hub.max_message_bytes.max(1024) * 2;
    ws.read_buffer_size(READ_BUFFER)
        .max_message_size(max)
        .max_frame_size(max)
        .on_failed_upgrade(|e| tracing::debug!(error = %e, "hub websocket upgrade failed"))
        .on_upgrade(move |socket| {
            let tracker = app.tracker.clone();
            tracker.track_future(async move {
                let _slot = slot;
                let _address_slot = address_slot;
                serve(socket, app, hub, address, opts, principal).await;
            })
        })
}

async fn serve(
    socket: WebSocket,
    app: Arc<AppState>,
    hub: Arc<Hub>,
    address: Address,
    opts: ConnOptions,
    principal: Principal,
) {
    let token = app.hard_stop.child_token();
    let key = address.key.clone();
    let conn = match hub.attach(address, opts, token.clone()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(address = %key, error = %e, "hub: could not attach a connection");
            let mut socket = socket;
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                socket.send(Message::Close(Some(CloseFrame {
                    code: 1011,
                    reason: "hub storage unavailable".into(),
                }))),
            )
            .await;
            return;
        }
    };
    tracing::info!(address = %key, principal = %principal.label(), tier = ?conn.opts.tier, "hub client connected");
    let (kick_tx, mut kick_rx) = tokio::sync::mpsc::channel(1);
    let reg = random_id("hub_");
    app.sessions.insert(
        &reg,
        SessionEntry {
            principal,
            kick: kick_tx,
        },
    );
    let (sink, mut stream) = socket.split();
    let slow = secs(app.config.limits.slow_client_timeout_seconds);
    let writer = tokio::spawn(writer(sink, conn.clone(), hub.clone(), slow));
    let period = super::heartbeat_period(&hub.config);
    let dead_after = period * hub.config.max_missed_heartbeats.max(1);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_inbound = Instant::now();
    loop {
        tokio::select! {
            _ = conn.token.cancelled() => break,
            _ = app.draining.cancelled() => {
                conn.mailbox.control(Control::Close(1001, "server shutting down".into()));
                break;
            }
            reason = kick_rx.recv() => {
                let reason = reason.unwrap_or_else(|| "closed".into());
                conn.send_error(&hub, None, "-", &HubError::denied(format!("connection closed: {reason}"), "use a valid API key"));
                conn.mailbox.control(Control::Close(1008, reason));
                break;
            }
            _ = ticker.tick() => {
                if hub.config.max_missed_heartbeats > 0 && last_inbound.elapsed() >= dead_after {
                    tracing::info!(address = %key, silent_s = last_inbound.elapsed().as_secs_f64(), "hub: client presumed dead");
                    conn.send_error(&hub, None, "-", &HubError::new(
                        ClawCode::E004,
                        format!("no frame from this client for {:.0} s: presumed dead", dead_after.as_secs_f64()),
                        "answer heartbeats (any frame, or WebSocket pongs)",
                    ));
                    conn.mailbox.control(Control::Close(1001, "heartbeat timeout".into()));
                    break;
                }
                hub.heartbeat(&conn);
                conn.mailbox.control(Control::Ping);
                hub.sweep(&conn).await;
            }
            msg = stream.next() => {
                match msg {
                    None | Some(Ok(Message::Close(_))) => break,
                    Some(Ok(Message::Text(t))) => {
                        last_inbound = Instant::now();
                        hub.handle_text(&conn, t.as_str()).await;
                    }
                    Some(Ok(Message::Binary(_))) => {
                        last_inbound = Instant::now();
                        conn.send_error(&hub, None, "-", &HubError::validation(
                            "binary frames are not part of the hub protocol",
                            "send JSON envelopes as text frames",
                        ));
                    }
                    Some(Ok(_)) => last_inbound = Instant::now(), // ping / pong
                    Some(Err(e)) => {
                        tracing::debug!(address = %key, error = %e, "hub websocket read failed");
                        break;
                    }
                }
            }
        }
    }
    app.sessions.remove(&reg);
    hub.detach(&conn).await;
    let mut writer = writer;
    if tokio::time::timeout(Duration::from_secs(2), &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
    conn.token.cancel();
    tracing::info!(address = %key, "hub client disconnected");
}

/// The only task that writes to this socket.
async fn writer(
    mut sink: SplitSink<WebSocket, Message>,
    conn: Arc<Conn>,
    hub: Arc<Hub>,
    slow: Duration,
) {
    let mut closing: Option<(u16, String)> = None;
    let mut last_pass = false;
    'outer: loop {
        let mut pending = false;
        let mut last_seq = None;
        while let Some(next) = conn.mailbox.pop(now_ms()) {
            let msg = match next {
                Next::Control(Control::Text(t)) => Message::Text(t.into()),
                Next::Control(Control::Ping) => Message::Ping(Default::default()),
                Next::Control(Control::Close(code, reason)) => {
                    closing = Some((code, reason));
                    break 'outer;
                }
                Next::Message { seq, entry } => {
                    hub.metrics
                        .latency_seconds
                        .observe(entry.received.elapsed().as_secs_f64());
                    hub.metrics
                        .delivered
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    last_seq = Some(seq);
                    Message::Text(envelope::with_seq(seq, &entry.body).into())
                }
            };
            match tokio::time::timeout(slow, sink.feed(msg)).await {
                Ok(Ok(())) => pending = true,
                _ => break 'outer,
            }
        }
        if pending && !matches!(tokio::time::timeout(slow, sink.flush()).await, Ok(Ok(()))) {
            break;
        }
        // ack=auto: written (flushed) is acknowledged; never before.
        if let Some(seq) = last_seq
            && !conn.mailbox.manual_ack()
        {
            conn.mailbox.ack_quietly(seq);
        }
        hub.flush_bookkeeping(&conn).await;
        if conn.mailbox.is_closed() {
            // Closed while we were writing: one more pass writes the error and close that
            // were queued just before.
            if last_pass {
                break;
            }
            last_pass = true;
            continue;
        }
        if last_pass {
            break;
        }
        tokio::select! {
            _ = conn.mailbox.ready() => {}
            // Cancelled: one more pass writes what is already queued (an error saying why,
            // a close), then stop.
            _ = conn.token.cancelled() => last_pass = true,
        }
    }
    let (code, reason) = closing.unwrap_or((1000, String::new()));
    let _ = tokio::time::timeout(
        Duration::from_secs(1),
        sink.send(Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }))),
    )
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    // A writer that stopped on its own (slow client, write error) ends the connection.
    conn.token.cancel();
}

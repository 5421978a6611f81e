//! The agent hub's three WebSocket endpoints: `/env/{env}`, `/env/{env}/agent/{id}` and
//! `/human/{id}`. Everything is checked before the upgrade (ids, query, origin, draining, the
//! hub's health, API key, a key's pinned tier, connection caps), so a refused client gets a plain
//! HTTP status. After the upgrade the socket is adapted to the hub's channel-shaped connection
//! ([`hub::conn`]): its reads become a stream of [`Inbound`], and the one writer of
//! [`super::ws`] writes what the connection's [`Outgoing`] yields.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;

use super::server::AddressSlot;
use super::ws::{self, FrameSource, WireFrame};
use crate::app::{AppState, SessionEntry};
use crate::auth::{AuthError, Principal};
use crate::config::secs;
use crate::hub::conn::{self, Frame, Inbound, Outgoing};
use crate::hub::envelope::{self, Tier};
use crate::hub::{Address, ConnOptions, Hub};
use crate::protocol::Auth;
use crate::util::random_id;

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
    if let Err(refused) = ws::admit(&app, &headers, peer) {
        return refused.into_response();
    }
    if !hub.healthy() {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the hub's message store (NATS) is unreachable; retry shortly",
        );
    }
    let key = super::bearer(&headers).map(str::to_owned).or(q.api_key);
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
        let pinned = match app.auth.users().api_key_hub_tier(id).await {
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
    let slot = match ws::connection_slot(&app, peer) {
        Ok(s) => s,
        Err(refused) => return refused.into_response(),
    };
    let max = crate::hub::hard_frame_limit(&app.config.hub);
    ws::accept(ws, app.clone(), max, (slot, address_slot), move |socket| {
        serve(socket, app, hub, address, opts, principal)
    })
}

/// Splits the socket before the connection's future exists: an `async fn` taking the whole
/// `WebSocket` would keep a slot for it as long as the connection lives (see `ws::accept`).
fn serve(
    socket: WebSocket,
    app: Arc<AppState>,
    hub: Arc<Hub>,
    address: Address,
    opts: ConnOptions,
    principal: Principal,
) -> impl Future<Output = ()> {
    let (sink, stream) = socket.split();
    run(sink, stream, app, hub, address, opts, principal)
}

async fn run(
    sink: futures_util::stream::SplitSink<WebSocket, Message>,
    stream: futures_util::stream::SplitStream<WebSocket>,
    app: Arc<AppState>,
    hub: Arc<Hub>,
    address: Address,
    opts: ConnOptions,
    principal: Principal,
) {
    let token = app.hard_stop.child_token();
    let (out, conn) = conn::open(&hub, address, opts, token.clone(), &principal.label()).await;
    let slow = secs(app.config.limits.slow_client_timeout_seconds);
    let writer = tokio::spawn(ws::write(sink, out, token.clone(), slow));
    if let Some(conn) = conn {
        let key = conn.address().key.clone();
        // Registered like a visitor session, so a revoked credential closes it too.
        let (kick_tx, kick_rx) = tokio::sync::mpsc::channel(1);
        let reg = random_id("hub_");
        app.sessions.insert(
            &reg,
            SessionEntry {
                principal,
                kick: crate::app::Kick::Channel(kick_tx),
            },
        );
        conn.run(inbound(stream, key.clone()), app.draining.clone(), kick_rx)
            .await;
        app.sessions.remove(&reg);
        conn.detach().await;
        ws::join_writer(writer).await;
        token.cancel();
        tracing::info!(address = %key, "hub client disconnected");
    } else {
        ws::join_writer(writer).await;
    }
}

/// The socket's reads as the hub's [`Inbound`] stream; a close ends it, and a read error ends
/// it after one [`Inbound::Broken`] with the close code it calls for (a frame over the hard
/// limit: 1009), so the client is told why before the close.
fn inbound(
    stream: futures_util::stream::SplitStream<WebSocket>,
    key: Arc<str>,
) -> impl futures_util::Stream<Item = Inbound> + Unpin {
    Box::pin(futures_util::stream::unfold(Some(stream), move |state| {
        let key = key.clone();
        async move {
            let mut stream = state?;
            let item = match stream.next().await {
                None | Some(Ok(Message::Close(_))) => return None,
                Some(Ok(Message::Text(t))) => Inbound::Text(t.as_str().to_owned()),
                Some(Ok(Message::Binary(_))) => Inbound::Binary,
                Some(Ok(_)) => Inbound::Alive, // ping / pong
                Some(Err(e)) => {
                    let text = e.to_string();
                    tracing::debug!(address = %key, error = %text, "hub websocket read failed");
                    // The socket cannot read past this error: the stream ends after it.
                    let (code, reason) = read_error_close(&text)?;
                    return Some((
                        Inbound::Broken {
                            code,
                            reason: reason.into(),
                        },
                        None,
                    ));
                }
            };
            Some((item, Some(stream)))
        }
    }))
}

/// The close code and reason for a socket read error (by the WebSocket layer's wording, as
/// the visitor endpoint does): over the size limit 1009, invalid UTF-8 1007, another protocol
/// violation 1002; None when the connection itself failed (nobody to tell).
fn read_error_close(text: &str) -> Option<(u16, &'static str)> {
    Some(if text.contains("too long") || text.contains("too big") {
        (1009, "frame too large")
    } else if text.contains("UTF-8") {
        (1007, "invalid UTF-8 in a text frame")
    } else if text.contains("IO error") || text.contains("closed") {
        return None;
    } else {
        (1002, "websocket protocol error")
    })
}

impl FrameSource for Outgoing {
    /// The sequence number of a routed message.
    type Receipt = Option<u64>;

    fn try_next(&mut self) -> Option<(WireFrame, Option<u64>)> {
        Some(match Outgoing::try_next(self)? {
            Frame::Text(t) => (WireFrame::Text(t), None),
            Frame::Message { seq, text } => (WireFrame::Text(text), Some(seq)),
            Frame::Ping => (WireFrame::Ping(None), None),
            Frame::Close(code, reason) => (WireFrame::Close(code, reason), None),
        })
    }

    fn more(&self) -> bool {
        Outgoing::more(self)
    }

    fn written(&mut self, seq: Option<u64>) {
        if let Some(seq) = seq {
            Outgoing::written(self, seq);
        }
    }

    fn settle(&mut self) -> impl Future<Output = ()> + Send {
        Outgoing::settle(self)
    }

    fn wait(&mut self) -> impl Future<Output = bool> + Send {
        Outgoing::wait(self)
    }

    fn finished(&mut self) {
        Outgoing::finished(self)
    }
}

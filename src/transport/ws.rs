//! The WebSocket endpoint: upgrade, the reader adapter and the writer task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::config::secs;
use crate::request::outbox::{OutFrame, OutKind, Outbox};
use crate::session::{self, Inbound};

/// Read buffer per connection: tungstenite's default (128 KiB, zero-filled) would cost ~133 KiB
/// of RSS per idle connection; 4 KiB costs ~5 KiB with the same latency (STYLE.md).
pub(crate) const READ_BUFFER: usize = 4096;

/// One unit of the server's connection count, released when dropped (also when the upgrade
/// never completes and the callback is dropped unused).
pub(crate) struct ConnSlot(Arc<AppState>);

impl ConnSlot {
    /// Takes a slot, or None when the server is at `limits.max_connections`.
    pub(crate) fn acquire(app: &Arc<AppState>) -> Option<ConnSlot> {
        let max = app.config.limits.max_connections as u64;
        if app.stats.connections.fetch_add(1, Ordering::Relaxed) >= max {
            app.stats.connections.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(ConnSlot(app.clone()))
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.stats.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a browser page from `origin` may open the WebSocket: no `Origin` header (apps, TVs,
/// tools), the page's own origin (same host as the request), or one of `allowed` (`"*"`: any).
pub fn origin_allowed(origin: Option<&str>, host: Option<&str>, allowed: &[String]) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    if allowed
        .iter()
        .any(|a| a == "*" || a.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let origin_host = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

pub async fn upgrade(
    ws: WebSocketUpgrade,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    State(app): State<Arc<AppState>>,
    address_slot: Option<axum::Extension<Arc<super::server::AddressSlot>>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let header = |n: axum::http::HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    if !origin_allowed(
        header(axum::http::header::ORIGIN),
        header(axum::http::header::HOST),
        &app.config.server.allowed_origins,
    ) {
        tracing::warn!(%peer, origin = ?header(axum::http::header::ORIGIN), "WebSocket refused: origin not allowed");
        return (StatusCode::FORBIDDEN, "origin not allowed").into_response();
    }
    if app.draining.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "server shutting down").into_response();
    }
    let Some(slot) = ConnSlot::acquire(&app) else {
        tracing::warn!(%peer, max = app.config.limits.max_connections, "connection refused: server at its connection limit");
        return (StatusCode::SERVICE_UNAVAILABLE, "too many connections").into_response();
    };
    let hard = app.config.limits.hard_frame_bytes;
    ws.read_buffer_size(READ_BUFFER)
        .max_message_size(hard)
        .max_frame_size(hard)
        .on_failed_upgrade(|e| tracing::debug!(error = %e, "websocket upgrade failed"))
        .on_upgrade(move |socket| {
            let tracker = app.tracker.clone();
            tracker.track_future(async move {
                let _slot = slot;
                let _address_slot = address_slot;
                serve(socket, peer, app).await;
            })
        })
}

async fn serve(socket: WebSocket, peer: SocketAddr, app: Arc<AppState>) {
    let (sink, stream) = socket.split();
    let token = app.hard_stop.child_token();
    let slow = secs(app.config.limits.slow_client_timeout_seconds);
    let (outbox, rx) = Outbox::new(app.config.limits.outbound_queue_frames, token.clone(), slow);
    let outbox = outbox.with_metrics(app.metrics.clone());
    let writer = tokio::spawn(writer(sink, rx, token.clone(), slow));
    // Text and binary frames go to the session; a close ends the stream; a read error (invalid
    // UTF-8 in a text frame, a frame over hard_frame_bytes, a protocol violation) becomes one
    // last `Broken` so the session can close with the right code.
    let inbound = futures_util::stream::unfold(Some(stream), |state| async move {
        let mut stream = state?;
        loop {
            match stream.next().await {
                None | Some(Ok(Message::Close(_))) => return None,
                Some(Ok(Message::Text(t))) => {
                    return Some((Inbound::Text(t.as_str().to_owned()), Some(stream)));
                }
                Some(Ok(Message::Binary(b))) => return Some((Inbound::Binary(b), Some(stream))),
                Some(Ok(_)) => continue, // ping/pong: answered by the WebSocket layer
                Some(Err(e)) => {
                    let text = e.to_string();
                    tracing::debug!(error = %text, "websocket read failed");
                    let (code, reason) = if text.contains("UTF-8") {
                        (1007, "invalid UTF-8 in a text frame")
                    } else if text.contains("too long") || text.contains("too big") {
                        (1009, "frame too large")
                    } else {
                        (1002, "websocket protocol error")
                    };
                    return Some((
                        Inbound::Broken {
                            code,
                            reason: reason.into(),
                        },
                        None,
                    ));
                }
            }
        }
    });
    session::run(Box::pin(inbound), outbox, token.clone(), peer.ip(), app).await;
    // The session is over: give the writer a moment to flush its close frame, then drop it.
    let mut writer = writer;
    if tokio::time::timeout(Duration::from_secs(2), &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

/// The only task that writes to this socket.
async fn writer(
    mut sink: SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<OutFrame>,
    token: CancellationToken,
    slow: Duration,
) {
    loop {
        // Biased: everything queued is written before a cancellation is noticed, so a close
        // frame queued just before the session ended still goes out.
        let frame = tokio::select! {
            biased;
            f = rx.recv() => f,
            // The session ended and nothing is left to say, or the server stopped hard.
            _ = token.cancelled(), if rx.is_empty() => None,
        };
        let Some(frame) = frame else { break };
        if !frame.live() {
            continue; // its request was interrupted before it reached the socket
        }
        let (msg, last) = match &frame.kind {
            OutKind::Text(s) => (Message::Text(s.as_str().into()), false),
            OutKind::Close { code, reason } => (
                Message::Close(Some(CloseFrame {
                    code: *code,
                    reason: reason.as_str().into(),
                })),
                true,
            ),
        };
        // Batch under load: flush only when nothing else is queued.
        let res = if last || rx.is_empty() {
            tokio::time::timeout(slow, sink.send(msg)).await
        } else {
            tokio::time::timeout(slow, sink.feed(msg)).await
        };
        match res {
            Ok(Ok(())) => frame.written(),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "websocket write failed");
                token.cancel();
                break;
            }
            Err(_) => {
                tracing::warn!(
                    timeout_s = slow.as_secs_f64(),
                    "websocket write blocked: client not reading; closing"
                );
                token.cancel();
                break;
            }
        }
        if last {
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
}

#[cfg(test)]
mod tests {
    use super::origin_allowed;

    #[test]
    fn origins() {
        let none: Vec<String> = vec![];
        assert!(
            origin_allowed(None, Some("a:8080"), &none),
            "apps send no Origin"
        );
        assert!(
            origin_allowed(Some("http://a:8080"), Some("a:8080"), &none),
            "same origin"
        );
        assert!(origin_allowed(
            Some("https://A:8080"),
            Some("a:8080"),
            &none
        ));
        assert!(!origin_allowed(
            Some("https://evil.example"),
            Some("a:8080"),
            &none
        ));
        assert!(!origin_allowed(Some("null"), Some("a:8080"), &none));
        let list = vec!["https://kiosk.museum.org".to_string()];
        assert!(origin_allowed(
            Some("https://kiosk.museum.org"),
            Some("api:443"),
            &list
        ));
        assert!(!origin_allowed(
            Some("https://kiosk.museum.org.evil"),
            Some("api:443"),
            &list
        ));
        assert!(origin_allowed(Some("https://x"), None, &["*".to_string()]));
    }
}

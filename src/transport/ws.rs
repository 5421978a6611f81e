//! The WebSocket machinery shared by both faces of the server: the checks every upgrade passes
//! (origin, draining, the connection cap), the upgrade itself (read buffer, frame size), the
//! visitor endpoint's reader adapter, and the one writer task per socket.
//!
//! # One writer, two frame sources
//! Every socket, visitor session or hub connection, is written by [`write`] and by nothing else.
//! What differs is where the frames come from, so the writer is generic over a [`FrameSource`]:
//! - a session queues frames through its bounded [`Outbox`] channel; [`OutboxFrames`] drops a
//!   frame whose request was interrupted before it reached the socket and credits the written
//!   bytes of the others to their request;
//! - a hub connection has a mailbox (control first, priority lanes, the sequence number assigned
//!   when a message is taken for writing, acknowledgements after the flush, stored-message
//!   bookkeeping); `hub::conn::Outgoing` is its source (adapted in [`super::hub`]).
//!
//! The writer owns what is the socket's business and was the same in both: batching (feed while
//! the source has more ready, flush when it has none), the slow-client timeout on every write
//! (a client that stops reading is closed and the connection's token cancelled), the close frame
//! as the last frame, closing the sink. A source only says what to write next, what a write
//! means to it ([`FrameSource::written`], [`FrameSource::settle`] after each flushed batch) and
//! when it is done. Two loops would have kept two copies of those socket rules; one loop over a
//! channel-backed source would have forced the hub's lanes and seq-at-write through a FIFO.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::{FutureExt, Sink, SinkExt, StreamExt};
use tokio_util::sync::CancellationToken;

use crate::app::AppState;
use crate::config::secs;
use crate::request::outbox::{OutFrame, OutKind, Outbox, OutboxRx};
use crate::session::{self, Inbound};

/// Read buffer per connection, allocated and zero-filled by tungstenite at the upgrade and kept
/// for the socket's life: its default (128 KiB) would cost ~133 KiB of RSS per idle connection.
/// At 4 KiB it was the largest single item of an idle session (heaptrack: 4.1 of ~14.5 KiB);
/// 1 KiB holds any ordinary client frame (REQUEST, INTERRUPT, HEARTBEAT_REPLY are a few hundred
/// bytes) in one read. A larger frame (a 3.2 KB voice chunk) grows the buffer to its size and is
/// read 1 KiB per call, a few more reads per voice frame, against 3 KiB less per idle session.
pub(crate) const READ_BUFFER: usize = 1024;

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

/// An upgrade refused before it happened: a plain HTTP status and its text.
pub(crate) struct Refused(StatusCode, &'static str);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

/// The pre-upgrade checks every WebSocket endpoint makes in the same order: the page's origin,
/// then whether the server is draining. Refusals are plain HTTP statuses.
pub(crate) fn admit(
    app: &AppState,
    headers: &axum::http::HeaderMap,
    peer: SocketAddr,
) -> Result<(), Refused> {
    let header = |n: axum::http::HeaderName| headers.get(n).and_then(|v| v.to_str().ok());
    if !origin_allowed(
        header(axum::http::header::ORIGIN),
        header(axum::http::header::HOST),
        &app.config.server.allowed_origins,
    ) {
        tracing::warn!(%peer, origin = ?header(axum::http::header::ORIGIN), "WebSocket refused: origin not allowed");
        return Err(Refused(StatusCode::FORBIDDEN, "origin not allowed"));
    }
    if app.draining.is_cancelled() {
        return Err(Refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "server shutting down",
        ));
    }
    Ok(())
}

/// Takes one unit of the server's connection cap, or the 503 that refuses the upgrade.
pub(crate) fn connection_slot(app: &Arc<AppState>, peer: SocketAddr) -> Result<ConnSlot, Refused> {
    ConnSlot::acquire(app).ok_or_else(|| {
        tracing::warn!(%peer, max = app.config.limits.max_connections, "connection refused: server at its connection limit");
        Refused(StatusCode::SERVICE_UNAVAILABLE, "too many connections")
    })
}

/// Completes an admitted upgrade: the read buffer and the frame bound every socket gets, then
/// `serve` runs as a tracked task holding the connection's slots until it ends.
pub(crate) fn accept<F>(
    ws: WebSocketUpgrade,
    app: Arc<AppState>,
    max_frame_bytes: usize,
    slots: (
        ConnSlot,
        Option<axum::Extension<Arc<super::server::AddressSlot>>>,
    ),
    serve: impl FnOnce(WebSocket) -> F + Send + 'static,
) -> Response
where
    F: Future<Output = ()> + Send + 'static,
{
    ws.read_buffer_size(READ_BUFFER)
        .max_message_size(max_frame_bytes)
        .max_frame_size(max_frame_bytes)
        .on_failed_upgrade(|e| tracing::debug!(error = %e, "websocket upgrade failed"))
        .on_upgrade(move |socket| {
            let tracker = app.tracker.clone();
            // A combinator, not an `async move` block: a block would keep its own copy of the
            // socket's slot beside `serve`'s future for the connection's life (an async block or
            // fn stores what it captures apart from the futures it awaits).
            tracker.track_future(serve(socket).map(move |()| drop(slots)))
        })
}

/// Gives a writer that is done or nearly done a moment to flush its close frame, then drops it.
pub(crate) async fn join_writer(mut writer: tokio::task::JoinHandle<()>) {
    if tokio::time::timeout(Duration::from_secs(2), &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

pub async fn upgrade(
    ws: WebSocketUpgrade,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    State(app): State<Arc<AppState>>,
    address_slot: Option<axum::Extension<Arc<super::server::AddressSlot>>>,
    headers: axum::http::HeaderMap,
) -> Response {
    if let Err(refused) = admit(&app, &headers, peer) {
        return refused.into_response();
    }
    let slot = match connection_slot(&app, peer) {
        Ok(s) => s,
        Err(refused) => return refused.into_response(),
    };
    let hard = app.config.limits.hard_frame_bytes;
    accept(ws, app.clone(), hard, (slot, address_slot), move |socket| {
        serve(socket, peer, app)
    })
}

/// Splits the socket, starts its writer and returns the session's future. A plain function:
/// as an `async fn` its future would keep a slot for the whole `WebSocket` it was given (several
/// hundred bytes) for the connection's life, beside the session it runs.
fn serve(socket: WebSocket, peer: SocketAddr, app: Arc<AppState>) -> impl Future<Output = ()> {
    let (sink, stream) = socket.split();
    let token = app.hard_stop.child_token();
    let slow = secs(app.config.limits.slow_client_timeout_seconds);
    let (outbox, rx) = Outbox::new(app.config.limits.outbound_queue_frames, token.clone(), slow);
    let outbox = outbox.with_metrics(app.metrics.clone());
    let frames = OutboxFrames::new(rx, token.clone());
    let writer = tokio::spawn(write(sink, frames, token.clone(), slow));
    let inbound = Incoming(Some(stream));
    // The session is over: give the writer a moment to flush its close frame, then drop it.
    // (`then`, not an async block awaiting the session: that would hold it twice.)
    session::run(inbound, outbox, token, peer.ip(), app).then(move |()| join_writer(writer))
}

/// The session's side of the socket as a stream of [`Inbound`]: text and binary frames go to
/// the session; a close ends the stream; a read error (invalid UTF-8 in a text frame, a frame
/// over hard_frame_bytes, a protocol violation) becomes one last `Broken` so the session can
/// close with the right code. A plain struct polled in place (an `unfold` over an async block
/// was one more boxed future per session, its state moved in and out on every frame).
struct Incoming(Option<futures_util::stream::SplitStream<WebSocket>>);

impl futures_util::Stream for Incoming {
    type Item = Inbound;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Inbound>> {
        use std::task::Poll;
        let Some(stream) = self.0.as_mut() else {
            return Poll::Ready(None);
        };
        loop {
            let item = match std::task::ready!(stream.poll_next_unpin(cx)) {
                None | Some(Ok(Message::Close(_))) => None,
                Some(Ok(Message::Text(t))) => Some(Inbound::Text(t.as_str().to_owned())),
                Some(Ok(Message::Binary(b))) => Some(Inbound::Binary(b)),
                // Acknowledges the frames written before the outbox's ping (session resume).
                Some(Ok(Message::Pong(p))) => Some(Inbound::Pong(
                    <[u8; 8]>::try_from(p.as_ref()).ok().map(u64::from_be_bytes),
                )),
                Some(Ok(_)) => continue, // ping: answered by the WebSocket layer
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
                    self.0 = None;
                    return Poll::Ready(Some(Inbound::Broken {
                        code,
                        reason: reason.into(),
                    }));
                }
            };
            if item.is_none() {
                self.0 = None;
            }
            return Poll::Ready(item);
        }
    }
}

/// A frame as the writer puts it on the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireFrame {
    Text(String),
    /// A ping with this payload (8 bytes, big-endian), or an empty one.
    Ping(Option<u64>),
    /// The last frame: the writer stops after it.
    Close(u16, String),
}

/// Where a socket's writer takes its frames from (see the module docs).
pub trait FrameSource: Send {
    /// What the source wants back once its frame reached the socket.
    type Receipt: Send;
    /// The next frame ready now, without waiting; None when nothing is ready.
    fn try_next(&mut self) -> Option<(WireFrame, Self::Receipt)>;
    /// Whether another frame is ready now: the writer then feeds without flushing (batching
    /// under load).
    fn more(&self) -> bool;
    /// The socket accepted the frame of `receipt`.
    fn written(&mut self, receipt: Self::Receipt);
    /// The end of a batch: everything written so far was flushed (or nothing was written).
    fn settle(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
    /// Waits until frames may be ready again; false when nothing more will come.
    fn wait(&mut self) -> impl Future<Output = bool> + Send;
    /// The writer stopped: after a close frame, a failed or blocked write, or the source's end.
    fn finished(&mut self) {}
}

/// The only task that writes to a socket: takes frames from `source` until it closes or ends.
/// A write that fails or blocks for `slow` (the client is not reading) cancels `token`.
pub(crate) async fn write<S, F>(
    mut sink: S,
    mut source: F,
    token: CancellationToken,
    slow: Duration,
) where
    S: Sink<Message> + Unpin,
    S::Error: std::fmt::Display,
    F: FrameSource,
{
    let mut unflushed = false;
    loop {
        let Some((frame, receipt)) = source.try_next() else {
            if unflushed {
                if !completed(tokio::time::timeout(slow, sink.flush()).await, slow, &token) {
                    break;
                }
                unflushed = false;
            }
            source.settle().await;
            if source.wait().await {
                continue;
            }
            break;
        };
        let (msg, last) = match frame {
            WireFrame::Text(s) => (Message::Text(s.into()), false),
            WireFrame::Ping(None) => (Message::Ping(Default::default()), false),
            WireFrame::Ping(Some(mark)) => {
                (Message::Ping(mark.to_be_bytes().to_vec().into()), false)
            }
            WireFrame::Close(code, reason) => (
                Message::Close(Some(CloseFrame {
                    code,
                    reason: reason.into(),
                })),
                true,
            ),
        };
        // Batch under load: flush only when nothing else is ready.
        let flush = last || !source.more();
        let res = if flush {
            tokio::time::timeout(slow, sink.send(msg)).await
        } else {
            tokio::time::timeout(slow, sink.feed(msg)).await
        };
        if !completed(res, slow, &token) {
            break;
        }
        unflushed = !flush;
        source.written(receipt);
        if last {
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    source.finished();
}

/// Whether a write went through; a failed or blocked one cancels the connection.
fn completed<E: std::fmt::Display>(
    res: Result<Result<(), E>, tokio::time::error::Elapsed>,
    slow: Duration,
    token: &CancellationToken,
) -> bool {
    match res {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "websocket write failed");
            token.cancel();
            false
        }
        Err(_) => {
            tracing::warn!(
                timeout_s = slow.as_secs_f64(),
                "websocket write blocked: client not reading; closing"
            );
            token.cancel();
            false
        }
    }
}

/// A session's [`Outbox`] as a frame source. Biased toward what is queued: everything queued is
/// written before a cancellation is noticed, so a close frame queued just before the session
/// ended still goes out.
pub(crate) struct OutboxFrames {
    rx: OutboxRx,
    token: CancellationToken,
    /// A frame received while waiting, written next.
    next: Option<OutFrame>,
}

impl OutboxFrames {
    pub(crate) fn new(rx: OutboxRx, token: CancellationToken) -> Self {
        OutboxFrames {
            rx,
            token,
            next: None,
        }
    }
}

impl FrameSource for OutboxFrames {
    /// The frame itself (its text moved out): credited to its request once written.
    type Receipt = OutFrame;

    fn try_next(&mut self) -> Option<(WireFrame, OutFrame)> {
        loop {
            let mut frame = match self.next.take() {
                Some(f) => f,
                None => self.rx.try_recv().ok()?,
            };
            if !frame.live() {
                continue; // its request was interrupted before it reached the socket
            }
            let wire = match std::mem::replace(&mut frame.kind, OutKind::Text(String::new())) {
                OutKind::Text(s) => WireFrame::Text(s),
                OutKind::Ping(mark) => WireFrame::Ping(Some(mark)),
                OutKind::Close { code, reason } => WireFrame::Close(code, reason),
            };
            return Some((wire, frame));
        }
    }

    fn more(&self) -> bool {
        self.next.is_some() || !self.rx.is_empty()
    }

    fn written(&mut self, frame: OutFrame) {
        frame.written();
    }

    async fn wait(&mut self) -> bool {
        if self.next.is_some() {
            return true;
        }
        tokio::select! {
            biased;
            f = self.rx.recv() => {
                self.next = f;
                self.next.is_some()
            }
            // The session ended and nothing is left to say, or the server stopped hard.
            _ = self.token.cancelled(), if self.rx.is_empty() => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    /// A sink that records what the writer wrote (after `delay` per frame).
    fn recording(
        delay: Duration,
    ) -> (
        impl Sink<Message, Error = String> + Unpin,
        mpsc::UnboundedReceiver<Message>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let sink = futures_util::sink::unfold(tx, move |tx, m: Message| async move {
            tokio::time::sleep(delay).await;
            tx.send(m).map_err(|e| e.to_string())?;
            Ok::<_, String>(tx)
        });
        (Box::pin(sink), rx)
    }

    async fn all(mut rx: mpsc::UnboundedReceiver<Message>) -> Vec<Message> {
        let mut v = vec![];
        while let Some(m) = rx.recv().await {
            v.push(m);
        }
        v
    }

    #[tokio::test(start_paused = true)]
    async fn writes_what_was_queued_before_a_cancel_and_stops_at_the_close() {
        let token = CancellationToken::new();
        let (outbox, rx) = Outbox::new(8, token.clone(), Duration::from_secs(5));
        for t in ["a", "b"] {
            assert!(
                outbox
                    .push(OutFrame {
                        kind: OutKind::Text(t.into()),
                        guard: None
                    })
                    .await
            );
        }
        outbox.close(4000, "bye").await;
        outbox
            .push(OutFrame {
                kind: OutKind::Text("after the close".into()),
                guard: None,
            })
            .await;
        // The session is gone before the writer ran: what it queued still goes out.
        token.cancel();
        let (sink, written) = recording(Duration::ZERO);
        write(
            sink,
            OutboxFrames::new(rx, token),
            CancellationToken::new(),
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(
            all(written).await,
            vec![
                Message::Text("a".into()),
                Message::Text("b".into()),
                Message::Close(Some(CloseFrame {
                    code: 4000,
                    reason: "bye".into()
                })),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_is_cut_off_after_the_slow_timeout() {
        let conn = CancellationToken::new();
        let (outbox, rx) = Outbox::new(8, conn.clone(), Duration::from_secs(5));
        outbox
            .push(OutFrame {
                kind: OutKind::Text("never read".into()),
                guard: None,
            })
            .await;
        let (sink, written) = recording(Duration::from_secs(3600));
        let start = tokio::time::Instant::now();
        write(
            sink,
            OutboxFrames::new(rx, conn.clone()),
            conn.clone(),
            Duration::from_secs(5),
        )
        .await;
        assert!(conn.is_cancelled());
        // 5 s for the blocked write, at most 1 s more for closing the sink.
        assert!(start.elapsed() >= Duration::from_secs(5));
        assert!(start.elapsed() <= Duration::from_secs(6));
        assert!(all(written).await.is_empty());
    }

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

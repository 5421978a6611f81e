//! The bounded queue between a session's producers (session task, pipeline tasks) and the one
//! writer task that owns the socket's sink.
//!
//! Frames tied to a request carry a guard: the writer drops any such frame whose request was
//! cancelled before it reached the socket, which is how "after the interrupted final frame,
//! nothing more for that request" holds even for frames already queued. A producer that cannot
//! enqueue within the slow-client timeout closes the connection: a client that stops reading
//! costs at most `outbound_queue_frames` frames of memory.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::inflight::RequestCtx;
use crate::metrics::Metrics;
use crate::protocol::{ServerMessage, encode_server, encode_text_chunk};
use crate::util::now_ms;

/// What the writer sends.
#[derive(Debug)]
pub enum OutKind {
    Text(String),
    /// Close the WebSocket with this code and reason, then stop writing.
    Close {
        code: u16,
        reason: String,
    },
}

#[derive(Debug)]
pub struct OutFrame {
    pub kind: OutKind,
    /// Set for frames that belong to a request: skipped once the request is cancelled; the text
    /// bytes are credited to the request once written.
    pub guard: Option<(Arc<RequestCtx>, usize)>,
}

impl OutFrame {
    /// Whether the writer should still send this frame; drops frames of cancelled requests.
    pub fn live(&self) -> bool {
        self.guard
            .as_ref()
            .is_none_or(|(c, _)| !c.token.is_cancelled())
    }

    /// Called by the writer after the frame was written.
    pub fn written(&self) {
        if let Some((ctx, bytes)) = &self.guard {
            ctx.add_delivered(*bytes);
        }
    }
}

#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<OutFrame>,
    /// The connection's token: cancelled here when the client is too slow.
    conn: CancellationToken,
    slow_timeout: Duration,
    session_id: Arc<std::sync::RwLock<String>>,
    capacity: usize,
    metrics: Option<Arc<Metrics>>,
}

impl Outbox {
    pub fn new(
        capacity: usize,
        conn: CancellationToken,
        slow_timeout: Duration,
    ) -> (Outbox, mpsc::Receiver<OutFrame>) {
        let (tx, rx) = mpsc::channel(capacity);
        (
            Outbox {
                tx,
                conn,
                slow_timeout,
                session_id: Arc::default(),
                capacity,
                metrics: None,
            },
            rx,
        )
    }

    /// Records queue depths and ERROR frames in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Sets the session id written into every later frame's envelope.
    pub fn set_session_id(&self, id: &str) {
        *self.session_id.write().unwrap_or_else(|p| p.into_inner()) = id.to_string();
    }

    pub fn session_id(&self) -> String {
        self.session_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn encode(&self, msg: &ServerMessage) -> String {
        let sid = self.session_id.read().unwrap_or_else(|p| p.into_inner());
        encode_server(&sid, msg, now_ms())
    }

    /// Queues a message. Returns false when the connection is gone (or just closed as too slow).
    pub async fn send(&self, msg: &ServerMessage) -> bool {
        if let (Some(m), ServerMessage::Error(e)) = (&self.metrics, msg) {
            m.error(e.error_code);
        }
        self.push(OutFrame {
            kind: OutKind::Text(self.encode(msg)),
            guard: None,
        })
        .await
    }

    /// Queues a message of a request; dropped by the writer if the request gets cancelled first.
    pub async fn send_for(
        &self,
        ctx: &Arc<RequestCtx>,
        msg: &ServerMessage,
        text_bytes: usize,
    ) -> bool {
        if ctx.token.is_cancelled() {
            return false;
        }
        self.push(OutFrame {
            kind: OutKind::Text(self.encode(msg)),
            guard: Some((ctx.clone(), text_bytes)),
        })
        .await
    }

    /// Queues one streamed text chunk of a request (RESPONSE with `text_stream_seq` `seq`),
    /// encoded straight from the borrowed text: the per-token path.
    pub async fn send_text_for(&self, ctx: &Arc<RequestCtx>, seq: i64, text: &str) -> bool {
        if ctx.token.is_cancelled() {
            return false;
        }
        let encoded = {
            let sid = self.session_id.read().unwrap_or_else(|p| p.into_inner());
            encode_text_chunk(&sid, &ctx.request_id, seq, text, now_ms())
        };
        self.push(OutFrame {
            kind: OutKind::Text(encoded),
            guard: Some((ctx.clone(), text.len())),
        })
        .await
    }

    /// Queues a close frame.
    pub async fn close(&self, code: u16, reason: &str) {
        let _ = self
            .push(OutFrame {
                kind: OutKind::Close {
                    code,
                    reason: reason.to_string(),
                },
                guard: None,
            })
            .await;
    }

    pub async fn push(&self, frame: OutFrame) -> bool {
        if self.tx.is_closed() {
            return false;
        }
        if let Some(m) = &self.metrics {
            m.outbox_depth
                .observe(self.capacity.saturating_sub(self.tx.capacity()) as f64);
        }
        match tokio::time::timeout(self.slow_timeout, self.tx.send(frame)).await {
            Ok(Ok(())) => true,
            Ok(Err(_)) => false,
            Err(_) => {
                tracing::warn!(
                    timeout_s = self.slow_timeout.as_secs_f64(),
                    "client is not reading: outbound queue full; closing the connection"
                );
                self.conn.cancel();
                false
            }
        }
    }
}

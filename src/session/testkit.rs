//! Unit-test harness: one session task driven over channels (no socket), with a scripted LLM,
//! for tests under paused tokio time.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Inbound;
use crate::auth::generate_api_key;
use crate::providers::llm::{ChatRequest, LlmProvider, Metadata, Segment, SegmentStream};
use crate::request::outbox::{OutKind, Outbox, OutboxRx};
use crate::store::Store;
use crate::{AppState, Config};

/// An LLM that answers every request with `Some(text)`, or never answers (`None`): a request
/// then stays in flight until it is interrupted.
pub struct Scripted(pub Option<&'static str>);

impl LlmProvider for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn stream(&self, _request: ChatRequest) -> SegmentStream {
        match self.0 {
            Some(text) => Box::pin(futures_util::stream::iter([
                Ok(Segment::Text(text.to_string())),
                Ok(Segment::Done(Metadata::default())),
            ])),
            None => Box::pin(futures_util::stream::pending()),
        }
    }
}

pub struct Harness {
    pub app: Arc<AppState>,
    pub key: String,
    pub sid: String,
    tx: mpsc::Sender<Inbound>,
    rx: OutboxRx,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts a session task (not registered yet) on a new server whose config is changed by
/// `tune`; the server has one API key, [`Harness::key`].
pub fn start(llm: Scripted, tune: impl FnOnce(&mut Config)) -> Harness {
    let mut config = Config::default();
    // Long enough that the first-token timer never fires in these tests.
    config.llm.first_token_timeout_seconds = 3600.0;
    config.llm.total_timeout_seconds = 3600.0;
    tune(&mut config);
    let store = Store::open_in_memory().unwrap();
    let key = generate_api_key();
    store.insert_api_key("k", &key.prefix, &key.hash).unwrap();
    let app = AppState::new(config, store, Some(Arc::new(llm)));
    connect(app, key.key)
}

fn connect(app: Arc<AppState>, key: String) -> Harness {
    let token = CancellationToken::new();
    let (outbox, rx) = Outbox::new(64, token.clone(), Duration::from_secs(10));
    let (tx, in_rx) = mpsc::channel(16);
    let inbound = Box::pin(futures_util::stream::unfold(in_rx, |mut rx| async move {
        rx.recv().await.map(|m| (m, rx))
    }));
    let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let task = tokio::spawn(super::run(inbound, outbox, token, peer, app.clone()));
    Harness {
        app,
        key,
        sid: String::new(),
        tx,
        rx,
        task,
    }
}

pub fn text_request(id: &str, text: &str) -> Value {
    json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
           "content": {"text": text}})
}

impl Harness {
    /// A second connection to the same server.
    pub fn another(&self) -> Harness {
        connect(self.app.clone(), self.key.clone())
    }

    /// The next frame the session queued: a decoded message, or `{"close": code, "reason": …}`.
    /// Pings are answered with a pong at once, as a WebSocket client does, and skipped.
    pub async fn next(&mut self) -> Value {
        loop {
            let f = self.rx.recv().await.expect("outbox closed");
            return match f.kind {
                OutKind::Text(t) => serde_json::from_str(&t).unwrap(),
                OutKind::Ping(mark) => {
                    let _ = self.tx.send(Inbound::Pong(Some(mark))).await;
                    continue;
                }
                OutKind::Close { code, reason } => json!({"close": code, "reason": reason}),
            };
        }
    }

    /// The next frame, which must be of `msg_type`.
    pub async fn expect(&mut self, msg_type: &str) -> Value {
        let v = self.next().await;
        assert_eq!(v["msg_type"], msg_type, "{v}");
        v
    }

    /// The next frame, which must be an ERROR with `code`.
    pub async fn expect_error(&mut self, code: &str) -> Value {
        let v = self.expect("ERROR").await;
        assert_eq!(v["payload"]["error_code"], code, "{v}");
        v
    }

    /// The next frame, which must be an ERROR with `code` whose detail contains `says`.
    pub async fn expect_error_saying(&mut self, code: &str, says: &str) -> Value {
        let v = self.expect_error(code).await;
        let detail = v["payload"]["error_detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{v}");
        v
    }

    /// The next frame, which must be a close frame with `code`.
    pub async fn expect_close(&mut self, code: u16) {
        let v = self.next().await;
        assert_eq!(v["close"], code, "{v}");
    }

    /// The server ends the connection: SHUTDOWN with `reason`, then a close frame with `code`,
    /// then the task ends.
    pub async fn expect_ended(mut self, reason: &str, code: u16) {
        let s = self.expect("SHUTDOWN").await;
        assert_eq!(s["payload"]["reason"], reason, "{s}");
        self.expect_close(code).await;
        self.task.await.unwrap();
    }

    /// Sends a frame with this connection's session id (empty before REGISTER).
    pub async fn send(&self, msg_type: &str, payload: Value) {
        let f = json!({"version": "1.0", "msg_type": msg_type, "session_id": self.sid,
                       "payload": payload, "timestamp": 1});
        self.tx.send(Inbound::Text(f.to_string())).await.unwrap();
    }

    pub async fn send_inbound(&self, frame: Inbound) {
        self.tx.send(frame).await.unwrap();
    }

    pub fn register_payload(&self) -> Value {
        json!({"auth": {"type": "API_KEY", "api_key": self.key}, "platform": "WEB",
               "require_tts": false, "enable_srs": false, "function_calling": []})
    }

    /// Registers and keeps the session id for later frames.
    pub async fn register(&mut self) {
        self.send("REGISTER", self.register_payload()).await;
        let ack = self.expect("REGISTER_ACK").await;
        self.sid = ack["payload"]["session_id"].as_str().unwrap().into();
    }

    /// Collects one request's frames up to its final one (`text_stream_seq` -1, or an ERROR):
    /// the reply text and the last frame.
    pub async fn reply(&mut self, id: &str) -> (String, Value) {
        let mut text = String::new();
        loop {
            let v = self.next().await;
            assert_eq!(v["payload"]["request_id"], id, "{v}");
            if v["msg_type"] == "ERROR" || v["payload"]["text_stream_seq"] == -1 {
                return (text, v);
            }
            if let Some(t) = v["payload"]["content"]["text"].as_str() {
                text.push_str(t);
            }
        }
    }

    /// Nothing more was queued (the session task may still run).
    pub fn assert_quiet(&mut self) {
        while let Ok(f) = self.rx.try_recv() {
            if !matches!(f.kind, OutKind::Ping(_)) {
                panic!("unexpected frame {f:?}");
            }
        }
    }

    /// Ends the inbound stream and waits for the task.
    pub async fn finish(self) {
        drop(self.tx);
        self.task.await.unwrap();
    }
}

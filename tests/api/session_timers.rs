//! Heartbeat, SESSION_WARN and expiry, with paused tokio time: the session task is driven over
//! channels (no socket), so virtual time can jump without real waiting.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use museum_agent::auth::generate_api_key;
use museum_agent::request::outbox::{OutKind, Outbox};
use museum_agent::session::{self, Inbound};
use museum_agent::store::Store;
use museum_agent::{AppState, Config};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::support::{frame, register_payload};

struct Harness {
    tx: mpsc::Sender<Inbound>,
    rx: museum_agent::request::outbox::OutboxRx,
    sid: String,
    task: tokio::task::JoinHandle<()>,
}

impl Harness {
    async fn next(&mut self) -> Value {
        let f = self.rx.recv().await.expect("outbox closed");
        match f.kind {
            OutKind::Text(t) => serde_json::from_str(&t).unwrap(),
            OutKind::Ping(_) => json!({"ping": true}),
            OutKind::Close { code, reason } => json!({"close": code, "reason": reason}),
        }
    }

    async fn send(&self, msg_type: &str, payload: Value) {
        let f = frame(msg_type, &self.sid, payload);
        self.tx.send(Inbound::Text(f.to_string())).await.unwrap();
    }
}

async fn start(timeout: u64, heartbeat: u64, warn: u64, register_timeout: u64) -> Harness {
    start_with(timeout, heartbeat, warn, register_timeout, 3).await
}

async fn start_with(
    timeout: u64,
    heartbeat: u64,
    warn: u64,
    register_timeout: u64,
    max_missed: u32,
) -> Harness {
    let mut config = Config::default();
    config.session.max_missed_heartbeats = max_missed;
    config.session.timeout_seconds = timeout;
    config.session.heartbeat_interval_seconds = heartbeat;
    config.session.warn_before_seconds = warn;
    config.session.register_timeout_seconds = register_timeout;
    let store = Store::open_in_memory().unwrap();
    let key = generate_api_key();
    store.insert_api_key("k", &key.prefix, &key.hash).unwrap();
    let app = AppState::new(config, store, None);
    let token = CancellationToken::new();
    let (outbox, rx) = Outbox::new(64, token.clone(), Duration::from_secs(10));
    let (tx, in_rx) = mpsc::channel(16);
    let inbound = tokio_stream_from(in_rx);
    let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let task = tokio::spawn(session::run(inbound, outbox, token, peer, app));
    let mut h = Harness {
        tx,
        rx,
        sid: String::new(),
        task,
    };
    let reg = frame(
        "REGISTER",
        "",
        register_payload(json!({"type": "API_KEY", "api_key": key.key})),
    );
    h.tx.send(Inbound::Text(reg.to_string())).await.unwrap();
    let ack = h.next().await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");
    h.sid = ack["payload"]["session_id"].as_str().unwrap().into();
    h
}

fn tokio_stream_from(
    rx: mpsc::Receiver<Inbound>,
) -> impl futures_util::Stream<Item = Inbound> + Unpin {
    Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|m| (m, rx))
    }))
}

#[tokio::test(start_paused = true)]
async fn heartbeats_warning_and_expiry() {
    let mut h = start(100, 30, 25, 30).await;
    let t0 = tokio::time::Instant::now();
    let v = h.next().await;
    assert_eq!(v["msg_type"], "HEARTBEAT");
    assert_eq!(v["payload"]["remaining_seconds"], 70);
    assert_eq!(t0.elapsed(), Duration::from_secs(30));
    assert_eq!(h.next().await["payload"]["remaining_seconds"], 40);
    let w = h.next().await;
    assert_eq!(w["msg_type"], "SESSION_WARN");
    assert_eq!(w["payload"]["warn_type"], "EXPIRE_SOON");
    assert_eq!(w["payload"]["remaining_seconds"], 25);
    assert_eq!(t0.elapsed(), Duration::from_secs(75));
    assert_eq!(h.next().await["msg_type"], "HEARTBEAT");
    let s = h.next().await;
    assert_eq!(s["msg_type"], "SHUTDOWN");
    assert_eq!(s["payload"]["reason"], "会话超时");
    assert_eq!(t0.elapsed(), Duration::from_secs(100));
    assert_eq!(h.next().await["close"], 1000);
    h.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn heartbeat_reply_refreshes_the_session() {
    let mut h = start(100, 60, 10, 30).await;
    let v = h.next().await;
    assert_eq!(v["payload"]["remaining_seconds"], 40);
    h.send("HEARTBEAT_REPLY", json!({"client_status": "ONLINE"}))
        .await;
    // A round trip after the reply shows the refreshed remaining time.
    h.send(
        "SESSION_QUERY",
        json!({"query_fields": ["remaining_seconds"]}),
    )
    .await;
    let info = h.next().await;
    assert_eq!(info["payload"]["session_data"]["remaining_seconds"], 100);
    // Next beat at 120 s: the session (refreshed at 60 s) is alive with 40 s left.
    let v = h.next().await;
    assert_eq!(v["msg_type"], "HEARTBEAT");
    assert_eq!(v["payload"]["remaining_seconds"], 40);
    let w = h.next().await;
    assert_eq!(w["msg_type"], "SESSION_WARN");
}

#[tokio::test(start_paused = true)]
async fn unregistered_connections_are_closed_after_the_register_timeout() {
    let store = Store::open_in_memory().unwrap();
    let mut config = Config::default();
    config.session.register_timeout_seconds = 7;
    let app = AppState::new(config, store, None);
    let token = CancellationToken::new();
    let (outbox, mut rx) = Outbox::new(8, token.clone(), Duration::from_secs(10));
    let (_tx, in_rx) = mpsc::channel::<Inbound>(1);
    let t0 = tokio::time::Instant::now();
    let task = tokio::spawn(session::run(
        tokio_stream_from(in_rx),
        outbox,
        token.clone(),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        app,
    ));
    let f = rx.recv().await.unwrap();
    let OutKind::Text(t) = f.kind else { panic!() };
    assert!(t.contains("SHUTDOWN"));
    assert_eq!(t0.elapsed(), Duration::from_secs(7));
    assert!(matches!(
        rx.recv().await.unwrap().kind,
        OutKind::Close { code: 1008, .. }
    ));
    task.await.unwrap();
    assert!(token.is_cancelled());
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_answers_heartbeats_is_dropped_as_half_open() {
    let mut h = start_with(3600, 10, 0, 30, 2).await;
    let t0 = tokio::time::Instant::now();
    assert_eq!(h.next().await["msg_type"], "HEARTBEAT");
    assert_eq!(h.next().await["msg_type"], "HEARTBEAT");
    let s = h.next().await;
    assert_eq!(s["msg_type"], "SHUTDOWN");
    assert_eq!(s["payload"]["reason"], "no reply to heartbeats");
    assert_eq!(t0.elapsed(), Duration::from_secs(30));
    assert_eq!(h.next().await["close"], 1001);
}

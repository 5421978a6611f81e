//! Test harness: `spawn_app()` starts the real server on port 0 with a temporary SQLite file and
//! a local fake OpenAI-compatible upstream; `Client` is a real WebSocket client.

pub mod fake_embeddings;
pub mod fake_llm;
pub mod fake_speech;
pub mod nats_server;
pub mod postgres;
pub mod real_servers;
pub mod replies;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use museum_agent::auth::{generate_api_key, hash_password};
use museum_agent::config::LlmProviderKind;
use museum_agent::protocol::{ServerFrame, ServerMessage, decode_server};
use museum_agent::store::Store;
use museum_agent::{AppState, Config};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub use fake_llm::{FakeLlm, Script};

pub const ACCOUNT: &str = "alice";
pub const PASSWORD: &str = "correct horse battery";

/// Longest wait for any expected frame (failure detection, not a timing assertion).
pub const RECV_TIMEOUT: Duration = Duration::from_secs(10);

pub struct TestApp {
    pub addr: SocketAddr,
    pub api_key: String,
    pub llm: FakeLlm,
    pub app: Arc<AppState>,
    shutdown: Option<oneshot::Sender<()>>,
    pub server: Option<JoinHandle<std::io::Result<()>>>,
    _dir: tempfile::TempDir,
}

pub fn test_config(dir: &std::path::Path, llm: &FakeLlm) -> Config {
    let mut c = Config::default();
    c.server.bind = "127.0.0.1:0".into();
    c.server.shutdown_grace_seconds = 5.0;
    c.database.path = dir.join("test.db");
    c.llm.provider = LlmProviderKind::Openai;
    c.llm.base_url = llm.base_url();
    c.llm.model = "fake-model".into();
    c.llm.api_key_env = String::new();
    c.llm.first_token_timeout_seconds = 5.0;
    c.llm.idle_timeout_seconds = 5.0;
    // The 3 MB demo collection is not loaded for every test; tests/api/retrieval.rs loads
    // what it needs.
    c.srs.load_demo = false;
    c
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(tweak: impl FnOnce(&mut Config)) -> TestApp {
    // A server parses the bilingual dictionary and the thesaurus in the background after its
    // start, and a question asked meanwhile waits for them. A debug build under the whole suite's
    // load takes longer than the search's 5 s bound for it (the first question of a test then
    // got "collection search is off"), so the parse is done here, once per test process.
    tokio::task::spawn_blocking(museum_agent::retrieval::dictionary::warm_up)
        .await
        .unwrap();
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path(), &llm);
    tweak(&mut config);
    // SQLite, or PostgreSQL when the test set `[database] url`.
    let store = Store::open_config(&config.database).await.unwrap();
    let users = store.users();
    let key = generate_api_key();
    // "test", or a fresh name when a test restarts a server on the same database (or a second
    // node shares it).
    if users
        .insert_api_key("test", &key.prefix, &key.hash, None)
        .await
        .is_err()
    {
        users
            .insert_api_key(
                &museum_agent::util::random_id("test-"),
                &key.prefix,
                &key.hash,
                None,
            )
            .await
            .unwrap();
    }
    if users.find_account(ACCOUNT).await.unwrap().is_none() {
        users
            .insert_account(ACCOUNT, &hash_password(PASSWORD))
            .await
            .unwrap();
    }
    let provider = museum_agent::app::build_llm(&config).unwrap();
    let retriever = museum_agent::retrieval::build_retriever(&config, &store)
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind(&config.server.bind)
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = AppState::with_retriever(config, store, provider, retriever);
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(museum_agent::run(listener, app.clone(), async {
        let _ = rx.await;
    }));
    TestApp {
        addr,
        api_key: key.key,
        llm,
        app,
        shutdown: Some(tx),
        server: Some(server),
        _dir: dir,
    }
}

impl TestApp {
    /// `ws://host:port` (the hub's endpoints hang off it).
    pub fn base_url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws/agent/stream", self.addr)
    }

    pub async fn connect(&self) -> Client {
        let (ws, _) = tokio_tungstenite::connect_async(self.ws_url())
            .await
            .unwrap();
        Client {
            ws,
            session_id: String::new(),
        }
    }

    /// A registered client (API key, WEB, no TTS, the demo functions).
    pub async fn client(&self) -> Client {
        let mut c = self.connect().await;
        c.register_key(&self.api_key).await;
        c
    }

    /// Starts graceful shutdown.
    pub fn shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    pub async fn http_get(&self, path: &str) -> (u16, String) {
        let client = museum_agent::util::http_client_builder().build().unwrap();
        let r = client
            .get(format!("http://{}{path}", self.addr))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.text().await.unwrap())
    }
}

/// The cases of a hostile corpus `fixtures/<dir>/` (at least `at_least`), sorted by file
/// name: each parsed JSON case, or why its file is not one.
pub fn corpus(dir: &str, at_least: usize) -> Vec<(String, Result<Value, String>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= at_least,
        "{} has {} cases",
        dir.display(),
        files.len()
    );
    files
        .iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let case = std::fs::read_to_string(f)
                .map_err(|e| e.to_string())
                .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                .map_err(|e| format!("bad case file: {e}"));
            (name, case)
        })
        .collect()
}

/// Verdicts of a corpus run: each printed as it comes, every failure listed at the end.
pub struct Verdicts {
    corpus: &'static str,
    total: usize,
    failures: Vec<String>,
}

impl Verdicts {
    pub fn new(corpus: &'static str, total: usize) -> Self {
        Verdicts {
            corpus,
            total,
            failures: Vec::new(),
        }
    }

    /// Records one case's verdict; returns whether it passed.
    pub fn record(&mut self, case: &str, verdict: Result<(), String>) -> bool {
        match verdict {
            Ok(()) => {
                println!("{} {case}: ok", self.corpus);
                true
            }
            Err(e) => {
                println!("{} {case}: FAILED: {e}", self.corpus);
                self.failures.push(format!("{case}: {e}"));
                false
            }
        }
    }

    /// Fails the test if any case failed, listing them all.
    pub fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} of {} {} cases failed:\n  {}",
            self.failures.len(),
            self.total,
            self.corpus,
            self.failures.join("\n  ")
        );
    }
}

/// The message of a task's panic (an assertion or a timeout), for lists of failures.
pub fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into()),
        Err(e) => e.to_string(),
    }
}

/// Whether voice and text are interleaved in `frames`: the first voice chunk comes before the
/// last text chunk.
pub fn interleaved(frames: &[Value]) -> bool {
    let first_voice = frames.iter().position(|f| {
        f["payload"]["voice_stream_seq"]
            .as_i64()
            .is_some_and(|s| s >= 0)
    });
    let last_text = frames.iter().rposition(|f| {
        f["payload"]["text_stream_seq"]
            .as_i64()
            .is_some_and(|s| s >= 0)
    });
    matches!((first_voice, last_text), (Some(v), Some(t)) if v < t)
}

pub fn now_ms() -> i64 {
    museum_agent::util::now_ms()
}

pub fn frame(msg_type: &str, session_id: &str, payload: Value) -> Value {
    json!({"version": "1.0", "msg_type": msg_type, "session_id": session_id,
           "payload": payload, "timestamp": now_ms()})
}

pub fn demo_functions() -> Value {
    json!([
        {"name": "show_exhibit", "description": "Show an exhibit card on the kiosk screen",
         "parameters": [{"name": "exhibit_id", "type": "string", "required": true}]},
        {"name": "navigate_to_gallery", "description": "Show the way to a gallery",
         "parameters": {"type": "object", "properties": {"gallery": {"type": "string"}}}}
    ])
}

pub fn register_payload(auth: Value) -> Value {
    json!({"auth": auth, "platform": "WEB", "require_tts": false, "enable_srs": true,
           "function_calling": demo_functions()})
}

pub struct Client {
    pub ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    pub session_id: String,
}

/// What came back for one request.
#[derive(Debug, Default)]
pub struct Reply {
    pub frames: Vec<Value>,
    pub text: String,
    pub text_seqs: Vec<i64>,
    pub calls: Vec<Value>,
    pub error: Option<Value>,
    pub last: Option<Value>,
}

impl Client {
    pub async fn send_value(&mut self, v: &Value) {
        self.send_text(&v.to_string()).await;
    }

    pub async fn send_text(&mut self, t: &str) {
        self.ws.send(Message::Text(t.into())).await.unwrap();
    }

    pub async fn send_binary(&mut self, b: Vec<u8>) {
        self.ws.send(Message::Binary(b.into())).await.unwrap();
    }

    pub async fn send(&mut self, msg_type: &str, payload: Value) {
        let f = frame(msg_type, &self.session_id.clone(), payload);
        self.send_value(&f).await;
    }

    /// The next text frame as JSON; panics on close or timeout.
    pub async fn recv_value(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(RECV_TIMEOUT, self.ws.next())
                .await
                .expect("timed out waiting for a frame")
                .expect("connection closed")
                .expect("websocket error");
            match msg {
                Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
                Message::Close(c) => panic!("connection closed: {c:?}"),
                _ => continue,
            }
        }
    }

    /// The next frame that is not a HEARTBEAT, decoded and checked against the typed protocol.
    pub async fn recv(&mut self) -> Value {
        loop {
            let v = self.recv_value().await;
            let typed: ServerFrame = decode_server(&v.to_string())
                .unwrap_or_else(|e| panic!("server frame does not decode: {v}: {e:?}"));
            assert_eq!(typed.version, "1.0");
            if matches!(typed.message, ServerMessage::Heartbeat(_)) {
                continue;
            }
            for f in ["version", "msg_type", "session_id", "payload", "timestamp"] {
                assert!(v.get(f).is_some(), "server frame lacks {f}: {v}");
            }
            return v;
        }
    }

    /// Waits for the server to close the connection (skipping frames), returning the close code.
    pub async fn expect_closed(&mut self) -> Option<u16> {
        loop {
            match tokio::time::timeout(RECV_TIMEOUT, self.ws.next())
                .await
                .expect("timed out waiting for close")
            {
                None => return None,
                Some(Err(_)) => return None, // reset without a close frame
                Some(Ok(Message::Close(c))) => return c.map(|c| u16::from(c.code)),
                Some(Ok(_)) => continue,
            }
        }
    }

    pub async fn register(&mut self, auth: Value) -> Value {
        self.send_value(&frame("REGISTER", "", register_payload(auth)))
            .await;
        let v = self.recv().await;
        if v["msg_type"] == "REGISTER_ACK" {
            self.session_id = v["payload"]["session_id"].as_str().unwrap().to_string();
        }
        v
    }

    pub async fn register_key(&mut self, key: &str) -> Value {
        let v = self
            .register(json!({"type": "API_KEY", "api_key": key}))
            .await;
        assert_eq!(v["msg_type"], "REGISTER_ACK", "{v}");
        v
    }

    pub async fn text_request(&mut self, id: &str, text: &str) {
        self.send(
            "REQUEST",
            json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
                   "content": {"text": text}}),
        )
        .await;
    }

    /// Reads frames for `id` until its request ends (text -1 or ERROR), checking numbering.
    /// Frames of other requests are returned in `others`.
    pub async fn collect(&mut self, id: &str, others: &mut Vec<Value>) -> Reply {
        let mut r = Reply::default();
        loop {
            let v = self.recv().await;
            let p = &v["payload"];
            let mine = p["request_id"] == id;
            if !mine {
                others.push(v);
                continue;
            }
            r.frames.push(v.clone());
            if v["msg_type"] == "ERROR" {
                r.error = Some(p.clone());
                return r;
            }
            assert_eq!(v["msg_type"], "RESPONSE", "{v}");
            if let Some(fc) = p.get("function_call") {
                r.calls.push(fc.clone());
            }
            if let Some(seq) = p.get("text_stream_seq").and_then(Value::as_i64) {
                r.text_seqs.push(seq);
                if let Some(t) = p["content"]["text"].as_str() {
                    r.text.push_str(t);
                }
                if seq == -1 {
                    r.last = Some(p.clone());
                    let expect: Vec<i64> = (0..r.text_seqs.len() as i64 - 1).chain([-1]).collect();
                    assert_eq!(r.text_seqs, expect, "text_stream_seq must be 0,1,2,...,-1");
                    return r;
                }
            }
        }
    }

    pub async fn reply(&mut self, id: &str) -> Reply {
        let mut others = Vec::new();
        let r = self.collect(id, &mut others).await;
        assert!(others.is_empty(), "unexpected frames: {others:?}");
        r
    }

    /// A round trip that proves the connection is open and everything queued before it arrived.
    pub async fn sync(&mut self) -> Vec<Value> {
        self.send(
            "SESSION_QUERY",
            json!({"query_fields": ["remaining_seconds"]}),
        )
        .await;
        let mut before = Vec::new();
        loop {
            let v = self.recv().await;
            if v["msg_type"] == "SESSION_INFO" {
                return before;
            }
            before.push(v);
        }
    }
}

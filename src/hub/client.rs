//! A small client library for the hub, for agents, environments and humans written in Rust
//! (the JS twin is `static/js/star-hub-client.js`). It answers heartbeats, keeps the last
//! sequence number seen, and acknowledges when asked, so a reconnect resumes where it stopped.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use museum_agent::hub::client::{HubClient, Identity, Options, inner};
//! let mut env = HubClient::connect("ws://127.0.0.1:8080", Identity::Environment("hall_1".into()), "mak_…", Options::default()).await?;
//! let mut guide = HubClient::connect("ws://127.0.0.1:8080", Identity::Agent { env: "hall_1".into(), id: "guide_1".into() }, "mak_…", Options::default()).await?;
//! guide.send(guide.environment("hall_1"), &inner::action("move", "a1", serde_json::json!({"to": "room 2"}))).await?;
//! let got = env.recv().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Who this client is.
#[derive(Debug, Clone, PartialEq)]
pub enum Identity {
    Agent { env: String, id: String },
    Environment(String),
    Human(String),
}

impl Identity {
    fn path(&self) -> String {
        match self {
            Identity::Agent { env, id } => format!("/env/{env}/agent/{id}"),
            Identity::Environment(env) => format!("/env/{env}"),
            Identity::Human(id) => format!("/human/{id}"),
        }
    }
}

/// Connection options (the endpoint's query parameters).
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub tier: Option<String>,
    pub role: Option<String>,
    /// Acknowledge explicitly ([`HubClient::ack`]); otherwise written = acknowledged.
    pub manual_ack: bool,
    pub llm_format: bool,
    /// Resume after this sequence number (see [`HubClient::last_seq`]).
    pub last_seq: Option<u64>,
    /// How long to wait for the connection and each frame (default 10 s).
    pub timeout: Option<Duration>,
}

/// A recipient.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Recipient {
    pub id: String,
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
}

/// A received envelope.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Envelope {
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub seq: Option<u64>,
    #[serde(default)]
    pub sender: Value,
    #[serde(default)]
    pub recipient: Value,
    #[serde(default, rename = "traceId")]
    pub trace_id: Option<String>,
    #[serde(default)]
    pub priority: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default, rename = "requestId")]
    pub request_id: Option<String>,
    #[serde(default)]
    pub formatted: Option<String>,
    #[serde(default)]
    pub payload: Value,
}

impl Envelope {
    pub fn sender_id(&self) -> &str {
        self.sender["id"].as_str().unwrap_or("")
    }

    /// The payload as a typed inner message, if it is one.
    pub fn inner(&self) -> Option<inner::Inner> {
        serde_json::from_value(self.payload.clone()).ok()
    }

    pub fn is_error(&self) -> bool {
        self.ty == "error"
    }

    pub fn error_code(&self) -> Option<&str> {
        self.payload["error_code"].as_str()
    }
}

/// Extra envelope fields for [`HubClient::send_with`].
#[derive(Debug, Clone, Default)]
pub struct SendOptions {
    pub id: Option<String>,
    pub priority: Option<String>,
    pub ttl: Option<f64>,
    pub kind: Option<String>,
    pub request_id: Option<String>,
    pub trace_id: Option<String>,
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub struct HubClient {
    ws: Ws,
    me: Identity,
    timeout: Duration,
    last_seq: u64,
    counter: u64,
    /// The welcome heartbeat's payload (identity, ack mode, spawned context).
    pub welcome: Value,
    /// The resume report (`complete`, `missing`, `resent`, …).
    pub resume: Value,
    /// The greeting as received: the welcome heartbeat and the resume report envelopes.
    pub greeting: Vec<Envelope>,
}

impl HubClient {
    /// Connects to `base` (`ws://host:port`), waits for the welcome heartbeat and resume report.
    pub async fn connect(
        base: &str,
        me: Identity,
        api_key: &str,
        opts: Options,
    ) -> anyhow::Result<HubClient> {
        let mut q = vec![];
        if let Some(t) = &opts.tier {
            q.push(format!("tier={t}"));
        }
        if let Some(r) = &opts.role {
            q.push(format!("role={}", crate::util::urlencode(r)));
        }
        if opts.manual_ack {
            q.push("ack=manual".into());
        }
        if opts.llm_format {
            q.push("format=llm".into());
        }
        if let Some(s) = opts.last_seq {
            q.push(format!("last_seq={s}"));
        }
        let query = if q.is_empty() {
            String::new()
        } else {
            format!("?{}", q.join("&"))
        };
        let url = format!("{}{}{query}", base.trim_end_matches('/'), me.path());
        let mut req = url.into_client_request()?;
        req.headers_mut()
            .insert("authorization", format!("Bearer {api_key}").parse()?);
        let timeout = opts.timeout.unwrap_or(Duration::from_secs(10));
        let (ws, _) = tokio::time::timeout(
            timeout,
            tokio_tungstenite::connect_async_with_config(req, None, true),
        )
        .await??;
        let mut c = HubClient {
            ws,
            me,
            timeout,
            last_seq: opts.last_seq.unwrap_or(0),
            counter: 0,
            welcome: Value::Null,
            resume: Value::Null,
            greeting: Vec::new(),
        };
        let hb = c.next_raw().await?;
        anyhow::ensure!(
            hb.ty == "heartbeat",
            "expected the welcome heartbeat, got {hb:?}"
        );
        c.welcome = hb.payload.clone();
        let r = c.next_raw().await?;
        anyhow::ensure!(
            r.payload["type"] == "resume",
            "expected the resume report, got {r:?}"
        );
        c.resume = r.payload.clone();
        c.greeting = vec![hb, r];
        Ok(c)
    }

    /// The last sequence number received (pass it as `Options::last_seq` to resume).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn identity(&self) -> &Identity {
        &self.me
    }

    pub fn agent(&self, id: &str) -> Recipient {
        Recipient {
            id: id.into(),
            ty: "agent".into(),
            env: None,
        }
    }

    /// An agent of another environment (humans must name it).
    pub fn agent_in(&self, env: &str, id: &str) -> Recipient {
        Recipient {
            id: id.into(),
            ty: "agent".into(),
            env: Some(env.into()),
        }
    }

    pub fn environment(&self, env: &str) -> Recipient {
        Recipient {
            id: env.into(),
            ty: "environment".into(),
            env: None,
        }
    }

    pub fn human(&self, id: &str) -> Recipient {
        Recipient {
            id: id.into(),
            ty: "human".into(),
            env: None,
        }
    }

    /// Every client of `ty` in the environment (`env` for humans).
    pub fn broadcast(&self, ty: &str, env: Option<&str>) -> Recipient {
        Recipient {
            id: "*".into(),
            ty: ty.into(),
            env: env.map(str::to_owned),
        }
    }

    pub fn hub() -> Recipient {
        Recipient {
            id: "hub".into(),
            ty: "hub".into(),
            env: None,
        }
    }

    fn next_id(&mut self) -> String {
        self.counter += 1;
        format!(
            "m{}-{}",
            self.counter,
            crate::util::random_id("")[..8].to_owned()
        )
    }

    /// Sends a message; returns its id.
    pub async fn send(&mut self, to: Recipient, payload: &Value) -> anyhow::Result<String> {
        self.send_with(to, payload, SendOptions::default()).await
    }

    pub async fn send_with(
        &mut self,
        to: Recipient,
        payload: &Value,
        o: SendOptions,
    ) -> anyhow::Result<String> {
        let id = o.id.clone().unwrap_or_else(|| self.next_id());
        let mut env = json!({"type": "message", "id": id, "recipient": to, "payload": payload});
        for (k, v) in [
            ("priority", o.priority.map(Value::from)),
            ("ttl", o.ttl.map(Value::from)),
            ("kind", o.kind.map(Value::from)),
            ("requestId", o.request_id.map(Value::from)),
            ("traceId", o.trace_id.map(Value::from)),
        ] {
            if let Some(v) = v {
                env[k] = v;
            }
        }
        self.send_raw(&env.to_string()).await?;
        Ok(id)
    }

    /// Sends a frame as is (tests use it for hostile input).
    pub async fn send_raw(&mut self, text: &str) -> anyhow::Result<()> {
        tokio::time::timeout(self.timeout, self.ws.send(Message::Text(text.into()))).await??;
        Ok(())
    }

    /// Sends a binary frame (not part of the hub protocol: tests use it).
    pub async fn send_binary(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        tokio::time::timeout(
            self.timeout,
            self.ws.send(Message::Binary(bytes.to_vec().into())),
        )
        .await??;
        Ok(())
    }

    /// Acknowledges everything up to `seq`.
    pub async fn ack(&mut self, seq: u64) -> anyhow::Result<()> {
        self.send(Self::hub(), &json!({"type": "ack", "seq": seq}))
            .await
            .map(|_| ())
    }

    /// Calls a hub service and waits for its reply (or error); other envelopes that arrive
    /// meanwhile are returned too, in order, so nothing is lost.
    pub async fn call(&mut self, payload: Value) -> anyhow::Result<(Envelope, Vec<Envelope>)> {
        let id = self.send(Self::hub(), &payload).await?;
        let mut others = vec![];
        loop {
            let e = self.next_raw().await?;
            let answers = e.request_id.as_deref() == Some(&id)
                || (e.is_error() && e.payload["details"]["original_message_id"] == id.as_str());
            if answers {
                return Ok((e, others));
            }
            others.push(e);
        }
    }

    /// The next message or error (heartbeats are answered and skipped).
    pub async fn recv(&mut self) -> anyhow::Result<Envelope> {
        loop {
            let e = self.next_raw().await?;
            if e.ty != "heartbeat" {
                return Ok(e);
            }
        }
    }

    /// The next envelope of any type, heartbeats included (they are answered too).
    pub async fn next_envelope(&mut self) -> anyhow::Result<Envelope> {
        self.next_raw().await
    }

    async fn next_raw(&mut self) -> anyhow::Result<Envelope> {
        loop {
            let msg = tokio::time::timeout(self.timeout, self.ws.next())
                .await
                .map_err(|_| anyhow::anyhow!("no frame from the hub within {:?}", self.timeout))?
                .ok_or_else(|| anyhow::anyhow!("the hub closed the connection"))??;
            match msg {
                Message::Text(t) => {
                    let e: Envelope = serde_json::from_str(t.as_str())?;
                    if let Some(s) = e.seq {
                        self.last_seq = self.last_seq.max(s);
                    }
                    if e.ty == "heartbeat" && !self.welcome.is_null() {
                        self.send_raw(r#"{"type":"heartbeat"}"#).await?;
                    }
                    return Ok(e);
                }
                Message::Close(f) => anyhow::bail!("the hub closed the connection: {f:?}"),
                _ => continue,
            }
        }
    }

    /// Reads until the hub closes the connection: the envelopes before the close (heartbeats
    /// included), and the close code (None: closed without a close frame).
    pub async fn until_close(&mut self) -> anyhow::Result<(Vec<Envelope>, Option<u16>)> {
        let mut got = vec![];
        loop {
            let msg = tokio::time::timeout(self.timeout, self.ws.next())
                .await
                .map_err(|_| anyhow::anyhow!("no close from the hub within {:?}", self.timeout))?;
            match msg {
                None => return Ok((got, None)),
                Some(Err(e)) => anyhow::bail!("read failed before a close frame: {e}"),
                Some(Ok(Message::Text(t))) => got.push(serde_json::from_str(t.as_str())?),
                Some(Ok(Message::Close(f))) => return Ok((got, f.map(|f| u16::from(f.code)))),
                Some(Ok(_)) => {}
            }
        }
    }

    /// Closes the connection.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ws.close(None)).await;
    }
}

/// Typed helpers for the Star inner messages (`payload.type`): action, outcome, event, stream.
/// The hub never checks these; they are for the clients at both ends.
pub mod inner {
    use serde::{Deserialize, Serialize};
    use serde_json::{Value, json};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "lowercase")]
    pub enum Inner {
        Action {
            action: String,
            id: String,
            #[serde(default)]
            parameters: Value,
        },
        Outcome {
            id: String,
            outcome: OutcomeBody,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            outcome_type: Option<String>,
        },
        Event {
            id: String,
            event: String,
            #[serde(default)]
            data: Value,
        },
        Stream {
            stream_type: String,
            sequence: u64,
            #[serde(default)]
            data: Value,
        },
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct OutcomeBody {
        pub status: String,
        #[serde(default)]
        pub message: String,
        #[serde(default)]
        pub data: Value,
    }

    pub fn action(action: &str, id: &str, parameters: Value) -> Value {
        json!({"type": "action", "action": action, "id": id, "parameters": parameters})
    }

    /// `status`: "success" or "error".
    pub fn outcome(id: &str, status: &str, message: &str, data: Value) -> Value {
        json!({"type": "outcome", "id": id, "outcome": {"status": status, "message": message, "data": data}, "outcome_type": "dict"})
    }

    pub fn event(event: &str, id: &str, data: Value) -> Value {
        json!({"type": "event", "id": id, "event": event, "data": data})
    }

    pub fn stream(stream_type: &str, sequence: u64, data: Value) -> Value {
        json!({"type": "stream", "stream_type": stream_type, "sequence": sequence, "data": data})
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn helpers_parse_back_into_inner() {
            let a: Inner = serde_json::from_value(action("move", "a1", json!({"d": 1}))).unwrap();
            assert!(matches!(a, Inner::Action { ref action, .. } if action == "move"));
            let o: Inner =
                serde_json::from_value(outcome("a1", "success", "ok", json!({}))).unwrap();
            assert!(matches!(o, Inner::Outcome { ref outcome, .. } if outcome.status == "success"));
            let e: Inner =
                serde_json::from_value(event("world_update", "e1", json!(null))).unwrap();
            assert!(matches!(e, Inner::Event { .. }));
            let s: Inner =
                serde_json::from_value(stream("telemetry", 7, json!({"t": 25.5}))).unwrap();
            assert!(matches!(s, Inner::Stream { sequence: 7, .. }));
        }
    }
}

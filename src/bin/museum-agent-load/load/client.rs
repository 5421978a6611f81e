//! A minimal client of the protocol for the load tool (any server speaking it).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub struct Client {
    pub ws: Ws,
    pub session_id: String,
    /// The `resume_token` of the last REGISTER_ACK (empty when the server sends none).
    pub resume_token: String,
}

pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

fn frame(msg_type: &str, sid: &str, payload: Value) -> String {
    json!({"version": museum_agent::protocol::PROTOCOL_VERSION, "msg_type": msg_type, "session_id": sid, "payload": payload,
           "timestamp": museum_agent::util::now_ms()})
    .to_string()
}

impl Client {
    pub async fn connect(url: &str) -> anyhow::Result<Client> {
        let (ws, _) = tokio::time::timeout(
            IO_TIMEOUT,
            tokio_tungstenite::connect_async_with_config(url, super::ws_config(), true),
        )
        .await??;
        Ok(Client {
            ws,
            session_id: String::new(),
            resume_token: String::new(),
        })
    }

    /// [`Client::connect`] in its two steps, timed: the TCP connect (the kernel completes it
    /// from the listen backlog, whatever the server process is doing), then the HTTP upgrade
    /// (the server's accept loop, its HTTP connection task and the upgrade handler).
    pub async fn connect_timed(url: &str) -> anyhow::Result<(Client, Duration, Duration)> {
        let t0 = std::time::Instant::now();
        let uri: tokio_tungstenite::tungstenite::http::Uri = url.parse()?;
        let host = uri
            .host()
            .ok_or_else(|| anyhow::anyhow!("no host in {url}"))?;
        let port = uri.port_u16().unwrap_or(80);
        let tcp = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect((host, port))).await??;
        let _ = tcp.set_nodelay(true);
        let t1 = std::time::Instant::now();
        let (ws, _) = tokio::time::timeout(
            IO_TIMEOUT,
            tokio_tungstenite::client_async_with_config(
                url,
                MaybeTlsStream::Plain(tcp),
                super::ws_config(),
            ),
        )
        .await??;
        let t2 = std::time::Instant::now();
        let c = Client {
            ws,
            session_id: String::new(),
            resume_token: String::new(),
        };
        Ok((c, t1 - t0, t2 - t1))
    }

    pub async fn send(&mut self, msg_type: &str, payload: Value) -> anyhow::Result<()> {
        let text = frame(msg_type, &self.session_id, payload);
        tokio::time::timeout(IO_TIMEOUT, self.ws.send(Message::Text(text.into()))).await??;
        Ok(())
    }

    /// Next JSON frame; HEARTBEATs are answered and skipped.
    pub async fn recv(&mut self) -> anyhow::Result<Value> {
        loop {
            let msg = tokio::time::timeout(IO_TIMEOUT, self.ws.next())
                .await?
                .ok_or_else(|| anyhow::anyhow!("connection closed"))??;
            match msg {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str())?;
                    if v["msg_type"] == "HEARTBEAT" {
                        self.send("HEARTBEAT_REPLY", json!({"client_status": "ONLINE"}))
                            .await?;
                        continue;
                    }
                    return Ok(v);
                }
                Message::Close(_) => anyhow::bail!("connection closed by the server"),
                _ => continue,
            }
        }
    }

    pub async fn register(&mut self, api_key: &str) -> anyhow::Result<()> {
        let payload = json!({"auth": {"type": "API_KEY", "api_key": api_key}, "platform": "WEB",
                             "require_tts": false, "enable_srs": false, "function_calling": []});
        let text = frame("REGISTER", "", payload);
        tokio::time::timeout(IO_TIMEOUT, self.ws.send(Message::Text(text.into()))).await??;
        let v = self.recv().await?;
        anyhow::ensure!(v["msg_type"] == "REGISTER_ACK", "REGISTER refused: {v}");
        self.take_ack(&v);
        Ok(())
    }

    fn take_ack(&mut self, ack: &Value) {
        let p = &ack["payload"];
        self.session_id = p["session_id"].as_str().unwrap_or_default().to_string();
        self.resume_token = p["resume_token"].as_str().unwrap_or_default().to_string();
    }

    /// Sends REGISTER with `resume` (docs/protocol.md "Session resume") for `session_id` with
    /// `token`, `last_seen` being `{request_id: [text_seq, voice_seq, unsequenced]}`, and returns
    /// the server's answer (REGISTER_ACK, or an ERROR) with the moment the REGISTER was sent.
    /// On REGISTER_ACK the client takes the session id and the new token.
    pub async fn resume(
        &mut self,
        api_key: &str,
        session_id: &str,
        token: &str,
        last_seen: Value,
    ) -> anyhow::Result<(Value, std::time::Instant)> {
        let payload = json!({"auth": {"type": "API_KEY", "api_key": api_key}, "platform": "WEB",
                             "require_tts": false, "enable_srs": false, "function_calling": [],
                             "resume": {"session_id": session_id, "resume_token": token,
                                        "last_seen": last_seen}});
        let text = frame("REGISTER", "", payload);
        let sent = std::time::Instant::now();
        tokio::time::timeout(IO_TIMEOUT, self.ws.send(Message::Text(text.into()))).await??;
        let v = self.recv().await?;
        if v["msg_type"] == "REGISTER_ACK" {
            self.take_ack(&v);
        }
        Ok((v, sent))
    }

    pub async fn text_request(&mut self, id: &str, text: &str) -> anyhow::Result<()> {
        self.send(
            "REQUEST",
            json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
                   "content": {"text": text}}),
        )
        .await
    }

    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.ws.close(None)).await;
    }
}

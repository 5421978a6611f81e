//! FunASR's runtime WebSocket protocol (`funasr-wss-server` for single utterances,
//! `funasr-wss-server-2pass` for real-time), as FunASR's `runtime/docs/websocket_protocol.md`
//! and its servers (`runtime/websocket/bin/websocket-server*.cpp`) define it:
//!
//! 1. A JSON text frame opens the utterance: `{"mode": "offline" | "2pass" | "online",
//!    "wav_name", "wav_format": "pcm", "audio_fs": 16000, "is_speaking": true,
//!    "chunk_size": [5, 10, 5], "chunk_interval": 10, "itn": true, "hotwords": "..."}`.
//! 2. Binary frames carry raw PCM (no header), forwarded here as the visitor's upload arrives.
//! 3. `{"is_speaking": false}` ends the audio.
//! 4. The server answers with JSON `{"mode", "text", "wav_name", "is_final", ...}`.
//!
//! What counts as the final text (spec §7.2: only the full text is used):
//! - `mode: "offline"` answers are the whole utterance. The C++ offline server sends exactly one
//!   after `is_speaking: false`, with `is_final: false` (its code sets it so, unlike the protocol
//!   document's example), so the first `offline` answer after the end ends recognition.
//! - `2pass-offline` answers are corrected sentences: they are concatenated; the answer with
//!   `is_final: true` (sent once the server has flushed after `is_speaking: false`) ends it.
//! - `online` / `2pass-online` answers are partial results and are ignored.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{AudioIn, SttError, SttFuture, SttProvider};

#[derive(Debug, Clone)]
pub struct FunAsrOptions {
    /// `ws://host:10095` (plain WebSocket; start the server with `--certfile ""` or put it
    /// behind a TLS-terminating proxy on a private network).
    pub url: String,
    /// `offline` (funasr-wss-server) or `2pass` (funasr-wss-server-2pass).
    pub mode: String,
    /// Inverse text normalisation ("一百" → "100").
    pub itn: bool,
    /// Hotwords as FunASR takes them, e.g. `{"青铜鼎": 20}`; empty: none.
    pub hotwords: String,
    /// PCM per binary frame sent upstream, in milliseconds.
    pub frame_ms: u32,
    pub connect_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct FunAsrStt {
    o: FunAsrOptions,
}

impl FunAsrStt {
    pub fn new(o: FunAsrOptions) -> Result<Self, SttError> {
        if !(o.url.starts_with("ws://") || o.url.starts_with("wss://")) {
            return Err(SttError::Connect(format!(
                "FunASR url must start with ws://, got {:?}",
                o.url
            )));
        }
        Ok(FunAsrStt { o })
    }

    /// The opening frame (public for tests).
    pub fn opening(&self) -> Value {
        let mut v = json!({
            "mode": self.o.mode,
            "wav_name": "museum-agent",
            "wav_format": "pcm",
            "audio_fs": crate::audio::SAMPLE_RATE,
            "is_speaking": true,
            "chunk_size": [5, 10, 5],
            "chunk_interval": 10,
            "itn": self.o.itn,
        });
        if !self.o.hotwords.is_empty() {
            v["hotwords"] = json!(self.o.hotwords);
        }
        v
    }
}

impl SttProvider for FunAsrStt {
    fn name(&self) -> &'static str {
        "funasr"
    }

    fn streams_input(&self) -> bool {
        true
    }

    fn transcribe(&self, audio: AudioIn) -> SttFuture {
        let opening = self.opening().to_string();
        let o = self.o.clone();
        Box::pin(run(o, opening, audio))
    }
}

async fn run(o: FunAsrOptions, opening: String, mut audio: AudioIn) -> Result<String, SttError> {
    let (mut ws, _) = tokio::time::timeout(
        o.connect_timeout,
        tokio_tungstenite::connect_async(o.url.as_str()),
    )
    .await
    .map_err(|_| SttError::Timeout("connecting to FunASR".into()))?
    .map_err(|e| SttError::Connect(e.to_string()))?;
    let send_err = |e: tokio_tungstenite::tungstenite::Error| SttError::Closed(e.to_string());
    ws.send(Message::Text(opening.into()))
        .await
        .map_err(send_err)?;
    let frame_bytes = crate::audio::ms_to_bytes(o.frame_ms).max(2);
    let mut audio_open = true;
    let mut texts: Vec<String> = Vec::new();
    let result = loop {
        tokio::select! {
            chunk = audio.recv(), if audio_open => match chunk {
                Some(b) => {
                    for piece in b.chunks(frame_bytes) {
                        ws.send(Message::Binary(bytes::Bytes::copy_from_slice(piece)))
                            .await
                            .map_err(send_err)?;
                    }
                }
                None => {
                    audio_open = false;
                    ws.send(Message::Text(r#"{"is_speaking": false}"#.into()))
                        .await
                        .map_err(send_err)?;
                }
            },
            msg = ws.next() => {
                let text = match msg {
                    None => return Err(SttError::Closed("FunASR closed the connection before the final result".into())),
                    Some(Err(e)) => return Err(SttError::Closed(e.to_string())),
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_))) => return Err(SttError::Closed("FunASR closed the connection before the final result".into())),
                    Some(Ok(Message::Binary(_))) => return Err(SttError::Malformed("FunASR sent a binary frame".into())),
                    Some(Ok(_)) => continue,
                };
                let v: Value = serde_json::from_str(text.as_str())
                    .map_err(|e| SttError::Malformed(format!("FunASR answer is not JSON: {e}")))?;
                let Some(t) = v.get("text").and_then(Value::as_str) else {
                    return Err(SttError::Malformed("FunASR answer has no `text`".into()));
                };
                let mode = v.get("mode").and_then(Value::as_str).unwrap_or("");
                let is_final = v.get("is_final").and_then(Value::as_bool).unwrap_or(false);
                match mode {
                    "offline" => {
                        texts.push(t.to_string());
                        if !audio_open {
                            break join(&texts);
                        }
                    }
                    "2pass-offline" => texts.push(t.to_string()),
                    _ => {} // online partials
                }
                if is_final && !audio_open {
                    break join(&texts);
                }
            }
        }
    };
    // Close politely without making the caller wait for the handshake.
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
    });
    Ok(result)
}

/// Joins sentence results: directly for Chinese, with a space between Latin words.
fn join(texts: &[String]) -> String {
    let mut out = String::new();
    for t in texts.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
        let gap = out
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '.' || c == ',')
            && t.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if gap {
            out.push(' ');
        }
        out.push_str(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_chinese_directly_and_latin_with_spaces() {
        let t = |v: &[&str]| join(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(t(&["这件鼎，", "是什么年代的？"]), "这件鼎，是什么年代的？");
        assert_eq!(t(&["who made", "this box?"]), "who made this box?");
        assert_eq!(t(&["", " a "]), "a");
    }

    #[test]
    fn opening_frame_has_the_documented_fields() {
        let p = FunAsrStt::new(FunAsrOptions {
            url: "ws://127.0.0.1:10095".into(),
            mode: "offline".into(),
            itn: true,
            hotwords: r#"{"青铜鼎": 20}"#.into(),
            frame_ms: 100,
            connect_timeout: Duration::from_secs(1),
        })
        .unwrap();
        let v = p.opening();
        assert_eq!(v["mode"], "offline");
        assert_eq!(v["wav_format"], "pcm");
        assert_eq!(v["audio_fs"], 16000);
        assert_eq!(v["is_speaking"], true);
        assert_eq!(v["chunk_size"], json!([5, 10, 5]));
        assert_eq!(v["hotwords"], r#"{"青铜鼎": 20}"#);
        assert!(
            FunAsrStt::new(FunAsrOptions {
                url: "http://x".into(),
                ..p.o.clone()
            })
            .is_err()
        );
    }
}

//! What the resume tests share (same node, across nodes, on PostgreSQL): a scripted reply of
//! numbered words, what a client saw of one request checked frame by frame, and the REGISTER
//! that resumes a session (docs/protocol.md "Session resume").

use std::time::Duration;

use serde_json::{Value, json};

use super::fake_llm::{finish_chunk, text_chunk};
use super::{Client, Script, frame};

/// A reply of `n` words `{tag}0 {tag}1 …` streamed `delay` apart; its script and whole text.
pub fn words(tag: &str, n: usize, delay: Duration) -> (Script, String) {
    let pieces: Vec<String> = (0..n).map(|i| format!("{tag}{i} ")).collect();
    (streamed(&pieces, delay), pieces.concat())
}

/// A reply of these text pieces streamed `delay` apart, then its finish chunk.
pub fn streamed<S: AsRef<str>>(pieces: &[S], delay: Duration) -> Script {
    let mut chunks: Vec<Value> = pieces.iter().map(|p| text_chunk(p.as_ref())).collect();
    chunks.push(finish_chunk("stop"));
    Script::Stream {
        chunks,
        delay,
        done: true,
    }
}

/// What a client saw of one request, checked as it arrives: no seq twice, none skipped, nothing
/// after the end.
#[derive(Default, Debug)]
pub struct Seen {
    pub text: String,
    pub text_seqs: Vec<i64>,
    pub voice_seqs: Vec<i64>,
    pub voice: String,
    pub unsequenced: u32,
    pub error: Option<Value>,
    pub ended: bool,
}

impl Seen {
    pub fn absorb(&mut self, v: &Value) {
        assert!(!self.ended, "a frame after the request's end: {v}");
        let p = &v["payload"];
        if v["msg_type"] == "ERROR" {
            self.error = Some(p.clone());
            self.ended = true;
            return;
        }
        assert_eq!(v["msg_type"], "RESPONSE", "{v}");
        let t = p["text_stream_seq"].as_i64();
        let s = p["voice_stream_seq"].as_i64();
        if let Some(t) = t {
            let next = self.text_seqs.len() as i64;
            assert!(
                t == next || t == -1,
                "text seq {t} where {next} was due: {v}"
            );
            self.text_seqs.push(t);
            self.text
                .push_str(p["content"]["text"].as_str().unwrap_or(""));
        }
        if let Some(s) = s {
            let next = self.voice_seqs.len() as i64;
            assert!(s == next || s == -1, "voice seq {s} where {next} was due");
            self.voice_seqs.push(s);
            self.voice
                .push_str(p["content"]["voice"].as_str().unwrap_or(""));
        }
        if t.is_none() && s.is_none() {
            self.unsequenced += 1;
        }
        self.ended = t == Some(-1) || s == Some(-1);
    }

    /// `last_seen` for this request.
    pub fn last_seen(&self) -> Value {
        let top = |seqs: &[i64]| seqs.iter().copied().filter(|s| *s >= 0).max().unwrap_or(-1);
        json!([
            top(&self.text_seqs),
            top(&self.voice_seqs),
            self.unsequenced
        ])
    }
}

/// Reads frames of `id` into `seen` until it has `n` text frames or ends.
pub async fn read_until(c: &mut Client, id: &str, seen: &mut Seen, n: usize) {
    while !seen.ended && seen.text_seqs.len() < n {
        let v = c.recv().await;
        if v["payload"]["request_id"] == id {
            seen.absorb(&v);
        }
    }
}

/// REGISTER with the API key `key` and `resume` for `sid`.
pub fn resume_frame(key: &str, sid: &str, token: &str, last_seen: Value) -> Value {
    frame(
        "REGISTER",
        "",
        json!({"auth": {"type": "API_KEY", "api_key": key}, "platform": "WEB",
               "require_tts": false, "function_calling": [],
               "resume": {"session_id": sid, "resume_token": token, "last_seen": last_seen}}),
    )
}

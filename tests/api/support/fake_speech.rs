//! Local fake speech upstreams speaking the vendors' wire formats, on one port:
//! - `POST /v1/audio/transcriptions`: OpenAI-compatible STT (multipart form, WAV `file`),
//!   answering `{"text"}` with the transcript of the fixture whose PCM it received, bit-exact;
//! - `GET /funasr`: a FunASR runtime WebSocket server (JSON opening frame, binary PCM,
//!   `{"is_speaking": false}`; answers like the C++ servers: `offline` mode with
//!   `is_final: false`, or `2pass-online` partials and `2pass-offline` sentences ending with
//!   `is_final: true`);
//! - `POST /v1/audio/speech`: OpenAI-compatible TTS streaming 24 kHz `pcm` or `wav`, 100 ms of a
//!   tone per input character, so the expected audio length is known.
//!
//! Requests are recorded; connections dropped before their answer was complete are counted.
//!
//! Checked against the real servers (`scripts/interop/FINDINGS.md`): with
//! [`FakeSpeech::require_model_name`] the STT answers like faster-whisper-server started with a
//! models file (the model comes from the form field `model_name`; anything else is 400
//! `unknown model: whisper-1`); the TTS refuses a blank `input` with 400 like local-tts-studio.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// How the fake STT (both wire formats) behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SttMode {
    Normal,
    /// OpenAI: this HTTP status. FunASR: close the socket without an answer.
    Fail(u16),
    /// Never answer.
    Stall,
    /// OpenAI: a 200 body that is not the JSON asked for. FunASR: a non-JSON text frame.
    Garbage,
}

/// How the fake TTS behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TtsMode {
    /// The whole audio, in pieces of `piece_bytes`, `delay` apart.
    Normal {
        piece_bytes: usize,
        delay: Duration,
    },
    Fail(u16),
    /// Headers, then nothing.
    Stall,
    /// The first piece, then nothing.
    StallAfterFirst,
    /// 200 with bytes that are not the asked format (`wav`) or no bytes at all (`pcm`).
    Garbage,
}

/// Samples of 24 kHz audio per input character.
pub const TTS_SAMPLES_PER_CHAR: usize = 2400;

#[derive(Debug, Clone, Default)]
pub struct FunAsrSession {
    pub opening: Value,
    pub binary_frames: usize,
    pub bytes: usize,
    pub ended: bool,
}

struct Inner {
    /// faster-whisper-server's config mode: the only model name it knows.
    stt_model_name: Mutex<Option<String>>,
    transcripts: Mutex<HashMap<Vec<u8>, String>>,
    stt_mode: Mutex<SttMode>,
    tts_mode: Mutex<TtsMode>,
    stt_requests: Mutex<Vec<Value>>,
    funasr: Mutex<Vec<FunAsrSession>>,
    tts_requests: Mutex<Vec<Value>>,
    stt_disconnects: AtomicUsize,
    tts_disconnects: AtomicUsize,
    changed: Notify,
}

#[derive(Clone)]
pub struct FakeSpeech {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

/// Counts a connection dropped before `complete()`.
struct Guard {
    inner: Arc<Inner>,
    stt: bool,
    done: bool,
}

impl Guard {
    fn new(inner: &Arc<Inner>, stt: bool) -> Self {
        Guard {
            inner: inner.clone(),
            stt,
            done: false,
        }
    }

    fn complete(&mut self) {
        self.done = true;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.done {
            let c = if self.stt {
                &self.inner.stt_disconnects
            } else {
                &self.inner.tts_disconnects
            };
            c.fetch_add(1, Ordering::SeqCst);
            self.inner.changed.notify_waiters();
        }
    }
}

impl FakeSpeech {
    pub async fn start() -> FakeSpeech {
        let inner = Arc::new(Inner {
            stt_model_name: Mutex::default(),
            transcripts: Mutex::default(),
            stt_mode: Mutex::new(SttMode::Normal),
            tts_mode: Mutex::new(TtsMode::Normal {
                piece_bytes: 4800,
                delay: Duration::ZERO,
            }),
            stt_requests: Mutex::default(),
            funasr: Mutex::default(),
            tts_requests: Mutex::default(),
            stt_disconnects: AtomicUsize::new(0),
            tts_disconnects: AtomicUsize::new(0),
            changed: Notify::new(),
        });
        let router = Router::new()
            .route("/v1/audio/transcriptions", post(transcriptions))
            .route("/v1/audio/speech", post(speech))
            .route("/funasr", get(funasr))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        FakeSpeech { addr, inner }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn funasr_url(&self) -> String {
        format!("ws://{}/funasr", self.addr)
    }

    /// The STT answers `text` for exactly this PCM.
    pub fn add_transcript(&self, pcm: &[u8], text: &str) {
        self.inner
            .transcripts
            .lock()
            .unwrap()
            .insert(pcm.to_vec(), text.to_string());
    }

    /// Answer like faster-whisper-server with a models file naming only `name`.
    pub fn require_model_name(&self, name: &str) {
        *self.inner.stt_model_name.lock().unwrap() = Some(name.to_string());
    }

    pub fn set_stt(&self, m: SttMode) {
        *self.inner.stt_mode.lock().unwrap() = m;
    }

    pub fn set_tts(&self, m: TtsMode) {
        *self.inner.tts_mode.lock().unwrap() = m;
    }

    pub fn stt_requests(&self) -> Vec<Value> {
        self.inner.stt_requests.lock().unwrap().clone()
    }

    pub fn funasr_sessions(&self) -> Vec<FunAsrSession> {
        self.inner.funasr.lock().unwrap().clone()
    }

    pub fn tts_requests(&self) -> Vec<Value> {
        self.inner.tts_requests.lock().unwrap().clone()
    }

    pub fn stt_disconnects(&self) -> usize {
        self.inner.stt_disconnects.load(Ordering::SeqCst)
    }

    pub fn tts_disconnects(&self) -> usize {
        self.inner.tts_disconnects.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until `cond` holds; panics naming `what` otherwise.
    pub async fn wait_for(&self, what: &str, cond: impl Fn(&FakeSpeech) -> bool) {
        let fut = async {
            loop {
                let notified = self.inner.changed.notified();
                if cond(self) {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), fut)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }
}

fn lookup(inner: &Inner, pcm: &[u8]) -> String {
    inner
        .transcripts
        .lock()
        .unwrap()
        .get(pcm)
        .cloned()
        .unwrap_or_default()
}

/// A form part: its filename (if any) and its bytes.
type Part = (Option<String>, Vec<u8>);

/// A minimal multipart/form-data reader (independent of the client's encoder).
fn parse_multipart(headers: &HeaderMap, body: &[u8]) -> Option<HashMap<String, Part>> {
    let ct = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let boundary = ct.split("boundary=").nth(1)?.trim_matches('"');
    let delim = format!("--{boundary}");
    let mut parts = HashMap::new();
    let mut rest = body;
    loop {
        let at = find(rest, delim.as_bytes())?;
        rest = &rest[at + delim.len()..];
        if rest.starts_with(b"--") {
            return Some(parts);
        }
        rest = rest.strip_prefix(b"\r\n")?;
        let head_end = find(rest, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&rest[..head_end]).to_string();
        rest = &rest[head_end + 4..];
        let end = find(rest, format!("\r\n{delim}").as_bytes())?;
        let data = rest[..end].to_vec();
        rest = &rest[end + 2..];
        let disposition = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))
            .unwrap_or("")
            .to_string();
        let attr = |k: &str| {
            disposition
                .split(';')
                .map(str::trim)
                .find_map(|p| p.strip_prefix(&format!("{k}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
        };
        parts.insert(attr("name")?, (attr("filename"), data));
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn transcriptions(
    State(inner): State<Arc<Inner>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut guard = Guard::new(&inner, true);
    let Some(parts) = parse_multipart(&headers, &body) else {
        guard.complete();
        return (StatusCode::BAD_REQUEST, "bad multipart").into_response();
    };
    let text = |k: &str| {
        parts
            .get(k)
            .map(|(_, v)| String::from_utf8_lossy(v).to_string())
    };
    let (filename, wav) = parts.get("file").cloned().unwrap_or_default();
    let reader = hound::WavReader::new(std::io::Cursor::new(wav));
    let (spec, pcm) = match reader {
        Ok(r) => {
            let spec = r.spec();
            let samples: Vec<i16> = r.into_samples::<i16>().map(|s| s.unwrap()).collect();
            let pcm: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
            (Some(spec), pcm)
        }
        Err(_) => (None, Vec::new()),
    };
    inner.stt_requests.lock().unwrap().push(json!({
        "model": text("model"), "model_name": text("model_name"),
        "response_format": text("response_format"),
        "language": text("language"), "filename": filename,
        "sample_rate": spec.map(|s| s.sample_rate), "channels": spec.map(|s| s.channels),
        "bits": spec.map(|s| s.bits_per_sample), "pcm_bytes": pcm.len(),
    }));
    inner.changed.notify_waiters();
    let required = inner.stt_model_name.lock().unwrap().clone();
    if let Some(name) = required {
        // faster-whisper-server: `model_name: str = Form("whisper-1")`; `model` is ignored.
        let asked = text("model_name").unwrap_or_else(|| "whisper-1".into());
        if asked != name {
            guard.complete();
            let body = json!({"detail": {"error": {"message": format!("unknown model: {asked}"),
                                                   "type": "invalid_request_error"}}});
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
    }
    let mode = *inner.stt_mode.lock().unwrap();
    match mode {
        SttMode::Normal => {
            guard.complete();
            let t = lookup(&inner, &pcm);
            axum::Json(json!({"text": t})).into_response()
        }
        SttMode::Fail(code) => {
            guard.complete();
            (
                StatusCode::from_u16(code).unwrap(),
                "upstream failure with secret details",
            )
                .into_response()
        }
        SttMode::Stall => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        SttMode::Garbage => {
            guard.complete();
            (StatusCode::OK, "<html>not json</html>").into_response()
        }
    }
}

async fn funasr(State(inner): State<Arc<Inner>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| funasr_session(inner, socket))
}

async fn funasr_session(inner: Arc<Inner>, mut ws: WebSocket) {
    let mut guard = Guard::new(&inner, true);
    let idx = {
        let mut v = inner.funasr.lock().unwrap();
        v.push(FunAsrSession::default());
        v.len() - 1
    };
    let update = |f: &dyn Fn(&mut FunAsrSession)| {
        f(&mut inner.funasr.lock().unwrap()[idx]);
        inner.changed.notify_waiters();
    };
    let mut pcm = Vec::new();
    let mut mode = String::from("2pass");
    let mut wav_name = String::new();
    let mut partial_sent = false;
    while let Some(Ok(msg)) = ws.recv().await {
        match msg {
            Message::Text(t) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                if v.get("mode").is_some() {
                    mode = v["mode"].as_str().unwrap_or("").to_string();
                    wav_name = v["wav_name"].as_str().unwrap_or("").to_string();
                    update(&|s| s.opening = v.clone());
                }
                if v.get("is_speaking") == Some(&json!(false)) {
                    update(&|s| s.ended = true);
                    let stt = *inner.stt_mode.lock().unwrap();
                    match stt {
                        SttMode::Normal => {}
                        SttMode::Fail(_) => {
                            guard.complete();
                            return; // drops the socket without an answer
                        }
                        SttMode::Stall => continue,
                        SttMode::Garbage => {
                            let _ = ws.send(Message::Text("garbage{".into())).await;
                            continue;
                        }
                    }
                    let text = lookup(&inner, &pcm);
                    if mode == "offline" {
                        // As funasr-wss-server sends it: is_final false.
                        let m = json!({"mode": "offline", "text": text, "wav_name": wav_name, "is_final": false});
                        let _ = ws.send(Message::Text(m.to_string().into())).await;
                    } else {
                        let chars: Vec<char> = text.chars().collect();
                        let (a, b) = chars.split_at(chars.len() / 2);
                        let a: String = a.iter().collect();
                        let b: String = b.iter().collect();
                        let m1 = json!({"mode": "2pass-offline", "text": a, "wav_name": wav_name, "is_final": false});
                        let m2 = json!({"mode": "2pass-offline", "text": b, "wav_name": wav_name, "is_final": true});
                        let _ = ws.send(Message::Text(m1.to_string().into())).await;
                        let _ = ws.send(Message::Text(m2.to_string().into())).await;
                    }
                    guard.complete();
                }
            }
            Message::Binary(b) => {
                pcm.extend_from_slice(&b);
                let n = b.len();
                update(&|s| {
                    s.binary_frames += 1;
                    s.bytes += n;
                });
                if mode == "2pass" && !partial_sent {
                    partial_sent = true;
                    let m = json!({"mode": "2pass-online", "text": "部分结果", "wav_name": wav_name, "is_final": false});
                    let _ = ws.send(Message::Text(m.to_string().into())).await;
                }
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
}

/// Deterministic 24 kHz audio for `text`: a tone, [`TTS_SAMPLES_PER_CHAR`] per character.
pub fn tts_audio(text: &str) -> Vec<u8> {
    let n = text.chars().count() * TTS_SAMPLES_PER_CHAR;
    (0..n)
        .flat_map(|i| {
            let s =
                ((i as f32 * 440.0 * 2.0 * std::f32::consts::PI / 24_000.0).sin() * 6000.0) as i16;
            s.to_le_bytes()
        })
        .collect()
}

fn wav_header_24k(data_len: u32) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&(36 + data_len).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&24_000u32.to_le_bytes());
    h.extend_from_slice(&48_000u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&16u16.to_le_bytes());
    h.extend_from_slice(b"data");
    // Streamed: the length is not known up front.
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    let _ = data_len;
    h
}

async fn speech(State(inner): State<Arc<Inner>>, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    inner.tts_requests.lock().unwrap().push(req.clone());
    inner.changed.notify_waiters();
    let mut guard = Guard::new(&inner, false);
    let text = req["input"].as_str().unwrap_or("").to_string();
    if text.trim().is_empty() {
        // local-tts-studio (pydantic: input stripped, min_length 1).
        guard.complete();
        let body = json!({"error": {"message": "invalid request field 'input': Value error, input must not be blank",
                                    "type": "invalid_request_error", "param": "input", "code": "invalid_request"}});
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    let wav = req["response_format"] == "wav";
    let mode = *inner.tts_mode.lock().unwrap();
    let mut audio = tts_audio(&text);
    if wav {
        let mut h = wav_header_24k(audio.len() as u32);
        h.extend_from_slice(&audio);
        audio = h;
    }
    let content_type = if wav { "audio/wav" } else { "audio/pcm" };
    let stream_body = |body: Body| {
        Response::builder()
            .status(200)
            .header(header::CONTENT_TYPE, content_type)
            .body(body)
            .unwrap()
    };
    match mode {
        TtsMode::Normal { piece_bytes, delay } => {
            let pieces: Vec<Vec<u8>> = audio
                .chunks(piece_bytes.max(1))
                .map(<[u8]>::to_vec)
                .collect();
            let s = futures_util::stream::unfold(
                (pieces.into_iter(), guard, true),
                move |(mut it, mut guard, first)| async move {
                    if !first && !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    match it.next() {
                        Some(p) => {
                            Some((Ok::<_, std::io::Error>(Bytes::from(p)), (it, guard, false)))
                        }
                        None => {
                            guard.complete();
                            None
                        }
                    }
                },
            );
            stream_body(Body::from_stream(s))
        }
        TtsMode::Fail(code) => {
            guard.complete();
            (StatusCode::from_u16(code).unwrap(), "tts failure").into_response()
        }
        TtsMode::Stall | TtsMode::StallAfterFirst => {
            let head = if mode == TtsMode::StallAfterFirst {
                audio[..audio.len().min(4800)].to_vec()
            } else {
                Vec::new()
            };
            let s =
                futures_util::stream::once(
                    async move { Ok::<_, std::io::Error>(Bytes::from(head)) },
                )
                .chain(futures_util::stream::once(async move {
                    let _g = guard;
                    std::future::pending::<()>().await;
                    Ok(Bytes::new())
                }));
            stream_body(Body::from_stream(s))
        }
        TtsMode::Garbage => {
            guard.complete();
            let junk = if wav {
                b"this is not a wav file at all".to_vec()
            } else {
                Vec::new()
            };
            stream_body(Body::from(junk))
        }
    }
}

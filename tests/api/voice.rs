//! Voice end to end: recorded fixtures (`fixtures/audio/`) replayed through the WebSocket as
//! whole base64, base64 chunks and binary frames (real-time pace and as fast as possible),
//! against local fake STT/TTS servers speaking the OpenAI and FunASR wire formats.

use std::time::Duration;

use base64::Engine;
use museum_agent::Config;
use museum_agent::config::{SttProviderKind, TtsProviderKind};
use serde_json::{Value, json};

use crate::support::fake_llm::{Script, text_reply};
use crate::support::fake_speech::{FakeSpeech, SttMode, TTS_SAMPLES_PER_CHAR, TtsMode};
use crate::support::*;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Bytes of one 160 ms voice chunk (the default `[tts] chunk_ms`).
const CHUNK_BYTES: usize = 5120;

/// A fixture's PCM and transcript.
fn fixture(name: &str) -> (Vec<u8>, String) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/audio");
    let r = hound::WavReader::open(dir.join(format!("{name}.wav"))).unwrap();
    let spec = r.spec();
    assert_eq!(
        (spec.sample_rate, spec.channels, spec.bits_per_sample),
        (16_000, 1, 16)
    );
    let pcm: Vec<u8> = r
        .into_samples::<i16>()
        .flat_map(|s| s.unwrap().to_le_bytes())
        .collect();
    let text = std::fs::read_to_string(dir.join(format!("{name}.txt"))).unwrap();
    assert!(
        pcm.len() > 32_000,
        "{name} holds at least a second of audio"
    );
    (pcm, text.trim().to_string())
}

#[derive(Clone, Copy, PartialEq)]
enum Stt {
    None,
    OpenAi,
    FunAsr,
    FunAsr2Pass,
}

#[derive(Clone, Copy, PartialEq)]
enum Tts {
    None,
    Pcm,
    Wav,
}

async fn voice_app(stt: Stt, tts: Tts, tweak: impl FnOnce(&mut Config)) -> (TestApp, FakeSpeech) {
    let speech = FakeSpeech::start().await;
    let base = speech.base_url();
    let funasr = speech.funasr_url();
    let app = spawn_app_with(move |c| {
        c.stt.api_key_env = String::new();
        c.tts.api_key_env = String::new();
        c.stt.base_url = base.clone();
        c.stt.model = "whisper-test".into();
        c.stt.funasr_url = funasr;
        c.stt.timeout_seconds = 5.0;
        c.stt.provider = match stt {
            Stt::None => SttProviderKind::None,
            Stt::OpenAi => SttProviderKind::Openai,
            Stt::FunAsr | Stt::FunAsr2Pass => SttProviderKind::Funasr,
        };
        if stt == Stt::FunAsr2Pass {
            c.stt.funasr_mode = "2pass".into();
        }
        c.tts.base_url = base;
        c.tts.model = "tts-test".into();
        c.tts.first_byte_timeout_seconds = 5.0;
        c.tts.idle_timeout_seconds = 5.0;
        c.tts.provider = if tts == Tts::None {
            TtsProviderKind::None
        } else {
            TtsProviderKind::Openai
        };
        if tts == Tts::Wav {
            c.tts.response_format = "wav".into();
        }
        tweak(c);
    })
    .await;
    (app, speech)
}

fn voice_whole(id: &str, pcm: &[u8], require_tts: bool) -> Value {
    json!({"request_id": id, "data_type": "VOICE", "stream_flag": false, "stream_seq": 0,
           "require_tts": require_tts,
           "content": {"voice_mode": "BASE64", "voice": B64.encode(pcm)}})
}

async fn send_chunked(c: &mut Client, id: &str, pcm: &[u8], chunk: usize, require_tts: bool) {
    let pieces: Vec<&[u8]> = pcm.chunks(chunk).collect();
    for (i, p) in pieces.iter().enumerate() {
        let seq = if i + 1 == pieces.len() { -1 } else { i as i64 };
        c.send(
            "REQUEST",
            json!({"request_id": id, "data_type": "VOICE", "stream_flag": true, "stream_seq": seq,
                   "require_tts": require_tts,
                   "content": {"voice_mode": "BASE64", "voice": B64.encode(p)}}),
        )
        .await;
    }
}

async fn binary_start(c: &mut Client, id: &str, require_tts: bool) {
    c.send(
        "REQUEST",
        json!({"request_id": id, "data_type": "VOICE", "stream_flag": true, "stream_seq": 0,
               "require_tts": require_tts, "content": {"voice_mode": "BINARY"}}),
    )
    .await;
}

async fn binary_end(c: &mut Client, id: &str) {
    c.send(
        "REQUEST",
        json!({"request_id": id, "data_type": "VOICE", "stream_flag": true, "stream_seq": -1,
               "content": {"voice_mode": "BINARY"}}),
    )
    .await;
}

/// Everything that came back for one request.
#[derive(Debug, Default)]
struct VoiceReply {
    frames: Vec<Value>,
    text: String,
    text_seqs: Vec<i64>,
    voice_seqs: Vec<i64>,
    chunks: Vec<Vec<u8>>,
    error: Option<Value>,
    last: Option<Value>,
    transcript: Option<String>,
}

impl VoiceReply {
    fn voice(&self) -> Vec<u8> {
        self.chunks.concat()
    }

    /// Index in `frames` of the first voice chunk and of the last text chunk.
    fn interleaved(&self) -> bool {
        crate::support::interleaved(&self.frames)
    }
}

/// Reads frames of `id` until its final frame or ERROR, checking both streams' numbering.
async fn collect_voice(c: &mut Client, id: &str) -> VoiceReply {
    let mut r = VoiceReply::default();
    loop {
        let v = c.recv().await;
        let p = v["payload"].clone();
        assert_eq!(p["request_id"], id, "unexpected frame {v}");
        r.frames.push(v.clone());
        if v["msg_type"] == "ERROR" {
            r.error = Some(p);
            return r;
        }
        assert_eq!(v["msg_type"], "RESPONSE");
        if let Some(t) = p["transcript"].as_str() {
            assert!(r.transcript.is_none(), "one transcript per request");
            assert!(
                r.text_seqs.is_empty() && r.voice_seqs.is_empty(),
                "the transcript comes first"
            );
            r.transcript = Some(t.to_string());
            continue;
        }
        let tseq = p["text_stream_seq"].as_i64();
        let vseq = p["voice_stream_seq"].as_i64();
        if tseq == Some(-1) {
            let expect: Vec<i64> = (0..r.text_seqs.len() as i64).collect();
            assert_eq!(r.text_seqs, expect, "text_stream_seq 0,1,2,... then -1");
            let expect: Vec<i64> = (0..r.voice_seqs.len() as i64).collect();
            assert_eq!(r.voice_seqs, expect, "voice_stream_seq 0,1,2,... then -1");
            r.last = Some(p);
            return r;
        }
        if let Some(s) = tseq {
            r.text_seqs.push(s);
            r.text.push_str(p["content"]["text"].as_str().unwrap());
        }
        if let Some(s) = vseq {
            r.voice_seqs.push(s);
            let b = B64
                .decode(
                    p["content"]["voice"]
                        .as_str()
                        .expect("voice chunk has content.voice"),
                )
                .expect("voice is valid base64");
            r.chunks.push(b);
        }
    }
}

/// The voice is 16 kHz s16le PCM of the length the fake TTS made for these pieces (24 kHz,
/// [`TTS_SAMPLES_PER_CHAR`] per character, resampled), in chunks of 160 ms but the last.
fn check_voice(r: &VoiceReply, pieces: &[String]) {
    let chars: usize = pieces.iter().map(|p| p.chars().count()).sum();
    let expected_bytes = chars * TTS_SAMPLES_PER_CHAR * 2 / 3 * 2;
    let voice = r.voice();
    assert_eq!(voice.len(), expected_bytes, "voice bytes for {pieces:?}");
    assert!(voice.len().is_multiple_of(2));
    let (last, rest) = r.chunks.split_last().expect("some voice");
    assert!(rest.iter().all(|c| c.len() == CHUNK_BYTES), "160 ms chunks");
    assert!(!last.is_empty() && last.len() <= CHUNK_BYTES);
    // The tone survives the trip (not silence, not noise at full scale).
    let samples: Vec<i16> = voice
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    let rms =
        (samples.iter().map(|&s| (s as f64).powi(2)).sum::<f64>() / samples.len() as f64).sqrt();
    assert!((3000.0..5500.0).contains(&rms), "rms {rms}");
    let last = r.last.as_ref().unwrap();
    assert_eq!(last["voice_stream_seq"], -1);
    assert!(last.get("notice").is_none(), "{last}");
}

/// Turns spoken replies on for the session: an attribute update (`require_tts`, empty text),
/// answered with an empty text end.
async fn ask_for_spoken_replies(c: &mut Client) {
    let upd = json!({"request_id": "u1", "data_type": "TEXT", "stream_flag": false,
                     "stream_seq": 0, "require_tts": true, "content": {"text": ""}});
    c.send("REQUEST", upd).await;
    assert_eq!(c.recv().await["payload"]["text_stream_seq"], -1);
}

fn tts_inputs(speech: &FakeSpeech) -> Vec<String> {
    speech
        .tts_requests()
        .iter()
        .map(|r| r["input"].as_str().unwrap().to_string())
        .collect()
}

fn last_user_message(app: &TestApp) -> String {
    let reqs = app.llm.requests();
    let msgs = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
    msgs.iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A reply streamed `delay` apart: Chinese sentences and a clause.
fn slow_reply(pieces: &[&str], delay: Duration) -> Script {
    crate::support::replies::streamed(pieces, delay)
}

#[tokio::test]
async fn whole_base64_with_openai_stt_and_pcm_tts_interleaves_text_and_voice() {
    let (app, speech) = voice_app(Stt::OpenAi, Tts::Pcm, |_| {}).await;
    let (pcm, transcript) = fixture("zh-ding");
    speech.add_transcript(&pcm, &transcript);
    app.llm.push(slow_reply(
        &[
            "这件青铜鼎",
            "是西周早期的，",
            "距今约三千年。",
            "它是祭祀用的礼器。",
            "还有别的问题吗？",
        ],
        Duration::from_millis(250),
    ));
    let mut c = app.client().await;
    c.send("REQUEST", voice_whole("v1", &pcm, true)).await;
    let r = collect_voice(&mut c, "v1").await;
    assert!(r.error.is_none(), "{:?}", r.error);

    // The transcript of the exact audio reached the LLM, and the client was told what was heard.
    assert_eq!(last_user_message(&app), transcript);
    assert_eq!(r.transcript.as_deref(), Some(transcript.as_str()));
    let stt = speech.stt_requests();
    assert_eq!(stt.len(), 1);
    assert_eq!(stt[0]["model"], "whisper-test");
    assert_eq!(stt[0]["filename"], "audio.wav");
    assert_eq!(stt[0]["sample_rate"], 16000);
    assert_eq!(stt[0]["channels"], 1);
    assert_eq!(stt[0]["bits"], 16);
    assert_eq!(stt[0]["pcm_bytes"], pcm.len());

    assert_eq!(
        r.text,
        "这件青铜鼎是西周早期的，距今约三千年。它是祭祀用的礼器。还有别的问题吗？"
    );
    let pieces = tts_inputs(&speech);
    assert_eq!(
        pieces,
        vec![
            "这件青铜鼎是西周早期的，",
            "距今约三千年。",
            "它是祭祀用的礼器。",
            "还有别的问题吗？"
        ]
    );
    for req in speech.tts_requests() {
        assert_eq!(req["response_format"], "pcm");
        assert_eq!(req["model"], "tts-test");
        assert_eq!(req["voice"], "alloy");
    }
    check_voice(&r, &pieces);
    // The LLM paused 250 ms between chunks while the fake TTS answered at once: voice went out
    // before the text stream was over.
    assert!(
        r.interleaved(),
        "voice interleaved with text: {:?}",
        r.frames
    );
    assert!(c.sync().await.is_empty());
    // The server-side hop timings are exported.
    let (_, metrics) = app.http_get("/metrics").await;
    for hop in [
        "upload_end_to_stt_text",
        "stt_text_to_first_llm_token",
        "first_piece_to_tts_request",
    ] {
        let line = format!("museum_agent_voice_hop_seconds_count{{hop=\"{hop}\"}} 1");
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line} in {metrics}"
        );
    }
}

#[tokio::test]
async fn chunked_base64_with_funasr_offline_and_wav_tts() {
    let (app, speech) = voice_app(Stt::FunAsr, Tts::Wav, |_| {}).await;
    let (pcm, transcript) = fixture("en-lacquer");
    speech.add_transcript(&pcm, &transcript);
    app.llm.push(text_reply(&[
        "It was made in Kyoto, ",
        "around 1850. Anything else?",
    ]));
    let mut c = app.client().await;
    send_chunked(&mut c, "v1", &pcm, 3200, true).await;
    let r = collect_voice(&mut c, "v1").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(last_user_message(&app), transcript);
    let s = &speech.funasr_sessions()[0];
    assert_eq!(s.opening["mode"], "offline");
    assert_eq!(s.opening["wav_format"], "pcm");
    assert_eq!(s.opening["audio_fs"], 16000);
    assert_eq!(s.opening["is_speaking"], true);
    assert_eq!(s.bytes, pcm.len());
    assert!(s.ended);
    let pieces = tts_inputs(&speech);
    assert_eq!(
        pieces,
        vec!["It was made in Kyoto,", "around 1850.", "Anything else?"]
    );
    assert!(
        speech
            .tts_requests()
            .iter()
            .all(|r| r["response_format"] == "wav")
    );
    check_voice(&r, &pieces);
}

#[tokio::test]
async fn binary_at_real_time_pace_reaches_funasr_while_it_is_uploaded() {
    let (app, speech) = voice_app(Stt::FunAsr2Pass, Tts::Pcm, |_| {}).await;
    let (pcm, transcript) = fixture("zh-painting");
    speech.add_transcript(&pcm, &transcript);
    app.llm.push(text_reply(&["这幅画是清代王翚所作。"]));
    let mut c = app.client().await;
    binary_start(&mut c, "v1", true).await;
    let frames: Vec<&[u8]> = pcm.chunks(3200).collect(); // 100 ms each
    let half = frames.len() / 2;
    for f in &frames[..half] {
        c.send_binary(f.to_vec()).await;
        tokio::time::sleep(Duration::from_millis(100)).await; // a microphone's pace
    }
    // The first half is at the recogniser before the visitor has finished speaking.
    speech
        .wait_for("audio at FunASR during the upload", |s| {
            s.funasr_sessions()
                .first()
                .is_some_and(|f| f.bytes > 0 && !f.ended)
        })
        .await;
    for f in &frames[half..] {
        c.send_binary(f.to_vec()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    binary_end(&mut c, "v1").await;
    let r = collect_voice(&mut c, "v1").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    // 2pass: the two corrected sentences joined; the online partial is not used.
    assert_eq!(last_user_message(&app), transcript);
    let s = &speech.funasr_sessions()[0];
    assert_eq!(s.opening["mode"], "2pass");
    assert_eq!(s.bytes, pcm.len());
    check_voice(&r, &tts_inputs(&speech));
}

#[tokio::test]
async fn binary_as_fast_as_possible_with_openai_stt_text_only() {
    let (app, speech) = voice_app(Stt::OpenAi, Tts::Pcm, |_| {}).await;
    let (pcm, transcript) = fixture("en-vase");
    speech.add_transcript(&pcm, &transcript);
    app.llm.push(text_reply(&["In 1750, ", "in Jingdezhen."]));
    let mut c = app.client().await;
    binary_start(&mut c, "v1", false).await;
    for f in pcm.chunks(16_000) {
        c.send_binary(f.to_vec()).await;
    }
    binary_end(&mut c, "v1").await;
    let r = collect_voice(&mut c, "v1").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(last_user_message(&app), transcript);
    assert_eq!(r.text, "In 1750, in Jingdezhen.");
    // require_tts false: text only, no voice stream at all.
    assert!(r.voice_seqs.is_empty());
    assert!(r.last.unwrap().get("voice_stream_seq").is_none());
    assert!(speech.tts_requests().is_empty());
}

#[tokio::test]
async fn require_tts_can_change_mid_session() {
    let (app, speech) = voice_app(Stt::None, Tts::Pcm, |_| {}).await;
    let mut c = app.client().await;
    let upd = |id: &str, on: bool| {
        json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
               "require_tts": on, "content": {"text": ""}})
    };
    // Registered with require_tts false.
    app.llm.push(text_reply(&["好的。"]));
    c.text_request("t1", "你好").await;
    let r = collect_voice(&mut c, "t1").await;
    assert!(r.voice_seqs.is_empty() && r.last.unwrap().get("voice_stream_seq").is_none());

    c.send("REQUEST", upd("u1", true)).await;
    assert_eq!(c.recv().await["payload"]["text_stream_seq"], -1);
    app.llm.push(text_reply(&["欢迎光临。"]));
    c.text_request("t2", "你好").await;
    let r = collect_voice(&mut c, "t2").await;
    check_voice(&r, &["欢迎光临。".to_string()]);

    c.send("REQUEST", upd("u2", false)).await;
    assert_eq!(c.recv().await["payload"]["text_stream_seq"], -1);
    app.llm.push(text_reply(&["再见。"]));
    c.text_request("t3", "再见").await;
    let r = collect_voice(&mut c, "t3").await;
    assert!(r.voice_seqs.is_empty());
    assert_eq!(speech.tts_requests().len(), 1);
}

#[tokio::test]
async fn interrupt_during_speech_drops_queued_voice_and_closes_the_tts_connection() {
    let (app, speech) = voice_app(Stt::None, Tts::Pcm, |_| {}).await;
    // The first piece streams part of its audio, then the TTS stalls.
    speech.set_tts(TtsMode::StallAfterFirst);
    app.llm
        .push(text_reply(&["第一句话很长很长很长。", "第二句。"]));
    let mut c = app.client().await;
    c.send(
        "REQUEST",
        json!({"request_id": "r1", "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
               "require_tts": true, "content": {"text": "讲讲"}}),
    )
    .await;
    speech
        .wait_for("a TTS request", |s| !s.tts_requests().is_empty())
        .await;
    c.send(
        "INTERRUPT",
        json!({"interrupt_request_id": "r1", "reason": "USER_STOP"}),
    )
    .await;
    // Frames written before the interrupt may come first; then the ACK, the final frame, and
    // nothing more.
    loop {
        let v = c.recv().await;
        if v["msg_type"] == "INTERRUPT_ACK" {
            assert_eq!(v["payload"]["interrupted_request_ids"], json!(["r1"]));
            break;
        }
        assert_eq!(v["payload"]["request_id"], "r1");
        assert!(v["payload"].get("interrupted").is_none());
    }
    let fin = c.recv().await;
    assert_eq!(fin["payload"]["interrupted"], true, "{fin}");
    assert_eq!(fin["payload"]["voice_stream_seq"], -1);
    speech
        .wait_for("the TTS connection closed", |s| s.tts_disconnects() >= 1)
        .await;
    let stray = c.sync().await;
    assert!(stray.is_empty(), "frames after the final one: {stray:?}");
}

#[tokio::test]
async fn voice_frames_queued_for_a_slow_reader_are_dropped_after_the_interrupt() {
    let (app, speech) = voice_app(Stt::None, Tts::Pcm, |_| {}).await;
    // A long reply whose audio (about 40 s) is far more than the client will have read.
    let long: Vec<String> = (0..20)
        .map(|i| format!("这是第{i}句比较长的讲解内容。"))
        .collect();
    let refs: Vec<&str> = long.iter().map(String::as_str).collect();
    app.llm.push(text_reply(&refs));
    let mut c = app.client().await;
    c.send(
        "REQUEST",
        json!({"request_id": "r1", "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
               "require_tts": true, "content": {"text": "讲讲"}}),
    )
    .await;
    // Without reading, wait until synthesis is well under way, then interrupt.
    speech
        .wait_for("several TTS requests", |s| s.tts_requests().len() >= 3)
        .await;
    c.send("INTERRUPT", json!({"reason": "USER_NEW_INPUT"}))
        .await;
    let mut before_ack = 0;
    loop {
        let v = c.recv().await;
        if v["msg_type"] == "INTERRUPT_ACK" {
            break;
        }
        before_ack += 1;
    }
    let fin = c.recv().await;
    assert_eq!(fin["payload"]["interrupted"], true, "{fin}");
    let stray = c.sync().await;
    assert!(
        stray.is_empty(),
        "{} frames after the final one",
        stray.len()
    );
    // Far fewer voice frames went out than the reply would have had (about 250).
    assert!(before_ack < 250, "{before_ack}");
}

#[tokio::test]
async fn interrupt_during_recognition_closes_the_funasr_connection() {
    let (app, speech) = voice_app(Stt::FunAsr, Tts::None, |_| {}).await;
    speech.set_stt(SttMode::Stall);
    let (pcm, _) = fixture("en-lacquer");
    let mut c = app.client().await;
    c.send("REQUEST", voice_whole("v1", &pcm, false)).await;
    speech
        .wait_for("the end of the audio at FunASR", |s| {
            s.funasr_sessions().first().is_some_and(|f| f.ended)
        })
        .await;
    c.send("INTERRUPT", json!({"reason": "USER_STOP"})).await;
    assert_eq!(c.recv().await["msg_type"], "INTERRUPT_ACK");
    assert_eq!(c.recv().await["payload"]["interrupted"], true);
    speech
        .wait_for("the FunASR connection closed", |s| s.stt_disconnects() >= 1)
        .await;
    assert!(c.sync().await.is_empty());
    assert!(app.llm.requests().is_empty());
}

async fn expect_error(c: &mut Client, id: &str, code: &str) -> Value {
    let r = collect_voice(c, id).await;
    let e = r
        .error
        .unwrap_or_else(|| panic!("expected {code} for {id}, got {:?}", r.frames));
    assert_eq!(e["error_code"], code, "{e}");
    assert_eq!(e["request_id"], id);
    e
}

#[tokio::test]
async fn failing_stalling_or_garbled_stt_gives_errors_and_the_session_goes_on() {
    let (app, speech) = voice_app(Stt::OpenAi, Tts::None, |c| c.stt.timeout_seconds = 1.0).await;
    let (pcm, transcript) = fixture("en-lacquer");
    speech.add_transcript(&pcm, &transcript);
    let mut c = app.client().await;

    speech.set_stt(SttMode::Fail(500));
    c.send("REQUEST", voice_whole("a", &pcm, false)).await;
    let e = expect_error(&mut c, "a", "INTERNAL_ERROR").await;
    assert_eq!(e["retryable"], true);
    assert!(
        !e.to_string().contains("secret"),
        "upstream body leaked: {e}"
    );

    speech.set_stt(SttMode::Garbage);
    c.send("REQUEST", voice_whole("b", &pcm, false)).await;
    expect_error(&mut c, "b", "INTERNAL_ERROR").await;

    speech.set_stt(SttMode::Stall);
    c.send("REQUEST", voice_whole("c", &pcm, false)).await;
    expect_error(&mut c, "c", "REQUEST_TIMEOUT").await;
    speech
        .wait_for("the stalled STT request dropped", |s| {
            s.stt_disconnects() >= 1
        })
        .await;

    // Bytes that are not speech: the recogniser finds nothing.
    speech.set_stt(SttMode::Normal);
    let noise: Vec<u8> = (0..32_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    c.send("REQUEST", voice_whole("d", &noise, false)).await;
    expect_error(&mut c, "d", "MALFORMED_PAYLOAD").await;

    // The session is fine: the same audio now goes through.
    app.llm.push(text_reply(&["Kyoto."]));
    c.send("REQUEST", voice_whole("e", &pcm, false)).await;
    let r = collect_voice(&mut c, "e").await;
    assert_eq!(r.text, "Kyoto.");
}

#[tokio::test]
async fn failing_or_garbled_funasr_gives_errors() {
    let (app, speech) = voice_app(Stt::FunAsr, Tts::None, |_| {}).await;
    let (pcm, _) = fixture("en-lacquer");
    let mut c = app.client().await;
    speech.set_stt(SttMode::Fail(0));
    c.send("REQUEST", voice_whole("a", &pcm, false)).await;
    expect_error(&mut c, "a", "INTERNAL_ERROR").await;
    speech.set_stt(SttMode::Garbage);
    c.send("REQUEST", voice_whole("b", &pcm, false)).await;
    expect_error(&mut c, "b", "INTERNAL_ERROR").await;
    assert!(c.sync().await.is_empty());
}

#[tokio::test]
async fn failing_stalling_or_garbled_tts_gives_errors() {
    for (mode, wav, code) in [
        (TtsMode::Fail(503), false, "INTERNAL_ERROR"),
        (TtsMode::Stall, false, "REQUEST_TIMEOUT"),
        (TtsMode::Garbage, true, "INTERNAL_ERROR"),
        (TtsMode::Garbage, false, "INTERNAL_ERROR"),
    ] {
        let (app, speech) = voice_app(Stt::None, if wav { Tts::Wav } else { Tts::Pcm }, |c| {
            c.tts.first_byte_timeout_seconds = 1.0;
        })
        .await;
        speech.set_tts(mode);
        app.llm.push(text_reply(&["你好。"]));
        let mut c = app.client().await;
        c.send(
            "REQUEST",
            json!({"request_id": "r1", "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
                   "require_tts": true, "content": {"text": "hi"}}),
        )
        .await;
        expect_error(&mut c, "r1", code).await;
        if mode == TtsMode::Stall {
            speech
                .wait_for("the stalled TTS dropped", |s| s.tts_disconnects() >= 1)
                .await;
        }
        // The session goes on.
        app.llm.push(text_reply(&["ok"]));
        c.text_request("r2", "again").await;
        let r = collect_voice(&mut c, "r2").await;
        assert_eq!(r.text, "ok");
    }
}

#[tokio::test]
async fn abandoned_uploads_time_out_or_close_their_recognition() {
    let (app, speech) = voice_app(Stt::FunAsr, Tts::None, |c| {
        c.stt.upload_idle_timeout_seconds = 0.5;
    })
    .await;
    let (pcm, transcript) = fixture("en-lacquer");
    speech.add_transcript(&pcm, &transcript);
    let mut c = app.client().await;
    binary_start(&mut c, "v1", false).await;
    c.send_binary(pcm[..3200].to_vec()).await;
    // Nothing more: the upload is discarded with a timeout tied to its request.
    expect_error(&mut c, "v1", "REQUEST_TIMEOUT").await;
    speech
        .wait_for("the idle upload's FunASR connection closed", |s| {
            s.stt_disconnects() >= 1
        })
        .await;
    // The id is free again and a full upload works.
    app.llm.push(text_reply(&["Kyoto."]));
    send_chunked(&mut c, "v1", &pcm, 6400, false).await;
    assert_eq!(collect_voice(&mut c, "v1").await.text, "Kyoto.");

    // A connection that goes away mid-upload closes its recognition too.
    let mut c2 = app.client().await;
    binary_start(&mut c2, "v2", false).await;
    c2.send_binary(pcm[..3200].to_vec()).await;
    speech
        .wait_for("audio of the second upload", |s| {
            s.funasr_sessions().get(2).is_some_and(|f| f.bytes > 0)
        })
        .await;
    drop(c2);
    speech
        .wait_for("the abandoned upload's FunASR connection closed", |s| {
            s.stt_disconnects() >= 2
        })
        .await;
}

#[tokio::test]
async fn without_stt_voice_gets_a_clear_error_and_without_tts_a_notice() {
    let (app, _speech) = voice_app(Stt::None, Tts::None, |_| {}).await;
    let (pcm, _) = fixture("zh-ding");
    let mut c = app.client().await;
    c.send("REQUEST", voice_whole("v1", &pcm, true)).await;
    // Not retryable: asking again cannot help (issue 15; README "Kiosk capabilities").
    let e = expect_error(&mut c, "v1", "MALFORMED_PAYLOAD").await;
    assert_eq!(e["retryable"], false, "{e}");
    assert!(e["error_detail"].as_str().unwrap().contains("STT"), "{e}");
    app.llm.push(text_reply(&["好。"]));
    c.text_request("t1", "你好").await;
    let r = collect_voice(&mut c, "t1").await;
    let last = r.last.unwrap();
    assert_eq!(last["voice_stream_seq"], -1);
    assert!(last["notice"].as_str().unwrap().contains("TTS"));
}

#[tokio::test]
async fn a_voice_that_reads_no_chinese_gets_stand_ins_and_no_chinese_reply() {
    let (app, speech) = voice_app(Stt::None, Tts::Pcm, |c| c.tts.reads_cjk = false).await;
    let mut c = app.client().await;
    ask_for_spoken_replies(&mut c).await;

    // An English reply quoting a Chinese record: the text is shown as written, the voice says
    // stand-ins and the English gloss, and the Chinese sentence is left out (and said so).
    let reply = "Our record of “溥儒” is in Chinese only: 溥儒，字心畬。Made by 張大千 (Zhang Daqian). Ask me more.";
    app.llm.push(text_reply(&[reply]));
    c.text_request("t1", "Who is Pu Ru?").await;
    let r = collect_voice(&mut c, "t1").await;
    assert_eq!(r.text, reply);
    let pieces = tts_inputs(&speech);
    assert_eq!(
        pieces,
        [
            "Our record of “a title in Chinese” is in Chinese only:",
            "Made by Zhang Daqian.",
            "Ask me more."
        ]
    );
    assert!(!r.voice().is_empty());
    let last = r.last.unwrap();
    assert_eq!(last["voice_stream_seq"], -1);
    assert!(
        last["notice"]
            .as_str()
            .unwrap()
            .contains("does not read Chinese"),
        "{last}"
    );

    // A reply in Chinese is not spoken: no synthesis, the voice stream closed empty, a notice.
    app.llm.push(text_reply(&[
        "馆藏中有53件瓷器（porcelain），",
        "例如：《Vase》。",
    ]));
    c.text_request("t2", "你们有瓷器吗？").await;
    let r = collect_voice(&mut c, "t2").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(r.voice_seqs.is_empty());
    assert_eq!(speech.tts_requests().len(), 3);
    let last = r.last.unwrap();
    assert_eq!(last["voice_stream_seq"], -1);
    assert!(last["notice"].as_str().is_some(), "{last}");

    // An English reply with no Chinese: spoken whole, no notice.
    app.llm.push(text_reply(&["The vase is porcelain."]));
    c.text_request("t3", "What is it made of?").await;
    let r = collect_voice(&mut c, "t3").await;
    assert!(r.last.unwrap().get("notice").is_none());
    assert_eq!(speech.tts_requests().len(), 4);
}

/// A record's dating is said as words (`audio::speakable::said_forms`, applied to every piece
/// sent to TTS): piper read "ca. 1500-1530" as "Ka, 1500-1530". The text shows it as written.
#[tokio::test]
async fn dating_is_said_as_words_and_shown_as_written() {
    let (app, speech) = voice_app(Stt::None, Tts::Pcm, |_| {}).await;
    let mut c = app.client().await;
    ask_for_spoken_replies(&mut c).await;
    let reply = "“Dish with Coat of Arms” is Venetian work. It is dated ca. 1500-1530.";
    app.llm.push(text_reply(&[reply]));
    c.text_request("t1", "When was the dish made?").await;
    let r = collect_voice(&mut c, "t1").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.text, reply);
    let pieces = tts_inputs(&speech);
    assert_eq!(
        pieces,
        [
            "“Dish with Coat of Arms” is Venetian work.",
            "It is dated circa 1500 to 1530."
        ]
    );
    check_voice(&r, &pieces);
}

//! What the real local servers do that the fakes did not (see `scripts/interop/FINDINGS.md`),
//! now done by the fakes: llama.cpp's keep-alive comments while it holds back a tool call, its
//! usage chunk, faster-whisper-server's `model_name` field, local-tts-studio refusing blank input.

use std::time::Duration;

use museum_agent::config::SttProviderKind;
use museum_agent::providers::tts::TtsProvider;
use museum_agent::providers::tts::openai::{OpenAiTts, OpenAiTtsOptions, SpeechFormat};
use serde_json::{Value, json};

use crate::support::fake_llm::{Ev, finish_chunk, text_chunk, text_reply, tool_chunk};
use crate::support::fake_speech::FakeSpeech;
use crate::support::*;

/// A reply that says a few words, then (like llama.cpp building a tool call on a CPU model)
/// sends nothing but what `during` holds, then the call.
fn slow_tool_call(during: Vec<Ev>) -> Script {
    let mut evs = vec![Ev::Data(text_chunk("Let me show it."))];
    evs.extend(during);
    evs.push(Ev::Data(tool_chunk(
        0,
        Some("call_1"),
        Some("show_exhibit"),
        "{\"exhibit_id\":\"1001\"}",
    )));
    evs.push(Ev::Data(finish_chunk("tool_calls")));
    Script::Paced(evs)
}

fn pings(n: usize, every: Duration) -> Vec<Ev> {
    (0..n).flat_map(|_| [Ev::Sleep(every), Ev::Ping]).collect()
}

async fn app() -> TestApp {
    spawn_app_with(|c| {
        c.llm.first_token_timeout_seconds = 1.0;
        c.llm.idle_timeout_seconds = 0.6;
        c.llm.keepalive_timeout_seconds = 1.5;
        c.llm.max_retries = 0;
    })
    .await
}

#[tokio::test]
async fn keep_alives_carry_a_slow_tool_call_past_the_idle_timeout() {
    let app = app().await;
    let mut c = app.client().await;
    // 2.4 s of pings 0.3 s apart: four times the idle timeout, each gap under the keep-alive one.
    app.llm
        .push(slow_tool_call(pings(8, Duration::from_millis(300))));
    c.text_request("r1", "Show me exhibit 1001").await;
    let r = c.reply("r1").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.text, "Let me show it.");
    assert_eq!(r.calls[0]["name"], "show_exhibit");
    assert_eq!(r.calls[0]["parameters"], json!({"exhibit_id": "1001"}));
    // The request asked for usage, and the fake (like llama.cpp) sent it in a chunk with no
    // choices, which the reply survived.
    assert_eq!(
        app.llm.requests()[0]["stream_options"]["include_usage"],
        true
    );
}

#[tokio::test]
async fn silence_without_keep_alives_still_times_out_and_so_do_keep_alives_that_stop() {
    let app = app().await;
    let mut c = app.client().await;
    // The same pause with no keep-alive: the idle timeout.
    app.llm
        .push(slow_tool_call(vec![Ev::Sleep(Duration::from_millis(2400))]));
    c.text_request("r1", "Show me exhibit 1001").await;
    let e = c.reply("r1").await.error.expect("an error");
    assert_eq!(e["error_code"], "REQUEST_TIMEOUT");
    assert!(
        e["error_detail"]
            .as_str()
            .unwrap()
            .contains("next chunk in"),
        "{e}"
    );
    app.llm.wait_disconnects(1).await;

    // Keep-alives, then nothing: the keep-alive timeout, and the upstream is dropped.
    let mut evs = vec![Ev::Data(text_chunk("Let me"))];
    evs.extend(pings(2, Duration::from_millis(300)));
    evs.push(Ev::Hang);
    app.llm.push(Script::Paced(evs));
    c.text_request("r2", "Show me exhibit 1001").await;
    let e = c.reply("r2").await.error.expect("an error");
    assert_eq!(e["error_code"], "REQUEST_TIMEOUT");
    assert!(
        e["error_detail"]
            .as_str()
            .unwrap()
            .contains("after its keep-alive"),
        "{e}"
    );
    app.llm.wait_disconnects(2).await;

    // The session goes on.
    app.llm.push(text_reply(&["ok"]));
    c.text_request("r3", "again").await;
    assert_eq!(c.reply("r3").await.text, "ok");
}

#[tokio::test]
async fn a_long_prompt_read_under_keep_alives_is_not_a_missing_first_token() {
    let app = app().await;
    let mut c = app.client().await;
    // llama.cpp sends only keep-alives while it reads the prompt (39 s for 1,100 tokens with
    // one thread here); the first data chunk comes after the first-token timeout.
    let mut evs = pings(6, Duration::from_millis(300));
    evs.push(Ev::Data(text_chunk("Room 7.")));
    evs.push(Ev::Data(finish_chunk("stop")));
    app.llm.push(Script::Paced(evs));
    c.text_request("r1", "Which room holds exhibit 7?").await;
    let r = c.reply("r1").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.text, "Room 7.");
}

fn fixture_pcm(name: &str) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/audio");
    hound::WavReader::open(dir.join(format!("{name}.wav")))
        .unwrap()
        .into_samples::<i16>()
        .flat_map(|s| s.unwrap().to_le_bytes())
        .collect()
}

async fn stt_app(speech: &FakeSpeech, send_model_name: bool) -> TestApp {
    let base = speech.base_url();
    spawn_app_with(move |c| {
        c.stt.provider = SttProviderKind::Openai;
        c.stt.base_url = base;
        c.stt.api_key_env = String::new();
        c.stt.model = "whisper-base".into();
        c.stt.send_model_name = send_model_name;
        c.stt.timeout_seconds = 5.0;
    })
    .await
}

fn voice_request(id: &str, pcm: &[u8]) -> Value {
    use base64::Engine;
    json!({"request_id": id, "data_type": "VOICE", "stream_flag": false, "stream_seq": 0,
           "content": {"voice_mode": "BASE64",
                       "voice": base64::engine::general_purpose::STANDARD.encode(pcm)}})
}

#[tokio::test]
async fn faster_whisper_server_reads_the_model_from_model_name() {
    let speech = FakeSpeech::start().await;
    speech.require_model_name("whisper-base");
    let pcm = fixture_pcm("en-vase");
    speech.add_transcript(&pcm, "Tell me about this vase.");

    // `model` alone: the real server answers 400 "unknown model: whisper-1".
    let app = stt_app(&speech, false).await;
    let mut c = app.client().await;
    c.send("REQUEST", voice_request("v1", &pcm)).await;
    let e = c.reply("v1").await.error.expect("an error");
    assert_eq!(e["error_code"], "INTERNAL_ERROR");
    assert!(e["error_detail"].as_str().unwrap().contains("400"), "{e}");

    // With `send_model_name` the transcript comes back and is answered.
    let app = stt_app(&speech, true).await;
    app.llm.push(text_reply(&["It is a Song vase."]));
    let mut c = app.client().await;
    c.send("REQUEST", voice_request("v2", &pcm)).await;
    let r = c.reply("v2").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.text, "It is a Song vase.");
    let sent = speech.stt_requests().last().unwrap().clone();
    assert_eq!(sent["model_name"], "whisper-base");
    assert_eq!(sent["model"], "whisper-base");
}

#[tokio::test]
async fn a_piece_with_nothing_to_say_is_not_sent_to_the_tts_server() {
    let speech = FakeSpeech::start().await;
    let tts = OpenAiTts::new(OpenAiTtsOptions {
        base_url: speech.base_url(),
        model: "tts-1".into(),
        voice: "alloy".into(),
        api_key: None,
        format: SpeechFormat::Pcm {
            sample_rate: 24_000,
        },
        speed: None,
        instructions: String::new(),
        connect_timeout: Duration::from_secs(2),
    })
    .unwrap();
    // The fake, like local-tts-studio, refuses blank input.
    let status = museum_agent::util::http_client_builder()
        .build()
        .unwrap()
        .post(format!("{}/audio/speech", speech.base_url()))
        .json(&json!({"model": "tts-1", "input": "  ", "voice": "alloy", "response_format": "pcm"}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 400);
    let before = speech.tts_requests().len();
    for blank in ["", "  ", "……", "!?"] {
        let out: Vec<_> = futures_util::StreamExt::collect(tts.synthesize(blank.into())).await;
        assert!(out.is_empty(), "{blank:?}: {out:?}");
    }
    assert_eq!(speech.tts_requests().len(), before, "nothing was sent");
    let out: Vec<_> = futures_util::StreamExt::collect(tts.synthesize("Hi.".into())).await;
    assert!(!out.is_empty() && out.iter().all(Result::is_ok));
}

//! The `command` TTS provider with real synthesis programs from Debian (`flite`, `espeak-ng`):
//! speech streamed as 16 kHz PCM, the program killed on INTERRUPT, failing programs as errors.

use std::path::Path;
use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use museum_agent::config::TtsProviderKind;
use museum_agent::providers::tts::command::{CommandTts, CommandTtsOptions};
use museum_agent::providers::tts::openai::SpeechFormat;
use museum_agent::providers::tts::{TtsError, TtsProvider};
use serde_json::{Value, json};

use crate::support::fake_llm::text_reply;
use crate::support::*;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn have(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// The tests need the Debian programs; `scripts/interop/setup.sh` installs them. Missing ones
/// fail the test with that hint rather than skip it silently.
fn require(program: &str) {
    assert!(
        have(program),
        "{program} is not installed: run scripts/interop/setup.sh (Debian package {program})"
    );
}

async fn command_app(
    argv: &[&str],
    output: &str,
    tweak: impl FnOnce(&mut museum_agent::Config),
) -> TestApp {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let output = output.to_string();
    spawn_app_with(move |c| {
        c.tts.provider = TtsProviderKind::Command;
        c.tts.command = argv;
        c.tts.command_output = output;
        c.tts.first_byte_timeout_seconds = 10.0;
        c.tts.idle_timeout_seconds = 10.0;
        tweak(c);
    })
    .await
}

fn spoken_request(id: &str, text: &str) -> Value {
    json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
           "require_tts": true, "content": {"text": text}})
}

/// Text, voice (decoded) and the closing frame or error of one request.
#[derive(Debug, Default)]
struct Spoken {
    text: String,
    voice: Vec<u8>,
    error: Option<Value>,
}

async fn collect(c: &mut Client, id: &str) -> Spoken {
    let mut s = Spoken::default();
    loop {
        let v = c.recv().await;
        let p = &v["payload"];
        assert_eq!(p["request_id"], id, "{v}");
        if v["msg_type"] == "ERROR" {
            s.error = Some(p.clone());
            return s;
        }
        if let Some(t) = p["content"]["text"].as_str() {
            s.text.push_str(t);
        }
        if let Some(b) = p["content"]["voice"].as_str() {
            s.voice.extend(B64.decode(b).unwrap());
        }
        if p["text_stream_seq"] == -1 && p.get("voice_stream_seq").is_none_or(|v| v == -1) {
            return s;
        }
    }
}

/// The PCM data of the WAV flite writes for `text` (16 kHz mono).
fn flite_pcm(text: &str) -> Vec<u8> {
    let out = std::process::Command::new("flite")
        .args(["-voice", "slt", "-t", text, "-o", "/dev/stdout"])
        .output()
        .unwrap();
    let r = hound::WavReader::new(std::io::Cursor::new(out.stdout)).unwrap();
    assert_eq!((r.spec().sample_rate, r.spec().channels), (16_000, 1));
    r.into_samples::<i16>()
        .flat_map(|s| s.unwrap().to_le_bytes())
        .collect()
}

#[tokio::test]
async fn flite_speaks_the_reply_as_16k_pcm() {
    require("flite");
    let app = command_app(
        &[
            "flite",
            "-voice",
            "slt",
            "-t",
            "{text}",
            "-o",
            "/dev/stdout",
        ],
        "wav",
        |_| {},
    )
    .await;
    let sentence = "Welcome to the museum of bronze.";
    app.llm.push(text_reply(&[sentence]));
    let mut c = app.client().await;
    c.send("REQUEST", spoken_request("r1", "hello")).await;
    let s = collect(&mut c, "r1").await;
    assert!(s.error.is_none(), "{:?}", s.error);
    assert_eq!(s.text, sentence);
    // flite writes 16 kHz: the voice is its audio sample for sample.
    assert_eq!(s.voice, flite_pcm(sentence));
    let secs = s.voice.len() as f64 / 32_000.0;
    assert!((1.0..6.0).contains(&secs), "{secs} s for {sentence:?}");
}

#[tokio::test]
async fn espeak_ng_reads_the_piece_from_stdin_at_its_own_rate() {
    require("espeak-ng");
    // No `{text}`: the piece goes to stdin. espeak-ng writes a 22,050 Hz WAV whose sizes are
    // left at 0x7ffff000 (it streams), which is resampled to 16 kHz.
    let app = command_app(&["espeak-ng", "--stdout"], "wav", |_| {}).await;
    app.llm
        .push(text_reply(&["The vase is from the Song dynasty."]));
    let mut c = app.client().await;
    c.send("REQUEST", spoken_request("r1", "hello")).await;
    let s = collect(&mut c, "r1").await;
    assert!(s.error.is_none(), "{:?}", s.error);
    let secs = s.voice.len() as f64 / 32_000.0;
    assert!((1.0..6.0).contains(&secs), "{secs} s of speech");
    let samples: Vec<i16> = s
        .voice
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert!(
        samples.iter().any(|s| s.unsigned_abs() > 2000),
        "audible speech, not silence"
    );
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped: it runs no more).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                == Some("Z")
        }
    }
}

#[tokio::test]
async fn interrupt_kills_the_running_program() {
    require("flite");
    let dir = tempfile_dir();
    let pidfile = dir.join("tts.pid");
    // Speaks, then keeps its stdout open (as a slow synthesiser would) under the same pid.
    let script = format!(
        "echo $$ > {}; flite -voice slt -t \"$1\" -o /dev/stdout; exec sleep 60",
        pidfile.display()
    );
    let app = command_app(&["sh", "-c", &script, "sh", "{text}"], "wav", |c| {
        c.tts.idle_timeout_seconds = 30.0;
    })
    .await;
    app.llm
        .push(text_reply(&["A long answer about the bronze vessel."]));
    let mut c = app.client().await;
    c.send("REQUEST", spoken_request("r1", "tell me")).await;
    // Wait for the first voice frame: the program is running and has spoken.
    loop {
        let v = c.recv().await;
        if v["payload"]["content"]["voice"].is_string() {
            break;
        }
    }
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!dead(pid), "the program runs while it speaks");
    c.send(
        "INTERRUPT",
        json!({"interrupt_request_id": "r1", "reason": "USER_STOP"}),
    )
    .await;
    loop {
        let v = c.recv().await;
        if v["msg_type"] == "INTERRUPT_ACK" {
            break;
        }
    }
    let fin = c.recv().await;
    assert_eq!(fin["payload"]["interrupted"], true, "{fin}");
    // Bounded wait for the kill to land (SIGKILL on drop; no fixed sleep).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !dead(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the synthesis program {pid} still runs after the interrupt"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    // The session goes on.
    app.llm.push(text_reply(&["ok"]));
    c.send("REQUEST", silent_request("r2", "again")).await;
    assert_eq!(c.reply("r2").await.text, "ok");
}

/// A text request that asks for no speech (`require_tts` is remembered per session).
fn silent_request(id: &str, text: &str) -> Value {
    json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
           "require_tts": false, "content": {"text": text}})
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "museum-agent-tts-command-{}-{}",
        std::process::id(),
        museum_agent::util::random_id("t")
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test]
async fn a_failing_silent_or_missing_program_gives_an_error_and_the_session_goes_on() {
    let missing = Path::new("/nonexistent/museum-agent-tts");
    for (argv, what) in [
        (
            vec!["sh", "-c", "echo 'no such voice: xx' >&2; exit 3"],
            "exit status",
        ),
        (vec!["true"], "no audio"),
        (vec![missing.to_str().unwrap(), "{text}"], "cannot start"),
    ] {
        let app = command_app(&argv, "wav", |_| {}).await;
        app.llm.push(text_reply(&["Hello there."]));
        let mut c = app.client().await;
        c.send("REQUEST", spoken_request("r1", "hi")).await;
        let s = collect(&mut c, "r1").await;
        let e = s.error.unwrap_or_else(|| panic!("{what}: an error"));
        assert_eq!(e["error_code"], "INTERNAL_ERROR", "{what}: {e}");
        app.llm.push(text_reply(&["ok"]));
        c.send("REQUEST", silent_request("r2", "again")).await;
        let r = c.reply("r2").await;
        assert!(r.error.is_none(), "{what}: {:?}", r.error);
        assert_eq!(r.text, "ok", "{what}");
    }
}

fn provider(argv: &[&str], format: SpeechFormat, timeout: Duration) -> CommandTts {
    CommandTts::new(CommandTtsOptions {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        format,
        timeout,
    })
    .unwrap()
}

#[tokio::test]
async fn raw_pcm_at_the_configured_rate_and_a_hung_program_times_out() {
    require("flite");
    // Raw s16le at 16 kHz (flite's WAV without its 44-byte header): passed through unchanged.
    let t = provider(
        &[
            "sh",
            "-c",
            "flite -voice slt -t \"$1\" -o /dev/stdout | tail -c +45",
            "sh",
            "{text}",
        ],
        SpeechFormat::Pcm {
            sample_rate: 16_000,
        },
        Duration::from_secs(20),
    );
    let sentence = "Raw audio, please.";
    let out: Vec<u8> = t
        .synthesize(sentence.into())
        .map(|r| r.unwrap().to_vec())
        .concat()
        .await;
    assert_eq!(out, flite_pcm(sentence));

    // The same bytes declared as 8 kHz come out twice as long at 16 kHz.
    let t8 = provider(
        &[
            "sh",
            "-c",
            "flite -voice slt -t \"$1\" -o /dev/stdout | tail -c +45",
            "sh",
            "{text}",
        ],
        SpeechFormat::Pcm { sample_rate: 8_000 },
        Duration::from_secs(20),
    );
    let out8: Vec<u8> = t8
        .synthesize(sentence.into())
        .map(|r| r.unwrap().to_vec())
        .concat()
        .await;
    let ratio = out8.len() as f64 / out.len() as f64;
    assert!((1.95..2.05).contains(&ratio), "ratio {ratio}");

    // A program that never writes nor exits is killed at the timeout with REQUEST_TIMEOUT's error.
    let dir = tempfile_dir();
    let pidfile = dir.join("hung.pid");
    let script = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    let hung = provider(
        &["sh", "-c", &script],
        SpeechFormat::Wav,
        Duration::from_millis(500),
    );
    let items: Vec<_> = hung.synthesize("Hello.".into()).collect().await;
    assert!(
        matches!(items.as_slice(), [Err(TtsError::Timeout(_))]),
        "{items:?}"
    );
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !dead(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the hung program {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

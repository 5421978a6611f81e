//! Session resume on the same node (docs/protocol.md "Session resume"): a socket cut mid-reply
//! (text, and text with voice) and a new socket that resumes gets every frame it missed once,
//! in order; the window, wrong tokens, revoked keys, a second socket taking over, a replay
//! buffer that overflows while the client is away.

use std::time::Duration;

use museum_agent::config::TtsProviderKind;
use serde_json::{Value, json};

use crate::support::fake_llm::{finish_chunk, text_chunk};
use crate::support::fake_speech::{FakeSpeech, TtsMode};
use crate::support::replies::{Seen, read_until, resume_frame, words};
use crate::support::{Client, RECV_TIMEOUT, Script, TestApp, spawn_app, spawn_app_with};

/// A registered client and its resume token.
async fn registered(app: &TestApp) -> (Client, String) {
    let mut c = app.connect().await;
    let ack = c.register_key(&app.api_key).await;
    let token = ack["payload"]["resume_token"]
        .as_str()
        .expect("REGISTER_ACK carries resume_token")
        .to_string();
    assert!(
        token.len() >= 3 + 22,
        "a token of at least 128 bits: {token}"
    );
    (c, token)
}

/// Resumes on a new socket; returns it (with the session id set) and the new token.
async fn resume(app: &TestApp, sid: &str, token: &str, last_seen: Value) -> (Client, String) {
    let mut c = app.connect().await;
    c.send_value(&resume_frame(&app.api_key, sid, token, last_seen))
        .await;
    let ack = c.recv().await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");
    assert_eq!(ack["payload"]["session_id"], sid);
    let fresh = ack["payload"]["resume_token"].as_str().unwrap().to_string();
    assert_ne!(fresh, token, "the token is renewed on every resume");
    c.session_id = sid.to_string();
    (c, fresh)
}

/// Polls the server's metrics (bounded) until `n` requests completed.
async fn completed(app: &TestApp, n: usize) {
    let want = format!("museum_agent_requests_total{{outcome=\"completed\"}} {n}");
    let t0 = std::time::Instant::now();
    loop {
        if app.http_get("/metrics").await.1.contains(&want) {
            return;
        }
        assert!(t0.elapsed() < RECV_TIMEOUT, "no {n} completed requests");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn resume_mid_text_gets_the_rest_once_then_the_live_stream() {
    let app = spawn_app().await;
    let (script, whole) = words("word", 40, Duration::from_millis(15));
    app.llm.push(script);
    let (mut c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    c.text_request("r1", "tell me everything").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 5).await;
    drop(c); // the socket is cut: no close frame
    let (mut c, _) = resume(&app, &sid, &token, json!({"r1": seen.last_seen()})).await;
    read_until(&mut c, "r1", &mut seen, usize::MAX).await;
    assert_eq!(seen.text, whole, "lost or duplicated text");
    assert_eq!(*seen.text_seqs.last().unwrap(), -1);
    assert!(seen.error.is_none());
    // The session goes on: its history has the first turn.
    let (script, _) = words("word", 2, Duration::ZERO);
    app.llm.push(script);
    c.text_request("r2", "and then?").await;
    assert!(c.reply("r2").await.error.is_none());
    let second = &app.llm.requests()[1];
    assert!(
        second.to_string().contains("word39"),
        "history lost: {second}"
    );
}

#[tokio::test]
async fn a_reply_that_finished_while_away_is_replayed_whole_including_frames_lost_in_flight() {
    let app = spawn_app().await;
    // Streamed at once: most of it is written to the socket before the client stops reading,
    // and lost with it.
    let (script, whole) = words("word", 60, Duration::ZERO);
    app.llm.push(script);
    let (mut c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    c.text_request("r1", "q").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 3).await;
    drop(c);
    completed(&app, 1).await;
    let (mut c, _) = resume(&app, &sid, &token, json!({"r1": seen.last_seen()})).await;
    read_until(&mut c, "r1", &mut seen, usize::MAX).await;
    assert_eq!(seen.text, whole);
    // Nothing more for it, and the buffer lets go once the client acknowledged (pong).
    assert!(c.sync().await.is_empty());
}

async fn voice_app() -> (TestApp, FakeSpeech) {
    let speech = FakeSpeech::start().await;
    speech.set_tts(TtsMode::Normal {
        piece_bytes: 4800,
        delay: Duration::from_millis(5),
    });
    let base = speech.base_url();
    let app = spawn_app_with(move |c| {
        c.tts.api_key_env = String::new();
        c.tts.base_url = base;
        c.tts.model = "tts-test".into();
        c.tts.provider = TtsProviderKind::Openai;
        c.tts.first_byte_timeout_seconds = 5.0;
        c.tts.idle_timeout_seconds = 5.0;
    })
    .await;
    (app, speech)
}

/// Sends a spoken-reply request and reads it into `seen`, dropping the socket after `cut`
/// frames (None: never).
async fn voice_reply(c: &mut Client, id: &str, seen: &mut Seen, cut: Option<usize>) {
    let mut n = 0;
    while !seen.ended && cut.is_none_or(|k| n < k) {
        let v = c.recv().await;
        if v["payload"]["request_id"] == id {
            seen.absorb(&v);
            n += 1;
        }
    }
}

#[tokio::test]
async fn resume_mid_voice_loses_and_repeats_nothing() {
    let (app, _speech) = voice_app().await;
    let sentences = "The vase is blue. It was made in the Yuan dynasty. It was found in a hoard. It is our favourite.";
    let pieces: Vec<&str> = sentences.split_inclusive(' ').collect();
    // The same reply twice: once read straight, once cut mid-voice and resumed.
    for _ in 0..2 {
        let mut chunks: Vec<Value> = pieces.iter().map(|p| text_chunk(p)).collect();
        chunks.push(finish_chunk("stop"));
        app.llm.push(Script::Stream {
            chunks,
            delay: Duration::from_millis(10),
            done: true,
        });
    }
    let ask = json!({"request_id": "v1", "data_type": "TEXT", "stream_flag": false,
                     "stream_seq": 0, "require_tts": true, "content": {"text": "the vase"}});
    let mut straight = Seen::default();
    let (mut c, _) = registered(&app).await;
    c.send("REQUEST", ask.clone()).await;
    voice_reply(&mut c, "v1", &mut straight, None).await;
    drop(c);

    let (mut c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    c.send("REQUEST", ask).await;
    let mut seen = Seen::default();
    // Cut once some voice has arrived.
    while seen.voice_seqs.len() < 2 {
        voice_reply(&mut c, "v1", &mut seen, Some(1)).await;
    }
    assert!(!seen.ended);
    drop(c);
    let (mut c, _) = resume(&app, &sid, &token, json!({"v1": seen.last_seen()})).await;
    voice_reply(&mut c, "v1", &mut seen, None).await;
    assert_eq!(seen.text, straight.text);
    assert_eq!(seen.voice_seqs.len(), straight.voice_seqs.len());
    assert_eq!(
        seen.voice, straight.voice,
        "audio lost, repeated or reordered"
    );
    assert!(seen.error.is_none());
}

#[tokio::test]
async fn after_the_window_the_session_is_gone() {
    let app = spawn_app_with(|c| c.session.resume_window_seconds = 1).await;
    let (c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    drop(c);
    // Bounded poll of the server's state: the parked session ends with its window.
    let t0 = std::time::Instant::now();
    while !app.app.resumable.is_empty() {
        assert!(
            t0.elapsed() < RECV_TIMEOUT,
            "the parked session did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut c = app.connect().await;
    c.send_value(&resume_frame(&app.api_key, &sid, &token, json!({})))
        .await;
    let e = c.recv().await;
    assert_eq!(e["payload"]["error_code"], "SESSION_INVALID", "{e}");
    // The connection stays open: a plain REGISTER starts a new session.
    let ack = c.register_key(&app.api_key).await;
    assert_ne!(ack["payload"]["session_id"], sid.as_str());
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_the_right_one_still_works() {
    let app = spawn_app().await;
    let (c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    drop(c);
    let mut bad = app.connect().await;
    bad.send_value(&resume_frame(&app.api_key, &sid, "rt_guess", json!({})))
        .await;
    let e = bad.recv().await;
    assert_eq!(e["payload"]["error_code"], "AUTH_FAILED", "{e}");
    assert_eq!(bad.expect_closed().await, Some(1008));
    // Unknown session: SESSION_INVALID.
    let mut other = app.connect().await;
    other
        .send_value(&resume_frame(
            &app.api_key,
            "sess_unknown",
            &token,
            json!({}),
        ))
        .await;
    let e = other.recv().await;
    assert_eq!(e["payload"]["error_code"], "SESSION_INVALID", "{e}");
    resume(&app, &sid, &token, json!({})).await;
}

#[tokio::test]
async fn a_revoked_key_cannot_resume() {
    let app = spawn_app_with(|c| c.auth.revocation_check_seconds = 3600.0).await;
    let (c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    drop(c);
    // Revoked from another handle on the same database (the admin CLI, or a node that is not
    // this one): nothing wakes this node's revocation watch (its poll is an hour), so it is the
    // check at resume that must refuse.
    museum_agent::store::Store::open(&app.app.config.database.path)
        .unwrap()
        .revoke_api_key("test")
        .unwrap();
    let mut c = app.connect().await;
    c.send_value(&resume_frame(&app.api_key, &sid, &token, json!({})))
        .await;
    let e = c.recv().await;
    assert_eq!(e["payload"]["error_code"], "AUTH_FAILED", "{e}");
    assert!(
        e["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("revoked")
    );
    assert_eq!(c.expect_closed().await, Some(1008));
}

#[tokio::test]
async fn a_key_revoked_in_this_process_ends_its_parked_session_at_once() {
    let app = spawn_app_with(|c| c.auth.revocation_check_seconds = 3600.0).await;
    let (c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    drop(c);
    // Revoked through this node's store: the revocation watch wakes and ends the parked
    // session without waiting for its poll, so there is nothing left to resume.
    app.app.store().revoke_api_key("test").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = app.connect().await;
        c.send_value(&resume_frame(&app.api_key, &sid, &token, json!({})))
            .await;
        let e = c.recv().await;
        let code = e["payload"]["error_code"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if code == "SESSION_INVALID" {
            break;
        }
        // Until the watch has run, the check at resume refuses the revoked key itself.
        assert_eq!(code, "AUTH_FAILED", "{e}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the parked session outlived its revoked key"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn resuming_from_a_second_socket_closes_the_first() {
    let app = spawn_app().await;
    let (mut first, token) = registered(&app).await;
    let sid = first.session_id.clone();
    let (mut second, token2) = resume(&app, &sid, &token, json!({})).await;
    assert_eq!(first.expect_closed().await, Some(4001));
    // The old token is spent.
    let mut third = app.connect().await;
    third
        .send_value(&resume_frame(&app.api_key, &sid, &token, json!({})))
        .await;
    assert_eq!(third.recv().await["payload"]["error_code"], "AUTH_FAILED");
    let (script, whole) = words("word", 3, Duration::ZERO);
    app.llm.push(script);
    second.text_request("r1", "hello").await;
    assert_eq!(second.reply("r1").await.text, whole);
    assert!(!token2.is_empty());
}

#[tokio::test]
async fn a_reply_that_outgrows_the_buffer_while_away_is_stopped_and_the_client_told() {
    let app = spawn_app_with(|c| c.session.replay_max_frames = 8).await;
    let (script, _) = words("word", 200, Duration::from_millis(5));
    app.llm.push(script);
    let (mut c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    c.text_request("r1", "q").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 2).await;
    drop(c);
    // The upstream call is cancelled once the buffer is full.
    app.llm.wait_disconnects(1).await;
    let (mut c, _) = resume(&app, &sid, &token, json!({"r1": seen.last_seen()})).await;
    let e = c.recv().await;
    assert_eq!(e["msg_type"], "ERROR", "{e}");
    assert_eq!(e["payload"]["request_id"], "r1");
    assert_eq!(e["payload"]["error_code"], "SERVER_BUSY");
    assert_eq!(e["payload"]["retryable"], true);
    assert!(
        e["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("replay buffer")
    );
    // Nothing more of r1; the session serves the next question.
    assert!(c.sync().await.is_empty());
    let (script, whole) = words("word", 2, Duration::ZERO);
    app.llm.push(script);
    c.text_request("r2", "again").await;
    assert_eq!(c.reply("r2").await.text, whole);
}

#[tokio::test]
async fn a_request_the_server_never_got_is_named_and_resume_can_be_turned_off() {
    let app = spawn_app().await;
    let (c, token) = registered(&app).await;
    let sid = c.session_id.clone();
    drop(c);
    let (mut c, _) = resume(&app, &sid, &token, json!({"lost": [-1, -1]})).await;
    let e = c.recv().await;
    assert_eq!(e["payload"]["request_id"], "lost", "{e}");
    assert_eq!(e["payload"]["retryable"], true);

    let app = spawn_app_with(|c| c.session.resume_window_seconds = 0).await;
    let mut c = app.connect().await;
    let ack = c.register_key(&app.api_key).await;
    assert!(ack["payload"].get("resume_token").is_none(), "{ack}");
    drop(c);
    let t0 = std::time::Instant::now();
    while app
        .app
        .stats
        .sessions
        .load(std::sync::atomic::Ordering::Relaxed)
        > 0
    {
        assert!(
            t0.elapsed() < RECV_TIMEOUT,
            "the session outlived its socket"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

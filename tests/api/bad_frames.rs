//! Data-driven hostile input: every file in `fixtures/bad-frames/` is one case — the frames
//! sent, the ERRORs expected (code, request_id, a piece of the detail), and whether the
//! connection stays open (`"open": true`) or is closed with a documented close code
//! (`"open": false, "close_code": N`). `$SID` and `$KEY` in frames are replaced by the session
//! id and API key.
//!
//! Every case runs (each on its own connection, in its own task, so a panic or a timeout in one
//! does not stop the others); each is printed with its verdict, and the test fails at the end
//! with the full list of failing cases.

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::support::*;

fn substitute(v: &Value, sid: &str, key: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("$SID", sid).replace("$KEY", key)),
        Value::Array(a) => Value::Array(a.iter().map(|x| substitute(x, sid, key)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), substitute(x, sid, key)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Checks that the corpus file is well formed before it is run.
fn check_format(case: &Value) -> Result<(), String> {
    let open = case["open"]
        .as_bool()
        .ok_or("\"open\" must be true or false")?;
    match (open, case.get("close_code")) {
        (true, Some(_)) => {
            return Err("\"close_code\" given for a connection that stays open".into());
        }
        (false, Some(c)) if c.as_u64().is_some() => {}
        (false, _) => return Err("\"open\": false needs the documented \"close_code\"".into()),
        (true, None) => {}
    }
    case["registered"]
        .as_bool()
        .ok_or("\"registered\" must be true or false")?;
    case["send"].as_array().ok_or("\"send\" must be a list")?;
    case["expect"]
        .as_array()
        .ok_or("\"expect\" must be a list")?;
    Ok(())
}

/// Runs one case on a new connection; panics (assertions, timeouts) are its failure.
async fn run_case(url: String, api_key: String, case: Value) {
    let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let mut c = Client {
        ws,
        session_id: String::new(),
    };
    if case["registered"].as_bool().unwrap() {
        c.register_key(&api_key).await;
    }
    let sid = c.session_id.clone();
    for item in case["send"].as_array().unwrap() {
        let item = substitute(item, &sid, &api_key);
        if let Some(f) = item.get("frame") {
            c.send_value(f).await;
        } else if let Some(t) = item.get("text") {
            c.send_text(t.as_str().unwrap()).await;
        } else if let Some(h) = item.get("text_bytes_hex") {
            // A text frame whose bytes are not UTF-8 (tungstenite checks only what it reads).
            use futures_util::SinkExt;
            use tokio_tungstenite::tungstenite::protocol::frame::Frame;
            use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
            let f = Frame::message(hex(h.as_str().unwrap()), OpCode::Data(Data::Text), true);
            c.ws.send(Message::Frame(f)).await.unwrap();
        } else if let Some(n) = item.get("big_text") {
            c.send_text(&"a".repeat(n.as_u64().unwrap() as usize)).await;
        } else if let Some(n) = item.get("nested") {
            let n = n.as_u64().unwrap() as usize;
            let text = format!(
                r#"{{"version":"1.0","msg_type":"SESSION_QUERY","session_id":"{sid}","payload":{{"x":{}{}}},"timestamp":1}}"#,
                "[".repeat(n),
                "]".repeat(n)
            );
            c.send_text(&text).await;
        } else if let Some(h) = item.get("binary_hex") {
            c.send_binary(hex(h.as_str().unwrap())).await;
        } else if let Some(n) = item.get("binary_len") {
            c.send_binary(vec![0u8; n.as_u64().unwrap() as usize]).await;
        } else if let Some(r) = item.get("binary_repeat") {
            let (size, count) = (r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap());
            for _ in 0..count {
                c.send_binary(vec![0u8; size]).await;
            }
        } else {
            panic!("unknown send item {item}");
        }
    }
    for (i, want) in case["expect"].as_array().unwrap().iter().enumerate() {
        let v = c.recv().await;
        assert_eq!(v["msg_type"], "ERROR", "expected ERROR #{i}, got {v}");
        let p = &v["payload"];
        assert_eq!(p["error_code"], want["error_code"], "ERROR #{i}: {v}");
        let code: museum_agent::protocol::ErrorCode =
            serde_json::from_value(p["error_code"].clone()).unwrap();
        assert_eq!(
            p["retryable"],
            code.retryable(),
            "ERROR #{i}: retryable per the spec table: {v}"
        );
        match want.get("request_id") {
            None => {}
            Some(Value::Null) => assert!(p.get("request_id").is_none(), "ERROR #{i}: {v}"),
            Some(id) => assert_eq!(&p["request_id"], id, "ERROR #{i}: {v}"),
        }
        if let Some(needle) = want.get("detail_contains").and_then(Value::as_str) {
            let detail = p["error_detail"].as_str().unwrap();
            assert!(
                detail.contains(needle),
                "ERROR #{i}: detail {detail:?} lacks {needle:?}"
            );
        }
    }
    if case["open"].as_bool().unwrap() {
        // The connection is still open and nothing else was sent before this answer.
        let sid_now = c.session_id.clone();
        c.send_value(&frame(
            "HEALTH_CHECK",
            &sid_now,
            json!({"check_fields": ["status"]}),
        ))
        .await;
        let v = c.recv().await;
        assert_eq!(
            v["msg_type"], "HEALTH_CHECK_ACK",
            "expected the connection to stay open with nothing more sent: {v}"
        );
    } else {
        // Nothing but the close frame (and heartbeats) after the expected errors.
        let want = case["close_code"].as_u64().unwrap();
        let code = loop {
            let msg = tokio::time::timeout(RECV_TIMEOUT, c.ws.next())
                .await
                .expect("timed out waiting for the close");
            match msg {
                None | Some(Err(_)) => break None,
                Some(Ok(Message::Close(f))) => break f.map(|f| u64::from(u16::from(f.code))),
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    assert_eq!(
                        v["msg_type"], "HEARTBEAT",
                        "unexpected frame before close: {v}"
                    );
                }
                Some(Ok(_)) => {}
            }
        };
        assert_eq!(code, Some(want), "close code");
    }
}

#[tokio::test]
async fn bad_frames_corpus() {
    let app =
        spawn_app_with(|c| c.llm.provider = museum_agent::config::LlmProviderKind::None).await;
    let cases = corpus("bad-frames", 60);
    let mut verdicts = Verdicts::new("bad-frames", cases.len());
    for (name, case) in cases {
        let verdict = match case.and_then(|c| check_format(&c).map(|()| c)) {
            Err(e) => Err(e),
            Ok(case) => tokio::spawn(run_case(app.ws_url(), app.api_key.clone(), case))
                .await
                .map_err(panic_text),
        };
        verdicts.record(&name, verdict);
    }
    verdicts.finish();
}

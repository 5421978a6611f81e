//! Data-driven hostile input: every file in `fixtures/bad-frames/` is one case — the frames
//! sent, the ERRORs expected (code, request_id, a piece of the detail), and whether the
//! connection stays open. `$SID` and `$KEY` in frames are replaced by the session id and API key.

use serde_json::{Value, json};

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

#[tokio::test]
async fn bad_frames_corpus() {
    let app =
        spawn_app_with(|c| c.llm.provider = museum_agent::config::LlmProviderKind::None).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad-frames");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 60, "the corpus has {} cases", files.len());
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let case: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut c = app.connect().await;
        if case["registered"].as_bool().unwrap() {
            c.register_key(&app.api_key).await;
        }
        let sid = c.session_id.clone();
        for item in case["send"].as_array().unwrap() {
            let item = substitute(item, &sid, &app.api_key);
            if let Some(f) = item.get("frame") {
                c.send_value(f).await;
            } else if let Some(t) = item.get("text") {
                c.send_text(t.as_str().unwrap()).await;
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
                panic!("{name}: unknown send item {item}");
            }
        }
        for want in case["expect"].as_array().unwrap() {
            let v = c.recv().await;
            assert_eq!(v["msg_type"], "ERROR", "{name}: {v}");
            let p = &v["payload"];
            assert_eq!(p["error_code"], want["error_code"], "{name}: {v}");
            let code: museum_agent::protocol::ErrorCode =
                serde_json::from_value(p["error_code"].clone()).unwrap();
            assert_eq!(
                p["retryable"],
                code.retryable(),
                "{name}: retryable per the spec table"
            );
            match want.get("request_id") {
                None => {}
                Some(Value::Null) => assert!(p.get("request_id").is_none(), "{name}: {v}"),
                Some(id) => assert_eq!(&p["request_id"], id, "{name}: {v}"),
            }
            if let Some(needle) = want.get("detail_contains").and_then(Value::as_str) {
                let detail = p["error_detail"].as_str().unwrap();
                assert!(
                    detail.contains(needle),
                    "{name}: detail {detail:?} lacks {needle:?}"
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
                "{name}: expected the connection to stay open: {v}"
            );
        } else {
            c.expect_closed().await;
        }
    }
}

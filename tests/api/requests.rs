use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_llm::{finish_chunk, text_chunk, text_reply, tool_chunk};
use crate::support::*;

#[tokio::test]
async fn text_request_streams_chunks_in_order_and_ends_with_minus_one() {
    let app = spawn_app().await;
    app.llm.push(text_reply(&["这件", "青铜鼎", "是西周的。"]));
    let mut c = app.client().await;
    c.text_request("r1", "这件青铜鼎是什么年代的？").await;
    let r = c.reply("r1").await;
    assert_eq!(r.text, "这件青铜鼎是西周的。");
    assert_eq!(r.text_seqs, vec![0, 1, 2, -1]);
    let last = r.last.unwrap();
    assert!(
        last.get("voice_stream_seq").is_none(),
        "no voice stream without require_tts"
    );
    assert_eq!(last["content"], json!({}));
    // What reached the upstream: stream, model, system prompt, the question, the client tools.
    let req = &app.llm.requests()[0];
    assert_eq!(req["stream"], true);
    assert_eq!(req["model"], "fake-model");
    let msgs = req["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs.last().unwrap()["content"], "这件青铜鼎是什么年代的？");
    let tools = req["tools"].as_array().unwrap();
    assert_eq!(tools[0]["function"]["name"], "show_exhibit");
    assert_eq!(
        tools[0]["function"]["parameters"],
        json!({"type": "object", "properties": {"exhibit_id": {"type": "string"}}, "required": ["exhibit_id"]})
    );
    assert_eq!(
        tools[1]["function"]["parameters"]["properties"]["gallery"]["type"],
        "string"
    );
    assert_eq!(
        app.llm.auth_headers()[0],
        None,
        "no key configured, none sent"
    );
}

#[tokio::test]
async fn api_key_from_the_named_environment_variable_is_sent() {
    // SAFETY: this test binary sets this variable only here, before the provider reads it.
    unsafe { std::env::set_var("MUSEUM_AGENT_TEST_LLM_KEY", "sk-test-123") };
    let app = spawn_app_with(|c| c.llm.api_key_env = "MUSEUM_AGENT_TEST_LLM_KEY".into()).await;
    app.llm.push(text_reply(&["ok"]));
    let mut c = app.client().await;
    c.text_request("r1", "hi").await;
    c.reply("r1").await;
    assert_eq!(
        app.llm.auth_headers()[0].as_deref(),
        Some("Bearer sk-test-123")
    );
}

#[tokio::test]
async fn concurrent_requests_interleave_and_history_reaches_the_next_turn() {
    let app = spawn_app().await;
    let slow = |pieces: &[&str]| {
        let mut chunks: Vec<Value> = pieces.iter().map(|p| text_chunk(p)).collect();
        chunks.push(finish_chunk("stop"));
        Script::Stream {
            chunks,
            delay: Duration::from_millis(30),
            done: true,
        }
    };
    app.llm.push(slow(&["A1 ", "A2 ", "A3 ", "A4"]));
    app.llm.push(slow(&["B1 ", "B2 ", "B3 ", "B4"]));
    let mut c = app.client().await;
    c.text_request("ra", "first question").await;
    c.text_request("rb", "second question").await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut done = 0;
    let mut order = Vec::new();
    while done < 2 {
        let v = c.recv().await;
        let id = v["payload"]["request_id"].as_str().unwrap().to_string();
        order.push(id.clone());
        let seq = v["payload"]["text_stream_seq"].as_i64().unwrap();
        if seq == -1 {
            done += 1;
        }
        if id == "ra" { a.push(seq) } else { b.push(seq) }
    }
    assert_eq!(a, vec![0, 1, 2, 3, -1]);
    assert_eq!(b, vec![0, 1, 2, 3, -1]);
    let first_b = order.iter().position(|x| x == "rb").unwrap();
    let last_a = order.iter().rposition(|x| x == "ra").unwrap();
    assert!(first_b < last_a, "streams interleave: {order:?}");

    app.llm.push(text_reply(&["third answer"]));
    c.text_request("rc", "third question").await;
    c.reply("rc").await;
    let msgs = app.llm.requests()[2]["messages"].clone();
    let contents: Vec<&str> = msgs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    for want in [
        "first question",
        "A1 A2 A3 A4",
        "second question",
        "B1 B2 B3 B4",
        "third question",
    ] {
        assert!(
            contents.contains(&want),
            "history lacks {want:?}: {contents:?}"
        );
    }
}

#[tokio::test]
async fn tool_call_becomes_function_call_with_parsed_parameters() {
    let app = spawn_app().await;
    app.llm.push(Script::Stream {
        chunks: vec![
            text_chunk("我来为您展示。"),
            tool_chunk(0, Some("call_1"), Some("show_exhibit"), ""),
            tool_chunk(0, None, None, "{\"exhibit"),
            tool_chunk(0, None, None, "_id\": \"1001\"}"),
            tool_chunk(1, Some("call_2"), Some("not_a_client_function"), "{}"),
            finish_chunk("tool_calls"),
        ],
        delay: Duration::ZERO,
        done: true,
    });
    // The unknown tool goes back to the model as an observation; it then answers.
    app.llm.push(text_reply(&["已为您打开展品卡片。"]));
    let mut c = app.client().await;
    c.text_request("r1", "show me exhibit 1001").await;
    let r = c.reply("r1").await;
    assert_eq!(r.text, "我来为您展示。已为您打开展品卡片。");
    assert_eq!(
        r.calls.len(),
        1,
        "unknown tools never reach the client: {:?}",
        r.calls
    );
    assert_eq!(r.calls[0]["name"], "show_exhibit");
    assert_eq!(r.calls[0]["parameters"], json!({"exhibit_id": "1001"}));
    assert_eq!(r.calls[0]["call_id"], "call_1");

    let second = app.llm.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let obs = second
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_2")
        .expect("observation for the unknown tool");
    assert!(
        obs["content"].as_str().unwrap().contains("unknown tool"),
        "{obs}"
    );
    let pending = second
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_1")
        .unwrap();
    assert!(
        pending["content"].as_str().unwrap().contains("no result"),
        "{pending}"
    );

    // The client reports the result (extension); the model continues with it as a tool message.
    app.llm.push(text_reply(&["卡片已显示。"]));
    c.send(
        "REQUEST",
        json!({"request_id": "r2", "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
               "content": {"text": "", "function_result": {"name": "show_exhibit", "call_id": "call_1", "result": {"shown": true}}}}),
    )
    .await;
    let r2 = c.reply("r2").await;
    assert_eq!(r2.text, "卡片已显示。");
    let msgs = app.llm.requests()[2]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let asst = msgs
        .iter()
        .find(|m| m.get("tool_calls").is_some())
        .expect("assistant tool call in history");
    assert_eq!(asst["tool_calls"][0]["id"], "call_1");
    let tool = msgs
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_1")
        .unwrap();
    assert_eq!(
        tool["content"], "{\"shown\":true}",
        "the reported result replaces the placeholder"
    );
}

#[tokio::test]
async fn attribute_updates_apply_atomically_and_the_attribute_only_form_is_confirmed() {
    let app = spawn_app().await;
    let mut c = app.client().await;
    let upd = |id: &str, extra: Value| {
        let mut p = json!({"request_id": id, "data_type": "TEXT", "stream_flag": false, "stream_seq": 0, "content": {"text": ""}});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    c.send("REQUEST", upd("u1", json!({"require_tts": true, "enable_srs": false,
        "function_calling_op": "ADD", "function_calling": [{"name": "play_audio_guide", "parameters": []}]}))).await;
    let v = c.recv().await;
    assert_eq!(
        v["payload"],
        json!({"request_id": "u1", "text_stream_seq": -1, "content": {}})
    );
    c.send("SESSION_QUERY", json!({})).await;
    let d = c.recv().await["payload"]["session_data"].clone();
    assert_eq!(d["require_tts"], true);
    assert_eq!(d["enable_srs"], false);
    let names: Vec<&str> = d["function_calling"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["show_exhibit", "navigate_to_gallery", "play_audio_guide"]
    );

    // A bad name anywhere leaves everything unchanged.
    c.send("REQUEST", upd("u2", json!({"require_tts": false,
        "function_calling_op": "DELETE", "function_calling": [{"name": "show_exhibit"}, {"name": "nope"}]}))).await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["error_code"], "MALFORMED_PAYLOAD");
    assert_eq!(v["payload"]["request_id"], "u2");
    assert!(
        v["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
    c.send(
        "SESSION_QUERY",
        json!({"query_fields": ["require_tts", "function_calling"]}),
    )
    .await;
    let d = c.recv().await["payload"]["session_data"].clone();
    assert_eq!(d["require_tts"], true);
    assert_eq!(d["function_calling"].as_array().unwrap().len(), 3);

    for (op, list, n) in [
        (
            "UPDATE",
            json!([{"name": "show_exhibit", "description": "new"}]),
            3,
        ),
        ("DELETE", json!([{"name": "play_audio_guide"}]), 2),
        ("REPLACE", json!([{"name": "only_one"}]), 1),
    ] {
        c.send(
            "REQUEST",
            upd(
                "u3",
                json!({"function_calling_op": op, "function_calling": list}),
            ),
        )
        .await;
        assert_eq!(c.recv().await["payload"]["text_stream_seq"], -1);
        c.send(
            "SESSION_QUERY",
            json!({"query_fields": ["function_calling"]}),
        )
        .await;
        let d = c.recv().await["payload"]["session_data"].clone();
        assert_eq!(d["function_calling"].as_array().unwrap().len(), n, "{op}");
    }

    // Attributes given with a question apply before it runs: the model gets the new tool list.
    app.llm.push(text_reply(&["ok"]));
    let mut p = upd(
        "q1",
        json!({"function_calling_op": "ADD", "function_calling": [{"name": "extra_fn"}]}),
    );
    p["content"]["text"] = json!("hello");
    c.send("REQUEST", p).await;
    c.reply("q1").await;
    let tools = app.llm.requests()[0]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["only_one", "extra_fn", "search_collection", "get_exhibit"]
    );
}

#[tokio::test]
async fn require_tts_without_tts_gets_text_and_a_notice() {
    let app = spawn_app().await;
    app.llm.push(text_reply(&["hello"]));
    let mut c = app.client().await;
    c.send(
        "REQUEST",
        json!({"request_id": "r1", "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
        "require_tts": true, "content": {"text": "hi"}}),
    )
    .await;
    let r = c.reply("r1").await;
    let last = r.last.unwrap();
    assert_eq!(
        last["voice_stream_seq"], -1,
        "the voice stream opened by require_tts is closed"
    );
    assert!(last["notice"].as_str().unwrap().contains("TTS"));
}

#[tokio::test]
async fn no_llm_configured_gives_a_clear_error() {
    let app =
        spawn_app_with(|c| c.llm.provider = museum_agent::config::LlmProviderKind::None).await;
    let mut c = app.client().await;
    c.text_request("r1", "hello").await;
    let r = c.reply("r1").await;
    let e = r.error.unwrap();
    assert_eq!(e["error_code"], "INTERNAL_ERROR");
    assert!(
        e["error_detail"]
            .as_str()
            .unwrap()
            .contains("no LLM is configured")
    );
    // The session goes on.
    c.sync().await;
}

#[tokio::test]
async fn upstream_failures_map_to_retryable_errors_and_the_session_goes_on() {
    let app = spawn_app_with(|c| {
        c.llm.first_token_timeout_seconds = 0.5;
        c.llm.idle_timeout_seconds = 0.5;
        c.llm.max_retries = 0;
    })
    .await;
    let mut c = app.client().await;
    let cases = [
        (
            Script::Status(500, "boom with sk-secret inside".into()),
            "INTERNAL_ERROR",
            "HTTP 500",
        ),
        (
            Script::Status(429, "slow down".into()),
            "INTERNAL_ERROR",
            "HTTP 429",
        ),
        (Script::Stall, "REQUEST_TIMEOUT", "first token"),
        (
            Script::StallAfter(vec![text_chunk("partial")]),
            "REQUEST_TIMEOUT",
            "next chunk",
        ),
        (
            Script::Stream {
                chunks: vec![text_chunk("cut")],
                delay: Duration::ZERO,
                done: false,
            },
            "INTERNAL_ERROR",
            "ended",
        ),
        (
            Script::Raw("data: {not json\n\n".into()),
            "INTERNAL_ERROR",
            "malformed",
        ),
        (
            Script::Raw("data: {\"error\": {\"message\": \"model overloaded\"}}\n\n".into()),
            "INTERNAL_ERROR",
            "model overloaded",
        ),
    ];
    for (i, (script, code, needle)) in cases.into_iter().enumerate() {
        app.llm.push(script);
        let id = format!("r{i}");
        c.text_request(&id, "question").await;
        let r = c.reply(&id).await;
        let e = r.error.unwrap_or_else(|| panic!("case {i}: no error"));
        assert_eq!(e["error_code"], code, "case {i}: {e}");
        assert_eq!(e["retryable"], true);
        assert_eq!(e["request_id"], id.as_str());
        let detail = e["error_detail"].as_str().unwrap();
        assert!(detail.contains(needle), "case {i}: {detail}");
        assert!(
            !detail.contains("sk-secret"),
            "upstream bodies never reach the client"
        );
        c.sync().await;
    }
    // A refused connection.
    let dead = spawn_app_with(|c| c.llm.base_url = "http://127.0.0.1:1/v1".into()).await;
    let mut c = dead.client().await;
    c.text_request("x", "q").await;
    let e = c.reply("x").await.error.unwrap();
    assert_eq!(e["error_code"], "INTERNAL_ERROR");
    assert!(
        e["error_detail"].as_str().unwrap().contains("cannot reach"),
        "{e}"
    );
}

#[tokio::test]
async fn requests_in_flight_are_limited_per_session() {
    let app = spawn_app_with(|c| c.limits.max_requests_in_flight = 2).await;
    app.llm.push(Script::Stall);
    app.llm.push(Script::Stall);
    let mut c = app.client().await;
    c.text_request("a", "q").await;
    c.text_request("b", "q").await;
    c.text_request("c", "q").await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["error_code"], "SERVER_BUSY");
    assert_eq!(v["payload"]["request_id"], "c");
    // The same id again while in flight is refused without touching the original.
    c.text_request("a", "again").await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["error_code"], "MALFORMED_PAYLOAD");
    assert!(v["payload"].get("request_id").is_none(), "{v}");
    assert!(
        v["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("already in flight")
    );
}

#[tokio::test]
async fn failures_before_any_output_are_retried_and_after_output_are_not() {
    let app = spawn_app_with(|c| {
        c.llm.first_token_timeout_seconds = 0.5;
        c.llm.idle_timeout_seconds = 0.5;
        c.llm.max_retries = 2;
    })
    .await;
    let mut c = app.client().await;
    app.llm.push(Script::Status(503, "busy".into()));
    app.llm.push(Script::Stall);
    app.llm.push(text_reply(&["third time lucky"]));
    c.text_request("r1", "q").await;
    let r = c.reply("r1").await;
    assert_eq!(r.text, "third time lucky");
    assert_eq!(app.llm.requests().len(), 3);
    // Out of retries: the error reaches the client.
    for _ in 0..3 {
        app.llm.push(Script::Status(500, "down".into()));
    }
    c.text_request("r2", "q").await;
    assert_eq!(
        c.reply("r2").await.error.unwrap()["error_code"],
        "INTERNAL_ERROR"
    );
    assert_eq!(app.llm.requests().len(), 6);
    // Once text reached the client, a failure is not retried (no duplicated words).
    app.llm
        .push(Script::StallAfter(vec![text_chunk("half an ans")]));
    c.text_request("r3", "q").await;
    let r = c.reply("r3").await;
    assert_eq!(r.text, "half an ans");
    assert_eq!(r.error.unwrap()["error_code"], "REQUEST_TIMEOUT");
    assert_eq!(app.llm.requests().len(), 7);
    // A malformed stream is not retried either.
    app.llm.push(Script::Raw("data: {broken\n\n".into()));
    c.text_request("r4", "q").await;
    assert_eq!(
        c.reply("r4").await.error.unwrap()["error_code"],
        "INTERNAL_ERROR"
    );
    assert_eq!(app.llm.requests().len(), 8);
}

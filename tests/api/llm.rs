//! The LLM layer: Gemini's wire format, the tool loop (observations, schema failures, step
//! limit), many client tools, slash commands, interrupts inside the loop.

use std::time::Duration;

use museum_agent::config::LlmProviderKind;
use serde_json::{Value, json};

use crate::support::fake_llm::{finish_chunk, gemini_chunk, text_chunk, text_reply, tool_chunk};
use crate::support::*;

fn stream(chunks: Vec<Value>, done: bool) -> Script {
    Script::Stream {
        chunks,
        delay: Duration::ZERO,
        done,
    }
}

async fn gemini_app() -> TestApp {
    // SAFETY: set once here before any provider reads it; no other test reads this variable.
    unsafe { std::env::set_var("MUSEUM_AGENT_TEST_GEMINI_KEY", "g-key-1") };
    spawn_app_with(|c| {
        c.llm.provider = LlmProviderKind::Gemini;
        c.llm.base_url = c.llm.base_url.replace("/v1", "/v1beta");
        c.llm.model = "gemini-test".into();
        c.llm.api_key_env = "MUSEUM_AGENT_TEST_GEMINI_KEY".into();
    })
    .await
}

#[tokio::test]
async fn gemini_streams_text_and_function_calls() {
    let app = gemini_app().await;
    app.llm.push(stream(
        vec![
            gemini_chunk(json!([{"text": "这是"}]), None),
            gemini_chunk(json!([{"text": "西周的鼎。"}, {"functionCall": {"name": "show_exhibit", "args": {"exhibit_id": "nmh-1"}}}]), Some("STOP")),
        ],
        false,
    ));
    let mut c = app.client().await;
    c.text_request("r1", "这件鼎是什么年代的？").await;
    let r = c.reply("r1").await;
    assert_eq!(r.text, "这是西周的鼎。");
    assert_eq!(r.calls[0]["name"], "show_exhibit");
    assert_eq!(r.calls[0]["parameters"], json!({"exhibit_id": "nmh-1"}));
    assert!(
        r.calls[0]["call_id"].as_str().unwrap().starts_with("call_"),
        "generated id"
    );
    assert_eq!(
        app.llm.paths()[0],
        "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    );
    assert_eq!(app.llm.auth_headers()[0].as_deref(), Some("g-key-1"));
    let body = &app.llm.requests()[0];
    assert!(
        body["systemInstruction"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("museum")
    );
    assert_eq!(
        body["contents"][0]["parts"][0]["text"],
        "这件鼎是什么年代的？"
    );
    let decls = body["tools"][0]["functionDeclarations"].as_array().unwrap();
    assert_eq!(decls[0]["name"], "show_exhibit");
    assert_eq!(
        decls[0]["parameters"]["properties"]["exhibit_id"]["type"],
        "STRING"
    );

    // The next turn carries the call and its placeholder result in Gemini's own shapes.
    app.llm.push(stream(
        vec![gemini_chunk(json!([{"text": "好的"}]), Some("STOP"))],
        false,
    ));
    c.text_request("r2", "谢谢").await;
    c.reply("r2").await;
    let contents = app.llm.requests()[1]["contents"]
        .as_array()
        .unwrap()
        .clone();
    let model = contents.iter().find(|m| m["role"] == "model").unwrap();
    assert!(
        model["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["functionCall"]["name"] == "show_exhibit")
    );
    assert!(
        contents
            .iter()
            .any(|m| m["parts"][0]["functionResponse"]["name"] == "show_exhibit")
    );
}

#[tokio::test]
async fn gemini_errors_map_like_openai() {
    let app = gemini_app().await;
    let mut c = app.client().await;
    app.llm.push(stream(vec![json!({"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}})], false));
    c.text_request("r1", "q").await;
    let e = c.reply("r1").await.error.unwrap();
    assert_eq!(e["error_code"], "INTERNAL_ERROR");
    assert!(
        e["error_detail"]
            .as_str()
            .unwrap()
            .contains("API key not valid")
    );
    // Cut off: no finishReason before the body ends.
    app.llm.push(stream(
        vec![gemini_chunk(json!([{"text": "half"}]), None)],
        false,
    ));
    c.text_request("r2", "q").await;
    let r = c.reply("r2").await;
    assert_eq!(r.text, "half");
    assert!(
        r.error.unwrap()["error_detail"]
            .as_str()
            .unwrap()
            .contains("ended")
    );
    // Blocked for safety.
    app.llm
        .push(stream(vec![gemini_chunk(json!([]), Some("SAFETY"))], false));
    c.text_request("r3", "q").await;
    assert!(
        c.reply("r3").await.error.unwrap()["error_detail"]
            .as_str()
            .unwrap()
            .contains("SAFETY")
    );
}

#[tokio::test]
async fn schema_failures_go_back_to_the_model_and_are_never_sent_to_the_client() {
    let app = spawn_app().await;
    // show_exhibit requires a string exhibit_id: a number fails the schema.
    app.llm.push(stream(
        vec![
            tool_chunk(
                0,
                Some("c1"),
                Some("show_exhibit"),
                "{\"exhibit_id\": 1001}",
            ),
            finish_chunk("tool_calls"),
        ],
        true,
    ));
    app.llm.push(stream(
        vec![
            tool_chunk(
                0,
                Some("c2"),
                Some("show_exhibit"),
                "{\"exhibit_id\": \"1001\"}",
            ),
            finish_chunk("tool_calls"),
        ],
        true,
    ));
    let mut c = app.client().await;
    c.text_request("r1", "show 1001").await;
    let r = c.reply("r1").await;
    assert_eq!(
        r.calls.len(),
        1,
        "only the corrected call reaches the client: {:?}",
        r.calls
    );
    assert_eq!(r.calls[0]["parameters"]["exhibit_id"], "1001");
    let second = app.llm.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let obs = second.iter().find(|m| m["tool_call_id"] == "c1").unwrap();
    assert!(
        obs["content"]
            .as_str()
            .unwrap()
            .contains("exhibit_id must be of type string"),
        "{obs}"
    );
}

#[tokio::test]
async fn the_tool_loop_is_bounded() {
    let app = spawn_app_with(|c| c.llm.max_tool_steps = 3).await;
    for i in 0..5 {
        app.llm.push(stream(
            vec![
                text_chunk(&format!("try {i}. ")),
                tool_chunk(0, Some(&format!("c{i}")), Some("nope"), "{}"),
                finish_chunk("tool_calls"),
            ],
            true,
        ));
    }
    let mut c = app.client().await;
    c.text_request("r1", "loop forever").await;
    let r = c.reply("r1").await;
    assert_eq!(r.text, "try 0. try 1. try 2. ");
    assert!(r.error.is_none());
    assert_eq!(app.llm.requests().len(), 3);
}

#[tokio::test]
async fn interrupt_during_a_tool_loop_stops_the_next_model_call() {
    let app = spawn_app().await;
    app.llm.push(stream(
        vec![
            text_chunk("Let me check. "),
            tool_chunk(0, Some("c1"), Some("nope"), "{}"),
            finish_chunk("tool_calls"),
        ],
        true,
    ));
    app.llm.push(Script::StallAfter(vec![text_chunk("Found")]));
    let mut c = app.client().await;
    c.text_request("r1", "q").await;
    let mut texts = Vec::new();
    while texts.len() < 2 {
        let v = c.recv().await;
        texts.push(
            v["payload"]["content"]["text"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(texts, ["Let me check. ", "Found"]);
    c.send(
        "INTERRUPT",
        json!({"interrupt_request_id": "r1", "reason": "USER_STOP"}),
    )
    .await;
    assert_eq!(c.recv().await["msg_type"], "INTERRUPT_ACK");
    assert_eq!(c.recv().await["payload"]["interrupted"], true);
    app.llm.wait_disconnects(1).await;
    assert!(c.sync().await.is_empty());
}

#[tokio::test]
async fn many_client_tools_are_narrowed_to_the_best_matches() {
    let app = spawn_app_with(|c| c.llm.max_client_tools = 3).await;
    let mut functions: Vec<Value> = (0..20)
        .map(|i| json!({"name": format!("kiosk_action_{i}"), "description": "Adjust a kiosk setting"}))
        .collect();
    functions
        .push(json!({"name": "show_exhibit", "description": "Show an exhibit card on screen"}));
    functions
        .push(json!({"name": "navigate_to_gallery", "description": "Show the way to a gallery"}));
    let mut c = app.connect().await;
    c.send_value(&frame(
        "REGISTER",
        "",
        json!({"auth": {"type": "API_KEY", "api_key": app.api_key},
        "platform": "WEB", "require_tts": false, "function_calling": functions}),
    ))
    .await;
    c.session_id = c.recv().await["payload"]["session_id"]
        .as_str()
        .unwrap()
        .into();
    app.llm.push(text_reply(&["ok"]));
    c.text_request("r1", "how do I get to the Chinese bronze gallery?")
        .await;
    c.reply("r1").await;
    let tools: Vec<String> = app.llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    // The two server tools are always offered besides the three client functions.
    assert_eq!(tools.len(), 5, "{tools:?}");
    assert!(tools.contains(&"search_collection".to_string()));
    assert!(
        tools.contains(&"navigate_to_gallery".to_string()),
        "{tools:?}"
    );
}

#[tokio::test]
async fn slash_commands_bypass_the_model() {
    let app = spawn_app_with(|c| c.llm.provider = LlmProviderKind::None).await;
    let mut c = app.client().await;
    c.text_request("r1", "/help").await;
    let r = c.reply("r1").await;
    assert!(
        r.text.contains("/exhibit") && r.text.contains("/search"),
        "{}",
        r.text
    );
    c.text_request("r2", "/teleport mars").await;
    let r = c.reply("r2").await;
    assert!(r.text.contains("Unknown command /teleport") && r.text.contains("/help"));
    assert!(app.llm.requests().is_empty(), "the model was never called");
}

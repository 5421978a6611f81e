use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn healthz_readyz_and_health_check_with_and_without_session() {
    let app = spawn_app().await;
    assert_eq!(app.http_get("/healthz").await, (200, "ok".to_string()));
    let page = museum_agent::util::http_client_builder()
        .build()
        .unwrap()
        .get(format!("http://{}/", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200, "the kiosk page is served at /");
    assert_eq!(page.headers()["cache-control"], "no-cache");
    let (code, body) = app.http_get("/readyz").await;
    assert_eq!(code, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["database"], "ok");
    assert_eq!(v["llm"], "openai");

    // Without a session.
    let mut c = app.connect().await;
    c.send_value(&frame("HEALTH_CHECK", "", json!({}))).await;
    let v = c.recv().await;
    assert_eq!(v["msg_type"], "HEALTH_CHECK_ACK");
    let h = &v["payload"]["health_status"];
    assert_eq!(h["status"], "HEALTHY");
    assert!(h["conn_count"].as_u64().unwrap() >= 1);
    assert!(h["cpu_usage"].is_u64());
    // With a session (and without session_id, which HEALTH_CHECK may omit), only asked fields.
    c.register_key(&app.api_key).await;
    c.send_value(&json!({"version": "1.0", "msg_type": "HEALTH_CHECK", "payload": {"check_fields": ["conn_count"]}, "timestamp": now_ms()})).await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["health_status"].as_object().unwrap().len(), 1);
    c.send(
        "HEALTH_CHECK",
        json!({"check_fields": ["status", "session_count"]}),
    )
    .await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["health_status"]["session_count"], 1);
}

#[tokio::test]
async fn metrics_count_requests_errors_and_interrupts() {
    let app = spawn_app().await;
    let mut c = app.client().await;
    app.llm
        .push(crate::support::fake_llm::text_reply(&["a", "b"]));
    c.text_request("r1", "q").await;
    c.reply("r1").await;
    app.llm.push(Script::Status(500, "x".into()));
    app.llm.push(Script::Status(500, "x".into()));
    app.llm.push(Script::Status(500, "x".into()));
    c.text_request("r2", "q").await;
    c.reply("r2").await;
    app.llm.push(Script::Stall);
    c.text_request("r3", "q").await;
    app.llm.wait_requests(5).await;
    c.send("INTERRUPT", json!({"reason": "USER_STOP"})).await;
    c.recv().await;
    c.recv().await;
    let (code, text) = app.http_get("/metrics").await;
    assert_eq!(code, 200);
    for line in [
        "museum_agent_sessions 1",
        "museum_agent_requests_total{outcome=\"completed\"} 1",
        "museum_agent_requests_total{outcome=\"error\"} 1",
        "museum_agent_requests_total{outcome=\"interrupted\"} 1",
        "museum_agent_errors_total{code=\"INTERNAL_ERROR\"} 1",
        "museum_agent_interrupt_seconds_count 1",
        "museum_agent_relay_seconds_count 2",
        "museum_agent_upstream_seconds_count{provider=\"openai\",stage=\"call\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
}

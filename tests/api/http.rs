use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn healthz_readyz_and_health_check_with_and_without_session() {
    let app = spawn_app().await;
    assert_eq!(app.http_get("/healthz").await, (200, "ok".to_string()));
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

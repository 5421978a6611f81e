use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn api_key_and_account_both_register() {
    let app = spawn_app().await;
    let mut c = app.connect().await;
    let ack = c.register_key(&app.api_key).await;
    let p = &ack["payload"];
    assert_eq!(p["status"], "SUCCESS");
    assert_eq!(p["session_timeout_seconds"], 3600);
    let sid = p["session_id"].as_str().unwrap();
    assert!(
        sid.starts_with("sess_") && sid.len() >= 5 + 32,
        "128-bit random id: {sid}"
    );
    assert_eq!(
        ack["session_id"], sid,
        "the envelope carries the new session id"
    );

    let mut a = app.connect().await;
    let ack = a
        .register(json!({"type": "ACCOUNT", "account": ACCOUNT, "password": PASSWORD}))
        .await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");
    assert_ne!(ack["payload"]["session_id"], sid);
}

#[tokio::test]
async fn bad_credentials_get_auth_failed_then_close() {
    let app = spawn_app().await;
    let cases = [
        json!({"type": "API_KEY", "api_key": "mak_not_a_real_key"}),
        json!({"type": "API_KEY", "api_key": ""}),
        json!({"type": "ACCOUNT", "account": ACCOUNT, "password": "wrong password"}),
        json!({"type": "ACCOUNT", "account": "nobody", "password": PASSWORD}),
    ];
    for auth in cases {
        let mut c = app.connect().await;
        let v = c.register(auth.clone()).await;
        assert_eq!(v["msg_type"], "ERROR", "{auth}: {v}");
        assert_eq!(v["payload"]["error_code"], "AUTH_FAILED");
        assert_eq!(v["payload"]["retryable"], true);
        assert_eq!(
            v["payload"]["error_detail"], "invalid credentials",
            "never says which part"
        );
        assert_eq!(c.expect_closed().await, Some(1008));
    }
}

#[tokio::test]
async fn revoked_keys_and_disabled_accounts_are_refused_at_once() {
    let app = spawn_app().await;
    app.app.store().revoke_api_key("test").unwrap();
    let mut c = app.connect().await;
    let v = c
        .register(json!({"type": "API_KEY", "api_key": app.api_key}))
        .await;
    assert_eq!(v["payload"]["error_code"], "AUTH_FAILED");
    app.app.store().set_account_disabled(ACCOUNT, true).unwrap();
    let mut c = app.connect().await;
    let v = c
        .register(json!({"type": "ACCOUNT", "account": ACCOUNT, "password": PASSWORD}))
        .await;
    assert_eq!(v["payload"]["error_code"], "AUTH_FAILED");
}

#[tokio::test]
async fn repeated_failures_lock_the_address_out() {
    let app = spawn_app_with(|c| {
        c.auth.max_failures_per_address = 3;
        c.auth.lockout_seconds = 600;
    })
    .await;
    for _ in 0..3 {
        let mut c = app.connect().await;
        let v = c
            .register(json!({"type": "API_KEY", "api_key": "mak_wrong"}))
            .await;
        assert_eq!(v["payload"]["error_code"], "AUTH_FAILED");
    }
    // Now even the right key is refused from this address, without saying why it was wrong.
    let mut c = app.connect().await;
    let v = c
        .register(json!({"type": "API_KEY", "api_key": app.api_key}))
        .await;
    assert_eq!(v["payload"]["error_code"], "AUTH_FAILED");
    assert!(
        v["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("too many")
    );
    assert_eq!(c.expect_closed().await, Some(1008));
}

#[tokio::test]
async fn second_register_is_refused_and_session_untouched() {
    let app = spawn_app().await;
    let mut c = app.client().await;
    let sid = c.session_id.clone();
    c.send(
        "REGISTER",
        register_payload(json!({"type": "API_KEY", "api_key": app.api_key})),
    )
    .await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["error_code"], "MALFORMED_PAYLOAD");
    c.send("SESSION_QUERY", json!({})).await;
    let v = c.recv().await;
    assert_eq!(v["msg_type"], "SESSION_INFO");
    assert_eq!(v["session_id"], sid);
}

#[tokio::test]
async fn session_limit_gives_server_busy() {
    let app = spawn_app_with(|c| c.limits.max_sessions = 1).await;
    let _first = app.client().await;
    let mut c = app.connect().await;
    let v = c
        .register(json!({"type": "API_KEY", "api_key": app.api_key}))
        .await;
    assert_eq!(v["payload"]["error_code"], "SERVER_BUSY");
    assert_eq!(v["payload"]["retryable"], true);
    drop(_first);
}

#[tokio::test]
async fn attributes_are_kept_per_session_and_queryable() {
    let app = spawn_app().await;
    let mut c = app.connect().await;
    c.send_value(&frame(
        "REGISTER",
        "",
        json!({"auth": {"type": "API_KEY", "api_key": app.api_key}, "platform": "TV",
               "require_tts": true, "function_calling": []}),
    ))
    .await;
    let ack = c.recv().await;
    c.session_id = ack["payload"]["session_id"].as_str().unwrap().into();
    c.send("SESSION_QUERY", json!({})).await;
    let v = c.recv().await;
    let d = &v["payload"]["session_data"];
    assert_eq!(d["platform"], "TV");
    assert_eq!(d["require_tts"], true);
    assert_eq!(d["enable_srs"], true, "enable_srs defaults to true");
    assert_eq!(d["function_calling"], json!([]));
    assert!(d["create_time"].as_i64().unwrap() > 1_700_000_000_000);
    let rem = d["remaining_seconds"].as_u64().unwrap();
    assert!(rem > 3500 && rem <= 3600, "{rem}");
    // Only the asked fields; unknown ones named in the message.
    c.send(
        "SESSION_QUERY",
        json!({"query_fields": ["platform", "colour"]}),
    )
    .await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["session_data"], json!({"platform": "TV"}));
    assert!(v["payload"]["message"].as_str().unwrap().contains("colour"));
}

#[tokio::test]
async fn invalid_utf8_in_a_text_frame_fails_the_connection_only() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let app = spawn_app().await;
    let mut other = app.client().await;
    let mut c = app.client().await;
    let bad = Frame::message(vec![0xff, 0xfe, 0xfd], OpCode::Data(Data::Text), true);
    c.ws.send(Message::Frame(bad)).await.unwrap();
    let code = c.expect_closed().await;
    assert_eq!(code, Some(1007));
    other.sync().await;
}

#[tokio::test]
async fn frames_over_the_hard_limit_close_the_connection_only() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let app = spawn_app().await;
    let mut other = app.client().await;
    let mut c = app.client().await;
    // The server stops reading mid-frame, so the send itself may see the connection reset.
    let _ =
        c.ws.send(Message::Text("a".repeat(5 * 1024 * 1024).into()))
            .await;
    let code = c.expect_closed().await;
    assert!(matches!(code, None | Some(1009)), "{code:?}");
    other.sync().await;
}

#[tokio::test]
async fn revoking_a_key_or_disabling_an_account_closes_live_sessions() {
    let app = spawn_app_with(|c| c.auth.revocation_check_seconds = 0.1).await;
    let mut by_key = app.client().await;
    let mut by_account = app.connect().await;
    let ack = by_account
        .register(json!({"type": "ACCOUNT", "account": ACCOUNT, "password": PASSWORD}))
        .await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK");
    app.app.store().revoke_api_key("test").unwrap();
    let v = by_key.recv().await;
    assert_eq!(v["msg_type"], "SHUTDOWN");
    assert_eq!(v["payload"]["reason"], "credential revoked");
    assert_eq!(by_key.expect_closed().await, Some(1008));
    // The account session is untouched until its account is disabled.
    by_account.sync().await;
    app.app.store().set_account_disabled(ACCOUNT, true).unwrap();
    assert_eq!(by_account.recv().await["msg_type"], "SHUTDOWN");
    assert_eq!(by_account.expect_closed().await, Some(1008));
}

#[tokio::test]
async fn a_second_register_on_a_registered_connection_is_malformed_not_session_invalid() {
    let app = spawn_app().await;
    let mut c = app.client().await;
    let sid = c.session_id.clone();
    // Every REGISTER carries `session_id: ""`, this one too.
    c.send_value(&frame(
        "REGISTER",
        "",
        register_payload(json!({"type": "API_KEY", "api_key": app.api_key})),
    ))
    .await;
    let e = c.recv().await;
    assert_eq!(e["payload"]["error_code"], "MALFORMED_PAYLOAD", "{e}");
    assert!(
        e["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("already registered")
    );
    // The session is unchanged and still serves.
    c.send("SESSION_QUERY", json!({})).await;
    let info = c.recv().await;
    assert_eq!(info["msg_type"], "SESSION_INFO");
    assert_eq!(info["session_id"], sid.as_str());
}

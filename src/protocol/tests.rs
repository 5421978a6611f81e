//! Every example of the spec decodes to a typed value and encodes back to the same JSON.

use super::*;
use serde_json::json;

fn frame(msg_type: &str, session_id: &str, payload: Value) -> Value {
    json!({"version": "1.0", "msg_type": msg_type, "session_id": session_id,
           "payload": payload, "timestamp": 1740000000000i64})
}

/// Client examples from spec §4, verbatim.
fn client_examples() -> Vec<Value> {
    vec![
        frame(
            "REGISTER",
            "",
            json!({
              "auth": {"type": "API_KEY", "api_key": "xxx"},
              "platform": "WEB", "require_tts": false, "enable_srs": true,
              "function_calling": [{"name": "get_exhibit_info", "description": "查询文物详情",
                  "parameters": [{ "name": "exhibit_id", "type": "string" }]}]
            }),
        ),
        frame(
            "REGISTER",
            "",
            json!({"auth": {"type": "ACCOUNT", "account": "a", "password": "p"},
                   "platform": "MINI_PROGRAM", "require_tts": true, "function_calling": []}),
        ),
        frame(
            "REQUEST",
            "sess_1",
            json!({
              "request_id": "req_xxx", "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
              "require_tts": true, "enable_srs": true, "function_calling_op": "REPLACE",
              "function_calling": [], "content": {"voice_mode": "BASE64", "text": "这件文物的年代是？"}
            }),
        ),
        frame(
            "REQUEST",
            "sess_1",
            json!({"request_id": "r2", "data_type": "VOICE", "stream_flag": true, "stream_seq": -1,
                   "content": {"voice_mode": "BINARY"}}),
        ),
        frame(
            "INTERRUPT",
            "sess_1",
            json!({"interrupt_request_id": "req_xxx", "reason": "USER_NEW_INPUT"}),
        ),
        frame("INTERRUPT", "sess_1", json!({"reason": "USER_STOP"})),
        frame(
            "SESSION_QUERY",
            "sess_1",
            json!({"query_fields": ["function_calling", "require_tts", "platform", "create_time", "remaining_seconds"]}),
        ),
        frame("SESSION_QUERY", "sess_1", json!({})),
        frame("SHUTDOWN", "sess_1", json!({"reason": "用户主动退出"})),
        frame(
            "HEARTBEAT_REPLY",
            "sess_1",
            json!({"client_status": "ONLINE"}),
        ),
        frame(
            "HEALTH_CHECK",
            "",
            json!({"check_fields": ["cpu_usage", "conn_count", "status"]}),
        ),
    ]
}

/// Server examples from spec §5, verbatim.
fn server_examples() -> Vec<Value> {
    vec![
        frame(
            "REGISTER_ACK",
            "sess_xxx",
            json!({"status": "SUCCESS", "message": "会话创建成功", "session_id": "sess_xxx",
                   "session_timeout_seconds": 3600}),
        ),
        frame(
            "RESPONSE",
            "sess_xxx",
            json!({"request_id": "req_xxx", "text_stream_seq": 0, "voice_stream_seq": 0,
                   "function_call": {"name": "get_exhibit_info", "parameters": { "exhibit_id": "1001" }},
                   "content": {"text": "您好，这件文物制作于清代。", "voice": "base64_audio_data"}}),
        ),
        frame(
            "RESPONSE",
            "sess_xxx",
            json!({"request_id": "req_xxx", "text_stream_seq": -1, "voice_stream_seq": -1,
                   "interrupted": true, "interrupt_reason": "USER_NEW_INPUT", "content": {}}),
        ),
        frame(
            "INTERRUPT_ACK",
            "sess_xxx",
            json!({"interrupted_request_ids": ["req_xxx", "req_yyy"], "status": "SUCCESS",
                   "message": "已中断 2 个请求"}),
        ),
        frame(
            "SESSION_INFO",
            "sess_xxx",
            json!({"status": "SUCCESS", "message": "查询成功", "session_data": {
                "platform": "WEB", "require_tts": true, "enable_srs": true, "function_calling": [],
                "create_time": 1740000000000i64, "remaining_seconds": 3000}}),
        ),
        frame("SHUTDOWN", "sess_xxx", json!({"reason": "会话超时"})),
        frame("HEARTBEAT", "sess_xxx", json!({"remaining_seconds": 3000})),
        frame(
            "HEALTH_CHECK_ACK",
            "",
            json!({"health_status": {"cpu_usage": 20, "conn_count": 50, "status": "HEALTHY"}}),
        ),
        frame(
            "SESSION_WARN",
            "sess_xxx",
            json!({"warn_type": "EXPIRE_SOON", "remaining_seconds": 300,
                   "message": "会话即将在 5 分钟后超时，请发送请求刷新"}),
        ),
        frame(
            "ERROR",
            "sess_xxx",
            json!({"error_code": "SESSION_INVALID", "error_msg": "会话不存在或已超时",
                   "error_detail": "", "retryable": false, "request_id": "req_xxx"}),
        ),
    ]
}

#[test]
fn client_examples_round_trip() {
    let mut seen = std::collections::HashSet::new();
    for ex in client_examples() {
        let f = decode_client(&ex.to_string()).unwrap_or_else(|e| panic!("{ex}: {e:?}"));
        seen.insert(f.message.msg_type());
        let back: Value = serde_json::from_str(&f.encode()).unwrap();
        assert_eq!(back, ex);
    }
    assert_eq!(seen.len(), ClientMessage::TYPES.len());
}

#[test]
fn server_examples_round_trip() {
    let mut seen = std::collections::HashSet::new();
    for ex in server_examples() {
        let f = decode_server(&ex.to_string()).unwrap_or_else(|e| panic!("{ex}: {e:?}"));
        seen.insert(f.message.msg_type());
        let out = encode_server(&f.session_id, &f.message, 1740000000000);
        let back: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back, ex);
    }
    assert_eq!(seen.len(), ServerMessage::TYPES.len());
}

#[test]
fn interrupted_final_frame_matches_spec() {
    let r = Response::interrupted("req_xxx", InterruptReason::UserNewInput);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v,
        json!({"request_id": "req_xxx", "text_stream_seq": -1, "voice_stream_seq": -1,
               "interrupted": true, "interrupt_reason": "USER_NEW_INPUT", "content": {}})
    );
}

fn err_of(v: Value) -> DecodeError {
    decode_client(&v.to_string()).unwrap_err()
}

#[test]
fn envelope_errors_name_the_field() {
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "not valid JSON"),
        ("[1,2]".into(), "JSON object"),
        (
            json!({"msg_type": "SHUTDOWN", "payload": {}, "timestamp": 1}).to_string(),
            "`version`",
        ),
        (
            json!({"version": "2.0", "msg_type": "SHUTDOWN", "payload": {}, "timestamp": 1})
                .to_string(),
            "unsupported version",
        ),
        (
            json!({"version": 1, "msg_type": "SHUTDOWN", "payload": {}, "timestamp": 1})
                .to_string(),
            "`version`",
        ),
        (
            json!({"version": "1.0", "msg_type": "NOPE", "payload": {}, "timestamp": 1})
                .to_string(),
            "unknown message type",
        ),
        (
            json!({"version": "1.0", "msg_type": "SHUTDOWN", "payload": {}}).to_string(),
            "`timestamp`",
        ),
        (
            json!({"version": "1.0", "msg_type": "SHUTDOWN", "payload": [], "timestamp": 1})
                .to_string(),
            "`payload`",
        ),
        (
            json!({"version": "1.0", "msg_type": "SHUTDOWN", "session_id": 5, "payload": {}, "timestamp": 1})
                .to_string(),
            "`session_id`",
        ),
    ];
    for (text, needle) in cases {
        let e = decode_client(&text).unwrap_err();
        assert_eq!(e.code, ErrorCode::MalformedPayload, "{text}");
        assert!(e.detail.contains(needle), "{text}: {}", e.detail);
    }
    // 1.x minor versions are accepted.
    let ok = json!({"version": "1.1", "msg_type": "SHUTDOWN", "payload": {}, "timestamp": 1.5});
    assert!(decode_client(&ok.to_string()).is_ok());
}

#[test]
fn enumerated_fields_are_checked() {
    let reg = |platform: &str, auth_type: &str| {
        frame(
            "REGISTER",
            "",
            json!({"auth": {"type": auth_type, "api_key": "k"}, "platform": platform,
                   "require_tts": false, "function_calling": []}),
        )
    };
    assert!(
        err_of(reg("PHONE", "API_KEY"))
            .detail
            .contains("payload.platform")
    );
    assert!(err_of(reg("WEB", "TOKEN")).detail.contains("payload.auth"));
    let intr = frame("INTERRUPT", "s", json!({"reason": "BORED"}));
    assert!(err_of(intr).detail.contains("payload.reason"));
    let req = frame(
        "REQUEST",
        "s",
        json!({"request_id": "r", "data_type": "IMAGE", "stream_flag": false, "stream_seq": 0, "content": {}}),
    );
    let e = err_of(req);
    assert!(e.detail.contains("payload.data_type"), "{}", e.detail);
    assert_eq!(e.request_id.as_deref(), Some("r"));
}

#[test]
fn missing_and_mistyped_payload_fields() {
    let e = err_of(frame(
        "REGISTER",
        "",
        json!({"auth": {"type": "API_KEY", "api_key": "k"}, "platform": "WEB", "function_calling": []}),
    ));
    assert!(e.detail.contains("require_tts"), "{}", e.detail);
    let e = err_of(frame(
        "REQUEST",
        "s",
        json!({"request_id": "r", "data_type": "TEXT", "stream_flag": "no", "stream_seq": 0, "content": {}}),
    ));
    assert!(e.detail.contains("payload.stream_flag"), "{}", e.detail);
    let e = err_of(frame(
        "REGISTER",
        "",
        json!({"auth": {"type": "ACCOUNT", "account": "a"}, "platform": "WEB", "require_tts": false, "function_calling": []}),
    ));
    assert!(e.detail.contains("password"), "{}", e.detail);
}

fn req(v: Value) -> RequestPayload {
    serde_json::from_value(v).unwrap()
}

#[test]
fn request_kinds() {
    let base = |data_type: &str, flag: bool, seq: i64, content: Value| {
        req(
            json!({"request_id": "r", "data_type": data_type, "stream_flag": flag,
                   "stream_seq": seq, "content": content}),
        )
    };
    assert_eq!(
        base("TEXT", false, 0, json!({"text": "hi"})).kind(100),
        Ok(RequestKind::Text("hi".into()))
    );
    assert_eq!(
        base("TEXT", false, 0, json!({"text": ""})).kind(100),
        Ok(RequestKind::AttributesOnly)
    );
    assert_eq!(
        base(
            "VOICE",
            false,
            0,
            json!({"voice_mode": "BASE64", "voice": "AAA="})
        )
        .kind(100),
        Ok(RequestKind::VoiceWhole("AAA=".into()))
    );
    assert_eq!(
        base(
            "VOICE",
            true,
            3,
            json!({"voice_mode": "BASE64", "voice": "AAA="})
        )
        .kind(100),
        Ok(RequestKind::VoiceChunk {
            seq: 3,
            data: Some("AAA=".into())
        })
    );
    assert_eq!(
        base("VOICE", true, 0, json!({"voice_mode": "BINARY"})).kind(100),
        Ok(RequestKind::BinaryStart)
    );
    assert_eq!(
        base(
            "VOICE",
            true,
            -1,
            json!({"voice_mode": "BINARY", "voice": ""})
        )
        .kind(100),
        Ok(RequestKind::BinaryEnd)
    );
    let bad = [
        (
            base("TEXT", true, 0, json!({"text": "x"})),
            ErrorCode::MalformedPayload,
        ),
        (
            base("TEXT", false, 1, json!({"text": "x"})),
            ErrorCode::StreamSeqError,
        ),
        (
            base("TEXT", false, 0, json!({})),
            ErrorCode::MalformedPayload,
        ),
        (
            base("TEXT", false, 0, json!({"text": "x".repeat(101)})),
            ErrorCode::PayloadTooLarge,
        ),
        (
            base("VOICE", true, 0, json!({})),
            ErrorCode::MalformedPayload,
        ),
        (
            base("VOICE", true, 2, json!({"voice_mode": "BINARY"})),
            ErrorCode::StreamSeqError,
        ),
        (
            base("VOICE", false, 0, json!({"voice_mode": "BINARY"})),
            ErrorCode::MalformedPayload,
        ),
        (
            base("VOICE", true, -2, json!({"voice_mode": "BASE64"})),
            ErrorCode::StreamSeqError,
        ),
        (
            base("VOICE", false, 0, json!({"voice_mode": "BASE64"})),
            ErrorCode::MalformedPayload,
        ),
    ];
    for (r, code) in bad {
        let e = r.kind(100).unwrap_err();
        assert_eq!(e.code, code, "{r:?}: {}", e.detail);
        assert_eq!(e.request_id.as_deref(), Some("r"));
    }
    let lone_op = req(
        json!({"request_id": "r", "data_type": "TEXT", "stream_flag": false,
        "stream_seq": 0, "function_calling_op": "ADD", "content": {"text": ""}}),
    );
    assert!(
        lone_op
            .kind(10)
            .unwrap_err()
            .detail
            .contains("function_calling")
    );
}

#[test]
fn auth_debug_hides_secrets() {
    let a = Auth::Account {
        account: "alice".into(),
        password: "hunter2".into(),
    };
    let k = Auth::ApiKey {
        api_key: "mak_secret".into(),
    };
    assert!(!format!("{a:?}").contains("hunter2"));
    assert!(!format!("{k:?}").contains("mak_secret"));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let text = format!(
        r#"{{"version":"1.0","msg_type":"SHUTDOWN","payload":{{"x":{deep}}},"timestamp":1}}"#
    );
    assert_eq!(
        decode_client(&text).unwrap_err().code,
        ErrorCode::MalformedPayload
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_text_decodes_or_errors(s in ".{0,300}") {
            let _ = decode_client(&s);
        }

        #[test]
        fn interrupt_round_trips(id in proptest::option::of("[a-z0-9_]{1,20}"), r in 0..3usize) {
            let reason = [InterruptReason::UserNewInput, InterruptReason::UserStop, InterruptReason::ClientError][r];
            let f = ClientFrame::new(Some("s"), ClientMessage::Interrupt(InterruptPayload { interrupt_request_id: id, reason }), 5);
            prop_assert_eq!(decode_client(&f.encode()).unwrap(), f);
        }

        #[test]
        fn text_request_round_trips(id in "[a-zA-Z0-9_-]{1,40}", text in ".{0,80}", tts in proptest::option::of(any::<bool>())) {
            let f = ClientFrame::new(Some("sess"), ClientMessage::Request(RequestPayload {
                request_id: id, data_type: DataType::Text, stream_flag: false, stream_seq: 0,
                require_tts: tts, enable_srs: None, function_calling_op: None, function_calling: None, clear_history: None,
                content: RequestContent { text: Some(text), ..Default::default() },
            }), 1);
            prop_assert_eq!(decode_client(&f.encode()).unwrap(), f);
        }
    }
}

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

/// Random near-valid frames: a valid frame of every client message type with exactly one field
/// broken (wrong JSON type, missing, out of range, a value outside its enumeration), so decoding
/// gets past the first checks and reaches the rule for that field. The server's verdict
/// (`decode_client`, then [`RequestPayload::kind`] for REQUEST) must be the documented ERROR:
/// its code, a detail naming the field, and the frame's `request_id` when one could be read.
/// Valid frames round-trip, and unknown extra members are ignored (docs/protocol.md: clients may
/// send extensions), so adding one changes nothing.
mod near_valid {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::select;
    use proptest::strategy::Union;

    /// `max_text_chars` used for REQUEST checks.
    const MAX_TEXT: usize = 200;

    fn name_strategy() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9_-]{1,24}"
    }

    fn function_def(name: String) -> impl Strategy<Value = FunctionDef> {
        let params = prop_oneof![
            Just(None),
            proptest::collection::btree_map(
                "[a-z_]{1,8}",
                (
                    select(vec![
                        "string", "number", "integer", "boolean", "array", "object"
                    ]),
                    proptest::option::of(any::<bool>()),
                ),
                0..4
            )
            .prop_map(|m| Some(Value::Array(
                m.into_iter()
                    .map(|(n, (t, req))| {
                        let mut p = json!({"name": n, "type": t});
                        if let Some(r) = req {
                            p["required"] = r.into();
                        }
                        p
                    })
                    .collect()
            ))),
            Just(Some(
                json!({"type": "object", "properties": {"x": {"type": "integer"}}})
            )),
        ];
        (proptest::option::of("\\PC{0,20}"), params).prop_map(move |(description, parameters)| {
            FunctionDef {
                name: name.clone(),
                description,
                parameters,
            }
        })
    }

    /// 0..4 valid definitions with distinct names.
    fn function_list() -> impl Strategy<Value = Vec<FunctionDef>> {
        proptest::collection::btree_set(name_strategy(), 0..4)
            .prop_flat_map(|names| names.into_iter().map(function_def).collect::<Vec<_>>())
    }

    fn register() -> impl Strategy<Value = ClientMessage> {
        let auth = prop_oneof![
            "[ -~]{1,40}".prop_map(|api_key| Auth::ApiKey { api_key }),
            ("\\PC{1,20}", "\\PC{1,20}")
                .prop_map(|(account, password)| Auth::Account { account, password }),
        ];
        let platform = select(vec![
            Platform::Web,
            Platform::App,
            Platform::MiniProgram,
            Platform::Tv,
        ]);
        (
            auth,
            platform,
            any::<bool>(),
            proptest::option::of(any::<bool>()),
            function_list(),
        )
            .prop_map(
                |(auth, platform, require_tts, enable_srs, function_calling)| {
                    ClientMessage::Register(RegisterPayload {
                        auth,
                        platform,
                        require_tts,
                        enable_srs,
                        function_calling,
                        resume: None,
                    })
                },
            )
    }

    /// Every legal shape of a REQUEST (spec §4.3 + docs/protocol.md), so `kind()` accepts it.
    fn request() -> impl Strategy<Value = ClientMessage> {
        let text = "\\PC{0,60}";
        let b64 = "[A-Za-z0-9+/]{0,40}";
        let shape = prop_oneof![
            text.prop_map(|t| (
                DataType::Text,
                false,
                0i64,
                RequestContent {
                    text: Some(t),
                    ..Default::default()
                }
            )),
            (
                "[a-z_]{1,12}",
                proptest::option::of("[a-z0-9]{1,8}"),
                proptest::option::of(text)
            )
                .prop_map(|(name, call_id, t)| (
                    DataType::Text,
                    false,
                    0,
                    RequestContent {
                        text: t,
                        function_result: Some(FunctionResult {
                            name,
                            call_id,
                            result: json!({"ok": true})
                        }),
                        ..Default::default()
                    }
                )),
            b64.prop_map(|v| (
                DataType::Voice,
                false,
                0,
                RequestContent {
                    voice_mode: Some(VoiceMode::Base64),
                    voice: Some(v),
                    ..Default::default()
                }
            )),
            (-1i64..1000, proptest::option::of(b64)).prop_map(|(seq, v)| (
                DataType::Voice,
                true,
                seq,
                RequestContent {
                    voice_mode: Some(VoiceMode::Base64),
                    voice: v,
                    ..Default::default()
                }
            )),
            (
                select(vec![0i64, -1]),
                select(vec![None, Some(String::new())])
            )
                .prop_map(|(seq, v)| (
                    DataType::Voice,
                    true,
                    seq,
                    RequestContent {
                        voice_mode: Some(VoiceMode::Binary),
                        voice: v,
                        ..Default::default()
                    }
                )),
        ];
        let functions = prop_oneof![
            Just((None, None)),
            (
                select(vec![
                    FunctionOp::Replace,
                    FunctionOp::Add,
                    FunctionOp::Update,
                    FunctionOp::Delete
                ]),
                function_list()
            )
                .prop_map(|(op, l)| (Some(op), Some(l))),
        ];
        (
            "[a-zA-Z0-9_.:-]{1,128}",
            shape,
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            functions,
        )
            .prop_map(
                |(
                    request_id,
                    (data_type, stream_flag, stream_seq, content),
                    require_tts,
                    enable_srs,
                    (function_calling_op, function_calling),
                )| {
                    // Built from JSON so optional members added later default to absent.
                    let p = json!({
                        "request_id": request_id, "data_type": data_type, "stream_flag": stream_flag,
                        "stream_seq": stream_seq, "require_tts": require_tts, "enable_srs": enable_srs,
                        "function_calling_op": function_calling_op,
                        "function_calling": function_calling, "content": content,
                    });
                    ClientMessage::Request(serde_json::from_value(p).unwrap())
                },
            )
    }

    fn fields() -> impl Strategy<Value = Option<Vec<String>>> {
        proptest::option::of(proptest::collection::vec("[a-z_]{1,16}", 0..4))
    }

    fn client_message() -> impl Strategy<Value = ClientMessage> {
        let reason = select(vec![
            InterruptReason::UserNewInput,
            InterruptReason::UserStop,
            InterruptReason::ClientError,
        ]);
        prop_oneof![
            register(),
            request(),
            (proptest::option::of("[a-z0-9_]{1,20}"), reason).prop_map(|(id, reason)| {
                ClientMessage::Interrupt(InterruptPayload {
                    interrupt_request_id: id,
                    reason,
                })
            }),
            fields().prop_map(
                |query_fields| ClientMessage::SessionQuery(SessionQueryPayload { query_fields })
            ),
            "\\PC{0,30}".prop_map(|reason| ClientMessage::Shutdown(ShutdownPayload { reason })),
            proptest::option::of("[A-Z_]{1,10}").prop_map(|client_status| {
                ClientMessage::HeartbeatReply(HeartbeatReplyPayload { client_status })
            }),
            fields().prop_map(
                |check_fields| ClientMessage::HealthCheck(HealthCheckPayload { check_fields })
            ),
        ]
    }

    fn client_frame() -> impl Strategy<Value = ClientFrame> {
        (client_message(), "[a-z0-9_]{0,40}", 0i64..4_000_000_000_000)
            .prop_map(|(m, sid, ts)| ClientFrame::new(Some(&sid), m, ts))
    }

    /// What the server does with a text frame: decode, then the REQUEST rules.
    fn verdict(text: &str) -> Result<ClientFrame, DecodeError> {
        let f = decode_client(text)?;
        if let ClientMessage::Request(p) = &f.message {
            p.kind(MAX_TEXT)?;
        }
        Ok(f)
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Kind {
        Str,
        Bool,
        Int,
        Num,
        Arr,
        Obj,
    }

    /// One field of a frame, by JSON pointer (`/payload/content/text`).
    #[derive(Clone, Copy)]
    struct Field {
        ptr: &'static str,
        kind: Kind,
        /// Must be present (absence is an error).
        required: bool,
        /// `null` reads as absent (an `Option`).
        null_ok: bool,
        /// Only broken when present (members of one variant, list elements).
        only_if_present: bool,
        /// The values an enumerated field takes.
        variants: &'static [&'static str],
    }

    const fn f(ptr: &'static str, kind: Kind, required: bool) -> Field {
        Field {
            ptr,
            kind,
            required,
            null_ok: !required,
            only_if_present: false,
            variants: &[],
        }
    }

    const fn present(mut x: Field) -> Field {
        x.only_if_present = true;
        x
    }

    const fn one_of(mut x: Field, variants: &'static [&'static str]) -> Field {
        x.variants = variants;
        x
    }

    const fn not_null(mut x: Field) -> Field {
        x.null_ok = false;
        x
    }

    use Kind::*;

    const ENVELOPE: &[Field] = &[
        f("/version", Str, true),
        f("/msg_type", Str, true),
        f("/session_id", Str, false),
        f("/timestamp", Num, true),
        f("/payload", Obj, true),
    ];

    fn payload_fields(msg_type: &str) -> Vec<Field> {
        let mut v = match msg_type {
            "REGISTER" => vec![
                f("/payload/auth", Obj, true),
                one_of(f("/payload/auth/type", Str, true), &["API_KEY", "ACCOUNT"]),
                present(f("/payload/auth/api_key", Str, true)),
                present(f("/payload/auth/account", Str, true)),
                present(f("/payload/auth/password", Str, true)),
                one_of(
                    f("/payload/platform", Str, true),
                    &["WEB", "APP", "MINI_PROGRAM", "TV"],
                ),
                f("/payload/require_tts", Bool, true),
                f("/payload/enable_srs", Bool, false),
                f("/payload/function_calling", Arr, true),
            ],
            "REQUEST" => vec![
                f("/payload/request_id", Str, true),
                one_of(f("/payload/data_type", Str, true), &["TEXT", "VOICE"]),
                f("/payload/stream_flag", Bool, true),
                f("/payload/stream_seq", Int, true),
                f("/payload/require_tts", Bool, false),
                f("/payload/enable_srs", Bool, false),
                one_of(
                    f("/payload/function_calling_op", Str, false),
                    &["REPLACE", "ADD", "UPDATE", "DELETE"],
                ),
                f("/payload/function_calling", Arr, false),
                f("/payload/content", Obj, true),
                one_of(
                    f("/payload/content/voice_mode", Str, false),
                    &["BASE64", "BINARY"],
                ),
                f("/payload/content/text", Str, false),
                f("/payload/content/voice", Str, false),
                f("/payload/content/function_result", Obj, false),
                present(f("/payload/content/function_result/name", Str, true)),
                present(f("/payload/content/function_result/call_id", Str, false)),
            ],
            "INTERRUPT" => vec![
                f("/payload/interrupt_request_id", Str, false),
                one_of(
                    f("/payload/reason", Str, true),
                    &["USER_NEW_INPUT", "USER_STOP", "CLIENT_ERROR"],
                ),
            ],
            "SESSION_QUERY" => vec![
                f("/payload/query_fields", Arr, false),
                present(f("/payload/query_fields/0", Str, true)),
            ],
            // `reason` defaults to "" when absent, but null is not a string.
            "SHUTDOWN" => vec![not_null(f("/payload/reason", Str, false))],
            "HEARTBEAT_REPLY" => vec![f("/payload/client_status", Str, false)],
            "HEALTH_CHECK" => vec![
                f("/payload/check_fields", Arr, false),
                present(f("/payload/check_fields/0", Str, true)),
            ],
            other => panic!("no field table for {other}"),
        };
        if matches!(msg_type, "REGISTER" | "REQUEST") {
            v.extend([
                present(f("/payload/function_calling/0", Obj, true)),
                present(f("/payload/function_calling/0/name", Str, true)),
                present(f("/payload/function_calling/0/description", Str, false)),
            ]);
        }
        v
    }

    /// `/payload/function_calling/0/name` → `payload.function_calling[0].name` (serde's path).
    fn field_name(ptr: &str) -> String {
        let mut out = String::new();
        for seg in ptr.trim_start_matches('/').split('/') {
            if seg.bytes().all(|b| b.is_ascii_digit()) {
                out.push_str(&format!("[{seg}]"));
            } else {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(seg);
            }
        }
        out
    }

    fn parent(ptr: &str) -> &str {
        &ptr[..ptr.rfind('/').unwrap()]
    }

    fn leaf(ptr: &str) -> &str {
        &ptr[ptr.rfind('/').unwrap() + 1..]
    }

    fn set(v: &mut Value, ptr: &str, x: Value) {
        match v.pointer_mut(parent(ptr)).unwrap() {
            Value::Object(o) => {
                o.insert(leaf(ptr).to_string(), x);
            }
            Value::Array(a) => a[leaf(ptr).parse::<usize>().unwrap()] = x,
            other => panic!("{ptr}: parent is {other}"),
        }
    }

    fn remove(v: &mut Value, ptr: &str) {
        if let Some(Value::Object(o)) = v.pointer_mut(parent(ptr)) {
            o.remove(leaf(ptr));
        }
    }

    /// A value of another JSON type than `kind`; `null` only when it is not read as absent.
    fn wrong_value(kind: Kind, null: bool) -> BoxedStrategy<Value> {
        let mut o: Vec<BoxedStrategy<Value>> = Vec::new();
        if kind != Str {
            o.push("[a-zA-Z0-9 ]{0,8}".prop_map(Value::from).boxed());
        }
        if kind != Bool {
            o.push(any::<bool>().prop_map(Value::from).boxed());
        }
        if !matches!(kind, Int | Num) {
            o.push(any::<i64>().prop_map(Value::from).boxed());
        }
        if kind != Num {
            o.push(
                (-1e9f64..1e9)
                    .prop_filter("a fraction", |x| x.fract() != 0.0)
                    .prop_map(Value::from)
                    .boxed(),
            );
        }
        if kind != Arr {
            o.push(
                proptest::collection::vec(any::<i32>(), 0..3)
                    .prop_map(|v| json!(v))
                    .boxed(),
            );
        }
        if kind != Obj {
            o.push(
                proptest::collection::btree_map("[a-z]{1,6}", any::<i32>(), 0..3)
                    .prop_map(|m| json!(m))
                    .boxed(),
            );
        }
        if null {
            o.push(Just(Value::Null).boxed());
        }
        Union::new(o).boxed()
    }

    /// A string outside `variants` (other words, lower case, padded).
    fn bad_variant(variants: &'static [&'static str]) -> BoxedStrategy<String> {
        prop_oneof![
            "[A-Z_]{1,14}",
            select(variants.to_vec()).prop_map(|v| v.to_lowercase()),
            select(variants.to_vec()).prop_map(|v| format!(" {v}")),
        ]
        .prop_filter("a listed value", move |s| !variants.contains(&s.as_str()))
        .boxed()
    }

    /// A frame with one field broken and the verdict it must get.
    #[derive(Debug, Clone)]
    struct Broken {
        what: String,
        text: String,
        code: ErrorCode,
        /// Each must appear in `error_detail`.
        names: Vec<String>,
        request_id: Option<String>,
    }

    fn broken(
        base: &Value,
        what: String,
        change: impl FnOnce(&mut Value),
        code: ErrorCode,
        names: Vec<String>,
        ties_request: bool,
    ) -> Broken {
        let mut v = base.clone();
        change(&mut v);
        let request_id = if ties_request {
            base["payload"]["request_id"].as_str().map(str::to_string)
        } else {
            None
        };
        Broken {
            what,
            text: v.to_string(),
            code,
            names,
            request_id,
        }
    }

    /// Every way to break one field of `frame`, each with its expected verdict.
    fn breakages(frame: &ClientFrame) -> Vec<BoxedStrategy<Broken>> {
        let base: Value = serde_json::from_str(&frame.encode()).unwrap();
        let msg_type = frame.message.msg_type();
        let is_request = msg_type == "REQUEST";
        let malformed = ErrorCode::MalformedPayload;
        let mut out: Vec<BoxedStrategy<Broken>> = Vec::new();
        let mut table: Vec<Field> = ENVELOPE.to_vec();
        table.extend(payload_fields(msg_type));
        for field in table {
            let ptr = field.ptr;
            let exists = base.pointer(ptr).is_some();
            if base.pointer(parent(ptr)).is_none() || (field.only_if_present && !exists) {
                continue;
            }
            let name = field_name(ptr);
            // A broken member of a REQUEST payload still ties the error to its request.
            let ties = is_request && ptr.starts_with("/payload/") && ptr != "/payload/request_id";
            let b = base.clone();
            let n = name.clone();
            out.push(
                wrong_value(field.kind, !field.null_ok)
                    .prop_map(move |x| {
                        broken(
                            &b,
                            format!("{n} = {x}"),
                            |v| set(v, ptr, x),
                            malformed,
                            vec![format!("`{n}`")],
                            ties,
                        )
                    })
                    .boxed(),
            );
            if field.required && exists {
                let names = match parent(ptr) {
                    "" => vec![format!("missing field `{}`", leaf(ptr))],
                    "/payload" => vec![format!("payload: missing field `{}`", leaf(ptr))],
                    p => vec![
                        format!("`{}`", field_name(p)),
                        format!("missing field `{}`", leaf(ptr)),
                    ],
                };
                // Removing an element of a list is not a missing field.
                if !leaf(ptr).bytes().all(|b| b.is_ascii_digit()) {
                    out.push(
                        Just(broken(
                            &base,
                            format!("{name} missing"),
                            |v| remove(v, ptr),
                            malformed,
                            names,
                            ties,
                        ))
                        .boxed(),
                    );
                }
            }
            if !field.variants.is_empty() {
                let b = base.clone();
                let n = name.clone();
                out.push(
                    bad_variant(field.variants)
                        .prop_map(move |x| {
                            broken(
                                &b,
                                format!("{n} = {x:?}"),
                                |v| set(v, ptr, x.into()),
                                malformed,
                                vec![format!("`{n}`")],
                                ties,
                            )
                        })
                        .boxed(),
                );
            }
        }
        // Values of the right type out of range.
        let b = base.clone();
        out.push(
            prop_oneof![
                "(0|[2-9])\\.[0-9]",
                Just("1.".to_string()),
                Just("v1.0".to_string()),
                Just(String::new())
            ]
            .prop_map(move |x| {
                broken(
                    &b,
                    format!("version {x:?}"),
                    |v| set(v, "/version", x.into()),
                    malformed,
                    vec!["`version`".into()],
                    false,
                )
            })
            .boxed(),
        );
        let b = base.clone();
        out.push(
            bad_variant(&ClientMessage::TYPES)
                .prop_map(move |x| {
                    broken(
                        &b,
                        format!("msg_type {x:?}"),
                        |v| set(v, "/msg_type", x.into()),
                        malformed,
                        vec!["`msg_type`".into()],
                        false,
                    )
                })
                .boxed(),
        );
        out.extend(function_list_breakages(&base, msg_type));
        if let ClientMessage::Request(p) = &frame.message {
            out.extend(request_breakages(&base, p));
        }
        out
    }

    /// A definition list with one bad entry: a bad name, a repeated name, a bad parameter.
    fn function_list_breakages(base: &Value, msg_type: &str) -> Vec<BoxedStrategy<Broken>> {
        let list = match base["payload"].get("function_calling") {
            Some(Value::Array(l)) => l.clone(),
            _ => return vec![],
        };
        // DELETE lists are names only: their definitions are not checked.
        if base["payload"]["function_calling_op"] == "DELETE" {
            return vec![];
        }
        let ties = msg_type == "REQUEST";
        let mut out = Vec::new();
        let b = base.clone();
        let bad_name = prop_oneof![
            Just(String::new()),
            "[a-z]{1,5}[ ./é][a-z]{1,5}",
            "[a-z]{65,70}",
        ];
        let len = list.len();
        out.push(
            (0..=len, bad_name)
                .prop_map(move |(at, name)| {
                    let mut l = list.clone();
                    l.insert(at, json!({"name": name}));
                    broken(
                        &b,
                        format!("function name {name:?} at {at}"),
                        |v| v["payload"]["function_calling"] = Value::Array(l),
                        ErrorCode::MalformedPayload,
                        vec![format!("`payload.function_calling[{at}].name`")],
                        ties,
                    )
                })
                .boxed(),
        );
        if let Some(Value::Array(l)) = base["payload"].get("function_calling")
            && let Some(first) = l.first().cloned()
        {
            let mut dup = l.clone();
            dup.push(json!({"name": first["name"]}));
            let at = dup.len() - 1;
            out.push(
                Just(broken(
                    base,
                    "a repeated function name".into(),
                    |v| v["payload"]["function_calling"] = Value::Array(dup),
                    ErrorCode::MalformedPayload,
                    vec![format!("`payload.function_calling[{at}].name`")],
                    ties,
                ))
                .boxed(),
            );
            let b = base.clone();
            let l = l.clone();
            out.push(
                prop_oneof![
                    Just(json!([{"name": "x", "type": "str"}])),
                    Just(json!([{"type": "string"}])),
                    Just(json!(5)),
                    Just(json!("string")),
                    Just(json!({"type": "array"})),
                ]
                .prop_map(move |params| {
                    let field = match &params {
                        Value::Array(a) if a[0].get("name").is_some() => "parameters[0].type",
                        Value::Array(_) => "parameters[0].name",
                        Value::Object(_) => "parameters.type",
                        _ => "parameters",
                    };
                    let mut l = l.clone();
                    l[0]["parameters"] = params.clone();
                    broken(
                        &b,
                        format!("parameters {params}"),
                        |v| v["payload"]["function_calling"] = Value::Array(l),
                        ErrorCode::MalformedPayload,
                        vec![format!("`payload.function_calling[0].{field}`")],
                        ties,
                    )
                })
                .boxed(),
            );
        }
        out
    }

    /// The REQUEST rules of spec §4.3 and docs/protocol.md, one broken at a time.
    fn request_breakages(base: &Value, p: &RequestPayload) -> Vec<BoxedStrategy<Broken>> {
        let mut out: Vec<BoxedStrategy<Broken>> = Vec::new();
        let b = base.clone();
        out.push(
            prop_oneof![Just(String::new()), "[a-z]{129,200}"]
                .prop_map(move |id| {
                    broken(
                        &b,
                        format!("request_id of {} bytes", id.len()),
                        |v| v["payload"]["request_id"] = id.into(),
                        ErrorCode::MalformedPayload,
                        vec!["`payload.request_id`".into()],
                        false,
                    )
                })
                .boxed(),
        );
        let b = base.clone();
        out.push(
            prop_oneof![
                (i64::MIN..-1).prop_map(Value::from),
                (i64::MAX as u64 + 1..=u64::MAX).prop_map(Value::from),
            ]
            .prop_map(move |seq| {
                let code = if seq.is_i64() {
                    ErrorCode::StreamSeqError
                } else {
                    ErrorCode::MalformedPayload
                };
                broken(
                    &b,
                    format!("stream_seq {seq}"),
                    |v| v["payload"]["stream_seq"] = seq,
                    code,
                    vec!["`payload.stream_seq`".into()],
                    true,
                )
            })
            .boxed(),
        );
        // `function_calling_op` and `function_calling` come together.
        let mut v = base.clone();
        let missing = if p.function_calling.is_some() {
            remove(&mut v, "/payload/function_calling_op");
            "function_calling_op"
        } else {
            v["payload"]["function_calling_op"] = "ADD".into();
            "function_calling"
        };
        out.push(
            Just(Broken {
                what: format!("without {missing}"),
                text: v.to_string(),
                code: ErrorCode::MalformedPayload,
                names: vec![format!("`payload.{missing}`")],
                request_id: Some(p.request_id.clone()),
            })
            .boxed(),
        );
        // One member set (or, with `None`, removed) against the rules of its kind of request.
        let rule = |what: &str, ptr: &'static str, x: Option<Value>, code, field: &str| {
            let change = |v: &mut Value| match x {
                Some(x) => set(v, ptr, x),
                None => remove(v, ptr),
            };
            Just(broken(
                base,
                what.into(),
                change,
                code,
                vec![format!("`{field}`")],
                true,
            ))
            .boxed()
        };
        let seq_rule = |what: &'static str| {
            let b = base.clone();
            (1i64..1000)
                .prop_map(move |seq| {
                    broken(
                        &b,
                        format!("{what} {seq}"),
                        |v| set(v, "/payload/stream_seq", seq.into()),
                        ErrorCode::StreamSeqError,
                        vec!["`payload.stream_seq`".into()],
                        true,
                    )
                })
                .boxed()
        };
        let malformed = ErrorCode::MalformedPayload;
        if p.data_type == DataType::Text {
            let flag = Some(true.into());
            out.push(rule(
                "TEXT with stream_flag true",
                "/payload/stream_flag",
                flag,
                malformed,
                "payload.stream_flag",
            ));
            out.push(seq_rule("TEXT with stream_seq"));
            if p.content.function_result.is_none() {
                let text = "/payload/content/text";
                out.push(rule(
                    "TEXT without text",
                    text,
                    None,
                    malformed,
                    "payload.content.text",
                ));
                let b = base.clone();
                out.push(
                    (MAX_TEXT + 1..MAX_TEXT * 2)
                        .prop_map(move |n| {
                            broken(
                                &b,
                                format!("text of {n} characters"),
                                |v| set(v, text, "字".repeat(n).into()),
                                ErrorCode::PayloadTooLarge,
                                vec!["`payload.content.text`".into()],
                                true,
                            )
                        })
                        .boxed(),
                );
            }
        }
        if p.data_type == DataType::Voice {
            let mode = "/payload/content/voice_mode";
            out.push(rule(
                "VOICE without voice_mode",
                mode,
                None,
                malformed,
                "payload.content.voice_mode",
            ));
            let voice = "/payload/content/voice";
            match p.content.voice_mode {
                Some(VoiceMode::Binary) => {
                    let flag = Some(false.into());
                    out.push(rule(
                        "BINARY with stream_flag false",
                        "/payload/stream_flag",
                        flag,
                        malformed,
                        "payload.stream_flag",
                    ));
                    out.push(seq_rule("BINARY control frame with stream_seq"));
                    let audio = Some("AAAA".into());
                    out.push(rule(
                        "BINARY with audio in content.voice",
                        voice,
                        audio,
                        malformed,
                        "payload.content.voice",
                    ));
                }
                _ if !p.stream_flag => {
                    out.push(rule(
                        "whole BASE64 upload without voice",
                        voice,
                        None,
                        malformed,
                        "payload.content.voice",
                    ));
                }
                _ => {}
            }
        }
        out
    }

    fn broken_frame() -> impl Strategy<Value = Broken> {
        client_frame().prop_flat_map(|f| Union::new(breakages(&f)))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// One broken field: the documented ERROR, naming that field, never a panic.
        #[test]
        fn one_broken_field_gets_the_documented_error(b in broken_frame()) {
            let e = match verdict(&b.text) {
                Ok(f) => return Err(TestCaseError::fail(format!(
                    "{}: accepted as {f:?}\n{}", b.what, b.text))),
                Err(e) => e,
            };
            prop_assert_eq!(e.code, b.code, "{}: {}\n{}", b.what, e.detail, b.text);
            for n in &b.names {
                prop_assert!(e.detail.contains(n.as_str()),
                    "{}: detail {:?} does not name {}\n{}", b.what, e.detail, n, b.text);
            }
            prop_assert_eq!(&e.request_id, &b.request_id, "{}: {}\n{}", b.what, e.detail, b.text);
            // It becomes an ERROR payload with the spec's retryable flag.
            let p = e.clone().into_payload();
            prop_assert_eq!(p.retryable, e.code.retryable());
        }

        /// Valid frames of every client type decode to what was encoded and pass the REQUEST rules.
        #[test]
        fn valid_frames_round_trip(f in client_frame()) {
            let text = f.encode();
            let back = verdict(&text).map_err(|e| TestCaseError::fail(format!("{e:?}\n{text}")))?;
            prop_assert_eq!(back, f);
        }

        /// Unknown members anywhere (envelope, payload, content) are ignored: extensions.
        #[test]
        fn unknown_members_are_ignored(
            f in client_frame(),
            at in select(vec!["", "/payload", "/payload/content", "/payload/auth"]),
            key in "x_[a-z]{1,8}",
            value in prop_oneof![Just(json!(null)), Just(json!([1, {"a": "b"}])), "\\PC{0,10}".prop_map(Value::from)],
        ) {
            let mut v: Value = serde_json::from_str(&f.encode()).unwrap();
            if let Some(Value::Object(o)) = v.pointer_mut(at) {
                o.insert(key, value);
            }
            let text = v.to_string();
            let back = verdict(&text).map_err(|e| TestCaseError::fail(format!("{e:?}\n{text}")))?;
            prop_assert_eq!(back, f);
        }
    }
}

/// The per-token encoder writes the same bytes as the general one.
#[test]
fn text_chunks_encode_as_the_general_encoder_does() {
    for text in [
        "",
        "plain",
        "quote \" backslash \\ newline \n tab \t",
        "你好 🎨 \u{1}",
    ] {
        for (sid, rid, seq) in [("", "r", 0), ("sess-1", "req \"x\"", 41)] {
            let general = encode_server(
                sid,
                &ServerMessage::Response(Response::text(rid, seq, text)),
                1740000000000,
            );
            assert_eq!(
                encode_text_chunk(sid, rid, seq, text, 1740000000000),
                general
            );
        }
    }
}

mod resume {
    use crate::protocol::{ClientMessage, SeenUpTo, decode_client};

    #[test]
    fn register_with_resume_decodes_last_seen_in_both_forms() {
        let f = r#"{"version":"1.0","msg_type":"REGISTER","session_id":"","timestamp":1,
            "payload":{"auth":{"type":"API_KEY","api_key":"k"},"platform":"WEB","require_tts":false,
            "function_calling":[],"resume":{"session_id":"sess_1","resume_token":"rt_x",
            "last_seen":{"a":[3,-1],"b":[null,2,1]}}}}"#;
        let ClientMessage::Register(p) = decode_client(f).unwrap().message else {
            panic!()
        };
        let r = p.resume.unwrap();
        assert_eq!(r.session_id, "sess_1");
        let a = SeenUpTo {
            text: 3,
            voice: -1,
            unsequenced: None,
        };
        let b = SeenUpTo {
            text: -1,
            voice: 2,
            unsequenced: Some(1),
        };
        assert_eq!(r.last_seen["a"], a);
        assert_eq!(r.last_seen["b"], b);
        // A wrong shape is named.
        let bad = f.replace("[3,-1]", "\"x\"");
        let e = decode_client(&bad).unwrap_err();
        assert!(
            e.detail.contains("payload.resume.last_seen"),
            "{}",
            e.detail
        );
    }
}

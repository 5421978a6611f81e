//! Frame decode and encode, the hottest pure path: every client frame is decoded and every
//! server frame encoded.
//!
//! Run: `cargo bench --bench protocol`. Prints ns per operation (median of batches).

use std::hint::black_box;
use std::time::Instant;

use museum_agent::protocol::{Response, ServerMessage, decode_client, encode_server};

fn measure(name: &str, batch: usize, mut f: impl FnMut()) {
    let mut per_op = Vec::new();
    for b in 0..60 {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        if b >= 10 {
            per_op.push(t.elapsed().as_nanos() as f64 / batch as f64);
        }
    }
    per_op.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name:<44} median {:>7.0} ns/op   p90 {:>7.0} ns/op",
        per_op[per_op.len() / 2],
        per_op[per_op.len() * 9 / 10]
    );
}

fn main() {
    let text_request = r#"{"version":"1.0","msg_type":"REQUEST","session_id":"sess_0123456789abcdef0123456789abcdef","payload":{"request_id":"req_123","data_type":"TEXT","stream_flag":false,"stream_seq":0,"content":{"text":"这件青铜鼎是什么年代的？"}},"timestamp":1740000000000}"#;
    let heartbeat = r#"{"version":"1.0","msg_type":"HEARTBEAT_REPLY","session_id":"sess_0123456789abcdef0123456789abcdef","payload":{"client_status":"ONLINE"},"timestamp":1740000000000}"#;
    let register = r#"{"version":"1.0","msg_type":"REGISTER","session_id":"","payload":{"auth":{"type":"API_KEY","api_key":"mak_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},"platform":"WEB","require_tts":true,"enable_srs":true,"function_calling":[{"name":"show_exhibit","description":"Show an exhibit","parameters":[{"name":"exhibit_id","type":"string"}]}]},"timestamp":1740000000000}"#;
    measure("decode REQUEST (text)", 20_000, || {
        black_box(decode_client(black_box(text_request)).unwrap());
    });
    measure("decode HEARTBEAT_REPLY", 20_000, || {
        black_box(decode_client(black_box(heartbeat)).unwrap());
    });
    measure("decode REGISTER (one function)", 20_000, || {
        black_box(decode_client(black_box(register)).unwrap());
    });
    measure("decode garbage (MALFORMED_PAYLOAD)", 20_000, || {
        black_box(decode_client(black_box("{\"version\":\"1.0\",\"msg_type\":")).unwrap_err());
    });
    let chunk = ServerMessage::Response(Response::text("req_123", 7, "距今约三千年，"));
    measure("encode RESPONSE (text chunk)", 20_000, || {
        black_box(encode_server(
            black_box("sess_0123456789abcdef0123456789abcdef"),
            &chunk,
            1740000000000,
        ));
    });
    let voice = ServerMessage::Response(museum_agent::protocol::Response {
        request_id: "req_123".into(),
        voice_stream_seq: Some(3),
        content: Some(museum_agent::protocol::ResponseContent {
            text: None,
            voice: Some("A".repeat(6828)),
        }),
        ..Default::default()
    });
    measure("encode RESPONSE (160 ms voice chunk)", 5_000, || {
        black_box(encode_server(
            "sess_0123456789abcdef0123456789abcdef",
            &voice,
            1740000000000,
        ));
    });
}

//! The session state machine driven by a fuzzed sequence of frames (text built from a small
//! vocabulary of valid and broken frames, and binary frames), over channels with no network.
//! Whatever arrives, the session must not panic and must answer or close.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use museum_agent::auth::generate_api_key;
use museum_agent::request::outbox::Outbox;
use museum_agent::session::{self, Inbound};
use museum_agent::store::Store;
use museum_agent::{AppState, Config};
use tokio_util::sync::CancellationToken;

fn key() -> &'static (Store, String) {
    static K: OnceLock<(Store, String)> = OnceLock::new();
    K.get_or_init(|| {
        let store = Store::open_in_memory().unwrap();
        let k = generate_api_key();
        store.insert_api_key("fuzz", &k.prefix, &k.hash).unwrap();
        (store, k.key)
    })
}

fn frame(msg_type: &str, payload: &str) -> String {
    format!(r#"{{"version":"1.0","msg_type":"{msg_type}","session_id":"$SID","payload":{payload},"timestamp":1}}"#)
}

fuzz_target!(|data: &[u8]| {
    let (store, api_key) = key();
    let reg = format!(
        r#"{{"version":"1.0","msg_type":"REGISTER","session_id":"","payload":{{"auth":{{"type":"API_KEY","api_key":"{api_key}"}},"platform":"WEB","require_tts":false,"function_calling":[{{"name":"show"}}]}},"timestamp":1}}"#
    );
    let vocab: Vec<String> = vec![
        reg,
        frame("REQUEST", r#"{"request_id":"a","data_type":"TEXT","stream_flag":false,"stream_seq":0,"content":{"text":""}}"#),
        frame("REQUEST", r#"{"request_id":"b","data_type":"VOICE","stream_flag":true,"stream_seq":0,"content":{"voice_mode":"BINARY"}}"#),
        frame("REQUEST", r#"{"request_id":"b","data_type":"VOICE","stream_flag":true,"stream_seq":-1,"content":{"voice_mode":"BINARY"}}"#),
        frame("REQUEST", r#"{"request_id":"c","data_type":"VOICE","stream_flag":true,"stream_seq":0,"content":{"voice_mode":"BASE64","voice":"AAAA"}}"#),
        frame("REQUEST", r#"{"request_id":"c","data_type":"VOICE","stream_flag":true,"stream_seq":1,"content":{"voice_mode":"BASE64","voice":"AAA"}}"#),
        frame("REQUEST", r#"{"request_id":"c","data_type":"VOICE","stream_flag":true,"stream_seq":-1,"content":{"voice_mode":"BASE64"}}"#),
        frame("REQUEST", r#"{"request_id":"d","data_type":"TEXT","stream_flag":false,"stream_seq":0,"function_calling_op":"DELETE","function_calling":[{"name":"show"}],"content":{"text":""}}"#),
        frame("INTERRUPT", r#"{"reason":"USER_STOP"}"#),
        frame("INTERRUPT", r#"{"interrupt_request_id":"b","reason":"USER_NEW_INPUT"}"#),
        frame("SESSION_QUERY", r#"{}"#),
        frame("HEARTBEAT_REPLY", r#"{"client_status":"ONLINE"}"#),
        frame("HEALTH_CHECK", r#"{"check_fields":["status"]}"#),
        frame("SHUTDOWN", r#"{"reason":"x"}"#),
    ];
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap();
    rt.block_on(async {
        let mut config = Config::default();
        config.llm.provider = museum_agent::config::LlmProviderKind::None;
        let app = AppState::new(config, store.clone(), None);
        let token = CancellationToken::new();
        let (outbox, mut rx) = Outbox::new(1024, token.clone(), Duration::from_secs(10));
        let (tx, in_rx) = tokio::sync::mpsc::channel::<Inbound>(1024);
        let stream = Box::pin(futures_util::stream::unfold(in_rx, |mut rx| async move {
            rx.recv().await.map(|m| (m, rx))
        }));
        let task = tokio::spawn(session::run(stream, outbox, token, IpAddr::V4(Ipv4Addr::LOCALHOST), app));
        let mut sid = String::new();
        for chunk in data.chunks(3) {
            let (inbound, is_register) = match chunk {
                [0, n, ..] => (Inbound::Binary(bytes::Bytes::from(vec![0u8; *n as usize])), false),
                [1, rest @ ..] => (Inbound::Text(String::from_utf8_lossy(rest).into_owned()), false),
                [i, ..] => {
                    let i = *i as usize % vocab.len();
                    (Inbound::Text(vocab[i].replace("$SID", &sid)), i == 0)
                }
                [] => continue,
            };
            if tx.send(inbound).await.is_err() {
                break;
            }
            if is_register {
                // Registration runs on the blocking pool: wait for its answer (bounded).
                while let Ok(Some(f)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
                    if let museum_agent::request::outbox::OutKind::Text(t) = &f.kind {
                        if t.contains("REGISTER_ACK") {
                            if let Some(p) = t.find("\"session_id\":\"sess_") {
                                sid = t[p + 14..p + 14 + 37].to_string();
                            }
                            break;
                        }
                        if t.contains("\"ERROR\"") {
                            break;
                        }
                    } else {
                        break;
                    }
                }
            }
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
            while rx.try_recv().is_ok() {}
        }
        drop(tx);
        let drain = async { while rx.recv().await.is_some() {} };
        let _ = tokio::time::timeout(Duration::from_secs(600), async { tokio::join!(task, drain) }).await;
    });
});

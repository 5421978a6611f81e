use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_llm::text_chunk;
use crate::support::*;

#[tokio::test]
async fn interrupt_mid_stream_acks_then_final_frame_then_silence() {
    let app = spawn_app().await;
    // Two chunks, then the upstream would go on forever.
    app.llm.push(Script::StallAfter(vec![
        text_chunk("第一句。"),
        text_chunk("第二句。"),
    ]));
    let mut c = app.client().await;
    c.text_request("req_1", "讲讲这件文物").await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["text_stream_seq"], 0);
    let v = c.recv().await;
    assert_eq!(v["payload"]["text_stream_seq"], 1);

    c.send(
        "INTERRUPT",
        json!({"interrupt_request_id": "req_1", "reason": "USER_NEW_INPUT"}),
    )
    .await;
    let ack = c.recv().await;
    assert_eq!(ack["msg_type"], "INTERRUPT_ACK");
    assert_eq!(ack["payload"]["interrupted_request_ids"], json!(["req_1"]));
    assert_eq!(ack["payload"]["status"], "SUCCESS");
    let fin = c.recv().await;
    assert_eq!(
        fin["payload"],
        json!({"request_id": "req_1", "text_stream_seq": -1, "voice_stream_seq": -1,
               "interrupted": true, "interrupt_reason": "USER_NEW_INPUT", "content": {}})
    );
    // The upstream saw its connection dropped; after that the pipeline cannot produce anything,
    // and a round trip proves nothing for req_1 was queued behind the final frame.
    app.llm.wait_disconnects(1).await;
    let stray = c.sync().await;
    assert!(stray.is_empty(), "frames after the final one: {stray:?}");

    // The next turn sees the reply cut where the visitor stopped hearing it.
    app.llm
        .push(crate::support::fake_llm::text_reply(&["好的"]));
    c.text_request("req_2", "换个问题").await;
    c.reply("req_2").await;
    let msgs = app.llm.requests()[1]["messages"].clone();
    let cut = msgs
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        cut.starts_with("第一句。第二句。") && cut.contains("cut off"),
        "{cut}"
    );
}

#[tokio::test]
async fn interrupt_with_nothing_in_flight_fails_with_an_empty_list() {
    let app = spawn_app().await;
    let mut c = app.client().await;
    for payload in [
        json!({"reason": "USER_STOP"}),
        json!({"interrupt_request_id": "", "reason": "USER_STOP"}),
        json!({"interrupt_request_id": "nope", "reason": "CLIENT_ERROR"}),
    ] {
        c.send("INTERRUPT", payload).await;
        let ack = c.recv().await;
        assert_eq!(ack["payload"]["interrupted_request_ids"], json!([]));
        assert_eq!(ack["payload"]["status"], "FAILED");
    }
    // A finished request cannot be interrupted either.
    app.llm
        .push(crate::support::fake_llm::text_reply(&["done"]));
    c.text_request("r1", "q").await;
    c.reply("r1").await;
    c.send(
        "INTERRUPT",
        json!({"interrupt_request_id": "r1", "reason": "USER_STOP"}),
    )
    .await;
    assert_eq!(c.recv().await["payload"]["status"], "FAILED");
}

#[tokio::test]
async fn interrupt_all_cancels_every_request_and_drops_queued_frames() {
    let app = spawn_app().await;
    app.llm.push(Script::StallAfter(vec![text_chunk("a")]));
    app.llm.push(Script::Stall);
    let mut c = app.client().await;
    c.text_request("r1", "q1").await;
    c.text_request("r2", "q2").await;
    assert_eq!(c.recv().await["payload"]["request_id"], "r1");
    app.llm.wait_requests(2).await;
    c.send("INTERRUPT", json!({"reason": "USER_STOP"})).await;
    let ack = c.recv().await;
    assert_eq!(
        ack["payload"]["interrupted_request_ids"],
        json!(["r1", "r2"])
    );
    let mut finals: Vec<Value> = vec![c.recv().await, c.recv().await];
    finals.sort_by_key(|v| v["payload"]["request_id"].as_str().unwrap().to_string());
    for (v, id) in finals.iter().zip(["r1", "r2"]) {
        assert_eq!(v["payload"]["request_id"], id);
        assert_eq!(v["payload"]["interrupted"], true);
        assert_eq!(v["payload"]["interrupt_reason"], "USER_STOP");
    }
    app.llm.wait_disconnects(2).await;
    assert!(c.sync().await.is_empty());
}

#[tokio::test]
async fn interrupt_races_with_a_fast_stream_and_each_request_ends_exactly_once() {
    // Many short replies interrupted at random moments: every request must end with exactly one
    // final frame (normal -1, or interrupted), and nothing may follow it.
    let app = spawn_app().await;
    let mut c = app.client().await;
    for i in 0..20 {
        let chunks: Vec<Value> = (0..30).map(|k| text_chunk(&format!("{k} "))).collect();
        let mut chunks = chunks;
        chunks.push(crate::support::fake_llm::finish_chunk("stop"));
        app.llm.push(Script::Stream {
            chunks,
            delay: Duration::from_micros(200),
            done: true,
        });
        let id = format!("q{i}");
        c.text_request(&id, "go").await;
        // Wait for a varying number of chunks, then interrupt.
        let mut got = 0;
        let mut ended = false;
        while got < i % 7 {
            let v = c.recv().await;
            if v["payload"]["text_stream_seq"] == -1 {
                ended = true;
                break;
            }
            got += 1;
        }
        c.send(
            "INTERRUPT",
            json!({"interrupt_request_id": id, "reason": "USER_NEW_INPUT"}),
        )
        .await;
        let mut finals = usize::from(ended);
        let mut after_final = 0;
        let mut acked = false;
        for v in c.sync().await {
            match v["msg_type"].as_str().unwrap() {
                "INTERRUPT_ACK" => acked = true,
                "RESPONSE" if v["payload"]["text_stream_seq"] == -1 => finals += 1,
                "RESPONSE" if finals > 0 => after_final += 1,
                _ => {}
            }
        }
        assert!(acked);
        assert_eq!(finals, 1, "request {id} must end exactly once");
        assert_eq!(after_final, 0, "nothing after the final frame of {id}");
    }
}

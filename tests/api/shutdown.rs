use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_llm::{finish_chunk, text_chunk};
use crate::support::*;

#[tokio::test]
async fn graceful_shutdown_sends_shutdown_lets_requests_finish_and_exits() {
    let mut app = spawn_app().await;
    let mut idle = app.client().await;
    let mut busy = app.client().await;
    let chunks: Vec<Value> = ["one ", "two ", "three"]
        .iter()
        .map(|t| text_chunk(t))
        .chain([finish_chunk("stop")])
        .collect();
    app.llm.push(Script::Stream {
        chunks,
        delay: Duration::from_millis(100),
        done: true,
    });
    busy.text_request("r1", "long answer please").await;
    assert_eq!(busy.recv().await["payload"]["text_stream_seq"], 0);

    app.shutdown();
    let v = idle.recv().await;
    assert_eq!(v["msg_type"], "SHUTDOWN");
    assert_eq!(idle.expect_closed().await, Some(1001));

    // The busy session is told too, and its request still completes within the grace period.
    let mut seen_shutdown = false;
    let mut text_done = false;
    while !(seen_shutdown && text_done) {
        let v = busy.recv().await;
        match v["msg_type"].as_str().unwrap() {
            "SHUTDOWN" => seen_shutdown = true,
            "RESPONSE" if v["payload"]["text_stream_seq"] == -1 => text_done = true,
            "RESPONSE" => {}
            other => panic!("unexpected {other}: {v}"),
        }
    }
    // New requests during the grace period are refused.
    assert_eq!(busy.expect_closed().await, Some(1001));
    let res = tokio::time::timeout(Duration::from_secs(10), app.server.take().unwrap()).await;
    assert!(res.expect("server exits").unwrap().is_ok());
}

#[tokio::test]
async fn requests_during_the_grace_period_get_server_busy() {
    let mut app = spawn_app().await;
    let mut c = app.client().await;
    app.llm.push(Script::Stall);
    c.text_request("r1", "q").await;
    app.llm.wait_requests(1).await;
    app.shutdown();
    assert_eq!(c.recv().await["msg_type"], "SHUTDOWN");
    c.text_request("r2", "q").await;
    let v = c.recv().await;
    assert_eq!(v["payload"]["error_code"], "SERVER_BUSY");
    assert_eq!(v["payload"]["request_id"], "r2");
    // r1 never finishes: after the grace (5 s in tests) everything is stopped.
    let res = tokio::time::timeout(Duration::from_secs(20), app.server.take().unwrap()).await;
    assert!(res.expect("server exits after the grace").unwrap().is_ok());
}

#[tokio::test]
async fn client_shutdown_cancels_its_requests_and_closes() {
    let app = spawn_app().await;
    app.llm.push(Script::StallAfter(vec![text_chunk("x")]));
    let mut c = app.client().await;
    c.text_request("r1", "q").await;
    c.recv().await;
    c.send("SHUTDOWN", json!({"reason": "用户主动退出"})).await;
    assert_eq!(c.expect_closed().await, Some(1000));
    app.llm.wait_disconnects(1).await;
    // Other sessions are unaffected.
    let mut other = app.client().await;
    other.sync().await;
}

#[tokio::test]
async fn abrupt_disconnect_mid_reply_frees_the_upstream() {
    let app = spawn_app().await;
    app.llm.push(Script::StallAfter(vec![text_chunk("x")]));
    let mut c = app.client().await;
    c.text_request("r1", "q").await;
    c.recv().await;
    drop(c);
    app.llm.wait_disconnects(1).await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_disconnected_and_its_upstream_dropped() {
    let app = spawn_app_with(|c| {
        c.limits.outbound_queue_frames = 4;
        c.limits.slow_client_timeout_seconds = 0.5;
        // Cut off, the session is parked for a resume and the reply streams into its replay
        // buffer until that is full: a small one drops the upstream soon.
        c.session.replay_max_bytes = 64 * 1024;
    })
    .await;
    // ~40 MB of reply: far more than the socket buffers hold.
    let piece = "x".repeat(2000);
    let chunks: Vec<Value> = (0..20_000).map(|_| text_chunk(&piece)).collect();
    app.llm.push(Script::Stream {
        chunks,
        delay: Duration::ZERO,
        done: true,
    });
    let mut c = app.client().await;
    c.text_request("r1", "flood me").await;
    // Never read: the server must give up on us and drop the upstream.
    app.llm.wait_disconnects(1).await;
    drop(c);
    // Other sessions are unaffected.
    let mut other = app.client().await;
    other.sync().await;
}

#[tokio::test]
async fn no_task_outlives_its_connection_after_upstream_faults() {
    let app = spawn_app_with(|c| {
        c.llm.first_token_timeout_seconds = 0.3;
        c.llm.idle_timeout_seconds = 0.3;
        c.llm.max_retries = 0;
        // The dropped session is parked for a resume this long, then ends by itself too.
        c.session.resume_window_seconds = 1;
    })
    .await;
    let mut c = app.client().await;
    app.llm.push(Script::Status(500, "x".into()));
    app.llm.push(Script::Stall);
    app.llm
        .push(Script::StallAfter(vec![text_chunk("partial")]));
    app.llm.push(Script::Stream {
        chunks: vec![text_chunk("cut")],
        delay: Duration::ZERO,
        done: false,
    });
    for i in 0..4 {
        let id = format!("r{i}");
        c.text_request(&id, "q").await;
        assert!(c.reply(&id).await.error.is_some());
    }
    // One more left running when the client vanishes.
    app.llm.push(Script::StallAfter(vec![text_chunk("x")]));
    c.text_request("last", "q").await;
    c.recv().await;
    drop(c);
    // Every connection and pipeline task of the app must finish by itself.
    app.app.tracker.close();
    tokio::time::timeout(Duration::from_secs(10), app.app.tracker.wait())
        .await
        .expect("tasks still running after the client left");
    assert_eq!(
        app.app
            .stats
            .sessions
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(
        app.app
            .stats
            .connections
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

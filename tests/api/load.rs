//! Smoke test of the load tool: every scenario runs briefly with tiny numbers so the tool keeps
//! working. No timing assertions: only that the scenarios complete and count correctly.

use std::time::{Duration, Instant};

use tool::SpawnedServer;
use tool::resume::ResumeParams;
use tool::scenarios::{self, Target};
use tool::upstream::{FakeUpstream, UpstreamTiming};

use crate::support::*;

/// The load tool's own modules (it is a binary, not part of the library), compiled here so the
/// scenarios run in-process against `spawn_app()`. Its unit tests run in this binary too.
#[allow(dead_code)]
#[path = "../../src/bin/museum-agent-load/load/mod.rs"]
mod tool;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_with_tiny_numbers() {
    let epoch = Instant::now();
    let up = FakeUpstream::start(
        epoch,
        UpstreamTiming {
            chunks: 5,
            rate: 0.0,
        },
    )
    .await
    .unwrap();
    let base = up.base_url();
    let app = spawn_app_with(move |c| c.llm.base_url = base).await;
    let t = Target {
        url: app.ws_url(),
        api_key: app.api_key.clone(),
        pid: Some(std::process::id()),
    };

    let r = scenarios::echo(2, 5).await.unwrap();
    assert_eq!(r.get("round trips"), Some(10.0));

    let r = scenarios::stream(&t, &up, epoch, 3, 2, 4, 0.0)
        .await
        .unwrap();
    assert_eq!(r.get("chunks relayed"), Some(24.0), "{}", r.table());
    assert_eq!(r.get("errors"), Some(0.0));
    assert!(r.get("relay latency p99").unwrap() > 0.0);

    let r = scenarios::interrupt(&t, &up, 2, 2).await.unwrap();
    assert_eq!(r.get("interrupts"), Some(4.0), "{}", r.table());
    assert_eq!(r.get("frames after the final frame"), Some(0.0));
    assert_eq!(r.get("upstream never closed"), Some(0.0));

    let r = scenarios::churn(&t, &up, 10, 3).await.unwrap();
    assert_eq!(r.get("failures"), Some(0.0), "{}", r.table());

    // Sockets cut mid-reply and resumed on the same node: every frame once, in order. The
    // replies are written at once, so a cut nearly always leaves frames to replay.
    let r = tool::resume::resume(
        std::slice::from_ref(&t),
        &up,
        epoch,
        ResumeParams {
            sessions: 4,
            cuts: 3,
            chunks: 20,
            rate: 0.0,
            away_ms: 20.0,
            voice: false,
            concurrency: 4,
            spread: true,
        },
    )
    .await
    .unwrap();
    assert_resumed_whole(&r, 12.0);

    let r = scenarios::idle(&t, 5, Duration::from_millis(50), 5)
        .await
        .unwrap();
    assert_eq!(r.get("sessions registered"), Some(5.0), "{}", r.table());
    assert!(r.json()["figures"]["server RSS per session"]["unit"] == "KiB");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_can_spawn_the_real_binary() {
    let epoch = Instant::now();
    let up = FakeUpstream::start(
        epoch,
        UpstreamTiming {
            chunks: 3,
            rate: 0.0,
        },
    )
    .await
    .unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_museum-agent"));
    let mut s = SpawnedServer::start(bin, &up.base_url(), &[])
        .await
        .unwrap();
    let t = Target {
        url: s.url.clone(),
        api_key: s.api_key.clone(),
        pid: Some(s.pid),
    };
    let r = scenarios::stream(&t, &up, epoch, 4, 5, 20, 0.0)
        .await
        .unwrap();
    assert_eq!(r.get("chunks relayed"), Some(400.0), "{}", r.table());
    // A live server that relayed 400 chunks to 4 sessions shows CPU time for it (measured at
    // ~0.2 s, many 10 ms ticks, in a debug build), and never more than every core for the run;
    // a missing reading (NaN) fails both.
    let cpu = r.get("server CPU").unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    assert!(
        cpu > 0.0 && cpu <= 100.0 * cores,
        "server CPU {cpu}% of one core with {cores} cores\n{}",
        r.table()
    );
    let r = scenarios::voice(&t, &up, 2, 0.3).await.unwrap();
    assert_eq!(
        r.get("voice requests completed"),
        Some(2.0),
        "{}",
        r.table()
    );
    assert_eq!(r.get("failed sessions"), Some(0.0));
    assert!(r.get("voice received").unwrap() > 0.0, "{}", r.table());
    assert!(
        r.get("server hop upload_end_to_stt_text p99").is_some(),
        "{}",
        r.table()
    );
    // Spoken replies cut mid-answer and resumed: voice seqs checked too. A chunk every 10 ms
    // and up to 60 ms away: a resume finds nothing held only when it came back before the next
    // chunk (one in six), so at least one of the four is timed.
    let r = tool::resume::resume(
        std::slice::from_ref(&t),
        &up,
        epoch,
        ResumeParams {
            sessions: 2,
            cuts: 2,
            chunks: 10,
            rate: 100.0,
            away_ms: 60.0,
            voice: true,
            concurrency: 2,
            spread: true,
        },
    )
    .await
    .unwrap();
    assert_resumed_whole(&r, 4.0);
    assert!(
        r.get("voice frames received").unwrap() > 0.0,
        "{}",
        r.table()
    );
    s.child.kill().await.unwrap();
}

/// The `resume` scenario's report: `resumes` resumes, none refused, and nothing lost,
/// duplicated or reordered.
fn assert_resumed_whole(r: &tool::Report, resumes: f64) {
    assert_eq!(r.get("resumes"), Some(resumes), "{}", r.table());
    for zero in [
        "resumes refused",
        "frames lost",
        "frames duplicated",
        "frames out of order",
        "request errors",
        "replies without an upstream record",
        "replies ended before the upstream's end",
        "failed sessions",
    ] {
        assert_eq!(r.get(zero), Some(0.0), "{zero}\n{}", r.table());
    }
    assert!(
        r.get("resumes timed (frames replayed)").unwrap() > 0.0,
        "{}",
        r.table()
    );
    assert!(
        r.get("REGISTER -> first replayed frame p99").unwrap() > 0.0,
        "{}",
        r.table()
    );
}

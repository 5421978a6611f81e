//! The hub across processes (`[hub] backend = "nats"`): several server instances, each with its
//! own SQLite file, share one hub through a real `nats-server` with JetStream (Debian's, started
//! per test on random ports with a temporary store). Clients are real WebSocket clients.
//! Without `nats-server` on PATH these tests fail, unless the command sets
//! `MUSEUM_AGENT_SKIP_NATS=1`: then each says "skipped: nats-server not found" and passes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use museum_agent::config::HubBackend;
use museum_agent::hub::client::{HubClient, Identity, Options};
use serde_json::json;

use crate::support::nats_server::NatsServer;
use crate::support::{TestApp, spawn_app_with};

/// The environment variable that tells these tests to skip themselves when `nats-server` is
/// not installed (`MUSEUM_AGENT_SKIP_NATS=1 cargo test`).
const SKIP_VAR: &str = "MUSEUM_AGENT_SKIP_NATS";

/// A fresh `nats-server`, or `None` when it is not installed and the test command said to skip
/// these tests. Not installed and not told to skip: the test fails, saying how to install it.
async fn nats() -> Option<NatsServer> {
    if !NatsServer::installed() {
        let skip = std::env::var(SKIP_VAR).is_ok_and(|v| v == "1");
        assert!(
            skip,
            "nats-server not found on PATH: install it (apt-get install --no-install-recommends \
             nats-server; scripts/test.sh does), or run with {SKIP_VAR}=1 to skip the \
             hub-across-processes tests"
        );
        eprintln!("skipped: nats-server not found ({SKIP_VAR}=1)");
        return None;
    }
    Some(
        NatsServer::start()
            .await
            .expect("nats-server with JetStream did not start"),
    )
}

async fn hub_on(n: &NatsServer, db: Option<PathBuf>) -> TestApp {
    let url = n.url();
    let app = spawn_app_with(move |c| {
        c.hub.enabled = true;
        c.hub.backend = HubBackend::Nats;
        c.hub.nats_url = url;
        // Short periods so sweeps and presence refresh happen within the tests.
        c.hub.heartbeat_interval_seconds = 0.5;
        c.hub.presence_ttl_seconds = 3.0;
        // Clients here are not read while NATS stops, restarts and recovers (seconds on a
        // loaded machine), so they cannot answer heartbeats; with 0.5 s periods the hub would
        // drop them as dead after 1.5 s. Dead-peer detection is tested in hub.rs.
        c.hub.max_missed_heartbeats = 0;
        if let Some(db) = db {
            c.database.path = db;
        }
    })
    .await;
    wait_for("the hub's NATS backend", || {
        app.app.hub.as_ref().unwrap().healthy()
    })
    .await;
    app
}

/// Polls `cond` (bounded); failure detection, not timing.
async fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn agent(env: &str, id: &str) -> Identity {
    Identity::Agent {
        env: env.into(),
        id: id.into(),
    }
}

async fn connect(app: &TestApp, who: Identity, o: Options) -> HubClient {
    HubClient::connect(&app.base_url(), who, &app.api_key, o)
        .await
        .expect("hub connect")
}

fn manual() -> Options {
    Options {
        manual_ack: true,
        ..Options::default()
    }
}

fn nats_received(app: &TestApp) -> u64 {
    let m = app.app.hub.as_ref().unwrap().nats_metrics();
    m.lines()
        .find_map(|l| l.strip_prefix("hub_nats_received_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn leave(app: &TestApp, c: HubClient, key: &str) {
    c.close().await;
    let hub = app.app.hub.clone().unwrap();
    wait_for("the client to leave", || !hub.is_online(key)).await;
}

#[tokio::test]
async fn messages_cross_processes_and_reach_only_the_processes_that_hold_the_recipients() {
    let Some(n) = nats().await else { return };
    let (s1, s2, s3) = (
        hub_on(&n, None).await,
        hub_on(&n, None).await,
        hub_on(&n, None).await,
    );
    let mut world = connect(
        &s2,
        Identity::Environment("hall_a".into()),
        Options::default(),
    )
    .await;
    let mut a1 = connect(&s1, agent("hall_a", "guide_1"), Options::default()).await;
    let mut a2 = connect(&s2, agent("hall_a", "guide_2"), Options::default()).await;
    let mut other = connect(&s3, agent("hall_b", "guide_9"), Options::default()).await;

    // Unicast both ways between processes.
    a1.send(
        a1.environment("hall_a"),
        &json!({"type": "action", "action": "move", "id": "x1"}),
    )
    .await
    .unwrap();
    let got = world.recv().await.unwrap();
    assert_eq!(got.sender["id"], "guide_1");
    assert_eq!(got.payload["id"], "x1");
    world
        .send(
            world.agent("guide_1"),
            &json!({"type": "outcome", "id": "x1"}),
        )
        .await
        .unwrap();
    let got = a1.recv().await.unwrap();
    assert_eq!(got.sender["type"], "environment");
    assert_eq!(got.seq, Some(1));

    // A broadcast reaches each agent of the environment once, on both processes.
    world
        .send(
            world.broadcast("agent", None),
            &json!({"type": "event", "id": "e1", "event": "lights"}),
        )
        .await
        .unwrap();
    assert_eq!(a1.recv().await.unwrap().payload["id"], "e1");
    assert_eq!(a2.recv().await.unwrap().payload["id"], "e1");
    // An agent's broadcast reaches its peer on the other process, not itself.
    a2.send(
        a2.broadcast("agent", None),
        &json!({"type": "event", "id": "e2"}),
    )
    .await
    .unwrap();
    assert_eq!(a1.recv().await.unwrap().payload["id"], "e2");

    // A request answered from another process (correlation is per process: it passes).
    let req = museum_agent::hub::client::SendOptions {
        id: Some("q1".into()),
        kind: Some("request".into()),
        ..Default::default()
    };
    a1.send_with(
        a1.environment("hall_a"),
        &json!({"action": "status.query"}),
        req,
    )
    .await
    .unwrap();
    assert_eq!(world.recv().await.unwrap().kind.as_deref(), Some("request"));
    let resp = museum_agent::hub::client::SendOptions {
        kind: Some("response".into()),
        request_id: Some("q1".into()),
        ..Default::default()
    };
    world
        .send_with(world.agent("guide_1"), &json!({"status": "success"}), resp)
        .await
        .unwrap();
    let got = a1.recv().await.unwrap();
    assert_eq!(got.request_id.as_deref(), Some("q1"));

    // Presence across processes.
    let (p, _) = world.call(json!({"type": "presence"})).await.unwrap();
    assert_eq!(p.payload["online"], json!(["guide_1", "guide_2"]));
    // Unknown everywhere.
    world
        .send(world.agent("ghost_1"), &json!({}))
        .await
        .unwrap();
    let e = world.recv().await.unwrap();
    assert_eq!(e.payload["details"]["error"], "agent_not_found", "{e:?}");

    // The process holding only a hall_b agent got nothing of hall_a's traffic, and nothing
    // reached guide_9 (its next frame is its own round trip).
    assert_eq!(nats_received(&s3), 0);
    let (p, others) = other.call(json!({"type": "presence"})).await.unwrap();
    assert!(others.is_empty(), "{others:?}");
    assert_eq!(p.payload["online"], json!(["guide_9"]));
    // guide_2 saw nothing of its own broadcast: its next frame is a fresh message.
    world
        .send(world.agent("guide_2"), &json!({"n": "last"}))
        .await
        .unwrap();
    assert_eq!(a2.recv().await.unwrap().payload["n"], "last");
}

#[tokio::test]
async fn inboxes_live_in_jetstream_and_resume_works_across_processes() {
    let Some(n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let r = connect(&s1, agent("hall_a", "robot_1"), manual()).await;
    leave(&s1, r, "agent/hall_a/robot_1").await;
    let mut world = connect(
        &s2,
        Identity::Environment("hall_a".into()),
        Options::default(),
    )
    .await;
    for i in 1..=3 {
        world
            .send(world.agent("robot_1"), &json!({"n": i}))
            .await
            .unwrap();
    }
    let (_, others) = world.call(json!({"type": "presence"})).await.unwrap();
    assert!(others.is_empty(), "stored without error: {others:?}");

    // It comes back on the other process.
    let mut r = connect(&s2, agent("hall_a", "robot_1"), manual()).await;
    assert_eq!(r.resume["complete"], true, "{}", r.resume);
    assert_eq!(r.resume["pending"], 3);
    for i in 1..=3u64 {
        let got = r.recv().await.unwrap();
        assert_eq!((got.seq, got.payload["n"].as_u64()), (Some(i), Some(i)));
    }
    r.ack(2).await.unwrap();
    r.call(json!({"type": "presence"})).await.unwrap();
    leave(&s2, r, "agent/hall_a/robot_1").await;

    // And back on the first, resuming after what it saw: 3 again, with its sequence number.
    let mut r = connect(
        &s1,
        agent("hall_a", "robot_1"),
        Options {
            manual_ack: true,
            last_seq: Some(2),
            ..Options::default()
        },
    )
    .await;
    assert_eq!(r.resume["complete"], true, "{}", r.resume);
    assert_eq!(r.resume["resent"], 1);
    let got = r.recv().await.unwrap();
    assert_eq!((got.seq, got.payload["n"].as_u64()), (Some(3), Some(3)));
    r.ack(3).await.unwrap();
    // New messages continue the numbering, wherever the sender is.
    world
        .send(world.agent("robot_1"), &json!({"n": 4}))
        .await
        .unwrap();
    let got = r.recv().await.unwrap();
    assert_eq!((got.seq, got.payload["n"].as_u64()), (Some(4), Some(4)));
}

#[tokio::test]
async fn an_offline_recipients_messages_survive_server_and_nats_restarts() {
    let Some(mut n) = nats().await else { return };
    let mut s1 = hub_on(&n, None).await;
    let r = connect(&s1, agent("hall_a", "robot_1"), manual()).await;
    leave(&s1, r, "agent/hall_a/robot_1").await;
    let mut world = connect(
        &s1,
        Identity::Environment("hall_a".into()),
        Options::default(),
    )
    .await;
    world
        .send(world.agent("robot_1"), &json!({"n": "kept"}))
        .await
        .unwrap();
    world.call(json!({"type": "presence"})).await.unwrap();
    world.close().await;
    s1.shutdown();
    s1.server.take().unwrap().await.unwrap().unwrap();
    n.restart().await.unwrap();
    // A new server process with a new, empty SQLite file: the inbox is in JetStream.
    let s2 = hub_on(&n, None).await;
    let mut r = connect(&s2, agent("hall_a", "robot_1"), manual()).await;
    assert_eq!(r.resume["pending"], 1, "{}", r.resume);
    assert_eq!(r.recv().await.unwrap().payload["n"], "kept");
}

#[tokio::test]
async fn a_nats_outage_degrades_the_hub_which_keeps_serving_locally_and_recovers() {
    let Some(mut n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let mut a1 = connect(&s1, agent("hall_a", "guide_1"), Options::default()).await;
    let mut a3 = connect(&s1, agent("hall_a", "guide_3"), Options::default()).await;
    let mut world = connect(
        &s2,
        Identity::Environment("hall_a".into()),
        Options::default(),
    )
    .await;
    world
        .send(world.agent("guide_1"), &json!({"n": 0}))
        .await
        .unwrap();
    assert_eq!(a1.recv().await.unwrap().payload["n"], 0);

    n.stop().await.unwrap();
    let h1 = s1.app.hub.clone().unwrap();
    let h2 = s2.app.hub.clone().unwrap();
    wait_for("DEGRADED", || !h1.healthy() && !h2.healthy()).await;
    let (_, ready) = s1.http_get("/readyz").await;
    assert!(ready.contains("\"hub\":\"degraded\""), "{ready}");
    // Local clients are still served.
    a3.send(a3.agent("guide_1"), &json!({"n": "local"}))
        .await
        .unwrap();
    assert_eq!(a1.recv().await.unwrap().payload["n"], "local");
    // A message for another process is held, not refused.
    world
        .send(world.agent("guide_1"), &json!({"n": "held"}))
        .await
        .unwrap();
    wait_for("the message to be held", || h2.held_len() == 1).await;
    // New connections wait for the store.
    let refused = HubClient::connect(
        &s1.base_url(),
        agent("hall_a", "guide_4"),
        &s1.api_key,
        Options::default(),
    )
    .await;
    assert!(refused.err().unwrap().to_string().contains("503"));

    n.restart().await.unwrap();
    wait_for("recovery", || h1.healthy() && h2.healthy()).await;
    let got = a1.recv().await.unwrap();
    assert_eq!(got.payload["n"], "held");
    assert_eq!(h2.held_len(), 0);
    let (_, ready) = s2.http_get("/readyz").await;
    assert!(ready.contains("\"hub\":\"ok\""), "{ready}");
}

#[tokio::test]
async fn connecting_on_another_process_replaces_the_old_connection_and_moves_its_unacked_messages()
{
    let Some(n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let mut world = connect(
        &s2,
        Identity::Environment("hall_a".into()),
        Options::default(),
    )
    .await;
    let mut old = connect(&s1, agent("hall_a", "robot_1"), manual()).await;
    for i in 1..=2 {
        world
            .send(world.agent("robot_1"), &json!({"n": i}))
            .await
            .unwrap();
        assert_eq!(old.recv().await.unwrap().seq, Some(i));
    }
    // The robot's network changed: it connects to the other process without closing the first
    // connection, and has acknowledged nothing.
    let mut new = connect(&s2, agent("hall_a", "robot_1"), manual()).await;
    assert_eq!(new.resume["resent"], 2, "{}", new.resume);
    assert_eq!(new.resume["complete"], true, "{}", new.resume);
    for i in 1..=2u64 {
        let got = new.recv().await.unwrap();
        assert_eq!((got.seq, got.payload["n"].as_u64()), (Some(i), Some(i)));
    }
    let e = old.recv().await.unwrap();
    assert_eq!(e.payload["details"]["reason"], "replaced", "{e:?}");
    // Numbering continues on the new process.
    world
        .send(world.agent("robot_1"), &json!({"n": 3}))
        .await
        .unwrap();
    assert_eq!(new.recv().await.unwrap().seq, Some(3));
}

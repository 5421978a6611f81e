//! The hub across processes (`[hub] backend = "nats"`): several server instances, each with its
//! own SQLite file, share one hub through a real `nats-server` with JetStream (Debian's, started
//! per test on random ports with a temporary store). Clients are real WebSocket clients.
//! Without `nats-server` on PATH these tests fail, unless the command sets
//! `MUSEUM_AGENT_SKIP_NATS=1`: then each says "skipped: nats-server not found" and passes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use museum_agent::config::HubBackend;
use museum_agent::hub::client::{Envelope, HubClient, Identity, Options, SendOptions};
use serde_json::json;

use crate::support::nats_server::{NatsServer, nats};
use crate::support::{TestApp, spawn_app_with};

async fn hub_on(n: &NatsServer, db: Option<PathBuf>) -> TestApp {
    hub_with(n, move |c| {
        if let Some(db) = db {
            c.database.path = db;
        }
    })
    .await
}

async fn hub_with(
    n: &NatsServer,
    more: impl FnOnce(&mut museum_agent::Config) + Send + 'static,
) -> TestApp {
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
        more(c);
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

fn request(id: &str) -> SendOptions {
    SendOptions {
        id: Some(id.into()),
        kind: Some("request".into()),
        ..Default::default()
    }
}

fn response(to: &str) -> SendOptions {
    SendOptions {
        kind: Some("response".into()),
        request_id: Some(to.into()),
        ..Default::default()
    }
}

/// The next envelope (heartbeats skipped), within 15 s: heartbeats keep the client's own
/// per-frame timeout from ever firing, so a frame that never comes would hang the test.
async fn next(c: &mut HubClient) -> Envelope {
    tokio::time::timeout(Duration::from_secs(15), c.recv())
        .await
        .expect("no message within 15 s")
        .unwrap()
}

/// The next envelope, which must be a hub error with `code` naming `original`.
async fn error_for(c: &mut HubClient, code: &str, original: &str) -> Envelope {
    let e = next(c).await;
    assert_eq!(e.error_code(), Some(code), "{e:?}");
    assert_eq!(
        e.payload["details"]["original_message_id"], original,
        "{e:?}"
    );
    assert!(
        e.trace_id
            .as_deref()
            .is_some_and(|t| !t.is_empty() && t != "-"),
        "{e:?}"
    );
    e
}

/// Responses crossing processes are correlated like local ones: once, from the client the
/// request was addressed to, before it times out; wherever the responder's process is (the one
/// that delivered the request, or one that never saw it).
#[tokio::test]
async fn responses_across_processes_are_correlated_like_local_ones() {
    let Some(n) = nats().await else { return };
    let (s1, s2, s3) = (
        hub_on(&n, None).await,
        hub_on(&n, None).await,
        hub_on(&n, None).await,
    );
    let mut asker = connect(&s1, agent("hall_a", "asker"), Options::default()).await;
    let mut answerer = connect(&s2, agent("hall_a", "answerer"), Options::default()).await;
    let mut bystander = connect(&s2, agent("hall_a", "bystander"), Options::default()).await;
    let mut faraway = connect(&s3, agent("hall_a", "faraway"), Options::default()).await;

    asker
        .send_with(asker.agent("answerer"), &json!({"q": 1}), request("q1"))
        .await
        .unwrap();
    assert_eq!(
        answerer.recv().await.unwrap().kind.as_deref(),
        Some("request")
    );
    // Not addressed to the bystander (same process as the answerer): refused there.
    let id = bystander
        .send_with(bystander.agent("asker"), &json!({"a": "x"}), response("q1"))
        .await
        .unwrap();
    error_for(&mut bystander, "VALIDATION_ERROR", &id).await;
    // Nor from a process that never saw the request: the requester's process refuses it.
    let id = faraway
        .send_with(faraway.agent("asker"), &json!({"a": "y"}), response("q1"))
        .await
        .unwrap();
    error_for(&mut faraway, "VALIDATION_ERROR", &id).await;
    // The answerer's response passes, once.
    answerer
        .send_with(answerer.agent("asker"), &json!({"a": 1}), response("q1"))
        .await
        .unwrap();
    let got = asker.recv().await.unwrap();
    assert_eq!(
        (got.request_id.as_deref(), &got.payload["a"]),
        (Some("q1"), &json!(1))
    );
    let again = answerer
        .send_with(answerer.agent("asker"), &json!({"a": 2}), response("q1"))
        .await
        .unwrap();
    error_for(&mut answerer, "VALIDATION_ERROR", &again).await;

    // A request answered from a process that did not deliver it (the answerer moved): the
    // requester's process checks it and takes its entry, so it passes once.
    asker
        .send_with(asker.agent("answerer"), &json!({"q": 2}), request("q2"))
        .await
        .unwrap();
    assert_eq!(
        answerer.recv().await.unwrap().kind.as_deref(),
        Some("request")
    );
    let mut moved = connect(&s3, agent("hall_a", "answerer"), Options::default()).await;
    moved
        .send_with(moved.agent("asker"), &json!({"a": 3}), response("q2"))
        .await
        .unwrap();
    assert_eq!(asker.recv().await.unwrap().payload["a"], 3);
    let twice = moved
        .send_with(moved.agent("asker"), &json!({"a": 4}), response("q2"))
        .await
        .unwrap();
    error_for(&mut moved, "VALIDATION_ERROR", &twice).await;

    // Timed out at the requester's process: CONNECTION_ERROR (E004) to the responder.
    let short = SendOptions {
        ttl: Some(0.3),
        ..request("q3")
    };
    asker
        .send_with(asker.agent("faraway"), &json!({"q": 3}), short)
        .await
        .unwrap();
    assert_eq!(
        faraway.recv().await.unwrap().kind.as_deref(),
        Some("request")
    );
    // Waiting out the request's ttl is the behaviour under test, not readiness.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let late = faraway
        .send_with(faraway.agent("asker"), &json!({"a": 5}), response("q3"))
        .await
        .unwrap();
    let e = error_for(&mut faraway, "CONNECTION_ERROR", &late).await;
    assert_eq!(e.payload["details"]["clawos_code"], "E004", "{e:?}");
    // Nothing else reached the asker: its next message is this one.
    faraway
        .send(faraway.agent("asker"), &json!({"n": "last"}))
        .await
        .unwrap();
    assert_eq!(asker.recv().await.unwrap().payload["n"], "last");
}

/// Waits until everything `c` sent before is settled (a hub service reply is a barrier) and
/// asserts that none of it was refused.
async fn accepted(c: &mut HubClient) {
    let (_, before) = c.call(json!({"type": "presence"})).await.unwrap();
    assert!(before.iter().all(|e| !e.is_error()), "{before:?}");
}

/// The asker (on `s1`) sends request q1 to the answerer (on `answerer_on`), then leaves every
/// process; the answerer's response is accepted (stored for the asker); the answerer moves to
/// `moved_to` and answers again: refused there, as it would be locally. The moved answerer.
async fn answered_twice(s1: &TestApp, answerer_on: &TestApp, moved_to: &TestApp) -> HubClient {
    let mut asker = connect(s1, agent("hall_a", "asker"), Options::default()).await;
    let mut answerer = connect(answerer_on, agent("hall_a", "answerer"), Options::default()).await;
    asker
        .send_with(asker.agent("answerer"), &json!({"q": 1}), request("q1"))
        .await
        .unwrap();
    assert_eq!(next(&mut answerer).await.kind.as_deref(), Some("request"));
    leave(s1, asker, "agent/hall_a/asker").await;
    answerer
        .send_with(answerer.agent("asker"), &json!({"a": 1}), response("q1"))
        .await
        .unwrap();
    accepted(&mut answerer).await;
    let mut moved = connect(moved_to, agent("hall_a", "answerer"), Options::default()).await;
    let twice = moved
        .send_with(moved.agent("asker"), &json!({"a": 2}), response("q1"))
        .await
        .unwrap();
    error_for(&mut moved, "VALIDATION_ERROR", &twice).await;
    moved
}

/// The shared registry of pending requests is bounded on the NATS server and, full, drops its
/// oldest entries (never refuses a new request's registration).
#[tokio::test]
async fn the_shared_pending_registry_is_bounded_and_drops_its_oldest_entries() {
    let Some(n) = nats().await else { return };
    let _hub = hub_on(&n, None).await;
    let client = async_nats::connect(n.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stream = js.get_stream("KV_HUB_PENDING").await.unwrap();
    let config = &stream.info().await.unwrap().config;
    assert_eq!(
        config.max_bytes,
        museum_agent::hub::nats::PENDING_MAX_BYTES,
        "{config:?}"
    );
    assert_eq!(
        config.discard,
        async_nats::jetstream::stream::DiscardPolicy::Old,
        "{config:?}"
    );
}

/// `answerer` sends the asker one more message; the asker, back on `asker_on`, finds the one
/// accepted response to q1 (`{"a": 1}`), then that message.
async fn back_to_one_response(answerer: &mut HubClient, asker_on: &TestApp) {
    answerer
        .send(answerer.agent("asker"), &json!({"n": "last"}))
        .await
        .unwrap();
    accepted(answerer).await;
    let mut asker = connect(asker_on, agent("hall_a", "asker"), Options::default()).await;
    let got = next(&mut asker).await;
    assert_eq!(
        (got.request_id.as_deref(), &got.payload["a"]),
        (Some("q1"), &json!(1)),
        "{got:?}"
    );
    assert_eq!(next(&mut asker).await.payload["n"], "last");
}

/// The requester has left every process: a second response, sent from the process that did
/// not deliver the request (the responder moved there), is refused, as it would be locally,
/// and the requester finds the first response only.
#[tokio::test]
async fn a_second_response_to_a_requester_offline_everywhere_is_refused_on_another_process() {
    let Some(n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let mut moved = answered_twice(&s1, &s2, &s1).await;
    // The asker comes back (on the other process) to one response, then the next message.
    back_to_one_response(&mut moved, &s2).await;
}

/// A request between two clients of one process is checked there alone (no NATS round trip)
/// until one of them leaves: then it is shared, so when the requester has left every process
/// a second response from the responder, moved to another process, is refused.
#[tokio::test]
async fn a_request_between_clients_of_one_process_is_shared_when_one_leaves() {
    let Some(n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    answered_twice(&s1, &s1, &s2).await;
}

/// Requests stored in an offline responder's inbox, from a requester that then left every
/// process: no process delivered them, yet their responses are checked like local ones (the
/// shared pending registry): a response from the wrong client and a second response are
/// refused (VALIDATION_ERROR), a late one times out (E004), the right one passes once.
#[tokio::test]
async fn responses_to_a_requester_offline_everywhere_are_checked_wherever_they_are_sent() {
    let Some(n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    // Known, then offline: requests to it wait in its inbox.
    let answerer = connect(&s2, agent("hall_a", "answerer"), Options::default()).await;
    leave(&s2, answerer, "agent/hall_a/answerer").await;
    let mut asker = connect(&s1, agent("hall_a", "asker"), Options::default()).await;
    asker
        .send_with(asker.agent("answerer"), &json!({"q": 1}), request("q1"))
        .await
        .unwrap();
    let short = SendOptions {
        ttl: Some(0.5),
        ..request("q2")
    };
    asker
        .send_with(asker.agent("answerer"), &json!({"q": 2}), short)
        .await
        .unwrap();
    accepted(&mut asker).await;
    leave(&s1, asker, "agent/hall_a/asker").await;

    let mut answerer = connect(&s2, agent("hall_a", "answerer"), Options::default()).await;
    for q in ["q1", "q2"] {
        let r = next(&mut answerer).await;
        assert_eq!((r.kind.as_deref(), r.id.as_str()), (Some("request"), q));
    }
    let mut bystander = connect(&s2, agent("hall_a", "bystander"), Options::default()).await;
    one_response_from_the_answerer_only(&mut bystander, &mut answerer, "q1").await;
    // Waiting out the request's ttl is the behaviour under test, not readiness.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let late = answerer
        .send_with(answerer.agent("asker"), &json!({"a": 3}), response("q2"))
        .await
        .unwrap();
    let e = error_for(&mut answerer, "CONNECTION_ERROR", &late).await;
    assert_eq!(e.payload["details"]["clawos_code"], "E004", "{e:?}");

    back_to_one_response(&mut answerer, &s1).await;
}

/// To the asker's request `id`: a response from a client it was not addressed to is refused,
/// the answerer's first is accepted and its second refused.
async fn one_response_from_the_answerer_only(
    bystander: &mut HubClient,
    answerer: &mut HubClient,
    id: &str,
) {
    let wrong = bystander
        .send_with(bystander.agent("asker"), &json!({"a": "x"}), response(id))
        .await
        .unwrap();
    error_for(bystander, "VALIDATION_ERROR", &wrong).await;
    answerer
        .send_with(answerer.agent("asker"), &json!({"a": 1}), response(id))
        .await
        .unwrap();
    accepted(answerer).await;
    let again = answerer
        .send_with(answerer.agent("asker"), &json!({"a": 2}), response(id))
        .await
        .unwrap();
    error_for(answerer, "VALIDATION_ERROR", &again).await;
}

/// Stops NATS and waits until every app reports the hub DEGRADED.
async fn nats_down(n: &mut NatsServer, apps: &[&TestApp]) {
    n.stop().await.unwrap();
    let hubs: Vec<_> = apps.iter().map(|a| a.app.hub.clone().unwrap()).collect();
    wait_for("DEGRADED", || hubs.iter().all(|h| !h.healthy())).await;
}

/// Restarts NATS and waits until every app's hub is healthy again and has written what it
/// owed the shared pending registry.
async fn nats_back(n: &mut NatsServer, apps: &[&TestApp]) {
    n.restart().await.unwrap();
    let hubs: Vec<_> = apps.iter().map(|a| a.app.hub.clone().unwrap()).collect();
    wait_for("recovery", || {
        hubs.iter().all(|h| h.healthy() && h.owed_len() == 0)
    })
    .await;
}

/// A request sent while NATS is unreachable is held, and registered in the shared pending
/// registry before it is replayed. Its requester leaves during the outage (nothing reaches the
/// registry as it goes) and is offline everywhere when the answers come after it, yet a
/// response from the wrong client and a second response, from the process that delivered the
/// request or from the requester's, are refused as they are locally, and the requester finds
/// the one accepted response.
#[tokio::test]
async fn a_request_sent_during_a_nats_outage_is_correlated_after_it() {
    let Some(mut n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let mut asker = connect(&s1, agent("hall_a", "asker"), Options::default()).await;
    let mut answerer = connect(&s2, agent("hall_a", "answerer"), Options::default()).await;
    let mut bystander = connect(&s2, agent("hall_a", "bystander"), Options::default()).await;
    nats_down(&mut n, &[&s1, &s2]).await;
    asker
        .send_with(asker.agent("answerer"), &json!({"q": 1}), request("q1"))
        .await
        .unwrap();
    let h1 = s1.app.hub.clone().unwrap();
    wait_for("the request to be held", || h1.held_len() == 1).await;
    leave(&s1, asker, "agent/hall_a/asker").await;
    nats_back(&mut n, &[&s1, &s2]).await;

    let r = next(&mut answerer).await;
    assert_eq!((r.kind.as_deref(), r.id.as_str()), (Some("request"), "q1"));
    one_response_from_the_answerer_only(&mut bystander, &mut answerer, "q1").await;
    // Nor from the requester's process, whose own entry for it has not seen the answer.
    let mut moved = connect(&s1, agent("hall_a", "answerer"), Options::default()).await;
    let third = moved
        .send_with(moved.agent("asker"), &json!({"a": 3}), response("q1"))
        .await
        .unwrap();
    error_for(&mut moved, "VALIDATION_ERROR", &third).await;
    back_to_one_response(&mut moved, &s2).await;
}

/// While NATS is unreachable a response is checked on its process alone: the responder,
/// moved to the requester's process before the outage, answers there once and a second
/// response is refused. What that process accepted is written to the shared registry when
/// NATS is back, so the responder, moved back to the process that delivered the request,
/// cannot answer it again there.
#[tokio::test]
async fn responses_during_a_nats_outage_are_checked_per_process_and_recorded_after_it() {
    let Some(mut n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let mut asker = connect(&s1, agent("hall_a", "asker"), Options::default()).await;
    let mut answerer = connect(&s2, agent("hall_a", "answerer"), Options::default()).await;
    asker
        .send_with(asker.agent("answerer"), &json!({"q": 1}), request("q1"))
        .await
        .unwrap();
    assert_eq!(next(&mut answerer).await.kind.as_deref(), Some("request"));
    let mut moved = connect(&s1, agent("hall_a", "answerer"), Options::default()).await;

    nats_down(&mut n, &[&s1, &s2]).await;
    moved
        .send_with(moved.agent("asker"), &json!({"a": 1}), response("q1"))
        .await
        .unwrap();
    let got = next(&mut asker).await;
    assert_eq!(
        (got.request_id.as_deref(), &got.payload["a"]),
        (Some("q1"), &json!(1)),
        "{got:?}"
    );
    let twice = moved
        .send_with(moved.agent("asker"), &json!({"a": 2}), response("q1"))
        .await
        .unwrap();
    error_for(&mut moved, "VALIDATION_ERROR", &twice).await;
    nats_back(&mut n, &[&s1, &s2]).await;

    let mut back = connect(&s2, agent("hall_a", "answerer"), Options::default()).await;
    let third = back
        .send_with(back.agent("asker"), &json!({"a": 3}), response("q1"))
        .await
        .unwrap();
    error_for(&mut back, "VALIDATION_ERROR", &third).await;
    // Nothing else reached the asker: its next message is this one.
    back.send(back.agent("asker"), &json!({"n": "last"}))
        .await
        .unwrap();
    assert_eq!(next(&mut asker).await.payload["n"], "last");
}

/// One sender's messages to a recipient on another process arrive complete and in order
/// while many are in flight at once (the pipeline), and each one that cannot be delivered
/// (the recipient's inbox is full) gets its own error naming it, with its traceId.
#[tokio::test]
async fn pipelined_deliveries_keep_order_and_report_each_failure() {
    let Some(n) = nats().await else { return };
    let small = |c: &mut museum_agent::Config| c.hub.inbox_depth = 600;
    let (s1, s2) = (hub_with(&n, small).await, hub_with(&n, small).await);
    let mut rx = connect(&s2, agent("hall_a", "sink_1"), manual()).await;
    let mut tx = connect(&s1, agent("hall_a", "source_1"), Options::default()).await;
    for i in 0..600u64 {
        tx.send(tx.agent("sink_1"), &json!({"n": i})).await.unwrap();
    }
    for i in 0..600u64 {
        let got = rx.recv().await.unwrap();
        assert_eq!((got.seq, got.payload["n"].as_u64()), (Some(i + 1), Some(i)));
    }
    // Nothing acknowledged: the inbox is full, and each further message fails on its own.
    let mut ids = vec![];
    for i in 0..3 {
        let o = SendOptions {
            trace_id: Some(format!("trace-over-{i}")),
            ..Default::default()
        };
        ids.push(
            tx.send_with(tx.agent("sink_1"), &json!({"over": i}), o)
                .await
                .unwrap(),
        );
    }
    for (i, id) in ids.iter().enumerate() {
        let e = error_for(&mut tx, "CONNECTION_ERROR", id).await;
        assert!(
            e.payload["message"].as_str().unwrap().contains("full"),
            "{e:?}"
        );
        assert_eq!(
            e.trace_id.as_deref(),
            Some(format!("trace-over-{i}").as_str())
        );
    }
    // Acknowledged: the next one goes through, after the 600.
    rx.ack(600).await.unwrap();
    rx.call(json!({"type": "presence"})).await.unwrap();
    tx.send(tx.agent("sink_1"), &json!({"n": "after"}))
        .await
        .unwrap();
    let got = rx.recv().await.unwrap();
    assert_eq!((got.seq, &got.payload["n"]), (Some(601), &json!("after")));
}

/// A holder that answers after the sender's timeout makes the sender hold the message and send
/// it again, marked as a retry of the same delivery: the recipient gets it once. Driven here
/// with a plain NATS client speaking the hub's subjects and headers.
#[tokio::test]
async fn a_retry_of_a_delivery_already_made_is_not_delivered_twice() {
    let Some(n) = nats().await else { return };
    let s1 = hub_on(&n, None).await;
    let mut rx = connect(&s1, agent("hall_a", "robot_7"), Options::default()).await;
    let nc = async_nats::connect(n.url()).await.unwrap();
    let subject = format!(
        "hub.u.{}",
        museum_agent::hub::nats::addr_tokens(&museum_agent::hub::Address::agent(
            "hall_a", "robot_7"
        ))
    );
    let body = |k: &str| {
        let v = json!({"type": "message", "id": k, "sender": {"id": "world", "type": "environment", "env": "hall_a"},
                       "recipient": {"id": "robot_7", "type": "agent"}, "timestamp": "2025-01-01T00:00:00Z",
                       "version": "1", "traceId": "t", "priority": "normal", "payload": {"k": k}})
        .to_string();
        bytes::Bytes::from(v[1..].to_string())
    };
    let send = |delivery: u64, retry: bool, k: &'static str| {
        let nc = nc.clone();
        let subject = subject.clone();
        async move {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Hub-Delivery", delivery.to_string().as_str());
            if retry {
                h.insert("Hub-Retry", "1");
            }
            let r = nc
                .request_with_headers(subject, h, body(k))
                .await
                .expect("the holder answers");
            String::from_utf8(r.payload.to_vec()).unwrap()
        }
    };
    assert_eq!(send(42, false, "first").await, "ok");
    assert_eq!(send(42, true, "first again").await, "ok");
    // A retry of a delivery it never got is delivered.
    assert_eq!(send(43, true, "second").await, "ok");
    assert_eq!(rx.recv().await.unwrap().payload["k"], "first");
    assert_eq!(rx.recv().await.unwrap().payload["k"], "second");
    let (_, others) = rx.call(json!({"type": "presence"})).await.unwrap();
    assert!(others.is_empty(), "delivered twice: {others:?}");
}

/// Whether `c` is still the live connection of its identity: a hub call is answered. A
/// replaced one reads the error saying so, then the close (4001).
async fn alive(c: &mut HubClient) -> Result<(), String> {
    match c.call(json!({"type": "presence"})).await {
        Ok(_) => Ok(()),
        Err(_) => Err("closed".into()),
    }
}

/// Two connections of one identity attaching at the same time on two processes (each one's
/// kick arrives while the other is mid-attach): exactly one survives, the later attach, and
/// the other is closed as replaced (4001), every time; the survivor gets the messages.
#[tokio::test]
async fn two_attaches_of_one_identity_at_once_leave_exactly_one() {
    let Some(n) = nats().await else { return };
    let (s1, s2) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let mut world = connect(
        &s1,
        Identity::Environment("hall_a".into()),
        Options::default(),
    )
    .await;
    for round in 0..6 {
        let (u1, u2) = (s1.base_url(), s2.base_url());
        let (a, b) = tokio::join!(
            HubClient::connect(&u1, agent("hall_a", "twin"), &s1.api_key, manual()),
            HubClient::connect(&u2, agent("hall_a", "twin"), &s2.api_key, manual()),
        );
        let mut live = vec![];
        for c in [a, b] {
            match c {
                Ok(mut c) => {
                    if alive(&mut c).await.is_ok() {
                        live.push(c);
                    } else {
                        let (_, code) = c.until_close().await.unwrap_or((vec![], None));
                        assert!(matches!(code, None | Some(4001)), "round {round}: {code:?}");
                    }
                }
                Err(e) => assert!(e.to_string().contains("replaced"), "round {round}: {e}"),
            }
        }
        // The loser may learn it lost just after its first call: look again.
        let mut still = vec![];
        for mut c in live {
            if alive(&mut c).await.is_ok() {
                still.push(c);
            }
        }
        assert_eq!(still.len(), 1, "round {round}: survivors");
        let mut twin = still.pop().unwrap();
        world
            .send(world.agent("twin"), &json!({"round": round}))
            .await
            .unwrap();
        assert_eq!(twin.recv().await.unwrap().payload["round"], round);
        twin.ack(twin.last_seq()).await.unwrap();
        twin.call(json!({"type": "presence"})).await.unwrap();
    }
}

fn guide_brief() -> serde_json::Value {
    json!({
        "objective": "Guide visitors through the bronze gallery",
        "constraints": ["stay in hall S"],
        "inputs": "visitor questions",
        "outputs": "spoken answers",
        "completion_criteria": "the tour ends at the exit",
        "collaborators": [{"agentId": "conservator", "role": "文物修复师"}]
    })
}

/// Whether `owner`'s registry on `app`'s process holds `contact`, with its source.
fn contact_on(app: &TestApp, env: &str, owner: &str, contact: &str) -> Option<String> {
    let (_, contacts) = app.app.hub.as_ref().unwrap().society_snapshot(env)?;
    contacts
        .into_iter()
        .find(|(o, e)| o == owner && e.id == contact)
        .map(|(_, e)| {
            serde_json::to_value(e.source)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
}

#[tokio::test]
async fn agent_societies_are_shared_by_every_process_including_one_that_joins_later() {
    let Some(n) = nats().await else { return };
    let a = hub_on(&n, None).await;
    let b = hub_on(&n, None).await;
    // A curator on A spawns a guide with a task brief.
    let mut curator = connect(&a, agent("hall_s", "curator"), Options::default()).await;
    let (r, _) = curator
        .call(json!({"type": "spawn_agent", "roleId": "guide", "agentId": "guide_kid", "taskBrief": guide_brief()}))
        .await
        .unwrap();
    assert_eq!(r.payload["type"], "spawn_agent_result", "{}", r.payload);
    // B learns it: the spawned agent connecting there gets its brief and its registry.
    wait_for("B to learn the spawned agent", || {
        contact_on(&b, "hall_s", "guide_kid", "curator").is_some()
    })
    .await;
    let mut kid = connect(&b, agent("hall_s", "guide_kid"), Options::default()).await;
    assert_eq!(
        kid.welcome["context"]["taskBrief"]["objective"],
        guide_brief()["objective"],
        "{}",
        kid.welcome
    );
    let (c, _) = kid.call(json!({"type": "list_contacts"})).await.unwrap();
    let ids: Vec<&str> = c.payload["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["curator", "conservator"], "{}", c.payload);
    assert_eq!(c.payload["contacts"][0]["source"], "parent");
    // A change made on B (a docent's first message to the curator on A) reaches A's registry,
    // and the message itself reaches the curator across processes.
    let mut docent = connect(&b, agent("hall_s", "docent"), Options::default()).await;
    let (r, _) = docent
        .call(json!({"type": "send_message", "to": "curator", "payload": {"message_type": "general", "content": "hello"}}))
        .await
        .unwrap();
    assert_eq!(r.payload["type"], "send_message_result", "{}", r.payload);
    let got = curator.recv().await.unwrap();
    assert!(
        got.formatted
            .as_deref()
            .unwrap_or_default()
            .contains("hello")
            || got.payload.to_string().contains("hello"),
        "{got:?}"
    );
    wait_for("A to learn the docent's first message", || {
        contact_on(&a, "hall_s", "curator", "docent").as_deref() == Some("first_message")
    })
    .await;
    // Keep first across processes: the curator's entry for its child stays the spawn's.
    assert_eq!(
        contact_on(&a, "hall_s", "curator", "guide_kid").as_deref(),
        Some("child")
    );
    // A process that joins later, with an empty store of its own, learns all of it.
    let c = hub_on(&n, None).await;
    wait_for("the late process to learn the societies", || {
        contact_on(&c, "hall_s", "curator", "docent").is_some()
            && contact_on(&c, "hall_s", "guide_kid", "conservator").is_some()
    })
    .await;
    let (agents, _) = c
        .app
        .hub
        .as_ref()
        .unwrap()
        .society_snapshot("hall_s")
        .unwrap();
    let kid_rec = agents.iter().find(|r| r.id == "guide_kid").unwrap();
    assert_eq!(kid_rec.parent.as_deref(), Some("curator"));
    assert_eq!(
        kid_rec.task_brief.as_ref().unwrap()["objective"],
        guide_brief()["objective"]
    );
}

#[tokio::test]
async fn a_society_change_made_during_a_nats_outage_reaches_the_other_processes_after_it() {
    let Some(mut n) = nats().await else { return };
    let (a, b) = (hub_on(&n, None).await, hub_on(&n, None).await);
    let mut curator = connect(&a, agent("hall_o", "curator"), Options::default()).await;
    let knows = |app: &TestApp, id: &str| {
        app.app
            .hub
            .as_ref()
            .unwrap()
            .society_snapshot("hall_o")
            .is_some_and(|(agents, _)| agents.iter().any(|r| r.id == id))
    };
    wait_for("B to learn the curator", || knows(&b, "curator")).await;
    n.stop().await.unwrap();
    let ha = a.app.hub.clone().unwrap();
    wait_for("DEGRADED", || !ha.healthy()).await;
    let (r, _) = curator
        .call(json!({"type": "spawn_agent", "roleId": "guide", "agentId": "night_guide", "taskBrief": guide_brief()}))
        .await
        .unwrap();
    assert_eq!(r.payload["type"], "spawn_agent_result", "{}", r.payload);
    assert!(!knows(&b, "night_guide"));
    n.restart().await.unwrap();
    wait_for("B to learn the agent spawned during the outage", || {
        contact_on(&b, "hall_o", "night_guide", "curator").as_deref() == Some("parent")
            && contact_on(&b, "hall_o", "curator", "night_guide").as_deref() == Some("child")
    })
    .await;
}

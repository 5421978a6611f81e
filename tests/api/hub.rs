//! The agent hub (README "Agent hub"): several real WebSocket clients per scenario against a
//! real server with a temporary SQLite file.

use museum_agent::Config;
use museum_agent::hub::client::{Envelope, HubClient, Identity, Options, SendOptions, inner};
use serde_json::{Value, json};

use crate::support::{TestApp, Verdicts, corpus, spawn_app_with};

fn hub_on(c: &mut Config) {
    c.hub.enabled = true;
}

async fn hub_app() -> TestApp {
    spawn_app_with(hub_on).await
}

fn agent(env: &str, id: &str) -> Identity {
    Identity::Agent {
        env: env.into(),
        id: id.into(),
    }
}

async fn connect(app: &TestApp, who: Identity) -> HubClient {
    connect_with(app, who, Options::default()).await
}

async fn connect_with(app: &TestApp, who: Identity, o: Options) -> HubClient {
    HubClient::connect(&app.base_url(), who, &app.api_key, o)
        .await
        .expect("hub connect")
}

fn tier(t: &str) -> Options {
    Options {
        tier: Some(t.into()),
        ..Options::default()
    }
}

fn manual() -> Options {
    Options {
        manual_ack: true,
        ..Options::default()
    }
}

/// Receives the next envelope and checks it is a hub error with `code`.
async fn expect_error(c: &mut HubClient, code: &str) -> Envelope {
    let e = c.recv().await.unwrap();
    assert!(e.is_error(), "expected {code}, got {e:?}");
    assert_eq!(e.error_code(), Some(code), "{e:?}");
    assert!(
        !e.payload["details"]["suggested_action"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{e:?}"
    );
    e
}

/// Connects once so the hub knows the address, then leaves (so later messages are stored).
async fn register_offline(app: &TestApp, who: Identity, o: Options) {
    let key = match &who {
        Identity::Agent { env, id } => format!("agent/{env}/{id}"),
        Identity::Environment(env) => format!("environment/{env}"),
        Identity::Human(id) => format!("human/{id}"),
    };
    let c = connect_with(app, who, o).await;
    c.close().await;
    wait_offline(app, &key).await;
}

/// Waits (bounded) until the hub has taken `key` out of routing after its client left.
async fn wait_offline(app: &TestApp, key: &str) {
    let hub = app.app.hub.clone().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while hub.is_online(key) {
        assert!(
            std::time::Instant::now() < deadline,
            "{key} never went offline"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn agent_and_environment_exchange_action_and_outcome() {
    let app = hub_app().await;
    let mut world = connect(&app, Identity::Environment("demo_world".into())).await;
    assert_eq!(world.welcome["server_status"], "running");
    assert_eq!(world.welcome["identity"]["type"], "environment");
    assert_eq!(world.resume["complete"], true);
    let mut a = connect(&app, agent("demo_world", "agent_001")).await;

    // The seed's example frame, sender given (and correct), inner payload with extra fields.
    let action = json!({
        "type": "message", "id": "msg_12345",
        "sender": {"id": "agent_001", "type": "agent"},
        "recipient": {"id": "demo_world", "type": "environment"},
        "timestamp": "2025-08-19T10:30:00Z",
        "payload": {"type": "action", "action": "move", "id": "action_67890",
                    "parameters": {"direction": "north", "distance": 2.5}, "ünïcode": "展品"}
    });
    a.send_raw(&action.to_string()).await.unwrap();
    let got = world.recv().await.unwrap();
    assert_eq!(got.ty, "message");
    assert_eq!(got.id, "msg_12345");
    assert_eq!(got.sender["id"], "agent_001");
    assert_eq!(got.sender["type"], "agent");
    assert_eq!(got.sender["env"], "demo_world");
    assert_eq!(
        got.payload, action["payload"],
        "payload passed through unchanged"
    );
    assert_eq!(got.seq, Some(1));
    assert!(
        got.trace_id.as_deref().is_some_and(|t| !t.is_empty()),
        "traceId generated"
    );
    let inner::Inner::Action { action, id, .. } = got.inner().unwrap() else {
        panic!("not an action")
    };
    assert_eq!((action.as_str(), id.as_str()), ("move", "action_67890"));

    // Outcome back, with `message` as the payload's other name and a traceId carried through.
    let outcome = json!({
        "type": "message", "recipient": {"id": "agent_001", "type": "agent"},
        "traceId": "trace-demo-1",
        "message": inner::outcome("action_67890", "success", "移动成功", json!({"new_position": {"x": 5, "y": 10}}))
    });
    world.send_raw(&outcome.to_string()).await.unwrap();
    let got = a.recv().await.unwrap();
    assert_eq!(got.sender["id"], "demo_world");
    assert_eq!(got.sender["type"], "environment");
    assert_eq!(got.trace_id.as_deref(), Some("trace-demo-1"));
    assert_eq!(got.payload["outcome"]["message"], "移动成功");
    assert!(
        got.id.starts_with("msg_"),
        "hub generates an id: {}",
        got.id
    );
    let inner::Inner::Outcome { outcome, .. } = got.inner().unwrap() else {
        panic!("not an outcome")
    };
    assert_eq!(outcome.status, "success");

    // A human (no environment) must name the environment of an agent.
    let mut h = connect(&app, Identity::Human("docent_1".into())).await;
    h.send(h.agent("agent_001"), &json!({"text": "hi"}))
        .await
        .unwrap();
    let e = expect_error(&mut h, "VALIDATION_ERROR").await;
    assert!(e.payload["message"].as_str().unwrap().contains("env"));
    h.send(
        h.agent_in("demo_world", "agent_001"),
        &json!({"text": "hi"}),
    )
    .await
    .unwrap();
    let got = a.recv().await.unwrap();
    assert_eq!(got.sender["type"], "human");
    assert_eq!(got.seq, Some(2));
    // and an agent may answer a human.
    a.send(a.human("docent_1"), &json!({"text": "hello"}))
        .await
        .unwrap();
    assert_eq!(h.recv().await.unwrap().payload["text"], "hello");
}

#[tokio::test]
async fn events_broadcast_to_every_agent_of_the_environment_only() {
    let app = hub_app().await;
    let mut world = connect(&app, Identity::Environment("hall_a".into())).await;
    let mut agents = vec![];
    for i in 0..3 {
        agents.push(connect(&app, agent("hall_a", &format!("guide_{i}"))).await);
    }
    let mut elsewhere = connect(&app, agent("hall_b", "guide_x")).await;
    let ev = inner::event("world_update", "event_1", json!({"lights": "on"}));
    world
        .send(world.broadcast("agent", None), &ev)
        .await
        .unwrap();
    for a in &mut agents {
        let got = a.recv().await.unwrap();
        assert_eq!(got.payload, ev);
        assert_eq!(got.recipient["id"], "*");
        assert_eq!(got.sender["id"], "hall_a");
    }
    // One agent broadcasts to its peers: not to itself.
    let (first, rest) = agents.split_at_mut(1);
    first[0]
        .send(
            first[0].broadcast("agent", None),
            &json!({"type": "event", "id": "e2", "event": "hello"}),
        )
        .await
        .unwrap();
    for a in rest.iter_mut() {
        assert_eq!(a.recv().await.unwrap().payload["id"], "e2");
    }
    // The agent of the other hall got nothing: the next thing it sees is its own echo test.
    world
        .send(
            world.broadcast("agent", None),
            &json!({"type": "event", "id": "e3", "event": "x"}),
        )
        .await
        .unwrap();
    elsewhere
        .send(elsewhere.environment("hall_b"), &json!({}))
        .await
        .unwrap();
    let e = expect_error(&mut elsewhere, "CONNECTION_ERROR").await; // hall_b never connected
    assert!(e.payload["message"].as_str().unwrap().contains("unknown"));
    assert_eq!(first[0].recv().await.unwrap().payload["id"], "e3");
}

#[tokio::test]
async fn a_stream_arrives_complete_and_in_order() {
    let app = hub_app().await;
    let mut world = connect(&app, Identity::Environment("sensors".into())).await;
    let mut sensor = connect(&app, agent("sensors", "sensor_001")).await;
    for i in 0..300u64 {
        sensor
            .send(
                sensor.environment("sensors"),
                &inner::stream(
                    "telemetry",
                    i,
                    json!({"temperature": 20.0 + i as f64 / 10.0}),
                ),
            )
            .await
            .unwrap();
    }
    for i in 0..300u64 {
        let got = world.recv().await.unwrap();
        let inner::Inner::Stream { sequence, .. } = got.inner().unwrap() else {
            panic!("not a stream")
        };
        assert_eq!(sequence, i);
        assert_eq!(got.seq, Some(i + 1), "hub sequence numbers follow delivery");
    }
}

#[tokio::test]
async fn forged_senders_foreign_environments_and_bad_frames_are_refused() {
    let app = hub_app().await;
    let _world = connect(&app, Identity::Environment("hall_a".into())).await;
    let mut other = connect(&app, Identity::Environment("hall_b".into())).await;
    let mut a = connect(&app, agent("hall_a", "guide_1")).await;
    let mut victim = connect(&app, agent("hall_a", "guide_2")).await;

    let forged = json!({"type": "message", "id": "f1", "sender": {"id": "guide_2", "type": "agent"},
                        "recipient": {"id": "hall_a", "type": "environment"}, "payload": {}});
    a.send_raw(&forged.to_string()).await.unwrap();
    let e = expect_error(&mut a, "PERMISSION_DENIED").await;
    assert_eq!(e.payload["details"]["original_message_id"], "f1");
    assert_eq!(e.payload["details"]["clawos_code"], "E001");
    let forged_type = json!({"type": "message", "id": "f2", "sender": {"id": "guide_1", "type": "environment"},
                             "recipient": {"id": "guide_2", "type": "agent"}, "payload": {}});
    a.send_raw(&forged_type.to_string()).await.unwrap();
    expect_error(&mut a, "PERMISSION_DENIED").await;

    // Another environment's agent is out of scope, for agents and environments alike.
    a.send(a.agent_in("hall_b", "guide_9"), &json!({}))
        .await
        .unwrap();
    expect_error(&mut a, "PERMISSION_DENIED").await;
    other
        .send(other.agent_in("hall_a", "guide_1"), &json!({}))
        .await
        .unwrap();
    expect_error(&mut other, "PERMISSION_DENIED").await;

    // Malformed frames: each gets VALIDATION_ERROR, the connection goes on.
    for bad in [
        "not json",
        "[]",
        r#"{"type":"message","id":"b1"}"#,
        r#"{"type":"message","id":"b2","recipient":{"id":"x","type":"agent"},"payload":{}}"#,
        r#"{"type":"message","id":"b3","recipient":{"id":"guide_2","type":"robot"},"payload":{}}"#,
        r#"{"type":"message","id":"b4","recipient":{"id":"guide_2","type":"agent"}}"#,
        r#"{"type":"message","id":"b5","recipient":{"id":"guide_2","type":"agent"},"payload":{},"priority":"urgent"}"#,
        r#"{"type":"error","id":"b6"}"#,
        r#"{"type":"message","id":"b7","recipient":{"id":"guide_1","type":"agent"},"payload":{}}"#,
    ] {
        a.send_raw(bad).await.unwrap();
        let e = expect_error(&mut a, "VALIDATION_ERROR").await;
        if let Some(id) = bad.split("\"id\":\"").nth(1).map(|r| &r[..2]) {
            assert_eq!(e.payload["details"]["original_message_id"], id, "{bad}");
        }
    }
    let big = format!(
        r#"{{"type":"message","recipient":{{"id":"guide_2","type":"agent"}},"payload":"{}"}}"#,
        "x".repeat(300_000)
    );
    a.send_raw(&big).await.unwrap();
    expect_error(&mut a, "VALIDATION_ERROR").await;
    // Unknown agent.
    a.send(a.agent("nobody_here"), &json!({})).await.unwrap();
    let e = expect_error(&mut a, "CONNECTION_ERROR").await;
    assert_eq!(e.payload["details"]["error"], "agent_not_found");
    assert_eq!(e.payload["details"]["agentId"], "nobody_here");
    // Still serving: a normal message goes through.
    a.send(a.agent("guide_2"), &json!({"ok": true}))
        .await
        .unwrap();
    let got = victim.recv().await.unwrap();
    assert_eq!(got.payload["ok"], true);
    assert_eq!(got.sender["id"], "guide_1");
}

#[tokio::test]
async fn endpoints_check_ids_keys_and_the_switch() {
    let app = hub_app().await;
    let base = format!("http://{}", app.addr);
    let client = reqwest_client();
    let upgrade = |path: &str, key: Option<&str>| {
        let mut r = client
            .get(format!("{base}{path}"))
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
        if let Some(k) = key {
            r = r.header("authorization", format!("Bearer {k}"));
        }
        r.send()
    };
    let key = app.api_key.clone();
    assert_eq!(upgrade("/env/ab", Some(&key)).await.unwrap().status(), 400);
    assert_eq!(
        upgrade(&format!("/env/{}", "x".repeat(51)), Some(&key))
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(
        upgrade("/env/hall_a/agent/a*b", Some(&key))
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(
        upgrade("/env/hall_a?tier=boss", Some(&key))
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(
        upgrade("/env/hall_a?bogus=1", Some(&key))
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(
        upgrade(
            "/env/hall_a/agent/robot_1?last_seq=18446744073709551615",
            Some(&key)
        )
        .await
        .unwrap()
        .status(),
        400,
        "a resume point beyond any sequence number"
    );
    assert_eq!(upgrade("/env/hall_a", None).await.unwrap().status(), 401);
    assert_eq!(
        upgrade("/env/hall_a", Some("mak_wrong"))
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        upgrade("/human/doc_1", Some(&key)).await.unwrap().status(),
        101
    );
    assert_eq!(
        upgrade(&format!("/env/hall_a?api_key={key}"), None)
            .await
            .unwrap()
            .status(),
        101,
        "browsers pass the key in the query"
    );

    let off = crate::support::spawn_app().await;
    let r = reqwest_client()
        .get(format!("http://{}/env/hall_a", off.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "hub disabled by default");
}

fn reqwest_client() -> reqwest::Client {
    museum_agent::util::http_client_builder().build().unwrap()
}

#[tokio::test]
async fn offline_inbox_is_delivered_in_order_and_resume_says_if_complete() {
    let app = hub_app().await;
    register_offline(&app, agent("hall_a", "robot_1"), manual()).await;
    let mut world = connect(&app, Identity::Environment("hall_a".into())).await;
    for i in 1..=4 {
        world
            .send(world.agent("robot_1"), &json!({"n": i}))
            .await
            .unwrap();
    }
    // No error came back: all four stored. (A round trip through the hub proves they were
    // processed: the hub answers presence after handling the earlier frames.)
    let (p, others) = world.call(json!({"type": "presence"})).await.unwrap();
    assert!(others.is_empty(), "{others:?}");
    assert_eq!(p.payload["online"], json!([]));

    let mut r = connect_with(&app, agent("hall_a", "robot_1"), manual()).await;
    assert_eq!(r.resume["complete"], true);
    assert_eq!(r.resume["pending"], 4);
    let mut seqs = vec![];
    for i in 1..=4 {
        let got = r.recv().await.unwrap();
        assert_eq!(got.payload["n"], i);
        seqs.push(got.seq.unwrap());
    }
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    r.ack(2).await.unwrap();
    let (ack, _) = r
        .call(json!({"type": "ack", "seq": 2, "reply": true}))
        .await
        .unwrap();
    assert_eq!(ack.payload["acked"], 2);
    r.close().await;
    wait_offline(&app, "agent/hall_a/robot_1").await;

    // Resume after what the client saw (3): only 4 again, with its own sequence number.
    let mut r = connect_with(
        &app,
        agent("hall_a", "robot_1"),
        Options {
            manual_ack: true,
            last_seq: Some(3),
            ..Options::default()
        },
    )
    .await;
    assert_eq!(r.resume["complete"], true, "{}", r.resume);
    assert_eq!(r.resume["resent"], 1);
    let got = r.recv().await.unwrap();
    assert_eq!((got.seq, got.payload["n"].as_i64()), (Some(4), Some(4)));
    r.ack(4).await.unwrap();
    world
        .send(world.agent("robot_1"), &json!({"n": 5}))
        .await
        .unwrap();
    assert_eq!(r.recv().await.unwrap().seq, Some(5));
    r.ack(5).await.unwrap();
    r.close().await;
    wait_offline(&app, "agent/hall_a/robot_1").await;

    // A client that lost its state and asks from 0: the hub no longer has 1..5 (acked).
    let r = connect_with(
        &app,
        agent("hall_a", "robot_1"),
        Options {
            manual_ack: true,
            last_seq: Some(0),
            ..Options::default()
        },
    )
    .await;
    assert_eq!(r.resume["complete"], false, "{}", r.resume);
    assert_eq!(r.resume["missing"], 5);
}

#[tokio::test]
async fn stored_inboxes_and_registries_survive_a_restart() {
    let mut first = hub_app().await;
    register_offline(&first, agent("hall_a", "robot_1"), manual()).await;
    let mut parent = connect(&first, agent("hall_a", "curator")).await;
    let (r, _) = parent
        .call(json!({"type": "spawn_agent", "roleId": "guide", "agentId": "guide_kid", "taskBrief": brief()}))
        .await
        .unwrap();
    assert_eq!(r.payload["agentId"], "guide_kid");
    let mut world = connect(&first, Identity::Environment("hall_a".into())).await;
    world
        .send(world.agent("robot_1"), &json!({"n": 1}))
        .await
        .unwrap();
    world
        .send(world.agent("guide_kid"), &json!({"n": 2}))
        .await
        .unwrap();
    world.call(json!({"type": "presence"})).await.unwrap();
    parent.close().await;
    world.close().await;
    first.shutdown();
    first.server.take().unwrap().await.unwrap().unwrap();

    let db = first.app.config.database.path.clone();
    let second = spawn_app_with(move |c| {
        hub_on(c);
        c.database.path = db;
    })
    .await;
    let mut robot = connect_with(&second, agent("hall_a", "robot_1"), manual()).await;
    assert_eq!(robot.recv().await.unwrap().payload["n"], 1);
    let mut kid = connect(&second, agent("hall_a", "guide_kid")).await;
    assert_eq!(
        kid.welcome["context"]["taskBrief"]["objective"],
        brief()["objective"]
    );
    assert_eq!(
        kid.recv().await.unwrap().payload["n"],
        2,
        "a spawned agent's inbox waited for it"
    );
    let (c, _) = kid.call(json!({"type": "list_contacts"})).await.unwrap();
    assert_eq!(c.payload["contacts"][0]["id"], "curator");
    assert_eq!(c.payload["contacts"][0]["source"], "parent");
}

#[tokio::test]
async fn expired_messages_are_never_delivered_and_are_counted() {
    let app = hub_app().await;
    register_offline(&app, agent("hall_a", "robot_1"), Options::default()).await;
    let mut world = connect(&app, Identity::Environment("hall_a".into())).await;
    let o = |ttl| SendOptions {
        ttl: Some(ttl),
        ..SendOptions::default()
    };
    world
        .send_with(world.agent("robot_1"), &json!({"n": "short"}), o(0.001))
        .await
        .unwrap();
    world
        .send_with(world.agent("robot_1"), &json!({"n": "long"}), o(600.0))
        .await
        .unwrap();
    world.call(json!({"type": "presence"})).await.unwrap();
    // The 1 ms ttl runs on the wall clock.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let mut r = connect(&app, agent("hall_a", "robot_1")).await;
    assert_eq!(r.resume["expired"], 1, "{}", r.resume);
    let got = r.recv().await.unwrap();
    assert_eq!(got.payload["n"], "long");
    assert_eq!(got.seq, Some(1));
    let (_, metrics) = app.http_get("/metrics").await;
    assert!(
        metrics.contains("hub_messages_expired_total 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn higher_priority_overtakes_lower_in_a_recipients_queue() {
    let app = hub_app().await;
    register_offline(&app, agent("hall_a", "robot_1"), Options::default()).await;
    let mut world = connect(&app, Identity::Environment("hall_a".into())).await;
    for (n, p) in [
        (1, "low"),
        (2, "normal"),
        (3, "critical"),
        (4, "low"),
        (5, "high"),
        (6, "critical"),
    ] {
        let o = SendOptions {
            priority: Some(p.into()),
            ..SendOptions::default()
        };
        world
            .send_with(world.agent("robot_1"), &json!({"n": n}), o)
            .await
            .unwrap();
    }
    world.call(json!({"type": "presence"})).await.unwrap();
    let mut r = connect(&app, agent("hall_a", "robot_1")).await;
    let mut order = vec![];
    for _ in 0..6 {
        let got = r.recv().await.unwrap();
        order.push((
            got.payload["n"].as_i64().unwrap(),
            got.priority.clone().unwrap(),
        ));
    }
    let ns: Vec<i64> = order.iter().map(|(n, _)| *n).collect();
    assert_eq!(ns, vec![3, 6, 5, 2, 1, 4], "{order:?}");
}

#[tokio::test]
async fn tier_rules_allow_command_pm_worker_chains_only() {
    let app = hub_app().await;
    let env = "clawos";
    let mut cmd = connect_with(&app, agent(env, "gm_01"), tier("command")).await;
    let mut pm1 = connect_with(&app, agent(env, "pm_01"), tier("pm")).await;
    let mut pm2 = connect_with(&app, agent(env, "pm_02"), tier("pm")).await;
    let mut w1 = connect_with(&app, agent(env, "worker_01"), tier("worker")).await;
    let mut w2 = connect_with(&app, agent(env, "worker_02"), tier("worker")).await;

    cmd.send(cmd.agent("pm_01"), &json!({"action": "task.assign"}))
        .await
        .unwrap();
    let got = pm1.recv().await.unwrap();
    assert_eq!(got.sender["tier"], "command");
    pm1.send(pm1.agent("worker_01"), &json!({"x": 1}))
        .await
        .unwrap();
    assert_eq!(w1.recv().await.unwrap().sender["id"], "pm_01");
    w1.send(w1.agent("pm_01"), &json!({"x": 2})).await.unwrap();
    assert_eq!(pm1.recv().await.unwrap().sender["id"], "worker_01");

    pm1.send(pm1.agent("pm_02"), &json!({})).await.unwrap();
    let e = expect_error(&mut pm1, "PERMISSION_DENIED").await;
    assert_eq!(e.payload["details"]["recoverable"], false);
    w1.send(w1.agent("worker_02"), &json!({})).await.unwrap();
    expect_error(&mut w1, "PERMISSION_DENIED").await;
    w2.send(w2.agent("gm_01"), &json!({})).await.unwrap();
    expect_error(&mut w2, "PERMISSION_DENIED").await;
    // A claimed tier that is not the connection's is a forged sender.
    let forged = json!({"type": "message", "sender": {"id": "worker_02", "type": "agent", "tier": "pm"},
                        "recipient": {"id": "worker_01", "type": "agent"}, "payload": {}});
    w2.send_raw(&forged.to_string()).await.unwrap();
    expect_error(&mut w2, "PERMISSION_DENIED").await;
    // pm2 heard nothing but the command's broadcast; the worker broadcast reached only pms.
    cmd.send(cmd.broadcast("agent", None), &json!({"all": true}))
        .await
        .unwrap();
    assert_eq!(pm2.recv().await.unwrap().payload["all"], true);
    assert_eq!(pm1.recv().await.unwrap().payload["all"], true);
}

#[tokio::test]
async fn responses_must_match_a_pending_request_by_sender_and_id() {
    let app = hub_app().await;
    let env = "hall_a";
    let mut a = connect(&app, agent(env, "asker")).await;
    let mut b = connect(&app, agent(env, "answerer")).await;
    let mut c = connect(&app, agent(env, "stranger")).await;
    let req = SendOptions {
        id: Some("r1".into()),
        kind: Some("request".into()),
        ..SendOptions::default()
    };
    a.send_with(a.agent("answerer"), &json!({"action": "status.query"}), req)
        .await
        .unwrap();
    let got = b.recv().await.unwrap();
    assert_eq!(got.kind.as_deref(), Some("request"));
    let resp = || SendOptions {
        kind: Some("response".into()),
        request_id: Some("r1".into()),
        ..SendOptions::default()
    };
    // Someone else cannot answer it.
    c.send_with(c.agent("asker"), &json!({"status": "success"}), resp())
        .await
        .unwrap();
    expect_error(&mut c, "VALIDATION_ERROR").await;
    b.send_with(b.agent("asker"), &json!({"status": "success"}), resp())
        .await
        .unwrap();
    let got = a.recv().await.unwrap();
    assert_eq!(got.kind.as_deref(), Some("response"));
    assert_eq!(got.request_id.as_deref(), Some("r1"));
    // Only once.
    b.send_with(b.agent("asker"), &json!({"status": "success"}), resp())
        .await
        .unwrap();
    let e = expect_error(&mut b, "VALIDATION_ERROR").await;
    assert!(e.payload["message"].as_str().unwrap().contains("r1"));
    // An error reply to an unknown request, and a response without requestId.
    let bad = json!({"type": "message", "kind": "error", "requestId": "zz", "recipient": {"id": "asker", "type": "agent"}, "payload": {"code": "E002"}});
    b.send_raw(&bad.to_string()).await.unwrap();
    expect_error(&mut b, "VALIDATION_ERROR").await;
}

fn brief() -> Value {
    json!({
        "objective": "Guide visitors through the bronze gallery",
        "constraints": ["speak Mandarin and English", "stay in hall A"],
        "inputs": "visitor questions",
        "outputs": "spoken answers and exhibit cards",
        "completion_criteria": "the tour ends at the exit",
        "collaborators": [{"agentId": "conservator", "role": "文物修复师", "description": "knows condition reports"}],
        "priority": "high"
    })
}

#[tokio::test]
async fn society_spawn_contacts_introductions_and_formatted_delivery() {
    let app = hub_app().await;
    let env = "hall_a";
    let mut curator = connect_with(
        &app,
        agent(env, "curator"),
        Options {
            role: Some("策展人".into()),
            ..Options::default()
        },
    )
    .await;
    let mut conservator = connect_with(
        &app,
        agent(env, "conservator"),
        Options {
            role: Some("文物修复师".into()),
            llm_format: true,
            ..Options::default()
        },
    )
    .await;

    // Invalid brief: the seed's error object in the details.
    let mut bad = brief();
    bad.as_object_mut().unwrap().remove("inputs");
    bad["outputs"] = Value::Null;
    let (e, _) = curator
        .call(json!({"type": "spawn_agent", "roleId": "guide", "taskBrief": bad}))
        .await
        .unwrap();
    assert_eq!(e.error_code(), Some("VALIDATION_ERROR"));
    assert_eq!(e.payload["details"]["error"], "invalid_task_brief");
    let missing: Vec<&str> = e.payload["details"]["missing_fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(missing, vec!["inputs", "outputs"]);

    let (r, _) = curator
        .call(json!({"type": "spawn_agent", "roleId": "guide", "agentId": "guide_kid", "taskBrief": brief()}))
        .await
        .unwrap();
    assert_eq!(r.payload["type"], "spawn_agent_result");
    let mut kid = connect_with(
        &app,
        agent(env, "guide_kid"),
        Options {
            role: Some("guide".into()),
            ..Options::default()
        },
    )
    .await;
    assert_eq!(
        kid.welcome["context"]["taskBrief"],
        brief(),
        "task brief injected into context"
    );
    let (c, _) = kid.call(json!({"type": "list_contacts"})).await.unwrap();
    let contacts = c.payload["contacts"].as_array().unwrap();
    assert_eq!(contacts[0]["id"], "curator");
    assert_eq!(contacts[0]["source"], "parent");
    assert!(contacts[0]["addedAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(contacts[1]["id"], "conservator");
    assert_eq!(contacts[1]["source"], "preset");
    let (c, _) = curator
        .call(json!({"type": "list_contacts"}))
        .await
        .unwrap();
    assert!(
        c.payload["contacts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == "guide_kid")
    );

    // Introduction request to the parent, with from filled by the hub (a forged one is replaced).
    let (ok, _) = kid
        .call(json!({"type": "send_message", "to": "curator", "payload": {
            "message_type": "introduction_request", "from": "someone_else",
            "reason": "a visitor asks about restoration", "required_capability": "conservation"}}))
        .await
        .unwrap();
    assert_eq!(ok.payload["type"], "send_message_result");
    let got = curator.recv().await.unwrap();
    assert_eq!(got.sender["id"], "guide_kid");
    assert_eq!(got.payload["from"], "guide_kid");
    let f = got.formatted.unwrap();
    assert!(f.starts_with("【来自 guide（guide_kid）的消息】"), "{f}");
    assert!(
        f.ends_with("如需回复，请使用 send_message(to='guide_kid', ...)"),
        "{f}"
    );
    // A malformed introduction request is refused with the seed's object.
    let (e, _) = kid
        .call(json!({"type": "send_message", "to": "curator", "payload": {"message_type": "introduction_request"}}))
        .await
        .unwrap();
    assert_eq!(e.payload["details"]["error"], "invalid_message_format");

    // The parent introduces someone; the child's registry gains it.
    let mut registrar = connect(&app, agent(env, "registrar")).await;
    curator
        .call(
            json!({"type": "send_message", "to": "guide_kid", "payload": {
            "message_type": "introduction_response", "agentId": "registrar", "role": "登记员"}}),
        )
        .await
        .unwrap();
    let intro = kid.recv().await.unwrap();
    assert_eq!(intro.payload["message_type"], "introduction_response");
    let (c, _) = kid
        .call(json!({"type": "is_contact_known", "agentId": "registrar"}))
        .await
        .unwrap();
    assert_eq!(c.payload["result"]["inRegistry"], true);
    let (c, _) = kid.call(json!({"type": "list_contacts"})).await.unwrap();
    let reg = c.payload["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == "registrar")
        .cloned()
        .unwrap();
    assert_eq!(reg["source"], "introduction");
    assert_eq!(reg["introducedBy"], "curator");

    // First message: the receiver's registry gains the sender.
    kid.call(json!({"type": "send_message", "to": "registrar", "payload": {"text": "你好"}}))
        .await
        .unwrap();
    let got = registrar.recv().await.unwrap();
    assert_eq!(got.payload["text"], "你好");
    let (c, _) = registrar
        .call(json!({"type": "list_contacts"}))
        .await
        .unwrap();
    let back = c.payload["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == "guide_kid")
        .cloned()
        .unwrap();
    assert_eq!(back["source"], "first_message");

    // Star messages to an LLM-format connection carry the rendering too.
    kid.send(
        kid.agent("conservator"),
        &json!({"text": "condition of item 1001?"}),
    )
    .await
    .unwrap();
    let got = conservator.recv().await.unwrap();
    assert_eq!(
        got.formatted.as_deref(),
        Some(
            "【来自 guide（guide_kid）的消息】\ncondition of item 1001?\n如需回复，请使用 send_message(to='guide_kid', ...)"
        )
    );
    // Unknown agent.
    let (e, _) = kid
        .call(json!({"type": "send_message", "to": "ghost_agent", "payload": {"text": "?"}}))
        .await
        .unwrap();
    assert_eq!(e.payload["details"]["error"], "agent_not_found");
    assert_eq!(e.payload["details"]["agentId"], "ghost_agent");
    // Environments cannot use society services.
    let mut world = connect(&app, Identity::Environment(env.into())).await;
    let (e, _) = world.call(json!({"type": "list_contacts"})).await.unwrap();
    assert_eq!(e.error_code(), Some("PERMISSION_DENIED"));
}

#[tokio::test]
async fn a_full_inbox_is_a_clear_error_to_the_sender() {
    let app = spawn_app_with(|c| {
        hub_on(c);
        c.hub.inbox_depth = 3;
    })
    .await;
    register_offline(&app, agent("hall_a", "robot_1"), manual()).await;
    let mut world = connect(&app, Identity::Environment("hall_a".into())).await;
    for i in 0..3 {
        world
            .send(world.agent("robot_1"), &json!({"n": i}))
            .await
            .unwrap();
    }
    world
        .send(world.agent("robot_1"), &json!({"n": 3}))
        .await
        .unwrap();
    let e = expect_error(&mut world, "CONNECTION_ERROR").await;
    assert!(
        e.payload["message"].as_str().unwrap().contains("full"),
        "{e:?}"
    );
    assert_eq!(e.payload["details"]["clawos_code"], "E002");
    // Online with manual acks: the window is the same bound until the client acks.
    let mut r = connect_with(&app, agent("hall_a", "robot_1"), manual()).await;
    for _ in 0..3 {
        r.recv().await.unwrap();
    }
    world
        .send(world.agent("robot_1"), &json!({"n": 4}))
        .await
        .unwrap();
    expect_error(&mut world, "CONNECTION_ERROR").await;
    r.ack(3).await.unwrap();
    r.call(json!({"type": "presence"})).await.unwrap();
    world
        .send(world.agent("robot_1"), &json!({"n": 5}))
        .await
        .unwrap();
    assert_eq!(r.recv().await.unwrap().payload["n"], 5);
}

#[tokio::test]
async fn a_second_connection_replaces_the_first_and_silent_peers_are_dropped() {
    let app = spawn_app_with(|c| {
        hub_on(c);
        c.hub.heartbeat_interval_seconds = 0.1;
        c.hub.max_missed_heartbeats = 3;
    })
    .await;
    let mut old = connect(&app, agent("hall_a", "robot_1")).await;
    let new = connect(&app, agent("hall_a", "robot_1")).await;
    let e = expect_error(&mut old, "CONNECTION_ERROR").await;
    assert!(e.payload["message"].as_str().unwrap().contains("replaced"));
    assert_eq!(e.payload["details"]["reason"], "replaced");
    let closed = old.recv().await.unwrap_err().to_string();
    assert!(
        closed.contains("4001") && closed.contains("replaced"),
        "{closed}"
    );
    new.close().await;
    wait_offline(&app, "agent/hall_a/robot_1").await;

    // A raw socket that never reads (so never answers pings) and never writes.
    let url = format!("{}/env/hall_a/agent/silent_1", app.base_url());
    let mut req =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .unwrap();
    req.headers_mut().insert(
        "authorization",
        format!("Bearer {}", app.api_key).parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let hub = app.app.hub.clone().unwrap();
    let errors_before = hub.metrics.errors();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !hub.is_online("agent/hall_a/silent_1") || hub.metrics.errors() == errors_before {
        assert!(
            std::time::Instant::now() < deadline,
            "silent peer never dropped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        if !hub.is_online("agent/hall_a/silent_1") && hub.metrics.errors() > errors_before {
            break;
        }
    }
    assert_eq!(
        hub.metrics.errors(),
        errors_before + 1,
        "one CONNECTION_ERROR: presumed dead"
    );
    // Its socket is closed by the hub: reading ends (it may error on the unsent pongs).
    use futures_util::StreamExt;
    while let Some(Ok(_)) = ws.next().await {}
}

#[tokio::test]
async fn hub_metrics_report_latency_depth_and_errors() {
    let app = hub_app().await;
    let mut world = connect(&app, Identity::Environment("hall_a".into())).await;
    let mut r = connect_with(&app, agent("hall_a", "robot_1"), manual()).await;
    for i in 0..5 {
        world
            .send(world.agent("robot_1"), &json!({"n": i}))
            .await
            .unwrap();
    }
    for _ in 0..5 {
        r.recv().await.unwrap();
    }
    world.send_raw("garbage").await.unwrap();
    expect_error(&mut world, "VALIDATION_ERROR").await;
    let (_, m) = app.http_get("/metrics").await;
    assert!(m.contains("hub_message_latency_seconds_count 5"), "{m}");
    assert!(
        m.contains("hub_queue_depth{recipient=\"agent/hall_a/robot_1\",state=\"unacked\"} 5"),
        "{m}"
    );
    assert!(
        m.contains("hub_errors_total{code=\"VALIDATION_ERROR\"} 1"),
        "{m}"
    );
    assert!(m.contains("hub_messages_received_total 6"), "{m}");
}

#[tokio::test]
async fn an_api_key_can_pin_the_tier_of_its_connections() {
    let app = hub_app().await;
    let k = museum_agent::auth::generate_api_key();
    let store = app.app.store();
    let row = store
        .insert_api_key("worker-robots", &k.prefix, &k.hash)
        .unwrap();
    store.set_api_key_hub_tier(row.id, Some("worker")).unwrap();
    let claim = |t: &str| Options {
        tier: Some(t.into()),
        ..Options::default()
    };
    let err = HubClient::connect(
        &app.base_url(),
        agent("clawos", "robot_9"),
        &k.key,
        claim("command"),
    )
    .await
    .err()
    .expect("a worker key cannot claim command");
    assert!(err.to_string().contains("403"), "{err}");
    let robot = HubClient::connect(
        &app.base_url(),
        agent("clawos", "robot_9"),
        &k.key,
        Options::default(),
    )
    .await
    .unwrap();
    assert_eq!(robot.welcome["identity"]["tier"], "worker");
    let mut other = HubClient::connect(
        &app.base_url(),
        agent("clawos", "robot_8"),
        &k.key,
        claim("worker"),
    )
    .await
    .unwrap();
    other
        .send(other.agent("robot_9"), &json!({}))
        .await
        .unwrap();
    expect_error(&mut other, "PERMISSION_DENIED").await;
}

/// One hub-corpus case: the frame is sent (`@PAD@` in it replaced by `pad` characters), then a
/// `presence` call marks the end of what it caused; in between must come exactly one hub error
/// with the expected code, original message id and wording, and a real traceId (the sender's
/// when `expect.trace_id` names it). With `expect.close` the connection must instead end after
/// that one error with that close code. Returns whether the connection is still usable.
async fn hub_case(c: &mut HubClient, case: &Value) -> (Result<(), String>, bool) {
    let Some(text) = case["send"].as_str() else {
        return (Err("\"send\" must be a string".into()), true);
    };
    let pad = case["pad"].as_u64().unwrap_or(0) as usize;
    let text = text.replace("@PAD@", &"x".repeat(pad));
    let want = &case["expect"];
    if let Err(e) = c.send_raw(&text).await {
        return (Err(format!("send: {e}")), false);
    }
    let before = if let Some(code) = want["close"].as_u64() {
        let (before, closed) = match c.until_close().await {
            Ok(x) => x,
            Err(e) => return (Err(format!("no close: {e}")), false),
        };
        let before: Vec<Envelope> = before.into_iter().filter(|e| e.ty != "heartbeat").collect();
        if closed != Some(code as u16) {
            return (
                Err(format!(
                    "closed with {closed:?}, expected {code}; before: {before:?}"
                )),
                false,
            );
        }
        (before, false)
    } else {
        match c.call(json!({"type": "presence"})).await {
            Ok((answer, _)) if answer.is_error() => {
                return (
                    Err(format!("the presence call after it failed: {answer:?}")),
                    true,
                );
            }
            Ok((_, before)) => (before, true),
            Err(e) => {
                return (
                    Err(format!(
                        "no answer to the presence call after the frame: {e}"
                    )),
                    false,
                );
            }
        }
    };
    let (before, open) = before;
    let [e] = before.as_slice() else {
        return (
            Err(format!(
                "expected exactly one hub error, got {}: {before:?}",
                before.len()
            )),
            open,
        );
    };
    let mut wrong = Vec::new();
    if !e.is_error() {
        wrong.push(format!("not an error: {e:?}"));
    }
    if e.error_code() != want["error_code"].as_str() {
        wrong.push(format!(
            "error_code {:?}, expected {}",
            e.error_code(),
            want["error_code"]
        ));
    }
    if e.payload["details"]["original_message_id"] != want["original_message_id"] {
        wrong.push(format!(
            "original_message_id {}, expected {}",
            e.payload["details"]["original_message_id"], want["original_message_id"]
        ));
    }
    let msg = e.payload["message"].as_str().unwrap_or("");
    let needle = want["message_contains"].as_str().unwrap_or("");
    if !msg.contains(needle) {
        wrong.push(format!("message {msg:?} lacks {needle:?}"));
    }
    if e.payload["details"]["suggested_action"]
        .as_str()
        .unwrap_or("")
        .is_empty()
    {
        wrong.push("no suggested_action".into());
    }
    // Every error carries a real traceId, the same in the envelope and in its details.
    let trace = e.trace_id.as_deref().unwrap_or("");
    if trace.is_empty() || trace == "-" {
        wrong.push(format!("traceId {trace:?} is not a real one"));
    }
    if e.payload["details"]["traceId"] != trace {
        wrong.push(format!(
            "details.traceId {} differs from the envelope's {trace:?}",
            e.payload["details"]["traceId"]
        ));
    }
    if let Some(sent) = want["trace_id"].as_str()
        && trace != sent
    {
        wrong.push(format!("traceId {trace:?}, expected the sender's {sent:?}"));
    }
    if wrong.is_empty() {
        (Ok(()), open)
    } else {
        (Err(wrong.join("; ")), open)
    }
}

/// Every case of `fixtures/hub-bad-frames/`: the frame gets exactly one hub error with the
/// expected code, original message id, wording and traceId; nothing reaches anyone else; the
/// connection goes on (or, for a frame over the hard limit, is closed with 1009). Every case
/// runs and is printed with its verdict; the test fails at the end with the full list of
/// failing cases.
#[tokio::test]
async fn hostile_frames_from_the_fixture_corpus_are_refused_and_the_connection_goes_on() {
    let app = hub_app().await;
    let _world = connect(&app, Identity::Environment("hall_a".into())).await;
    let mut victim = connect(&app, agent("hall_a", "agent_2")).await;
    let mut c = connect(&app, agent("hall_a", "agent_1")).await;
    let cases = corpus("hub-bad-frames", 43);
    let total = cases.len();
    let mut verdicts = Verdicts::new("hub-bad-frames", total);
    for (name, case) in cases {
        let (verdict, open) = match case {
            Err(e) => (Err(e), true),
            Ok(case) => hub_case(&mut c, &case).await,
        };
        verdicts.record(&name, verdict);
        // The next cases get a connection of their own if this one is gone.
        if !open {
            wait_offline(&app, "agent/hall_a/agent_1").await;
            c = connect(&app, agent("hall_a", "agent_1")).await;
        }
    }
    // Still open, and the victim saw none of it: its next message is this one.
    c.send(c.agent("agent_2"), &json!({"after": total}))
        .await
        .unwrap();
    let next = victim.recv().await.unwrap();
    let clean = if next.payload["after"] == total {
        Ok(())
    } else {
        Err(format!("another client received something: {next:?}"))
    };
    verdicts.record("(after all cases) nothing reached another client", clean);
    verdicts.finish();
}

/// The hub's own frames carry real traceIds: the greeting (welcome heartbeat and resume report,
/// one trace), every periodic heartbeat (a new one each), the error of a binary frame, and the
/// error and close of a connection replaced by a newer one.
#[tokio::test]
async fn greetings_heartbeats_and_closes_carry_real_trace_ids() {
    let app = spawn_app_with(|c| {
        c.hub.enabled = true;
        c.hub.heartbeat_interval_seconds = 0.05;
    })
    .await;
    let real = |t: &Option<String>| t.as_deref().is_some_and(|t| !t.is_empty() && t != "-");
    let mut c = connect(&app, agent("hall_a", "tracer")).await;
    let [hello, resume] = c.greeting.clone().try_into().expect("two greeting frames");
    assert!(real(&hello.trace_id), "{hello:?}");
    assert_eq!(
        hello.trace_id, resume.trace_id,
        "one trace for the greeting"
    );
    let mut traces = std::collections::HashSet::new();
    while traces.len() < 3 {
        let e = c.next_envelope().await.unwrap();
        assert_eq!(e.ty, "heartbeat", "{e:?}");
        assert!(real(&e.trace_id), "{e:?}");
        assert_ne!(e.trace_id, hello.trace_id);
        traces.insert(e.trace_id.unwrap());
    }
    c.send_binary(b"\x00\x01").await.unwrap();
    let e = expect_error(&mut c, "VALIDATION_ERROR").await;
    assert!(real(&e.trace_id), "{e:?}");
    assert_eq!(e.payload["details"]["traceId"], json!(e.trace_id));
    // Replaced by a second connection: the error saying so has a trace, then 4001.
    let _second = connect(&app, agent("hall_a", "tracer")).await;
    let (before, code) = c.until_close().await.unwrap();
    let err = before.iter().find(|e| e.is_error()).expect("an error");
    assert_eq!(err.payload["details"]["reason"], "replaced");
    assert!(real(&err.trace_id), "{err:?}");
    assert_eq!(code, Some(4001));
}

/// A frame over the hard limit (twice `max_message_bytes`) is never read: the client gets one
/// VALIDATION_ERROR saying why (with a traceId), then a close with 1009; between the limits the
/// frame gets a VALIDATION_ERROR and the connection goes on.
#[tokio::test]
async fn a_frame_over_the_hard_limit_is_closed_with_1009_after_an_error() {
    let app = spawn_app_with(|c| {
        c.hub.enabled = true;
        c.hub.max_message_bytes = 4096;
    })
    .await;
    let mut c = connect(&app, agent("hall_a", "big_1")).await;
    let frame = |n: usize| {
        json!({"type": "message", "id": "big", "traceId": "tr-big",
               "recipient": {"id": "big_2", "type": "agent"}, "payload": {"pad": "x".repeat(n)}})
        .to_string()
    };
    c.send_raw(&frame(6000)).await.unwrap();
    let e = expect_error(&mut c, "VALIDATION_ERROR").await;
    assert_eq!(e.payload["details"]["original_message_id"], "big");
    assert_eq!(e.trace_id.as_deref(), Some("tr-big"));
    c.send_raw(&frame(9000)).await.unwrap();
    let (before, code) = c.until_close().await.unwrap();
    let errors: Vec<_> = before.iter().filter(|e| e.is_error()).collect();
    assert_eq!(errors.len(), 1, "{before:?}");
    assert_eq!(errors[0].error_code(), Some("VALIDATION_ERROR"));
    assert!(
        errors[0].payload["message"]
            .as_str()
            .unwrap()
            .contains("hard limit of 8192 bytes"),
        "{:?}",
        errors[0]
    );
    assert!(
        errors[0]
            .trace_id
            .as_deref()
            .is_some_and(|t| t.starts_with("trace-"))
    );
    assert_eq!(code, Some(1009));
    wait_offline(&app, "agent/hall_a/big_1").await;
}

#[tokio::test]
async fn stored_messages_reach_an_llm_agent_formatted_with_the_senders_role() {
    let app = hub_app().await;
    let llm = || Options {
        llm_format: true,
        ..Options::default()
    };
    register_offline(&app, agent("hall_a", "llm_guide"), llm()).await;
    let mut curator = connect_with(
        &app,
        agent("hall_a", "curator"),
        Options {
            role: Some("策展人".into()),
            ..Options::default()
        },
    )
    .await;
    curator
        .send(curator.agent("llm_guide"), &json!({"text": "闭馆前请巡视"}))
        .await
        .unwrap();
    curator.call(json!({"type": "presence"})).await.unwrap();
    let mut g = connect_with(&app, agent("hall_a", "llm_guide"), llm()).await;
    let got = g.recv().await.unwrap();
    assert_eq!(
        got.formatted.as_deref(),
        Some(
            "【来自 策展人（curator）的消息】\n闭馆前请巡视\n如需回复，请使用 send_message(to='curator', ...)"
        )
    );
}

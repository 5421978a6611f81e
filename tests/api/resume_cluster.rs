//! Session resume across nodes (`[cluster] nats_url`, docs/protocol.md "Session resume", "Across
//! nodes"): two server instances on one real `nats-server` with JetStream (started per test on
//! random ports), each with its own SQLite file holding the same API key (same id and name, as a
//! shared store would), so the cluster is the only thing linking them. A socket cut on A
//! mid-reply resumes on B with every frame once and in order; an owner that is gone leaves the
//! snapshot; a key revoked on A shuts B's session through NATS (B's own poll is an hour); NATS
//! stopped leaves same-node resume working and `/readyz` saying "degraded".
//! Without `nats-server` these tests fail, unless `MUSEUM_AGENT_SKIP_NATS=1` (then "skipped").

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use museum_agent::auth::generate_api_key;
use museum_agent::store::Store;
use serde_json::{Value, json};

use crate::support::fake_llm::text_chunk;
use crate::support::nats_server::{NatsServer, nats};
use crate::support::replies::{Seen, read_until, resume_frame, words};
use crate::support::{Client, RECV_TIMEOUT, Script, TestApp, spawn_app_with};

/// Two nodes and the API key both of them know.
struct Nodes {
    a: TestApp,
    b: TestApp,
    key: String,
    _dir: tempfile::TempDir,
}

/// A SQLite file holding the key `shared` (the first key: id 1 on every node).
async fn store_with(path: &Path, prefix: &str, hash: &[u8]) {
    let store = Store::open(path).unwrap();
    store
        .users()
        .insert_api_key("shared", prefix, hash, None)
        .await
        .unwrap();
}

async fn node(nats: &NatsServer, id: &str, db: PathBuf) -> TestApp {
    let url = nats.url();
    let id = id.to_string();
    spawn_app_with(move |c| {
        c.database.path = db;
        c.cluster.nats_url = url;
        c.cluster.node_id = id;
        // Only the cluster may carry a revocation from one node to the other quickly.
        c.auth.revocation_check_seconds = 3600.0;
        // Only an INTERRUPT may stop a stalled upstream stream within a test's waits.
        c.llm.idle_timeout_seconds = 60.0;
    })
    .await
}

async fn nodes(nats: &NatsServer) -> Nodes {
    let dir = tempfile::tempdir().unwrap();
    let key = generate_api_key();
    let (da, db) = (dir.path().join("a.db"), dir.path().join("b.db"));
    store_with(&da, &key.prefix, &key.hash).await;
    store_with(&db, &key.prefix, &key.hash).await;
    let a = node(nats, "node-a", da).await;
    let b = node(nats, "node-b", db).await;
    for n in [&a, &b] {
        cluster_state(n, "ok").await;
    }
    Nodes {
        a,
        b,
        key: key.key,
        _dir: dir,
    }
}

/// Polls `/readyz` (bounded) until its `cluster` says `want`; returns the body.
async fn cluster_state(app: &TestApp, want: &str) -> Value {
    let t0 = Instant::now();
    loop {
        let (status, body) = app.http_get("/readyz").await;
        let v: Value = serde_json::from_str(&body).unwrap();
        if v["cluster"] == want {
            assert_eq!(status, 200, "the cluster never makes the node unready: {v}");
            return v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "cluster never {want}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client registered on `app` with the shared key; its resume token.
async fn registered(app: &TestApp, key: &str) -> (Client, String) {
    let mut c = app.connect().await;
    let ack = c.register_key(key).await;
    let token = ack["payload"]["resume_token"].as_str().unwrap().to_string();
    (c, token)
}

/// Resumes on `app`; the new socket (session id set).
async fn resume(app: &TestApp, key: &str, sid: &str, token: &str, last_seen: Value) -> Client {
    let mut c = app.connect().await;
    c.send_value(&resume_frame(key, sid, token, last_seen))
        .await;
    let ack = c.recv().await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");
    assert_eq!(ack["payload"]["session_id"], sid, "the same session");
    assert_ne!(ack["payload"]["resume_token"], token, "a fresh token");
    c.session_id = sid.to_string();
    c
}

/// Bounded poll until `f` holds.
async fn until(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < RECV_TIMEOUT, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the cluster holds `sid`'s snapshot with `text` in its history (read from `app`).
async fn snapshot_has(app: &TestApp, sid: &str, text: &str) {
    let cluster = app.app.cluster.clone().unwrap();
    let t0 = Instant::now();
    loop {
        if let Ok(Some(s)) = cluster.lookup(sid).await
            && s.history.iter().any(|m| m.content.contains(text))
        {
            return;
        }
        assert!(
            t0.elapsed() < RECV_TIMEOUT,
            "no snapshot of {sid} with {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_socket_cut_on_a_mid_reply_resumes_on_b_with_every_frame_once_and_the_history() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    // A first turn, finished on A: the history B must have.
    let (first, _) = words("alpha", 3, Duration::ZERO);
    n.a.llm.push(first);
    let (mut c, token) = registered(&n.a, &n.key).await;
    let sid = c.session_id.clone();
    c.text_request("r0", "first question").await;
    assert!(c.reply("r0").await.error.is_none());
    // The second reply streams; the socket is cut a few words in.
    let (script, whole) = words("word", 60, Duration::from_millis(15));
    n.a.llm.push(script);
    c.text_request("r1", "tell me everything").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 5).await;
    drop(c);
    let t0 = Instant::now();
    let mut c = resume(&n.b, &n.key, &sid, &token, json!({"r1": seen.last_seen()})).await;
    let acked = t0.elapsed();
    read_until(&mut c, "r1", &mut seen, usize::MAX).await;
    eprintln!(
        "resumed on B in {acked:?}; {} frames of r1",
        seen.text_seqs.len()
    );
    assert_eq!(
        seen.text, whole,
        "text lost, repeated or reordered across nodes"
    );
    assert_eq!(*seen.text_seqs.last().unwrap(), -1);
    assert!(seen.error.is_none(), "{:?}", seen.error);
    // Asked again the moment the reply ended (no wait for A to let go), B serves the session
    // with its whole history: A's first turn and the forwarded reply.
    let (script, _) = words("next", 2, Duration::ZERO);
    n.b.llm.push(script);
    c.text_request("r2", "and then?").await;
    assert!(c.reply("r2").await.error.is_none());
    let prompt = n.b.llm.requests()[0].to_string();
    assert!(prompt.contains("alpha2"), "A's first turn lost: {prompt}");
    assert!(
        prompt.contains("word59"),
        "the forwarded turn lost: {prompt}"
    );
    assert!(
        prompt.contains("navigate_to_gallery"),
        "the client's function list lost: {prompt}"
    );
    // Nothing more arrives (no duplicate of r1 later).
    assert!(c.sync().await.is_empty());
    // A let the session go once the reply ended.
    until("A still holds the session", || {
        n.a.app.resumable.is_empty()
            && n.a
                .app
                .stats
                .sessions
                .load(std::sync::atomic::Ordering::Relaxed)
                == 0
    })
    .await;
}

/// A client that hops between the nodes as fast as it can (each resume renews the token, and
/// the new owner's snapshot may not be written yet when the client is back on the other node):
/// every hop is resumed, none refused, and the conversation is whole at the end.
#[tokio::test]
async fn hopping_between_nodes_at_once_resumes_every_time() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    let (first, _) = words("alpha", 3, Duration::ZERO);
    n.a.llm.push(first);
    let (mut c, mut token) = registered(&n.a, &n.key).await;
    let sid = c.session_id.clone();
    c.text_request("r0", "first question").await;
    assert!(c.reply("r0").await.error.is_none());
    snapshot_has(&n.a, &sid, "alpha2").await;
    drop(c);
    let mut on = &n.a;
    for hop in 0..8 {
        on = if hop % 2 == 0 { &n.b } else { &n.a };
        let mut c = on.connect().await;
        c.send_value(&resume_frame(&n.key, &sid, &token, json!({})))
            .await;
        let ack = c.recv().await;
        assert_eq!(ack["msg_type"], "REGISTER_ACK", "hop {hop}: {ack}");
        token = ack["payload"]["resume_token"].as_str().unwrap().to_string();
    }
    // The last node serves the session with its history.
    let mut c = resume(on, &n.key, &sid, &token, json!({})).await;
    let (script, _) = words("next", 2, Duration::ZERO);
    on.llm.push(script);
    c.text_request("r1", "and then?").await;
    assert!(c.reply("r1").await.error.is_none());
    let prompt = on.llm.requests().last().unwrap().to_string();
    assert!(prompt.contains("alpha2"), "the first turn lost: {prompt}");
}

/// Many visitors register on A at once and each drops at once and comes back on B: every one
/// is resumed. A's snapshot writes queue up behind one another here, so a session whose
/// REGISTER_ACK went out before its snapshot was stored would be unknown on B
/// (SESSION_INVALID); the first snapshot is stored before the ACK.
#[tokio::test]
async fn a_visitor_back_on_b_right_after_registering_on_a_is_resumed() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    let visitors = (0..60).map(|_| async {
        let (c, token) = registered(&n.a, &n.key).await;
        let sid = c.session_id.clone();
        drop(c);
        let mut c = n.b.connect().await;
        c.send_value(&resume_frame(&n.key, &sid, &token, json!({})))
            .await;
        let ack = c.recv().await;
        (ack["msg_type"] == "REGISTER_ACK" && ack["payload"]["session_id"] == sid.as_str())
            .then_some(())
            .ok_or(ack)
    });
    let refused: Vec<Value> = futures_util::future::join_all(visitors)
        .await
        .into_iter()
        .filter_map(Result::err)
        .collect();
    assert!(
        refused.is_empty(),
        "{} of 60 refused, the first: {}",
        refused.len(),
        refused[0]
    );
}

#[tokio::test]
async fn an_owner_that_is_gone_leaves_the_snapshot_and_its_reply_is_reported_interrupted() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    let (first, _) = words("alpha", 3, Duration::ZERO);
    n.a.llm.push(first);
    let (mut c, token) = registered(&n.a, &n.key).await;
    let sid = c.session_id.clone();
    c.text_request("r0", "first question").await;
    assert!(c.reply("r0").await.error.is_none());
    snapshot_has(&n.b, &sid, "alpha2").await;
    let (script, _) = words("word", 200, Duration::from_millis(20));
    n.a.llm.push(script);
    c.text_request("r1", "a long one").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 3).await;
    // A dies: it answers nothing in the cluster any more.
    n.a.app.cluster.as_ref().unwrap().halt();
    drop(c);
    let mut c = resume(&n.b, &n.key, &sid, &token, json!({"r1": seen.last_seen()})).await;
    let e = c.recv().await;
    assert_eq!(e["msg_type"], "ERROR", "{e}");
    assert_eq!(e["payload"]["request_id"], "r1");
    assert_eq!(e["payload"]["error_code"], "SERVER_BUSY");
    assert_eq!(e["payload"]["retryable"], true);
    assert!(
        e["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    // The session goes on from the snapshot: history and all.
    let (script, _) = words("next", 2, Duration::ZERO);
    n.b.llm.push(script);
    c.text_request("r2", "again").await;
    assert!(c.reply("r2").await.error.is_none());
    let prompt = n.b.llm.requests()[0].to_string();
    assert!(prompt.contains("alpha2"), "history lost: {prompt}");
}

#[tokio::test]
async fn a_key_revoked_on_a_shuts_the_live_session_on_b_at_once() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    let (mut on_b, _) = registered(&n.b, &n.key).await;
    let t0 = Instant::now();
    // Revoked in A's store only: B's store never hears of it, and B polls once an hour.
    n.a.app.store().revoke_api_key("shared").unwrap();
    let v = on_b.recv().await;
    let took = t0.elapsed();
    assert_eq!(v["msg_type"], "SHUTDOWN", "{v}");
    assert_eq!(v["payload"]["reason"], "credential revoked");
    assert_eq!(on_b.expect_closed().await, Some(1008));
    eprintln!("revocation on A reached B's session in {took:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn with_nats_stopped_same_node_resume_works_and_readyz_says_degraded() {
    let Some(mut nats) = nats().await else { return };
    let n = nodes(&nats).await;
    nats.stop().await.unwrap();
    let v = cluster_state(&n.a, "degraded").await;
    assert_eq!(v["status"], "ready", "{v}");
    assert_eq!(v["health"], "DEGRADED", "{v}");
    assert_eq!(
        v["cluster_detail"], "not connected to NATS (reconnecting)",
        "a technician reads why: {v}"
    );
    // A session on A, cut mid-reply, resumes on A.
    let (script, whole) = words("word", 40, Duration::from_millis(10));
    n.a.llm.push(script);
    let (mut c, token) = registered(&n.a, &n.key).await;
    let sid = c.session_id.clone();
    c.text_request("r1", "q").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 4).await;
    drop(c);
    // On B it cannot be found while NATS is down: a retryable error, not a hang.
    let mut other = n.b.connect().await;
    other
        .send_value(&resume_frame(&n.key, &sid, &token, json!({})))
        .await;
    let e = other.recv().await;
    assert_eq!(e["payload"]["error_code"], "INTERNAL_ERROR", "{e}");
    assert_eq!(e["payload"]["retryable"], true, "{e}");
    let mut c = resume(&n.a, &n.key, &sid, &token, json!({"r1": seen.last_seen()})).await;
    read_until(&mut c, "r1", &mut seen, usize::MAX).await;
    assert_eq!(seen.text, whole);
    // NATS back: the cluster recovers by itself.
    nats.restart().await.unwrap();
    let v = cluster_state(&n.a, "ok").await;
    assert_eq!(v["cluster_detail"], Value::Null, "{v}");
}

#[tokio::test]
async fn resuming_on_b_closes_the_socket_still_open_on_a_and_takes_its_live_reply() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    let (script, whole) = words("word", 50, Duration::from_millis(15));
    n.a.llm.push(script);
    let (mut on_a, token) = registered(&n.a, &n.key).await;
    let sid = on_a.session_id.clone();
    on_a.text_request("r1", "q").await;
    let mut seen = Seen::default();
    read_until(&mut on_a, "r1", &mut seen, 4).await;
    // A wrong token is refused on B as on A.
    let mut bad = n.b.connect().await;
    bad.send_value(&resume_frame(&n.key, &sid, "rt_guess", json!({})))
        .await;
    assert_eq!(bad.recv().await["payload"]["error_code"], "AUTH_FAILED");
    assert_eq!(bad.expect_closed().await, Some(1008));
    // The client moves to B while its socket on A is still open (what it read last is what it
    // lists; frames A wrote after that are in A's replay buffer).
    let mut on_b = resume(&n.b, &n.key, &sid, &token, json!({"r1": seen.last_seen()})).await;
    // A's socket: maybe a few frames already in flight (the client ignores them: it listed
    // what it had read), then 4001.
    let closed = on_a.expect_closed().await;
    assert_eq!(closed, Some(4001));
    read_until(&mut on_b, "r1", &mut seen, usize::MAX).await;
    assert_eq!(
        seen.text, whole,
        "text lost, repeated or reordered across nodes"
    );
    assert!(seen.error.is_none());
}

#[tokio::test]
async fn an_interrupt_on_b_of_a_reply_still_streaming_on_a_is_acked_and_stops_it_on_a() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    // A reply whose upstream stream never ends by itself: only a cancel on A drops it (the
    // fake counts that as a disconnect).
    let chunks: Vec<Value> = (0..20).map(|i| text_chunk(&format!("word{i} "))).collect();
    n.a.llm.push(Script::StallAfter(chunks));
    let (mut c, token) = registered(&n.a, &n.key).await;
    let sid = c.session_id.clone();
    c.text_request("r1", "tell me everything").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 4).await;
    drop(c);
    let mut c = resume(&n.b, &n.key, &sid, &token, json!({"r1": seen.last_seen()})).await;
    // More frames arrive on B, forwarded by A: the reply is still open there.
    let before = seen.text_seqs.len();
    read_until(&mut c, "r1", &mut seen, before + 3).await;
    assert!(!seen.ended);
    assert_eq!(n.a.llm.disconnects(), 0, "A's upstream still streams");
    c.send(
        "INTERRUPT",
        json!({"interrupt_request_id": "r1", "reason": "USER_STOP"}),
    )
    .await;
    // Frames of r1 queued before the INTERRUPT may still arrive; then the ack.
    let ack = loop {
        let v = c.recv().await;
        if v["msg_type"] == "INTERRUPT_ACK" {
            break v;
        }
        seen.absorb(&v);
    };
    assert_eq!(ack["payload"]["status"], "SUCCESS", "{ack}");
    assert_eq!(ack["payload"]["interrupted_request_ids"], json!(["r1"]));
    let end = c.recv().await;
    assert_eq!(end["msg_type"], "RESPONSE", "{end}");
    assert_eq!(end["payload"]["request_id"], "r1");
    assert_eq!(end["payload"]["interrupted"], true, "{end}");
    assert_eq!(end["payload"]["interrupt_reason"], "USER_STOP", "{end}");
    // A stopped its upstream stream (the fake saw the client go before the reply ended).
    n.a.llm.wait_disconnects(1).await;
    // A lets the session go, and nothing more of r1 reaches the client.
    until("A still holds the session", || {
        n.a.app
            .stats
            .sessions
            .load(std::sync::atomic::Ordering::Relaxed)
            == 0
    })
    .await;
    let rest = c.sync().await;
    assert!(
        rest.iter().all(|v| v["payload"]["request_id"] != "r1"),
        "frames of r1 after its INTERRUPT_ACK: {rest:?}"
    );
    // The session goes on on B.
    let (script, _) = words("next", 2, Duration::ZERO);
    n.b.llm.push(script);
    c.text_request("r2", "and then?").await;
    assert!(c.reply("r2").await.error.is_none());
}

#[tokio::test]
async fn an_interrupt_on_b_when_a_is_unreachable_is_still_acked_and_nothing_follows_it() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    let (script, _) = words("word", 300, Duration::from_millis(10));
    n.a.llm.push(script);
    let (mut c, token) = registered(&n.a, &n.key).await;
    let sid = c.session_id.clone();
    c.text_request("r1", "tell me everything").await;
    let mut seen = Seen::default();
    read_until(&mut c, "r1", &mut seen, 4).await;
    drop(c);
    let mut c = resume(&n.b, &n.key, &sid, &token, json!({"r1": seen.last_seen()})).await;
    let before = seen.text_seqs.len();
    read_until(&mut c, "r1", &mut seen, before + 2).await;
    // A stops answering the cluster (its interrupt subscription is gone) but keeps forwarding.
    n.a.app.cluster.as_ref().unwrap().halt();
    c.send("INTERRUPT", json!({"reason": "USER_STOP"})).await;
    let ack = loop {
        let v = c.recv().await;
        if v["msg_type"] == "INTERRUPT_ACK" {
            break v;
        }
        seen.absorb(&v);
    };
    assert_eq!(ack["payload"]["interrupted_request_ids"], json!(["r1"]));
    let end = c.recv().await;
    assert_eq!(end["payload"]["interrupted"], true, "{end}");
    let rest = c.sync().await;
    assert!(
        rest.iter().all(|v| v["payload"]["request_id"] != "r1"),
        "frames of r1 after its INTERRUPT_ACK: {rest:?}"
    );
}

/// `GET /api/exhibits/{id}` on `app` with `key`: status and body.
async fn exhibit(app: &TestApp, key: &str, id: &str) -> (u16, Value) {
    let client = museum_agent::util::http_client_builder().build().unwrap();
    let r = client
        .get(format!("http://{}/api/exhibits/{id}", app.addr))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Runs `museum-agent ingest FILE` on `db` with the cluster at `nats_url`; stdout and stderr.
async fn ingest_cli(db: &Path, nats_url: &str, file: &Path) -> String {
    let (db, url, file) = (db.to_path_buf(), nats_url.to_string(), file.to_path_buf());
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_museum-agent"))
            .env("MUSEUM_AGENT__DATABASE__PATH", &db)
            .env("MUSEUM_AGENT__CLUSTER__NATS_URL", &url)
            .env("RUST_LOG", "warn")
            .current_dir(db.parent().unwrap())
            .arg("ingest")
            .arg(&file)
            .output()
            .unwrap()
    });
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("ingest hung")
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

#[tokio::test]
async fn an_ingest_on_one_node_reloads_the_collection_of_the_others() {
    let Some(nats) = nats().await else { return };
    let n = nodes(&nats).await;
    let demo = std::fs::read_to_string(&n.a.app.config.srs.demo_path).unwrap();
    let mut rec: Value = serde_json::from_str(demo.lines().next().unwrap()).unwrap();
    rec["id"] = json!("xnode-new-1");
    rec["title"] = json!("A record ingested on node A");
    let file = n._dir.path().join("new.jsonl");
    std::fs::write(&file, format!("{rec}\n")).unwrap();
    let id = "xnode-new-1";
    assert_eq!(exhibit(&n.b, &n.key, id).await.0, 404);
    let mut reloads = n.b.app.cluster.as_ref().unwrap().reloads();
    // `museum-agent ingest` against A's database, with A's cluster.
    let a_db = n._dir.path().join("a.db");
    let out = ingest_cli(&a_db, &nats.url(), &file).await;
    assert!(out.contains("inserted 1"), "{out}");
    assert!(out.contains("told the cluster"), "{out}");
    tokio::time::timeout(RECV_TIMEOUT, reloads.wait_for(|n| *n >= 1))
        .await
        .expect("B never handled the ingest notice")
        .unwrap();
    let (status, body) = exhibit(&n.b, &n.key, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["title"], "A record ingested on node A", "{body}");
    // The file changes and is ingested again: B follows.
    rec["title"] = json!("Renamed on node A");
    std::fs::write(&file, format!("{rec}\n")).unwrap();
    let out = ingest_cli(&a_db, &nats.url(), &file).await;
    assert!(out.contains("updated 1"), "{out}");
    tokio::time::timeout(RECV_TIMEOUT, reloads.wait_for(|n| *n >= 2))
        .await
        .expect("B never handled the second notice")
        .unwrap();
    assert_eq!(
        exhibit(&n.b, &n.key, id).await.1["title"],
        "Renamed on node A"
    );
    // A path B cannot read is skipped; the notice is still handled.
    let notice = museum_agent::cluster::IngestNotice {
        files: vec![museum_agent::cluster::IngestedFile {
            path: n._dir.path().join("gone.jsonl").display().to_string(),
            sha256: "00".repeat(32),
        }],
    };
    let nc = async_nats::connect(nats.url()).await.unwrap();
    let subject = format!("{}.ingest", n.b.app.config.cluster.nats_prefix);
    nc.publish(subject, serde_json::to_vec(&notice).unwrap().into())
        .await
        .unwrap();
    nc.flush().await.unwrap();
    tokio::time::timeout(RECV_TIMEOUT, reloads.wait_for(|n| *n >= 3))
        .await
        .expect("B never handled the third notice")
        .unwrap();
    assert_eq!(
        exhibit(&n.b, &n.key, id).await.1["title"],
        "Renamed on node A"
    );
}

//! The user store on both engines: SQLite (the embedded default) and PostgreSQL (`[database]
//! url`, a throwaway cluster per test from `support::postgres`). The same story runs on both;
//! the others need PostgreSQL: two server instances sharing one database, the revocation poll
//! without a notification, and PostgreSQL restarted, killed or hung under live sessions.
//! Without PostgreSQL binaries the PostgreSQL tests fail, unless `MUSEUM_AGENT_SKIP_POSTGRES=1`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use museum_agent::auth::generate_api_key;
use museum_agent::store::Store;
use museum_agent::store::users::Lockout;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::support::fake_llm::{finish_chunk, text_chunk, text_reply};
use crate::support::postgres::{Postgres, postgres};
use crate::support::replies::resume_frame;
use crate::support::*;

/// The admin CLI of the real binary against `app`'s database (its SQLite file, and its
/// PostgreSQL when it has one).
async fn cli(app: &TestApp, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let db = &app.app.config.database;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_museum-agent"))
        .env("MUSEUM_AGENT__DATABASE__PATH", &db.path)
        .env("MUSEUM_AGENT__DATABASE__URL", &db.url)
        .env("RUST_LOG", "warn")
        .current_dir(db.path.parent().unwrap())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("admin command hung")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn account(name: &str, password: &str) -> Value {
    json!({"type": "ACCOUNT", "account": name, "password": password})
}

fn key(k: &str) -> Value {
    json!({"type": "API_KEY", "api_key": k})
}

/// The next frame is SHUTDOWN for a revoked credential, then the socket closes with 1008.
async fn expect_revoked(c: &mut Client) {
    let v = c.recv().await;
    assert_eq!(v["msg_type"], "SHUTDOWN", "{v}");
    assert_eq!(v["payload"]["reason"], "credential revoked");
    assert_eq!(c.expect_closed().await, Some(1008));
}

async fn refused(app: &TestApp, auth: Value) -> Value {
    let mut c = app.connect().await;
    let v = c.register(auth).await;
    assert_eq!(v["msg_type"], "ERROR", "{v}");
    assert_eq!(v["payload"]["error_code"], "AUTH_FAILED", "{v}");
    v
}

/// Create an account and a key with the admin CLI, register with both, revoke the key and
/// disable the account (the live sessions are shut down, new REGISTERs refused), enable the
/// account again, and lock an address out: the same on either engine.
async fn story(pg: Option<&Postgres>) {
    let app = spawn_app_with(|c| {
        if let Some(pg) = pg {
            c.database.url = pg.url();
        }
        c.auth.revocation_check_seconds = 0.2;
        c.auth.max_failures_per_address = 3;
    })
    .await;
    let engine = if pg.is_some() { "postgres" } else { "sqlite" };
    assert_eq!(app.app.auth.users().engine(), engine);

    let (ok, k, err) = cli(&app, &["key", "create", "--name", "story"], None).await;
    assert!(ok, "{err}");
    let k = k.trim().to_string();
    let (ok, _, err) = cli(
        &app,
        &["account", "create", "bob"],
        Some("bob's password\n"),
    )
    .await;
    assert!(ok, "{err}");

    let mut by_key = app.connect().await;
    by_key.register_key(&k).await;
    let mut by_account = app.connect().await;
    let ack = by_account.register(account("bob", "bob's password")).await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");
    app.llm.push(text_reply(&["a bronze ", "ding"]));
    by_key.text_request("r1", "what is this?").await;
    assert_eq!(by_key.reply("r1").await.text, "a bronze ding");
    let (_, list, _) = cli(&app, &["key", "list"], None).await;
    assert!(
        list.lines()
            .any(|l| l.contains("story") && l.contains("active")),
        "{list}"
    );

    // Revoked by another process (the CLI): the poll finds it.
    let (ok, out, err) = cli(&app, &["key", "revoke", "story"], None).await;
    assert!(ok && out.contains("revoked"), "{out}{err}");
    expect_revoked(&mut by_key).await;
    refused(&app, key(&k)).await;
    by_account.sync().await; // untouched by the key's revocation

    let (ok, _, err) = cli(&app, &["account", "disable", "bob"], None).await;
    assert!(ok, "{err}");
    expect_revoked(&mut by_account).await;
    refused(&app, account("bob", "bob's password")).await;
    let (ok, _, err) = cli(&app, &["account", "enable", "bob"], None).await;
    assert!(ok, "{err}");
    let mut again = app.connect().await;
    let ack = again.register(account("bob", "bob's password")).await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");

    // Three failures from this address lock it out, good credentials included; the counters
    // are in the store.
    for _ in 0..3 {
        refused(&app, account("bob", "wrong password")).await;
    }
    let v = refused(&app, account("bob", "bob's password")).await;
    assert!(
        v["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("too many failed attempts"),
        "{v}"
    );
    let users = app.app.auth.users();
    assert_eq!(
        users
            .lockout(
                &["address:127.0.0.1".to_string()],
                museum_agent::util::now_ms()
            )
            .await
            .unwrap(),
        Lockout::Locked
    );
    assert!(
        cli(&app, &["key", "list"], None)
            .await
            .1
            .contains("revoked")
    );

    // With PostgreSQL nothing of this is in the node's SQLite file.
    let local = Store::open(&app.app.config.database.path).unwrap();
    let local_keys = local.list_api_keys().unwrap();
    assert_eq!(
        local_keys.iter().any(|k| k.name == "story"),
        pg.is_none(),
        "{local_keys:?}"
    );
}

#[tokio::test]
async fn story_on_sqlite() {
    story(None).await;
}

#[tokio::test]
async fn story_on_postgres() {
    let Some(pg) = postgres().await else { return };
    story(Some(&pg)).await;
}

async fn node(pg: &Postgres, tweak: impl FnOnce(&mut museum_agent::Config)) -> TestApp {
    spawn_app_with(|c| {
        c.database.url = pg.url();
        tweak(c);
    })
    .await
}

/// Two server instances (each with its own SQLite file) sharing one PostgreSQL: a key created on
/// A works on B; revoked on A, B's live session is shut down at once (NOTIFY: the poll is an hour
/// away) and B refuses it; an account disabled on A likewise; lockout counters are shared.
#[tokio::test]
async fn two_nodes_share_keys_revocations_and_lockouts() {
    let Some(pg) = postgres().await else { return };
    let tweak = |c: &mut museum_agent::Config| {
        c.auth.revocation_check_seconds = 3600.0;
        c.auth.max_failures_per_account = 2;
    };
    let a = node(&pg, tweak).await;
    let b = node(&pg, tweak).await;
    assert_ne!(a.app.config.database.path, b.app.config.database.path);

    let k = generate_api_key();
    a.app
        .auth
        .users()
        .insert_api_key("shared", &k.prefix, &k.hash, None)
        .await
        .unwrap();
    let mut on_b = b.connect().await;
    on_b.register_key(&k.key).await;
    let mut alice_on_b = b.connect().await;
    let ack = alice_on_b.register(account(ACCOUNT, PASSWORD)).await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");

    let t0 = Instant::now();
    a.app.auth.users().revoke_api_key("shared").await.unwrap();
    expect_revoked(&mut on_b).await;
    let took = t0.elapsed();
    eprintln!("revocation on A closed the session on B in {took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    refused(&b, key(&k.key)).await;
    alice_on_b.sync().await;

    a.app
        .auth
        .users()
        .set_account_disabled(ACCOUNT, true)
        .await
        .unwrap();
    expect_revoked(&mut alice_on_b).await;
    refused(&b, account(ACCOUNT, PASSWORD)).await;

    // Lockouts: failures counted on A lock the account out on B.
    a.app
        .auth
        .users()
        .set_account_disabled(ACCOUNT, false)
        .await
        .unwrap();
    let mut ok_on_b = b.connect().await;
    let ack = ok_on_b.register(account(ACCOUNT, PASSWORD)).await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");
    for _ in 0..2 {
        refused(&a, account(ACCOUNT, "wrong password")).await;
    }
    let v = refused(&b, account(ACCOUNT, PASSWORD)).await;
    assert!(
        v["payload"]["error_detail"]
            .as_str()
            .unwrap()
            .contains("too many failed attempts"),
        "{v}"
    );
}

/// A revocation written behind the server's back (no NOTIFY) is still found by the poll within
/// `revocation_check_seconds`.
#[tokio::test]
async fn the_poll_finds_revocations_without_a_notification() {
    let Some(pg) = postgres().await else { return };
    let a = node(&pg, |c| c.auth.revocation_check_seconds = 0.3).await;
    let mut live = a.client().await;
    pg.execute("UPDATE api_keys SET revoked = TRUE WHERE name = 'test'")
        .await
        .unwrap();
    expect_revoked(&mut live).await;
}

/// PostgreSQL stopped under live sessions: they keep working (a request is answered in full), a
/// REGISTER gets the retryable INTERNAL_ERROR and the socket stays open, readiness says the
/// database is unavailable; once PostgreSQL is back the same socket's retried REGISTER succeeds,
/// and revocations reach live sessions again (the LISTEN connection came back).
#[tokio::test]
async fn postgres_restart_under_live_sessions() {
    let Some(mut pg) = postgres().await else {
        return;
    };
    let a = node(&pg, |c| {
        c.auth.revocation_check_seconds = 3600.0;
        c.database.timeout_seconds = 2.0;
    })
    .await;
    let mut live = a.client().await;
    assert_eq!(a.http_get("/readyz").await.0, 200);

    pg.stop().await.unwrap();
    a.llm.push(text_reply(&["still ", "here"]));
    live.text_request("during", "are you there?").await;
    assert_eq!(live.reply("during").await.text, "still here");

    let mut c = a.connect().await;
    let t0 = Instant::now();
    let v = c.register(key(&a.api_key)).await;
    assert_eq!(v["msg_type"], "ERROR", "{v}");
    assert_eq!(v["payload"]["error_code"], "INTERNAL_ERROR", "{v}");
    assert_eq!(v["payload"]["retryable"], true, "{v}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let (status, body) = a.http_get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("\"database\":\"unavailable\""), "{body}");

    pg.restart().await.unwrap();
    // The pool recovers by itself: the same socket retries until it is registered.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut tries = 0;
    loop {
        tries += 1;
        let v = c.register(key(&a.api_key)).await;
        if v["msg_type"] == "REGISTER_ACK" {
            break;
        }
        assert_eq!(v["payload"]["error_code"], "INTERNAL_ERROR", "{v}");
        assert!(Instant::now() < deadline, "no recovery after restart: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("registered again after {tries} REGISTER(s) once PostgreSQL was back");
    assert_eq!(a.http_get("/readyz").await.0, 200);
    live.sync().await;

    a.app.auth.users().revoke_api_key("test").await.unwrap();
    expect_revoked(&mut live).await;
    expect_revoked(&mut c).await;
}

/// `v` is the retryable INTERNAL_ERROR of a store that cannot answer.
fn assert_retryable(v: &Value) {
    assert_eq!(v["msg_type"], "ERROR", "{v}");
    assert_eq!(v["payload"]["error_code"], "INTERNAL_ERROR", "{v}");
    assert_eq!(v["payload"]["retryable"], true, "{v}");
}

/// Reads `id`'s text frames into `text` until its highest seq is `upto` or it ends (true),
/// checking the seqs come 0, 1, 2, … with no gap and no repeat.
async fn read_text(c: &mut Client, id: &str, top: &mut i64, text: &mut String, upto: i64) -> bool {
    while *top < upto {
        let v = c.recv().await;
        let p = &v["payload"];
        if p["request_id"] != id {
            continue;
        }
        assert_eq!(v["msg_type"], "RESPONSE", "{v}");
        let seq = p["text_stream_seq"].as_i64().unwrap();
        if seq == -1 {
            return true;
        }
        assert_eq!(seq, *top + 1, "text seq lost or repeated: {v}");
        *top = seq;
        text.push_str(p["content"]["text"].as_str().unwrap_or(""));
    }
    false
}

/// PostgreSQL killed (immediate shutdown: its connections cut without a goodbye, crash recovery
/// at the next start) while a reply streams, and the visitor's socket drops too: the resume
/// during the outage is told to retry (INTERNAL_ERROR, retryable, the socket stays open), a new
/// REGISTER likewise; once PostgreSQL is back the same socket resumes the session and gets the
/// rest of the reply once, in order; nothing stored before the crash is missing (a key, the
/// failure counters), and REGISTER works again without restarting the server.
#[tokio::test]
async fn postgres_crash_loses_nothing_and_a_parked_session_resumes_after() {
    let Some(mut pg) = postgres().await else {
        return;
    };
    let a = node(&pg, |c| {
        c.auth.revocation_check_seconds = 3600.0;
        c.database.timeout_seconds = 2.0;
    })
    .await;
    // Stored before the crash: a key, and a failed attempt counted against the account (the
    // address's counter is cleared by the next good REGISTER from it).
    let k = generate_api_key();
    a.app
        .auth
        .users()
        .insert_api_key("before the crash", &k.prefix, &k.hash, None)
        .await
        .unwrap();
    refused(&a, account(ACCOUNT, "wrong password")).await;
    let failures =
        "SELECT COALESCE(SUM(failures), 0)::BIGINT FROM auth_failures WHERE key LIKE 'account:%'";
    let failures_before = pg.query_i64(failures).await.unwrap();
    assert!(failures_before >= 1, "{failures_before}");

    let mut live = a.connect().await;
    let ack = live.register_key(&k.key).await;
    let token = ack["payload"]["resume_token"].as_str().unwrap().to_string();
    let sid = live.session_id.clone();
    let pieces: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    let mut chunks: Vec<Value> = pieces.iter().map(|p| text_chunk(p)).collect();
    chunks.push(finish_chunk("stop"));
    a.llm.push(Script::Stream {
        chunks,
        delay: Duration::from_millis(20),
        done: true,
    });
    live.text_request("r1", "a long answer").await;
    let (mut top, mut text) = (-1, String::new());
    assert!(!read_text(&mut live, "r1", &mut top, &mut text, 1).await);

    pg.crash().await.unwrap();
    drop(live); // the socket is cut as well
    let mut c = a.connect().await;
    let again = resume_frame(&a.api_key, &sid, &token, json!({"r1": [top, -1, 0]}));
    let t0 = Instant::now();
    c.send_value(&again).await;
    let v = c.recv().await;
    assert_retryable(&v);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let mut fresh = a.connect().await;
    assert_retryable(&fresh.register(key(&k.key)).await);

    pg.start_again().await.unwrap();
    // The same socket retries its resume until PostgreSQL answers again.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        c.send_value(&again).await;
        let v = c.recv().await;
        if v["msg_type"] == "REGISTER_ACK" {
            assert_eq!(v["payload"]["session_id"], sid.as_str());
            break;
        }
        assert_retryable(&v);
        assert!(
            Instant::now() < deadline,
            "no recovery after the crash: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.session_id = sid.clone();
    assert!(read_text(&mut c, "r1", &mut top, &mut text, i64::MAX).await);
    assert_eq!(text, pieces.concat(), "the reply lost or repeated text");
    assert_eq!(top, pieces.len() as i64 - 1);

    // Nothing stored before the crash is missing.
    assert_eq!(pg.query_i64(failures).await.unwrap(), failures_before);
    let ack = fresh.register(key(&k.key)).await;
    assert_eq!(ack["msg_type"], "REGISTER_ACK", "{ack}");
    a.llm.push(text_reply(&["after ", "the crash"]));
    c.text_request("r2", "still there?").await;
    assert_eq!(c.reply("r2").await.text, "after the crash");
}

/// PostgreSQL hanging (the server and every backend stopped: connections stay open and nothing
/// answers, as when its host hangs): a REGISTER gets the retryable INTERNAL_ERROR within
/// `[database] timeout_seconds` and some slack, a second one too (the pool's hung connections
/// do not make it wait longer), live sessions go on; once PostgreSQL answers again, REGISTER
/// works without restarting the server and revocations reach live sessions.
#[tokio::test]
async fn a_hung_postgres_gets_retryable_errors_in_time_and_recovers() {
    let Some(pg) = postgres().await else {
        return;
    };
    let a = node(&pg, |c| {
        c.auth.revocation_check_seconds = 3600.0;
        c.database.timeout_seconds = 1.0;
    })
    .await;
    let mut live = a.client().await;
    // Connections in the pool, so that the hang meets open ones too.
    for _ in 0..3 {
        a.client().await;
    }

    pg.freeze(true).unwrap();
    a.llm.push(text_reply(&["still ", "here"]));
    live.text_request("during", "are you there?").await;
    assert_eq!(live.reply("during").await.text, "still here");
    let mut c = a.connect().await;
    for _ in 0..2 {
        let t0 = Instant::now();
        let v = c.register(key(&a.api_key)).await;
        assert_retryable(&v);
        let took = t0.elapsed();
        eprintln!("REGISTER against a hung PostgreSQL answered in {took:?}");
        assert!(took < Duration::from_secs(4), "{took:?}");
    }
    let (status, body) = a.http_get("/readyz").await;
    assert_eq!(status, 503, "{body}");

    pg.freeze(false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = c.register(key(&a.api_key)).await;
        if v["msg_type"] == "REGISTER_ACK" {
            break;
        }
        assert_retryable(&v);
        assert!(Instant::now() < deadline, "no recovery: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(a.http_get("/readyz").await.0, 200);
    a.app.auth.users().revoke_api_key("test").await.unwrap();
    expect_revoked(&mut live).await;
    expect_revoked(&mut c).await;
}

/// Nodes starting together against an empty database: the migrations run once (advisory lock),
/// every node comes up, and a node started again applies nothing.
#[tokio::test]
async fn postgres_migrations_apply_once_when_nodes_start_together() {
    let Some(pg) = postgres().await else { return };
    let config = museum_agent::config::DatabaseConfig {
        url: pg.url(),
        ..Default::default()
    };
    let nodes = futures_util::future::join_all(
        (0..4).map(|_| museum_agent::store::postgres::PgUsers::connect(&config)),
    )
    .await;
    for n in &nodes {
        let n = n.as_ref().expect("every node starts");
        assert_eq!(n.schema_version().await.unwrap(), 1);
    }
    drop(nodes);
    let again = museum_agent::store::postgres::PgUsers::connect(&config)
        .await
        .unwrap();
    assert_eq!(again.schema_version().await.unwrap(), 1);
    assert_eq!(
        pg.query_i64("SELECT COUNT(*) FROM schema_migrations")
            .await
            .unwrap(),
        1
    );
}

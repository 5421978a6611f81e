//! The admin commands of the real binary against a temporary database.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use museum_agent::auth::hash_api_key;
use museum_agent::store::Store;

fn bin(dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_museum-agent"));
    cmd.env("MUSEUM_AGENT__DATABASE__PATH", dir.join("cli.db"))
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn key_and_account_admin_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ok, key, _) = bin(d, &["key", "create", "--name", "kiosk-1"], None);
    assert!(ok);
    let key = key.trim().to_string();
    assert!(key.starts_with("mak_") && key.len() > 40, "{key}");
    // Shown once: the list never prints it, and the database holds only its hash.
    let (ok, list, _) = bin(d, &["key", "list"], None);
    assert!(ok && list.contains("kiosk-1") && list.contains("active") && !list.contains(&key));
    let raw = std::fs::read(d.join("cli.db")).unwrap();
    assert!(
        !raw.windows(key.len()).any(|w| w == key.as_bytes()),
        "plaintext key stored"
    );
    let store = Store::open(&d.join("cli.db")).unwrap();
    assert!(store.find_api_key(&hash_api_key(&key)).unwrap().is_some());
    drop(store);
    let (ok, _, err) = bin(d, &["key", "create", "--name", "kiosk-1"], None);
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, out, _) = bin(d, &["key", "revoke", "kiosk-1"], None);
    assert!(ok && out.contains("revoked"));
    assert!(bin(d, &["key", "list"], None).1.contains("revoked"));

    let (ok, _, err) = bin(d, &["account", "create", "bob"], Some("short\n"));
    assert!(!ok && err.contains("at least 8"), "{err}");
    let (ok, _, _) = bin(d, &["account", "create", "bob"], Some("a long password\n"));
    assert!(ok);
    let raw = std::fs::read(d.join("cli.db")).unwrap();
    assert!(
        !raw.windows(15).any(|w| w == b"a long password"),
        "plaintext password stored"
    );
    let (ok, out, _) = bin(d, &["account", "disable", "bob"], None);
    assert!(ok && out.contains("disabled"));
    assert!(bin(d, &["account", "list"], None).1.contains("disabled"));
    assert!(!bin(d, &["account", "disable", "nobody"], None).0);
    // A typo in the environment is refused, not ignored.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_museum-agent"));
    let out = cmd
        .env("MUSEUM_AGENT__LLM__MODLE", "x")
        .current_dir(d)
        .args(["key", "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn sigkill_during_writes_loses_no_acknowledged_key() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kill.db");
    let bin = env!("CARGO_BIN_EXE_museum-agent");
    // A loop of admin writes; each key is printed only after its transaction committed.
    let script =
        format!("i=0; while true; do i=$((i+1)); '{bin}' key create --name k$i || exit 1; done");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("MUSEUM_AGENT__DATABASE__PATH", &db)
        .env("RUST_LOG", "error")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id() as i32;
    let mut keys = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while keys.len() < 25 {
        keys.push(lines.next().unwrap().unwrap());
    }
    // SAFETY: signalling our own child's process group.
    unsafe { libc::killpg(pgid, libc::SIGKILL) };
    let _ = child.wait();
    let store = Store::open(&db).unwrap();
    store.integrity_check().unwrap();
    for k in &keys {
        assert!(
            store.find_api_key(&hash_api_key(k)).unwrap().is_some(),
            "acknowledged key lost"
        );
    }
    assert!(store.list_api_keys().unwrap().len() >= keys.len());
}

#[test]
fn secrets_never_reach_the_logs() {
    use std::io::Read;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let llm = rt.block_on(crate::support::FakeLlm::start());
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, key, _) = bin(d, &["key", "create", "--name", "kiosk"], None);
    let key = key.trim().to_string();
    let password = "p4ssw0rd-that-must-not-leak";
    assert!(
        bin(
            d,
            &["account", "create", "carol"],
            Some(&format!("{password}\n"))
        )
        .0
    );
    let llm_key = "sk-llm-secret-that-must-not-leak";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log_path = d.join("server.log");
    let mut server = Command::new(env!("CARGO_BIN_EXE_museum-agent"))
        .env("MUSEUM_AGENT__DATABASE__PATH", d.join("cli.db"))
        .env("MUSEUM_AGENT__SERVER__BIND", format!("127.0.0.1:{port}"))
        .env("MUSEUM_AGENT__LLM__PROVIDER", "openai")
        .env("MUSEUM_AGENT__LLM__BASE_URL", llm.base_url())
        .env("MUSEUM_AGENT__LLM__API_KEY_ENV", "TEST_LLM_SECRET")
        .env("TEST_LLM_SECRET", llm_key)
        .env("RUST_LOG", "trace")
        .current_dir(d)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    rt.block_on(async {
        let url = format!("ws://127.0.0.1:{port}/ws/agent/stream");
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
        let (ws, _) = loop {
            match tokio_tungstenite::connect_async(&url).await {
                Ok(x) => break x,
                Err(_) if tokio::time::Instant::now() < deadline => tokio::task::yield_now().await,
                Err(e) => panic!("server did not start: {e}"),
            }
        };
        let mut c = crate::support::Client {
            ws,
            session_id: String::new(),
        };
        c.register_key(&key).await;
        c.text_request("r1", "hello").await;
        c.reply("r1").await;
        for pw in [password, "wrong-password-also-secret"] {
            let (ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
            let mut a = crate::support::Client {
                ws,
                session_id: String::new(),
            };
            a.register(serde_json::json!({"type": "ACCOUNT", "account": "carol", "password": pw}))
                .await;
        }
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let status = server.wait().unwrap();
    assert!(status.success(), "graceful exit 0 on SIGTERM: {status:?}");
    let mut log = String::new();
    std::fs::File::open(&log_path)
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("session registered"), "the log was captured");
    for secret in [
        key.as_str(),
        password,
        "wrong-password-also-secret",
        llm_key,
    ] {
        assert!(!log.contains(secret), "secret {secret:?} found in the logs");
    }
}

#[test]
fn key_create_can_pin_a_hub_tier() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ok, key, _) = bin(
        d,
        &["key", "create", "--name", "robots", "--hub-tier", "worker"],
        None,
    );
    assert!(ok);
    let store = Store::open(&d.join("cli.db")).unwrap();
    let row = store
        .find_api_key(&hash_api_key(key.trim()))
        .unwrap()
        .unwrap();
    assert_eq!(
        store.api_key_hub_tier(row.id).unwrap().as_deref(),
        Some("worker")
    );
    drop(store);
    let (ok, _, err) = bin(
        d,
        &["key", "create", "--name", "x", "--hub-tier", "boss"],
        None,
    );
    assert!(!ok && err.contains("boss"), "{err}");
}

/// The cases of `fixtures/questions/search.jsonl`: `q` (or `q` repeated to `repeat_to`
/// characters), what answers it (`fact`, `collection`, `no-answer`, `empty`, `small-talk`,
/// `slash`, or `any` of those), optionally the fact's `topic`, the `top` hit, text the offline answer contains
/// (`answer_contains`) and text it must not (`answer_lacks`).
pub fn search_cases() -> Vec<(String, serde_json::Value)> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/questions/search.jsonl"),
    )
    .unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let q = v["q"].as_str().unwrap();
            let q = match v["repeat_to"].as_u64() {
                Some(n) => q.chars().cycle().take(n as usize).collect(),
                None => q.to_string(),
            };
            (q, v)
        })
        .collect()
}

/// `museum-agent search` takes a visitor's path: the facts file first, then a slash command,
/// the curators' highlights or small talk (`slash`, `fact`, `small-talk`), then the collection
/// with the no-answer decision; it says which answered, and what the offline answerer says.
/// Bad input (empty, whitespace, emoji, FTS syntax, 10,000 characters, mixed scripts) returns
/// quickly, exit status 0, no error.
#[test]
fn search_answers_as_the_server_would() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The demo collection (found in the source tree) is loaded by the first call.
    let (ok, _, err) = bin(d, &["search", "badger", "--json"], None);
    assert!(ok, "{err}");
    let mut wrong = Vec::new();
    for (q, case) in search_cases() {
        let started = std::time::Instant::now();
        let (ok, out, err) = bin(d, &["search", &q, "--json", "--k", "3"], None);
        let took = started.elapsed();
        let short: String = q.chars().take(40).collect();
        if !ok || took > std::time::Duration::from_secs(15) {
            wrong.push(format!("{short:?}: exit ok {ok}, {took:?}: {err}"));
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{short:?}: not JSON ({e}): {out}"));
        let by = v["answered_by"].as_str().unwrap_or("?");
        let want = case["answered_by"].as_str().unwrap();
        let allowed = [
            "fact",
            "collection",
            "no-answer",
            "empty",
            "small-talk",
            "slash",
        ];
        if !(by == want || (want == "any" && allowed.contains(&by))) {
            wrong.push(format!("{short:?}: answered by {by}, want {want}: {out}"));
            continue;
        }
        if let Some(t) = case["topic"].as_str()
            && v["fact"]["topic"] != t
        {
            wrong.push(format!("{short:?}: fact {}, want {t}", v["fact"]));
        }
        if let Some(id) = case["top"].as_str()
            && v["hits"][0]["id"] != id
        {
            wrong.push(format!("{short:?}: top {}, want {id}", v["hits"][0]["id"]));
        }
        let answer = v["offline_answer"]
            .as_str()
            .or(v["fact"]["answer"].as_str())
            .unwrap_or("");
        if let Some(c) = case["answer_contains"].as_str()
            && !answer.contains(c)
        {
            wrong.push(format!("{short:?}: answer {answer:?} lacks {c:?}"));
        }
        if let Some(c) = case["answer_lacks"].as_str()
            && answer.contains(c)
        {
            wrong.push(format!("{short:?}: answer {answer:?} says {c:?}"));
        }
        // A kind of which a period left none ("Do you have any Tang dynasty vases?") is
        // answered by the collection's count of the kind, with no exhibit.
        let none_of_period = v["kind"]["of_kind"].as_u64().is_some_and(|n| n > 0);
        if by == "collection"
            && !none_of_period
            && v["hits"].as_array().is_none_or(|h| h.is_empty())
        {
            wrong.push(format!(
                "{short:?}: answered by the collection with no hits"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The plain output names the path too.
    let (ok, out, _) = bin(d, &["search", "Where are the toilets?"], None);
    assert!(
        ok && out.starts_with("visitor-services fact (toilets)"),
        "{out}"
    );
    let (ok, out, _) = bin(d, &["search", ""], None);
    assert!(
        ok && out.trim() == "the query is empty: nothing to search",
        "{out}"
    );
    let (ok, out, _) = bin(d, &["search", "Do you have the Mona Lisa?"], None);
    assert!(ok && out.starts_with("no answer:"), "{out}");
    let (ok, out, _) = bin(d, &["search", "Who painted Toilet of Helen?"], None);
    assert!(
        ok && out.starts_with("from the collection (embedded retriever")
            && out.contains("offline answer: "),
        "{out}"
    );
}

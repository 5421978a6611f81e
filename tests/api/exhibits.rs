//! The kiosk's server side (issue 15): `/api/exhibits` over the server's own collection (auth,
//! ETag, bounds, hostile ids), long static paths, REGISTER_ACK `capabilities`, the voice refusal
//! without STT, `clear_history`, the offline answerer's `show_exhibit` call, config paths.

use std::path::{Path, PathBuf};

use museum_agent::config::{LlmProviderKind, SttProviderKind, TtsProviderKind};
use serde_json::{Value, json};

use crate::support::fake_llm::text_reply;
use crate::support::fake_speech::FakeSpeech;
use crate::support::*;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection/exhibits.jsonl")
}

/// The first `n` English and `n` Chinese records of the demo collection.
fn sample(n: usize) -> Vec<Value> {
    let all = std::fs::read_to_string(demo()).unwrap();
    let pick = |lang: &str| {
        all.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["language"] == lang)
            .take(n)
            .collect::<Vec<_>>()
    };
    let mut v = pick("en");
    v.extend(pick("zh"));
    v
}

/// An app whose collection holds `sample(3)` (a temp demo file loaded at start).
async fn app_with_collection(
    tweak: impl FnOnce(&mut museum_agent::Config),
) -> (TestApp, Vec<Value>) {
    let rows = sample(3);
    let text: String = rows.iter().map(|v| format!("{v}\n")).collect();
    let app = spawn_app_with(move |c| {
        // Beside the app's database, so the file goes with the app's temporary directory.
        let file = c.database.path.with_file_name("demo.jsonl");
        std::fs::write(&file, text).unwrap();
        c.srs.load_demo = true;
        c.srs.demo_path = file;
        tweak(c);
    })
    .await;
    (app, rows)
}

async fn get(
    app: &TestApp,
    path: &str,
    key: Option<&str>,
    etag: Option<&str>,
) -> reqwest::Response {
    let client = museum_agent::util::http_client_builder().build().unwrap();
    let mut req = client.get(format!("http://{}{path}", app.addr));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    if let Some(t) = etag {
        req = req.header("If-None-Match", t);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn exhibit_by_id_with_etag_cache_control_and_a_display_description() {
    let (app, rows) = app_with_collection(|_| {}).await;
    let key = app.api_key.clone();
    let mut sized = 0;
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        let path = format!("/api/exhibits/{}", museum_agent::util::urlencode(id));
        let r = get(&app, &path, Some(&key), None).await;
        assert_eq!(r.status(), 200, "{id}");
        let etag = r.headers()["etag"].to_str().unwrap().to_string();
        assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");
        assert!(
            r.headers()["cache-control"]
                .to_str()
                .unwrap()
                .contains("max-age")
        );
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["id"], row["id"]);
        assert_eq!(v["title"], row["title"]);
        assert_eq!(v["maker"], row["artist_or_maker"]);
        assert_eq!(v["language"], row["language"]);
        let full = v["description"].as_str().unwrap();
        let short = v["display_description"].as_str().unwrap();
        assert!(short.chars().count() <= 282, "{short}");
        if short != museum_agent::retrieval::text::without_registration(full) {
            assert!(
                short.ends_with('…'),
                "a cut description ends with an ellipsis: {short}"
            );
        }
        // The measurements a card shows, when the record gives any.
        let size =
            museum_agent::retrieval::sizing::size_of(row["dimensions"].as_str().unwrap_or(""));
        match size {
            Some(s) => {
                assert_eq!(v["display_size"], s.display().as_str(), "{id}");
                sized += 1;
            }
            None => assert!(v.get("display_size").is_none(), "{id}: {v}"),
        }
        // Same content, same tag: 304 without a body.
        let again = get(&app, &path, Some(&key), Some(&etag)).await;
        assert_eq!(again.status(), 304);
        assert!(again.bytes().await.unwrap().is_empty());
    }
    assert!(sized > 0, "no record of the sample gives measurements");
    let r = get(&app, "/api/exhibits/no-such-exhibit", Some(&key), None).await;
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "not_found");
}

#[tokio::test]
async fn a_simplified_page_gets_traditional_records_in_simplified_and_english_as_stored() {
    use museum_agent::retrieval::text::{Script, script_of, to_simplified};
    let (app, rows) = app_with_collection(|_| {}).await;
    let key = app.api_key.clone();
    let mut converted = 0;
    let mut trad_title = None;
    for row in &rows {
        let id = row["id"].as_str().unwrap();
        let base = format!("/api/exhibits/{}", museum_agent::util::urlencode(id));
        let simp: Value = get(&app, &format!("{base}?script=simplified"), Some(&key), None)
            .await
            .json()
            .await
            .unwrap();
        let trad: Value = get(&app, &format!("{base}?script=zh-Hant"), Some(&key), None)
            .await
            .json()
            .await
            .unwrap();
        let stored: Value = get(&app, &base, Some(&key), None)
            .await
            .json()
            .await
            .unwrap();
        let title = row["title"].as_str().unwrap();
        let description = stored["description"].as_str().unwrap();
        assert_eq!(simp["id"], row["id"]);
        assert_eq!(
            simp["language"], row["language"],
            "the record's language stays"
        );
        assert_eq!(simp["title"], to_simplified(title).as_str());
        assert_ne!(
            script_of(simp["description"].as_str().unwrap()),
            Script::Traditional
        );
        assert_ne!(
            script_of(simp["display_description"].as_str().unwrap()),
            Script::Traditional
        );
        if row["language"] == "en" {
            assert_eq!(simp, stored, "English records are published as stored");
        }
        if script_of(title) == Script::Traditional || script_of(description) == Script::Traditional
        {
            converted += 1;
            assert_ne!(simp, stored);
            if script_of(title) == Script::Traditional {
                trad_title.get_or_insert(title.to_string());
            }
        }
        // The demo's Chinese records are Traditional: asked in Traditional, they are as stored.
        assert_eq!(trad, stored);
    }
    assert!(converted >= 2, "the sample holds Traditional records");
    // Searched by a Traditional record's own title, the hits come back in Simplified.
    let q = museum_agent::util::urlencode(&trad_title.expect("a Traditional title"));
    let r = get(
        &app,
        &format!("/api/exhibits?q={q}&k=5&script=simplified"),
        Some(&key),
        None,
    )
    .await;
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let hits = v["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{v}");
    for h in hits {
        let e = &h["exhibit"];
        assert_ne!(
            script_of(e["title"].as_str().unwrap()),
            Script::Traditional,
            "{e}"
        );
        for p in h["passages"].as_array().unwrap() {
            assert_ne!(script_of(p.as_str().unwrap()), Script::Traditional, "{p}");
        }
    }
    let id = museum_agent::util::urlencode(rows[0]["id"].as_str().unwrap());
    for path in [
        format!("/api/exhibits/{id}?script=klingon"),
        "/api/exhibits?q=vase&script=latin".to_string(),
    ] {
        let r = get(&app, &path, Some(&key), None).await;
        assert_eq!(r.status(), 400, "{path}");
        assert_eq!(r.json::<Value>().await.unwrap()["error"], "bad_script");
    }
}

#[tokio::test]
async fn search_is_the_servers_search_with_bounded_k_and_q() {
    let (app, rows) = app_with_collection(|c| c.srs.max_query_chars = 50).await;
    let key = app.api_key.clone();
    let title = rows[0]["title"].as_str().unwrap();
    let r = get(
        &app,
        &format!(
            "/api/exhibits?q={}&k=2",
            museum_agent::util::urlencode(title)
        ),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["retriever"], "embedded");
    let hits = v["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 2, "{v}");
    assert_eq!(hits[0]["exhibit"]["id"], rows[0]["id"]);
    assert!(hits[0]["exhibit"]["display_description"].is_string());
    // Exactly what the pipeline's retriever returns.
    let direct = app
        .app
        .deps
        .retriever
        .clone()
        .unwrap()
        .search(title, 2)
        .await
        .unwrap();
    let ids: Vec<&Value> = hits.iter().map(|h| &h["exhibit"]["id"]).collect();
    let want: Vec<Value> = direct.iter().map(|h| json!(h.exhibit.id)).collect();
    assert_eq!(ids, want.iter().collect::<Vec<_>>());
    // A Chinese question finds the Chinese record.
    let zh = rows[3]["title"].as_str().unwrap();
    let v: Value = get(
        &app,
        &format!("/api/exhibits?q={}", museum_agent::util::urlencode(zh)),
        Some(&key),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["hits"][0]["exhibit"]["id"], rows[3]["id"], "{v}");
    // q over the limit is cut like the WebSocket path's question, not refused.
    let long = format!("{title} {}", "x".repeat(10_000));
    let r = get(
        &app,
        &format!("/api/exhibits?q={}", museum_agent::util::urlencode(&long)),
        Some(&key),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["query"].as_str().unwrap().chars().count(), 50);
    for bad in [
        "k=0",
        "k=21",
        "k=-1",
        "k=abc",
        "k=99999999999999999999",
        "q=",
        "q=%20%20",
    ] {
        let path = if bad.starts_with('k') {
            format!("/api/exhibits?q=jar&{bad}")
        } else {
            format!("/api/exhibits?{bad}")
        };
        assert_eq!(
            get(&app, &path, Some(&key), None).await.status(),
            400,
            "{bad}"
        );
    }
    assert_eq!(
        get(&app, "/api/exhibits", Some(&key), None).await.status(),
        400
    );
    assert_eq!(
        get(&app, "/api/exhibits?q=a%00b", Some(&key), None)
            .await
            .status(),
        400
    );
}

#[tokio::test]
async fn hostile_ids_are_404_or_400_and_never_read_a_file() {
    let (app, _) = app_with_collection(|_| {}).await;
    let key = app.api_key.clone();
    // A file that a path traversal would reach from the static directory.
    let static_dir = app.app.config.server.static_dir.clone();
    assert!(
        static_dir.join("index.html").is_file(),
        "{}",
        static_dir.display()
    );
    let long = "a".repeat(10 * 1024);
    let cases: Vec<(String, &[u16])> = vec![
        ("/api/exhibits/..".into(), &[404, 400]),
        ("/api/exhibits/%2e%2e".into(), &[404]),
        ("/api/exhibits/..%2F..%2Findex.html".into(), &[404]),
        ("/api/exhibits/a/b".into(), &[404]),
        ("/api/exhibits/%2Findex.html".into(), &[404]),
        ("/api/exhibits/index.html".into(), &[404]),
        ("/api/exhibits/%00".into(), &[400]),
        ("/api/exhibits/a%0Ab".into(), &[400]),
        ("/api/exhibits/%FF%FE".into(), &[400]),
        (format!("/api/exhibits/{long}"), &[400, 404, 414]),
        ("/api/index.html".into(), &[404]),
    ];
    for (path, allowed) in &cases {
        let r = get(&app, path, Some(&key), None).await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        let shown: String = path.chars().take(60).collect();
        assert!(allowed.contains(&status), "{shown}: {status} {body}");
        if status != 200 {
            assert!(
                !body.contains("<html") && !body.contains("<!doctype"),
                "{shown}: {body}"
            );
        }
    }
}

#[tokio::test]
async fn endpoints_need_an_active_key_and_share_the_lockout() {
    let (app, rows) = app_with_collection(|c| c.auth.max_failures_per_address = 3).await;
    let path = format!(
        "/api/exhibits/{}",
        museum_agent::util::urlencode(rows[0]["id"].as_str().unwrap())
    );
    let r = get(&app, &path, None, None).await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    assert_eq!(
        get(&app, "/api/exhibits?q=jar", None, None).await.status(),
        401
    );
    // A revoked key is refused at once.
    let store = app.app.store().clone();
    let k = museum_agent::auth::generate_api_key();
    store
        .insert_api_key("to-revoke", &k.prefix, &k.hash)
        .unwrap();
    assert_eq!(get(&app, &path, Some(&k.key), None).await.status(), 200);
    store.revoke_api_key("to-revoke").unwrap();
    assert_eq!(get(&app, &path, Some(&k.key), None).await.status(), 401);
    // Failures count like failed REGISTERs: after the limit this address is locked out, for
    // HTTP and WebSocket alike, even with a good key.
    assert_eq!(
        get(&app, &path, Some("mak_wrong"), None).await.status(),
        401
    );
    assert_eq!(
        get(&app, &path, Some("mak_wrong2"), None).await.status(),
        401
    );
    let r = get(&app, &path, Some(&app.api_key), None).await;
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    let mut c = app.connect().await;
    let v = c
        .register(json!({"type": "API_KEY", "api_key": app.api_key}))
        .await;
    assert_eq!(v["payload"]["error_code"], "AUTH_FAILED", "{v}");
}

#[tokio::test]
async fn a_static_path_longer_than_a_file_name_is_404_not_500() {
    let app = spawn_app().await;
    for path in [
        format!("/{}", "a".repeat(300)),
        format!("/js/{}.js", "b".repeat(300)),
        format!("/{}", "%41".repeat(300)),
        format!("/{}", "c".repeat(5000)),
    ] {
        let (status, _) = app.http_get(&path).await;
        assert!(status == 404 || status == 414, "{}: {status}", &path[..20]);
    }
    let (status, body) = app.http_get("/").await;
    assert_eq!(status, 200);
    assert!(body.contains("<html"));
}

async fn capabilities(app: &TestApp) -> Value {
    let mut c = app.connect().await;
    let ack = c
        .register(json!({"type": "API_KEY", "api_key": app.api_key}))
        .await;
    ack["payload"]["capabilities"].clone()
}

#[tokio::test]
async fn register_ack_says_what_speech_the_server_has() {
    let app = spawn_app().await;
    assert_eq!(
        capabilities(&app).await,
        json!({"speech_input": false, "speech_output": false, "speech_output_chinese": false})
    );
    let speech = FakeSpeech::start().await;
    let base = speech.base_url();
    let speaking = |reads_cjk: bool| {
        let base = base.clone();
        move |c: &mut museum_agent::Config| {
            c.stt.provider = SttProviderKind::Openai;
            c.stt.base_url = base.clone();
            c.stt.api_key_env = String::new();
            c.tts.provider = TtsProviderKind::Openai;
            c.tts.base_url = base;
            c.tts.api_key_env = String::new();
            c.tts.reads_cjk = reads_cjk;
        }
    };
    let app = spawn_app_with(speaking(true)).await;
    assert_eq!(
        capabilities(&app).await,
        json!({"speech_input": true, "speech_output": true, "speech_output_chinese": true})
    );
    let app = spawn_app_with(speaking(false)).await;
    assert_eq!(
        capabilities(&app).await,
        json!({"speech_input": true, "speech_output": true, "speech_output_chinese": false})
    );
}

#[tokio::test]
async fn voice_without_stt_gets_a_non_retryable_error_saying_so() {
    let app = spawn_app().await;
    let mut c = app.client().await;
    let check = |v: &Value, id: &str| {
        assert_eq!(v["msg_type"], "ERROR", "{v}");
        let e = &v["payload"];
        assert_eq!(e["error_code"], "MALFORMED_PAYLOAD", "{e}");
        assert_eq!(e["retryable"], false);
        assert_eq!(e["request_id"], id);
        assert!(
            e["error_msg"]
                .as_str()
                .unwrap()
                .contains("speech input is not available"),
            "{e}"
        );
        assert!(
            e["error_detail"]
                .as_str()
                .unwrap()
                .starts_with("speech input is not available")
        );
    };
    // A BINARY upload: refused when it is complete (where recognition would start).
    c.send(
        "REQUEST",
        json!({"request_id": "v1", "data_type": "VOICE", "stream_flag": true, "stream_seq": 0,
               "content": {"voice_mode": "BINARY"}}),
    )
    .await;
    c.send_binary(vec![0u8; 3200]).await;
    c.send(
        "REQUEST",
        json!({"request_id": "v1", "data_type": "VOICE", "stream_flag": true, "stream_seq": -1,
               "content": {"voice_mode": "BINARY"}}),
    )
    .await;
    check(&c.recv().await, "v1");
    // A BASE64 whole utterance: the same.
    c.send(
        "REQUEST",
        json!({"request_id": "v2", "data_type": "VOICE", "stream_flag": false, "stream_seq": 0,
               "content": {"voice_mode": "BASE64", "voice": "AAAAAA=="}}),
    )
    .await;
    check(&c.recv().await, "v2");
    // The session goes on.
    assert!(c.sync().await.is_empty());
}

#[tokio::test]
async fn clear_history_starts_a_new_conversation() {
    let app = spawn_app().await;
    let mut c = app.client().await;
    app.llm.push(text_reply(&["A bronze ding."]));
    c.text_request("t1", "What is the bronze ding?").await;
    c.reply("t1").await;
    app.llm.push(text_reply(&["Yes."]));
    c.text_request("t2", "And its age?").await;
    c.reply("t2").await;
    let second = &app.llm.requests()[1];
    let said = second["messages"].to_string();
    assert!(
        said.contains("bronze ding"),
        "history kept within a visitor: {said}"
    );
    // The "new visitor" attribute update: confirmed like any attribute-only request.
    c.send(
        "REQUEST",
        json!({"request_id": "reset", "data_type": "TEXT", "stream_flag": false, "stream_seq": 0,
               "clear_history": true, "content": {"text": ""}}),
    )
    .await;
    let v = c.recv().await;
    assert_eq!(
        v["payload"],
        json!({"request_id": "reset", "text_stream_seq": -1, "content": {}})
    );
    app.llm.push(text_reply(&["Hello."]));
    c.text_request("t3", "Where is the lacquer box?").await;
    c.reply("t3").await;
    let third = &app.llm.requests()[2];
    let msgs = third["messages"].as_array().unwrap();
    let text = third["messages"].to_string();
    assert!(!text.contains("bronze ding"), "{text}");
    assert_eq!(
        msgs.iter().filter(|m| m["role"] == "user").count(),
        1,
        "{text}"
    );
}

#[tokio::test]
async fn the_offline_answerer_shows_the_exhibit_it_answers_from() {
    let (app, rows) = app_with_collection(|c| c.llm.provider = LlmProviderKind::Offline).await;
    let mut c = app.client().await; // registers show_exhibit {exhibit_id}
    for (i, row) in [&rows[0], &rows[3]].into_iter().enumerate() {
        let id = format!("q{i}");
        let title = row["title"].as_str().unwrap();
        let question = if row["language"] == "zh" {
            format!("请介绍一下《{title}》")
        } else {
            format!("Tell me about the {title}")
        };
        c.text_request(&id, &question).await;
        let r = c.reply(&id).await;
        assert_eq!(r.calls.len(), 1, "{:?}", r.frames);
        assert_eq!(r.calls[0]["name"], "show_exhibit");
        assert_eq!(r.calls[0]["parameters"], json!({"exhibit_id": row["id"]}));
        // Quoted in the visitor's script (a Simplified question: the Traditional title too).
        let shown = museum_agent::retrieval::text::to_simplified(title.trim());
        assert!(r.text.contains(&shown), "{}", r.text);
        // The card's data is there for the id the call names.
        let path = format!(
            "/api/exhibits/{}",
            museum_agent::util::urlencode(row["id"].as_str().unwrap())
        );
        assert_eq!(
            get(&app, &path, Some(&app.api_key), None).await.status(),
            200
        );
    }
    // A session without the function: text only.
    let mut c = app.connect().await;
    let mut p = register_payload(json!({"type": "API_KEY", "api_key": app.api_key}));
    p["function_calling"] = json!([]);
    c.send_value(&frame("REGISTER", "", p)).await;
    let ack = c.recv().await;
    c.session_id = ack["payload"]["session_id"].as_str().unwrap().into();
    c.text_request(
        "q",
        &format!("Tell me about the {}", rows[0]["title"].as_str().unwrap()),
    )
    .await;
    let r = c.reply("q").await;
    assert!(r.calls.is_empty() && !r.text.is_empty());
}

#[test]
fn config_paths_resolve_against_the_config_file_and_missing_ones_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("etc");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(
        conf.join("museum.toml"),
        "[server]\nstatic_dir = \"page\"\nbind = \"127.0.0.1:0\"\n[database]\npath = \"db/m.db\"\n\
         [srs]\ndemo_path = \"missing.jsonl\"\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_museum-agent"))
            .current_dir(dir.path()) // not the config's directory
            .env("RUST_LOG", "warn")
            .env_remove("MUSEUM_AGENT__DATABASE__PATH")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cfg = conf.join("museum.toml");
    let cfg = cfg.to_str().unwrap();
    let (ok, err) = run(&["--config", cfg, "serve"]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("static_dir") && err.contains(&conf.join("page").display().to_string()),
        "{err}"
    );
    std::fs::create_dir(conf.join("page")).unwrap();
    let (ok, err) = run(&["--config", cfg, "serve"]);
    assert!(
        !ok && err.contains("demo_path") && err.contains("missing.jsonl"),
        "{err}"
    );
    // The admin commands use the same resolution: the key lands in etc/db/m.db.
    std::fs::create_dir(conf.join("db")).unwrap();
    let (ok, err) = run(&["--config", cfg, "key", "create", "--name", "k"]);
    assert!(ok, "{err}");
    assert!(conf.join("db/m.db").is_file());
    assert!(!dir.path().join("db").exists());
}

#[test]
fn admin_cli_times_double_revoke_and_broken_csv() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_museum-agent"))
            .current_dir(d)
            .env("MUSEUM_AGENT__DATABASE__PATH", d.join("cli.db"))
            .env("RUST_LOG", "warn")
            .args(args)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    assert!(run(&["key", "create", "--name", "k1"]).0);
    let (_, list, _) = run(&["key", "list"]);
    let year = 1970 + museum_agent::util::now_ms() / 31_557_600_000;
    assert!(
        list.contains(&format!("{year}-")) && list.contains(" UTC"),
        "{list}"
    );
    let (ok, out, _) = run(&["key", "revoke", "k1"]);
    assert!(ok && out.contains("revoked API key k1"), "{out}");
    let (ok, out, _) = run(&["key", "revoke", "k1"]);
    assert!(ok && out.contains("already revoked"), "{out}");
    std::fs::write(
        d.join("c.csv"),
        "Object Number,Title,Artist,Date made,Notes\nm1,Vase,Anon,1750,\"A vase\nm2,Cup,,,\n",
    )
    .unwrap();
    let (ok, _, err) = run(&["ingest", "c.csv"]);
    assert!(
        !ok && err.contains("line 2") && err.contains("never closed"),
        "{err}"
    );
    std::fs::write(
        d.join("c.csv"),
        "Object Number,Title,Artist,Date made,Notes\nm1,Vase,Anon,1750,A vase.\n",
    )
    .unwrap();
    let (ok, out, err) = run(&["ingest", "c.csv"]);
    assert!(ok, "{out}{err}");
    let (_, out, _) = run(&["search", "vase", "--json"]);
    assert!(out.contains("\"m1\""), "{out}");
}

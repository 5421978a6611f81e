//! Collection retrieval (issue 5): the embedded index built by the server at start, hybrid
//! search against a local fake embeddings server, the remote SRS client against a local fake
//! service, the ingest/search/eval commands, and quality over the real demo collection.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use museum_agent::Config;
use museum_agent::config::SrsProviderKind;
use museum_agent::retrieval::embedded::EmbeddedRetriever;
use museum_agent::retrieval::semantic::SemanticState;
use museum_agent::retrieval::{self, RetrievalError, Retriever, eval};
use museum_agent::store::Store;
use serde_json::{Value, json};

use crate::support::fake_embeddings::{FakeEmbeddings, Mode};
use crate::support::fake_llm::text_reply;
use crate::support::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/collection")
        .join(name)
}

/// The first `n` English and `n` Chinese records of the demo collection, as JSONL text.
fn demo_sample(n: usize) -> String {
    let all = std::fs::read_to_string(fixture("exhibits.jsonl")).unwrap();
    let en = all
        .lines()
        .filter(|l| l.contains("\"language\": \"en\""))
        .take(n);
    let zh = all
        .lines()
        .filter(|l| l.contains("\"language\": \"zh\""))
        .take(n);
    en.chain(zh).map(|l| format!("{l}\n")).collect()
}

fn line_of(jsonl: &str, i: usize) -> Value {
    serde_json::from_str(jsonl.lines().nth(i).unwrap()).unwrap()
}

#[tokio::test]
async fn every_app_gets_the_configured_retriever() {
    let app = spawn_app().await;
    let r = app.app.deps.retriever.clone().expect("embedded by default");
    assert_eq!(r.name(), "embedded");
    // The test harness does not load the demo: the collection is empty, not an error.
    assert!(r.search("青铜鼎", 5).await.unwrap().is_empty());
    assert_eq!(r.get("walters-1").await.unwrap(), None);
    let app = spawn_app_with(|c| c.srs.provider = SrsProviderKind::None).await;
    assert!(app.app.deps.retriever.is_none());
}

#[tokio::test]
async fn server_start_loads_the_demo_once_and_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo.jsonl");
    let sample = demo_sample(3);
    std::fs::write(&demo, &sample).unwrap();
    let path = demo.clone();
    let app = spawn_app_with(move |c| {
        c.srs.load_demo = true;
        c.srs.demo_path = path;
    })
    .await;
    let store = app.app.store().clone();
    assert_eq!(store.collection().exhibit_count().unwrap(), 6);
    let r = app.app.deps.retriever.clone().unwrap();
    let first = line_of(&sample, 0);
    let id = first["id"].as_str().unwrap();
    let title = first["title"].as_str().unwrap();
    let hits = r.search(title, 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, id, "{hits:?}");
    let zh = line_of(&sample, 3);
    let got = r.get(zh["id"].as_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(got.title, zh["title"].as_str().unwrap());
    assert_eq!(got.maker, zh["artist_or_maker"].as_str().unwrap());

    // A second start over the same database: the file is unchanged, nothing is ingested.
    let mut config = app.app.config.as_ref().clone();
    config.srs.demo_path = demo.clone();
    let again = retrieval::embedded_from_config(&config, &store)
        .await
        .unwrap();
    assert!(again.ensure_demo(&demo).await.unwrap().is_none());
    // The file changes: it is loaded again, as an update, never a duplicate.
    let mut changed: Vec<Value> = sample
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    changed[0]["description"] = json!("Now described as a xylophone made of jade.");
    let text: String = changed.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&demo, text).unwrap();
    let rep = again.ensure_demo(&demo).await.unwrap().unwrap();
    assert_eq!((rep.inserted, rep.updated, rep.unchanged), (0, 1, 5));
    assert_eq!(store.collection().exhibit_count().unwrap(), 6);
    let hits = again.search("jade xylophone", 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, id);
}

#[tokio::test]
async fn a_missing_demo_file_does_not_stop_the_server() {
    let app = spawn_app_with(|c| {
        c.srs.load_demo = true;
        c.srs.demo_path = "/nonexistent/demo.jsonl".into();
    })
    .await;
    assert_eq!(app.http_get("/healthz").await.0, 200);
    let r = app.app.deps.retriever.clone().unwrap();
    assert!(r.search("bronze", 5).await.unwrap().is_empty());
}

fn jsonl(rows: &[Value]) -> String {
    rows.iter().map(|v| format!("{v}\n")).collect()
}

fn hybrid_rows() -> Vec<Value> {
    vec![
        json!({"id": "h1", "title": "Netsuke of a Sleeping Kitten", "description": "A small ivory toggle."}),
        json!({"id": "h2", "title": "Lacquer Box", "description": "Gold lacquer with a full moon."}),
        json!({"id": "h3", "title": "Model of a Junk", "description": "A wooden model of a trading junk."}),
    ]
}

fn hybrid_config(fake: &FakeEmbeddings, dir: &Path) -> Config {
    let mut config = Config::default();
    config.database.path = dir.join("h.db");
    config.srs.load_demo = false;
    config.srs.embeddings_url = fake.base_url();
    config.srs.embeddings_model = "fake-embed".into();
    config.srs.embeddings_api_key_env = String::new();
    config.srs.embeddings_batch = 2;
    config.srs.embeddings_timeout_seconds = 1.0;
    config.srs.embeddings_query_timeout_seconds = 0.3;
    // Threshold mode: the fitted abstention models are for a real collection, not three rows.
    config.srs.abstention_model = false;
    config.srs.embeddings_min_similarity = 0.5;
    config
}

async fn hybrid_retriever(
    fake: &FakeEmbeddings,
    dir: &Path,
) -> (EmbeddedRetriever, Store, PathBuf) {
    let config = hybrid_config(fake, dir);
    let store = Store::open(&config.database.path).unwrap();
    let r = retrieval::embedded_from_config(&config, &store)
        .await
        .unwrap();
    let file = dir.join("h.jsonl");
    std::fs::write(&file, jsonl(&hybrid_rows())).unwrap();
    (r, store, file)
}

/// The record texts (not the one-word probe) sent in all requests so far.
fn record_texts(fake: &FakeEmbeddings) -> Vec<String> {
    fake.inputs()
        .into_iter()
        .flatten()
        .filter(|t| t.starts_with("passage: ") && t != "passage: museum")
        .collect()
}

fn vector_count(store: &Store) -> i64 {
    store.vectors().counts().unwrap().iter().map(|c| c.1).sum()
}

#[tokio::test]
async fn hybrid_search_stores_vectors_at_ingest_and_fuses_them() {
    let fake = FakeEmbeddings::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (r, store, file) = hybrid_retriever(&fake, dir.path()).await;
    let rep = r.ingest_file(&file).await.unwrap();
    assert_eq!(rep.inserted, 3);
    assert_eq!(rep.vectors_embedded, Some(3));
    assert_eq!(vector_count(&store), 3);
    // The OpenAI wire format with the e5 prefixes, no key configured, no input_type (off by
    // default): a one-text probe, then the records in batches (2, then doubled).
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    assert_eq!(reqs[0]["model"], "fake-embed");
    assert_eq!(reqs[0]["input"], json!(["passage: museum"]));
    assert!(reqs[0].get("input_type").is_none());
    assert_eq!(reqs[1]["input"].as_array().unwrap().len(), 2);
    assert!(
        reqs[1]["input"][0]
            .as_str()
            .unwrap()
            .starts_with("passage: Netsuke of a Sleeping Kitten")
    );
    assert!(fake.auth_headers().iter().all(Option::is_none));
    let fp = store.vectors().counts().unwrap()[0].0.clone();
    assert!(fp.starts_with("fake-embed|fake-embed|5|"), "{fp}");
    // Re-ingesting unchanged rows embeds nothing again (only the probe is asked).
    let rep = r.ingest_file(&file).await.unwrap();
    assert_eq!((rep.unchanged, rep.vectors_embedded), (3, Some(0)));
    assert_eq!(record_texts(&fake).len(), 3);

    // "feline" shares no word with any record: only the vectors find the kitten.
    let hits = r.search("Do you have anything feline?", 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, "h1", "{hits:?}");
    assert!(hits[0].score > 0.0 && hits[0].score <= 1.0);
    let last = fake.requests().pop().unwrap();
    assert_eq!(
        last["input"],
        json!(["query: Do you have anything feline?"])
    );
    let hits = r.search("a boat", 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, "h3", "{hits:?}");
    // Lexical matches still rank.
    let hits = r.search("gold lacquer", 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, "h2");
}

#[tokio::test]
async fn a_failing_embeddings_endpoint_degrades_to_lexical_search() {
    let fake = FakeEmbeddings::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (r, store, file) = hybrid_retriever(&fake, dir.path()).await;
    fake.set_mode(Mode::Fail);
    // Ingest keeps the rows and says why there are no vectors.
    let rep = r.ingest_file(&file).await.unwrap();
    assert_eq!(rep.inserted, 3);
    assert!(rep.vectors_error.unwrap().contains("HTTP 500"));
    assert_eq!(vector_count(&store), 0);
    let hits = r.search("gold lacquer", 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, "h2");
    // Not ready: a question is not even sent to the endpoint.
    let before = fake.requests().len();
    fake.set_mode(Mode::Stall);
    let hits = tokio::time::timeout(Duration::from_secs(10), r.search("gold lacquer", 3))
        .await
        .expect("lexical search does not wait for the endpoint")
        .unwrap();
    assert_eq!(hits[0].exhibit.id, "h2");
    assert_eq!(fake.requests().len(), before);
    // Back up: the pending vectors are computed.
    fake.set_mode(Mode::Ok);
    assert_eq!(r.embed_pending().await.unwrap(), 3);
}

/// A server-like retriever (background worker started, as `build_retriever` does) over
/// `config`'s database.
async fn background_retriever(config: &Config) -> (Arc<EmbeddedRetriever>, Store) {
    let store = Store::open(&config.database.path).unwrap();
    let r = retrieval::embedded_from_config(config, &store)
        .await
        .unwrap();
    r.start_background_embedding();
    (Arc::new(r), store)
}

/// Stores rows without embedding anything (no embeddings endpoint configured).
async fn store_rows(store: &Store, file: &Path) {
    let r = retrieval::embedded_from_config(&Config::default(), store)
        .await
        .unwrap();
    let rep = r.ingest_file(file).await.unwrap();
    assert_eq!(rep.vectors_embedded, None);
}

async fn ready(r: &Arc<EmbeddedRetriever>) -> retrieval::semantic::SemanticStatus {
    let s = r.semantic().unwrap();
    tokio::time::timeout(
        Duration::from_secs(20),
        s.wait_until(|st| st.state == SemanticState::Ready),
    )
    .await
    .unwrap_or_else(|_| panic!("not ready: {:?}", s.status()))
}

#[tokio::test]
async fn background_embedding_resumes_after_an_interruption_and_a_restart_reembeds_nothing() {
    let fake = FakeEmbeddings::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = hybrid_config(&fake, dir.path());
    let file = dir.path().join("h.jsonl");
    std::fs::write(&file, jsonl(&hybrid_rows())).unwrap();
    {
        let (r, store) = background_retriever(&config).await;
        let sem = r.semantic().unwrap();
        ready(&r).await; // an empty collection is complete
        // The endpoint answers the next probe and one batch of 2, then fails.
        fake.fail_after(Some(2));
        // Rows are stored and searchable at once; the ingest asks the worker to embed them.
        let rep = r.ingest_file(&file).await.unwrap();
        assert_eq!(rep.vectors_embedded, None, "not inline: in the background");
        let st = tokio::time::timeout(
            Duration::from_secs(20),
            sem.wait_until(|st| st.state == SemanticState::Down && st.embedded == 2),
        )
        .await
        .unwrap_or_else(|_| panic!("{:?}", sem.status()));
        assert_eq!(st.total, 3);
        assert!(st.error.unwrap().contains("HTTP 500"));
        assert_eq!(vector_count(&store), 2, "the finished batch is kept");
        // Not complete: lexical search, no question embedding.
        let n = fake.requests().len();
        let hits = r.search("gold lacquer", 3).await.unwrap();
        assert_eq!(hits[0].exhibit.id, "h2");
        assert_eq!(fake.requests().len(), n);
    }
    // Restart: only the missing record is embedded.
    fake.fail_after(None);
    let done = record_texts(&fake).len();
    let (r, store) = background_retriever(&config).await;
    let st = ready(&r).await;
    assert_eq!((st.embedded, st.total), (3, 3));
    assert_eq!(record_texts(&fake).len(), done + 1);
    assert_eq!(vector_count(&store), 3);
    let hits = r.search("Do you have anything feline?", 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, "h1", "{hits:?}");
    drop(r);
    // Another restart: nothing at all.
    let done = record_texts(&fake).len();
    let (r, _store) = background_retriever(&config).await;
    ready(&r).await;
    assert_eq!(record_texts(&fake).len(), done);
}

#[tokio::test]
async fn another_model_under_the_same_name_gets_its_own_vectors() {
    let fake = FakeEmbeddings::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = hybrid_config(&fake, dir.path());
    let file = dir.path().join("h.jsonl");
    std::fs::write(&file, jsonl(&hybrid_rows())).unwrap();
    fake.report_model("model-a");
    let (r, _store) = background_retriever(&config).await;
    ready(&r).await; // an empty collection is complete
    r.ingest_file(&file).await.unwrap();
    // From the moment the ingest returns, the old collection's `ready` is gone.
    let sem = r.semantic().unwrap();
    assert_eq!(sem.status().state, SemanticState::Embedding);
    let st = ready(&r).await;
    assert_eq!((st.embedded, st.total), (3, 3));
    drop(r);
    let before = record_texts(&fake).len();
    // The endpoint now serves another model under the same configured name.
    fake.report_model("model-b");
    let (r, store) = background_retriever(&config).await;
    let st = ready(&r).await;
    assert!(st.fingerprint.unwrap().starts_with("fake-embed|model-b|5|"));
    assert_eq!(record_texts(&fake).len(), before + 3, "all re-embedded");
    let counts = store.vectors().counts().unwrap();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert!(counts.iter().all(|c| c.1 == 3));
}

#[tokio::test]
async fn a_stalled_endpoint_costs_one_question_the_short_timeout_not_every_question() {
    let fake = FakeEmbeddings::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = hybrid_config(&fake, dir.path());
    let file = dir.path().join("h.jsonl");
    std::fs::write(&file, jsonl(&hybrid_rows())).unwrap();
    let (r, _store) = background_retriever(&config).await;
    r.ingest_file(&file).await.unwrap();
    ready(&r).await;
    fake.set_mode(Mode::Stall);
    let t = std::time::Instant::now();
    let hits = r.search("gold lacquer", 3).await.unwrap();
    let first = t.elapsed();
    assert_eq!(hits[0].exhibit.id, "h2");
    assert!(
        first >= Duration::from_millis(250) && first < Duration::from_secs(3),
        "{first:?}"
    );
    // The breaker is open: the next questions do not wait at all, and say so in the status.
    let asked = fake.requests().len();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let hits = r.search("gold lacquer", 3).await.unwrap();
        assert_eq!(hits[0].exhibit.id, "h2");
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
    }
    assert_eq!(fake.requests().len(), asked);
    let st = r.semantic().unwrap().status();
    assert_eq!(st.state, SemanticState::Down);
    assert!(st.error.unwrap().contains("lexical search"));
    // After the backoff a question tries again, and a working endpoint closes the breaker.
    fake.set_mode(Mode::Ok);
    r.semantic()
        .unwrap()
        .wait_until(|st| st.state == SemanticState::Ready)
        .await;
    let hits = r.search("Do you have anything feline?", 3).await.unwrap();
    assert_eq!(hits[0].exhibit.id, "h1", "{hits:?}");
}

#[tokio::test]
async fn readyz_shows_the_semantic_path_embedding_ready_or_down_and_stays_ready() {
    let fake = FakeEmbeddings::start().await;
    fake.set_mode(Mode::Fail);
    let url = fake.base_url();
    let app = spawn_app_with(|c| {
        c.srs.load_demo = false;
        c.srs.embeddings_url = url;
        c.srs.embeddings_model = "fake-embed".into();
        c.srs.embeddings_timeout_seconds = 1.0;
    })
    .await;
    let sem = app.app.deps.retriever.as_ref().unwrap().semantic().unwrap();
    sem.wait_until(|s| s.state == SemanticState::Down).await;
    let readyz = |addr| async move {
        let r = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
        (r.status(), r.json::<Value>().await.unwrap())
    };
    let (code, body) = readyz(app.addr).await;
    assert_eq!(code, 200, "lexical search still serves: {body}");
    assert_eq!(body["semantic"]["state"], "down", "{body}");
    assert!(
        body["semantic"]["error"]
            .as_str()
            .unwrap()
            .contains("HTTP 500")
    );
    // The endpoint comes back: the next ingest kicks the worker, which embeds and is ready.
    fake.set_mode(Mode::Ok);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h.jsonl");
    std::fs::write(&file, jsonl(&hybrid_rows())).unwrap();
    store_rows(app.app.store(), &file).await;
    sem.kick();
    sem.wait_until(|s| s.state == SemanticState::Ready).await;
    let (code, body) = readyz(app.addr).await;
    assert_eq!(code, 200);
    assert_eq!(body["semantic"]["state"], "ready", "{body}");
    assert_eq!(body["semantic"]["embedded"], 3);
    assert_eq!(body["semantic"]["total"], 3);
    // Without embeddings the field is null.
    let plain = spawn_app_with(|c| c.srs.load_demo = false).await;
    let (_, body) = readyz(plain.addr).await;
    assert!(body["semantic"].is_null(), "{body}");
}

// ---- remote SRS ----

#[derive(Clone, Default)]
struct RemoteState {
    requests: Arc<Mutex<Vec<Value>>>,
    auth: Arc<Mutex<Vec<Option<String>>>>,
    mode: Arc<Mutex<&'static str>>,
}

async fn remote_search(
    State(s): State<RemoteState>,
    headers: axum::http::HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    s.requests.lock().unwrap().push(body.0.clone());
    s.auth.lock().unwrap().push(
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(String::from),
    );
    let mode = *s.mode.lock().unwrap();
    match mode {
        "500" => (StatusCode::INTERNAL_SERVER_ERROR, "secret upstream detail").into_response(),
        "garbage" => (StatusCode::OK, "{\"hits\": [{\"nope\": 1}]}").into_response(),
        "stall" => std::future::pending().await,
        _ => axum::Json(json!({"hits": [
            {"exhibit": {"id": "r1", "title": "Bronze Ding", "period": "Western Zhou"},
             "score": 0.9, "passages": ["A ritual cauldron."]},
            {"exhibit": {"id": "r2", "title": "Jade Bi"}, "score": 0.5, "passages": []},
        ]}))
        .into_response(),
    }
}

async fn remote_get(UrlPath(id): UrlPath<String>) -> Response {
    if id == "r1/x" {
        axum::Json(json!({"id": "r1/x", "title": "Bronze Ding"})).into_response()
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}

async fn start_remote() -> (String, RemoteState) {
    let state = RemoteState::default();
    *state.mode.lock().unwrap() = "ok";
    let app = Router::new()
        .route("/srs/search", post(remote_search))
        .route("/srs/exhibits/{id}", get(remote_get))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/srs"), state)
}

fn remote_config(url: &str) -> Config {
    let mut c = Config::default();
    c.srs.provider = SrsProviderKind::Remote;
    c.srs.remote_url = url.into();
    c.srs.remote_timeout_seconds = 0.5;
    c
}

#[tokio::test]
async fn remote_srs_speaks_the_documented_format() {
    let (url, state) = start_remote().await;
    let store = Store::open_in_memory().unwrap();
    let r = retrieval::build_retriever(&remote_config(&url), &store)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.name(), "remote");
    let hits = r.search("  这件青铜鼎是什么年代的  ", 1).await.unwrap();
    assert_eq!(
        state.requests.lock().unwrap()[0],
        json!({"query": "这件青铜鼎是什么年代的", "k": 1})
    );
    assert!(state.auth.lock().unwrap()[0].is_none());
    // At most k hits are used, whatever the service sends.
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].exhibit.id, "r1");
    assert_eq!(hits[0].exhibit.period, "Western Zhou");
    assert_eq!(hits[0].passages, vec!["A ritual cauldron."]);
    assert!(
        retrieval::format_passages(&hits)
            .starts_with("[r1] Bronze Ding | Western Zhou\n- A ritual")
    );
    // Ids are one percent-encoded path segment; unknown ids are None.
    assert_eq!(r.get("r1/x").await.unwrap().unwrap().title, "Bronze Ding");
    assert_eq!(r.get("nope").await.unwrap(), None);
    // Nothing is sent for an empty question.
    assert!(r.search("   ", 5).await.unwrap().is_empty());
    assert_eq!(state.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn remote_srs_failures_are_clear_errors() {
    let (url, state) = start_remote().await;
    let store = Store::open_in_memory().unwrap();
    let r = retrieval::build_retriever(&remote_config(&url), &store)
        .await
        .unwrap()
        .unwrap();
    *state.mode.lock().unwrap() = "500";
    let e = r.search("ding", 5).await.unwrap_err();
    assert_eq!(
        e,
        RetrievalError::Failed("the remote SRS answered HTTP 500".into())
    );
    assert!(!e.to_string().contains("secret"));
    *state.mode.lock().unwrap() = "garbage";
    let e = r.search("ding", 5).await.unwrap_err();
    assert!(
        matches!(&e, RetrievalError::Failed(m) if m.contains("malformed")),
        "{e:?}"
    );
    *state.mode.lock().unwrap() = "stall";
    let e = tokio::time::timeout(Duration::from_secs(10), r.search("ding", 5))
        .await
        .expect("bounded by remote_timeout_seconds")
        .unwrap_err();
    assert_eq!(e, RetrievalError::Timeout);

    // Nothing listening.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let r = retrieval::build_retriever(&remote_config(&format!("http://{addr}")), &store)
        .await
        .unwrap()
        .unwrap();
    let e = r.search("ding", 5).await.unwrap_err();
    assert!(matches!(e, RetrievalError::Unavailable(_)), "{e:?}");
    // A bad URL is refused when the retriever is built.
    let bad = remote_config("not a url");
    assert!(retrieval::build_retriever(&bad, &store).await.is_err());
}

#[tokio::test]
async fn an_unreachable_remote_srs_never_fails_a_visitors_request() {
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let app = spawn_app_with(move |c| {
        c.srs.provider = SrsProviderKind::Remote;
        c.srs.remote_url = format!("http://{addr}");
        c.srs.remote_timeout_seconds = 0.5;
    })
    .await;
    app.llm.push(text_reply(&["我不确定。"]));
    let mut c = app.client().await;
    c.text_request("r1", "这件青铜鼎是什么年代的？").await;
    let r = c.reply("r1").await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.text, "我不确定。");
}

// ---- quality over the real demo collection ----

#[tokio::test]
async fn dev_queries_reach_the_recall_target_on_the_demo_collection() {
    let store = Store::open_in_memory().unwrap();
    let r = retrieval::embedded_from_config(&Config::default(), &store)
        .await
        .unwrap();
    let rep = r.ingest_file(&fixture("exhibits.jsonl")).await.unwrap();
    assert_eq!((rep.rows, rep.rejected.len()), (2700, 0));
    let queries = eval::load_queries(&fixture("dev_queries.jsonl")).unwrap();
    assert_eq!(queries.len(), 40);
    let outcomes = eval::run(&r, &queries).await;
    assert!(outcomes.iter().all(|o| o.error.is_none()));
    let m = eval::metrics(&outcomes);
    // The target; `museum-agent eval` prints the figures (README, Retrieval).
    assert!(m.recall_at_5 >= 0.85, "{m:?}");
    assert!(m.recall_at_1 <= m.recall_at_5 && m.mrr <= m.recall_at_5 + 1e-9);
    // Simplified questions find Traditional records.
    let hits = r.search("峄山刻石相传是谁写的", 5).await.unwrap();
    assert!(hits.iter().any(|h| h.exhibit.id == "nmh-10648"), "{hits:?}");
    assert!(hits[0].passages.iter().any(|p| p.contains("李斯")));
}

/// The embedded retriever over the whole demo collection, in memory (with its store, which
/// must outlive it).
async fn demo_retriever() -> (Store, EmbeddedRetriever) {
    let store = Store::open_in_memory().unwrap();
    let r = retrieval::embedded_from_config(&Config::default(), &store)
        .await
        .unwrap();
    r.ingest_file(&fixture("exhibits.jsonl")).await.unwrap();
    (store, r)
}

/// `eval`'s rankings of `queries` (lexical, no embeddings).
async fn rank_lexically(r: &EmbeddedRetriever, queries: Vec<eval::EvalQuery>) -> Vec<eval::Ranked> {
    let opts = r.options().clone();
    r.collection()
        .call(move |s| eval::rank_all(s, &queries, &opts, None))
        .await
        .unwrap()
}

/// A paraphrase finds the record by the record's own word through the thesaurus ("timepiece" →
/// watch), while the ranking by the question's own words, which the no-answer signals describe,
/// puts the record that shares more of the question's words first.
#[tokio::test]
async fn a_paraphrase_finds_the_record_through_the_thesaurus() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.jsonl");
    let rows = [
        json!({"id": "spoon", "title": "Silver spoon",
               "description": "A silver spoon from Augsburg, silver gilt, with a silver handle."}),
        json!({"id": "watch", "title": "Pocket watch",
               "description": "A watch in a silver case, made in Augsburg."}),
        json!({"id": "cup", "title": "Cup", "description": "A porcelain cup from Meissen."}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let store = Store::open_in_memory().unwrap();
    let r = retrieval::embedded_from_config(&Config::default(), &store)
        .await
        .unwrap();
    r.ingest_file(&file).await.unwrap();
    let q = |text: &str| eval::EvalQuery {
        query: text.into(),
        language: "en".into(),
        relevant_ids: vec!["watch".into()],
        kind: "en-paraphrase".into(),
    };
    let queries = vec![
        q("Do you have a silver timepiece from Augsburg?"),
        q("Do you have a timepiece?"),
    ];
    let ranked = rank_lexically(&r, queries).await;
    assert_eq!(ranked[0].ids[..2], ["watch", "spoon"], "{:?}", ranked[0]);
    assert_eq!(ranked[0].own()[..2], ["spoon", "watch"], "{:?}", ranked[0]);
    // Its own words match nothing: the ranking the no-answer signals describe is empty, not
    // the synonyms' (eval once fell back to it; the server never did).
    assert_eq!(ranked[1].ids, ["watch"], "{:?}", ranked[1]);
    assert!(ranked[1].own().is_empty(), "{:?}", ranked[1]);
}

/// The targets, cross-validated (5 folds, stratified by kind) over the 200 dev
/// questions of both files: the abstention model of each fold is fitted on the other four.
/// The asserted floors are what this CV reaches (README, Quality), not the in-sample figures.
#[tokio::test]
async fn cross_validated_quality_per_kind_on_the_200_dev_questions() {
    let (_store, r) = demo_retriever().await;
    let mut queries = eval::load_queries(&fixture("dev_queries.jsonl")).unwrap();
    queries.extend(eval::load_queries(&fixture("dev_queries_v2.jsonl")).unwrap());
    assert_eq!(queries.len(), 200);
    let ranked = rank_lexically(&r, queries).await;
    let cv = eval::by_kind(&eval::cross_validate(&ranked, 5).0);
    let kind = |k: &str| cv.iter().find(|m| m.kind == k).unwrap().clone();
    for k in ["zh-simplified", "zh-traditional", "en-fact"] {
        let m = kind(k);
        assert!(m.recall_at_5.unwrap() >= 0.95, "{m:?}");
    }
    // Reached 29/34 no-answer questions refused (target 0.90: not reached). With the pinyin
    // bridge alone it was 30/34 with 8/166 answerable refused and cross-lingual recall@5
    // 0.467; the bilingual dictionary (`retrieval::dictionary`) and the threshold of its own
    // for matches across scripts (`abstain::fit`) trade one no-answer refusal for four fewer
    // false ones and twice the cross-lingual recall (the retrieval README, "Bilingual
    // dictionary"; over 30 reshuffled fold assignments 27.8 / 6.0 against 29.3 / 9.7). The
    // `work_missing` rule (a work named in 《》 that the same-script best hit does not hold is
    // refused) made it 30/34, no answerable question more refused; the `names_unmet` rule (a
    // best hit in the other script holding none of the question's proper names that cross
    // the scripts is refused, after `prefer_named` put first a hit of the first ten that holds
    // one) 31/34 (target 0.90: reached), no answerable question more refused.
    let neg = kind("no-answer");
    assert!(neg.abstention_recall.unwrap() >= 0.91, "{neg:?}");
    assert_eq!(neg.abstention_precision, Some(1.0), "{neg:?}");
    // Reached 3/166 answerable refused (target 0.02 overall: reached; 4/166 until a proper
    // noun of the dictionary stopped translating as its description, "famous Chinese painter",
    // and "Who painted … Pharaoh's army" stopped naming Pharaoh its maker: the fits of the
    // folds moved with those signals); of the 153 answerable questions whose exhibit lexical
    // search ranks in the top 5, 1 is refused (the Andean tumbler; 2 with the buffalo hunt).
    let all = kind("all");
    assert!(all.false_abstention_rate.unwrap() <= 0.02, "{all:?}");
    // 0.886 and 0.855 before the thesaurus (`retrieval::thesaurus`), which reorders answers
    // only: the refusals above are the same. 0.916 and 0.867 until phrasal verbs stripped of
    // their particle ("shell out" as "shell", "use up" as "use") were left out of it: the
    // Sudanese Qur'an board had reached 4th place through "wiping" → "use" (the record says
    // "used"), now 8th; the German sundial goblet went from 2nd to 1st (retrieval README,
    // "Phrases and phrasal verbs").
    // 0.910 and 0.873 until the buffalo-hunt painting above was no longer refused.
    assert!(all.recall_at_5.unwrap() >= 0.915, "{all:?}");
    assert!(all.recall_at_1.unwrap() >= 0.879, "{all:?}");
    let para = kind("en-paraphrase");
    // 0.600 before the Qur'an board above fell out of the top 5.
    assert!(para.recall_at_5.unwrap() >= 0.566, "{para:?}");
    let xl = kind("cross-lingual");
    assert!(xl.recall_at_5.unwrap() >= 0.93, "{xl:?}");
    // 0.800 before `prefer_named` (查士标那幅清晨山水画… ranked an American lake scene first).
    assert!(xl.recall_at_1.unwrap() >= 0.866, "{xl:?}");
    assert_eq!(xl.false_abstentions, 0, "{xl:?}");
    let outcomes = eval::cross_validate(&ranked, 5).0;
    let findable: Vec<bool> = ranked
        .iter()
        .map(|r| {
            r.ids
                .iter()
                .take(5)
                .any(|id| r.query.relevant_ids.contains(id))
        })
        .collect();
    let refused_findable = outcomes
        .iter()
        .zip(&findable)
        .filter(|(o, f)| **f && o.returned.is_empty())
        .count();
    let n_findable = findable.iter().filter(|f| **f).count();
    // 149 before the thesaurus; 154 until the Qur'an board above fell out of the top 5.
    assert_eq!(n_findable, 153);
    assert!(refused_findable <= 1, "{refused_findable}/{n_findable}");
    // The Chinese and English-fact kinds lose no question to abstention.
    for k in ["zh-simplified", "zh-traditional", "en-fact"] {
        assert_eq!(kind(k).false_abstentions, 0, "{:?}", kind(k));
    }
}

/// A best hit in the other script that holds none of the proper names the question gives is
/// not the answer: a hit of the first ten that holds one goes first, and with none, when it
/// covers less than half of the question, the question is refused (`names_unmet`), where it
/// was answered with whatever the question's common words reached through the dictionary.
#[tokio::test]
async fn names_the_question_gives_must_cross_into_the_answer() {
    let (_store, r) = demo_retriever().await;
    // 北京 (Beijing, Peking) is in no English record that 头盖骨 (skull) reached.
    let hits = r
        .search("北京人的头盖骨化石在你们这里吗？", 5)
        .await
        .unwrap();
    assert!(
        hits.is_empty(),
        "{:?}",
        hits.first().map(|h| &h.exhibit.title)
    );
    // A hit that covers most of the question is kept though it misses a name in the
    // dictionary's form (its record writes 南極, the dictionary 南极洲 for Antarctica).
    let hits = r
        .search("Tell me about the first flag raised in Antarctica", 5)
        .await
        .unwrap();
    assert_eq!(hits[0].exhibit.id, "nmh-07810");
    // 查士标 is Zha Shibiao in pinyin: his "Mountains at Dawn" goes before a lake scene that
    // 山水 and 清晨 ranked first.
    let hits = r
        .search("查士标那幅清晨山水画上题的诗写了什么？", 5)
        .await
        .unwrap();
    assert_eq!(
        hits[0].exhibit.id, "walters-34305",
        "{:?}",
        hits[0].exhibit.title
    );
    // A name the best hit holds through the dictionary: answered as before.
    let hits = r
        .search(
            "Do you have a flag carried by the Boxers during the Boxer Rebellion?",
            5,
        )
        .await
        .unwrap();
    assert_eq!(hits[0].exhibit.id, "nmh-07817");
    // A name the dictionary knows only as a name (三星堆: its one sense describes the site,
    // and jieba reads it as a numeral) must cross too: the masks reached through 面具 are
    // not from there. And a translation of one bigram of a name is not the name: 二里头
    // (Erlitou) is not met by the armlets "excavated" (出土) … "inside" (里头).
    for q in ["有三星堆出土的金面具吗？", "二里头出土的青铜爵在这里吗？"]
    {
        let hits = r.search(q, 5).await.unwrap();
        assert!(
            hits.is_empty(),
            "{q}: {:?}",
            hits.first().map(|h| &h.exhibit.title)
        );
    }
}

/// A question that names only a maker is answered with a work the maker field names
/// (`maker_found`): "And what about the Cassatt?" was refused (one term; the model had never
/// seen a one-term question answered). A maker the collection does not hold is still refused,
/// and so is a work of a maker it holds when the hit holds nothing else the question asks
/// ("Fabergé egg" was answered with his anteater by that rule).
#[tokio::test]
async fn a_question_naming_only_a_maker_gets_their_work() {
    let (_store, r) = demo_retriever().await;
    let hits = r.search("And what about the Cassatt?", 5).await.unwrap();
    assert!(
        hits.first()
            .is_some_and(|h| h.exhibit.maker.contains("Cassatt")),
        "{:?}",
        hits.first().map(|h| &h.exhibit.title)
    );
    assert!(
        r.search("Do you have anything by Picasso?", 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        r.search("And what about the Frida Kahlo?", 5)
            .await
            .unwrap()
            .is_empty()
    );
    let egg = r.search("Fabergé egg", 5).await.unwrap();
    assert!(
        egg.is_empty(),
        "{:?}",
        egg.first().map(|h| &h.exhibit.title)
    );
}

#[tokio::test]
async fn a_corrupt_or_truncated_index_is_rebuilt_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let sample = demo_sample(5);
    std::fs::write(dir.path().join("c.jsonl"), &sample).unwrap();
    let first = line_of(&sample, 0);
    let title = first["title"].as_str().unwrap().to_string();
    {
        let store = Store::open(&db).unwrap();
        let r = retrieval::embedded_from_config(&Config::default(), &store)
            .await
            .unwrap();
        r.ingest_file(&dir.path().join("c.jsonl")).await.unwrap();
    }
    let index_dir = museum_agent::store::lexical_dir(&db);
    // The largest file of the index (a segment's postings or terms).
    let largest = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .max_by_key(|e| e.metadata().unwrap().len())
            .unwrap()
            .path()
    };
    for damage in [
        "analysed rows lost",
        "index lost",
        "index metadata garbled",
        "index file truncated",
    ] {
        match damage {
            "analysed rows lost" => {
                let c = rusqlite::Connection::open(&db).unwrap();
                // The last rows (the start's fingerprint reads the largest key; the full
                // check counts them all).
                c.execute_batch(
                    "DELETE FROM exhibit_text WHERE pk IN \
                     (SELECT pk FROM exhibit_text ORDER BY pk DESC LIMIT 4)",
                )
                .unwrap();
            }
            "index lost" => std::fs::remove_dir_all(&index_dir).unwrap(),
            "index metadata garbled" => {
                std::fs::write(index_dir.join("meta.json"), "{ not json").unwrap()
            }
            _ => {
                let f = largest(&index_dir);
                let len = std::fs::metadata(&f).unwrap().len();
                let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
                file.set_len(len / 2).unwrap();
            }
        }
        let store = Store::open(&db).unwrap();
        let problem = store.collection().text_problem().unwrap();
        let problem = problem.or_else(|| store.collection().index_problem().unwrap());
        assert!(problem.is_some(), "{damage}");
        let r = retrieval::embedded_from_config(&Config::default(), &store)
            .await
            .unwrap();
        assert_eq!(store.collection().text_problem().unwrap(), None, "{damage}");
        assert_eq!(
            store.collection().index_problem().unwrap(),
            None,
            "{damage}"
        );
        let hits = r.search(&title, 3).await.unwrap();
        assert_eq!(
            hits[0].exhibit.id,
            first["id"].as_str().unwrap(),
            "{damage}"
        );
    }
}

// ---- the commands ----

fn bin(dir: &Path, args: &[&str]) -> (bool, String, String) {
    bin_env(dir, args, &[])
}

fn bin_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_museum-agent"))
        .envs(env.iter().copied())
        .env("MUSEUM_AGENT__DATABASE__PATH", dir.join("cli.db"))
        .env("MUSEUM_AGENT__SRS__LOAD_DEMO", "false")
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ingest_search_and_eval_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sample = demo_sample(2);
    let bad = format!("{sample}{{broken\n{}\n", json!({"id": "x", "title": ""}));
    std::fs::write(d.join("c.jsonl"), &bad).unwrap();
    std::fs::write(
        d.join("c.csv"),
        "id,title,maker,description\nc1,Blue Jar,Anon,A jar for wine.\nc2\n",
    )
    .unwrap();
    let (ok, out, err) = bin(d, &["ingest", "c.jsonl", "c.csv"]);
    // Good rows are stored, but the exit status tells a script that some were rejected.
    assert!(!ok && err.contains("3 row(s) were rejected"), "{out}{err}");
    assert!(
        out.contains("c.jsonl: 4 rows (inserted 4, updated 0, unchanged 0), 2 rejected"),
        "{out}"
    );
    assert!(out.contains("line 5: invalid JSON"), "{out}");
    assert!(out.contains("line 6: missing `title`"), "{out}");
    assert!(out.contains("c.csv: 1 rows (inserted 1"), "{out}");
    assert!(out.contains("line 3: expected 4 fields, found 1"), "{out}");
    // Idempotent.
    let (_, out, _) = bin(d, &["ingest", "c.jsonl"]);
    assert!(
        out.contains("(inserted 0, updated 0, unchanged 4)"),
        "{out}"
    );
    // A file that cannot be read fails the command, naming it.
    let (ok, _, err) = bin(d, &["ingest", "missing.jsonl"]);
    assert!(!ok && err.contains("missing.jsonl"), "{err}");
    let (ok, _, err) = bin(d, &["ingest", "c.txt"]);
    assert!(!ok && err.contains("unsupported file type"), "{err}");

    let first = line_of(&sample, 0);
    let (ok, out, err) = bin(
        d,
        &[
            "search",
            first["title"].as_str().unwrap(),
            "--k",
            "2",
            "--json",
        ],
    );
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["retriever"], "embedded");
    assert_eq!(v["hits"][0]["id"], first["id"]);
    assert!(v["hits"].as_array().unwrap().len() <= 2);
    assert!(v["hits"][0]["score"].as_f64().unwrap() > 0.0);
    // FTS syntax in the question is text, not an error.
    // (Threshold decision: the shipped abstention fit is for a real collection, not 5 rows.)
    let (ok, out, err) = bin_env(
        d,
        &["search", "\"wine* NEAR( -jar", "--json"],
        &[("MUSEUM_AGENT__SRS__ABSTENTION_MODEL", "false")],
    );
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hits"][0]["id"], "c1");
    let (ok, out, _) = bin(d, &["search", "Blue Jar"]);
    assert!(ok && out.contains("c1  Blue Jar"), "{out}");

    // eval on a small collection and query file.
    std::fs::write(
        d.join("q.jsonl"),
        format!(
            "{}\n{}\n",
            json!({"query": "a jar for wine", "language": "en", "relevant_ids": ["c1"]}),
            json!({"query": "Mona Lisa", "language": "en", "relevant_ids": []}),
        ),
    )
    .unwrap();
    let (ok, out, err) = bin(
        d,
        &[
            "eval",
            "--queries",
            "q.jsonl",
            "--collection",
            "c.csv",
            "--json",
        ],
    );
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let all = v["current_model"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(all["kind"], "all");
    assert_eq!(all["recall_at_1"], 1.0);
    assert_eq!(all["mrr"], 1.0);
    assert_eq!(all["negatives_refused"], 1);
    assert!(v["cross_validated"].is_array() && v["in_sample"].is_array());
    // The shipped model's decision per question, in the file's order: what a museum reads to
    // see which questions it gets wrong.
    let outcomes = v["outcomes_current"].as_array().unwrap();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(outcomes[0]["query"]["query"], "a jar for wine");
    assert_eq!(outcomes[0]["first_relevant"], 1);
    assert_eq!(outcomes[0]["returned"][0][0], "c1");
    assert_eq!(outcomes[1]["query"]["query"], "Mona Lisa");
    assert_eq!(outcomes[1]["returned"], json!([]));
    // A museum refits abstention on its own questions; the fit is stored with the index.
    let (ok, _, err) = bin(
        d,
        &[
            "eval",
            "--queries",
            "q.jsonl",
            "--collection",
            "c.csv",
            "--fit",
            "--out",
            "fit.json",
        ],
    );
    assert!(
        ok && err.contains("abstention model fitted on 2 questions stored"),
        "{err}"
    );
    let fit = std::fs::read_to_string(d.join("fit.json")).unwrap();
    assert!(
        retrieval::abstain::AbstentionModel::from_json(&fit).is_some(),
        "{fit}"
    );
    let stored = Store::open(&d.join("cli.db"))
        .unwrap()
        .collection()
        .collection_meta(retrieval::embedded::ABSTENTION_META_KEY)
        .unwrap()
        .unwrap();
    assert_eq!(
        retrieval::abstain::AbstentionModel::from_json(&stored),
        retrieval::abstain::AbstentionModel::from_json(&fit)
    );
    // An empty question says so.
    let (ok, out, _) = bin(d, &["search", "  "]);
    assert!(ok && out.contains("the query is empty"), "{out}");
    let (ok, out, _) = bin(d, &["search", "Mona Lisa"]);
    assert!(ok && out.contains("no answer"), "{out}");
    let (ok, _, err) = bin(d, &["eval", "--queries", "nope.jsonl"]);
    assert!(!ok && err.contains("nope.jsonl"), "{err}");
}

/// The held-out questions (`heldout_queries.jsonl`, never fitted on: the retrieval README,
/// "Held-out check") are about other records than the dev questions, and every record they
/// name is in the collection; a question copied from the dev sets or an id that is not there
/// would make its figures meaningless.
#[test]
fn the_held_out_questions_stay_apart_from_the_dev_questions() {
    let held = eval::load_queries(&fixture("heldout_queries.jsonl")).unwrap();
    assert_eq!(held.len(), 105);
    let mut dev = eval::load_queries(&fixture("dev_queries.jsonl")).unwrap();
    dev.extend(eval::load_queries(&fixture("dev_queries_v2.jsonl")).unwrap());
    let dev_ids: std::collections::HashSet<&str> = dev
        .iter()
        .flat_map(|q| q.relevant_ids.iter().map(String::as_str))
        .collect();
    let collection = demo_ids();
    let mut kinds: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for q in &held {
        *kinds.entry(q.kind.as_str()).or_default() += 1;
        assert!(
            !dev.iter().any(|d| d.query == q.query),
            "{}: a dev question",
            q.query
        );
        for id in &q.relevant_ids {
            assert!(
                collection.contains(id),
                "{}: {id} is not in the collection",
                q.query
            );
            assert!(
                !dev_ids.contains(id.as_str()),
                "{}: {id} is a dev record",
                q.query
            );
        }
        answers_unless_no_answer(q);
    }
    let want = [
        ("zh-simplified", 20),
        ("zh-traditional", 15),
        ("en-fact", 15),
        ("en-paraphrase", 20),
        ("cross-lingual", 15),
        ("no-answer", 20),
    ];
    for (k, n) in want {
        assert_eq!(kinds.get(k), Some(&n), "{k}: {kinds:?}");
    }
}

/// The second held-out set (`heldout2_queries.jsonl`, 2026-11-30, written blind to the code and
/// never fitted on: the retrieval README, "Second held-out check") asks about records no other
/// set names and repeats none of their questions, so its figures are of questions and records
/// the search was never shaped by.
#[test]
fn the_second_held_out_questions_stay_apart_from_every_other_set() {
    let fresh = eval::load_queries(&fixture("heldout2_queries.jsonl")).unwrap();
    assert_eq!(fresh.len(), 90);
    let mut seen = Vec::new();
    for file in [
        "dev_queries.jsonl",
        "dev_queries_v2.jsonl",
        "heldout_queries.jsonl",
        "train_queries.jsonl",
        "train_keywords.jsonl",
    ] {
        seen.extend(eval::load_queries(&fixture(file)).unwrap());
    }
    let seen_ids: std::collections::HashSet<&str> = seen
        .iter()
        .flat_map(|q| q.relevant_ids.iter().map(String::as_str))
        .collect();
    let collection = demo_ids();
    let mut kinds: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for q in &fresh {
        *kinds.entry(q.kind.as_str()).or_default() += 1;
        assert!(
            !seen.iter().any(|d| d.query == q.query),
            "{}: asked in another set",
            q.query
        );
        for id in &q.relevant_ids {
            assert!(collection.contains(id), "{}: {id} is not here", q.query);
            assert!(
                !seen_ids.contains(id.as_str()),
                "{}: {id} is another set's record",
                q.query
            );
        }
        answers_unless_no_answer(q);
    }
    for k in [
        "zh-simplified",
        "zh-traditional",
        "en-fact",
        "en-paraphrase",
        "cross-lingual",
        "no-answer",
    ] {
        assert_eq!(kinds.get(k), Some(&15), "{k}: {kinds:?}");
    }
}

/// The training questions (`train_queries.jsonl`, for fitting a no-answer model;
/// `train_keywords.jsonl` and the short visitor questions of `train_short.jsonl`, for measuring:
/// the retrieval README, "Training questions" and "Short visitor questions") never
/// touch a held-out record or repeat a held-out or dev question, so a fit on them leaves the
/// held-out figures those of questions it has not seen; every id they name is in the
/// collection.
#[test]
fn the_training_questions_stay_apart_from_the_held_out_questions() {
    let held = eval::load_queries(&fixture("heldout_queries.jsonl")).unwrap();
    let mut seen = eval::load_queries(&fixture("dev_queries.jsonl")).unwrap();
    seen.extend(eval::load_queries(&fixture("dev_queries_v2.jsonl")).unwrap());
    seen.extend(held.iter().cloned());
    let held_ids: std::collections::HashSet<&str> = held
        .iter()
        .flat_map(|q| q.relevant_ids.iter().map(String::as_str))
        .collect();
    let ids = demo_ids();
    // The keyword queries are for measuring, not fitting: they may list a held-out record among
    // the many a keyword finds (a "kozuka" is a kozuka), but ask about nothing the held-out
    // no-answer questions ask about.
    for (file, n, negatives, fitted) in [
        ("train_queries.jsonl", 147, 32, true),
        ("train_keywords.jsonl", 65, 15, false),
        ("train_short.jsonl", 98, 28, false),
    ] {
        let qs = eval::load_queries(&fixture(file)).unwrap();
        assert_eq!(qs.len(), n, "{file}");
        assert_eq!(
            qs.iter().filter(|q| q.relevant_ids.is_empty()).count(),
            negatives,
            "{file}"
        );
        for q in &qs {
            if q.relevant_ids.is_empty() {
                let keys = subject_keys(&q.query);
                for h in held.iter().filter(|h| h.relevant_ids.is_empty()) {
                    let shared: Vec<&String> = subject_keys(&h.query)
                        .iter()
                        .filter(|k| keys.contains(k))
                        .map(|k| keys.iter().find(|x| *x == k).unwrap())
                        .collect();
                    assert!(
                        shared.is_empty(),
                        "{file}: {:?} names {shared:?} as the held-out {:?} does",
                        q.query,
                        h.query
                    );
                }
            }
            assert!(
                !seen.iter().any(|s| s.query == q.query),
                "{file}: {} is a dev or held-out question",
                q.query
            );
            answers_unless_no_answer(q);
            for id in &q.relevant_ids {
                assert!(ids.contains(id), "{file}: {id} is not in the collection");
                assert!(
                    !fitted || !held_ids.contains(id.as_str()),
                    "{file}: {}: {id} is a held-out record",
                    q.query
                );
            }
        }
    }
}

/// The ids of the demo collection's records.
fn demo_ids() -> std::collections::HashSet<String> {
    std::fs::read_to_string(fixture("exhibits.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A question file's line names the records that answer it, unless it is a no-answer one.
fn answers_unless_no_answer(q: &eval::EvalQuery) {
    assert_eq!(
        q.relevant_ids.is_empty(),
        q.kind == "no-answer",
        "{}",
        q.query
    );
}

/// What a no-answer question is about, roughly: its capitalised words after the first (names
/// and titles: "Millet", "Rosetta"), and in Chinese (Simplified) every run of three characters
/// that holds none of the question frames' characters (毛公鼎, 清明上, 富春山).
fn subject_keys(q: &str) -> Vec<String> {
    use museum_agent::retrieval::text::to_simplified;
    let mut keys: Vec<String> = q
        .split(|c: char| !c.is_alphanumeric() && c != '-')
        .filter(|w| !w.is_empty())
        .skip(1)
        .filter(|w| w.chars().count() >= 4 && w.chars().next().is_some_and(char::is_uppercase))
        .map(|w| w.trim_end_matches("'s").to_lowercase())
        .collect();
    const FRAME: &str =
        "有没沒你们們这這里裡在吗嗎请請问問哪个個展厅廳的看到能是不收藏原本件吧呢了";
    let zh: Vec<char> = to_simplified(q)
        .chars()
        .map(|c| if FRAME.contains(c) { ' ' } else { c })
        .collect();
    for w in zh.windows(3) {
        if w.iter().all(|c| ('\u{4e00}'..='\u{9fff}').contains(c)) {
            keys.push(w.iter().collect());
        }
    }
    keys
}

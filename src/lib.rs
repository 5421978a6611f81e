//! museum-agent: a voice-agent streaming server for museums.
//!
//! Clients (web kiosks, mobile and TV apps) connect to one WebSocket, `/ws/agent/stream`, speak
//! the museum agent client protocol (a specification in Chinese, not in this repository;
//! `docs/protocol.md` holds every decision taken where it is open), and receive streamed text,
//! speech and function calls. With `[hub] enabled` the same server is also an agent hub (its
//! wire contract is the [`hub`] module's documentation, `src/hub/README.md`): environments,
//! agents and humans exchange Star Protocol messages at `/env/{env}`, `/env/{env}/agent/{id}`
//! and `/human/{id}`.
//!
//! # Code map
//! ```text
//! bin/museum-agent/  the server's binary, not in this library: main.rs the CLI, tracing,
//!                serve and signals; users.rs key and account admin; collection.rs ingest and
//!                search; eval.rs retrieval quality and --fit
//! bin/museum-agent-load/  the load tool, not in this library (it uses only the public API):
//!                scenarios, protocol client, timing-controlled fake upstream, and compare.rs:
//!                the same scenario against a second server, with the ratios
//! lib.rs         this map; run(listener, app, shutdown)
//! config.rs      typed config: defaults < config.toml < MUSEUM_AGENT__SECTION__KEY; unknown keys refused
//! app.rs         AppState shared by all connections: config, auth, pipeline deps, counters, shutdown tokens
//! auth.rs        API key / password hashing, REGISTER authentication, lockout per address and account
//! protocol/      wire types of every message both ways, decode with field-naming errors, encode. Pure
//! session/       per-connection task; its states are types (Unregistered → Session). mod.rs: the
//!                event loop; register.rs: REGISTER, auth, admission; requests.rs: REQUEST,
//!                attributes, spawning the pipeline; voice.rs: uploads and live STT; control.rs:
//!                INTERRUPT, SESSION_QUERY, SHUTDOWN, heartbeats, drain; resume.rs: a session
//!                parked for the resume window after its socket drops, and taken over by a
//!                resuming socket; text.rs: visitor strings; timers.rs, upload.rs: pure.
//!                Imports pipeline and request
//! request/       what a session hands a request task: the in-flight table (a child
//!                CancellationToken each; who ends a request), the bounded outbox (it outlives a
//!                socket), the replay buffer of unacknowledged reply frames (replay.rs, pure),
//!                attributes.
//!                Below session and pipeline; imports neither
//! cluster/       the visitor server as one node of several ([cluster] nats_url): session
//!                snapshots in a NATS KV bucket, release requests, the running reply forwarded
//!                in order to the resuming node (and its INTERRUPT back), revocations and ingest
//!                notices. Knows no session or AppState: the node's own side is `cluster::Local`,
//!                implemented by session/resume.rs
//! pipeline/      one request (a Job and its Input, the live STT and transcript time passed in
//!                them): input → slash command, a visitor-services fact said word for word, the
//!                offline answerer's small talk (small_talk.rs), or prompt (+ retrieval, a
//!                follow-up searched with its anchor question and a pick from a list pinned to
//!                its title: follow_up.rs, history; a kind's listing for a browse question,
//!                taken further when the visitor asks for more)
//!                → tool loop (server tools, observations) → RESPONSE frames via
//!                ReplyStream. Imports request, never session
//! retrieval/     the collection: Exhibit and the Retriever trait; text analysis (jieba, OpenCC
//!                folding, the makers' user dictionary), ingest, embedded BM25 ranking
//!                (embedded.rs; its reorders, no-answer signals and browse listing in
//!                embedded/) with bridges across the two languages (pinyin, CC-CEDICT) and to
//!                English synonyms (WordNet), the semantic path (semantic.rs: embedding in the
//!                background, fusion; vectors from a server or in process, local_e5.rs), the
//!                no-answer model (abstain.rs), visitor-service facts, kinds of object for
//!                browse questions (kinds.rs: department, medium and title heads; other words
//!                narrow a kind; a list of kinds is their union; departments in Chinese; the
//!                period field's origin for "Anything from Japan?") and
//!                the collection's
//!                overview, the remote SRS client, eval; reaches SQL only through the store's
//!                CollectionStore and VectorStore
//! providers/llm/ one trait (stream of Segments): openai, gemini (sharing sse.rs), offline (default:
//!                offline/ answers from the records; asks.rs what a question asks for, browse.rs
//!                browse questions and lists)
//! providers/stt/ one trait (audio channel in, full text out): OpenAI-compatible, FunASR WebSocket
//! providers/tts/ one trait (text in, stream of 16 kHz PCM out): OpenAI-compatible
//! audio/         WAV, resampling, voice chunking, the speakable-piece splitter, what a voice
//!                that reads no Chinese says instead (speakable.rs). Pure
//! transport/     server.rs: accept loop (TLS, header deadline, per-address caps); ws.rs: the
//!                checks and upgrade of every WebSocket (origin, draining, connection cap), the
//!                session's reader adapter, the one writer task per socket (generic over a frame
//!                source: session outbox or hub mailbox); hub.rs: the hub's three endpoints (path,
//!                query, API key before the upgrade); http.rs: health, readiness, metrics
//! hub/           the agent hub (seeds 000/001/002): Star envelope + ClawOS fields (pure), tier
//!                policy (pure; its table parser is config/tiers.rs), agent society (pure),
//!                per-connection mailbox (priority lanes, seq at write, acks), hub services, one
//!                connection over any inbound stream and its outgoing frames (no axum, no
//!                transport, no AppState), the Rust client, and the NATS JetStream backend that
//!                spreads one hub over several processes
//! store/         the only rusqlite and PostgreSQL user: accounts, API keys, lockouts and
//!                revocations behind UserStore (users.rs: SQLite; postgres.rs: PostgreSQL with
//!                [database] url, shared by several nodes), the collection (CollectionStore:
//!                plain rows, no retrieval types; a question reads on a pooled read connection
//!                of its own, CollectionStore::reading), lexical.rs: the collection's inverted
//!                index on tantivy (a directory beside the file), scored as SQLite FTS5's bm25()
//!                scored it, kept in step with the rows by collection.rs, document vectors (vectors.rs), hub streams,
//!                inboxes and society (SQLite only); migrations/*.sql and migrations/postgres/*.sql
//! metrics.rs     the Prometheus registry rendered at /metrics
//! util.rs        time, random ids, process CPU and RSS readings, open-file limit, HTTP client builder,
//!                `ShortStr` (short hash-map keys kept in place)
//! ```
//!
//! # Architecture invariants
//! - `protocol`, `audio`, `session::timers`, `session::upload`, `request::attributes`,
//!   `pipeline::history`, `hub::envelope`, `hub::policy` and `hub::society` do no I/O.
//! - The hub never routes by payload (it reads one only for hub services and to render
//!   `formatted` for LLM agents), and the sender of a routed message is always the
//!   connection's own identity.
//! - `session` never imports axum or rusqlite; it reads any `Stream<Item = Inbound>` and writes
//!   to an [`request::outbox::Outbox`], so it runs over channels in tests.
//! - `cluster` names neither `session`, `app` nor `transport` (checked by a test that reads
//!   the sources); what the node does for the others comes in as `cluster::Local`.
//! - `request` imports neither `session` nor `pipeline`, and `pipeline` never mentions
//!   `session` (both checked by tests that read the sources); per-request data travels in the
//!   job, never through process-wide maps.
//! - Providers never see protocol frames or sessions.
//! - Only `store` imports rusqlite (its calls run on the blocking pool) or the PostgreSQL client
//!   (async, under a timeout). `store` imports no module
//!   above it (its rows are plain types); retrieval reaches it through `CollectionStore`.
//! - One writer task owns each socket's sink; everything else queues frames through the
//!   bounded outbox. A frame of an interrupted request is dropped by the writer, never written.
//! - Whoever removes a request from `InFlight` first owns its final frame, so a request ends
//!   exactly once: normal `-1`, ERROR, or the interrupted frame.

pub mod app;
pub mod audio;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod hub;
pub mod metrics;
pub mod pipeline;
pub mod protocol;
pub mod providers;
pub mod request;
pub mod retrieval;
pub mod session;
pub mod store;
pub mod transport;
pub mod util;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

pub use app::AppState;
pub use config::Config;

/// Serves until `shutdown` resolves, then drains: every session gets SHUTDOWN, in-flight
/// requests get `server.shutdown_grace_seconds`, then everything still open is stopped.
pub async fn run(
    listener: TcpListener,
    app: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = transport::router(app.clone());
    let tls = match (&app.config.server.tls_cert, &app.config.server.tls_key) {
        (c, k) if !c.as_os_str().is_empty() => {
            Some(transport::server::tls_acceptor(c, k).map_err(std::io::Error::other)?)
        }
        _ => None,
    };
    tokio::spawn(app::revocation_watch(app.clone()));
    if let Some(hub) = &app.hub {
        hub.start(app.hard_stop.clone());
    }
    if let Some(cluster) = &app.cluster {
        cluster.start(
            Arc::new(session::resume::ClusterNode(app.clone())),
            app.hard_stop.clone(),
        );
    }
    let stop_accepting = tokio_util::sync::CancellationToken::new();
    let accept = tokio::spawn(transport::server::accept_loop(
        listener,
        router,
        app.clone(),
        tls,
        stop_accepting.clone(),
    ));
    shutdown.await;
    tracing::info!("shutdown requested: draining sessions");
    app.draining.cancel();
    stop_accepting.cancel();
    let _ = accept.await;
    // axum does not wait for upgraded sockets: the tracker does.
    app.tracker.close();
    let grace = config::secs(app.config.server.shutdown_grace_seconds) + Duration::from_secs(1);
    if tokio::time::timeout(grace, app.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = app.tracker.len(),
            "grace period over: stopping remaining sessions"
        );
    }
    app.hard_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(3), app.tracker.wait()).await;
    tracing::info!("server stopped");
    Ok(())
}

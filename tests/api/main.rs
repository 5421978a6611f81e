//! The one integration test binary: a real server on port 0, a temporary SQLite file, local fake
//! upstreams, real WebSocket clients.
//!
//! # Test catalogue
//!
//! Everything: `scripts/test.sh` (installs Debian's nats-server and Chromium if missing, then
//! `cargo test` and the browser e2e). One area: `cargo test --test api -- <module>::`
//! (e.g. `cargo test --test api -- voice::`); unit tests only: `cargo test --lib`, one module
//! `cargo test --lib protocol::`.
//!
//! **Unit tests** (`cargo test --lib`), beside the pure code:
//! - `protocol::` — every example of the spec round-trips; errors name the field; proptests:
//!   valid frames of every client type round-trip, near-valid frames with one field broken get
//!   the documented ERROR (code, field, `request_id`), unknown members are ignored.
//! - `hub::envelope::` — envelope decoding and every refusal, delivery bodies, ISO dates;
//!   proptests: near-valid envelopes with one member broken, valid ones round-trip into the
//!   delivery body. `hub::policy::`, `hub::society::` (the seed's ten properties as proptests),
//!   `hub::mailbox::` (priority lanes, seq, bound, expiry).
//! - `session::` (registration, requests, uploads and live STT, control, timers, each over
//!   channels with paused time), `request::` (attributes, in-flight table, outbox),
//!   `pipeline::` (history, prompt, slash commands, tools, speech), `audio::` (WAV, resampling,
//!   splitter), `config::`, `store::`, `providers::` (SSE parsing of OpenAI and Gemini, FunASR),
//!   `retrieval::` (normalisation and segmentation, FTS syntax, JSONL/CSV rows, RRF, eval
//!   metrics).
//!
//! **Integration tests** (`cargo test --test api`), one module per area:
//! - `register::` — both auth types, bad credentials (AUTH_FAILED then close 1008), lockout,
//!   revoked keys and disabled accounts, invalid UTF-8 (1007), frames over the hard limit.
//! - `resume::` — session resume on the same node: a socket cut mid-text and mid-voice and
//!   resumed (nothing lost, nothing twice, order kept), frames lost in flight replayed, the
//!   window, wrong tokens, revoked keys, a second socket taking over, replay-buffer overflow.
//! - `requests::`, `interrupt::`, `llm::` — streaming and numbering, concurrency and history,
//!   tool calls and `function_result`, attribute updates, upstream failures (500, 429, stalls,
//!   cut-off and malformed streams), interrupts and their race, Gemini's wire format.
//! - `session_timers::` — heartbeat, SESSION_WARN and expiry under paused tokio time (the
//!   session driven over channels). `shutdown::` — graceful drain (SHUTDOWN, close 1001),
//!   SERVER_BUSY during the grace period, client SHUTDOWN (close 1000), abrupt disconnects and
//!   clients that stop reading free their upstream.
//! - `bad_frames::` — the hostile corpus `fixtures/bad-frames/` (one JSON file per case: frames
//!   sent, ERRORs expected, open or the documented close code); every case runs and is printed
//!   with its verdict, failures are listed together. Run with `-- --nocapture` to see each.
//! - `voice::` — the spoken fixtures of `fixtures/audio/` as whole base64, chunks and binary
//!   frames against fake OpenAI and FunASR STT/TTS; interleaving, 16 kHz PCM, interrupts during
//!   recognition and synthesis, failing and stalling upstreams, abandoned uploads.
//! - `retrieval::`, `grounding::` — the embedded index, hybrid search with a fake embeddings
//!   server, the remote SRS client, `ingest`/`search`/`eval`, quality over the demo collection,
//!   passages and server tools in answers.
//! - `facts::` — answers that are not a plain search of the question: visitor-services facts
//!   (word for word with or without a model, a topic the file lacks, hot reload), small talk,
//!   follow-ups searched with the question they follow, the card of the exhibit a model names.
//! - `browse::` — browse questions over the whole demo collection: a kind the catalogue names
//!   (department, medium) answered with its total and a few exhibits, offline and for a model;
//!   other browse questions with the search's list; picks from either list.
//! - `hub::` — several real hub clients per scenario: action/outcome, broadcasts, order, forged
//!   senders, offline inbox, acks and resume, restarts, ttl, priorities, tiers, request/response,
//!   the agent society, replaced and dead connections, metrics, and the hostile corpus
//!   `fixtures/hub-bad-frames/` (each case reported by name, all failures listed).
//! - `hub_nats::` — the hub across processes through a real `nats-server` with JetStream
//!   (random loopback ports, temporary store). Needs `nats-server` on PATH
//!   (`apt-get install --no-install-recommends nats-server`); without it these tests fail,
//!   unless run with `MUSEUM_AGENT_SKIP_NATS=1`, which makes them print "skipped" and pass.
//! - `resume_cluster::` — session resume across two server instances on one real `nats-server`
//!   (`[cluster] nats_url`): a reply cut on one node and resumed on the other, a dead owner, a
//!   revocation through NATS, NATS stopped. Needs `nats-server` like `hub_nats::`.
//! - `store_engines::` — the user store on SQLite and on PostgreSQL (`[database] url`): one
//!   story on both (admin CLI, register, revoke, disable, lockout), two server instances sharing
//!   one PostgreSQL (keys, revocations at once, lockouts), the revocation poll, PostgreSQL
//!   restarted under live sessions. Each PostgreSQL test starts its own throwaway cluster
//!   (`support/postgres.rs`: initdb in a temp dir, random port, as `nobody` when root); without
//!   PostgreSQL binaries they fail, unless run with `MUSEUM_AGENT_SKIP_POSTGRES=1`.
//! - `hardening::`, `http::` — TLS, the Origin allow-list, header deadlines, per-address caps;
//!   health, readiness, metrics. `cli::` — the admin commands of the real binary.
//! - `exhibits::` — `/api/exhibits` (auth, ETag, bounds, hostile ids), REGISTER_ACK
//!   capabilities, voice refused without STT, `clear_history`, the offline answerer's
//!   `show_exhibit`, config paths, admin CLI polish.
//! - `local_models::`, `tts_command::` — keep-alives of local LLM servers, the STT `model_name`
//!   field, blank pieces, the `command` TTS provider with flite and espeak-ng (killed on
//!   INTERRUPT, failing programs).
//! - `interop::` — the providers against the real servers: llama.cpp, api-for-gemini,
//!   faster-whisper-server, local-tts-studio + piper, installed by `scripts/interop/setup.sh`
//!   (cached outside the tree); word error rate on real recordings, the whole voice path with its
//!   hop timings, servers killed or answering 4xx/5xx. Without the install they fail with the
//!   setup hint, unless run with `MUSEUM_AGENT_SKIP_INTEROP=1`. One runs at a time.
//! - `load::` — every load-tool scenario with tiny numbers, and the tool driving the real binary.
//! - `architecture::` — the invariants of `src/lib.rs` read from the sources (pipeline never
//!   names session, hub never imports axum/transport/app, only store imports rusqlite, …);
//!   a failure names file, line and path.
//!
//! **Browser end to end** (`npm ci --prefix tests/e2e && npm test --prefix tests/e2e`, after
//! `cargo build`): the kiosk page in Debian's headless Chromium against the built server and
//! Node fakes of the LLM, STT and TTS wire formats — registration, a streamed spoken answer,
//! push-to-talk from a fixture WAV, barge-in by typing and by voice, reconnection after
//! shutdown; `kiosk.test.mjs` (the first screen at kiosk and phone sizes in both languages with
//! geometry checks, cards from the real collection, voice controls by capability, the idle
//! reset; screenshots in a temporary directory it prints); `client.test.mjs` (the client module against a scripted socket) and
//! `hub.test.mjs` (the hub's JS client against the real server). Screenshots, logs and what the
//! fakes saw go to `artifacts/e2e/`.

mod support;

mod architecture;
mod bad_frames;
mod browse;
mod cli;
mod exhibits;
mod facts;
mod grounding;
mod hardening;
mod http;
mod hub;
mod hub_nats;
mod interop;
mod interrupt;
mod llm;
mod load;
mod local_models;
mod register;
mod requests;
mod resume;
mod resume_cluster;
mod retrieval;
mod session_timers;
mod shutdown;
mod store_engines;
mod tts_command;
mod voice;

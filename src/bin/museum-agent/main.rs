//! `museum-agent`: the server and its admin commands. This file: the command line, tracing,
//! `serve` (listen, start-up summary, signals); the admin commands live beside it:
//! `users.rs` (`key`, `account`), `collection.rs` (`ingest`, `search`), `eval.rs` (`eval`).

mod collection;
mod eval;
mod users;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use museum_agent::retrieval;
use museum_agent::store::Store;
use museum_agent::{AppState, Config};

#[derive(Parser)]
#[command(
    name = "museum-agent",
    version,
    about = "Voice-agent streaming server for museums"
)]
struct Cli {
    /// Config file (default: ./config.toml when it exists, else built-in defaults).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Log as JSON lines instead of text.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default when no command is given).
    Serve,
    /// Manage API keys (API_KEY auth).
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
    /// Manage accounts (ACCOUNT auth).
    Account {
        #[command(subcommand)]
        cmd: AccountCmd,
    },
    /// Load collection files (.jsonl or .csv) into the database. Re-ingesting updates changed
    /// rows and never duplicates; bad rows are reported with their line and skipped.
    Ingest {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print the reports as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show what the server would answer a question from, the same path as a visitor's:
    /// the facts file first (visitor services), then the collection with the no-answer
    /// decision; prints which it is, and ids, titles, scores and passages of the hits.
    Search {
        query: String,
        #[arg(long, default_value_t = 5)]
        k: usize,
        #[arg(long)]
        json: bool,
    },
    /// Retrieval quality per kind of question: recall@1, recall@5, MRR, abstention precision
    /// and recall, false abstentions; in-sample and cross-validated (stratified k folds). The
    /// embedded retriever runs on a fresh in-memory copy of --collection, so the figures do not
    /// depend on the database; with [srs] provider = "remote" the remote service is measured.
    Eval(eval::EvalArgs),
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Create a key and print it once; only its hash is stored.
    Create {
        #[arg(long)]
        name: String,
        /// Agent hub: connections with this key have this ClawOS tier (command, pm or worker)
        /// whatever they declare; without it a connection declares its own.
        #[arg(long, value_parser = ["command", "pm", "worker"])]
        hub_tier: Option<String>,
    },
    /// List keys (name, prefix, state; never the key).
    List,
    /// Revoke a key by name or id; new REGISTERs with it fail at once.
    Revoke { name_or_id: String },
}

#[derive(Subcommand)]
enum AccountCmd {
    /// Create an account; the password is read from the first line of standard input.
    Create {
        account: String,
    },
    List,
    /// Disable an account; new REGISTERs with it fail at once.
    Disable {
        account: String,
    },
    /// Enable a disabled account.
    Enable {
        account: String,
    },
}

const SECRET_BEARING_TARGETS: [&str; 5] =
    ["tungstenite", "tokio_tungstenite", "reqwest", "hyper", "h2"];

fn init_tracing(json: bool) {
    let wanted = std::env::var("RUST_LOG").unwrap_or_default();
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // These libraries log whole frames and messages at trace level, and frames carry API keys
    // and passwords (REGISTER). When RUST_LOG asks for trace anywhere, they are capped at debug,
    // so secrets never reach a log. Only then: a directive would otherwise raise their level,
    // and the filter's level hint is what lets their per-frame `log` calls cost nothing.
    if wanted.to_ascii_lowercase().contains("trace") {
        for target in SECRET_BEARING_TARGETS {
            if let Ok(d) = format!("{target}=debug").parse() {
                filter = filter.add_directive(d);
            }
        }
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    let config = Config::load(cli.config.as_deref())?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config),
        Command::Key { cmd } => runtime()?.block_on(users::key_command(config, cmd)),
        Command::Account { cmd } => runtime()?.block_on(users::account_command(config, cmd)),
        Command::Ingest { paths, json } => {
            runtime()?.block_on(collection::ingest(config, paths, json))
        }
        Command::Search { query, k, json } => {
            runtime()?.block_on(collection::search(config, query, k, json))
        }
        Command::Eval(args) => runtime()?.block_on(eval::eval(config, args)),
    }
}

/// What the database is, for messages (never the URL, which may hold a password).
fn database_label(config: &Config) -> String {
    if config.database.url.trim().is_empty() {
        format!("opening database {}", config.database.path.display())
    } else {
        "connecting to PostgreSQL ([database] url)".to_string()
    }
}

/// The listen backlog of the visitor port (the kernel caps it at `net.core.somaxconn`).
/// `TcpListener::bind` listens with 128 (mio's and the standard library's value): kiosks and
/// phones that reconnect together (a Wi-Fi access point coming back, a resume burst) overflowed
/// it while the accept loop waited for a CPU, and every connection past it lost its SYN and
/// retried a second later (the resume load test: TCP connect p99 1.06 s, `ListenOverflows`).
const LISTEN_BACKLOG: u32 = 4096;

/// Binds `bind` (host:port) with [`LISTEN_BACKLOG`], trying each address it resolves to.
async fn listen(bind: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(bind).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr) {
            Ok(()) => return socket.listen(LISTEN_BACKLOG),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to bind")
    }))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn serve(config: Config) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        config.check_paths()?;
        let store = Store::open_config(&config.database)
            .await
            .with_context(|| database_label(&config))?;
        let users = store.users();
        let keys = users.list_api_keys().await?.iter().filter(|k| !k.revoked).count();
        let accounts = users.list_accounts().await?.iter().filter(|a| !a.disabled).count();
        if keys + accounts == 0 {
            tracing::warn!("no API keys or accounts yet: create one with `museum-agent key create --name kiosk`");
        }
        let llm = museum_agent::app::build_llm(&config)?;
        if llm.is_none() {
            tracing::warn!("no LLM configured ([llm] provider = \"none\"): text requests will get an ERROR saying so");
        }
        let retriever = retrieval::build_retriever(&config, &store).await?;
        if retriever.is_none() {
            tracing::warn!("no retrieval ([srs] provider = \"none\"): answers are not grounded in the collection");
        }
        let collection = match &retriever {
            None => "off".to_string(),
            Some(r) if r.name() == "remote" => format!("remote ({})", config.srs.remote_url),
            Some(_) => format!("{} exhibits", store.collection().exhibit_count().unwrap_or(0)),
        };
        let listener = listen(&config.server.bind)
            .await
            .with_context(|| format!("binding {}", config.server.bind))?;
        let addr = listener.local_addr()?;
        let app = AppState::with_retriever(config, store, llm, retriever);
        startup_summary(&app, addr, &collection);
        museum_agent::run(listener, app, shutdown_signal()).await?;
        Ok(())
    })
}

/// One short block at start: what serves, with what, and where the kiosk is.
fn startup_summary(app: &AppState, addr: std::net::SocketAddr, collection: &str) {
    let c = &app.config;
    let tls = !c.server.tls_cert.as_os_str().is_empty();
    let llm = match &app.deps.llm {
        None => "none".to_string(),
        Some(l) if l.name() == "offline" => "offline (answers from the collection)".to_string(),
        Some(l) => format!("{} ({})", l.name(), c.llm.model()),
    };
    let provider = |p: Option<&'static str>| p.unwrap_or("none");
    let hub = match (&app.hub, c.hub.backend) {
        (None, _) => "off",
        (Some(_), museum_agent::config::HubBackend::Embedded) => "on (embedded)",
        (Some(_), museum_agent::config::HubBackend::Nats) => "on (nats)",
    };
    let host = if addr.ip().is_unspecified() {
        std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    let scheme = if tls { "https" } else { "http" };
    let semantic = match app.deps.retriever.as_ref().and_then(|r| r.semantic()) {
        None => "off".to_string(),
        Some(s) => {
            let st = s.status();
            format!(
                "{:?} ({} of {} record texts embedded, {})",
                st.state, st.embedded, st.total, st.model
            )
            .to_lowercase()
        }
    };
    tracing::info!(
        bind = %addr,
        tls,
        llm = %llm,
        stt = provider(app.deps.stt.as_ref().map(|s| s.name())),
        tts = provider(app.deps.tts.as_ref().map(|t| t.name())),
        collection,
        semantic,
        hub,
        static_dir = %c.server.static_dir.display(),
        database = %c.database.path.display(),
        users = app.auth.users().engine(),
        "museum-agent {} listening", env!("CARGO_PKG_VERSION")
    );
    tracing::info!(
        "kiosk: {scheme}://{host}/?key=<API key>&lang=zh   (WebSocket {}; a key: museum-agent key create --name kiosk)",
        museum_agent::transport::WS_PATH
    );
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

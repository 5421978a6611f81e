//! `museum-agent`: the server and its admin commands.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use museum_agent::auth::{generate_api_key, hash_password};
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
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Create a key and print it once; only its hash is stored.
    Create {
        #[arg(long)]
        name: String,
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
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // These libraries log whole frames and messages at trace level, and frames carry API keys
    // and passwords (REGISTER): cap them whatever RUST_LOG says, so secrets never reach a log.
    for target in SECRET_BEARING_TARGETS {
        if let Ok(d) = format!("{target}=debug").parse() {
            filter = filter.add_directive(d);
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

fn fmt_ms(ms: Option<i64>) -> String {
    ms.map(|m| m.to_string()).unwrap_or_else(|| "-".into())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    let config = Config::load(cli.config.as_deref())?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config),
        Command::Key { cmd } => {
            let store = Store::open(&config.database.path)?;
            match cmd {
                KeyCmd::Create { name } => {
                    let k = generate_api_key();
                    store.insert_api_key(&name, &k.prefix, &k.hash)?;
                    eprintln!(
                        "API key {name:?} created. It is shown only this once; store it now:"
                    );
                    println!("{}", k.key);
                }
                KeyCmd::List => {
                    println!(
                        "{:<6} {:<24} {:<12} {:<8} {:<15} last_used_ms",
                        "id", "name", "prefix", "state", "created_ms"
                    );
                    for k in store.list_api_keys()? {
                        let state = if k.revoked { "revoked" } else { "active" };
                        println!(
                            "{:<6} {:<24} {:<12} {:<8} {:<15} {}",
                            k.id,
                            k.name,
                            k.prefix,
                            state,
                            k.created_at,
                            fmt_ms(k.last_used_at)
                        );
                    }
                }
                KeyCmd::Revoke { name_or_id } => {
                    let k = store.revoke_api_key(&name_or_id)?;
                    println!("revoked API key {} ({})", k.name, k.prefix);
                }
            }
            Ok(())
        }
        Command::Account { cmd } => {
            let store = Store::open(&config.database.path)?;
            match cmd {
                AccountCmd::Create { account } => {
                    eprintln!("password for {account:?} (one line on standard input):");
                    let mut line = String::new();
                    std::io::stdin().lock().read_line(&mut line)?;
                    let password = line.trim_end_matches(['\r', '\n']);
                    anyhow::ensure!(
                        password.len() >= 8,
                        "the password must be at least 8 characters"
                    );
                    store.insert_account(&account, &hash_password(password))?;
                    println!("account {account} created");
                }
                AccountCmd::List => {
                    println!(
                        "{:<6} {:<24} {:<9} {:<15} last_login_ms",
                        "id", "account", "state", "created_ms"
                    );
                    for a in store.list_accounts()? {
                        let state = if a.disabled { "disabled" } else { "active" };
                        println!(
                            "{:<6} {:<24} {:<9} {:<15} {}",
                            a.id,
                            a.account,
                            state,
                            a.created_at,
                            fmt_ms(a.last_login_at)
                        );
                    }
                }
                AccountCmd::Disable { account } => {
                    store.set_account_disabled(&account, true)?;
                    println!("account {account} disabled");
                }
                AccountCmd::Enable { account } => {
                    store.set_account_disabled(&account, false)?;
                    println!("account {account} enabled");
                }
            }
            Ok(())
        }
    }
}

fn serve(config: Config) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        tracing::info!(config = ?config, "starting");
        let store = Store::open(&config.database.path)
            .with_context(|| format!("opening database {}", config.database.path.display()))?;
        let keys = store.list_api_keys()?.iter().filter(|k| !k.revoked).count();
        let accounts = store.list_accounts()?.iter().filter(|a| !a.disabled).count();
        if keys + accounts == 0 {
            tracing::warn!("no API keys or accounts yet: create one with `museum-agent key create --name kiosk`");
        }
        let llm = museum_agent::app::build_llm(&config)?;
        if llm.is_none() {
            tracing::warn!("no LLM configured ([llm] provider = \"none\"): text requests will get an ERROR saying so");
        }
        let listener = tokio::net::TcpListener::bind(&config.server.bind)
            .await
            .with_context(|| format!("binding {}", config.server.bind))?;
        tracing::info!(addr = %listener.local_addr()?, path = museum_agent::transport::WS_PATH, "listening");
        let app = AppState::new(config, store, llm);
        museum_agent::run(listener, app, shutdown_signal()).await?;
        Ok(())
    })
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

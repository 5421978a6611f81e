//! `museum-agent`: the server and its admin commands.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use museum_agent::auth::{generate_api_key, hash_password};
use museum_agent::retrieval;
use museum_agent::store::{Store, UserStore};
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
    Eval(EvalArgs),
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

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC` ("-" for none).
fn fmt_ms(ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = museum_agent::util::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The line on which a quoted CSV field opens and is never closed (the csv reader would take
/// the rest of the file as that one field, silently swallowing the rows after it).
fn csv_unclosed_quote(text: &str) -> Option<usize> {
    let (mut line, mut open_at) = (1, None);
    let mut at_field_start = true;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (open_at, c) {
            (None, '"') if at_field_start => open_at = Some(line),
            (Some(_), '"') if chars.peek() == Some(&'"') => {
                chars.next();
            }
            (Some(_), '"') => open_at = None,
            _ => {}
        }
        if c == '\n' {
            line += 1;
        }
        at_field_start = open_at.is_none() && matches!(c, ',' | '\n' | '\r');
    }
    open_at
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    let config = Config::load(cli.config.as_deref())?;
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(config),
        Command::Key { cmd } => runtime()?.block_on(key_command(config, cmd)),
        Command::Account { cmd } => runtime()?.block_on(account_command(config, cmd)),
        Command::Ingest { paths, json } => runtime()?.block_on(ingest(config, paths, json)),
        Command::Search { query, k, json } => runtime()?.block_on(search(config, query, k, json)),
        Command::Eval(args) => runtime()?.block_on(eval(config, args)),
    }
}

/// Opens the user store `[database]` selects (SQLite file, or PostgreSQL with `url`).
async fn open_users(config: &Config) -> anyhow::Result<Arc<dyn UserStore>> {
    let store = Store::open_config(&config.database)
        .await
        .with_context(|| database_label(config))?;
    Ok(store.users())
}

/// What the database is, for messages (never the URL, which may hold a password).
fn database_label(config: &Config) -> String {
    if config.database.url.trim().is_empty() {
        format!("opening database {}", config.database.path.display())
    } else {
        "connecting to PostgreSQL ([database] url)".to_string()
    }
}

async fn key_command(config: Config, cmd: KeyCmd) -> anyhow::Result<()> {
    let users = open_users(&config).await?;
    match cmd {
        KeyCmd::Create { name, hub_tier } => {
            let k = generate_api_key();
            users
                .insert_api_key(&name, &k.prefix, &k.hash, hub_tier.as_deref())
                .await?;
            eprintln!("API key {name:?} created. It is shown only this once; store it now:");
            println!("{}", k.key);
        }
        KeyCmd::List => {
            println!(
                "{:<6} {:<24} {:<12} {:<8} {:<23} last_used",
                "id", "name", "prefix", "state", "created"
            );
            for k in users.list_api_keys().await? {
                let state = if k.revoked { "revoked" } else { "active" };
                println!(
                    "{:<6} {:<24} {:<12} {:<8} {:<23} {}",
                    k.id,
                    k.name,
                    k.prefix,
                    state,
                    fmt_ms(Some(k.created_at)),
                    fmt_ms(k.last_used_at)
                );
            }
        }
        KeyCmd::Revoke { name_or_id } => {
            let already =
                users.list_api_keys().await?.into_iter().find(|k| {
                    k.revoked && (k.name == name_or_id || k.id.to_string() == name_or_id)
                });
            match already {
                Some(k) => println!(
                    "API key {} ({}) was already revoked; nothing changed",
                    k.name, k.prefix
                ),
                None => {
                    let k = users.revoke_api_key(&name_or_id).await?;
                    println!("revoked API key {} ({})", k.name, k.prefix);
                }
            }
        }
    }
    Ok(())
}

async fn account_command(config: Config, cmd: AccountCmd) -> anyhow::Result<()> {
    let users = open_users(&config).await?;
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
            users
                .insert_account(&account, &hash_password(password))
                .await?;
            println!("account {account} created");
        }
        AccountCmd::List => {
            println!(
                "{:<6} {:<24} {:<9} {:<23} last_login",
                "id", "account", "state", "created"
            );
            for a in users.list_accounts().await? {
                let state = if a.disabled { "disabled" } else { "active" };
                println!(
                    "{:<6} {:<24} {:<9} {:<23} {}",
                    a.id,
                    a.account,
                    state,
                    fmt_ms(Some(a.created_at)),
                    fmt_ms(a.last_login_at)
                );
            }
        }
        AccountCmd::Disable { account } => {
            users.set_account_disabled(&account, true).await?;
            println!("account {account} disabled");
        }
        AccountCmd::Enable { account } => {
            users.set_account_disabled(&account, false).await?;
            println!("account {account} enabled");
        }
    }
    Ok(())
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

async fn ingest(config: Config, paths: Vec<PathBuf>, json: bool) -> anyhow::Result<()> {
    let store = Store::open(&config.database.path)
        .with_context(|| format!("opening database {}", config.database.path.display()))?;
    let retriever = retrieval::embedded_from_config(&config, &store).await?;
    let mut failed = Vec::new();
    let mut rejected = 0;
    for path in &paths {
        let is_csv = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        if is_csv
            && let Ok(text) = std::fs::read_to_string(path)
            && let Some(line) = csv_unclosed_quote(&text)
        {
            eprintln!(
                "error: {}: line {line}: a quoted field is never closed (the rows after it would be lost); nothing was ingested from this file",
                path.display()
            );
            failed.push(path.display().to_string());
            continue;
        }
        match retriever.ingest_file(path).await {
            Ok(r) => {
                rejected += r.rejected.len();
                if json {
                    println!("{}", serde_json::to_string(&r)?);
                    continue;
                }
                println!(
                    "{}: {} rows (inserted {}, updated {}, unchanged {}), {} rejected, {:.2} s",
                    r.source,
                    r.rows,
                    r.inserted,
                    r.updated,
                    r.unchanged,
                    r.rejected.len(),
                    r.seconds
                );
                for x in r.rejected.iter().take(50) {
                    println!("  line {}: {}", x.line, x.reason);
                }
                if r.rejected.len() > 50 {
                    println!("  ... and {} more rejected rows", r.rejected.len() - 50);
                }
                if let Some(n) = r.vectors_embedded {
                    println!("  embedding vectors computed: {n}");
                }
                if let Some(e) = &r.vectors_error {
                    println!("  embeddings failed (rows are stored and searchable): {e}");
                }
            }
            Err(e) => {
                eprintln!("error: {e}");
                failed.push(path.display().to_string());
            }
        }
    }
    anyhow::ensure!(failed.is_empty(), "could not ingest: {}", failed.join(", "));
    // Every serve node of the cluster loads the same files into its own collection.
    match museum_agent::cluster::announce_ingest(&config.cluster, &paths).await {
        Ok(true) => eprintln!(
            "told the cluster's nodes ({}) to reload {} file(s)",
            config.cluster.nats_prefix,
            paths.len()
        ),
        Ok(false) => {}
        Err(e) => eprintln!(
            "warning: the other nodes of the cluster were not told to reload ({e}); run `ingest` on each of them"
        ),
    }
    // Good rows are stored; the exit status still tells a script that some were not.
    anyhow::ensure!(
        rejected == 0,
        "{rejected} row(s) were rejected (listed above with their line and reason); the others were ingested"
    );
    Ok(())
}

/// What the server would answer a question from: the facts file, the collection, or nothing.
async fn search(config: Config, query: String, k: usize, json: bool) -> anyhow::Result<()> {
    use museum_agent::providers::llm::offline;
    let say = |answered_by: &str, text: String, extra: serde_json::Value| {
        if json {
            let mut v = serde_json::json!({"query": query, "answered_by": answered_by, "hits": []});
            if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
                o.extend(e);
            }
            println!("{v}");
        } else {
            println!("{text}");
        }
    };
    // Nothing to search: said at once, before any index is opened.
    if query.trim().is_empty() {
        say(
            "empty",
            "the query is empty: nothing to search".into(),
            serde_json::json!({}),
        );
        return Ok(());
    }
    // The pipeline's order: a visitor-service question is answered from the facts file and
    // never reaches the collection.
    if let Some(facts) = retrieval::facts::FactsStore::from_config(&config.srs)
        && let Some(f) = retrieval::facts::match_question(&query, &facts.current())
    {
        let answer = offline::fact_answer(f, &query);
        say(
            "fact",
            format!(
                "visitor-services fact ({}), from {}:\n  {}",
                f.topic,
                config.srs.facts_path.display(),
                answer
            ),
            serde_json::json!({"fact": {"topic": f.topic, "answer": answer}}),
        );
        return Ok(());
    }
    // Only symbols, emoji or question words: nothing the collection could match.
    let clipped = retrieval::text::clip(&query, config.srs.max_query_chars);
    if config.srs.provider != museum_agent::config::SrsProviderKind::Remote
        && retrieval::text::query_terms(&clipped).is_empty()
    {
        say(
            "empty",
            "the query has no searchable words (only punctuation, symbols or question words)"
                .into(),
            serde_json::json!({}),
        );
        return Ok(());
    }
    let store = Store::open(&config.database.path)
        .with_context(|| format!("opening database {}", config.database.path.display()))?;
    let mut embedded = None;
    let retriever: std::sync::Arc<dyn retrieval::Retriever> = match config.srs.provider {
        museum_agent::config::SrsProviderKind::None => {
            anyhow::bail!("retrieval is off ([srs] provider = \"none\")")
        }
        museum_agent::config::SrsProviderKind::Embedded => {
            let r = std::sync::Arc::new(retrieval::embedded_from_config(&config, &store).await?);
            retrieval::load_demo_if_needed(&config, &r).await;
            embedded = Some(r.clone());
            r
        }
        museum_agent::config::SrsProviderKind::Remote => {
            std::sync::Arc::new(retrieval::remote_from_config(&config.srs)?)
        }
    };
    if let Some(s) = retriever.semantic() {
        // A one-shot command cannot wait for a whole embedding pass: only for the probe.
        s.settle(museum_agent::config::secs(
            config.srs.embeddings_timeout_seconds,
        ))
        .await;
    }
    let hits = retriever.search(&query, k).await?;
    if hits.is_empty() {
        // The candidate lexical search would have named, and why it was refused.
        let refused = match &embedded {
            Some(r) => {
                let (q, opts) = (query.clone(), r.options().clone());
                let model = r.abstention();
                let (ids, f) = r
                    .collection()
                    .call(move |s| retrieval::embedded::rank_with_features(s, &q, 1, &opts))
                    .await?;
                ids.first().cloned().map(|id| {
                    let p = model
                        .as_ref()
                        .zip(f)
                        .map(|(m, f)| (m.probability(&f), m.threshold));
                    (id, p)
                })
            }
            None => None,
        };
        let mut text = String::from(
            "no answer: the collection holds no exhibit that answers this (the server says it does not know)",
        );
        if let Some((id, p)) = &refused {
            match p {
                Some((p, t)) => text.push_str(&format!(
                    "\n  best candidate {id} refused by the abstention model: p = {p:.3} < threshold {t:.3}"
                )),
                None => text.push_str(&format!(
                    "\n  best candidate {id} is under no_answer_threshold {}",
                    config.srs.no_answer_threshold
                )),
            }
        }
        let answer = offline::compose(&query, Some(&[]));
        text.push_str(&format!("\noffline answer: {answer}"));
        say(
            "no-answer",
            text,
            serde_json::json!({"retriever": retriever.name(), "offline_answer": answer,
                               "refused_candidate": refused.map(|(id, _)| id)}),
        );
        return Ok(());
    }
    let answer = offline::compose(&query, Some(&hits));
    if json {
        let hits: Vec<serde_json::Value> = hits
            .iter()
            .map(|h| {
                serde_json::json!({"id": h.exhibit.id, "title": h.exhibit.title,
                                   "score": h.score, "passages": h.passages})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"query": query, "answered_by": "collection",
                               "retriever": retriever.name(), "hits": hits,
                               "offline_answer": answer})
        );
        return Ok(());
    }
    println!(
        "from the collection ({} retriever, {} hit(s)):",
        retriever.name(),
        hits.len()
    );
    for (i, h) in hits.iter().enumerate() {
        println!(
            "{:>2}. {:.4}  {}  {}",
            i + 1,
            h.score,
            h.exhibit.id,
            h.exhibit.title
        );
        for p in &h.passages {
            println!(
                "      {}",
                p.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
    }
    println!("offline answer: {answer}");
    Ok(())
}

#[derive(clap::Args)]
struct EvalArgs {
    /// Query files (JSONL: query, language, relevant_ids, optional kind).
    #[arg(long = "queries", num_args = 1.., default_values = [
        "fixtures/collection/dev_queries.jsonl",
        "fixtures/collection/dev_queries_v2.jsonl",
    ])]
    queries: Vec<PathBuf>,
    /// Collection file to evaluate on (default: [srs] demo_path).
    #[arg(long)]
    collection: Option<PathBuf>,
    /// Cross-validation folds.
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// Fit the abstention model on these questions and store it with the index of
    /// [database] path (used by serve and search from then on).
    #[arg(long)]
    fit: bool,
    /// Also write the fitted abstention model to this JSON file.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// Also list every query that missed (cross-validated), with what came back.
    #[arg(long)]
    verbose: bool,
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_string(), |v| format!("{v:.3}"))
}

fn print_kinds(title: &str, rows: &[retrieval::eval::KindMetrics]) {
    println!("{title}");
    println!(
        "  {:<16} {:>4} {:>6} {:>6} {:>6} {:>9} {:>9} {:>10}",
        "kind", "n", "R@1", "R@5", "MRR", "abst.P", "abst.R", "false abst"
    );
    for m in rows {
        println!(
            "  {:<16} {:>4} {:>6} {:>6} {:>6} {:>9} {:>9} {:>4}/{:<5}",
            m.kind,
            m.queries,
            fmt_opt(m.recall_at_1),
            fmt_opt(m.recall_at_5),
            fmt_opt(m.mrr),
            fmt_opt(m.abstention_precision),
            fmt_opt(m.abstention_recall),
            m.false_abstentions,
            m.answerable
        );
    }
}

fn print_misses(outcomes: &[retrieval::eval::QueryOutcome]) {
    for o in outcomes {
        let ok = if o.query.relevant_ids.is_empty() {
            o.returned.is_empty()
        } else {
            o.first_relevant.is_some_and(|r| r <= 5)
        };
        if ok {
            continue;
        }
        println!(
            "MISS [{}] {:?} relevant {:?}",
            retrieval::eval::kind_of(&o.query),
            o.query.query,
            o.query.relevant_ids
        );
        for (id, score) in o.returned.iter().take(5) {
            println!("     {score:.4} {id}");
        }
        if let Some(e) = &o.error {
            println!("     error: {e}");
        }
    }
}

async fn eval(config: Config, a: EvalArgs) -> anyhow::Result<()> {
    use museum_agent::retrieval::eval;
    let mut qs = Vec::new();
    for path in &a.queries {
        qs.extend(eval::load_queries(path).map_err(anyhow::Error::msg)?);
    }
    let files: Vec<String> = a.queries.iter().map(|p| p.display().to_string()).collect();
    if config.srs.provider == museum_agent::config::SrsProviderKind::Remote {
        anyhow::ensure!(!a.fit, "--fit needs the embedded retriever");
        let r = retrieval::remote_from_config(&config.srs)?;
        let outcomes = eval::run(&r, &qs).await;
        let kinds = eval::by_kind(&outcomes);
        if a.json {
            println!(
                "{}",
                serde_json::json!({"queries": files, "retriever": "remote", "by_kind": kinds, "outcomes": outcomes})
            );
        } else {
            print_kinds("remote retriever, as returned", &kinds);
            if a.verbose {
                print_misses(&outcomes);
            }
        }
        return Ok(());
    }
    let path = a.collection.unwrap_or_else(|| config.srs.demo_path.clone());
    let store = Store::open_in_memory()?;
    let hybrid = !config.srs.embeddings_url.trim().is_empty();
    // With embeddings, record vectors are kept in (and reused from) [database] path, keyed by
    // text and model: a second eval embeds only the questions.
    let r = if hybrid {
        let db = Store::open(&config.database.path)
            .with_context(|| format!("opening database {}", config.database.path.display()))?;
        retrieval::embedded_with_vectors(&config, &store, db.vectors()).await?
    } else {
        retrieval::embedded_from_config(&config, &store).await?
    };
    let rep = r.ingest_file(&path).await.map_err(anyhow::Error::msg)?;
    eprintln!(
        "collection {}: {} exhibits ({} rejected rows) in {:.2} s",
        path.display(),
        rep.rows,
        rep.rejected.len(),
        rep.seconds
    );
    let dense = eval::dense_inputs(&r, &qs)
        .await
        .map_err(anyhow::Error::msg)?;
    // The museum's own fit, when one is stored in the configured database.
    // (Only an existing database: eval never creates one.)
    let key = if hybrid {
        retrieval::embedded::SEMANTIC_ABSTENTION_META_KEY
    } else {
        retrieval::embedded::ABSTENTION_META_KEY
    };
    let existing = config.database.path.exists();
    let current = match existing.then(|| Store::open(&config.database.path)) {
        Some(Ok(db)) => db
            .collection()
            .collection_meta(key)
            .ok()
            .flatten()
            .and_then(|j| retrieval::abstain::AbstentionModel::from_json(&j)),
        _ => None,
    }
    .unwrap_or_else(|| {
        if hybrid {
            retrieval::abstain::AbstentionModel::shipped_semantic()
        } else {
            retrieval::abstain::AbstentionModel::shipped()
        }
    });
    let opts = r.options().clone();
    let current_fusion = hybrid.then_some(eval::Fusion {
        dense_weight: opts.dense_weight,
        other_weight: opts.other_language_weight,
        k: opts.rrf_k,
    });
    let collection = r.collection().clone();
    let q2 = qs.clone();
    let ranked = collection
        .call(move |s| {
            let d = dense.as_ref().map(|(q, v)| (q.as_slice(), v.as_ref()));
            eval::rank_all(s, &q2, &opts, d)
        })
        .await?;
    let folds = a.folds.max(2);
    let (fusion, fitted) = eval::fit_all(
        &ranked,
        &format!(
            "{} questions of {}{}",
            qs.len(),
            files.join(", "),
            if hybrid {
                format!("; embeddings {}", config.srs.embeddings_model)
            } else {
                String::new()
            }
        ),
    );
    let current_out: Vec<_> = ranked
        .iter()
        .map(|x| eval::decide(&current, x, current_fusion))
        .collect();
    let in_sample: Vec<_> = ranked
        .iter()
        .map(|x| eval::decide(&fitted, x, fusion))
        .collect();
    let (cv, cv_fusions) = eval::cross_validate(&ranked, folds);
    let (k_current, k_in, k_cv) = (
        eval::by_kind(&current_out),
        eval::by_kind(&in_sample),
        eval::by_kind(&cv),
    );
    if let Some(out) = &a.out {
        std::fs::write(out, fitted.to_json() + "\n")
            .with_context(|| format!("writing {}", out.display()))?;
    }
    if a.fit {
        let db = Store::open(&config.database.path)
            .with_context(|| format!("opening database {}", config.database.path.display()))?;
        let target = retrieval::embedded_from_config(&config, &db).await?;
        target.store_abstention(fitted.clone()).await?;
        eprintln!(
            "abstention model fitted on {} questions stored in {}",
            qs.len(),
            config.database.path.display()
        );
    }
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "queries": files, "collection": path, "folds": folds,
                "current_model": k_current, "in_sample": k_in, "cross_validated": k_cv,
                "fitted": fitted, "fusion": fusion, "current_fusion": current_fusion,
                "cv_fusions": cv_fusions,
                "outcomes_cross_validated": cv, "ranked": ranked,
            })
        );
        return Ok(());
    }
    println!(
        "{} questions from {}; collection {}; {}",
        qs.len(),
        files.join(", "),
        path.display(),
        if hybrid {
            format!(
                "lexical + embeddings ({}); fusion in use {current_fusion:?}, chosen on all {fusion:?}, per CV fold {cv_fusions:?}",
                config.srs.embeddings_model
            )
        } else {
            "lexical retriever".to_string()
        }
    );
    print_kinds(
        &format!("current abstention model ({})", current.fitted_on),
        &k_current,
    );
    print_kinds("in-sample (abstention fitted on all questions)", &k_in);
    print_kinds(
        &format!("cross-validated ({folds} folds, stratified by kind)"),
        &k_cv,
    );
    println!(
        "recall and MRR are over answerable questions; abst.P/abst.R: abstention precision/recall; false abst: answerable questions refused"
    );
    if a.verbose {
        print_misses(&cv);
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_times() {
        assert_eq!(fmt_ms(None), "-");
        assert_eq!(fmt_ms(Some(0)), "1970-01-01 00:00:00 UTC");
        assert_eq!(fmt_ms(Some(1_795_402_149_000)), "2026-11-23 02:49:09 UTC");
        assert_eq!(fmt_ms(Some(951_782_400_000)), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn unclosed_csv_quotes_are_found_with_their_line() {
        assert_eq!(
            csv_unclosed_quote("id,title\n1,\"a, \"\"b\"\"\"\n2,c\n"),
            None
        );
        assert_eq!(csv_unclosed_quote("id,title\n1,\"multi\nline\"\n"), None);
        assert_eq!(
            csv_unclosed_quote("id,title\n1,a\n2,\"open\n3,x\n4,y\n"),
            Some(3)
        );
        // A quote inside an unquoted field is data, not an opening quote.
        assert_eq!(csv_unclosed_quote("id,title\n1,5\" tall\n"), None);
    }
}

//! How fast would ingest be with tantivy in place of FTS5? A probe of the plan in
//! src/retrieval/README.md, "Plan for the ingest target", not part of the server.
//!
//! It reads a collection file (e.g. the scale bench's `collection-500000.jsonl`), then runs the
//! ingest's shape: analysis threads (`WORKERS`, default 2: the content hash and our analysed
//! columns, `embedded::analyze`, as `ingest::store_rows` does) feeding one writer in file
//! order, which writes what `MODE` says:
//! - `all`: the `exhibits` row to SQLite (same columns, WAL, 10,000 rows a transaction) and a
//!   tantivy document (one `TEXT` field per FTS column, whitespace tokenizer over our tokens,
//!   term frequencies without positions, `pk` as a fast field; `TV_THREADS` indexing threads,
//!   default 1; the analysed text stored in tantivy only with `TV_STORED=1`);
//! - `tantivy` or `sqlite`: one of the two (`sqlite` skips the analysis);
//! - `none`: the analysis alone.
//!
//! Not measured here: document-frequency counting and the `exhibit_terms` table, the
//! query side, and the ranking change (the plan's other items).
//!
//! ```text
//! CARGO_TARGET_DIR=target cargo run --release --manifest-path benches/tantivy-probe/Cargo.toml -- FILE.jsonl [MODE]
//! ```
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use museum_agent::retrieval::{embedded::analyze, ingest};
use museum_agent::store::collection::FTS_COLUMNS;
use tantivy::schema::{
    FAST, INDEXED, IndexRecordOption, STORED, Schema, TextFieldIndexing, TextOptions,
};

/// This process's CPU seconds (user + system).
fn cpu_seconds() -> f64 {
    museum_agent::util::cpu_seconds(std::process::id()).unwrap_or(0.0)
}

fn env_or(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn disk_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| {
            d.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => disk_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: FILE.jsonl [all|tantivy|sqlite|none]"))?;
    let mode = args.next().unwrap_or_else(|| "all".into());
    let (to_sqlite, to_tantivy) = match mode.as_str() {
        "all" => (true, true),
        "tantivy" => (false, true),
        "sqlite" => (true, false),
        "none" => (false, false),
        m => anyhow::bail!("unknown mode {m}"),
    };
    let dir = std::env::temp_dir().join(format!("tantivy-probe-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("tantivy"))?;

    let (c, t) = (cpu_seconds(), Instant::now());
    let rows: Vec<_> = ingest::parse_file(std::path::Path::new(&path))
        .map_err(anyhow::Error::msg)?
        .rows
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let n = rows.len();
    let (parse_s, parse_cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
    println!("parsed {n} records in {parse_s:.1} s (CPU {parse_cpu:.1} s)");

    let mut sb = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("tokens")
        .set_index_option(IndexRecordOption::WithFreqs);
    let mut opts = TextOptions::default().set_indexing_options(indexing);
    if env_or("TV_STORED", 0) == 1 {
        opts = opts.set_stored();
    }
    let fields: Vec<_> = FTS_COLUMNS
        .iter()
        .map(|f| sb.add_text_field(f, opts.clone()))
        .collect();
    let pk_field = sb.add_u64_field("pk", INDEXED | FAST | STORED);
    let index = tantivy::Index::create_in_dir(dir.join("tantivy"), sb.build())?;
    index.tokenizers().register(
        "tokens",
        tantivy::tokenizer::TextAnalyzer::from(tantivy::tokenizer::WhitespaceTokenizer::default()),
    );
    let tv_threads = env_or("TV_THREADS", 1);
    let mut writer: tantivy::IndexWriter =
        index.writer_with_num_threads(tv_threads, 400_000_000)?;

    let mut db = rusqlite::Connection::open(dir.join("probe.db"))?;
    db.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE exhibits (pk INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
           maker TEXT NOT NULL, date TEXT NOT NULL, period TEXT NOT NULL, medium TEXT NOT NULL,
           dimensions TEXT NOT NULL, gallery TEXT NOT NULL, description TEXT NOT NULL,
           language TEXT NOT NULL, source TEXT NOT NULL, license TEXT NOT NULL, extra TEXT NOT NULL,
           content_hash TEXT NOT NULL, updated_at INTEGER NOT NULL);",
    )?;

    let (c, t) = (cpu_seconds(), Instant::now());
    let batches: Vec<Mutex<Vec<_>>> = rows.chunks(1_000).map(|b| Mutex::new(b.to_vec())).collect();
    drop(rows);
    let next = AtomicUsize::new(0);
    let workers = env_or("WORKERS", 2);
    let (tx, rx) = std::sync::mpsc::sync_channel(workers);
    std::thread::scope(|s| -> anyhow::Result<()> {
        for _ in 0..workers {
            let (tx, batches, next) = (tx.clone(), &batches, &next);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(b) = batches.get(i) else { break };
                    let b = std::mem::take(&mut *b.lock().unwrap_or_else(|p| p.into_inner()));
                    let out: Vec<_> = b
                        .into_iter()
                        .map(|e| {
                            let hash = ingest::content_hash(&e);
                            let cols = if to_tantivy || !to_sqlite {
                                analyze(&e)
                            } else {
                                Default::default()
                            };
                            (e, hash, cols)
                        })
                        .collect();
                    if tx.send((i, out)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // The writer, in file order as the ingest writes.
        let mut waiting = std::collections::BTreeMap::new();
        let (mut next_out, mut pk, mut in_tx) = (0, 0u64, 0);
        let mut txn = db.transaction()?;
        for (i, out) in rx {
            waiting.insert(i, out);
            while let Some(out) = waiting.remove(&next_out) {
                next_out += 1;
                for (e, hash, cols) in out {
                    pk += 1;
                    if to_sqlite {
                        txn.prepare_cached(
                            "INSERT INTO exhibits VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 0)",
                        )?
                        .execute(rusqlite::params![
                            pk as i64, e.id, e.title, e.maker, e.date, e.period, e.medium, e.dimensions,
                            e.gallery, e.description, e.language, e.source, e.license,
                            serde_json::Value::Object(e.extra).to_string(), hash
                        ])?;
                    }
                    if to_tantivy {
                        let mut doc = tantivy::TantivyDocument::default();
                        for (f, text) in fields.iter().zip(cols) {
                            doc.add_text(*f, text);
                        }
                        doc.add_u64(pk_field, pk);
                        writer.add_document(doc)?;
                    }
                    in_tx += 1;
                    if in_tx == 10_000 {
                        in_tx = 0;
                        txn.commit()?;
                        txn = db.transaction()?;
                    }
                }
            }
        }
        txn.commit()?;
        Ok(())
    })?;
    if to_tantivy {
        writer.commit()?;
        writer.wait_merging_threads()?;
    }
    let (secs, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
    println!(
        "{mode}: {n} records in {secs:.1} s = {:.0} records/s, CPU {cpu:.1} s = {:.0} µs a record \
         (workers {workers}, tantivy threads {tv_threads}); with the parse: {:.0} records/s, {:.0} µs a record",
        n as f64 / secs,
        cpu / n as f64 * 1e6,
        n as f64 / (secs + parse_s),
        (cpu + parse_cpu) / n as f64 * 1e6,
    );
    println!("on disk: {:.0} MiB", disk_bytes(&dir) as f64 / 1_048_576.0);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

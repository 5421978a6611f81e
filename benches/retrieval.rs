//! Retrieval benchmark (a plain bench binary): ingest throughput of the demo collection into a
//! fresh SQLite file, the start-up check when the demo is already loaded, and query latency
//! (p50/p99/max) over the whole collection with the dev questions.
//!
//! Run: `cargo bench --bench retrieval` (release profile). Options via environment:
//! `BENCH_ROUNDS` (query rounds over the 40 questions, default 50).

use std::path::Path;
use std::time::{Duration, Instant};

use museum_agent::Config;
use museum_agent::retrieval::embedded::{EmbeddedOptions, search_blocking};
use museum_agent::retrieval::{self, Retriever, eval};
use museum_agent::store::Store;

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn report(name: &str, mut t: Vec<Duration>) {
    t.sort();
    println!(
        "{name:<42} n={:<6} p50 {:>8}  p99 {:>8}  max {:>8}",
        t.len(),
        us(pct(&t, 0.5)),
        us(pct(&t, 0.99)),
        us(*t.last().unwrap())
    );
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let demo = root.join("fixtures/collection/exhibits.jsonl");
    let queries = eval::load_queries(&root.join("fixtures/collection/dev_queries.jsonl"))
        .map_err(anyhow::Error::msg)?;
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let bytes = std::fs::metadata(&demo)?.len() as f64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let config = Config::default();

    println!("== ingest: {} ({:.1} MB)", demo.display(), bytes / 1e6);
    let mut last = None;
    for run in 1..=3 {
        let dir = tempfile::tempdir()?;
        let store = Store::open(&dir.path().join("bench.db"))?;
        let (r, seconds, rows) = rt.block_on(async {
            let r = retrieval::embedded_from_config(&config, &store).await?;
            let t = Instant::now();
            let rep = r.ensure_demo(&demo).await.map_err(anyhow::Error::msg)?;
            let rows = rep.map_or(0, |x| x.rows);
            anyhow::Ok((r, t.elapsed().as_secs_f64(), rows))
        })?;
        println!(
            "run {run}: {rows} exhibits in {seconds:.2} s = {:.0} exhibits/s, {:.2} MB/s (parse, analyse, index, commit)",
            rows as f64 / seconds,
            bytes / 1e6 / seconds
        );
        last = Some((dir, store, r));
    }
    let (_dir, store, retriever) = last.unwrap();
    let t = Instant::now();
    let again = rt.block_on(retriever.ensure_demo(&demo));
    println!(
        "start-up with the demo already loaded (hash + check): {:.1} ms, reloaded: {}",
        t.elapsed().as_secs_f64() * 1e3,
        matches!(again, Ok(Some(_)))
    );
    let t = Instant::now();
    let r = rt.block_on(retriever.ingest_file(&demo));
    println!(
        "re-ingest of the unchanged file (all rows unchanged: {}): {:.2} s",
        r.as_ref().map(|x| x.unchanged).unwrap_or(0),
        t.elapsed().as_secs_f64()
    );

    let opts = EmbeddedOptions::from(&config.srs);
    let collection = store.collection();
    println!(
        "\n== query latency over {} exhibits, {} dev questions x {rounds} rounds, k = 5",
        collection.exhibit_count()?,
        queries.len()
    );
    for q in &queries {
        search_blocking(&collection, &q.query, 5, &opts, None)?;
    }
    let mut sync_t = Vec::with_capacity(rounds * queries.len());
    let (mut en, mut zh) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for q in &queries {
            let t = Instant::now();
            let hits = search_blocking(&collection, &q.query, 5, &opts, None)?;
            let d = t.elapsed();
            std::hint::black_box(hits);
            sync_t.push(d);
            if q.language == "zh" {
                zh.push(d)
            } else {
                en.push(d)
            }
        }
    }
    report("search (blocking call, all questions)", sync_t);
    report("  English questions", en);
    report("  Chinese questions", zh);
    let async_t = rt.block_on(async {
        let mut v = Vec::with_capacity(rounds * queries.len());
        for _ in 0..rounds {
            for q in &queries {
                let t = Instant::now();
                let hits = retriever.search(&q.query, 5).await?;
                v.push(t.elapsed());
                std::hint::black_box(hits);
            }
        }
        anyhow::Ok(v)
    })?;
    report("Retriever::search (async, blocking pool)", async_t);
    let long = "Tell me about the blue and white Chinese jar with a dragon ".repeat(40);
    let mut t_long = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        std::hint::black_box(search_blocking(&collection, &long, 5, &opts, None)?);
        t_long.push(t.elapsed());
    }
    report("a 2,400-character question (cut to 500)", t_long);
    Ok(())
}

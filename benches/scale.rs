//! Scale benchmark of the embedded collection: a museum-sized collection built from the demo
//! records, measured the way a museum meets it (a plain bench binary).
//!
//! Run: `cargo bench --bench scale` (release profile). For each size (default `2700,500000`):
//! 1. **Data**: size 2,700 is the real demo collection; a larger size is the demo collection
//!    followed by synthetic records recombined from it (below), written as one JSONL file.
//! 2. **Ingest**: a fresh SQLite file, the server's start path (`build_retriever`: open, prepare
//!    the index, load the file as the demo collection); ingest rate, index size on disk (the
//!    database and its WAL), peak RSS of the process.
//! 3. **Start-up with the collection unchanged**, in a fresh process (this binary run again,
//!    twice: the first start after the ingest may hash the file once more, the second is the
//!    one measured): open the database, load the dictionaries, check the index and the demo file, ready to
//!    search; then the query mix: the texts of the 200 dev questions (both dev files),
//!    `BENCH_ROUNDS` rounds (default 5), k = 5, through `search_blocking` and through
//!    `Retriever::search`, one at a time and from `BENCH_LANES` visitors at once (questions
//!    answered per second); p50/p99/max; RSS after the queries. CPU time (this process, every
//!    thread) and the load average are printed beside each wall-clock figure: the development
//!    machine is shared.
//!
//! Synthetic records (deterministic, seed `BENCH_SEED`, default 17): each keeps the language
//! share of the demo (1,700 English : 1,000 Chinese) and takes a template record of its
//! language; its title is the template's (30 %) or the first half of the template's title
//! joined to the second half of another's (words for English, characters for Chinese); maker,
//! date and medium come from other random records of the language (so empty makers stay as
//! common as in the demo); period, dimensions and gallery from the template; the description
//! is the template's first sentence followed by random sentences of the language until it is
//! as long as the template's. Terms thus keep the demo's distribution (a common word stays
//! common, a rare name stays rare but now recurs across records, as in a real collection with
//! series and workshops).
//!
//! Environment: `BENCH_SIZES` (comma-separated), `BENCH_ROUNDS`, `BENCH_SEED`, `BENCH_LANES`
//! (visitors asking at once in the concurrent rounds, default 4), `BENCH_ONLY`
//! (only the questions containing this text: to profile one), `BENCH_SLOWEST`, `BENCH_DIR`
//! (where the data and databases go; default a temporary directory, removed at the end; 500,000
//! records need about 4 GB).

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use museum_agent::Config;
use museum_agent::retrieval::embedded::{
    EmbeddedOptions, EmbeddedRetriever, rank_with_features, search_blocking,
};
use museum_agent::retrieval::{self, Exhibit, Retriever, eval};
use museum_agent::store::Store;

/// splitmix64: small, fast and the same on every platform and version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// The demo records of one language, with every sentence of their descriptions.
struct Pool<'a> {
    records: Vec<&'a Exhibit>,
    sentences: Vec<&'a str>,
}

fn sentences(text: &str, zh: bool) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let end = i + c.len_utf8();
        let boundary = if zh {
            matches!(c, '。' | '！' | '？' | '；')
        } else {
            c == '.' && text[end..].starts_with(' ')
        };
        if boundary {
            let s = text[start..end].trim();
            if !s.is_empty() {
                out.push(s);
            }
            start = end;
        }
    }
    let s = text[start..].trim();
    if !s.is_empty() {
        out.push(s);
    }
    out
}

fn pool(records: &[Exhibit], zh: bool) -> Pool<'_> {
    let records: Vec<&Exhibit> = records
        .iter()
        .filter(|e| (e.language == "zh") == zh)
        .collect();
    let sentences = records
        .iter()
        .flat_map(|e| sentences(&e.description, zh))
        .collect();
    Pool { records, sentences }
}

/// The first half of `a` joined to the second half of `b` (words, or characters for Chinese).
fn recombine(a: &str, b: &str, zh: bool) -> String {
    if zh {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut s: String = a[..a.len().div_ceil(2)].iter().collect();
        s.extend(&b[b.len() / 2..]);
        s
    } else {
        let a: Vec<&str> = a.split_whitespace().collect();
        let b: Vec<&str> = b.split_whitespace().collect();
        let mut w = a[..a.len().div_ceil(2)].to_vec();
        w.extend(&b[b.len() / 2..]);
        w.join(" ")
    }
}

fn synthetic(i: usize, rng: &mut Rng, pool: &Pool<'_>, zh: bool) -> Exhibit {
    let n = pool.records.len();
    let t = pool.records[rng.below(n)];
    let other = |rng: &mut Rng| pool.records[rng.below(n)];
    let title = if rng.chance(0.3) {
        t.title.clone()
    } else {
        recombine(&t.title, &other(rng).title, zh)
    };
    let target = t.description.chars().count();
    let mut description = sentences(&t.description, zh)
        .first()
        .map_or(String::new(), |s| s.to_string());
    while description.chars().count() < target && !pool.sentences.is_empty() {
        if !zh && !description.is_empty() {
            description.push(' ');
        }
        description.push_str(pool.sentences[rng.below(pool.sentences.len())]);
    }
    Exhibit {
        id: format!("synthetic-{i:07}"),
        title,
        maker: other(rng).maker.clone(),
        date: other(rng).date.clone(),
        period: t.period.clone(),
        medium: other(rng).medium.clone(),
        dimensions: t.dimensions.clone(),
        gallery: t.gallery.clone(),
        description,
        language: t.language.clone(),
        source: "scale benchmark (recombined demo records)".into(),
        license: t.license.clone(),
        extra: Default::default(),
    }
}

/// Writes the demo records and then synthetic ones up to `size` records.
fn write_collection(demo: &[Exhibit], size: usize, seed: u64, path: &Path) -> anyhow::Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    for e in demo.iter().take(size) {
        serde_json::to_writer(&mut out, e)?;
        out.write_all(b"\n")?;
    }
    let (en, zh) = (pool(demo, false), pool(demo, true));
    let zh_share = zh.records.len() as f64 / demo.len() as f64;
    let mut rng = Rng(seed);
    for i in demo.len()..size {
        let is_zh = rng.chance(zh_share);
        let e = synthetic(i, &mut rng, if is_zh { &zh } else { &en }, is_zh);
        serde_json::to_writer(&mut out, &e)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0; // no question of that kind (`BENCH_ONLY`)
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

fn summary(mut t: Vec<Duration>) -> serde_json::Value {
    t.sort();
    serde_json::json!({
        "n": t.len(),
        "p50_ms": pct(&t, 0.5),
        "p99_ms": pct(&t, 0.99),
        "max_ms": t.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    })
}

/// Peak resident set size of this process, MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

fn rss_mib() -> f64 {
    museum_agent::util::rss_kib(std::process::id()).map_or(0.0, |k| k as f64 / 1024.0)
}

/// CPU time (user + system, every thread) this process has used, seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage with a valid pointer to a local struct.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// CPU time of the calling thread, seconds (a blocking search runs on it alone).
fn thread_cpu_seconds() -> f64 {
    // SAFETY: clock_gettime with a valid pointer to a local struct.
    let t = unsafe {
        let mut t: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
        t
    };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// The machine's 1-minute load average (the machine is shared: wall clock alone misleads).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

fn disk_mib(db: &Path) -> f64 {
    ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len() as f64)
        .sum::<f64>()
        / (1024.0 * 1024.0)
}

fn config_for(data: &Path) -> Config {
    let mut c = Config::default();
    c.srs.load_demo = true;
    c.srs.demo_path = data.to_path_buf();
    c
}

/// The child process: start-up with the collection unchanged, then the query mix.
fn child(db: &Path, data: &Path, rounds: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let cpu0 = cpu_seconds();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let config = config_for(data);
    let (store, retriever) = rt.block_on(async {
        let store = Store::open(db)?;
        let r = retrieval::embedded_from_config(&config, &store).await?;
        let loaded = r.ensure_demo(data).await.map_err(anyhow::Error::msg)?;
        anyhow::ensure!(
            loaded.is_none(),
            "the unchanged collection was loaded again"
        );
        anyhow::Ok((store, r))
    })?;
    let startup = started.elapsed();
    let startup_cpu = cpu_seconds() - cpu0;
    let rss_after_start = rss_mib();
    if rounds == 0 {
        // The first start after the ingest (see `run_size`): start-up only.
        let out = serde_json::json!({
            "startup_ms": startup.as_secs_f64() * 1e3,
            "startup_cpu_ms": startup_cpu * 1e3,
        });
        println!("SCALE-CHILD {out}");
        return Ok(());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection");
    let mut queries = Vec::new();
    for f in ["dev_queries.jsonl", "dev_queries_v2.jsonl"] {
        queries.extend(eval::load_queries(&root.join(f)).map_err(anyhow::Error::msg)?);
    }
    // `BENCH_ONLY`: only the questions containing this text (to profile one slow question).
    if let Ok(only) = std::env::var("BENCH_ONLY") {
        queries.retain(|q| q.query.contains(only.as_str()));
        anyhow::ensure!(!queries.is_empty(), "no question contains {only:?}");
    }
    // The server's own options: the collection's user dictionary (loaded with the index) and
    // the abstention fit in use, exactly what `Retriever::search` hands `search_blocking`.
    let mut opts = retriever.options().clone();
    opts.abstention = retriever.abstention();
    opts.semantic_abstention = retriever.semantic_abstention();
    let collection = store.collection();
    // One round to warm the page cache and the statement caches; it also gives the answers
    // the quality figures read.
    let mut answered = Vec::with_capacity(queries.len());
    for q in &queries {
        let hits = search_blocking(&collection, &q.query, 5, &opts, None)?;
        answered.push(hits.into_iter().map(|h| h.exhibit.id).collect::<Vec<_>>());
    }
    let quality = quality(&collection, &queries, &answered, &opts)?;
    let (mut sync_t, mut en, mut zh) = (Vec::new(), Vec::new(), Vec::new());
    // Each question's thread CPU time and wall time, every round (the slowest are reported).
    let mut per_q: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); queries.len()];
    let (cpu_q, load_q) = (cpu_seconds(), load_average());
    for _ in 0..rounds {
        for (i, q) in queries.iter().enumerate() {
            let (t, c) = (Instant::now(), thread_cpu_seconds());
            std::hint::black_box(search_blocking(&collection, &q.query, 5, &opts, None)?);
            let d = t.elapsed();
            per_q[i].0.push((thread_cpu_seconds() - c) * 1e3);
            per_q[i].1.push(d.as_secs_f64() * 1e3);
            sync_t.push(d);
            if q.language == "zh" { &mut zh } else { &mut en }.push(d);
        }
    }
    let query_cpu_ms = (cpu_seconds() - cpu_q) * 1e3 / sync_t.len().max(1) as f64;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut slowest: Vec<(f64, f64, &str)> = per_q
        .iter_mut()
        .zip(&queries)
        .map(|((c, w), q)| (median(c), median(w), q.query.as_str()))
        .collect();
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    slowest.truncate(env_or("BENCH_SLOWEST", 10));
    let (async_t, async_per_second) =
        rt.block_on(concurrent_rounds(&retriever, &queries, rounds, 1))?;
    let lanes = env_or("BENCH_LANES", 4usize).max(1);
    let (lanes_t, lanes_per_second) =
        rt.block_on(concurrent_rounds(&retriever, &queries, rounds, lanes))?;
    let out = serde_json::json!({
        "startup_ms": startup.as_secs_f64() * 1e3,
        "startup_cpu_ms": startup_cpu * 1e3,
        "query_cpu_ms": query_cpu_ms,
        "query_load": format!("{load_q} to {}", load_average()),
        "rss_after_start_mib": rss_after_start,
        "query": summary(sync_t),
        "query_en": summary(en),
        "query_zh": summary(zh),
        "query_async": summary(async_t),
        "query_async_per_second": async_per_second,
        "query_lanes": lanes,
        "query_lanes_t": summary(lanes_t),
        "query_lanes_per_second": lanes_per_second,
        "rss_after_queries_mib": rss_mib(),
        "slowest": slowest
            .iter()
            .map(|(c, w, q)| serde_json::json!({"cpu_ms": c, "wall_ms": w, "query": q}))
            .collect::<Vec<_>>(),
        "quality": quality,
    });
    println!("SCALE-CHILD {out}");
    Ok(())
}

/// Recall of the dev questions that have answers (their relevant records are demo records,
/// which every size holds): `ranked_*` reads the lexical ranking before the no-answer decision
/// ([`rank_with_features`]), `answered_*` the hits `search_blocking` returned (`answered`, in
/// question order); `refused` counts answerable questions given no hit. A quality check of
/// how large collections rank, not the cross-validated `eval`.
fn quality(
    collection: &museum_agent::store::collection::CollectionStore,
    queries: &[eval::EvalQuery],
    answered: &[Vec<String>],
    opts: &EmbeddedOptions,
) -> anyhow::Result<serde_json::Value> {
    let (mut n, mut r1, mut r5, mut a1, mut a5, mut refused) = (0, 0, 0, 0, 0, 0);
    for (q, hits) in queries.iter().zip(answered) {
        if q.relevant_ids.is_empty() {
            continue;
        }
        n += 1;
        let (ranked, _) = rank_with_features(collection, &q.query, 5, opts)?;
        let hit =
            |ids: &[String], k: usize| ids.iter().take(k).any(|id| q.relevant_ids.contains(id));
        r1 += usize::from(hit(&ranked, 1));
        r5 += usize::from(hit(&ranked, 5));
        a1 += usize::from(hit(hits, 1));
        a5 += usize::from(hit(hits, 5));
        refused += usize::from(hits.is_empty());
    }
    let share = |x: usize| x as f64 / n.max(1) as f64;
    Ok(serde_json::json!({
        "answerable": n,
        "ranked_recall_at_1": share(r1),
        "ranked_recall_at_5": share(r5),
        "answered_recall_at_1": share(a1),
        "answered_recall_at_5": share(a5),
        "refused": refused,
    }))
}

/// The rounds through `Retriever::search` from `lanes` visitors at once (question `i` goes to
/// lane `i % lanes`; one lane asks them in order): each answer's wall time, and the questions
/// answered per second.
async fn concurrent_rounds(
    r: &EmbeddedRetriever,
    queries: &[eval::EvalQuery],
    rounds: usize,
    lanes: usize,
) -> anyhow::Result<(Vec<Duration>, f64)> {
    let started = Instant::now();
    let lane = |lane: usize| async move {
        let mut v = Vec::new();
        for _ in 0..rounds {
            for q in queries.iter().skip(lane).step_by(lanes) {
                let t = Instant::now();
                std::hint::black_box(r.search(&q.query, 5).await?);
                v.push(t.elapsed());
            }
        }
        anyhow::Ok(v)
    };
    let mut all = Vec::new();
    for v in futures_util::future::join_all((0..lanes).map(lane)).await {
        all.extend(v?);
    }
    let per_second = all.len() as f64 / started.elapsed().as_secs_f64();
    Ok((all, per_second))
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_size(
    demo: &[Exhibit],
    size: usize,
    dir: &Path,
    seed: u64,
    rounds: usize,
) -> anyhow::Result<()> {
    let data = dir.join(format!("collection-{size}.jsonl"));
    let t = Instant::now();
    write_collection(demo, size, seed, &data)?;
    let bytes = std::fs::metadata(&data)?.len() as f64;
    println!(
        "\n== {size} records: {} ({:.0} MB, written in {:.1} s)",
        data.display(),
        bytes / 1e6,
        t.elapsed().as_secs_f64()
    );
    let db = dir.join(format!("scale-{size}.db"));
    for s in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{s}", db.display()));
    }
    let rss_before = peak_rss_mib();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let config = config_for(&data);
    let (t, cpu0, load0) = (Instant::now(), cpu_seconds(), load_average());
    let report = rt.block_on(async {
        let store = Store::open(&db)?;
        let r = retrieval::embedded_from_config(&config, &store).await?;
        let rep = r.ensure_demo(&data).await.map_err(anyhow::Error::msg)?;
        anyhow::Ok(rep)
    })?;
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    drop(rt);
    let rows = report.as_ref().map_or(0, |r| r.rows);
    anyhow::ensure!(rows == size, "ingested {rows} of {size} records");
    println!(
        "ingest (fresh database, start path): {rows} records in {secs:.1} s = {:.0} records/s; \
         CPU {cpu:.1} s = {:.0} records per CPU-second (load average {load0} to {})",
        rows as f64 / secs,
        rows as f64 / cpu,
        load_average()
    );
    println!(
        "index on disk: {:.0} MiB (database + WAL); peak RSS of the ingesting process {:.0} MiB (before: {rss_before:.0} MiB)",
        disk_mib(&db),
        peak_rss_mib()
    );
    let spawn = |rounds: usize| -> anyhow::Result<serde_json::Value> {
        let out = Command::new(std::env::current_exe()?)
            .env(
                "SCALE_BENCH_CHILD",
                format!("{}\n{}", db.display(), data.display()),
            )
            .env("BENCH_ROUNDS", rounds.to_string())
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("SCALE-CHILD ")) else {
            anyhow::bail!(
                "the start-up process failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        Ok(serde_json::from_str(line)?)
    };
    // The first start after the ingest may hash the file once more (written less than 2 s
    // before it was loaded, its times are not trusted: `ingest::file_stat`); every later start
    // is the one a museum meets.
    let first = spawn(0)?;
    println!(
        "first start after the ingest: {:.0} ms (CPU {:.0} ms)",
        first["startup_ms"].as_f64().unwrap_or(0.0),
        first["startup_cpu_ms"].as_f64().unwrap_or(0.0)
    );
    let v = spawn(rounds.max(1))?;
    println!(
        "start-up with the collection unchanged (fresh process: open, dictionaries, index check, demo check): {:.0} ms (CPU {:.0} ms), RSS {:.0} MiB",
        v["startup_ms"].as_f64().unwrap_or(0.0),
        v["startup_cpu_ms"].as_f64().unwrap_or(0.0),
        v["rss_after_start_mib"].as_f64().unwrap_or(0.0)
    );
    println!(
        "query CPU time, blocking calls: {:.2} ms a query (load average {})",
        v["query_cpu_ms"].as_f64().unwrap_or(0.0),
        v["query_load"].as_str().unwrap_or("")
    );
    for (name, key) in [
        ("query, blocking call, all 200 questions", "query"),
        ("  English questions", "query_en"),
        ("  Chinese questions", "query_zh"),
        ("query through Retriever::search (async)", "query_async"),
    ] {
        let q = &v[key];
        println!(
            "{name:<42} n={:<5} p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>6.2} ms",
            q["n"],
            q["p50_ms"].as_f64().unwrap_or(0.0),
            q["p99_ms"].as_f64().unwrap_or(0.0),
            q["max_ms"].as_f64().unwrap_or(0.0)
        );
    }
    println!(
        "{:<42} n={:<5} p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>6.2} ms; {:.0} questions/s ({:.0} one at a time)",
        format!("  {} visitors at once", v["query_lanes"]),
        v["query_lanes_t"]["n"],
        v["query_lanes_t"]["p50_ms"].as_f64().unwrap_or(0.0),
        v["query_lanes_t"]["p99_ms"].as_f64().unwrap_or(0.0),
        v["query_lanes_t"]["max_ms"].as_f64().unwrap_or(0.0),
        v["query_lanes_per_second"].as_f64().unwrap_or(0.0),
        v["query_async_per_second"].as_f64().unwrap_or(0.0),
    );
    println!(
        "RSS of the searching process after the queries: {:.0} MiB",
        v["rss_after_queries_mib"].as_f64().unwrap_or(0.0)
    );
    print_child_details(&v);
    Ok(())
}

/// The slowest questions and the quality figures of a start-up process's report.
fn print_child_details(v: &serde_json::Value) {
    println!("slowest questions (median over the rounds; thread CPU / wall):");
    for s in v["slowest"].as_array().into_iter().flatten() {
        println!(
            "  {:>6.2} / {:>6.2} ms  {}",
            s["cpu_ms"].as_f64().unwrap_or(0.0),
            s["wall_ms"].as_f64().unwrap_or(0.0),
            s["query"].as_str().unwrap_or("")
        );
    }
    let q = &v["quality"];
    let f = |k: &str| q[k].as_f64().unwrap_or(0.0);
    println!(
        "quality, {} answerable dev questions: ranked recall@1 {:.3} @5 {:.3}; answered recall@1 {:.3} @5 {:.3}; refused {}",
        q["answerable"],
        f("ranked_recall_at_1"),
        f("ranked_recall_at_5"),
        f("answered_recall_at_1"),
        f("answered_recall_at_5"),
        q["refused"]
    );
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = env_or("BENCH_ROUNDS", 5);
    if let Ok(paths) = std::env::var("SCALE_BENCH_CHILD") {
        let (db, data) = paths.split_once('\n').unwrap_or((&paths, ""));
        return child(Path::new(db), Path::new(data), rounds);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let demo_path = root.join("fixtures/collection/exhibits.jsonl");
    let demo: Vec<Exhibit> = retrieval::ingest::parse_file(&demo_path)
        .map_err(anyhow::Error::msg)?
        .rows
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| "2700,500000".into())
        .split(',')
        .filter_map(|s| s.trim().replace('_', "").parse().ok())
        .collect();
    let seed: u64 = env_or("BENCH_SEED", 17);
    let (_tmp, dir): (Option<tempfile::TempDir>, PathBuf) = match std::env::var("BENCH_DIR") {
        Ok(d) => {
            std::fs::create_dir_all(&d)?;
            (None, PathBuf::from(d))
        }
        Err(_) => {
            let t = tempfile::tempdir()?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    let mut langs: HashMap<&str, usize> = HashMap::new();
    for e in &demo {
        *langs.entry(e.language.as_str()).or_default() += 1;
    }
    println!(
        "scale benchmark: sizes {sizes:?}, seed {seed}, {rounds} query rounds, demo {} records {langs:?}, {} cores",
        demo.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for size in sizes {
        run_size(&demo, size, &dir, seed, rounds)?;
    }
    Ok(())
}

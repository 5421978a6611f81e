//! `eval`: retrieval quality per kind of question, in-sample and cross-validated, and `--fit`.

use std::path::PathBuf;

use anyhow::Context;
use museum_agent::Config;
use museum_agent::retrieval;
use museum_agent::store::Store;

#[derive(clap::Args)]
pub(crate) struct EvalArgs {
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

pub(crate) async fn eval(config: Config, a: EvalArgs) -> anyhow::Result<()> {
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
    // The semantic fit only when the no-answer decision reads the cosine signals too.
    let semantic = hybrid && r.options().semantic_signals;
    let key = if semantic {
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
        if semantic {
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
                "outcomes_current": current_out,
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

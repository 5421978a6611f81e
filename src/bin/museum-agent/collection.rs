//! `ingest` and `search`: load collection files into the database, and what the server would
//! answer a question from.

use std::path::PathBuf;

use anyhow::Context;
use museum_agent::Config;
use museum_agent::retrieval;
use museum_agent::store::Store;

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

pub(crate) async fn ingest(config: Config, paths: Vec<PathBuf>, json: bool) -> anyhow::Result<()> {
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
pub(crate) async fn search(
    config: Config,
    query: String,
    k: usize,
    json: bool,
) -> anyhow::Result<()> {
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
    // The pipeline's order: a visitor-service question is answered from the facts file (or
    // "I don't have information about that" for a built-in topic it lacks) and never reaches
    // the collection.
    let facts_store = retrieval::facts::FactsStore::from_config(&config.srs);
    let facts = facts_store
        .as_ref()
        .map(|f| f.current())
        .unwrap_or_default();
    // A slash command comes first, as on the server ("/search toilets" searches).
    let slash = museum_agent::pipeline::slash::parse(&query).is_some();
    if let Some(service) = retrieval::facts::classify(&query, &facts).filter(|_| !slash) {
        let (f, source) = match service {
            retrieval::facts::Service::Fact(f) => (
                f.clone(),
                format!("from {}", config.srs.facts_path.display()),
            ),
            retrieval::facts::Service::NoEntry(topic) => (
                retrieval::facts::no_entry_fact(topic),
                "no entry in the facts file".to_string(),
            ),
        };
        let answer = offline::fact_answer(&f, &query);
        say(
            "fact",
            format!("visitor-services fact ({}), {source}:\n  {answer}", f.topic),
            serde_json::json!({"fact": {"topic": f.topic, "answer": answer}}),
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
    // The server's first turn, in its order (`pipeline::run`): a slash command, then the
    // curators' highlights for "what is worth seeing", then small talk ("hello", "what can you
    // do?", "how many objects do you have?"), none of which is searched.
    if let Some((by, text)) =
        without_search(&query, retriever.as_ref(), &facts, facts_store.is_some()).await
    {
        let extra = match by {
            "fact" => {
                serde_json::json!({"fact": {"topic": retrieval::facts::HIGHLIGHTS, "answer": text}})
            }
            _ => serde_json::json!({"offline_answer": text}),
        };
        say(by, format!("{by}:\n  {text}"), extra);
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
    if let Some(s) = retriever.semantic() {
        // A one-shot command cannot wait for a whole embedding pass: only for the probe.
        s.settle(museum_agent::config::secs(
            config.srs.embeddings_timeout_seconds,
        ))
        .await;
    }
    // A browse question about a kind the catalogue names ("Do you have any ceramics?"): the
    // server lists the kind, not the search's hits.
    let kind = if offline::may_name_a_kind(&query) {
        retriever.browse(&query, k.min(offline::BROWSE_MAX)).await?
    } else {
        None
    };
    if let Some(b) = kind {
        let answer = offline::kind_answer(&query, &b);
        if json {
            let hits: Vec<serde_json::Value> = b
                .hits
                .iter()
                .map(|h| serde_json::json!({"id": h.exhibit.id, "title": h.exhibit.title, "score": h.score}))
                .collect();
            println!(
                "{}",
                serde_json::json!({"query": query, "answered_by": "collection",
                                   "retriever": retriever.name(), "hits": hits,
                                   "kind": {"label": b.label, "total": b.total, "words": b.words,
                                            "of_kind": b.of_kind},
                                   "offline_answer": answer})
            );
        } else {
            println!(
                "a kind of the catalogue ({} retriever): {}, {} exhibits; listed:",
                retriever.name(),
                b.label,
                b.total
            );
            for (i, h) in b.hits.iter().enumerate() {
                println!("{:>2}. {}  {}", i + 1, h.exhibit.id, h.exhibit.title);
            }
            println!("offline answer: {answer}");
        }
        return Ok(());
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
                    let p = model.as_ref().zip(f).map(|(m, f)| {
                        (
                            m.probability(&f),
                            m.threshold_for(&f),
                            retrieval::abstain::refusing_rule(&f),
                        )
                    });
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
                Some((_, _, Some((rule, why)))) => text.push_str(&format!(
                    "\n  best candidate {id} refused by the rule {rule}: {why}"
                )),
                Some((p, t, None)) => text.push_str(&format!(
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

/// What the server answers `query` with before any search, as its first turn would
/// (`pipeline::run`): a slash command's output, the curators' highlights for a question asking
/// what is worth seeing, small talk's own line (the collection's figures for an overview
/// question). The label says which (`slash`, `fact`, `small-talk`); None: the question is
/// searched.
async fn without_search(
    query: &str,
    retriever: &dyn retrieval::Retriever,
    facts: &[retrieval::facts::Fact],
    services: bool,
) -> Option<(&'static str, String)> {
    use museum_agent::pipeline::{slash, small_talk};
    use museum_agent::providers::llm::offline;
    if let Some((cmd, args)) = slash::parse(query) {
        return Some(("slash", slash::run(&cmd, &args, Some(retriever)).await));
    }
    let talk = small_talk::classify(query);
    if let Some(f) = small_talk::highlights_for(talk, query, facts) {
        let mut exhibits = Vec::new();
        for id in &f.exhibits {
            if let Ok(Some(e)) = retriever.get(id).await {
                exhibits.push(e);
            }
        }
        return Some(("fact", offline::fact_answer_with(f, query, &exhibits)));
    }
    let kind = talk?;
    let overview = match kind {
        small_talk::SmallTalk::Overview => retriever.overview().await.ok().flatten(),
        _ => None,
    };
    Some((
        "small-talk",
        small_talk::reply(kind, query, overview.as_ref(), services),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! Retrieval quality over a query file (the shape of `dev_queries.jsonl`: one
//! `{"query", "language", "relevant_ids"}` a line).
//!
//! Definitions (per query, then averaged over all queries):
//! - answerable query (`relevant_ids` not empty): recall@k = 1 when any relevant id is among the
//!   first k hits, else 0; reciprocal rank = 1 / rank of the first relevant hit (0 if none of
//!   the returned hits is relevant; at most [`EVAL_DEPTH`] hits are asked for).
//! - negative query (`relevant_ids: []`): correct (1 for recall@1, recall@5 and RR) when the
//!   retriever returns nothing, i.e. no exhibit clears the no-answer threshold; else 0.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Retriever;

/// Hits asked for per query.
pub const EVAL_DEPTH: usize = 10;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct EvalQuery {
    pub query: String,
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub relevant_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueryOutcome {
    pub query: EvalQuery,
    /// Returned ids with their scores, best first.
    pub returned: Vec<(String, f64)>,
    /// 1-based rank of the first relevant hit.
    pub first_relevant: Option<usize>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Metrics {
    pub queries: usize,
    pub answerable: usize,
    pub negatives: usize,
    pub recall_at_1: f64,
    pub recall_at_5: f64,
    pub mrr: f64,
    /// Answerable queries only.
    pub answerable_recall_at_5: f64,
    /// Negative queries answered with nothing.
    pub negatives_correct: usize,
    /// Answerable queries that got no hit at all (dropped by the threshold).
    pub answerable_with_no_hits: usize,
    pub by_language: Vec<(String, usize, f64)>,
}

/// Reads a query file; a bad line is an error naming it (the file is ours, not visitor input).
pub fn load_queries(path: &Path) -> Result<Vec<EvalQuery>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Runs every query through the retriever.
pub async fn run(retriever: &dyn Retriever, queries: &[EvalQuery]) -> Vec<QueryOutcome> {
    let mut out = Vec::with_capacity(queries.len());
    for q in queries {
        let (returned, error) = match retriever.search(&q.query, EVAL_DEPTH).await {
            Ok(hits) => (
                hits.into_iter()
                    .map(|h| (h.exhibit.id, h.score))
                    .collect::<Vec<_>>(),
                None,
            ),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let first_relevant = returned
            .iter()
            .position(|(id, _)| q.relevant_ids.contains(id))
            .map(|p| p + 1);
        out.push(QueryOutcome {
            query: q.clone(),
            returned,
            first_relevant,
            error,
        });
    }
    out
}

fn at(o: &QueryOutcome, k: usize) -> f64 {
    if o.query.relevant_ids.is_empty() {
        f64::from(u8::from(o.returned.is_empty()))
    } else {
        f64::from(u8::from(o.first_relevant.is_some_and(|r| r <= k)))
    }
}

fn rr(o: &QueryOutcome) -> f64 {
    if o.query.relevant_ids.is_empty() {
        at(o, 1)
    } else {
        o.first_relevant.map_or(0.0, |r| 1.0 / r as f64)
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn metrics(outcomes: &[QueryOutcome]) -> Metrics {
    let n = outcomes.len().max(1) as f64;
    let answerable: Vec<&QueryOutcome> = outcomes
        .iter()
        .filter(|o| !o.query.relevant_ids.is_empty())
        .collect();
    let mut langs: Vec<String> = outcomes.iter().map(|o| o.query.language.clone()).collect();
    langs.sort();
    langs.dedup();
    let by_language = langs
        .into_iter()
        .map(|l| {
            let of: Vec<&QueryOutcome> =
                outcomes.iter().filter(|o| o.query.language == l).collect();
            let r5 = of.iter().map(|o| at(o, 5)).sum::<f64>() / of.len().max(1) as f64;
            (l, of.len(), round(r5))
        })
        .collect();
    Metrics {
        queries: outcomes.len(),
        answerable: answerable.len(),
        negatives: outcomes.len() - answerable.len(),
        recall_at_1: round(outcomes.iter().map(|o| at(o, 1)).sum::<f64>() / n),
        recall_at_5: round(outcomes.iter().map(|o| at(o, 5)).sum::<f64>() / n),
        mrr: round(outcomes.iter().map(rr).sum::<f64>() / n),
        answerable_recall_at_5: round(
            answerable.iter().map(|o| at(o, 5)).sum::<f64>() / answerable.len().max(1) as f64,
        ),
        negatives_correct: outcomes
            .iter()
            .filter(|o| o.query.relevant_ids.is_empty() && o.returned.is_empty())
            .count(),
        answerable_with_no_hits: answerable.iter().filter(|o| o.returned.is_empty()).count(),
        by_language,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(relevant: &[&str], returned: &[&str]) -> QueryOutcome {
        let q = EvalQuery {
            query: "q".into(),
            language: if relevant.is_empty() { "zh" } else { "en" }.into(),
            relevant_ids: relevant.iter().map(|s| s.to_string()).collect(),
        };
        let returned: Vec<(String, f64)> = returned.iter().map(|s| (s.to_string(), 1.0)).collect();
        let first_relevant = returned
            .iter()
            .position(|(id, _)| q.relevant_ids.contains(id))
            .map(|p| p + 1);
        QueryOutcome {
            query: q,
            returned,
            first_relevant,
            error: None,
        }
    }

    #[test]
    fn metrics_follow_the_definitions() {
        let outcomes = vec![
            o(&["a"], &["a", "b"]),                     // rank 1
            o(&["a", "z"], &["b", "c", "z"]),           // rank 3
            o(&["a"], &["b", "c", "d", "e", "f", "a"]), // rank 6: not in top 5
            o(&[], &[]),                                // negative, correct
            o(&[], &["x"]),                             // negative, wrong
        ];
        let m = metrics(&outcomes);
        assert_eq!((m.queries, m.answerable, m.negatives), (5, 3, 2));
        assert_eq!(m.recall_at_1, round(2.0 / 5.0));
        assert_eq!(m.recall_at_5, round(3.0 / 5.0));
        assert_eq!(m.mrr, round((1.0 + 1.0 / 3.0 + 1.0 / 6.0 + 1.0) / 5.0));
        assert_eq!(m.answerable_recall_at_5, round(2.0 / 3.0));
        assert_eq!(m.negatives_correct, 1);
        assert_eq!(
            m.by_language,
            vec![("en".into(), 3, round(2.0 / 3.0)), ("zh".into(), 2, 0.5)]
        );
        assert_eq!(metrics(&[]).queries, 0);
    }
}

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
use super::abstain::{self, AbstentionModel, Features};
use super::embedded::{EmbeddedOptions, rank_with_features};
use super::text;
use crate::store::StoreError;
use crate::store::collection::CollectionStore;

/// Hits asked for per query.
pub const EVAL_DEPTH: usize = 10;

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct EvalQuery {
    pub query: String,
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub relevant_ids: Vec<String>,
    /// `zh-simplified`, `zh-traditional`, `en-paraphrase`, `en-fact`, `cross-lingual`,
    /// `no-answer`; empty in older files (see [`kind_of`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
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

/// A query's kind: its `kind`, else `no-answer` for no relevant id, the script for Chinese
/// (Traditional when normalisation changes it), `en` for the rest.
pub fn kind_of(q: &EvalQuery) -> String {
    if !q.kind.is_empty() {
        return q.kind.clone();
    }
    if q.relevant_ids.is_empty() {
        return "no-answer".into();
    }
    if q.query.chars().any(text::is_cjk) {
        let nfkc_lower = q.query.to_lowercase();
        return if text::normalize(&q.query) != nfkc_lower {
            "zh-traditional".into()
        } else {
            "zh-simplified".into()
        };
    }
    "en".into()
}

/// Figures of one group of queries (a kind, or all). Recall and MRR are over the group's
/// answerable queries (None when it has none); abstention counts are over all of it.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct KindMetrics {
    pub kind: String,
    pub queries: usize,
    pub answerable: usize,
    pub recall_at_1: Option<f64>,
    pub recall_at_5: Option<f64>,
    pub mrr: Option<f64>,
    /// Queries refused (no hit returned).
    pub refused: usize,
    /// No-answer queries refused / no-answer queries.
    pub negatives: usize,
    pub negatives_refused: usize,
    /// Refused queries that had no answer / refused queries (None: nothing refused).
    pub abstention_precision: Option<f64>,
    /// Refused no-answer queries / no-answer queries (None: no no-answer query).
    pub abstention_recall: Option<f64>,
    /// Answerable queries refused, and the share of answerable queries that is.
    pub false_abstentions: usize,
    pub false_abstention_rate: Option<f64>,
}

fn ratio(a: f64, b: usize) -> Option<f64> {
    (b > 0).then(|| round(a / b as f64))
}

fn group(kind: &str, of: &[&QueryOutcome]) -> KindMetrics {
    let ans: Vec<&&QueryOutcome> = of
        .iter()
        .filter(|o| !o.query.relevant_ids.is_empty())
        .collect();
    let refused = of.iter().filter(|o| o.returned.is_empty()).count();
    let negatives = of.len() - ans.len();
    let negatives_refused = of
        .iter()
        .filter(|o| o.query.relevant_ids.is_empty() && o.returned.is_empty())
        .count();
    let false_abstentions = ans.iter().filter(|o| o.returned.is_empty()).count();
    KindMetrics {
        kind: kind.to_string(),
        queries: of.len(),
        answerable: ans.len(),
        recall_at_1: ratio(ans.iter().map(|o| at(o, 1)).sum(), ans.len()),
        recall_at_5: ratio(ans.iter().map(|o| at(o, 5)).sum(), ans.len()),
        mrr: ratio(ans.iter().map(|o| rr(o)).sum(), ans.len()),
        refused,
        negatives,
        negatives_refused,
        abstention_precision: ratio(negatives_refused as f64, refused),
        abstention_recall: ratio(negatives_refused as f64, negatives),
        false_abstentions,
        false_abstention_rate: ratio(false_abstentions as f64, ans.len()),
    }
}

/// Per-kind figures (kinds in first-seen order), then `all`.
pub fn by_kind(outcomes: &[QueryOutcome]) -> Vec<KindMetrics> {
    let mut kinds: Vec<String> = Vec::new();
    for o in outcomes {
        let k = kind_of(&o.query);
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    let mut out: Vec<KindMetrics> = kinds
        .iter()
        .map(|k| {
            let of: Vec<&QueryOutcome> = outcomes
                .iter()
                .filter(|o| &kind_of(&o.query) == k)
                .collect();
            group(k, &of)
        })
        .collect();
    let all: Vec<&QueryOutcome> = outcomes.iter().collect();
    out.push(group("all", &all));
    out
}

/// A query ranked by lexical search with no no-answer decision, and its abstention signals.
#[derive(Debug, Clone, Serialize)]
pub struct Ranked {
    pub query: EvalQuery,
    pub ids: Vec<String>,
    /// None: the question has no searchable term (always refused).
    pub features: Option<Features>,
}

/// Ranks every query (blocking; the embedded index).
pub fn rank_all(
    store: &CollectionStore,
    queries: &[EvalQuery],
    opts: &EmbeddedOptions,
) -> Result<Vec<Ranked>, StoreError> {
    queries
        .iter()
        .map(|q| {
            let (ids, features) = rank_with_features(store, &q.query, EVAL_DEPTH, opts)?;
            Ok(Ranked {
                query: q.clone(),
                ids,
                features,
            })
        })
        .collect()
}

/// Training examples for the abstention model: answerable queries whose relevant exhibit is in
/// the top 5 (answering helps) are positive, no-answer queries negative; answerable queries
/// that lexical search cannot find are left out (answering them would give a wrong exhibit, so
/// neither label is right).
pub fn examples(ranked: &[&Ranked]) -> Vec<(Features, bool)> {
    ranked
        .iter()
        .filter_map(|r| {
            let f = r.features?;
            if r.query.relevant_ids.is_empty() {
                return Some((f, false));
            }
            let found = r
                .ids
                .iter()
                .take(5)
                .any(|id| r.query.relevant_ids.contains(id));
            found.then_some((f, true))
        })
        .collect()
}

/// The outcome of a ranked query under an abstention model.
pub fn decide(model: &AbstentionModel, r: &Ranked) -> QueryOutcome {
    let p = r.features.map(|f| model.probability(&f));
    let answer = p.is_some_and(|p| p >= model.threshold);
    let returned: Vec<(String, f64)> = if answer {
        r.ids
            .iter()
            .map(|id| (id.clone(), p.unwrap_or(0.0)))
            .collect()
    } else {
        Vec::new()
    };
    let first_relevant = returned
        .iter()
        .position(|(id, _)| r.query.relevant_ids.contains(id))
        .map(|p| p + 1);
    QueryOutcome {
        query: r.query.clone(),
        returned,
        first_relevant,
        error: None,
    }
}

/// Deterministic fold of each query: stratified by kind (the i-th query of a kind, in file
/// order, goes to fold i mod k).
pub fn folds(ranked: &[Ranked], k: usize) -> Vec<usize> {
    let k = k.max(2);
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    ranked
        .iter()
        .map(|r| {
            let c = seen.entry(kind_of(&r.query)).or_insert(0);
            let f = *c % k;
            *c += 1;
            f
        })
        .collect()
}

/// Fits the abstention model on all queries (the in-sample fit, and what `--fit` stores).
pub fn fit_all(ranked: &[Ranked], fitted_on: &str) -> AbstentionModel {
    let all: Vec<&Ranked> = ranked.iter().collect();
    abstain::fit(&examples(&all), fitted_on)
}

/// k-fold cross-validation: each fold's outcomes come from a model fitted (weights and
/// threshold) on the other folds only. Outcomes are in the queries' order.
pub fn cross_validate(ranked: &[Ranked], k: usize) -> Vec<QueryOutcome> {
    let fold = folds(ranked, k);
    let mut out: Vec<Option<QueryOutcome>> = vec![None; ranked.len()];
    for f in 0..k.max(2) {
        let train: Vec<&Ranked> = ranked
            .iter()
            .zip(&fold)
            .filter(|(_, g)| **g != f)
            .map(|(r, _)| r)
            .collect();
        let model = abstain::fit(&examples(&train), "cv");
        for (i, r) in ranked.iter().enumerate() {
            if fold[i] == f {
                out[i] = Some(decide(&model, r));
            }
        }
    }
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(relevant: &[&str], returned: &[&str]) -> QueryOutcome {
        let q = EvalQuery {
            query: "q".into(),
            language: if relevant.is_empty() { "zh" } else { "en" }.into(),
            relevant_ids: relevant.iter().map(|s| s.to_string()).collect(),
            kind: String::new(),
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
        let k = by_kind(&outcomes);
        assert_eq!(k.len(), 3, "{k:?}");
        let (en, neg, all) = (&k[0], &k[1], &k[2]);
        assert_eq!((en.kind.as_str(), en.answerable), ("en", 3));
        assert_eq!(en.recall_at_5, Some(round(2.0 / 3.0)));
        assert_eq!(en.false_abstentions, 0);
        assert_eq!(neg.kind, "no-answer");
        assert_eq!((neg.negatives, neg.negatives_refused), (2, 1));
        assert_eq!(neg.abstention_recall, Some(0.5));
        assert_eq!(neg.recall_at_1, None);
        assert_eq!(all.abstention_precision, Some(1.0));
        assert_eq!(all.queries, 5);
    }

    #[test]
    fn kinds_and_folds_are_deterministic_and_stratified() {
        let q = |s: &str, rel: bool, kind: &str| EvalQuery {
            query: s.into(),
            language: String::new(),
            relevant_ids: if rel { vec!["x".into()] } else { vec![] },
            kind: kind.into(),
        };
        assert_eq!(kind_of(&q("這件青銅鼎", true, "")), "zh-traditional");
        assert_eq!(kind_of(&q("这件青铜鼎", true, "")), "zh-simplified");
        assert_eq!(kind_of(&q("Bronze", false, "")), "no-answer");
        assert_eq!(kind_of(&q("Bronze", true, "en-fact")), "en-fact");
        let ranked: Vec<Ranked> = (0..10)
            .map(|i| Ranked {
                query: q("a", i % 2 == 0, ""),
                ids: vec![],
                features: None,
            })
            .collect();
        let f = folds(&ranked, 5);
        assert_eq!(f, vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
    }
}

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
use super::embedded::{Dense, EmbeddedOptions, EmbeddedRetriever, rank};
use super::embeddings::VectorSet;
use super::embeddings::fuse_lists;
use super::semantic::Vectors;
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

/// A query ranked lexically and (with embeddings) by cosine similarity, with no no-answer
/// decision, and its lexical abstention signals.
#[derive(Debug, Clone, Serialize)]
pub struct Ranked {
    pub query: EvalQuery,
    /// Lexical ranking, best first (up to `candidates`).
    pub ids: Vec<String>,
    /// The lexical ranking by the question's own words, which the signals describe
    /// (`Ranking::own_words`; the same as `ids` for a question without synonyms).
    pub own_ids: Vec<String>,
    /// Dense ranking `(id, similarity calibrated within the record's language)`, best first;
    /// empty without embeddings.
    pub dense: Vec<(String, f32)>,
    /// Each other language's nearest records, best first (see `embeddings::dense_rankings`).
    #[serde(default)]
    pub dense_other: Vec<Vec<String>>,
    /// None: the question has no searchable term (always refused).
    pub features: Option<Features>,
    /// The no-answer model reads the semantic signals too (`embeddings_abstention =
    /// "semantic"`); otherwise the lexical ones, with or without embeddings.
    #[serde(default)]
    pub semantic_signals: bool,
}

/// The cosine ranking's inputs for [`rank_all`]: every query's vector and every record's, from
/// the retriever's embeddings endpoint (None without one). Embeds what the collection lacks
/// first (one inline pass; vectors already stored are reused), then the questions.
pub async fn dense_inputs(
    r: &EmbeddedRetriever,
    queries: &[EvalQuery],
) -> Result<Option<(Vec<Vec<f32>>, Vectors)>, String> {
    let Some(sem) = r.semantic() else {
        return Ok(None);
    };
    let n = r.embed_pending().await.map_err(|e| e.to_string())?;
    if n > 0 {
        eprintln!("embedded {n} record texts");
    }
    let generation = r
        .collection()
        .call(|s| s.collection_generation())
        .await
        .map_err(|e| e.to_string())?;
    let vectors = sem
        .ready_vectors(generation)
        .ok_or("the collection's vectors are incomplete")?;
    let texts: Vec<String> = queries.iter().map(|q| q.query.clone()).collect();
    let qv = sem.embed_queries(&texts).await.map_err(|e| e.to_string())?;
    Ok(Some((qv, vectors)))
}

/// Fusion parameters: `1/(k + lexical rank) + dense_weight/(k + dense rank) +
/// other_weight/(k + rank among another language's records)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fusion {
    pub dense_weight: f64,
    pub other_weight: f64,
    pub k: f64,
}

/// The grid cross-validation chooses fusion from (weight 0 = lexical order, dense as a
/// tie-breaker only).
pub const WEIGHT_GRID: [f64; 8] = [0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0];
pub const K_GRID: [f64; 6] = [1.0, 3.0, 10.0, 20.0, 60.0, 120.0];
pub const OTHER_WEIGHT_GRID: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];

impl Ranked {
    /// Whether this query has a cosine ranking.
    pub fn hybrid(&self) -> bool {
        !self.dense.is_empty()
    }

    /// The ranking returned under `fusion` (lexical order without embeddings).
    pub fn ids_with(&self, fusion: Option<Fusion>) -> Vec<String> {
        self.fused(&self.ids, fusion)
    }

    /// The lexical ranking by the question's own words (the one the signals describe).
    pub fn own(&self) -> &[String] {
        &self.own_ids
    }

    /// [`Self::ids_with`] over the ranking by the question's own words: the ranking the no-answer
    /// model is fitted on ([`examples`]).
    pub fn own_with(&self, fusion: Option<Fusion>) -> Vec<String> {
        self.fused(self.own(), fusion)
    }

    fn fused(&self, lexical: &[String], fusion: Option<Fusion>) -> Vec<String> {
        match fusion {
            Some(f) if self.hybrid() => {
                let dense: Vec<String> = self.dense.iter().map(|d| d.0.clone()).collect();
                let mut lists: Vec<(&[String], f64)> =
                    vec![(lexical, 1.0), (&dense, f.dense_weight)];
                lists.extend(
                    self.dense_other
                        .iter()
                        .map(|l| (l.as_slice(), f.other_weight)),
                );
                fuse_lists(&lists, f.k).into_iter().map(|x| x.0).collect()
            }
            _ => lexical.to_vec(),
        }
    }

    /// Whether the no-answer model reads the semantic signals for this query.
    pub fn semantic(&self) -> bool {
        self.hybrid() && self.semantic_signals
    }

    /// The abstention signals: lexical, plus the semantic ones with embeddings and
    /// `embeddings_abstention = "semantic"`.
    pub fn signals(&self) -> Option<Features> {
        let f = self.features.as_ref()?;
        Some(if self.semantic() {
            abstain::semantic_features(f, &self.dense, self.own().first())
        } else {
            f.clone()
        })
    }
}

/// Each query's vector (in query order) and every record's `(pk, vector)`.
pub type DenseInputs<'a> = (&'a [Vec<f32>], &'a VectorSet);

/// Ranks every query (blocking; the embedded index). `dense`: each query's vector (same order)
/// and every record's vector, for the cosine ranking.
pub fn rank_all(
    store: &CollectionStore,
    queries: &[EvalQuery],
    opts: &EmbeddedOptions,
    dense: Option<DenseInputs<'_>>,
) -> Result<Vec<Ranked>, StoreError> {
    queries
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let d = dense.and_then(|(qv, vectors)| qv.get(i).map(|v| Dense { query: v, vectors }));
            let r = rank(store, &q.query, opts, d)?;
            let mut pks: Vec<i64> = r.lexical.iter().map(|l| l.0).collect();
            pks.extend(&r.own_words);
            pks.extend(r.dense.iter().map(|d| d.0));
            pks.extend(r.dense_other.iter().flatten());
            let rows = store.exhibits_by_pk(&pks)?;
            let id = |pk: i64| {
                rows.iter()
                    .find(|(p, _)| *p == pk)
                    .map(|(_, r)| r.id.clone())
            };
            Ok(Ranked {
                // The kind filled in (derived for files without one), for the JSON report.
                query: EvalQuery {
                    kind: kind_of(q),
                    ..q.clone()
                },
                ids: r.lexical.iter().filter_map(|l| id(l.0)).collect(),
                own_ids: r.own_words.iter().filter_map(|pk| id(*pk)).collect(),
                dense: r
                    .dense
                    .iter()
                    .filter_map(|d| id(d.0).map(|i| (i, d.1)))
                    .collect(),
                dense_other: r
                    .dense_other
                    .iter()
                    .map(|l| l.iter().filter_map(|pk| id(*pk)).collect())
                    .collect(),
                features: r.features,
                semantic_signals: opts.semantic_signals,
            })
        })
        .collect()
}

/// Training examples for the abstention model: answerable queries whose relevant exhibit is in
/// the top 5 (answering helps) are positive, no-answer queries negative; answerable queries
/// that search cannot find are left out (answering them would give a wrong exhibit, so
/// neither label is right). "Found" is judged on the ranking the signals describe, by the
/// question's own words ([`Ranked::own_with`]): a question found only through the thesaurus's
/// synonyms has the signals of a question its own words do not find, and as a positive it
/// moved the thresholds for every question (retrieval README, "English thesaurus").
pub fn examples(ranked: &[&Ranked], fusion: Option<Fusion>) -> Vec<(Features, bool)> {
    ranked
        .iter()
        .filter_map(|r| {
            let f = r.signals()?;
            if r.query.relevant_ids.is_empty() {
                return Some((f, false));
            }
            // Labelled on the ranking the signals describe: the fused one with the semantic
            // signals, else the question's own words (as without embeddings).
            let ranking = if r.semantic() {
                r.own_with(fusion)
            } else {
                r.own().to_vec()
            };
            let found = ranking
                .iter()
                .take(5)
                .any(|id| r.query.relevant_ids.contains(id));
            found.then_some((f, true))
        })
        .collect()
}

/// The outcome of a ranked query under an abstention model and fusion.
pub fn decide(model: &AbstentionModel, r: &Ranked, fusion: Option<Fusion>) -> QueryOutcome {
    let signals = r.signals();
    let p = signals.as_ref().map(|f| model.probability(f));
    let answer = signals.as_ref().is_some_and(|f| model.answers(f));
    let returned: Vec<(String, f64)> = if answer {
        r.ids_with(fusion)
            .into_iter()
            .take(EVAL_DEPTH)
            .map(|id| (id, p.unwrap_or(0.0)))
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

/// The fusion of the grid with the best recall@1 + recall@5 + MRR summed over the answerable
/// queries given (None when none of them has a cosine ranking). Ties go to the first in grid
/// order (smaller weight, then smaller other-language weight, then smaller k).
pub fn choose_fusion(ranked: &[&Ranked]) -> Option<Fusion> {
    if !ranked.iter().any(|r| r.hybrid()) {
        return None;
    }
    let mut best: Option<(f64, Fusion)> = None;
    let others = if ranked.iter().any(|r| !r.dense_other.is_empty()) {
        &OTHER_WEIGHT_GRID[..]
    } else {
        &OTHER_WEIGHT_GRID[..1]
    };
    for (&dense_weight, &other_weight, &k) in WEIGHT_GRID
        .iter()
        .flat_map(|w| others.iter().map(move |o| (w, o)))
        .flat_map(|(w, o)| K_GRID.iter().map(move |k| (w, o, k)))
    {
        {
            let f = Fusion {
                dense_weight,
                other_weight,
                k,
            };
            let score: f64 = ranked
                .iter()
                .filter(|r| !r.query.relevant_ids.is_empty())
                .map(|r| {
                    let ids = r.ids_with(Some(f));
                    match ids.iter().position(|id| r.query.relevant_ids.contains(id)) {
                        Some(p) => {
                            f64::from(u8::from(p == 0))
                                + f64::from(u8::from(p < 5))
                                + 1.0 / (p as f64 + 1.0)
                        }
                        None => 0.0,
                    }
                })
                .sum();
            if best.is_none_or(|(b, _)| score > b + 1e-9) {
                best = Some((score, f));
            }
        }
    }
    best.map(|b| b.1)
}

fn feature_names(ranked: &[&Ranked]) -> &'static [&'static str] {
    if ranked.iter().any(|r| r.semantic()) {
        &abstain::SEMANTIC_FEATURES
    } else {
        &abstain::FEATURES
    }
}

/// Chooses fusion and fits the abstention model on all queries (the in-sample fit, and what
/// `--fit` stores).
pub fn fit_all(ranked: &[Ranked], fitted_on: &str) -> (Option<Fusion>, AbstentionModel) {
    let all: Vec<&Ranked> = ranked.iter().collect();
    let fusion = choose_fusion(&all);
    let model = abstain::fit(&examples(&all, fusion), feature_names(&all), fitted_on);
    (fusion, model)
}

/// k-fold cross-validation: each fold's outcomes come from a fusion chosen and a model fitted
/// (weights and threshold) on the other folds only. Outcomes are in the queries' order; with
/// them, the fusion each fold chose.
pub fn cross_validate(ranked: &[Ranked], k: usize) -> (Vec<QueryOutcome>, Vec<Option<Fusion>>) {
    let fold = folds(ranked, k);
    let mut out: Vec<Option<QueryOutcome>> = vec![None; ranked.len()];
    let mut chosen = Vec::new();
    for f in 0..k.max(2) {
        let train: Vec<&Ranked> = ranked
            .iter()
            .zip(&fold)
            .filter(|(_, g)| **g != f)
            .map(|(r, _)| r)
            .collect();
        let fusion = choose_fusion(&train);
        let model = abstain::fit(&examples(&train, fusion), feature_names(&train), "cv");
        chosen.push(fusion);
        for (i, r) in ranked.iter().enumerate() {
            if fold[i] == f {
                out[i] = Some(decide(&model, r, fusion));
            }
        }
    }
    (out.into_iter().flatten().collect(), chosen)
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
                own_ids: vec![],
                dense: vec![],
                dense_other: vec![],
                features: None,
                semantic_signals: false,
            })
            .collect();
        let f = folds(&ranked, 5);
        assert_eq!(f, vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
    }
}

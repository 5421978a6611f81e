//! A question's weighted terms ([`WeightedTerms`]: each with its IDF in the collection, and
//! the bridges of the other script standing for some) and how much of them a record covers
//! ([`coverage`], [`TermLookup`]): the arithmetic the ranking, its reorders and the
//! no-answer signals share. Pure: the terms are weighed against the store by the ranking.

use rustc_hash::FxHashMap;

use crate::retrieval::text::QueryTerm;
use crate::retrieval::translit;

pub(super) fn idf(n: f64, df: f64) -> f64 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// A question's terms with their IDF in the current collection.
#[derive(Debug, Clone)]
pub struct WeightedTerms {
    pub terms: Vec<(QueryTerm, f64)>,
    /// Document frequency of each term (same order).
    pub dfs: Vec<f64>,
    /// Exhibits in the collection.
    pub docs: f64,
    pub total: f64,
    /// Tokens of the other script standing for some of the terms ([`translit`]).
    pub bridges: Vec<translit::Bridge>,
}

/// IDF-weighted share of the terms present in `indexed` (space-separated index tokens).
pub fn coverage(w: &WeightedTerms, indexed: &str) -> f64 {
    if w.total <= 0.0 {
        return 0.0;
    }
    let lookup = TermLookup::new(w);
    let mut found = lookup.found(indexed);
    translit::credit(&w.bridges, indexed, &mut found);
    lookup.coverage(&found)
}

/// A question's exact terms by text, built once per question: the lexical stage reads every
/// candidate's text once for both coverages (of all terms and of the rarest) instead of
/// building a map and splitting the text twice per candidate (the largest item of our own
/// code in the query profile at 100,000 exhibits).
pub(super) struct TermLookup<'a> {
    w: &'a WeightedTerms,
    /// FxHash: the tokens are short and not attacker-chosen keys of a long-lived map.
    exact: FxHashMap<&'a str, usize>,
}

impl<'a> TermLookup<'a> {
    pub(super) fn new(w: &'a WeightedTerms) -> Self {
        let exact = w
            .terms
            .iter()
            .enumerate()
            .filter(|(_, (t, _))| !t.prefix)
            .map(|(i, (t, _))| (t.text.as_str(), i))
            .collect();
        TermLookup { w, exact }
    }

    /// Which of the terms (in order) the document's tokens hold (bridges not credited yet:
    /// [`translit::credit`]).
    pub(super) fn found(&self, indexed: &str) -> Vec<bool> {
        let mut found = vec![false; self.w.terms.len()];
        for tok in indexed.split_ascii_whitespace() {
            if let Some(&i) = self.exact.get(tok) {
                found[i] = true;
            }
        }
        for (i, (t, _)) in self.w.terms.iter().enumerate() {
            if t.prefix && !found[i] {
                found[i] = indexed.split_ascii_whitespace().any(|tok| t.matches(tok));
            }
        }
        found
    }

    /// [`coverage`] from [`Self::found`] (the same sum in the same order).
    pub(super) fn coverage(&self, found: &[bool]) -> f64 {
        share(self.w, found.iter().copied())
    }
}

/// The IDF share of the terms flagged found, summed in term order.
pub(super) fn share(w: &WeightedTerms, found: impl Iterator<Item = bool>) -> f64 {
    if w.total <= 0.0 {
        return 0.0;
    }
    let sum: f64 = w
        .terms
        .iter()
        .zip(found)
        .filter(|(_, f)| *f)
        .map(|((_, idf), _)| idf)
        .sum();
    sum / w.total
}

/// Hits within this share of the best score are near ties: a "who is X" question's may be
/// reordered for a biography, a hit holding every proper name may move first among them
/// ([`super::reorder`]), and how many there are is the `near_ties` signal ([`super::signals`]).
/// Not tuned.
pub(super) const NEAR_TIE: f64 = 0.9;

/// One candidate of the lexical stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lexical {
    pub(super) pk: i64,
    pub(super) score: f64,
    pub(super) coverage: f64,
    /// Coverage of the rarest question terms (names, titles).
    pub(super) entity: f64,
}

/// The indices of the `n` terms of highest IDF, in term order.
pub(super) fn rarest_indices(w: &WeightedTerms, n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..w.terms.len()).collect();
    idx.sort_by(|a, b| w.terms[*b].1.total_cmp(&w.terms[*a].1).then(a.cmp(b)));
    idx.truncate(n);
    idx.sort_unstable();
    idx
}

/// The `n` terms of highest IDF (found in the collection or not).
pub(super) fn rarest(w: &WeightedTerms, n: usize) -> WeightedTerms {
    let idx = rarest_indices(w, n);
    let terms: Vec<(QueryTerm, f64)> = idx.iter().map(|&i| w.terms[i].clone()).collect();
    WeightedTerms {
        total: terms.iter().map(|t| t.1).sum(),
        dfs: idx.iter().map(|&i| w.dfs[i]).collect(),
        terms,
        docs: w.docs,
        bridges: translit::restrict(&w.bridges, &idx),
    }
}

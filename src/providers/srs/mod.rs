//! Retrieval over the museum's collection (the spec's SRS, §1.1 and §6.2 step 4).
//!
//! One trait, [`Retriever`], with the embedded SQLite index as the default implementation and a
//! remote HTTP service as the alternative. The pipeline, the offline answerer and the server
//! tools (`search_collection`, `get_exhibit`) only see this trait.

use std::future::Future;
use std::pin::Pin;

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

/// A search result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub exhibit: Exhibit,
    /// Higher is better. Only hits at or above the configured no-answer threshold are returned.
    pub score: f64,
    /// The passages (sentences of the record) that matched best, most relevant first.
    pub passages: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SrsError {
    #[error("retrieval is unavailable: {0}")]
    Unavailable(String),
    #[error("retrieval timed out")]
    Timeout,
    #[error("retrieval failed: {0}")]
    Failed(String),
}

pub type SrsFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, SrsError>> + Send + 'a>>;

pub trait Retriever: Send + Sync {
    /// Name for logs and metrics (`embedded`, `remote`).
    fn name(&self) -> &'static str;
    /// The top `k` exhibits for a visitor's question; empty when nothing clears the threshold.
    fn search<'a>(&'a self, query: &'a str, k: usize) -> SrsFuture<'a, Vec<Hit>>;
    /// One exhibit by id.
    fn get<'a>(&'a self, id: &'a str) -> SrsFuture<'a, Option<Exhibit>>;
}

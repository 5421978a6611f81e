//! A [`Retriever`] backed by an external retrieval service over HTTP (`[srs] provider =
//! "remote"`). The service must implement:
//!
//! ```text
//! POST {remote_url}/search
//!   request:  {"query": "这件青铜鼎是什么年代的", "k": 5}
//!   response: 200 {"hits": [{"exhibit": EXHIBIT, "score": 0.82, "passages": ["...", "..."]}]}
//!             best first; `score` higher is better, hits under the service's own no-answer
//!             threshold left out ([] = nothing relevant); at most k hits are used.
//! GET {remote_url}/exhibits/{id}        (id percent-encoded as one path segment)
//!   response: 200 EXHIBIT, or 404 when there is no such exhibit
//!
//! EXHIBIT = {"id": "...", "title": "...", "maker", "date", "period", "medium", "dimensions",
//!            "gallery", "description", "language", "source", "license": "..." (optional,
//!            default ""), "extra": {...} (optional)}
//! ```
//!
//! With `remote_api_key_env` set, requests carry `Authorization: Bearer <key>`. Every call is
//! bounded by `remote_timeout_seconds`; failures come back as [`RetrievalError`] (the pipeline answers
//! without retrieval and logs them). The upstream body is never put in an error.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Exhibit, Hit, RetrievalError, RetrievalFuture, Retriever};

#[derive(Debug, Clone)]
pub struct RemoteOptions {
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub max_query_chars: usize,
}

pub struct RemoteRetriever {
    http: reqwest::Client,
    base: reqwest::Url,
    opts: RemoteOptions,
}

/// The request body of `POST /search`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct SearchRequest {
    pub query: String,
    pub k: usize,
}

/// The response body of `POST /search`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct SearchResponse {
    pub hits: Vec<Hit>,
}

impl RemoteRetriever {
    pub fn new(opts: RemoteOptions) -> Result<RemoteRetriever, RetrievalError> {
        let mut base = reqwest::Url::parse(opts.base_url.trim_end_matches('/')).map_err(|e| {
            RetrievalError::Unavailable(format!("invalid remote_url {:?}: {e}", opts.base_url))
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(RetrievalError::Unavailable(format!(
                "invalid remote_url {:?}: expected http(s)://host[/path]",
                opts.base_url
            )));
        }
        // So that joining segments appends to the path instead of replacing its last part.
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        let http = crate::util::http_client_builder()
            .connect_timeout(opts.timeout)
            .timeout(opts.timeout)
            .build()
            .map_err(|e| RetrievalError::Unavailable(format!("remote SRS client: {e}")))?;
        Ok(RemoteRetriever { http, base, opts })
    }

    fn url(&self, segments: &[&str]) -> reqwest::Url {
        let mut u = self.base.clone();
        if let Ok(mut p) = u.path_segments_mut() {
            p.pop_if_empty();
            p.extend(segments);
        }
        u
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, RetrievalError> {
        let req = match &self.opts.api_key {
            Some(k) => req.bearer_auth(k),
            None => req,
        };
        tokio::time::timeout(self.opts.timeout + Duration::from_millis(100), req.send())
            .await
            .map_err(|_| RetrievalError::Timeout)?
            .map_err(map_err)
    }

    async fn body<T: serde::de::DeserializeOwned>(
        &self,
        resp: reqwest::Response,
    ) -> Result<T, RetrievalError> {
        tokio::time::timeout(
            self.opts.timeout + Duration::from_millis(100),
            resp.json::<T>(),
        )
        .await
        .map_err(|_| RetrievalError::Timeout)?
        .map_err(|e| {
            if e.is_timeout() {
                RetrievalError::Timeout
            } else {
                RetrievalError::Failed(format!("malformed answer from the remote SRS: {e}"))
            }
        })
    }
}

fn map_err(e: reqwest::Error) -> RetrievalError {
    if e.is_timeout() {
        RetrievalError::Timeout
    } else if e.is_connect() {
        RetrievalError::Unavailable(format!("cannot reach the remote SRS: {e}"))
    } else {
        RetrievalError::Failed(format!("remote SRS request failed: {e}"))
    }
}

fn status_error(status: reqwest::StatusCode) -> RetrievalError {
    RetrievalError::Failed(format!("the remote SRS answered HTTP {}", status.as_u16()))
}

impl Retriever for RemoteRetriever {
    fn name(&self) -> &'static str {
        "remote"
    }

    fn search<'a>(&'a self, query: &'a str, k: usize) -> RetrievalFuture<'a, Vec<Hit>> {
        Box::pin(async move {
            if query.trim().is_empty() || k == 0 {
                return Ok(Vec::new());
            }
            let body = SearchRequest {
                query: super::text::clip(query.trim(), self.opts.max_query_chars),
                k,
            };
            let resp = self
                .send(self.http.post(self.url(&["search"])).json(&body))
                .await?;
            if !resp.status().is_success() {
                return Err(status_error(resp.status()));
            }
            let mut r: SearchResponse = self.body(resp).await?;
            r.hits
                .retain(|h| !h.exhibit.id.is_empty() && h.score.is_finite());
            r.hits.truncate(k);
            Ok(r.hits)
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> RetrievalFuture<'a, Option<Exhibit>> {
        Box::pin(async move {
            if id.is_empty() {
                return Ok(None);
            }
            let resp = self
                .send(self.http.get(self.url(&["exhibits", id])))
                .await?;
            if resp.status() == reqwest::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !resp.status().is_success() {
                return Err(status_error(resp.status()));
            }
            Ok(Some(self.body(resp).await?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(base: &str) -> Result<RemoteRetriever, RetrievalError> {
        RemoteRetriever::new(RemoteOptions {
            base_url: base.into(),
            api_key: None,
            timeout: Duration::from_secs(1),
            max_query_chars: 100,
        })
    }

    #[test]
    fn urls_keep_the_base_path_and_encode_ids() {
        let x = r("http://127.0.0.1:9/srs/v1/").unwrap();
        assert_eq!(
            x.url(&["search"]).as_str(),
            "http://127.0.0.1:9/srs/v1/search"
        );
        assert_eq!(
            x.url(&["exhibits", "a/b c?"]).as_str(),
            "http://127.0.0.1:9/srs/v1/exhibits/a%2Fb%20c%3F"
        );
        let x = r("http://127.0.0.1:9").unwrap();
        assert_eq!(x.url(&["search"]).as_str(), "http://127.0.0.1:9/search");
    }

    #[test]
    fn bad_base_urls_are_refused() {
        assert!(r("").is_err());
        assert!(r("not a url").is_err());
        assert!(r("ftp://host/x").is_err());
    }
}

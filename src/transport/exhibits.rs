//! Read-only HTTP endpoints over the server's own collection, for the kiosk's cards and for apps
//! (docs/web-client.md, "The collection over HTTP"):
//!
//! - `GET /api/exhibits/{id}`: one record's published fields plus `display_description` (the
//!   description without its registration clause and accession numbers, cut at a sentence end,
//!   with an ellipsis when cut) and `display_size` (its measurements, "31 × 700.3 cm", when it
//!   gives any).
//! - `GET /api/exhibits?q=…&k=…`: the same search the WebSocket pipeline runs (the one
//!   [`Retriever`](crate::retrieval::Retriever) of the server, embedded or remote).
//! - Both take `script=simplified|traditional` (also `zh-Hans`/`zh-Hant`): Chinese text written
//!   in the other script is shown in this one (OpenCC, the same conversion the offline answerer
//!   quotes with), so a Simplified page never shows a Traditional record's card as stored. Latin
//!   text, ids and `language` are unchanged; without `script` a record is published as stored.
//!
//! Authenticated like REGISTER: `Authorization: Bearer mak_…` with an active API key, the same
//! failure counting and lockout per address. Ids are only ever looked up in the collection
//! (never a file read); anything under `/api/` that is not one of these routes is a 404.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::app::AppState;
use crate::auth::AuthError;
use crate::protocol::Auth;
use crate::retrieval::ingest::MAX_ID_CHARS;
use crate::retrieval::text::{Script, in_script};
use crate::retrieval::{Exhibit, RetrievalError};

/// Most hits one search returns.
pub const MAX_K: usize = 20;
/// Hits when `k` is absent.
pub const DEFAULT_K: usize = 5;
/// `display_description` is cut at a sentence end within this many characters.
pub const DISPLAY_CHARS: usize = 280;
/// Records change only on ingest; a card may be reused for a few minutes.
const CACHE_CONTROL: &str = "private, max-age=300";
/// Bound on one collection call (the WebSocket path's retrieval is bounded the same way).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// An exhibit as the endpoints publish it.
#[derive(Debug, Clone, Serialize)]
pub struct PublishedExhibit {
    #[serde(flatten)]
    pub exhibit: Exhibit,
    pub display_description: String,
    /// The record's measurements in centimetres, short ("31 × 700.3 cm": the first part's
    /// metric figures, [`crate::retrieval::sizing::size_of`]); absent when it gives none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_size: Option<String>,
}

impl From<Exhibit> for PublishedExhibit {
    fn from(exhibit: Exhibit) -> Self {
        // A visitor reads the description, not its registration clause ("國立歷史博物館館藏
        // 《中山勳章》(館藏編號30088)", which opened the card), as the offline answers quote it.
        let display_description = display_description(
            &crate::retrieval::text::without_registration(&exhibit.description),
            DISPLAY_CHARS,
        );
        let display_size =
            crate::retrieval::sizing::size_of(&exhibit.dimensions).map(|s| s.display());
        PublishedExhibit {
            exhibit,
            display_description,
            display_size,
        }
    }
}

impl PublishedExhibit {
    /// The record with its Chinese text in `script` (see the module docs).
    fn in_script(exhibit: Exhibit, script: Option<Script>) -> Self {
        let Some(script) = script else {
            return exhibit.into();
        };
        let c = |t: String| in_script(&t, script);
        Exhibit {
            title: c(exhibit.title),
            maker: c(exhibit.maker),
            date: c(exhibit.date),
            period: c(exhibit.period),
            medium: c(exhibit.medium),
            dimensions: c(exhibit.dimensions),
            gallery: c(exhibit.gallery),
            description: c(exhibit.description),
            ..exhibit
        }
        .into()
    }
}

/// The `script` query parameter: absent → as stored; an unknown value → `Err`.
fn parse_script(v: Option<&str>) -> Result<Option<Script>, ()> {
    match v.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => Ok(None),
        Some("simplified" | "zh-hans" | "zh-cn") => Ok(Some(Script::Simplified)),
        Some("traditional" | "zh-hant" | "zh-tw" | "zh-hk") => Ok(Some(Script::Traditional)),
        Some(_) => Err(()),
    }
}

/// A query string and its `script` parameter, or the 400 to answer (boxed: a `Response` is large).
fn read_query<T>(
    params: Result<Query<T>, axum::extract::rejection::QueryRejection>,
    script: impl Fn(&T) -> Option<&str>,
) -> Result<(T, Option<Script>), Box<Response>> {
    let Ok(Query(params)) = params else {
        return Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "bad_query",
            "the query string is not valid",
        )));
    };
    match parse_script(script(&params)) {
        Ok(s) => Ok((params, s)),
        Err(()) => Err(Box::new(bad_script())),
    }
}

fn bad_script() -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "bad_script",
        "script must be simplified or traditional (or zh-Hans, zh-Hant)",
    )
}

/// The description cut to about `max` characters at the last sentence end that fits, with `…`
/// when anything was cut. Whitespace runs become one space.
pub fn display_description(text: &str, max: usize) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max).collect();
    let end = cut
        .char_indices()
        .filter(|&(i, c)| {
            matches!(c, '。' | '！' | '？' | '；' | '!' | '?' | ';')
                // A full stop ends a sentence only before a space (not "1.5", "St.Louis").
                || (c == '.' && cut[i + 1..].starts_with(' '))
        })
        .map(|(i, c)| i + c.len_utf8())
        .rfind(|&i| i > cut.len() / 3);
    match end {
        // "… the inro. …" in Latin text; "……之篇。…" in CJK text, where no space is written.
        Some(i) if cut[..i].ends_with(|c: char| c.is_ascii()) => format!("{} …", &cut[..i]),
        Some(i) => format!("{}…", &cut[..i]),
        None => {
            // No sentence end: cut at the last word boundary (CJK text has none: cut anywhere).
            let at = cut
                .rfind(' ')
                .filter(|&i| i > cut.len() / 2)
                .unwrap_or(cut.len());
            format!("{}…", cut[..at].trim_end_matches([' ', ',', '，', '、']))
        }
    }
}

/// A strong ETag from the record's content: the SHA-256 of its published JSON.
pub fn etag(body: &[u8]) -> String {
    let d = Sha256::digest(body);
    format!("\"{}\"", hex::encode(&d[..16]))
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [(header::CACHE_CONTROL, "no-store")],
        Json(json!({"error": code, "message": message})),
    )
        .into_response()
}

/// Checks `Authorization: Bearer mak_…` like a REGISTER with API_KEY auth.
async fn authorize(app: &AppState, peer: SocketAddr, headers: &HeaderMap) -> Result<(), Response> {
    let Some(key) = super::bearer(headers) else {
        return Err(unauthorized(
            "an API key is required (Authorization: Bearer …)",
        ));
    };
    let auth = Auth::ApiKey {
        api_key: key.to_string(),
    };
    match tokio::time::timeout(LOOKUP_TIMEOUT, app.auth.authenticate(peer.ip(), &auth)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(AuthError::Invalid)) => Err(unauthorized("invalid credentials")),
        Ok(Err(AuthError::Locked)) => Err((
            StatusCode::TOO_MANY_REQUESTS,
            [
                (
                    header::RETRY_AFTER,
                    app.config.auth.lockout_seconds.to_string(),
                ),
                (header::CACHE_CONTROL, "no-store".to_string()),
            ],
            Json(json!({"error": "locked",
                        "message": "too many failed attempts from this address; try again later"})),
        )
            .into_response()),
        Ok(Err(AuthError::Internal(e))) => {
            tracing::error!(error = %e, "authentication backend failed");
            Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "authentication is unavailable; retry later",
            ))
        }
        Err(_) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "authentication took too long; retry",
        )),
    }
}

fn unauthorized(message: &str) -> Response {
    let mut r = error(StatusCode::UNAUTHORIZED, "unauthorized", message);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"museum-agent\""),
    );
    r
}

fn retrieval_failed(e: Option<RetrievalError>) -> Response {
    if let Some(e) = &e {
        tracing::warn!(error = %e, "collection lookup failed");
    }
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "the collection is unavailable; retry later",
    )
}

/// Whether `id` can name an exhibit at all (the ingest's rules): 1–200 characters, no control
/// characters.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().count() <= MAX_ID_CHARS && !id.chars().any(char::is_control)
}

/// `GET /api/exhibits/{id}`.
pub async fn get_one(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    params: Result<Query<ScriptParam>, axum::extract::rejection::QueryRejection>,
) -> Response {
    if let Err(r) = authorize(&app, peer, &headers).await {
        return r;
    }
    let (_, script) = match read_query(params, |p| p.script.as_deref()) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let Ok(Path(id)) = id else {
        return error(StatusCode::BAD_REQUEST, "bad_id", "the id is not valid");
    };
    if id.len() > 4 * MAX_ID_CHARS || !valid_id(&id) {
        return error(StatusCode::BAD_REQUEST, "bad_id", "the id is not valid");
    }
    let Some(retriever) = app.deps.retriever.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no_collection",
            "this server has no collection ([srs] provider = \"none\")",
        );
    };
    let found = match tokio::time::timeout(LOOKUP_TIMEOUT, retriever.get(&id)).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return retrieval_failed(Some(e)),
        Err(_) => return retrieval_failed(None),
    };
    let Some(exhibit) = found else {
        return error(StatusCode::NOT_FOUND, "not_found", "no exhibit has this id");
    };
    let body = match serde_json::to_vec(&PublishedExhibit::in_script(exhibit, script)) {
        Ok(b) => b,
        Err(_) => return retrieval_failed(None),
    };
    let tag = etag(&body);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&tag) {
        h.insert(header::ETAG, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(CACHE_CONTROL),
    );
    h.insert(header::VARY, HeaderValue::from_static("Authorization"));
    resp
}

#[derive(Debug, Deserialize)]
pub struct ScriptParam {
    pub script: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct SearchParams {
    pub q: Option<String>,
    pub k: Option<String>,
    pub script: Option<String>,
}

/// `GET /api/exhibits?q=…&k=…`. `q` is required and cut like the WebSocket path's question
/// (`[srs] max_query_chars`); `k` is 1–20 (default 5); `script` as for one record.
pub async fn search(
    State(app): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    params: Result<Query<SearchParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    if let Err(r) = authorize(&app, peer, &headers).await {
        return r;
    }
    let (params, script) = match read_query(params, |p| p.script.as_deref()) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let k = match params.k.as_deref().map(str::parse::<usize>) {
        None => DEFAULT_K,
        Some(Ok(k)) if (1..=MAX_K).contains(&k) => k,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_k",
                &format!("k must be a whole number from 1 to {MAX_K}"),
            );
        }
    };
    let q = params.q.unwrap_or_default();
    if q.trim().is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_q",
            "q (the search text) is required",
        );
    }
    if q.chars().any(|c| c.is_control() && !c.is_whitespace()) {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_q",
            "q contains control characters",
        );
    }
    let max = app.config.srs.max_query_chars;
    let q: String = if q.chars().count() > max {
        q.chars().take(max).collect()
    } else {
        q
    };
    let Some(retriever) = app.deps.retriever.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no_collection",
            "this server has no collection ([srs] provider = \"none\")",
        );
    };
    let hits = match tokio::time::timeout(LOOKUP_TIMEOUT, retriever.search(&q, k)).await {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => return retrieval_failed(Some(e)),
        Err(_) => return retrieval_failed(None),
    };
    let hits: Vec<_> = hits
        .into_iter()
        .map(|h| {
            json!({
                "score": h.score,
                "passages": match script {
                    Some(sc) => h.passages.iter().map(|p| in_script(p, sc)).collect(),
                    None => h.passages,
                },
                "exhibit": PublishedExhibit::in_script(h.exhibit, script),
            })
        })
        .collect();
    (
        [(header::CACHE_CONTROL, "private, max-age=60")],
        Json(json!({"query": q, "k": k, "retriever": retriever.name(), "hits": hits})),
    )
        .into_response()
}

/// Anything else under `/api/`: 404, never the static file service.
pub async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// Longest file name the static service could open (NAME_MAX on Linux), in bytes.
const NAME_MAX: usize = 255;

/// Bytes of `seg` once percent-decoded.
fn decoded_len(seg: &str) -> usize {
    let b = seg.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        let escaped = b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit();
        i += if escaped { 3 } else { 1 };
        n += 1;
    }
    n
}

/// Middleware: a path with a segment longer than any file name can be (or a path longer than
/// PATH_MAX) names no file: 404 before the static file service sees it (it would fail with
/// ENAMETOOLONG and answer 500).
pub async fn long_paths_404(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let path = req.uri().path();
    let too_long = path.len() > 4096
        || path
            .split('/')
            .any(|seg| seg.len() > NAME_MAX && decoded_len(seg) > NAME_MAX);
    if too_long {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cards_description_leaves_the_registration_clause_out() {
        let e = Exhibit {
            description:
                "國立歷史博物館館藏《中山勳章》(館藏編號30088) 本件為一組正副兩章，並配有綬帶。"
                    .into(),
            ..Default::default()
        };
        let p = PublishedExhibit::from(e);
        assert_eq!(p.display_description, "本件為一組正副兩章，並配有綬帶。");
        assert!(
            p.exhibit.description.contains("館藏編號30088"),
            "published as stored"
        );
    }

    #[test]
    fn display_description_cuts_at_a_sentence_with_an_ellipsis() {
        assert_eq!(display_description("Short.  Text\n", 100), "Short. Text");
        let en = "A bowl made in 1.5 years. It was used for wine. ".repeat(20);
        let d = display_description(&en, 100);
        assert!(d.ends_with(". …"), "{d}");
        assert!(d.chars().count() <= 102, "{d}");
        assert!(!d.contains("1.…"));
        let zh = "此誌為唐代所刻，字體端正。後人珍藏多年。".repeat(30);
        let d = display_description(&zh, 50);
        assert!(d.ends_with("。…"), "{d}");
        let words = "word ".repeat(100);
        let d = display_description(&words, 23);
        assert_eq!(d, "word word word word…");
    }

    #[test]
    fn ids() {
        assert!(valid_id("walters-33094"));
        assert!(valid_id("../etc/passwd")); // looked up, never opened: 404
        assert!(!valid_id(""));
        assert!(!valid_id("a\u{0}b"));
        assert!(!valid_id(&"x".repeat(201)));
    }

    #[test]
    fn etags_follow_content() {
        assert_eq!(etag(b"a"), etag(b"a"));
        assert_ne!(etag(b"a"), etag(b"b"));
        assert!(etag(b"a").starts_with('"'));
    }
}

//! The HTTP + server-sent-events exchange every streaming vendor API shares: send the request,
//! turn a non-2xx status into [`LlmError::Status`] (reading a little of the body for the log,
//! never waiting long), then feed each event's `data` to the vendor's [`SseParser`] and yield
//! the segments it completes, ending with what the parser says at the end of the body.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};

use super::{LlmError, Segment, SegmentStream};

/// How an HTTP vendor provider is set up (the same settings for every vendor).
pub struct HttpOptions {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub connect_timeout: Duration,
}

/// The HTTP client a vendor provider uses (kept alive connections, the connect timeout).
pub fn http_client(connect_timeout: Duration) -> Result<reqwest::Client, LlmError> {
    crate::util::http_client_builder()
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| LlmError::Connect(format!("cannot build HTTP client: {e}")))
}

/// A vendor's stream format: `data:` payloads in, segments out.
pub trait SseParser: Send + 'static {
    /// One event's data; the segments it completes.
    fn push(&mut self, data: &str) -> Result<Vec<Segment>, LlmError>;
    /// True once the vendor signalled the end in-band (e.g. OpenAI's `[DONE]`).
    fn finished(&self) -> bool;
    /// The body ended (or `finished`): the remaining segments, the last being `Done`.
    fn end(&mut self) -> Result<Vec<Segment>, LlmError>;
}

pub(crate) fn map_reqwest(e: reqwest::Error) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout(e.to_string())
    } else if e.is_connect() {
        LlmError::Connect(e.to_string())
    } else {
        LlmError::Closed(e.to_string())
    }
}

/// At most 200 bytes of `s`, cut at a character boundary (for logs).
pub(crate) fn snippet(s: &str) -> String {
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

type Events = Pin<Box<dyn Stream<Item = Result<eventsource_stream::Event, String>> + Send>>;

enum State<P> {
    Start(Box<reqwest::RequestBuilder>, P),
    Streaming(Events, P, VecDeque<Segment>),
    Draining(VecDeque<Segment>),
    Finished,
}

/// The whole exchange as one stream of segments. Dropping it closes the connection.
pub fn segments<P: SseParser>(builder: reqwest::RequestBuilder, parser: P) -> SegmentStream {
    let s = futures_util::stream::unfold(
        State::Start(Box::new(builder), parser),
        |state| async move {
            let mut state = state;
            loop {
                state = match state {
                    State::Finished => return None,
                    State::Draining(mut q) => {
                        let seg = q.pop_front()?;
                        return Some((Ok(seg), State::Draining(q)));
                    }
                    State::Start(builder, parser) => {
                        let resp = match builder.send().await {
                            Ok(r) => r,
                            Err(e) => return Some((Err(map_reqwest(e)), State::Finished)),
                        };
                        let status = resp.status();
                        if !status.is_success() {
                            let body = tokio::time::timeout(Duration::from_secs(2), resp.text())
                                .await
                                .ok()
                                .and_then(Result::ok)
                                .map(|b| snippet(&b))
                                .unwrap_or_default();
                            let e = LlmError::Status {
                                status: status.as_u16(),
                                body,
                            };
                            return Some((Err(e), State::Finished));
                        }
                        let events = resp
                            .bytes_stream()
                            .eventsource()
                            .map(|r| r.map_err(|e| e.to_string()));
                        State::Streaming(Box::pin(events), parser, VecDeque::new())
                    }
                    State::Streaming(mut events, mut parser, mut pending) => {
                        if let Some(seg) = pending.pop_front() {
                            return Some((Ok(seg), State::Streaming(events, parser, pending)));
                        }
                        let next = if parser.finished() {
                            None
                        } else {
                            events.next().await
                        };
                        match next {
                            Some(Ok(ev)) => match parser.push(&ev.data) {
                                Ok(segs) => {
                                    pending.extend(segs);
                                    State::Streaming(events, parser, pending)
                                }
                                Err(e) => return Some((Err(e), State::Finished)),
                            },
                            Some(Err(e)) => {
                                return Some((Err(LlmError::Closed(e)), State::Finished));
                            }
                            None => match parser.end() {
                                Ok(rest) => State::Draining(rest.into()),
                                Err(e) => return Some((Err(e), State::Finished)),
                            },
                        }
                    }
                };
            }
        },
    );
    Box::pin(s)
}

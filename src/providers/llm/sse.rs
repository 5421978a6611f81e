//! The HTTP + server-sent-events exchange every streaming vendor API shares: send the request,
//! turn a non-2xx status into [`LlmError::Status`] (reading a little of the body for the log,
//! never waiting long), then feed each event's `data` to the vendor's [`SseParser`] and yield
//! the segments it completes, ending with what the parser says at the end of the body.
//!
//! Bytes that arrive but complete no segment (a keep-alive comment such as llama.cpp's `:`
//! sent every `--sse-ping-interval` seconds while it reads a long prompt or builds a tool call,
//! a role-only chunk, a tool-call fragment, a usage chunk) yield one [`Segment::KeepAlive`], so
//! the caller's timers see that the endpoint is still working.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;

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
    /// [`SseParser::push`] appending to `out` (a parser can skip the `Vec` per event); on an
    /// error nothing of this event is appended.
    fn push_into(&mut self, data: &str, out: &mut VecDeque<Segment>) -> Result<(), LlmError> {
        out.extend(self.push(data)?);
        Ok(())
    }
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

type Body = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// One item of an event stream: a complete event's `data`, or a comment line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    Data(String),
    Comment,
}

/// [`SseItem`] borrowed from the parser's buffers, as [`SseLines::push_with`] hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseEvent<'a> {
    Data(&'a str),
    Comment,
}

/// The event-stream format (WHATWG server-sent events) reduced to what chat APIs use: `data`
/// fields joined by newlines, dispatched at a blank line; comment lines (`:...`) reported
/// (they are keep-alives); `event`, `id` and `retry` ignored. Lines end with LF or CRLF. An
/// event not closed by a blank line when the body ends is discarded, as the format says.
///
/// Lines are read where they arrived: only a line cut by the end of a read is copied (kept
/// until the rest comes), and an event's data goes into one buffer kept for the stream.
#[derive(Debug, Default)]
pub struct SseLines {
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// The current event's data, valid while `has_data`.
    data: String,
    has_data: bool,
}

impl SseLines {
    /// Feeds bytes as they arrive; returns the items they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseItem>, LlmError> {
        let mut out = Vec::new();
        self.push_with(bytes, |e| {
            out.push(match e {
                SseEvent::Data(d) => SseItem::Data(d.to_string()),
                SseEvent::Comment => SseItem::Comment,
            });
            Ok(())
        })?;
        Ok(out)
    }

    /// Feeds bytes as they arrive, handing each item they complete to `on`, in order. The
    /// first error (`on`'s, or the stream's) stops the feed and is returned.
    pub fn push_with(
        &mut self,
        mut bytes: &[u8],
        mut on: impl FnMut(SseEvent<'_>) -> Result<(), LlmError>,
    ) -> Result<(), LlmError> {
        if !self.partial.is_empty() {
            let Some(nl) = memchr::memchr(b'\n', bytes) else {
                self.partial.extend_from_slice(bytes);
                return self.check_partial();
            };
            self.partial.extend_from_slice(&bytes[..nl]);
            bytes = &bytes[nl + 1..];
            let line = std::mem::take(&mut self.partial);
            let res = self.line(&line, &mut on);
            self.partial = line;
            self.partial.clear();
            res?;
        }
        while let Some(nl) = memchr::memchr(b'\n', bytes) {
            self.line(&bytes[..nl], &mut on)?;
            bytes = &bytes[nl + 1..];
        }
        self.partial.extend_from_slice(bytes);
        self.check_partial()
    }

    fn check_partial(&self) -> Result<(), LlmError> {
        if self.partial.len() > MAX_LINE_BYTES {
            return Err(LlmError::Malformed(format!(
                "an event-stream line is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// One complete line, without its LF.
    fn line(
        &mut self,
        mut line: &[u8],
        on: &mut impl FnMut(SseEvent<'_>) -> Result<(), LlmError>,
    ) -> Result<(), LlmError> {
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        let line = std::str::from_utf8(line)
            .map_err(|_| LlmError::Malformed("the event stream is not valid UTF-8".into()))?;
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                on(SseEvent::Data(&self.data))?;
            }
        } else if line.starts_with(':') {
            on(SseEvent::Comment)?;
        } else {
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            if field == "data" {
                if self.has_data {
                    self.data.push('\n');
                } else {
                    self.data.clear();
                    self.has_data = true;
                }
                self.data.push_str(value);
            }
        }
        Ok(())
    }
}

/// Longest line accepted (a whole chunk of JSON is one line).
const MAX_LINE_BYTES: usize = 4 << 20;

type Connecting = Pin<Box<dyn Future<Output = Result<Body, LlmError>> + Send>>;

enum State {
    /// The request sent, its response awaited.
    Connecting(Connecting),
    Streaming(Body),
    /// The body is over (or the vendor said so): `pending` holds the last segments.
    Draining,
    Finished,
}

/// The exchange as a stream of segments; a plain state machine over fields that stay in
/// place (an `unfold` moved its whole state in and out of a future on every segment).
struct Segments<P> {
    state: State,
    lines: SseLines,
    parser: P,
    /// Segments completed and not yet yielded.
    pending: VecDeque<Segment>,
}

/// Sends the request; the body of a 2xx response, or the error.
async fn connect(builder: reqwest::RequestBuilder) -> Result<Body, LlmError> {
    let resp = builder.send().await.map_err(map_reqwest)?;
    let status = resp.status();
    if !status.is_success() {
        let body = tokio::time::timeout(Duration::from_secs(2), resp.text())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| snippet(&b))
            .unwrap_or_default();
        return Err(LlmError::Status {
            status: status.as_u16(),
            body,
        });
    }
    Ok(Box::pin(resp.bytes_stream()))
}

impl<P: SseParser + Unpin> Stream for Segments<P> {
    type Item = Result<Segment, LlmError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Finished => return Poll::Ready(None),
                State::Draining => {
                    let seg = this.pending.pop_front();
                    if seg.is_none() {
                        this.state = State::Finished;
                    }
                    return Poll::Ready(seg.map(Ok));
                }
                State::Connecting(fut) => match ready!(fut.as_mut().poll(cx)) {
                    Ok(body) => this.state = State::Streaming(body),
                    Err(e) => return this.fail(e),
                },
                State::Streaming(body) => {
                    if let Some(seg) = this.pending.pop_front() {
                        return Poll::Ready(Some(Ok(seg)));
                    }
                    let next = if this.parser.finished() {
                        None
                    } else {
                        ready!(body.as_mut().poll_next(cx))
                    };
                    match next {
                        Some(Ok(bytes)) => {
                            let (parser, pending) = (&mut this.parser, &mut this.pending);
                            let fed = this.lines.push_with(&bytes, |event| match event {
                                SseEvent::Data(data) if !parser.finished() => {
                                    parser.push_into(data, pending)
                                }
                                _ => Ok(()),
                            });
                            if let Err(e) = fed {
                                return this.fail(e);
                            }
                            if this.pending.is_empty() {
                                this.pending.push_back(Segment::KeepAlive);
                            }
                        }
                        Some(Err(e)) => return this.fail(map_reqwest(e)),
                        None => match this.parser.end() {
                            Ok(rest) => {
                                this.pending.clear();
                                this.pending.extend(rest);
                                this.state = State::Draining; // drops the body
                            }
                            Err(e) => return this.fail(e),
                        },
                    }
                }
            }
        }
    }
}

impl<P> Segments<P> {
    /// Ends the stream with `e` (nothing else is yielded after it).
    fn fail(&mut self, e: LlmError) -> Poll<Option<Result<Segment, LlmError>>> {
        self.state = State::Finished;
        self.pending.clear();
        Poll::Ready(Some(Err(e)))
    }
}

/// The whole exchange as one stream of segments. Dropping it closes the connection.
pub fn segments<P: SseParser + Unpin>(
    builder: reqwest::RequestBuilder,
    parser: P,
) -> SegmentStream {
    Box::pin(Segments {
        state: State::Connecting(Box::pin(connect(builder))),
        lines: SseLines::default(),
        parser,
        pending: VecDeque::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(chunks: &[&[u8]]) -> Vec<SseItem> {
        let mut l = SseLines::default();
        chunks.iter().flat_map(|c| l.push(c).unwrap()).collect()
    }

    #[test]
    fn llama_cpp_pings_are_comments() {
        // Verbatim: llama.cpp's server writes ":\n\n" every --sse-ping-interval seconds while
        // it has nothing else to send (here while it read a 1,100-token prompt with 1 thread).
        assert_eq!(
            items(&[b":\n\n", b":\n\n", b"data: {\"a\":1}\n\n"]),
            vec![
                SseItem::Comment,
                SseItem::Comment,
                SseItem::Data("{\"a\":1}".into())
            ]
        );
    }

    #[test]
    fn events_split_anywhere_crlf_and_multiline_data() {
        let whole: &[u8] = b"event: x\r\ndata: one\r\ndata:two\r\nid: 7\r\n\r\ndata: [DONE]\n\n";
        let expect = vec![
            SseItem::Data("one\ntwo".into()),
            SseItem::Data("[DONE]".into()),
        ];
        for cut in 0..whole.len() {
            assert_eq!(
                items(&[&whole[..cut], &whole[cut..]]),
                expect,
                "cut at {cut}"
            );
        }
        // A multi-byte character split across reads.
        let s = "data: 你好\n\n".as_bytes();
        assert_eq!(
            items(&[&s[..7], &s[7..]]),
            vec![SseItem::Data("你好".into())]
        );
    }

    #[test]
    fn an_unterminated_event_is_dropped_and_bad_utf8_refused() {
        assert!(items(&[b"data: {\"cut\""]).is_empty());
        let mut l = SseLines::default();
        assert!(matches!(
            l.push(b"data: \xff\n\n"),
            Err(LlmError::Malformed(_))
        ));
    }
}

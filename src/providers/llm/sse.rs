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
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
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

/// The event-stream format (WHATWG server-sent events) reduced to what chat APIs use: `data`
/// fields joined by newlines, dispatched at a blank line; comment lines (`:...`) reported
/// (they are keep-alives); `event`, `id` and `retry` ignored. Lines end with LF or CRLF. An
/// event not closed by a blank line when the body ends is discarded, as the format says.
#[derive(Debug, Default)]
pub struct SseLines {
    buf: Vec<u8>,
    data: Option<String>,
}

impl SseLines {
    /// Feeds bytes as they arrive; returns the items they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseItem>, LlmError> {
        let mut out = Vec::new();
        self.push_into(bytes, &mut out)?;
        Ok(out)
    }

    /// [`SseLines::push`] appending to `out`, so a caller can reuse one `Vec` for a stream.
    pub fn push_into(&mut self, bytes: &[u8], out: &mut Vec<SseItem>) -> Result<(), LlmError> {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let mut line = &self.buf[start..start + nl];
            start += nl + 1;
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            let line = std::str::from_utf8(line)
                .map_err(|_| LlmError::Malformed("the event stream is not valid UTF-8".into()))?;
            if line.is_empty() {
                if let Some(d) = self.data.take() {
                    out.push(SseItem::Data(d));
                }
            } else if line.starts_with(':') {
                out.push(SseItem::Comment);
            } else {
                let (field, value) = match line.split_once(':') {
                    Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                    None => (line, ""),
                };
                if field == "data" {
                    match self.data.as_mut() {
                        Some(d) => {
                            d.push('\n');
                            d.push_str(value);
                        }
                        None => self.data = Some(value.to_string()),
                    }
                }
            }
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(LlmError::Malformed(format!(
                "an event-stream line is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(())
    }
}

/// Longest line accepted (a whole chunk of JSON is one line).
const MAX_LINE_BYTES: usize = 4 << 20;

enum State<P> {
    Start(Box<reqwest::RequestBuilder>, P),
    /// The body, its lines, the parser, segments ready, and the items buffer reused per read.
    Streaming(Body, SseLines, P, VecDeque<Segment>, Vec<SseItem>),
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
                        let body: Body = Box::pin(resp.bytes_stream());
                        State::Streaming(
                            body,
                            SseLines::default(),
                            parser,
                            VecDeque::new(),
                            Vec::new(),
                        )
                    }
                    State::Streaming(mut body, mut lines, mut parser, mut pending, mut items) => {
                        if let Some(seg) = pending.pop_front() {
                            let state = State::Streaming(body, lines, parser, pending, items);
                            return Some((Ok(seg), state));
                        }
                        let next = if parser.finished() {
                            None
                        } else {
                            body.next().await
                        };
                        match next {
                            Some(Ok(bytes)) => {
                                items.clear();
                                if let Err(e) = lines.push_into(&bytes, &mut items) {
                                    return Some((Err(e), State::Finished));
                                }
                                for item in items.drain(..) {
                                    let SseItem::Data(data) = item else { continue };
                                    if let Err(e) = parser.push_into(&data, &mut pending) {
                                        return Some((Err(e), State::Finished));
                                    }
                                    if parser.finished() {
                                        break;
                                    }
                                }
                                if pending.is_empty() {
                                    pending.push_back(Segment::KeepAlive);
                                }
                                State::Streaming(body, lines, parser, pending, items)
                            }
                            Some(Err(e)) => {
                                return Some((Err(map_reqwest(e)), State::Finished));
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

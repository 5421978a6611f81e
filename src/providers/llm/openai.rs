//! OpenAI-compatible `POST {base_url}/chat/completions` with `stream: true` (server-sent events of
//! `chat.completion.chunk` objects, ended by `data: [DONE]`). Spoken by OpenAI, DeepSeek,
//! DashScope's compatible mode, vLLM, llama.cpp's server, Ollama and others.
//!
//! Tool calls arrive as `delta.tool_calls[]` fragments keyed by `index`: the first fragment of a
//! call carries `id` and `function.name`, later ones append to `function.arguments`. They are
//! accumulated and emitted as complete [`Segment::ToolCall`]s when the choice finishes.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Value, json};

use super::sse::snippet;

use super::{
    ChatMessage, ChatRequest, LlmError, LlmProvider, Metadata, Role, Segment, SegmentStream,
    ToolCall,
};

#[derive(Clone)]
pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

pub type OpenAiOptions = super::sse::HttpOptions;

impl OpenAiProvider {
    pub fn new(o: OpenAiOptions) -> Result<Self, LlmError> {
        let client = super::sse::http_client(o.connect_timeout)?;
        Ok(OpenAiProvider {
            client,
            url: format!("{}/chat/completions", o.base_url.trim_end_matches('/')),
            model: o.model,
            api_key: o.api_key,
            temperature: o.temperature,
            max_tokens: o.max_tokens,
        })
    }

    /// The request body (public for tests and the load tool).
    pub fn body(&self, req: &ChatRequest) -> Value {
        let messages: Vec<Value> = req.messages.iter().map(message_json).collect();
        // Without `stream_options.include_usage` OpenAI, llama.cpp and vLLM send no token
        // counts in a stream; with it they add a last chunk with `"choices": []` and `usage`.
        let mut body = json!({"model": self.model, "messages": messages, "stream": true,
                              "stream_options": {"include_usage": true}});
        if !req.tools.is_empty() {
            body["tools"] = Value::Array(
                req.tools
                    .iter()
                    .map(|t| {
                        json!({"type": "function", "function": {
                            "name": t.name, "description": t.description, "parameters": t.parameters}})
                    })
                    .collect(),
            );
        }
        if let Some(t) = self.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(m) = self.max_tokens {
            body["max_tokens"] = json!(m);
        }
        body
    }
}

fn message_json(m: &ChatMessage) -> Value {
    match m.role {
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Assistant if m.tool_calls.is_empty() => {
            json!({"role": "assistant", "content": m.content})
        }
        Role::Assistant => json!({
            "role": "assistant",
            "content": if m.content.is_empty() { Value::Null } else { json!(m.content) },
            "tool_calls": m.tool_calls.iter().map(|c| json!({
                "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.raw_arguments()}
            })).collect::<Vec<_>>()
        }),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content
        }),
    }
}

#[derive(Default, Debug)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Turns `data:` payloads of the SSE stream into segments. Pure; tested on recorded streams.
#[derive(Default, Debug)]
pub struct ChunkParser {
    calls: BTreeMap<u64, PartialCall>,
    meta: Metadata,
    done: bool,
}

impl ChunkParser {
    /// Feeds one `data:` payload. Returns the segments it completes.
    pub fn push(&mut self, data: &str) -> Result<Vec<Segment>, LlmError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(self.flush_calls());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(out) = self.push_common(data) {
            return Ok(out);
        }
        self.push_value(data)
    }

    /// Any chunk, read as a `Value` tree: the general path.
    fn push_value(&mut self, data: &str) -> Result<Vec<Segment>, LlmError> {
        let v: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::Malformed(format!("chunk is not JSON ({e}): {}", snippet(data)))
        })?;
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return Err(LlmError::Upstream(msg));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.meta.prompt_tokens = u.get("prompt_tokens").and_then(Value::as_u64);
            self.meta.completion_tokens = u.get("completion_tokens").and_then(Value::as_u64);
        }
        let choices = match v.get("choices") {
            Some(Value::Array(c)) => c,
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(_) => {
                return Err(LlmError::Malformed(format!(
                    "`choices` is not an array: {}",
                    snippet(data)
                )));
            }
        };
        let mut out = Vec::new();
        // Only the first choice is used (n = 1).
        if let Some(choice) = choices
            .iter()
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(text) = delta.get("content").and_then(Value::as_str)
                && !text.is_empty()
            {
                out.push(Segment::Text(text.to_string()));
            }
            if let Some(calls) = delta.get("tool_calls") {
                let calls = calls.as_array().ok_or_else(|| {
                    LlmError::Malformed("`delta.tool_calls` is not an array".into())
                })?;
                for (pos, c) in calls.iter().enumerate() {
                    let index = c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64);
                    let entry = self.calls.entry(index).or_default();
                    if let Some(id) = c.get("id").and_then(Value::as_str) {
                        entry.id = id.to_string();
                    }
                    if let Some(f) = c.get("function") {
                        if let Some(n) = f.get("name").and_then(Value::as_str) {
                            entry.name.push_str(n);
                        }
                        if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                            entry.arguments.push_str(a);
                        }
                    }
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.meta.finish_reason = Some(reason.to_string());
                out.extend(self.flush_calls());
            }
        }
        Ok(out)
    }

    fn flush_calls(&mut self) -> Vec<Segment> {
        std::mem::take(&mut self.calls)
            .into_values()
            .map(|c| {
                let id = if c.id.is_empty() {
                    crate::util::random_id("call_")
                } else {
                    c.id
                };
                let args = if c.arguments.trim().is_empty() {
                    "{}".to_string()
                } else {
                    c.arguments
                };
                let arguments = match serde_json::from_str::<Value>(&args) {
                    Ok(v @ Value::Object(_)) => Ok(v),
                    _ => Err(args),
                };
                Segment::ToolCall(ToolCall {
                    id,
                    name: c.name,
                    arguments,
                })
            })
            .collect()
    }

    /// The stream ended. A stream that neither finished a choice nor sent `[DONE]` was cut off.
    pub fn end(&mut self) -> Result<Vec<Segment>, LlmError> {
        if !self.done && self.meta.finish_reason.is_none() {
            return Err(LlmError::Closed(
                "the stream ended without finish_reason or [DONE]".into(),
            ));
        }
        let mut out = self.flush_calls();
        out.push(Segment::Done(std::mem::take(&mut self.meta)));
        Ok(out)
    }

    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// The common chunk (text delta, role, finish reason) read without building a `Value` tree:
/// borrowed strings, unknown fields skipped, no allocation unless the text has escapes.
/// Anything else (an `error`, `usage`, `tool_calls`, or a field of an unexpected type) makes
/// [`ChunkParser::push`] read the chunk the general way, so the fast path changes no outcome,
/// only the work per streamed token.
#[derive(serde::Deserialize)]
struct FastChunk<'a> {
    #[serde(default, deserialize_with = "present")]
    error: bool,
    #[serde(default, deserialize_with = "present")]
    usage: bool,
    #[serde(borrow, default)]
    choices: Option<FastChoices<'a>>,
}

/// `choices`, read in place: the first choice of index 0 (the one the general path uses) and
/// whether any choice carries `tool_calls`. No `Vec` of choices is built.
#[derive(Default)]
struct FastChoices<'a> {
    first: Option<FastChoice<'a>>,
    tool_calls: bool,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for FastChoices<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = FastChoices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = FastChoices::default();
                while let Some(c) = seq.next_element::<FastChoice<'a>>()? {
                    out.tool_calls |= c.delta.as_ref().is_some_and(|d| d.tool_calls);
                    if out.first.is_none() && c.index.unwrap_or(0) == 0 {
                        out.first = Some(c);
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct FastChoice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<FastDelta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct FastDelta<'a> {
    #[serde(borrow, default)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    tool_calls: bool,
}

/// True when the field is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    <serde::de::IgnoredAny as serde::Deserialize>::deserialize(d).map(|_| true)
}

impl ChunkParser {
    /// The fast path of [`ChunkParser::push`]; None when the chunk needs the general one.
    fn push_common(&mut self, data: &str) -> Option<Vec<Segment>> {
        let mut out = VecDeque::new();
        self.push_common_into(data, &mut out).then(|| out.into())
    }

    /// The fast path, appending to `out`; false (and nothing changed) when the chunk needs the
    /// general path.
    fn push_common_into(&mut self, data: &str, out: &mut VecDeque<Segment>) -> bool {
        let Ok(chunk) = serde_json::from_str::<FastChunk>(data) else {
            return false;
        };
        if chunk.error || chunk.usage {
            return false;
        }
        let Some(choices) = chunk.choices else {
            return true;
        };
        if choices.tool_calls {
            return false;
        }
        if let Some(choice) = choices.first {
            if let Some(text) = choice.delta.and_then(|d| d.content)
                && !text.is_empty()
            {
                out.push_back(Segment::Text(text.into_owned()));
            }
            if let Some(reason) = choice.finish_reason {
                self.meta.finish_reason = Some(reason.into_owned());
                out.extend(self.flush_calls());
            }
        }
        true
    }
}

impl super::sse::SseParser for ChunkParser {
    fn push(&mut self, data: &str) -> Result<Vec<Segment>, LlmError> {
        ChunkParser::push(self, data)
    }

    fn push_into(&mut self, data: &str, out: &mut VecDeque<Segment>) -> Result<(), LlmError> {
        let t = data.trim();
        if t.is_empty() || t == "[DONE]" {
            out.extend(ChunkParser::push(self, data)?);
        } else if !self.push_common_into(t, out) {
            out.extend(self.push_value(t)?);
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.is_done()
    }

    fn end(&mut self) -> Result<Vec<Segment>, LlmError> {
        ChunkParser::end(self)
    }
}

impl LlmProvider for OpenAiProvider {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn stream(&self, request: ChatRequest) -> SegmentStream {
        let mut builder = self.client.post(&self.url).json(&self.body(&request));
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        super::sse::segments(builder, ChunkParser::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The fast path agrees with the general one on every chunk, ordinary or odd: where it
    /// cannot, it must hand the chunk over (same segments, same error, same metadata).
    #[test]
    fn the_fast_path_reads_chunks_exactly_as_the_general_path() {
        let chunks = [
            r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a \"quoted\" \u4f60 line\n"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"second"}},{"delta":{"content":"first"}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"only other"}}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":null}"#,
            r#"{"id":"x"}"#,
            r#"{"choices":{"index":0}}"#,
            r#"{"choices":["text"]}"#,
            r#"{"choices":[{"index":"0","delta":{"content":"str index"}}]}"#,
            r#"{"choices":[{"index":0.0,"delta":{"content":"float index"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":5}}]}"#,
            r#"{"choices":[{"index":0,"delta":"text"}]}"#,
            r#"{"choices":[{"index":0,"delta":null,"finish_reason":7}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            r#"{"choices":[],"usage":null}"#,
            r#"{"error":{"message":"overloaded"}}"#,
            r#"{"error":null,"choices":[]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":"no"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"not json"#,
            r#"[1,2]"#,
        ];
        for c in chunks {
            let (mut fast, mut general) = (ChunkParser::default(), ChunkParser::default());
            let a = fast.push(c);
            let b = general.push_value(c);
            assert_eq!(a, b, "{c}");
            assert_eq!(fast.meta, general.meta, "{c}");
        }
        // The ordinary chunk does take the fast path.
        assert!(
            ChunkParser::default()
                .push_common(chunks[0])
                .is_some_and(|s| s == vec![Segment::Text("Hi".into())])
        );
    }

    fn feed(parser: &mut ChunkParser, lines: &[&str]) -> Vec<Segment> {
        let mut out = Vec::new();
        for l in lines {
            out.extend(parser.push(l).unwrap());
        }
        out.extend(parser.end().unwrap());
        out
    }

    #[test]
    fn text_deltas_then_done() {
        let mut p = ChunkParser::default();
        let segs = feed(
            &mut p,
            &[
                r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
                r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
                r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}"#,
                r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ],
        );
        assert_eq!(segs[0], Segment::Text("Hello".into()));
        assert_eq!(segs[1], Segment::Text(" world".into()));
        assert!(matches!(&segs[2], Segment::Done(m) if m.finish_reason.as_deref() == Some("stop")));
        assert_eq!(segs.len(), 3);
    }

    #[test]
    fn split_and_parallel_tool_calls() {
        let mut p = ChunkParser::default();
        let segs = feed(
            &mut p,
            &[
                r#"{"choices":[{"index":0,"delta":{"content":"Let me show it."}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"show_exhibit","arguments":""}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"exhibit"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"navigate","arguments":"{}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"_id\":\"1001\"}"}}]}}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
                "[DONE]",
            ],
        );
        assert_eq!(segs[0], Segment::Text("Let me show it.".into()));
        assert_eq!(
            segs[1],
            Segment::ToolCall(ToolCall {
                id: "call_a".into(),
                name: "show_exhibit".into(),
                arguments: Ok(json!({"exhibit_id": "1001"}))
            })
        );
        assert!(
            matches!(&segs[2], Segment::ToolCall(c) if c.name == "navigate" && c.arguments == Ok(json!({})))
        );
        assert!(matches!(segs[3], Segment::Done(_)));
    }

    /// Verbatim from llama.cpp's server (xllamacpp 2026.10.11549, SmolLM2-135M), `max_tokens`
    /// reached, with `stream_options.include_usage`: a role chunk with `content: null`, the
    /// finish chunk carrying `timings`, then a usage chunk with no choices, then `[DONE]`.
    #[test]
    fn llama_cpp_stream_with_usage() {
        let m = r#""created":1795402461,"id":"chatcmpl-qDKN","model":"SmolLM2-135M-Instruct.Q4_1.gguf","system_fingerprint":"b0-unknown","object":"chat.completion.chunk""#;
        let lines = [
            format!(
                r#"{{"choices":[{{"finish_reason":null,"index":0,"delta":{{"role":"assistant","content":null}}}}],{m}}}"#
            ),
            format!(
                r#"{{"choices":[{{"finish_reason":null,"index":0,"delta":{{"content":"Hello"}}}}],{m}}}"#
            ),
            format!(
                r#"{{"choices":[{{"finish_reason":"length","index":0,"delta":{{}}}}],{m},"timings":{{"prompt_n":1,"predicted_n":3}}}}"#
            ),
            format!(
                r#"{{"choices":[],{m},"usage":{{"completion_tokens":3,"prompt_tokens":33,"total_tokens":36,"prompt_tokens_details":{{"cached_tokens":32}}}}}}"#
            ),
            "[DONE]".to_string(),
        ];
        let mut p = ChunkParser::default();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let segs = feed(&mut p, &refs);
        assert_eq!(segs[0], Segment::Text("Hello".into()));
        let Segment::Done(meta) = &segs[1] else {
            panic!("{segs:?}")
        };
        assert_eq!(meta.finish_reason.as_deref(), Some("length"));
        assert_eq!(meta.prompt_tokens, Some(33));
        assert_eq!(meta.completion_tokens, Some(3));
    }

    #[test]
    fn bad_arguments_and_missing_id() {
        let mut p = ChunkParser::default();
        let segs = feed(
            &mut p,
            &[
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{oops"}}]},"finish_reason":"tool_calls"}]}"#,
            ],
        );
        let Segment::ToolCall(c) = &segs[0] else {
            panic!()
        };
        assert!(c.id.starts_with("call_"));
        assert_eq!(c.arguments, Err("{oops".to_string()));
    }

    #[test]
    fn errors() {
        let mut p = ChunkParser::default();
        assert!(matches!(p.push("{nope"), Err(LlmError::Malformed(_))));
        assert!(matches!(
            p.push(r#"{"error":{"message":"quota exceeded"}}"#),
            Err(LlmError::Upstream(m)) if m == "quota exceeded"
        ));
        let mut cut = ChunkParser::default();
        cut.push(r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)
            .unwrap();
        assert!(matches!(cut.end(), Err(LlmError::Closed(_))));
    }

    #[test]
    fn body_carries_tools_and_history() {
        let p = OpenAiProvider::new(OpenAiOptions {
            base_url: "http://x/v1/".into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
            temperature: Some(0.2),
            max_tokens: None,
            connect_timeout: Duration::from_secs(1),
        })
        .unwrap();
        assert_eq!(p.url, "http://x/v1/chat/completions");
        assert!(!format!("{p:?}").contains("sk-secret"));
        let mut asst = ChatMessage::new(Role::Assistant, "");
        asst.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: Ok(json!({"a": 1})),
        });
        let mut tool = ChatMessage::new(Role::Tool, "ok");
        tool.tool_call_id = Some("c1".into());
        let req = ChatRequest {
            messages: vec![
                ChatMessage::new(Role::System, "sys"),
                ChatMessage::new(Role::User, "hi"),
                asst,
                tool,
            ],
            tools: vec![super::super::ToolSpec {
                name: "f".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
            }],
            ..Default::default()
        };
        let b = p.body(&req);
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["temperature"], 0.2);
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"a\":1}"
        );
        assert_eq!(b["messages"][2]["content"], Value::Null);
        assert_eq!(b["messages"][3]["tool_call_id"], "c1");
        assert_eq!(b["tools"][0]["function"]["name"], "f");
    }
}

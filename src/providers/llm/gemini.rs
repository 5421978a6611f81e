//! Google Gemini's native API: `POST {base_url}/models/{model}:streamGenerateContent?alt=sse`
//! with the key in `x-goog-api-key`. Each SSE `data:` is a whole `GenerateContentResponse`
//! (`candidates[0].content.parts[]` holding `text` or `functionCall {name, args, id?}`); there is
//! no `[DONE]`: the stream ends when the response body ends, and a candidate's `finishReason`
//! marks a complete reply.
//!
//! Up: the system prompt goes in `systemInstruction`; assistant turns are role `model`; tool
//! calls are `functionCall` parts and their results `functionResponse` parts (role `user`);
//! client and server tools become `tools[0].functionDeclarations`, their JSON Schemas reduced to
//! the OpenAPI subset Gemini accepts. Down: a call without an id gets a generated one (seed 003).

use serde_json::{Map, Value, json};

use super::{ChatRequest, LlmError, LlmProvider, Metadata, Role, Segment, SegmentStream, ToolCall};

#[derive(Clone)]
pub struct GeminiProvider {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
}

impl std::fmt::Debug for GeminiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeminiProvider")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .finish()
    }
}

pub type GeminiOptions = super::sse::HttpOptions;

impl GeminiProvider {
    pub fn new(o: GeminiOptions) -> Result<Self, LlmError> {
        let client = super::sse::http_client(o.connect_timeout)?;
        Ok(GeminiProvider {
            client,
            url: format!(
                "{}/models/{}:streamGenerateContent?alt=sse",
                o.base_url.trim_end_matches('/'),
                o.model
            ),
            api_key: o.api_key,
            temperature: o.temperature,
            max_tokens: o.max_tokens,
        })
    }

    /// The request body (public for tests).
    pub fn body(&self, req: &ChatRequest) -> Value {
        let system: Vec<&str> = req
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        // Tool results need the function name; find it from the call they answer.
        let call_name = |id: &str| {
            req.messages
                .iter()
                .flat_map(|m| m.tool_calls.iter())
                .find(|c| c.id == id)
                .map(|c| c.name.clone())
                .unwrap_or_default()
        };
        let mut contents: Vec<Value> = Vec::new();
        for m in req.messages.iter().filter(|m| m.role != Role::System) {
            let (role, parts) = match m.role {
                Role::User => ("user", vec![json!({"text": m.content})]),
                Role::Assistant => {
                    let mut parts = Vec::new();
                    if !m.content.is_empty() {
                        parts.push(json!({"text": m.content}));
                    }
                    for c in &m.tool_calls {
                        let args = c.arguments.clone().unwrap_or_else(|_| json!({}));
                        parts.push(json!({"functionCall": {"name": c.name, "args": args}}));
                    }
                    if parts.is_empty() {
                        parts.push(json!({"text": ""}));
                    }
                    ("model", parts)
                }
                Role::Tool => {
                    let id = m.tool_call_id.clone().unwrap_or_default();
                    let response = match serde_json::from_str::<Value>(&m.content) {
                        Ok(Value::Object(o)) => Value::Object(o),
                        Ok(other) => json!({"result": other}),
                        Err(_) => json!({"result": m.content}),
                    };
                    (
                        "user",
                        vec![
                            json!({"functionResponse": {"name": call_name(&id), "response": response}}),
                        ],
                    )
                }
                Role::System => unreachable!("filtered above"),
            };
            // Consecutive parts of one role are merged into one content (parallel calls and
            // their results travel together).
            match contents.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(arr) = last["parts"].as_array_mut() {
                        arr.extend(parts);
                    }
                }
                _ => contents.push(json!({"role": role, "parts": parts})),
            }
        }
        let mut body = json!({"contents": contents});
        if !system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": system.join("\n\n")}]});
        }
        if !req.tools.is_empty() {
            let decls: Vec<Value> = req
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description,
                           "parameters": gemini_schema(&t.parameters)})
                })
                .collect();
            body["tools"] = json!([{"functionDeclarations": decls}]);
        }
        let mut gen_cfg = Map::new();
        if let Some(t) = self.temperature {
            gen_cfg.insert("temperature".into(), json!(t));
        }
        if let Some(m) = self.max_tokens {
            gen_cfg.insert("maxOutputTokens".into(), json!(m));
        }
        if !gen_cfg.is_empty() {
            body["generationConfig"] = Value::Object(gen_cfg);
        }
        body
    }
}

/// Reduces a JSON Schema to the OpenAPI subset Gemini's `Schema` accepts.
pub fn gemini_schema(schema: &Value) -> Value {
    const KEEP: [&str; 10] = [
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "required",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
    ];
    let Value::Object(obj) = schema else {
        return json!({"type": "object"});
    };
    let mut out = Map::new();
    for (k, v) in obj {
        match k.as_str() {
            "properties" => {
                if let Value::Object(props) = v {
                    let p: Map<String, Value> = props
                        .iter()
                        .map(|(name, s)| (name.clone(), gemini_schema(s)))
                        .collect();
                    out.insert(k.clone(), Value::Object(p));
                }
            }
            "items" => {
                out.insert(k.clone(), gemini_schema(v));
            }
            key if KEEP.contains(&key) => {
                out.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    if let Some(Value::String(t)) = out.get("type") {
        let upper = t.to_ascii_uppercase();
        out.insert("type".into(), json!(upper));
    }
    // Gemini refuses an OBJECT with empty properties.
    if out.get("type") == Some(&json!("OBJECT"))
        && out
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty())
    {
        out.remove("properties");
        out.remove("required");
    }
    Value::Object(out)
}

/// Turns `data:` payloads into segments. Pure; tested on recorded streams.
#[derive(Default, Debug)]
pub struct GeminiParser {
    meta: Metadata,
}

impl GeminiParser {
    pub fn push(&mut self, data: &str) -> Result<Vec<Segment>, LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::Malformed(format!(
                "chunk is not JSON ({e}): {}",
                data.chars().take(200).collect::<String>()
            ))
        })?;
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return Err(LlmError::Upstream(msg));
        }
        // Counts may come in a later chunk than the finish (api-for-gemini sends
        // `usageMetadata: {trafficType}` with the finish, then `candidates: []` with the
        // counts): a chunk without them keeps what an earlier one said.
        if let Some(u) = v.get("usageMetadata") {
            if let Some(n) = u.get("promptTokenCount").and_then(Value::as_u64) {
                self.meta.prompt_tokens = Some(n);
            }
            if let Some(n) = u.get("candidatesTokenCount").and_then(Value::as_u64) {
                self.meta.completion_tokens = Some(n);
            }
        }
        if let Some(reason) = v
            .get("promptFeedback")
            .and_then(|f| f.get("blockReason"))
            .and_then(Value::as_str)
        {
            return Err(LlmError::Upstream(format!("prompt blocked: {reason}")));
        }
        let mut out = Vec::new();
        let Some(cand) = v
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(out);
        };
        if let Some(parts) = cand
            .get("content")
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
        {
            for part in parts {
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    continue; // a thinking model's reasoning is not the answer
                }
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    if !t.is_empty() {
                        out.push(Segment::Text(t.to_string()));
                    }
                } else if let Some(fc) = part.get("functionCall") {
                    let name = fc
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| LlmError::Malformed("functionCall without a name".into()))?;
                    let id = fc
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .unwrap_or_else(|| crate::util::random_id("call_"));
                    let arguments = match fc.get("args") {
                        None | Some(Value::Null) => Ok(json!({})),
                        Some(a @ Value::Object(_)) => Ok(a.clone()),
                        Some(other) => Err(other.to_string()),
                    };
                    out.push(Segment::ToolCall(ToolCall {
                        id,
                        name: name.to_string(),
                        arguments,
                    }));
                }
            }
        }
        if let Some(reason) = cand.get("finishReason").and_then(Value::as_str) {
            self.meta.finish_reason = Some(reason.to_string());
        }
        Ok(out)
    }

    /// The body ended. Without a finishReason the reply was cut off.
    pub fn end(&mut self) -> Result<Segment, LlmError> {
        match self.meta.finish_reason.as_deref() {
            None => Err(LlmError::Closed(
                "the stream ended without a finishReason".into(),
            )),
            Some("STOP") | Some("MAX_TOKENS") | Some("FINISH_REASON_UNSPECIFIED") => {
                Ok(Segment::Done(std::mem::take(&mut self.meta)))
            }
            Some(other) => Err(LlmError::Upstream(format!("generation stopped: {other}"))),
        }
    }
}

impl super::sse::SseParser for GeminiParser {
    fn push(&mut self, data: &str) -> Result<Vec<Segment>, LlmError> {
        GeminiParser::push(self, data)
    }

    /// Gemini has no in-band end marker: the reply ends with the body.
    fn finished(&self) -> bool {
        false
    }

    fn end(&mut self) -> Result<Vec<Segment>, LlmError> {
        GeminiParser::end(self).map(|done| vec![done])
    }
}

impl LlmProvider for GeminiProvider {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn stream(&self, request: ChatRequest) -> SegmentStream {
        let mut builder = self.client.post(&self.url).json(&self.body(&request));
        if let Some(key) = &self.api_key {
            builder = builder.header("x-goog-api-key", key);
        }
        super::sse::segments(builder, GeminiParser::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::llm::{ChatMessage, ToolSpec};
    use std::time::Duration;

    #[test]
    fn text_then_parallel_calls_then_stop() {
        let mut p = GeminiParser::default();
        let mut segs = Vec::new();
        for d in [
            r#"{"candidates":[{"content":{"parts":[{"text":"我来"}],"role":"model"},"index":0}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"看看。"},{"functionCall":{"name":"search_collection","args":{"query":"鼎"}}},{"functionCall":{"name":"show_exhibit","args":{"exhibit_id":"1"},"id":"g1"}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5}}"#,
        ] {
            segs.extend(p.push(d).unwrap());
        }
        segs.push(p.end().unwrap());
        assert_eq!(segs[0], Segment::Text("我来".into()));
        assert_eq!(segs[1], Segment::Text("看看。".into()));
        let Segment::ToolCall(c) = &segs[2] else {
            panic!()
        };
        assert!(c.id.starts_with("call_"), "generated id");
        assert_eq!(c.arguments, Ok(json!({"query": "鼎"})));
        let Segment::ToolCall(c2) = &segs[3] else {
            panic!()
        };
        assert_eq!(c2.id, "g1");
        assert!(matches!(&segs[4], Segment::Done(m) if m.prompt_tokens == Some(10)));
    }

    /// Verbatim from api-for-gemini 1.4.2 in front of llama.cpp (`maxOutputTokens` reached):
    /// the finish chunk has empty parts and `usageMetadata` without counts; the stream ends
    /// with `"candidates": []` and the counts. Also the usage arriving before the finish.
    #[test]
    fn api_for_gemini_stream_end() {
        let m = r#""createTime": "2026-11-23T02:56:30Z", "modelVersion": "gemini-2.0-flash", "responseId": "chatcmpl-rrHe""#;
        let chunks = [
            format!(
                r#"{{"candidates": [{{"content": {{"parts": [{{"text": "Hello"}}], "role": "model"}}, "index": 0}}], {m}}}"#
            ),
            format!(
                r#"{{"candidates": [{{"content": {{"parts": [], "role": "model"}}, "finishReason": "MAX_TOKENS", "index": 0}}], {m}, "usageMetadata": {{"trafficType": "ON_DEMAND"}}}}"#
            ),
            format!(
                r#"{{"candidates": [], {m}, "usageMetadata": {{"cachedContentTokenCount": 6, "candidatesTokenCount": 8, "promptTokenCount": 23, "thoughtsTokenCount": 0, "totalTokenCount": 31, "trafficType": "ON_DEMAND"}}}}"#
            ),
        ];
        for order in [[0, 1, 2], [0, 2, 1]] {
            let mut p = GeminiParser::default();
            let mut segs = Vec::new();
            for i in order {
                segs.extend(p.push(&chunks[i]).unwrap());
            }
            segs.push(p.end().unwrap());
            assert_eq!(segs[0], Segment::Text("Hello".into()));
            let Segment::Done(meta) = &segs[1] else {
                panic!("{segs:?}")
            };
            assert_eq!(meta.finish_reason.as_deref(), Some("MAX_TOKENS"));
            assert_eq!(
                (meta.prompt_tokens, meta.completion_tokens),
                (Some(23), Some(8))
            );
        }
    }

    #[test]
    fn cut_off_blocked_and_errors() {
        let mut p = GeminiParser::default();
        p.push(r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}"#)
            .unwrap();
        assert!(matches!(p.end(), Err(LlmError::Closed(_))));
        let mut p = GeminiParser::default();
        p.push(r#"{"candidates":[{"content":{"parts":[]},"finishReason":"SAFETY"}]}"#)
            .unwrap();
        assert!(matches!(p.end(), Err(LlmError::Upstream(_))));
        let mut p = GeminiParser::default();
        assert!(matches!(
            p.push(r#"{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}"#),
            Err(LlmError::Upstream(m)) if m == "Resource exhausted"
        ));
        assert!(matches!(p.push("nope"), Err(LlmError::Malformed(_))));
        assert!(matches!(
            p.push(r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#),
            Err(LlmError::Upstream(_))
        ));
    }

    #[test]
    fn body_maps_roles_tools_and_results() {
        let g = GeminiProvider::new(GeminiOptions {
            base_url: "http://x/v1beta/".into(),
            model: "gemini-2.0-flash".into(),
            api_key: Some("k".into()),
            temperature: Some(0.3),
            max_tokens: Some(100),
            connect_timeout: Duration::from_secs(1),
        })
        .unwrap();
        assert_eq!(
            g.url,
            "http://x/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
        );
        let mut asst = ChatMessage::new(Role::Assistant, "");
        asst.tool_calls.push(ToolCall {
            id: "c1".into(),
            name: "get_exhibit".into(),
            arguments: Ok(json!({"id": "x"})),
        });
        let mut tool = ChatMessage::new(Role::Tool, "{\"title\":\"Bowl\"}");
        tool.tool_call_id = Some("c1".into());
        let req = ChatRequest {
            messages: vec![
                ChatMessage::new(Role::System, "be brief"),
                ChatMessage::new(Role::User, "hi"),
                asst,
                tool,
            ],
            tools: vec![ToolSpec {
                name: "get_exhibit".into(),
                description: "d".into(),
                parameters: json!({"type": "object", "additionalProperties": false,
                    "properties": {"id": {"type": "string", "$comment": "x"}}, "required": ["id"]}),
            }],
            ..Default::default()
        };
        let b = g.body(&req);
        assert_eq!(b["systemInstruction"]["parts"][0]["text"], "be brief");
        assert_eq!(
            b["contents"][0],
            json!({"role": "user", "parts": [{"text": "hi"}]})
        );
        assert_eq!(b["contents"][1]["role"], "model");
        assert_eq!(
            b["contents"][1]["parts"][0]["functionCall"]["name"],
            "get_exhibit"
        );
        assert_eq!(
            b["contents"][2]["parts"][0]["functionResponse"],
            json!({"name": "get_exhibit", "response": {"title": "Bowl"}})
        );
        let decl = &b["tools"][0]["functionDeclarations"][0];
        assert_eq!(
            decl["parameters"],
            json!({"type": "OBJECT", "properties": {"id": {"type": "STRING"}}, "required": ["id"]})
        );
        assert_eq!(b["generationConfig"]["maxOutputTokens"], 100);
    }
}

//! Tools reflected to the model (seed 003 §2–§5).
//!
//! - *Client tools* are the session's `function_calling` list: a valid call goes to the client
//!   as `function_call`.
//! - *Server tools* run here and their results go straight back to the model:
//!   `search_collection` and `get_exhibit`, over the [`Retriever`]. Their names are reserved: a
//!   client function with the same name is not offered to the model.
//! - A call to a tool that does not exist, or whose arguments fail the tool's JSON Schema,
//!   becomes an error observation for the model (§5) and is never sent to the client.
//! - With more client functions than `max_client_tools`, only the ones whose name and
//!   description best match the visitor's words are offered ([`select_client_tools`]).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::protocol::FunctionDef;
use crate::providers::llm::{ToolCall, ToolSpec};
use crate::retrieval::{Exhibit, Hit, Retriever};

pub const SEARCH_COLLECTION: &str = "search_collection";
pub const GET_EXHIBIT: &str = "get_exhibit";
pub const SERVER_TOOLS: [&str; 2] = [SEARCH_COLLECTION, GET_EXHIBIT];

/// Server tools offered when a retriever exists.
pub fn server_tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: SEARCH_COLLECTION.into(),
            description: "Search the museum's collection records. Returns the best-matching exhibits with their ids, titles, makers, dates and the most relevant passages.".into(),
            parameters: json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "What to look for, in the visitor's words"},
                "k": {"type": "integer", "description": "How many exhibits (1-10, default 3)"}
            }, "required": ["query"]}),
        },
        ToolSpec {
            name: GET_EXHIBIT.into(),
            description: "Get the full record of one exhibit by its id.".into(),
            parameters: json!({"type": "object", "properties": {
                "exhibit_id": {"type": "string", "description": "The exhibit id, e.g. walters-33094"}
            }, "required": ["exhibit_id"]}),
        },
    ]
}

/// How the pipeline should treat a call the model made.
#[derive(Debug, Clone, PartialEq)]
pub enum CallKind {
    /// Send to the client.
    Client(Value),
    /// Run here.
    Server(Value),
    /// Tell the model what was wrong (a JSON text for the tool message).
    Invalid(String),
}

fn observation(error: &str, hint: impl Into<String>) -> String {
    json!({"error": error, "hint": hint.into()}).to_string()
}

/// Classifies a call against the tools offered this turn.
pub fn classify(call: &ToolCall, offered: &[ToolSpec], client_names: &HashSet<String>) -> CallKind {
    let Some(spec) = offered.iter().find(|t| t.name == call.name) else {
        let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
        return CallKind::Invalid(observation(
            &format!("unknown tool {:?}", call.name),
            format!("call one of: {}", names.join(", ")),
        ));
    };
    let args = match &call.arguments {
        Ok(v) => v.clone(),
        Err(raw) => {
            return CallKind::Invalid(observation(
                "arguments are not a JSON object",
                format!(
                    "send arguments as a JSON object matching the schema; got {}",
                    raw.chars().take(100).collect::<String>()
                ),
            ));
        }
    };
    if let Err(why) = check_schema(&spec.parameters, &args, "arguments") {
        return CallKind::Invalid(observation(
            &format!("invalid arguments for {}: {why}", spec.name),
            format!("the schema is {}", spec.parameters),
        ));
    }
    if client_names.contains(&call.name) {
        CallKind::Client(args)
    } else {
        CallKind::Server(args)
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// Checks `value` against the JSON Schema subset tools use: `type` (one or a list), `enum`,
/// `properties`, `required`, `additionalProperties: false`, `items`.
pub fn check_schema(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    match s.get("type") {
        Some(Value::String(t)) if !type_ok(t, value) => {
            return Err(format!("{path} must be of type {t}"));
        }
        Some(Value::Array(ts))
            if !ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| type_ok(t, value)) =>
        {
            return Err(format!(
                "{path} must be one of the types {}",
                Value::Array(ts.clone())
            ));
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(value)
    {
        return Err(format!(
            "{path} must be one of {}",
            Value::Array(allowed.clone())
        ));
    }
    if let Value::Object(obj) = value {
        if let Some(Value::Array(req)) = s.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{path}.{r} is required"));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => check_schema(sub, v, &format!("{path}.{k}"))?,
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{path}.{k} is not allowed"));
                }
                None => {}
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, s.get("items")) {
        for (i, v) in items.iter().enumerate() {
            check_schema(item_schema, v, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

/// English words too common to tell tools apart.
const STOP_WORDS: [&str; 26] = [
    "the", "to", "an", "of", "on", "in", "is", "it", "do", "how", "what", "and", "or", "for", "me",
    "my", "this", "that", "with", "please", "can", "you", "are", "be", "at", "by",
];

/// Words of a text for matching: lowercase ASCII words of 2+ letters (names split on `_`, `-`
/// and case changes; common English words left out) and every CJK character bigram.
pub fn match_terms(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let flush_word = |w: &mut String, out: &mut HashSet<String>| {
        if w.len() >= 2 && !STOP_WORDS.contains(&w.as_str()) {
            out.insert(std::mem::take(w));
        } else {
            w.clear();
        }
    };
    let mut prev_lower = false;
    for c in text.chars() {
        let is_cjk = matches!(c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF);
        if is_cjk {
            cjk.push(c);
            flush_word(&mut word, &mut out);
            continue;
        }
        if cjk.len() == 1 {
            out.insert(cjk[0].to_string());
        }
        for w in cjk.windows(2) {
            out.insert(w.iter().collect());
        }
        cjk.clear();
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower {
                flush_word(&mut word, &mut out);
            }
            prev_lower = c.is_ascii_lowercase();
            word.push(c.to_ascii_lowercase());
        } else {
            prev_lower = false;
            flush_word(&mut word, &mut out);
        }
    }
    flush_word(&mut word, &mut out);
    if cjk.len() == 1 {
        out.insert(cjk[0].to_string());
    }
    for w in cjk.windows(2) {
        out.insert(w.iter().collect());
    }
    out
}

/// The tool specs the model is offered for the client's functions (`client_tools`, as
/// [`select_client_tools`] chose them).
pub fn specs(client_tools: &[&FunctionDef]) -> Vec<ToolSpec> {
    client_tools
        .iter()
        .map(|f| ToolSpec {
            name: f.name.clone(),
            description: f.description.clone().unwrap_or_default(),
            parameters: f.json_schema(),
        })
        .collect()
}

/// The client functions to offer: all of them up to `max`; beyond that the `max` whose name and
/// description share the most terms with `input` (ties keep registration order).
pub fn select_client_tools<'a>(
    functions: &'a [FunctionDef],
    input: &str,
    max: usize,
) -> Vec<&'a FunctionDef> {
    let usable: Vec<&FunctionDef> = functions
        .iter()
        .filter(|f| !SERVER_TOOLS.contains(&f.name.as_str()))
        .collect();
    if usable.len() <= max {
        return usable;
    }
    let q = match_terms(input);
    let mut scored: Vec<(usize, usize, &FunctionDef)> = usable
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let text = format!("{} {}", f.name, f.description.as_deref().unwrap_or(""));
            let score = match_terms(&text).intersection(&q).count();
            (score, i, f)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut chosen: Vec<(usize, &FunctionDef)> = scored
        .into_iter()
        .take(max)
        .map(|(_, i, f)| (i, f))
        .collect();
    chosen.sort_by_key(|(i, _)| *i);
    chosen.into_iter().map(|(_, f)| f).collect()
}

/// A compact JSON view of an exhibit for the model.
pub fn exhibit_json(e: &Exhibit, description_chars: usize) -> Value {
    let mut v = json!({"id": e.id, "title": e.title});
    for (k, val) in [
        ("maker", &e.maker),
        ("date", &e.date),
        ("period", &e.period),
        ("medium", &e.medium),
        ("dimensions", &e.dimensions),
        ("gallery", &e.gallery),
    ] {
        if !val.trim().is_empty() {
            v[k] = json!(val);
        }
    }
    if !e.description.is_empty() {
        let d: String = e.description.chars().take(description_chars).collect();
        v["description"] = json!(d);
    }
    v
}

pub fn hits_json(hits: &[Hit]) -> Value {
    Value::Array(
        hits.iter()
            .map(|h| {
                let mut v = exhibit_json(&h.exhibit, 0);
                v["score"] = json!((h.score * 1000.0).round() / 1000.0);
                v["passages"] = json!(h.passages);
                v
            })
            .collect(),
    )
}

/// Runs a server tool; the result (or an error observation) as JSON text for the model.
pub async fn run_server_tool(
    name: &str,
    args: &Value,
    retriever: Option<&dyn Retriever>,
) -> String {
    let Some(r) = retriever else {
        return observation(
            "the collection is not available on this server",
            "answer without it",
        );
    };
    match name {
        SEARCH_COLLECTION => {
            let query = args["query"].as_str().unwrap_or("");
            let k = args["k"].as_u64().unwrap_or(3).clamp(1, 10) as usize;
            match r.search(query, k).await {
                Ok(hits) if hits.is_empty() => {
                    json!({"results": [], "note": "nothing in the collection matches"}).to_string()
                }
                Ok(hits) => json!({"results": hits_json(&hits)}).to_string(),
                Err(e) => observation(
                    &e.to_string(),
                    "answer without the collection or say you do not know",
                ),
            }
        }
        GET_EXHIBIT => {
            let id = args["exhibit_id"].as_str().unwrap_or("");
            match r.get(id).await {
                Ok(Some(e)) => exhibit_json(&e, 2000).to_string(),
                Ok(None) => observation(
                    &format!("no exhibit with id {id:?}"),
                    "use search_collection to find ids",
                ),
                Err(e) => observation(
                    &e.to_string(),
                    "answer without the collection or say you do not know",
                ),
            }
        }
        other => observation(
            &format!("unknown tool {other:?}"),
            "call one of the offered tools",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: Result<Value, String>) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args,
        }
    }

    #[test]
    fn classification() {
        let mut offered = server_tool_specs();
        offered.push(ToolSpec {
            name: "show_exhibit".into(),
            description: String::new(),
            parameters: json!({"type": "object", "properties": {"exhibit_id": {"type": "string"}}, "required": ["exhibit_id"]}),
        });
        let client: HashSet<String> = ["show_exhibit".to_string()].into();
        assert_eq!(
            classify(
                &call("show_exhibit", Ok(json!({"exhibit_id": "1"}))),
                &offered,
                &client
            ),
            CallKind::Client(json!({"exhibit_id": "1"}))
        );
        assert_eq!(
            classify(
                &call("search_collection", Ok(json!({"query": "鼎"}))),
                &offered,
                &client
            ),
            CallKind::Server(json!({"query": "鼎"}))
        );
        let CallKind::Invalid(o) = classify(&call("fly", Ok(json!({}))), &offered, &client) else {
            panic!()
        };
        assert!(
            o.contains("unknown tool") && o.contains("show_exhibit"),
            "{o}"
        );
        let CallKind::Invalid(o) = classify(
            &call("show_exhibit", Ok(json!({"exhibit_id": 5}))),
            &offered,
            &client,
        ) else {
            panic!()
        };
        assert!(o.contains("exhibit_id must be of type string"), "{o}");
        let CallKind::Invalid(o) =
            classify(&call("show_exhibit", Ok(json!({}))), &offered, &client)
        else {
            panic!()
        };
        assert!(o.contains("required"), "{o}");
        assert!(matches!(
            classify(&call("show_exhibit", Err("{x".into())), &offered, &client),
            CallKind::Invalid(_)
        ));
    }

    #[test]
    fn schema_subset() {
        let s = json!({"type": "object", "additionalProperties": false,
            "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}});
        assert!(check_schema(&s, &json!({"n": 3, "tags": ["a"]}), "x").is_ok());
        assert!(check_schema(&s, &json!({"n": 3.5}), "x").is_err());
        assert!(
            check_schema(&s, &json!({"tags": ["c"]}), "x")
                .unwrap_err()
                .contains("x.tags[0]")
        );
        assert!(
            check_schema(&s, &json!({"other": 1}), "x")
                .unwrap_err()
                .contains("not allowed")
        );
        assert!(check_schema(&json!({"type": ["string", "null"]}), &Value::Null, "x").is_ok());
    }

    #[test]
    fn terms_split_names_and_cjk() {
        let t = match_terms("showExhibit navigate_to-gallery 展示文物");
        for w in [
            "show", "exhibit", "navigate", "gallery", "展示", "示文", "文物",
        ] {
            assert!(t.contains(w), "{w}: {t:?}");
        }
    }

    #[test]
    fn top_n_by_lexical_match() {
        let f = |n: &str, d: &str| -> FunctionDef {
            serde_json::from_value(json!({"name": n, "description": d})).unwrap()
        };
        let fs = vec![
            f("play_music", "Play background music"),
            f("show_exhibit", "Show an exhibit card on screen"),
            f("navigate_to_gallery", "Show the way to a gallery"),
            f("set_volume", "Change the volume"),
            f("search_collection", "client copy of a reserved name"),
        ];
        let picked = select_client_tools(&fs, "how do I get to the gallery of Chinese bronzes?", 2);
        let names: Vec<&str> = picked.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["play_music", "navigate_to_gallery"],
            "best match plus the first tie, in registration order"
        );
        let picked = select_client_tools(&fs, "请把这件展品显示在屏幕上 show exhibit", 1);
        assert_eq!(picked[0].name, "show_exhibit");
        assert_eq!(
            select_client_tools(&fs, "x", 10).len(),
            4,
            "reserved names never offered"
        );
    }
}

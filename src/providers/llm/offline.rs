//! The embedded default: no model, no network. Answers from what the collection search found —
//! the best-matching exhibit's title, maker and date and its most relevant passage, in the
//! visitor's language — or says honestly that it does not know. It never states anything that
//! is not in the records it quotes.
//!
//! When the session registered the client function that shows an exhibit (by name,
//! `[llm] show_exhibit_function`, default `show_exhibit`, with one parameter), the answer starts
//! with a call to it for the exhibit it answers from, so a kiosk shows the card beside the text.

use serde_json::{Value, json};

use super::{ChatRequest, LlmProvider, Metadata, Role, Segment, SegmentStream, ToolCall, ToolSpec};
use crate::retrieval::Hit;

#[derive(Debug, Clone)]
pub struct OfflineProvider {
    /// The client function that shows an exhibit ("" = never call one).
    pub show_function: String,
}

impl Default for OfflineProvider {
    fn default() -> Self {
        OfflineProvider::new("show_exhibit")
    }
}

impl OfflineProvider {
    pub fn new(show_function: &str) -> Self {
        OfflineProvider {
            show_function: show_function.to_string(),
        }
    }

    /// The call showing `hit`'s exhibit, when `tools` offers the show function with exactly
    /// one parameter (its id).
    pub fn show_call(&self, tools: &[ToolSpec], hit: &Hit) -> Option<ToolCall> {
        if self.show_function.is_empty() {
            return None;
        }
        let tool = tools.iter().find(|t| t.name == self.show_function)?;
        let param = single_parameter(&tool.parameters)?;
        Some(ToolCall {
            id: crate::util::random_id("call_offline_"),
            name: tool.name.clone(),
            arguments: Ok(json!({ param: hit.exhibit.id })),
        })
    }
}

/// The name of a JSON Schema object's only property (or its only required one).
fn single_parameter(schema: &Value) -> Option<String> {
    let props = schema.get("properties")?.as_object()?;
    if props.len() == 1 {
        return props.keys().next().cloned();
    }
    match schema.get("required")?.as_array()?.as_slice() {
        [Value::String(one)] if props.contains_key(one) => Some(one.clone()),
        _ => None,
    }
}

/// Whether the text is mostly Chinese (decides the answer's language).
fn is_chinese(text: &str) -> bool {
    let cjk = text
        .chars()
        .filter(|c| matches!(*c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0xF900..=0xFAFF))
        .count();
    let latin = text.chars().filter(|c| c.is_ascii_alphabetic()).count();
    cjk > 0 && cjk * 2 >= latin
}

/// Shortens a passage to about `max` characters, preferring a sentence end.
fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    let end = cut
        .char_indices()
        .filter(|(_, c)| matches!(c, '。' | '！' | '？' | '.' | '!' | '?' | '；' | ';'))
        .map(|(i, c)| i + c.len_utf8())
        .rfind(|&i| i > max / 3);
    match end {
        Some(i) => cut[..i].to_string(),
        None => format!("{}…", cut.trim_end()),
    }
}

/// The answer text. `retrieved` is `None` when no search ran (retrieval off or unavailable).
pub fn compose(question: &str, retrieved: Option<&[Hit]>) -> String {
    let zh = is_chinese(question);
    let Some(hits) = retrieved else {
        return if zh {
            "抱歉，本服务器没有配置语言模型，而这次对话关闭了馆藏检索，所以我无法回答这个问题。"
                .into()
        } else {
            "Sorry, this server has no language model configured and collection search is off for this conversation, so I can't answer that.".into()
        };
    };
    let Some(top) = hits.first() else {
        return if zh {
            "抱歉，我在本馆的藏品资料中没有找到与这个问题相关的内容，所以无法回答。您可以换个问法，或者问问现场的讲解员。".into()
        } else {
            "Sorry, I couldn't find anything in our collection records about that, so I can't answer it. You could rephrase the question or ask a docent.".into()
        };
    };
    let e = &top.exhibit;
    let passage = top
        .passages
        .first()
        .map(String::as_str)
        .filter(|p| !p.trim().is_empty())
        .unwrap_or(e.description.as_str());
    let passage = clip(passage, if zh { 140 } else { 280 });
    let mut out = String::new();
    if zh {
        out.push_str(&format!("馆藏中最相关的是《{}》", e.title.trim()));
        for f in [&e.maker, &e.date, &e.period] {
            if !f.trim().is_empty() {
                out.push_str(&format!("，{}", f.trim()));
            }
        }
        out.push('。');
        if !passage.is_empty() {
            out.push_str(&format!("资料记载：{passage}"));
            if !passage.ends_with(['。', '！', '？', '…']) {
                out.push('。');
            }
        }
        if let Some(second) = hits.get(1) {
            out.push_str(&format!(
                "另外，《{}》可能也与您的问题有关。",
                second.exhibit.title.trim()
            ));
        }
    } else {
        out.push_str(&format!(
            "The closest match in our collection is “{}”",
            e.title.trim()
        ));
        if !e.maker.trim().is_empty() {
            out.push_str(&format!(", by {}", e.maker.trim()));
        }
        for f in [&e.date, &e.period] {
            if !f.trim().is_empty() {
                out.push_str(&format!(", {}", f.trim()));
            }
        }
        out.push_str(". ");
        if !passage.is_empty() {
            out.push_str(&format!("The record says: {passage}"));
            if !passage.ends_with(['.', '!', '?', '…']) {
                out.push('.');
            }
        }
        if let Some(second) = hits.get(1) {
            out.push_str(&format!(
                " “{}” may also be related.",
                second.exhibit.title.trim()
            ));
        }
    }
    out
}

/// Splits text after sentence punctuation so it streams like a model's reply.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if matches!(c, '。' | '！' | '？' | '.' | '!' | '?') {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl LlmProvider for OfflineProvider {
    fn name(&self) -> &'static str {
        "offline"
    }

    fn stream(&self, request: ChatRequest) -> SegmentStream {
        let question = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let (answer, show) = match &request.fact {
            Some(f) => (f.answer(is_chinese(&question)).to_string(), None),
            None => (
                compose(&question, request.retrieved.as_deref()),
                request
                    .retrieved
                    .as_deref()
                    .and_then(|hits| hits.first())
                    .and_then(|top| self.show_call(&request.tools, top)),
            ),
        };
        let mut segs: Vec<Result<Segment, super::LlmError>> = show
            .map(|c| Ok(Segment::ToolCall(c)))
            .into_iter()
            .chain(sentences(&answer).into_iter().map(|s| Ok(Segment::Text(s))))
            .collect();
        segs.push(Ok(Segment::Done(Metadata {
            finish_reason: Some("stop".into()),
            ..Default::default()
        })));
        Box::pin(futures_util::stream::iter(segs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::Exhibit;

    fn hit(title: &str, maker: &str, date: &str, passage: &str) -> Hit {
        Hit {
            exhibit: Exhibit {
                id: "x".into(),
                title: title.into(),
                maker: maker.into(),
                date: date.into(),
                description: format!("{passage} More text."),
                ..Default::default()
            },
            score: 1.0,
            passages: vec![passage.into()],
        }
    }

    #[test]
    fn language_detection() {
        assert!(is_chinese("这件青铜鼎是什么年代的？"));
        assert!(is_chinese("這是誰寫的"));
        assert!(!is_chinese("Who made the lacquer box?"));
        assert!(!is_chinese("Tell me about the Ming vase 瓶 please"));
    }

    #[test]
    fn grounded_answers_quote_only_the_record() {
        let hits = vec![
            hit(
                "Inro with Badger",
                "Sawa Yoshisato",
                "19th century",
                "A badger gazes at the full moon.",
            ),
            hit("Netsuke", "", "", "Small."),
        ];
        let en = compose("Who made the lacquer box with a badger?", Some(&hits));
        assert!(
            en.contains("“Inro with Badger”, by Sawa Yoshisato, 19th century."),
            "{en}"
        );
        assert!(en.contains("A badger gazes at the full moon."));
        assert!(en.contains("“Netsuke” may also be related."));
        let zh_hits = vec![hit("唐人墓誌拓片", "", "", "此誌為唐代所刻")];
        let zh = compose("这是哪个朝代的墓志？", Some(&zh_hits));
        assert_eq!(
            zh,
            "馆藏中最相关的是《唐人墓誌拓片》。资料记载：此誌為唐代所刻。"
        );
    }

    #[test]
    fn honest_when_nothing_matches_or_search_is_off() {
        assert!(compose("Do you have the Mona Lisa?", Some(&[])).contains("couldn't find"));
        assert!(compose("你们有兵马俑吗？", Some(&[])).contains("没有找到"));
        assert!(compose("hello", None).contains("collection search is off"));
    }

    #[test]
    fn shows_the_exhibit_it_answers_from_when_the_client_can() {
        let tool = |name: &str, params: Value| ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: params,
        };
        let one = json!({"type": "object", "properties": {"exhibit_id": {"type": "string"}},
                         "required": ["exhibit_id"]});
        let top = hit("Inro", "", "", "A box.");
        let p = OfflineProvider::default();
        let c = p
            .show_call(
                &[
                    tool("other", one.clone()),
                    tool("show_exhibit", one.clone()),
                ],
                &top,
            )
            .unwrap();
        assert_eq!(c.name, "show_exhibit");
        assert_eq!(c.arguments, Ok(json!({"exhibit_id": "x"})));
        assert!(p.show_call(&[tool("other", one.clone())], &top).is_none());
        let two = json!({"type": "object", "properties": {"a": {}, "b": {}}});
        assert!(p.show_call(&[tool("show_exhibit", two)], &top).is_none());
        let custom = OfflineProvider::new("zeige");
        assert!(
            custom
                .show_call(&[tool("zeige", one.clone())], &top)
                .is_some()
        );
        assert!(
            OfflineProvider::new("")
                .show_call(&[tool("", one)], &top)
                .is_none()
        );

        let request = ChatRequest {
            messages: vec![super::super::ChatMessage::new(Role::User, "inro?")],
            tools: vec![tool(
                "show_exhibit",
                json!({"type": "object", "properties": {"id": {"type": "string"}}}),
            )],
            retrieved: Some(vec![top]),
            fact: None,
        };
        let segs = futures_executor_block(p.stream(request));
        assert!(matches!(&segs[0], Segment::ToolCall(c) if c.arguments == Ok(json!({"id": "x"}))));
        assert!(matches!(&segs[1], Segment::Text(_)));
    }

    fn futures_executor_block(s: SegmentStream) -> Vec<Segment> {
        use futures_util::StreamExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(s.map(|r| r.unwrap()).collect())
    }

    #[test]
    fn long_passages_are_clipped_at_a_sentence() {
        let long = "First sentence is here. ".repeat(30);
        let c = clip(&long, 100);
        assert!(c.len() <= 100 && c.ends_with('.'), "{c}");
    }
}

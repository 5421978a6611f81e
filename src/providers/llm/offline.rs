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
use crate::retrieval::text::{self, Script, normalize};
use crate::retrieval::{Exhibit, Hit};

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
        show_call(&self.show_function, tools, hit)
    }
}

/// The call of the client function `show_function` ("" = none) showing `hit`'s exhibit, when
/// `tools` offers it with exactly one parameter (its id). Also used with a model
/// (`pipeline::show_mentioned`).
pub fn show_call(show_function: &str, tools: &[ToolSpec], hit: &Hit) -> Option<ToolCall> {
    if show_function.is_empty() {
        return None;
    }
    let tool = tools.iter().find(|t| t.name == show_function)?;
    let param = single_parameter(&tool.parameters)?;
    Some(ToolCall {
        id: crate::util::random_id("call_show_"),
        name: tool.name.clone(),
        arguments: Ok(json!({ param: hit.exhibit.id })),
    })
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
pub fn is_chinese(text: &str) -> bool {
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

/// What a question asks for, which decides the record field the answer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// Who made it (maker), or who someone is (a biography passage).
    Who,
    /// When it was made (date, period).
    When,
    /// What it is made of (medium).
    Material,
    /// Where it is shown (gallery).
    Where,
    /// What it shows or tells (the description).
    Depicts,
    /// Anything else: the record's main facts and its best passage.
    General,
}

/// Cues of each kind of question, on normalised text (lower case, Simplified). Checked in
/// this order: the first kind with a cue wins.
const ASKS: &[(Asks, &[&str])] = &[
    (
        Asks::Material,
        &[
            "made of",
            "made from",
            "what material",
            "which material",
            "what medium",
            "material",
            "what is it made",
            "what are they made",
            "材质",
            "材料",
            "质地",
            "什么做的",
            "什么材",
            "什么制成",
            "用什么做",
            "什么质",
        ],
    ),
    (
        Asks::When,
        &[
            "when ",
            "what year",
            "which year",
            "what century",
            "which century",
            "how old",
            "what date",
            "what period",
            "which period",
            "which dynasty",
            "what dynasty",
            "什么时候",
            "哪一年",
            "哪年",
            "几几年",
            "年代",
            "朝代",
            "何时",
            "哪个时期",
            "什么时期",
            "哪个朝",
            "多少年",
            "哪个世纪",
            "几世纪",
            "多久",
        ],
    ),
    (
        Asks::Who,
        &[
            "who ",
            "whose ",
            "by whom",
            "which artist",
            "what artist",
            "which painter",
            "maker",
            "谁",
            "何人",
            "作者",
            "哪位",
            "出自",
            "什么人",
        ],
    ),
    (
        Asks::Where,
        &[
            "where ",
            "which gallery",
            "what gallery",
            "which room",
            "which floor",
            "on display",
            "on view",
            "在哪",
            "哪里",
            "哪儿",
            "哪个展",
            "展厅",
            "展区",
            "展出",
            "什么地方",
            "几楼",
        ],
    ),
    (
        Asks::Depicts,
        &[
            "depict",
            "what does it show",
            "what does the",
            "what is shown",
            "what's shown",
            "what is in the",
            "what scene",
            "what story",
            "what is it about",
            "about what",
            "meaning",
            "what does it mean",
            "describe",
            "画的是",
            "画了什么",
            "画的什么",
            "描绘",
            "讲的是",
            "讲什么",
            "讲了什么",
            "内容",
            "写的是",
            "写了什么",
            "写的什么",
            "表现",
            "意思",
            "寓意",
            "含义",
            "故事",
        ],
    ),
];

/// English question words that also open relative clauses ("a princess who faints", "the
/// year when", "somewhere"): they ask only where they open the question or a clause, or follow
/// one of [`WH_LEADS`] ("do you know who", "tell me when").
const WH_WORDS: [&str; 4] = ["who ", "whose ", "when ", "where "];
/// Words after which a question word still asks (see [`WH_WORDS`]).
const WH_LEADS: [&str; 11] = [
    "and ", "but ", "so ", "know ", "me ", "us ", "tell ", "wonder ", "ask ", "say ", "then ",
];

/// Whether the normalised question `q` holds the cue `c` (see [`WH_WORDS`]).
fn has_cue(q: &str, c: &str) -> bool {
    if !WH_WORDS.contains(&c) {
        return q.contains(c);
    }
    q.match_indices(c).any(|(i, _)| {
        let before = q[..i].trim_end();
        before.is_empty()
            || before.ends_with([
                '.', '?', '!', ',', ';', ':', '"', '“', '(', '？', '，', '。',
            ])
            || WH_LEADS.iter().any(|l| q[..i].ends_with(l))
    })
}

/// The kind of a visitor's question (English or Chinese, either script).
pub fn asks(question: &str) -> Asks {
    let q = format!("{} ", normalize(question));
    ASKS.iter()
        .find(|(_, cues)| cues.iter().any(|c| has_cue(&q, c)))
        .map_or(Asks::General, |(a, _)| *a)
}

/// Words in a description sentence that carry the answer to a kind of question, for records
/// whose field is empty (normalised: lower case, Simplified).
fn sentence_cues(a: Asks) -> &'static [&'static str] {
    match a {
        Asks::Who => &[
            "made by",
            "painted by",
            "carved by",
            "written by",
            "designed by",
            "artist",
            "attributed",
            "signed by",
            "所书",
            "书写",
            "所作",
            "所绘",
            "所撰",
            "撰写",
            "作者",
            "出自",
            "手笔",
            "所刻",
            "所题",
            "亲笔",
            "书法家",
            "画家",
        ],
        Asks::When => &[
            "century", "dynasty", "period", "dated", "年", "朝", "代", "世纪", "时期",
        ],
        Asks::Material => &[
            "made of",
            "silver",
            "gold",
            "bronze",
            "ivory",
            "wood",
            "lacquer",
            "porcelain",
            "stone",
            "marble",
            "silk",
            "paper",
            "oil on",
            "质",
            "瓷",
            "铜",
            "玉",
            "木",
            "纸",
            "绢",
            "石",
            "釉",
            "漆",
        ],
        Asks::Where | Asks::Depicts | Asks::General => &[],
    }
}

/// The sentence of `e`'s description that best answers a question of kind `a`: the most of the
/// question's terms, then a sentence with the kind's cue words; the retrieved passage when no
/// sentence has a cue.
fn answer_sentence(e: &Exhibit, question: &str, a: Asks, passage: &str) -> String {
    let cues = sentence_cues(a);
    if cues.is_empty() {
        return passage.to_string();
    }
    let terms = crate::retrieval::text::query_terms(question);
    let best = crate::retrieval::text::sentences(&e.description)
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let n = normalize(&s);
            let cue = cues.iter().any(|c| n.contains(c)) || (a == Asks::When && has_year(&n));
            if !cue {
                return None;
            }
            let hits = terms.iter().filter(|t| n.contains(t.text.as_str())).count();
            Some((hits, std::cmp::Reverse(i), s))
        })
        .max_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
    best.map_or_else(|| passage.to_string(), |(_, _, s)| s)
}

/// The description's sentence about a person: one with a life span ("溥儒(1896－1963)"), from
/// the clause that gives it (a short sentence merged before it is left out), else the first
/// that names them.
fn biography_sentence(e: &Exhibit, name: &str) -> Option<String> {
    let sents = text::sentences(&e.description);
    let n = normalize(name);
    if let Some(s) = sents.iter().find(|s| text::has_life_span(s)) {
        let ends: Vec<usize> = s
            .char_indices()
            .filter(|(_, c)| matches!(c, '。' | '！' | '？' | ';' | '；'))
            .map(|(i, c)| i + c.len_utf8())
            .collect();
        let from = ends
            .iter()
            .copied()
            .take_while(|&i| text::has_life_span(&s[i..]))
            .last()
            .unwrap_or(0);
        return Some(s[from..].trim().to_string());
    }
    sents.iter().find(|s| normalize(s).contains(&n)).cloned()
}

/// The record's maker field when it names the person a "who is X" question asks about
/// ("Hokusai Katsushika (Japanese, 1760-1849)").
fn maker_of(e: &Exhibit, name: &str) -> Option<String> {
    let maker = field(&e.maker)?;
    normalize(maker)
        .contains(&normalize(name))
        .then(|| maker.to_string())
}

fn end_zh(mut s: String) -> String {
    if !s.ends_with(['。', '！', '？', '…', '.', '!', '?']) {
        s.push('。');
    }
    s
}

fn end_en(mut s: String) -> String {
    if !s.ends_with(['.', '!', '?', '…', '。', '！', '？']) {
        s.push('.');
    }
    s
}

/// A run of three or four digits (a year).
fn has_year(s: &str) -> bool {
    let mut run = 0;
    for c in s.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            run += 1;
        } else {
            if (3..=4).contains(&run) {
                return true;
            }
            run = 0;
        }
    }
    false
}

/// Hits that score within this share of the best are suggested as well ("also in the
/// collection"): the collection holds several equally good matches. Weaker hits are not
/// mentioned, so a refusal or a clear answer never drifts to unrelated exhibits.
pub const SUGGEST_NEAR_TIE: f64 = 0.9;

/// Most other exhibits suggested after an answer.
const MAX_SUGGESTIONS: usize = 2;

/// The script an answer to `question` is written in: the visitor's (quoted titles in 《》 or
/// quotes do not count: visitors copy them from labels), Simplified when it cannot be told.
pub fn visitor_script(question: &str) -> Script {
    let mut own = String::new();
    let mut depth = 0usize;
    for c in question.chars() {
        match c {
            '《' | '「' | '『' | '“' | '〈' => depth += 1,
            '》' | '」' | '』' | '”' | '〉' => depth = depth.saturating_sub(1),
            _ if depth == 0 => own.push(c),
            _ => {}
        }
    }
    let s = match text::script_of(&own) {
        Script::Neutral => text::script_of(question),
        s => s,
    };
    if s == Script::Traditional {
        Script::Traditional
    } else {
        Script::Simplified
    }
}

/// A record field, trimmed.
fn field(s: &str) -> Option<&str> {
    let t = s.trim();
    (!t.is_empty()).then_some(t)
}

/// The answer text. `retrieved` is `None` when no search ran (retrieval off or unavailable).
/// The retriever has already decided whether the collection answers at all (the abstention
/// model): no hits means "I don't know", never a guess.
pub fn compose(question: &str, retrieved: Option<&[Hit]>) -> String {
    compose_with(question, retrieved, false)
}

/// [`compose`]; `picked`: the visitor picked the first hit from the guide's list ("the second
/// one"), so it is named as theirs, not introduced as "the closest match", and nothing else is
/// suggested.
pub fn compose_with(question: &str, retrieved: Option<&[Hit]>, picked: bool) -> String {
    let zh = is_chinese(question);
    let Some(hits) = retrieved else {
        return if zh {
            zh_in(
                "抱歉，本服务器没有配置语言模型，而这次对话关闭了馆藏检索，所以我无法回答这个问题。",
                question,
            )
        } else {
            "Sorry, this server has no language model configured and collection search is off for this conversation, so I can't answer that.".into()
        };
    };
    let Some(top) = hits.first() else {
        return if zh {
            zh_in(
                "抱歉，我不知道。本馆的藏品资料里没有能回答这个问题的内容。您可以换个问法，或者问问现场的讲解员。",
                question,
            )
        } else {
            "Sorry, I don't know: I couldn't find anything in our collection records that answers that. You could rephrase the question or ask a docent.".into()
        };
    };
    let e = &top.exhibit;
    let passage = top
        .passages
        .first()
        .map(String::as_str)
        .filter(|p| !p.trim().is_empty())
        .unwrap_or(e.description.as_str());
    // "Who is X?": what the record says about the person (a life span, else a sentence that
    // names them), whatever the record's maker field holds.
    if let Some(name) = text::who_is_subject(question) {
        let bio = biography_sentence(e, &name);
        if bio.is_none()
            && let Some(maker) = maker_of(e, &name)
        {
            // No sentence about them: the maker field says who they are.
            return if zh {
                let script = visitor_script(question);
                let frame = format!(
                    "关于{name}：馆藏《{}》的作者记录为{}。",
                    text::in_script(e.title.trim(), script),
                    text::in_script(&maker, script)
                );
                match script {
                    Script::Traditional => text::to_traditional(&frame),
                    _ => frame,
                }
            } else {
                format!(
                    "About {name}: our collection records {} as the maker of “{}”.",
                    maker.trim(),
                    e.title.trim()
                )
            };
        }
        let sentence = bio.unwrap_or_else(|| passage.to_string());
        return if zh {
            let script = visitor_script(question);
            let quote = clip(&text::in_script(&sentence, script), 140);
            let frame = format!(
                "关于{name}，馆藏《{}》的资料记载：",
                text::in_script(e.title.trim(), script)
            );
            let frame = match script {
                Script::Traditional => text::to_traditional(&frame),
                _ => frame,
            };
            end_zh(frame + &quote)
        } else {
            let says = if is_chinese(&sentence) {
                "is in Chinese only"
            } else {
                "says"
            };
            format!(
                "About {name}, our record of “{}” {says}: {}",
                e.title.trim(),
                end_en(clip(&sentence, 280))
            )
        };
    }
    let a = asks(question);
    if a == Asks::General
        && is_browse(question)
        && let Some(list) = browse_answer(question, hits)
    {
        return list;
    }
    let sentence = answer_sentence(e, question, a, passage);
    let others: Vec<&str> = hits
        .iter()
        .skip(1)
        .filter(|_| !picked)
        .filter(|h| {
            h.score >= SUGGEST_NEAR_TIE * top.score && h.exhibit.title.trim() != e.title.trim()
        })
        .take(MAX_SUGGESTIONS)
        .map(|h| h.exhibit.title.trim())
        .collect();
    if zh {
        compose_zh(question, e, a, &sentence, &others, picked)
    } else {
        compose_en(e, a, &sentence, &others, picked)
    }
}

/// Cues of a browse question, normalised: the visitor asks what the collection holds of a kind
/// ("Do you have any armor?", "What paintings do you have?", 有哪些书法作品, 有没有青花瓷) rather
/// than about one exhibit.
const BROWSE_CUES: &[&str] = &[
    "do you have any",
    "do you have some",
    "have you got any",
    "are there any",
    "are there some",
    "is there any",
    "any other",
    "show me some",
    "see some",
    "what kinds of",
    "what kind of",
    "what sorts of",
    "what types of",
    "which kinds of",
    "有哪些",
    "有没有",
    "有什么",
    "都有",
    "还有什么",
    "还有哪些",
    "有几件",
];

/// Words that point at one exhibit ("this", 这件): a question holding one is about that exhibit,
/// not a browse question (这件瓷器有什么特点).
const POINTING: &[&str] = &[
    " this ", " that ", " it ", " its ", "这", "那件", "那幅", "那张", "那个", "那只", "它",
];

/// English openings of a question whose object is a kind when it is not one thing named with
/// "the" or a possessive ("Do you have ceramics?", "Does the museum have a sword?", "Is there
/// a clock?"; not "Do you have the Peach Bloom Vase?").
const BROWSE_OPENINGS: &[&str] = &[
    "do you have",
    "do you guys have",
    "do you own",
    "do you hold",
    "do you keep",
    "have you got",
    "does the museum have",
    "does the museum own",
    "does the museum hold",
    "does your museum have",
    "does the collection have",
    "does the collection include",
    "does your collection have",
    "does your collection include",
    "is there",
    "are there",
    "can i see",
    "where can i see",
    "any",
    "got any",
];

/// Words after a [`BROWSE_OPENINGS`] that make its object one thing, or something other than
/// a kind of object ("Do you have information on…", "Is there a café?").
const NOT_A_KIND: &[&str] = &[
    "the",
    "this",
    "that",
    "these",
    "those",
    "his",
    "her",
    "its",
    "their",
    "my",
    "your",
    "our",
    "information",
    "info",
    "details",
    "more",
    "time",
    "room",
    "space",
];

/// Chinese words before 有…吗 that name who holds it (你们有瓷器吗？ 请问馆里有玉器吗？).
const ZH_HOLDERS: &[&str] = &[
    "请问",
    "你们",
    "您们",
    "贵馆",
    "本馆",
    "博物馆",
    "馆里",
    "馆内",
    "这里",
    "这儿",
    "这边",
    "馆藏",
    "里",
    "中",
    "的",
    "还",
    "也",
    "都",
];

/// Whether `question` asks what the collection holds of a kind (see [`BROWSE_CUES`]); also a
/// question that ends in "do you have" / "are there" ("What paintings do you have?"), opens
/// with one of [`BROWSE_OPENINGS`] followed by a kind ("Do you have ceramics?"), or is a
/// Chinese 有…吗 question (你们有瓷器吗？ 有玉器么).
pub fn is_browse(question: &str) -> bool {
    let norm = normalize(question);
    let q = format!(" {norm} ");
    if POINTING.iter().any(|p| q.contains(p)) {
        return false;
    }
    let bare = q.trim_end_matches(|c: char| !c.is_alphanumeric() && !text::is_cjk(c));
    BROWSE_CUES.iter().any(|c| q.contains(c))
        || ["do you have", "are there", "is there"]
            .iter()
            .any(|e| bare.ends_with(e))
        || opens_on(&norm, BROWSE_OPENINGS)
        || zh_has_question(bare.trim())
}

/// Whether `question` may name a kind of object for the kind path ([`crate::retrieval::Retriever::browse`]):
/// a browse question ([`is_browse`]) or a topic ([`is_kind_topic`]). The server and the CLI's
/// `search` ask this one question.
pub fn may_name_a_kind(question: &str) -> bool {
    is_browse(question) || is_kind_topic(question)
}

/// Openings that name a topic rather than ask for a list ("Tell me about Chinese porcelain"):
/// when the topic is a kind of object, the kind is listed ([`is_kind_topic`]).
const TOPIC_OPENINGS: &[&str] = &[
    "tell me about",
    "what about",
    "how about",
    "talk about",
    "show me",
    "can you show me",
    "i want to see",
    "i'd like to see",
    "i would like to see",
    "let me see",
];

/// Chinese openings of the same ("介绍一下瓷器", 讲讲青铜器).
const ZH_TOPIC_OPENINGS: &[&str] = &[
    "介绍一下",
    "介绍介绍",
    "介绍",
    "讲讲",
    "讲一下",
    "说说",
    "聊聊",
    "谈谈",
    "我想看看",
    "我想看",
    "想看看",
    "想看",
    "我要看",
    "看看",
];

/// Whether `question` names a topic that may be a kind of object ("Tell me about ceramics",
/// "What about Japanese armor?", 介绍一下青铜器): short, not "the" one thing. Such a question
/// is answered as a kind when its words name one, and searched as before when they do not
/// (unlike [`is_browse`], it does not turn the search's answer into a list).
pub fn is_kind_topic(question: &str) -> bool {
    // A quoted title names one exhibit (the kiosk's own suggestions: Tell me about “Vase”).
    if question.contains(['“', '”', '"', '《', '》', '「']) {
        return false;
    }
    let norm = normalize(question);
    if POINTING.iter().any(|p| format!(" {norm} ").contains(p)) {
        return false;
    }
    if opens_on(&norm, TOPIC_OPENINGS) {
        return true;
    }
    let bare = norm
        .trim()
        .trim_end_matches(|c: char| !c.is_alphanumeric() && !text::is_cjk(c));
    let bare = bare.strip_prefix("请").unwrap_or(bare);
    let bare = bare.strip_prefix("给我").unwrap_or(bare);
    ZH_TOPIC_OPENINGS.iter().any(|o| {
        bare.strip_prefix(o).is_some_and(|r| {
            let r = r.trim_start_matches(['一', '下']);
            r.chars().all(text::is_cjk) && (1..=MAX_KIND_CHARS).contains(&r.chars().count())
        })
    })
}

/// An opening of `openings`, then a short object ([`MAX_KIND_WORDS`]) whose first word is none
/// of [`NOT_A_KIND`] (after an optional "a"/"an"/"some") and which holds none of [`DESCRIBING`]:
/// "Do you have ceramics?", "Is there a sword?", "Tell me about Chinese porcelain".
fn opens_on(norm: &str, openings: &[&str]) -> bool {
    let words: Vec<&str> = norm
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    let words = match words.first() {
        Some(&"hi" | &"hello" | &"excuse" | &"sorry" | &"please") => {
            let skip = if words.get(1) == Some(&"me") { 2 } else { 1 };
            &words[skip.min(words.len())..]
        }
        _ => &words[..],
    };
    openings.iter().any(|o| {
        let n = o.split(' ').count();
        if words.len() <= n || !words[..n].iter().copied().eq(o.split(' ')) {
            return false;
        }
        let object: Vec<&str> = words[n..]
            .iter()
            .copied()
            .skip_while(|w| matches!(*w, "a" | "an" | "some"))
            .collect();
        // A kind is a word or two ("Chinese bronzes", "rare books"); a longer object describes
        // one thing ("Is there a painting of a woman hunting buffalo?"), which is searched.
        object.first().is_some_and(|w| !NOT_A_KIND.contains(w))
            && object.len() <= MAX_KIND_WORDS
            && !object.iter().any(|w| DESCRIBING.contains(w))
    })
}

/// Most words of a kind after a [`BROWSE_OPENINGS`] ("do you have Japanese woodblock prints").
const MAX_KIND_WORDS: usize = 3;

/// Words that make the object after a [`BROWSE_OPENINGS`] a description of one thing.
const DESCRIBING: &[&str] = &[
    "of", "with", "that", "which", "who", "showing", "from", "by", "where", "about",
];

/// Most characters after 有 in a 有…吗 question about a kind (你们有青花瓷器吗); a longer one
/// describes one thing and is searched.
const MAX_KIND_CHARS: usize = 6;

/// A Chinese 有…吗 question: after the words naming the holder ([`ZH_HOLDERS`]) it opens with
/// 有 and ends with 吗 / 么 / 嘛 / 没有 (你们有瓷器吗？ 馆里有青铜器没有？).
fn zh_has_question(bare: &str) -> bool {
    let Some(body) = ["吗", "么", "嘛", "没有"]
        .iter()
        .find_map(|e| bare.strip_suffix(e))
    else {
        return false;
    };
    let mut rest = body.trim();
    while let Some(r) = ZH_HOLDERS.iter().find_map(|h| rest.strip_prefix(h)) {
        rest = r.trim_start();
    }
    rest.strip_prefix('有').is_some_and(|r| {
        let r = r.trim();
        r.chars().all(text::is_cjk)
            && (1..=MAX_KIND_CHARS).contains(&r.chars().count())
            && !ZH_NOT_HELD.iter().any(|w| r.starts_with(w))
    })
}

/// What follows 有 in a 有…吗 question that is not something a collection holds (有人讲解吗？
/// 有意思吗？ 有名吗？).
const ZH_NOT_HELD: &[&str] = &[
    "人", "意思", "问题", "时间", "空", "道理", "趣", "用", "名", "多", "年代", "什么", "没有",
];

/// Hits that score within this share of the best are listed in a browse answer.
const BROWSE_NEAR: f64 = 0.75;
/// Most exhibits a browse answer lists (a visitor hears it, so a short list).
pub const BROWSE_MAX: usize = 4;

/// The answer to a browse question: the exhibits that match it, each with its short maker and
/// date, and an invitation to ask about one. `None` when fewer than two distinct exhibits
/// match well enough (then the question is answered from the best one as usual).
pub fn browse_answer(question: &str, hits: &[Hit]) -> Option<String> {
    let top = hits.first()?;
    let mut listed: Vec<&Exhibit> = Vec::new();
    for h in hits {
        if h.score < BROWSE_NEAR * top.score || listed.len() == BROWSE_MAX {
            break;
        }
        if !listed
            .iter()
            .any(|e| e.title.trim() == h.exhibit.title.trim())
        {
            listed.push(&h.exhibit);
        }
    }
    if listed.len() < 2 {
        return None;
    }
    Some(list_answer(question, &listed, None))
}

/// The answer to a browse question about a kind of object the collection holds
/// ([`crate::retrieval::Browse`]): how many, in which of the museum's departments or media,
/// then a few of them as [`browse_answer`] lists them.
pub fn kind_answer(question: &str, browse: &crate::retrieval::Browse) -> String {
    let listed: Vec<&Exhibit> = browse.hits.iter().map(|h| &h.exhibit).collect();
    list_answer(question, &listed, Some(browse))
}

/// A list of exhibits, each with the head of its maker and date fields, and an invitation to
/// ask about one; headed by the kind's total when there is one.
fn list_answer(
    question: &str,
    listed: &[&Exhibit],
    kind: Option<&crate::retrieval::Browse>,
) -> String {
    // The first part of a field ("Sèvres Porcelain Manufactory (French, active …) [Maker]; …"
    // → "Sèvres Porcelain Manufactory").
    let short = |f: &str| -> Option<String> {
        let f = f.split([';', '[']).next().unwrap_or("").trim();
        let f = f.split(" (").next().unwrap_or("").trim();
        let f = f.trim_end_matches([',', '，']).trim();
        (!f.is_empty()).then(|| clip(f, 40))
    };
    // A date of one part of the object ("Vase: 1661-1722; Lid: …") without the part's name.
    let date = |f: &str| -> Option<String> {
        let d = short(f)?;
        Some(match d.split_once(": ") {
            Some((part, rest))
                if part.chars().count() <= 24
                    && part.chars().all(|c| c.is_alphabetic() || c == ' ')
                    && !rest.trim().is_empty() =>
            {
                rest.trim().to_string()
            }
            _ => d,
        })
    };
    let details = |e: &Exhibit| -> Vec<String> {
        [short(&e.maker), date(&e.date).or_else(|| short(&e.period))]
            .into_iter()
            .flatten()
            .collect()
    };
    if is_chinese(question) {
        let script = visitor_script(question);
        let q = |s: &str| text::in_script(s, script);
        let items: Vec<String> = listed
            .iter()
            .map(|e| {
                let d = details(e);
                let d = if d.is_empty() {
                    String::new()
                } else {
                    format!("（{}）", q(&d.join("，")))
                };
                format!("《{}》{d}", q(e.title.trim()))
            })
            .collect();
        // The words that narrowed the kind, in the visitor's script. Not quoted: a pick
        // ("第一件") reads the answer's quoted titles.
        let narrowed: String = kind
            .map(|b| {
                b.qualifiers
                    .iter()
                    .map(|w| q(w))
                    .collect::<Vec<_>>()
                    .join("和")
            })
            .unwrap_or_default();
        let head = match kind {
            // 馆藏中有 200 件瓷器（Ceramics），例如： / 馆藏中「艺术品／文献」类的展品有 984 件，例如：
            Some(b) if b.label.chars().any(text::is_cjk) => {
                let about = if narrowed.is_empty() {
                    String::new()
                } else {
                    format!("、提到{narrowed}")
                };
                format!(
                    "馆藏中「{}」类{about}的展品有{}件，例如：",
                    q(&b.label),
                    b.total
                )
            }
            Some(b) => {
                // 清朝的瓷器: "the porcelain that mentions 清朝", not "Qing porcelain": a record
                // that names the word in passing counts too.
                let mention = if narrowed.is_empty() {
                    String::new()
                } else {
                    format!("提到{narrowed}的")
                };
                let words: String = b
                    .words
                    .iter()
                    .filter(|w| !b.qualifiers.contains(w))
                    .map(String::as_str)
                    .collect();
                let label = if b.label.is_empty() {
                    String::new()
                } else {
                    format!("（{}）", b.label)
                };
                format!("馆藏中有{}件{mention}{words}{label}，例如：", b.total)
            }
            None => "馆藏中与此相关的展品有：".to_string(),
        };
        let out = format!(
            "{head}{}。想了解哪一件，可以接着问我，比如：第一件是什么年代的？",
            items.join("、")
        );
        return match script {
            Script::Traditional => text::to_traditional(&out),
            _ => out,
        };
    }
    let items: Vec<String> = listed
        .iter()
        .map(|e| {
            let d = details(e);
            if d.is_empty() {
                format!("“{}”", e.title.trim())
            } else {
                format!("“{}” ({})", e.title.trim(), d.join(", "))
            }
        })
        .collect();
    let list = match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    };
    // "… that mention Chinese": the words that narrowed the kind, as the visitor wrote them
    // (not quoted: a pick, "the first one", reads the answer's quoted titles).
    let mention = match kind {
        Some(b) if !b.qualifiers.is_empty() => {
            let words: Vec<String> = b
                .qualifiers
                .iter()
                .map(|w| as_written(question, w))
                .collect();
            format!(" that mention {}", words.join(" and "))
        }
        _ => String::new(),
    };
    let head = match kind {
        Some(b) if !b.label.is_empty() => format!(
            "Our collection has {} exhibits in {}{mention}, for example: ",
            b.total, b.label
        ),
        Some(b) => format!(
            "Our collection has {} such exhibits{mention}, for example: ",
            b.total
        ),
        None => "Our collection holds these: ".to_string(),
    };
    format!("{head}{list}. Ask me about any of them, for example: When was the first one made?")
}

/// `word` (normalised, lower case) as `question` writes it ("chinese" → "Chinese").
fn as_written(question: &str, word: &str) -> String {
    let lower = question.to_lowercase();
    match lower.find(word) {
        Some(at) if lower.len() == question.len() => question[at..at + word.len()].to_string(),
        _ => word.to_string(),
    }
}

/// Words asking for more about what was just said ("tell me more", 详细 …).
const MORE_CUES: &[&str] = &[
    "tell me more",
    "more about",
    "more details",
    "more detail",
    "go on",
    "详细",
    "更多",
    "多讲",
    "多说",
    "再讲",
    "再说",
    "还有呢",
];

/// "Tell me more" about an exhibit the conversation has already named: the sentences of its
/// record not yet quoted in `earlier` (the guide's previous answers), at most two; or that the
/// record says no more. `None` when the question does not ask for more, or the first hit is not
/// an exhibit the conversation has named (then [`compose`] answers as usual).
pub fn more_answer(question: &str, retrieved: Option<&[Hit]>, earlier: &[&str]) -> Option<String> {
    let q = normalize(question);
    if !MORE_CUES.iter().any(|c| q.contains(c)) {
        return None;
    }
    let e = &retrieved?.first()?.exhibit;
    let zh = is_chinese(question);
    let script = visitor_script(question);
    let title = if zh {
        text::in_script(e.title.trim(), script)
    } else {
        e.title.trim().to_string()
    };
    if title.is_empty() || !earlier.iter().any(|a| a.contains(&title)) {
        return None;
    }
    let quoted = |s: &str| {
        if zh {
            text::in_script(s, script)
        } else {
            s.to_string()
        }
    };
    // A sentence counts as said when its first 40 characters were.
    let said = |s: &str| {
        let head: String = s.chars().take(40).collect();
        earlier.iter().any(|a| a.contains(head.trim()))
    };
    let fresh: Vec<String> = text::sentences(&e.description)
        .into_iter()
        .map(|s| quoted(s.trim()))
        .filter(|s| !s.is_empty() && !said(s))
        .take(2)
        .collect();
    Some(match (fresh.is_empty(), zh) {
        (true, true) => zh_in(&format!("关于《{title}》，馆藏资料就这些了。"), question),
        (true, false) => format!("That is all our record says about “{title}”."),
        (false, true) => {
            let frame = zh_in(&format!("馆藏《{title}》的资料还记载："), question);
            end_zh(frame + &clip(&fresh.concat(), 200))
        }
        (false, false) => format!(
            "More from our record of “{title}”: {}",
            end_en(clip(&fresh.join(" "), 400))
        ),
    })
}

/// A visitor-services fact's text word for word, in the visitor's language and script.
pub fn fact_answer(f: &crate::retrieval::facts::Fact, question: &str) -> String {
    if is_chinese(question) {
        text::in_script(f.answer(true), visitor_script(question))
    } else {
        f.answer(false).to_string()
    }
}

/// Our own Chinese words (written in Simplified) in the visitor's script.
pub fn zh_in(ours: &str, question: &str) -> String {
    match visitor_script(question) {
        Script::Traditional => text::to_traditional(ours),
        _ => ours.to_string(),
    }
}

fn compose_zh(
    question: &str,
    e: &Exhibit,
    a: Asks,
    sentence: &str,
    others: &[&str],
    picked: bool,
) -> String {
    let script = visitor_script(question);
    // Record text is quoted in the visitor's script; our own words are written in Simplified
    // and converted as a whole.
    let q = |s: &str| text::in_script(s, script);
    let ours = |s: &str| match script {
        Script::Traditional => text::to_traditional(s),
        _ => s.to_string(),
    };
    let title = q(e.title.trim());
    let quote = clip(&q(sentence), 140);
    // A record written in English is quoted as it is, and the visitor told so.
    let english = !quote.is_empty() && !is_chinese(&quote);
    let says = |out: &mut String, lead: &str| {
        if !quote.is_empty() {
            out.push_str(&ours(if english {
                "资料是英文的："
            } else {
                lead
            }));
            out.push_str(&quote);
            if !quote.ends_with(['。', '！', '？', '…', '.', '!', '?']) {
                out.push('。');
            }
        }
    };
    let mut out = String::new();
    match (
        a,
        field(&e.maker),
        field(&e.date).or(field(&e.period)),
        field(&e.medium),
        field(&e.gallery),
    ) {
        (Asks::Who, Some(maker), _, _, _) => {
            out.push_str(&format!("《{title}》{}{}。", ours("的作者是"), q(maker)));
            says(&mut out, "资料记载：");
        }
        (Asks::When, _, Some(date), _, _) => {
            out.push_str(&format!("《{title}》{}{}。", ours("的年代是"), q(date)));
            if let (Some(p), Some(d)) = (field(&e.period), field(&e.date))
                && p != d
            {
                out.push_str(&format!("{}{}。", ours("时期："), q(p)));
            }
        }
        (Asks::Material, _, _, Some(m), _) => {
            out.push_str(&format!("《{title}》{}{}。", ours("的材质是"), q(m)));
        }
        (Asks::Where, _, _, _, Some(g)) => {
            out.push_str(&format!(
                "{}《{title}》{}{}。",
                ours("记录中"),
                ours("所属的展区或部门是"),
                q(g)
            ));
        }
        (Asks::Who | Asks::When | Asks::Material | Asks::Where, ..) => {
            let missing = match a {
                Asks::Who => "没有单独写明作者",
                Asks::When => "没有单独写明年代",
                Asks::Material => "没有单独写明材质",
                _ => "没有写明展出位置",
            };
            out.push_str(&format!(
                "{}《{title}》{}。",
                ours("馆藏中的"),
                ours(missing)
            ));
            says(&mut out, "资料记载：");
        }
        (Asks::Depicts | Asks::General, ..) => {
            let lead = if picked {
                ""
            } else {
                "馆藏中最相关的是"
            };
            out.push_str(&format!("{}《{title}》", ours(lead)));
            for f in [&e.maker, &e.date, &e.period] {
                if let Some(f) = field(f) {
                    out.push_str(&format!("，{}", q(f)));
                }
            }
            out.push('。');
            says(&mut out, "资料记载：");
        }
    }
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(|t| format!("《{}》", q(t))).collect();
        out.push_str(&format!(
            "{}{}{}",
            ours("馆藏中还有"),
            list.join("、"),
            ours("，也可能与您的问题有关。")
        ));
    }
    out
}

fn compose_en(e: &Exhibit, a: Asks, sentence: &str, others: &[&str], picked: bool) -> String {
    let title = e.title.trim();
    let quote = clip(sentence, 280);
    // A record written in Chinese is quoted as it is (no translation without a model), and
    // the visitor told so.
    let lead = if is_chinese(&quote) {
        "Its record is in Chinese only"
    } else {
        "The record says"
    };
    let says = |out: &mut String| {
        if !quote.is_empty() {
            out.push_str(&format!(" {lead}: {quote}"));
            if !quote.ends_with(['.', '!', '?', '…', '。', '！', '？']) {
                out.push('.');
            }
        }
    };
    let mut out = String::new();
    match (
        a,
        field(&e.maker),
        field(&e.date).or(field(&e.period)),
        field(&e.medium),
        field(&e.gallery),
    ) {
        (Asks::Who, Some(maker), _, _, _) => {
            out.push_str(&format!("“{title}” is by {maker}."));
            if let Some(d) = field(&e.date) {
                out.push_str(&format!(" It is dated {d}."));
            }
        }
        (Asks::When, _, Some(_), _, _) => {
            out.push_str(&format!("“{title}”"));
            match (field(&e.date), field(&e.period)) {
                (Some(d), Some(p)) => out.push_str(&format!(" is dated {d} ({p}).")),
                (Some(d), None) => out.push_str(&format!(" is dated {d}.")),
                (None, Some(p)) => out.push_str(&format!(" is from {p}.")),
                (None, None) => {}
            }
        }
        (Asks::Material, _, _, Some(m), _) => {
            out.push_str(&format!("“{title}” is made of {m}."));
        }
        (Asks::Where, _, _, _, Some(g)) => {
            out.push_str(&format!("Our record places “{title}” in: {g}."));
        }
        (Asks::Who | Asks::When | Asks::Material | Asks::Where, ..) => {
            let missing = match a {
                Asks::Who => "does not name its maker",
                Asks::When => "gives no date",
                Asks::Material => "does not state its material",
                _ => "does not say where it is shown",
            };
            out.push_str(&format!("Our record of “{title}” {missing}."));
            says(&mut out);
        }
        (Asks::Depicts | Asks::General, ..) => {
            let lead = if picked {
                ""
            } else {
                "The closest match in our collection is "
            };
            out.push_str(&format!("{lead}“{title}”"));
            if let Some(m) = field(&e.maker) {
                out.push_str(&format!(", by {m}"));
            }
            for f in [&e.date, &e.period] {
                if let Some(f) = field(f) {
                    out.push_str(&format!(", {f}"));
                }
            }
            out.push('.');
            says(&mut out);
        }
    }
    if !others.is_empty() {
        let list: Vec<String> = others.iter().map(|t| format!("“{t}”")).collect();
        out.push_str(&format!(
            " The collection also holds {}, which may answer it too.",
            list.join(" and ")
        ));
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
        let earlier: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.content.as_str())
            .collect();
        let first_hit = || {
            request
                .retrieved
                .as_deref()
                .and_then(|hits| hits.first())
                .and_then(|top| self.show_call(&request.tools, top))
        };
        let (answer, show) = match (&request.fact, &request.browse) {
            (Some(f), _) => (fact_answer(f, &question), None),
            (None, Some(b)) => (kind_answer(&question, b), first_hit()),
            (None, None) => (
                more_answer(&question, request.retrieved.as_deref(), &earlier).unwrap_or_else(
                    || {
                        let hits = request.retrieved.as_deref();
                        let top = hits.and_then(|h| h.first()).map(|h| h.exhibit.title.trim());
                        let picked = request.picked.as_deref().map(str::trim);
                        compose_with(&question, hits, top.is_some() && top == picked)
                    },
                ),
                first_hit(),
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
    fn browse_questions_are_told_apart_from_questions_about_one_exhibit() {
        for q in [
            "Do you have any armor?",
            "What paintings do you have?",
            "Are there any vases?",
            "I'd like to see some vases",
            "What kinds of porcelain are there?",
            "有哪些书法作品？",
            "有沒有青花瓷？",
            "馆藏里都有什么瓷器？",
            "Do you have ceramics?",
            "Does the museum have a sword?",
            "Hi, do you have paintings?",
            "Is there a clock?",
            "Any coins?",
            "你们有瓷器吗？",
            "請問館裡有玉器嗎",
            "有青铜器么",
            "馆里有青铜器没有？",
        ] {
            assert!(is_browse(q), "{q}");
        }
        for q in [
            "Who made the lacquer box?",
            "Tell me about the Peach Bloom Vase",
            "这件瓷器有什么特点？",
            "Is there any gold in this box?",
            "What is it made of?",
            "Do you have the Peach Bloom Vase?",
            "Do you have information on the armor?",
            "Is there the Mona Lisa?",
            "你们有人讲解吗？",
            "有意思吗？",
            "这件有年代吗？",
            "Do you know who made it?",
            "Is there a painting of a Native American woman hunting buffalo on horseback?",
            "你们这里有康熙年间烧的那种豇豆红釉的瓷器吗？",
        ] {
            assert!(!is_browse(q), "{q}");
        }
        for q in [
            "Tell me about ceramics",
            "Tell me about Chinese porcelain.",
            "What about Japanese armor?",
            "介绍一下青铜器",
            "请给我讲讲瓷器",
            "Show me armor",
            "I'd like to see Japanese prints",
            "我想看瓷器",
        ] {
            assert!(is_kind_topic(q) && !is_browse(q), "{q}");
        }
        for q in [
            "Tell me about the Peach Bloom Vase",
            "Tell me about it",
            "What about the second one?",
            "介绍一下这件瓷器",
            "Who made the lacquer box?",
            "Show me the Peach Bloom Vase",
            "Show me a painting of a horse in the snow",
            "我想看康熙年间烧的那种豇豆红釉瓷器",
            "Tell me about “Bronze Mirror”",
            "介绍一下《青铜器》",
        ] {
            assert!(!is_kind_topic(q), "{q}");
        }
    }

    #[test]
    fn a_browse_question_gets_a_short_list() {
        let mut a = hit(
            "Child's Suit of Armor",
            "",
            "1580-1620, with later additions",
            "Sons of noblemen.",
        );
        a.exhibit.maker = "Workshop of X (German, active 1570) [Armorer]; Y".into();
        let mut b = hit("Body Armor", "", "", "Plates.");
        b.score = 0.97;
        let mut c = hit("Sallet", "", "ca. 1480", "A helmet.");
        c.score = 0.92;
        let mut far = hit("Juno and Paris", "", "", "A painting.");
        far.score = 0.5;
        let hits = [a, b, c, far];
        let en = compose("Do you have any armor?", Some(&hits));
        assert_eq!(
            en,
            "Our collection holds these: “Child's Suit of Armor” (Workshop of X, 1580-1620, with later additions), “Body Armor” and “Sallet” (ca. 1480). Ask me about any of them, for example: When was the first one made?"
        );
        let zh = compose("有沒有盔甲？", Some(&hits));
        assert!(zh.starts_with("館藏中與此相關的展品有：《Child's Suit of Armor》（Workshop of X，1580-1620, with later additions）、《Body Armor》、《Sallet》"), "{zh}");
        // One good match: answered from it, as any question.
        let one = compose("Do you have any armor?", Some(&hits[..1]));
        assert!(one.starts_with("The closest match"), "{one}");
        let lone = [hits[0].clone(), hits[3].clone()];
        assert!(compose("Do you have any armor?", Some(&lone)).starts_with("The closest match"));
        // A pick from the list is named as the visitor's, with nothing else suggested.
        let pick = compose_with("Tell me about the second one", Some(&hits[1..]), true);
        assert_eq!(pick, "“Body Armor”. The record says: Plates.");
        let pick = compose_with("第二件是什么？", Some(&hits[1..]), true);
        assert!(pick.starts_with("《Body Armor》。"), "{pick}");
    }

    #[test]
    fn a_kind_is_answered_with_its_total_and_the_museums_name_for_it() {
        let browse = |label: &str, words: &[&str]| crate::retrieval::Browse {
            total: 140,
            label: label.into(),
            words: words.iter().map(|w| w.to_string()).collect(),
            qualifiers: Vec::new(),
            hits: vec![
                hit("Sallet", "", "ca. 1480", "A helmet."),
                hit(
                    "Body Armor",
                    "",
                    "Body: 16th century; Helmet: later",
                    "Plates.",
                ),
            ],
        };
        assert_eq!(
            kind_answer(
                "Do you have any armor?",
                &browse("Arms & Armor", &["armor"])
            ),
            "Our collection has 140 exhibits in Arms & Armor, for example: “Sallet” (ca. 1480) and “Body Armor” (16th century). Ask me about any of them, for example: When was the first one made?"
        );
        assert!(
            kind_answer("有没有盔甲？", &browse("Arms & Armor", &["盔甲"]))
                .starts_with("馆藏中有140件盔甲（Arms & Armor），例如：《Sallet》（ca. 1480）、《Body Armor》（16th century）。")
        );
        // The visitor's script, the museum's own Chinese name of the kind included.
        assert!(
            kind_answer("有哪些藝術品？", &browse("藝術品／文獻", &["艺术品"]))
                .starts_with("館藏中「藝術品／文獻」類的展品有140件，例如："),
        );
        // Narrowed by a word that names no kind, as the visitor wrote it (not quoted: picks
        // read the quoted titles).
        let mut narrowed = browse("Arms & Armor", &["japanese", "armor"]);
        narrowed.qualifiers = vec!["japanese".into()];
        let mut zh = browse("porcelain", &["清朝", "瓷器"]);
        zh.qualifiers = vec!["清朝".into()];
        assert!(
            kind_answer("有没有清朝的瓷器？", &zh)
                .starts_with("馆藏中有140件提到清朝的瓷器（porcelain），例如：")
        );
        assert!(
            kind_answer("Any Japanese armor?", &narrowed)
                .starts_with("Our collection has 140 exhibits in Arms & Armor that mention Japanese, for example: “Sallet”")
        );
        let mut narrowed = browse("藝術品／文獻", &["清朝", "艺术品"]);
        narrowed.qualifiers = vec!["清朝".into()];
        assert!(
            kind_answer("有没有清朝的艺术品？", &narrowed)
                .starts_with("馆藏中「艺术品／文献」类、提到清朝的展品有140件，例如：")
        );
    }

    #[test]
    fn language_detection() {
        assert!(is_chinese("这件青铜鼎是什么年代的？"));
        assert!(is_chinese("這是誰寫的"));
        assert!(!is_chinese("Who made the lacquer box?"));
        assert!(!is_chinese("Tell me about the Ming vase 瓶 please"));
    }

    #[test]
    fn tell_me_more_quotes_what_was_not_said_yet() {
        let h = vec![record(
            "Inro with Badger",
            "Jokasai",
            "19th century",
            "lacquer",
            "A standard black and gold lacquer inro with four compartments. A standing badger in \
             front of autumn grasses looks at a full moon. The other side shows the moon alone. \
             The netsuke is a carved gourd.",
        )];
        let first = compose("Tell me about the Inro with Badger", Some(&h));
        assert!(first.contains("four compartments"), "{first}");
        let more = more_answer("Tell me more", Some(&h), &[&first]).unwrap();
        assert_eq!(
            more,
            "More from our record of “Inro with Badger”: A standing badger in front of autumn \
             grasses looks at a full moon. The other side shows the moon alone."
        );
        let last = more_answer("Tell me more about it", Some(&h), &[&first, &more]).unwrap();
        assert_eq!(
            last,
            "More from our record of “Inro with Badger”: The netsuke is a carved gourd."
        );
        assert_eq!(
            more_answer("Go on", Some(&h), &[&first, &more, &last]).as_deref(),
            Some("That is all our record says about “Inro with Badger”.")
        );
        // Not about an exhibit the conversation named, or not asking for more: as usual.
        assert_eq!(more_answer("Tell me more", Some(&h), &["Hello!"]), None);
        assert_eq!(more_answer("When was it made?", Some(&h), &[&first]), None);
        assert_eq!(more_answer("Tell me more", Some(&[]), &[&first]), None);
    }

    fn record(title: &str, maker: &str, date: &str, medium: &str, description: &str) -> Hit {
        Hit {
            exhibit: Exhibit {
                id: "r".into(),
                title: title.into(),
                maker: maker.into(),
                date: date.into(),
                medium: medium.into(),
                gallery: "Lacquer & Inlay".into(),
                description: description.into(),
                ..Default::default()
            },
            score: 1.0,
            passages: vec![
                description
                    .split_inclusive('.')
                    .next()
                    .unwrap()
                    .trim()
                    .into(),
            ],
        }
    }

    #[test]
    fn question_kinds() {
        for (q, want) in [
            ("Who made the lacquer box?", Asks::Who),
            ("峄山刻石相传是谁写的？", Asks::Who),
            ("這幅畫的作者是誰？", Asks::Who),
            ("When was the vase made?", Asks::When),
            ("这件青铜鼎是什么年代的", Asks::When),
            ("What is the inro made of?", Asks::Material),
            ("这件瓷器是什么材质？", Asks::Material),
            ("Where can I see the badger box?", Asks::Where),
            ("三希堂法帖在哪个展厅？", Asks::Where),
            ("What does the scroll depict?", Asks::Depicts),
            ("这幅画画的是什么？", Asks::Depicts),
            ("Tell me about the badger box", Asks::General),
            // Relative clauses do not ask: the question is whether the work is here.
            (
                "Is there a painting of a princess who faints when she hears the news?",
                Asks::General,
            ),
            ("Is there a vase from somewhere in Persia?", Asks::General),
            ("Do you know who made the lacquer box?", Asks::Who),
            ("The badger box, when was it made?", Asks::When),
            ("And where is the scroll shown?", Asks::Where),
            ("请介绍一下《三希堂法帖》", Asks::General),
        ] {
            assert_eq!(asks(q), want, "{q}");
        }
    }

    #[test]
    fn answers_come_from_the_field_the_question_asks_for() {
        let inro = [record(
            "Inro with Badger",
            "Sawa Yoshisato",
            "19th century",
            "lacquer, wood",
            "A badger gazes at the full moon. It was made in Edo.",
        )];
        let en = |q: &str| compose(q, Some(&inro));
        assert_eq!(
            en("Who made the lacquer box with a badger?"),
            "“Inro with Badger” is by Sawa Yoshisato. It is dated 19th century."
        );
        assert_eq!(
            en("When was the badger box made?"),
            "“Inro with Badger” is dated 19th century."
        );
        assert_eq!(
            en("What is the badger box made of?"),
            "“Inro with Badger” is made of lacquer, wood."
        );
        assert_eq!(
            en("Where is the badger box shown?"),
            "Our record places “Inro with Badger” in: Lacquer & Inlay."
        );
        assert_eq!(
            en("What does the badger box show?"),
            "The closest match in our collection is “Inro with Badger”, by Sawa Yoshisato, 19th century. The record says: A badger gazes at the full moon."
        );
        // A field the record leaves empty: said so, and the sentence that carries the answer.
        let stele = [record(
            "秦峄山碑拓",
            "",
            "",
            "",
            "國立歷史博物館藏《秦峄山碑拓》（館藏編號10648），縱一百公分，橫五十公分。秦代篆書刻石，相傳為李斯所書，始皇東巡登峄山，丞相李斯等頌秦德而立石。",
        )];
        let zh = compose("峄山刻石相传是谁写的？", Some(&stele));
        assert_eq!(
            zh,
            "馆藏中的《秦峄山碑拓》没有单独写明作者。资料记载：秦代篆书刻石，相传为李斯所书，始皇东巡登峄山，丞相李斯等颂秦德而立石。"
        );
    }

    #[test]
    fn record_text_is_quoted_in_the_visitors_script() {
        let hits = [record(
            "唐人墓誌拓片",
            "",
            "唐代",
            "",
            "此誌為唐代所刻，出土於洛陽。",
        )];
        // Simplified question, Traditional record: all Simplified.
        assert_eq!(
            compose("这件墓志是哪个朝代的？", Some(&hits)),
            "《唐人墓志拓片》的年代是唐代。"
        );
        // Traditional question: all Traditional, our own words too.
        assert_eq!(
            compose("這件墓誌是哪個朝代的？", Some(&hits)),
            "《唐人墓誌拓片》的年代是唐代。"
        );
        let general = compose("請介紹一下這件墓誌", Some(&hits));
        assert!(
            general.starts_with("館藏中最相關的是《唐人墓誌拓片》"),
            "{general}"
        );
        assert!(general.contains("資料記載：此誌為唐代所刻"), "{general}");
        let general = compose("请介绍一下《唐人墓誌拓片》", Some(&hits));
        assert!(
            general.starts_with("馆藏中最相关的是《唐人墓志拓片》"),
            "{general}"
        );
        assert!(
            general.contains("资料记载：此志为唐代所刻，出土于洛阳。"),
            "{general}"
        );
        // Visitor-service texts too.
        let f = crate::retrieval::facts::Fact {
            topic: "toilets".into(),
            en: "Next to the stairs.".into(),
            zh: "洗手间在楼梯旁边。".into(),
            triggers: vec![],
        };
        assert_eq!(fact_answer(&f, "洗手間在哪裡？"), "洗手間在樓梯旁邊。");
        assert_eq!(fact_answer(&f, "洗手间在哪里？"), "洗手间在楼梯旁边。");
        assert_eq!(
            fact_answer(&f, "Where are the toilets?"),
            "Next to the stairs."
        );
    }

    #[test]
    fn a_record_in_the_other_language_is_quoted_as_such() {
        let chinese = [record(
            "義和團軍旗",
            "",
            "",
            "",
            "此面義和團軍旗做呈等腰三角形制。",
        )];
        let en = compose("Do you have a flag carried by the Boxers?", Some(&chinese));
        assert!(
            en.contains("Its record is in Chinese only: 此面義和團軍旗"),
            "{en}"
        );
        assert!(!en.contains("The record says"), "{en}");
        let english = [record(
            "Camel",
            "",
            "",
            "",
            "The two-humped Bactrian camel is native to central Asia.",
        )];
        let zh = compose("请介绍一下这件骆驼", Some(&english));
        assert!(zh.contains("资料是英文的：The two-humped"), "{zh}");
        // Same language: as before.
        let en = compose("Tell me about the camel", Some(&english));
        assert!(en.contains("The record says: The two-humped"), "{en}");
    }

    #[test]
    fn who_is_answers_with_the_biography() {
        let hits = [record(
            "十三經師承略解",
            "溥心畬",
            "",
            "",
            "封面有溥心畬親題「兆明讀之，心畬」六字，推測原本應為他送給女弟子之物。溥儒(1896－1963)，字心畬，號西山逸士，清道光皇帝的曾孫。",
        )];
        assert_eq!(
            compose("溥心畬是谁？", Some(&hits)),
            "关于溥心畬，馆藏《十三经师承略解》的资料记载：溥儒(1896－1963)，字心畬，号西山逸士，清道光皇帝的曾孙。"
        );
        // A short sentence the splitter merged before the life span is left out.
        let hits = [record(
            "十三經師承略解",
            "溥心畬",
            "",
            "",
            "內容簡述十三經之源流要義。民國50年5月初版，臺北臺灣書店發行。溥儒(1896－1963)，字心畬，號西山逸士。",
        )];
        assert_eq!(
            compose("請問溥心畬是誰？", Some(&hits)),
            "關於溥心畬，館藏《十三經師承略解》的資料記載：溥儒(1896－1963)，字心畬，號西山逸士。"
        );
        // No sentence names them: the maker field does.
        let hits = [record(
            "Working Together",
            "Hokusai Katsushika (Japanese, 1760-1849)",
            "",
            "",
            "Ashinaga holds Tenaga on his shoulders.",
        )];
        assert_eq!(
            compose("Who was Hokusai?", Some(&hits)),
            "About Hokusai: our collection records Hokusai Katsushika (Japanese, 1760-1849) as the maker of “Working Together”."
        );
        let hits = [record("行書軸", "于右任", "", "", "行書立軸。")];
        assert_eq!(
            compose("于右任是谁", Some(&hits)),
            "关于于右任：馆藏《行书轴》的作者记录为于右任。"
        );
    }

    #[test]
    fn other_exhibits_are_suggested_only_when_they_match_as_well() {
        let mut a = record(
            "Peach-bloom Vase",
            "",
            "",
            "",
            "A vase with peach-bloom glaze.",
        );
        let mut b = record(
            "Peach-bloom Water Pot",
            "",
            "",
            "",
            "A water pot, peach-bloom glaze.",
        );
        let mut c = record("Blue Jar", "", "", "", "A blue jar.");
        (a.score, b.score, c.score) = (0.8, 0.78, 0.3);
        let tied = compose(
            "What is peach-bloom porcelain?",
            Some(&[a.clone(), b.clone(), c.clone()]),
        );
        assert!(
            tied.contains("also holds “Peach-bloom Water Pot”"),
            "{tied}"
        );
        assert!(!tied.contains("Blue Jar"), "{tied}");
        b.score = 0.5;
        let clear = compose("What is peach-bloom porcelain?", Some(&[a, b, c]));
        assert!(!clear.contains("also holds"), "{clear}");
    }

    #[test]
    fn honest_when_nothing_matches_or_search_is_off() {
        assert!(compose("Do you have the Mona Lisa?", Some(&[])).contains("I don't know"));
        assert!(compose("你们有兵马俑吗？", Some(&[])).contains("我不知道"));
        assert!(compose("你們有兵馬俑嗎？", Some(&[])).contains("我不知道。本館"));
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
            browse: None,
            picked: None,
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

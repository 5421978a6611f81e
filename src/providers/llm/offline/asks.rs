//! What a visitor's question asks for (who, when, what material, where shown, what it shows),
//! which decides the record field an offline answer comes from, and the description sentence
//! that answers it when the field is empty. Pure.

use crate::retrieval::Exhibit;
use crate::retrieval::text::{self, normalize};

/// What a question asks for, which decides the record field the answer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// Who made it (maker), or who someone is (a biography passage).
    Who,
    /// When it was made (date, period).
    When,
    /// What it is made of (medium).
    Material,
    /// How big it is (dimensions): "How tall is the statue?", 这件瓶子有多高？. Only the object
    /// itself ("is", "are", 这件): "How tall was Chimney Rock when Miller saw it?" asks about
    /// what a picture shows, and its record's description answers it.
    Size,
    /// Where it comes from: made, found or excavated (the place of origin in the period
    /// field, else a description sentence that says so). Not where it is shown: "东汉沈君阙拓本
    /// 是在哪里出土的？" was answered with the museum's department.
    Origin,
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
        Asks::Size,
        &[
            "how big is",
            "how big are",
            "how large is",
            "how large are",
            "how tall is",
            "how tall are",
            "how high is",
            "how wide is",
            "how long is",
            "how heavy is",
            "how small is",
            "how much does it weigh",
            "what size is",
            "what size are",
            "what are its dimensions",
            "what are the dimensions",
            "its dimensions",
            "its measurements",
            "有多大",
            "有多高",
            "有多重",
            "有多长",
            "有多宽",
            "多大尺寸",
            "尺寸",
            "大小是",
        ],
    ),
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
        Asks::Origin,
        &[
            "where is it from",
            "where's it from",
            "where are they from",
            "where is this from",
            "where does it come from",
            "where did it come from",
            "where do they come from",
            "where was it made",
            "where were they made",
            "where was it found",
            "where was it discovered",
            "where was it excavated",
            "where was it produced",
            "where was it painted",
            "which country",
            "what country",
            "which region",
            "what region",
            "country of origin",
            "place of origin",
            "its origin",
            "originally from",
            "come from",
            "comes from",
            "came from",
            "从哪里来",
            "从哪来",
            "从哪儿来",
            "来自哪",
            "哪里来的",
            "哪来的",
            "出土",
            "哪里发现",
            "在哪发现",
            "哪里产",
            "产地",
            "产于哪",
            "哪里制作",
            "哪里做的",
            "哪里烧",
            "哪个国家",
            "哪国",
            "什么地方来",
            "什么地方出",
            "来历",
            "出处",
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
    q.match_indices(c).any(|(i, _)| asks_at(q, i))
}

/// Whether a question word at byte `i` of `q` asks: it opens the question or a clause, or
/// follows one of [`WH_LEADS`].
fn asks_at(q: &str, i: usize) -> bool {
    let before = q[..i].trim_end();
    before.is_empty()
        || before.ends_with([
            '.', '?', '!', ',', ';', ':', '"', '“', '(', '？', '，', '。',
        ])
        || WH_LEADS.iter().any(|l| q[..i].ends_with(l))
}

/// The kind of a visitor's question (English or Chinese, either script).
pub fn asks(question: &str) -> Asks {
    let q = format!("{} ", normalize(question));
    let a = ASKS
        .iter()
        .find(|(_, cues)| cues.iter().any(|c| has_cue(&q, c)))
        .map_or(Asks::General, |(a, _)| *a);
    if a == Asks::Where && asks_where_made(&q) {
        Asks::Origin
    } else {
        a
    }
}

/// Verbs of making or finding after an asking "where": "Where was the sword guard made?",
/// "Where is the Guanyin statue from?" ask where it comes from, not where it is shown.
const ORIGIN_VERBS: &[&str] = &[
    "made",
    "found",
    "discovered",
    "excavated",
    "unearthed",
    "produced",
    "painted",
    "carved",
    "cast",
    "woven",
    "printed",
    "written",
    "from",
];

/// Whether an English "where" question (normalised, with a trailing space) asks where the thing
/// was made or found ([`ORIGIN_VERBS`] after the asking "where").
fn asks_where_made(q: &str) -> bool {
    q.match_indices("where ")
        .filter(|(i, _)| asks_at(q, *i))
        .any(|(i, _)| {
            q[i..]
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| ORIGIN_VERBS.contains(&w))
        })
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
            "画手",
            "绘制",
            "著书",
            "编著",
            "撰集",
            "编撰",
            "题写",
            "摄影",
            "拍摄",
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
        Asks::Origin => &[
            "place of origin",
            "excavated",
            "unearthed",
            "discovered",
            "found at",
            "found in",
            "made in",
            "comes from",
            "came from",
            "出土",
            "发现于",
            "发现",
            "产于",
            "产自",
            "来自",
            "原址",
            "制于",
        ],
        Asks::Size => &[
            "cm", "inches", "inch", " in.", "feet", "metres", "meters", "公分", "厘米", "公尺",
        ],
        Asks::Where | Asks::Depicts | Asks::General => &[],
    }
}

/// The sentence of `e`'s description that best answers a question of kind `a`: the most of the
/// question's terms, then a sentence with the kind's cue words; the retrieved passage when no
/// sentence has a cue. The flag says whether the sentence carries a cue (it answers the
/// question) or is the passage (it does not, as far as can be told).
pub(super) fn answer_sentence(
    e: &Exhibit,
    question: &str,
    a: Asks,
    passage: &str,
) -> (String, bool) {
    let cues = sentence_cues(a);
    if cues.is_empty() {
        return (passage.to_string(), false);
    }
    let terms = crate::retrieval::text::query_terms(question);
    let sentences = crate::retrieval::text::sentences(&e.description);
    let best = sentences
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let n = normalize(s);
            let cue = cues.iter().any(|c| n.contains(c)) || (a == Asks::When && has_year(&n));
            if !cue {
                return None;
            }
            let hits = terms.iter().filter(|t| n.contains(t.text.as_str())).count();
            Some((hits, std::cmp::Reverse(i)))
        })
        .max();
    match best {
        // A sentence that opens on a pronoun ("晚清画报盛行，他是…画手", "He signed it") is
        // quoted after the one before it, which names the person.
        Some((_, std::cmp::Reverse(i))) if i > 0 && opens_on_pronoun(&sentences[i]) => {
            (format!("{} {}", sentences[i - 1], sentences[i]), true)
        }
        Some((_, std::cmp::Reverse(i))) => (sentences[i].clone(), true),
        None => (passage.to_string(), false),
    }
}

/// Whether a sentence's subject is a pronoun in its first clause ("He …", "晚清画报盛行，他是…").
fn opens_on_pronoun(s: &str) -> bool {
    const EN: [&str; 6] = ["he ", "she ", "they ", "his ", "her ", "their "];
    const ZH: [&str; 6] = ["他", "她", "其", "此人", "他们", "她们"];
    let lower = s.trim_start().to_lowercase();
    if EN.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    let clause_starts = std::iter::once(0).chain(
        lower
            .char_indices()
            .filter(|(_, c)| matches!(c, '，' | ','))
            .map(|(i, c)| i + c.len_utf8()),
    );
    clause_starts
        .take(2)
        .any(|i| ZH.iter().any(|p| lower[i..].trim_start().starts_with(p)))
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

/// English openings before the thing a visitor asks to see (lower case; the longest first
/// within a family does not matter: the first that matches wins, and none is a prefix of an
/// earlier one).
const EN_ASKED_OPENINGS: &[&str] = &[
    "do you guys have ",
    "do you have ",
    "do you own ",
    "have you got ",
    "does the museum have ",
    "does your museum have ",
    "does the collection have ",
    "does your collection have ",
    "is there ",
    "are there ",
    "where can i see ",
    "where can i find ",
    "can i see ",
    "could i see ",
    "may i see ",
    "i want to see ",
    "i'd like to see ",
    "i would like to see ",
    "show me ",
    "where is ",
    "where are ",
    "is ",
    "are ",
];

/// Openings of a question about who made a work ("Who painted the Mona Lisa?"): the thing is
/// named back only when it is written as a title, capitalised ("the Lacquer box" is not asked
/// for: "Who made the lacquer box?" is about what the visitor is looking at).
const EN_MADE_OPENINGS: &[&str] = &[
    "who painted ",
    "who made ",
    "who created ",
    "who carved ",
    "who sculpted ",
    "who drew ",
    "who wrote ",
    "who designed ",
    "who built ",
];

/// Endings after the thing in English ("… here?", "… on display?").
const EN_ASKED_ENDINGS: &[&str] = &[
    " in the museum",
    " in this museum",
    " at the museum",
    " in your museum",
    " in the collection",
    " in your collection",
    " on display",
    " on view",
    " displayed",
    " shown",
    " kept",
    " here",
];

/// Words that make what follows an opening something other than a thing to see ("Is it …",
/// "Are you …", "Is there information …").
const EN_NOT_ASKED: &[&str] = &[
    "it",
    "this",
    "that",
    "these",
    "those",
    "they",
    "you",
    "he",
    "she",
    "information",
    "info",
    "more",
    "a way",
    "time",
    "the way",
    "my",
    "your",
];

/// Chinese frames around the thing: (before, after); either may be empty.
const ZH_ASKED_FRAMES: &[(&str, &str)] = &[
    ("有没有", ""),
    ("有", "吗"),
    ("有", "么"),
    ("有", "没有"),
    ("我想看看", ""),
    ("我想看", ""),
    ("想看看", ""),
    ("想看", ""),
    ("我要看", ""),
    ("能看到", "吗"),
    ("", "在哪里"),
    ("", "在哪儿"),
    ("", "在哪"),
    ("", "在哪个展厅"),
    ("", "在几楼"),
    ("", "在这里展出吗"),
    ("", "在你们这里吗"),
    ("", "在这里吗"),
    ("", "在这儿吗"),
];

/// Most words (English) or characters (Chinese) of a thing named back to the visitor: a longer
/// object is a description, not a name, and is not repeated.
const MAX_ASKED_WORDS: usize = 7;
const MAX_ASKED_CHARS: usize = 12;

/// The thing a visitor asks to see, in their own words, when the question is one of the usual
/// frames ("Do you have the Mona Lisa?" → `the Mona Lisa`, "Is the Hope Diamond on display?" →
/// `the Hope Diamond`, 有没有清明上河图？ → `清明上河图`, 兵马俑在哪个展厅？ → `兵马俑`); a
/// title in marks is the thing (《富春山居圖》). Used to say what the collection does not hold
/// ("本馆的藏品资料里没有找到“清明上河图”") instead of a bare "I don't know". None when the
/// question is another kind, or the object is long.
pub fn asked_for(question: &str) -> Option<String> {
    let q = question
        .trim()
        .trim_end_matches(['?', '？', '!', '！', '.', '。', ' ', '呢', '啊', '呀']);
    if let Some(t) = text::marked_titles(q).first()
        && let (Some(a), Some(b)) = (q.find('《'), q.find('》'))
        && a < b
    {
        let written = q[a + '《'.len_utf8()..b].trim();
        if !written.is_empty() && normalize(written) == *t {
            return Some(written.to_string());
        }
    }
    if q.chars().any(text::is_cjk) {
        asked_for_zh(q)
    } else {
        asked_for_en(q)
    }
}

fn asked_for_en(q: &str) -> Option<String> {
    let lower = q.to_lowercase();
    // Byte offsets of the lower-cased text match the original's only when lower-casing kept
    // every length (it does for the questions this serves; otherwise nothing is named).
    if lower.len() != q.len() {
        return None;
    }
    let lower = lower.trim_start_matches(['"', '\'', ' ']);
    let start = q.len() - lower.len();
    let made = EN_MADE_OPENINGS.iter().find(|o| lower.starts_with(*o));
    let open = EN_ASKED_OPENINGS
        .iter()
        .chain(made)
        .find(|o| lower.starts_with(*o))?;
    let mut from = start + open.len();
    let mut to = q.len();
    loop {
        let tail = &q[from..to].to_lowercase();
        match EN_ASKED_ENDINGS.iter().find(|e| tail.ends_with(*e)) {
            Some(e) => to -= e.len(),
            None => break,
        }
    }
    let mut thing = q[from..to].trim();
    // "Is the Hope Diamond here?" reads as "is" + thing + ending; "Is it old?" does not.
    if matches!(*open, "is " | "are ") && to == q.len() {
        return None;
    }
    let lower_thing = thing.to_lowercase();
    if EN_NOT_ASKED
        .iter()
        .any(|w| lower_thing == *w || lower_thing.starts_with(&format!("{w} ")))
    {
        return None;
    }
    if let Some(rest) = thing.strip_prefix("any ").filter(|r| !r.is_empty()) {
        // "any dinosaur fossils": kept with its "any".
        from = to - rest.len() - "any ".len();
        thing = q[from..to].trim();
    }
    let title = thing.strip_prefix("the ").unwrap_or(thing);
    if made.is_some() && !title.starts_with(|c: char| c.is_uppercase()) {
        return None;
    }
    let words = thing.split_whitespace().count();
    let plain = thing
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '\'' | '’' | '-' | '.' | ','));
    ((1..=MAX_ASKED_WORDS).contains(&words) && plain).then(|| thing.to_string())
}

fn asked_for_zh(q: &str) -> Option<String> {
    // Matched on the Simplified form, returned as written (the folding keeps every character
    // in place: one character for one).
    let norm: Vec<char> = text::to_simplified(q).chars().collect();
    let orig: Vec<char> = q.chars().collect();
    if norm.len() != orig.len() {
        return None;
    }
    let norm: String = norm.into_iter().collect();
    let mut at = 0usize; // characters skipped at the front
    loop {
        let rest: String = norm.chars().skip(at).collect();
        match super::browse::ZH_HOLDERS
            .iter()
            .find(|h| rest.starts_with(*h))
        {
            Some(h) => at += h.chars().count(),
            None => break,
        }
    }
    let body: String = norm.chars().skip(at).collect();
    for (before, after) in ZH_ASKED_FRAMES {
        let Some(inner) = body
            .strip_prefix(before)
            .and_then(|r| r.strip_suffix(after))
        else {
            continue;
        };
        let skip = at + before.chars().count();
        let n = inner.chars().count();
        let written: String = orig.iter().skip(skip).take(n).collect();
        let written = written
            .trim_start_matches("一下")
            .trim_end_matches('的')
            .trim();
        let count = written.chars().count();
        if (1..=MAX_ASKED_CHARS).contains(&count)
            && written
                .chars()
                .all(|c| text::is_cjk(c) || c.is_alphanumeric())
            && !["什么", "哪些", "啥"].iter().any(|w| written.contains(w))
            && !text::to_simplified(written).starts_with(['人', '空'])
            && !["意思", "问题", "时间", "名"].contains(&written)
        {
            return Some(written.to_string());
        }
    }
    None
}

/// Whether a question asks how many ("How many dragons pull the chariot?", 有几条龙？,
/// 一共多少个字？): its answer is the passage that gives a number, not the best-matching one.
pub fn asks_count(question: &str) -> bool {
    let q = normalize(question);
    q.contains("how many")
        || q.contains("多少")
        || q.char_indices()
            .any(|(i, c)| c == '几' && q[i + c.len_utf8()..].chars().next().is_some_and(counted))
}

/// Whether `c` follows a number when something is counted: a measure word
/// ([`text::is_measure_word`]) or a thing counted without one (字, 人, 行, 层, 次).
fn counted(c: char) -> bool {
    text::is_measure_word(c) || "字人行层次".contains(c)
}

/// Whether `passage` gives a number: a Chinese numeral or digits before a [`counted`]
/// character (三條螭龍, 十个字, 12件), an English number word or a number of one to three digits
/// ("two dragons", "18 figures"; not a year). A registration clause's numbers do not count.
pub fn gives_count(passage: &str) -> bool {
    let p = normalize(&super::quote::without_registration(passage));
    let numerals = "一二三四五六七八九十两百千万0123456789";
    let chars: Vec<char> = p.chars().collect();
    chars
        .windows(2)
        .any(|w| numerals.contains(w[0]) && counted(w[1]))
        || p.split(|c: char| !c.is_alphanumeric()).any(|w| {
            (!w.is_empty() && w.len() <= 3 && w.chars().all(|c| c.is_ascii_digit()))
                || matches!(
                    w,
                    "two"
                        | "three"
                        | "four"
                        | "five"
                        | "six"
                        | "seven"
                        | "eight"
                        | "nine"
                        | "ten"
                        | "eleven"
                        | "twelve"
                        | "dozen"
                        | "hundred"
                        | "hundreds"
                )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_question_wants_a_passage_that_gives_a_number() {
        for q in [
            "龍車畫像磚上是幾條龍在拉車？",
            "峄山刻石一共有几个字？",
            "这套书有多少册？",
            "How many dragons pull the chariot?",
        ] {
            assert!(asks_count(q), "{q}");
        }
        for q in ["这是几几年的？", "Who made it?", "几时做的？"] {
            assert!(!asks_count(q), "{q}");
        }
        assert!(gives_count(
            "圖中畫三條螭龍拉一車，車上前為馭者，後為神人。"
        ));
        assert!(gives_count("Two dragons pull the chariot."));
        assert!(gives_count("It shows 18 figures."));
        // Registration numbers and years are no count.
        assert!(!gives_count(
            "國立歷史博物館藏《漢代畫像磚龍車拓本》（館藏編號78-00049），此拓本為拓印漢墓畫像磚表面的圖像。"
        ));
        assert!(!gives_count("It was made in 1874."));
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
            ("东汉沈君阙拓本是在哪里出土的？", Asks::Origin),
            ("你们那尊唐代鎏金观音像是从哪里来的？", Asks::Origin),
            ("那套儿童盔甲是哪个国家的？", Asks::Origin),
            ("Where is the Guanyin statue from?", Asks::Origin),
            ("Where was the sword guard made?", Asks::Origin),
            ("Which country does the armor come from?", Asks::Origin),
            ("Where is the armor displayed?", Asks::Where),
            ("What does the scroll depict?", Asks::Depicts),
            ("How tall is the statue?", Asks::Size),
            ("How big are the sword guards?", Asks::Size),
            ("这件瓶子有多高？", Asks::Size),
            ("三希堂法帖的尺寸是多少？", Asks::Size),
            ("How old is the mummy?", Asks::When),
            (
                "How tall was Chimney Rock when Miller saw it?",
                Asks::General,
            ),
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
    fn a_sentence_about_him_comes_with_the_one_that_names_him() {
        let e = Exhibit {
            title: "大觀園元妃試寶玉圖(印本)".into(),
            description: "本作品由繆瑟夫人捐贈，她於1922年隨教會至四川服務。 李菊儕，又名李蔭林，號聽秋吟館主人，幽夢生等。主要活動在北京。晚清畫報盛行，他是京派新聞畫報重要畫手和主編者，其繪製數百幅紅樓夢圖畫尤其出名。".into(),
            ..Default::default()
        };
        let (s, found) = answer_sentence(&e, "大观园元妃试宝玉图是谁画的？", Asks::Who, "");
        assert!(found);
        assert!(s.contains("李菊儕") && s.contains("畫手"), "{s}");
        assert!(opens_on_pronoun("He signed the scroll in 1780."));
        assert!(!opens_on_pronoun("Hexagonal vase."));
        assert!(!opens_on_pronoun("此件為三角型黃色旗。"));
    }

    #[test]
    fn the_thing_asked_for_is_named_back_in_the_visitors_words() {
        for (q, want) in [
            ("Do you have the Mona Lisa?", Some("the Mona Lisa")),
            (
                "Is the Hope Diamond on display here?",
                Some("the Hope Diamond"),
            ),
            (
                "Do you have Van Gogh's Starry Night?",
                Some("Van Gogh's Starry Night"),
            ),
            (
                "Do you have any dinosaur fossils?",
                Some("any dinosaur fossils"),
            ),
            ("Where is the Rosetta Stone?", Some("the Rosetta Stone")),
            (
                "Is Tutankhamun's golden mask here?",
                Some("Tutankhamun's golden mask"),
            ),
            (
                "I want to see the Terracotta Army.",
                Some("the Terracotta Army"),
            ),
            (
                "Can I see Raphael's School of Athens here?",
                Some("Raphael's School of Athens"),
            ),
            ("清明上河图在哪里？", Some("清明上河图")),
            ("有翠玉白菜吗？", Some("翠玉白菜")),
            ("我想看毛公鼎", Some("毛公鼎")),
            ("兵马俑在哪个展厅？", Some("兵马俑")),
            ("有沒有《富春山居圖》？", Some("富春山居圖")),
            ("你们有没有曾侯乙编钟？", Some("曾侯乙编钟")),
            ("有恐龙化石吗？", Some("恐龙化石")),
            (
                "北京人的头盖骨化石在你们这里吗？",
                Some("北京人的头盖骨化石"),
            ),
            // Not a frame, or not a thing.
            ("Is it old?", None),
            ("Are you a robot?", None),
            ("Is there information about tickets?", None),
            ("Who made the lacquer box?", None),
            ("Who painted the Mona Lisa?", Some("the Mona Lisa")),
            ("Who painted Water Lilies?", Some("Water Lilies")),
            ("Who made this?", None),
            ("What is the oldest thing here?", None),
            (
                "Is there a painting of a young French royal who faints because she is sent away?",
                None,
            ),
            ("有什么好看的？", None),
            ("有人讲解吗？", None),
            ("这件瓷器是什么年代的？", None),
        ] {
            assert_eq!(asked_for(q).as_deref(), want, "{q}");
        }
    }
}

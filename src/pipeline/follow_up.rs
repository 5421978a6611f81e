//! Follow-up questions: "When was it made?" after "Tell me about the Peach Bloom Vase".
//!
//! A visitor who has just been told about an exhibit asks about "it", "this", 它, 这件 … and
//! names nothing new. Searched on its own such a question finds nothing (the offline guide said
//! "Sorry, I don't know"), or worse, a record that happens to share a generic word: "Where can I
//! see it?" after the lacquer box answered with a Chinese rubbing's gallery. So a follow-up is
//! searched together with the visitor's last question that named something ([`anchor`]): the
//! exhibit of the conversation ranks first again, and the answer still reads the follow-up's own
//! question type (who, when, what material, where), and the exhibit the guide's latest answer
//! was about is put first ([`last_answer_title`]; the anchor's words alone let "Who made it?", the
//! fourth question about the Unknown Woman Mummy, rank a mummy mask first). A follow-up with no
//! such question is not searched: the offline guide asks which exhibit is meant ([`which_exhibit`]).
//! The offline guide answers a follow-up about that exhibit alone (`ChatRequest::about`), with no
//! other exhibits suggested.
//!
//! [`is_follow_up`] (pure): the question refers back (a pronoun or demonstrative, "tell me
//! more", 它, 这件, 作者 …) and its search terms are all generic: question frames and words every
//! such question uses (made, painted, see, year, material, 年代, 材料, 哪里 …), analysed like a
//! search so "painted" and "painting" count alike. "Who made this lacquer box?" names something
//! (lacquer, box) and is searched as it is. Cases: `fixtures/questions/follow_up.jsonl`.
//!
//! A question that points at an exhibit by its kind and names nothing else ("When was this vase
//! made?", 这件拓本是什么年代的？: [`pointed_at`]) is about the exhibit of the conversation when
//! that exhibit's title holds those words ([`title_holds`]); asked first, it is about an exhibit
//! the guide cannot see, and the offline guide asks which is meant.
//!
//! A list the guide gave is followed too: "the second one" picks from it ([`pick_from_list`]),
//! "Any more?" / 还有别的吗？ continues it ([`asks_for_more_of_a_list`], [`list_origin`]).

use std::collections::HashSet;
use std::sync::OnceLock;

use crate::providers::llm::{ChatMessage, Role};
use crate::retrieval::text;

/// Words that refer back to what was just discussed (whole words, lower case).
const EN_MARKERS: &[&str] = &[
    "it", "its", "it's", "this", "that", "these", "those", "they", "them", "their", "he", "she",
    "him", "her", "his", "more", "else",
];

/// Chinese references (Simplified; the question is folded first).
const ZH_MARKERS: &[&str] = &[
    "它",
    "这件",
    "那件",
    "这个",
    "那个",
    "这幅",
    "那幅",
    "这尊",
    "那尊",
    "这张",
    "那张",
    "这块",
    "那块",
    "这把",
    "那把",
    "这只",
    "那只",
    "这本",
    "那本",
    "这部",
    "这些",
    "那些",
    "这是",
    "那是",
    "他",
    "她",
    "作者",
    "更多",
    "详细",
    "再说",
    "再讲",
    "继续说",
    "继续讲",
];

/// Words any follow-up may use without naming anything new (English; analysed like a query).
const EN_GENERIC: &str = "made make makes making maker makers created create creator painted paint \
    painter painting paintings drew drawn draw drawing carved carve built build designed design \
    designer wrote written write writer author see seen look looking find found shown show shows \
    displayed display located location where kept old age ancient mean meaning means depict \
    depicts depicted represent represents represented tell more details detail date dated year \
    years century centuries period artist artists material materials used use uses story stories \
    behind big large small size tall long wide piece pieces object objects work works artwork \
    artworks item one picture describe happened exactly originally origin come comes famous \
    special interesting important worth history historical background purpose function else \
    inside room gallery hall floor";

/// Chinese words any follow-up may use (jieba-segmented like a query).
const ZH_GENERIC: &str = "做 做的 制作 制造 创作 画 画的 绘制 写 写的 雕刻 年代 时候 时代 朝代 哪一年 \
    哪年 年份 多少年 多久 历史 什么 哪里 哪儿 在哪 看到 看 展出 展示 展厅 位置 几楼 材料 材质 用 \
    作者 谁 是谁 内容 意思 讲 讲的 描绘 表现 代表 多大 尺寸 大小 多高 故事 来历 背景 用途 介绍 \
    一下 详细 说说 讲讲 更多 还有 其他 特别 有名 重要 价值 一件 件 幅 尊 个 东西 作品 展品 文物 \
    再 多 点 些 一点 一些";

fn generic_terms() -> &'static HashSet<String> {
    static SET: OnceLock<HashSet<String>> = OnceLock::new();
    SET.get_or_init(|| {
        // Word by word: a query keeps at most `MAX_QUERY_TERMS` terms.
        let mut set = HashSet::new();
        for w in EN_GENERIC
            .split_whitespace()
            .chain(ZH_GENERIC.split_whitespace())
        {
            set.extend(text::query_terms(w).into_iter().map(|t| t.text));
            set.insert(w.to_string());
        }
        set
    })
}

/// The words of a normalised question (letters, digits and apostrophes).
fn words_of(norm: &str) -> Vec<&str> {
    norm.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The search terms of a normalised question that are its own: not a reference (它, 这件) nor
/// a word any follow-up uses ([`generic_terms`]). The references go first: jieba would glue
/// 这幅画 into 幅画.
fn own_terms(norm: &str) -> Vec<String> {
    let mut rest = norm.to_string();
    for m in ZH_MARKERS {
        rest = rest.replace(m, " ");
    }
    let generic = generic_terms();
    text::query_terms(&rest)
        .into_iter()
        .map(|t| t.text)
        .filter(|t| !generic.contains(t))
        .collect()
}

/// Whether `question` asks about what was just discussed and names nothing of its own.
pub fn is_follow_up(question: &str) -> bool {
    let norm = text::normalize(question);
    let words = words_of(&norm);
    let refers =
        words.iter().any(|w| EN_MARKERS.contains(w)) || ZH_MARKERS.iter().any(|m| norm.contains(m));
    if !refers {
        return false;
    }
    let own = own_terms(&norm);
    // "Who owned it?", "Is it gold?", 它被修复过吗？: the exhibit itself (it, 它) with one word of
    // its own asks about the exhibit of the conversation too. Searched alone it was refused
    // ("owned" names no record), and then stood as the topic of the next follow-up.
    let about_it = words.iter().any(|w| EXHIBIT_PRONOUNS.contains(w)) || norm.contains('它');
    own.is_empty() || (about_it && own.len() == 1)
}

/// English demonstratives that point at a thing before a noun ("this vase", "that sword").
const EN_DEMONSTRATIVES: &[&str] = &["this", "that", "these", "those"];

/// Words after an English demonstrative read as the noun it points at ("this lacquer box").
const POINTED_WORDS: usize = 3;

/// Characters after a Chinese demonstrative (这件, 这幅 …) read as the noun it points at
/// (这件拓本, 这件青铜鼎).
const POINTED_CHARS: usize = 4;

/// The words of its own a question points at with a demonstrative, when they are all it names
/// ("When was this vase made?" → `["vase"]`, 这件拓本是什么年代的？ → `["拓本"]`; query terms,
/// analysed like a search), None when it names anything else ("that wild coastal painting
/// with waves smashing on the rocks") or nothing ([`is_follow_up`]'s "Who painted this
/// painting?"). Such a question asks about an exhibit in front of the visitor, named by its
/// kind: the exhibit of the conversation when its title holds those words, otherwise an
/// exhibit the guide cannot see. Searched alone, "When was this vase made?" after the Vase
/// with Apollo was answered with the Rubens Vase, and 这件拓本是什么年代的？ after the Stone
/// Drum rubbing was refused.
pub fn pointed_at(question: &str) -> Option<Vec<String>> {
    let norm = text::normalize(question);
    let words = words_of(&norm);
    let own = own_terms(&norm);
    if own.is_empty() {
        return None;
    }
    // The terms right after each demonstrative.
    let mut pointed: HashSet<String> = HashSet::new();
    for (i, w) in words.iter().enumerate() {
        if EN_DEMONSTRATIVES.contains(w) {
            let after = words[i + 1..].iter().take(POINTED_WORDS);
            let span: Vec<&str> = after.copied().collect();
            pointed.extend(
                text::query_terms(&span.join(" "))
                    .into_iter()
                    .map(|t| t.text),
            );
        }
    }
    for m in ZH_MARKERS.iter().filter(|m| m.starts_with(['这', '那'])) {
        for (at, _) in norm.match_indices(m) {
            let after: String = norm[at + m.len()..].chars().take(POINTED_CHARS).collect();
            let own_there = own.iter().filter(|t| after.contains(t.as_str()));
            pointed.extend(own_there.cloned());
        }
    }
    own.iter().all(|t| pointed.contains(t)).then_some(own)
}

/// Whether an exhibit's title holds every one of `terms` ([`pointed_at`]'s): "Vase with
/// Apollo, a Nymph, and Cupid" holds `vase`, 清石鼓文拓本 holds 拓本.
pub fn title_holds(title: &str, terms: &[String]) -> bool {
    let norm = text::normalize(title);
    let own: HashSet<String> = text::query_terms(&norm)
        .into_iter()
        .map(|t| t.text)
        .collect();
    terms
        .iter()
        .all(|t| own.contains(t) || (t.chars().any(text::is_cjk) && norm.contains(t.as_str())))
}

/// English pronouns that stand for the exhibit itself (not a person, not "this …" before a
/// noun of its own).
const EXHIBIT_PRONOUNS: &[&str] = &["it", "its", "it's", "they", "them"];

/// The visitor's question a follow-up refers to: the latest earlier user message that is not a
/// follow-up itself (nor small talk), among the last `LOOK_BACK` user messages of `history`. A
/// question that picked an exhibit from a list ("the second one") stands for that exhibit's
/// title ([`pick_from_list`]).
pub fn anchor<'a>(history: impl DoubleEndedIterator<Item = &'a ChatMessage>) -> Option<String> {
    anchor_with_pick(history).map(|(a, _)| a)
}

/// [`anchor`], and whether it is the title of an exhibit picked from a list (then the search
/// puts the exhibit of that very title first: [`pick_from_list`] reads titles, not ids).
pub fn anchor_with_pick<'a>(
    history: impl DoubleEndedIterator<Item = &'a ChatMessage>,
) -> Option<(String, bool)> {
    // A visitor may ask several follow-ups about one exhibit ("When?", "Made of?", "Where?",
    // "Tell me more"): the topic ends with a question that names something, not after a count.
    const LOOK_BACK: usize = 8;
    let msgs: Vec<&ChatMessage> = history.collect();
    msgs.iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::User)
        .take(LOOK_BACK)
        .find_map(|(i, m)| {
            let q = m.content.as_str();
            if let Some(title) = pick_from_list(q, msgs[..i].iter().copied()) {
                return Some((title, true));
            }
            // An ordinal with nothing to pick from ("the second one" after an answer about one
            // exhibit) names nothing either.
            (!is_follow_up(q) && ordinal(q).is_none() && super::small_talk::classify(q).is_none())
                .then(|| (q.to_string(), false))
        })
}

/// The exhibit the guide's latest answer is about: the first title it quotes (an answer about
/// one exhibit names it first, a list its first item), `None` when the latest message of
/// `history` is not the guide's or quotes no title. A follow-up is about that exhibit: searched
/// again with its anchor, "Who made it?" after three follow-ups about the Unknown Woman Mummy
/// had ranked a mummy mask first.
pub fn last_answer_title<'a>(
    history: impl DoubleEndedIterator<Item = &'a ChatMessage>,
) -> Option<String> {
    let last = history.last()?;
    (last.role == Role::Assistant)
        .then(|| quoted_titles(&last.content).into_iter().next())
        .flatten()
}

/// Where a question points in a list the guide has just given: "the second one", "the first",
/// "the last one", 第二件, 第一个, 最后一件. `Some(0)` is the first; `usize::MAX` the last.
pub fn ordinal(question: &str) -> Option<usize> {
    let norm = text::normalize(question);
    let words: Vec<&str> = norm
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    const EN: [&str; 5] = ["first", "second", "third", "fourth", "last"];
    const ZH: [&str; 5] = ["第一", "第二", "第三", "第四", "最后"];
    let en = words.iter().find_map(|w| EN.iter().position(|o| o == w));
    let zh = ZH.iter().position(|o| norm.contains(o));
    let n = en.or(zh)?;
    // The ordinal words and their nouns go; what is left must name nothing of its own
    // ("the second world war" is not a pick from a list).
    let spaced: String = norm
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    let mut rest = format!(
        " {} ",
        spaced.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    for w in EN.iter().chain(["one", "ones", "item", "exhibit"].iter()) {
        rest = rest.replace(&format!(" {w} "), " ");
    }
    for o in ZH {
        for unit in ["件", "个", "幅", "张", "尊", "本", "只", "块", "把", ""] {
            rest = rest.replace(&format!("{o}{unit}"), " ");
        }
    }
    let generic = generic_terms();
    let names_nothing = text::query_terms(&rest)
        .iter()
        .all(|t| generic.contains(&t.text));
    names_nothing.then_some(if n == 4 { usize::MAX } else { n })
}

/// The titles an answer of the guide quotes, in order (“…” and 《…》, not a quoted question),
/// each once.
pub fn quoted_titles(answer: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur: Option<String> = None;
    for c in answer.chars() {
        match (c, cur.as_mut()) {
            ('“' | '《', None) => cur = Some(String::new()),
            ('”' | '》', Some(_)) => {
                let t = cur.take().unwrap_or_default();
                let t = t.trim().to_string();
                // A quoted question ("for example “When was it made?”") is not a title.
                if !t.is_empty() && !t.ends_with(['?', '？']) && !out.contains(&t) {
                    out.push(t);
                }
            }
            (c, Some(t)) => t.push(c),
            _ => {}
        }
    }
    out
}

/// The title a question picks from the list in the guide's latest answer that gave one (of the
/// last four answers): "Tell me about the second one" after "Our collection holds these: “A”,
/// “B” and “C”" → `B`, searched instead of the question.
pub fn pick_from_list<'a>(
    question: &str,
    earlier: impl DoubleEndedIterator<Item = &'a ChatMessage>,
) -> Option<String> {
    // The list may be a few answers back: "Do you have any armor?", "The second one", "When
    // was it made?", "And the last one?".
    const LOOK_BACK: usize = 4;
    let n = ordinal(question)?;
    let titles = earlier
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .take(LOOK_BACK)
        .map(|m| quoted_titles(&m.content))
        .find(|t| t.len() >= 2)?;
    let i = if n == usize::MAX { titles.len() - 1 } else { n };
    titles.get(i).cloned()
}

/// English words a request for more of a list may use ("Any more?", "Show me some others",
/// "What else do you have?"); one of [`MORE_OF_A_LIST`] must be among them.
const MORE_WORDS: &[&str] = &[
    "any", "more", "some", "show", "me", "us", "else", "what", "what's", "anything", "other",
    "others", "ones", "one", "do", "you", "have", "got", "please", "examples", "and", "is",
    "there", "are", "give", "let", "see", "next", "few", "a", "can", "could", "list", "the", "ok",
    "okay", "so", "great", "nice", "thanks", "thank", "yes", "sure", "like", "them",
];

/// The words that ask for more of a list in [`MORE_WORDS`].
const MORE_OF_A_LIST: &[&str] = &["more", "else", "other", "others", "next"];

/// Chinese requests for more of a list, once the frame around them is dropped (还有别的吗？
/// 那还有其他的呢？ 再来几件).
const ZH_MORE: &[&str] = &[
    "还有",
    "还有别的",
    "还有别的展品",
    "还有其他",
    "还有其他的",
    "还有其他展品",
    "还有没有",
    "还有没有别的",
    "还有没有其他的",
    "还有哪些",
    "还有什么",
    "别的",
    "其他",
    "其他的",
    "更多",
    "更多的",
    "再来几件",
    "再来几个",
    "再来一些",
    "再多几件",
    "再看几件",
    "再看看别的",
    "再给我看几件",
    "下一批",
    "换一批",
];

/// Whether `question` asks for more of the list the guide has just given ("Any more?", "Show
/// me some others", 还有别的吗？), not for more about one exhibit ("Tell me more" names what
/// it wants more of: the exhibit, [`crate::providers::llm::offline::more_answer`]). Pure; the
/// pipeline asks it only after an answer that listed exhibits ([`list_origin`]).
pub fn asks_for_more_of_a_list(question: &str) -> bool {
    let norm = text::normalize(question);
    if norm.chars().any(text::is_cjk) {
        let bare: String = norm
            .chars()
            .filter(|c| c.is_alphanumeric())
            .collect::<String>();
        let mut bare = bare.as_str();
        for p in ["那么", "那", "请问", "请", "你们", "给我"] {
            bare = bare.strip_prefix(p).unwrap_or(bare);
        }
        for s in ["吗", "呢", "吧", "啊", "呀", "么"] {
            bare = bare.strip_suffix(s).unwrap_or(bare);
        }
        return ZH_MORE.contains(&bare);
    }
    let words: Vec<&str> = norm
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    !words.is_empty()
        && words.iter().all(|w| MORE_WORDS.contains(w))
        && words.iter().any(|w| MORE_OF_A_LIST.contains(w))
}

/// The question whose list a request for more continues, and every title the guide has listed
/// for it so far. Walking back over the conversation's exchanges: a request for more
/// ([`asks_for_more_of_a_list`]) adds its answer's titles and goes on; a pick from the list or a
/// follow-up about the exhibit picked ("The first one", "When was it made?", at most
/// `ASIDES` of them) goes on; the first other question is the origin when its answer quoted two
/// titles or more. None otherwise (the conversation has moved on).
pub fn list_origin<'a>(
    history: impl DoubleEndedIterator<Item = &'a ChatMessage>,
) -> Option<(String, Vec<String>)> {
    // A visitor may ask for more a few times, and about an exhibit of the list in between.
    const LOOK_BACK: usize = 24;
    const ASIDES: usize = 3;
    let mut shown: Vec<String> = Vec::new();
    let mut asides = 0;
    // The latest answer of the exchange being read (a tool step may come between).
    let mut answer: Option<&ChatMessage> = None;
    for m in history.rev().take(LOOK_BACK) {
        match m.role {
            Role::Assistant if !m.content.is_empty() => {
                answer.get_or_insert(m);
            }
            Role::User => {
                let titles = quoted_titles(&answer.take()?.content);
                let q = m.content.as_str();
                let mut add = |titles: Vec<String>| {
                    for t in titles {
                        if !shown.contains(&t) {
                            shown.push(t);
                        }
                    }
                };
                if asks_for_more_of_a_list(q) {
                    add(titles);
                    continue;
                }
                if ordinal(q).is_some() || is_follow_up(q) {
                    asides += 1;
                    if asides > ASIDES {
                        return None;
                    }
                    continue;
                }
                if titles.len() < 2 {
                    return None;
                }
                add(titles);
                return Some((q.to_string(), shown));
            }
            _ => {}
        }
    }
    None
}

/// The offline answer to a follow-up with nothing to follow: which exhibit is meant?
pub fn which_exhibit(utterance: &str) -> String {
    if crate::providers::llm::offline::is_chinese(utterance) {
        crate::providers::llm::offline::zh_in(
            "您指的是哪件展品？请告诉我它的名称，或者描述一下它的样子。",
            utterance,
        )
    } else {
        "Which exhibit do you mean? Tell me its name, or describe what it looks like.".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `fixtures/questions/follow_up.jsonl`: `{"q": ..., "follow_up": bool}`.
    #[test]
    fn the_fixture_cases() {
        #[derive(serde::Deserialize)]
        struct Case {
            q: String,
            follow_up: bool,
        }
        let cases: Vec<Case> = crate::util::fixture_cases("fixtures/questions/follow_up.jsonl");
        for c in &cases {
            assert_eq!(
                is_follow_up(&c.q),
                c.follow_up,
                "{:?}: terms {:?}",
                c.q,
                text::query_terms(&c.q)
            );
        }
        let n = cases.len();
        assert!(n >= 30, "{n} cases");
    }

    #[test]
    fn a_kind_pointed_at_is_told_from_a_question_that_names_more() {
        let terms =
            |v: &[&str]| -> Option<Vec<String>> { Some(v.iter().map(|t| t.to_string()).collect()) };
        assert_eq!(pointed_at("When was this vase made?"), terms(&["vase"]));
        assert_eq!(pointed_at("Who made this vase?"), terms(&["vase"]));
        assert_eq!(pointed_at("这件拓本是什么年代的？"), terms(&["拓本"]));
        assert_eq!(pointed_at("這件拓本是什麼年代的？"), terms(&["拓本"]));
        assert!(pointed_at("Who made this lacquer box?").is_some());
        for q in [
            "Who painted this painting?",
            "When was it made?",
            "In that wild coastal painting with waves smashing on the rocks, what small detail shows a boat went down nearby?",
            "Is the mummy of Pharaoh Ramesses II in this museum?",
            "When was the Rubens Vase made?",
            "那幅四川漢畫像磚拓片，雙闕中間站著的是什麼人？",
        ] {
            assert_eq!(pointed_at(q), None, "{q}");
        }
        assert!(title_holds(
            "Vase with Apollo, a Nymph, and Cupid",
            &["vase".into()]
        ));
        assert!(title_holds("清石鼓文拓本", &["拓本".into()]));
        assert!(title_holds(
            "清石鼓文拓本",
            &text::query_terms("拓本")
                .into_iter()
                .map(|t| t.text)
                .collect::<Vec<_>>()
        ));
        assert!(!title_holds("Toilet of Helen", &["vase".into()]));
    }

    #[test]
    fn a_request_for_more_of_a_list_is_told_from_one_for_more_about_an_exhibit() {
        for q in [
            "Any more?",
            "Anything else?",
            "Show me more",
            "Show me some others",
            "What else do you have?",
            "More please",
            "OK, any others?",
            "Next ones?",
            "还有别的吗？",
            "那还有其他的呢？",
            "还有吗",
            "再来几件",
            "還有別的嗎？",
        ] {
            assert!(asks_for_more_of_a_list(q), "{q}");
        }
        for q in [
            "Tell me more",
            "Tell me more about it",
            "What else is in the record?",
            "More about the vase",
            "Do you have any more ceramics?",
            "再详细说说",
            "还有别的瓷器吗？",
            "Hello",
            "",
        ] {
            assert!(!asks_for_more_of_a_list(q), "{q}");
        }
    }

    #[test]
    fn a_follow_up_is_about_the_exhibit_of_the_latest_answer() {
        let user = |s: &str| ChatMessage::new(Role::User, s.to_string());
        let bot = |s: &str| ChatMessage::new(Role::Assistant, s.to_string());
        let h = [
            user("Tell me about the mummy"),
            bot("The closest match in our collection is “Unknown Woman Mummy”, ca. 850-750 BC."),
            user("Where is it?"),
            bot(
                "Our record places “Unknown Woman Mummy” in: Mummies. The collection also \
                 holds “Mummy Portrait of a Man”, which may answer it too.",
            ),
        ];
        assert_eq!(
            last_answer_title(h.iter()).as_deref(),
            Some("Unknown Woman Mummy")
        );
        // A refusal quotes nothing; the visitor's own message last is no answer.
        assert_eq!(last_answer_title(h[..3].iter()), None);
        let refused = [user("Who made it?"), bot("Sorry, I don't know.")];
        assert_eq!(last_answer_title(refused.iter()), None);
        let zh = [bot("《清石鼓文拓本》的尺寸是纵44 横72。")];
        assert_eq!(
            last_answer_title(zh.iter()).as_deref(),
            Some("清石鼓文拓本")
        );
    }

    #[test]
    fn more_of_a_list_continues_the_question_that_gave_it() {
        let user = |s: &str| ChatMessage::new(Role::User, s.to_string());
        let bot = |s: &str| ChatMessage::new(Role::Assistant, s.to_string());
        let h = [
            user("Tell me about the vase"),
            bot("“Vase” is a vase."),
            user("Do you have any ceramics?"),
            bot(
                "Our collection has 200 exhibits in Ceramics, for example: “A” (1604), “B” and “C”.",
            ),
            user("Any more?"),
            bot("More of the 200 exhibits in Ceramics: “D”, “E” and “F”."),
        ];
        let (q, shown) = list_origin(h.iter()).unwrap();
        assert_eq!(q, "Do you have any ceramics?");
        assert_eq!(shown, ["D", "E", "F", "A", "B", "C"]);
        // After an answer about one exhibit there is no list to continue.
        assert_eq!(list_origin(h[..2].iter()), None);
        // A pick and a follow-up about it between the list and the request: the list goes on.
        let h3 = [
            user("有没有墓志铭拓本？"),
            bot("馆藏中与此相关的展品有：《甲》、《乙》、《丙》。"),
            user("第一件是什么年代的？"),
            bot("《甲》的年代是北魏。"),
            user("它是谁写的？"),
            bot("《甲》没有写明作者。"),
        ];
        assert_eq!(
            list_origin(h3.iter()),
            Some((
                "有没有墓志铭拓本？".to_string(),
                vec!["甲".into(), "乙".into(), "丙".into()]
            ))
        );
        // A new question in between: the conversation has moved on.
        let h4 = [
            user("Do you have any ceramics?"),
            bot("Our collection has … “A”, “B”."),
            user("Tell me about the Peach Bloom Vase"),
            bot("“Vase” is a vase."),
        ];
        assert_eq!(list_origin(h4.iter()), None);
        let h2 = [
            user("Do you have any ceramics?"),
            bot("Our collection has … “A”, “B”."),
        ];
        assert_eq!(
            list_origin(h2.iter()),
            Some((
                "Do you have any ceramics?".to_string(),
                vec!["A".into(), "B".into()]
            ))
        );
    }

    #[test]
    fn the_anchor_is_the_last_question_that_named_something() {
        let user = |s: &str| ChatMessage::new(Role::User, s.to_string());
        let bot = |s: &str| ChatMessage::new(Role::Assistant, s.to_string());
        let h = [
            user("Tell me about the Peach Bloom Vase"),
            bot("It is a vase."),
            user("When was it made?"),
            bot("1710-1722."),
        ];
        assert_eq!(
            anchor(h.iter()).as_deref(),
            Some("Tell me about the Peach Bloom Vase")
        );
        let h = [user("Tell me about the Peach Bloom Vase"), user("Thanks!")];
        assert_eq!(
            anchor(h.iter()).as_deref(),
            Some("Tell me about the Peach Bloom Vase")
        );
        assert_eq!(anchor([user("What is it made of?")].iter()), None);
        assert_eq!(anchor([].iter()), None);
    }

    #[test]
    fn ordinals_point_into_a_list() {
        for (q, n) in [
            ("Tell me about the second one", Some(1)),
            ("When was the first one made?", Some(0)),
            ("What about the last one?", Some(usize::MAX)),
            ("And the third?", Some(2)),
            ("第二件是什么年代的？", Some(1)),
            ("第一個是誰做的", Some(0)),
            ("介绍一下最后一件", Some(usize::MAX)),
            ("Do you have anything from the Second World War?", None),
            ("Who was the first emperor of Qin?", None),
            ("第一次鸦片战争的文物", None),
            ("Tell me about the Peach Bloom Vase", None),
        ] {
            assert_eq!(ordinal(q), n, "{q}");
        }
    }

    #[test]
    fn the_second_one_is_the_second_title_of_the_last_answer() {
        let user = |s: &str| ChatMessage::new(Role::User, s.to_string());
        let bot = |s: &str| ChatMessage::new(Role::Assistant, s.to_string());
        let list = "Our collection holds these: “Child's Suit of Armor” (1580-1620), “Body Armor” and “Sallet”. Ask me about any of them, “When was the first one made?”";
        assert_eq!(
            quoted_titles(list),
            vec!["Child's Suit of Armor", "Body Armor", "Sallet"]
        );
        let h = [user("Do you have any armor?"), bot(list)];
        assert_eq!(
            pick_from_list("Tell me about the second one", h.iter()).as_deref(),
            Some("Body Armor")
        );
        assert_eq!(
            pick_from_list("the last one?", h.iter()).as_deref(),
            Some("Sallet")
        );
        assert_eq!(pick_from_list("the fourth one", h.iter()), None);
        assert_eq!(pick_from_list("Tell me about armor", h.iter()), None);
        let zh = [
            user("有哪些瓷器？"),
            bot(
                "馆藏中与此相关的展品有：《青花盘》（明代）、《粉彩瓶》。想了解哪一件，可以继续问我。",
            ),
        ];
        assert_eq!(
            pick_from_list("第二件是什么年代的？", zh.iter()).as_deref(),
            Some("粉彩瓶")
        );
        // A later follow-up ("Where is it?") refers to the exhibit picked, not the list.
        let h = [
            user("Do you have any armor?"),
            bot(list),
            user("Tell me about the second one"),
            bot("“Body Armor” is …"),
            user("Where is it?"),
        ];
        assert_eq!(anchor(h[..4].iter()).as_deref(), Some("Body Armor"));
        assert_eq!(
            anchor_with_pick(h[..4].iter()),
            Some(("Body Armor".to_string(), true)),
            "a picked title: the search puts that exhibit first"
        );
        assert_eq!(
            anchor_with_pick(h[..2].iter()),
            Some(("Do you have any armor?".to_string(), false))
        );
        // The list stays pickable after an answer about one of its exhibits.
        assert_eq!(
            pick_from_list("And the last one?", h[..4].iter()).as_deref(),
            Some("Sallet")
        );
    }
}

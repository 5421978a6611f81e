//! Browse questions ("Do you have any armor?", 有没有青花瓷？, "Tell me about ceramics"): told
//! apart from questions about one exhibit, and answered with a short list of exhibits, headed
//! by the kind's total when the catalogue names the kind. Pure.

use super::{clip, is_chinese, visitor_script, zh_in};
use crate::retrieval::openings;
use crate::retrieval::ordering::Order;
use crate::retrieval::sizing::size_of;
use crate::retrieval::text::{self, Script, normalize};
use crate::retrieval::{Exhibit, Hit};
use crate::util::thousands;

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
    // 你们有多少件瓷器？ was refused; 瓷器有多少件？ answered with a typescript on Dutch porcelain.
    // Counted in pieces only: 敢死隊有多少人 and 有多少个会员 ask a record's fact.
    "多少件",
    "多少幅",
];

/// Words that point at one exhibit ("this", 这件): a question holding one is about that exhibit,
/// not a browse question (这件瓷器有什么特点).
const POINTING: &[&str] = &[
    " this ", " that ", " it ", " its ", "这", "那件", "那幅", "那张", "那个", "那只", "它",
];

/// Words with 这 that name the place, not an exhibit (这里有青铜器吗？ asks the museum: it was
/// searched, and answered with a book on bronze inscriptions).
const HERE_ZH: &[&str] = &["这里", "这儿", "这边"];

/// Whether a question (normalised, padded with spaces) points at one exhibit ([`POINTING`]).
fn points(padded: &str) -> bool {
    let mut q = padded.to_string();
    for here in HERE_ZH {
        q = q.replace(here, " ");
    }
    POINTING.iter().any(|p| q.contains(p))
}

/// English openings of a question whose object is a kind when it is not one thing named with
/// "the" or a possessive ("Do you have ceramics?", "Does the museum have a sword?", "Is there
/// a clock?"; not "Do you have the Peach Bloom Vase?").
const BROWSE_OPENINGS: &[&str] = &[
    "do you have",
    "don't you have",
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
    "anything",
    "something",
    "what do you have",
    "what have you got",
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
    "else",
    "time",
    "room",
    "space",
];

/// Chinese words before 有…吗 that name who holds it (你们有瓷器吗？ 请问馆里有玉器吗？).
pub(super) const ZH_HOLDERS: &[&str] = &[
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
    if points(&q) {
        return false;
    }
    let bare = q.trim_end_matches(|c: char| !c.is_alphanumeric() && !text::is_cjk(c));
    BROWSE_CUES.iter().any(|c| q.contains(c))
        || ["do you have", "are there", "is there"]
            .iter()
            .any(|e| bare.ends_with(e))
        || opens_on(&norm, &[BROWSE_OPENINGS])
        || asks_what_is_shown(&norm)
        || asks_what_is_from(&norm)
        || zh_has_question(bare.trim())
        || (!question.contains(['“', '”', '"', '《', '》', '「'])
            && (opens_on(&norm, WISH_OPENINGS)
                || zh_wishes(bare.trim())
                || plural_keyword(bare.trim())))
}

/// Whether `bare` (normalised, end punctuation off) is a bare keyword ([`is_bare_keyword`])
/// whose last word is an English plural ("swords", "cats", "Japanese prints"), or a plural and
/// what they show, a word or two ("paintings of horses", as after "Do you have"): things of a
/// kind, listed as "Do you have swords?" is. Typed alone, "swords" was answered with the one
/// closest match. A plural is a word in -s that the index's stemmer shortens, not one in -ss,
/// -us or -is ("glass", "Venus"; "Hercules"'s -es is cut, so its records are listed).
fn plural_keyword(bare: &str) -> bool {
    let words: Vec<&str> = bare.split_whitespace().collect();
    match words.as_slice() {
        [head, "of" | "showing" | "depicting" | "from", shown @ ..] => {
            (1..=2).contains(&shown.len())
                && is_plural(head)
                && !shown
                    .iter()
                    .any(|w| NOT_A_KIND.contains(w) || DESCRIBING.contains(w))
        }
        [.., last] => is_bare_keyword(bare) && is_plural(last),
        [] => false,
    }
}

/// Whether an English word (normalised) reads as a plural ([`plural_keyword`]).
fn is_plural(word: &str) -> bool {
    word.chars().all(|c| c.is_ascii_lowercase())
        && word.len() > 3
        && word.ends_with('s')
        && !["ss", "us", "is"].iter().any(|e| word.ends_with(e))
        && text::latin_tokens(word)
            .first()
            .is_some_and(|t| t.len() < word.len())
}

/// Openings of a wish to see things of a kind or of a taste for them ("Show me swords", "I want
/// to see swords", "I love cats", "I'm interested in armor": [`openings::SHOW`] and
/// [`openings::TASTE`]): a list, as "Do you have swords?" is. As topics they were answered
/// with the one closest match ("Show me swords": one short sword), or refused ("I'm interested
/// in cats"). A quoted title is one exhibit, not a kind.
const WISH_OPENINGS: &[&[&str]] = &[openings::SHOW, openings::TASTE];

/// Whether a Chinese question wishes to see things of a kind or likes them (我想看看剑,
/// 我喜欢猫, 我对瓷器感兴趣, 给我看看青铜器): a wish or a taste, then a short object of CJK
/// characters only ([`MAX_KIND_CHARS`]).
fn zh_wishes(bare: &str) -> bool {
    const OPENINGS: &[&str] = &[
        "我想看看",
        "我想看",
        "我要看",
        "想看看",
        "想看",
        "给我看看",
        "给我看",
        "我喜欢",
        "我很喜欢",
        "我特别喜欢",
        "我爱看",
        "我喜爱",
        "我们想看看",
        "我们想看",
        "我们喜欢",
    ];
    let bare = bare.strip_prefix("请").unwrap_or(bare);
    let object = OPENINGS
        .iter()
        .find_map(|o| bare.strip_prefix(o))
        .map(|r| r.trim_start_matches(['一', '下']))
        .or_else(|| {
            ["我对", "我们对", "对"].iter().find_map(|o| {
                bare.strip_prefix(o).and_then(|r| {
                    ["很感兴趣", "特别感兴趣", "感兴趣", "有兴趣"]
                        .iter()
                        .find_map(|e| r.strip_suffix(e))
                })
            })
        });
    object.is_some_and(|r| {
        r.chars().all(text::is_cjk) && (1..=MAX_KIND_CHARS).contains(&r.chars().count())
    })
}

/// Endings of a question about what is shown ("What jewelry is on display?").
const SHOWN_ENDINGS: &[&[&str]] = &[
    &["on", "display"],
    &["on", "view"],
    &["on", "show"],
    &["displayed"],
    &["exhibited"],
];

/// Whether `norm` asks which exhibits of a kind are shown: "What jewelry is on display?",
/// "Which paintings are on view?"; the kind a word or a few (not "the …": "What is the vase on
/// display?" is about one thing).
fn asks_what_is_shown(norm: &str) -> bool {
    let words: Vec<&str> = norm
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    if !matches!(words.first(), Some(&"what" | &"which")) {
        return false;
    }
    let Some(end) = SHOWN_ENDINGS.iter().find(|e| words.ends_with(e)) else {
        return false;
    };
    let mut middle = &words[1..words.len() - end.len()];
    while let Some((last, rest)) = middle.split_last() {
        if matches!(*last, "is" | "are" | "currently" | "now" | "being") {
            middle = rest;
        } else {
            break;
        }
    }
    (1..=MAX_KIND_WORDS).contains(&middle.len()) && !middle.iter().any(|w| NOT_A_KIND.contains(w))
}

/// Whether `norm` asks which things come from a place, culture or period: "Which things are
/// from Japan?", "What is from Egypt?", "Which objects are from the Ming dynasty?" (a word
/// for things of [`ORIGIN_HEADS`] or none, then "is" / "are" / "was" / "were", then "from" and
/// a short origin). It got one closest match. "What comes from Egypt?" is left to the answer's
/// reading of "comes from", where one exhibit is from (not yet a list).
fn asks_what_is_from(norm: &str) -> bool {
    let words: Vec<&str> = norm
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    let rest = match words.as_slice() {
        ["what" | "which", head, rest @ ..] if ORIGIN_HEADS.contains(head) => rest,
        ["what" | "which", rest @ ..] => rest,
        _ => return false,
    };
    let ["is" | "are" | "was" | "were", "from", origin @ ..] = rest else {
        return false;
    };
    let origin: Vec<&&str> = origin.iter().filter(|w| **w != "the").collect();
    (1..=MAX_KIND_WORDS).contains(&origin.len())
        && !origin
            .iter()
            .any(|w| NOT_A_KIND.contains(w) || DESCRIBING.contains(w))
}

/// Whether `question` may name a kind of object for the kind path ([`crate::retrieval::Retriever::browse`]):
/// a browse question ([`is_browse`]), a topic ([`is_kind_topic`]) or a question for an order
/// (the oldest, the biggest: [`crate::retrieval::ordering::asks_order`], of a kind or of the
/// whole collection). The server and the CLI's `search` ask this one question.
pub fn may_name_a_kind(question: &str) -> bool {
    is_browse(question)
        || is_kind_topic(question)
        || crate::retrieval::ordering::asks_order(question).is_some()
        || crate::retrieval::kinds::asks_taste(question)
        || crate::retrieval::kinds::asks_where_kept(question)
        || crate::retrieval::kinds::asks_most_works(question)
}

/// Openings that name a topic rather than ask for a list ("Tell me about Chinese porcelain",
/// "Show me armor": [`openings::TOPIC`] and [`openings::SHOW`]): when the topic is a kind of
/// object, the kind is listed ([`is_kind_topic`]).
const TOPIC_OPENINGS: &[&[&str]] = &[openings::TOPIC, openings::SHOW];

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
    if points(&format!(" {norm} ")) {
        return false;
    }
    if opens_on(&norm, TOPIC_OPENINGS) || is_bare_keyword(&norm) {
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

/// Whether `norm` is a bare keyword, as visitors type on a kiosk or a phone ("ivory",
/// "Japanese armor", "Japan", 瓷器: [`text::is_bare_keyword`]) none of whose words is a
/// [`NOT_A_KIND`] or [`DESCRIBING`] word. Like a topic, it is listed when it
/// names a kind and searched as before when it does not ("ivory" had been searched, and
/// refused).
fn is_bare_keyword(norm: &str) -> bool {
    text::is_bare_keyword(norm) && {
        let words: Vec<&str> = norm.split_whitespace().collect();
        !words
            .iter()
            .any(|w| NOT_A_KIND.contains(w) || DESCRIBING.contains(w))
    }
}

/// An opening of `openings`, then a short object ([`MAX_KIND_WORDS`]) whose first word is none
/// of [`NOT_A_KIND`] (after an optional "a"/"an"/"some") and which holds none of [`DESCRIBING`]:
/// "Do you have ceramics?", "Is there a sword?", "Tell me about Chinese porcelain".
fn opens_on(norm: &str, lists: &[&[&str]]) -> bool {
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
    openings::all(lists).any(|o| {
        let n = o.split(' ').count();
        if words.len() <= n || !words[..n].iter().copied().eq(o.split(' ')) {
            return false;
        }
        let object: Vec<&str> = words[n..]
            .iter()
            .copied()
            .skip_while(|w| matches!(*w, "a" | "an" | "some"))
            .collect();
        // Where things come from names a list too ("Anything from Japan?", "Do you have objects
        // from ancient Egypt?"): the place, culture or period is the object.
        fn without_the<'w>(rest: &[&'w str]) -> Vec<&'w str> {
            rest.iter().copied().filter(|w| *w != "the").collect()
        }
        let object: Vec<&str> = match object.as_slice() {
            ["from", rest @ ..]
                if matches!(
                    o,
                    "anything" | "something" | "what do you have" | "what have you got"
                ) =>
            {
                without_the(rest)
            }
            [head, "from", rest @ ..] if ORIGIN_HEADS.contains(head) => without_the(rest),
            // A maker's works ("Any works by Kuniyoshi?", "Do you have prints by Utagawa
            // Kuniyoshi?"): the things in the plural, by a name of a word to three, are a list
            // (it was answered with the closest of his eleven prints).
            [head, "by", name @ ..] if is_plural(head) && (1..=3).contains(&name.len()) => {
                vec![*head]
            }
            // "the" names one thing ("Tell me about the Peach Bloom Vase"), unless what follows
            // is a period ("Tell me about the Ming dynasty", "the Edo period") or things in the
            // plural ("the Japanese prints"): those were answered with one closest match.
            ["the", rest @ .., last]
                if crate::retrieval::kinds::PERIOD_WORDS.contains(last) || is_plural(last) =>
            {
                rest.iter().copied().chain(std::iter::once(*last)).collect()
            }
            // A department of the collection ("Tell me about the jade collection", "Show me
            // your Egyptian collection"): its kind or origin, as "the Japanese prints" is (it
            // was searched, and refused).
            [
                "the" | "your" | "our",
                rest @ ..,
                "collection" | "collections",
            ] if !rest.is_empty() => rest.to_vec(),
            // A kind in the plural and what they show or where they come from, a word or two:
            // "Do you have paintings of dogs?" is the dog paintings (it got a sword guard with a
            // lion-dog), "Do you have paintings from China?" China's (it got a planter and a
            // teapot), while "a painting of a woman hunting buffalo" is one thing.
            [
                head,
                "of" | "with" | "showing" | "depicting" | "from",
                rest @ ..,
            ] if head.len() > 3 && head.ends_with('s') && !head.ends_with("ss") => {
                let shown = without_the(rest);
                if (1..=2).contains(&shown.len()) {
                    std::iter::once(*head).chain(shown).collect()
                } else {
                    object
                }
            }
            _ => object,
        };
        // A kind is a word or two ("Chinese bronzes", "rare books"); a longer object describes
        // one thing ("Is there a painting of a woman hunting buffalo?"), which is searched.
        object.first().is_some_and(|w| !NOT_A_KIND.contains(w))
            && object.len() <= MAX_KIND_WORDS
            && !object.iter().any(|w| DESCRIBING.contains(w))
    })
}

/// Words for "things" before "from" in a question about where things come from
/// ("Do you have anything from Japan?").
const ORIGIN_HEADS: &[&str] = &[
    "anything",
    "something",
    "things",
    "objects",
    "items",
    "works",
    "art",
    "artworks",
    "pieces",
    "exhibits",
    "artifacts",
    "artefacts",
    "antiquities",
];

/// Most words of a kind after a [`BROWSE_OPENINGS`] ("do you have Japanese woodblock prints").
const MAX_KIND_WORDS: usize = text::KEYWORD_WORDS;

/// Words that make the object after a [`BROWSE_OPENINGS`] a description of one thing.
const DESCRIBING: &[&str] = &[
    "of", "with", "that", "which", "who", "showing", "from", "by", "where", "about",
];

/// Most characters after 有 in a 有…吗 question about a kind (你们有青花瓷器吗); a longer one
/// describes one thing and is searched.
const MAX_KIND_CHARS: usize = text::KEYWORD_CHARS;

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
    let norm = normalize(question);
    // The English senses of a Chinese keyword, looked up once for every hit.
    let senses = text::asked_keyword(&norm)
        .filter(|k| k.chars().all(text::is_cjk))
        .map(|k| crate::retrieval::dictionary::dictionary().noun_senses_of(k))
        .unwrap_or_default();
    let mut listed: Vec<&Exhibit> = Vec::new();
    for h in hits {
        if h.score < BROWSE_NEAR * top.score || listed.len() == BROWSE_MAX {
            break;
        }
        if !super::as_good_as(h.score, top.score, BROWSE_NEAR)
            && !title_translates(&senses, &h.exhibit.title)
        {
            continue;
        }
        if !listed
            .iter()
            .any(|e| e.title.trim() == h.exhibit.title.trim())
        {
            listed.push(&h.exhibit);
        }
    }
    // "Do you have anything about the Three Kingdoms?": when some of the list hold the thing
    // the question names (in a name's words, or in the Chinese the dictionary writes it in,
    // 三国), the others, which hold its words apart ("three" … "Kingdom"), are left out.
    let named = named_forms(question);
    if !named.is_empty() && listed.iter().any(|e| holds_named(e, &named)) {
        listed.retain(|e| holds_named(e, &named));
    }
    if listed.len() < 2 {
        return None;
    }
    // "Do you have anything by Monet?": when none of the list is by the maker the question
    // names, the list is of records that mention them, and the answer says so (it listed
    // Boudin's and Whistler's paintings as if they were the visitor's Monets).
    if let Some(maker) = super::maker_not_held(question, &listed) {
        let mention: Vec<&Exhibit> = listed
            .into_iter()
            .filter(|e| super::mentions(e, &maker))
            .collect();
        return (!mention.is_empty())
            .then(|| list_answer(question, &mention, None, false, Some(&maker)));
    }
    // "Do you have anything by Raphael?": the works by them first, then the records that only
    // mention them, said apart (it listed a painting of the Archangel Raphael and a follower's
    // portrait as the visitor's Raphaels); records that do neither are left out.
    if let Some(maker) = super::makers_asked(question).into_iter().next() {
        let (by, rest): (Vec<&Exhibit>, Vec<&Exhibit>) =
            listed.iter().partition(|e| super::is_by(e, &maker));
        if !by.is_empty() && !rest.is_empty() {
            let also: Vec<&Exhibit> = rest
                .into_iter()
                .filter(|e| super::mentions(e, &maker))
                .collect();
            return Some(by_answer(question, &by, &also, &maker));
        }
    }
    Some(list_answer(question, &listed, None, false, None))
}

/// Each thing of several words an English question names ([`text::named_phrases`]: "Three
/// Kingdoms"), in the forms a record may hold it: as written (normalised) and in the Chinese
/// headwords the dictionary gives for the whole name (三国). Empty for a Chinese question and
/// for names of one word (held or not, never apart).
fn named_forms(question: &str) -> Vec<Vec<String>> {
    if is_chinese(question) {
        return Vec::new();
    }
    let dict = crate::retrieval::dictionary::dictionary();
    text::names_of_several_words(question)
        .into_iter()
        .map(|n| {
            let toks = text::latin_tokens(&n);
            let words: Vec<&str> = toks.iter().map(String::as_str).collect();
            let mut forms = vec![n.clone()];
            for (phrase, heads) in dict.chinese_of(&words) {
                if phrase.len() == words.len() {
                    forms.extend(heads.into_iter().map(str::to_string));
                }
            }
            forms
        })
        .collect()
}

/// Whether an exhibit's title, maker, period or description holds every named thing
/// ([`named_forms`]) in one of its forms.
fn holds_named(e: &Exhibit, named: &[Vec<String>]) -> bool {
    let doc = normalize(&format!(
        "{} {} {} {}",
        e.title, e.maker, e.period, e.description
    ));
    named
        .iter()
        .all(|forms| forms.iter().any(|f| doc.contains(f.as_str())))
}

/// What a list says of each exhibit after its title: its maker and when it was made.
fn list_details(e: &Exhibit) -> Vec<String> {
    [maker_head(&e.maker), when_made(e)]
        .into_iter()
        .flatten()
        .collect()
}

/// Listed exhibits as an English answer names them: “title” (details, [`list_details`]),
/// joined with commas and "and".
fn en_items(listed: &[&Exhibit]) -> String {
    let items: Vec<String> = listed
        .iter()
        .map(|e| {
            // A Chinese catalogue's dynasty in English (東魏 → the Eastern Wei, 534–550).
            let when = when_made(e).map(|w| {
                crate::retrieval::dating::dynasty_in_english(&w).map_or(w, str::to_string)
            });
            let d: Vec<String> = maker_head(&e.maker).into_iter().chain(when).collect();
            if d.is_empty() {
                format!("“{}”", e.title.trim())
            } else {
                format!("“{}” ({})", e.title.trim(), d.join(", "))
            }
        })
        .collect();
    and_list(&items)
}

/// The answer to "Do you have anything by X?" when some of the list is by X (`by`) and some
/// only mentions X (`also`): the two said apart, the works by X first (so "the first one" is
/// one of them).
fn by_answer(question: &str, by: &[&Exhibit], also: &[&Exhibit], maker: &str) -> String {
    let details = list_details;
    if is_chinese(question) {
        let script = visitor_script(question);
        let q = |s: &str| text::in_script(s, script);
        let name = q(maker);
        let mut out = format!(
            "馆藏资料里{name}的作品有：{}",
            zh_items(by, &q, details).join("、")
        );
        if !also.is_empty() {
            out.push_str(&format!(
                "；这些展品的资料也提到了{name}：{}",
                zh_items(also, &q, details).join("、")
            ));
        }
        out.push_str("。想了解哪一件，可以继续问我，比如：第一件是什么年代的？");
        return match script {
            Script::Traditional => text::to_traditional(&out),
            _ => out,
        };
    }
    let items = en_items;
    let name = as_written(question, maker);
    let also = if also.is_empty() {
        String::new()
    } else {
        format!(" These records also mention {name}: {}.", items(also))
    };
    format!(
        "By {name}, our collection records list {}.{also} Ask me about any of them, for example: \
         When was the first one made?",
        items(by)
    )
}

/// Whether an English `title` names a thing a Chinese keyword names: one of its words is, as an
/// index token, a word of `senses`, the keyword's noun senses in CC-CEDICT (佛像, "Buddhist image;
/// statue of Buddha or Bodhisattva": "The Bodhisattva Guanyin", "A Buddhist Votive Tablet"). A
/// title word whose -ing or -ed the stemmer takes off is a verb's form, not the thing
/// ("Chopping Tool" is no 印章, "chop"; a "Signet Ring" is a 戒指, "ring"). Nouns in -ing
/// ("Painting") are lost with them; kinds the catalogue names go the kind path anyway. Such a hit is listed after the one record that writes the keyword even when it
/// scores above it ([`browse_answer`]): 有没有佛像？ was answered with one rubbing, the Buddhas
/// dropped as scoring above it, while "Do you have Buddha statues?" listed them.
fn title_translates(senses: &[&[Box<str>]], title: &str) -> bool {
    if senses.is_empty() {
        return false;
    }
    normalize(title).split_whitespace().any(|w| {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        text::latin_tokens(w).first().is_some_and(|t| {
            // The stemmer took -ing or -ed off: a verb's form ("ring" and "bed" are kept).
            let verb_form = t != w && (w.ends_with("ing") || w.ends_with("ed"));
            !verb_form && senses.iter().any(|p| p.iter().any(|s| **s == **t))
        })
    })
}

/// The answer to a request for more of a list that came from the search ("Any more?" after
/// "Do you have any swords?"): `hits` are the matches not listed before, within
/// [`BROWSE_NEAR`] of the search's best (`more_matches`), none when there are no more.
pub fn more_of_list_answer(question: &str, hits: &[Hit]) -> String {
    let mut listed: Vec<&Exhibit> = Vec::new();
    for h in hits.iter().take(BROWSE_MAX) {
        if !listed
            .iter()
            .any(|e| e.title.trim() == h.exhibit.title.trim())
        {
            listed.push(&h.exhibit);
        }
    }
    list_answer(question, &listed, None, true, None)
}

/// The matches of a search that continue a list: those whose titles are not in `shown` and
/// that score within [`BROWSE_NEAR`] of the best of all (a weaker match is not "more of the
/// same"), at most [`BROWSE_MAX`].
pub fn more_matches(hits: Vec<Hit>, shown: &[String]) -> Vec<Hit> {
    let Some(top) = hits.first().map(|h| h.score) else {
        return hits;
    };
    let near: Vec<Hit> = hits
        .into_iter()
        .filter(|h| super::as_good_as(h.score, top, BROWSE_NEAR))
        .collect();
    not_listed(near, shown)
}

/// The first [`BROWSE_MAX`] of `hits` whose titles are not in `shown` (compared normalised).
pub fn not_listed(hits: Vec<Hit>, shown: &[String]) -> Vec<Hit> {
    let key = |t: &str| normalize(t.trim());
    let shown: Vec<String> = shown.iter().map(|t| key(t)).collect();
    hits.into_iter()
        .filter(|h| !shown.contains(&key(&h.exhibit.title)))
        .take(BROWSE_MAX)
        .collect()
}

/// The answer to a browse question about a kind of object the collection holds
/// ([`crate::retrieval::Browse`]): how many, in which of the museum's departments or media,
/// then a few of them as [`browse_answer`] lists them.
pub fn kind_answer(question: &str, browse: &crate::retrieval::Browse) -> String {
    if browse.of_kind > 0 && browse.shown == 0 {
        return none_of_period(question, browse);
    }
    let listed: Vec<&Exhibit> = browse.hits.iter().map(|h| &h.exhibit).collect();
    if !browse.makers.is_empty() {
        let answer = most_works_answer(question, &listed, browse);
        // "Who is the most famous artist?": no catalogue ranks fame; said before the count.
        if browse.shown == 0 && crate::retrieval::kinds::asks_renown(question) {
            let preface = if is_chinese(question) {
                zh_in("馆藏记录不为艺术家的名气排名。", question)
            } else {
                "Our records do not rank artists by fame. ".to_string()
            };
            return preface + &answer;
        }
        return answer;
    }
    let list = list_answer(question, &listed, Some(browse), browse.shown > 0, None);
    // "What is the prettiest vase?": the catalogue ranks no beauty; the kind is listed.
    if browse.shown == 0 && browse.order.is_none() && crate::retrieval::kinds::asks_taste(question)
    {
        let preface = if is_chinese(question) {
            zh_in("哪一件最好看，要由您来评判。", question)
        } else {
            "Which is the finest is for you to judge. ".to_string()
        };
        return preface + &list;
    }
    list
}

/// A kind of which a period left none ([`crate::retrieval::Browse::of_kind`]): the collection
/// has the kind, and none that mentions the period ("提到": a record naming it in passing
/// would have counted). Said so; the search's list had shown other periods' porcelain as
/// "related" to 唐代的瓷器.
fn none_of_period(question: &str, b: &crate::retrieval::Browse) -> String {
    let kind: Vec<&str> = b.kind_words().collect();
    if is_chinese(question) {
        let script = visitor_script(question);
        let q = |s: &str| text::in_script(s, script);
        let kind: String = kind.iter().map(|w| q(w)).collect();
        let period: String = b
            .qualifiers
            .iter()
            .map(|w| q(w))
            .collect::<Vec<_>>()
            .join("和");
        let out = format!(
            "馆藏中有{}件{kind}，但没有提到{period}的。可以问问其他时代的{kind}。",
            b.of_kind
        );
        return match script {
            Script::Traditional => text::to_traditional(&out),
            _ => out,
        };
    }
    let kind: Vec<String> = kind.iter().map(|w| as_written(question, w)).collect();
    format!(
        "Our collection has {} exhibits of {}, but none that mention {}. You could ask about \
         those of another period.",
        b.of_kind,
        kind.join(" "),
        mentioned(question, &b.qualifiers)
    )
}

/// A list of exhibits, each with the head of its maker and date fields, and an invitation to
/// ask about one; headed by the kind's total when there is one, or, for a search's list of
/// records that only mention the maker the question asks for (`not_by`: "Do you have anything
/// by Monet?", none by him), by saying the records list no work of theirs.
fn list_answer(
    question: &str,
    listed: &[&Exhibit],
    kind: Option<&crate::retrieval::Browse>,
    more: bool,
    not_by: Option<&str>,
) -> String {
    // More of a list the visitor has seen: none left to list.
    if more && listed.is_empty() {
        return if is_chinese(question) {
            zh_in(
                "能列出的就是这些了。想了解其中哪一件，可以继续问我，或者问问别的类别。",
                question,
            )
        } else {
            "That is as many as I can list. Ask me about any of those, or about another kind of \
             object."
                .to_string()
        };
    }
    if let Some(b) = kind
        && let Some(order) = b.order
    {
        return order_answer(question, listed, b, order, more);
    }
    let details = list_details;
    if is_chinese(question) {
        let script = visitor_script(question);
        let q = |s: &str| text::in_script(s, script);
        let items = zh_items(listed, &q, details);
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
            // 馆藏中有 95 件日本的展品，例如：(where or when they were made, in the visitor's words)
            Some(b) if b.origin => {
                let words = origin_words(b, question, "和");
                if b.shown > 0 {
                    format!("馆藏的{}件{words}的展品里，还有：", b.total)
                } else {
                    format!("馆藏中有{}件{words}的展品，例如：", b.total)
                }
            }
            // 馆藏中有 200 件瓷器（Ceramics），例如： / 馆藏中「艺术品／文献」类的展品有 984 件，例如：
            Some(b) if b.label.chars().any(text::is_cjk) => {
                let about = if narrowed.is_empty() {
                    String::new()
                } else {
                    format!("、提到{narrowed}")
                };
                if b.shown > 0 {
                    format!(
                        "馆藏中「{}」类{about}的{}件展品里，还有：",
                        q(&b.label),
                        b.total
                    )
                } else {
                    format!(
                        "馆藏中「{}」类{about}的展品有{}件，例如：",
                        q(&b.label),
                        b.total
                    )
                }
            }
            Some(b) => {
                // 清朝的瓷器: "the porcelain that mentions 清朝", not "Qing porcelain": a record
                // that names the word in passing counts too.
                let mention = if narrowed.is_empty() {
                    String::new()
                } else {
                    format!("提到{narrowed}的")
                };
                // 陶瓷和玉器: a list of kinds is said as one.
                let words: String = if b.kinds.is_empty() {
                    b.kind_words().collect()
                } else {
                    b.kinds.join("和")
                };
                let label = if b.label.is_empty() {
                    String::new()
                } else {
                    format!("（{}）", b.label)
                };
                if b.shown > 0 {
                    format!("馆藏的{}件{mention}{words}{label}里，还有：", b.total)
                } else {
                    format!("馆藏中有{}件{mention}{words}{label}，例如：", b.total)
                }
            }
            None if more => "馆藏中与此相关的展品还有：".to_string(),
            None => match not_by {
                Some(m) => format!("馆藏资料里没有找到{m}的作品，不过这些展品的资料提到了{m}："),
                None => "馆藏中与此相关的展品有：".to_string(),
            },
        };
        let kept = kind
            .filter(|_| !more)
            .map(|b| kept_in(b, true))
            .unwrap_or_default();
        let out = format!(
            "{head}{}。{kept}想了解哪一件，可以继续问我，比如：第一件是什么年代的？",
            items.join("、")
        );
        let out = if one_of_kind(kind, more) {
            out.replacen("，例如：", "：", 1).replacen(
                "想了解哪一件，可以继续问我，比如：第一件是什么年代的？",
                "想了解它，可以继续问我，比如：它是什么年代的？",
                1,
            )
        } else {
            out
        };
        return match script {
            Script::Traditional => text::to_traditional(&out),
            _ => out,
        };
    }
    let list = en_items(listed);
    // "… that mention Chinese": the words that narrowed the kind, as the visitor wrote them
    // (not quoted: a pick, "the first one", reads the answer's quoted titles).
    let mention = match kind {
        Some(b) if !b.qualifiers.is_empty() => {
            format!(" that mention {}", mentioned(question, &b.qualifiers))
        }
        _ => String::new(),
    };
    let head = match kind {
        Some(b) if b.origin => {
            let words = origin_words(b, question, " and ");
            match (b.shown > 0, english_adjective(&words)) {
                (true, true) => format!("More of the {} {words} exhibits: ", b.total),
                (true, false) => format!("More of the {} exhibits from {words}: ", b.total),
                (false, true) => format!(
                    "Our collection has {} {words} exhibits, for example: ",
                    b.total
                ),
                (false, false) => format!(
                    "Our collection has {} exhibits from {words}, for example: ",
                    b.total
                ),
            }
        }
        Some(b) if b.shown > 0 && !b.label.is_empty() => {
            format!("More of the {} exhibits in {}{mention}: ", b.total, b.label)
        }
        Some(b) if b.shown > 0 => format!("More of the {} such exhibits{mention}: ", b.total),
        Some(b) if !b.label.is_empty() => format!(
            "Our collection has {} exhibits in {}{mention}, for example: ",
            b.total, b.label
        ),
        Some(b) => format!(
            "Our collection has {} such exhibits{mention}, for example: ",
            b.total
        ),
        None if more => "Our collection also holds these: ".to_string(),
        None => match not_by.map(|m| as_written(question, m)) {
            Some(n) => format!(
                "Our collection records list no work by {n}, but these records mention {n}: "
            ),
            None => "Our collection holds these: ".to_string(),
        },
    };
    let kept = kind
        .filter(|_| !more)
        .map(|b| kept_in(b, false))
        .unwrap_or_default();
    let out = format!(
        "{head}{list}. {kept}{}Ask me about any of them, for example: When was the first one made?",
        in_chinese_only(listed)
    );
    if !one_of_kind(kind, more) {
        return out;
    }
    // A kind a period narrowed to one ("Qing dynasty jade"): said of one.
    out.replacen("has 1 exhibits", "has one exhibit", 1)
        .replacen("has 1 such exhibits", "has one such exhibit", 1)
        .replacen(" that mention ", " that mentions ", 1)
        .replacen(", for example: ", ": ", 1)
        .replacen("Their records are", "Its record is", 1)
        .replacen(
            "Ask me about any of them, for example: When was the first one made?",
            "Ask me about it, for example: When was it made?",
            1,
        )
}

/// Whether a kind's listing is of its one exhibit (a period narrowed it to one:
/// `kinds::resolve`), not more of a list.
fn one_of_kind(kind: Option<&crate::retrieval::Browse>, more: bool) -> bool {
    !more && kind.is_some_and(|b| b.total == 1 && b.order.is_none() && b.makers.is_empty())
}

/// For an English visitor told a list: whether the records listed are written in Chinese
/// ("Their records are in Chinese only. "), some of them, or none (empty). "Our collection holds
/// these: “東魏李仲璇修孔子廟碑拓本” …" left the visitor to guess why.
fn in_chinese_only(listed: &[&Exhibit]) -> &'static str {
    let chinese = listed.iter().filter(|e| is_chinese(&e.description)).count();
    match chinese {
        0 => "",
        n if n == listed.len() => "Their records are in Chinese only. ",
        _ => "Some of their records are in Chinese only. ",
    }
}

/// The answer for the makers with the most works ([`crate::retrieval::Browse::makers`]): the
/// first with their count, the next ones, and a few of the first one's works; for more of the
/// list, more of those works.
fn most_works_answer(question: &str, listed: &[&Exhibit], b: &crate::retrieval::Browse) -> String {
    let Some(((first, n), rest)) = b.makers.split_first() else {
        return String::new();
    };
    // Counted over a kind in which no maker has two: a few of its works, each by another.
    let single = *n < 2 && !b.words.is_empty();
    if b.shown > 0 && (listed.is_empty() || single) {
        return list_answer(question, listed, None, true, None);
    }
    let when = |e: &Exhibit| when_made(e).map(|d| format!(" ({d})")).unwrap_or_default();
    let maker = |e: &Exhibit| crate::retrieval::kinds::maker_name(&e.maker).map(str::to_string);
    if is_chinese(question) {
        let script = visitor_script(question);
        let q = |s: &str| text::in_script(s, script);
        let items = zh_items(listed, &q, |e| {
            let by = if single { maker(e) } else { None };
            by.into_iter().chain(when_made(e)).collect()
        });
        // The kind, and the words that narrowed it as the records hold them (本馆提到“日本”的绘画).
        let (named, narrowing) = kind_words(b);
        let joined = |ws: Vec<&String>| ws.into_iter().map(String::as_str).collect::<String>();
        let kind = if narrowing.is_empty() {
            q(&format!("本馆的{}", joined(named)))
        } else {
            q(&format!(
                "本馆提到“{}”的{}",
                joined(narrowing),
                joined(named)
            ))
        };
        let out = if b.shown > 0 {
            format!("{}的作品还有：{}。", q(first), items.join("、"))
        } else if single {
            format!(
                "{kind}中，没有哪位作者的作品超过一件（{}件记有作者），例如：{}。",
                b.total,
                items.join("、")
            )
        } else if !b.words.is_empty() {
            let next = counted(rest, |m| q(m), true);
            let next = if next.is_empty() {
                String::new()
            } else {
                format!("；其次是{}", next.join("和"))
            };
            format!(
                "在{kind}中，作品最多的是{}，共{n}件{next}。{}的作品例如：{}。",
                q(first),
                q(first),
                items.join("、")
            )
        } else {
            let next = counted(rest, |m| q(m), true);
            let next = if next.is_empty() {
                String::new()
            } else {
                format!("；其次是{}", next.join("和"))
            };
            let within = if b.qualifiers.is_empty() {
                "按馆藏记录，".to_string()
            } else {
                format!("在与“{}”有关的馆藏记录中，", q(&b.qualifiers.join(" ")))
            };
            format!(
                "{within}作品最多的是{}，共{n}件{next}。{}的作品例如：{}。",
                q(first),
                q(first),
                items.join("、")
            )
        };
        let out = format!("{out}想了解哪一件，可以继续问我，比如：第一件是什么年代的？");
        return match script {
            Script::Traditional => text::to_traditional(&out),
            _ => out,
        };
    }
    let items: Vec<String> = listed
        .iter()
        .map(|e| match maker(e).filter(|_| single) {
            Some(m) => format!("“{}” by {m}{}", e.title.trim(), when(e)),
            None => format!("“{}”{}", e.title.trim(), when(e)),
        })
        .collect();
    let (named, narrowing) = kind_words(b);
    let written = |ws: Vec<&String>| -> String {
        let ws: Vec<String> = ws.iter().map(|w| as_written(question, w)).collect();
        ws.join(" ")
    };
    let kind = if narrowing.is_empty() {
        written(named)
    } else {
        format!("{} that mention “{}”", written(named), written(narrowing))
    };
    let head = if b.shown > 0 {
        format!("More by {first}: ")
    } else if single {
        format!(
            "No maker has more than one of our {kind} ({} of them name their maker); for example: ",
            b.total
        )
    } else if !b.words.is_empty() {
        let next = counted(rest, str::to_string, false);
        let next = if next.is_empty() {
            String::new()
        } else {
            format!("; then {}", and_list(&next))
        };
        format!("Among our {kind}, {first} has the most, {n}{next}. Some of {first}'s: ")
    } else {
        let next = counted(rest, str::to_string, false);
        let next = if next.is_empty() {
            String::new()
        } else {
            format!("; then {}", and_list(&next))
        };
        if b.qualifiers.is_empty() {
            format!(
                "By our records, {first} has the most works here, {n}{next}. Some of {first}'s: "
            )
        } else {
            // The makers were counted over the records holding the visitor's words (or made
            // where they say), which need not be about the makers: said so.
            let words = b.qualifiers.join(" ");
            format!(
                "Of our records for “{words}”, {first} has the most works, {n}{next}. Some of {first}'s: "
            )
        }
    };
    format!(
        "{head}{}. Ask me about any of them, for example: When was the first one made?",
        and_list(&items)
    )
}

/// The words of a kind the makers were counted over ([`crate::retrieval::Browse::words`]):
/// those naming the kind, and those narrowing it (as the records hold them, "chinese" in
/// "Chinese paintings").
fn kind_words(b: &crate::retrieval::Browse) -> (Vec<&String>, Vec<&String>) {
    b.words.iter().partition(|w| !b.qualifiers.contains(w))
}

/// Listed exhibits as a Chinese answer names them: 《title》（detail，detail）, each in the
/// visitor's script (`q`); no brackets when `details` has none.
fn zh_items(
    listed: &[&Exhibit],
    q: &impl Fn(&str) -> String,
    details: impl Fn(&Exhibit) -> Vec<String>,
) -> Vec<String> {
    listed
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
        .collect()
}

/// Names with their counts as an answer says them: "Ceramics (31)", 「陶瓷」（31件）.
fn counted(pairs: &[(String, usize)], name: impl Fn(&str) -> String, chinese: bool) -> Vec<String> {
    pairs
        .iter()
        .map(|(m, n)| {
            if chinese {
                format!("{}（{n}件）", name(m))
            } else {
                format!("{} ({n})", name(m))
            }
        })
        .collect()
}

/// Departments named in an answer to where a kind is kept; the others are counted together.
const PLACES_NAMED: usize = 3;

/// Where a kind is kept, as its records' departments say ([`crate::retrieval::Browse::places`]),
/// a sentence ending in a space (or nothing when no record names one, or the kind is the one
/// department it is kept in): "Our records file them
/// under Ceramics (52), Metal (40) and Sculpture (30), and 34 more under 4 other departments."
fn kept_in(b: &crate::retrieval::Browse, chinese: bool) -> String {
    let places = b.places.as_slice();
    // "140 exhibits in Arms & Armor" said where already.
    if places.is_empty() || matches!(places, [(only, _)] if *only == b.label) {
        return String::new();
    }
    let (named, others) = places.split_at(places.len().min(PLACES_NAMED));
    let rest: usize = others.iter().map(|(_, n)| n).sum();
    if chinese {
        let name = |d: &str| crate::retrieval::kinds::department_in_chinese(d).unwrap_or(d.into());
        if let [(only, _)] = places {
            return format!("按馆藏记录，它们都在「{}」部门。", name(only));
        }
        let items = counted(named, |d| format!("「{}」", name(d)), true);
        let others = if others.is_empty() {
            String::new()
        } else {
            format!("，另有{rest}件分属其他{}个部门", others.len())
        };
        return format!("按馆藏记录，它们分属{}{others}。", items.join("、"));
    }
    if let [(only, _)] = places {
        return format!("Our records file them all under {only}. ");
    }
    let items = counted(named, str::to_string, false);
    let others = match others.len() {
        0 => String::new(),
        1 => format!(", and {rest} more under {}", others[0].0),
        k => format!(", and {rest} more under {k} other departments"),
    };
    format!("Our records file them under {}{others}. ", and_list(&items))
}

/// The first part of a field ("Sèvres Porcelain Manufactory (French, active …) [Maker]; …"
/// → "Sèvres Porcelain Manufactory").
fn field_head(f: &str) -> Option<String> {
    let f = f.split([';', '[']).next().unwrap_or("").trim();
    let f = f.split(" (").next().unwrap_or("").trim();
    let f = f.trim_end_matches([',', '，']).trim();
    (!f.is_empty()).then(|| clip(f, 40))
}

/// The maker a list names an exhibit by: the first part of its maker field ([`field_head`])
/// that is not a publisher's or a printer's ("Sanoki (Japanese) [Publisher]; Utagawa Kuniyoshi
/// (Japanese, 1798-1861)" → "Utagawa Kuniyoshi": a list of his prints named the publisher as
/// the maker of one), else the first part.
fn maker_head(f: &str) -> Option<String> {
    const NOT_MAKERS: &[&str] = &["[publisher]", "[printer]"];
    f.split([';', '；'])
        .find(|part| {
            let p = part.to_lowercase();
            !part.trim().is_empty() && !NOT_MAKERS.iter().any(|r| p.contains(r))
        })
        .and_then(field_head)
        .or_else(|| field_head(f))
}

/// When `e` was made, short: the date of its first part ("Vase: 1661-1722; Lid: …" →
/// "1661-1722"), else its period (唐).
fn when_made(e: &Exhibit) -> Option<String> {
    let date = field_head(&e.date).map(|d| match d.split_once(": ") {
        Some((part, rest))
            if part.chars().count() <= 24
                && part.chars().all(|c| c.is_alphabetic() || c == ' ')
                && !rest.trim().is_empty() =>
        {
            rest.trim().to_string()
        }
        _ => d,
    });
    date.or_else(|| field_head(&e.period))
}

/// The answer to "What is the oldest …?" / "the biggest …" ([`crate::retrieval::Browse::order`]):
/// the exhibits of the kind (or of the whole collection) whose records give a date (or
/// measurements) in that order, each with its date (or measurements), and how many the
/// comparison could not count because their records give none.
fn order_answer(
    question: &str,
    listed: &[&Exhibit],
    b: &crate::retrieval::Browse,
    order: Order,
    more: bool,
) -> String {
    let uncompared = b.total.saturating_sub(b.compared);
    let value = |e: &Exhibit| {
        if order.by_size() {
            size_of(&e.dimensions).map(|s| s.display())
        } else {
            when_made(e)
        }
    };
    if is_chinese(question) {
        let script = visitor_script(question);
        let q = |s: &str| text::in_script(s, script);
        let items: Vec<String> = listed
            .iter()
            .map(|e| match value(e) {
                Some(d) => format!("《{}》（{}）", q(e.title.trim()), q(&d)),
                None => format!("《{}》", q(e.title.trim())),
            })
            .collect();
        // 瓷器（Ceramics）, 日本的展品, 「艺术品／文献」类展品; the whole collection: 展品.
        let what = if b.words.is_empty() {
            "展品".to_string()
        } else if b.origin {
            format!("{}的展品", origin_words(b, question, "和"))
        } else if b.label.chars().any(text::is_cjk) {
            format!("「{}」类展品", q(&b.label))
        } else {
            let words: String = b.words.iter().map(String::as_str).collect();
            if b.label.is_empty() {
                words
            } else {
                format!("{words}（{}）", b.label)
            }
        };
        let superlative = match order {
            Order::Oldest => "最古老的",
            Order::Newest => "年代最晚的",
            Order::Largest => "最大的",
            Order::Smallest => "最小的",
        };
        let by = if order.by_size() { "尺寸" } else { "年代" };
        let out = if b.compared == 0 {
            format!(
                "馆藏的{}件{what}都没有{by}记载，我无法判断哪一件{}。",
                b.total,
                superlative.trim_end_matches('的')
            )
        } else if more {
            format!(
                "按{by}排，接下来是：{}。想了解哪一件，可以继续问我。",
                items.join("、")
            )
        } else {
            let (first, then) = first_then(&items, |rest| format!("，其次是{}", rest.join("、")));
            let note = if uncompared > 0 {
                format!("（另有{uncompared}件没有{by}记载，未计入。）")
            } else {
                String::new()
            };
            format!(
                "馆藏中有{by}记载的{}件{what}里，{superlative}是{first}{then}。{note}想了解哪一件，可以继续问我，比如：介绍一下第一件。",
                b.compared
            )
        };
        return match script {
            Script::Traditional => text::to_traditional(&out),
            _ => out,
        };
    }
    let items: Vec<String> = listed
        .iter()
        .map(|e| match value(e) {
            Some(d) => format!("“{}” ({d})", e.title.trim()),
            None => format!("“{}”", e.title.trim()),
        })
        .collect();
    let mention = if b.qualifiers.is_empty() {
        String::new()
    } else {
        format!(" that mention {}", mentioned(question, &b.qualifiers))
    };
    // "dated exhibits in our collection", "dated Chinese exhibits", "measured exhibits in Arms
    // & Armor that mention Japanese".
    let (adjective, given, by) = if order.by_size() {
        ("measured", "measurements", "size")
    } else {
        ("dated", "date", "date")
    };
    let what = if b.words.is_empty() {
        "exhibits in our collection".to_string()
    } else if b.origin {
        let words = origin_words(b, question, " and ");
        if english_adjective(&words) {
            format!("{words} exhibits")
        } else {
            format!("exhibits from {words}")
        }
    } else if b.label.is_empty() {
        format!("exhibits of this kind{mention}")
    } else {
        format!("exhibits in {}{mention}", b.label)
    };
    let superlative = match order {
        Order::Oldest => "oldest",
        Order::Newest => "most recent",
        Order::Largest => "largest",
        Order::Smallest => "smallest",
    };
    if b.compared == 0 {
        return format!(
            "Our records give no {given} for any of the {} {what}, so I can't tell which is the \
             {superlative}.",
            thousands(b.total)
        );
    }
    if more {
        return format!(
            "Next, by {by}: {}. Ask me about any of them.",
            and_list(&items)
        );
    }
    let (first, then) = first_then(&items, |rest| format!("; then {}", and_list(rest)));
    let note = if uncompared > 0 {
        let (has, records, are) = if uncompared == 1 {
            ("has", "its record", "it is")
        } else {
            ("have", "their records", "they are")
        };
        format!(
            " ({} more {has} no {given} in {records}, so {are} not compared.)",
            thousands(uncompared)
        )
    } else {
        String::new()
    };
    format!(
        "Of the {} {adjective} {what}, the {superlative} is {first}{then}.{note} Ask me about any \
         of them, for example: Tell me about the first one.",
        thousands(b.compared)
    )
}

/// The first of `items`, and the rest as `then` says them (empty when there is no rest).
fn first_then(items: &[String], then: impl Fn(&[String]) -> String) -> (&str, String) {
    match items.split_first() {
        Some((first, rest)) if !rest.is_empty() => (first, then(rest)),
        Some((first, _)) => (first, String::new()),
        None => ("", String::new()),
    }
}

/// "a, b and c".
fn and_list(items: &[String]) -> String {
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// The words of an origin list ([`crate::retrieval::Browse::origin`]) as the visitor wrote
/// them, joined by `and` ("Japan", "Japan and China", 古埃及).
fn origin_words(b: &crate::retrieval::Browse, question: &str, and: &str) -> String {
    let lower = question.to_lowercase();
    let written = |w: &String| {
        // Places and peoples are capitalised in English, also when the question does not
        // hold the word ("Any more?" after "Where are the Egyptian exhibits?").
        let w = match as_written(question, w) {
            same if same == *w && w.is_ascii() => capitalized(w),
            as_asked => as_asked,
        };
        // "Anything from the Renaissance?": "from the Renaissance", as asked; not an adjective
        // ("Where are the Egyptian exhibits?": "156 Egyptian exhibits").
        // "Tang dynasty objects": "from the Tang dynasty" too.
        let period = ["dynasty", "dynasties", "period", "era"]
            .iter()
            .any(|p| w.to_lowercase().ends_with(&format!(" {p}")));
        if (period || lower.contains(&format!("the {}", w.to_lowercase())))
            && !english_adjective(&w)
        {
            format!("the {w}")
        } else {
            w
        }
    };
    let words: Vec<String> = if b.kinds.is_empty() {
        b.words.iter().map(written).collect()
    } else {
        b.kinds.iter().map(written).collect()
    };
    // One place in words the question wrote together ("Anything from North Africa?": the
    // exhibits hold both, not either): as written, not "North and Africa".
    let together = words.join(" ");
    if b.kinds.is_empty() && words.len() > 1 && lower.contains(&together.to_lowercase()) {
        return together;
    }
    words.join(and)
}

/// Each word of `w` with a capital first letter ("egyptian" → "Egyptian").
fn capitalized(w: &str) -> String {
    w.split(' ')
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default()
        })
        .collect::<Vec<String>>()
        .join(" ")
}

/// Whether English words of an origin read as an adjective ("Egyptian", "Japanese", "French":
/// "155 Egyptian exhibits") rather than a place or period ("exhibits from Japan").
fn english_adjective(words: &str) -> bool {
    const ENDINGS: &[&str] = &[
        "ian", "ean", "ese", "ish", "ic", "ine", "que", "can", "man", "ch", "ek", "ai",
    ];
    let w = words.to_lowercase();
    !w.contains(" and ") && ENDINGS.iter().any(|e| w.ends_with(e))
}

/// The words that narrowed a kind, as the visitor wrote them, for "… that mention {}": words
/// next to each other in the question are one phrase ("Alfred Jacob Miller", not "Alfred and
/// Jacob and Miller"), phrases are joined by "and" ("Chinese and dragons").
fn mentioned(question: &str, qualifiers: &[String]) -> String {
    let lower = question.to_lowercase();
    let mut phrases: Vec<String> = Vec::new();
    let mut last: Option<&str> = None;
    for w in qualifiers {
        let next_to_last = last.is_some_and(|l| lower.contains(&format!("{l} {w}")));
        match phrases.last_mut() {
            Some(p) if next_to_last => {
                p.push(' ');
                p.push_str(&as_written(question, w));
            }
            _ => phrases.push(as_written(question, w)),
        }
        last = Some(w);
    }
    phrases.join(" and ")
}

/// `word` (normalised, lower case) as `question` writes it ("chinese" → "Chinese").
pub(super) fn as_written(question: &str, word: &str) -> String {
    let lower = question.to_lowercase();
    match lower.find(word) {
        Some(at) if lower.len() == question.len() => question[at..at + word.len()].to_string(),
        _ => word.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::hit;
    use super::super::{compose, compose_with};
    use super::*;

    #[test]
    fn words_next_to_each_other_are_mentioned_as_one_phrase() {
        let q = |v: &[&str]| v.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(
            mentioned(
                "Do you have any paintings by Alfred Jacob Miller?",
                &q(&["alfred", "jacob", "miller"])
            ),
            "Alfred Jacob Miller"
        );
        assert_eq!(
            mentioned(
                "Any Chinese paintings of dragons?",
                &q(&["chinese", "dragons"])
            ),
            "Chinese and dragons"
        );
        assert_eq!(mentioned("Japanese armor", &q(&["japanese"])), "Japanese");
    }

    #[test]
    fn a_chinese_kind_lists_the_english_titles_that_name_it_above_the_one_that_writes_it() {
        let scored = |title: &str, score: f64| Hit {
            score,
            ..hit(title, "", "", "A record.")
        };
        // The keyword step put the one record that writes 佛像 first; the Buddhas score above it.
        let hits = [
            scored("唐龍門石窟古陽洞佛像拓片", 0.67),
            scored("Lion Pedestal with Attendant", 1.0),
            scored("A Buddhist Votive Tablet", 0.93),
            scored("The Bodhisattva Guanyin", 0.9),
        ];
        let list = browse_answer("有没有佛像？", &hits).expect("a list");
        assert!(
            list.contains("唐龙门") && list.contains("Bodhisattva Guanyin"),
            "{list}"
        );
        assert!(
            list.contains("Votive Tablet") && !list.contains("Lion"),
            "{list}"
        );
        // A verb's form is not the thing: 印章 is a "chop", a Chopping Tool is not a seal.
        let hits = [
            scored("學部舉人執照", 0.7),
            scored("Chopping Tool with Red and Black Decoration", 1.0),
            scored("Signet Ring", 0.9),
        ];
        let list = browse_answer("有没有印章？", &hits).expect("a list");
        assert!(
            list.contains("Signet Ring") && !list.contains("Chopping"),
            "{list}"
        );
        // A word the stemmer leaves alone is no verb's form, -ing or not: 戒指, "ring".
        let hits = [scored("金戒指", 0.7), scored("Signet Ring", 0.9)];
        let list = browse_answer("有没有戒指？", &hits).expect("a list");
        assert!(list.contains("Signet Ring"), "{list}");
        // A stamped binding is no 邮票: one answer, no list.
        let hits = [
            scored("詹天佑函", 0.66),
            scored("Binding from Book of Hours", 1.0),
        ];
        assert_eq!(browse_answer("有没有邮票？", &hits), None);
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
            "What jewelry is on display?",
            "Which paintings are on view?",
            "What Chinese bronzes are currently on show?",
            "Anything from Japan?",
            "Do you have objects from ancient Egypt?",
            "Do you have paintings from China?",
            "Are there any vases from the Qing dynasty?",
            "Is there anything from the Renaissance?",
            "What do you have from the Qing dynasty?",
            "What have you got from Japan?",
            "Which things are from Japan?",
            "What is from Egypt?",
            "Which objects are from the Ming dynasty?",
            "Show me swords",
            "I want to see swords",
            "I'm interested in cats",
            "I love Japanese prints!",
            "我想看看剑",
            "我喜欢猫",
            "我对瓷器感兴趣",
            "请给我看看青铜器",
            "Show me armor",
            "I'd like to see Japanese prints",
            "我想看瓷器",
            // Every wish and taste of `openings`, and a contraction.
            "Can you show me swords?",
            "I really love cats",
            "We're interested in Japanese armor",
            "My kids love dinosaurs",
            "Don't you have any swords?",
            // A bare plural is things of a kind, as typed on a kiosk or a phone.
            "swords",
            "Cats",
            "Swords?",
            "Japanese prints",
            "Paintings of horses",
            "prints showing cats",
            // 这 of a place is not 这 of an exhibit (这里有青铜器吗？ was searched).
            "这里有青铜器吗？",
            "你们这边有铜镜吗",
            "這裡有瓷器嗎？",
            // A maker's works are a list.
            "Any works by Kuniyoshi?",
            "Do you have prints by Utagawa Kuniyoshi?",
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
            "这里这件有年代吗？",
            "Do you know who made it?",
            "Is there a painting of a Native American woman hunting buffalo on horseback?",
            "你们这里有康熙年间烧的那种豇豆红釉的瓷器吗？",
            "What is on display?",
            "What is from this period?",
            "Which vase came from the tomb of the emperor's favourite concubine?",
            "Is the Peach Bloom Vase on display?",
            "What is the vase on display?",
            "Which room is the armor displayed in?",
            "Anything else?",
            "Do you have a letter from the president?",
            // A wish for one exhibit, or a taste for something that is not a kind.
            "Show me the Peach Bloom Vase",
            "I want to see “Dragons”",
            "I like this one",
            "I love it",
            "I like your museum",
            "我想看看《清明上河图》",
            "我喜欢这件",
            // A bare singular, or a word in -s that is no plural.
            "sword",
            "glass",
            "Venus",
            "“Dragons”",
            "paintings of a woman hunting buffalo on horseback",
            "painting of horses",
        ] {
            assert!(!is_browse(q), "{q}");
        }
        for q in [
            "Tell me about ceramics",
            "Tell me about Chinese porcelain.",
            "What about Japanese armor?",
            "介绍一下青铜器",
            "请给我讲讲瓷器",
            // Bare keywords, as typed on a kiosk.
            "ivory",
            "Japanese armor",
            "Japan",
            "Sèvres porcelain.",
            // A Chinese word: read as a kind when it names one, else searched (詹天佑).
            "青铜器",
            "日本",
            "詹天佑",
            // A period or things in the plural after "the" (one closest match each before).
            "Tell me about the Ming dynasty",
            "What about the Edo period?",
            "Tell me about the Japanese prints",
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
            // Not keywords: questions, greetings, one thing, more than a few words.
            "ivory?",
            "hello",
            "thank you",
            "who",
            "the armor",
            "armor of Japan",
            "Japanese lacquer writing box",
            "詹天佑是谁",
            "青铜器？",
            "你好",
            "谢谢",
            "康熙年间烧的豇豆红釉瓷器",
            "器",
            "1001",
        ] {
            assert!(!is_kind_topic(q), "{q}");
        }
    }

    #[test]
    fn a_list_for_a_named_thing_holds_it_not_its_words_apart() {
        let tsuba = hit(
            "Tsuba with Chinese Generals",
            "",
            "18th century",
            "Heroes of the Three Kingdoms.",
        );
        let mut vessel = hit("Vessel with Lid", "", "", "Three feet; Old Kingdom.");
        vessel.score = 0.98;
        let mut stele = hit("魏王基碑拓本", "", "", "三國魏隸書碑刻。");
        stele.score = 0.9;
        stele.exhibit.period = "魏".into();
        let hits = [tsuba, vessel, stele];
        let en = compose(
            "Do you have anything about the Three Kingdoms?",
            Some(&hits),
        );
        assert!(
            en.starts_with(
                "Our collection holds these: “Tsuba with Chinese Generals” (18th century) and \
                 “魏王基碑拓本” (the Wei kingdom, 220–266). Some of their records are in Chinese \
                 only. Ask me"
            ),
            "{en}"
        );
        // None holds it: the list is as before.
        let apart = [hits[1].clone(), hits[1].clone(), hits[0].clone()];
        let mut other = apart.clone();
        other[1].exhibit.title = "Old Kingdom Jar".into();
        let en = compose("Do you have anything about the Two Kingdoms?", Some(&other));
        assert!(en.contains("“Old Kingdom Jar”"), "{en}");
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
        // Hits ranked after the first but scoring above it (it was put first for holding the
        // keyword as written) are not listed: one match, answered from it.
        let mut first = hits[0].clone();
        first.score = 0.7;
        let demoted = [first, hits[1].clone(), hits[2].clone()];
        let one = compose("Do you have any armor?", Some(&demoted));
        assert!(one.starts_with("The closest match"), "{one}");
        // A pick from the list is named as the visitor's, with nothing else suggested.
        let pick = compose_with("Tell me about the second one", Some(&hits[1..]), true);
        assert_eq!(pick, "“Body Armor”. The record says: Plates.");
        let pick = compose_with("第二件是什么？", Some(&hits[1..]), true);
        assert!(pick.starts_with("《Body Armor》。"), "{pick}");
    }

    #[test]
    fn a_list_for_a_maker_none_of_it_is_by_says_so() {
        let mut a = hit(
            "Bordeaux, the Harbor",
            "Eugène Louis Boudin",
            "1874",
            "Monet's teacher.",
        );
        a.exhibit.description = "Boudin taught the young Monet to paint outdoors.".into();
        let mut b = hit(
            "Portrait of George A. Lucas",
            "James McNeill Whistler",
            "1886",
            "x.",
        );
        b.exhibit.description = "Lucas knew Whistler, Manet and Monet.".into();
        b.score = 0.95;
        let mut c = hit(
            "Classical Scene",
            "Frank Blackwell Mayer",
            "1848",
            "A scene.",
        );
        c.score = 0.9;
        let hits = [a.clone(), b.clone(), c];
        let en = compose("Do you have anything by Monet?", Some(&hits));
        assert_eq!(
            en,
            "Our collection records list no work by Monet, but these records mention Monet: “Bordeaux, the Harbor” (Eugène Louis Boudin, 1874) and “Portrait of George A. Lucas” (James McNeill Whistler, 1886). Ask me about any of them, for example: When was the first one made?"
        );
        let mut zh_a = a.clone();
        zh_a.exhibit.description = "这幅画受齐白石影响。".into();
        let mut zh_b = b.clone();
        zh_b.exhibit.description = "卢卡斯收藏过齐白石的画。".into();
        let zh = compose("有没有齐白石画的画？", Some(&[zh_a, zh_b]));
        assert!(
            zh.starts_with("馆藏资料里没有找到齐白石的作品，不过这些展品的资料提到了齐白石：《Bordeaux, the Harbor》"),
            "{zh}"
        );
        // One of the list is by the maker: it comes first, the one that mentions them is said
        // apart (the list was one, as if both were his).
        let mut by = b.clone();
        by.exhibit.maker = "Claude Monet (French, 1840-1926)".into();
        let listed = compose("Do you have anything by Monet?", Some(&[a.clone(), by]));
        assert_eq!(
            listed,
            "By Monet, our collection records list “Portrait of George A. Lucas” (Claude Monet, 1886). These records also mention Monet: “Bordeaux, the Harbor” (Eugène Louis Boudin, 1874). Ask me about any of them, for example: When was the first one made?"
        );
        let mut zh_by = b.clone();
        zh_by.exhibit.maker = "齐白石".into();
        let mut zh_a = a.clone();
        zh_a.exhibit.description = "这幅画受齐白石影响。".into();
        let zh = compose("有没有齐白石画的画？", Some(&[zh_a, zh_by]));
        assert!(
            zh.starts_with("馆藏资料里齐白石的作品有：《Portrait of George A. Lucas》（齐白石，1886）；这些展品的资料也提到了齐白石：《Bordeaux, the Harbor》"),
            "{zh}"
        );
        // None of it is by the maker nor mentions them: not a list.
        let mut none = [a, b];
        for h in &mut none {
            h.exhibit.description = "A painting.".into();
        }
        let one = compose("Do you have anything by Monet?", Some(&none));
        assert!(!one.contains("these"), "{one}");
    }

    #[test]
    fn more_of_a_search_list_is_its_near_matches_not_listed_before() {
        let scored = |t: &str, score: f64| Hit {
            score,
            ..hit(t, "", "", "x.")
        };
        let hits = vec![
            scored("Long Sword", 1.0),
            scored("Short Sword", 0.9),
            scored("Sword Guard", 0.8),
            scored("Mourning Virgin", 0.5),
        ];
        let titles =
            |hs: &[Hit]| -> Vec<String> { hs.iter().map(|h| h.exhibit.title.clone()).collect() };
        let more = more_matches(hits, &["long sword".to_string()]);
        assert_eq!(titles(&more), ["Short Sword", "Sword Guard"]);
        // Nor are hits scoring above the first "more of the same".
        let ranked_below = vec![scored("Seal", 0.7), scored("Chopping Tool", 1.0)];
        assert_eq!(more_matches(ranked_below, &[]).len(), 1);
        assert_eq!(
            more_of_list_answer("Any more?", &more),
            "Our collection also holds these: “Short Sword” and “Sword Guard”. Ask me about any of them, for example: When was the first one made?"
        );
        assert!(
            more_of_list_answer("Any more?", &[]).starts_with("That is as many as I can list.")
        );
        assert!(more_of_list_answer("还有吗？", &[]).starts_with("能列出的就是这些了。"));
    }

    #[test]
    fn a_kind_is_answered_with_its_total_and_the_museums_name_for_it() {
        let browse = |label: &str, words: &[&str]| crate::retrieval::Browse {
            total: 140,
            label: label.into(),
            words: words.iter().map(|w| w.to_string()).collect(),
            qualifiers: Vec::new(),
            kinds: Vec::new(),
            origin: false,
            shown: 0,
            order: None,
            compared: 0,
            places: Vec::new(),
            makers: Vec::new(),
            of_kind: 0,
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
    fn the_oldest_are_listed_with_their_dates_and_the_undated_are_counted_out() {
        let by_age = |words: &[&str], label: &str, age, compared| crate::retrieval::Browse {
            total: 2700,
            label: label.into(),
            words: words.iter().map(|w| w.to_string()).collect(),
            qualifiers: Vec::new(),
            kinds: Vec::new(),
            origin: false,
            shown: 0,
            order: Some(age),
            compared,
            places: Vec::new(),
            makers: Vec::new(),
            of_kind: 0,
            hits: vec![
                hit("Armlet", "", "ca. 6000-3000 BC", "An armlet."),
                hit("Figurine", "", "5000-4000 BC", "A figurine."),
                hit("唐金剛邑會碑拓本", "", "", "拓本。"),
            ],
        };
        let mut whole = by_age(&[], "", Order::Oldest, 1959);
        whole.hits[2].exhibit.period = "唐".into();
        assert_eq!(
            kind_answer("What is the oldest thing here?", &whole),
            "Of the 1,959 dated exhibits in our collection, the oldest is “Armlet” (ca. 6000-3000 BC); then “Figurine” (5000-4000 BC) and “唐金剛邑會碑拓本” (唐). (741 more have no date in their records, so they are not compared.) Ask me about any of them, for example: Tell me about the first one."
        );
        // In the visitor's script, the period too.
        assert_eq!(
            kind_answer("最古老的文物是什么？", &whole),
            "馆藏中有年代记载的1959件展品里，最古老的是《Armlet》（ca. 6000-3000 BC），其次是《Figurine》（5000-4000 BC）、《唐金刚邑会碑拓本》（唐）。（另有741件没有年代记载，未计入。）想了解哪一件，可以继续问我，比如：介绍一下第一件。"
        );
        let newest = by_age(&["painting"], "Painting & Drawing", Order::Newest, 2700);
        assert!(
            kind_answer("What is your newest painting?", &newest).starts_with(
                "Of the 2,700 dated exhibits in Painting & Drawing, the most recent is “Armlet”"
            )
        );
        assert!(!kind_answer("What is your newest painting?", &newest).contains("no date"));
        // No member dated: said, not guessed.
        let mut none = by_age(&["clock"], "", Order::Oldest, 0);
        none.hits.clear();
        assert_eq!(
            kind_answer("What is the oldest clock?", &none),
            "Our records give no date for any of the 2,700 exhibits of this kind, so I can't tell which is the oldest."
        );
        let mut none_zh = by_age(&["钟"], "", Order::Oldest, 0);
        none_zh.hits.clear();
        assert_eq!(
            kind_answer("最古老的钟是哪件？", &none_zh),
            "馆藏的2700件钟都没有年代记载，我无法判断哪一件最古老。"
        );
        // "Any more?": the next by date.
        let mut more = by_age(&[], "", Order::Oldest, 1959);
        more.shown = 3;
        assert!(
            kind_answer("What is the oldest thing here?", &more)
                .starts_with("Next, by date: “Armlet” (ca. 6000-3000 BC), ")
        );
    }

    #[test]
    fn the_largest_are_listed_with_their_measurements_and_the_unmeasured_are_counted_out() {
        let mut hits = vec![
            hit("Eight Views", "", "", "A handscroll."),
            hit("碑拓", "", "", "拓本。"),
        ];
        hits[0].exhibit.dimensions = "12 x 275 1/2 in. (30.5 x 700.3 cm)".into();
        hits[1].exhibit.dimensions = "縱145 橫67".into();
        let b = crate::retrieval::Browse {
            total: 2700,
            order: Some(Order::Largest),
            compared: 2699,
            hits,
            ..crate::retrieval::Browse::default()
        };
        assert_eq!(
            kind_answer("What is the biggest thing here?", &b),
            "Of the 2,699 measured exhibits in our collection, the largest is “Eight Views” (30.5 × 700.3 cm); then “碑拓” (145 × 67 cm). (1 more has no measurements in its record, so it is not compared.) Ask me about any of them, for example: Tell me about the first one."
        );
        assert_eq!(
            kind_answer("馆里最大的展品是什么？", &b),
            "馆藏中有尺寸记载的2699件展品里，最大的是《Eight Views》（30.5 × 700.3 cm），其次是《碑拓》（145 × 67 cm）。（另有1件没有尺寸记载，未计入。）想了解哪一件，可以继续问我，比如：介绍一下第一件。"
        );
        let mut more = b.clone();
        more.shown = 2;
        more.order = Some(Order::Smallest);
        assert!(
            kind_answer("What is the smallest thing here?", &more)
                .starts_with("Next, by size: “Eight Views” (30.5 × 700.3 cm) and ")
        );
        let none = crate::retrieval::Browse {
            total: 12,
            words: vec!["clock".into()],
            order: Some(Order::Largest),
            ..crate::retrieval::Browse::default()
        };
        assert_eq!(
            kind_answer("What is the biggest clock?", &none),
            "Our records give no measurements for any of the 12 exhibits of this kind, so I can't tell which is the largest."
        );
    }

    #[test]
    fn a_period_that_left_none_of_a_kind_is_said_so() {
        let none = |words: &[&str], period: &str| crate::retrieval::Browse {
            words: words.iter().map(|w| w.to_string()).collect(),
            qualifiers: vec![period.to_string()],
            of_kind: 53,
            ..crate::retrieval::Browse::default()
        };
        assert_eq!(
            kind_answer(
                "Do you have Tang dynasty porcelain?",
                &none(&["tang dynasty", "porcelain"], "tang dynasty")
            ),
            "Our collection has 53 exhibits of porcelain, but none that mention Tang dynasty. You could ask about those of another period."
        );
        assert_eq!(
            kind_answer("有沒有唐代的瓷器？", &none(&["唐代", "瓷器"], "唐代")),
            "館藏中有53件瓷器，但沒有提到唐代的。可以問問其他時代的瓷器。"
        );
        // A period that left one: said of one.
        let one = crate::retrieval::Browse {
            total: 1,
            label: "jade".into(),
            words: vec!["qing dynasty".into(), "jade".into()],
            qualifiers: vec!["qing dynasty".into()],
            hits: vec![hit(
                "Bowl with Islamic Design",
                "",
                "18th century",
                "A bowl.",
            )],
            ..crate::retrieval::Browse::default()
        };
        assert_eq!(
            kind_answer("Do you have Qing dynasty jade?", &one),
            "Our collection has one exhibit in jade that mentions Qing dynasty: “Bowl with Islamic Design” (18th century). Ask me about it, for example: When was it made?"
        );
        let one_zh = crate::retrieval::Browse {
            words: vec!["清代".into(), "玉器".into()],
            qualifiers: vec!["清代".into()],
            ..one.clone()
        };
        assert_eq!(
            kind_answer("有没有清代的玉器？", &one_zh),
            "馆藏中有1件提到清代的玉器（jade）：《Bowl with Islamic Design》（18th century）。想了解它，可以继续问我，比如：它是什么年代的？"
        );
        // More of a list of none: nothing more to list.
        let more = crate::retrieval::Browse {
            shown: 4,
            ..none(&["唐代", "瓷器"], "唐代")
        };
        assert!(kind_answer("还有吗？", &more).starts_with("能列出的就是这些了。"));
    }

    #[test]
    fn a_list_names_the_artist_not_the_publisher() {
        assert_eq!(
            maker_head("Sanoki (Japanese) [Publisher]; Utagawa Kuniyoshi (Japanese, 1798-1861)")
                .as_deref(),
            Some("Utagawa Kuniyoshi")
        );
        assert_eq!(
            maker_head("Sèvres Porcelain Manufactory (French, active 1756-) [Maker]; Jean-Jacques Bachelier")
                .as_deref(),
            Some("Sèvres Porcelain Manufactory")
        );
        // A publisher alone is still who the record names.
        assert_eq!(
            maker_head("Sasaki Toyokichi (Japanese) [Publisher]").as_deref(),
            Some("Sasaki Toyokichi")
        );
        assert_eq!(maker_head(""), None);
    }

    #[test]
    fn a_place_of_two_words_is_named_as_written() {
        let from = |words: &[&str], kinds: &[&str]| crate::retrieval::Browse {
            total: 7,
            words: words.iter().map(|w| w.to_string()).collect(),
            kinds: kinds.iter().map(|w| w.to_string()).collect(),
            origin: true,
            hits: vec![
                hit("Qur'an", "", "12th century", "A manuscript."),
                hit("Bowl", "", "13th century", "Glazed."),
            ],
            ..Default::default()
        };
        let a = kind_answer(
            "Anything from North Africa?",
            &from(&["north", "africa"], &[]),
        );
        assert!(a.contains("7 exhibits from North Africa"), "{a}");
        // A list of places is still a list.
        let a = kind_answer(
            "Anything from Japan and China?",
            &from(&["japan", "china"], &["japan", "china"]),
        );
        assert!(a.contains("from Japan and China"), "{a}");
    }
}

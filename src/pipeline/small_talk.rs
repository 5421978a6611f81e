//! Small talk: a visitor who says only "hello", "thanks", "bye", "cool", "what can you do?" or asks about
//! the collection as a whole ("how many objects do you have?", "what do you recommend?"), in
//! English or Chinese, is talking to the guide, not asking about one record.
//!
//! Before this, the offline answerer searched the collection for "你好" and, finding nothing,
//! said "Sorry, I don't know …" to a greeting; an LLM was told "the collection search found
//! nothing for this question". Now such an utterance is recognised first (pure, [`classify`]):
//! the offline answerer replies with a short line of its own in the visitor's language and script
//! ([`answer`]), and a model gets the conversation with no search result, to answer in its
//! persona's voice.
//!
//! Only an utterance made of nothing but small talk counts: the phrases below and fillers
//! ("oh", "ok", "so", 啊, 呀, 好的 …). The replies name no exhibit: they serve any museum's
//! collection. "Hello, who made the lacquer box?" or "你好，这件鼎是哪一年的？"
//! is a question and goes to the search as before. Cases: `fixtures/questions/small_talk.jsonl`.
//!
//! A question about the whole collection ("What do you have?", "What kinds of objects do you
//! have?", "How many objects?", 你们有哪些藏品？) is answered, when the retriever can tell, with
//! the number of exhibits and the largest departments of the catalogue ([`overview_answer`];
//! before, "What kinds of objects do you have?" listed four rubbings the search ranked first, and
//! "What do you have in your collection?" was refused); a model gets the same figures in its
//! system message.

use crate::retrieval::text;
use crate::util::thousands;

/// What the visitor said, when it is only small talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmallTalk {
    Greeting,
    Thanks,
    Goodbye,
    /// "Who are you?", "What can you do?", "Help", "What's your name?", "Do you speak English?".
    Help,
    /// The collection as a whole: "How many objects do you have?", "What is the most famous
    /// piece here?", "What do you recommend?". Searched, these named whichever record shared a
    /// word ("famous" → a Deposition after Rogier van der Weyden's famous altarpiece).
    Overview,
    /// A reaction said to the guide after an answer: "cool", "wow", "sorry", "I see", 好的,
    /// 不错. Searched, these named whichever record held the word ("sorry" → a Kabuki print).
    Reaction,
}

/// English phrases, matched as whole words in the lower-cased utterance. Longer first within
/// a kind does not matter: every occurrence of every phrase is removed before the rest is read.
const EN: &[(&str, SmallTalk)] = &[
    ("good morning", SmallTalk::Greeting),
    ("good afternoon", SmallTalk::Greeting),
    ("good evening", SmallTalk::Greeting),
    ("good day", SmallTalk::Greeting),
    ("hello", SmallTalk::Greeting),
    ("hallo", SmallTalk::Greeting),
    ("hiya", SmallTalk::Greeting),
    ("hi", SmallTalk::Greeting),
    ("hey", SmallTalk::Greeting),
    ("greetings", SmallTalk::Greeting),
    ("howdy", SmallTalk::Greeting),
    ("nice to meet you", SmallTalk::Greeting),
    ("how are you", SmallTalk::Greeting),
    ("thank you", SmallTalk::Thanks),
    ("thanks", SmallTalk::Thanks),
    ("thx", SmallTalk::Thanks),
    ("cheers", SmallTalk::Thanks),
    ("much appreciated", SmallTalk::Thanks),
    ("that was helpful", SmallTalk::Thanks),
    ("that's helpful", SmallTalk::Thanks),
    ("that is helpful", SmallTalk::Thanks),
    ("goodbye", SmallTalk::Goodbye),
    ("good bye", SmallTalk::Goodbye),
    ("bye", SmallTalk::Goodbye),
    ("see you later", SmallTalk::Goodbye),
    ("see you", SmallTalk::Goodbye),
    ("farewell", SmallTalk::Goodbye),
    ("good night", SmallTalk::Goodbye),
    ("have a nice day", SmallTalk::Goodbye),
    ("who are you", SmallTalk::Help),
    ("what are you", SmallTalk::Help),
    ("what can you do", SmallTalk::Help),
    ("what do you do", SmallTalk::Help),
    ("what can i ask", SmallTalk::Help),
    ("what can i ask you", SmallTalk::Help),
    ("what should i ask", SmallTalk::Help),
    ("how does this work", SmallTalk::Help),
    ("how do i use this", SmallTalk::Help),
    ("how do i use you", SmallTalk::Help),
    ("can you help me", SmallTalk::Help),
    ("help me", SmallTalk::Help),
    ("help", SmallTalk::Help),
    ("what's your name", SmallTalk::Help),
    ("what is your name", SmallTalk::Help),
    ("do you speak english", SmallTalk::Help),
    ("do you speak chinese", SmallTalk::Help),
    ("can you speak english", SmallTalk::Help),
    ("can you speak chinese", SmallTalk::Help),
    ("are you a robot", SmallTalk::Help),
    ("are you a bot", SmallTalk::Help),
    ("are you human", SmallTalk::Help),
    ("are you a human", SmallTalk::Help),
    ("are you a real person", SmallTalk::Help),
    ("are you an ai", SmallTalk::Help),
    ("how many objects", SmallTalk::Overview),
    ("how many exhibits", SmallTalk::Overview),
    ("how many works", SmallTalk::Overview),
    ("how many items", SmallTalk::Overview),
    ("how many pieces", SmallTalk::Overview),
    ("how many things", SmallTalk::Overview),
    ("how big is the collection", SmallTalk::Overview),
    ("what do you have", SmallTalk::Overview),
    ("what is on display", SmallTalk::Overview),
    ("what's on display", SmallTalk::Overview),
    ("what is on view", SmallTalk::Overview),
    ("what's on view", SmallTalk::Overview),
    ("what is on show", SmallTalk::Overview),
    ("what's on show", SmallTalk::Overview),
    ("what have you got", SmallTalk::Overview),
    ("what kinds of", SmallTalk::Overview),
    ("what kind of", SmallTalk::Overview),
    ("what sorts of", SmallTalk::Overview),
    ("what types of", SmallTalk::Overview),
    ("most famous", SmallTalk::Overview),
    ("most important", SmallTalk::Overview),
    ("most valuable", SmallTalk::Overview),
    ("most popular", SmallTalk::Overview),
    ("what should i see", SmallTalk::Overview),
    ("what should we see", SmallTalk::Overview),
    ("what do you recommend", SmallTalk::Overview),
    ("what would you recommend", SmallTalk::Overview),
    ("highlights", SmallTalk::Overview),
    ("must see", SmallTalk::Overview),
    ("best pieces", SmallTalk::Overview),
    ("best piece", SmallTalk::Overview),
    ("best thing", SmallTalk::Overview),
    ("best things", SmallTalk::Overview),
    ("best work", SmallTalk::Overview),
    ("best works", SmallTalk::Overview),
    // What there is ("What can I see here?" got a reaction's reply, "What's in this museum?"
    // was asked which exhibit, "Tell me about this place" got a painting of Mount Vernon Place).
    ("what can i see", SmallTalk::Overview),
    ("what can we see", SmallTalk::Overview),
    ("what is there to see", SmallTalk::Overview),
    ("what's there to see", SmallTalk::Overview),
    ("what is here", SmallTalk::Overview),
    ("what's here", SmallTalk::Overview),
    ("what is in", SmallTalk::Overview),
    ("what's in", SmallTalk::Overview),
    ("what is this museum", SmallTalk::Overview),
    ("what is this place", SmallTalk::Overview),
    ("what's this place", SmallTalk::Overview),
    ("tell me about the museum", SmallTalk::Overview),
    ("tell me about this museum", SmallTalk::Overview),
    ("tell me about this place", SmallTalk::Overview),
    ("tell me about your museum", SmallTalk::Overview),
    // "Tell me about the collection" had no word to search and was told it asked nothing.
    ("tell me about the collection", SmallTalk::Overview),
    ("tell me about the collections", SmallTalk::Overview),
    ("tell me about your collection", SmallTalk::Overview),
    ("tell me about your collections", SmallTalk::Overview),
    ("tell me about the museum's collection", SmallTalk::Overview),
    ("tell me about the museum collection", SmallTalk::Overview),
    ("what should i look at", SmallTalk::Overview),
    ("what should we look at", SmallTalk::Overview),
    ("show me something", SmallTalk::Overview),
    // "Tell me something interesting" got a Tang epitaph rubbing.
    ("tell me something", SmallTalk::Overview),
    ("something interesting", SmallTalk::Overview),
    ("anything interesting", SmallTalk::Overview),
    ("what's interesting", SmallTalk::Overview),
    ("what is interesting", SmallTalk::Overview),
    ("worth seeing", SmallTalk::Overview),
    ("where should i start", SmallTalk::Overview),
    ("where do i start", SmallTalk::Overview),
    ("most expensive", SmallTalk::Overview),
    ("biggest", SmallTalk::Overview),
    ("largest", SmallTalk::Overview),
    ("smallest", SmallTalk::Overview),
    ("rarest", SmallTalk::Overview),
    // "Do you have any artifacts?", "Have you got exhibits?": the collection as a whole, once
    // the words left are fillers ("Do you have any paintings?" is a kind, browsed).
    ("do you have", SmallTalk::Overview),
    ("have you got", SmallTalk::Overview),
    // Reactions, after every other phrase ("nice to meet you" is a greeting); then the words
    // of `text::REACTIONS` ([`reactions`]).
    ("i see", SmallTalk::Reaction),
    ("got it", SmallTalk::Reaction),
];

/// Words that may stand beside the phrases without making the utterance a question.
const EN_FILLERS: &[&str] = &[
    "oh",
    "ok",
    "okay",
    "so",
    "very",
    "much",
    "a",
    "lot",
    "great",
    "good",
    "nice",
    "cool",
    "well",
    "there",
    "guide",
    "everyone",
    "all",
    "again",
    "you",
    "too",
    "and",
    "dear",
    "please",
    "for",
    "your",
    "the",
    "help",
    "it",
    "that",
    "is",
    "was",
    "really",
    "super",
    "wonderful",
    "perfect",
    "awesome",
    "then",
    "now",
    "bot",
    "robot",
    "friend",
    "mate",
    "museum",
    "sir",
    "madam",
    // Around a question about the collection as a whole.
    "what",
    "which",
    "is",
    "are",
    "do",
    "does",
    "have",
    "has",
    "in",
    "here",
    "there",
    "this",
    "piece",
    "pieces",
    "object",
    "objects",
    "exhibit",
    "exhibits",
    "work",
    "works",
    "thing",
    "things",
    "collection",
    "i",
    "we",
    "should",
    "see",
    "first",
    "to",
    "of",
    "any",
    "can",
    "me",
    "us",
    "some",
    "one",
    "ones",
    "interesting",
    "tell",
    "what's",
    "whats",
    "helpful",
    "only",
    "just",
    "an",
    "minute",
    "minutes",
    "hour",
    "hours",
    "short",
    "artifact",
    "artifacts",
    "artefact",
    "artefacts",
    "artwork",
    "artworks",
    "item",
    "items",
    "art",
    "arts",
    "about",
];

/// Chinese phrases (Simplified; the utterance is folded to Simplified first).
const ZH: &[(&str, SmallTalk)] = &[
    ("你们好", SmallTalk::Greeting),
    ("大家好", SmallTalk::Greeting),
    ("早上好", SmallTalk::Greeting),
    ("上午好", SmallTalk::Greeting),
    ("中午好", SmallTalk::Greeting),
    ("下午好", SmallTalk::Greeting),
    ("晚上好", SmallTalk::Greeting),
    ("早安", SmallTalk::Greeting),
    ("你好", SmallTalk::Greeting),
    ("您好", SmallTalk::Greeting),
    ("哈喽", SmallTalk::Greeting),
    ("哈啰", SmallTalk::Greeting),
    ("嗨", SmallTalk::Greeting),
    ("在吗", SmallTalk::Greeting),
    ("非常感谢", SmallTalk::Thanks),
    ("感谢", SmallTalk::Thanks),
    ("谢谢", SmallTalk::Thanks),
    ("多谢", SmallTalk::Thanks),
    ("谢了", SmallTalk::Thanks),
    ("辛苦了", SmallTalk::Thanks),
    ("再见", SmallTalk::Goodbye),
    ("拜拜", SmallTalk::Goodbye),
    ("回头见", SmallTalk::Goodbye),
    ("下次见", SmallTalk::Goodbye),
    ("晚安", SmallTalk::Goodbye),
    ("你是谁", SmallTalk::Help),
    ("你是什么", SmallTalk::Help),
    ("你叫什么名字", SmallTalk::Help),
    ("你叫什么", SmallTalk::Help),
    ("你能做什么", SmallTalk::Help),
    ("你可以做什么", SmallTalk::Help),
    ("你会做什么", SmallTalk::Help),
    ("你会什么", SmallTalk::Help),
    ("你能干什么", SmallTalk::Help),
    ("我可以问什么", SmallTalk::Help),
    ("我能问什么", SmallTalk::Help),
    ("可以问什么", SmallTalk::Help),
    ("怎么用", SmallTalk::Help),
    ("怎么使用", SmallTalk::Help),
    ("帮帮我", SmallTalk::Help),
    ("帮助", SmallTalk::Help),
    ("会说英语", SmallTalk::Help),
    ("会说英文", SmallTalk::Help),
    ("会说中文", SmallTalk::Help),
    ("你是机器人", SmallTalk::Help),
    ("你是真人", SmallTalk::Help),
    ("你是人工智能", SmallTalk::Help),
    ("有多少件", SmallTalk::Overview),
    ("有哪些藏品", SmallTalk::Overview),
    ("有什么藏品", SmallTalk::Overview),
    ("有哪些展品", SmallTalk::Overview),
    ("有什么展品", SmallTalk::Overview),
    ("都有什么", SmallTalk::Overview),
    ("什么类别", SmallTalk::Overview),
    ("哪些类别", SmallTalk::Overview),
    ("多少件展品", SmallTalk::Overview),
    ("多少件藏品", SmallTalk::Overview),
    ("多少展品", SmallTalk::Overview),
    ("多少藏品", SmallTalk::Overview),
    ("最有名", SmallTalk::Overview),
    ("最著名", SmallTalk::Overview),
    ("镇馆之宝", SmallTalk::Overview),
    ("推荐", SmallTalk::Overview),
    ("必看", SmallTalk::Overview),
    ("最值得看", SmallTalk::Overview),
    ("值得看", SmallTalk::Overview),
    ("好看的", SmallTalk::Overview),
    ("有意思的", SmallTalk::Overview),
    // 这里有什么特别的？ got a statuette of a dwarf (青花瓷有什么特别的？ keeps its kind).
    ("特别的", SmallTalk::Overview),
    ("有趣的", SmallTalk::Overview),
    ("好玩的", SmallTalk::Overview),
    ("最贵", SmallTalk::Overview),
    ("最值钱", SmallTalk::Overview),
    ("最大的", SmallTalk::Overview),
    ("从哪里开始", SmallTalk::Overview),
    ("从哪开始", SmallTalk::Overview),
    // 你们有文物吗？ 有没有展品？: the collection as a whole, once the rest is fillers
    // (有没有青铜器？ is a kind, browsed).
    ("有没有", SmallTalk::Overview),
    ("有文物", SmallTalk::Overview),
    ("有展品", SmallTalk::Overview),
    ("有藏品", SmallTalk::Overview),
    ("有作品", SmallTalk::Overview),
    ("有什么文物", SmallTalk::Overview),
    ("有哪些文物", SmallTalk::Overview),
    ("有什么作品", SmallTalk::Overview),
    ("有哪些作品", SmallTalk::Overview),
    // What there is (这里有什么？, 介绍一下这个博物馆), once the rest is fillers.
    ("介绍一下这个博物馆", SmallTalk::Overview),
    ("介绍一下博物馆", SmallTalk::Overview),
    ("介绍一下本馆", SmallTalk::Overview),
    ("介绍一下馆藏", SmallTalk::Overview),
    ("介绍一下你们的藏品", SmallTalk::Overview),
    ("什么博物馆", SmallTalk::Overview),
    ("博物馆有什么", SmallTalk::Overview),
    ("能看到什么", SmallTalk::Overview),
    ("可以看到什么", SmallTalk::Overview),
    ("可以看的", SmallTalk::Overview),
    ("有什么", SmallTalk::Overview),
];

/// Characters that may stand beside the Chinese phrases (particles, "you", "very", "ok").
const ZH_FILLERS: &str = "啊呀哦噢喔嗯好的了啦吧呢吗嘛哈你您很太非常真是们呀诶哎嘿喂也都再一下这里馆内有什么哪些件个给我看展品藏品作品文物东西";

/// Which small talk `utterance` is, or None when it says anything else.
pub fn classify(utterance: &str) -> Option<SmallTalk> {
    let folded = text::normalize(utterance);
    // Letters, digits and CJK only; everything else (punctuation, emoji, spaces) separates.
    let cleaned: String = folded
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '\'' || c == '’' {
                if c == '’' { '\'' } else { c }
            } else {
                ' '
            }
        })
        .collect();
    if cleaned.trim().is_empty() || cleaned.chars().count() > 60 {
        return None;
    }
    let mut found: Vec<SmallTalk> = Vec::new();
    // Chinese: remove every phrase, then only filler characters may remain.
    let mut rest = cleaned.clone();
    for (p, kind) in reactions(ZH, text::ZH_REACTIONS) {
        if rest.contains(p) {
            found.push(kind);
            rest = rest.replace(p, " ");
        }
    }
    // English: whole-word phrases, then only filler words may remain.
    let mut words: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
    for (p, kind) in reactions(EN, text::REACTIONS) {
        let phrase: Vec<&str> = p.split(' ').collect();
        let mut i = 0;
        while i + phrase.len() <= words.len() {
            if words[i..i + phrase.len()]
                .iter()
                .zip(&phrase)
                .all(|(w, p)| w == p)
            {
                found.push(kind);
                words.drain(i..i + phrase.len());
            } else {
                i += 1;
            }
        }
    }
    let only_fillers = words.iter().all(|w| {
        // A number stands beside the phrases too ("I only have 10 minutes, what should I see?").
        if w.chars().all(|c| c.is_ascii_digit()) {
            true
        } else if w.chars().all(|c| c.is_ascii_alphabetic() || c == '\'') {
            EN_FILLERS.contains(&w.as_str())
        } else {
            w.chars().all(|c| ZH_FILLERS.contains(c))
        }
    });
    if !only_fillers {
        return None;
    }
    // "thanks, bye" is a goodbye; "hi, who are you?" asks for help.
    let kind = [
        SmallTalk::Goodbye,
        SmallTalk::Thanks,
        SmallTalk::Overview,
        SmallTalk::Help,
        SmallTalk::Greeting,
        SmallTalk::Reaction,
    ]
    .into_iter()
    .find(|k| found.contains(k));
    // "What is the biggest thing here?" asks for the collection in an order the search lists
    // (`retrieval::ordering`); "What is your largest collection?" is still the overview.
    kind.filter(|k| {
        *k != SmallTalk::Overview || crate::retrieval::ordering::asks_order(utterance).is_none()
    })
}

/// Words of an overview question ([`SmallTalk::Overview`]) that ask what is worth seeing
/// rather than what there is ("What do you recommend?", "Anything interesting?", 有什么好看的？,
/// 这里有什么特别的？, beside "How many objects?", 你们有哪些藏品？).
const WHAT_TO_SEE: &[&str] = &[
    "recommend",
    "recommendation",
    "recommendations",
    "interesting",
    "worth seeing",
    "should i see",
    "should we see",
    "should i look at",
    "should we look at",
    "must see",
    "where should i start",
    "where do i start",
    "推荐",
    "好看",
    "有意思",
    "有趣",
    "好玩",
    "特别",
    "值得看",
    "必看",
    "从哪里开始",
    "从哪开始",
];

/// Whether `utterance`, small talk of kind `talk` ([`classify`]), is an overview question
/// asking what is worth seeing:
/// where the museum's facts file has its curators' highlights, they answer it, as they answer
/// "What should I see first?" (`retrieval::facts`); "What do you recommend?" and "Anything
/// interesting?" got the catalogue's figures and "I can't rank or pick the exhibits for you"
/// though the curators had picked three.
pub fn asks_what_to_see(talk: Option<SmallTalk>, utterance: &str) -> bool {
    if talk != Some(SmallTalk::Overview) {
        return false;
    }
    let folded = text::normalize(utterance);
    let words: Vec<&str> = folded
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let spaced = format!(" {} ", words.join(" "));
    WHAT_TO_SEE.iter().any(|p| {
        if p.is_ascii() {
            spaced.contains(&format!(" {p} "))
        } else {
            folded.contains(p)
        }
    })
}

/// The curators' highlights (the facts file's [`crate::retrieval::facts::HIGHLIGHTS`]) when
/// `utterance`, small talk of kind `talk`, asks what is worth seeing ([`asks_what_to_see`]) and
/// the file has them: the server's and the CLI's one reading.
pub fn highlights_for<'a>(
    talk: Option<SmallTalk>,
    utterance: &str,
    facts: &'a [crate::retrieval::facts::Fact],
) -> Option<&'a crate::retrieval::facts::Fact> {
    if !asks_what_to_see(talk, utterance) {
        return None;
    }
    facts
        .iter()
        .find(|f| f.topic == crate::retrieval::facts::HIGHLIGHTS)
}

/// The guide's line for small talk of `kind`: the collection's figures ([`overview_answer`])
/// when there are some for an overview question, [`answer`] otherwise.
pub fn reply(
    kind: SmallTalk,
    utterance: &str,
    overview: Option<&crate::retrieval::Overview>,
    services: bool,
) -> String {
    match overview {
        Some(o) => overview_answer(utterance, o),
        None => answer(kind, utterance, services),
    }
}

/// `phrases`, then each of `words` as a [`SmallTalk::Reaction`] (the reactions the search
/// shares: [`text::REACTIONS`]).
fn reactions<'a>(
    phrases: &'a [(&'a str, SmallTalk)],
    words: &'a [&'a str],
) -> impl Iterator<Item = (&'a str, SmallTalk)> {
    phrases
        .iter()
        .copied()
        .chain(words.iter().map(|w| (*w, SmallTalk::Reaction)))
}

/// The guide's reply to `kind`, in the language and script of `utterance`. `services`: the
/// museum has a facts file, so visiting questions (hours, tickets, toilets) can be answered too.
pub fn answer(kind: SmallTalk, utterance: &str, services: bool) -> String {
    let about_language = kind == SmallTalk::Help && asks_about_language(utterance);
    if crate::providers::llm::offline::is_chinese(utterance) {
        let zh = match (kind, services) {
            (SmallTalk::Greeting, true) => {
                "您好！我是博物馆的导览员。您可以问我任何一件展品：谁做的、什么年代、用什么材料、画的是什么；也可以问开放时间、门票、洗手间等参观事宜。"
            }
            (SmallTalk::Greeting, false) => {
                "您好！我是博物馆的导览员。您可以问我任何一件展品：谁做的、什么年代、用什么材料、画的是什么。"
            }
            (SmallTalk::Thanks, _) => "不客气！还想了解哪件展品，尽管问我。",
            (SmallTalk::Goodbye, _) => "再见，祝您参观愉快！",
            (SmallTalk::Help, true) => {
                "我是博物馆的导览员，只根据本馆的藏品资料回答。您可以说出展品的名称，问它是谁做的、什么年代、用什么材料、画的是什么；也可以问开放时间、门票、洗手间、咖啡厅等参观事宜。"
            }
            (SmallTalk::Help, false) => {
                "我是博物馆的导览员，只根据本馆的藏品资料回答。您可以说出展品的名称，问它是谁做的、什么年代、用什么材料、画的是什么。"
            }
            (SmallTalk::Overview, _) => {
                "我没法为整个馆藏计数或排名，但可以介绍任何一件展品：请告诉我展品的名称，或者问某位作者、某种材料、某个地方或题材。"
            }
            (SmallTalk::Reaction, _) => "还想了解什么？您可以问我任何一件展品。",
        };
        let zh = if about_language {
            format!("会的：我可以用中文或英文回答，用哪种语言问都可以。{zh}")
        } else {
            zh.to_string()
        };
        crate::providers::llm::offline::zh_in(&zh, utterance)
    } else {
        let en = match (kind, services) {
            (SmallTalk::Greeting, true) => {
                "Hello! I'm the museum's guide. Ask me about any exhibit (who made it, when, what it is made of, what it shows) or about your visit: opening hours, tickets, toilets."
            }
            (SmallTalk::Greeting, false) => {
                "Hello! I'm the museum's guide. Ask me about any exhibit: who made it, when, what it is made of, what it shows."
            }
            (SmallTalk::Thanks, _) => {
                "You're welcome! Ask me about anything else in the collection."
            }
            (SmallTalk::Goodbye, _) => "Goodbye, and enjoy your visit!",
            (SmallTalk::Help, true) => {
                "I'm the museum's guide, and I answer from the museum's own collection records. Name an exhibit and ask who made it, when, what it is made of or what it shows, or ask about your visit: opening hours, tickets, toilets, the café."
            }
            (SmallTalk::Help, false) => {
                "I'm the museum's guide, and I answer from the museum's own collection records. Name an exhibit and ask who made it, when, what it is made of or what it shows."
            }
            (SmallTalk::Overview, _) => {
                "I can't count or rank the whole collection, but I can tell you about any exhibit: name one, or ask about a maker, a material, a place or a subject."
            }
            (SmallTalk::Reaction, _) => {
                "Anything else you'd like to know? Ask me about any exhibit in the collection."
            }
        };
        if about_language {
            format!("Yes: I answer in English and in Chinese, so ask in either. {en}")
        } else {
            en.to_string()
        }
    }
}

/// Whether a help question asks which languages the guide speaks ("Do you speak Chinese?",
/// 你会说英语吗？).
fn asks_about_language(utterance: &str) -> bool {
    let norm = text::normalize(utterance);
    [
        "speak",
        "english",
        "chinese",
        "language",
        "英语",
        "英文",
        "中文",
        "汉语",
        "普通话",
        "语言",
    ]
    .iter()
    .any(|w| norm.contains(w))
}

/// Words of a question that asks the guide to rank the collection (normalised: Simplified, lower
/// case).
const RANKING: &[&str] = &[
    "most famous",
    "most important",
    "most valuable",
    "most popular",
    "recommend",
    "highlights",
    "must see",
    "best pieces",
    "what should i see",
    "what should we see",
    "something interesting",
    "anything interesting",
    "interesting",
    "worth seeing",
    "where should i start",
    "where do i start",
    "show me something",
    "most expensive",
    "biggest",
    "largest",
    "smallest",
    "rarest",
    "最有名",
    "最著名",
    "镇馆之宝",
    "推荐",
    "必看",
    "最值得看",
    "值得看",
    "好看",
    "有意思",
    "有趣",
    "好玩",
    "最贵",
    "最值钱",
    "最大",
    "从哪",
];

/// Departments an overview names (a visitor hears it: a short list).
const OVERVIEW_DEPARTMENTS: usize = 5;

/// The answer to a question about the collection as a whole when the retriever can tell what
/// it holds ([`crate::retrieval::Overview`]): the number of exhibits, its largest departments
/// with their counts, and a question to ask next that names one of them (a browse question the
/// guide answers with that department's exhibits), a department named in the visitor's language
/// when there is one.
pub fn overview_answer(utterance: &str, o: &crate::retrieval::Overview) -> String {
    let shown = &o.departments[..o.departments.len().min(OVERVIEW_DEPARTMENTS)];
    let zh = crate::providers::llm::offline::is_chinese(utterance);
    let example = shown
        .iter()
        .find(|(d, _)| d.chars().any(crate::retrieval::text::is_cjk) == zh)
        .or(shown.first())
        .map(|(d, _)| d.as_str())
        .unwrap_or_default();
    // "What is the most famous piece?": the guide cannot rank, and says so before the figures.
    let norm = text::normalize(utterance);
    let ranking = RANKING.iter().any(|r| norm.contains(r));
    if zh {
        let script = crate::providers::llm::offline::visitor_script(utterance);
        let name = |d: &str| crate::retrieval::text::in_script(d, script);
        let mut zh = if ranking {
            "我没法为展品排名或替您挑选，不过可以告诉您馆藏的概况：".to_string()
        } else {
            String::new()
        };
        zh.push_str(&format!("本馆的藏品资料共收录{}件展品。", o.total));
        if !shown.is_empty() {
            let first = name(example);
            // An English department is named in Chinese first when its words are common ones
            // (绘画与素描（Painting & Drawing，330件）), else as the museum writes it.
            let parts: Vec<String> = shown
                .iter()
                .map(
                    |(d, n)| match crate::retrieval::kinds::department_in_chinese(d) {
                        Some(c) => format!("{}（{d}，{n}件）", name(&c)),
                        None => format!("{}（{n}件）", name(d)),
                    },
                )
                .collect();
            zh.push_str(&format!(
                "按类别，最多的是：{}。想看哪一类，可以继续问我，比如：有没有{first}的展品？",
                parts.join("、")
            ));
        } else {
            zh.push_str("您可以说出展品的名称，或者问某位作者、某种材料、某个地方或题材。");
        }
        return crate::providers::llm::offline::zh_in(&zh, utterance);
    }
    let mut en = format!(
        "{}ur collection records hold {} exhibits.",
        if ranking {
            "I can't rank or pick the exhibits for you, but here is what we hold: o"
        } else {
            "O"
        },
        thousands(o.total)
    );
    // An English voice cannot read a department named in Chinese only (piper said "Chinese
    // letter" for each character): those are counted together instead of named.
    let latin = |d: &str| d.chars().any(|c| c.is_ascii_alphabetic());
    let named: Vec<(String, usize)> = o
        .departments
        .iter()
        .filter(|(d, _)| latin(d))
        .take(OVERVIEW_DEPARTMENTS)
        .cloned()
        .collect();
    let unnamed: usize = o
        .departments
        .iter()
        .filter(|(d, _)| !latin(d))
        .map(|(_, n)| n)
        .sum();
    let shown = named.as_slice();
    let example = shown.first().map(|(d, _)| d.as_str()).unwrap_or_default();
    if unnamed > 0 {
        en.push_str(&format!(
            " {} of them are catalogued under Chinese department names.",
            thousands(unnamed)
        ));
    }
    match shown {
        [] => en.push_str(
            " Ask me about any of them: name one, or ask about a maker, a material, a place or a subject.",
        ),
        [(d, n)] => en.push_str(&format!(
            " They are in {d} ({}). Ask me about any of them, for example: Do you have anything in {d}?",
            thousands(*n)
        )),
        [rest @ .., (last, n)] => {
            let parts: Vec<String> = rest
                .iter()
                .map(|(d, n)| format!("{d} ({})", thousands(*n)))
                .collect();
            en.push_str(&format!(
                " The largest departments are {} and {last} ({}). Ask me about any of them, for example: Do you have anything in {example}?",
                parts.join(", "),
                thousands(*n),
            ));
        }
    }
    en
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overview_names_the_total_and_the_largest_departments() {
        let o = crate::retrieval::Overview {
            total: 2700,
            departments: vec![
                ("藝術品／文獻".into(), 984),
                ("Painting & Drawing".into(), 330),
                ("Ceramics".into(), 200),
            ],
        };
        assert_eq!(
            overview_answer("What do you have?", &o),
            "Our collection records hold 2,700 exhibits. 984 of them are catalogued under Chinese department names. The largest departments are Painting & Drawing (330) and Ceramics (200). Ask me about any of them, for example: Do you have anything in Painting & Drawing?"
        );
        assert_eq!(
            overview_answer("你们有多少件展品？", &o),
            "本馆的藏品资料共收录2700件展品。按类别，最多的是：艺术品／文献（984件）、绘画与素描（Painting & Drawing，330件）、陶瓷（Ceramics，200件）。想看哪一类，可以继续问我，比如：有没有艺术品／文献的展品？"
        );
        assert!(
            overview_answer("What is the most famous piece here?", &o)
                .starts_with("I can't rank or pick the exhibits for you, but here is what we hold: our collection records hold 2,700 exhibits.")
        );
        assert!(
            overview_answer("镇馆之宝是什么？", &o)
                .starts_with("我没法为展品排名或替您挑选，不过可以告诉您馆藏的概况：本馆")
        );
        let one = crate::retrieval::Overview {
            total: 12,
            departments: vec![("Prints".into(), 12)],
        };
        assert!(
            overview_answer("How many objects do you have?", &one)
                .contains("They are in Prints (12).")
        );
        let none = crate::retrieval::Overview {
            total: 1234567,
            departments: vec![],
        };
        assert!(
            overview_answer("How many objects do you have?", &none)
                .starts_with("Our collection records hold 1,234,567 exhibits. Ask me")
        );
    }

    #[test]
    fn an_overview_question_may_ask_what_is_worth_seeing() {
        for q in [
            "What do you recommend?",
            "Anything interesting?",
            "What is interesting here?",
            "有什么推荐的吗？",
            "有什么好看的？",
            "这里有什么特别的？",
            "Where should I start?",
        ] {
            assert!(asks_what_to_see(classify(q), q), "{q}");
        }
        for q in [
            "How many objects do you have?",
            "你们有哪些藏品？",
            "What do you have?",
            // Not small talk at all: a kind's question.
            "青花瓷有什么特别的？",
            "Do you recommend the audio guide?",
        ] {
            assert!(!asks_what_to_see(classify(q), q), "{q}");
        }
    }

    /// Every line of `fixtures/questions/small_talk.jsonl`: `{"q": ..., "kind": ... or null}`.
    #[test]
    fn the_fixture_cases() {
        #[derive(serde::Deserialize)]
        struct Case {
            q: String,
            kind: Option<SmallTalk>,
        }
        let cases: Vec<Case> = crate::util::fixture_cases("fixtures/questions/small_talk.jsonl");
        for c in &cases {
            assert_eq!(classify(&c.q), c.kind, "{:?}", c.q);
        }
        let n = cases.len();
        assert!(n >= 40, "{n} cases");
    }

    #[test]
    fn a_question_about_languages_is_answered_yes() {
        assert!(
            answer(SmallTalk::Help, "Can you speak Chinese?", true).starts_with(
                "Yes: I answer in English and in Chinese, so ask in either. I'm the museum's guide"
            )
        );
        assert!(
            answer(SmallTalk::Help, "你会说英语吗？", true)
                .starts_with("会的：我可以用中文或英文回答")
        );
        assert!(
            answer(SmallTalk::Help, "Who are you?", true).starts_with("I'm the museum's guide")
        );
    }

    #[test]
    fn answers_follow_the_visitors_language_and_script() {
        assert!(answer(SmallTalk::Greeting, "hello", true).starts_with("Hello!"));
        assert_eq!(
            answer(SmallTalk::Thanks, "谢谢", true),
            "不客气！还想了解哪件展品，尽管问我。"
        );
        assert_eq!(
            answer(SmallTalk::Thanks, "謝謝", true),
            "不客氣！還想了解哪件展品，儘管問我。"
        );
        // Visiting questions are offered only when the museum has a facts file.
        assert!(answer(SmallTalk::Help, "help", true).contains("opening hours"));
        assert!(!answer(SmallTalk::Help, "help", false).contains("opening hours"));
        assert!(!answer(SmallTalk::Greeting, "你好", false).contains("开放时间"));
    }
}

//! Visitor services (toilets, opening hours, tickets, café, cloakroom, Wi-Fi, accessibility,
//! lost and found, photography, shop, parking, pets, audio guide, tours, and the highlights:
//! what to see, [`HIGHLIGHTS`]) answered from a small
//! museum-editable TOML file, never from exhibit records: a built-in topic the file has no entry
//! for gets "I don't have information about that" ([`Service::NoEntry`]).
//!
//! [`match_question`] is pure: it finds the topic of a service question in English or Chinese
//! (Traditional folded to Simplified by [`text::normalize`](super::text::normalize)) and refuses
//! questions about an exhibit that merely share a word ("Who painted Toilet of Helen?",
//! 《…》 titles). [`FactsStore`] holds the loaded file and reloads it when it changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use super::text::normalize;

/// One topic's answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    /// A built-in topic (`toilets`, `hours`, `tickets`, `cafe`, `cloakroom`, `wifi`,
    /// `accessibility`, `lost_found`, `photography`, `shop`, `parking`, `pets`, `audio_guide`,
    /// `tours`, `highlights`) or the museum's own (matched by `triggers` only).
    pub topic: String,
    pub en: String,
    pub zh: String,
    /// Extra phrases (any language) that also select this topic; normalised like questions
    /// (lower case, Simplified) when the file is parsed.
    #[serde(default)]
    pub triggers: Vec<String>,
}

impl Fact {
    /// The answer in Chinese (`zh`) or English.
    pub fn answer(&self, zh: bool) -> &str {
        if zh { &self.zh } else { &self.en }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FactsFile {
    #[serde(default)]
    #[allow(dead_code)]
    museum: String,
    #[serde(default)]
    fact: Vec<Fact>,
}

/// Parses a facts file; every entry needs a topic and both texts.
pub fn parse(text: &str) -> Result<Vec<Fact>, String> {
    let file: FactsFile = toml::from_str(text).map_err(|e| e.to_string())?;
    for (i, f) in file.fact.iter().enumerate() {
        if f.topic.trim().is_empty() || f.en.trim().is_empty() || f.zh.trim().is_empty() {
            return Err(format!(
                "fact {} ({:?}) needs a topic and both `en` and `zh` texts",
                i + 1,
                f.topic
            ));
        }
    }
    let mut facts = file.fact;
    for f in &mut facts {
        f.triggers = f
            .triggers
            .iter()
            .map(|t| normalize(t).trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
    }
    Ok(facts)
}

/// Built-in topics: (topic, keywords). Keywords are matched on normalised text (lower case,
/// Simplified); an English keyword must sit on word boundaries. Checked in this order.
const TOPICS: &[(&str, &[&str])] = &[
    (
        "lost_found",
        &[
            "lost and found",
            "lost & found",
            "lost property",
            "found property",
            "lost my",
            "i lost",
            "we lost",
            "lost a ",
            "lost our",
            "left my",
            "forgot my",
            "lost child",
            "失物",
            "丢了",
            "丢失",
            "遗失",
            "落下了",
            "忘了拿",
            "弄丢",
        ],
    ),
    (
        "toilets",
        &[
            "toilet",
            "toilets",
            "restroom",
            "restrooms",
            "bathroom",
            "bathrooms",
            "wc",
            "washroom",
            "washrooms",
            "lavatory",
            "lavatories",
            "loo",
            "ladies room",
            "men's room",
            "洗手间",
            "厕所",
            "卫生间",
            "盥洗室",
            "化妆间",
        ],
    ),
    (
        "hours",
        &[
            "opening hours",
            "opening times",
            "open hours",
            "visiting hours",
            "museum hours",
            "your hours",
            "hours today",
            "time does the museum",
            "time do you",
            "time does it",
            "closing time",
            "opening time",
            "open today",
            "open tomorrow",
            "open on",
            "close today",
            "when do you open",
            "when do you close",
            "when does the museum",
            "is the museum open",
            "are you open",
            "museum open",
            "museum close",
            "still open",
            "closed on",
            "closes",
            "几点开",
            "几点关",
            "几点闭",
            "几点营业",
            "开放时间",
            "营业时间",
            "闭馆",
            "开馆",
            "关门",
            "开门",
            "什么时候开",
            "什么时候关",
        ],
    ),
    (
        "tickets",
        &[
            "ticket",
            "tickets",
            "admission",
            "entry fee",
            "entrance fee",
            "ticket price",
            "how much does it cost",
            "how much is it",
            "how much to",
            "cost to enter",
            "is it free",
            "is entry free",
            "is admission free",
            "门票",
            "票价",
            "买票",
            "购票",
            "入场费",
            "免费参观",
            "要钱吗",
            "收费吗",
            "discount",
            "discounts",
            "concession",
            "concessions",
            "student ticket",
            "senior ticket",
            "child ticket",
            "children's ticket",
            "优惠",
            "学生票",
            "老人票",
            "儿童票",
            "半价",
            "免票",
        ],
    ),
    (
        "cafe",
        &[
            "cafe",
            "café",
            "coffee",
            "restaurant",
            "something to eat",
            "get food",
            "to eat",
            "can i eat",
            "snack",
            "snacks",
            "canteen",
            "餐厅",
            "咖啡",
            "吃饭",
            "吃东西",
            "饭店",
            "小吃",
            "餐馆",
        ],
    ),
    (
        "cloakroom",
        &[
            "cloakroom",
            "cloak room",
            "coat check",
            "locker",
            "lockers",
            "leave my bag",
            "store my bag",
            "my bag",
            "my coat",
            "my luggage",
            "luggage",
            "backpack",
            "suitcase",
            "寄存",
            "存包",
            "衣帽间",
            "储物柜",
            "存放",
            "行李",
        ],
    ),
    (
        "wifi",
        &[
            "wi-fi",
            "wifi",
            "wi fi",
            "wireless",
            "internet",
            "wlan",
            "无线",
            "网络",
            "上网",
            "wifi密码",
        ],
    ),
    (
        "accessibility",
        &[
            "wheelchair",
            "wheelchairs",
            "accessible",
            "accessibility",
            "disabled access",
            "step-free",
            "step free",
            "lift",
            "lifts",
            "elevator",
            "elevators",
            "ramp",
            "stroller",
            "pram",
            "无障碍",
            "轮椅",
            "电梯",
            "坡道",
            "婴儿车",
        ],
    ),
    (
        "photography",
        &[
            "take photos",
            "take a photo",
            "take photographs",
            "take pictures",
            "take a picture",
            "taking photos",
            "taking pictures",
            "photos allowed",
            "pictures allowed",
            "photography allowed",
            "photography permitted",
            "allowed to photograph",
            "no photography",
            "flash photography",
            "use flash",
            "use a flash",
            "selfie",
            "拍照",
            "能照相",
            "可以照相",
            "照相吗",
            "闪光灯",
            "自拍",
        ],
    ),
    (
        "shop",
        &[
            "gift shop",
            "museum shop",
            "souvenir",
            "souvenirs",
            "postcard",
            "postcards",
            "bookshop",
            "book shop",
            "纪念品",
            "文创",
            "礼品店",
            "商店",
            "明信片",
        ],
    ),
    (
        "parking",
        &[
            "parking",
            "park my car",
            "park the car",
            "park our car",
            "car park",
            "where can i park",
            "where can we park",
            "停车",
            "车位",
        ],
    ),
    (
        "pets",
        &[
            "bring my dog",
            "bring a dog",
            "bring our dog",
            "bring my pet",
            "bring pets",
            "bring a pet",
            "dogs allowed",
            "dog allowed",
            "pets allowed",
            "pet allowed",
            "dog friendly",
            "pet friendly",
            "service animal",
            "service dog",
            "guide dog",
            "宠物",
            "带狗",
            "导盲犬",
        ],
    ),
    (
        "audio_guide",
        &[
            "audio guide",
            "audio guides",
            "audioguide",
            "audio tour",
            "headphones",
            "语音导览",
            "讲解器",
            "导览机",
            "耳机",
        ],
    ),
    (
        "tours",
        &[
            "guided tour",
            "guided tours",
            "tour guide",
            "docent tour",
            "group tour",
            "group tours",
            "free tour",
            "导览团",
            "讲解服务",
            "人工讲解",
            "团体参观",
            "导游",
            "docent",
            "docents",
            "museum tour",
            "tour of the museum",
            "any tours",
            "讲解员",
            "导览员",
            "导览服务",
            "有讲解吗",
        ],
    ),
];

/// The built-in topic of what to see: the museum's highlights, as its staff would answer "What
/// should I not miss?", 镇馆之宝是什么？, "What is your most valuable object?". No record says
/// it: the search answered "most valuable" with a Byzantine flat weight "for weighing light,
/// valuable objects" and "What should I not miss?" with a Chinese record of a blouse.
pub const HIGHLIGHTS: &str = "highlights";

/// Phrases of a highlights question ([`HIGHLIGHTS`]). Unlike the other topics' keywords they
/// (and [`HIGHLIGHT_SUPERLATIVES`]) may come with a general word for exhibits ("your most
/// famous painting", 最珍贵的展品: [`GENERIC_EXHIBIT_CUES`]), never with a named one.
const HIGHLIGHT_CUES: &[&str] = &[
    "highlight",
    "highlights",
    "must see",
    "must-see",
    "must-sees",
    "not miss",
    "not to miss",
    "don't miss",
    "shouldn't miss",
    "what should i see",
    "what should we see",
    "what to see",
    "worth seeing",
    "best pieces",
    "best things",
    "best objects",
    "star pieces",
    "star objects",
    "masterpieces",
    "镇馆之宝",
    "必看",
    "不能错过",
    "不可错过",
    "不要错过",
    "值得一看",
    "值得看",
    "亮点",
    "重点展品",
];

/// Superlatives of a highlights question ("your most famous piece", 最珍贵的藏品), which count
/// only about the museum's own things ([`MUSEUM_ANCHORS`]): "Who is the most famous Japanese
/// painter?" and 日本最有名的画家是谁？ are questions of knowledge, not of what to see.
const HIGHLIGHT_SUPERLATIVES: &[&str] = &[
    "most famous",
    "most valuable",
    "most precious",
    "most important",
    "most popular",
    "most expensive",
    "最有名",
    "最著名",
    "最出名",
    "最珍贵",
    "最值钱",
    "最贵",
    "最重要",
    "最受欢迎",
];

/// Words that put a superlative on the museum's own things: the museum, "you have", "here", a
/// general word for an exhibit (thing, piece, 展品, 东西), which one (哪件).
const MUSEUM_ANCHORS: &[&str] = &[
    "your",
    "you have",
    "you've got",
    "here",
    "museum",
    "collection",
    "on display",
    "on show",
    "thing",
    "things",
    "object",
    "objects",
    "piece",
    "pieces",
    "item",
    "items",
    "exhibit",
    "exhibits",
    "artwork",
    "artworks",
    "work",
    "works",
    "painting",
    "paintings",
    "treasure",
    "treasures",
    "artifact",
    "artifacts",
    "你们",
    "贵馆",
    "本馆",
    "馆里",
    "馆内",
    "馆藏",
    "这里",
    "这儿",
    "博物馆",
    "展品",
    "藏品",
    "文物",
    "作品",
    "东西",
    "宝贝",
    "哪件",
    "哪一件",
];

/// Whether a (normalised) question asks what to see ([`HIGHLIGHTS`]): one of
/// [`HIGHLIGHT_CUES`], or a superlative ([`HIGHLIGHT_SUPERLATIVES`]) about the museum's own
/// things ([`MUSEUM_ANCHORS`]).
fn asks_for_highlights(q: &str) -> bool {
    HIGHLIGHT_CUES.iter().any(|c| contains(q, c))
        || (HIGHLIGHT_SUPERLATIVES.iter().any(|c| contains(q, c))
            && MUSEUM_ANCHORS.iter().any(|c| contains(q, c)))
}

/// Exhibit cues that name exhibits in general, not one exhibit: a highlights question may hold
/// them ("What is your most famous painting?", 最珍贵的藏品是哪件？).
const GENERIC_EXHIBIT_CUES: &[&str] = &[
    "painting",
    "artwork",
    "sculpture",
    "statue",
    "portrait",
    "masterpiece",
    "作品",
    "展品",
    "藏品",
    "雕塑",
];

/// Whether a (normalised) English question points at one thing with "this" or "that" ("Is this
/// painting the most valuable?"), other than the museum itself ("the most famous thing in this
/// museum"). Chinese pointing words for an exhibit (这件, 这幅) are exhibit cues already.
fn points_at_an_exhibit(q: &str) -> bool {
    const PLACES: &[&str] = &[
        "museum",
        "place",
        "collection",
        "building",
        "gallery",
        "galleries",
        "exhibition",
        "hall",
        "room",
        "floor",
        "city",
    ];
    let words: Vec<&str> = q
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .any(|w| matches!(w[0], "this" | "that" | "these" | "those") && !PLACES.contains(&w[1]))
        || words.last().is_some_and(|w| matches!(*w, "this" | "that"))
}

/// Words and phrases that make a question about an exhibit, not about visiting.
const EXHIBIT_CUES: &[&str] = &[
    "tell me about",
    "who painted",
    "who made",
    "who created",
    "who wrote",
    "who carved",
    "painting",
    "painted",
    "artwork",
    "artist",
    "sculpture",
    "statue",
    "portrait",
    "depict",
    "depicts",
    "made of",
    "made in",
    "dynasty",
    "century",
    "this object",
    "this piece",
    "masterpiece",
    "in the picture",
    "story of",
    "《",
    "「",
    "『",
    "这幅",
    "这件",
    "画的",
    "谁画",
    "作品",
    "展品",
    "藏品",
    "雕塑",
    "介绍一下",
    "讲的是",
    "描绘",
    "画中",
    "画里",
    "画上",
    "朝代",
    "年代",
];

/// Words that make the text a request for help rather than a statement.
const QUESTION_CUES: &[&str] = &[
    "where",
    "when",
    "what",
    "how",
    "is there",
    "are there",
    "is it",
    "is the",
    "are the",
    "are you",
    "do you",
    "does",
    "can i",
    "can we",
    "could",
    "may i",
    "need",
    "want",
    "looking for",
    "which",
    "open",
    "please",
    "?",
    "哪",
    "几",
    "什么",
    "多少",
    "吗",
    "么",
    "呢",
    "有没有",
    "能不能",
    "可以",
    "怎么",
    "如何",
    "请问",
    "想",
    "要",
    "需要",
    "找",
    "？",
];

/// What a visitor-service question gets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Service<'a> {
    /// The museum's answer for its topic.
    Fact(&'a Fact),
    /// A built-in topic the file has no entry for: the guide says it does not know (and never
    /// answers with an exhibit that shares a word, "Is there parking?" → a photograph of a park).
    NoEntry(&'static str),
}

/// Whether `question` is a visitor-service question, and what answers it. `None` for exhibit
/// questions and other questions. Works with no facts at all (every built-in topic is then
/// [`Service::NoEntry`]).
pub fn classify<'a>(question: &str, facts: &'a [Fact]) -> Option<Service<'a>> {
    if question.trim().is_empty() {
        return None;
    }
    let q = normalize(question);
    let q = q.split_whitespace().collect::<Vec<_>>().join(" ");
    let titled = names_a_title(question);
    let mut cues = EXHIBIT_CUES.iter().filter(|c| contains(&q, c)).peekable();
    let exhibit = titled || cues.peek().is_some();
    // What to see: a question about the collection as a whole, which may name exhibits in
    // general ("your most famous painting") but not one exhibit (这件, 《…》, a title).
    let highlights = !titled
        && cues.all(|c| GENERIC_EXHIBIT_CUES.contains(c))
        && asks_for_highlights(&q)
        && !points_at_an_exhibit(&q);
    if exhibit && !highlights {
        return None;
    }
    // The museum's own phrases first: they are the most specific.
    for f in facts {
        if f.triggers.iter().any(|t| contains(&q, t)) {
            return Some(Service::Fact(f));
        }
    }
    if highlights {
        return Some(
            facts
                .iter()
                .find(|f| f.topic == HIGHLIGHTS)
                .map_or(Service::NoEntry(HIGHLIGHTS), Service::Fact),
        );
    }
    let cjk = q.chars().filter(|c| super::text::is_cjk(*c)).count();
    let short = if cjk > 0 {
        cjk <= 6
    } else {
        q.split_whitespace().count() <= 4
    };
    if !short && !QUESTION_CUES.iter().any(|c| contains(&q, c)) {
        return None;
    }
    let topic = TOPICS
        .iter()
        .find(|(_, kws)| kws.iter().any(|k| contains(&q, k)))?
        .0;
    Some(
        facts
            .iter()
            .find(|f| f.topic == topic)
            .map_or(Service::NoEntry(topic), Service::Fact),
    )
}

/// The fact answering `question`, when it is a visitor-service question and the file has an
/// entry for its topic. `None` for exhibit questions, other questions, or a topic with no entry.
pub fn match_question<'a>(question: &str, facts: &'a [Fact]) -> Option<&'a Fact> {
    match classify(question, facts)? {
        Service::Fact(f) => Some(f),
        Service::NoEntry(_) => None,
    }
}

/// A stand-in fact for a built-in `topic` the file has no entry for: [`no_entry_answer`] in both
/// languages, said like any fact.
pub fn no_entry_fact(topic: &str) -> Fact {
    Fact {
        topic: topic.to_string(),
        en: no_entry_answer(false).to_string(),
        zh: no_entry_answer(true).to_string(),
        triggers: Vec::new(),
    }
}

/// The answer to a visitor-service question the museum's file does not cover, in the visitor's
/// language (`zh`): honest, and pointing to the staff.
pub fn no_entry_answer(zh: bool) -> &'static str {
    if zh {
        "这方面我没有资料，请向博物馆工作人员询问。"
    } else {
        "I'm sorry, I don't have information about that. Please ask a member of the museum staff."
    }
}

/// Whether `needle` occurs in `hay`, on word boundaries when it starts or ends with a Latin
/// letter or digit.
fn contains(hay: &str, needle: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() && !super::text::is_cjk(c);
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let start = from + i;
        let end = start + needle.len();
        let left_ok = !needle.starts_with(word) || !hay[..start].ends_with(word);
        let right_ok = !needle.ends_with(word) || !hay[end..].starts_with(word);
        if left_ok && right_ok {
            return true;
        }
        from = start + needle.chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Whether the (raw) English question names a title: two or more capitalised words in a row
/// (joined by of / the / and / in / on / with / a), not counting the sentence's first word, e.g.
/// "Where is Toilet of Helen shown?".
fn names_a_title(raw: &str) -> bool {
    const JOINERS: &[&str] = &[
        "of", "the", "and", "in", "on", "with", "a", "at", "la", "le",
    ];
    let words: Vec<&str> = raw
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '?' | '!' | '.' | '"' | '“' | '”'))
        .filter(|w| !w.is_empty())
        .collect();
    let capital = |w: &str| {
        w.chars().next().is_some_and(char::is_uppercase)
            && !matches!(w, "I" | "Wi-Fi" | "WiFi" | "WC" | "I'm" | "I've")
    };
    let mut run = 0;
    for (i, w) in words.iter().enumerate() {
        if i > 0 && capital(w) {
            run += 1;
            if run >= 2 {
                return true;
            }
        } else if run > 0 && JOINERS.contains(&w.to_lowercase().as_str()) {
            continue;
        } else {
            run = 0;
        }
    }
    false
}

/// The loaded facts file, reloaded on use when its modification time changed (checked at most
/// every [`FactsStore::CHECK_EVERY`]). A broken file keeps the previous facts and logs an error.
pub struct FactsStore {
    path: PathBuf,
    state: Mutex<State>,
}

struct State {
    facts: Arc<Vec<Fact>>,
    /// Modification time and length of the file last read (None: not read).
    seen: Option<(SystemTime, u64)>,
    checked: Instant,
}

impl FactsStore {
    pub const CHECK_EVERY: Duration = Duration::from_secs(2);

    /// Loads `path` now (a missing or broken file logs an error and starts with no facts).
    pub fn open(path: &Path) -> FactsStore {
        let store = FactsStore {
            path: path.to_path_buf(),
            state: Mutex::new(State {
                facts: Arc::new(Vec::new()),
                seen: None,
                checked: Instant::now(),
            }),
        };
        store.reload_if_changed(&mut store.state.lock().unwrap_or_else(|p| p.into_inner()));
        store
    }

    /// The store of `[srs] facts_path` (None when it is "").
    pub fn from_config(c: &crate::config::SrsConfig) -> Option<Arc<FactsStore>> {
        (!c.facts_path.as_os_str().is_empty()).then(|| Arc::new(FactsStore::open(&c.facts_path)))
    }

    /// The current facts, reloading the file first when it changed.
    pub fn current(&self) -> Arc<Vec<Fact>> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.checked.elapsed() >= Self::CHECK_EVERY {
            self.reload_if_changed(&mut s);
        }
        s.facts.clone()
    }

    fn reload_if_changed(&self, s: &mut State) {
        s.checked = Instant::now();
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) => {
                if s.seen.is_some() || s.facts.is_empty() {
                    tracing::error!(path = %self.path.display(), error = %e, "cannot read the visitor-services facts file; keeping the previous facts");
                }
                s.seen = None;
                return;
            }
        };
        let sig = (
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            meta.len(),
        );
        if s.seen == Some(sig) {
            return;
        }
        s.seen = Some(sig);
        let parsed = std::fs::read_to_string(&self.path)
            .map_err(|e| e.to_string())
            .and_then(|t| parse(&t));
        match parsed {
            Ok(facts) => {
                tracing::info!(path = %self.path.display(), facts = facts.len(), "visitor-services facts loaded");
                s.facts = Arc::new(facts);
            }
            Err(e) => {
                tracing::error!(path = %self.path.display(), error = %e, "visitor-services facts file is invalid; keeping the previous facts")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Vec<Fact> {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/facts/example-museum-facts.toml"),
        )
        .unwrap();
        parse(&text).unwrap()
    }

    #[test]
    fn the_example_file_covers_every_built_in_topic() {
        let facts = example();
        for topic in TOPICS.iter().map(|t| t.0).chain([HIGHLIGHTS]) {
            assert!(facts.iter().any(|f| f.topic == *topic), "{topic}");
        }
    }

    #[test]
    fn a_topic_the_file_lacks_is_no_entry_and_never_an_exhibit_question() {
        assert_eq!(
            classify("Is there parking?", &[]),
            Some(Service::NoEntry("parking"))
        );
        assert_eq!(
            classify("可以带宠物吗？", &[]),
            Some(Service::NoEntry("pets"))
        );
        let facts = example();
        let without: Vec<Fact> = facts
            .iter()
            .filter(|f| f.topic != "toilets")
            .cloned()
            .collect();
        assert_eq!(
            classify("Where are the toilets?", &without),
            Some(Service::NoEntry("toilets"))
        );
        assert_eq!(match_question("Where are the toilets?", &without), None);
        assert!(matches!(
            classify("Where are the toilets?", &facts),
            Some(Service::Fact(f)) if f.topic == "toilets"
        ));
        assert_eq!(classify("Who painted Toilet of Helen?", &[]), None);
        assert_eq!(classify("Is there a painting of a dog?", &[]), None);
        assert!(no_entry_answer(true).contains("工作人员"));
    }

    /// Every line of `fixtures/facts/questions.jsonl`: `{"q": ..., "topic": ... or null}`.
    #[test]
    fn questions_match_their_topic_and_near_misses_do_not() {
        let facts = example();
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/facts/questions.jsonl"),
        )
        .unwrap();
        let mut wrong = Vec::new();
        let (mut pos, mut neg) = (0, 0);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let q = v["q"].as_str().unwrap();
            let want = v["topic"].as_str();
            if want.is_some() {
                pos += 1
            } else {
                neg += 1
            }
            let got = match_question(q, &facts).map(|f| f.topic.as_str());
            if got != want {
                wrong.push(format!("{q:?}: want {want:?}, got {got:?}"));
            }
        }
        assert!(pos >= 40 && neg >= 20, "{pos} positives, {neg} negatives");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn triggers_and_missing_topics() {
        let facts = parse(
            "[[fact]]\ntopic = \"shop\"\nen = \"Shop: ground floor.\"\nzh = \"商店在一楼。\"\n\
             triggers = [\"gift shop\", \"紀念品\"]\n",
        )
        .unwrap();
        assert_eq!(
            match_question("Where is the gift shop?", &facts)
                .unwrap()
                .topic,
            "shop"
        );
        assert_eq!(
            match_question("哪里买纪念品？", &facts).unwrap().topic,
            "shop"
        );
        // A built-in topic the file does not have is not answered.
        assert!(match_question("Where are the toilets?", &facts).is_none());
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        assert!(parse("[[fact]]\ntopic = \"x\"\nen = \"a\"\n").is_err());
        assert!(
            parse("[[fact]]\ntopic = \"x\"\nen = \"a\"\nzh = \"\"\n")
                .unwrap_err()
                .contains("zh")
        );
        assert!(parse("[[fact]]\ntopic = \"x\"\nen = \"a\"\nzh = \"b\"\ncolour = 1\n").is_err());
        assert!(parse("not toml [").is_err());
        assert_eq!(parse("museum = \"M\"\n").unwrap(), vec![]);
    }

    #[test]
    fn the_store_keeps_the_previous_facts_when_the_file_breaks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.toml");
        std::fs::write(
            &path,
            "[[fact]]\ntopic = \"wifi\"\nen = \"A\"\nzh = \"甲\"\n",
        )
        .unwrap();
        let store = FactsStore::open(&path);
        assert_eq!(store.current()[0].en, "A");
        std::fs::write(&path, "[[fact]]\ntopic = broken").unwrap();
        store.state.lock().unwrap().checked -= FactsStore::CHECK_EVERY;
        assert_eq!(
            store.current()[0].en,
            "A",
            "a broken file keeps the old facts"
        );
        std::fs::write(
            &path,
            "[[fact]]\ntopic = \"wifi\"\nen = \"Bee\"\nzh = \"乙\"\n",
        )
        .unwrap();
        // Not re-checked before CHECK_EVERY has passed.
        store.state.lock().unwrap().checked = Instant::now();
        assert_eq!(store.current()[0].en, "A");
        store.state.lock().unwrap().checked -= FactsStore::CHECK_EVERY;
        assert_eq!(store.current()[0].en, "Bee");
    }
}

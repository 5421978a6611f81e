//! Visitor services (toilets, opening hours, tickets, café, cloakroom, Wi-Fi, accessibility,
//! lost and found, photography, shop, parking, pets, map, length of a visit, audio guide, tours,
//! and the highlights:
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

mod words;
use words::{
    EXHIBIT_CUES, GENERIC_EXHIBIT_CUES, HIGHLIGHT_CUES, HIGHLIGHT_SUPERLATIVES, MUSEUM_ANCHORS,
    QUESTION_CUES, TASTE_SUPERLATIVES, TOPICS, WHICH_ONE,
};

/// One topic's answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    /// A built-in topic (`toilets`, `hours`, `tickets`, `cafe`, `cloakroom`, `wifi`,
    /// `accessibility`, `lost_found`, `photography`, `shop`, `parking`, `pets`, `map`,
    /// `visit_length`, `rules`, `audio_guide`, `tours`, `exhibitions`, `directions`,
    /// `amenities`, `families`, `highlights`) or the museum's own (matched by `triggers` only).
    pub topic: String,
    pub en: String,
    pub zh: String,
    /// Extra phrases (any language) that also select this topic; normalised like questions
    /// (lower case, Simplified) when the file is parsed.
    #[serde(default)]
    pub triggers: Vec<String>,
    /// Ids of the collection's exhibits the answer is about (the highlights' three stops): the
    /// answer names their records' titles after the museum's text, so "Tell me about the third
    /// one" picks one and the kiosk shows the first one's card. An id the collection lacks is
    /// left out of the answer (logged).
    #[serde(default)]
    pub exhibits: Vec<String>,
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

/// The built-in topic of what to see: the museum's highlights, as its staff would answer "What
/// should I not miss?", 镇馆之宝是什么？, "What is your most valuable object?". No record says
/// it: the search answered "most valuable" with a Byzantine flat weight "for weighing light,
/// valuable objects" and "What should I not miss?" with a Chinese record of a blouse.
pub const HIGHLIGHTS: &str = "highlights";

/// Whether a (normalised) question asks what to see ([`HIGHLIGHTS`]): one of
/// [`HIGHLIGHT_CUES`], or a superlative ([`HIGHLIGHT_SUPERLATIVES`]) about the museum's own
/// things ([`MUSEUM_ANCHORS`]).
fn asks_for_highlights(q: &str) -> bool {
    HIGHLIGHT_CUES.iter().any(|c| contains(q, c))
        || (HIGHLIGHT_SUPERLATIVES.iter().any(|c| contains(q, c))
            && MUSEUM_ANCHORS.iter().any(|c| contains(q, c)))
        || (TASTE_SUPERLATIVES.iter().any(|c| contains(q, c))
            && MUSEUM_ANCHORS
                .iter()
                .any(|c| !WHICH_ONE.contains(c) && contains(q, c)))
}

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

/// Topics about how visitors may treat the exhibits in general, which may name them so
/// ("the paintings", 展品) and still be visitor-service questions.
const TREATMENT_TOPICS: &[&str] = &["photography", "rules"];

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
    let cues: Vec<&str> = EXHIBIT_CUES
        .iter()
        .copied()
        .filter(|c| contains(&q, c))
        .collect();
    let exhibit = titled || !cues.is_empty();
    // What to see: a question about the collection as a whole, which may name exhibits in
    // general ("your most famous painting") but not one exhibit (这件, 《…》, a title).
    let highlights = !titled
        && cues.iter().all(|c| GENERIC_EXHIBIT_CUES.contains(c))
        && asks_for_highlights(&q)
        && !points_at_an_exhibit(&q)
        // "What is the most beautiful work by Miller?", "Rembrandt's most famous painting":
        // about a maker's works, searched.
        && super::text::named_makers(question, &super::text::UserDict::default()).is_empty();
    // How exhibits in general may be treated ("Can I photograph the paintings?", 展品可以摸吗？
    // got a self-portrait and a refusal): the photography and gallery rules, with no one
    // exhibit named.
    let treated = !titled
        && cues.iter().all(|c| GENERIC_EXHIBIT_CUES.contains(c))
        && TOPICS
            .iter()
            .filter(|(topic, _)| TREATMENT_TOPICS.contains(topic))
            .any(|(_, kws)| kws.iter().any(|k| contains(&q, k)));
    if exhibit && !highlights && !treated {
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
        exhibits: Vec::new(),
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

    /// No question about the collection (the dev, training, held-out and keyword sets, each
    /// answerable by records or asking for a work not held) reads as a visitor-service one:
    /// a topic's words must not take an exhibit question away from the search.
    #[test]
    fn no_collection_question_is_a_visitor_service_question() {
        #[derive(serde::Deserialize)]
        struct Q {
            query: String,
        }
        let facts = example();
        let mut taken = Vec::new();
        for file in [
            "dev_queries",
            "dev_queries_v2",
            "train_queries",
            "heldout_queries",
            "heldout2_queries",
            "train_keywords",
        ] {
            let qs: Vec<Q> =
                crate::util::fixture_cases(&format!("fixtures/collection/{file}.jsonl"));
            assert!(qs.len() >= 40, "{file}");
            for q in qs {
                if let Some(s) = classify(&q.query, &facts) {
                    let topic = match s {
                        Service::Fact(f) => f.topic.as_str(),
                        Service::NoEntry(t) => t,
                    };
                    taken.push(format!("{file}: {:?} → {topic}", q.query));
                }
            }
        }
        assert!(taken.is_empty(), "{}", taken.join("\n"));
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

//! The English openings of a question that say what it asks for before naming its object:
//! a wish to see ("Show me swords"), a taste ("I love cats"), a topic ("Tell me about
//! Dragons"), whether the collection has something ("Do you have any ceramics?"). Pure.
//!
//! One list of each, read by every step that strips or recognises them: the keyword step
//! (`text::asked_keyword`), the exact-title step and the offline answerer's naming of a title ([`typed_title`]) and the offline
//! answerer's lists (`offline::browse`). Before they were shared, four near-copies had drifted:
//! "Can you show me swords" was listed but its keyword never read, "I really love cats" the
//! same. Each list is of whole words in normalised text (lower case, ASCII apostrophes).

/// A wish to see things ("Show me swords", "I want to see armor"): the object is what to show.
pub const SHOW: &[&str] = &[
    "show me",
    "can you show me",
    "could you show me",
    "please show me",
    "i want to see",
    "i wanna see",
    "i'd like to see",
    "i would like to see",
    "let me see",
    "we want to see",
    "we'd like to see",
];

/// A taste for things ("I love cats", "I'm interested in armor"): asked as "Do you have" asks.
pub const TASTE: &[&str] = &[
    "i like",
    "i love",
    "i really like",
    "i really love",
    "i adore",
    "i enjoy",
    "we like",
    "we love",
    "my kids love",
    "my kids like",
    "i'm interested in",
    "i am interested in",
    "we're interested in",
    "we are interested in",
    "i'm into",
    "i'm a fan of",
    "i am a fan of",
    "i'm fond of",
];

/// A topic named for its own sake ("Tell me about Dragons", "What about Japanese armor?").
pub const TOPIC: &[&str] = &[
    "tell me about",
    "tell me more about",
    "what about",
    "how about",
    "talk about",
];

/// Whether the collection has anything about a topic ("Is there anything about Confucius?",
/// "Anything from the Warring States?"): the object is the keyword, as after [`HAVE`]. "by" is
/// not among them: a maker is asked for by `offline::makers_asked` and the maker signals.
pub const ABOUT: &[&str] = &[
    "do you have anything about",
    "do you have anything on",
    "do you have anything from",
    "do you have something about",
    "have you got anything about",
    "have you got anything on",
    "have you got anything from",
    "is there anything about",
    "is there anything on",
    "is there anything from",
    "is there something about",
    "anything about",
    "anything on",
    "anything from",
];

/// What a thing is ("What is a pax?", "What are netsuke?"): the object is the keyword
/// (`text::asked_keyword`). The typographic apostrophe is listed too: a phone keyboard types
/// "What’s a cassone?", and normalising leaves it.
pub const DEFINE: &[&str] = &[
    "what is a",
    "what is an",
    "what's a",
    "what’s a",
    "what's an",
    "what’s an",
    "what are",
    "what is",
    "what's",
    "what’s",
];

/// Whether the collection has something, for the keyword step ("Do you have any swords?"):
/// only openings whose object is the thing asked for ("Is there any…", not "Is there a café").
pub const HAVE: &[&str] = &[
    "do you have any",
    "do you have",
    "have you got any",
    "have you got",
    "is there any",
    "are there any",
    "show me some",
];

/// `text` without the longest opening of `lists` that is followed by a space, and that space;
/// `None` when it opens with none ("show me some swords" → `swords` with [`HAVE`] and
/// [`SHOW`] both read).
pub fn strip<'t>(text: &'t str, lists: &[&[&str]]) -> Option<&'t str> {
    lists
        .iter()
        .flat_map(|l| l.iter())
        .filter_map(|o| text.strip_prefix(o)?.strip_prefix(' '))
        .min_by_key(|rest| rest.len())
}

/// Every opening of `lists`, in their order (for word-wise matching).
pub fn all<'a>(lists: &'a [&'a [&'a str]]) -> impl Iterator<Item = &'a str> + 'a {
    lists.iter().flat_map(|l| l.iter().copied())
}

/// Openings before a title typed as the question's whole object ("Tell me about Dragons"):
/// a topic or a wish to see it ([`TOPIC`], [`SHOW`]), or "what is".
const TITLE_OPENINGS: &[&[&str]] = &[TOPIC, SHOW, &["what is", "what's"]];

/// Chinese openings before a title typed whole (介绍一下《…》).
const ZH_TITLE_OPENINGS: &[&str] = &["介绍一下", "讲讲"];

/// The question's object when it may be a title typed whole: the question without a
/// [`TITLE_OPENINGS`] opening, an article and its end punctuation, normalised ("Tell me about
/// Dragons" → `dragons`).
pub fn typed_title(query: &str) -> String {
    let norm = super::text::normalize(query);
    let mut t = norm
        .trim()
        .trim_end_matches(['?', '？', '.', '。', '!', '！'])
        .trim();
    if let Some(rest) = strip(t, TITLE_OPENINGS)
        .or_else(|| ZH_TITLE_OPENINGS.iter().find_map(|o| t.strip_prefix(o)))
    {
        t = rest.trim_start();
    }
    for article in ["the ", "a ", "an "] {
        t = t.strip_prefix(article).unwrap_or(t);
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_opening_is_stripped() {
        assert_eq!(strip("show me some swords", &[HAVE, SHOW]), Some("swords"));
        assert_eq!(strip("show me swords", &[HAVE, SHOW]), Some("swords"));
        assert_eq!(strip("do you have any jade", &[HAVE]), Some("jade"));
        assert_eq!(strip("i really love cats", &[TASTE]), Some("cats"));
        assert_eq!(
            strip("tell me more about dragons", &[TOPIC]),
            Some("dragons")
        );
    }

    #[test]
    fn an_opening_is_whole_words() {
        // "i like" is no opening of "i liked it", nor is an opening alone a question's object.
        assert_eq!(strip("i liked it", &[TASTE]), None);
        assert_eq!(strip("show me", &[SHOW]), None);
        assert_eq!(strip("where are the toilets", &[HAVE, SHOW, TASTE]), None);
    }

    #[test]
    fn no_opening_is_listed_twice() {
        let lists: &[&[&str]] = &[SHOW, TASTE, TOPIC, HAVE];
        let mut seen = std::collections::HashSet::new();
        for o in all(lists) {
            assert!(seen.insert(o), "{o} listed twice");
            assert_eq!(o, o.trim(), "{o:?} has outer spaces");
        }
    }

    #[test]
    fn a_typed_title_is_the_object_without_its_opening_and_article() {
        assert_eq!(typed_title("Tell me about Dragons"), "dragons");
        assert_eq!(typed_title("What is the Seated Cat?"), "seated cat");
        assert_eq!(typed_title("Book of Hours"), "book of hours");
        assert_eq!(
            typed_title("介绍一下中华粥会八十纪念册"),
            "中华粥会八十纪念册"
        );
        assert_eq!(typed_title("Tell me about the"), "the");
        assert_eq!(typed_title("?"), "");
    }
}

//! The English openings of a question that say what it asks for before naming its object:
//! a wish to see ("Show me swords"), a taste ("I love cats"), a topic ("Tell me about
//! Dragons"), whether the collection has something ("Do you have any ceramics?"). Pure.
//!
//! One list of each, read by every step that strips or recognises them: the keyword step
//! (`text::asked_keyword`), the exact-title step (`embedded::typed_title`) and the offline
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
}

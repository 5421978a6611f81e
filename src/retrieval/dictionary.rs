//! A cross-lingual bridge through a bilingual dictionary, CC-CEDICT (issue 17).
//!
//! The pinyin bridge ([`translit`]) crosses between Chinese and English where the two spell a
//! name alike (康熙 ↔ Kangxi). Most of what visitors ask across the languages is translated,
//! not spelt: Boxers ↔ 义和团, gourd ↔ 葫芦, rubbing ↔ 拓本, "earliest … watch" ↔ 最早…表. This
//! module makes the same kind of [`Bridge`] from CC-CEDICT (`cedict/`, CC BY-SA 4.0, see its
//! NOTICE.md): index tokens of the other script standing for question terms, crediting coverage
//! and joining the MATCH, adding no weight of their own (so a record in the question's own
//! language scores exactly as before).
//!
//! - **A sense's phrases**: each sense of an entry (`/…/`) loses its parentheses and brackets and
//!   is cut at `;`, `,` and ` or `; a piece of one to [`MAX_PHRASE_TOKENS`] English index tokens
//!   (stop words dropped, stemmed as the index stems) is a phrase ("calabash or bottle gourd
//!   (Lagenaria siceraria)" → `calabash`, `bottl gourd`). Cross-references, classifiers and
//!   surnames ("variant of …", "CL:…", "surname Dai", "see …", "abbr. for …") make none, nor
//!   does a sense marked figurative after a literal one ("(fig.) a complete mess" of 一锅粥, "a
//!   pot of porridge"): it names something other than the thing.
//! - **Chinese question → English records**: each dictionary word in the question whose every
//!   bigram is a question term (or a one-character word that is a term itself) bridges to the
//!   phrases of its first [`SENSES_PER_WORD`] senses: all tokens of a phrase must be in the
//!   record, and the collection must hold each of them.
//! - **English question → Chinese records**: a phrase all of whose tokens are terms of the
//!   question names the headwords it is a sense of ("Boxers" is a sense of 义和团 and 义和拳,
//!   "steelworks" of 钢铁厂). A headword of two or more characters bridges as its bigrams, all
//!   required, when the collection holds each; at most [`HEADWORDS_PER_PHRASE`] a phrase, the
//!   most frequent in the collection first. One-character headwords are left out: the index
//!   holds a character inside a longer run only as bigrams, and one character reads too many
//!   ways.
//!
//! - **Calques, English question → Chinese records**: two English words written next to each
//!   other ("Stone Drum", "war elephant") bridge as the bigram of their one-character glosses
//!   (石 + 鼓, 战 + 象: [`Dictionary::characters_glossed`]) when the collection holds it, both
//!   words its sources. Many Chinese names of things are such pairs, and CC-CEDICT lists them
//!   under another sense (石鼓, a district) or not at all (战象).
//!
//! - **Looser translations** ([`BridgeKind::Loose`]): the noun a sense of a one-character word
//!   names after a hyphenated modifier (剑, "double-edged sword" → `sword`:
//!   [`Dictionary::loose_english_of`]; a compound's is a kind of the noun: 豇豆, "black-eyed
//!   bean") and the Chinese words whose sense is a kind of an English term ("rubbing of
//!   inscription": rubbing → 拓本, 拓片; [`Dictionary::heads_whose_sense_is_a`]). They reorder the answer with the
//!   thesaurus's synonyms and never reach the no-answer signals: fed to the signals, each moved
//!   a fold's refit (retrieval README, "Two bridges that reorder the answer only").
//!
//! Cost bounds: a question term in over [`COMMON_SHARE`] of the collection is not translated,
//! and `embedded::lexical` puts the translations in a MATCH of their own within a budget.
//!
//! The dictionary is compiled into the binary (3.8 MB compressed) and parsed once: by the server
//! in the background after its start-up ([`warm_up_in_background`]), else at the first
//! question; 0.55–0.6 s of one core and ~50 MB resident in a release build.

use std::collections::HashMap;
use std::io::Read;
use std::sync::OnceLock;

use super::text::{self, QueryTerm, Run};
use super::translit::{Bridge, BridgeKind};
use crate::store::StoreError;
use crate::store::collection::CollectionStore;

/// CC-CEDICT 2023-11-07 as MDBG publishes it (gzip).
const CEDICT_GZ: &[u8] = include_bytes!("cedict/cedict_1_0_ts_utf-8_mdbg.txt.gz");

/// Entries added to CC-CEDICT, in its format, each for an everyday English use it files
/// elsewhere: it gives "America" as 美洲 (the continent) and 美利坚, where a visitor asking what
/// "America sent" means the United States (美国, which the dictionary glosses "United States",
/// "USA" and "US" only).
const SUPPLEMENT: &str = "美國 美国 [Mei3 guo2] /America/\n";

/// Museum terms CC-CEDICT lacks (铜镜 "bronze mirror", 木雕 "wood carving", 彩陶 "painted
/// pottery"), in its format, our own: 39 of 175 common catalogue words for kinds of object were
/// missing; 37 are here (金器 is a department's word already, `kinds`; 玉壶春瓶 names a shape
/// no record writes). Without them 有木雕吗？ was answered with a presidential letter. A sense
/// is the catalogue's English only: 唐三彩 is "sancai", not also "three-color ware", which
/// brought a Wedgwood vase and the "Three-String" vase into 有没有唐三彩？.
const MUSEUM_GLOSSARY: &str = include_str!("cedict/museum_glossary.u8");
/// Most index tokens in one phrase (longer senses are descriptions, not translations).
pub const MAX_PHRASE_TOKENS: usize = 3;
/// Senses of a Chinese word read (CC-CEDICT lists the common ones first).
pub const SENSES_PER_WORD: usize = 6;
/// Headwords one English phrase bridges to.
pub const HEADWORDS_PER_PHRASE: usize = 6;
/// Headwords of one phrase looked up in the collection before [`HEADWORDS_PER_PHRASE`] are
/// kept (dictionary order).
const HEADWORDS_TRIED: usize = 24;
/// Question terms in more than this share of the collection are not translated: their weight
/// in the coverage is small and their translations are many (a long English question's "one",
/// "made", "back" gave dozens of Chinese tokens). Chosen for cost; recall and abstention were
/// the same under 5-fold CV with every term translated (retrieval README).
pub const COMMON_SHARE: f64 = 0.1;
/// Headwords whose sense is a kind of an English term ([`Dictionary::heads_whose_sense_is_a`])
/// looked up in the collection, in dictionary order: each costs a document-frequency lookup
/// per bigram, on every question.
pub const KINDS_TRIED: usize = 8;
/// Senses of a one-character headword read for a calque ([`Dictionary::characters_glossed`]):
/// a character's later senses are its rarer readings.
pub const CALQUE_SENSES: usize = 4;
/// One-character headwords one English word may stand for in a calque.
pub const CALQUE_CHARACTERS: usize = 3;
/// Calques (bigrams the collection holds) one pair of English words bridges to.
pub const CALQUES_PER_PAIR: usize = 2;
/// Longest Chinese word looked up, in characters.
const MAX_WORD_CHARS: usize = 8;

/// One dictionary entry: its headword (normalised like the index: Simplified, as
/// [`text::normalize`] writes it) and its phrases, in sense order.
struct Entry {
    head: Box<str>,
    phrases: Vec<Phrase>,
    /// CC-CEDICT marks it a proper noun (its pinyin capitalised).
    proper: bool,
}

/// One phrase of an entry: `(sense number, whether the sense is a verb's ("to carve"),
/// index tokens)`.
type Phrase = (u16, bool, Box<[Box<str>]>);

/// The parsed dictionary.
pub struct Dictionary {
    entries: Vec<Entry>,
    /// Normalised headword → entries.
    by_head: HashMap<Box<str>, Vec<u32>>,
    /// First token of a phrase → `(entry, phrase index)`.
    by_token: HashMap<Box<str>, Vec<(u32, u16)>>,
    /// The head noun of a sense written "X of …" / "X from …" → the entries of two or more
    /// characters with such a sense ("rubbing of inscription": 拓本; [`Dictionary::heads_whose_sense_is_a`]).
    by_head_noun: HashMap<Box<str>, Vec<u32>>,
    /// Entry → the nouns of its first [`SENSES_PER_WORD`] senses written after a hyphenated
    /// modifier ("double-edged sword": 剑 → `sword`; [`Dictionary::loose_english_of`]).
    hyphen_nouns: HashMap<u32, Vec<Box<str>>>,
    /// Entry → the two halves of each of its first [`SENSES_PER_WORD`] senses that name two
    /// things joined by "and" ("calligraphy and painting": 书画 → `calligraphi`, `paint`;
    /// [`Dictionary::halves_of`]).
    and_halves: HashMap<u32, Vec<Vec<Box<str>>>>,
}

/// The dictionary (parsed at the first call).
pub fn dictionary() -> &'static Dictionary {
    static D: OnceLock<Dictionary> = OnceLock::new();
    D.get_or_init(|| {
        let started = std::time::Instant::now();
        let mut raw = gunzip(CEDICT_GZ);
        // The compressed file ends without a line break.
        raw.push('\n');
        raw.push_str(SUPPLEMENT);
        raw.push_str(MUSEUM_GLOSSARY);
        let d = Dictionary::parse(&raw);
        tracing::info!(
            entries = d.len(),
            ms = started.elapsed().as_millis() as u64,
            "bilingual dictionary (CC-CEDICT) loaded"
        );
        d
    })
}

/// The text of gzip data compiled into the binary.
pub(super) fn gunzip(bytes: &[u8]) -> String {
    let mut raw = String::new();
    // The bytes are compiled in: a failure here is a broken build, caught by the tests.
    libflate::gzip::Decoder::new(bytes)
        .and_then(|mut d| d.read_to_string(&mut raw))
        .expect("compiled-in gzip data decompresses");
    raw
}

/// Parses the dictionary and the English thesaurus ([`super::thesaurus`]) now instead of at the
/// first question.
pub fn warm_up() {
    let _ = dictionary();
    let _ = super::thesaurus::thesaurus();
}

/// [`warm_up`] on a thread of its own, for a server once its start-up work is done (the parses
/// take ~0.6 s and ~0.3 s of a core; a question asked meanwhile waits for them to finish).
pub fn warm_up_in_background() {
    if let Err(e) = std::thread::Builder::new()
        .name("dictionary".into())
        .spawn(warm_up)
    {
        tracing::warn!(error = %e, "could not parse the bilingual dictionary ahead; the first question will");
    }
}

/// A sense that is a cross-reference or a note, not a translation.
fn is_note(sense: &str) -> bool {
    const STARTS: [&str; 12] = [
        "CL:",
        "see ",
        "see also",
        "surname ",
        "abbr. ",
        "old variant",
        "variant of",
        "also written",
        "used in ",
        "pr. ",
        "also pr.",
        "Taiwan pr.",
    ];
    STARTS.iter().any(|s| sense.starts_with(s)) || sense.contains("variant of")
}

/// Whether a sense is marked figurative ("(fig.) plan; scheme" of 算盘, after "abacus").
fn is_figurative(sense: &str) -> bool {
    let s = sense.trim_start();
    s.starts_with("(fig.)") || s.starts_with("(fig)") || s.starts_with("fig.")
}

/// The sense without its parenthesised and bracketed parts.
fn strip_notes(sense: &str) -> String {
    let mut out = String::with_capacity(sense.len());
    let mut depth = 0usize;
    for c in sense.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The phrases of one sense (see the module header).
pub fn sense_phrases(sense: &str) -> Vec<Vec<String>> {
    phrases_of(sense, false)
}

/// Whether a piece of a proper noun's sense describes it rather than names it: its first word
/// (after an article) is not capitalised. "Qi Baishi (1864-1957), famous Chinese painter" names
/// "Qi Baishi" and describes "famous Chinese painter"; "the Song dynasty" and "Tang dynasty"
/// name.
fn describes_name(piece: &str) -> bool {
    let mut words = piece.split_whitespace();
    let first = match words.next() {
        Some("the" | "The" | "a" | "an") => words.next(),
        w => w,
    };
    first
        .and_then(|w| w.chars().next())
        .is_some_and(|c| !c.is_uppercase() && !c.is_ascii_digit())
}

/// A proper noun's sense piece without a title of address before the name: "Dr Sun Yat-sen"
/// names Sun Yat-sen (孙中山), and with the title the phrase was four tokens, over
/// [`MAX_PHRASE_TOKENS`], so the name had no translation at all.
fn without_title(piece: &str) -> &str {
    const TITLES: [&str; 9] = [
        "Dr ", "Dr. ", "Mr ", "Mr. ", "Mrs ", "Mrs. ", "Madame ", "Sir ", "Lord ",
    ];
    let p = piece.trim_start();
    TITLES
        .iter()
        .find_map(|t| p.strip_prefix(t))
        .unwrap_or(piece)
}

/// The phrases of one sense; `proper` for an entry CC-CEDICT marks as a proper noun (its
/// pinyin capitalised, `[Qi2 Bai2 shi2]`), whose describing pieces ([`describes_name`]) are
/// left out: a name translates as the name, not as what it is ("famous Chinese painter" made
/// 齐白石画的虾 match a Japanese ink painting).
/// The two things a sense names joined by "and", each of one or two words ("calligraphy and
/// painting", "pottery and porcelain"); none for any other sense (a note, a longer
/// description, "to come and go").
fn and_halves(sense: &str) -> Vec<&str> {
    let sense = sense.trim();
    if sense.contains(['(', ')', ',', ';']) || sense.starts_with("to ") {
        return Vec::new();
    }
    let Some((a, b)) = sense.split_once(" and ") else {
        return Vec::new();
    };
    let short = |h: &str| {
        let n = h.split_whitespace().count();
        (1..=2).contains(&n)
            && h.chars()
                .all(|c| c.is_ascii_alphabetic() || c == ' ' || c == '-')
    };
    if short(a) && short(b) {
        vec![a, b]
    } else {
        Vec::new()
    }
}

fn phrases_of(sense: &str, proper: bool) -> Vec<Vec<String>> {
    if is_note(sense) {
        return Vec::new();
    }
    let plain = strip_notes(sense);
    let mut out: Vec<Vec<String>> = Vec::new();
    for piece in plain.split([';', ',']).flat_map(|p| p.split(" or ")) {
        if piece.chars().any(text::is_cjk) || (proper && describes_name(piece)) {
            continue;
        }
        let piece = if proper { without_title(piece) } else { piece };
        let toks = text::latin_tokens(piece);
        if (1..=MAX_PHRASE_TOKENS).contains(&toks.len()) && !out.contains(&toks) {
            out.push(toks);
        }
    }
    out
}

/// The phrases of a proper noun's sense named and then placed ("Three Kingdoms period (220-280)
/// in Chinese history"): the name before " in " (`three kingdom period`). Written whole, it was
/// five tokens, over [`MAX_PHRASE_TOKENS`], and "the Three Kingdoms" had no Chinese at all.
/// Stored under [`ONE_WAY_SENSE`]: read the other way, 三国 found a Japanese sword guard
/// (three, Kingdoms and period in its record) above the steles of the Three Kingdoms.
fn named_before_in(sense: &str) -> Vec<Vec<String>> {
    if is_note(sense) {
        return Vec::new();
    }
    let plain = strip_notes(sense);
    let mut out: Vec<Vec<String>> = Vec::new();
    for piece in plain.split([';', ',']) {
        let Some((name, _)) = piece.split_once(" in ") else {
            continue;
        };
        if name.chars().any(text::is_cjk) || describes_name(name) {
            continue;
        }
        let toks = text::latin_tokens(without_title(name));
        if (1..=MAX_PHRASE_TOKENS).contains(&toks.len()) && !out.contains(&toks) {
            out.push(toks);
        }
    }
    out
}

/// The name a proper noun's sense opens with when it spells the headword's pinyin and goes on
/// to describe it ("Jingdezhen prefecture-level city in Jiangxi province 江西, famous for
/// porcelain" for 景德镇 [Jing3 de2 zhen4]): as index tokens. Read whole, such a sense was a
/// description and not a translation, so 景德镇 had no English at all: 有景德镇的瓷器吗？ never
/// reached the 24 records that say "Jingdezhen". None when the sense does not open with the
/// pinyin's letters in whole words, or is nothing but the name (then [`phrases_of`] has it).
fn named_in_pinyin(sense: &str, pinyin: &str) -> Option<Vec<String>> {
    let letters = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphabetic)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let name = letters(pinyin);
    if name.len() < 4 || is_note(sense) {
        return None;
    }
    let words: Vec<&str> = sense.split_whitespace().collect();
    let mut spelled = String::new();
    for (i, w) in words.iter().enumerate() {
        if !w
            .chars()
            .all(|c| c.is_ascii_alphabetic() || c == '-' || c == '\'')
        {
            return None;
        }
        spelled.push_str(&letters(w));
        if spelled == name {
            let more = words.get(i + 1)?;
            if more.starts_with('(') {
                return None;
            }
            // Every piece of the name a token: "Qing'an" (庆安) is not "qing" (the Qing).
            let spelled = words[..=i].join(" ");
            let pieces = spelled
                .split([' ', '-', '\''])
                .filter(|p| !p.is_empty())
                .count();
            let toks = text::latin_tokens(&spelled);
            return (toks.len() == pieces && toks.len() <= MAX_PHRASE_TOKENS).then_some(toks);
        }
        if !name.starts_with(&spelled) {
            return None;
        }
    }
    None
}

/// The sense number of the phrases only the English → Chinese lookups read
/// ([`Dictionary::chinese_of`], [`Dictionary::heads_of_name`]): past [`SENSES_PER_WORD`], so
/// [`Dictionary::english_of`] and the calques never do.
const ONE_WAY_SENSE: u16 = u16::MAX;

/// The head noun of a sense written as one noun and what it is of or from ("rubbing of
/// inscription", "rubbings from a tablet" → `rub`, as an index token): a kind of thing the
/// sense narrows. None for a verb's sense ("to rub") or any other shape. An idiom reads
/// loosely ("piece of cake" → piece): only the kind lookup reads these, where a headword
/// counts only as the last word of a catalogue's titles (`kinds`).
fn head_noun(sense: &str) -> Option<String> {
    let plain = thing_sense(sense)?;
    let mut words = plain.split_whitespace();
    let (first, prep) = (words.next()?, words.next()?);
    if !matches!(prep, "of" | "from") || words.next().is_none() {
        return None;
    }
    let mut toks = text::latin_tokens(first);
    (toks.len() == 1).then(|| toks.pop()).flatten()
}

/// A sense that may name a thing, without its notes ([`strip_notes`]): None for a
/// cross-reference or note ([`is_note`]) and for a verb's sense ("to rub"). The shared first
/// step of [`head_noun`] and [`hyphened_nouns`].
fn thing_sense(sense: &str) -> Option<String> {
    (!is_note(sense) && !sense.trim_start().starts_with("to ")).then(|| strip_notes(sense))
}

/// The nouns of a sense written as a hyphenated modifier and a noun ("double-edged sword" →
/// `sword`, as an index token): the thing itself, which a record names without the modifier
/// (a record that says "sword" never says "double-edged"). None for a verb's sense or a note.
fn hyphened_nouns(sense: &str) -> Vec<String> {
    let Some(plain) = thing_sense(sense) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for piece in plain.split([';', ',']) {
        if let [modifier, noun] = piece.split_whitespace().collect::<Vec<_>>()[..]
            && modifier.contains('-')
            && let [head] = &text::latin_tokens(noun)[..]
        {
            out.push(head.clone());
        }
    }
    out
}

impl Dictionary {
    /// Parses CC-CEDICT's text format (`TRAD SIMP [pinyin] /sense/sense/`; `#` comments).
    pub fn parse(raw: &str) -> Dictionary {
        let mut d = Dictionary {
            entries: Vec::new(),
            by_head: HashMap::new(),
            by_token: HashMap::new(),
            by_head_noun: HashMap::new(),
            hyphen_nouns: HashMap::new(),
            and_halves: HashMap::new(),
        };
        for line in raw.lines() {
            if line.starts_with('#') {
                continue;
            }
            let Some((heads, rest)) = line.split_once(" [") else {
                continue;
            };
            let Some((pinyin, senses)) = rest.split_once("] /") else {
                continue;
            };
            let proper = pinyin.starts_with(|c: char| c.is_ascii_uppercase());
            let Some((trad, simp)) = heads.split_once(' ') else {
                continue;
            };
            let head = text::normalize(simp);
            if !head.chars().all(text::is_cjk) || head.is_empty() {
                continue;
            }
            let mut phrases: Vec<Phrase> = Vec::new();
            for (n, sense) in senses.trim_end_matches('/').split('/').enumerate() {
                // A figurative sense after a literal one names something else than the thing:
                // 算盘 is an abacus, "(fig.) plan; scheme" found a sketch of a massacre.
                if n > 0 && is_figurative(sense) {
                    continue;
                }
                let verb = sense.trim_start().starts_with("to ");
                for p in phrases_of(sense, proper) {
                    phrases.push((
                        n.min(ONE_WAY_SENSE as usize - 1) as u16,
                        verb,
                        p.into_iter().map(Into::into).collect(),
                    ));
                }
                if proper
                    && let Some(p) = named_in_pinyin(sense, pinyin)
                    && !phrases
                        .iter()
                        .any(|(_, _, q)| q.iter().map(|t| &**t).eq(p.iter().map(String::as_str)))
                {
                    phrases.push((
                        n.min(ONE_WAY_SENSE as usize - 1) as u16,
                        verb,
                        p.into_iter().map(Into::into).collect(),
                    ));
                }
                if proper && n < SENSES_PER_WORD {
                    for p in named_before_in(sense) {
                        phrases.push((
                            ONE_WAY_SENSE,
                            verb,
                            p.into_iter().map(Into::into).collect(),
                        ));
                    }
                }
            }
            // A proper noun is kept with no translation (三星堆: "archaeological site of
            // Sanxingdui …" only describes it): [`Dictionary::is_proper`] still knows it.
            if phrases.is_empty() && !proper {
                continue;
            }
            let id = d.entries.len() as u32;
            if !proper && head.chars().count() >= 2 {
                for noun in senses
                    .trim_end_matches('/')
                    .split('/')
                    .take(SENSES_PER_WORD)
                    .filter_map(head_noun)
                {
                    let list = d.by_head_noun.entry(noun.into()).or_default();
                    if !list.contains(&id) {
                        list.push(id);
                    }
                }
            }
            // One character only: it names the thing itself (剑, "double-edged sword"), where a
            // compound names a kind of it (豇豆, "black-eyed bean", is no bean in general: as
            // `bean` it moved beans ahead of the peach-bloom porcelains of 豇豆红).
            if !proper && head.chars().count() == 1 {
                let mut nouns: Vec<Box<str>> = Vec::new();
                for noun in senses
                    .trim_end_matches('/')
                    .split('/')
                    .take(SENSES_PER_WORD)
                    .flat_map(hyphened_nouns)
                {
                    if !nouns.iter().any(|n| **n == noun) {
                        nouns.push(noun.into());
                    }
                }
                if !nouns.is_empty() {
                    d.hyphen_nouns.insert(id, nouns);
                }
            }
            if !proper {
                let halves: Vec<Vec<Box<str>>> = senses
                    .trim_end_matches('/')
                    .split('/')
                    .take(SENSES_PER_WORD)
                    .flat_map(and_halves)
                    .flat_map(|half| phrases_of(half, false))
                    .map(|p| p.into_iter().map(Into::into).collect())
                    .collect();
                if !halves.is_empty() {
                    d.and_halves.insert(id, halves);
                }
            }
            for (i, (_, _, p)) in phrases.iter().enumerate() {
                let list = d.by_token.entry(p[0].clone()).or_default();
                list.push((id, i.min(u16::MAX as usize) as u16));
            }
            let trad = text::normalize(trad);
            for key in [head.as_str(), trad.as_str()] {
                let list = d.by_head.entry(key.into()).or_default();
                if !list.contains(&id) {
                    list.push(id);
                }
            }
            d.entries.push(Entry {
                head: head.into(),
                phrases,
                proper,
            });
        }
        d
    }

    /// Entries in the dictionary.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether CC-CEDICT marks a (normalised) Chinese word a proper noun: a person, a place,
    /// a site or a work with a name of its own in English (三星堆, 齐白石, 唐朝).
    pub fn is_proper(&self, word: &str) -> bool {
        self.by_head
            .get(word)
            .is_some_and(|ids| ids.iter().any(|&id| self.entries[id as usize].proper))
    }

    /// Whether a (normalised) Chinese word is a place as the kind path reads one
    /// (`kinds::Unit::place`): a proper noun ([`Dictionary::is_proper`]) whose noun senses are
    /// each one word (中国 "China", 景德镇 "Jingdezhen"). A proper noun of several words names a
    /// thing (唐三彩 "Tang tricolor ware", 兵马俑 "Terracotta Army").
    pub fn is_place(&self, word: &str) -> bool {
        self.is_proper(word) && {
            let senses = self.noun_senses_of(word);
            !senses.is_empty() && senses.iter().all(|s| s.len() == 1)
        }
    }

    /// Whether CC-CEDICT writes the name the index tokens `words` spell in Chinese
    /// ([`Dictionary::heads_of_name`]). Its characters are then known, and a pinyin reading of
    /// the name ([`super::translit`]) is only a guess: "Qi Baishi" read as 气派 + 派十 (派 has a
    /// rare reading "bai") found "气派十分" in a record that never names him.
    pub fn writes_name(&self, words: &[&str]) -> bool {
        !self.heads_of_name(words).is_empty()
    }

    /// The Chinese (Simplified) of the name the index tokens `words` spell: the proper nouns one
    /// of whose phrases is exactly those tokens ("zhang", "daqian": 张大千; "qi", "baishi":
    /// 齐白石), in dictionary order.
    pub fn heads_of_name(&self, words: &[&str]) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for &(id, i) in words.iter().filter_map(|w| self.by_token.get(*w)).flatten() {
            let e = &self.entries[id as usize];
            let phrase = &e.phrases[i as usize].2;
            if e.proper
                && phrase.len() == words.len()
                && phrase.iter().all(|t| words.contains(&&**t))
                && !out.contains(&&*e.head)
            {
                out.push(&e.head);
            }
        }
        out
    }

    /// The phrases of a (normalised) Chinese word's first [`SENSES_PER_WORD`] senses, each
    /// entry of the word in turn.
    pub fn english_of(&self, word: &str) -> Vec<&[Box<str>]> {
        self.senses_of(word, true)
    }

    /// The looser English of a (normalised) Chinese word: the nouns its senses name after a
    /// hyphenated modifier ([`hyphened_nouns`]), each entry of the word in turn.
    pub fn loose_english_of(&self, word: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for n in self.of_entries(word, &self.hyphen_nouns) {
            if !out.contains(&&**n) {
                out.push(n);
            }
        }
        out
    }

    /// What `by_entry` holds for each entry of a (normalised) Chinese word, entry by entry.
    fn of_entries<'a, T>(
        &'a self,
        word: &str,
        by_entry: &'a HashMap<u32, Vec<T>>,
    ) -> impl Iterator<Item = &'a T> + 'a {
        self.by_head
            .get(word)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .flat_map(move |id| by_entry.get(id).map(Vec::as_slice).unwrap_or_default())
    }

    /// The things a (normalised) Chinese word's senses name two of, joined by "and": 书画
    /// ("calligraphy and painting") → `calligraphi` and `paint`, each as its index tokens. A
    /// word for two kinds means either (有没有书画？ asks for paintings and for calligraphy;
    /// the sense as one phrase found only records holding both words).
    pub fn halves_of(&self, word: &str) -> Vec<&[Box<str>]> {
        let mut out: Vec<&[Box<str>]> = Vec::new();
        for h in self.of_entries(word, &self.and_halves) {
            if !out.contains(&h.as_slice()) {
                out.push(h);
            }
        }
        out
    }

    /// The senses of a Chinese word that may name a kind of object: its noun senses
    /// ([`Dictionary::noun_senses_of`]), then each half of a sense naming two things
    /// ([`Dictionary::halves_of`]).
    pub fn kind_senses_of(&self, word: &str) -> Vec<&[Box<str>]> {
        let mut out = self.noun_senses_of(word);
        for h in self.halves_of(word) {
            if !out.contains(&h) {
                out.push(h);
            }
        }
        out
    }

    /// [`Dictionary::english_of`] without the senses of a verb ("to carve" for 雕塑): what a
    /// word may name as a thing, for the kinds of a browse question ([`super::kinds`]).
    pub fn noun_senses_of(&self, word: &str) -> Vec<&[Box<str>]> {
        self.senses_of(word, false)
    }

    fn senses_of(&self, word: &str, verbs: bool) -> Vec<&[Box<str>]> {
        let mut out: Vec<&[Box<str>]> = Vec::new();
        for &id in self
            .by_head
            .get(word)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            for (sense, verb, p) in &self.entries[id as usize].phrases {
                if (*sense as usize) < SENSES_PER_WORD && (verbs || !verb) && !out.contains(&&p[..])
                {
                    out.push(p);
                }
            }
        }
        out
    }

    /// Headwords (two or more characters) one of whose first [`SENSES_PER_WORD`] senses is a
    /// `token` of or from something ("rubbing of inscription" for `rub`: 拓本, 拓片), in
    /// dictionary order: the Chinese words for kinds of that thing.
    pub fn heads_whose_sense_is_a(&self, token: &str) -> Vec<&str> {
        self.by_head_noun
            .get(token)
            .map(|ids| {
                ids.iter()
                    .map(|&id| &*self.entries[id as usize].head)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The one-character headwords whose sense is the one index token `token` ("stone": 石),
    /// among their first [`CALQUE_SENSES`] senses, not a verb's, at most [`CALQUE_CHARACTERS`]
    /// in dictionary order.
    pub fn characters_glossed(&self, token: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for &(id, i) in self
            .by_token
            .get(token)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let e = &self.entries[id as usize];
            let (sense, verb, phrase) = &e.phrases[i as usize];
            if !e.proper
                && !verb
                && (*sense as usize) < CALQUE_SENSES
                && phrase.len() == 1
                && e.head.chars().count() == 1
                && !out.contains(&&*e.head)
            {
                out.push(&e.head);
                if out.len() == CALQUE_CHARACTERS {
                    break;
                }
            }
        }
        out
    }

    /// Phrases all of whose tokens are in `terms`, each with the headwords it is a sense of (in
    /// dictionary order, one-character headwords left out).
    pub fn chinese_of<'a>(&'a self, terms: &[&str]) -> Vec<(Vec<&'a str>, Vec<&'a str>)> {
        let mut out: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
        for first in terms {
            for &(id, i) in self
                .by_token
                .get(*first)
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let e = &self.entries[id as usize];
                let phrase = &e.phrases[i as usize].2;
                let phrase = if e.proper {
                    without_person_word(&e.head, without_era_word(phrase, terms), terms)
                } else {
                    phrase
                };
                if !phrase.iter().all(|t| terms.contains(&&**t)) || e.head.chars().count() < 2 {
                    continue;
                }
                let key: Vec<&str> = phrase.iter().map(|t| &**t).collect();
                match out.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, heads)) => {
                        if !heads.contains(&&*e.head) {
                            heads.push(&e.head);
                        }
                    }
                    None => out.push((key, vec![&e.head])),
                }
            }
        }
        out
    }
}

/// Index tokens of the words that say a name is of a period ("period", "dynasty", "dynasties",
/// "era").
const ERA_TOKENS: [&str; 3] = ["period", "dynasti", "era"];

/// A proper noun's phrase without its last token when that says it is a period and the question
/// (`terms`) does not give it ("the Warring States period" → `war state` for "Anything from the
/// Warring States?", "Three Kingdoms period" → `three kingdom`), two tokens left at least: a
/// one-word name is an English word too often (the Song, the Han, the Yuan). Only the English
/// → Chinese lookup reads it: read the other way, `three` and `kingdom` anywhere in a record
/// ("three feet … Old Kingdom") made 三国的文物 find a vessel.
fn without_era_word<'p>(phrase: &'p [Box<str>], terms: &[&str]) -> &'p [Box<str>] {
    match phrase.split_last() {
        Some((last, core))
            if core.len() >= 2 && ERA_TOKENS.contains(&&**last) && !terms.contains(&&**last) =>
        {
            core
        }
        _ => phrase,
    }
}

/// Index tokens of the words a demonym's sense ends in ("Japanese person", "Korean people").
const PERSON_TOKENS: [&str; 2] = ["person", "peopl"];

/// A demonym's phrase (a proper noun X人 whose sense is "Japanese person") without its last
/// token when that says it is a person and the question (`terms`) does not give it: "Japanese"
/// in "a Japanese sword" is the adjective of the country, which [`country_of_demonym`] then
/// writes.
fn without_person_word<'p>(head: &str, phrase: &'p [Box<str>], terms: &[&str]) -> &'p [Box<str>] {
    match phrase.split_last() {
        Some((last, core))
            if !core.is_empty()
                && head.ends_with('人')
                && PERSON_TOKENS.contains(&&**last)
                && !terms.contains(&&**last) =>
        {
            core
        }
        _ => phrase,
    }
}

/// The country a demonym headword names (美国人 → 美国, 日本人 → 日本): the headword without
/// its last 人 when the dictionary holds the rest as a proper noun of two or more characters. A
/// record says where a thing is from (美國華盛頓白宮, 韓國弘益大學), seldom who its people are,
/// so "an American letter" looks for 美国, not 美国人.
pub fn country_of_demonym<'a>(dict: &Dictionary, head: &'a str) -> Option<&'a str> {
    let country = head.strip_suffix('人')?;
    (country.chars().count() >= 2 && dict.is_proper(country)).then_some(country)
}

/// The forms of a person's name a record may give: the name as asked and, for a name in Latin
/// letters, the Chinese the dictionary writes it in ([`Dictionary::heads_of_name`]). "Who is
/// Zhang Daqian?" then finds, and quotes, the rubbing whose description gives
/// 張大千（1899-1983）.
pub fn name_forms(name: String) -> Vec<String> {
    if name.chars().any(text::is_cjk) {
        return vec![name];
    }
    let words = text::latin_tokens(&name);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let heads: Vec<String> = dictionary()
        .heads_of_name(&words)
        .into_iter()
        .map(str::to_string)
        .collect();
    std::iter::once(name).chain(heads).collect()
}

/// `spelt` ([`super::translit`]'s pinyin readings of the question's names) without the
/// readings of English-written names whose Chinese the dictionary gives
/// ([`Dictionary::writes_name`]): those cross by their translation ([`bridges_with`]) or not
/// at all.
pub fn drop_guessed_spellings(dict: &Dictionary, terms: &[QueryTerm], spelt: &mut Vec<Bridge>) {
    spelt.retain(|b| {
        let words: Vec<&str> = b.sources.iter().map(|&s| terms[s].text.as_str()).collect();
        words.iter().any(|w| w.chars().any(text::is_cjk)) || !dict.writes_name(&words)
    });
}

fn term_index(terms: &[QueryTerm], text: &str) -> Option<usize> {
    terms.iter().position(|t| t.text == text)
}

/// Document frequencies in `store`, those of the question's own exact terms from `w` (already
/// read), for [`bridges_with`] and the thesaurus's.
pub(super) fn collection_df<'a>(
    store: &'a CollectionStore,
    w: &'a super::embedded::terms::WeightedTerms,
) -> impl FnMut(&str) -> Result<f64, StoreError> + 'a {
    let known: HashMap<&str, f64> = w
        .terms
        .iter()
        .zip(&w.dfs)
        .filter(|((t, _), _)| !t.prefix)
        .map(|((t, _), df)| (t.text.as_str(), *df))
        .collect();
    move |t: &str| match known.get(t) {
        Some(d) => Ok(*d),
        None => store.doc_freq(t, false).map(|d| d as f64),
    }
}

/// The dictionary's bridges for a question of `terms` over a collection of `docs` exhibits, with
/// document frequencies from `df` (pure but for it; `embedded::bridges_by_meaning` calls it).
pub fn bridges_with(
    dict: &Dictionary,
    query: &str,
    terms: &[QueryTerm],
    docs: f64,
    df: &mut dyn FnMut(&str) -> Result<f64, StoreError>,
) -> Result<Vec<Bridge>, StoreError> {
    let mut out: Vec<Bridge> = Vec::new();
    let common = docs * COMMON_SHARE;
    let mut memo: HashMap<String, f64> = HashMap::new();
    let mut df_of = |t: &str| -> Result<f64, StoreError> {
        if let Some(d) = memo.get(t) {
            return Ok(*d);
        }
        let d = df(t)?;
        memo.insert(t.to_string(), d);
        Ok(d)
    };
    // Chinese words → English phrases.
    let norm = text::normalize(query);
    for run in text::runs(&norm) {
        let Run::Cjk(s) = run else { continue };
        let chars: Vec<char> = s.chars().collect();
        for i in 0..chars.len() {
            for n in 1..=MAX_WORD_CHARS.min(chars.len() - i) {
                let word: String = chars[i..i + n].iter().collect();
                let sources: Vec<usize> = if n == 1 {
                    term_index(terms, &word).into_iter().collect()
                } else {
                    let bigrams: Vec<Option<usize>> = chars[i..i + n]
                        .windows(2)
                        .map(|w| term_index(terms, &w.iter().collect::<String>()))
                        .collect();
                    if bigrams.iter().any(Option::is_none) {
                        break;
                    }
                    let mut s: Vec<usize> = bigrams.into_iter().flatten().collect();
                    s.extend(term_index(terms, &word));
                    s.sort_unstable();
                    s.dedup();
                    s
                };
                if sources.is_empty() {
                    continue;
                }
                let mut rare = false;
                for &s in &sources {
                    rare |= df_of(&terms[s].text)? <= common;
                }
                if !rare {
                    continue;
                }
                for phrase in dict.english_of(&word) {
                    let mut all_of = Vec::with_capacity(phrase.len());
                    let mut most = 0.0f64;
                    for t in phrase {
                        let d = df_of(t)?;
                        if d <= 0.0 {
                            all_of.clear();
                            break;
                        }
                        most = most.max(d);
                        all_of.push(vec![t.to_string()]);
                    }
                    if !all_of.is_empty() {
                        push(&mut out, all_of, &sources, most, BridgeKind::Translated);
                    }
                }
                // The noun after a hyphenated modifier (剑: "double-edged sword" → sword).
                for noun in dict.loose_english_of(&word) {
                    let d = df_of(noun)?;
                    if d > 0.0 {
                        push(
                            &mut out,
                            vec![vec![noun.to_string()]],
                            &sources,
                            d,
                            BridgeKind::Loose,
                        );
                    }
                }
            }
        }
    }
    // English phrases → Chinese headwords.
    let mut latin: Vec<&str> = Vec::new();
    for t in terms {
        if !t.prefix && !t.text.chars().any(text::is_cjk) && df_of(&t.text)? <= common {
            latin.push(&t.text);
        }
    }
    let translated = |out: &mut Vec<Bridge>,
                      heads: Vec<&str>,
                      sources: &[usize],
                      df_of: &mut dyn FnMut(&str) -> Result<f64, StoreError>|
     -> Result<(), StoreError> {
        let mut found: Vec<Held> = Vec::new();
        for head in heads.into_iter().take(HEADWORDS_TRIED) {
            let head = country_of_demonym(dict, head).unwrap_or(head);
            let chars: Vec<char> = head.chars().collect();
            let bigrams = chars.windows(2).map(|w| w.iter().collect::<String>());
            found.extend(held(bigrams, df_of)?);
        }
        // The translations this collection uses most.
        push_most_used(
            out,
            found,
            sources,
            HEADWORDS_PER_PHRASE,
            BridgeKind::Translated,
        );
        Ok(())
    };
    for (phrase, heads) in dict.chinese_of(&latin) {
        let sources: Vec<usize> = phrase.iter().filter_map(|t| term_index(terms, t)).collect();
        translated(&mut out, heads, &sources, &mut df_of)?;
    }
    // A hyphenated pair as the one word it is also written as ("paper-cut": papercutting, 剪纸).
    for (joined, a, b) in hyphen_joins(query) {
        let (Some(sa), Some(sb)) = (term_index(terms, &a), term_index(terms, &b)) else {
            continue;
        };
        for (_, heads) in dict.chinese_of(&[joined.as_str()]) {
            translated(&mut out, heads, &[sa, sb], &mut df_of)?;
        }
    }
    // English kinds → the Chinese words for kinds of them ("rubbing": 拓本, 拓片).
    for t in &latin {
        let mut found: Vec<Held> = Vec::new();
        for head in dict.heads_whose_sense_is_a(t).into_iter().take(KINDS_TRIED) {
            let chars: Vec<char> = head.chars().collect();
            let bigrams = chars.windows(2).map(|w| w.iter().collect::<String>());
            found.extend(held(bigrams, &mut df_of)?);
        }
        let sources: Vec<usize> = term_index(terms, t).into_iter().collect();
        push_most_used(
            &mut out,
            found,
            &sources,
            HEADWORDS_PER_PHRASE,
            BridgeKind::Loose,
        );
    }
    // Two English words as the two characters that gloss them ("war elephant": 战象).
    for (a, b) in adjacent_words(query) {
        let (Some(sa), Some(sb)) = (term_index(terms, &a), term_index(terms, &b)) else {
            continue;
        };
        let mut found: Vec<Held> = Vec::new();
        for ca in dict.characters_glossed(&a) {
            for cb in dict.characters_glossed(&b) {
                found.extend(held([format!("{ca}{cb}")], &mut df_of)?);
            }
        }
        push_most_used(
            &mut out,
            found,
            &[sa, sb],
            CALQUES_PER_PAIR,
            BridgeKind::Translated,
        );
    }
    Ok(out)
}

/// Pairs of index tokens of words next to each other in an English question, with nothing
/// between them but a space or a hyphen ("a war elephant" → `war`, `eleph`; "Jordan, showing"
/// is no pair, nor is a pair across a stop word).
fn adjacent_words(query: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut prev: Option<String> = None;
    for piece in query.split_whitespace() {
        let toks: Vec<String> = piece
            .split('-')
            .map(|w| {
                let t = text::latin_tokens(w);
                (t.len() == 1
                    && w.chars()
                        .all(|c| c.is_alphanumeric() || c.is_ascii_punctuation()))
                .then(|| t.into_iter().next())
                .flatten()
            })
            .collect::<Option<Vec<String>>>()
            .unwrap_or_default();
        let Some(first) = toks.first() else {
            prev = None;
            continue;
        };
        if let Some(p) = prev.take() {
            out.push((p, first.clone()));
        }
        for w in toks.windows(2) {
            out.push((w[0].clone(), w[1].clone()));
        }
        let ends_open = piece.chars().last().is_some_and(char::is_alphanumeric);
        prev = ends_open.then(|| toks[toks.len() - 1].clone());
    }
    out
}

/// The English words of a question written as two joined by a hyphen ("paper-cut"), each as
/// `(the index token of the two written as one word, the token of each)`: English writes many
/// compounds three ways (paper-cut, paper cut, papercut), and CC-CEDICT the closed one
/// ("papercutting" for 剪纸).
fn hyphen_joins(query: &str) -> Vec<(String, String, String)> {
    let alphabetic = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphabetic());
    let one = |w: &str| {
        let mut t = text::latin_tokens(w);
        (t.len() == 1).then(|| t.remove(0))
    };
    let mut out = Vec::new();
    for piece in query.split_whitespace() {
        let piece = piece.trim_matches(|c: char| !c.is_alphanumeric());
        let Some((a, b)) = piece.split_once('-') else {
            continue;
        };
        if !alphabetic(a) || !alphabetic(b) {
            continue;
        }
        if let (Some(j), Some(ta), Some(tb)) = (one(&format!("{a}{b}")), one(a), one(b)) {
            out.push((j, ta, tb));
        }
    }
    out
}

/// Tokens every one of which the collection holds, as a bridge's clauses, with their largest and
/// smallest document frequencies.
pub(super) type Held = (Vec<Vec<String>>, f64, f64);

/// `tokens` as a [`Held`] (each once), or None when the collection lacks one of them.
pub(super) fn held(
    tokens: impl IntoIterator<Item = String>,
    df: &mut dyn FnMut(&str) -> Result<f64, StoreError>,
) -> Result<Option<Held>, StoreError> {
    let mut all_of: Vec<Vec<String>> = Vec::new();
    let (mut most, mut least) = (0.0f64, f64::INFINITY);
    for t in tokens {
        let d = df(&t)?;
        if d <= 0.0 {
            return Ok(None);
        }
        most = most.max(d);
        least = least.min(d);
        if !all_of.iter().any(|c| c[0] == t) {
            all_of.push(vec![t]);
        }
    }
    Ok((!all_of.is_empty()).then_some((all_of, most, least)))
}

/// The `n` of `found` the collection uses most (by their rarest token) as bridges of `kind`
/// standing for `sources`.
pub(super) fn push_most_used(
    out: &mut Vec<Bridge>,
    mut found: Vec<Held>,
    sources: &[usize],
    n: usize,
    kind: BridgeKind,
) {
    found.sort_by(|a, b| b.2.total_cmp(&a.2));
    for (all_of, most, _) in found.into_iter().take(n) {
        push(out, all_of, sources, most, kind);
    }
}

fn push(
    out: &mut Vec<Bridge>,
    all_of: Vec<Vec<String>>,
    sources: &[usize],
    df: f64,
    kind: BridgeKind,
) {
    if let Some(old) = out.iter_mut().find(|o| o.all_of == all_of) {
        // A translation made loosely and strictly is a strict one.
        if old.kind == BridgeKind::Loose {
            old.kind = kind;
        }
        for s in sources {
            if !old.sources.contains(s) {
                old.sources.push(*s);
            }
        }
    } else {
        out.push(Bridge {
            all_of,
            sources: sources.to_vec(),
            df,
            kind,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# CC-CEDICT\n\
義和團 义和团 [Yi4 he2 tuan2] /the Righteous and Harmonious Fists/the Boxers (history)/\n\
葫蘆 葫芦 [hu2 lu5] /calabash or bottle gourd (Lagenaria siceraria)/hoist/(poker) full house/\n\
錶 表 [biao3] /watch (timepiece)/meter; gauge/\n\
旗 旗 [qi2] /banner/flag/CL:面[mian4]/\n\
旗幟 旗帜 [qi2 zhi4] /ensign/flag/\n\
戴 戴 [Dai4] /surname Dai/\n\
鋼鐵廠 钢铁厂 [gang1 tie3 chang3] /iron and steel works/steelworks/\n";

    /// Entries for calques (see the test that uses it).
    const CALQUES: &str = "# CC-CEDICT\n\
石 石 [shi2] /rock/stone/stone inscription/\n\
鼓 鼓 [gu3] /drum/CL:通[tong4],面[mian4]/to drum/\n\
鼗 鼗 [tao2] /hand drum used by peddlers/a kind of rattle/old/ancient/drum/\n\
敲 敲 [qiao1] /to hit/to strike/to tap/to drum/\n\
拓本 拓本 [ta4 ben3] /rubbing of inscription/\n\
拓片 拓片 [ta4 pian4] /rubbings from a tablet/\n\
劍 剑 [jian4] /double-edged sword/CL:口[kou3],把[ba3]/classifier for blows of a sword/\n\
磨 磨 [mo2] /to rub/to grind/to wear down/\n";

    #[test]
    fn a_sense_naming_two_things_gives_each_as_a_half() {
        assert_eq!(
            and_halves("calligraphy and painting"),
            ["calligraphy", "painting"]
        );
        assert_eq!(
            and_halves("pottery and porcelain"),
            ["pottery", "porcelain"]
        );
        for sense in [
            "to come and go",
            "painting",
            "the Three Kingdoms and the Jin dynasty period of history",
            "gold and silver (ware)",
        ] {
            assert!(and_halves(sense).is_empty(), "{sense}");
        }
        let d = Dictionary::parse("書畫 书画 [shu1 hua4] /painting and calligraphy/\n");
        let halves: Vec<Vec<&str>> = d
            .halves_of("书画")
            .iter()
            .map(|p| p.iter().map(|t| &**t).collect())
            .collect();
        assert_eq!(halves, [["paint"], ["calligraphi"]]);
        // The whole sense is still one phrase of the word.
        assert_eq!(d.noun_senses_of("书画").len(), 1);
        assert_eq!(d.kind_senses_of("书画").len(), 3);
    }

    #[test]
    fn the_museum_glossary_adds_what_cc_cedict_lacks_and_only_that() {
        let cedict = Dictionary::parse(&gunzip(CEDICT_GZ));
        let d = dictionary();
        for line in MUSEUM_GLOSSARY.lines().filter(|l| !l.starts_with('#')) {
            let simplified = line.split(' ').nth(1).unwrap();
            assert!(
                cedict.english_of(simplified).is_empty(),
                "{simplified} is in CC-CEDICT"
            );
            assert!(
                !d.english_of(simplified).is_empty(),
                "{simplified} not read"
            );
        }
        let mirror: Vec<Vec<&str>> = d
            .english_of("铜镜")
            .iter()
            .map(|p| p.iter().map(|t| &**t).collect())
            .collect();
        assert_eq!(mirror, [["bronz", "mirror"]]);
        // Not a proper noun: a kind of ware (its pinyin is written lower case).
        assert!(!d.is_proper("唐三彩"));
    }

    #[test]
    fn an_english_kind_bridges_loosely_to_the_chinese_words_for_kinds_of_it() {
        let d = Dictionary::parse(CALQUES);
        let q = "Is there a rubbing from Jordan?";
        let t = text::query_terms(q);
        let have = ["拓本", "拓片"];
        let mut df = |s: &str| Ok(if have.contains(&s) { 3.0 } else { 0.0 });
        let b = bridges_with(&d, q, &t, 100.0, &mut df).unwrap();
        let rub = term_index(&t, "rub").unwrap();
        for head in have {
            let kind = b.iter().find(|b| b.all_of == [[head]]).expect(head);
            assert_eq!(kind.sources, vec![rub]);
            // A kind of the thing, not the thing: it reorders the answer only.
            assert_eq!(kind.kind, BridgeKind::Loose);
        }
        // A verb's sense ("to rub") names no kind.
        assert!(b.iter().all(|b| b.all_of != [["磨"]]));
    }

    #[test]
    fn the_noun_after_a_hyphenated_modifier_is_a_loose_translation() {
        assert_eq!(
            hyphened_nouns("double-edged sword"),
            vec!["sword".to_string()]
        );
        // Of a one-character word only: a compound names a kind of the noun.
        let beans = Dictionary::parse("豇豆 豇豆 [jiang1 dou4] /cowpea/black-eyed bean/\n");
        assert!(beans.loose_english_of("豇豆").is_empty());
        assert!(hyphened_nouns("long sword").is_empty());
        assert!(hyphened_nouns("to double-check things").is_empty());
        let d = Dictionary::parse(CALQUES);
        assert_eq!(d.loose_english_of("剑"), vec!["sword"]);
        // The strict phrase stays as it was ("double-edged sword" needs all three tokens).
        assert!(d.english_of("剑").iter().any(|p| p.len() == 3));
        let q = "有没有剑？";
        let t = text::query_terms(q);
        let mut df = |s: &str| {
            Ok(if ["sword", "doubl", "edg"].contains(&s) {
                5.0
            } else {
                0.0
            })
        };
        let b = bridges_with(&d, q, &t, 100.0, &mut df).unwrap();
        let sword = b.iter().find(|b| b.all_of == [["sword"]]).expect("sword");
        assert_eq!(sword.kind, BridgeKind::Loose);
        assert_eq!(sword.sources, vec![term_index(&t, "剑").unwrap()]);
        let strict = b
            .iter()
            .find(|b| b.all_of.len() == 3)
            .expect("double-edged sword");
        assert_eq!(strict.kind, BridgeKind::Translated);
    }

    #[test]
    fn a_sense_of_a_thing_of_something_names_its_head_noun() {
        assert_eq!(head_noun("rubbing of inscription").as_deref(), Some("rub"));
        assert_eq!(head_noun("rubbings from a tablet").as_deref(), Some("rub"));
        assert_eq!(head_noun("to rub"), None);
        assert_eq!(head_noun("rubbing"), None);
        assert_eq!(head_noun("friction of"), None);
        assert_eq!(head_noun("long descriptions of things"), None);
        let d = dictionary();
        let heads = d.heads_whose_sense_is_a("rub");
        assert!(
            heads.contains(&"拓本") && heads.contains(&"拓片"),
            "{heads:?}"
        );
    }

    #[test]
    fn adjacent_english_words_pair_as_written() {
        let pairs = adjacent_words("Is there a war elephant, or stone drums from Jordan?");
        let want = [("war", "eleph"), ("stone", "drum")];
        assert_eq!(
            pairs,
            want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec()
        );
        // A hyphen joins; a comma or a stop word parts.
        let pairs = adjacent_words("a paper-cut artist, gift of Jordan");
        assert_eq!(pairs[0], ("paper".to_string(), "cut".to_string()));
        assert_eq!(pairs[1], ("cut".to_string(), "artist".to_string()));
        assert!(
            !pairs.iter().any(|(a, _)| a == "artist" || a == "gift"),
            "{pairs:?}"
        );
    }

    #[test]
    fn two_english_words_bridge_as_the_characters_that_gloss_them() {
        let d = Dictionary::parse(CALQUES);
        let q = "Do you have the Stone Drum inscriptions?";
        let t = text::query_terms(q);
        assert_eq!(d.characters_glossed("stone"), vec!["石"]);
        // 鼗's "drum" is a later sense than CALQUE_SENSES; 敲's is a verb's.
        assert_eq!(d.characters_glossed("drum"), vec!["鼓"]);
        let have = ["石鼓"];
        let mut df = |s: &str| Ok(if have.contains(&s) { 2.0 } else { 0.0 });
        let b = bridges_with(&d, q, &t, 100.0, &mut df).unwrap();
        let drum = b
            .iter()
            .find(|b| b.all_of == [["石鼓"]])
            .expect("stone drum");
        let mut src = vec![
            term_index(&t, "stone").unwrap(),
            term_index(&t, "drum").unwrap(),
        ];
        src.sort_unstable();
        let mut got = drum.sources.clone();
        got.sort_unstable();
        assert_eq!(got, src);
        // Only as written next to each other, and only a bigram the collection holds.
        for q in ["a drum of stone", "a stone, a drum"] {
            let t = text::query_terms(q);
            let b = bridges_with(&d, q, &t, 100.0, &mut df).unwrap();
            assert!(b.is_empty(), "{q}: {b:?}");
        }
        let mut none = |_: &str| Ok(0.0);
        let b = bridges_with(&d, q, &t, 100.0, &mut none).unwrap();
        assert!(b.is_empty(), "{b:?}");
    }

    #[test]
    fn a_demonym_bridges_to_its_country_and_a_hyphenated_pair_as_one_word() {
        let d = Dictionary::parse(
            "美國 美国 [Mei3 guo2] /United States/USA/US/\n\
             美國人 美国人 [Mei3 guo2 ren2] /American/American person/\n\
             日本 日本 [Ri4 ben3] /Japan/\n\
             日本人 日本人 [Ri4 ben3 ren2] /Japanese person or people/\n\
             老人 老人 [lao3 ren2] /old man or woman/\n\
             剪紙 剪纸 [jian3 zhi3] /papercutting (Chinese folk art)/\n",
        );
        let have = ["美国", "国人", "日本", "本人", "剪纸"];
        let mut df = |s: &str| Ok(if have.contains(&s) { 4.0 } else { 0.0 });
        let bridged = |q: &str, df: &mut dyn FnMut(&str) -> Result<f64, StoreError>| {
            let t = text::query_terms(q);
            bridges_with(&d, q, &t, 100.0, df)
                .unwrap()
                .into_iter()
                .map(|b| b.all_of.concat().join("+"))
                .collect::<Vec<_>>()
        };
        // The country, not its people: a record says 美國華盛頓白宮.
        assert_eq!(bridged("An American letter?", &mut df), vec!["美国"]);
        assert_eq!(bridged("A Japanese sword?", &mut df), vec!["日本"]);
        // Asked about the people, the person word is the question's own: still the country.
        assert_eq!(bridged("Japanese people?", &mut df), vec!["日本"]);
        // No proper noun before 人, no country.
        assert!(country_of_demonym(&d, "老人").is_none());
        assert_eq!(bridged("a paper-cut artist", &mut df), vec!["剪纸"]);
        assert!(bridged("paper, cut", &mut df).is_empty());
    }

    #[test]
    fn senses_become_phrases_of_index_tokens() {
        assert_eq!(
            sense_phrases("calabash or bottle gourd (Lagenaria siceraria)"),
            vec![
                vec!["calabash".to_string()],
                vec!["bottl".into(), "gourd".into()]
            ]
        );
        assert_eq!(
            sense_phrases("the Boxers (history)"),
            vec![vec!["boxer".to_string()]]
        );
        assert!(sense_phrases("surname Dai").is_empty());
        assert!(sense_phrases("CL:面[mian4]").is_empty());
        assert!(sense_phrases("variant of 旗[qi2]").is_empty());
        // A description is not a translation.
        assert!(sense_phrases("long descriptions of several different kinds of things").is_empty());
    }

    #[test]
    fn a_proper_noun_translates_as_its_name_not_its_description() {
        let d = Dictionary::parse(
            "齊白石 齐白石 [Qi2 Bai2 shi2] /Qi Baishi (1864-1957), famous Chinese painter/\n\
             唐朝 唐朝 [Tang2 chao2] /Tang or Tang dynasty (618-907)/\n\
             宋朝 宋朝 [Song4 chao2] /the Song dynasty (960-1279)/\n\
             三星堆 三星堆 [San1 xing1 dui1] /archaeological site of Sanxingdui outside Chengdu/\n\
             景德鎮 景德镇 [Jing3 de2 zhen4] /Jingdezhen prefecture-level city in Jiangxi province 江西, famous for porcelain/\n\
             畫家 画家 [hua4 jia1] /painter/\n",
        );
        let senses = |w: &str| -> Vec<Vec<String>> {
            d.english_of(w)
                .iter()
                .map(|p| p.iter().map(|t| t.to_string()).collect())
                .collect()
        };
        assert_eq!(senses("齐白石"), vec![vec!["qi", "baishi"]]);
        assert!(senses("唐朝").contains(&vec!["tang".into(), "dynasti".into()]));
        assert_eq!(senses("宋朝"), vec![vec!["song", "dynasti"]]);
        // Only a description: the name has no translation (it is searched as written), but
        // it is known as a name.
        assert!(senses("三星堆").is_empty());
        // A sense that opens with the name in pinyin and goes on to describe it: the name.
        assert_eq!(senses("景德镇"), vec![vec!["jingdezhen"]]);
        assert!(d.is_place("景德镇"));
        assert!(d.is_proper("三星堆") && d.is_proper("唐朝") && !d.is_proper("画家"));
        // A common noun's senses are lower case and all kept.
        assert_eq!(senses("画家"), vec![vec!["painter"]]);
        // Not when a piece of the name is lost as a stop word.
        let qing_an = Dictionary::parse(
            "慶安 庆安 [Qing4 an1] /Qing'an county in Suihua 綏化|绥化, Heilongjiang/\n",
        );
        assert!(
            !qing_an
                .english_of("庆安")
                .iter()
                .any(|p| p.len() == 1 && &*p[0] == "qing")
        );
    }

    #[test]
    fn a_figurative_sense_after_a_literal_one_is_no_translation() {
        let d = Dictionary::parse(
            "算盤 算盘 [suan4 pan2] /abacus/(fig.) plan; scheme/\n\
             一股清流 一股清流 [yi1 gu3 qing1 liu2] /(fig.) a breath of fresh air/\n",
        );
        let senses = |w: &str| -> Vec<Vec<String>> {
            d.english_of(w)
                .iter()
                .map(|p| p.iter().map(|t| t.to_string()).collect())
                .collect()
        };
        assert_eq!(senses("算盘"), vec![vec!["abacus"]]);
        // Figurative only: that is what it means.
        assert_eq!(senses("一股清流").len(), 1);
    }

    #[test]
    fn a_period_is_named_without_its_era_word_and_where_it_is() {
        let d = Dictionary::parse(
            "三國 三国 [San1 guo2] /Three Kingdoms period (220-280) in Chinese history/\n\
             戰國 战国 [Zhan4 guo2] /the Warring States period (475-221 BC)/\n\
             北宋 北宋 [Bei3 Song4] /the Northern Song Dynasty (960-1127)/\n\
             宋朝 宋朝 [Song4 chao2] /the Song dynasty (960-1279)/\n\
             時期 时期 [shi2 qi1] /period/phase/\n",
        );
        // Where it is named is not part of its name, and Chinese → English reads neither.
        let senses =
            |w: &str| -> Vec<String> { d.english_of(w).iter().map(|p| p.join(" ")).collect() };
        assert!(senses("三国").is_empty());
        assert_eq!(senses("战国"), ["war state period"]);
        assert_eq!(
            ERA_TOKENS.to_vec(),
            text::latin_tokens("period dynasty era")
        );
        assert_eq!(text::latin_tokens("dynasties"), ["dynasti"]);
        // English → Chinese: the era word may be left out.
        let heads = |terms: &[&str]| -> Vec<String> {
            d.chinese_of(terms)
                .into_iter()
                .filter(|(p, _)| p.len() == terms.len())
                .flat_map(|(_, h)| h.into_iter().map(str::to_string))
                .collect()
        };
        assert_eq!(heads(&["three", "kingdom"]), ["三国"]);
        assert_eq!(heads(&["war", "state"]), ["战国"]);
        assert_eq!(heads(&["war", "state", "period"]), ["战国"]);
        assert_eq!(heads(&["northern", "song"]), ["北宋"]);
        // A one-word name left is an English word too often ("the Song"); a common noun is
        // no period's name.
        assert!(heads(&["song"]).is_empty());
        assert_eq!(heads(&["period"]), ["时期"]);
    }

    #[test]
    fn a_name_in_latin_letters_is_written_as_the_dictionary_writes_it() {
        let d = Dictionary::parse(
            "張大千 张大千 [Zhang1 Da4 qian1] /Chang Dai-chien or Zhang Daqian (1899-1983), one of the greatest Chinese artists of the 20th century/\n\
             齊白石 齐白石 [Qi2 Bai2 shi2] /Qi Baishi (1864-1957), famous Chinese painter/\n\
             白石 白石 [bai2 shi2] /white stone/\n",
        );
        assert_eq!(d.heads_of_name(&["zhang", "daqian"]), vec!["张大千"]);
        assert_eq!(d.heads_of_name(&["daqian", "zhang"]), vec!["张大千"]);
        assert_eq!(d.heads_of_name(&["chang", "dai", "chien"]), vec!["张大千"]);
        assert!(d.writes_name(&["qi", "baishi"]));
        // Part of a name, more than a name, or a common noun's sense: no name.
        assert!(!d.writes_name(&["baishi"]));
        assert!(!d.writes_name(&["qi", "baishi", "shrimp"]));
        assert!(!d.writes_name(&["white", "stone"]));
        // A title of address is not part of the name.
        let d2 = Dictionary::parse(
            "孫中山 孙中山 [Sun1 Zhong1 shan1] /Dr Sun Yat-sen (1866-1925), first president of the Republic of China/\n",
        );
        assert_eq!(d2.heads_of_name(&["sun", "yat", "sen"]), vec!["孙中山"]);
        // A pinyin reading of a name the dictionary writes is dropped; a name it does not
        // write ("Ouyang Geng") and a Chinese question's readings are kept.
        let spelt = |sources: Vec<usize>| Bridge {
            all_of: vec![vec!["气派".to_string()]],
            sources,
            df: 1.0,
            kind: BridgeKind::Spelt,
        };
        let t = text::query_terms("Who is Qi Baishi, and Ouyang Geng? 康熙");
        let at = |w: &str| term_index(&t, w).unwrap();
        let mut b = vec![
            spelt(vec![at("qi"), at("baishi")]),
            spelt(vec![at("ouyang"), at("geng")]),
            spelt(vec![at("康熙")]),
        ];
        drop_guessed_spellings(&d, &t, &mut b);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(b[0].sources, vec![at("ouyang"), at("geng")]);
    }

    #[test]
    fn the_compiled_in_dictionary_parses() {
        let d = dictionary();
        assert!(d.len() > 100_000, "{}", d.len());
        let gourd = d.english_of("葫芦");
        assert!(
            gourd.iter().any(|p| p.iter().any(|t| &**t == "gourd")),
            "{gourd:?}"
        );
        // A Traditional headword is looked up as the index writes it (normalised).
        let boxers = d.english_of(&text::normalize("義和團"));
        assert!(
            boxers.iter().any(|p| p.len() == 1 && &*p[0] == "boxer"),
            "{boxers:?}"
        );
        // A verb's sense is a translation but names no thing: 雕塑 "to carve".
        let carve = vec!["carv".into()].into_boxed_slice();
        assert!(d.english_of("雕塑").contains(&&carve[..]));
        let things = d.noun_senses_of("雕塑");
        assert!(!things.contains(&&carve[..]), "{things:?}");
        assert!(
            things.iter().any(|p| p.iter().any(|t| &**t == "sculptur")),
            "{things:?}"
        );
        // The supplement is read, and so is CC-CEDICT's last line before it.
        let america = d.chinese_of(&["america"]);
        assert!(
            america.iter().any(|(_, heads)| heads.contains(&"美国")),
            "{america:?}"
        );
        assert!(!d.english_of("美国").is_empty());
        let noodles = d.english_of(&text::normalize("𰻝𰻝面"));
        assert!(
            noodles.iter().any(|p| p.iter().any(|t| &**t == "noodl")),
            "{noodles:?}"
        );
    }

    #[test]
    fn a_chinese_question_bridges_to_english_senses_the_collection_holds() {
        let d = Dictionary::parse(SAMPLE);
        let q = "那个葫芦做的酒瓶";
        let t = text::query_terms(q);
        let have = ["gourd", "bottl", "calabash"];
        let mut df = |s: &str| Ok(if have.contains(&s) { 2.0 } else { 0.0 });
        let b = bridges_with(&d, q, &t, 100.0, &mut df).unwrap();
        let src = term_index(&t, "葫芦").unwrap();
        let gourd = b
            .iter()
            .find(|b| b.all_of == [["bottl"], ["gourd"]])
            .expect("bottle gourd");
        assert_eq!(gourd.sources, vec![src]);
        assert!(b.iter().any(|b| b.all_of == [["calabash"]]));
        // "hoist" is not in the collection: no bridge.
        assert!(!b.iter().any(|b| b.all_of == [["hoist"]]));
    }

    #[test]
    fn an_english_question_bridges_to_chinese_headwords_as_bigrams() {
        let d = Dictionary::parse(SAMPLE);
        let q = "Do you have a flag carried by the Boxers?";
        let t = text::query_terms(q);
        let have = ["义和", "和团", "旗帜"];
        let mut df = |s: &str| Ok(if have.contains(&s) { 1.0 } else { 0.0 });
        let b = bridges_with(&d, q, &t, 100.0, &mut df).unwrap();
        let boxers = b
            .iter()
            .find(|b| b.all_of == [["义和"], ["和团"]])
            .expect("boxers");
        assert_eq!(boxers.sources, vec![term_index(&t, "boxer").unwrap()]);
        // "flag": 旗帜 (two characters), never the one-character 旗.
        assert!(b.iter().any(|b| b.all_of == [["旗帜"]]), "{b:?}");
        assert_eq!(b.len(), 2, "{b:?}");
        // A term in over COMMON_SHARE of the collection is not translated: "flag" in 50 of 100.
        let mut common = |s: &str| {
            Ok(match s {
                "flag" => 50.0,
                _ if have.contains(&s) => 1.0,
                _ => 0.0,
            })
        };
        let b = bridges_with(&d, q, &t, 100.0, &mut common).unwrap();
        assert!(!b.iter().any(|b| b.all_of == [["旗帜"]]), "{b:?}");
        assert!(b.iter().any(|b| b.all_of == [["义和"], ["和团"]]), "{b:?}");
    }
}

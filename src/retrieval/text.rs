//! Text analysis for the embedded index, the same at index and at query time. Pure (no I/O).
//!
//! 1. [`normalize`]: NFKC (full-width → ASCII), Traditional → Simplified Chinese with OpenCC's
//!    tables (`ferrous-opencc`, pure Rust), Latin diacritics removed, lower case.
//! 2. Split into runs of CJK characters and runs of letters/digits; everything else separates.
//! 3. Latin runs: English stop words and question words dropped, Snowball (Porter2) stem.
//! 4. CJK runs: every character bigram (robust to segmentation disagreements and names jieba does
//!    not know) plus jieba's words of three or more characters; a one-character run stays a
//!    unigram. For a query, jieba segments the run first so that function and question words
//!    (的, 是谁, 什么, 有没有, ...) are removed before bigrams are formed.
//!
//! The resulting tokens contain only letters and digits, so the index (which splits at white
//! space, `store::lexical`) keeps each one whole, as the `unicode61` tokenizer of the FTS5
//! index it replaced did.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;

use super::openings;
use crate::util::ShortStr;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Bumped whenever the analysis below changes: the index is then rebuilt from the stored rows.
pub const ANALYZER_VERSION: &str = "8";

/// Most terms one query contributes (a very long question is cut, never an error).
pub const MAX_QUERY_TERMS: usize = 48;

fn t2s() -> Option<&'static ferrous_opencc::OpenCC> {
    static T2S: OnceLock<Option<ferrous_opencc::OpenCC>> = OnceLock::new();
    T2S.get_or_init(|| {
        match ferrous_opencc::OpenCC::from_config(ferrous_opencc::config::BuiltinConfig::T2s) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::error!(error = %e, "OpenCC t2s tables failed to load; Chinese script is not normalised");
                None
            }
        }
    })
    .as_ref()
}

/// OpenCC's Traditional → Simplified conversion as `t2s().convert` does it, on the same two
/// tables (`opencc/TSPhrases.txt`, `opencc/TSCharacters.txt`: the files `ferrous-opencc`
/// 0.4.0 compiles into itself, Apache-2.0, from https://github.com/BYVoid/OpenCC), without
/// its cost: the crate walks two FSTs at every character and allocates every match's values
/// (~20 % of the ingest's analysis). Its algorithm, kept: at each position the longest key of
/// either table that starts there (a phrase key has two or more characters, a character key
/// one, so a phrase that matches wins), replaced by its first value; otherwise the character
/// is kept.
struct FastT2s {
    chars: rustc_hash::FxHashMap<char, &'static str>,
    /// Phrases by their first character, longest key first.
    phrases: rustc_hash::FxHashMap<char, Vec<(&'static str, &'static str)>>,
}

impl FastT2s {
    /// The tables as the crate's compiler reads them: `#` lines and blank lines skipped, a
    /// line is `key<TAB>values` with values separated by single spaces (a line of another
    /// shape, or with an empty value, is skipped); the first value is the conversion.
    fn table(text: &'static str) -> impl Iterator<Item = (&'static str, &'static str)> {
        text.lines().filter_map(|line| {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                return None;
            }
            let mut parts = line.split('\t');
            let (key, values) = (parts.next()?, parts.next()?);
            if parts.next().is_some() || key.is_empty() || values.split(' ').any(str::is_empty) {
                return None;
            }
            Some((key, values.split(' ').next()?))
        })
    }

    fn new() -> FastT2s {
        let mut chars = rustc_hash::FxHashMap::default();
        for (k, v) in Self::table(include_str!("opencc/TSCharacters.txt")) {
            let mut cs = k.chars();
            if let (Some(c), None) = (cs.next(), cs.next()) {
                chars.insert(c, v);
            }
        }
        let mut phrases: rustc_hash::FxHashMap<char, Vec<(&str, &str)>> = Default::default();
        for (k, v) in Self::table(include_str!("opencc/TSPhrases.txt")) {
            if let Some(c) = k.chars().next() {
                phrases.entry(c).or_default().push((k, v));
            }
        }
        for list in phrases.values_mut() {
            list.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        }
        FastT2s { chars, phrases }
    }

    fn convert(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while let Some(c) = text[i..].chars().next() {
            let rest = &text[i..];
            if let Some((k, v)) = self
                .phrases
                .get(&c)
                .and_then(|list| list.iter().find(|(k, _)| rest.starts_with(k)))
            {
                out.push_str(v);
                i += k.len();
                continue;
            }
            match self.chars.get(&c) {
                Some(v) => out.push_str(v),
                None => out.push(c),
            }
            i += c.len_utf8();
        }
        out
    }
}

/// Traditional → Simplified for [`normalize`]: [`FastT2s`] once it has converted every key of
/// both tables exactly as the crate does (checked when first used; if any differs, e.g. after
/// a crate upgrade changed its tables, the crate itself converts, with an error in the log).
fn t2s_convert(text: &str) -> Option<String> {
    static FAST: OnceLock<Option<FastT2s>> = OnceLock::new();
    let crate_t2s = t2s()?;
    let fast = FAST.get_or_init(|| {
        let fast = FastT2s::new();
        let keys: Vec<&str> = FastT2s::table(include_str!("opencc/TSCharacters.txt"))
            .chain(FastT2s::table(include_str!("opencc/TSPhrases.txt")))
            .map(|(k, _)| k)
            .collect();
        // Each key alone, and all of them in one text (phrases next to characters).
        let all = keys.concat();
        match keys
            .into_iter()
            .chain(std::iter::once(all.as_str()))
            .find(|k| fast.convert(k) != crate_t2s.convert(k))
        {
            None => Some(fast),
            Some(k) => {
                tracing::error!(key = %k, "OpenCC's t2s tables differ from the copy in src/retrieval/opencc; converting with the crate (slower)");
                None
            }
        }
    });
    Some(match fast {
        Some(f) => f.convert(text),
        None => crate_t2s.convert(text),
    })
}

fn s2t() -> Option<&'static ferrous_opencc::OpenCC> {
    static S2T: OnceLock<Option<ferrous_opencc::OpenCC>> = OnceLock::new();
    S2T.get_or_init(|| {
        match ferrous_opencc::OpenCC::from_config(ferrous_opencc::config::BuiltinConfig::S2t) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::error!(error = %e, "OpenCC s2t tables failed to load; answers are not converted to Traditional");
                None
            }
        }
    })
    .as_ref()
}

/// The script of a Chinese text, for answering in the visitor's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    Simplified,
    Traditional,
    /// No Chinese characters, or only characters both scripts share (鼎, 山水).
    Neutral,
}

/// Which script a text is written in: Traditional when converting it to Simplified changes it
/// and converting it to Traditional does not (and the reverse); a text with both kinds of
/// characters counts by the larger number of changed characters.
pub fn script_of(text: &str) -> Script {
    if !text.chars().any(is_cjk) {
        return Script::Neutral;
    }
    let changed = |converted: String| {
        converted
            .chars()
            .zip(text.chars())
            .filter(|(a, b)| a != b)
            .count()
    };
    let trad = t2s().map_or(0, |c| changed(c.convert(text)));
    let simp = s2t().map_or(0, |c| changed(c.convert(text)));
    match trad.cmp(&simp) {
        std::cmp::Ordering::Greater => Script::Traditional,
        std::cmp::Ordering::Less => Script::Simplified,
        std::cmp::Ordering::Equal => Script::Neutral,
    }
}

/// The text in Simplified Chinese (OpenCC t2s; nothing else changes).
pub fn to_simplified(text: &str) -> String {
    match t2s() {
        Some(c) if text.chars().any(is_cjk) => c.convert(text),
        _ => text.to_string(),
    }
}

/// The text in Traditional Chinese (OpenCC s2t; nothing else changes).
pub fn to_traditional(text: &str) -> String {
    match s2t() {
        Some(c) if text.chars().any(is_cjk) => c.convert(text),
        _ => text.to_string(),
    }
}

/// `text` written in `script`: converted only when it is in the other one, so a record already
/// in the visitor's script is quoted exactly as stored.
pub fn in_script(text: &str, script: Script) -> String {
    match (script, script_of(text)) {
        (Script::Simplified, Script::Traditional) => to_simplified(text),
        (Script::Traditional, Script::Simplified) => to_traditional(text),
        _ => text.to_string(),
    }
}

fn jieba() -> &'static jieba_rs::Jieba {
    static JIEBA: OnceLock<jieba_rs::Jieba> = OnceLock::new();
    JIEBA.get_or_init(jieba_rs::Jieba::new)
}

fn stemmer() -> &'static rust_stemmers::Stemmer {
    static STEM: OnceLock<rust_stemmers::Stemmer> = OnceLock::new();
    STEM.get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English))
}

/// Loads the dictionaries now (about a second in a debug build) instead of on the first query.
pub fn warm_up() {
    let _ = t2s_convert("");
    let _ = jieba();
    let _ = stemmer();
}

/// CJK ideographs (with extensions and compatibility forms), kana and hangul.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3007 | 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF
        | 0xF900..=0xFAFF | 0x20000..=0x323AF)
}

/// Canonical form for matching: NFKC, Traditional → Simplified, no Latin diacritics, lower case.
pub fn normalize(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let nfkc = nfkc(text);
    let simplified = if nfkc.chars().any(is_cjk) {
        t2s_convert(&nfkc).unwrap_or(nfkc)
    } else {
        nfkc
    };
    let folded: String = if simplified
        .chars()
        .any(|c| !c.is_ascii() && !is_cjk(c) && c.is_alphabetic())
    {
        strip_marks(&simplified)
    } else {
        simplified
    };
    fold_variants(lowercase(folded))
}

/// `text.nfd().filter(|c| !is_combining_mark(*c)).nfc()` (Latin diacritics off), with only
/// the runs of non-ASCII characters going through the normaliser and ASCII copied (most of an
/// English record that has an "é" somewhere). The same result: NFD may be cut before any
/// ASCII character (a starter without decomposition), and once the marks are gone NFC
/// composes nothing across an ASCII character (it is never the second of a pair, and the
/// first only of pairs whose second is a mark). The test
/// `strip_marks_is_the_whole_text_normalised_at_once` compares both.
fn strip_marks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let ascii = rest
            .bytes()
            .position(|b| !b.is_ascii())
            .unwrap_or(rest.len());
        out.push_str(&rest[..ascii]);
        rest = &rest[ascii..];
        let other = rest
            .bytes()
            .position(|b| b.is_ascii())
            .unwrap_or(rest.len());
        out.extend(rest[..other].nfd().filter(|c| !is_combining_mark(*c)).nfc());
        rest = &rest[other..];
    }
    out
}

/// `text.to_lowercase()` without a case-table lookup for CJK characters (they have no case:
/// most of a Chinese record). A text with a capital sigma goes to the standard library, whose
/// final-sigma rule looks at the neighbours.
fn lowercase(text: String) -> String {
    if text.contains('Σ') {
        return text.to_lowercase();
    }
    let changes = |c: char| {
        if c.is_ascii() {
            c.is_ascii_uppercase()
        } else {
            !is_cjk(c) && c.to_lowercase().ne(std::iter::once(c))
        }
    };
    if !text.chars().any(changes) {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else if is_cjk(c) {
            out.push(c);
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// Whether NFKC leaves `c` alone in any context and nothing before it can combine with it: ASCII
/// and the CJK Unified Ideographs (with extension A) have no decomposition, combining class 0
/// and never compose with a preceding character (NFKC_QC = Yes, not Maybe).
fn nfkc_stable(c: char) -> bool {
    c.is_ascii() || matches!(c as u32, 0x3400..=0x4DBF | 0x4E00..=0x9FFF)
}

/// `text.nfkc()`, but only the pieces that may change go through the normaliser: the text is
/// cut before every stable character ([`nfkc_stable`]), where normalisation of the parts
/// equals normalisation of the whole (UAX #15, stable code points), and a piece that is a lone
/// stable character is copied. Most of a record's text (ASCII words, CJK ideographs) is then
/// copied; only full-width punctuation, accents and the like with the character before them
/// are normalised (the decomposition lookups were ~17 % of the analysis at ingest).
fn nfkc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // text[..copied] is in `out`; `piece` starts at the last stable character (or 0); `dirty`:
    // a character that may change follows it.
    let (mut copied, mut piece, mut dirty) = (0, 0, false);
    for (i, c) in text.char_indices() {
        if nfkc_stable(c) {
            if dirty {
                out.extend(text[piece..i].nfkc());
                copied = i;
                dirty = false;
            }
            piece = i;
        } else if !dirty {
            out.push_str(&text[copied..piece]);
            dirty = true;
        }
    }
    if dirty {
        out.extend(text[piece..].nfkc());
    } else {
        out.push_str(&text[copied..]);
    }
    out
}

/// Variant characters OpenCC's Traditional → Simplified tables leave apart, folded to one form
/// (the records themselves mix them: 溥心畬/溥心畲, 衮/袞, 凌鴻勳/淩鴻勛).
const VARIANTS: &[(char, char)] = &[
    ('畬', '畲'),
    ('袞', '衮'),
    ('勛', '勋'),
    ('勳', '勋'),
    ('淩', '凌'),
];

fn variant_of(c: char) -> Option<char> {
    VARIANTS.iter().find(|(v, _)| *v == c).map(|(_, f)| *f)
}

fn fold_variants(s: String) -> String {
    // Every variant is a CJK ideograph: ASCII and most other characters are passed over
    // without the table.
    if !s
        .chars()
        .any(|c| c >= '\u{3400}' && variant_of(c).is_some())
    {
        return s;
    }
    s.chars().map(|c| variant_of(c).unwrap_or(c)).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run<'a> {
    Cjk(&'a str),
    Word(&'a str),
}

/// Splits normalised text into CJK runs and letter/digit runs, as they are taken (the
/// analysis of a record never holds them all: growing a vector of them was the ingest's
/// most frequent allocation).
pub fn runs(text: &str) -> Runs<'_> {
    Runs { text, pos: 0 }
}

/// The iterator of [`runs`].
pub struct Runs<'a> {
    text: &'a str,
    pos: usize,
}

#[derive(PartialEq, Clone, Copy)]
enum RunKind {
    Cjk,
    Word,
    Sep,
}

impl Runs<'_> {
    /// The kind and length of the character at byte `i`. ASCII (most of any text) is told
    /// apart by its byte, without decoding a character.
    fn kind_at(&self, i: usize) -> (RunKind, usize) {
        match self.text.as_bytes()[i] {
            b if b.is_ascii_alphanumeric() => (RunKind::Word, 1),
            b if b.is_ascii() => (RunKind::Sep, 1),
            _ => {
                let c = self.text[i..]
                    .chars()
                    .next()
                    .expect("i is at a character boundary");
                let k = if is_cjk(c) {
                    RunKind::Cjk
                } else if c.is_alphanumeric() {
                    RunKind::Word
                } else {
                    RunKind::Sep
                };
                (k, c.len_utf8())
            }
        }
    }
}

impl<'a> Iterator for Runs<'a> {
    type Item = Run<'a>;

    fn next(&mut self) -> Option<Run<'a>> {
        let len = self.text.len();
        // Skip separators.
        let kind = loop {
            if self.pos >= len {
                return None;
            }
            let (k, n) = self.kind_at(self.pos);
            if k != RunKind::Sep {
                break k;
            }
            self.pos += n;
        };
        let start = self.pos;
        while self.pos < len {
            let (k, n) = self.kind_at(self.pos);
            if k != kind {
                break;
            }
            self.pos += n;
        }
        let run = &self.text[start..self.pos];
        Some(match kind {
            RunKind::Cjk => Run::Cjk(run),
            _ => Run::Word(run),
        })
    }
}

/// English stop words plus the words visitors wrap a question in.
const EN_STOP: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "anything",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "either",
    "else",
    "ever",
    "every",
    "few",
    "for",
    "from",
    "further",
    "get",
    "got",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "kind",
    "know",
    "let",
    "like",
    "many",
    "me",
    "might",
    "more",
    "most",
    "much",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "please",
    "really",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "something",
    "such",
    "tell",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "us",
    "very",
    "was",
    "we",
    "were",
    "what",
    "whats",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "museum",
    "collection",
    "exhibit",
    "exhibits",
];

/// Chinese (Simplified, after normalisation) function words and question words.
const ZH_STOP: &[&str] = &[
    "的",
    "了",
    "吗",
    "呢",
    "吧",
    "啊",
    "呀",
    "么",
    "嘛",
    "是",
    "在",
    "有",
    "和",
    "与",
    "跟",
    "及",
    "或",
    "也",
    "都",
    "就",
    "还",
    "又",
    "把",
    "被",
    "给",
    "对",
    "从",
    "向",
    "这",
    "那",
    "这个",
    "那个",
    "这件",
    "那件",
    "这幅",
    "那幅",
    "这张",
    "那张",
    "这位",
    "那位",
    "这些",
    "那些",
    "这里",
    "那里",
    "这儿",
    "那儿",
    "哪",
    "哪个",
    "哪些",
    "哪一",
    "哪里",
    "哪儿",
    "哪位",
    "什么",
    "啥",
    "谁",
    "是谁",
    "怎么",
    "怎样",
    "怎么样",
    "为什么",
    "为何",
    "如何",
    "多少",
    "几",
    "几个",
    "你",
    "你们",
    "我",
    "我们",
    "他",
    "她",
    "它",
    "他们",
    "她们",
    "有没有",
    "是不是",
    "是否",
    "哪一年",
    "哪年",
    "哪一个",
    "哪几个",
    "一共",
    "总共",
    "讲的是",
    "讲",
    // What a thing is for (是干什么用的, 有什么用, 用来做什么): the question's frame.
    "干什么",
    "做什么",
    "干嘛",
    "干啥",
    "做啥",
    "用来",
    "用",
    "那种",
    "这种",
    "当初",
    "到底是",
    "没有",
    "可以",
    "能",
    "能够",
    "会",
    "请",
    "请问",
    "一下",
    "一个",
    "一件",
    "一幅",
    "一张",
    "一位",
    "到底",
    "究竟",
    "着",
    "过",
    "得",
    "地",
    "之",
    "其",
    "所",
    "而",
    "以",
    "于",
    "个",
    "吗？",
    "知道",
    "告诉",
    "介绍",
    // Asking to be told about a topic, as 介绍 is (讲讲唐代的文物 was refused for 讲讲).
    "讲讲",
    "讲一讲",
    "说说",
    "说一说",
    "聊聊",
    "谈谈",
    "一下",
    "想",
    "问",
    "关于",
    "东西",
    "博物馆",
    "展品",
    // Exhibits in general, as "exhibit" and "collection" are in English ([`EXHIBIT_TAILS`]).
    "作品",
    "文物",
    "藏品",
    // Whether or where a thing is shown (在这里展出吗, 有没有陈列): the question's frame,
    // as "exhibit" is in English; a record says it of anything.
    "展出",
    "展示",
    "陈列",
    "展览",
    // A name's frame (后母戊鼎（以前叫司母戊鼎）, 为什么又叫「猎碣」): the names count, not the
    // words that say one is a name (以前 matched a Greek cross "previously attributed").
    "以前",
    "叫",
    "叫做",
    "又叫",
    "也叫",
    "上",
    "里",
    "中",
];

fn stop_sets() -> &'static (HashSet<&'static str>, HashSet<&'static str>) {
    static SETS: OnceLock<(HashSet<&'static str>, HashSet<&'static str>)> = OnceLock::new();
    SETS.get_or_init(|| {
        (
            EN_STOP.iter().copied().collect(),
            ZH_STOP.iter().copied().collect(),
        )
    })
}

/// A question (normalised) with its English contractions unfolded into the words they stand
/// for, as far as the search cares: "we're", "I've", "they'll", "I'd" lose their tail ("re",
/// "ve" and "ll" were content terms: "We're interested in armor" searched `re` and made
/// "interested" content, as it is after a content word), and a word in "n't" ("don't",
/// "isn't", "can't") is "not", a stop word (it searched `don`, `isn`). A possessive or "is"
/// ("'s") and the rest of the text are kept. The index is not changed: its records are not
/// questions, and a tail there is a term no question now asks for.
pub fn unfold_contractions(norm: &str) -> Cow<'_, str> {
    const TAILS: &[&str] = &["re", "ve", "ll", "d", "m"];
    if !norm.contains(['\'', '’']) {
        return Cow::Borrowed(norm);
    }
    let mut out = String::with_capacity(norm.len());
    let mut rest = norm;
    while let Some(i) = rest.find(['\'', '’']) {
        let apos = rest[i..].chars().next().map_or(1, char::len_utf8);
        let (head, after) = (&rest[..i], &rest[i + apos..]);
        let tail_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let tail = &after[..tail_len];
        let word_start = head
            .rfind(|c: char| !c.is_ascii_alphabetic())
            .map_or(0, |j| {
                j + head[j..].chars().next().map_or(1, char::len_utf8)
            });
        let word = &head[word_start..];
        if !word.is_empty() && tail == "t" && word.ends_with('n') {
            out.push_str(&head[..word_start]);
            out.push_str("not");
            rest = &after[tail_len..];
        } else if !word.is_empty() && TAILS.contains(&tail) {
            out.push_str(head);
            rest = &after[tail_len..];
        } else {
            out.push_str(&rest[..i + apos]);
            rest = after;
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The index term of one Latin/digit word, or None for stop words and single letters.
fn word_token(w: &str) -> Option<String> {
    if stop_sets().0.contains(w) {
        return None;
    }
    let mut chars = w.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && !c.is_numeric()
    {
        return None;
    }
    if w.chars().any(|c| c.is_ascii_digit()) {
        return Some(w.to_string());
    }
    if let Some(us) = american_spelling(w) {
        return Some(stemmer().stem(&us).into_owned());
    }
    Some(stemmer().stem(w).into_owned())
}

/// British spellings folded to the American ones the stemmer would otherwise keep apart, at the
/// start of a word (so their inflections follow: "armoured", "colours"): a visitor who writes
/// "knights' armour" or "jewellery" finds the Walters' "armor" and "jewelry" records, and a
/// British catalogue's words meet an American visitor's. (prefix, replacement)
const BRITISH: &[(&str, &str)] = &[
    ("armour", "armor"),
    ("colour", "color"),
    ("honour", "honor"),
    ("favour", "favor"),
    ("labour", "labor"),
    ("harbour", "harbor"),
    ("neighbour", "neighbor"),
    ("saviour", "savior"),
    ("splendour", "splendor"),
    ("behaviour", "behavior"),
    ("vapour", "vapor"),
    ("jewellery", "jewelry"),
    ("jeweller", "jeweler"),
    ("centre", "center"),
    ("theatre", "theater"),
    ("sabre", "saber"),
    ("sceptre", "scepter"),
    ("lustre", "luster"),
    ("sombre", "somber"),
    ("fibre", "fiber"),
    ("calibre", "caliber"),
    ("catalogue", "catalog"),
    ("mould", "mold"),
    ("plough", "plow"),
    ("moustache", "mustache"),
    ("aluminium", "aluminum"),
    ("grey", "gray"),
];

/// The American spelling of a (lower-case) word that starts with a British one ([`BRITISH`]).
fn american_spelling(w: &str) -> Option<String> {
    let first = w.as_bytes().first()?;
    BRITISH
        .iter()
        .filter(|(gb, _)| gb.as_bytes()[0] == *first)
        .find_map(|(gb, us)| w.strip_prefix(gb).map(|rest| format!("{us}{rest}")))
}

fn push_bigrams(chars: &[char], out: &mut Vec<String>) {
    if chars.len() == 1 {
        out.push(chars[0].to_string());
        return;
    }
    for pair in chars.windows(2) {
        out.push(pair.iter().collect());
    }
}

fn push_long_words(span: &str, out: &mut Vec<String>) {
    if span.chars().count() < 3 {
        return;
    }
    for t in jieba().cut_for_search(span, false) {
        if t.word.chars().count() >= 3 {
            out.push(t.word.to_string());
        }
    }
}

/// The words of a normalised CJK span as jieba cuts it (Chinese stop words kept: the caller
/// decides), for question analysis outside the index ([`super::kinds`]).
pub fn cjk_words(span: &str) -> Vec<String> {
    jieba()
        .cut(span, false)
        .iter()
        .map(|t| t.word.to_string())
        .collect()
}

/// Whether a normalised Chinese word is one of the index's stop words.
pub fn is_zh_stop(word: &str) -> bool {
    stop_sets().1.contains(word)
}

/// Index tokens of a field's text (duplicates kept: term frequency matters to BM25).
pub fn index_tokens(text: &str) -> Vec<String> {
    let norm = normalize(text);
    let mut out = Vec::new();
    for run in runs(&norm) {
        match run {
            Run::Word(w) => out.extend(word_token(w)),
            Run::Cjk(s) => {
                let chars: Vec<char> = s.chars().collect();
                push_bigrams(&chars, &mut out);
                push_long_words(s, &mut out);
            }
        }
    }
    out
}

/// The Latin/digit index tokens of a short text, in order (stop words dropped, stemmed as the
/// index stems; CJK runs ignored): a dictionary sense read as index tokens.
pub fn latin_tokens(text: &str) -> Vec<String> {
    let norm = normalize(text);
    let mut out = Vec::new();
    for run in runs(&norm) {
        if let Run::Word(w) = run {
            cached_word_token(w, |t| out.push(t.to_string()));
        }
    }
    out
}

/// The Latin/digit index tokens of already normalised text (no CJK segmentation: cheap).
pub fn index_tokens_latin(normalized: &str) -> HashSet<String> {
    runs(normalized)
        .filter_map(|r| match r {
            Run::Word(w) => word_token(w),
            Run::Cjk(_) => None,
        })
        .collect()
}

/// Index tokens joined by spaces, as stored in the FTS table: `index_tokens(text).join(" ")`,
/// written into one string instead of a `String` a token (a bigram each was ~7 % of the
/// ingest's analysis in allocations), with each Latin word's token memoised per thread
/// ([`cached_word_token`]: the Snowball stemmer was ~20 % of it). The test
/// `index_text_is_the_tokens_joined` holds the two to the same output.
pub fn index_text(text: &str) -> String {
    let norm = normalize(text);
    let mut out = String::with_capacity(norm.len() + norm.len() / 2);
    let mut first = true;
    let mut push = |out: &mut String, t: &str| {
        if !first {
            out.push(' ');
        }
        first = false;
        out.push_str(t);
    };
    with_word_memo(|memo| {
        for run in runs(&norm) {
            match run {
                Run::Word(w) => memo_word_token(memo, w, |t| push(&mut out, t)),
                Run::Cjk(s) => {
                    // Every character bigram (a lone character stays a unigram), as `push_bigrams`.
                    let mut starts = s.char_indices().map(|(i, _)| i).skip(1).peekable();
                    if starts.peek().is_none() {
                        push(&mut out, s);
                    } else {
                        let mut prev = 0;
                        while let Some(mid) = starts.next() {
                            let end = starts.peek().copied().unwrap_or(s.len());
                            push(&mut out, &s[prev..end]);
                            prev = mid;
                        }
                    }
                    // jieba's words of three or more characters, as `push_long_words`.
                    if s.chars().nth(2).is_some() {
                        for t in jieba().cut_for_search(s, false) {
                            if t.word.chars().nth(2).is_some() {
                                push(&mut out, t.word);
                            }
                        }
                    }
                }
            }
        }
    });
    out
}

/// Entries of a thread's memo of [`word_token`] before it is emptied (a collection's
/// vocabulary is Zipfian: a few thousand words are most of its text).
const WORD_MEMO_MAX: usize = 1 << 17;

type WordMemo = rustc_hash::FxHashMap<ShortStr, Option<ShortStr>>;

thread_local! {
    /// A thread's memo of [`word_token`] (keys and stems kept in place: `ShortStr`).
    static WORD_MEMO: std::cell::RefCell<WordMemo> = std::cell::RefCell::default();
}

/// Runs `f` with this thread's memo of [`word_token`], borrowed once for a whole text (not
/// once a word).
fn with_word_memo<R>(f: impl FnOnce(&mut WordMemo) -> R) -> R {
    WORD_MEMO.with(|m| f(&mut m.borrow_mut()))
}

/// Calls `f` with [`word_token`] of `w` (nothing for a stop word), looked up in `memo` first.
fn memo_word_token(memo: &mut WordMemo, w: &str, f: impl FnOnce(&str)) {
    if let Some(t) = memo.get(w) {
        if let Some(t) = t {
            f(t.as_str());
        }
        return;
    }
    if memo.len() >= WORD_MEMO_MAX {
        memo.clear();
    }
    let t = word_token(w);
    if let Some(t) = &t {
        f(t);
    }
    memo.insert(ShortStr::new(w), t.as_deref().map(ShortStr::new));
}

/// [`memo_word_token`] with this thread's memo.
fn cached_word_token(w: &str, f: impl FnOnce(&str)) {
    with_word_memo(|memo| memo_word_token(memo, w, f))
}

/// One term of a query: an exact index token, or (for a lone CJK character) a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueryTerm {
    pub text: String,
    pub prefix: bool,
}

impl QueryTerm {
    fn exact(t: impl Into<String>) -> Self {
        QueryTerm {
            text: t.into(),
            prefix: false,
        }
    }

    /// Whether a document token matches this term.
    pub fn matches(&self, token: &str) -> bool {
        if self.prefix {
            token.starts_with(&self.text)
        } else {
            token == self.text
        }
    }
}

/// The distinct terms of a visitor's question, in order, at most [`MAX_QUERY_TERMS`].
pub fn query_terms(query: &str) -> Vec<QueryTerm> {
    query_terms_with(query, &UserDict::default())
}

/// [`query_terms`] with the collection's names kept whole ([`UserDict`]): a name is never cut
/// by jieba, so a character of it that is also a function word (于右任, 王之涣) still counts,
/// and a name written in its other 玄/元 form is searched in the form the collection uses.
pub fn query_terms_with(query: &str, dict: &UserDict) -> Vec<QueryTerm> {
    analyse_question(query, dict).terms
}

/// A question's terms ([`query_terms_with`]) and the words a stop character may have been cut
/// from ([`StopJoin`]).
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionAnalysis {
    pub terms: Vec<QueryTerm>,
    pub joins: Vec<StopJoin>,
}

/// A one-character stop word that jieba cut off the one character after it: 石头地券 is 石头 /
/// 地 / 券 to jieba, which does not know 地券 (a land deed), and 地 is a particle as often as a
/// word's first character (慢慢地走). The question's terms keep the particle reading; the
/// ranking adds `bigram` (and drops the lone character's term, `lone`) when the collection holds
/// the bigram, so 慢慢地走 is read as before and 石头地券 finds the deed.
#[derive(Debug, Clone, PartialEq)]
pub struct StopJoin {
    pub bigram: String,
    /// The character after the stop word, when it is a term of its own (a span of one).
    pub lone: Option<QueryTerm>,
}

/// The stop words a [`StopJoin`] is offered for: the particles after a verb or an adjective
/// (慢慢地, 走着, 跑得, 看过), which are also the first character of words jieba does not know
/// (地券). Not 的, 有, 和, 在: before a one-character word they are the particle, and the
/// bigram is in the collection by chance (有没有吴昌硕画的画 searched 的画 for 画).
const JOINABLE_STOPS: &[&str] = &["地", "着", "得", "过"];

/// [`query_terms_with`] and the question's [`StopJoin`]s.
pub fn analyse_question(query: &str, dict: &UserDict) -> QuestionAnalysis {
    // "Who is X": only the name is searched (是什么人, "Who was" add nothing).
    let subject = who_is_subject(query);
    let norm = normalize(subject.as_deref().unwrap_or(query));
    let norm = unfold_contractions(&norm);
    let zh_stop = &stop_sets().1;
    let mut terms: Vec<QueryTerm> = Vec::new();
    let mut joins: Vec<StopJoin> = Vec::new();
    // Until the question's first content word, words that only ask to be shown something
    // ("Show me", "I want to see", 我想看, 带我去) are frames, not content.
    let mut leading = true;
    // The previous English word ("how" makes "old" a frame).
    let mut prev: Option<&str> = None;
    for run in runs(&norm) {
        match run {
            Run::Word(w) => {
                let after_how = prev == Some("how");
                prev = Some(w);
                if leading && (EN_REQUEST.contains(&w) || EN_TASTE.contains(&w)) {
                    continue;
                }
                if after_how && HOW_MEASURE.contains(&w) {
                    continue;
                }
                let t = word_token(w);
                leading &= t.is_none();
                terms.extend(t.map(QueryTerm::exact));
            }
            Run::Cjk(s) => {
                // Consecutive non-stop words form a span; bigrams never cross a stop word.
                let mut spans: Vec<String> = Vec::new();
                let mut cur = String::new();
                let mut after_who = false;
                // The piece before was one of the collection's names (胡適 of 胡適寫了什麼).
                let mut after_name = false;
                for (piece, name) in dict.segment(s) {
                    if name {
                        cur.push_str(&piece);
                        after_who = false;
                        after_name = true;
                        continue;
                    }
                    let words: Vec<&str> =
                        jieba().cut(&piece, false).iter().map(|t| t.word).collect();
                    for (i, w) in words.iter().enumerate() {
                        let next = words.get(i + 1).copied();
                        let first = leading && spans.is_empty() && cur.is_empty();
                        // Only stop words after it (checked only for a word of looking: a long
                        // question would otherwise scan its rest at every word).
                        let last = || words[i + 1..].iter().all(|n| zh_stop.contains(n));
                        // 书法作品 is one word to jieba: its head is searched, its tail
                        // ends the span as the word alone would (no 法作 bigram).
                        if let Some(head) = exhibit_tail_head(w) {
                            cur.push_str(head);
                            spans.push(std::mem::take(&mut cur));
                            after_who = false;
                            continue;
                        }
                        if JOINABLE_STOPS.contains(w)
                            && let Some(n) = next
                            && n.chars().count() == 1
                            && !zh_stop.contains(n)
                            && is_cjk_word(n)
                        {
                            let lone = words.get(i + 2).is_none_or(|a| zh_stop.contains(a));
                            joins.push(StopJoin {
                                bigram: format!("{w}{n}"),
                                lone: lone.then(|| QueryTerm {
                                    text: n.to_string(),
                                    prefix: true,
                                }),
                            });
                        }
                        if zh_stop.contains(w)
                            || (ZH_LOOK.contains(w) && (first || last()))
                            || (first && ZH_REQUEST.contains(w))
                            || is_making_frame(
                                after_who,
                                w,
                                next,
                                words.get(i + 2).copied(),
                                &|| {
                                    if i == 0 {
                                        after_name
                                    } else {
                                        is_person_name(words[i - 1])
                                    }
                                },
                            )
                            || is_measure_frame(i.checked_sub(1).map(|p| words[p]), w)
                            || is_asking_frame(&words, i)
                        {
                            if !cur.is_empty() {
                                spans.push(std::mem::take(&mut cur));
                            }
                        } else {
                            cur.push_str(w);
                        }
                        after_who = matches!(*w, "谁" | "是谁");
                    }
                    after_name = false;
                }
                if !cur.is_empty() {
                    spans.push(cur);
                }
                leading &= spans.is_empty();
                for span in spans {
                    let chars: Vec<char> = span.chars().collect();
                    if chars.len() == 1 {
                        terms.push(QueryTerm {
                            text: span,
                            prefix: true,
                        });
                        continue;
                    }
                    let mut toks = Vec::new();
                    push_bigrams(&chars, &mut toks);
                    push_long_words(&span, &mut toks);
                    terms.extend(toks.into_iter().map(QueryTerm::exact));
                }
            }
        }
    }
    let mut seen = HashSet::new();
    terms.retain(|t| seen.insert(t.clone()));
    terms.truncate(MAX_QUERY_TERMS);
    joins.retain(|j| j.lone.as_ref().is_none_or(|l| terms.contains(l)));
    QuestionAnalysis { terms, joins }
}

/// Whether a jieba word is all CJK ideographs.
fn is_cjk_word(w: &str) -> bool {
    w.chars().all(is_cjk)
}

/// Chinese words for exhibits in general (stop words, like "exhibit" in English), which jieba
/// also joins to the word before them: 书法作品, 青铜文物, 馆藏品.
const EXHIBIT_TAILS: &[&str] = &["作品", "文物", "藏品", "展品"];

/// The head of a jieba word made of a word and an [`EXHIBIT_TAILS`] word (书法作品 → 书法),
/// when the head has two characters or more; None for any other word.
pub fn exhibit_tail_head(word: &str) -> Option<&str> {
    EXHIBIT_TAILS.iter().find_map(|t| {
        word.strip_suffix(t)
            .filter(|head| head.chars().count() >= 2)
    })
}

/// English words that only ask to be shown something ("Show me armor", "I'd like to see some
/// vases", "Where can I see …", "I'm looking for …"): dropped from a question while no content
/// word precedes them, so they neither dilute the match nor find records that say "see
/// Walters 44.375". Later in a question they are content ("a picture that shows a ruler").
const EN_REQUEST: &[&str] = &[
    "see", "show", "find", "look", "looking", "want", "wanna", "take", "bring", "id", "im",
];

/// Words of a visitor's taste ("I love cats", "I'm interested in armor", "I'm a fan of
/// Hokusai"): frames where [`EN_REQUEST`] words are ("interested" made the cats' records cover
/// half of "I'm interested in cats", which was refused), and for the kind lookup
/// (`kinds::is_frame_word`).
pub const EN_TASTE: &[&str] = &[
    "love",
    "adore",
    "enjoy",
    "interested",
    "fan",
    "fond",
    "keen",
    "really",
];

/// Words of measure after "how" ("How old is the mummy?", "How tall is the statue?"): the
/// question's frame, which asks for a field (the date, the dimensions), not words a record holds.
/// As content words the mummy's record, which never says "old", covered half the question and
/// was refused.
const HOW_MEASURE: &[&str] = &[
    "old", "big", "large", "tall", "high", "wide", "long", "heavy", "small",
];

/// Whether a lower-case word (apostrophes kept) only asks to be shown something: one of
/// [`EN_REQUEST`] or [`EN_TASTE`], or a contraction of "I" ("I'd", "I'm", "I've", "I'll"). "Show me armor" names
/// nothing, though "Show" is capitalised.
fn is_request_word(lower: &str) -> bool {
    let bare = lower.replace(['\'', '’'], "");
    EN_REQUEST.contains(&bare.as_str())
        || EN_TASTE.contains(&bare.as_str())
        || (bare != lower && matches!(bare.as_str(), "ive" | "ill"))
}

/// Chinese words of looking (我想看瓷器, 给我看看青铜器, 有什么瓷器可以看到): frames before the
/// question's first content word or with only stop words after them; between content words
/// they are content (于右任站在讲台后面看文件的那张照片).
///
/// A visitor's taste is framed the same way (我喜欢猫, 我对瓷器感兴趣: 喜欢 and 感兴趣 are no
/// record's words; 我喜欢猫 was refused).
const ZH_LOOK: &[&str] = &[
    "喜欢",
    "喜爱",
    "爱看",
    "感兴趣",
    "很感兴趣",
    "特别感兴趣",
    "有兴趣",
    "看",
    "看看",
    "看一看",
    "看一下",
    "看到",
    "瞧",
    "瞧瞧",
    "参观",
];

/// Chinese request words (带我去看, 我要找, 给我): frames only before the question's first
/// content word (a 带钩 or 去年 later in the question is jieba's one word anyway).
const ZH_REQUEST: &[&str] = &[
    "带",
    "去",
    "要",
    "找",
    "领",
    "帮",
    "想要",
    "带我去",
    "带我",
    "给我",
    "我要",
    "我想",
    "想去",
];

/// One-character verbs of making in general (写, 画, 烧, ...): in a question frame they carry no
/// content. Verbs that name a technique or a medium (拍 a photograph, 刻 carved, 印 printed, 织
/// woven) are not here: the record says it in the same words.
const MAKING_VERBS: &[&str] = &["写", "画", "做", "烧", "作", "造", "书"];

/// Whether a one-character making verb is part of a question frame: right after 谁/是谁 ("是谁写的"),
/// right before 的 ("康熙年间烧的那种"), where it says how the thing came to be, not what it is,
/// before a word asking what, or after a person's name before 了/过 and a word asking what or
/// which (胡适写了什么？, 齐白石画过哪些？: what someone made, whose records need not say 写 or
/// 画; 胡適寫了什麼 was refused for the 寫 its letter of poems does not hold). Not after a thing:
/// in 题的诗写了什么 the verb is what the poem says, and a record across the scripts holds it
/// ("inscribed"). `then` is the word after `next`; `by_someone`: the word before is a name.
fn is_making_frame(
    after_who: bool,
    word: &str,
    next: Option<&str>,
    then: Option<&str>,
    by_someone: &dyn Fn() -> bool,
) -> bool {
    let asks =
        |w: Option<&str>| w.is_some_and(|w| ZH_WHAT.contains(&w) || ASKING_WHICH.contains(&w));
    (MAKING_VERBS.contains(&word) || word == "干")
        && (after_who
            || next == Some("的")
            || next.is_some_and(|n| ZH_WHAT.contains(&n))
            || (matches!(next, Some("了" | "过")) && asks(then) && by_someone()))
}

/// Whether jieba tags a word a person's name (`nr`: 齐白石, 张大千).
fn is_person_name(word: &str) -> bool {
    jieba()
        .tag(word, true)
        .last()
        .is_some_and(|t| t.tag.starts_with("nr"))
}

/// Words for "what" after which a verb asks what a thing is for (干什么用的, 做啥的).
const ZH_WHAT: &[&str] = &["什么", "啥", "嘛"];

/// Measure words (这**块**石头, 那**枚**勋章, 哪**尊**佛像): after a demonstrative or a number
/// they are the question's way of pointing, not content. jieba cuts 那块 as 那 / 块, and the
/// measure word then made a bigram with the noun after it (块宋, 座塔): "那座塔" searched 座塔
/// only and lost the pagoda.
const MEASURE_WORDS: &[&str] = &[
    "个", "件", "幅", "张", "位", "块", "枚", "尊", "座", "只", "把", "套", "副", "条", "面", "片",
    "颗", "支", "根", "双", "卷", "册", "台", "架", "艘", "匹", "盏", "顶", "串", "首", "篇", "封",
    "份", "批", "组", "种", "款", "方", "对",
];

/// Whether `c` is one of [`MEASURE_WORDS`] (Simplified).
pub fn is_measure_word(c: char) -> bool {
    let mut buf = [0u8; 4];
    MEASURE_WORDS.contains(&&*c.encode_utf8(&mut buf))
}

/// Words a [`MEASURE_WORDS`] word is a frame after.
const POINTING: &[&str] = &["这", "那", "哪", "每", "一", "几", "两", "某"];

/// Whether `word` is a measure word right after a demonstrative or number (`prev`).
fn is_measure_frame(prev: Option<&str>, word: &str) -> bool {
    prev.is_some_and(|p| POINTING.contains(&p)) && MEASURE_WORDS.contains(&word)
}

/// Words that ask which (哪些, 哪几个): 人 after one asks who (哪几个人发起的, 有哪些人拿过).
const ASKING_WHICH: &[&str] = &[
    "哪些",
    "哪几个",
    "几个",
    "哪个",
    "哪几",
    "什么",
    "哪位",
    "些",
];

/// Words that ask how two things differ, after a word for "what" (有什么不一样, 有什么区别).
const DIFFERENCE_WORDS: &[&str] = &["不一样", "不同", "区别", "差别", "差异", "分别"];

/// Whether the `i`th of a question's words is part of its asking, not its content: 人 after a
/// word asking which ("which people": 中华粥会最早是哪几个人发起的 searched the bigram 人发,
/// held by no record, and the question read as a third unknown and was refused; 是替哪些人造的
/// searched 人造, "man-made"), or a word of difference after "what" (紅契和白契有什麼不一樣
/// searched 不一 and 一样, which the deeds' record does not say; jieba cuts 不 / 一样 there).
/// Only in those places: 人物, 不同时期 and a 区别 of its own stay content.
fn is_asking_frame(words: &[&str], i: usize) -> bool {
    let at = |k: Option<usize>| k.and_then(|k| words.get(k)).copied();
    let (prev, word, next) = (at(i.checked_sub(1)), words[i], at(Some(i + 1)));
    let asks_what = |w: Option<&str>| w.is_some_and(|w| ZH_WHAT.contains(&w) || w == "何");
    match word {
        "人" => prev.is_some_and(|p| ASKING_WHICH.contains(&p)),
        "不" => asks_what(prev) && next == Some("一样"),
        "一样" => prev == Some("不") && asks_what(at(i.checked_sub(2))),
        _ => asks_what(prev) && DIFFERENCE_WORDS.contains(&word),
    }
}

/// The character the Qing dynasty's taboo on the Kangxi emperor's personal name (玄燁) put in
/// place of 玄 (元燁, 房元齡, 唐元宗): names fold it; other text does not (玄武, 元代 differ).
fn fold_taboo(s: &str) -> String {
    s.replace('玄', "元")
}

/// Most characters of one dictionary entry.
const MAX_NAME_CHARS: usize = 8;

/// The collection's own names, built from the makers and titles of its records (at ingest,
/// stored with the index): query analysis keeps them whole instead of letting jieba cut them.
/// Entries are normalised (Simplified, lower case) and looked up with 玄/元 folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserDict {
    /// Folded form → the form the collection writes.
    names: std::collections::HashMap<String, String>,
}

impl UserDict {
    /// The names of these maker and title fields: every run of 2–8 Chinese characters of a
    /// maker field (names are separated by anything else: 、, commas, spaces), and of a title
    /// the runs that short (a longer title is a description, not a name). Function words alone
    /// (的, 是谁, ...) are never names.
    pub fn build<'a>(
        makers: impl IntoIterator<Item = &'a str>,
        titles: impl IntoIterator<Item = &'a str>,
    ) -> UserDict {
        let mut names = std::collections::HashMap::new();
        let zh_stop = &stop_sets().1;
        for field in makers.into_iter().chain(titles) {
            let norm = normalize(field);
            for run in runs(&norm) {
                let Run::Cjk(r) = run else { continue };
                let n = r.chars().count();
                if (2..=MAX_NAME_CHARS).contains(&n) && !zh_stop.contains(r) {
                    names.entry(fold_taboo(r)).or_insert_with(|| r.to_string());
                }
            }
        }
        UserDict { names }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Adds the entries of `other` (names are only ever added: a name of a record that changed
    /// or left costs nothing but an unsplit word).
    pub fn extend(&mut self, other: UserDict) {
        for (k, v) in other.names {
            self.names.entry(k).or_insert(v);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The entries (the collection's forms), sorted: what is stored with the index.
    pub fn to_json(&self) -> String {
        let mut v: Vec<&String> = self.names.values().collect();
        v.sort();
        serde_json::to_string(&v).unwrap_or_default()
    }

    pub fn from_json(s: &str) -> Option<UserDict> {
        let v: Vec<String> = serde_json::from_str(s).ok()?;
        Some(UserDict {
            names: v.into_iter().map(|n| (fold_taboo(&n), n)).collect(),
        })
    }

    /// Splits a normalised CJK run into pieces, each a name of the dictionary (`true`, in the
    /// collection's form) or other text (`false`), longest name first from the left.
    pub fn segment(&self, run: &str) -> Vec<(String, bool)> {
        if self.names.is_empty() {
            return vec![(run.to_string(), false)];
        }
        let chars: Vec<char> = run.chars().collect();
        let folded: Vec<char> = fold_taboo(run).chars().collect();
        let mut out: Vec<(String, bool)> = Vec::new();
        let mut other = String::new();
        let mut i = 0;
        while i < chars.len() {
            let longest = (2..=MAX_NAME_CHARS.min(chars.len() - i))
                .rev()
                .find_map(|n| {
                    let key: String = folded[i..i + n].iter().collect();
                    self.names.get(&key).map(|name| (n, name))
                });
            match longest {
                Some((n, name)) => {
                    if !other.is_empty() {
                        out.push((std::mem::take(&mut other), false));
                    }
                    out.push((name.clone(), true));
                    i += n;
                }
                None => {
                    other.push(chars[i]);
                    i += 1;
                }
            }
        }
        if !other.is_empty() {
            out.push((other, false));
        }
        out
    }
}

/// `s` without its accession numbers in brackets ("（館藏編號：07319）", "(典藏編號h0000953)",
/// "(inv. no. 57.621)") and without a leading registration clause ("國立歷史博物館館藏《龍旗》"),
/// white space (line breaks too) folded to one space.
pub fn without_registration(s: &str) -> String {
    let folded = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(folded.len());
    let mut rest = folded.as_str();
    while let Some(at) = rest.find(['(', '（']) {
        let open = rest[at..].chars().next().map_or(1, char::len_utf8);
        let inner_start = at + open;
        match rest[inner_start..].find([')', '）']) {
            Some(len) if is_accession(&rest[inner_start..inner_start + len]) => {
                out.push_str(rest[..at].trim_end());
                let close = rest[inner_start + len..]
                    .chars()
                    .next()
                    .map_or(1, char::len_utf8);
                rest = &rest[inner_start + len + close..];
            }
            _ => {
                out.push_str(&rest[..inner_start]);
                rest = &rest[inner_start..];
            }
        }
    }
    out.push_str(rest);
    let body = strip_held_title(&out);
    body.trim_start_matches(|c: char| {
        c.is_whitespace() || matches!(c, '，' | ',' | '、' | '：' | ':' | '。' | '.' | '；' | ';')
    })
    .trim_end()
    .to_string()
}

/// Whether the inside of a bracket is an accession number: a number label ("館藏編號",
/// "典藏編號", "编号", "inv.", "acc. no.") with no more than a number after it.
fn is_accession(inner: &str) -> bool {
    let t = inner.trim();
    const LABELS: [&str; 10] = [
        "館藏編號",
        "馆藏编号",
        "典藏編號",
        "典藏编号",
        "編號",
        "编号",
        "inv.",
        "inventory no",
        "acc. no",
        "accession no",
    ];
    let lower = t.to_lowercase();
    LABELS.iter().any(|l| {
        lower.strip_prefix(l).is_some_and(|r| {
            let r = r.trim_start_matches(['.', ':', '：', ' ']);
            r.chars().count() <= 24 && r.chars().any(|c| c.is_ascii_digit())
        })
    })
}

/// A leading "<holder>藏《title》" or "<holder>館藏《title》" (the record saying which museum holds
/// it) taken off: the answer names the exhibit itself.
fn strip_held_title(s: &str) -> &str {
    let Some(open) = s.find('《') else {
        return s;
    };
    let head = &s[..open];
    if head.chars().count() > 24 || !head.trim_end().ends_with('藏') {
        return s;
    }
    match s[open..].find('》') {
        Some(close) => &s[open + close + '》'.len_utf8()..],
        None => s,
    }
}

/// Splits a description into sentences (passages), merging very short pieces into the next.
pub fn sentences(text: &str) -> Vec<String> {
    const MIN: usize = 25;
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        if ends_sentence(&chars, i) && cur.trim().chars().count() >= MIN {
            out.push(cur.trim().to_string());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        match out.last_mut() {
            Some(last) if cur.trim().chars().count() < MIN => {
                last.push(' ');
                last.push_str(cur.trim());
            }
            _ => out.push(cur.trim().to_string()),
        }
    }
    out
}

/// Whether `chars[i]` ends a sentence ([`sentences`]; the offline answers cut quotes there).
/// "3.5 cm", "ca. 1500", "St. John": a full stop ends one only before white space followed by
/// an upper-case letter, a CJK character, a quote or the end of the text, and not after a list
/// item's number ("1. Mountain Market … 2. From the Far Shore"). A Latin question or
/// exclamation mark only before white space or the end: "(?)", "?!", "(????)" end nothing.
pub fn ends_sentence(chars: &[char], i: usize) -> bool {
    const ENDS: &[char] = &['.', '!', '?', '。', '！', '？', '；', ';', '\n'];
    let c = chars[i];
    if !ENDS.contains(&c) {
        return false;
    }
    match c {
        '?' | '!' => chars.get(i + 1).is_none_or(|n| n.is_whitespace()),
        '.' if list_number(&chars[..i]) => false,
        '.' => {
            let rest = &chars[i + 1..];
            match rest.iter().position(|n| !n.is_whitespace()) {
                None => true,
                Some(0) => false,
                Some(j) => rest[j].is_uppercase() || is_cjk(rest[j]) || rest[j] == '"',
            }
        }
        _ => true,
    }
}

/// Whether `before` ends in a list item's number: one or two digits after white space, a colon
/// or the start ("…in this order: 1", "Night Rain 5"), not a year ("in 1564").
pub fn list_number(before: &[char]) -> bool {
    let digits = before
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .count();
    (1..=2).contains(&digits)
        && before[..before.len() - digits]
            .last()
            .is_none_or(|c| c.is_whitespace() || *c == ':')
}

/// Most words of a bare Latin keyword ([`is_bare_keyword`]).
pub const KEYWORD_WORDS: usize = 3;

/// Most characters of a bare Chinese keyword ([`is_bare_keyword`]).
pub const KEYWORD_CHARS: usize = 6;

/// Words that make a short query a question or a request rather than a keyword ("who",
/// "where", "hello"); a [`REACTIONS`] word does too.
const NOT_KEYWORDS: &[&str] = &[
    "what",
    "who",
    "whom",
    "whose",
    "where",
    "when",
    "why",
    "how",
    "which",
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "can",
    "could",
    "hi",
    "hello",
    "hey",
    "thanks",
    "thank",
    "bye",
    "goodbye",
    "yes",
    "no",
    "more",
    "next",
    "again",
    "help",
    "stop",
    "good",
    "fantastic",
    "perfect",
    "fine",
    "sure",
    "right",
    "really",
    "huh",
    "ah",
    "lol",
    "haha",
    "please",
    "pardon",
    // The visitor or the guide: a keyword names a thing ("Show me swords", "I love cats" are
    // wishes whose object is the keyword, `asked_keyword`).
    "i",
    "me",
    "my",
    "we",
    "us",
    "our",
    "you",
    "your",
];

/// A visitor's reaction to an answer, typed alone ("cool", "sorry"): said to the guide, not a
/// keyword (searched, "sorry" found a record that happens to say it). Small talk answers an
/// utterance made of these (`pipeline::small_talk`, in this order, after its other phrases).
pub const REACTIONS: &[&str] = &[
    "cool",
    "nice",
    "wow",
    "great",
    "awesome",
    "amazing",
    "interesting",
    "wonderful",
    "beautiful",
    "lovely",
    "sorry",
    "oops",
    "ok",
    "okay",
    "oh",
    "hmm",
];

/// [`REACTIONS`] in Chinese (好的, 不错, 对不起), longest first where one holds another.
pub const ZH_REACTIONS: &[&str] = &[
    "不好意思",
    "对不起",
    "太好了",
    "有意思",
    "知道了",
    "明白了",
    "不错",
    "厉害",
    "真棒",
    "好的",
    "哇",
    "嗯",
];

/// Words that make a run of Chinese characters a question or a request, not a keyword: 谁,
/// 什么, 哪里, 吗, 你好 …; a [`ZH_REACTIONS`] word does too.
const ZH_QUESTION_WORDS: &[&str] = &[
    "谁", "什么", "啥", "哪", "几", "怎", "为何", "吗", "呢", "么", "嘛", "吧", "是否", "多少",
    "你好", "您好", "谢谢", "再见", "请", "帮", "介绍", "讲", "说", "漂亮", "好看", "很棒", "明白",
    "哦", "啊", "呀",
];

/// The keyword a query (normalised, [`normalize`]) is, when it is a bare one, as visitors type
/// on a kiosk or a phone: one to [`KEYWORD_WORDS`] Latin words ("ivory", "maiolica", "Japanese
/// armor") or one run of two to [`KEYWORD_CHARS`] Chinese characters (瓷器, 日本), with no
/// question mark and no question, request, greeting or reaction word. The query without its
/// surrounding space and closing full stop or exclamation mark; None when it is no keyword.
pub fn bare_keyword(norm: &str) -> Option<&str> {
    let t = norm
        .trim()
        .trim_end_matches(['.', '!', '。', '！'])
        .trim_end();
    if t.is_empty() || t.contains(['?', '？']) {
        return None;
    }
    let keyword = if t.chars().all(is_cjk) {
        (2..=KEYWORD_CHARS).contains(&t.chars().count())
            && !ZH_QUESTION_WORDS
                .iter()
                .chain(ZH_REACTIONS)
                .any(|w| t.contains(w))
    } else {
        let words: Vec<&str> = t.split_whitespace().collect();
        (1..=KEYWORD_WORDS).contains(&words.len())
            && words.iter().all(|w| is_keyword_word(w))
            && !words
                .iter()
                .any(|w| NOT_KEYWORDS.contains(w) || REACTIONS.contains(w))
    };
    keyword.then_some(t)
}

/// Whether a word (normalised) can be part of a bare Latin keyword: letters, with an apostrophe or
/// a hyphen between two of them ("qur'an", "o'keeffe", "toulouse-lautrec": "Qur'an" was no
/// keyword, so `keyword_found` never read that the *Qur'an* holds it, and it was refused); never
/// a contraction or a possessive ("what's", "i'm", "monet's"), whose words are the asking's.
fn is_keyword_word(word: &str) -> bool {
    let letter = |c: char| c.is_alphabetic() && !is_cjk(c);
    let (Some(first), Some(last)) = (word.chars().next(), word.chars().last()) else {
        return false;
    };
    letter(first)
        && letter(last)
        && word
            .chars()
            .all(|c| letter(c) || matches!(c, '\'' | '’' | '-'))
        && !word.contains("--")
        && word.split(['\'', '’']).skip(1).all(|after| {
            let ending: String = after.chars().take_while(|c| c.is_alphabetic()).collect();
            !matches!(ending.as_str(), "s" | "m" | "re" | "ve" | "ll" | "d" | "t")
        })
}

/// Openings whose object is the thing asked for: whether the collection has it, or a wish or a
/// taste for it (`offline::browse` lists the wishes and tastes as it lists "Do you have").
const ASKED_FRAMES_EN: &[&[&str]] = &[
    openings::HAVE,
    openings::ABOUT,
    openings::SHOW,
    openings::TASTE,
];

/// Words before 有没有 / 有 in a Chinese "do you have" question.
const HAVE_LEADS_ZH: &[&str] = &[
    "请问",
    "你们这里",
    "你们馆里",
    "馆藏里",
    "馆藏中",
    "你们",
    "这里",
    "馆里",
    "馆内",
];

/// Endings of a Chinese "do you have" question after the thing asked for: a particle, then a
/// general word for an exhibit, [`EXHIBIT_TAILS`] or 东西 (with or without 的: 有没有书法作品？
/// asks for 书法).
const HAVE_PARTICLES_ZH: &[&str] = &["吗", "呢", "吧"];

/// The thing a short "do you have" question asks for when it is a keyword ("Do you have
/// sculptures?" → `sculptures`, 有没有佛像？ → 佛像), or the query itself when it is a bare
/// keyword ([`bare_keyword`]); None otherwise. `norm` is normalised ([`normalize`]).
pub fn asked_keyword(norm: &str) -> Option<&str> {
    if let Some(k) = bare_keyword(norm) {
        // 三国的文物 (refused while 三国 was answered): the thing before the word for exhibits.
        return Some(exhibit_tail_thing(k).and_then(bare_keyword).unwrap_or(k));
    }
    let t = norm
        .trim()
        .trim_end_matches(['?', '？', '.', '。', '!', '！'])
        .trim_end();
    if let Some(rest) = openings::strip(t, ASKED_FRAMES_EN) {
        let rest = rest
            .trim_end_matches(" here")
            .trim_end_matches(" in the collection")
            .trim_end_matches(" in the museum");
        // "Anything from the Warring States?": the article is not part of the keyword.
        return bare_keyword(rest.strip_prefix("the ").unwrap_or(rest));
    }
    if let Some(thing) = defined_thing(t) {
        return bare_keyword(thing);
    }
    let mut rest = t;
    for lead in HAVE_LEADS_ZH {
        rest = rest.strip_prefix(lead).unwrap_or(rest);
    }
    let mut rest = rest
        .strip_prefix("有没有")
        .or_else(|| rest.strip_prefix("有哪些"))
        .or_else(|| rest.strip_prefix('有'))?;
    for end in HAVE_PARTICLES_ZH {
        rest = rest.strip_suffix(end).unwrap_or(rest);
    }
    bare_keyword(exhibit_tail_thing(rest).unwrap_or(rest))
}

/// Words after "what is" that point at something rather than name it ("What is this?", "What
/// is the oldest?"): no definition asked.
const DEFINE_NOT_THINGS: &[&str] = &[
    "this", "that", "it", "these", "those", "the", "he", "she", "they", "there", "here", "on",
    "in", "new", "up", "a", "an",
];

/// Last words that make "what is X …" a question about X, not what X is.
const DEFINE_NOT_LAST: &[&str] = &[
    "of", "for", "from", "in", "on", "with", "about", "made", "used", "like", "called", "worth",
    "mean",
];

/// Words a Chinese "what is X" question may end with after 是什么: the kind of thing asked
/// (六博是什么游戏？) or its meaning (是什么意思).
const DEFINE_TAILS_ZH: &[&str] = &["", "东西", "意思", "游戏", "样子"];

/// The thing a question (normalised, without its closing mark) asks to have explained: "What
/// is a pax?", "What's a cassone?", "What are netsuke?", "What does tiraz mean?", 功牌是什么？,
/// 什么是功牌？, 六博是什么游戏？. A visitor at a kiosk asks this way of a word on a label; the
/// keyword it gives is answered when the best hit holds it (`keyword_found`) as a bare keyword
/// is ("What does tiraz mean?" and 功牌是什么？ were refused: one term, and the model reads few
/// terms as a question with no answer; retrieval README, "Short visitor questions").
fn defined_thing(t: &str) -> Option<&str> {
    // "What is jade made of?", "What are these used for?": a question about the thing.
    let english = t
        .strip_prefix("what does ")
        .or_else(|| t.strip_prefix("what do "))
        .and_then(|r| r.strip_suffix(" mean"))
        .or_else(|| {
            openings::strip(t, &[openings::DEFINE]).filter(|rest| {
                rest.split_whitespace()
                    .last()
                    .is_some_and(|w| !DEFINE_NOT_LAST.contains(&w))
            })
        });
    if let Some(rest) = english {
        // "What is this?", "What does this mean?" point at something.
        let first = rest.split_whitespace().next()?;
        return (!DEFINE_NOT_THINGS.contains(&first)).then_some(rest);
    }
    // 这个是什么？ points at something (a follow-up), it names nothing.
    let names = |thing: &&str| !thing.starts_with(['这', '那', '它', '他', '她', '哪']);
    if let Some(rest) = t.strip_prefix("什么是") {
        return Some(rest).filter(names);
    }
    DEFINE_TAILS_ZH
        .iter()
        .find_map(|tail| {
            let body = t.strip_suffix(tail)?;
            body.strip_suffix("是什么")
                .or_else(|| body.strip_suffix("是啥"))
        })
        .filter(names)
}

/// The thing a Chinese request names before a general word for exhibits ([`EXHIBIT_TAILS`] or
/// 东西, with or without 的), without an "about" before it: 关于三国的文物 → 三国. None when
/// it ends with no such word.
fn exhibit_tail_thing(rest: &str) -> Option<&str> {
    let thing = EXHIBIT_TAILS
        .iter()
        .chain(&["东西"])
        .find_map(|e| rest.strip_suffix(e))?;
    let thing = thing.strip_suffix('的').unwrap_or(thing);
    Some(thing.strip_prefix("关于").unwrap_or(thing))
}

/// Whether a query (normalised) is a bare keyword ([`bare_keyword`]).
pub fn is_bare_keyword(norm: &str) -> bool {
    bare_keyword(norm).is_some()
}

/// Whether a question asks who someone is ("溥心畬是谁？", "谁是溥心畬", "Who was Shibata
/// Zeshin?") rather than who made or did something ("峄山刻石是谁写的" is not).
pub fn is_who_is(query: &str) -> bool {
    who_is_subject(query).is_some()
}

/// The person a "who is X" question asks about, as the visitor wrote the name ("溥心畬是谁？" →
/// `溥心畬`, "Who was Shibata Zeshin?" → `Shibata Zeshin`); None for other questions.
pub fn who_is_subject(query: &str) -> Option<String> {
    let t = query.trim_matches(|c: char| !c.is_alphanumeric() && !is_cjk(c));
    let t = t.trim_end_matches(['呢', '啊', '呀', '吗', '嗎']);
    if t.chars().any(is_cjk) {
        // A polite opening is not part of the name (請問溥心畬是誰).
        let t = [
            "请问",
            "請問",
            "你知道",
            "你们知道",
            "你們知道",
            "想问",
            "想問",
        ]
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .unwrap_or(t)
        .trim_start_matches([',', '，', ' ']);
        let body = ["是谁", "是誰", "是什么人", "是什麼人"]
            .iter()
            .find_map(|s| t.strip_suffix(s))
            .or_else(|| t.strip_prefix("谁是"))
            .or_else(|| t.strip_prefix("誰是"))?;
        let body = body.trim();
        // "《四朝鈔幣圖錄》的作者是誰" asks who made a work, not who someone is: a title, or a
        // role of someone towards a thing (…的作者, …的画家), is no name.
        const ROLES: [&str; 16] = [
            "作者",
            "画家",
            "畫家",
            "作家",
            "书法家",
            "書法家",
            "摄影师",
            "攝影師",
            "捐赠者",
            "捐贈者",
            "主人",
            "设计者",
            "設計者",
            "制作者",
            "製作者",
            "收藏者",
        ];
        if body.contains(['《', '》', '〈', '〉']) || ROLES.iter().any(|r| body.ends_with(r)) {
            return None;
        }
        return (2..=12)
            .contains(&body.chars().count())
            .then(|| body.to_string());
    }
    let lower = t.to_lowercase();
    let skip = ["who is ", "who was ", "who were "]
        .iter()
        .find(|p| lower.starts_with(*p))?
        .len();
    // The rest must be a name: capitalised words.
    let rest = t[skip..].trim();
    let words: Vec<&str> = rest.split_whitespace().collect();
    // Joining particles inside a name count ("Leonardo da Vinci", "Vincent van Gogh"), not at
    // its ends.
    let capital = |w: &&str| w.chars().next().is_some_and(|c| c.is_uppercase());
    let name = !words.is_empty()
        && words.len() <= 5
        && words.first().is_some_and(capital)
        && words.last().is_some_and(capital)
        && words
            .iter()
            .all(|w| capital(w) || NAME_JOINERS.contains(&w.to_lowercase().as_str()));
    name.then(|| rest.to_string())
}

/// The titles a question marks with Chinese title marks (《祭侄文稿》, 〈蘭亭序〉), normalised.
pub fn marked_titles(query: &str) -> Vec<String> {
    let mut out = between(query, &[('《', '》')]);
    out.extend(between(query, &[('〈', '〉')]));
    out
}

/// Whether `text` names `name` whole ([`names_whole`]) with a life span right after it
/// ("溥儒(1896－1963)", "Peter Carl Fabergé (Russian, 1846-1920)"): what a record that says who
/// someone is writes, where a mention in passing does not.
pub fn life_span_follows(text: &str, name: &str) -> bool {
    /// Longest bracket after a name read for its life span.
    const BRACKET_CHARS: usize = 40;
    let (text, name) = (normalize(text), normalize(name));
    let name = name.trim();
    if name.is_empty() {
        return false;
    }
    let latin = !name.chars().any(is_cjk);
    // The span (nine characters) may start after a bracket in Chinese ("溥儒(1896－1963)"),
    // after a nationality in English ("Fabergé (Russian, 1846-1920)").
    let window_chars = if latin { 24 } else { 11 };
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after_at = at + name.len();
        let next = text[after_at..].chars().next();
        let whole = !latin
            || (!before.is_some_and(char::is_alphanumeric)
                && !next.is_some_and(char::is_alphanumeric));
        // A bracket right after the name may give its other spelling first:
        // "詹天佑（JemeTienYow，1861－1919）".
        let window: String = if next == Some('(') {
            text[after_at..]
                .chars()
                .take(BRACKET_CHARS)
                .take_while(|c| *c != ')')
                .collect()
        } else {
            text[after_at..].chars().take(window_chars).collect()
        };
        whole && has_life_span(&window)
    })
}

/// Whether `text` names `name` whole: as a run of Chinese characters anywhere, or as whole
/// Latin words (a name of several words in that order), compared after [`normalize`]
/// ("Fabergé" in "Peter Carl Faberge"; "Ann" not in "Annunciation").
pub fn names_whole(text: &str, name: &str) -> bool {
    let (text, name) = (normalize(text), normalize(name));
    let name = name.trim();
    if name.is_empty() {
        return false;
    }
    if name.chars().any(is_cjk) {
        return text.contains(name);
    }
    let words = |s: &str| -> String {
        let spaced: String = s
            .chars()
            .map(|c| if c.is_alphanumeric() { c } else { ' ' })
            .collect();
        format!(
            " {} ",
            spaced.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    };
    let name = words(name);
    name.trim().len() > 1 && words(&text).contains(&name)
}

/// Whether a text reads like a biography: it gives a life span such as "(1896－1963)" or
/// "1896-1963".
pub fn has_life_span(text: &str) -> bool {
    let c: Vec<char> = text.chars().collect();
    c.windows(9).any(|w| {
        w[..4].iter().all(|d| d.is_ascii_digit())
            && matches!(w[4], '-' | '－' | '–' | '—' | '~' | '～')
            && w[5..9].iter().all(|d| d.is_ascii_digit())
    })
}

/// What the question holds between one of the `pairs` (an opening mark and its closing one),
/// left to right, normalised, 1 to 40 characters long.
fn between(query: &str, pairs: &[(char, char)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let chars: Vec<char> = query.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if let Some(&(_, close)) = pairs.iter().find(|(o, _)| *o == chars[i])
            && let Some(len) = chars[i + 1..].iter().position(|c| *c == close)
        {
            let inner: String = chars[i + 1..i + 1 + len].iter().collect();
            let n = normalize(inner.trim());
            if (1..=40).contains(&n.chars().count()) {
                out.push(n);
            }
            i += len + 2;
            continue;
        }
        i += 1;
    }
    out
}

/// Bracket and quote pairs whose content is a name or title (《寒食帖》, “石虎”, "Night Watch").
const QUOTES: &[(char, char)] = &[
    ('《', '》'),
    ('〈', '〉'),
    ('「', '」'),
    ('『', '』'),
    ('“', '”'),
    ('‘', '’'),
    ('"', '"'),
];

/// Words that may join capitalised words into one name ("Book of Kells", "Venus de Milo").
const NAME_JOINERS: &[&str] = &[
    "of", "de", "da", "di", "del", "della", "der", "van", "von", "la", "le", "du", "the",
];

/// The named things of [`named_phrases`] of two or more words ("three kingdoms"): the ones
/// whose words a record may hold apart ("three feet … Old Kingdom"); one word is held or not.
pub fn names_of_several_words(query: &str) -> Vec<String> {
    named_phrases(query)
        .into_iter()
        .filter(|n| n.split_whitespace().nth(1).is_some())
        .collect()
}

/// The named things a question asks about, normalised: quoted or bracketed spans, and runs of
/// capitalised Latin words that are not stop or question words ("Rembrandt's Night Watch" →
/// `rembrandt`, `night watch`). Used to check that the best hit is about the thing named.
pub fn named_phrases(query: &str) -> Vec<String> {
    let mut out = between(query, QUOTES);
    // Capitalised runs (Latin script only).
    let stops = &stop_sets().0;
    let mut run: Vec<String> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<String>, pending: &mut Vec<String>, out: &mut Vec<String>| {
        pending.clear();
        if !run.is_empty() {
            out.push(normalize(&run.join(" ")));
            run.clear();
        }
    };
    // Words (Latin letters and digits, with inner apostrophes and hyphens); None = punctuation.
    let mut toks: Vec<Option<String>> = Vec::new();
    let mut cur = String::new();
    for c in query.chars() {
        let apos = matches!(c, '\'' | '’' | '-') && !cur.is_empty();
        if (c.is_alphanumeric() && !is_cjk(c)) || apos {
            cur.push(c);
        } else {
            if !cur.is_empty() {
                toks.push(Some(std::mem::take(&mut cur)));
            }
            if !c.is_whitespace() {
                toks.push(None);
            }
        }
    }
    if !cur.is_empty() {
        toks.push(Some(cur));
    }
    for tok in toks {
        let Some(w) = tok else {
            flush(&mut run, &mut pending, &mut out);
            continue;
        };
        let (stem, possessive) = match w.strip_suffix("'s").or_else(|| w.strip_suffix("’s")) {
            Some(s) => (s, true),
            None => (w.as_str(), false),
        };
        let lower = stem.to_lowercase();
        let capital = stem.chars().next().is_some_and(|c| c.is_uppercase());
        if capital && !stops.contains(lower.as_str()) && !is_request_word(&lower) {
            run.append(&mut pending);
            run.push(stem.to_string());
            if possessive {
                flush(&mut run, &mut pending, &mut out);
            }
        } else if !run.is_empty() && NAME_JOINERS.contains(&lower.as_str()) {
            pending.push(stem.to_string());
        } else {
            flush(&mut run, &mut pending, &mut out);
        }
    }
    flush(&mut run, &mut pending, &mut out);
    let mut seen = HashSet::new();
    out.retain(|p| !p.is_empty() && seen.insert(p.clone()));
    out
}

/// The question's first word when its capital may be only the sentence's: a capitalised Latin
/// word that opens the question alone (the next word is not capitalised; not a possessive, a
/// stop or a request word), as typed ("Cats", "Swords?", "Swords from Japan"). Phones and kiosk
/// keyboards capitalise the first letter of what is typed, so such a word may be a name
/// ("Vermeer pearl earring") or a common word ([`written_lowercase`] tells them apart in a
/// record). None otherwise ("Mona Lisa", "Rembrandt's Night Watch", "Do you have cats?").
pub fn opening_capital(query: &str) -> Option<&str> {
    let mut words = query
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '’' | '-')) || is_cjk(c))
        .filter(|w| !w.is_empty());
    let first = query.split_whitespace().next()?;
    let word = words.next()?;
    // The word must open the question: nothing but spaces before it.
    if !first.starts_with(word) || word.ends_with("'s") || word.ends_with("’s") {
        return None;
    }
    let lower = word.to_lowercase();
    let capital = word.chars().next().is_some_and(char::is_uppercase)
        && word.chars().skip(1).all(|c| !c.is_uppercase());
    if !capital || stop_sets().0.contains(lower.as_str()) || is_request_word(&lower) {
        return None;
    }
    let next_capital = words
        .next()
        .and_then(|w| w.chars().next())
        .is_some_and(char::is_uppercase);
    (!next_capital).then_some(word)
}

/// Whether `text` writes a word of index token `token` in lower case: a word of it that starts
/// with a lower-case letter has that token ("a cat lapping its food" writes `cat`, the token of
/// "Cats"; a record that writes "Vermeer" only so does not write `vermeer`).
pub fn written_lowercase(text: &str, token: &str) -> bool {
    let prefix: String = token.chars().take(2).collect();
    text.split(|c: char| !c.is_alphanumeric() || is_cjk(c))
        .filter(|w| w.chars().next().is_some_and(char::is_lowercase) && w.starts_with(&prefix))
        .any(|w| latin_tokens(w).first().is_some_and(|t| t == token))
}

/// `query` with the first letter of [`opening_capital`]'s word in lower case.
pub fn lower_opening(query: &str) -> String {
    let start = query.len() - query.trim_start().len();
    let mut out = query[..start].to_string();
    let mut rest = query[start..].chars();
    if let Some(c) = rest.next() {
        out.extend(c.to_lowercase());
    }
    out.extend(rest);
    out
}

/// Chinese frames after a maker's name ("吴昌硕亲笔画的", "郎世宁画的", "王羲之《兰亭序》",
/// "苏轼的《寒食帖》"), in Simplified (the question is normalised first).
const ZH_MAKER_FRAMES: &[&str] = &[
    "亲笔",
    "亲手",
    "画的",
    "写的",
    "书写的",
    "作的",
    "刻的",
    "雕的",
    "画过",
    "写过",
    // What someone made (吴昌硕画了什么？): the answer must be by them.
    "画了",
    "写了",
    "所画",
    "所写",
    "所书",
    "所作",
    "《",
    // A name and 的 before a word for works: what the person made ("张大千的泼墨山水画",
    // "吴昌硕的作品"), where 的 before anything else may be what a work shows (慈禧的画像).
    "的作品",
    "的画作",
    "的真迹",
    "的手迹",
    "的墨宝",
    "的墨迹",
    "的书法",
    "的字画",
    "的原作",
    "的山水",
    "的花鸟",
    "的泼墨",
    "的水墨",
];

/// English words after which capitalised words name a maker ("paintings by Picasso").
const EN_BY: &[&str] = &["by"];

/// The makers a question names, normalised: the owner of a possessive run of capitalised words
/// ("Leonardo da Vinci's Last Supper" → `leonardo da vinci`; not after "who", which asks for
/// the maker: "Who painted … Pharaoh's army"), capitalised words after "by"
/// ("anything by Frida Kahlo"), and the Chinese word right before a making frame
/// ("有没有吴昌硕亲笔画的…" → `吴昌硕`, "颜真卿的《祭侄文稿》" → `颜真卿`; a name of the
/// collection's user dictionary is kept whole). Used to check that the best hit is by them.
pub fn named_makers(query: &str, dict: &UserDict) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // English.
    let stops = &stop_sets().0;
    let words: Vec<&str> = query
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '’' | '-')) || is_cjk(c))
        .filter(|w| !w.is_empty())
        .collect();
    let capital = |w: &str| {
        w.chars().next().is_some_and(|c| c.is_uppercase())
            && !stops.contains(
                w.to_lowercase()
                    .trim_end_matches("'s")
                    .trim_end_matches("’s"),
            )
    };
    let mut run: Vec<&str> = Vec::new();
    // After "who" the question asks for the maker, so a possessive belongs to what the work
    // shows ("Who painted the enamel dish of Pharaoh's army …?" names no maker), as 谁 does
    // below.
    let mut asks_who = false;
    for (i, w) in words.iter().enumerate() {
        asks_who |= w.eq_ignore_ascii_case("who");
        let owner = w
            .strip_suffix("'s")
            .or_else(|| w.strip_suffix("’s"))
            .filter(|_| !asks_who);
        let joiner = !run.is_empty() && NAME_JOINERS.contains(&w.to_lowercase().as_str());
        if capital(w) || joiner {
            run.push(owner.unwrap_or(w));
            if owner.is_some() && capital(w) {
                out.push(normalize(&run.join(" ")));
                run.clear();
            }
        } else {
            run.clear();
        }
        if EN_BY.contains(&w.to_lowercase().as_str()) {
            // A particle between capitals belongs to the name ("by Lorenzo di Credi").
            let after = &words[i + 1..];
            let name: Vec<&str> = after
                .iter()
                .enumerate()
                .take_while(|(j, x)| {
                    capital(x)
                        || (*j > 0
                            && NAME_JOINERS.contains(&x.to_lowercase().as_str())
                            && after.get(j + 1).is_some_and(|n| capital(n)))
                })
                .map(|(_, x)| x.trim_end_matches("'s").trim_end_matches("’s"))
                .collect();
            if !name.is_empty() {
                out.push(normalize(&name.join(" ")));
            }
        }
    }
    // Chinese: the word before a making frame, when it is a name (the collection's, or a
    // person's name to jieba) and the question does not ask who made it (是谁写的).
    let norm = normalize(query);
    for frame in ZH_MAKER_FRAMES {
        for (at, _) in norm.match_indices(frame) {
            // The run of Chinese characters right before the frame.
            let head = norm[..at].trim_end_matches('的');
            let start = head
                .char_indices()
                .rev()
                .take_while(|(_, c)| is_cjk(*c))
                .last()
                .map_or(head.len(), |(i, _)| i);
            let before = &head[start..];
            if before.is_empty() || before.contains('谁') {
                continue;
            }
            let last = dict.segment(before).pop().and_then(|(piece, name)| {
                if name {
                    return Some(piece);
                }
                let tags = jieba().tag(&piece, true);
                let t = tags.last()?;
                t.tag.starts_with("nr").then(|| t.word.to_string())
            });
            if let Some(name) = last.filter(|n| (2..=4).contains(&n.chars().count())) {
                out.push(name);
            }
        }
    }
    let mut seen = HashSet::new();
    out.retain(|p| !p.is_empty() && seen.insert(p.clone()));
    out
}

/// jieba's tags of proper names: people, places, organisations, other names.
const PROPER_TAGS: [&str; 6] = ["nr", "nrfg", "nrt", "ns", "nt", "nz"];

/// The proper names a question gives, normalised: for English its named things
/// ([`named_phrases`]: "Terracotta Army", "Apollo"), for Chinese the collection's names of the
/// user dictionary and the words jieba tags as names of people, places or things (北京, 郎世宁,
/// 孙中山, 中山装). Used to check that a best hit in the other script was reached through a
/// name the question gives, not only through its common words (`embedded::signals::names_unmet`).
pub fn proper_names(query: &str, dict: &UserDict) -> Vec<String> {
    proper_names_with(query, dict, &|_| false)
}

/// [`proper_names`], and the Chinese words (of two characters or more) `also` calls names,
/// whatever jieba tags them (三星堆 is a numeral to jieba, a site to CC-CEDICT).
pub fn proper_names_with(query: &str, dict: &UserDict, also: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = named_phrases(query);
    let norm = normalize(query);
    for run in norm.split(|c: char| !is_cjk(c)).filter(|r| !r.is_empty()) {
        for (piece, name) in dict.segment(run) {
            if name {
                out.push(piece);
                continue;
            }
            for t in jieba().tag(&piece, true) {
                if t.word.chars().count() >= 2 && (PROPER_TAGS.contains(&t.tag) || also(t.word)) {
                    out.push(t.word.to_string());
                }
            }
        }
    }
    let mut seen = HashSet::new();
    out.retain(|p| !p.is_empty() && seen.insert(p.clone()));
    out
}

/// At most `max_chars` characters of `s`, with an ellipsis when cut.
pub fn clip(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn proper_names_of_either_language() {
        let d = UserDict::default();
        assert_eq!(
            proper_names("I want to see the Terracotta Army.", &d),
            ["terracotta army"]
        );
        let zh = proper_names("北京人的头盖骨化石在你们这里吗？", &d);
        assert!(zh.contains(&"北京".to_string()), "{zh:?}");
        assert!(proper_names("有没有郎世宁画的骏马图？", &d).contains(&"郎世宁".to_string()));
        assert!(
            proper_names("你们有没有唐三彩的骆驼？", &d)
                .iter()
                .all(|n| n != "骆驼")
        );
        assert!(proper_names("这件瓷器是什么年代的？", &d).is_empty());
    }

    #[test]
    fn british_spellings_meet_american_ones() {
        for (gb, us) in [
            ("knights' armour", "knights armor"),
            ("armoured", "armored"),
            ("jewellery", "jewelry"),
            ("colours", "colors"),
            ("theatre", "theater"),
            ("grey", "gray"),
            ("catalogue", "catalog"),
        ] {
            assert_eq!(index_text(gb), index_text(us), "{gb}");
        }
        // Words that only look alike stay apart.
        assert_ne!(index_text("hour"), index_text("hor"));
        assert_eq!(index_text("tour"), "tour");
    }
    use super::*;

    #[test]
    fn piecewise_nfkc_equals_nfkc_of_the_whole() {
        let reference = |s: &str| s.nfkc().collect::<String>();
        let mut texts: Vec<String> = [
            "",
            "e\u{301}",
            "abc\u{301}\u{327}def",
            "\u{301}leading mark",
            "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ１２３，",
            "青铜鼎，商代晚期。",
            "界\u{3099}",
            "<\u{338}=\u{338}",
            "ﬁne ﬂour ½ ㎏ Ⅻ ①",
            "\u{1100}\u{1161}\u{11a8} 가\u{11a8}",
            "é\u{301}e\u{302}\u{323}",
            "乾隆\u{fa10}丁\u{2f800}",
            "A\u{30a}ngström — “quoted” café",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let demo = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/collection/exhibits.jsonl"),
        )
        .unwrap();
        texts.extend(demo.lines().map(str::to_string));
        for t in &texts {
            assert_eq!(nfkc(t), reference(t), "{t:?}");
        }
    }

    #[test]
    fn the_thing_a_do_you_have_question_asks_for() {
        let cases: &[(&str, Option<&str>)] = &[
            ("Do you have sculptures?", Some("sculptures")),
            ("佛像", Some("佛像")),
            ("有没有佛像？", Some("佛像")),
            ("你们这里有印章吗？", Some("印章")),
            // A general word for an exhibit is not the thing asked for.
            ("请问有没有书法作品？", Some("书法")),
            ("有没有书法的作品吗？", Some("书法")),
            ("馆里有佛教的文物吗", Some("佛教")),
            ("有没有作品？", None),
            ("馆藏里有哪些书法作品？", Some("书法")),
            ("有哪些印章？", Some("印章")),
            ("Is there any maiolica here?", Some("maiolica")),
            ("有没有康熙年间烧的那种豇豆红釉的瓷器？", None),
            ("What is this?", None),
            // A wish's object, not the wish ("show me swords" was a bare keyword whole).
            ("Show me swords", Some("swords")),
            ("I'm interested in armor", Some("armor")),
            ("I love cats", Some("cats")),
            ("I like your museum", None),
            // Every wish and taste the offline answerer lists (`openings`): these were listed
            // with no keyword read.
            ("Can you show me swords?", Some("swords")),
            ("I really love cats", Some("cats")),
            ("Show me some vases", Some("vases")),
            // The thing before a word for exhibits, "about" it or not (三国的文物 was refused
            // while 三国 was answered).
            ("三国的文物", Some("三国")),
            ("有没有关于三国的文物？", Some("三国")),
            ("唐朝的东西", Some("唐朝")),
            ("三国", Some("三国")),
            // Anything about or from a topic (`openings::ABOUT`), the article left out.
            ("Is there anything about Confucius?", Some("confucius")),
            ("Anything from the Warring States?", Some("warring states")),
            (
                "Do you have anything about the Three Kingdoms?",
                Some("three kingdoms"),
            ),
            ("Do you have anything by Frida Kahlo?", None),
            (
                "Is there anything from the Krupp steelworks in Germany?",
                None,
            ),
            // What a thing is, asked of a word on a label (`defined_thing`).
            ("What is a pax?", Some("pax")),
            ("What's an inro?", Some("inro")),
            ("What are netsuke?", Some("netsuke")),
            ("What does tiraz mean?", Some("tiraz")),
            ("What is maiolica?", Some("maiolica")),
            ("功牌是什么？", Some("功牌")),
            ("什么是功牌？", Some("功牌")),
            ("六博是什么游戏？", Some("六博")),
            ("這是什麼？", None),
            ("这个是什么？", None),
            ("那件是什么东西？", None),
            ("What is the oldest?", None),
            ("What's new?", None),
            ("What are you?", None),
            ("What is jade made of?", None),
            ("What is the mummy's name?", None),
            ("What does the inscription on the bell mean?", None),
            ("What does this mean?", None),
            ("What do these mean?", None),
        ];
        for (q, want) in cases {
            let norm = normalize(q);
            let got = asked_keyword(&norm);
            assert_eq!(got, *want, "{q}");
        }
    }

    #[test]
    fn makers_named_by_a_question() {
        let d = UserDict::default();
        let cases: &[(&str, &[&str])] = &[
            ("有沒有吳昌碩親筆畫的花卉原作？", &["吴昌硕"]),
            ("有没有郎世宁画的骏马图？", &["郎世宁"]),
            ("你们这里有王羲之《兰亭序》的真迹吗？", &["王羲之"]),
            ("苏轼的《寒食帖》你们有没有？", &["苏轼"]),
            ("有没有颜真卿的《祭侄文稿》？", &["颜真卿"]),
            ("有没有徐悲鸿画的奔马？", &["徐悲鸿"]),
            ("有沒有張大千的潑墨山水畫？", &["张大千"]),
            ("齐白石的作品在哪里展出？", &["齐白石"]),
            ("吴昌硕画了什么？", &["吴昌硕"]),
            ("上面画了什么？", &[]),
            // 的 before what a work shows, or before a word of the thing, names no maker.
            ("有没有慈禧的画像？", &[]),
            ("房玄龄碑上的字为什么被凿坏了？", &[]),
            ("峄山刻石相传是谁写的？", &[]),
            ("圭峰定慧禪師碑是誰撰文書寫的？篆額又是誰？", &[]),
            ("三体石经是用哪三种字体刻的？", &[]),
            ("《苏俄在中国》这本书的初稿是谁执笔的？", &[]),
            ("那张老子像拓本，画的其实是谁？", &[]),
            (
                "Is Leonardo da Vinci's Last Supper fresco in this museum?",
                &["leonardo da vinci"],
            ),
            ("Do you have any paintings by Picasso?", &["picasso"]),
            ("Do you have anything by Frida Kahlo?", &["frida kahlo"]),
            // A particle between the capitals is the name's.
            (
                "Do you have anything by Lorenzo di Credi?",
                &["lorenzo di credi"],
            ),
            ("Do you have works by Van Dyck?", &["van dyck"]),
            ("Can I see Rembrandt's Night Watch?", &["rembrandt"]),
            (
                "Who painted the watercolor of the front of the National Library in Vienna?",
                &[],
            ),
            // The possessive is what the work shows; the question asks for the maker.
            (
                "Who painted the enamel dish of Pharaoh's army drowning in the Red Sea?",
                &[],
            ),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter(|(q, want)| named_makers(q, &d) != *want)
            .map(|(q, _)| {
                format!(
                    "{q}: {:?} {:?}",
                    named_makers(q, &d),
                    jieba()
                        .tag(&normalize(q), true)
                        .iter()
                        .map(|t| (t.word, t.tag))
                        .collect::<Vec<_>>()
                )
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    fn texts(terms: &[QueryTerm]) -> Vec<&str> {
        terms.iter().map(|t| t.text.as_str()).collect()
    }

    #[test]
    fn normalize_folds_script_width_case_and_accents() {
        assert_eq!(normalize("國立歷史博物館"), "国立历史博物馆");
        assert_eq!(normalize("ＡＢＣ１２３"), "abc123");
        assert_eq!(normalize("Café Déjà-vu"), "cafe deja-vu");
        assert_eq!(normalize("Bronze DING"), "bronze ding");
        // Simplified input is unchanged.
        assert_eq!(normalize("青铜鼎"), "青铜鼎");
        // Variants OpenCC leaves apart fold to one form.
        assert_eq!(normalize("溥心畬"), normalize("溥心畲"));
        assert_eq!(normalize("凌鴻勳"), normalize("淩鴻勛"));
        assert_eq!(normalize("袞"), normalize("衮"));
    }

    #[test]
    fn runs_split_cjk_words_and_separators() {
        let n = normalize("阿波羅12號, TPL三個字母");
        assert_eq!(
            runs(&n).collect::<Vec<_>>(),
            vec![
                Run::Cjk("阿波罗"),
                Run::Word("12"),
                Run::Cjk("号"),
                Run::Word("tpl"),
                Run::Cjk("三个字母"),
            ]
        );
    }

    #[test]
    fn the_fast_t2s_converts_as_opencc_does() {
        let opencc = t2s().expect("OpenCC tables");
        let fast = FastT2s::new();
        let same = |t: &str| assert_eq!(fast.convert(t), opencc.convert(t), "{t:?}");
        // Every key (phrases like 乾隆 keep characters the character table changes).
        for (k, _) in FastT2s::table(include_str!("opencc/TSCharacters.txt"))
            .chain(FastT2s::table(include_str!("opencc/TSPhrases.txt")))
        {
            same(k);
        }
        // The demo collection's text, NFKC'd as `normalize` hands it over, and the questions.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection");
        for (_, e) in crate::retrieval::ingest::parse_file(&root.join("exhibits.jsonl"))
            .unwrap()
            .rows
        {
            for t in [e.title, e.maker, e.period, e.medium, e.description] {
                same(&nfkc(&t));
            }
        }
        for f in ["dev_queries.jsonl", "dev_queries_v2.jsonl"] {
            for line in std::fs::read_to_string(root.join(f)).unwrap().lines() {
                same(line);
            }
        }
        // Random texts of keys' characters, keys' prefixes, phrases and other characters next
        // to each other (a deterministic generator).
        let pieces: Vec<String> = FastT2s::table(include_str!("opencc/TSPhrases.txt"))
            .flat_map(|(k, v)| {
                let c: Vec<char> = k.chars().collect();
                [
                    k.to_string(),
                    v.to_string(),
                    c[..c.len() - 1].iter().collect(),
                ]
            })
            .chain(
                FastT2s::table(include_str!("opencc/TSCharacters.txt"))
                    .step_by(7)
                    .map(|(k, _)| k.to_string()),
            )
            .chain(["a", " ", "。", "的", "国", "1", "é"].map(String::from))
            .collect();
        let mut x: u64 = 17;
        for _ in 0..20_000 {
            let mut t = String::new();
            for _ in 0..6 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                t.push_str(&pieces[(x >> 33) as usize % pieces.len()]);
            }
            same(&t);
        }
        assert!(t2s_convert("").is_some());
    }

    #[test]
    fn index_text_is_the_tokens_joined() {
        // The demo collection's every field, and edge cases: lone characters, stop words only,
        // a run of two, digits, mixed scripts, full-width forms.
        let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/collection/exhibits.jsonl");
        let rows = crate::retrieval::ingest::parse_file(&demo).unwrap().rows;
        let mut texts: Vec<String> = rows
            .into_iter()
            .flat_map(|(_, e)| {
                [
                    e.title,
                    e.maker,
                    format!("{} {}", e.period, e.date),
                    e.medium,
                    e.description,
                    e.dimensions,
                    e.id,
                ]
            })
            .collect();
        texts.extend(
            [
                "",
                " ",
                "鼎",
                "the of a",
                "青銅",
                "青銅器 and the Bronzes 1990s",
                "a 鼎 b 山水畫",
                "ＡＢＣ１２３ café 國立歷史博物館藏",
                "x",
                "3",
                "的",
                "溥心畬 勳章",
            ]
            .map(String::from),
        );
        for t in &texts {
            // Twice: the second time from the memo of word tokens.
            assert_eq!(index_text(t), index_tokens(t).join(" "), "{t:?}");
            assert_eq!(index_text(t), index_tokens(t).join(" "), "{t:?}");
        }
    }

    #[test]
    fn index_tokens_bigrams_long_words_and_stems() {
        let t = index_tokens("Carved ivory figures of the dwarfs");
        assert_eq!(t, vec!["carv", "ivori", "figur", "dwarf"]);
        let t = index_tokens("腳踏車");
        assert!(t.contains(&"脚踏".to_string()) && t.contains(&"踏车".to_string()));
        assert!(t.contains(&"脚踏车".to_string()), "{t:?}");
        assert_eq!(index_tokens("鼎"), vec!["鼎"]);
    }

    #[test]
    fn contractions_unfold_into_the_words_they_stand_for() {
        for (q, want) in [
            ("we're interested in armor", "we interested in armor"),
            ("i’ve seen it, they'll come", "i seen it, they come"),
            (
                "don't you have swords? isn't it",
                "not you have swords? not it",
            ),
            ("i'm into jade", "i into jade"),
            // Possessives, elisions and a quote mark stay as written.
            (
                "rembrandt's o'clock d'este 'the vase'",
                "rembrandt's o'clock d'este 'the vase'",
            ),
        ] {
            assert_eq!(unfold_contractions(q), want, "{q}");
        }
        let terms = |q: &str| {
            query_terms(q)
                .into_iter()
                .map(|t| t.text)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            terms("We're interested in Japanese armor"),
            ["japanes", "armor"]
        );
        assert_eq!(terms("Don't you have swords?"), ["sword"]);
    }

    #[test]
    fn query_terms_drop_question_and_stop_words() {
        let t = query_terms("Who painted the portrait of the young woman?");
        assert_eq!(texts(&t), vec!["paint", "portrait", "young", "woman"]);
        let t = query_terms("这件青铜鼎是什么年代的");
        assert_eq!(texts(&t), vec!["青铜", "铜鼎", "年代"]);
        // Question frames do not become terms.
        let t = query_terms("这件青铜鼎是不是唐代的？");
        assert_eq!(texts(&t), vec!["青铜", "铜鼎", "唐代"]);
        let t = query_terms("峄山刻石一共有几个字？");
        assert!(!texts(&t).iter().any(|x| x.contains('共')), "{t:?}");
        // Traditional and Simplified questions give the same terms.
        assert_eq!(
            query_terms("這件青銅鼎是什麼年代的"),
            query_terms("这件青铜鼎是什么年代的")
        );
    }

    /// A one-character stop word jieba cut off the character after it is offered as a bigram
    /// (地券 in 石头地券), with the lone character's term it would replace; the terms keep the
    /// particle reading, and a character followed by more of its span is not lone.
    #[test]
    fn a_stop_character_cut_from_a_word_is_offered_joined() {
        let a = analyse_question("宋代的石头地券", &UserDict::default());
        assert_eq!(texts(&a.terms), ["宋代", "石头", "券"]);
        assert_eq!(
            a.joins,
            [StopJoin {
                bigram: "地券".into(),
                lone: Some(QueryTerm {
                    text: "券".into(),
                    prefix: true,
                }),
            }]
        );
        // 的 before a word of two characters, and a particle before a verb of one that jieba
        // leaves in a span: nothing lone to replace, or nothing offered.
        assert!(
            analyse_question("宋代的石头", &UserDict::default())
                .joins
                .is_empty()
        );
        let slow = analyse_question("他慢慢地走过来", &UserDict::default());
        assert!(slow.joins.iter().all(|j| j.lone.is_none()), "{slow:?}");
        // 的 is a particle before a word of one character.
        let painted = analyse_question("有没有吴昌硕画的画？", &UserDict::default());
        assert!(painted.joins.is_empty(), "{painted:?}");
    }

    /// The question frames of issue 17 add no term: framed and bare questions search alike.
    #[test]
    fn question_frames_add_no_terms() {
        for (framed, bare) in [
            ("这件青铜鼎是不是唐代的？", "青铜鼎 唐代"),
            ("有没有青铜鼎？", "青铜鼎"),
            ("How old is the mummy?", "mummy"),
            ("How tall is the old statue?", "old statue"),
            ("有沒有青銅鼎？", "青铜鼎"),
            ("青铜鼎是哪一年铸造的？", "青铜鼎 铸造"),
            ("峄山刻石一共有几个字？", "峄山刻石 字"),
            ("峄山刻石讲的是什么？", "峄山刻石"),
            ("为什么青铜鼎上有铭文？", "青铜鼎 铭文"),
            ("那种青铜鼎的铭文", "青铜鼎 铭文"),
            ("请问你们这里有青铜鼎吗", "青铜鼎"),
            ("有没有清朝的东西？", "清朝"),
            ("有哪些书法作品？", "书法"),
            ("有没有唐朝的文物？", "唐朝"),
            ("青铜鼎在这里展出吗？", "青铜鼎"),
            ("有没有陈列青铜鼎？", "青铜鼎"),
            ("青铜鼎（以前叫铜鼎）", "青铜鼎 铜鼎"),
            ("石鼓文为什么又叫猎碣？", "石鼓文 猎碣"),
            ("峄山刻石相传是谁写的？", "峄山刻石相传"),
            ("这幅画是谁画的", "这幅画"),
            // What someone made: the verb and 了/过 ask.
            ("胡适写了什么？", "胡适"),
            ("齐白石画过哪些画？", "齐白石 画"),
            // After a thing the verb is what it says, and stays.
            ("题的诗写了什么？", "题 诗写"),
            (
                "有没有康熙年间烧的那种豇豆红釉的瓷器？",
                "康熙年间 豇豆红釉 瓷器",
            ),
            ("溥心畬是谁？", "溥心畬"),
            ("溥心畬是什么人", "溥心畬"),
            // Pointing (a measure word after 这/那) and asking what a thing is for.
            ("那座塔", "塔"),
            ("那枚勋章是干什么用的？", "勋章"),
            ("这只碗有什么用", "碗"),
            ("这套瓷器用来干嘛", "瓷器"),
            ("這把劍是做什麼的？", "剑"),
            ("請問溥心畬是誰", "溥心畬"),
            ("Who was Shibata Zeshin?", "Shibata Zeshin"),
            // Requests to be shown something (a kiosk visitor's way of asking).
            ("Show me some lacquer boxes", "lacquer boxes"),
            ("I want to see armor", "armor"),
            ("I'd like to see some vases", "vases"),
            ("Where can I see the lacquer boxes?", "lacquer boxes"),
            ("Can you show me a lacquer box?", "lacquer box"),
            ("I'm looking for Japanese prints", "Japanese prints"),
            ("我想看瓷器", "瓷器"),
            ("给我看看青铜器", "青铜器"),
            ("带我去看书法", "书法"),
            ("有什么瓷器可以看？", "瓷器"),
            // Asking who and asking how two things differ.
            ("中华粥会最早是哪几个人发起的？", "中华粥会最早 发起"),
            ("二等大綬雲麾勳章有哪些人拿過？", "二等大綬雲麾勳章 拿過"),
            ("紅契和白契有什麼不一樣？", "紅契 白契"),
            ("清朝的诰命和敕命到底有什么区别？", "清朝 诰命 敕命"),
        ] {
            assert_eq!(
                texts(&query_terms(framed)),
                texts(&query_terms(bare)),
                "{framed}"
            );
        }
    }

    #[test]
    fn a_request_at_the_start_names_nothing() {
        for q in [
            "Show me armor",
            "I'd like to see some vases",
            "I’m looking for Japanese prints",
            "Look at this",
        ] {
            let n = named_phrases(q);
            assert!(
                !n.iter()
                    .any(|x| ["show", "i'd", "i’m", "look"].contains(&x.as_str())),
                "{q}: {n:?}"
            );
        }
        assert_eq!(
            named_phrases("Show me the Night Watch"),
            vec!["night watch"]
        );
    }

    /// After the question's first content word, "show" and "see" are content again.
    #[test]
    fn request_words_later_in_a_question_are_kept() {
        let q = query_terms("Which picture shows a ruler with a looking glass?");
        let t = texts(&q);
        assert!(t.contains(&"show") && t.contains(&"look"), "{t:?}");
        let q = query_terms("于右任站在讲台后面看文件的那张照片");
        assert!(texts(&q).iter().any(|x| x.contains('看')), "{q:?}");
        let q = query_terms("瓷器 带钩");
        assert!(texts(&q).iter().any(|x| x.contains('带')), "{q:?}");
    }

    #[test]
    fn a_lone_character_becomes_a_prefix_term() {
        let t = query_terms("鼎是谁的");
        assert_eq!(
            t,
            vec![QueryTerm {
                text: "鼎".into(),
                prefix: true
            }]
        );
        assert!(t[0].matches("鼎铭") && !t[0].matches("铜鼎"));
    }

    #[test]
    fn fts_syntax_in_user_text_is_never_syntax() {
        for q in [
            "\"unbalanced",
            "a* OR b",
            "NEAR(x y)",
            "-ivory",
            "col:val",
            "^start",
            "AND OR NOT",
            "(((",
        ] {
            let terms = query_terms(q);
            for t in &terms {
                assert!(
                    t.text.chars().all(|c| c.is_alphanumeric()),
                    "{q:?} gave {t:?}"
                );
            }
        }
        assert!(query_terms("").is_empty());
        assert!(query_terms("?!  …").is_empty());
        assert!(query_terms("the of and what").is_empty());
    }

    #[test]
    fn huge_queries_are_capped() {
        let q: String = (0..5000).map(|i| format!("word{i} ")).collect();
        assert_eq!(query_terms(&q).len(), MAX_QUERY_TERMS);
    }

    #[test]
    fn sentences_split_on_both_scripts_without_breaking_decimals() {
        let s = sentences(
            "This jar measures 3.5 cm and was made ca. 1500 in China. It was used for wine! 這是一件唐代的墓誌拓片，出土於洛陽。短。",
        );
        // A piece shorter than 25 characters joins its neighbour.
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains("3.5 cm") && s[0].ends_with("China."), "{s:?}");
        assert!(
            s[1].starts_with("It was") && s[1].ends_with("短。"),
            "{s:?}"
        );
    }

    #[test]
    fn a_question_mark_inside_brackets_ends_no_sentence() {
        let s = sentences(
            "Eight views, from Mountain Market (????) to Night Rain (?) by the river, fill the scroll. Is it his best work? Many think so, and say it often.",
        );
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].ends_with("fill the scroll."), "{s:?}");
        assert!(s[1].starts_with("Is it his best work? Many"), "{s:?}");
        // A list's item numbers end no sentence; a year does.
        let s = sentences(
            "Sesson painted the scenes in this order: 1. Mountain Market 2. Night Rain. It was made around 1564. Later painters copied it.",
        );
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].ends_with("2. Night Rain."), "{s:?}");
        assert!(s[1].starts_with("It was made around 1564. Later"), "{s:?}");
    }

    #[test]
    fn an_opening_capital_may_be_the_keyboards() {
        for (q, want) in [
            ("Cats", Some("Cats")),
            ("  Swords?", Some("Swords")),
            ("Swords from Japan", Some("Swords")),
            ("Vermeer pearl earring", Some("Vermeer")),
            ("Mona Lisa", None),
            ("Rembrandt's Night Watch", None),
            ("Do you have cats?", None),
            ("Show me swords", None),
            ("cats", None),
            ("“Cats”", None),
            ("NASA", None),
        ] {
            assert_eq!(opening_capital(q), want, "{q}");
        }
        assert_eq!(lower_opening("  Swords?"), "  swords?");
    }

    #[test]
    fn a_word_written_in_lower_case_is_common() {
        let token = |w: &str| latin_tokens(w).pop().unwrap();
        let rec = "An old woman asleep. Beside her is a cat lapping its food.";
        assert!(written_lowercase(rec, &token("Cats")));
        assert!(!written_lowercase(
            "A portrait by Vermeer of Delft.",
            &token("Vermeer")
        ));
        assert!(!written_lowercase("Two Cats Playing", &token("Cats")));
        assert!(!written_lowercase("a catalogue", &token("Cats")));
    }

    #[test]
    fn named_phrases_are_quoted_spans_and_capitalised_runs() {
        assert_eq!(
            named_phrases("Can I see Rembrandt's Night Watch?"),
            vec!["rembrandt", "night watch"]
        );
        assert_eq!(
            named_phrases("Is the Book of Kells here?"),
            vec!["book of kells"]
        );
        assert_eq!(
            named_phrases("苏轼的《寒食帖》你们有没有？"),
            vec!["寒食帖"]
        );
        assert_eq!(
            named_phrases("“石虎”那两个大字相传是谁刻的？"),
            vec!["石虎"]
        );
        assert!(named_phrases("Who made the little lacquer box?").is_empty());
        assert!(named_phrases("").is_empty());
    }

    #[test]
    fn a_bare_keyword_is_a_few_words_with_no_question_in_them() {
        for q in [
            "ivory",
            "maiolica",
            "japanese armor",
            "st sebastian.",
            "瓷器",
            "甲骨文",
            "詹天佑",
            "qur'an",
            "o’keeffe",
            "toulouse-lautrec",
        ] {
            assert!(is_bare_keyword(q), "{q}");
        }
        for q in [
            "",
            "ivory?",
            "who",
            "hello",
            "thank you",
            "a japanese lacquer writing box",
            "1001",
            "cool",
            "sorry",
            "oh nice",
            "好的",
            "哇塞",
            "器",
            "青铜器？",
            "詹天佑是谁",
            "你好",
            "康熙年间烧的豇豆红釉瓷器",
            "badger 鼎",
            "show me swords",
            "i love cats",
            "what's this",
            "i'm bored",
            "that’s cool",
            "monet's",
            "don't",
            "-ivory",
            "art--deco",
            "o'",
        ] {
            assert!(!is_bare_keyword(q), "{q}");
        }
    }

    #[test]
    fn who_is_questions_and_biographies() {
        assert!(is_who_is("溥心畬是谁？"));
        assert!(is_who_is("谁是溥心畬"));
        assert!(is_who_is("Who was Shibata Zeshin?"));
        assert!(!is_who_is("峄山刻石相传是谁写的？"));
        assert!(!is_who_is("Who made the little lacquer box?"));
        assert!(!is_who_is("是谁"));
        assert!(has_life_span("溥儒(1896－1963)，字心畬"));
        assert!(has_life_span("born 1820-1891 in Edo"));
        assert!(!has_life_span("dated 1896, 1963 copies"));
    }

    #[test]
    fn the_user_dictionary_keeps_names_whole() {
        let d = UserDict::build(
            ["于右任", "王之涣、李斯", "國民政府", "是谁", "Jokasai"],
            [],
        );
        // Makers split on separators; function words alone and Latin names are not entries.
        assert_eq!(d.len(), 4, "{d:?}");
        // 于 and 之 are function words: jieba's cut drops them and the name loses a bigram.
        let plain = texts(&query_terms("于右任写的字")).join(" ");
        let t = query_terms_with("于右任写的字", &d);
        assert!(texts(&t).contains(&"于右"), "{t:?} (without: {plain})");
        let t = query_terms_with("王之涣的诗", &d);
        assert!(
            texts(&t).contains(&"王之") && texts(&t).contains(&"之涣"),
            "{t:?}"
        );
        // Traditional in the question, as in the record: one form.
        assert!(texts(&query_terms_with("國民政府的公文", &d)).contains(&"国民"));
        // An empty dictionary changes nothing.
        assert_eq!(
            query_terms_with("于右任写的字", &UserDict::default()),
            query_terms("于右任写的字")
        );
        // Stored with the index as JSON.
        assert_eq!(UserDict::from_json(&d.to_json()), Some(d.clone()));
        assert_eq!(UserDict::from_json("not json"), None);
    }

    #[test]
    fn taboo_characters_fold_in_names_only() {
        // The collection writes the Kangxi taboo form (元 for 玄): a question with 玄 searches
        // the collection's form, and the reverse.
        let d = UserDict::build(["房元齡"], []);
        assert_eq!(
            d.segment(&normalize("房玄齡碑")),
            vec![("房元龄".to_string(), true), ("碑".to_string(), false)]
        );
        let t = query_terms_with("房玄龄碑上的字", &d);
        assert!(
            texts(&t).contains(&"房元") && texts(&t).contains(&"元龄"),
            "{t:?}"
        );
        let d = UserDict::build(["玄燁"], []);
        assert!(texts(&query_terms_with("元燁的诗", &d)).contains(&"玄烨"));
        // Outside names nothing folds: 元代 stays 元代, 玄武 stays 玄武.
        let t = query_terms_with("元代的玄武纹铜镜", &d);
        assert!(
            texts(&t).contains(&"元代") && texts(&t).contains(&"玄武"),
            "{t:?}"
        );
        assert_eq!(normalize("玄武"), "玄武");
    }

    /// Strings drawn from a pool of characters that meet at the pieces' edges: ASCII letters
    /// before combining marks, precomposed and decomposed accents, Hangul jamo that compose,
    /// CJK, Greek capital sigma (final or not), title case and dotted capital I.
    fn tricky_texts() -> Vec<String> {
        let pool: Vec<&str> = vec![
            "a",
            "E",
            " ",
            "-",
            "1",
            "e\u{301}",
            "\u{301}",
            "\u{323}\u{302}",
            "é",
            "Å",
            "ǅ",
            "İ",
            "Σ",
            "σ",
            "ΑΣ",
            "ß",
            "ﬁ",
            "Việt",
            "\u{1100}",
            "\u{1161}",
            "\u{11A8}",
            "한",
            "鼎",
            "畬",
            "勳",
            "袞",
            "Ⅻ",
            "Ω",
            "\u{2126}",
            "ö",
            "o\u{308}\u{301}",
            "ǖ",
            "ㄧ",
        ];
        let mut state = 7u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        let mut out: Vec<String> = pool.iter().map(|s| s.to_string()).collect();
        for _ in 0..5000 {
            let n = 1 + next() % 8;
            out.push((0..n).map(|_| pool[next() % pool.len()]).collect());
        }
        out
    }

    #[test]
    fn strip_marks_is_the_whole_text_normalised_at_once() {
        for t in tricky_texts() {
            let whole: String = t.nfd().filter(|c| !is_combining_mark(*c)).nfc().collect();
            assert_eq!(strip_marks(&t), whole, "{t:?}");
        }
    }

    #[test]
    fn lowercase_is_the_standard_one() {
        for t in tricky_texts() {
            assert_eq!(lowercase(t.clone()), t.to_lowercase(), "{t:?}");
        }
    }

    #[test]
    fn variants_fold_and_nothing_else_moves() {
        assert_eq!(fold_variants("溥心畬 勳 袞 abc".into()), "溥心畲 勋 衮 abc");
        assert_eq!(fold_variants("溥心畲 bronze".into()), "溥心畲 bronze");
    }

    #[test]
    fn scripts_are_told_apart_and_converted() {
        assert_eq!(script_of("這件青銅鼎是什麼年代的"), Script::Traditional);
        assert_eq!(script_of("这件青铜鼎是什么年代的"), Script::Simplified);
        assert_eq!(script_of("鼎"), Script::Neutral);
        assert_eq!(script_of("bronze"), Script::Neutral);
        assert_eq!(to_simplified("國立歷史博物館"), "国立历史博物馆");
        assert_eq!(to_traditional("国立历史博物馆"), "國立歷史博物館");
        // Already in the wanted script: quoted exactly as stored.
        assert_eq!(in_script("臺灣通史", Script::Traditional), "臺灣通史");
        assert_eq!(in_script("臺灣通史", Script::Simplified), "台湾通史");
        assert_eq!(in_script("Inro 印籠", Script::Simplified), "Inro 印笼");
    }

    #[test]
    fn titles_between_title_marks() {
        assert_eq!(
            marked_titles("有没有颜真卿的《祭侄文稿》？"),
            vec!["祭侄文稿"]
        );
        assert_eq!(
            marked_titles("〈蘭亭序〉和《寒食帖》"),
            vec!["寒食帖", "兰亭序"]
        );
        assert!(marked_titles("“石虎”那两个大字").is_empty());
        assert!(marked_titles("《未闭合").is_empty());
    }

    #[test]
    fn names_are_found_whole() {
        assert!(names_whole("溥儒(1896－1963)，字心畬", "溥儒"));
        assert!(names_whole(
            "Peter Carl Fabergé (Russian, 1846-1920)",
            "Fabergé"
        ));
        assert!(names_whole("House of Faberge", "faberge"));
        assert!(names_whole(
            "Shibata Zeshin (Japanese, 1807-1891)",
            "Shibata Zeshin"
        ));
        assert!(!names_whole("The Annunciation", "Ann"));
        assert!(!names_whole("Zeshin Shibata", "Shibata Zeshin"));
        assert!(!names_whole("anything", ""));
        assert!(life_span_follows("…溥儒(1896－1963)，字心畬…", "溥儒"));
        // A bracket right after the name may give its spelling first.
        assert!(life_span_follows(
            "詹天佑（JemeTienYow，1861－1919），字眷誠",
            "詹天佑"
        ));
        assert!(!life_span_follows(
            "詹天佑（字眷誠），原為凌鴻勛（1894－1981）捐贈",
            "詹天佑"
        ));
        assert!(life_span_follows(
            "by Peter Carl Fabergé (Russian, 1846-1920)",
            "Fabergé"
        ));
        assert!(!life_span_follows(
            "為溥儒所撰之七言聯詩。王澍(1668-1743)",
            "溥儒"
        ));
        assert!(!life_span_follows(
            "仿王羲之，作者王澍(1668-1743)",
            "王羲之"
        ));
        assert!(!life_span_follows("Fabergéx (1846-1920)", "Fabergé"));
        assert_eq!(
            who_is_subject("Who is Leonardo da Vinci?").as_deref(),
            Some("Leonardo da Vinci")
        );
        assert_eq!(who_is_subject("Who is da Vinci?"), None);
    }

    #[test]
    fn who_is_subjects() {
        assert_eq!(who_is_subject("溥心畬是谁？").as_deref(), Some("溥心畬"));
        assert_eq!(who_is_subject("誰是溥心畬").as_deref(), Some("溥心畬"));
        assert_eq!(
            who_is_subject("請問溥心畬是誰？").as_deref(),
            Some("溥心畬")
        );
        assert_eq!(
            who_is_subject("请问，谁是溥心畬").as_deref(),
            Some("溥心畬")
        );
        assert_eq!(
            who_is_subject("Who was Shibata Zeshin?").as_deref(),
            Some("Shibata Zeshin")
        );
        assert_eq!(who_is_subject("Who made the box?"), None);
        // Who made a work, not who someone is.
        assert_eq!(who_is_subject("《四朝鈔幣圖錄》的作者是誰？"), None);
        assert_eq!(who_is_subject("这幅画的作者是谁？"), None);
        assert_eq!(who_is_subject("这本书的主人是谁"), None);
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("青铜鼎器", 2), "青铜…");
        assert_eq!(clip("abc", 5), "abc");
    }
}

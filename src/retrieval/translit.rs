//! A cross-lingual bridge without a translation model: pinyin transliteration (issue 17).
//!
//! Names, reign periods, places and many art terms cross between Chinese and English by their
//! pinyin: 康熙 ↔ Kangxi, 歐陽庚 ↔ Ouyang Geng, 三彩 ↔ sancai, 钱沣 ↔ Qian Feng. A question
//! gets **bridges**: index tokens of the other script that spell one of its terms, each with the
//! question terms it stands for. Coverage (`embedded.rs`) counts a term as found when the term
//! itself or one of its bridges (all of its tokens) is in the record; bridges add no weight of
//! their own, so a question's total is unchanged and a record in the question's own language is
//! scored exactly as before.
//!
//! - **Chinese question → English records**: every two- and three-character stretch of a
//!   Chinese run is read in pinyin (every reading of a character with several) and joined
//!   ("kangxi", "sancai", "shibiao"); the joined word is a bridge when the collection holds it as
//!   a token. A stretch that starts with a common surname is also read as a name written in two
//!   words, surname and given name ("qian" + "feng" for 钱沣): both
//!   tokens must be in the record.
//! - **English question → Chinese records**: runs of capitalised words that can be read
//!   entirely as pinyin syllables and that the English stemmer leaves alone (names, not English
//!   words: "Chinese" stems to "chines") are split into syllables. The run is one bridge: every
//!   pair of adjacent syllables ("ou yang", "yang geng") must be a two-character token of the
//!   record read that way (欧阳 and 阳庚), so a name of common syllables ("Mona Lisa") does not
//!   match scattered words. A lone one-syllable word ("Tang") bridges nothing: too many English
//!   words are also one pinyin syllable.
//!
//! Not covered: Wade–Giles ("Ch'ing", "Chiang Kai-shek") and anything the two languages do not
//! spell alike; translations (Boxers ↔ 义和团, Gemini ↔ 双子星) are [`super::dictionary`]'s
//! bridges, of the same [`Bridge`] type ([`BridgeKind::Translated`]); English synonyms
//! (timepiece → watch) are [`super::thesaurus`]'s ([`BridgeKind::Synonym`]).

use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use pinyin::ToPinyinMulti;
use rustc_hash::FxHashSet;

use super::text::{self, QueryTerm, Run};
use crate::store::StoreError;
use crate::store::collection::CollectionStore;

/// A bridge: index tokens of the other script standing for question terms. It holds for a
/// record when each of its clauses has one of its tokens in the record.
#[derive(Debug, Clone, PartialEq)]
pub struct Bridge {
    pub all_of: Vec<Vec<String>>,
    /// Indices of the question terms it stands for.
    pub sources: Vec<usize>,
    /// Largest document frequency of its tokens.
    pub df: f64,
    /// How it was made.
    pub kind: BridgeKind,
}

/// Where a [`Bridge`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeKind {
    /// The pinyin spelling of a name (this module).
    Spelt,
    /// A translation from the bilingual dictionary ([`super::dictionary`]).
    Translated,
    /// A synonym or more specific word of the question's own language ([`super::thesaurus`]).
    Synonym,
    /// A looser translation ([`super::dictionary`]): the noun a sense names after a hyphenated
    /// modifier (剑 → sword), the Chinese words for kinds of an English term (rubbing → 拓本).
    /// Like a synonym, it reorders the answer and never reaches the no-answer signals.
    Loose,
}

/// Readings of one character tried (the first ones the table lists).
const MAX_READINGS: usize = 3;
/// Segmentations of one Latin word into syllables tried.
const MAX_SEGMENTATIONS: usize = 4;
/// Two-character tokens listed per first character of a syllable pair.
const TERMS_PER_CHAR: usize = 400;
/// Tokens kept per syllable pair (most frequent first).
const BRIDGES_PER_PAIR: usize = 16;

/// The hundred most common Chinese surnames (one character, Simplified), as the national
/// statistics rank them; never extended for a question's name (a name whose surname is not here
/// still bridges when it is written as one word).
/// The character that ends a Chinese kiln's name (钧窑, 定窑, 景德镇窑), normalised: its wares
/// are named in English by the place's pinyin and "ware" (Jun ware, Ding ware). "你們這裡有
/// 鈞窯的瓷器嗎？" was refused while the collection holds a Jun-ware spittoon and a panel of Jun
/// ware shards: 钧窑 has no entry in CC-CEDICT and "junyao" is no English token.
const KILN: char = '窑';

/// The index token of "ware" (a kiln's [`KILN`] bridge).
const WARE: &str = "ware";

const SURNAMES: &str = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤";

/// Plain pinyin readings of a character (no tones, ü written u), at most [`MAX_READINGS`].
pub fn readings(c: char) -> Vec<String> {
    let Some(multi) = c.to_pinyin_multi() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for p in multi.into_iter().take(MAX_READINGS) {
        let r = p.plain().replace(['ü', 'v'], "u");
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

struct Tables {
    syllables: HashSet<String>,
    longest: usize,
    /// Syllable → the Simplified characters read so (the form the index holds).
    chars: HashMap<String, Vec<char>>,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut syllables = HashSet::new();
        let mut chars: HashMap<String, Vec<char>> = HashMap::new();
        for u in 0x4E00u32..=0x9FFF {
            let Some(c) = char::from_u32(u) else { continue };
            let rs = readings(c);
            if rs.is_empty() {
                continue;
            }
            let simplified = text::to_simplified(&c.to_string()) == c.to_string();
            for r in rs {
                if simplified {
                    chars.entry(r.clone()).or_default().push(c);
                }
                syllables.insert(r);
            }
        }
        let longest = syllables.iter().map(String::len).max().unwrap_or(0);
        Tables {
            syllables,
            longest,
            chars,
        }
    })
}

/// Every way (at most [`MAX_SEGMENTATIONS`], fewest syllables first) to read a lower-case ASCII
/// word as pinyin syllables; empty when there is none.
pub fn segmentations(word: &str) -> Vec<Vec<String>> {
    fn go(rest: &str, t: &Tables, cur: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if out.len() >= 16 {
            return;
        }
        if rest.is_empty() {
            out.push(cur.clone());
            return;
        }
        for n in (1..=t.longest.min(rest.len())).rev() {
            if !rest.is_char_boundary(n) {
                continue;
            }
            let head = &rest[..n];
            if t.syllables.contains(head) {
                cur.push(head.to_string());
                go(&rest[n..], t, cur, out);
                cur.pop();
            }
        }
    }
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    go(word, tables(), &mut Vec::new(), &mut out);
    out.sort_by_key(Vec::len);
    out.truncate(MAX_SEGMENTATIONS);
    out
}

/// The index token of a Latin word (stemmed like the index), if it is one.
fn latin_token(word: &str) -> Option<String> {
    let t = text::query_terms(word);
    match t.as_slice() {
        [one] if !one.prefix => Some(one.text.clone()),
        _ => None,
    }
}

/// The bridges of a question whose terms are `terms` ([`text::query_terms_with`]).
pub fn bridges(
    store: &CollectionStore,
    query: &str,
    terms: &[QueryTerm],
) -> Result<Vec<Bridge>, StoreError> {
    let mut df = |t: &str| store.doc_freq(t, false).map(|d| d as f64);
    let mut out = han_to_latin(query, terms, &mut df)?;
    let mut list = |c: char| store.terms_starting_with(c, TERMS_PER_CHAR);
    out.extend(latin_to_han(query, terms, &mut list)?);
    Ok(out)
}

fn index_of(terms: &[QueryTerm], text: &str) -> Option<usize> {
    terms.iter().position(|t| !t.prefix && t.text == text)
}

fn push(out: &mut Vec<Bridge>, b: Bridge) {
    if b.sources.is_empty() {
        return;
    }
    if let Some(old) = out.iter_mut().find(|o| o.all_of == b.all_of) {
        for s in b.sources {
            if !old.sources.contains(&s) {
                old.sources.push(s);
            }
        }
    } else {
        out.push(b);
    }
}

/// Joined pinyin spellings of a stretch of characters (every combination of readings).
fn spellings(chars: &[char]) -> Vec<String> {
    let mut out = vec![String::new()];
    for &c in chars {
        let rs = readings(c);
        if rs.is_empty() {
            return Vec::new();
        }
        out = out
            .iter()
            .flat_map(|p| rs.iter().map(move |r| format!("{p}{r}")))
            .collect();
    }
    out
}

/// The bridges of a stretch of characters spelt in pinyin and joined (every reading), each
/// spelling the collection holds as a token; with `ware` (the document frequency of
/// [`WARE`]), a kiln's: the spelling and "ware" both required.
fn push_spelt(
    out: &mut Vec<Bridge>,
    stretch: &[char],
    sources: &[usize],
    ware: Option<f64>,
    df: &mut dyn FnMut(&str) -> Result<f64, StoreError>,
) -> Result<(), StoreError> {
    for sp in spellings(stretch) {
        let Some(tok) = latin_token(&sp) else {
            continue;
        };
        let d = df(&tok)?;
        if d <= 0.0 {
            continue;
        }
        let (all_of, df) = match ware {
            None => (vec![vec![tok]], d),
            Some(dw) => (vec![vec![tok], vec![WARE.to_string()]], d.max(dw)),
        };
        push(
            out,
            Bridge {
                all_of,
                sources: sources.to_vec(),
                df,
                kind: BridgeKind::Spelt,
            },
        );
    }
    Ok(())
}

/// Chinese question → Latin tokens (see the module header).
pub fn han_to_latin(
    query: &str,
    terms: &[QueryTerm],
    df: &mut dyn FnMut(&str) -> Result<f64, StoreError>,
) -> Result<Vec<Bridge>, StoreError> {
    let mut out = Vec::new();
    let norm = text::normalize(query);
    for run in text::runs(&norm) {
        let Run::Cjk(s) = run else { continue };
        let chars: Vec<char> = s.chars().collect();
        let bigram = |i: usize| -> Option<usize> {
            let b: String = chars.get(i..i + 2)?.iter().collect();
            index_of(terms, &b)
        };
        for i in 0..chars.len().saturating_sub(1) {
            // One word: two or three characters joined.
            for n in 2..=3 {
                if i + n > chars.len() {
                    continue;
                }
                let sources: Vec<usize> = (i..i + n - 1).filter_map(bigram).collect();
                if sources.len() != n - 1 {
                    continue;
                }
                push_spelt(&mut out, &chars[i..i + n], &sources, None, df)?;
            }
            // A kiln's ware: the place (one to three characters) before 窑, spelt, with
            // "ware" (钧窑 → Jun ware, 定窑 → Ding ware).
            for n in 1..=3 {
                if chars.get(i + n) != Some(&KILN) {
                    continue;
                }
                let sources: Vec<usize> = (i..i + n).filter_map(bigram).collect();
                if sources.len() != n {
                    continue;
                }
                let dw = df(WARE)?;
                if dw == 0.0 {
                    continue;
                }
                push_spelt(&mut out, &chars[i..i + n], &sources, Some(dw), df)?;
            }
            // A name: surname, then the given name of one or two characters.
            if !SURNAMES.contains(chars[i]) {
                continue;
            }
            for n in 1..=2 {
                if i + 1 + n > chars.len() {
                    continue;
                }
                let sources: Vec<usize> = (i..i + n).filter_map(bigram).collect();
                if sources.len() != n {
                    continue;
                }
                for sur in spellings(&chars[i..=i]) {
                    for given in spellings(&chars[i + 1..i + 1 + n]) {
                        let (Some(a), Some(b)) = (latin_token(&sur), latin_token(&given)) else {
                            continue;
                        };
                        let (da, db) = (df(&a)?, df(&b)?);
                        if da > 0.0 && db > 0.0 {
                            push(
                                &mut out,
                                Bridge {
                                    all_of: vec![vec![a], vec![b]],
                                    sources: sources.clone(),
                                    df: da.max(db),
                                    kind: BridgeKind::Spelt,
                                },
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A word of a run of pinyin names: its question term and its syllable segmentations.
type RunWord = (Option<usize>, Vec<Vec<String>>);

/// English question → two-character Chinese tokens (see the module header).
pub fn latin_to_han(
    query: &str,
    terms: &[QueryTerm],
    list: &mut dyn FnMut(char) -> Result<Vec<(String, i64)>, StoreError>,
) -> Result<Vec<Bridge>, StoreError> {
    // Runs of consecutive capitalised words that read as pinyin: (source term, segmentations).
    let mut runs: Vec<Vec<RunWord>> = vec![Vec::new()];
    for raw in query.split(|c: char| !c.is_alphanumeric() && c != '\'') {
        let capital = raw.chars().next().is_some_and(char::is_uppercase);
        let word = text::normalize(raw);
        let segs = if capital && latin_token(&word).as_deref() == Some(word.as_str()) {
            segmentations(&word)
        } else {
            Vec::new()
        };
        if segs.is_empty() {
            if !runs.last().is_some_and(Vec::is_empty) {
                runs.push(Vec::new());
            }
            continue;
        }
        let src = index_of(terms, &word);
        if let Some(r) = runs.last_mut() {
            r.push((src, segs));
        }
    }
    // A run is bridged as a whole: every pair of adjacent syllables (across its words too) must
    // be a two-character token of the record ("Ouyang Geng": 欧阳 and 阳庚), so a name of
    // common syllables ("Mona Lisa") does not match scattered words.
    let t = tables();
    let mut cache: HashMap<(String, String), Vec<(String, i64)>> = HashMap::new();
    // Each character's token list, read once a question: syllable pairs share first
    // syllables ("Chiang", "Madame Chiang") and a syllable is read by dozens of characters, so
    // without it the same range scans ran again and again (half the time of the slowest dev
    // questions, 2,700 records).
    let mut by_char: HashMap<char, Vec<(String, i64)>> = HashMap::new();
    let mut out = Vec::new();
    for run in runs.iter().filter(|r| !r.is_empty()) {
        let sources: Vec<usize> = run.iter().filter_map(|w| w.0).collect();
        if sources.is_empty() {
            continue;
        }
        // Syllable sequences of the run: one segmentation of each word, at most 8 in all.
        let mut seqs: Vec<Vec<String>> = vec![Vec::new()];
        for (_, segs) in run {
            seqs = seqs
                .iter()
                .flat_map(|p| segs.iter().map(move |s| [p.clone(), s.clone()].concat()))
                .take(8)
                .collect();
        }
        for seq in seqs.iter().filter(|s| s.len() >= 2) {
            let mut all_of = Vec::new();
            let mut df = 0.0f64;
            for w in seq.windows(2) {
                let key = (w[0].clone(), w[1].clone());
                if !cache.contains_key(&key) {
                    let found = pair_tokens(t, &key.0, &key.1, list, &mut by_char)?;
                    cache.insert(key.clone(), found);
                }
                let found = &cache[&key];
                if found.is_empty() {
                    all_of.clear();
                    break;
                }
                df = df.max(found.iter().map(|f| f.1 as f64).fold(0.0, f64::max));
                all_of.push(found.iter().map(|f| f.0.clone()).collect());
            }
            if !all_of.is_empty() {
                push(
                    &mut out,
                    Bridge {
                        all_of,
                        sources: sources.clone(),
                        df,
                        kind: BridgeKind::Spelt,
                    },
                );
            }
        }
    }
    Ok(out)
}

/// The collection's two-character tokens read `a b` (most frequent first, at most
/// [`BRIDGES_PER_PAIR`]).
fn pair_tokens(
    t: &Tables,
    a: &str,
    b: &str,
    list: &mut dyn FnMut(char) -> Result<Vec<(String, i64)>, StoreError>,
    by_char: &mut HashMap<char, Vec<(String, i64)>>,
) -> Result<Vec<(String, i64)>, StoreError> {
    let (Some(first), Some(second)) = (t.chars.get(a), t.chars.get(b)) else {
        return Ok(Vec::new());
    };
    let second: HashSet<char> = second.iter().copied().collect();
    let mut found: Vec<(String, i64)> = Vec::new();
    for &c in first {
        let terms = match by_char.entry(c) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(list(c)?),
        };
        for (term, d) in terms.iter() {
            let mut cs = term.chars();
            if let (Some(_), Some(c2), None) = (cs.next(), cs.next(), cs.next())
                && second.contains(&c2)
            {
                found.push((term.clone(), *d));
            }
        }
    }
    found.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    found.truncate(BRIDGES_PER_PAIR);
    Ok(found)
}

/// The tokens of the bridges to add to the full-text MATCH (those in at most `half` of the
/// collection and `cap` exhibits, like the question's own terms). With a `budget` (a large
/// collection, see `embedded::lexical`), the rarest bridges first while their tokens' document
/// frequencies (each counted at its bridge's largest) stay within it: BM25 scores every exhibit
/// holding any MATCH token, and a name read as pinyin several ways ("Medici": 末帝 + 地祠, 帝祠,
/// …, 3,400 exhibits each at 500,000) added tens of thousands past the question's own budget.
/// A bridge left out still credits coverage when its record comes from another term.
pub fn match_terms<'a>(
    bridges: impl IntoIterator<Item = &'a Bridge>,
    half: f64,
    cap: f64,
    budget: Option<f64>,
) -> Vec<QueryTerm> {
    let mut eligible: Vec<&Bridge> = bridges
        .into_iter()
        .filter(|b| b.df <= half && b.df <= cap)
        .collect();
    if let Some(budget) = budget {
        let mut by_df: Vec<usize> = (0..eligible.len()).collect();
        by_df.sort_by(|a, b| eligible[*a].df.total_cmp(&eligible[*b].df).then(a.cmp(b)));
        let mut keep = vec![false; eligible.len()];
        let (mut spent, mut tokens): (f64, Vec<&str>) = (0.0, Vec::new());
        for i in by_df {
            let b = eligible[i];
            let new: Vec<&str> = b
                .all_of
                .iter()
                .flatten()
                .map(String::as_str)
                .filter(|t| !tokens.contains(t))
                .collect();
            let cost = b.df * new.len() as f64;
            if spent + cost > budget {
                break;
            }
            spent += cost;
            tokens.extend(new);
            keep[i] = true;
        }
        eligible = eligible
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(b, _)| b)
            .collect();
    }
    let mut out: Vec<QueryTerm> = Vec::new();
    for b in eligible {
        for t in b.all_of.iter().flatten() {
            if !out.iter().any(|o| &o.text == t) {
                out.push(QueryTerm {
                    text: t.clone(),
                    prefix: false,
                });
            }
        }
    }
    out
}

/// Marks as found every question term one of whose bridges has all its tokens in `doc` (the
/// record's space-separated index tokens). A thesaurus lemma of several words is a phrase
/// ("watch glass", "serving dish"): it counts only where its tokens stand together, in order;
/// its words apart mean something else (a watch with glass is no dish).
pub fn credit(bridges: &[Bridge], doc: &str, found: &mut [bool]) {
    // Only bridges standing for a term not found yet can change anything; their tokens are a
    // handful, so the document is scanned once for those (not hashed whole: this ran for every
    // candidate of a question, twice, and was a third of a bridged question's time).
    let pending: Vec<&Bridge> = bridges
        .iter()
        .filter(|b| {
            !b.sources
                .iter()
                .all(|&s| found.get(s).copied().unwrap_or(true))
        })
        .collect();
    if pending.is_empty() {
        return;
    }
    let wanted: FxHashSet<&str> = pending
        .iter()
        .flat_map(|b| b.all_of.iter().flatten().map(String::as_str))
        .collect();
    let toks: FxHashSet<&str> = doc
        .split_ascii_whitespace()
        .filter(|t| wanted.contains(t))
        .collect();
    // The document's token sequence, split once and only when a phrase needs it.
    let mut seq: Option<Vec<&str>> = None;
    for b in pending {
        let held = b
            .all_of
            .iter()
            .all(|c| c.iter().any(|t| toks.contains(t.as_str())));
        if held
            && (!is_phrase(b)
                || holds_phrase(
                    seq.get_or_insert_with(|| doc.split_ascii_whitespace().collect()),
                    &b.all_of,
                ))
        {
            for &s in &b.sources {
                if let Some(f) = found.get_mut(s) {
                    *f = true;
                }
            }
        }
    }
}

/// A bridge whose tokens must stand together in a record: a thesaurus lemma of several words.
fn is_phrase(b: &Bridge) -> bool {
    b.kind == BridgeKind::Synonym && b.all_of.len() > 1
}

/// Whether the tokens `toks` hold `clauses` one after the other (each clause one of its tokens).
fn holds_phrase(toks: &[&str], clauses: &[Vec<String>]) -> bool {
    toks.windows(clauses.len())
        .any(|w| w.iter().zip(clauses).all(|(t, c)| c.iter().any(|x| x == t)))
}

/// The IDF share of the question's terms that `doc` covers only through bridges (the
/// abstention signal `bridged`: a match made across scripts), and the share it covers only
/// through the dictionary's (`translated`: a match made by translation, not by spelling). The
/// thesaurus's synonyms never reach the signals (`embedded::rank`).
pub fn bridged_share(w: &super::embedded::terms::WeightedTerms, doc: &str) -> (f64, f64) {
    let without = |keep: fn(&Bridge) -> bool| super::embedded::terms::WeightedTerms {
        bridges: w.bridges.iter().filter(|b| keep(b)).cloned().collect(),
        ..w.clone()
    };
    let all = super::embedded::terms::coverage(w, doc);
    let plain = super::embedded::terms::coverage(&without(|_| false), doc);
    let spelt = super::embedded::terms::coverage(&without(|b| b.kind == BridgeKind::Spelt), doc);
    ((all - plain).max(0.0), (all - spelt).max(0.0))
}

/// The bridges of `bridges` for the terms kept at `kept` (old indices, in order), renumbered.
pub fn restrict(bridges: &[Bridge], kept: &[usize]) -> Vec<Bridge> {
    bridges
        .iter()
        .filter_map(|b| {
            let sources: Vec<usize> = b
                .sources
                .iter()
                .filter_map(|s| kept.iter().position(|k| k == s))
                .collect();
            (!sources.is_empty()).then(|| Bridge {
                sources,
                ..b.clone()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(q: &str) -> Vec<QueryTerm> {
        text::query_terms(q)
    }

    #[test]
    fn readings_are_plain_pinyin() {
        assert_eq!(readings('康'), vec!["kang"]);
        assert!(readings('查').contains(&"zha".to_string()));
        assert!(readings('吕').contains(&"lu".to_string()));
        assert!(readings('a').is_empty());
    }

    #[test]
    fn latin_words_split_into_syllables() {
        assert!(segmentations("kangxi").contains(&vec!["kang".into(), "xi".into()]));
        assert!(segmentations("ouyang").contains(&vec!["ou".into(), "yang".into()]));
        assert!(segmentations("xian").iter().any(|s| s.len() == 1));
        assert!(segmentations("earthquake").is_empty());
        assert!(segmentations("").is_empty());
    }

    #[test]
    fn a_chinese_question_bridges_to_pinyin_tokens_the_collection_holds() {
        let q = "有没有康熙年间的瓷器";
        let t = terms(q);
        let have = ["kangxi", "nian", "jian"];
        let mut df = |s: &str| Ok(if have.contains(&s) { 3.0 } else { 0.0 });
        let b = han_to_latin(q, &t, &mut df).unwrap();
        let kangxi = b.iter().find(|b| b.all_of == [["kangxi"]]).expect("kangxi");
        assert_eq!(kangxi.sources, vec![index_of(&t, "康熙").unwrap()]);
        // 年 is no surname: "nian" + "jian" is not read as a name.
        assert!(b.iter().all(|b| b.all_of.len() == 1));
    }

    /// A document frequency of 1 for the `tokens` the collection holds, 0 for any other.
    fn held(tokens: &[&str]) -> impl FnMut(&str) -> Result<f64, StoreError> {
        move |s| Ok(if tokens.contains(&s) { 1.0 } else { 0.0 })
    }

    #[test]
    fn a_kiln_reads_as_its_ware() {
        let q = "你們這裡有鈞窯的瓷器嗎？";
        let t = terms(q);
        let b = han_to_latin(q, &t, &mut held(&["jun", "ware"])).unwrap();
        let jun = b
            .iter()
            .find(|b| b.all_of == [["jun"], ["ware"]])
            .unwrap_or_else(|| panic!("{b:?}"));
        assert_eq!(jun.sources, vec![index_of(&t, "钧窑").unwrap()]);
        // Without a ware in the collection the kiln bridges nothing.
        let b = han_to_latin(q, &t, &mut held(&["jun"])).unwrap();
        assert!(b.iter().all(|b| b.all_of.len() == 1), "{b:?}");
    }

    #[test]
    fn a_surname_reads_as_a_name_in_two_words() {
        let q = "钱沣写的那幅字";
        let t = terms(q);
        let b = han_to_latin(q, &t, &mut held(&["qian", "feng"])).unwrap();
        assert!(b.iter().any(|b| b.all_of == [["qian"], ["feng"]]), "{b:?}");
    }

    #[test]
    fn capitalised_pinyin_names_bridge_to_chinese_bigrams() {
        let q = "Did the Chinese consul Ouyang Geng lose his daughter?";
        let t = terms(q);
        let mut asked: Vec<char> = Vec::new();
        let mut list = |c: char| {
            asked.push(c);
            Ok(match c {
                '欧' => vec![("欧阳".to_string(), 5)],
                '阳' => vec![("阳庚".to_string(), 2), ("阳光".to_string(), 9)],
                _ => Vec::new(),
            })
        };
        let b = latin_to_han(q, &t, &mut list).unwrap();
        // Each character's tokens are listed once a question, however many pairs read it.
        let mut once = asked.clone();
        once.sort_unstable();
        once.dedup();
        assert_eq!(once.len(), asked.len(), "{asked:?}");
        // "Chinese" is an English word (the stemmer changes it), lower-case words are not names:
        // the run is "Ouyang Geng", both of its syllable pairs required.
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].all_of, [vec!["欧阳"], vec!["阳庚"]]);
        let (ouyang, geng) = (
            index_of(&t, "ouyang").unwrap(),
            index_of(&t, "geng").unwrap(),
        );
        assert_eq!(b[0].sources, vec![ouyang, geng]);
        // A run whose every syllable pair is not in the collection bridges nothing.
        let mut none = |c: char| {
            Ok(if c == '欧' {
                vec![("欧阳".to_string(), 5)]
            } else {
                vec![]
            })
        };
        assert!(
            latin_to_han("Ouyang Geng", &terms("Ouyang Geng"), &mut none)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn credit_needs_every_token_of_a_bridge() {
        let b = vec![Bridge {
            all_of: vec![vec!["qian".into()], vec!["feng".into()]],
            sources: vec![0],
            df: 1.0,
            kind: BridgeKind::Spelt,
        }];
        let mut found = vec![false, false];
        credit(&b, "calligraphi qian", &mut found);
        assert_eq!(found, vec![false, false]);
        credit(&b, "feng calligraphi qian", &mut found);
        assert_eq!(found, vec![true, false]);
        assert_eq!(restrict(&b, &[1]), Vec::new());
        assert_eq!(restrict(&b, &[0])[0].sources, vec![0]);
        // A bridge whose terms are all found already changes nothing.
        let mut done = vec![true, false];
        credit(&b, "", &mut done);
        assert_eq!(done, vec![true, false]);
    }

    #[test]
    fn a_synonym_of_several_words_is_credited_only_as_a_phrase() {
        // WordNet's "watch glass" (a shallow dish) for "dish": a watch described with its glass
        // is no dish.
        let b = vec![Bridge {
            all_of: vec![vec!["watch".into()], vec!["glass".into()]],
            sources: vec![0],
            df: 60.0,
            kind: BridgeKind::Synonym,
        }];
        let mut found = vec![false];
        credit(&b, "watch chain pendant key glass cover", &mut found);
        assert_eq!(found, vec![false]);
        credit(&b, "glass watch", &mut found);
        assert_eq!(found, vec![false], "in order");
        credit(&b, "a watch glass lens", &mut found);
        assert_eq!(found, vec![true]);
        // The same tokens as a spelt name are credited anywhere (a name's syllables).
        let spelt = vec![Bridge {
            kind: BridgeKind::Spelt,
            ..b[0].clone()
        }];
        let mut found = vec![false];
        credit(&spelt, "glass cover watch", &mut found);
        assert_eq!(found, vec![true]);
    }

    #[test]
    fn a_large_collection_spends_a_budget_on_the_rarest_bridges() {
        let bridge = |toks: &[&str], df: f64| Bridge {
            all_of: toks.iter().map(|t| vec![t.to_string()]).collect(),
            sources: vec![0],
            df,
            kind: BridgeKind::Spelt,
        };
        let b = vec![
            bridge(&["tang", "song"], 2_000.0),
            bridge(&["song", "di"], 1_500.0),
            bridge(&["rare"], 10.0),
            bridge(&["common"], 9_000.0),
        ];
        let texts = |t: Vec<QueryTerm>| t.into_iter().map(|t| t.text).collect::<Vec<_>>();
        // No budget (a collection of the demo's size): every bridge under the caps, in order.
        assert_eq!(
            texts(match_terms(&b, 1e9, 5_000.0, None)),
            ["tang", "song", "di", "rare"]
        );
        // Budget 5,000: rare (10), song+di (3,000), then tang alone (song is in: 2,000) = 5,010:
        // over, left out. Kept bridges stay in question order.
        assert_eq!(
            texts(match_terms(&b, 1e9, 5_000.0, Some(5_000.0))),
            ["song", "di", "rare"]
        );
        // A bridge over the whole budget by itself is left out: nothing need be matched.
        assert!(match_terms(&b[3..], 1e9, 1e9, Some(5_000.0)).is_empty());
    }
}

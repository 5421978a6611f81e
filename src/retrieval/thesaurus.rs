//! An English thesaurus bridge through WordNet 3.0 (issue 17: paraphrased questions).
//!
//! Visitors paraphrase: they ask for a "timepiece" where the record says "watch", a "reading
//! desk" where it says "lectern", a "dead body" where it says "cadaver", a "reptile" where it
//! says "serpent". The lexical index matches words, so such a question found nothing or the
//! wrong record. This module makes the same kind of [`Bridge`] as the bilingual dictionary
//! ([`super::dictionary`]) from Princeton WordNet 3.0 (`wordnet/`, the WordNet 3.0 licence, see
//! its NOTICE.md): index tokens of the question's own language standing for a question term,
//! crediting coverage and adding a BM25 MATCH of their own (`embedded::add_synonyms`). They
//! reorder the answer only: the no-answer signals are those of the ranking by the question's own
//! words (`embedded::Ranking::own_words`).
//!
//! - **A question lemma**: a WordNet lemma (one to three words, as index tokens: stop words
//!   dropped, stemmed as the index stems) all of whose tokens are terms of the question, each
//!   term within [`SOURCE_SHARE`] of the collection (a word the collection uses often is
//!   already its vocabulary) and none of them part of a name ([`name_tokens`]: "the Boxers" are
//!   not shorts).
//! - **Its related lemmas**: the other lemmas of its first [`SENSES_PER_LEMMA`] synset
//!   (synonyms) and of their direct hyponyms (the more specific words a record uses: timepiece →
//!   watch, clock, sundial), down to [`HYPONYM_DEPTH`] levels. A related lemma counts only where
//!   that synset is among its own first [`DOMINANT_SENSES`] senses: "toilet" has the synonym
//!   "pot", but a pot is not a toilet in most texts, so "pot" stands for nothing.
//! - **A bridge**: a related lemma all of whose tokens the collection holds; at most
//!   [`RELATED_PER_LEMMA`] per question lemma, the ones the collection uses most first.
//!
//! The data is compiled into the binary (1.2 MB compressed, `scripts/wordnet/build.py` makes
//! it from Debian's `wordnet-base`) and parsed once, like the dictionary (~0.4 s of a core; the
//! process grows by ~43 MB).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::dictionary::{held, push_most_used};
use super::text::{self, QueryTerm};
use super::translit::{Bridge, BridgeKind};
use crate::store::StoreError;

/// WordNet 3.0's nouns, verbs and adjectives, one synset a line (`scripts/wordnet/build.py`).
const WORDNET_GZ: &[u8] = include_bytes!("wordnet/wordnet-3.0-synsets.txt.gz");

/// Question terms in at most this share of the collection are paraphrased: a word the
/// collection uses often is its own vocabulary already (and has many synonyms). Chosen by 5-fold
/// CV over the dev questions with 30 reshuffled fold assignments (retrieval README, "English
/// thesaurus"): 0.005, 0.01, 0.02 and 0.1 measured.
pub const SOURCE_SHARE: f64 = 0.01;
/// Synsets of a question lemma read (WordNet lists a lemma's senses most frequent first): its
/// dominant sense only (1 and 2 measured alike; 3 worse).
pub const SENSES_PER_LEMMA: u8 = 1;
/// A related lemma stands for the question lemma only when the shared synset is among its own
/// first this many senses.
pub const DOMINANT_SENSES: u8 = 1;
/// Levels of hyponyms (more specific words) followed below a question lemma's synsets (0: the
/// paraphrases found fell by 4 of 30).
pub const HYPONYM_DEPTH: usize = 1;
/// Related lemmas one question lemma bridges to (those the collection uses most first).
pub const RELATED_PER_LEMMA: usize = 8;
/// Related lemmas looked up in the collection for one question lemma before
/// [`RELATED_PER_LEMMA`] are kept (WordNet order: synonyms first).
const RELATED_TRIED: usize = 40;

/// A lemma as its index tokens.
pub type Lemma<'a> = Vec<&'a str>;
/// A question lemma and its related lemmas ([`Thesaurus::related`]).
pub type Related<'a> = (Lemma<'a>, Vec<Lemma<'a>>);

/// Rows of `(row, value)` pairs packed as one list and offsets (a compressed sparse row).
struct Rows<T> {
    start: Vec<u32>,
    values: Vec<T>,
}

impl<T: Copy> Rows<T> {
    /// From `(row, value)` pairs in any order; rows `0..n`, each row's values in the pairs'
    /// order.
    fn build(n: usize, mut pairs: Vec<(u32, T)>) -> Rows<T> {
        pairs.sort_by_key(|p| p.0);
        let mut start = vec![0u32; n + 1];
        for (r, _) in &pairs {
            start[*r as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        Rows {
            start,
            values: pairs.into_iter().map(|p| p.1).collect(),
        }
    }

    fn row(&self, r: u32) -> &[T] {
        let (a, b) = (self.start[r as usize], self.start[r as usize + 1]);
        &self.values[a as usize..b as usize]
    }
}

/// The parsed thesaurus, packed (~120,000 lemmas, 113,000 synsets in a few MB: token strings
/// once, everything else `u32` lists).
pub struct Thesaurus {
    /// Token id → token.
    vocab: Vec<Box<str>>,
    token_ids: HashMap<Box<str>, u32>,
    /// Lemma → its token ids (lemmas with the same tokens are one).
    lemma_tokens: Rows<u32>,
    /// Lemma → `(synset, the synset's sense number among the lemma's senses)`, by sense number.
    senses: Rows<(u32, u8)>,
    /// Synset → `(lemma, sense number)`.
    synset_lemmas: Rows<(u32, u8)>,
    /// Synset → its hyponyms.
    hyponyms: Rows<u32>,
    /// First token id → lemmas.
    by_first: Rows<u32>,
}

impl Thesaurus {
    /// Parses the `POS<TAB>lemma:rank|…<TAB>hyponym lines` format of `build.py`.
    pub fn parse(raw: &str) -> Thesaurus {
        let mut vocab: Vec<Box<str>> = Vec::new();
        let mut token_ids: HashMap<Box<str>, u32> = HashMap::new();
        let mut lemma_ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut lemma_tokens: Vec<(u32, u32)> = Vec::new();
        let mut synset_lemmas: Vec<(u32, (u32, u8))> = Vec::new();
        let mut hyponyms: Vec<(u32, u32)> = Vec::new();
        let mut synsets = 0u32;
        for line in raw.lines() {
            let mut cols = line.split('\t');
            let (Some(pos), Some(words), hypo) = (cols.next(), cols.next(), cols.next()) else {
                continue;
            };
            let n = synsets;
            synsets += 1;
            let mut seen: Vec<u32> = Vec::new();
            for w in words.split('|') {
                let Some((lemma, rank)) = w.rsplit_once(':') else {
                    continue;
                };
                let toks = text::latin_tokens(lemma);
                if toks.is_empty() || toks.len() > 3 {
                    continue;
                }
                // A phrasal verb without its particle is another word: "shell out", "parcel
                // out" and "dish out" mean to distribute, "shell" and "parcel" do not (the
                // index drops "out" as a stop word). Such lemmas are left out.
                if pos == "v"
                    && toks.len() < lemma.split([' ', '-']).filter(|w| !w.is_empty()).count()
                {
                    continue;
                }
                let key: Vec<u32> = toks
                    .into_iter()
                    .map(|t| match token_ids.get(t.as_str()) {
                        Some(id) => *id,
                        None => {
                            let id = vocab.len() as u32;
                            vocab.push(t.as_str().into());
                            token_ids.insert(t.into_boxed_str(), id);
                            id
                        }
                    })
                    .collect();
                let next = lemma_ids.len() as u32;
                let id = *lemma_ids.entry(key.clone()).or_insert_with(|| {
                    lemma_tokens.extend(key.iter().map(|t| (next, *t)));
                    next
                });
                if !seen.contains(&id) {
                    seen.push(id);
                    synset_lemmas.push((n, (id, rank.parse().unwrap_or(u8::MAX))));
                }
            }
            for h in hypo.unwrap_or("").split_ascii_whitespace() {
                if let Ok(h) = h.parse() {
                    hyponyms.push((n, h));
                }
            }
        }
        let lemmas = lemma_ids.len();
        let mut senses: Vec<(u32, (u32, u8))> = synset_lemmas
            .iter()
            .map(|&(s, (l, r))| (l, (s, r)))
            .collect();
        senses.sort_by_key(|(l, (_, r))| (*l, *r));
        let lemma_tokens = Rows::build(lemmas, lemma_tokens);
        let by_first = Rows::build(
            vocab.len(),
            (0..lemmas as u32)
                .map(|l| (lemma_tokens.row(l)[0], l))
                .collect(),
        );
        Thesaurus {
            token_ids,
            vocab,
            lemma_tokens,
            senses: Rows::build(lemmas, senses),
            synset_lemmas: Rows::build(synsets as usize, synset_lemmas),
            hyponyms: Rows::build(synsets as usize, hyponyms),
            by_first,
        }
    }

    /// Lemmas (by index tokens) in the thesaurus.
    pub fn len(&self) -> usize {
        self.senses.start.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lemma(&self, l: u32) -> Lemma<'_> {
        self.lemma_tokens
            .row(l)
            .iter()
            .map(|t| &*self.vocab[*t as usize])
            .collect()
    }

    /// Lemmas all of whose tokens are in `terms`, each with its related lemmas (see the module
    /// header), synonyms first, each at most once.
    pub fn related<'a>(&'a self, terms: &[&str]) -> Vec<Related<'a>> {
        let ids: Vec<u32> = terms
            .iter()
            .filter_map(|t| self.token_ids.get(*t).copied())
            .collect();
        let mut out: Vec<Related<'a>> = Vec::new();
        for &first in &ids {
            for &id in self.by_first.row(first) {
                if !self.lemma_tokens.row(id).iter().all(|t| ids.contains(t)) {
                    continue;
                }
                let mut rel: Vec<u32> = Vec::new();
                let mut level: Vec<u32> = self
                    .senses
                    .row(id)
                    .iter()
                    .filter(|(_, r)| *r <= SENSES_PER_LEMMA)
                    .map(|(s, _)| *s)
                    .collect();
                for depth in 0..=HYPONYM_DEPTH {
                    let mut next = Vec::new();
                    for &s in &level {
                        for &(l, r) in self.synset_lemmas.row(s) {
                            if l != id && r <= DOMINANT_SENSES && !rel.contains(&l) {
                                rel.push(l);
                            }
                        }
                        if depth < HYPONYM_DEPTH {
                            next.extend_from_slice(self.hyponyms.row(s));
                        }
                    }
                    level = next;
                }
                let rel: Vec<Lemma<'a>> = rel
                    .into_iter()
                    .filter(|l| !self.lemma_tokens.row(*l).iter().all(|t| ids.contains(t)))
                    .map(|l| self.lemma(l))
                    .collect();
                if !rel.is_empty() {
                    out.push((self.lemma(id), rel));
                }
            }
        }
        out
    }
}

/// The thesaurus (parsed at the first call).
pub fn thesaurus() -> &'static Thesaurus {
    static T: OnceLock<Thesaurus> = OnceLock::new();
    T.get_or_init(|| {
        let started = std::time::Instant::now();
        let t = Thesaurus::parse(&super::dictionary::gunzip(WORDNET_GZ));
        tracing::info!(
            lemmas = t.len(),
            ms = started.elapsed().as_millis() as u64,
            "English thesaurus (WordNet) loaded"
        );
        t
    })
}

/// The index tokens of the names in `query` ([`text::named_phrases`]: capitalised runs and
/// quoted spans, "the Boxers", "the Hope Diamond"). A name is not paraphrased: WordNet's
/// "boxers" are shorts, its "hope" a feeling.
pub fn name_tokens(query: &str) -> Vec<String> {
    text::named_phrases(query)
        .iter()
        .flat_map(|n| text::latin_tokens(n))
        .collect()
}

/// The thesaurus's bridges for a question of `terms` over a collection of `docs` exhibits,
/// with document frequencies from `df` (pure but for it).
pub fn bridges_with(
    th: &Thesaurus,
    query: &str,
    terms: &[QueryTerm],
    docs: f64,
    df: &mut dyn FnMut(&str) -> Result<f64, StoreError>,
) -> Result<Vec<Bridge>, StoreError> {
    let rare = docs * SOURCE_SHARE;
    let names = name_tokens(query);
    let mut latin: Vec<&str> = Vec::new();
    for t in terms {
        if !t.prefix
            && !t.text.chars().any(text::is_cjk)
            && !names.contains(&t.text)
            && df(&t.text)? <= rare
        {
            latin.push(&t.text);
        }
    }
    let mut out: Vec<Bridge> = Vec::new();
    for (lemma, related) in th.related(&latin) {
        let sources: Vec<usize> = lemma
            .iter()
            .filter_map(|t| terms.iter().position(|q| q.text == *t))
            .collect();
        let mut found = Vec::new();
        for r in related.into_iter().take(RELATED_TRIED) {
            found.extend(held(r.into_iter().map(str::to_string), df)?);
        }
        // The words this collection uses most.
        push_most_used(
            &mut out,
            found,
            &sources,
            RELATED_PER_LEMMA,
            BridgeKind::Synonym,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines in `build.py`'s format: timepiece with hyponyms watch and clock; toilet with the
    /// synonym pot, whose first sense is the cooking vessel.
    const SAMPLE: &str = "n\ttimepiece:1|timekeeper:3\t1 2\n\
n\twatch:1|ticker:1\t\n\
n\tclock:1\t\n\
n\ttoilet:1|pot:4|commode:1\t\n\
n\tpot:1\t\n";

    fn toks(l: &[&str]) -> String {
        l.join(" ")
    }

    #[test]
    fn a_lemma_reaches_its_synonyms_and_hyponyms_in_their_dominant_sense() {
        let th = Thesaurus::parse(SAMPLE);
        let rel = th.related(&["timepiec", "show"]);
        assert_eq!(rel.len(), 1);
        let words: Vec<String> = rel[0].1.iter().map(|l| toks(l)).collect();
        // timekeeper is timepiece's synonym only in its third sense.
        assert_eq!(words, vec!["watch", "ticker", "clock"]);
        let rel = th.related(&["toilet"]);
        let words: Vec<String> = rel[0].1.iter().map(|l| toks(l)).collect();
        assert_eq!(
            words,
            vec!["commod"],
            "pot is a toilet only in its fourth sense"
        );
    }

    #[test]
    fn a_phrasal_verb_without_its_particle_bridges_nothing() {
        // "shell out" is to distribute; the index drops "out", and "shell" alone is a shell.
        let th = Thesaurus::parse(
            "v\tdistribute:1|shell out:1|parcel out:1|dispense:1\t\nn\tdish:1|watch glass:1\t\n",
        );
        let rel = th.related(&["distribut"]);
        let words: Vec<String> = rel[0].1.iter().map(|l| toks(l)).collect();
        assert_eq!(words, vec!["dispens"]);
        // A noun phrase keeps its words (the record must hold them together: translit::credit).
        let rel = th.related(&["dish"]);
        let words: Vec<String> = rel[0].1.iter().map(|l| toks(l)).collect();
        assert_eq!(words, vec!["watch glass"]);
    }

    #[test]
    fn bridges_need_every_token_in_the_collection_and_stand_for_the_question_term() {
        let th = Thesaurus::parse(SAMPLE);
        let terms = text::query_terms("Is there a timepiece?");
        let mut df = |t: &str| {
            Ok(match t {
                "watch" => 12.0,
                "clock" => 3.0,
                _ => 0.0,
            })
        };
        let b = bridges_with(&th, "Is there a timepiece?", &terms, 2700.0, &mut df).unwrap();
        let all: Vec<&Vec<Vec<String>>> = b.iter().map(|b| &b.all_of).collect();
        assert_eq!(
            all,
            vec![
                &vec![vec!["watch".to_string()]],
                &vec![vec!["clock".to_string()]]
            ]
        );
        let src = terms.iter().position(|t| t.text == "timepiec").unwrap();
        assert!(
            b.iter()
                .all(|b| b.sources == vec![src] && b.kind == BridgeKind::Synonym)
        );
    }

    #[test]
    fn capitalised_words_inside_a_sentence_are_names() {
        assert_eq!(
            name_tokens("Do you have a flag carried by the Boxers? Is the Hope Diamond here?"),
            vec!["boxer", "hope", "diamond"]
        );
        assert!(name_tokens("Is there a timepiece? Where is it?").is_empty());
    }

    /// The memory figure of the retrieval README ("English thesaurus"): the process's resident
    /// size before and after the parse, the dictionary already loaded. A measurement, not a
    /// check: `cargo test --release --lib thesaurus_memory -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn thesaurus_memory() {
        let rss_kib = || crate::util::rss_kib(std::process::id()).unwrap_or(0);
        let _ = super::super::dictionary::dictionary();
        let before = rss_kib();
        let started = std::time::Instant::now();
        let th = thesaurus();
        eprintln!(
            "thesaurus: {} lemmas in {:?}; VmRSS {before} → {} KiB",
            th.len(),
            started.elapsed(),
            rss_kib()
        );
    }

    #[test]
    fn the_compiled_in_thesaurus_parses_and_knows_museum_words() {
        let th = thesaurus();
        assert!(th.len() > 100_000, "{} lemmas", th.len());
        let related = |w: &[&str]| -> Vec<String> {
            th.related(w)
                .into_iter()
                .flat_map(|(_, r)| r.into_iter().map(|l| toks(&l)))
                .collect()
        };
        assert!(related(&["timepiec"]).contains(&"watch".to_string()));
        assert!(related(&["read", "desk"]).contains(&"lectern".to_string()));
        assert!(related(&["plumag"]).contains(&"feather".to_string()));
        assert!(!related(&["toilet"]).contains(&"pot".to_string()));
    }
}

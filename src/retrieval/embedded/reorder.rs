//! The lexical ranking's reorders: after BM25 and coverage have ranked the candidates, a hit
//! of the first few that holds what the question names moves first, scores unchanged: the
//! record that says who a person is ([`prefer_biographies`]), a record holding the question's
//! proper names ([`prefer_named`], [`prefer_names_held`]), a keyword ([`prefer_keyword_held`],
//! [`prefer_keyword_titled`]) or the exact title typed ([`prefer_exact_title`]). The
//! abstention signals ([`super::signals`]) then read the reordered ranking.

use super::signals::{QuestionNames, describes_any, exhibit_text, keyword_held, typed_as_name};
use super::terms::{Lexical, NEAR_TIE, WeightedTerms};
use crate::retrieval::text::{self, UserDict};
use crate::retrieval::{Exhibit, openings};
use crate::store::StoreError;
use crate::store::collection::CollectionStore;

/// Hits of the first [`KEYWORD_DEPTH`] read for one holding a bare keyword as written.
const KEYWORD_DEPTH: usize = 50;

/// For a keyword: a bare one ([`text::bare_keyword`]) or the thing a short "do you have"
/// question asks for ([`text::asked_keyword`]: 有没有佛像？), None for any other question;
/// `query` is the question as typed. When the best hit does not hold it as written
/// ([`keyword_held`]), the hits of the first [`KEYWORD_DEPTH`] that do go first, in their
/// order. A keyword matched through a translation ranked short records of the other language
/// first at equal coverage: 邮票 listed a Book of Hours binding ("stamped" calfskin) before
/// the letter that says 郵票 (31st), 印章 a "Chopping Tool" (CC-CEDICT's "chop") before the
/// seals. Scores are unchanged, as with [`prefer_biographies`].
pub(super) fn prefer_keyword_held(
    store: &CollectionStore,
    query: &str,
    keyword: Option<&str>,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    let Some(keyword) = keyword else {
        return Ok(());
    };
    move_first(store, lex, |e| {
        keyword_held(query, keyword, &exhibit_text(e))
    })
}

/// For a keyword (bare or asked for, as [`prefer_keyword_held`] takes it): the hits of the first
/// [`KEYWORD_DEPTH`] whose title holds it go first, in their order, unless the best hit's does.
/// A list of things of a kind opens with things of that kind: "Cats" and "I love cats" opened
/// with a genre painting whose description mentions a cat, before "Seated Cat" and "Girl
/// Teasing a Cat". Runs after the signals (scores and the no-answer decision unchanged), before
/// [`prefer_exact_title`]. A keyword typed as a name is left to the name steps.
pub(super) fn prefer_keyword_titled(
    store: &CollectionStore,
    query: &str,
    keyword: &str,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if keyword.chars().any(text::is_cjk) {
        return move_first(store, lex, |e| text::normalize(&e.title).contains(keyword));
    }
    if typed_as_name(query, keyword) {
        return Ok(());
    }
    let tokens = text::latin_tokens(keyword);
    if tokens.is_empty() {
        return Ok(());
    }
    move_first(store, lex, |e| {
        let have = text::index_tokens_latin(&text::normalize(&e.title));
        tokens.iter().all(|t| have.contains(t))
    })
}

/// Moves the hits of the first [`KEYWORD_DEPTH`] (with a score) for which `wanted` holds first,
/// in their order, unless the best hit is one of them or none is (scores unchanged): the
/// shared step of [`prefer_keyword_held`] and [`prefer_exact_title`].
fn move_first(
    store: &CollectionStore,
    lex: &mut [Lexical],
    wanted: impl Fn(&Exhibit) -> bool,
) -> Result<(), StoreError> {
    let depth = lex
        .iter()
        .take(KEYWORD_DEPTH)
        .take_while(|l| l.score > 0.0)
        .count();
    if depth < 2 {
        return Ok(());
    }
    let pks: Vec<i64> = lex[..depth].iter().map(|l| l.pk).collect();
    let first: Vec<i64> = store
        .exhibits_by_pk(&pks)?
        .into_iter()
        .filter_map(|(pk, r)| wanted(&Exhibit::from(r)).then_some(pk))
        .collect();
    if first.is_empty() || first.contains(&lex[0].pk) {
        return Ok(());
    }
    lex[..depth].sort_by_key(|l| !first.contains(&l.pk));
    Ok(())
}

/// Hits of the first [`KEYWORD_DEPTH`] whose title is the question's object as typed
/// ([`openings::typed_title`]) go first, in their order: "Tell me about Dragons" listed four sword
/// fittings with dragons before the border ornament titled "Dragons", whose record says the
/// word once. Scores are unchanged, as with [`prefer_keyword_held`], and it runs after the
/// signals.
pub(super) fn prefer_exact_title(
    store: &CollectionStore,
    query: &str,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    let typed = openings::typed_title(query);
    if typed.is_empty() {
        return Ok(());
    }
    move_first(store, lex, |e| {
        text::normalize(&e.title)
            .trim()
            .trim_end_matches(['.', '。'])
            == typed
    })
}

/// A best hit in the other script than the question that holds none of the question's proper
/// names ([`name_match`]) gives way to the first of the first ten that holds one: 查士标那幅
/// 清晨山水画… ranked an American lake scene (through 山水, 清晨) above "Mountains at Dawn" by
/// Zha Shibiao. Scores are unchanged, as with [`prefer_biographies`].
pub(super) fn prefer_named(
    store: &CollectionStore,
    query: &str,
    w: &WeightedTerms,
    dict: &UserDict,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if lex.len() < 2 {
        return Ok(());
    }
    let q_cjk = query.chars().any(text::is_cjk);
    let across = store
        .exhibits_by_pk(&[lex[0].pk])?
        .pop()
        .is_some_and(|(_, r)| r.title.chars().any(text::is_cjk) != q_cjk);
    if !across {
        return Ok(());
    }
    let names = QuestionNames::new(query, w, dict);
    if names.is_empty() {
        return Ok(());
    }
    let depth = lex.len().min(BIOGRAPHY_DEPTH);
    let pks: Vec<i64> = lex[..depth].iter().map(|l| l.pk).collect();
    let texts = store.indexed_text(&pks)?;
    let matches = |pk: i64| {
        texts
            .iter()
            .find(|(p, _)| *p == pk)
            .and_then(|(_, t)| names.matches(w, t))
    };
    if matches(lex[0].pk) == Some(false)
        && let Some(i) = (1..depth).find(|&i| matches(lex[i].pk) == Some(true))
    {
        lex[..=i].rotate_right(1);
    }
    Ok(())
}

/// A best hit whose text lacks one of the question's named things of several words as written
/// ([`text::named_phrases`]: its words may be there apart) gives way to the first near tie (within
/// [`NEAR_TIE`] of its score, among the first ten) that holds every one: "Do you have
/// anything about the Three Kingdoms?" ranked a vessel whose record says "three" and "Kingdom"
/// apart above the sword guard with the generals of the Three Kingdoms, and was refused for it
/// (`names_missing`). Scores are unchanged, as with [`prefer_biographies`].
pub(super) fn prefer_names_held(
    store: &CollectionStore,
    query: &str,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if lex.len() < 2 {
        return Ok(());
    }
    let names = text::names_of_several_words(query);
    if names.is_empty() {
        return Ok(());
    }
    let best = lex[0].score;
    let depth = lex[..lex.len().min(BIOGRAPHY_DEPTH)]
        .iter()
        .take_while(|l| l.score >= NEAR_TIE * best)
        .count();
    if depth < 2 {
        return Ok(());
    }
    // Read one record at a time: most best hits hold the names, and the others are not read.
    let holds = |pk: i64| -> Result<bool, StoreError> {
        Ok(store.exhibits_by_pk(&[pk])?.pop().is_some_and(|(_, r)| {
            let doc = exhibit_text(&Exhibit::from(r));
            names.iter().all(|n| doc.contains(n.as_str()))
        }))
    };
    if holds(lex[0].pk)? {
        return Ok(());
    }
    for i in 1..depth {
        if holds(lex[i].pk)? {
            lex[..=i].rotate_right(1);
            break;
        }
    }
    Ok(())
}

/// Hits after the best looked at for a biography of a "who is X" question's X.
const BIOGRAPHY_DEPTH: usize = 10;

/// For a "who is X" question (`who`: X's forms, [`crate::retrieval::dictionary::name_forms`] of
/// [`text::who_is_subject`]): a record of the first
/// [`BIOGRAPHY_DEPTH`] that says who X is ([`describes`]) goes first when the first does not;
/// otherwise the near-tied top hits whose description reads like a biography (a life span) go
/// ahead of those that merely carry X's name (a name card, a letter), keeping their order
/// otherwise. Scores are unchanged.
pub(super) fn prefer_biographies(
    store: &CollectionStore,
    who: Option<&[String]>,
    lex: &mut [Lexical],
) -> Result<(), StoreError> {
    if lex.len() < 2 {
        return Ok(());
    }
    let Some(name) = who else {
        return Ok(());
    };
    // A record of the first ten that says who X is (`describes`) goes first, whatever its
    // score: "溥儒是谁" ranks a couplet he wrote ("為溥儒所撰") above the book whose description
    // gives his life, and the answer should quote the life. The near ties below are among the
    // same first ten: their rows are read once.
    let depth = lex.len().min(BIOGRAPHY_DEPTH);
    let pks: Vec<i64> = lex[..depth].iter().map(|l| l.pk).collect();
    let rows = store.exhibits_by_pk(&pks)?;
    let row = |pk: i64| rows.iter().find(|(p, _)| *p == pk).map(|(_, r)| r);
    let says_who = |pk: i64| row(pk).is_some_and(|r| describes_any(&r.maker, &r.description, name));
    if !says_who(lex[0].pk)
        && let Some(i) = (1..depth).find(|&i| says_who(lex[i].pk))
    {
        lex[..=i].rotate_right(1);
        return Ok(());
    }
    let best = lex[0].score;
    let n = lex[..depth]
        .iter()
        .take_while(|l| l.score >= NEAR_TIE * best)
        .count();
    if n < 2 {
        return Ok(());
    }
    let bio = |pk: i64| row(pk).is_some_and(|r| text::has_life_span(&r.description));
    lex[..n].sort_by_key(|l| !bio(l.pk));
    Ok(())
}

//! Browsing the collection: the exhibits a [`Browse`] lists ("Do you have Japanese ceramics?",
//! 有唐朝的文物吗？, "the oldest things", "Whose works do you have most of?"), read from the
//! store by kind, place, period, maker and order, not ranked against the question's words.
//! The search ([`super::search_blocking`]) is the other path; the pipeline chooses between
//! them (`offline::browse::is_browse`). The start years and sizes an order reads are cached
//! per collection generation ([`OrderCaches`], held by the retriever).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::WEIGHTS;
use crate::retrieval::ordering::{Order, Ranked};
use crate::retrieval::{Browse, Exhibit, Hit, text};
use crate::retrieval::{dating, dictionary, kinds, ordering, sizing};
use crate::store::StoreError;
use crate::store::collection::CollectionStore;
use crate::store::lexical::MatchTerm;

/// A [`Ranked`] with the collection generation it was read at.
type RankCache = Mutex<Option<(i64, Arc<Ranked>)>>;

/// The values the collection is ordered by when a visitor asks ([`Order`]): start years and
/// sizes.
#[derive(Debug, Default)]
pub struct OrderCaches {
    years: RankCache,
    sizes: RankCache,
}

/// The collection's values for `order` (start years or sizes), from `caches` when they were
/// read at this generation.
fn ranked_of(
    store: &CollectionStore,
    caches: &OrderCaches,
    order: Order,
) -> Result<Arc<Ranked>, StoreError> {
    let generation = store.collection_generation()?;
    let cache = if order.by_size() {
        &caches.sizes
    } else {
        &caches.years
    };
    if let Some((g, r)) = &*cache.lock().unwrap_or_else(|p| p.into_inner())
        && *g == generation
    {
        return Ok(r.clone());
    }
    let ranked = Arc::new(if order.by_size() {
        sizing::sizes(store.dimensions()?)
    } else {
        dating::years(store.dates()?)
    });
    *cache.lock().unwrap_or_else(|p| p.into_inner()) = Some((generation, ranked.clone()));
    Ok(ranked)
}

/// Rows of the collection read to choose the exhibits a [`Browse`] lists, per exhibit listed.
const BROWSE_READ_PER_LISTED: usize = 6;

/// Rows of the collection read per exhibit listed in an [`Order`]: one per title is listed, and
/// a few titles repeat ("Cylinder Seal").
const BROWSE_READ_IN_ORDER: usize = 3;

/// The whole collection's first exhibits in `order` (oldest, largest, ...) among those whose
/// records give the value compared ([`browse_blocking`]): at most `k`, one per title.
fn collection_in_order(
    store: &CollectionStore,
    order: Order,
    k: usize,
    caches: &OrderCaches,
) -> Result<Browse, StoreError> {
    let ranked = ranked_of(store, caches, order)?;
    let read: Vec<i64> = ranked.all(order).take(k * BROWSE_READ_IN_ORDER).collect();
    let hits = one_per_title(
        store
            .exhibits_by_pk(&read)?
            .into_iter()
            .map(|(_, r)| Exhibit::from(r)),
        k,
    );
    Ok(Browse {
        total: usize::try_from(store.exhibit_count()?).unwrap_or(0),
        order: Some(order),
        compared: ranked.order.len(),
        hits,
        ..Browse::default()
    })
}

/// Makers named in an answer for the makers with the most works.
const MAKERS_NAMED: usize = 3;

/// The makers with the most works in the collection ([`kinds::asks_most_works`]) and a few of
/// the first one's works, the most fully described first; None when no record names a maker.
/// When the question names a kind of work, itself or through its maker's word
/// ([`kinds::most_works_kinds`]: "Chinese paintings", "Which painter…"), the makers are
/// counted over that kind ([`kinds::resolve`], its other words narrowing it as words the
/// records hold or as where the works were made); otherwise over the records holding each of
/// the question's narrowing words ([`kinds::most_works_qualifiers`]) or coming from there.
/// None when no record does or no maker has two of them. One scan of the maker column per
/// question (these questions are rare).
fn most_works(
    store: &CollectionStore,
    k: usize,
    question: &str,
) -> Result<Option<Browse>, StoreError> {
    let dict = dictionary::dictionary();
    let rows_of = |t: &str| -> Result<HashSet<i64>, StoreError> {
        Ok(store
            .rows_holding(t)?
            .into_iter()
            .map(|(pk, _)| pk)
            .collect())
    };
    let words = kinds::most_works_kinds(question);
    let units = kinds::subject(&words.join(" "), &|w| dict.kind_senses_of(w));
    let mut members_of = |t: &str| kind_members(store, t);
    // A narrowing word as the records hold it or as where they were made (the period field's
    // origin markers, [`kinds::origin_markers`]: 有中国的东西吗 reaches the dated Chinese
    // records).
    let mut held_or_from = |t: &str| -> Result<Vec<kinds::Member>, StoreError> {
        let mut rows = store.rows_holding(t)?;
        rows.extend(store.rows_holding(&format!("{}{t}", kinds::ORIGIN))?);
        rows.sort_unstable();
        rows.dedup();
        Ok(rows)
    };
    if let Some(kind) = kinds::resolve(&units, &mut members_of, &mut held_or_from)? {
        let within: HashSet<i64> = kind.members.iter().map(|m| m.0).collect();
        let words: Vec<String> = units.iter().map(|u| u.word.clone()).collect();
        return counted_makers(store, k, Some(&within), words, kind.qualifiers);
    }
    // No kind found: the words that name one in some collection ("paintings") narrow nothing
    // here; a kind implied by the maker's word that is none here (calligrapher: calligraphy)
    // narrows as the other words do.
    let qualifiers: Vec<String> = words
        .into_iter()
        .filter(|q| !kinds::is_kind_word(q))
        .collect();
    // Each qualifier as words the records hold or as where the works were made; a Chinese
    // word counts the English of its senses too (日本: "Japan").
    let mut within: Option<HashSet<i64>> = None;
    for q in &qualifiers {
        let mut ways: Vec<Vec<String>> = vec![text::index_tokens(q)];
        if q.chars().any(text::is_cjk) {
            ways.extend(
                dict.english_of(q)
                    .into_iter()
                    .map(|p| p.iter().map(|t| t.to_string()).collect()),
            );
        }
        let mut held = HashSet::new();
        for tokens in ways.iter().filter(|t| !t.is_empty()) {
            if let [t] = tokens.as_slice() {
                held.extend(rows_of(&format!("{}{t}", kinds::ORIGIN))?);
            }
            let mut all: Option<HashSet<i64>> = None;
            for t in tokens {
                narrow(&mut all, rows_of(t)?);
            }
            held.extend(all.unwrap_or_default());
        }
        narrow(&mut within, held);
    }
    if within.as_ref().is_some_and(HashSet::is_empty) {
        return Ok(None);
    }
    counted_makers(store, k, within.as_ref(), Vec::new(), qualifiers)
}

/// [`most_works`] over the rows `within` (the whole collection with None): the makers by
/// number of works, a few of the first one's; `words` the visitor's words of a kind counted
/// over (empty when counted over records holding the `qualifiers`). None when no maker is
/// named, or (narrowed) none has two.
fn counted_makers(
    store: &CollectionStore,
    k: usize,
    within: Option<&HashSet<i64>>,
    words: Vec<String>,
    qualifiers: Vec<String>,
) -> Result<Option<Browse>, StoreError> {
    let mut by: HashMap<&str, Vec<i64>> = HashMap::new();
    let makers = store.makers()?;
    for (pk, maker) in &makers {
        if within.is_some_and(|w| !w.contains(pk)) {
            continue;
        }
        if let Some(name) = kinds::maker_name(maker) {
            by.entry(name).or_default().push(*pk);
        }
    }
    let mut ranked: Vec<(&str, Vec<i64>)> = by.into_iter().collect();
    ranked.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let Some((_, first)) = ranked.first() else {
        return Ok(None);
    };
    // Narrowed to a few records, no maker may have more than one: none has "the most". Over
    // the records holding some words that is no answer (the search is asked); over a kind it
    // is one ("Who made the most Chinese paintings?": each of its makers has one), told with a
    // work of each of a few makers, `total` then the works of the kind whose maker is named.
    let single = first.len() < 2;
    if within.is_some() && single && words.is_empty() {
        return Ok(None);
    }
    let read: Vec<i64> = if single {
        ranked
            .iter()
            .take(k * BROWSE_READ_PER_LISTED)
            .map(|(_, pks)| pks[0])
            .collect()
    } else {
        first[..first.len().min(k * BROWSE_READ_PER_LISTED)].to_vec()
    };
    let mut rows: Vec<Exhibit> = store
        .exhibits_by_pk(&read)?
        .into_iter()
        .map(|(_, r)| Exhibit::from(r))
        .collect();
    rows.sort_by_key(|e| std::cmp::Reverse(e.description.len()));
    Ok(Some(Browse {
        total: if single { ranked.len() } else { first.len() },
        makers: ranked
            .iter()
            .take(MAKERS_NAMED)
            .map(|(m, pks)| (m.to_string(), pks.len()))
            .collect(),
        words,
        qualifiers,
        hits: one_per_title(rows, k),
        ..Browse::default()
    }))
}

/// The rows holding a kind marker of the index token `t`: a department, a medium or a title
/// naming it ([`kinds::markers`]).
fn kind_members(store: &CollectionStore, t: &str) -> Result<Vec<kinds::Member>, StoreError> {
    use kinds::{DEPARTMENT, MEDIUM, TITLE};
    let mut rows = store.rows_holding(&format!("{DEPARTMENT}{t}"))?;
    rows.extend(store.rows_holding(&format!("{MEDIUM}{t}"))?);
    rows.extend(store.rows_holding(&format!("{TITLE}{t}"))?);
    rows.sort_unstable();
    rows.dedup();
    Ok(rows)
}

/// `rows` intersected into `acc` (the first set is taken whole).
fn narrow(acc: &mut Option<HashSet<i64>>, rows: HashSet<i64>) {
    *acc = Some(match acc.take() {
        Some(a) => a.intersection(&rows).copied().collect(),
        None => rows,
    });
}

/// At most `k` of `rows` as a list's hits (score 1, the first sentence as the passage), one
/// per title.
fn one_per_title(rows: impl IntoIterator<Item = Exhibit>, k: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = Vec::with_capacity(k);
    for e in rows {
        if hits.len() == k {
            break;
        }
        if !hits
            .iter()
            .any(|h| h.exhibit.title.trim() == e.title.trim())
        {
            hits.push(Hit {
                passages: text::sentences(&e.description)
                    .into_iter()
                    .take(1)
                    .collect(),
                exhibit: e,
                score: 1.0,
            });
        }
    }
    hits
}

/// Most rows of a title-named kind whose titles are read ([`titled_as_written`]); beyond it
/// the rows are taken as the index gives them.
const TITLED_READ: usize = 20_000;

/// Of `rows` (whose titles hold the index token `token`), those whose title is headed by a
/// word of that token ([`kinds::english_title_heads`]; "plates" for `plate`): not a
/// word of the same stem elsewhere ("Gold Plated Bronze Ring" is no plate), nor what the
/// object shows ("Tsuba with … Throwing his Sword into the Sea" is no sword).
fn titled_as_written(
    store: &CollectionStore,
    rows: Vec<kinds::Member>,
    token: &str,
) -> Result<Vec<kinds::Member>, StoreError> {
    if rows.len() > TITLED_READ {
        return Ok(rows);
    }
    let pks: Vec<i64> = rows.iter().map(|m| m.0).collect();
    let keep: HashSet<i64> = store
        .exhibits_by_pk(&pks)?
        .into_iter()
        .filter(|(_, r)| {
            kinds::english_title_heads(&r.title)
                .iter()
                .any(|w| text::latin_tokens(w) == [token])
        })
        .map(|(pk, _)| pk)
        .collect();
    Ok(rows.into_iter().filter(|m| keep.contains(&m.0)).collect())
}

/// Most members of a kind whose gallery fields are read to say where it is kept.
const PLACES_READ: usize = 20_000;

/// Rows scored for the words that narrow a kind ([`browse_blocking`]); members beyond them follow
/// unordered by those words.
const BROWSE_QUALIFIER_CANDIDATES: usize = 2_000;

/// Members of a kind, those whose records weigh the kind's word most, whose titles are read to
/// put the ones named for it first ([`browse_blocking`]).
const BROWSE_TITLE_LOOKUP: usize = 64;

/// The kind a browse question names and a few of its exhibits ([`kinds`]),
/// synchronously: None when its words name no kind. The exhibits listed are the kind's most
/// fully described records (longest in the index: a curator wrote most about them), one per
/// title and, while there are enough, one per maker.
///
/// A question for an order ([`ordering::asks_order`]: the oldest, the biggest, ...)
/// lists the kind, or the whole collection when the rest of the question names nothing ("What
/// is the oldest thing here?"), in that order by [`dating::start_year`] or
/// [`super::sizing::size_of`]; the values are read once a generation into `orders`.
pub fn browse_blocking(
    store: &CollectionStore,
    question: &str,
    k: usize,
    orders: &OrderCaches,
) -> Result<Option<Browse>, StoreError> {
    if k == 0 {
        return Ok(None);
    }
    if kinds::asks_most_works(question) {
        return most_works(store, k, question);
    }
    let dict = dictionary::dictionary();
    let age = ordering::asks_order(question);
    let where_kept = kinds::asks_where_kept(question);
    let asked = match age {
        Some(_) => ordering::without_order_words(question),
        None if kinds::asks_taste(question) => kinds::without_taste_words(question),
        None => question.to_string(),
    };
    let units_of = |asked: &str| {
        let units = kinds::periods(kinds::subject(asked, &|w| dict.kind_senses_of(w)), &|p| {
            dict.chinese_of(p)
                .into_iter()
                .filter(|(phrase, _)| phrase == p)
                .flat_map(|(_, heads)| heads)
                .collect()
        });
        kinds::with_demonyms(
            kinds::with_dynasty_forms(units),
            &|w| dict.is_proper(w),
            &|w| dict.is_place(w),
        )
    };
    let mut plain = units_of(&asked);
    if let Some(age) = age
        && plain.is_empty()
    {
        return collection_in_order(store, age, k, orders).map(Some);
    }
    let mut members_of = |t: &str| kind_members(store, t);
    let mut rows_with = |t: &str| store.rows_holding(t);
    let mut first = kinds::resolve(&plain, &mut members_of, &mut rows_with)?;
    // No kind named: a Chinese word may be a place and a kind in one (中国画, 日本画: one word to
    // jieba and one sense to the dictionary, "traditional Chinese painting", which names no kind
    // the way "Chinese paintings" does). Read as the place's kind (中国的画) when that names one.
    if first.is_none()
        && let Some(split) = kinds::split_place_words(&asked, &|w| dict.is_place(w), &|w| {
            !dict.kind_senses_of(w).is_empty()
        })
    {
        let units = units_of(&split);
        if let Some(r) = kinds::resolve(&units, &mut members_of, &mut rows_with)? {
            plain = units;
            first = Some(r);
        }
    }
    // An English word of a kind reaches the kinds a Chinese catalogue names at the end of its
    // titles through the dictionary's headwords glossed by that very word ("photographs" →
    // 照片, "medals" → 勋章): without it an English visitor never heard of the Chinese half of
    // a bilingual collection. Not a word that narrows the kind as read without it: "Chinese"
    // in "Chinese porcelain" would become a kind of its own (a title ending in a word glossed
    // "Chinese") and leave no porcelain. The reading without it stands when this one finds no
    // kind.
    let mut crossed = plain.clone();
    for u in &mut crossed {
        if u.word.chars().any(text::is_cjk)
            || first
                .as_ref()
                .is_some_and(|r| r.qualifiers.contains(&u.word))
        {
            continue;
        }
        let Some(t) = u.alternatives.first().and_then(|a| a.first()).cloned() else {
            continue;
        };
        // The headwords glossed by the word itself ("photographs": 照片), and those glossed by
        // the word of or from something ("rubbings": 拓本 "rubbing of inscription", 拓片
        // "rubbings from a tablet"), a kind the catalogue names more narrowly.
        let narrower = dict.heads_whose_sense_is_a(&t);
        let glossed = dict
            .chinese_of(&[t.as_str()])
            .into_iter()
            .filter(|(phrase, _)| phrase == &[t.as_str()])
            .map(|(_, heads)| heads)
            .chain(std::iter::once(narrower));
        for heads in glossed {
            // A kind is a short word (照片, 勋章, 明信片): a long headword glossed by the word
            // (a committee's name glossed "Taiwan") would reach kinds through any of its parts.
            for h in heads.iter().filter(|h| h.chars().count() <= 4) {
                let tokens = text::index_tokens(h);
                if !tokens.is_empty() && !u.alternatives.contains(&tokens) {
                    u.alternatives.push(tokens);
                }
            }
        }
    }
    // No kind named: the words may say where or when the exhibits were made ("Anything from
    // Japan?", 有古埃及的东西吗？), as the records' period fields say it, before an English word
    // is crossed to a Chinese title's kind. Every word must: a word that is no origin does not
    // narrow here ("anything about the French Revolution" is a search).
    let from = if first.is_none() {
        let units: Vec<kinds::Unit> = plain
            .iter()
            .map(|u| kinds::origin_unit(u, &|w| dict.noun_senses_of(w)))
            .collect();
        let mut origin_of = |t: &str| store.rows_holding(&kinds::origin_token(t));
        let mut nothing = |_: &str| Ok::<_, StoreError>(Vec::new());
        kinds::resolve(&units, &mut origin_of, &mut nothing)?.map(|r| (units, r))
    } else {
        None
    };
    let again = if crossed == plain || from.is_some() {
        None
    } else {
        kinds::resolve(&crossed, &mut members_of, &mut rows_with)?
    };
    // Still no kind, for the oldest or the finest of something: the kind may be one the
    // catalogue names only in its English titles ("What is the oldest vase?", "the prettiest
    // bowl", 最古老的花瓶 through its sense "vase": no department or medium says vase), read
    // from the title column alone so a description's passing "vase" does not count; and for
    // where they are kept ("Where are the swords?"), and for a period's ("Do you have Qing
    // dynasty vases?", 有没有明代的花瓶？: the search's list gave vases of any period, the
    // period's words being common). Only for these questions: a plain "Do you have vases?" is
    // answered by the search's list, which holds the word where it matters.
    let titled = if first.is_none()
        && from.is_none()
        && (age.is_some()
            || kinds::asks_taste(question)
            || where_kept
            || plain.iter().any(kinds::is_period))
    {
        titled_kind(store, &plain, &mut rows_with)?
    } else {
        None
    };
    let (units, resolved, origin) = match (again, first, from, titled) {
        (Some(r), _, _, _) => (crossed, r, false),
        (None, Some(r), _, _) => (plain, r, false),
        (None, None, Some((units, r)), _) => (units, r, true),
        (None, None, None, Some((units, r))) => (units, r, false),
        (None, None, None, None) => {
            return period_left_none(store, &plain, &crossed, &mut members_of, &mut rows_with);
        }
    };
    let kinds::Resolved {
        mut members,
        named,
        qualifiers,
        parts,
    } = resolved;
    {
        // Narrowed by words ("Japanese ceramics"): the members whose records weigh those words
        // most come first (a culture field saying "Japanese" before a description that names
        // Japan once), BM25 over the words as the search ranks them; the rest after, longest
        // first. Not narrowed: the members whose title holds a word that named the kind come
        // first (有沒有盔甲？ listed four sword guards of the Arms & Armor department, the
        // longest records, before the body armor), the rest longest first as before.
        let narrowing = !qualifiers.is_empty();
        let tokens: Vec<String> = if narrowing {
            units
                .iter()
                .filter(|u| qualifiers.contains(&u.word))
                .flat_map(|u| u.alternatives.iter().flatten().cloned())
                .collect()
        } else {
            named.clone()
        };
        let scored: HashMap<i64, f64> = store
            .candidates(
                &tokens
                    .iter()
                    .map(|t| MatchTerm {
                        text: t,
                        prefix: false,
                    })
                    .collect::<Vec<_>>(),
                &WEIGHTS,
                BROWSE_QUALIFIER_CANDIDATES,
            )?
            .into_iter()
            .collect();
        let titled: HashMap<i64, f64> = if narrowing {
            scored
        } else {
            let mut best: Vec<(i64, f64)> = members
                .iter()
                .filter_map(|m| scored.get(&m.0).map(|s| (m.0, *s)))
                .collect();
            best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            best.truncate(BROWSE_TITLE_LOOKUP);
            let pks: Vec<i64> = best.iter().map(|(pk, _)| *pk).collect();
            let holds: std::collections::HashSet<i64> = store
                .exhibits_by_pk(&pks)?
                .into_iter()
                .filter(|(_, r)| {
                    text::index_text(&r.title)
                        .split(' ')
                        .any(|w| tokens.iter().any(|t| t == w))
                })
                .map(|(pk, _)| pk)
                .collect();
            best.into_iter()
                .filter(|(pk, _)| holds.contains(pk))
                .collect()
        };
        members.sort_by(|a, b| {
            let (sa, sb) = (titled.get(&a.0), titled.get(&b.0));
            sb.partial_cmp(&sa)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.1.cmp(&a.1))
                .then(a.0.cmp(&b.0))
        });
        // A narrowing period as the period field says it before a description's mention:
        // 唐代的拓本 listed the Song edict whose record mentions 唐代 above the Tang rubbings.
        if narrowing {
            let mut placed: HashSet<i64> = HashSet::new();
            for t in tokens.iter().filter(|t| t.starts_with(kinds::ORIGIN)) {
                placed.extend(store.rows_holding(t)?.into_iter().map(|(pk, _)| pk));
            }
            if !placed.is_empty() {
                members.sort_by_key(|m| !placed.contains(&m.0));
            }
        }
    }
    // An origin found in both halves of a bilingual collection ("Anything from the Tang
    // dynasty?": `#o:tang` in English period fields, `#o:唐` in Chinese ones): the members its
    // words in the visitor's script found come first. The examples below prefer the visitor's
    // script only among the rows they read, and the Chinese rubbings, the longest records, left
    // the English catalogue's Tang camel unread.
    if origin {
        let q_cjk = question.chars().any(text::is_cjk);
        let mut own: HashSet<i64> = HashSet::new();
        for alt in units.iter().flat_map(|u| &u.alternatives) {
            if let [t] = alt.as_slice()
                && t.trim_start_matches(kinds::ORIGIN)
                    .chars()
                    .any(text::is_cjk)
                    == q_cjk
            {
                let rows = store.rows_holding(&kinds::origin_token(t))?;
                own.extend(rows.into_iter().map(|(pk, _)| pk));
            }
        }
        members.sort_by_key(|m| !own.contains(&m.0));
    }
    if parts.len() > 1 {
        // A list of kinds ("porcelain and jade"): the examples take turns, each kind's in the
        // order above, so the porcelain's longer records do not crowd the jade out.
        let sets: Vec<HashSet<i64>> = parts.iter().map(|p| p.iter().copied().collect()).collect();
        let mut queues: Vec<std::collections::VecDeque<kinds::Member>> = sets
            .iter()
            .map(|set| {
                members
                    .iter()
                    .filter(|m| set.contains(&m.0))
                    .copied()
                    .collect()
            })
            .collect();
        let mut turns: Vec<kinds::Member> = Vec::with_capacity(members.len());
        let mut seen = HashSet::new();
        while queues.iter().any(|q| !q.is_empty()) {
            for q in &mut queues {
                while let Some(m) = q.pop_front() {
                    if seen.insert(m.0) {
                        turns.push(m);
                        break;
                    }
                }
            }
        }
        members = turns;
    }
    // An order (oldest, largest, ...): the members with a value in that order, listed as they
    // come.
    let by_age = match age {
        Some(age) => Some(ranked_of(store, orders, age)?.ordered(members.iter().map(|m| m.0), age)),
        None => None,
    };
    let read: Vec<i64> = match &by_age {
        Some(ordered) => ordered
            .iter()
            .take(k * BROWSE_READ_IN_ORDER)
            .copied()
            .collect(),
        None => members
            .iter()
            .take(k * BROWSE_READ_PER_LISTED)
            .map(|(pk, _)| *pk)
            .collect(),
    };
    let rows: Vec<Exhibit> = store
        .exhibits_by_pk(&read)?
        .into_iter()
        .map(|(_, r)| Exhibit::from(r))
        .collect();
    // Examples in the visitor's script first when the kind holds both (你們有哪些勳章？ listed
    // a Dutch marriage medal before the museum's 勳章), then one per maker, then any. In age
    // order: one per title, in that order.
    let q_cjk = question.chars().any(text::is_cjk);
    let mut listed: Vec<&Exhibit> = Vec::new();
    let passes: &[(bool, bool)] = if by_age.is_some() {
        &[(false, false)]
    } else {
        &[(true, true), (true, false), (false, true), (false, false)]
    };
    for &(own_script, distinct_makers) in passes {
        for e in &rows {
            if listed.len() == k {
                break;
            }
            if own_script && e.title.chars().any(text::is_cjk) != q_cjk {
                continue;
            }
            let same = |o: &&Exhibit| {
                o.id == e.id
                    || o.title.trim() == e.title.trim()
                    || (distinct_makers && !e.maker.trim().is_empty() && o.maker == e.maker)
            };
            if !listed.iter().any(same) {
                listed.push(e);
            }
        }
    }
    // Each listed exhibit's markers, once (a title's are a jieba cut).
    let marked: Vec<(&Exhibit, String)> = listed
        .iter()
        .map(|e| (*e, kinds::markers(&e.gallery, &e.medium, &e.title)))
        .collect();
    let named = &named;
    let holding = |mark: &'static str| {
        marked
            .iter()
            .filter(move |(_, markers)| {
                named
                    .iter()
                    .any(|t| markers.split(' ').any(|m| m.strip_prefix(mark) == Some(t)))
            })
            .map(|(e, _)| *e)
    };
    let departments: Vec<&str> = holding(kinds::DEPARTMENT)
        .filter_map(|e| kinds::department(&e.gallery))
        .collect();
    let mut media: Vec<String> = holding(kinds::MEDIUM)
        .filter_map(|e| kinds::medium_word(&e.medium))
        .collect();
    // A Chinese title's head word names the kind like a medium does (拓本, 墓志铭); the
    // visitor's own word when the head holds it (勋章, not the first title's 云麾勋章), or when
    // the visitor asked in English, the English word that reached it ("photographs catalogued
    // in Chinese", not 照片, which an English voice cannot read).
    media.extend(
        holding(kinds::TITLE)
            .filter_map(|e| kinds::title_word(&e.title))
            .map(|w| {
                let tokens = text::index_tokens(&w);
                let english = |u: &&kinds::Unit| {
                    !q_cjk
                        && u.alternatives
                            .iter()
                            .any(|a| a.iter().all(|t| tokens.contains(t)))
                };
                match units.iter().find(|u| w.contains(&u.word)) {
                    Some(u) => u.word.clone(),
                    None => match units.iter().find(english) {
                        Some(u) => format!("{} catalogued in Chinese", u.word),
                        None => w,
                    },
                }
            }),
    );
    let mut kinds_named: Vec<String> = Vec::new();
    if parts.len() > 1 {
        for u in &units {
            match kinds_named.get_mut(u.part) {
                Some(w) => w.push_str(&u.word),
                None => kinds_named.push(u.word.clone()),
            }
        }
    }
    // Where the kind is kept, when asked: its departments, from the gallery fields of its
    // members (at most PLACES_READ of them: a larger kind is counted on its first ones).
    let places = if where_kept {
        let pks: Vec<i64> = members.iter().take(PLACES_READ).map(|m| m.0).collect();
        kinds::departments(&store.gallery_counts_of(&pks)?)
    } else {
        Vec::new()
    };
    Ok(Some(Browse {
        total: members.len(),
        label: kinds::label(&departments, &media),
        words: units.into_iter().map(|u| u.word).collect(),
        qualifiers,
        kinds: kinds_named,
        origin,
        shown: 0,
        order: age,
        compared: by_age.as_ref().map_or(0, Vec::len),
        places,
        makers: Vec::new(),
        of_kind: 0,
        hits: listed
            .into_iter()
            .map(|e| Hit {
                exhibit: e.clone(),
                score: 1.0,
                passages: text::sentences(&e.description)
                    .into_iter()
                    .take(1)
                    .collect(),
            })
            .collect(),
    }))
}

/// The kind the last of `units` names in the English titles ([`kinds::headed_by_last`]:
/// "Chinese vase" is a vase), the others narrowing it as words of the records (a title saying
/// "Chinese" is no kind); with the units it was read from.
fn titled_kind(
    store: &CollectionStore,
    units: &[kinds::Unit],
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<kinds::Member>, StoreError>,
) -> Result<Option<(Vec<kinds::Unit>, kinds::Resolved)>, StoreError> {
    let Some(units) = kinds::headed_by_last(units) else {
        return Ok(None);
    };
    let resolved = {
        let Some(head) = units.last() else {
            return Ok(None);
        };
        let mut titled_of = |t: &str| -> Result<Vec<kinds::Member>, StoreError> {
            if !head.alternatives.iter().any(|a| a.iter().any(|x| x == t)) {
                return Ok(Vec::new());
            }
            titled_as_written(store, store.rows_titled(t)?, t)
        };
        kinds::resolve(&units, &mut titled_of, rows_with)?
    };
    Ok(resolved.map(|r| (units, r)))
}

/// Most words besides the period in a question [`period_left_none`] reads: a kind and one word
/// narrowing it ("Tang dynasty vases", "Chinese porcelain of the Tang dynasty"); a longer
/// question names one thing, and is searched.
const PERIOD_LEFT_NONE_WORDS: usize = 2;

/// A kind the question names, narrowed by a period that leaves none of it ("Do you have any
/// Tang dynasty vases?", 有没有唐代的瓷器？): a listing of none ([`Browse::of_kind`] says how
/// many of the kind there are), so the answer says the collection has the kind but none of that
/// period. The search had answered them with its list: a Tang camel and a Chinese Buddha for
/// the vases, Qing porcelain and a Dutch porcelain catalogue as "related" for the porcelain.
/// None when no period narrows, the words without it name no kind of the collection, or some
/// record holds the period's words and the kind's ([`any_record_holds_all`]; `plain` and
/// `crossed` as [`browse_blocking`] reads them).
fn period_left_none(
    store: &CollectionStore,
    plain: &[kinds::Unit],
    crossed: &[kinds::Unit],
    members_of: &mut dyn FnMut(&str) -> Result<Vec<kinds::Member>, StoreError>,
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<kinds::Member>, StoreError>,
) -> Result<Option<Browse>, StoreError> {
    let rest = |units: &[kinds::Unit]| -> Vec<kinds::Unit> {
        units
            .iter()
            .filter(|u| !kinds::is_period(u))
            .cloned()
            .collect()
    };
    let (plain_rest, crossed_rest) = (rest(plain), rest(crossed));
    if plain_rest.len() == plain.len()
        || plain_rest.is_empty()
        || plain_rest.len() > PERIOD_LEFT_NONE_WORDS
    {
        return Ok(None);
    }
    let mut kind = kinds::resolve(&plain_rest, members_of, rows_with)?;
    if kind.is_none() && crossed_rest != plain_rest {
        kind = kinds::resolve(&crossed_rest, members_of, rows_with)?;
    }
    if kind.is_none() {
        kind = titled_kind(store, &plain_rest, rows_with)?.map(|(_, r)| r);
    }
    if kind.is_none() || any_record_holds_all(crossed, rows_with)? {
        return Ok(None);
    }
    Ok(kind.map(|k| Browse {
        words: plain.iter().map(|u| u.word.clone()).collect(),
        qualifiers: plain
            .iter()
            .filter(|u| kinds::is_period(u))
            .map(|u| u.word.clone())
            .collect(),
        of_kind: k.members.len(),
        ..Browse::default()
    }))
}

/// Whether some record holds the words of every unit (any alternative of each, all of its
/// tokens) anywhere. A kind named narrowly can leave none where the words do not: the two
/// records titled 书法 are not Tang, but a Tang rubbing's record says 唐 and 书法家, so
/// 有没有唐代的书法？ is searched (and answered by it), not told there is none.
fn any_record_holds_all(
    units: &[kinds::Unit],
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<kinds::Member>, StoreError>,
) -> Result<bool, StoreError> {
    let mut common: Option<HashSet<i64>> = None;
    for u in units {
        let mut unit_rows: HashSet<i64> = HashSet::new();
        for alt in &u.alternatives {
            let mut alt_rows: Option<HashSet<i64>> = None;
            // "jade artifact" for 玉器, "Song dynasty" for 宋代: the generic head says only "a
            // thing of that kind" or "a time" (a Song–Ming jade cup says neither word).
            let own = alt.iter().filter(|t| !kinds::is_generic_head(t));
            for t in own {
                let rows: HashSet<i64> = rows_with(t)?.into_iter().map(|(pk, _)| pk).collect();
                alt_rows = Some(match alt_rows {
                    None => rows,
                    Some(a) => a.intersection(&rows).copied().collect(),
                });
            }
            unit_rows.extend(alt_rows.unwrap_or_default());
        }
        common = Some(match common {
            None => unit_rows,
            Some(c) => c.intersection(&unit_rows).copied().collect(),
        });
        if common.as_ref().is_some_and(HashSet::is_empty) {
            return Ok(false);
        }
    }
    Ok(common.is_some_and(|c| !c.is_empty()))
}

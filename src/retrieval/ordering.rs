//! The orders a visitor can ask the collection in: the oldest or newest ([`super::dating`]),
//! the largest or smallest ([`super::sizing`]), of the whole collection or of a kind
//! ("What is the biggest painting?", 最古老的瓷器是哪件？).
//!
//! [`asks_order`] tells such a question from other superlatives, [`without_order_words`]
//! leaves the rest for the kind lookup (`embedded::browse_blocking`), and [`Ranked`] holds the
//! value each exhibit sorts by (its start year, its largest dimension), read once a collection
//! generation.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{dating, sizing};

/// The order a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    Oldest,
    Newest,
    Largest,
    Smallest,
}

impl Order {
    /// Whether the order is by size (else by date).
    pub fn by_size(self) -> bool {
        matches!(self, Order::Largest | Order::Smallest)
    }

    /// Whether the largest value comes first.
    pub fn descending(self) -> bool {
        matches!(self, Order::Newest | Order::Largest)
    }
}

/// The order `question` asks the collection in, if any ([`dating::asks_age`],
/// [`sizing::asks_size`]).
pub fn asks_order(question: &str) -> Option<Order> {
    dating::asks_age(question).or_else(|| sizing::asks_size(question))
}

/// `question` (normalised) without the words that asked for an order, for the kind lookup.
pub fn without_order_words(question: &str) -> String {
    sizing::without_size_words(&dating::without_age_words(question))
}

/// The words of a normalised question (apostrophes kept: "world's").
pub(super) fn words_of(norm: &str) -> Vec<&str> {
    norm.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether `words` hold the English `phrase` (words separated by one space).
pub(super) fn has_phrase(words: &[&str], phrase: &str) -> bool {
    let p: Vec<&str> = phrase.split(' ').collect();
    words.windows(p.len()).any(|w| w == p.as_slice())
}

/// `question` normalised without the English phrases of `en` (whole words) and the Chinese
/// ones of `zh` (longest first in each list).
pub(super) fn without_phrases(question: &str, en: &[&[&str]], zh: &[&[&str]]) -> String {
    let norm = super::text::normalize(question);
    let mut words: Vec<String> = norm.split(' ').map(str::to_string).collect();
    for phrase in en.iter().flat_map(|l| l.iter()) {
        let p: Vec<&str> = phrase.split(' ').collect();
        let mut i = 0;
        while i + p.len() <= words.len() {
            let hit = words[i..i + p.len()]
                .iter()
                .zip(&p)
                .all(|(w, p)| w.trim_matches(|c: char| !c.is_alphanumeric()) == *p);
            if hit {
                words.drain(i..i + p.len());
            } else {
                i += 1;
            }
        }
    }
    let mut out = words.join(" ");
    for phrase in zh.iter().flat_map(|l| l.iter()) {
        out = out.replace(phrase, " ");
    }
    out
}

/// Every exhibit's value for an order (those without one are left out): `by_pk` for a kind's
/// members, `order` (smallest value first, then by pk) for the whole collection.
#[derive(Debug, Default)]
pub struct Ranked {
    pub by_pk: HashMap<i64, i64>,
    pub order: Vec<(i64, i64)>,
}

impl Ranked {
    /// From `(pk, value)` pairs.
    pub fn new(values: impl IntoIterator<Item = (i64, i64)>) -> Ranked {
        let by_pk: HashMap<i64, i64> = values.into_iter().collect();
        let mut order: Vec<(i64, i64)> = by_pk.iter().map(|(pk, v)| (*v, *pk)).collect();
        order.sort_unstable();
        Ranked { by_pk, order }
    }

    /// `pks` in `order`, those without a value dropped (ties by pk).
    pub fn ordered(&self, pks: impl IntoIterator<Item = i64>, order: Order) -> Vec<i64> {
        let mut valued: Vec<(i64, i64)> = pks
            .into_iter()
            .filter_map(|pk| self.by_pk.get(&pk).map(|v| (*v, pk)))
            .collect();
        valued.sort_unstable();
        if order.descending() {
            valued.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        }
        valued.into_iter().map(|(_, pk)| pk).collect()
    }

    /// The whole collection's pks in `order`.
    pub fn all(&self, order: Order) -> Box<dyn Iterator<Item = i64> + '_> {
        let pk = |x: &(i64, i64)| x.1;
        if order.descending() {
            Box::new(self.order.iter().rev().map(pk))
        } else {
            Box::new(self.order.iter().map(pk))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranked_orders_a_kind_and_drops_what_has_no_value() {
        let r = Ranked::new([(1, 1858), (2, -540), (4, 618)]);
        assert_eq!(r.order, [(-540, 2), (618, 4), (1858, 1)]);
        assert_eq!(r.ordered([1, 2, 3, 4], Order::Oldest), [2, 4, 1]);
        assert_eq!(r.ordered([1, 3, 4], Order::Newest), [1, 4]);
        assert_eq!(r.all(Order::Largest).collect::<Vec<_>>(), [1, 4, 2]);
    }

    #[test]
    fn a_question_asks_for_one_order_or_none() {
        for (q, o) in [
            ("What is the oldest thing here?", Some(Order::Oldest)),
            ("What's the biggest painting?", Some(Order::Largest)),
            ("最小的展品是什么？", Some(Order::Smallest)),
            ("Who made the vase?", None),
        ] {
            assert_eq!(asks_order(q), o, "{q}");
        }
    }
}

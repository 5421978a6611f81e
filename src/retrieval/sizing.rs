//! How big an exhibit is, as a length one can sort by, and the questions that ask for the
//! largest or smallest exhibits ("What's the biggest painting?", 最小的展品是什么？).
//!
//! A record's `dimensions` is free text written by a cataloguer. [`size_of`] reads the
//! measurements of its first part that gives any (an object before its frame: "H excluding
//! frame: … ; Framed H: …"), in centimetres:
//! - the metric figures of an English record, in brackets after the inches ("4 11/16 x 4 5/8
//!   in. (12 x 11.8 x 1.9 cm)"), or before "cm"/"mm" without them;
//! - a Chinese catalogue's labelled figures (縱67 橫145, 徑3.4 厚0.2, 長30 寬23.3), which it
//!   gives in centimetres without saying so;
//! - bare figures ("30.5x25.3x1"), read as centimetres as the same catalogues write them.
//!
//! An exhibit's size is its largest measurement: a visitor's "biggest" is what stands out (a
//! scroll's length, a statue's height), and an area or a volume needs measurements that half
//! the records do not give. Inches alone, weights and "無" give no size; answers compare "the
//! exhibits with measurements in their records", as the dating answers say "dated".
//!
//! [`asks_size`] tells a question about the largest or smallest exhibits from other
//! superlatives (the biggest difference, 最大的特点), [`without_size_words`] leaves the rest for
//! the kind lookup ([`super::ordering`]).

use super::ordering::{self, Order, Ranked};
use super::text;

/// An exhibit's measurements in centimetres, as its record gives them (in its order).
#[derive(Debug, Clone, PartialEq)]
pub struct Size {
    pub cm: Vec<f64>,
}

impl Size {
    /// The largest measurement.
    pub fn largest(&self) -> f64 {
        self.cm.iter().copied().fold(0.0, f64::max)
    }

    /// "12 × 11.8 × 1.9 cm".
    pub fn display(&self) -> String {
        let figures: Vec<String> = self.cm.iter().map(|c| figure(*c)).collect();
        format!("{} cm", figures.join(" × "))
    }
}

/// A measurement as a visitor reads it: at most one decimal, none when whole.
fn figure(cm: f64) -> String {
    let r = (cm * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// Labels of a Chinese catalogue's measurements (Simplified and Traditional): height or length
/// (縱), width (橫), length, width, diameter, thickness, height.
const ZH_LABELS: &[char] = &[
    '縱', '纵', '橫', '横', '長', '长', '寬', '宽', '徑', '径', '厚', '高',
];

/// Longest measurement believed, in centimetres (a slip of the unit, "1200" for 12.00).
const MAX_CM: f64 = 5000.0;

/// The measurements of a record's `dimensions` field, or None when it gives none this module
/// can read (see the module documentation).
pub fn size_of(dimensions: &str) -> Option<Size> {
    dimensions
        .split([';', '\n'])
        .find_map(part_size)
        .filter(|s| !s.cm.is_empty())
}

/// The measurements of one part of a `dimensions` field.
fn part_size(part: &str) -> Option<Size> {
    let metric = |unit: &str, scale: f64| -> Option<Size> {
        let at = part.find(unit)?;
        let before = &part[..at];
        // The bracket the unit stands in ("(0.2 cm, 0.3 cm)"), else what follows the inches.
        let group = match before.rfind('(') {
            Some(open) => {
                let close = part[at..].find(')').map_or(part.len(), |c| at + c);
                &part[open + 1..close]
            }
            None => &before[before.rfind("in.").map_or(0, |p| p + 3)..],
        };
        let cm: Vec<f64> = numbers(group).into_iter().map(|n| n * scale).collect();
        (!cm.is_empty()).then_some(Size { cm })
    };
    if let Some(s) = metric("cm", 1.0).or_else(|| metric("mm", 0.1)) {
        return Some(s);
    }
    let bare = part
        .trim()
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'x' | 'X' | '×' | '*' | '~' | ' '));
    if part.contains(ZH_LABELS) || (bare && part.chars().any(|c| c.is_ascii_digit())) {
        let cm = numbers(part);
        return (!cm.is_empty()).then_some(Size { cm });
    }
    None
}

/// The decimal numbers in `s`, in order, those over zero and at most [`MAX_CM`].
fn numbers(s: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (c == '.' && !cur.is_empty() && !cur.contains('.')) {
            cur.push(c);
        } else if !cur.is_empty() {
            if let Ok(n) = cur.trim_end_matches('.').parse::<f64>()
                && n > 0.0
                && n <= MAX_CM
            {
                out.push(n);
            }
            cur.clear();
        }
    }
    out
}

/// Every measured exhibit's largest measurement in tenths of a millimetre, from (pk,
/// dimensions) rows, read once a collection generation (`embedded::EmbeddedRetriever`'s cache).
pub fn sizes(rows: impl IntoIterator<Item = (i64, String)>) -> Ranked {
    Ranked::new(
        rows.into_iter()
            .filter_map(|(pk, d)| size_of(&d).map(|s| (pk, (s.largest() * 100.0).round() as i64))),
    )
}

/// English words that ask for the largest exhibits.
const LARGEST_EN: &[&str] = &["largest", "biggest", "tallest", "hugest", "longest"];
/// English words that ask for the smallest.
const SMALLEST_EN: &[&str] = &["smallest", "tiniest", "littlest"];
/// Chinese phrases (Simplified, longest first).
const LARGEST_ZH: &[&str] = &["尺寸最大", "体积最大", "个头最大", "最巨大", "最大"];
const SMALLEST_ZH: &[&str] = &["尺寸最小", "体积最小", "个头最小", "最迷你", "最小"];

/// Words after an English superlative that make it about something other than an exhibit's
/// size ("your largest collection", "the biggest number of works", "the biggest difference").
const NOT_SIZE_EN: &[&str] = &[
    "collection",
    "collections",
    "number",
    "amount",
    "share",
    "part",
    "department",
    "gallery",
    "galleries",
    "room",
    "section",
    "museum",
    "group",
    "difference",
    "influence",
    "impact",
    "challenge",
    "problem",
    "mystery",
    "fan",
    "donor",
];
/// The same after a Chinese superlative (最大的特点, 最大的收藏).
const NOT_SIZE_ZH: &[&str] = &[
    "特点", "特色", "区别", "不同", "贡献", "影响", "成就", "意义", "价值", "收藏", "展厅", "展区",
    "问题", "作用", "优点", "亮点", "困难", "挑战", "秘密",
];

/// Whether `question` asks for the largest or smallest exhibits (of the museum, of a kind or an
/// origin: the rest of the question decides which).
pub fn asks_size(question: &str) -> Option<Order> {
    let norm = text::normalize(question);
    let words = ordering::words_of(&norm);
    if super::dating::not_ours(&norm, &words) {
        return None;
    }
    let en = |list: &[&str]| {
        words.iter().enumerate().any(|(i, w)| {
            list.contains(w)
                && !words
                    .get(i + 1)
                    .is_some_and(|n| NOT_SIZE_EN.contains(n) || *n == "of")
        })
    };
    let zh = |list: &[&str]| {
        list.iter().any(|p| {
            norm.match_indices(p).any(|(at, _)| {
                let after = norm[at + p.len()..].trim_start_matches('的');
                !NOT_SIZE_ZH.iter().any(|n| after.starts_with(n))
            })
        })
    };
    if en(LARGEST_EN) || zh(LARGEST_ZH) {
        Some(Order::Largest)
    } else if en(SMALLEST_EN) || zh(SMALLEST_ZH) {
        Some(Order::Smallest)
    } else {
        None
    }
}

/// `question` (normalised) without the words that asked for a size order ([`asks_size`]).
pub fn without_size_words(question: &str) -> String {
    ordering::without_phrases(
        question,
        &[LARGEST_EN, SMALLEST_EN],
        &[LARGEST_ZH, SMALLEST_ZH],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_measurements_are_read_in_centimetres() {
        for (dims, cm) in [
            (
                "4 11/16 x 4 5/8 x 3/4 in. (12 x 11.8 x 1.9 cm)",
                Some(vec![12.0, 11.8, 1.9]),
            ),
            ("H: 5 1/2 × W: 3 in. (14 × 7.6 cm)", Some(vec![14.0, 7.6])),
            ("Diam: 2 in. (5.1 cm)", Some(vec![5.1])),
            ("1/16 in., 1/8 in. (0.2 cm, 0.3 cm)", Some(vec![0.2, 0.3])),
            ("12 x 30 cm", Some(vec![12.0, 30.0])),
            (
                "H excluding frame: 20 x W: 30 in. (50.8 x 76.2 cm); Framed H: 30 x W: 40 in. \
                 (76.2 x 101.6 cm)",
                Some(vec![50.8, 76.2]),
            ),
            ("縱67 橫145", Some(vec![67.0, 145.0])),
            ("徑3.4 厚0.2(大); 徑2 厚0.1(小)", Some(vec![3.4, 0.2])),
            ("长30 宽23.3", Some(vec![30.0, 23.3])),
            ("30.5x25.3x1", Some(vec![30.5, 25.3, 1.0])),
            ("120 mm", Some(vec![12.0])),
            ("無", None),
            ("詳情看CR照片", None),
            ("", None),
            ("3 in.", None),
        ] {
            assert_eq!(size_of(dims).map(|s| s.cm), cm, "{dims}");
        }
        assert_eq!(size_of("縱67 橫145").unwrap().display(), "67 × 145 cm");
        assert_eq!(
            size_of("(12.04 x 11.75 cm)").unwrap().display(),
            "12 × 11.8 cm"
        );
    }

    #[test]
    fn questions_about_the_largest_or_smallest_exhibits_are_told_apart() {
        for (q, o) in [
            ("What's the biggest painting?", Some(Order::Largest)),
            (
                "Which is the largest object in the museum?",
                Some(Order::Largest),
            ),
            ("Show me your smallest things", Some(Order::Smallest)),
            ("What is the tiniest exhibit?", Some(Order::Smallest)),
            ("最大的展品是什么？", Some(Order::Largest)),
            ("館裡最小的東西是什麼", Some(Order::Smallest)),
            ("尺寸最大的画是哪一幅？", Some(Order::Largest)),
            // Not the size of exhibits here.
            ("What is your largest collection?", None),
            ("Who gave the biggest number of works?", None),
            ("What's the biggest painting in the world?", None),
            ("Is this the largest vase?", None),
            ("这件瓷器最大的特点是什么？", None),
            ("唐三彩最大的特点是什么", None),
            ("How big is the mummy?", None),
            ("What is the oldest vase?", None),
        ] {
            assert_eq!(asks_size(q), o, "{q}");
        }
    }

    #[test]
    fn the_size_words_leave_the_kind_for_the_lookup() {
        assert_eq!(
            without_size_words("What's the biggest painting?")
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["what's", "the", "painting?"]
        );
        assert_eq!(
            without_size_words("最大的瓷器是哪件？").trim(),
            "的瓷器是哪件?"
        );
    }

    #[test]
    fn sizes_rank_by_the_largest_measurement() {
        let s = sizes([
            (1, "縱67 橫145".to_string()),
            (2, "(12 x 11.8 cm)".to_string()),
            (3, "無".to_string()),
        ]);
        assert_eq!(s.order, [(1200, 2), (14500, 1)]);
        assert_eq!(s.ordered([1, 2, 3], Order::Largest), [1, 2]);
    }
}

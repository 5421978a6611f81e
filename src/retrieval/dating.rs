//! When an exhibit was made, as a year one can sort by, and the questions that ask for the
//! oldest or newest exhibits ("What is the oldest thing here?", 最古老的瓷器是哪件？).
//!
//! A record's `date` is free text written by a cataloguer ("ca. 1800-1600 BC", "late 7th
//! century BC", "9th century AH/AD 15th century", "Base: 1101-1150; Right figures: 1180-1220");
//! a Chinese catalogue often gives only a dynasty in its period field (唐, 東漢). [`start_year`]
//! reads the earliest year either states: the start of the first range, a century or
//! millennium read as its first year moved by its modifier ("late" two thirds in), the Islamic
//! calendar's year left for the AD one beside it; an object of several parts takes its oldest
//! part's. A record it cannot read (no date, "n.d.", "modern") has no year: answers say "the
//! oldest dated", since a collection without dates for some records cannot say more.
//!
//! [`asks_age`] tells a question about the oldest or newest exhibits from other superlatives
//! ([`super::ordering`] holds the orders a visitor can ask for);
//! [`without_age_words`] leaves the rest for the kind lookup (`embedded::browse_blocking`), so
//! "the oldest painting" is the painting kind ordered by year and "the oldest thing here" the
//! whole collection.

use super::ordering::{Order, Ranked};
use super::text::{self, QueryTerm};
use super::translit::{Bridge, BridgeKind};
use crate::store::StoreError;

/// English phrases that ask for the oldest exhibits.
const OLDEST_EN: &[&str] = &["oldest", "earliest", "most ancient"];
/// English phrases that ask for the newest ("latest" is left out: "your latest exhibition").
const NEWEST_EN: &[&str] = &["newest", "most recent", "most modern", "youngest"];
/// Chinese phrases (Simplified; the question is normalised first), longest first.
const OLDEST_ZH: &[&str] = &[
    "年代最久远",
    "历史最悠久",
    "年代最早",
    "年代最老",
    "最久远",
    "最古老",
    "最古早",
    "最早",
    "最老",
];
const NEWEST_ZH: &[&str] = &["年代最晚", "年代最近", "年代最新", "最晚", "最新"];

/// Words that make the superlative about the world, or point at one exhibit the visitor
/// already has in view, not about the museum's list: "the oldest painting in the world", "Is
/// this the oldest vase?" (searched as usual).
const NOT_OURS_EN: &[&str] = &["world", "world's", "ever", "this", "these", "it", "its"];
const NOT_OURS_ZH: &[&str] = &[
    "世界",
    "全球",
    "历史上",
    "这件",
    "这个",
    "这幅",
    "这些",
    "它",
];

/// Whether `question` asks for the oldest or newest exhibits (of the museum, of a kind or an
/// origin: the rest of the question decides which).
pub fn asks_age(question: &str) -> Option<Order> {
    let norm = text::normalize(question);
    let words = super::ordering::words_of(&norm);
    let has_en = |phrase: &str| super::ordering::has_phrase(&words, phrase);
    if not_ours(&norm, &words) {
        return None;
    }
    if OLDEST_EN.iter().any(|p| has_en(p)) || OLDEST_ZH.iter().any(|p| norm.contains(p)) {
        Some(Order::Oldest)
    } else if NEWEST_EN.iter().any(|p| has_en(p)) || NEWEST_ZH.iter().any(|p| norm.contains(p)) {
        Some(Order::Newest)
    } else {
        None
    }
}

/// Whether a normalised question (and its words) makes a superlative about the world or one
/// exhibit in view ([`NOT_OURS_EN`], [`NOT_OURS_ZH`]).
pub(super) fn not_ours(norm: &str, words: &[&str]) -> bool {
    words.iter().any(|w| NOT_OURS_EN.contains(w)) || NOT_OURS_ZH.iter().any(|w| norm.contains(w))
}

/// `question` (normalised) without the words that asked for an order ([`asks_age`]), for the
/// kind lookup: "what is the oldest painting" → "what is the  painting".
pub fn without_age_words(question: &str) -> String {
    super::ordering::without_phrases(question, &[OLDEST_EN, NEWEST_EN], &[OLDEST_ZH, NEWEST_ZH])
}

/// The year an exhibit was made, earliest reading: from its `date` field, else from a Chinese
/// dynasty in its `period` field. Negative years are BC (no year 0: 1 BC is -1).
pub fn start_year(date: &str, period: &str) -> Option<i32> {
    date.split(';')
        .filter_map(part_start)
        .min()
        .or_else(|| dynasty_start(period))
}

/// The start year of one part of a date field ("Base: 1101-1150").
fn part_start(part: &str) -> Option<i32> {
    let mut p = part.to_lowercase();
    // "9th century AH/AD 15th century": the AD reading.
    if let Some((_, ad)) = p.split_once("ah/ad") {
        p = ad.to_string();
    }
    // "Base: 1101-1150": the part's name; "1720-1730, with later additions": the additions.
    if let Some((name, rest)) = p.split_once(':')
        && !name.chars().any(|c| c.is_ascii_digit())
    {
        p = rest.to_string();
    }
    // "ca. 1340 BC or early 20th century": the first reading.
    for sep in [",", " or "] {
        if let Some((first, _)) = p.split_once(sep) {
            p = first.to_string();
        }
    }
    let p = p
        .replace("mid-late", "late")
        .replace("early-mid", "early")
        .replace("mid-", "mid ");
    if ["n.d", "undated", "unknown"].iter().any(|w| p.contains(w)) {
        return None;
    }
    let (left, right) = match p.find(['-', '–']) {
        // "late 18th-early 19th century"; not a modifier alone before the range ("early-mid").
        Some(at) if p[..at].chars().any(|c| c.is_ascii_digit()) => (&p[..at], &p[at + 1..]),
        _ => (p.as_str(), ""),
    };
    let bc = |s: &str| words_of(s).any(|w| matches!(w, "bc" | "bce" | "b.c" | "b.c."));
    let ad = |s: &str| words_of(s).any(|w| matches!(w, "ad" | "ce" | "a.d" | "a.d."));
    let before_christ = bc(left) || (bc(right) && !ad(left));
    let unit_of = |s: &str| {
        if s.contains("millenn") || s.contains("millenium") {
            Some(1000)
        } else if s.contains("centur") {
            Some(100)
        } else {
            None
        }
    };
    let ordinal = ordinal_before_unit(left).or_else(|| lone_ordinal(left));
    let unit = unit_of(left).or_else(|| {
        // "5th-6th century": the unit the range's end names; "10th century AH/AD 16th": the
        // unit the part names anywhere.
        ordinal.and_then(|_| unit_of(right).or_else(|| unit_of(part)))
    });
    // "2nd-3rd quarter 19th century": the left ordinal counts quarters (or halves) of the
    // century the right names.
    if ordinal_before_unit(left).is_none()
        && let Some(q) = lone_ordinal(left)
        && let Some(n) = ordinal_before_unit(right)
        && (right.contains("quarter") || right.contains("half"))
        && (1..=4).contains(&q)
        && n > 0
    {
        let part = if right.contains("quarter") { 25 } else { 50 };
        let start = (q - 1) * part;
        return Some(if bc(right) {
            -(n * 100) + start
        } else {
            (n - 1) * 100 + start
        });
    }
    match (unit, ordinal) {
        (Some(span), Some(n)) if n > 0 => {
            let into = (modifier(left) * span as f64).round() as i32;
            Some(if before_christ {
                -(n * span) + into
            } else {
                (n - 1) * span + into
            })
        }
        _ => {
            let year = first_number(left)?;
            Some(if before_christ { -year } else { year })
        }
    }
}

fn words_of(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '?' | ',' | '/'))
        .filter(|w| !w.is_empty())
}

/// The number of an ordinal right before "century"/"millennium" ("3rd quarter 18th century" →
/// 18).
fn ordinal_before_unit(s: &str) -> Option<i32> {
    let words: Vec<&str> = words_of(s).collect();
    let at = words
        .iter()
        .position(|w| w.starts_with("centur") || w.starts_with("millen"))?;
    let before = words.get(at.checked_sub(1)?)?;
    ordinal_number(before)
}

/// The last ordinal of `s` when `s` names no unit ("5th" of "5th-6th century").
fn lone_ordinal(s: &str) -> Option<i32> {
    words_of(s).filter_map(ordinal_number).last()
}

fn ordinal_number(w: &str) -> Option<i32> {
    let digits: String = w.chars().take_while(char::is_ascii_digit).collect();
    let suffix = &w[digits.len()..];
    (!digits.is_empty() && matches!(suffix, "st" | "nd" | "rd" | "th"))
        .then(|| digits.parse().ok())
        .flatten()
}

/// How far into a century or millennium its modifier puts the start ("late" two thirds).
fn modifier(s: &str) -> f64 {
    let has = |w: &str| s.contains(w);
    if has("last quarter") || has("4th quarter") || has("fourth quarter") {
        0.75
    } else if has("3rd quarter") || has("third quarter") || has("2nd half") || has("second half") {
        0.5
    } else if has("2nd quarter") || has("second quarter") {
        0.25
    } else if has("late") {
        0.66
    } else if has("mid") {
        0.33
    } else {
        0.0
    }
}

/// The first run of digits that is not an ordinal ("ca. 1550" → 1550; "1700s" → 1700).
fn first_number(s: &str) -> Option<i32> {
    words_of(s).find_map(|w| {
        let w = w.trim_start_matches(|c: char| !c.is_ascii_digit());
        let digits: String = w.chars().take_while(char::is_ascii_digit).collect();
        let rest = &w[digits.len()..];
        if digits.is_empty() || ordinal_number(w).is_some() || !matches!(rest, "" | "s" | "?" | ".")
        {
            return None;
        }
        digits.parse().ok()
    })
}

/// First years of the Chinese dynasties and periods a catalogue names (Simplified, as
/// normalised): the conventional dates.
const DYNASTIES: &[(&str, i32)] = &[
    ("新石器时代", -7000),
    ("新石器", -7000),
    ("夏", -2070),
    ("商", -1600),
    ("殷", -1300),
    ("西周", -1046),
    ("周", -1046),
    ("东周", -770),
    ("春秋", -770),
    ("战国", -475),
    ("秦", -221),
    ("西汉", -202),
    ("汉", -202),
    ("新", 9),
    ("东汉", 25),
    ("三国", 220),
    ("魏", 220),
    ("蜀", 221),
    ("吴", 222),
    ("晋", 266),
    ("西晋", 266),
    ("东晋", 317),
    ("北魏", 386),
    ("北朝", 386),
    ("南北朝", 420),
    ("南朝", 420),
    ("东魏", 534),
    ("西魏", 535),
    ("北齐", 550),
    ("北周", 557),
    ("隋", 581),
    ("唐", 618),
    ("五代", 907),
    ("辽", 916),
    ("宋", 960),
    ("北宋", 960),
    ("西夏", 1038),
    ("金", 1115),
    ("南宋", 1127),
    ("元", 1271),
    ("明", 1368),
    ("清", 1644),
    ("民国", 1912),
];

/// A normalised period field without the words that say "dynasty" or "period" after a name
/// (唐朝 → 唐, 清代 → 清, 战国时期 → 战国).
fn dynasty_name(norm: &str) -> &str {
    norm.trim_end_matches("时期")
        .trim_end_matches("时代")
        .trim_end_matches(['朝', '代'])
}

/// The first year of the dynasty a period field names (唐, 東漢, 唐朝, 清代), None for any other
/// period.
fn dynasty_start(period: &str) -> Option<i32> {
    let norm = text::normalize(period.trim());
    let name = dynasty_name(&norm);
    DYNASTIES
        .iter()
        .find(|(d, _)| *d == name || *d == norm)
        .map(|(_, y)| *y)
}

/// The English names of China's dynasties and periods (Simplified, as [`DYNASTIES`] writes them)
/// with their conventional spans, for an English visitor told a Chinese catalogue's period
/// field (清 → "the Qing dynasty, 1644–1911").
const DYNASTIES_EN: &[(&str, &str)] = &[
    ("新石器时代", "the Neolithic"),
    ("新石器", "the Neolithic"),
    ("夏", "the Xia dynasty, c. 2070–1600 BC"),
    ("商", "the Shang dynasty, c. 1600–1046 BC"),
    ("殷", "the Shang (Yin) dynasty, c. 1300–1046 BC"),
    ("西周", "the Western Zhou, 1046–771 BC"),
    ("周", "the Zhou dynasty, 1046–256 BC"),
    ("东周", "the Eastern Zhou, 770–256 BC"),
    ("春秋", "the Spring and Autumn period, 770–476 BC"),
    ("战国", "the Warring States period, 475–221 BC"),
    ("秦", "the Qin dynasty, 221–206 BC"),
    ("西汉", "the Western Han, 202 BC–AD 9"),
    ("汉", "the Han dynasty, 202 BC–AD 220"),
    ("新", "the Xin dynasty, AD 9–23"),
    ("东汉", "the Eastern Han, 25–220"),
    ("三国", "the Three Kingdoms, 220–280"),
    ("魏", "the Wei kingdom, 220–266"),
    ("蜀", "the Shu Han kingdom, 221–263"),
    ("吴", "the Wu kingdom, 222–280"),
    ("晋", "the Jin dynasty, 266–420"),
    ("西晋", "the Western Jin, 266–316"),
    ("东晋", "the Eastern Jin, 317–420"),
    ("北魏", "the Northern Wei, 386–534"),
    ("北朝", "the Northern dynasties, 386–581"),
    ("南北朝", "the Northern and Southern dynasties, 420–589"),
    ("南朝", "the Southern dynasties, 420–589"),
    ("东魏", "the Eastern Wei, 534–550"),
    ("西魏", "the Western Wei, 535–557"),
    ("北齐", "the Northern Qi, 550–577"),
    ("北周", "the Northern Zhou, 557–581"),
    ("隋", "the Sui dynasty, 581–618"),
    ("唐", "the Tang dynasty, 618–907"),
    ("五代", "the Five Dynasties, 907–960"),
    ("辽", "the Liao dynasty, 916–1125"),
    ("宋", "the Song dynasty, 960–1279"),
    ("北宋", "the Northern Song, 960–1127"),
    ("西夏", "the Western Xia, 1038–1227"),
    ("金", "the Jin dynasty, 1115–1234"),
    ("南宋", "the Southern Song, 1127–1279"),
    ("元", "the Yuan dynasty, 1271–1368"),
    ("明", "the Ming dynasty, 1368–1644"),
    ("清", "the Qing dynasty, 1644–1911"),
    ("民国", "the Republic of China, from 1912"),
];

/// The English name and span of the Chinese dynasty or period a period field names (清, 東漢,
/// 唐朝, 清代 → "the Qing dynasty, 1644–1911"), None for any other field.
pub fn dynasty_in_english(period: &str) -> Option<&'static str> {
    let p = period.trim();
    if !p.chars().all(text::is_cjk) || p.is_empty() {
        return None;
    }
    let norm = text::normalize(p);
    let name = dynasty_name(&norm);
    DYNASTIES_EN
        .iter()
        .find(|(d, _)| *d == name || *d == norm)
        .map(|(_, en)| *en)
}

/// One-character dynasties a question writes with 朝 or 代 (清朝, 唐代), Simplified.
const DYNASTY_CHARS: &str = "夏商周秦汉晋隋唐宋辽金元明清";
/// Those whose character alone, a period field of its own (清, 唐), says the dynasty: 元 alone
/// is also the yuan, 金 gold, 商 trade, 周 a surname, 夏 summer.
const LONE_DYNASTY_CHARS: &str = "秦汉晋隋唐宋辽明清";

/// The other ways a record writes the dynasty a question's term names, most written first:
/// 清朝 → 清代 and 清 (a period field of one character), 唐代 → 唐朝 and 唐; none for any other
/// term (年代, 近代, 朝代). A Chinese catalogue says 清代 where a visitor asks for 清朝:
/// 有没有清朝的圣旨？ listed English Qing records (清朝 translated) above the edict whose record
/// says 清代 … 聖旨.
pub fn dynasty_variants(term: &str) -> Vec<String> {
    let mut chars = term.chars();
    let (Some(d), Some(suffix), None) = (chars.next(), chars.next(), chars.next()) else {
        return Vec::new();
    };
    if !DYNASTY_CHARS.contains(d) {
        return Vec::new();
    }
    let other = match suffix {
        '朝' => '代',
        '代' => '朝',
        _ => return Vec::new(),
    };
    let mut out = vec![format!("{d}{other}")];
    if LONE_DYNASTY_CHARS.contains(d) {
        out.push(d.to_string());
    }
    out
}

/// Bridges from each dynasty term of a question to the other ways the collection writes it
/// ([`dynasty_variants`], those `df` finds held), as [`BridgeKind::Synonym`]: they reorder the
/// answer and leave the no-answer signals to the question's own words, as the thesaurus's
/// synonyms do (`embedded::rank`).
pub fn dynasty_bridges(
    terms: &[QueryTerm],
    df: &mut dyn FnMut(&str) -> Result<f64, StoreError>,
) -> Result<Vec<Bridge>, StoreError> {
    let mut out = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        if t.prefix {
            continue;
        }
        let mut held = Vec::new();
        let mut most = 0.0f64;
        for v in dynasty_variants(&t.text) {
            let d = df(&v)?;
            if d > 0.0 {
                most = most.max(d);
                held.push(v);
            }
        }
        if !held.is_empty() {
            out.push(Bridge {
                all_of: vec![held],
                sources: vec![i],
                df: most,
                kind: BridgeKind::Synonym,
            });
        }
    }
    Ok(out)
}

/// Every dated exhibit's start year ([`start_year`]) from (pk, date, period) rows, read once a
/// collection generation (`embedded::EmbeddedRetriever`'s cache).
pub fn years(rows: impl IntoIterator<Item = (i64, String, String)>) -> Ranked {
    Ranked::new(
        rows.into_iter().filter_map(|(pk, date, period)| {
            start_year(&date, &period).map(|y| (pk, i64::from(y)))
        }),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_dynasty_term_reaches_the_other_ways_a_record_writes_it() {
        assert_eq!(dynasty_variants("清朝"), ["清代", "清"]);
        assert_eq!(dynasty_variants("唐代"), ["唐朝", "唐"]);
        assert_eq!(
            dynasty_variants("元代"),
            ["元朝"],
            "元 alone is also the yuan"
        );
        for t in ["年代", "近代", "朝代", "清", "清代瓷", "清华", "china"] {
            assert!(dynasty_variants(t).is_empty(), "{t}");
        }
        let terms: Vec<QueryTerm> = ["清朝", "圣旨", "元代"]
            .iter()
            .map(|t| QueryTerm {
                text: t.to_string(),
                prefix: false,
            })
            .collect();
        // The collection holds 清代 and 清 but no 元朝.
        let mut df = |t: &str| {
            Ok(if t == "清代" {
                99.0
            } else if t == "清" {
                7.0
            } else {
                0.0
            })
        };
        let b = dynasty_bridges(&terms, &mut df).unwrap();
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!(b[0].all_of, [["清代", "清"]]);
        assert_eq!(b[0].sources, [0]);
        assert_eq!(b[0].kind, BridgeKind::Synonym);
    }

    #[test]
    fn a_chinese_dynasty_is_named_in_english_with_its_span() {
        for (period, en) in [
            ("清", Some("the Qing dynasty, 1644–1911")),
            ("東漢", Some("the Eastern Han, 25–220")),
            ("唐朝", Some("the Tang dynasty, 618–907")),
            ("清代", Some("the Qing dynasty, 1644–1911")),
            ("新石器時代", Some("the Neolithic")),
            ("明治", None),
            ("Ming dynasty", None),
            ("", None),
        ] {
            assert_eq!(dynasty_in_english(period), en, "{period}");
        }
        // Every dynasty dated is named.
        for (d, _) in DYNASTIES {
            assert!(dynasty_in_english(d).is_some(), "{d}");
        }
    }

    use super::*;

    #[test]
    fn a_catalogue_date_reads_as_its_earliest_year() {
        for (date, period, year) in [
            ("1858-1860", "", Some(1858)),
            ("ca. 1535", "", Some(1535)),
            ("1871", "", Some(1871)),
            ("ca. 540 BC", "", Some(-540)),
            ("ca. 1800-1600 BC", "", Some(-1800)),
            ("1550-1307 BC", "", Some(-1550)),
            ("ca. 1450-1400 BCE", "", Some(-1450)),
            ("19th century", "", Some(1800)),
            ("5th-6th century", "", Some(400)),
            ("7th century BC", "", Some(-700)),
            ("late 7th century BC", "", Some(-634)),
            ("late 15th century", "", Some(1466)),
            ("early 16th century", "", Some(1500)),
            ("mid 19th century", "", Some(1833)),
            ("2nd half 1st century", "", Some(50)),
            ("3rd quarter 18th century", "", Some(1750)),
            ("1st century BC - AD 1st century", "", Some(-100)),
            ("100 BC-AD 100", "", Some(-100)),
            ("AD 1st-2nd century", "", Some(0)),
            ("9th century AH/AD 15th century", "", Some(1400)),
            ("1010 AH/AD 1601-1602", "", Some(1601)),
            ("Sha'ban 1234 AH/AD 1819", "", Some(1819)),
            ("mid 4th millennium BC", "", Some(-3670)),
            ("Base: 1101-1150; Right figures: 1180-1220", "", Some(1101)),
            ("Coin: 336-323 BC; Pin: 19th century", "", Some(-336)),
            ("ca. 1720-1730, with later additions", "", Some(1720)),
            ("1700s", "", Some(1700)),
            ("after 1520", "", Some(1520)),
            ("19th century (?)", "", Some(1800)),
            ("December 1890-January 1891", "", Some(1890)),
            ("ca. 1340 BC or early 20th century", "", Some(-1340)),
            ("10th century AH/AD 16th", "", Some(1500)),
            ("early-mid 19th century", "", Some(1800)),
            ("2nd-3rd quarter 19th century", "", Some(1825)),
            ("1st-2nd half 16th century", "", Some(1500)),
            ("n.d.", "", None),
            ("modern", "", None),
            ("", "", None),
            ("", "唐", Some(618)),
            ("", "東漢", Some(25)),
            ("", "清代", Some(1644)),
            ("", "Roman", None),
            ("n.d.", "唐", Some(618)),
            ("1700-1722", "Chinese; Qing Dynasty", Some(1700)),
        ] {
            assert_eq!(start_year(date, period), year, "{date:?} / {period:?}");
        }
    }

    #[test]
    fn questions_about_the_oldest_or_newest_exhibits_are_told_apart() {
        for (q, age) in [
            ("What is the oldest thing here?", Some(Order::Oldest)),
            ("What's your oldest painting?", Some(Order::Oldest)),
            (
                "Which is the most ancient object in the museum?",
                Some(Order::Oldest),
            ),
            ("Show me the earliest Japanese prints", Some(Order::Oldest)),
            ("What is the newest exhibit?", Some(Order::Newest)),
            ("最古老的文物是什么？", Some(Order::Oldest)),
            ("年代最早的瓷器是哪件？", Some(Order::Oldest)),
            ("馆里最老的东西是什么", Some(Order::Oldest)),
            ("年代最晚的展品", Some(Order::Newest)),
            // Not the museum's list.
            ("What is the oldest painting in the world?", None),
            ("Is this the oldest vase?", None),
            ("世界上最古老的文字是什么？", None),
            ("这件是最早的吗？", None),
            ("Who made the vase?", None),
            ("What's your latest exhibition?", None),
            ("How old is the mummy?", None),
        ] {
            assert_eq!(asks_age(q), age, "{q}");
        }
    }

    #[test]
    fn the_age_words_leave_the_kind_for_the_lookup() {
        assert_eq!(
            without_age_words("What is the oldest painting?")
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["what", "is", "the", "painting?"]
        );
        assert_eq!(
            without_age_words("Which is the most ancient vase")
                .split_whitespace()
                .collect::<Vec<_>>(),
            ["which", "is", "the", "vase"]
        );
        assert_eq!(
            without_age_words("最古老的瓷器是哪件？").trim(),
            "的瓷器是哪件?"
        );
    }

    #[test]
    fn years_order_a_kind_and_drop_the_undated() {
        let years = years([
            (1, "1858".to_string(), String::new()),
            (2, "ca. 540 BC".to_string(), String::new()),
            (3, String::new(), String::new()),
            (4, String::new(), "唐".to_string()),
        ]);
        assert_eq!(years.order, [(-540, 2), (618, 4), (1858, 1)]);
        assert_eq!(years.ordered([1, 2, 3, 4], Order::Oldest), [2, 4, 1]);
    }
}

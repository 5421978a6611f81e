//! Kinds of object in the collection, for browse questions about a kind ("Do you have any
//! ceramics?", "What paintings do you have?", 有没有青铜器？). Pure.
//!
//! A record's kinds come from its own fields, so every museum's catalogue brings its
//! own:
//! - its **department**: the part of `gallery_or_department` after the institution ("Walters
//!   Art Museum, Ceramics" → "Ceramics"; "國立歷史博物館 …；藝術品／文獻" → "藝術品／文獻"), the
//!   whole field when it names no institution;
//! - the head of its **medium**: the last word of the medium's first phrase ("porcelain with
//!   underglaze blue" → porcelain, "cast bronze" → bronze, "oil on canvas" → oil);
//! - the head of a **Chinese title**: Chinese catalogues name the kind at the end of the title
//!   (唐高岑墓誌銘 → 墓志铭, 北魏法生造像記拓本 → 拓本, …勳章, …照片), its last word of two
//!   characters or more once a closing bracketed note is dropped.
//!
//! A fourth field says where and when a record was made, not what it is: its **period**
//! (`culture_or_period`: "Japanese; late Edo; place of origin: Japan", 唐), whose words are
//! origin markers ([`origin_markers`]) for questions that name only a place, culture or
//! period ("Anything from Japan?", 有唐朝的文物吗？).
//!
//! They are indexed as marker tokens in the record's meta column (`#d:` + each department
//! token, `#m:` + the medium head's token, `#t:`, `#o:`), which no question term can match and which the
//! index leaves out of a row's length, so the BM25 ranking is exactly what it was without them.
//! A browse question whose every content word names a kind ([`subject`]) is answered from the
//! kinds' members ([`resolve`]): how many there are, and a few of them
//! ([`super::embedded::browse_blocking`]).

use super::text::{self, Run};

/// Marker of a department token in the index.
pub const DEPARTMENT: &str = "#d:";
/// Marker of a medium head token in the index.
pub const MEDIUM: &str = "#m:";
/// Marker of a Chinese title's head word in the index.
pub const TITLE: &str = "#t:";
/// Marker of a word of the record's recorded origin (its `period` field: culture, period,
/// place of origin; [`origin_markers`]).
pub const ORIGIN: &str = "#o:";

/// Words of a period field that place nothing on their own ("late Edo", "Tang Dynasty",
/// "18th century"): not origin markers, so "Tang dynasty" is read by its "Tang".
const ORIGIN_FILLER: &[&str] = &[
    "place", "origin", "late", "early", "middle", "mid", "period", "dynasty", "century", "style",
    "circa", "probably", "possibly", "and", "the", "of",
];

/// The origin marker tokens of a record's `period` field (`culture_or_period`), space
/// separated: where and when it was made, as the catalogue records it, for "Anything from
/// Japan?", "Do you have anything Egyptian?", 有唐朝的文物吗？ ([`super::embedded::browse_blocking`]
/// reads them when a question names no kind). A Latin field gives each word of three letters
/// or more that is not [`ORIGIN_FILLER`] ("Japanese; late Edo; place of origin: Japan" →
/// japanes, edo, japan); a Chinese one (唐, 東漢, 北魏) is one marker, normalised (Simplified).
pub fn origin_markers(period: &str) -> String {
    let p = period.trim();
    if p.is_empty() {
        return String::new();
    }
    let mut out: Vec<String> = Vec::new();
    if p.chars().any(text::is_cjk) && !p.chars().any(|c| c.is_ascii_alphabetic()) {
        let norm: String = text::normalize(p)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if norm.chars().all(text::is_cjk) {
            out.push(format!("{ORIGIN}{norm}"));
            // A Chinese dynasty was in China: "Anything Chinese?", 有中国的东西吗？ reach the
            // Chinese catalogue's dated records too, not only those an English field calls so.
            if is_chinese_dynasty(&norm) {
                for t in ["china", "chines"] {
                    out.push(format!("{ORIGIN}{t}"));
                }
            }
        }
    } else {
        for w in p.split(|c: char| !c.is_alphanumeric() && c != '\'') {
            if w.chars().count() < 3
                || !w.chars().all(char::is_alphabetic)
                || ORIGIN_FILLER.contains(&w.to_lowercase().as_str())
            {
                continue;
            }
            for t in text::latin_tokens(w) {
                let m = format!("{ORIGIN}{t}");
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
    }
    out.join(" ")
}

/// Whether a Chinese period field (normalised, Simplified) names a dynasty of China (唐, 东汉,
/// 北魏, 清, 民国), not an era of another country written in Chinese (明治 is Japan's).
fn is_chinese_dynasty(period: &str) -> bool {
    const DYNASTIES: &[&str] = &[
        "夏", "商", "周", "秦", "汉", "魏", "晋", "吴", "蜀", "隋", "唐", "宋", "辽", "金", "元",
        "明", "清", "齐", "梁", "陈", "春秋", "战国", "三国", "南朝", "北朝", "五代", "民国",
    ];
    const PREFIXES: &[&str] = &["", "东", "西", "南", "北", "前", "后"];
    let p = period.trim_end_matches(['朝', '代']);
    PREFIXES.iter().any(|pre| {
        p.strip_prefix(pre)
            .is_some_and(|rest| DYNASTIES.contains(&rest))
    })
}

/// The alternatives of a browse question's unit as an origin ([`ORIGIN`]): its own, and for a
/// Chinese word its whole self and, for a dynasty named with 朝 or 代 (唐朝, 汉代), the
/// dynasty (唐, 汉), as Chinese catalogues write a period.
pub fn origin_unit<'a>(unit: &Unit, english_of: &dyn Fn(&str) -> Vec<&'a [Box<str>]>) -> Unit {
    // Here a place is what is looked up, not only a narrowing word.
    let mut u = Unit {
        place: false,
        ..unit.clone()
    };
    let w = &unit.word;
    let mut push = |a: Vec<String>| {
        if !a.is_empty() && !u.alternatives.contains(&a) {
            u.alternatives.push(a);
        }
    };
    if w.chars().all(|c| c.is_ascii_alphabetic()) {
        for d in demonym_tokens(w) {
            push(d);
        }
    } else if w.chars().all(text::is_cjk) {
        push(vec![w.clone()]);
        // 古埃及, 古代埃及: "ancient" says nothing of where (everything here is old).
        let place = ["古代", "古"]
            .iter()
            .find_map(|a| w.strip_prefix(a))
            .filter(|p| p.chars().count() >= 2)
            .unwrap_or(w);
        let dynasty = place
            .strip_suffix('朝')
            .or_else(|| place.strip_suffix('代'))
            .filter(|s| !s.is_empty());
        for p in [Some(place), dynasty].into_iter().flatten() {
            if p != w {
                push(vec![p.to_string()]);
            }
            for sense in english_of(p) {
                push(sense.iter().map(|t| t.to_string()).collect());
                // 日本 → japan, and as the origin fields write it, japanese; 韩国 ("South
                // Korea") → korean.
                if let Some(one) = country_word(sense) {
                    for d in demonym_tokens(one) {
                        push(d);
                    }
                }
            }
        }
    }
    u
}

/// The adjectives a country's name may have ("korea" → korean, "italy" → italian, "japan" →
/// japanese, "egypt" → egyptian), by the English endings: a catalogue's origin field often
/// gives the people's word and not the country's ("Korean; Joseon; place of origin: Taehan
/// Min'guk"), so "Anything from Korea?" found no Korean exhibit. Candidates only: the
/// caller looks each up as an origin marker, so one no field writes reaches nothing.
pub fn demonyms(country: &str) -> Vec<String> {
    let w = country.to_lowercase();
    let mut out: Vec<String> = ["n", "an", "ian", "ese", "ish"]
        .iter()
        .map(|e| format!("{w}{e}"))
        .collect();
    for (end, with) in [
        ("y", "ian"),
        ("y", ""),
        ("a", "ese"),
        ("o", "an"),
        ("ey", "ish"),
    ] {
        if let Some(stem) = w.strip_suffix(end) {
            out.push(format!("{stem}{with}"));
        }
    }
    out
}

/// Compass words before a country's name in a sense of a place ("South Korea", "North
/// Vietnam"): the catalogue's people's word is the country's (Korean), not the half's.
const COMPASS: &[&str] = &["south", "north", "east", "west"];

/// The word of a place's sense ([`with_demonyms`]) whose people's words a record may give: the
/// one word of a one-word sense ("japan"), or the name after a compass word ("south korea" →
/// korea: 韩国 is "South Korea" to CC-CEDICT, and the Korean jars' origin field says "Korean").
/// None for any other sense.
fn country_word<S: AsRef<str>>(sense: &[S]) -> Option<&str> {
    match sense {
        [one] => Some(one.as_ref()),
        [compass, name] if COMPASS.contains(&compass.as_ref()) => Some(name.as_ref()),
        _ => None,
    }
}

/// The index tokens of [`demonyms`] of a word of four letters or more (none for a shorter one:
/// "art" has no people), each a unit's alternative.
fn demonym_tokens(word: &str) -> Vec<Vec<String>> {
    if word.len() < 4 {
        return Vec::new();
    }
    demonyms(word)
        .iter()
        .map(|d| text::latin_tokens(d))
        .filter(|t| !t.is_empty())
        .collect()
}

/// A browse question's units with each Chinese proper noun (`is_proper`: a place) also standing
/// for its people's words ([`demonyms`] of its one-word English senses): the records say
/// "Egyptian" where the dictionary says "Egypt", so 有没有埃及的木乃伊？ narrowed the mummies to
/// none (and was answered with the search's amulets) while "Egyptian mummies" listed both.
///
/// Such a unit is a [`Unit::place`] when `is_place` says so
/// (`dictionary::Dictionary::is_place`): it narrows and names no kind.
pub fn with_demonyms(
    units: Vec<Unit>,
    is_proper: &dyn Fn(&str) -> bool,
    is_place: &dyn Fn(&str) -> bool,
) -> Vec<Unit> {
    units
        .into_iter()
        .map(|mut u| {
            if u.word.chars().all(text::is_cjk) && is_proper(&u.word) {
                u.place = is_place(&u.word);
                let words: Vec<String> = u
                    .alternatives
                    .iter()
                    .filter_map(|alt| country_word(alt))
                    .filter(|w| w.chars().all(|c| c.is_ascii_alphabetic()))
                    .map(str::to_string)
                    .collect();
                for w in &words {
                    push_demonyms(&mut u.alternatives, w);
                }
            }
            u
        })
        .collect()
}

/// "Ancient" before a place in one word (古埃及, 古代中国): the place is what narrows.
const ANCIENT_ZH: &[&str] = &["古", "古代"];

/// "Made" after a place in one word (日本产, one word to jieba): the place is what narrows, and
/// the rest a frame word ([`ZH_FRAME`]).
const MADE_ZH: &[&str] = &["产", "制", "造", "制造"];

/// A question with each Chinese word that is a place followed by a word (中国画 → 中国的画, 日本画
/// → 日本的画) or by "made" ([`MADE_ZH`]: 日本产 → 日本的产), or "ancient" and a place (古埃及 →
/// 古的埃及: 古 is a frame word, and 古埃及 is one sense, "Ancient Egypt", which narrows
/// nothing), written as the two: `is_place` tells a place
/// (`dictionary::Dictionary::is_place`, as [`with_demonyms`] marks one), `is_word` a word the
/// dictionary gives a sense of a thing. The longest head first; the rest must be a word of its
/// own. None when no word splits.
pub fn split_place_words(
    question: &str,
    is_place: &dyn Fn(&str) -> bool,
    is_word: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let norm = text::normalize(question);
    let mut out = String::new();
    let mut split = false;
    let mut span = String::new();
    let mut flush = |span: &mut String, out: &mut String| {
        for w in text::cjk_words(span) {
            let chars: Vec<char> = w.chars().collect();
            let cut = (1..chars.len()).rev().find(|&i| {
                let head: String = chars[..i].iter().collect();
                let rest: String = chars[i..].iter().collect();
                (i >= 2 && is_place(&head) && (is_word(&rest) || MADE_ZH.contains(&rest.as_str())))
                    || (ANCIENT_ZH.contains(&head.as_str()) && is_place(&rest))
            });
            match cut {
                Some(i) => {
                    out.extend(&chars[..i]);
                    out.push('的');
                    out.extend(&chars[i..]);
                    split = true;
                }
                None => out.push_str(&w),
            }
        }
        span.clear();
    };
    for c in norm.chars() {
        if text::is_cjk(c) {
            span.push(c);
        } else {
            flush(&mut span, &mut out);
            out.push(c);
        }
    }
    flush(&mut span, &mut out);
    split.then_some(out)
}

/// A browse question's units with each Chinese dynasty (唐代, 清朝) also standing for its other
/// form (唐朝) and, where the lone character says only the dynasty, for the period field that
/// places a record there (`#o:唐`; [`super::dating::dynasty_variants`]). As words alone, 唐代的拓本
/// found the Song rubbings whose descriptions mention the Tang, and missed the Tang rubbings
/// whose period field says 唐.
pub fn with_dynasty_forms(units: Vec<Unit>) -> Vec<Unit> {
    units
        .into_iter()
        .map(|mut u| {
            for v in super::dating::dynasty_variants(&u.word) {
                let alt = if v.chars().count() == 1 {
                    vec![origin_token(&v).into_owned()]
                } else {
                    text::index_tokens(&v)
                };
                if !alt.is_empty() && !u.alternatives.contains(&alt) {
                    u.alternatives.push(alt);
                }
            }
            u
        })
        .collect()
}

/// Whether a unit names a period as the records' period fields place one: an alternative is
/// an origin marker ([`periods`]: "Qing dynasty" → `#o:qing`; [`with_dynasty_forms`]: 清代 →
/// `#o:清`).
pub fn is_period(unit: &Unit) -> bool {
    unit.alternatives
        .iter()
        .any(|a| a.iter().any(|t| t.starts_with(ORIGIN)))
}

/// Words that make the name before them a period ("Tang dynasty", "Edo period", "Heian era").
pub const PERIOD_WORDS: &[&str] = &["dynasty", "dynasties", "period", "era"];

/// A question's period names read as one unit each ("Anything from the Tang dynasty?", "Song
/// dynasty paintings"): the word "dynasty" or "period" places nothing by itself (the record
/// side drops it too, [`ORIGIN_FILLER`]), so as a unit of its own it left no origin to find
/// and only records that mention both words. The name and the word become one unit, whose
/// alternatives are the name's own words, the name as an origin marker (the English period
/// fields: "Chinese; Tang dynasty" → `#o:tang`), and the Chinese the dictionary writes the
/// whole phrase as (`chinese_of(["tang", "dynasti"])`: 唐朝), as written and as a Chinese
/// catalogue's period field writes the dynasty (`#o:唐`), so an English visitor reaches the
/// Chinese half of the collection. Alternatives already holding the [`ORIGIN`] marker are
/// looked up as they are (see [`origin_unit`]'s callers).
pub fn periods<'a>(units: Vec<Unit>, chinese_of: &dyn Fn(&[&str]) -> Vec<&'a str>) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::with_capacity(units.len());
    for u in units {
        let joins = PERIOD_WORDS.contains(&u.word.as_str())
            && out
                .last()
                .is_some_and(|p| p.part == u.part && p.word.is_ascii() && !p.word.contains(' '));
        let Some(name) = out.last_mut().filter(|_| joins) else {
            out.push(u);
            continue;
        };
        let mut alternatives: Vec<Vec<String>> = Vec::new();
        let mut push = |a: Vec<String>| {
            if !a.is_empty() && !alternatives.contains(&a) {
                alternatives.push(a);
            }
        };
        let filler = u.alternatives.first().cloned().unwrap_or_default();
        for a in &name.alternatives {
            push(a.iter().chain(&filler).cloned().collect());
            if let [t] = a.as_slice() {
                push(vec![format!("{ORIGIN}{t}")]);
                let mut phrase: Vec<&str> = vec![t.as_str()];
                phrase.extend(filler.iter().map(String::as_str));
                for head in chinese_of(&phrase) {
                    let norm: String = text::normalize(head);
                    push(text::index_tokens(&norm));
                    push(vec![format!("{ORIGIN}{norm}")]);
                    if let Some(d) = norm
                        .strip_suffix('朝')
                        .or_else(|| norm.strip_suffix('代'))
                        .filter(|d| !d.is_empty())
                    {
                        push(vec![format!("{ORIGIN}{d}")]);
                    }
                }
            }
        }
        name.word = format!("{} {}", name.word, u.word);
        name.alternatives = alternatives;
    }
    out
}

/// The rows of an origin alternative's token: a token already marked ([`periods`]) as it is,
/// any other as an origin marker ([`ORIGIN`]).
pub fn origin_token(t: &str) -> std::borrow::Cow<'_, str> {
    if t.starts_with(ORIGIN) {
        t.into()
    } else {
        format!("{ORIGIN}{t}").into()
    }
}

/// Whether an index token is a kind marker (the index leaves it out of a row's length:
/// [`crate::store::lexical::MARKER`]).
pub fn is_marker(token: &str) -> bool {
    token.starts_with(crate::store::lexical::MARKER)
}

/// Separators between an institution and its department, in the order tried.
const INSTITUTION_SEPARATORS: &[&str] = &["；", ";", "，", ", "];

/// The department of a `gallery_or_department` field (see the module header); None when empty.
pub fn department(gallery: &str) -> Option<&str> {
    let g = gallery.trim();
    let d = INSTITUTION_SEPARATORS
        .iter()
        .find_map(|s| g.split_once(s).map(|(_, rest)| rest))
        .unwrap_or(g)
        .trim();
    (!d.is_empty()).then_some(d)
}

/// Chinese names of the words museums name their departments with ("Painting & Drawing",
/// "Arms & Armor", "Ivory & Bone"), lower case: a Chinese visitor hears the overview's English
/// department names in Chinese ([`department_in_chinese`]). A curated word list, not a
/// translation: a department with any word not listed keeps its own name.
const DEPARTMENT_WORDS_ZH: &[(&str, &str)] = &[
    ("painting", "绘画"),
    ("paintings", "绘画"),
    ("drawing", "素描"),
    ("drawings", "素描"),
    ("prints", "版画"),
    ("photographs", "照片"),
    ("photography", "摄影"),
    ("ceramics", "陶瓷"),
    ("pottery", "陶器"),
    ("porcelain", "瓷器"),
    ("glass", "玻璃器"),
    ("glasswares", "玻璃器"),
    // Said back only (the first entry of a word names it): the dictionary has no 玻璃器皿.
    ("glasswares", "玻璃器皿"),
    ("stained glass", "彩色玻璃"),
    ("stained", "彩色玻璃"),
    ("painted glass", "彩绘玻璃"),
    ("metal", "金属器"),
    ("metalwork", "金属器"),
    ("gold", "金器"),
    ("silver", "银器"),
    ("jewelry", "珠宝"),
    ("jewellery", "珠宝"),
    ("arms", "兵器"),
    ("armor", "盔甲"),
    ("armour", "盔甲"),
    ("manuscripts", "手稿"),
    ("rare books", "善本"),
    ("books", "书籍"),
    ("ivory", "象牙"),
    ("bone", "骨器"),
    ("enamels", "珐琅"),
    ("precious stones", "宝石"),
    ("gems", "玉石"),
    ("miniatures", "细密画"),
    ("wood", "木器"),
    ("timepieces", "计时器"),
    ("clocks", "钟"),
    ("watches", "表"),
    ("textiles", "织品"),
    ("stone", "石器"),
    ("lacquer", "漆器"),
    ("inlay", "镶嵌"),
    ("coins", "钱币"),
    ("medals", "奖章"),
    ("leather", "皮革"),
    ("mosaics", "马赛克"),
    ("sculpture", "雕塑"),
    ("furniture", "家具"),
    ("musical instruments", "乐器"),
    ("calligraphy", "书法"),
    ("maps", "地图"),
];

/// A Chinese run's words (jieba), with the Chinese department words of two characters or
/// more it holds made one word each (longest first at each place) and marked `true`: 金属器
/// (cut 金属 / 器) and 素描 are, 石器 in 石器时代 and 玻璃器 in 玻璃器皿 are not, a department
/// word being taken only where the cut starts and ends a word.
fn department_words_zh(run: &str) -> Vec<(String, bool)> {
    let words = text::cjk_words(run);
    let mut bounds = vec![0];
    for w in &words {
        bounds.push(bounds[bounds.len() - 1] + w.len());
    }
    if bounds.last() != Some(&run.len()) {
        return words.into_iter().map(|w| (w, false)).collect();
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let start = bounds[i];
        let found = DEPARTMENT_WORDS_ZH
            .iter()
            .map(|(_, zh)| *zh)
            // One character (钟, 表) is part of too many other words (钟馗, 代表).
            .filter(|zh| {
                zh.chars().count() >= 2
                    && run[start..].starts_with(zh)
                    && bounds.contains(&(start + zh.len()))
            })
            .max_by_key(|zh| zh.len());
        match found {
            Some(zh) => {
                out.push((zh.to_string(), true));
                while i < words.len() && bounds[i] < start + zh.len() {
                    i += 1;
                }
            }
            None => {
                out.push((words[i].clone(), false));
                i += 1;
            }
        }
    }
    out
}

/// A department's name in Chinese when every word of it is in [`DEPARTMENT_WORDS_ZH`]
/// ("Painting & Drawing" → 绘画与素描, "Timepieces, Clocks & Watches" → 计时器、钟与表); None
/// for a name already in Chinese or with a word not listed.
pub fn department_in_chinese(label: &str) -> Option<String> {
    if label.chars().any(super::text::is_cjk) {
        return None;
    }
    let lower = label.to_lowercase();
    let parts: Vec<&str> = lower
        .split([',', '&'])
        .flat_map(|p| p.split(" and "))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let zh: Vec<&str> = parts
        .iter()
        .map(|p| {
            DEPARTMENT_WORDS_ZH
                .iter()
                .find(|(en, _)| en == p)
                .map(|(_, zh)| *zh)
        })
        .collect::<Option<_>>()?;
    match zh.split_last() {
        Some((last, [])) => Some(last.to_string()),
        Some((last, rest)) => Some(format!("{}与{last}", rest.join("、"))),
        None => None,
    }
}

/// Where a medium's first phrase ends.
const MEDIUM_BREAKS: &[&str] = &[
    ",",
    ";",
    "(",
    " on ",
    " with ",
    " and ",
    " over ",
    " in ",
    " heightened ",
    " mounted ",
];

/// The head word of a medium, lower case as written ("Cast bronze" → "bronze"); None for an
/// empty medium.
pub fn medium_word(medium: &str) -> Option<String> {
    let m = medium.to_lowercase();
    let end = MEDIUM_BREAKS
        .iter()
        .filter_map(|b| m.find(b))
        .min()
        .unwrap_or(m.len());
    m[..end].split_whitespace().last().map(str::to_string)
}

/// The index token of a medium's head (see the module header); None for an empty or
/// non-Latin medium (a Chinese medium has no head word to take without a parser).
pub fn medium_head(medium: &str) -> Option<String> {
    text::latin_tokens(&medium_word(medium)?).pop()
}

/// The head word of a Chinese title (see the module header), normalised (Simplified); None for
/// a title that does not end in Chinese or whose last word is a single character.
pub fn title_word(title: &str) -> Option<String> {
    let mut t = text::normalize(title);
    // Closing notes: "(打字稿)", "(1906.10.24)", "（複製品）" (normalised to ASCII brackets).
    loop {
        let trimmed = t
            .trim_end()
            .trim_end_matches(|c: char| !c.is_alphanumeric() && c != ')');
        if trimmed.ends_with(')')
            && let Some(open) = trimmed.rfind('(')
        {
            t = trimmed[..open].to_string();
            continue;
        }
        t = trimmed.to_string();
        break;
    }
    let last_run = match text::runs(&t).last()? {
        Run::Cjk(s) => s.to_string(),
        Run::Word(_) => return None,
    };
    // The run must end the title: nothing but punctuation after it.
    if !t.trim_end().ends_with(&last_run) {
        return None;
    }
    let word = text::cjk_words(&last_run).pop()?;
    (word.chars().count() >= 2).then_some(word)
}

/// Words after which an English catalogue title goes on to say what its object shows, holds
/// or is made of ("Plate with Vulcan", "Statue of a Monkey", "Leaf from Book of Hours").
const TITLE_PREPOSITIONS: &[&str] = &[
    "with",
    "of",
    "from",
    "in",
    "on",
    "for",
    "depicting",
    "showing",
    "after",
    "by",
    "at",
    "to",
    "into",
    "representing",
    "inscribed",
    "decorated",
    "made",
    "used",
    "under",
    "over",
];

/// Openings that count a title's objects rather than name them ("One of a Pair of Vases",
/// "Pair of Earrings", "Set of Six Cups"): the head follows.
const TITLE_COUNTS: &[&str] = &[
    "one of a pair of",
    "one of two",
    "one of a set of",
    "pair of",
    "set of",
];

/// The head nouns of an English catalogue title, lower case: the last word before the title
/// goes on with what the object shows or holds ([`TITLE_PREPOSITIONS`]), of each conjunct
/// ("Wine Bottle and Cup": bottle, cup), after a count ("One of a Pair of Vases": vases) and
/// without a bracketed note, quotation marks or a subtitle after a colon. "Tsuba with Nitta
/// Yoshisada Throwing his Sword into the Sea" is a tsuba, not a sword; "Mirror Case with the
/// Castle of Love" a case. Empty for a title in Chinese.
pub fn english_title_heads(title: &str) -> Vec<String> {
    if title.chars().any(text::is_cjk) {
        return Vec::new();
    }
    let mut t = title.to_lowercase();
    // Bracketed notes, then a subtitle.
    while let (Some(open), Some(close)) = (t.find('('), t.find(')')) {
        if close < open {
            break;
        }
        t.replace_range(open..=close, " ");
    }
    if let Some((head, _)) = t.split_once(':') {
        t = head.to_string();
    }
    let words: Vec<String> = t
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '\''))
        .map(|w| w.trim_matches(['-', '\'']).to_string())
        .filter(|w| !w.is_empty())
        .collect();
    let mut start = 0;
    for c in TITLE_COUNTS {
        let n: Vec<&str> = c.split(' ').collect();
        if words.len() > n.len() && words.iter().zip(&n).all(|(w, c)| w == c) {
            start = n.len();
            break;
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut last: Option<&String> = None;
    for w in &words[start..] {
        if TITLE_PREPOSITIONS.contains(&w.as_str()) {
            break;
        }
        if w == "and" || w == "or" {
            out.extend(last.take().cloned());
            continue;
        }
        last = Some(w);
    }
    out.extend(last.cloned());
    // "Double-Gourd-Shaped Vase": the last word; "Hand-Mirror": its last part too.
    let parts: Vec<String> = out
        .iter()
        .filter_map(|w| w.rsplit('-').next().filter(|p| p != w).map(str::to_string))
        .collect();
    out.extend(parts);
    out
}

/// `units` for a kind named by the head of an English title ([`english_title_heads`]): the
/// last unit names the thing, each of its English senses by its last word (an English
/// compound names its last word's thing: 花瓶's "flower vase" is a vase, 剑's "double-edged
/// sword" a sword). None for no units.
pub fn headed_by_last(units: &[Unit]) -> Option<Vec<Unit>> {
    let mut out = units.to_vec();
    let head = out.last_mut()?;
    for a in &mut head.alternatives {
        if a.len() > 1 && a.iter().all(|t| !t.chars().any(text::is_cjk)) {
            a.drain(..a.len() - 1);
        }
    }
    let mut seen: Vec<Vec<String>> = Vec::new();
    head.alternatives.retain(|a| {
        let new = !seen.contains(a);
        seen.push(a.clone());
        new
    });
    Some(out)
}

/// The kind marker tokens of a record, space separated (empty when it has none).
pub fn markers(gallery: &str, medium: &str, title: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    if let Some(d) = department(gallery) {
        for t in text::index_tokens(d) {
            // Words of three letters or more, and CJK: no dimension or gallery number.
            if t.chars().any(text::is_cjk) || (t.len() >= 3 && t.chars().all(char::is_alphabetic)) {
                let m = format!("{DEPARTMENT}{t}");
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
    }
    if let Some(h) = medium_head(medium) {
        out.push(format!("{MEDIUM}{h}"));
    }
    if let Some(w) = title_word(title) {
        for t in text::index_tokens(&w) {
            let m = format!("{TITLE}{t}");
            if !out.contains(&m) {
                out.push(m);
            }
        }
    }
    out.join(" ")
}

/// One content word of a browse question and the index tokens that may name its kind:
/// alternatives (any of them), each a set of tokens that must all hold (a dictionary sense
/// such as "oil painting"). A set counts only when each of its tokens names a kind or is a
/// [`GENERIC_HEADS`] word ("jade artifact", "bronze implement", "Tang dynasty"): a sense whose kind word only
/// modifies another noun names that other thing ("oracle bone inscriptions" for 甲骨文 is no
/// bone, "Terracotta Army" for 兵马俑 no terracotta vase, "Chinese railroad engineer" for
/// 詹天佑 no origin).
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// The visitor's word as written (normalised), for the answer.
    pub word: String,
    pub alternatives: Vec<Vec<String>>,
    /// Which of the question's conjuncts the word is in: "porcelain and jade", 陶瓷、玉器 or
    /// 绘画与素描 are two (0 and 1), "Chinese porcelain" one ([`CONJUNCTIONS`]).
    pub part: usize,
    /// The word names a place ([`with_demonyms`]): it narrows a kind and never names one. 中国 is
    /// "China", and "china" is a kind (porcelain), so 有中国的画吗？ looked for paintings that
    /// are porcelain, found none and was answered with the search's list.
    pub place: bool,
}

/// Nouns a dictionary sense puts after a kind word to say "a thing of that kind" ("jade
/// artifact" for 玉器, "bronze implement" for 青铜器): a set of tokens naming a kind with these
/// still names it ([`Unit`]). As written; compared as index tokens.
const GENERIC_HEADS: &[&str] = &[
    "artifact",
    "artifacts",
    "artefact",
    "implement",
    "implements",
    "ware",
    "wares",
    "object",
    "objects",
    "article",
    "articles",
    "item",
    "items",
    "utensil",
    "utensils",
    "vessel",
    "vessels",
    "product",
    "products",
    "goods",
];

/// Whether an index token is one of [`GENERIC_HEADS`], or of [`ORIGIN_FILLER`]: an origin's
/// sense names a place or time with such a word ("Tang dynasty" for 唐, "Edo period").
pub fn is_generic_head(token: &str) -> bool {
    GENERIC_HEADS
        .iter()
        .chain(ORIGIN_FILLER)
        .any(|w| text::latin_tokens(w).first().is_some_and(|t| t == token))
}

/// Words that join the kinds of a list ("porcelain and jade", 陶瓷和玉器, 绘画与素描); the
/// punctuation of a list (`,` `、` `;` `&` `/`) joins them too.
const CONJUNCTIONS: &[&str] = &["and", "or", "和", "与", "及", "以及", "或", "或者", "跟"];

/// English words of a browse question that say nothing about the kind ("What sorts of
/// objects do you have on display?"), as written; the index's stop words are dropped too.
const EN_FRAME: &[&str] = &[
    "sort",
    "sorts",
    "type",
    "types",
    "kind",
    "kinds",
    "show",
    "see",
    "look",
    "looking",
    "find",
    "collection",
    "collections",
    "museum",
    "exhibit",
    "exhibits",
    "exhibition",
    "object",
    "objects",
    "work",
    "works",
    "piece",
    "pieces",
    "item",
    "items",
    "thing",
    "things",
    "anything",
    "something",
    "artwork",
    "artworks",
    // What a museum holds in general ("Do you have Egyptian artifacts?": the Egyptian exhibits).
    "artifact",
    "artifacts",
    "artefact",
    "artefacts",
    "display",
    "view",
    "like",
    // "My kids love cats" (the taste words themselves: `text::EN_TASTE`).
    "kids",
    "want",
    "got",
    "else",
    "other",
    "others",
    "example",
    "examples",
    "please",
    "tell",
    "list",
    "name",
    "yours",
    "here",
    "today",
    "hold",
    "holds",
    "include",
    "includes",
    "keep",
    "guys",
    "hi",
    "hello",
    "excuse",
    "sorry",
    // Praise names no kind and narrows none ("Do you have any famous paintings?").
    "famous",
    "beautiful",
    "nice",
    "good",
    "great",
    "important",
    "interesting",
    "best",
    "cool",
    // Everything in a museum is old: "ancient" narrows a kind to records that happen to say so.
    "ancient",
    "old",
    "antique",
    // Where a kind is kept ("Where are the Egyptian exhibits located?", "the Japanese
    // section", "Where can I see Islamic art?": [`asks_where_kept`]).
    // The class nouns of WHERE_CLASS are frame words too ([`is_frame_word`]).
    "located",
    "displayed",
    "shown",
    "kept",
    "housed",
    // How a thing came to be says nothing of which ("Do you have anything made of gold?" was
    // narrowed to the department's records that say "made"; "Anything made in Japan?").
    "made",
];

/// Whether an English word of a question says nothing about the kind: [`EN_FRAME`] or a class
/// noun ([`WHERE_CLASS`]: "Egyptian art", "the Japanese section").
fn is_frame_word(w: &str) -> bool {
    EN_FRAME.contains(&w) || WHERE_CLASS.contains(&w) || text::EN_TASTE.contains(&w)
}

/// Superlatives of taste ("What is the prettiest vase?", 哪件瓷器最好看？): no catalogue ranks
/// beauty, so such a question about a kind lists the kind ([`asks_taste`]); about the museum's
/// things in general it asks for the highlights (the facts file's, `facts::words`).
const TASTE_EN: &[&str] = &[
    "most beautiful",
    "most impressive",
    "most stunning",
    "most amazing",
    "most remarkable",
    "most striking",
    "most interesting",
    "prettiest",
    "loveliest",
    "finest",
    "nicest",
    "coolest",
    "best",
];

/// [`TASTE_EN`] in Chinese (Simplified: the question is normalised first).
const TASTE_ZH: &[&str] = &[
    "最好看",
    "最漂亮",
    "最美丽",
    "最美",
    "最精美",
    "最精彩",
    "最有意思",
    "最有趣",
    "最好",
];

/// The words of a normalised question (letters, digits and apostrophes).
fn words_of(norm: &str) -> Vec<&str> {
    norm.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether `words` hold the words of `phrase` in a row.
fn holds_phrase(words: &[&str], phrase: &str) -> bool {
    let p: Vec<&str> = phrase.split(' ').collect();
    words.windows(p.len()).any(|w| w == p.as_slice())
}

/// Whether `question` asks which exhibit of a kind is the most beautiful or the best: a
/// superlative of taste ([`TASTE_EN`], [`TASTE_ZH`]) in a question for one of them ("What …",
/// "Which …", 哪件/哪幅…). "Is this the best one?" and 最好几点来？ are not.
pub fn asks_taste(question: &str) -> bool {
    let norm = text::normalize(question);
    let words = words_of(&norm);
    let en = matches!(
        words.first(),
        Some(&"what" | &"which" | &"what's" | &"whats")
    ) && TASTE_EN.iter().any(|p| holds_phrase(&words, p));
    let zh = norm.contains('哪') && TASTE_ZH.iter().any(|p| norm.contains(p));
    en || zh
}

/// English phrases of a question for the maker with the most works ([`asks_most_works`]).
const MOST_WORKS_EN: &[&str] = &[
    "most works",
    "most paintings",
    "most pieces",
    "most objects",
    "most exhibits",
    "most items",
    "most artworks",
    "most drawings",
    "most prints",
    "most represented",
    "most prolific",
    "painted the most",
    "made the most",
    "created the most",
    "produced the most",
    "drew the most",
    "wrote the most",
];

/// Whether `question` asks which maker has the most works in the collection ("Who painted the
/// most works here?", "Which artist has the most paintings?", 谁的作品最多？
/// 哪位艺术家的作品最多？): a count over the makers no one record answers.
pub fn asks_most_works(question: &str) -> bool {
    let norm = text::normalize(question);
    if norm.chars().any(text::is_cjk) {
        // 谁 asks for a person whatever was made (谁的瓷器最多？); 哪个 may ask for a period or
        // a place (哪个朝代的瓷器最多？), so only with a word for works.
        let works = ["作品", "画", "展品", "藏品", "东西"]
            .iter()
            .any(|w| norm.contains(w));
        let who = ["谁", "哪位", "哪一位", "哪个人"]
            .iter()
            .any(|w| norm.contains(w));
        let which = ["哪个", "哪些"].iter().any(|w| norm.contains(w));
        return norm.contains("最多") && (who || (which && works)) || asks_renown(question);
    }
    let words = words_of(&norm);
    let asks_who = matches!(
        words.first(),
        Some(&"who" | &"whose" | &"which" | &"what" | &"what's" | &"whats")
    );
    (asks_who && MOST_WORKS_EN.iter().any(|p| holds_phrase(&words, p))) || asks_renown(question)
}

/// Superlatives of a maker's renown ([`asks_renown`]).
const RENOWN_EN: &[&str] = &[
    "most famous",
    "best known",
    "best-known",
    "most well known",
    "most well-known",
    "greatest",
    "most important",
    "most renowned",
    "most celebrated",
    "most popular",
    "best",
];

/// Words for a maker in a renown question.
const MAKER_NOUNS_EN: &[&str] = &[
    "artist",
    "artists",
    "painter",
    "painters",
    "sculptor",
    "sculptors",
    "maker",
    "makers",
    "master",
    "masters",
    "calligrapher",
    "calligraphers",
    "potter",
    "potters",
    "printmaker",
    "printmakers",
    "photographer",
    "photographers",
];

const RENOWN_ZH: &[&str] = &[
    "最有名",
    "最著名",
    "最出名",
    "最伟大",
    "最重要",
    "最厉害",
    "最好",
];
const MAKER_NOUNS_ZH: &[&str] = &["艺术家", "画家", "雕塑家", "书法家", "作者", "大师"];

/// Whether `question` asks who the most famous (greatest, best) maker is ("Who is the most
/// famous artist?", 最有名的画家是谁？): the catalogue ranks no fame, so the makers with the
/// most works answer it, said to be that ([`asks_most_works`] holds too). "Who is the most
/// famous artist?" quoted a Maskette whose record mentions "the famous muralist Diego Rivera".
pub fn asks_renown(question: &str) -> bool {
    let norm = text::normalize(question);
    if norm.chars().any(text::is_cjk) {
        return RENOWN_ZH.iter().any(|w| norm.contains(w))
            && MAKER_NOUNS_ZH.iter().any(|w| norm.contains(w))
            && !norm.contains('这')
            && ["谁", "哪位", "哪一位", "哪个"]
                .iter()
                .any(|w| norm.contains(w));
    }
    let words = words_of(&norm);
    // "Which artist is best known for landscapes?" asks what a maker is known for: searched.
    matches!(words.first(), Some(&"who" | &"who's" | &"whos" | &"which"))
        && RENOWN_EN.iter().any(|p| holds_phrase(&words, p))
        && words.iter().any(|w| MAKER_NOUNS_EN.contains(w))
        && !words.contains(&"for")
        // "Was the maker of this vase the best of his day?": about one exhibit.
        && !words
            .iter()
            .any(|w| matches!(*w, "this" | "that" | "these" | "those"))
}

/// Words of a most-works question ([`asks_most_works`]) that ask it, not narrow it, besides
/// [`MAKER_NOUNS_EN`].
const MOST_WORKS_FRAME_EN: &[&str] = &[
    "famous",
    "best",
    "known",
    "well",
    "greatest",
    "important",
    "renowned",
    "celebrated",
    "popular",
    "who's",
    "whos",
    "ever",
    "time",
    "world",
    "history",
    "who",
    "whose",
    "which",
    "what",
    "what's",
    "whats",
    "is",
    "are",
    "was",
    "has",
    "have",
    "had",
    "did",
    "does",
    "do",
    "the",
    "a",
    "an",
    "of",
    "by",
    "in",
    "at",
    "on",
    "here",
    "there",
    "this",
    "collection",
    "museum",
    "museum's",
    "your",
    "you",
    "one",
    "person",
    "most",
    "work",
    "works",
    "piece",
    "pieces",
    "object",
    "objects",
    "exhibit",
    "exhibits",
    "item",
    "items",
    "artwork",
    "artworks",
    "represented",
    "prolific",
    "painted",
    "made",
    "created",
    "produced",
    "drew",
    "wrote",
    "shown",
    "display",
    "displayed",
];

/// Whether an English word asks a most-works question rather than narrowing it. Words of a
/// kind ("paintings", "prints") narrow it: they are kept, and name the kind the makers are
/// counted over ([`most_works_kinds`]).
fn most_works_frame(w: &str) -> bool {
    MOST_WORKS_FRAME_EN.contains(&w) || MAKER_NOUNS_EN.contains(&w)
}

/// English words of a most-works question that name a kind of work ("Which artist made the
/// most prints?"): counted over as a kind, never as words the records hold.
const KIND_WORDS_EN: &[&str] = &[
    "painting",
    "paintings",
    "drawing",
    "drawings",
    "print",
    "prints",
];

/// Whether a narrowing word of a most-works question is one of [`KIND_WORDS_EN`].
pub fn is_kind_word(w: &str) -> bool {
    KIND_WORDS_EN.contains(&w)
}

/// The kind of work a maker's word implies ("Which painter has the most works?" asks about
/// the paintings), as a word of that kind ([`DEPARTMENT_WORDS_ZH`] names both halves).
const MAKER_KINDS: &[(&str, &str)] = &[
    ("painter", "paintings"),
    ("painters", "paintings"),
    ("sculptor", "sculpture"),
    ("sculptors", "sculpture"),
    ("potter", "ceramics"),
    ("potters", "ceramics"),
    ("printmaker", "prints"),
    ("printmakers", "prints"),
    ("photographer", "photographs"),
    ("photographers", "photographs"),
    ("calligrapher", "calligraphy"),
    ("calligraphers", "calligraphy"),
    ("画家", "绘画"),
    ("雕塑家", "雕塑"),
    ("书法家", "书法"),
];

/// The words of a most-works question that may name the kind its makers are counted over:
/// its narrowing words ([`most_works_qualifiers`]: "chinese paintings", 瓷器) and the kind its
/// maker's word implies (painter: paintings; 画家: 绘画), in the question's order, then the
/// implied ones; joined, one question for [`subject`].
/// The caller counts over the kind when [`resolve`] finds one, over the narrowing words
/// otherwise: "Who made the most Chinese paintings?" counted the records mentioning
/// "Chinese", and named a maker of sword fittings.
pub fn most_works_kinds(question: &str) -> Vec<String> {
    let norm = text::normalize(question);
    let said = words_of(&norm);
    let mut words = most_works_qualifiers(question);
    let implied = MAKER_KINDS.iter().filter(|(maker, _)| {
        if maker.chars().any(text::is_cjk) {
            norm.contains(maker)
        } else {
            said.contains(maker)
        }
    });
    for (_, kind) in implied {
        if !words.iter().any(|w| w == kind) {
            words.push((*kind).to_string());
        }
    }
    words
}

/// Chinese words of a most-works question that ask it, not narrow it (哪位画家的作品最多？),
/// besides [`RENOWN_ZH`] and [`MAKER_NOUNS_ZH`].
const MOST_WORKS_FRAME_ZH: &[&str] = &[
    "哪一位",
    "哪个人",
    "哪位",
    "哪个",
    "哪些",
    "作品",
    "展品",
    "藏品",
    "东西",
    "最多",
    "请问",
    "你们",
    "本馆",
    "博物馆",
    "馆藏",
    "馆里",
    "这里",
    "谁",
    "的",
    "是",
    "有",
    "在",
    "中",
    "里",
    "画",
    "呢",
    "吗",
];

/// The visitor's words that narrow a most-works question to some of the collection ("Which
/// Japanese artist has the most works?": `japanese`; 哪位日本画家的作品最多？: 日本), normalised;
/// empty when it asks about the whole collection. The makers are then counted over the records
/// holding them: "Which Japanese artist…" was answered with Alfred Jacob Miller's 76 paintings
/// of the American West.
pub fn most_works_qualifiers(question: &str) -> Vec<String> {
    let norm = text::normalize(question);
    if norm.chars().any(text::is_cjk) {
        let mut rest = norm.clone();
        // Renown and makers first: 画家 before 画.
        for w in RENOWN_ZH
            .iter()
            .chain(MAKER_NOUNS_ZH)
            .chain(MOST_WORKS_FRAME_ZH)
        {
            rest = rest.replace(w, " ");
        }
        return text::runs(&rest)
            .filter_map(|r| match r {
                Run::Cjk(s) if s.chars().count() >= 2 => Some(s.to_string()),
                Run::Word(w) if !most_works_frame(w) => Some(w.to_string()),
                _ => None,
            })
            .collect();
    }
    words_of(&norm)
        .into_iter()
        .filter(|w| !most_works_frame(w) && !text::latin_tokens(w).is_empty())
        .map(str::to_string)
        .collect()
}

/// The name a `maker` field gives, without its dates, role or note ("Alfred Jacob Miller
/// (American, 1810-1874) [Painter]" → "Alfred Jacob Miller"); None for no maker or a culture
/// ("Venetian ()"), which names no one.
pub fn maker_name(maker: &str) -> Option<&str> {
    let head = maker
        .split(['(', '[', ';', '（', '；'])
        .next()
        .unwrap_or("")
        .trim()
        .trim_end_matches(',')
        .trim();
    let lower = head.to_lowercase();
    // A person's dates or nationality follow in brackets ("Titian (Italian, …)"); a culture's
    // brackets are empty or absent ("Venetian ()").
    let described = maker
        .split_once('(')
        .is_some_and(|(_, rest)| !rest.trim_start().starts_with(')'));
    let culture = !described
        && !head.contains(' ')
        && head.is_ascii()
        && ["ian", "ean", "ese", "ish", "ic", "an"]
            .iter()
            .any(|e| lower.ends_with(e));
    let nobody = matches!(
        lower.as_str(),
        "" | "unknown" | "anonymous" | "unidentified" | "佚名"
    );
    (!culture && !nobody).then_some(head)
}

/// English openings of a question for where a kind is kept ([`asks_where_kept`]).
const WHERE_EN: &[&str] = &[
    "where are",
    "where is",
    "where's",
    "where can i see",
    "where can i find",
    "where can we see",
    "where can we find",
    "where do i find",
    "where do you keep",
    "where do you have",
    "where do you show",
    "where would i find",
    "where will i find",
    "where should i go for",
    "which room has",
    "which rooms have",
    "what room has",
    "which gallery has",
    "which galleries have",
    "which floor has",
    "in which room are",
    "in which gallery are",
];

/// Words closing such a question that say nothing of the kind ("Where are the paintings
/// displayed?", "… in the museum").
const WHERE_TAIL: &[&str] = &[
    "located",
    "displayed",
    "shown",
    "kept",
    "exhibited",
    "housed",
    "on",
    "display",
    "view",
    "in",
    "the",
    "this",
    "museum",
    "building",
    "here",
    "please",
    "today",
];

/// Nouns for a class of exhibits, not one ("the Egyptian exhibits", "the Japanese section").
const WHERE_CLASS: &[&str] = &[
    "exhibits",
    "objects",
    "artifacts",
    "artefacts",
    "antiquities",
    "works",
    "artworks",
    "pieces",
    "things",
    "items",
    "stuff",
    "art",
    "collection",
    "collections",
    "section",
    "sections",
    "gallery",
    "galleries",
    "department",
    "departments",
    "room",
    "rooms",
    "wing",
    "hall",
    "halls",
];

/// Chinese endings of a question for where something is (瓷器在哪里？ 埃及的展品在哪个展厅？).
const WHERE_ZH: &[&str] = &[
    // Where it is shown (瓷器在哪里展出？ was answered with one typescript's department).
    "在哪里展出",
    "在哪儿展出",
    "在哪展出",
    "在哪里展示",
    "在哪展示",
    "在哪里陈列",
    "在哪里",
    "在哪儿",
    "在哪个展厅",
    "在哪个展区",
    "在哪个厅",
    "在几楼",
    "在什么地方",
    "放在哪里",
    "放在哪",
    "在哪",
];

/// Most characters of a Chinese kind asked where it is kept without a class word (青铜器).
const WHERE_KIND_CHARS: usize = 3;

/// Chinese words for a class of exhibits (埃及的展品, 青铜器展区).
const WHERE_CLASS_ZH: &[&str] = &[
    "展品",
    "文物",
    "藏品",
    "东西",
    "作品",
    "艺术品",
    "展区",
    "展厅",
];

/// Whether `question` asks where a kind of exhibit is kept, not one exhibit: "Where are the
/// Egyptian exhibits?", "Where can I find Japanese art?", "Where are the paintings?",
/// 埃及的展品在哪里？ Its object is a class noun ([`WHERE_CLASS`], [`WHERE_CLASS_ZH`]) or a
/// plural of a word or few; "Where is the armor?" and 三希堂法帖在哪个展厅？ name one thing, and
/// "Where are the scarabs from?" asks where they were made.
pub fn asks_where_kept(question: &str) -> bool {
    let norm = text::normalize(question);
    let bare = norm
        .trim()
        .trim_end_matches(|c: char| !c.is_alphanumeric() && !text::is_cjk(c));
    if bare.chars().any(text::is_cjk) {
        return WHERE_ZH.iter().any(|w| {
            bare.strip_suffix(w).is_some_and(|x| {
                let x = x.trim_end_matches('的').trim();
                // A short word is a kind or nothing (瓷器在哪个展厅？): the kind path says
                // which; a longer one names one exhibit (三希堂法帖).
                (1..=WHERE_KIND_CHARS).contains(&x.chars().count())
                    || WHERE_CLASS_ZH
                        .iter()
                        .any(|c| x.len() > c.len() && x.ends_with(c))
            })
        });
    }
    let words = words_of(bare);
    let Some(n) = WHERE_EN.iter().find_map(|o| {
        let o: Vec<&str> = o.split(' ').collect();
        words.starts_with(&o).then_some(o.len())
    }) else {
        return false;
    };
    let mut object = &words[n..];
    while let Some((last, rest)) = object.split_last() {
        if WHERE_TAIL.contains(last) {
            object = rest;
        } else {
            break;
        }
    }
    let mut one_named = false;
    while let Some((first, rest)) = object.split_first() {
        if matches!(
            *first,
            "the" | "your" | "all" | "some" | "any" | "of" | "a" | "an"
        ) {
            one_named |= matches!(*first, "the" | "your" | "a" | "an");
            object = rest;
        } else {
            break;
        }
    }
    const MADE: &[&str] = &["from", "made", "found", "come", "excavated", "discovered"];
    let Some(last) = object.last() else {
        return false;
    };
    // With "the" a plural or a class names the kind ("the swords", "the Egyptian exhibits");
    // without it a word or two does too ("Where can I see Chinese porcelain?").
    let kind = WHERE_CLASS.contains(last)
        || (last.len() > 3 && last.ends_with('s') && !last.ends_with("ss"))
        || (!one_named && object.len() <= 2);
    // A possessive names one work ("Where can I see Monet's Water Lilies?").
    let owned = object.iter().any(|w| w.ends_with("'s"));
    object.len() <= text::KEYWORD_WORDS
        && !owned
        && !object.iter().any(|w| MADE.contains(w))
        && kind
}

/// `question` without its superlatives of taste ([`asks_taste`]), for the kind lookup.
pub fn without_taste_words(question: &str) -> String {
    // "Which vase is prettiest?": the word ends at the question mark too.
    let norm = text::normalize(question).replace(['?', '!', '.', ','], " ");
    let mut out = format!(" {norm} ");
    for p in TASTE_EN {
        out = out.replace(&format!(" {p} "), " ");
    }
    for p in TASTE_ZH {
        out = out.replace(p, " ");
    }
    out.trim().to_string()
}

/// Chinese words of a browse question that say nothing about the kind (有没有…？ 你们这里有什么…可以看？).
const ZH_FRAME: &[&str] = &[
    "有",
    "没有",
    "有没有",
    "哪些",
    "什么",
    "什么样",
    "都",
    "还",
    "可以",
    "看",
    "看看",
    "展品",
    "作品",
    "藏品",
    "东西",
    "你们",
    "你",
    "我",
    "我们",
    "馆",
    "本馆",
    "这里",
    "这儿",
    "吗",
    "么",
    "嘛",
    "您",
    "您们",
    "贵馆",
    "贵",
    "馆里",
    "馆内",
    "这边",
    "呢",
    "类",
    "件",
    "些",
    "一些",
    "的",
    "想",
    // A visitor's taste (我喜欢瓷器, 我对青铜器很感兴趣).
    "喜欢",
    "喜爱",
    "爱看",
    "很",
    "特别",
    "对",
    "感兴趣",
    "很感兴趣",
    "特别感兴趣",
    "兴趣",
    "要",
    "给",
    "里",
    "展出",
    "展览",
    "收藏",
    "馆藏",
    "博物馆",
    "哪种",
    "种",
    "几件",
    "几",
    "其他",
    "别的",
    "请问",
    "请",
    "多少",
    "共",
    "一共",
    "方面",
    "相关",
    "关于",
    "能",
    "吧",
    "啊",
    "了",
    "古代",
    "古",
    "古老",
    "文物",
    "老",
    "珍贵",
    "著名",
    "有名",
    "漂亮",
    "好看",
    // Where they come from, as "from" (有没有来自日本的瓷器？ searched and listed an envelope
    // "sent from Japan"): the place narrows.
    "来自",
    "产自",
    "产于",
    "出自",
    "自",
    "产",
    "制",
    "造",
    "制造",
    // Which one (最漂亮的画是哪幅？).
    "哪",
    "哪件",
    "哪一件",
    "哪幅",
    "哪一幅",
    "哪个",
    "哪一个",
    "哪把",
    "哪一把",
    "哪只",
    "哪一只",
    "哪块",
    "哪一块",
    "哪尊",
    "哪一尊",
    "哪张",
    "哪一张",
    "幅",
    "是",
    // Where it is kept (埃及的展品在哪里？ 青铜器在哪个展厅？).
    "在",
    "哪里",
    "哪儿",
    "展厅",
    "展区",
    "几楼",
    "楼",
    "地方",
    "放",
];

/// English words visitors name a kind by where museums' departments say another
/// (lower case, the department word second): "Do you have pottery?" and "Olmec pottery" found
/// no kind, since the departments say Ceramics and the media earthenware or stoneware, and the
/// search answered with a vase whose maker "experimented with pottery".
const VISITOR_KIND_WORDS: &[(&str, &str)] = &[("pottery", "ceramics"), ("potteries", "ceramics")];

/// `alternatives` with the department's word of each [`VISITOR_KIND_WORDS`] word they hold
/// ("pottery", also as 陶器's sense: 有没有陶器？).
fn with_visitor_kinds(alternatives: &mut Vec<Vec<String>>) {
    for (visitor, department) in VISITOR_KIND_WORDS {
        let d = text::latin_tokens(department);
        if alternatives.contains(&text::latin_tokens(visitor)) && !alternatives.contains(&d) {
            alternatives.push(d);
        }
    }
}

/// The content words of a browse question (already known to be one), each with the tokens
/// that may name its kind: an English word its own index token; a Chinese word its
/// dictionary senses (`english_of`, as index tokens) and its own index tokens (a department
/// written in Chinese). Empty when the question has no content word.
pub fn subject<'a>(question: &str, english_of: &dyn Fn(&str) -> Vec<&'a [Box<str>]>) -> Vec<Unit> {
    let norm = text::normalize(question);
    let norm = text::unfold_contractions(&norm);
    let mut out: Vec<Unit> = Vec::new();
    // The part of the next word: a conjunction after a word starts the next one.
    let mut part = 0;
    let mut next_part = |out: &[Unit], part: &mut usize| {
        if out.last().is_some_and(|u| u.part == *part) {
            *part += 1;
        }
    };
    for segment in norm.split([',', '、', ';', '&', '/']) {
        next_part(&out, &mut part);
        // The word after "from" (and its articles) is where the things come from: "Do you have
        // paintings from China?" looked for paintings that are china (porcelain), found none
        // and was answered with the search's list.
        let mut after_from = false;
        for run in text::runs(segment) {
            let before = out.len();
            subject_run(run, english_of, &mut out, &mut part, &mut next_part);
            if let Run::Word(w) = run {
                if after_from && out.len() > before {
                    mark_english_place(out.last_mut().expect("a unit was pushed"));
                }
                after_from = w == "from" || (after_from && matches!(w, "the" | "a" | "an"));
            }
        }
    }
    out
}

/// An English word after "from" as a place ([`Unit::place`]): it narrows the kind, also by its
/// people's words ("china" → chinese, as the origin fields write it).
fn mark_english_place(u: &mut Unit) {
    u.place = true;
    let word = u.word.clone();
    push_demonyms(&mut u.alternatives, &word);
}

/// `alternatives` with each of the [`demonym_tokens`] of `word` they lack, in order.
fn push_demonyms(alternatives: &mut Vec<Vec<String>>, word: &str) {
    for t in demonym_tokens(word) {
        if !alternatives.contains(&t) {
            alternatives.push(t);
        }
    }
}

/// [`subject`] of one run of a question.
fn subject_run<'a>(
    run: Run<'_>,
    english_of: &dyn Fn(&str) -> Vec<&'a [Box<str>]>,
    out: &mut Vec<Unit>,
    part: &mut usize,
    next_part: &mut dyn FnMut(&[Unit], &mut usize),
) {
    match run {
        Run::Word(w) => {
            if CONJUNCTIONS.contains(&w) {
                next_part(out, part);
                return;
            }
            if is_frame_word(w) {
                return;
            }
            if let Some(t) = text::latin_tokens(w).pop()
                && !out.iter().any(|u| u.word == w)
            {
                let mut alternatives = vec![vec![t]];
                with_visitor_kinds(&mut alternatives);
                out.push(Unit {
                    word: w.to_string(),
                    alternatives,
                    part: *part,
                    place: false,
                });
            }
        }
        Run::Cjk(s) => {
            // The Chinese names the overview gives departments (金属器, 绘画与素描's
            // 素描) are words of their own: the dictionary's senses of 素描 (sketch) or a
            // segmentation of 金属器 would miss the department the visitor was just told of.
            for (w, department) in department_words_zh(s) {
                // 书画作品 is one word to the collection's user dictionary: 你们有哪些书画作品？
                // named no kind.
                let w = text::exhibit_tail_head(&w).map_or(w.clone(), str::to_string);
                let mut alternatives: Vec<Vec<String>> = if department {
                    DEPARTMENT_WORDS_ZH
                        .iter()
                        .filter(|(_, z)| *z == w)
                        .map(|(en, _)| text::latin_tokens(en))
                        .collect()
                } else {
                    Vec::new()
                };
                if CONJUNCTIONS.contains(&w.as_str()) {
                    next_part(out, part);
                    continue;
                }
                if ZH_FRAME.contains(&w.as_str()) || text::is_zh_stop(&w) {
                    continue;
                }
                alternatives.extend(
                    english_of(&w)
                        .into_iter()
                        .map(|p| p.iter().map(|t| t.to_string()).collect()),
                );
                with_visitor_kinds(&mut alternatives);
                let own = text::index_tokens(&w);
                if !own.is_empty() {
                    alternatives.push(own);
                }
                if !out.iter().any(|u| u.word == w) {
                    out.push(Unit {
                        word: w,
                        alternatives,
                        part: *part,
                        place: false,
                    });
                }
            }
        }
    }
}

/// A row of a kind: `(pk, length in tokens)`.
pub type Member = (i64, u64);

/// What [`resolve`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The rows of the kind, longest first (then by pk).
    pub members: Vec<Member>,
    /// The question's tokens that named a kind.
    pub named: Vec<String>,
    /// The question's words that name no kind but narrow it, as the visitor wrote them
    /// (normalised): "chinese" in "Chinese porcelain", 清朝 in 清朝的瓷器.
    pub qualifiers: Vec<String>,
    /// For a list of kinds ("porcelain and jade"), the rows of each, in the order of the
    /// question; empty for one kind.
    pub parts: Vec<Vec<i64>>,
}

/// The members of the kinds a browse question names: for each [`Unit`], the union of its
/// alternatives (each the intersection of its tokens that name a kind); across units, the
/// intersection ("rare books": rare ∩ book). `members_of(token)` gives the rows holding a kind
/// marker of `token` (department or medium). A unit that names no kind narrows the others
/// instead, to the rows holding its words (`rows_with(token)`: the plain index token, so
/// "Chinese porcelain" is the porcelain whose record says Chinese; 清朝 also through its
/// dictionary senses, "Qing dynasty"). None when no unit names a kind, a narrowing word is
/// found nowhere, or fewer than two rows are left (one, when a period narrows: [`is_period`]).
///
/// A list of kinds ("porcelain and jade", 陶瓷和玉器: units in several [`Unit::part`]s) is
/// the union of its parts, each resolved alone, when every part names a kind of two rows or
/// more with no narrowing word; otherwise the whole question is resolved as one ("paintings of
/// cats and dogs": the paintings holding both words), as before lists were read.
pub fn resolve<E>(
    units: &[Unit],
    members_of: &mut dyn FnMut(&str) -> Result<Vec<Member>, E>,
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<Member>, E>,
) -> Result<Option<Resolved>, E> {
    let mut parts: Vec<Vec<Unit>> = Vec::new();
    for u in units {
        match parts.last_mut() {
            Some(p) if p[0].part == u.part => p.push(u.clone()),
            _ => parts.push(vec![u.clone()]),
        }
    }
    if parts.len() > 1 {
        let mut each: Vec<Resolved> = Vec::new();
        for p in &parts {
            match resolve_one(p, members_of, rows_with)? {
                Some(r) if r.qualifiers.is_empty() => each.push(r),
                _ => break,
            }
        }
        if each.len() == parts.len() {
            let mut members: Vec<Member> = each.iter().flat_map(|r| r.members.clone()).collect();
            members.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            members.dedup();
            let mut named: Vec<String> = Vec::new();
            for t in each.iter().flat_map(|r| &r.named) {
                if !named.contains(t) {
                    named.push(t.clone());
                }
            }
            return Ok(Some(Resolved {
                members,
                named,
                qualifiers: Vec::new(),
                parts: each
                    .into_iter()
                    .map(|r| r.members.into_iter().map(|(pk, _)| pk).collect())
                    .collect(),
            }));
        }
    }
    resolve_one(units, members_of, rows_with)
}

/// [`resolve`] of one kind (every unit's rows intersected).
fn resolve_one<E>(
    units: &[Unit],
    members_of: &mut dyn FnMut(&str) -> Result<Vec<Member>, E>,
    rows_with: &mut dyn FnMut(&str) -> Result<Vec<Member>, E>,
) -> Result<Option<Resolved>, E> {
    use std::collections::HashMap;
    type Rows = HashMap<i64, u64>;
    if units.is_empty() {
        return Ok(None);
    }
    // The union over a unit's alternatives of the rows `of` gives for all of an alternative's
    // tokens; the tokens found are added to `found`.
    fn rows_of<E>(
        unit: &Unit,
        memo: &mut HashMap<String, Rows>,
        of: &mut dyn FnMut(&str) -> Result<Vec<Member>, E>,
        found: &mut Vec<String>,
    ) -> Result<Rows, E> {
        let mut unit_rows = Rows::new();
        'alt: for alt in &unit.alternatives {
            for t in alt {
                if !memo.contains_key(t) {
                    let rows: Rows = of(t)?.into_iter().collect();
                    memo.insert(t.clone(), rows);
                }
                if memo[t].is_empty() && !is_generic_head(t) {
                    continue 'alt;
                }
            }
            let mut alt_rows: Option<Rows> = None;
            for t in alt {
                let rows = &memo[t];
                if rows.is_empty() {
                    continue;
                }
                if !found.contains(t) {
                    found.push(t.clone());
                }
                alt_rows = Some(match alt_rows {
                    None => rows.clone(),
                    Some(a) => a
                        .into_iter()
                        .filter(|(pk, _)| rows.contains_key(pk))
                        .collect(),
                });
            }
            unit_rows.extend(alt_rows.unwrap_or_default());
        }
        Ok(unit_rows)
    }
    let mut kinds_memo: HashMap<String, Rows> = HashMap::new();
    let mut words_memo: HashMap<String, Rows> = HashMap::new();
    let mut named: Vec<String> = Vec::new();
    let mut qualifiers: Vec<String> = Vec::new();
    let mut acc: Option<Rows> = None;
    for unit in units {
        let mut unit_rows = if unit.place {
            Rows::new()
        } else {
            rows_of(unit, &mut kinds_memo, members_of, &mut named)?
        };
        if unit_rows.is_empty() {
            unit_rows = rows_of(unit, &mut words_memo, rows_with, &mut Vec::new())?;
            if unit_rows.is_empty() {
                return Ok(None);
            }
            qualifiers.push(unit.word.clone());
        }
        acc = Some(match acc {
            None => unit_rows,
            Some(a) => a
                .into_iter()
                .filter(|(pk, _)| unit_rows.contains_key(pk))
                .collect(),
        });
    }
    let mut members: Vec<(i64, u64)> = acc.unwrap_or_default().into_iter().collect();
    // A kind narrowed by a period or a place may leave one: "Do you have Qing jade?" has one
    // answer, the Qing jade bowl (searched, it was refused; "Ming vases" listed Qing vases as
    // Ming), and so has 有中国的玉器吗？ (refused too).
    let by_period = units
        .iter()
        .any(|u| qualifiers.contains(&u.word) && (is_period(u) || u.place));
    let fewest = if by_period { 1 } else { 2 };
    if members.len() < fewest || qualifiers.len() == units.len() {
        return Ok(None);
    }
    members.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(Some(Resolved {
        members,
        named,
        qualifiers,
        parts: Vec::new(),
    }))
}

/// The departments of a collection from its `gallery` fields and their counts
/// ([`crate::store::collection::CollectionStore::gallery_counts`]), largest first (then by
/// name); exhibits with no department are left out.
pub fn departments(galleries: &[(String, i64)]) -> Vec<(String, usize)> {
    let mut by: Vec<(String, usize)> = Vec::new();
    for (g, n) in galleries {
        let Some(d) = department(g) else { continue };
        match by.iter_mut().find(|(name, _)| name == d) {
            Some((_, m)) => *m += *n as usize,
            None => by.push((d.to_string(), *n as usize)),
        }
    }
    by.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    by
}

/// How a listing names its kinds: the departments and medium heads of the exhibits it lists
/// that hold the question's kind tokens, departments first, in order of first appearance; a
/// medium a department already names is left out ("Prints", not "Prints / print").
pub fn label(departments: &[&str], media: &[String]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for d in departments {
        if !parts.iter().any(|p| p == d) {
            parts.push(d.to_string());
        }
    }
    let named: Vec<String> = departments
        .iter()
        .flat_map(|d| text::latin_tokens(d))
        .collect();
    for m in media {
        let token = text::latin_tokens(m).pop();
        if !parts.iter().any(|p| p == m) && !token.is_some_and(|t| named.contains(&t)) {
            parts.push(m.clone());
        }
    }
    parts.join(" / ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_place_and_a_kind_in_one_word_are_split() {
        let is_place = |w: &str| ["中国", "日本"].contains(&w);
        let is_word = |w: &str| ["画", "瓷器"].contains(&w);
        assert_eq!(
            split_place_words("有中国画吗？", &is_place, &is_word).as_deref(),
            Some("有中国的画吗?")
        );
        // jieba cuts 日本画 itself; the list's mark is kept.
        assert_eq!(
            split_place_words("有没有日本画、中国画？", &is_place, &is_word).as_deref(),
            Some("有没有日本画、中国的画?")
        );
        // "Made in" after a place: the place narrows, 产 is a frame word.
        assert_eq!(
            split_place_words("有没有日本产的瓷器？", &is_place, &is_word).as_deref(),
            Some("有没有日本的产的瓷器?")
        );
        let is_place = |w: &str| ["中国", "日本", "埃及"].contains(&w);
        assert_eq!(
            split_place_words("有没有古埃及的木乃伊？", &is_place, &is_word).as_deref(),
            Some("有没有古的埃及的木乃伊?")
        );
        // Already two words, or no place: nothing to split.
        assert_eq!(
            split_place_words("有中国的画吗？", &is_place, &is_word),
            None
        );
        assert_eq!(split_place_words("有没有油画？", &is_place, &is_word), None);
        assert_eq!(
            split_place_words("Do you have Chinese paintings?", &is_place, &is_word),
            None
        );
    }

    #[test]
    fn a_question_for_the_maker_with_most_works_is_told_from_others() {
        for q in [
            "Who painted the most works here?",
            "Which artist has the most works in the collection?",
            "Which artist is the most represented?",
            "Who made the most?",
            "谁的作品最多？",
            "哪位艺术家的作品最多？",
            // Fame is not in the catalogue: the most works answer it, said to be that.
            "Who is the most famous artist?",
            "Who is the greatest painter?",
            "最有名的画家是谁？",
        ] {
            assert!(asks_most_works(q), "{q}");
        }
        for q in [
            "Which painting has the most colors?",
            "What is the most famous painting?",
            "Who is the most famous person in this painting?",
            "Which artist is best known for landscapes?",
            "Who was the greatest artist of this school?",
            "这幅画的作者是最有名的画家吗？是谁？",
            "最有名的展品是哪件？",
            "What is the most beautiful vase?",
            "Who painted the Water Lilies?",
            "哪件作品最漂亮？",
        ] {
            assert!(!asks_most_works(q), "{q}");
        }
    }

    #[test]
    fn a_most_works_question_keeps_the_words_that_narrow_it() {
        for (q, want) in [
            ("Which artist has the most works?", &[][..]),
            ("Who painted the most works here?", &[]),
            (
                "Which artist is the most represented in the collection?",
                &[],
            ),
            ("谁的作品最多？", &[]),
            ("哪位艺术家的作品最多？", &[]),
            ("Which Japanese artist has the most works?", &["japanese"]),
            // A kind narrows too: counted over as a kind (`most_works_kinds`).
            (
                "Who made the most Chinese paintings?",
                &["chinese", "paintings"],
            ),
            ("Which artist made the most prints?", &["prints"]),
            ("哪位日本画家的作品最多？", &["日本"]),
            ("Who is the greatest painter of all time?", &[]),
            ("Who is the most famous Japanese artist?", &["japanese"]),
            ("最有名的日本画家是谁？", &["日本"]),
        ] {
            assert_eq!(most_works_qualifiers(q), want, "{q}");
        }
    }

    #[test]
    fn a_makers_word_implies_the_kind_their_works_are_counted_over() {
        for (q, want) in [
            ("Which painter has the most works?", &["paintings"][..]),
            (
                "Who is the greatest Japanese painter?",
                &["japanese", "paintings"],
            ),
            ("哪位日本画家的作品最多？", &["日本", "绘画"]),
            ("最有名的书法家是谁？", &["书法"]),
            // Said by the visitor already: once.
            ("Which painter has the most paintings?", &["paintings"]),
            ("Which artist has the most works?", &[]),
        ] {
            assert_eq!(most_works_kinds(q), want, "{q}");
        }
        assert!(is_kind_word("prints") && !is_kind_word("japanese"));
    }

    #[test]
    fn who_with_most_asks_for_a_maker_and_which_only_with_a_word_for_works() {
        assert!(asks_most_works("谁的瓷器最多？"));
        assert!(asks_most_works("哪个画家的画最多？"));
        assert!(!asks_most_works("哪个朝代的瓷器最多？"));
        assert!(!asks_most_works("哪些国家的瓷器最多？"));
    }

    #[test]
    fn a_maker_field_names_its_maker_without_dates_or_role() {
        assert_eq!(
            maker_name("Alfred Jacob Miller (American, 1810-1874) [Painter]"),
            Some("Alfred Jacob Miller")
        );
        assert_eq!(maker_name("連雅堂"), Some("連雅堂"));
        assert_eq!(maker_name("Venetian ()"), None, "a culture names no one");
        assert_eq!(maker_name("Venetian () [Painter]"), None);
        assert_eq!(maker_name("Unknown"), None);
        assert_eq!(maker_name(""), None);
        assert_eq!(maker_name("Sesson"), Some("Sesson"));
        assert_eq!(
            maker_name("Titian (Italian, ca. 1488-1576)"),
            Some("Titian")
        );
    }

    #[test]
    fn a_where_question_about_a_kind_is_told_from_one_about_an_exhibit() {
        for q in [
            "Where are the Egyptian exhibits?",
            "Where can I see Egyptian art?",
            "Where are the paintings displayed?",
            "Where is the Japanese section?",
            "Where can I see Chinese porcelain?",
            "Where are the swords located in the museum?",
            "Which room has the Japanese art?",
            "Which gallery has the Egyptian exhibits?",
            "埃及的展品在哪里？",
            "瓷器在哪个展厅？",
        ] {
            assert!(asks_where_kept(q), "{q}");
        }
        for q in [
            "Where is the armor?",
            "Where is the Rubens Vase?",
            "Which room has the Rubens Vase?",
            "Where can I see the badger box?",
            "Where are the scarabs from?",
            "Where was the sword made?",
            "Where can I see Monet's Water Lilies?",
            "三希堂法帖在哪个展厅？",
            "翠玉白菜在哪个展厅可以看到？",
            "Do you have Egyptian exhibits?",
        ] {
            assert!(!asks_where_kept(q), "{q}");
        }
    }

    use super::*;

    #[test]
    fn superlatives_of_taste_are_told_apart() {
        for q in [
            "What is the prettiest vase?",
            "Which is the most beautiful painting?",
            "What's the best armor?",
            "哪件瓷器最好看？",
            "最漂亮的画是哪幅？",
            "哪一件玉器最精美？",
        ] {
            assert!(asks_taste(q), "{q}");
        }
        for q in [
            "Is this the best one?",
            "Do you have beautiful vases?",
            "最好几点来？",
            "这件瓷器好看吗？",
            "What is the oldest vase?",
        ] {
            assert!(!asks_taste(q), "{q}");
        }
        assert_eq!(
            without_taste_words("What is the prettiest vase?"),
            "what is the vase"
        );
        assert_eq!(
            without_taste_words("Which vase is prettiest?"),
            "which vase is"
        );
        assert_eq!(without_taste_words("哪件瓷器最好看？"), "哪件瓷器");
    }

    #[test]
    fn a_kind_named_in_titles_is_its_last_words_thing() {
        let flower_vase: Vec<Box<str>> = vec!["flower".into(), "vase".into()];
        let senses = |w: &str| {
            if w == "花瓶" {
                vec![&flower_vase[..]]
            } else {
                Vec::new()
            }
        };
        let asked = super::super::dating::without_age_words("最古老的花瓶是哪一个？");
        let units = subject(&asked, &senses);
        let headed = headed_by_last(&units).expect("a unit");
        assert_eq!(headed.len(), 1, "{units:?}");
        assert!(headed[0].alternatives.contains(&vec!["vase".to_string()]));
        assert!(!headed[0].alternatives.iter().any(|a| a.len() > 1));
        assert!(headed_by_last(&[]).is_none());
    }

    #[test]
    fn an_english_title_is_headed_by_what_the_object_is() {
        for (title, heads) in [
            ("Plate with the School of Xenocrates", &["plate"][..]),
            ("Iznik Fritware Plate", &["plate"]),
            ("One of a Pair of Vases (Vase à anses carrées)", &["vases"]),
            ("The \"Rubens Vase\"", &["vase"]),
            ("Double-Gourd-Shaped Vase", &["vase"]),
            (
                "Tsuba with Nitta Yoshisada Throwing his Sword into the Sea",
                &["tsuba"],
            ),
            (
                "Hilt of a Hunting Sword Depicting Beasts of the Chase",
                &["hilt"],
            ),
            ("Mirror Case with the Castle of Love", &["case"]),
            ("Wine Bottle and Cup", &["bottle", "cup"]),
            ("Leaf from Book of Hours: Fifteen Gradual Psalms", &["leaf"]),
            ("Gold Plated Bronze Ring", &["ring"]),
            ("Short Sword (\"Wakizashi\")", &["sword"]),
        ] {
            assert_eq!(english_title_heads(title), heads, "{title}");
        }
        assert!(english_title_heads("漢郃陽令曹全碑拓本(冊)").is_empty());
    }

    #[test]
    fn a_chinese_dynasty_also_stands_for_its_other_form_and_its_period_field() {
        let unit = |w: &str| Unit {
            word: w.to_string(),
            alternatives: vec![text::index_tokens(w)],
            part: 0,
            place: false,
        };
        let units = with_dynasty_forms(vec![unit("唐代"), unit("拓本"), unit("元代")]);
        assert_eq!(
            units[0].alternatives,
            vec![
                vec!["唐代".to_string()],
                vec!["唐朝".to_string()],
                vec![format!("{ORIGIN}唐")]
            ]
        );
        assert_eq!(units[1].alternatives, vec![vec!["拓本".to_string()]]);
        // 元 alone is also the yuan: the other form only.
        assert_eq!(
            units[2].alternatives,
            vec![vec!["元代".to_string()], vec!["元朝".to_string()]]
        );
    }

    #[test]
    fn a_period_name_is_one_unit_that_reaches_both_catalogues() {
        let chinese_of = |p: &[&str]| -> Vec<&'static str> {
            match p {
                ["tang", "dynasti"] => vec!["唐朝", "唐代"],
                _ => Vec::new(),
            }
        };
        let units = periods(
            subject(
                "Do you have anything from the Tang dynasty?",
                &no_dictionary,
            ),
            &chinese_of,
        );
        let words: Vec<&str> = units.iter().map(|u| u.word.as_str()).collect();
        assert_eq!(words, ["tang dynasty"]);
        let alts: Vec<String> = units[0].alternatives.iter().map(|a| a.join("+")).collect();
        for want in [
            "tang+dynasti",
            "#o:tang",
            "唐朝",
            "#o:唐朝",
            "#o:唐",
            "#o:唐代",
        ] {
            assert!(alts.contains(&want.to_string()), "{want} not in {alts:?}");
        }
        // A period with no Chinese form, and a kind after it, keep their own units.
        let units = periods(subject("Edo period lacquer", &no_dictionary), &chinese_of);
        let words: Vec<&str> = units.iter().map(|u| u.word.as_str()).collect();
        assert_eq!(words, ["edo period", "lacquer"]);
        assert!(units[0].alternatives.contains(&vec!["#o:edo".to_string()]));
        // "period" alone, or after a conjunction, joins nothing.
        let units = periods(subject("Which period?", &no_dictionary), &chinese_of);
        assert!(units.iter().all(|u| !u.word.contains(' ')), "{units:?}");
        let units = periods(
            subject("porcelain and period rooms", &no_dictionary),
            &chinese_of,
        );
        assert!(units.iter().all(|u| !u.word.contains(' ')), "{units:?}");
        assert_eq!(origin_token("#o:唐"), "#o:唐");
        assert_eq!(origin_token("edo"), "#o:edo");
    }

    #[test]
    fn the_chinese_name_of_a_department_is_one_word_of_its_english_words() {
        let units = subject("有没有绘画与素描的展品？", &no_dictionary);
        let words: Vec<&str> = units.iter().map(|u| u.word.as_str()).collect();
        assert_eq!(words, ["绘画", "素描"]);
        assert_eq!(units[1].alternatives[0], ["draw"]);
        let units = subject("有没有金属器？", &no_dictionary);
        assert_eq!(units[0].word, "金属器");
        assert!(units[0].alternatives.contains(&vec!["metal".to_string()]));
        // A list of kinds: one part each; words of one kind share theirs.
        let parts = |q: &str| -> Vec<usize> {
            subject(q, &no_dictionary)
                .into_iter()
                .map(|u| u.part)
                .collect()
        };
        assert_eq!(parts("有没有绘画与素描的展品？"), [0, 1]);
        assert_eq!(parts("Do you have porcelain and jade?"), [0, 1]);
        assert_eq!(parts("有没有陶瓷、玉器和漆器？"), [0, 1, 2]);
        assert_eq!(parts("Do you have any Chinese porcelain?"), [0, 0]);
        assert_eq!(parts("Do you have, like, swords or daggers?"), [0, 1]);
        // Nor is a department word carved out of a longer word: 石器时代 is the Stone Age.
        let units = subject("有没有石器时代的东西？", &no_dictionary);
        assert!(units.iter().all(|u| u.word != "石器"), "{units:?}");
        // 玻璃器皿 (glassware) is a word of the list of its own, not 玻璃器 and 皿.
        let units = subject("有没有玻璃器皿？", &no_dictionary);
        assert_eq!(units[0].word, "玻璃器皿");
        assert!(
            units[0]
                .alternatives
                .contains(&vec!["glasswar".to_string()])
        );
        // One character is not carved out of another word (代表 is not 表, watches).
        let units = subject("有没有代表性的作品？", &no_dictionary);
        assert!(units.iter().all(|u| u.word != "表"), "{units:?}");
    }

    #[test]
    fn department_names_in_chinese() {
        for (en, zh) in [
            ("Painting & Drawing", Some("绘画与素描")),
            ("Arms & Armor", Some("兵器与盔甲")),
            ("Timepieces, Clocks & Watches", Some("计时器、钟与表")),
            ("Gold, Silver & Jewelry", Some("金器、银器与珠宝")),
            ("Manuscripts & Rare Books", Some("手稿与善本")),
            ("Ceramics", Some("陶瓷")),
            ("Stained & Painted Glass", Some("彩色玻璃与彩绘玻璃")),
            ("Niello", None),
            ("Resin, Wax & Composite", None),
            ("藝術品／文獻", None),
        ] {
            assert_eq!(department_in_chinese(en).as_deref(), zh, "{en}");
        }
    }
    #[test]
    fn the_department_is_the_part_after_the_institution() {
        assert_eq!(
            department("Walters Art Museum, Gold, Silver & Jewelry"),
            Some("Gold, Silver & Jewelry")
        );
        assert_eq!(
            department("國立歷史博物館 National Museum of History (Taipei)；藝術品／文獻"),
            Some("藝術品／文獻")
        );
        assert_eq!(department("Asian Art"), Some("Asian Art"));
        assert_eq!(department("  "), None);
    }

    #[test]
    fn the_medium_head_is_the_last_word_of_its_first_phrase() {
        let h = |m: &str| medium_head(m);
        assert_eq!(
            h("porcelain with underglaze blue").as_deref(),
            Some("porcelain")
        );
        assert_eq!(h("Cast bronze").as_deref(), Some("bronz"));
        assert_eq!(h("oil on canvas").as_deref(), Some("oil"));
        assert_eq!(h("ink and pigments on laid paper").as_deref(), Some("ink"));
        assert_eq!(h("silver, gold").as_deref(), Some("silver"));
        assert_eq!(h(""), None);
        assert_eq!(h("紙本設色"), None);
    }

    #[test]
    fn markers_name_department_words_and_the_medium_head() {
        assert_eq!(
            markers(
                "Walters Art Museum, Arms & Armor",
                "steel and leather",
                "Sallet"
            ),
            "#d:arm #d:armor #m:steel"
        );
        assert_eq!(markers("Gallery 12", "", ""), "#d:galleri");
        assert!(markers("國立歷史博物館；藝術品／文獻", "", "").contains("#d:文献"));
        assert_eq!(markers("", "", ""), "");
        assert!(
            markers("Walters Art Museum, Ceramics", "porcelain", "Vase")
                .split(' ')
                .all(is_marker)
        );
    }

    #[test]
    fn a_chinese_title_names_its_kind_at_the_end() {
        let w = |t: &str| title_word(t);
        assert_eq!(w("北魏法生造像記拓本").as_deref(), Some("拓本"));
        assert_eq!(w("荷蘭瓷器資料(打字稿)").as_deref(), Some("资料"));
        assert_eq!(
            w("詹天佑自北平致諾斯洛普夫人函(1906.10.24)"),
            None,
            "one character"
        );
        assert_eq!(w("Box with Badger and Moon"), None);
        assert_eq!(w("Seal 印章 No. 3"), None, "does not end in Chinese");
        let m = markers("", "", "唐故史氏趙夫人墓誌銘");
        assert!(m.contains("#t:墓志铭"), "{m}");
    }

    #[test]
    fn a_records_origin_is_its_period_fields_words() {
        assert_eq!(
            origin_markers("Japanese; late Edo; place of origin: Japan"),
            "#o:japanes #o:edo #o:japan"
        );
        assert_eq!(
            origin_markers("Chinese; Tang [T'ang] Dynasty; place of origin: China"),
            "#o:chines #o:tang #o:china"
        );
        assert_eq!(origin_markers("東漢"), "#o:东汉 #o:china #o:chines");
        assert_eq!(
            origin_markers("明治"),
            "#o:明治",
            "Japan's era, not a dynasty"
        );
        assert_eq!(origin_markers("18th century"), "");
        assert_eq!(origin_markers(""), "");
        assert!(origin_markers("Egyptian").split(' ').all(is_marker));
    }

    #[test]
    fn a_chinese_origin_word_is_also_read_as_its_place_or_dynasty() {
        let senses: Vec<Box<str>> = vec!["egypt".into()];
        let tang: Vec<Box<str>> = vec!["tang".into(), "dynasti".into()];
        let south_korea: Vec<Box<str>> = vec!["south".into(), "korea".into()];
        let south_china: Vec<Box<str>> = vec!["southern".into(), "china".into()];
        let dict = |w: &str| -> Vec<&[Box<str>]> {
            match w {
                "埃及" => vec![&senses[..]],
                "唐" => vec![&tang[..]],
                "韩国" => vec![&south_korea[..]],
                "华南" => vec![&south_china[..]],
                _ => Vec::new(),
            }
        };
        let unit = |w: &str| Unit {
            word: w.to_string(),
            alternatives: Vec::new(),
            part: 0,
            place: false,
        };
        let alts = origin_unit(&unit("古埃及"), &dict).alternatives;
        assert!(alts.contains(&vec!["埃及".to_string()]), "{alts:?}");
        assert!(alts.contains(&vec!["egypt".to_string()]), "{alts:?}");
        // A country the dictionary names with a compass word ("South Korea") is the name's:
        // the records say "Korean". A region ("southern China") is not China's.
        let alts = origin_unit(&unit("韩国"), &dict).alternatives;
        assert!(alts.contains(&vec!["korean".to_string()]), "{alts:?}");
        let alts = origin_unit(&unit("华南"), &dict).alternatives;
        assert!(!alts.contains(&vec!["chinese".to_string()]), "{alts:?}");
        let alts = origin_unit(&unit("唐朝"), &dict).alternatives;
        assert!(alts.contains(&vec!["唐".to_string()]), "{alts:?}");
        assert!(alts.contains(&vec!["tang".to_string(), "dynasti".to_string()]));
        // An English word keeps its own token and also stands for its people's adjectives, as
        // index tokens ("Korean; Joseon; place of origin: Taehan Min'guk").
        let mut en = unit("korea");
        en.alternatives = vec![vec!["korea".into()]];
        let alts = origin_unit(&en, &dict).alternatives;
        assert_eq!(alts[0], ["korea"]);
        assert!(alts.contains(&vec!["korean".to_string()]), "{alts:?}");
        en.word = "japan".into();
        let alts = origin_unit(&en, &dict).alternatives;
        assert!(alts.contains(&vec!["japanes".to_string()]), "{alts:?}");
        for (country, adjective) in [
            ("italy", "italian"),
            ("egypt", "egyptian"),
            ("china", "chinese"),
            ("mexico", "mexican"),
            ("turkey", "turkish"),
            ("germany", "german"),
        ] {
            assert!(
                demonyms(country).iter().any(|d| d == adjective),
                "{country}"
            );
        }
        // Three letters are no country name read so ("art").
        let mut short = unit("art");
        short.alternatives = vec![vec!["art".into()]];
        assert_eq!(origin_unit(&short, &dict), short);
    }

    fn no_dictionary(_: &str) -> Vec<&'static [Box<str>]> {
        Vec::new()
    }

    #[test]
    fn a_visitors_word_for_a_kind_also_names_the_departments_word() {
        let units = subject("Do you have Korean pottery?", &no_dictionary);
        let pottery = units.iter().find(|u| u.word == "pottery").expect("pottery");
        assert!(
            pottery.alternatives.contains(&vec!["ceram".to_string()]),
            "{pottery:?}"
        );
        let korean = units.iter().find(|u| u.word == "korean").expect("korean");
        assert_eq!(korean.alternatives.len(), 1, "{korean:?}");
        // A Chinese word whose department word is the visitor's (陶器: pottery).
        let units = subject("有没有陶器？", &no_dictionary);
        let taoqi = units.iter().find(|u| u.word == "陶器").expect("陶器");
        assert!(
            taoqi.alternatives.contains(&vec!["ceram".to_string()]),
            "{taoqi:?}"
        );
    }

    #[test]
    fn the_subject_of_a_browse_question_is_its_content_words() {
        let words = |q: &str| -> Vec<String> {
            subject(q, &no_dictionary)
                .into_iter()
                .map(|u| u.word)
                .collect()
        };
        assert_eq!(words("Do you have any ceramics?"), ["ceramics"]);
        assert_eq!(
            words("What kinds of objects do you have?"),
            Vec::<String>::new()
        );
        assert_eq!(words("Are there any rare books?"), ["rare", "books"]);
        assert_eq!(words("有没有青铜器？"), ["青铜器"]);
        assert_eq!(words("Hi, does the museum hold swords?"), ["swords"]);
        assert_eq!(words("请问贵馆有玉器吗？"), ["玉器"]);
        assert_eq!(words("你们馆里有瓷器么"), ["瓷器"]);
        assert_eq!(words("你们有古代的兵器吗？"), ["兵器"]);
        assert_eq!(
            words("Do you have any famous old paintings?"),
            ["paintings"]
        );
        assert_eq!(words("你们这里有什么瓷器可以看？"), ["瓷器"]);
        assert_eq!(words("有没有来自日本的瓷器？"), ["日本", "瓷器"]);
        assert_eq!(words("有没有产自日本的陶瓷？"), ["日本", "陶瓷"]);
        // A general word for exhibits kept on the kind's word by the segmentation.
        assert_eq!(words("你们有哪些书画作品？"), ["书画"]);
        let u = &subject("What paintings do you have?", &no_dictionary)[0];
        assert_eq!(u.alternatives, vec![vec!["paint".to_string()]]);
        // Where the things come from narrows them and names no kind ("china" is porcelain),
        // also by its people's word as origin fields write it.
        let units = subject("Do you have paintings from China?", &no_dictionary);
        assert_eq!(
            units
                .iter()
                .map(|u| (u.word.as_str(), u.place))
                .collect::<Vec<_>>(),
            [("paintings", false), ("china", true)]
        );
        assert!(units[1].alternatives.contains(&vec!["chines".to_string()]));
        let units = subject("Any vases from the Qing dynasty?", &no_dictionary);
        assert_eq!(
            units.iter().map(|u| u.place).collect::<Vec<_>>(),
            [false, true, false]
        );
    }

    #[test]
    fn a_chinese_word_brings_its_dictionary_senses() {
        let senses: Vec<Box<[Box<str>]>> =
            vec![vec!["bronz".into(), "implement".into()].into_boxed_slice()];
        let english = |w: &str| -> Vec<&[Box<str>]> {
            if w == "青铜器" {
                senses.iter().map(|s| &s[..]).collect()
            } else {
                Vec::new()
            }
        };
        let u = &subject("有没有青铜器？", &english)[0];
        assert_eq!(u.alternatives[0], ["bronz", "implement"]);
        assert!(u.alternatives[1].contains(&"青铜".to_string()));
    }

    #[test]
    fn kinds_resolve_to_the_union_of_senses_and_the_intersection_of_words() {
        let unit = |w: &str, alts: &[&[&str]]| Unit {
            part: 0,
            place: false,
            word: w.into(),
            alternatives: alts
                .iter()
                .map(|a| a.iter().map(|t| t.to_string()).collect())
                .collect(),
        };
        // pk → length; ceramics 1, 2, 3; porcelain 2, 3, 4; book 5, 6; rare 6, 7.
        let mut members = |t: &str| -> Result<Vec<Member>, ()> {
            Ok(match t {
                "ceram" => vec![(1, 10), (2, 30), (3, 20)],
                "porcelain" => vec![(2, 30), (3, 20), (4, 5)],
                "book" => vec![(5, 1), (6, 2)],
                "rare" => vec![(6, 2), (7, 3)],
                _ => vec![],
            })
        };
        // Rows whose text holds a word: japanese 1, 3, 9; "old" 9.
        let mut words = |t: &str| -> Result<Vec<Member>, ()> {
            Ok(match t {
                "japanes" => vec![(1, 10), (3, 20), (9, 1)],
                "old" => vec![(9, 1)],
                "#o:清" => vec![(3, 20), (9, 1)],
                _ => vec![],
            })
        };
        let r = resolve(&[unit("ceramics", &[&["ceram"]])], &mut members, &mut words)
            .unwrap()
            .unwrap();
        assert_eq!(r.members, [(2, 30), (3, 20), (1, 10)], "longest first");
        assert_eq!(r.named, ["ceram"]);
        // A Chinese word: senses are alternatives; a generic head after the kind word keeps it
        // the kind ("porcelain implement").
        let r = resolve(
            &[unit("瓷器", &[&["china"], &["porcelain", "implement"]])],
            &mut members,
            &mut words,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.members.len(), 3);
        // A sense whose kind word modifies some other noun names that noun, not the kind:
        // "rare book inscriptions" is no book (as "oracle bone inscriptions" for 甲骨文 is no
        // bone), and a word no record holds narrows nothing.
        assert!(
            resolve(
                &[unit("甲骨文", &[&["rare", "book", "inscript"]])],
                &mut members,
                &mut words
            )
            .unwrap()
            .is_none()
        );
        let r = resolve(
            &[unit("善本", &[&["rare", "book", "inscript"], &["book"]])],
            &mut members,
            &mut words,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            r.members,
            [(6, 2), (5, 1)],
            "only the sense that names a kind"
        );
        // Two words: both must hold. "rare books" leaves one row: no listing.
        assert!(
            resolve(
                &[unit("rare", &[&["rare"]]), unit("books", &[&["book"]])],
                &mut members,
                &mut words
            )
            .unwrap()
            .is_none()
        );
        let r = resolve(
            &[
                unit("ceramics", &[&["ceram"]]),
                unit("porcelain", &[&["porcelain"]]),
            ],
            &mut members,
            &mut words,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.members, [(2, 30), (3, 20)]);
        // A word that names no kind narrows the kind to the rows that hold it.
        let r = resolve(
            &[
                unit("japanese", &[&["japanes"]]),
                unit("ceramics", &[&["ceram"]]),
            ],
            &mut members,
            &mut words,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.members, [(3, 20), (1, 10)]);
        assert_eq!(
            (r.named, r.qualifiers),
            (vec!["ceram".to_string()], vec!["japanese".to_string()])
        );
        // ... and gives no listing when it leaves fewer than two, is found nowhere, or when
        // no word names a kind (the question is searched as usual).
        for units in [
            vec![unit("old", &[&["old"]]), unit("ceramics", &[&["ceram"]])],
            vec![unit("zzz", &[&["zzz"]]), unit("ceramics", &[&["ceram"]])],
            vec![unit("japanese", &[&["japanes"]])],
        ] {
            assert!(resolve(&units, &mut members, &mut words).unwrap().is_none());
        }
        assert!(resolve(&[], &mut members, &mut words).unwrap().is_none());
        // A period may leave one ("Qing jade"): as its period field, or words of it.
        let r = resolve(
            &[
                unit("清代", &[&["清代"], &["#o:清"]]),
                unit("ceramics", &[&["ceram"]]),
            ],
            &mut members,
            &mut words,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (r.members, r.qualifiers),
            (vec![(3, 20)], vec!["清代".to_string()])
        );
        assert!(is_period(&unit("清代", &[&["#o:清"]])));
        assert!(!is_period(&unit("old", &[&["old"]])));
        // A list of kinds is their union ("ceramics and books"), each kind's rows kept apart
        // for the listing.
        let r = resolve(
            &[
                unit("ceramics", &[&["ceram"]]),
                Unit {
                    part: 1,
                    ..unit("books", &[&["book"]])
                },
            ],
            &mut members,
            &mut words,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.members, [(2, 30), (3, 20), (1, 10), (6, 2), (5, 1)]);
        assert_eq!(r.parts, [vec![2, 3, 1], vec![6, 5]]);
        assert_eq!(r.named, ["ceram", "book"]);
        // A part narrowed by a word is not a kind of its own: the whole question is one kind
        // (japanese ∩ ceramics ∩ books: nothing).
        assert!(
            resolve(
                &[
                    unit("japanese", &[&["japanes"]]),
                    unit("ceramics", &[&["ceram"]]),
                    Unit {
                        part: 1,
                        ..unit("books", &[&["book"]])
                    },
                ],
                &mut members,
                &mut words,
            )
            .unwrap()
            .is_none()
        );
    }

    #[test]
    fn departments_add_up_across_institutions_largest_first() {
        let g = |s: &str, n: i64| (s.to_string(), n);
        assert_eq!(
            departments(&[
                g("Walters Art Museum, Ceramics", 3),
                g("Other Museum, Ceramics", 2),
                g("Walters Art Museum, Prints", 4),
                g("", 9),
            ]),
            [("Ceramics".to_string(), 5), ("Prints".to_string(), 4)]
        );
    }

    #[test]
    fn a_label_lists_departments_then_media_once() {
        assert_eq!(
            label(&["Ceramics", "Ceramics"], &["porcelain".into()]),
            "Ceramics / porcelain"
        );
        assert_eq!(label(&[], &["bronze".into()]), "bronze");
        assert_eq!(label(&["Prints"], &["print".into()]), "Prints");
    }
}

//! What a voice that cannot read Chinese, Japanese or Korean says instead (`[tts] reads_cjk =
//! false`). Pure.
//!
//! An English-only voice (piper `en_US-*`, flite) spells each CJK character as "Chinese letter",
//! so an English answer quoting a Chinese record ("About Pu Ru, our record of “溥儒” is in
//! Chinese only: 溥儒(1896－1963)，字心畬…") was heard as a string of "Chinese letter". The text
//! the visitor reads is unchanged; only the piece sent to the voice is rewritten:
//! - a reply whose first piece is mostly CJK (more CJK characters than twice its Latin words) is
//!   a Chinese reply and is not spoken at all; in an English reply, a piece with no Latin letter
//!   (a quoted Chinese sentence) is not spoken either. [`LatinVoice`] keeps that per reply and
//!   counts what it left out, so the reply's final frame can say so;
//! - otherwise each run of CJK text (with the digits, spaces and punctuation inside it) is said
//!   as a stand-in: [`StandIns::title`] when the run is quoted or in title marks (“…”, 《…》,
//!   「…」), else [`StandIns::text`].
//!
//! For every voice, [`said_forms`] writes out a record's dating ("ca. 1500-1530" is said
//! "circa 1500 to 1530"; piper read "ca." as "ka").

/// The phrases said in place of CJK text, from `[tts] cjk_title_as` and `cjk_text_as`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandIns {
    /// Said for a quoted CJK run ("a title in Chinese").
    pub title: String,
    /// Said for any other CJK run ("a passage in Chinese").
    pub text: String,
}

/// What a voice that reads no CJK is given for one piece.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spoken {
    /// The piece as it should be said (unchanged when it holds no CJK).
    Say(String),
    /// A piece in CJK: not spoken.
    Skip,
}

/// Whether `c` is CJK text ([`crate::retrieval::text::is_cjk`]) or CJK punctuation
/// (ideographic space and marks, full-width forms).
fn is_cjk_mark(c: char) -> bool {
    matches!(c as u32, 0x3000..=0x303F | 0xFF00..=0xFFEF)
}

/// Characters that may sit inside a CJK run without ending it ("1896－1963", "(打字稿)").
fn joins_run(c: char) -> bool {
    crate::retrieval::text::is_cjk(c)
        || is_cjk_mark(c)
        || c.is_ascii_digit()
        || c.is_whitespace()
        || matches!(c, '(' | ')' | '-' | '/' | '.' | ',' | ':' | '·')
}

const OPENERS: &[char] = &['“', '"', '‘', '\'', '《', '「', '『', '〈', '【'];
const CLOSERS: &[char] = &['”', '"', '’', '\'', '》', '」', '』', '〉', '】'];

/// The piece as a voice that reads no CJK should get it (see the module docs).
pub fn for_latin_voice(piece: &str, stand_ins: &StandIns) -> Spoken {
    let cjk = piece
        .chars()
        .filter(|&c| crate::retrieval::text::is_cjk(c))
        .count();
    if cjk == 0 {
        return Spoken::Say(piece.to_string());
    }
    if !piece.chars().any(|c| c.is_ascii_alphabetic()) {
        return Spoken::Skip;
    }
    let chars: Vec<char> = piece.chars().collect();
    let mut out = String::with_capacity(piece.len());
    let mut i = 0;
    while i < chars.len() {
        if !crate::retrieval::text::is_cjk(chars[i]) {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // The run: from this CJK character over everything that joins a run, then back to its
        // last CJK character or CJK mark (a trailing " (" belongs to the English after it).
        let mut end = i;
        let mut last = i;
        while end < chars.len() && joins_run(chars[end]) {
            if crate::retrieval::text::is_cjk(chars[end]) || is_cjk_mark(chars[end]) {
                last = end;
            }
            end += 1;
        }
        let mut run_end = last + 1;
        // A bracket closed inside the run keeps its closer ("(打字稿)").
        if chars.get(run_end) == Some(&')') && chars[i..run_end].contains(&'(') {
            run_end += 1;
        }
        // Quoted: the character before the run opens a quote and the one after closes it. A
        // title mark opening the run is part of it (《…》 inside English).
        let before = out.trim_end().chars().last();
        let opens = chars[i..run_end]
            .first()
            .is_some_and(|c| OPENERS.contains(c))
            || before.is_some_and(|c| OPENERS.contains(&c));
        let closes = chars.get(run_end).is_some_and(|c| CLOSERS.contains(c))
            || chars[i..run_end]
                .last()
                .is_some_and(|c| CLOSERS.contains(c));
        let phrase = if opens && closes {
            &stand_ins.title
        } else {
            // A run glossed in English right after it ("張大千 (Zhang Daqian)") is said as its
            // gloss.
            if let Some((gloss, after)) = gloss_after(&chars, run_end) {
                out.push_str(&gloss);
                i = after;
                continue;
            }
            &stand_ins.text
        };
        // Full-width title marks around the run become plain quotes.
        if out.ends_with(['《', '「', '『', '〈', '【']) {
            out.pop();
            out.push('“');
            out.push_str(phrase);
            out.push('”');
            if chars
                .get(run_end)
                .is_some_and(|c| matches!(c, '》' | '」' | '』' | '〉' | '】'))
            {
                run_end += 1;
            }
        } else {
            out.push_str(phrase);
        }
        i = run_end;
    }
    // Runs ending in a CJK full stop or comma leave the English sentence without its mark.
    Spoken::Say(out.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether a piece is mostly CJK: more CJK characters outside quotes (“…”, a quoted title of an
/// English sentence) than twice its Latin words (a Chinese character is a syllable, an English
/// word one or two).
pub fn is_mostly_cjk(piece: &str) -> bool {
    let mut quoted = false;
    let mut cjk = 0;
    for c in piece.chars() {
        match c {
            '“' => quoted = true,
            '”' => quoted = false,
            c if !quoted && crate::retrieval::text::is_cjk(c) => cjk += 1,
            _ => {}
        }
    }
    let words = piece
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .count();
    cjk > 2 * words
}

/// The pieces of one reply for a voice that reads no CJK (see the module docs).
#[derive(Debug)]
pub struct LatinVoice {
    stand_ins: StandIns,
    /// Decided by the reply's first piece.
    reply_in_cjk: Option<bool>,
    /// Pieces left out.
    pub skipped: usize,
}

impl LatinVoice {
    pub fn new(stand_ins: StandIns) -> Self {
        LatinVoice {
            stand_ins,
            reply_in_cjk: None,
            skipped: 0,
        }
    }

    /// What the voice says for the reply's next piece; `None` when it says nothing.
    pub fn piece(&mut self, piece: String) -> Option<String> {
        let in_cjk = *self
            .reply_in_cjk
            .get_or_insert_with(|| is_mostly_cjk(&piece));
        let spoken = if in_cjk {
            Spoken::Skip
        } else {
            for_latin_voice(&piece, &self.stand_ins)
        };
        match spoken {
            Spoken::Say(s) => Some(s),
            Spoken::Skip => {
                self.skipped += 1;
                None
            }
        }
    }
}

/// An English gloss in brackets right after a CJK run (" (Zhang Daqian)", "（porcelain）"):
/// its text and the index after its closing bracket.
fn gloss_after(chars: &[char], from: usize) -> Option<(String, usize)> {
    let mut i = from;
    while chars.get(i).is_some_and(|c| *c == ' ') {
        i += 1;
    }
    if !matches!(chars.get(i), Some('(' | '（')) || !chars.get(i + 1)?.is_ascii_alphabetic() {
        return None;
    }
    let close = i + chars[i..].iter().position(|c| matches!(c, ')' | '）'))?;
    let gloss: String = chars[i + 1..close].iter().collect();
    (!gloss.chars().any(crate::retrieval::text::is_cjk)).then(|| (gloss, close + 1))
}

/// A piece of an English reply as a voice should say it: a record's dating abbreviations and
/// ranges written out. Heard through piper and transcribed back by whisper, "ca. 1500-1530" was
/// "Ka, 1500-1530" and "Gah"; "ca." and "c." before a number are said "circa", and a hyphen or
/// en dash between two years (three or four digits, then two to four) "to" ("1510 to 1530").
/// A piece with CJK text is left as it is (a Chinese voice reads its own numbers).
pub fn said_forms(piece: &str) -> String {
    if piece.chars().any(crate::retrieval::text::is_cjk) {
        return piece.to_string();
    }
    let chars: Vec<char> = piece.chars().collect();
    let mut out = String::with_capacity(piece.len() + 8);
    let mut i = 0;
    let starts_word = |i: usize| i == 0 || !chars[i - 1].is_alphanumeric();
    let digit_after = |mut j: usize| {
        while chars.get(j) == Some(&' ') {
            j += 1;
        }
        chars.get(j).is_some_and(char::is_ascii_digit).then_some(j)
    };
    while i < chars.len() {
        // "ca. 1500", "c. 1500", "ca 1500" → "circa 1500".
        if starts_word(i) {
            let at = |k: usize| chars.get(i + k).map(char::to_ascii_lowercase);
            let abbr = match (at(0), at(1), at(2)) {
                (Some('c'), Some('a'), Some('.')) => Some(3),
                (Some('c'), Some('a' | '.'), _) => Some(2),
                _ => None,
            };
            if let Some(j) = abbr.and_then(|n| digit_after(i + n)) {
                out.push_str("circa ");
                i = j;
                continue;
            }
        }
        // A year range: four digits, a hyphen or en dash, a later year in two or four digits.
        if chars[i].is_ascii_digit()
            && starts_word(i)
            && (i == 0 || !matches!(chars[i - 1], '-' | '+'))
        {
            let a_end = i + chars[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let dash = a_end;
            if a_end - i == 4 && matches!(chars.get(dash), Some('-' | '–')) {
                let b_start = dash + 1;
                let b_end = b_start
                    + chars[b_start..]
                        .iter()
                        .take_while(|c| c.is_ascii_digit())
                        .count();
                let ends = chars
                    .get(b_end)
                    .is_none_or(|c| !c.is_alphanumeric() && *c != '-');
                let year = |from: usize, to: usize| -> u32 {
                    chars[from..to]
                        .iter()
                        .collect::<String>()
                        .parse()
                        .unwrap_or(0)
                };
                let a = year(i, a_end);
                let b = match b_end - b_start {
                    2 => a / 100 * 100 + year(b_start, b_end),
                    4 => year(b_start, b_end),
                    _ => 0,
                };
                if ends && (1000..=2100).contains(&a) && b > a && b <= 2100 {
                    out.extend(&chars[i..a_end]);
                    out.push_str(" to ");
                    out.extend(&chars[b_start..b_end]);
                    i = b_end;
                    continue;
                }
            }
            out.extend(&chars[i..a_end]);
            i = a_end;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_said_as_words() {
        assert_eq!(
            said_forms("“Dish” is Venetian work. It is dated ca. 1500-1530."),
            "“Dish” is Venetian work. It is dated circa 1500 to 1530."
        );
        assert_eq!(
            said_forms("(Venetian, c. 1510–30)"),
            "(Venetian, circa 1510 to 30)"
        );
        assert_eq!(
            said_forms("Mary Cassatt (American, 1844-1926)"),
            "Mary Cassatt (American, 1844 to 1926)"
        );
        // Not a date range: phone numbers, a catalogue number, an earlier second number, a word
        // ending in "ca".
        for keep in [
            "Call 555-1234 or +1-2025-2030, ask Rebecca 12",
            "W.123-45678 and 12-14, gallery 1200-1100",
            "Open 0930-1700",
        ] {
            assert_eq!(said_forms(keep), keep);
        }
        // Chinese text keeps its own numbers.
        assert_eq!(said_forms("约1500-1530年"), "约1500-1530年");
    }

    fn say(piece: &str) -> Spoken {
        for_latin_voice(
            piece,
            &StandIns {
                title: "a title in Chinese".into(),
                text: "a passage in Chinese".into(),
            },
        )
    }

    fn said(s: &str) -> Spoken {
        Spoken::Say(s.into())
    }

    #[test]
    fn english_is_said_as_written() {
        assert_eq!(
            say("The Peach Bloom Vase (1662-1722)."),
            said("The Peach Bloom Vase (1662-1722).")
        );
    }

    #[test]
    fn a_quoted_chinese_title_is_said_as_a_title() {
        assert_eq!(
            say("Our collection holds these: “陳澄波照片” (1930) and “Vase” (1700)."),
            said("Our collection holds these: “a title in Chinese” (1930) and “Vase” (1700).")
        );
        assert_eq!(
            say("It is listed as 《荷蘭瓷器資料(打字稿)》 in the catalogue."),
            said("It is listed as “a title in Chinese” in the catalogue.")
        );
    }

    #[test]
    fn chinese_text_inside_english_is_said_as_a_passage() {
        assert_eq!(
            say("About Pu Ru, our record of “溥儒” is in Chinese only: 溥儒(1896－1963)，字心畬，"),
            said(
                "About Pu Ru, our record of “a title in Chinese” is in Chinese only: a passage in Chinese"
            )
        );
        assert_eq!(
            say("Made by 張大千 (Zhang Daqian) in 1950."),
            said("Made by Zhang Daqian in 1950.")
        );
        assert_eq!(
            say("Made by 張大千 in 1950."),
            said("Made by a passage in Chinese in 1950.")
        );
    }

    #[test]
    fn a_reply_that_opens_in_chinese_is_not_spoken() {
        let mut v = LatinVoice::new(StandIns {
            title: "a title in Chinese".into(),
            text: "a passage in Chinese".into(),
        });
        assert_eq!(v.piece("馆藏中有53件瓷器（porcelain），".into()), None);
        assert_eq!(
            v.piece("例如：《Temple Incense Burner with Taoist God Zhenwu》（1604）。".into()),
            None
        );
        assert_eq!(v.skipped, 2);
        let mut v = LatinVoice::new(v.stand_ins.clone());
        assert_eq!(
            v.piece("About Pu Ru, our record of “溥儒” is in Chinese only:".into()),
            Some("About Pu Ru, our record of “a title in Chinese” is in Chinese only:".into())
        );
        assert_eq!(v.piece("此件為其中之一。".into()), None);
        assert_eq!(v.piece("Ask me more.".into()), Some("Ask me more.".into()));
        assert_eq!(v.skipped, 1);
    }

    #[test]
    fn a_chinese_piece_is_not_spoken_and_a_list_of_titles_is() {
        assert_eq!(say("溥儒，字心畬。"), Spoken::Skip);
        assert_eq!(
            say("“陳澄波照片” (1930) and “Vase” (1700)."),
            said("“a title in Chinese” (1930) and “Vase” (1700).")
        );
        assert!(is_mostly_cjk("馆藏中有53件瓷器（porcelain），例如："));
        assert!(!is_mostly_cjk("“陳澄波照片” (1930) and “Vase” (1700)."));
    }
}

//! Cuts a streamed reply into speakable pieces for TTS, as the text arrives.
//!
//! Pieces end at sentence punctuation (Chinese `。！？；…` and English `. ! ? ;` followed by a
//! space, or a newline). The first piece may also end at a clause mark (`，、：` or `, :` followed
//! by a space) once it has [`SplitterConfig::first_min_chars`] characters, so the first audio
//! comes early; later pieces end at clause marks only once they are long
//! ([`SplitterConfig::clause_min_chars`]). A piece with no punctuation at all is cut at
//! [`SplitterConfig::max_chars`] (at a space when there is one).
//!
//! What is not spoken: markdown markup (emphasis, headings, list bullets, quotes, tables, inline
//! code ticks), fenced code blocks entirely, link targets (`[text](url)` speaks `text`) and bare
//! URLs. A piece left with nothing to say is dropped.

/// Tuning of [`Splitter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitterConfig {
    /// The first piece may end at a clause mark once it has this many characters.
    pub first_min_chars: usize,
    /// Later pieces end at a clause mark once they have this many characters.
    pub clause_min_chars: usize,
    /// A piece without punctuation is cut at this many characters.
    pub max_chars: usize,
}

impl Default for SplitterConfig {
    fn default() -> Self {
        SplitterConfig {
            first_min_chars: 6,
            clause_min_chars: 24,
            max_chars: 120,
        }
    }
}

#[derive(Debug)]
pub struct Splitter {
    cfg: SplitterConfig,
    buf: String,
    /// Pieces produced so far.
    emitted: usize,
    /// Inside a fenced code block (```), which is never spoken.
    in_code: bool,
}

const STRONG: &[char] = &['。', '！', '？', '；', '…', '!', '?', ';', '\n'];
const CLAUSE_CJK: &[char] = &['，', '、', '：'];
const CLAUSE_ASCII: &[char] = &[',', ':'];
const CLOSERS: &[char] = &['”', '’', '"', '\'', '）', ')', '」', '』', '》', '】'];

impl Splitter {
    pub fn new(cfg: SplitterConfig) -> Self {
        Splitter {
            cfg,
            buf: String::new(),
            emitted: 0,
            in_code: false,
        }
    }

    /// Adds streamed text; returns the pieces it completed, in order.
    pub fn push(&mut self, delta: &str) -> Vec<String> {
        self.buf.push_str(delta);
        let mut out = Vec::new();
        while let Some(cut) = self.find_cut() {
            let rest = self.buf.split_off(cut);
            let piece = std::mem::replace(&mut self.buf, rest);
            self.emit(&piece, &mut out);
        }
        out
    }

    /// The end of the reply: whatever is left, as a last piece.
    pub fn finish(&mut self) -> Vec<String> {
        let piece = std::mem::take(&mut self.buf);
        let mut out = Vec::new();
        self.emit(&piece, &mut out);
        out
    }

    fn emit(&mut self, piece: &str, out: &mut Vec<String>) {
        let spoken = self.clean(piece);
        if spoken.chars().any(char::is_alphanumeric) {
            self.emitted += 1;
            out.push(spoken);
        }
    }

    /// Byte offset where the next piece ends, if the buffer holds a complete one.
    fn find_cut(&self) -> Option<usize> {
        let clause_min = if self.emitted == 0 {
            self.cfg.first_min_chars
        } else {
            self.cfg.clause_min_chars
        };
        let mut chars = self.buf.char_indices().peekable();
        let mut count = 0;
        let mut last_space = None;
        // Inside a URL or a markdown link target: punctuation there ends nothing.
        let mut in_url = false;
        let mut in_target = false;
        let mut prev = ' ';
        while let Some((i, c)) = chars.next() {
            count += 1;
            let next = chars.peek().map(|&(_, n)| n);
            let end = i + c.len_utf8();
            let tail = &self.buf[i..];
            if !in_url
                && (tail.starts_with("http://")
                    || tail.starts_with("https://")
                    || tail.starts_with("www."))
            {
                in_url = true;
            }
            if in_url && (c.is_whitespace() || !c.is_ascii() || c == ')') {
                in_url = false;
            }
            if c == '(' && prev == ']' {
                in_target = true;
            } else if c == ')' {
                in_target = false;
            }
            prev = c;
            let cut = if in_url || in_target {
                false
            } else if STRONG.contains(&c) {
                true
            } else if c == '.' {
                // "3.14", "e.g.x", a URL or a '.' at the end of what has arrived: not yet. Nor
                // after an abbreviation ("ca. 1500", "St. George"): the voice would say "ca" as
                // a word at the end of one piece.
                next.is_some_and(char::is_whitespace) && !ends_abbreviation(&self.buf[..i])
            } else if CLAUSE_CJK.contains(&c) {
                count >= clause_min
            } else if CLAUSE_ASCII.contains(&c) {
                count >= clause_min && next.is_some_and(char::is_whitespace)
            } else {
                false
            };
            if cut {
                // Keep closing quotes and brackets with their sentence.
                let base = end;
                let mut end = end;
                for (j, n) in self.buf[base..].char_indices() {
                    if CLOSERS.contains(&n) {
                        end = base + j + n.len_utf8();
                    } else {
                        break;
                    }
                }
                return Some(end);
            }
            if c.is_whitespace() {
                last_space = Some(end);
            }
            if count >= self.cfg.max_chars {
                return Some(last_space.filter(|&s| s > 0).unwrap_or(end));
            }
        }
        None
    }

    /// The words of a piece to speak: markup, code and URLs removed, whitespace collapsed.
    fn clean(&mut self, piece: &str) -> String {
        let mut kept = String::with_capacity(piece.len());
        // Fenced code blocks are dropped whole, across pieces.
        let mut rest = piece;
        loop {
            match rest.find("```") {
                Some(at) => {
                    if !self.in_code {
                        kept.push_str(&rest[..at]);
                    }
                    self.in_code = !self.in_code;
                    rest = &rest[at + 3..];
                }
                None => {
                    if !self.in_code {
                        kept.push_str(rest);
                    }
                    break;
                }
            }
        }
        clean_markup(&kept)
    }
}

/// Removes markdown markup and URLs from a piece of text (one or more lines).
pub fn clean_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split('\n') {
        let mut l = line.trim_start();
        // Headings, quotes, list bullets, numbered lists.
        l = l
            .trim_start_matches('#')
            .trim_start_matches('>')
            .trim_start();
        for bullet in ["- ", "* ", "+ ", "• "] {
            if let Some(s) = l.strip_prefix(bullet) {
                l = s;
            }
        }
        let digits = l.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && l[digits..].starts_with(". ") {
            l = &l[digits + 2..];
        }
        let mut chars = l.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let tail = &l[i..];
            if tail.starts_with("http://")
                || tail.starts_with("https://")
                || tail.starts_with("www.")
            {
                // Skip the URL: up to whitespace, a closing bracket or a CJK character.
                while let Some(&(_, n)) = chars.peek() {
                    if n.is_whitespace() || n == ')' || n == ']' || !n.is_ascii() {
                        break;
                    }
                    chars.next();
                }
                continue;
            }
            match c {
                // `[text](target)`: keep the text, drop the target.
                ']' if chars.peek().is_some_and(|&(_, n)| n == '(') => {
                    for (_, n) in chars.by_ref() {
                        if n == ')' {
                            break;
                        }
                    }
                }
                '!' if chars.peek().is_some_and(|&(_, n)| n == '[') => {}
                '*' | '`' | '[' | ']' | '~' | '#' => {}
                '_' if chars.peek().is_some_and(|&(_, n)| n == '_') => {
                    chars.next();
                }
                '|' => out.push(' '),
                c => out.push(c),
            }
        }
        out.push(' ');
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Abbreviations whose full stop ends no sentence (lower case, without the stop).
const ABBREVIATIONS: &[&str] = &[
    "ca", "c", "st", "mr", "mrs", "ms", "dr", "no", "nos", "vol", "fig", "approx", "cf", "vs",
    "e.g", "i.e", "jr", "sr",
];

/// Whether the text before a full stop ends with one of [`ABBREVIATIONS`] as a whole word.
fn ends_abbreviation(before: &str) -> bool {
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphabetic() || c == '.'))
        .map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
    let word = before[start..].to_ascii_lowercase();
    !word.is_empty() && ABBREVIATIONS.contains(&word.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_all(deltas: &[&str]) -> Vec<String> {
        let mut s = Splitter::new(SplitterConfig::default());
        let mut out = Vec::new();
        for d in deltas {
            out.extend(s.push(d));
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn chinese_sentences_with_a_short_first_piece() {
        let text = "您好，这件青铜鼎是西周时期的。它高八十厘米，重约四十公斤！还有问题吗？";
        // Fed one character at a time, as a model streams.
        let deltas: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = deltas.iter().map(String::as_str).collect();
        assert_eq!(
            split_all(&refs),
            vec![
                "您好，这件青铜鼎是西周时期的。",
                "它高八十厘米，重约四十公斤！",
                "还有问题吗？"
            ]
        );
        // With a long enough clause, the first piece ends at the first comma.
        assert_eq!(
            split_all(&["各位观众朋友们，欢迎来到博物馆。"]),
            vec!["各位观众朋友们，", "欢迎来到博物馆。"]
        );
    }

    #[test]
    fn english_sentences_numbers_and_abbreviations() {
        assert_eq!(
            split_all(&[
                "Well, this vase is 3.5 m",
                " tall. It was made in 1750! Nice?"
            ]),
            vec![
                "Well, this vase is 3.5 m tall.",
                "It was made in 1750!",
                "Nice?"
            ]
        );
        // An abbreviation's full stop ends no sentence.
        assert_eq!(
            split_all(&["It is dated ca. 1500-1530. St. George is by Dr. No."]),
            vec!["It is dated ca. 1500-1530.", "St. George is by Dr. No."]
        );
        // A '.' at the end of what has arrived waits for the next character.
        let mut s = Splitter::new(SplitterConfig::default());
        assert!(s.push("It costs 3.").is_empty());
        assert!(s.push("5 dollars").is_empty());
        assert_eq!(s.finish(), vec!["It costs 3.5 dollars"]);
        // A first clause with enough characters is cut early.
        assert_eq!(
            split_all(&["Hello visitors, welcome to the museum."]),
            vec!["Hello visitors,", "welcome to the museum."]
        );
    }

    #[test]
    fn closing_quotes_stay_with_their_sentence() {
        assert_eq!(
            split_all(&["他说：“这是真品。”然后离开了。"]),
            vec!["他说：“这是真品。”", "然后离开了。"]
        );
    }

    #[test]
    fn long_text_without_punctuation_is_cut_at_a_space() {
        let words = "word ".repeat(60);
        let pieces = split_all(&[&words]);
        assert!(pieces.len() >= 2, "{pieces:?}");
        assert!(pieces.iter().all(|p| p.chars().count() <= 120));
        assert_eq!(pieces.join(" "), words.trim());
    }

    #[test]
    fn markdown_and_urls_are_not_spoken() {
        let pieces = split_all(&[
            "## 展品介绍\n",
            "**青铜鼎**是*礼器*。详见 [官网](https://museum.example/ding?id=1)。\n",
            "- 第一点：`高度`\n",
            "```python\nprint('hi')\n```\n",
            "See https://example.org/a.b for more. ",
            "| a | b |\n",
        ]);
        assert_eq!(
            pieces,
            vec![
                "展品介绍",
                "青铜鼎是礼器。",
                "详见 官网。",
                "第一点：高度",
                "See for more.",
                "a b"
            ]
        );
    }

    #[test]
    fn punctuation_only_pieces_are_dropped() {
        assert_eq!(split_all(&["。。！\n\n…", "好。"]), vec!["好。"]);
        assert!(split_all(&["", " ", "**"]).is_empty());
    }
}

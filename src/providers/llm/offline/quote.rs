//! What of a record's text the offline answerer may quote, and how it is shortened. Pure.
//!
//! Catalogue descriptions open with a registration clause that tells a visitor nothing:
//! "國立歷史博物館藏《中山勳章》（館藏編號30088）" (the museum, the title again, the accession
//! number), sometimes as the whole description. Quoted as it was, an answer read "Its record is
//! in Chinese only: 國立歷史博物館館藏《中山勳章》(館藏編號30088)." So accession numbers in
//! brackets and a leading "…藏《title》" are taken out of a quote
//! ([`crate::retrieval::text::without_registration`], which the kiosk's card uses too),
//! and a sentence with nothing left ([`says_something`]) gives way to the record's next one.
//! A quote is shortened at a sentence end, else between words, never inside one ([`clip`]:
//! "late 11th century AH/AD 17th century-ear…" was cut so).

pub(super) use crate::retrieval::text::without_registration;

/// Whether a quote says anything at all once its registration is gone: a word, or two
/// Chinese characters (not only brackets, digits and punctuation).
pub(super) fn says_something(quote: &str) -> bool {
    let cjk = quote
        .chars()
        .filter(|c| crate::retrieval::text::is_cjk(*c))
        .count();
    let words = quote
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count();
    cjk >= 2 || words >= 1
}

/// Shortens a passage to about `max` characters: at a sentence end in its last two thirds,
/// else after the last word or clause that fits (with "…"), never inside a word.
pub(super) fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    let chars: Vec<char> = text.chars().collect();
    let end = cut
        .char_indices()
        .enumerate()
        .filter(|&(n, (_, c))| c != '\n' && crate::retrieval::text::ends_sentence(&chars, n))
        .map(|(_, (i, c))| i + c.len_utf8())
        .filter(|&i| i > max / 3)
        .last();
    if let Some(i) = end {
        return cut[..i].to_string();
    }
    // The cut fell inside a word (or inside a Chinese clause) when the characters on both
    // sides of it are letters, digits or CJK.
    let next = text.chars().nth(max);
    let inside = matches!((cut.chars().last(), next), (Some(a), Some(b))
        if a.is_alphanumeric() && b.is_alphanumeric());
    let mut kept = cut.as_str();
    if inside {
        // Back to the last break between words or clauses, when one is not too far back.
        if let Some(i) = kept
            .char_indices()
            .filter(|(_, c)| c.is_whitespace() || matches!(c, ',' | '，' | '、' | '-' | '/'))
            .map(|(i, _)| i)
            .rfind(|&i| i > kept.len() / 2)
        {
            kept = &kept[..i];
        }
    }
    let trim = |k: &'_ str| -> usize {
        k.trim_end_matches(|c: char| {
            c.is_whitespace()
                || matches!(c, ',' | '，' | '、' | '-' | '/' | ':' | '：' | ';' | '；')
        })
        .len()
    };
    let mut kept = &kept[..trim(kept)];
    // Nor does it end on the next item's number ("… 2. Night Rain 3.").
    if let Some(body) = kept.strip_suffix('.')
        && crate::retrieval::text::list_number(&body.chars().collect::<Vec<_>>())
    {
        kept = &kept[..trim(body.trim_end_matches(|c: char| c.is_ascii_digit()))];
    }
    format!("{kept}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_clauses_and_accession_numbers_are_not_quoted() {
        let cases = [
            ("國立歷史博物館館藏《中山勳章》(館藏編號30088).", ""),
            (
                "國立歷史博物館藏《陸海空軍總司令部證)》（館藏編號：07319），此枚證章為銅質，圓形。",
                "此枚證章為銅質，圓形。",
            ),
            (
                "國立歷史博物館館藏《龍旗》(館藏編號30036) 此件為三角型黃色旗，\n上書「大清」字樣。",
                "此件為三角型黃色旗， 上書「大清」字樣。",
            ),
            (
                "國立歷史博物館藏《甲骨文編》（典藏編號h0000900），館藏編號h0000900至h0001043原為河南博物館所藏舊圖書一批。",
                "館藏編號h0000900至h0001043原為河南博物館所藏舊圖書一批。",
            ),
            (
                "A pair of armlets (inv. no. 57.621) of solid silver.",
                "A pair of armlets of solid silver.",
            ),
            // Brackets that are not accession numbers stay.
            (
                "Qian Feng (Chinese, 1740-1795) wrote it (in 1780).",
                "Qian Feng (Chinese, 1740-1795) wrote it (in 1780).",
            ),
            ("溥儒(1896－1963)，字心畬。", "溥儒(1896－1963)，字心畬。"),
            // A title quoted in the middle of a sentence is kept.
            (
                "此書為《甲骨文編》，孫海波譔集。",
                "此書為《甲骨文編》，孫海波譔集。",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(without_registration(raw), want, "{raw}");
        }
        assert!(!says_something(&without_registration(cases[0].0)));
        assert!(says_something("此枚證章為銅質，圓形。"));
        assert!(says_something("A pair of armlets."));
        assert!(says_something("Plates."));
        assert!(!says_something("(30088)."));
    }

    #[test]
    fn long_passages_are_clipped_at_a_sentence_or_between_words() {
        let long = "First sentence is here. ".repeat(30);
        let c = clip(&long, 100);
        assert!(c.len() <= 100 && c.ends_with('.'), "{c}");
        // No sentence end: between words, never inside one.
        let c = clip(
            "late 11th century AH/AD 17th century-early 12th century AH/AD 18th century",
            40,
        );
        assert_eq!(c, "late 11th century AH/AD 17th century…");
        let c = clip(
            "An important government official and poet who spoke out against corruption in high places",
            60,
        );
        assert_eq!(
            c,
            "An important government official and poet who spoke out…"
        );
        // Chinese has no spaces: cut where it is, or at the last clause.
        let c = clip(
            "此面國旗為在南極升起的第一面國旗，國旗正面書寫中華民國四十八年",
            20,
        );
        assert_eq!(c, "此面國旗為在南極升起的第一面國旗…");
        let short = "Short.";
        assert_eq!(clip(short, 100), short);
        // A list's item number is no sentence end.
        let c = clip(
            "Sesson depicted the scenes in this order: 1. Mountain Market 2. Night Rain 3. Evening Bell 4. Autumn Moon",
            80,
        );
        assert_eq!(
            c,
            "Sesson depicted the scenes in this order: 1. Mountain Market 2. Night Rain…"
        );
    }
}

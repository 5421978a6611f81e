//! The system message: the configured persona, then what the collection search found for this
//! question (spec §6.2 step 5), each exhibit with its id so the model can cite it or pass it to
//! a client function such as `show_exhibit`.

use crate::retrieval::Hit;

use crate::retrieval::format_passages;

pub fn system_message(persona: &str, retrieved: Option<&[Hit]>) -> String {
    match retrieved {
        None => persona.to_string(),
        Some([]) => format!(
            "{persona}\n\nThe museum's collection search found nothing for this question. If the \
             answer is not in the conversation, say that the collection has no record of it."
        ),
        Some(hits) => format!(
            "{persona}\n\nExhibits from the museum's collection that may answer the question \
             (id in brackets; use only what is written here, and say so when it is not enough):\n{}",
            format_passages(hits)
        ),
    }
}

/// For a browse question about a kind of object, to append to the system message: how many
/// exhibits of the kind the collection holds (the exhibits above are a few of them).
pub fn browse_total(b: &crate::retrieval::Browse) -> String {
    if let Some((first, n)) = b.makers.first() {
        let makers: Vec<String> = b.makers.iter().map(|(m, k)| format!("{m} ({k})")).collect();
        let listed = if b.shown > 0 {
            "more of their works, ones you have not listed yet (none: say there are no more to \
             list)"
        } else {
            "a few of their works"
        };
        return format!(
            "\n\nThe visitor asks which maker has the most works in the collection. Counted from \
             the records' maker fields, the makers with the most are {}; {first} has {n}. The \
             exhibits above are {listed}. Say who has the most and how many, name the next \
             ones, list these briefly and invite the visitor to ask about one.\n",
            makers.join(", ")
        );
    }
    let total = browse_total_of_kind(b);
    if b.places.is_empty() || b.shown > 0 {
        return total;
    }
    let places: Vec<String> = b.places.iter().map(|(d, k)| format!("{d} ({k})")).collect();
    format!(
        "{total}The visitor asked where they are: the records file them under these \
         departments: {}. Say so.\n",
        places.join(", ")
    )
}

/// [`browse_total`] for a kind, its origin or its age order.
fn browse_total_of_kind(b: &crate::retrieval::Browse) -> String {
    if b.of_kind > 0 && b.shown == 0 {
        let kind: Vec<&str> = b.kind_words().collect();
        return format!(
            "\n\nThe visitor asks what the collection holds of a kind from a period. The \
             collection holds {} exhibits of the kind {}, and none whose records mention {}. Say \
             so plainly and offer the kind's other periods; name no exhibit as being of that \
             period.\n",
            b.of_kind,
            kind.join(" "),
            b.qualifiers.join(" and ")
        );
    }
    if let Some(age) = b.order {
        let what = if b.words.is_empty() {
            "the collection".to_string()
        } else if b.origin {
            format!("the exhibits from {}", b.words.join(" and "))
        } else if b.label.is_empty() {
            format!("the exhibits of the kind {}", b.words.join(" "))
        } else {
            format!("the exhibits in {}", b.label)
        };
        use crate::retrieval::ordering::Order;
        let order = match age {
            Order::Oldest => "oldest first",
            Order::Newest => "most recent first",
            Order::Largest => "largest first",
            Order::Smallest => "smallest first",
        };
        // What the records must give to be compared, and what to say of the first.
        let (given, value) = if age.by_size() {
            (
                "measurements",
                "its measurements (the largest one compared)",
            )
        } else {
            ("a date", "its date")
        };
        let listed = if b.shown > 0 {
            "the next ones in that order, after those you listed (none: say there are no more to list)"
        } else {
            "the first in that order"
        };
        return format!(
            "\n\nThe visitor asks for the {order} of {what}. Of its {} exhibits, {} have {given} \
             in their records; the exhibits above are {listed}, {order}. Say which is first and \
             give {value}, list the others briefly, say that only records with {given} were \
             compared, and invite the visitor to ask about one.\n",
            b.total, b.compared
        );
    }
    if b.origin {
        let words = b.words.join(" and ");
        let what = if b.shown > 0 {
            "The visitor asks for more of the exhibits you listed"
        } else {
            "The visitor asks what the collection holds from a place, culture or period"
        };
        return format!(
            "\n\n{what}. The collection holds {} exhibits whose records give their origin as \
             {words}; the exhibits above are {} of them. Say how many there are, list these \
             briefly and invite the visitor to ask about one.\n",
            b.total,
            if b.shown > 0 {
                "ones you have not listed yet (none: say there are no more to list)"
            } else {
                "a few"
            }
        );
    }
    let mention = if b.qualifiers.is_empty() {
        String::new()
    } else {
        format!(" whose records mention {}", b.qualifiers.join(" and "))
    };
    if b.shown > 0 {
        return format!(
            "\n\nThe visitor asks for more of the kind you listed. The collection holds {} \
             exhibits in {}{mention}; the exhibits above are ones you have not listed yet (none: \
             say there are no more to list). List these briefly and invite the visitor to ask \
             about one.\n",
            b.total, b.label
        );
    }
    format!(
        "\n\nThe visitor asks what the collection holds of a kind. The collection holds {} \
         exhibits in {}{mention}; the exhibits above are a few of them. Say how many there are, \
         list these briefly and invite the visitor to ask about one.\n",
        b.total, b.label
    )
}

/// For a request for more of a list the search gave ("Any more?" after "Do you have any
/// swords?"), to append to the system message.
pub fn more_of_list() -> &'static str {
    "\n\nThe visitor asks for more of the exhibits you listed. The exhibits above are further \
     matches you have not listed yet (none: say there are no more to list). List these briefly \
     and invite the visitor to ask about one.\n"
}

/// For a question about the collection as a whole, to append to the system message: its total
/// and largest departments (the model has no search result for it).
pub fn overview(o: &crate::retrieval::Overview) -> String {
    let parts: Vec<String> = o
        .departments
        .iter()
        .take(10)
        .map(|(d, n)| format!("{d} ({n})"))
        .collect();
    format!(
        "\n\nThe visitor asks about the collection as a whole. It holds {} exhibits; its largest \
         departments: {}.\n",
        o.total,
        if parts.is_empty() {
            "none recorded".to_string()
        } else {
            parts.join(", ")
        }
    )
}

/// For a pick from the guide's list, to append to the system message: which exhibit the visitor
/// means (its record is the first above).
pub fn picked(title: &str) -> String {
    format!("\n\nThe visitor picked “{title}” from the list you gave; answer about that exhibit.\n")
}

/// The visitor-services answer for this question, to append to the system message: the
/// museum's own text, authoritative over anything else.
pub fn visitor_fact(fact: &crate::retrieval::facts::Fact) -> String {
    format!(
        "\n\nThis is a question about visiting the museum. The museum's own answer (authoritative; \
         answer from it only, in the visitor's language, and do not use exhibit records):\n\
         English: {}\nChinese: {}\n",
        fact.en.trim(),
        fact.zh.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::Exhibit;

    #[test]
    fn the_model_hears_who_has_most_works_and_where_a_kind_is_kept() {
        let makers = crate::retrieval::Browse {
            total: 76,
            makers: vec![
                ("Alfred Jacob Miller".into(), 76),
                ("David d'Angers".into(), 12),
            ],
            ..Default::default()
        };
        let s = browse_total(&makers);
        assert!(
            s.contains(
                "the makers with the most are Alfred Jacob Miller (76), David d'Angers (12)"
            ),
            "{s}"
        );
        let kept = crate::retrieval::Browse {
            total: 156,
            words: vec!["egyptian".into()],
            origin: true,
            places: vec![("Ceramics".into(), 31), ("Metal".into(), 20)],
            ..Default::default()
        };
        let s = browse_total(&kept);
        assert!(
            s.contains("156 exhibits whose records give their origin as egyptian"),
            "{s}"
        );
        assert!(s.contains("departments: Ceramics (31), Metal (20)"), "{s}");
        let more = crate::retrieval::Browse { shown: 4, ..kept };
        assert!(!browse_total(&more).contains("departments"));
        // A period that left none of the kind: the model hears there are none.
        let none = crate::retrieval::Browse {
            words: vec!["tang dynasty".into(), "vases".into()],
            qualifiers: vec!["tang dynasty".into()],
            of_kind: 33,
            ..Default::default()
        };
        let s = browse_total(&none);
        assert!(
            s.contains(
                "33 exhibits of the kind vases, and none whose records mention tang dynasty"
            ),
            "{s}"
        );
    }

    #[test]
    fn hits_carry_ids_and_passages() {
        let hits = vec![Hit {
            exhibit: Exhibit {
                id: "walters-1".into(),
                title: "Bowl".into(),
                maker: "Anon".into(),
                date: "1600".into(),
                ..Default::default()
            },
            score: 2.0,
            passages: vec!["A blue bowl.".into()],
        }];
        let s = system_message("P", Some(&hits));
        assert!(s.starts_with("P\n\n"));
        assert!(
            s.contains("[walters-1] Bowl | Anon | 1600\n- A blue bowl.\n"),
            "{s}"
        );
        assert!(system_message("P", Some(&[])).contains("found nothing"));
        assert_eq!(system_message("P", None), "P");
    }

    #[test]
    fn the_visitor_fact_is_given_in_both_languages() {
        let f = crate::retrieval::facts::Fact {
            topic: "wifi".into(),
            en: "Network X.".into(),
            zh: "网络 X。".into(),
            triggers: vec![],
            exhibits: vec![],
        };
        let s = visitor_fact(&f);
        assert!(
            s.contains("authoritative") && s.contains("English: Network X.\nChinese: 网络 X。"),
            "{s}"
        );
    }
}

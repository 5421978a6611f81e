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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::Exhibit;

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
}

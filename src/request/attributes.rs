//! Session attributes (spec §4.2, §4.3, §7.2) and the atomic `function_calling_op` update.

use crate::protocol::{FunctionDef, FunctionOp, Platform};

#[derive(Debug, Clone, PartialEq)]
pub struct Attributes {
    pub platform: Platform,
    pub require_tts: bool,
    pub enable_srs: bool,
    pub functions: Vec<FunctionDef>,
}

/// Applies `op` to `list` atomically: on error the list is unchanged and the error names the
/// offending entry (docs/protocol.md "Requests and responses").
pub fn apply_function_op(
    current: &[FunctionDef],
    op: FunctionOp,
    given: &[FunctionDef],
) -> Result<Vec<FunctionDef>, String> {
    let pos = |name: &str| current.iter().position(|f| f.name == name);
    let mut seen = std::collections::HashSet::new();
    for (i, f) in given.iter().enumerate() {
        if !seen.insert(f.name.as_str()) {
            return Err(format!(
                "field `payload.function_calling[{i}].name`: {:?} appears twice",
                f.name
            ));
        }
    }
    match op {
        FunctionOp::Replace => Ok(given.to_vec()),
        FunctionOp::Add => {
            let mut out = current.to_vec();
            for (i, f) in given.iter().enumerate() {
                if pos(&f.name).is_some() {
                    return Err(format!(
                        "field `payload.function_calling[{i}].name`: ADD of {:?}, which already exists (use UPDATE)",
                        f.name
                    ));
                }
                out.push(f.clone());
            }
            Ok(out)
        }
        FunctionOp::Update => {
            let mut out = current.to_vec();
            for (i, f) in given.iter().enumerate() {
                let Some(p) = pos(&f.name) else {
                    return Err(format!(
                        "field `payload.function_calling[{i}].name`: UPDATE of {:?}, which does not exist (use ADD)",
                        f.name
                    ));
                };
                out[p] = f.clone();
            }
            Ok(out)
        }
        FunctionOp::Delete => {
            for (i, f) in given.iter().enumerate() {
                if pos(&f.name).is_none() {
                    return Err(format!(
                        "field `payload.function_calling[{i}].name`: DELETE of {:?}, which does not exist",
                        f.name
                    ));
                }
            }
            Ok(current
                .iter()
                .filter(|f| !given.iter().any(|g| g.name == f.name))
                .cloned()
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str, desc: &str) -> FunctionDef {
        serde_json::from_value(json!({"name": name, "description": desc})).unwrap()
    }

    fn names(l: &[FunctionDef]) -> Vec<&str> {
        l.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn ops() {
        let cur = vec![f("a", "1"), f("b", "1")];
        assert_eq!(
            names(&apply_function_op(&cur, FunctionOp::Replace, &[f("c", "")]).unwrap()),
            ["c"]
        );
        assert_eq!(
            names(&apply_function_op(&cur, FunctionOp::Add, &[f("c", "")]).unwrap()),
            ["a", "b", "c"]
        );
        let up = apply_function_op(&cur, FunctionOp::Update, &[f("b", "2")]).unwrap();
        assert_eq!(up[1].description.as_deref(), Some("2"));
        assert_eq!(
            names(&apply_function_op(&cur, FunctionOp::Delete, &[f("a", "")]).unwrap()),
            ["b"]
        );
    }

    #[test]
    fn bad_names_leave_the_list_alone() {
        let cur = vec![f("a", "1")];
        let e = apply_function_op(&cur, FunctionOp::Add, &[f("z", ""), f("a", "")]).unwrap_err();
        assert!(
            e.contains("function_calling[1]") && e.contains("\"a\""),
            "{e}"
        );
        assert!(apply_function_op(&cur, FunctionOp::Update, &[f("z", "")]).is_err());
        assert!(apply_function_op(&cur, FunctionOp::Delete, &[f("a", ""), f("z", "")]).is_err());
        assert!(apply_function_op(&cur, FunctionOp::Replace, &[f("x", ""), f("x", "")]).is_err());
    }
}

//! Slash commands (seed 003 §1): text starting with `/` runs a tool directly, bypassing the
//! model, and answers through the normal RESPONSE stream. They work with any LLM setting,
//! `none` included.

use crate::retrieval::Retriever;

use super::tools::exhibit_json;

/// `/name args` split, or None when the text is not a command.
pub fn parse(text: &str) -> Option<(String, String)> {
    let t = text.trim();
    let rest = t.strip_prefix('/')?;
    if rest.is_empty() || rest.starts_with('/') || rest.starts_with(char::is_whitespace) {
        return None;
    }
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest, ""),
    };
    Some((name.to_ascii_lowercase(), args.to_string()))
}

pub const HELP: &str = "Commands / 指令:\n\
/exhibit <id> — show one exhibit's record / 查看展品资料\n\
/search <words> — search the collection / 检索馆藏\n\
/help — this list / 指令列表";

fn exhibit_text(e: &crate::retrieval::Exhibit) -> String {
    let v = exhibit_json(e, 600);
    let mut lines = vec![format!("{} — {}", e.id, e.title)];
    for (label, key) in [
        ("Maker / 作者", "maker"),
        ("Date / 年代", "date"),
        ("Period / 时期", "period"),
        ("Medium / 材质", "medium"),
        ("Dimensions / 尺寸", "dimensions"),
        ("Gallery / 展厅", "gallery"),
    ] {
        if let Some(s) = v[key].as_str() {
            lines.push(format!("{label}: {s}"));
        }
    }
    if let Some(d) = v["description"].as_str() {
        lines.push(d.to_string());
    }
    lines.join("\n")
}

/// Runs a command; the reply text.
pub async fn run(name: &str, args: &str, retriever: Option<&dyn Retriever>) -> String {
    let needs_collection = matches!(name, "exhibit" | "search");
    if needs_collection && retriever.is_none() {
        return "The collection is not available on this server. / 本服务器未启用馆藏检索。".into();
    }
    match (name, retriever) {
        ("help", _) => HELP.into(),
        ("exhibit", Some(r)) if !args.is_empty() => match r.get(args).await {
            Ok(Some(e)) => exhibit_text(&e),
            Ok(None) => format!("No exhibit with id {args:?}. / 没有编号为 {args} 的展品。"),
            Err(e) => format!("The collection could not be read: {e}"),
        },
        ("search", Some(r)) if !args.is_empty() => match r.search(args, 5).await {
            Ok(hits) if hits.is_empty() => {
                format!("Nothing in the collection matches {args:?}. / 馆藏中没有找到相关展品。")
            }
            Ok(hits) => hits
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    format!(
                        "{}. {} — {} ({:.2})",
                        i + 1,
                        h.exhibit.id,
                        h.exhibit.title,
                        h.score
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Err(e) => format!("The collection search failed: {e}"),
        },
        ("exhibit", _) => "Usage: /exhibit <id>".into(),
        ("search", _) => "Usage: /search <words>".into(),
        _ => format!("Unknown command /{name}.\n{HELP}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        assert_eq!(
            parse("/exhibit walters-1"),
            Some(("exhibit".into(), "walters-1".into()))
        );
        assert_eq!(
            parse("  /Search  青铜 器 "),
            Some(("search".into(), "青铜 器".into()))
        );
        assert_eq!(parse("/help"), Some(("help".into(), String::new())));
        assert_eq!(parse("hello /help"), None);
        assert_eq!(parse("/"), None);
        assert_eq!(parse("// comment"), None);
        assert_eq!(parse("/ x"), None);
    }

    #[tokio::test]
    async fn commands_without_a_collection() {
        assert!(run("help", "", None).await.contains("/exhibit"));
        assert!(run("exhibit", "1", None).await.contains("not available"));
        let unknown = run("dance", "", None).await;
        assert!(unknown.contains("Unknown command /dance") && unknown.contains("/search"));
    }
}

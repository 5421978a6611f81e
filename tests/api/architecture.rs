//! The architecture invariants of `src/lib.rs`, checked by reading the sources: every file under
//! `src/` is tokenised (comments, strings and char literals skipped), every path it names — in a
//! `use` tree or inline, `super::`/`self::`/child-module paths resolved to `crate::…` — is
//! compared with the rules below, and a failure names each offending file, line and path.
//!
//! Comments do not count: prose such as "never imports rusqlite" is not an import.

use std::collections::BTreeSet;
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

/// Skips a `"…"` body starting after the opening quote; returns the index after the closing one.
fn skip_string(b: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < b.len() {
        match b[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            c => {
                if c == '\n' {
                    *line += 1;
                }
                i += 1;
            }
        }
    }
    i
}

/// Skips a raw string starting at the first `#` or `"` after its `r` prefix.
fn skip_raw_string(b: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut hashes = 0;
    while b.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < b.len() {
        if b[i] == '"' && (1..=hashes).all(|k| b.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        if b[i] == '\n' {
            *line += 1;
        }
        i += 1;
    }
    i
}

/// Identifiers, `::` and punctuation with their line numbers; comments, string, byte-string,
/// raw-string and char literals, numbers and lifetimes are dropped.
fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0usize, 1usize);
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&b, i + 1, &mut line);
        } else if c == '\'' {
            if next == Some('\\') {
                // '\n', '\'', '\u{…}': skip the backslash and the escaped character
                i += 3;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3; // 'x'
            } else {
                i += 1; // a lifetime: its name follows as an identifier
            }
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            let word: String = b[start..i].iter().collect();
            let after = b.get(i).copied();
            let raw_prefix = matches!(word.as_str(), "r" | "br" | "cr");
            if raw_prefix && after == Some('#') {
                let mut k = i;
                while b.get(k) == Some(&'#') {
                    k += 1;
                }
                if b.get(k) == Some(&'"') {
                    i = skip_raw_string(&b, i, &mut line);
                } else if word == "r" {
                    // r#ident
                    let s = i + 1;
                    i = s;
                    while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                        i += 1;
                    }
                    out.push((Tok::Ident(b[s..i].iter().collect()), line));
                }
            } else if raw_prefix && after == Some('"') {
                i = skip_raw_string(&b, i, &mut line);
            } else if matches!(word.as_str(), "b" | "c") && after == Some('"') {
                i = skip_string(&b, i + 1, &mut line);
            } else if word == "b" && after == Some('\'') {
                i += 1;
                if b.get(i) == Some(&'\\') {
                    i += 2;
                }
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else {
                out.push((Tok::Ident(word), line));
            }
        } else if c == ':' && next == Some(':') {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// Flattens one use tree (`a::{b, c::{d as e, *}, self}`) into full paths.
fn use_tree(t: &[(Tok, usize)], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    while *i < t.len() {
        match &t[*i].0 {
            Tok::Sep => *i += 1,
            Tok::Ident(s) if s == "as" => {
                *i += 2;
                break;
            }
            Tok::Ident(s) => {
                if s != "self" || path.is_empty() {
                    path.push(s.clone());
                }
                *i += 1;
            }
            Tok::Punct('*') => {
                *i += 1;
                break;
            }
            Tok::Punct('{') => {
                *i += 1;
                while *i < t.len() && t[*i].0 != Tok::Punct('}') {
                    use_tree(t, i, path.clone(), out);
                    if *i < t.len() && t[*i].0 == Tok::Punct(',') {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => break,
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// One source file under `src/`.
struct Source {
    /// Relative to `src/`, with `/` separators.
    rel: String,
    text: String,
}

impl Source {
    /// The module path of the file inside its crate (`pipeline/reply.rs` → `[pipeline, reply]`;
    /// `main.rs` and `bin/*` are roots of their own crates).
    fn module(&self) -> Vec<String> {
        let mut parts: Vec<&str> = self.rel.split('/').collect();
        if parts[0] == "bin" {
            if parts.len() == 2 {
                return Vec::new();
            }
            parts.drain(..2);
        }
        let last = parts.pop().unwrap_or_default().trim_end_matches(".rs");
        let mut m: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
        if !matches!(last, "mod" | "lib" | "main") {
            m.push(last.to_string());
        }
        m
    }
}

/// A path named by the code, resolved (`crate::session::outbox::Outbox`, `axum::Router`).
#[derive(Debug, Clone, PartialEq)]
struct Named {
    path: String,
    line: usize,
}

/// Every path the file names, `use` trees flattened, relative paths resolved.
fn named_paths(src: &Source) -> Vec<Named> {
    let t = tokens(&src.text);
    let file_module = src.module();
    // Child modules declared in this file (`mod x;`), for paths such as `x::y`.
    let children: BTreeSet<String> = t
        .windows(3)
        .filter_map(|w| match (&w[0].0, &w[1].0, &w[2].0) {
            (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';' | '{')) if m == "mod" => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    let resolve = |module: &[String], segs: &[String]| -> Option<String> {
        let abs = |m: &[String], rest: &[String]| {
            let mut v = vec!["crate".to_string()];
            v.extend(m.iter().cloned());
            v.extend(rest.iter().cloned());
            v.join("::")
        };
        match segs.first().map(String::as_str)? {
            "Self" => None,
            "crate" => Some(segs.join("::")),
            "self" => Some(abs(module, &segs[1..])),
            "super" => {
                let mut m = module.to_vec();
                let mut k = 0;
                while segs.get(k).map(String::as_str) == Some("super") {
                    m.pop();
                    k += 1;
                }
                Some(abs(&m, &segs[k..]))
            }
            first if module == file_module.as_slice() && children.contains(first) => {
                Some(abs(module, segs))
            }
            _ => Some(segs.join("::")),
        }
    };
    let mut out = Vec::new();
    // (module path, brace depth at which it was opened) for inline `mod x { … }`.
    let mut stack: Vec<(Vec<String>, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        let module = stack
            .last()
            .map(|(m, _)| m.clone())
            .unwrap_or_else(|| file_module.clone());
        let line = t[i].1;
        match &t[i].0 {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (t.get(i + 1), t.get(i + 2))
                {
                    let mut m = module.clone();
                    m.push(name.clone());
                    stack.push((m, depth + 1));
                }
                i += 1;
            }
            Tok::Ident(k) if k == "use" => {
                i += 1;
                let mut trees = Vec::new();
                use_tree(&t, &mut i, Vec::new(), &mut trees);
                while i < t.len() && t[i].0 != Tok::Punct(';') {
                    i += 1;
                }
                for segs in trees {
                    if let Some(path) = resolve(&module, &segs) {
                        out.push(Named { path, line });
                    }
                }
            }
            Tok::Ident(k) if k == "extern" => {
                if let (Some((Tok::Ident(c), _)), Some((Tok::Ident(name), _))) =
                    (t.get(i + 1), t.get(i + 2))
                    && c == "crate"
                {
                    out.push(Named {
                        path: name.clone(),
                        line,
                    });
                }
                i += 1;
            }
            Tok::Ident(_) | Tok::Sep => {
                let prev = i.checked_sub(1).map(|p| &t[p].0);
                let leading = t[i].0 == Tok::Sep;
                if leading && matches!(prev, Some(Tok::Ident(_) | Tok::Punct('>' | ')' | ']'))) {
                    i += 1;
                    continue;
                }
                let mut segs = Vec::new();
                let mut j = if leading { i + 1 } else { i };
                while let Some((Tok::Ident(s), _)) = t.get(j) {
                    segs.push(s.clone());
                    if t.get(j + 1).map(|x| &x.0) == Some(&Tok::Sep)
                        && matches!(t.get(j + 2).map(|x| &x.0), Some(Tok::Ident(_)))
                    {
                        j += 2;
                    } else {
                        j += 1;
                        break;
                    }
                }
                if segs.len() >= 2
                    && let Some(path) = resolve(&module, &segs)
                {
                    out.push(Named { path, line });
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
    out
}

fn sources() -> Vec<Source> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<Source>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&p).unwrap();
                out.push(Source { rel, text });
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    assert!(
        out.len() >= 40,
        "only {} source files under {}",
        out.len(),
        root.display()
    );
    out
}

/// `path` is `prefix` or something inside it.
fn within(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with("::"))
}

fn in_folder(rel: &str, folder: &str) -> bool {
    rel.starts_with(&format!("{folder}/"))
}

/// Every `file:line: path` where a file that `applies` names a `forbidden` path.
fn violations(applies: impl Fn(&str) -> bool, forbidden: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for src in sources().iter().filter(|s| applies(&s.rel)) {
        for n in named_paths(src) {
            if forbidden(&n.path) {
                out.push(format!("src/{}:{}: {}", src.rel, n.line, n.path));
            }
        }
    }
    out
}

fn check(rule: &str, found: Vec<String>) {
    assert!(
        found.is_empty(),
        "invariant broken: {rule}\n{} place(s):\n  {}",
        found.len(),
        found.join("\n  ")
    );
}

#[test]
fn pipeline_never_mentions_session() {
    check(
        "`pipeline` never mentions `crate::session` (the request contract sits below both)",
        violations(
            |f| in_folder(f, "pipeline"),
            |p| within(p, "crate::session"),
        ),
    );
}

#[test]
fn hub_never_imports_axum_transport_or_app() {
    check(
        "`hub` never imports axum, `crate::transport` or `crate::app` (it runs over any stream and sink)",
        violations(
            |f| in_folder(f, "hub"),
            |p| {
                within(p, "axum")
                    || within(p, "crate::transport")
                    || within(p, "crate::app")
                    || within(p, "crate::AppState")
            },
        ),
    );
}

#[test]
fn cluster_never_mentions_session_app_or_transport() {
    check(
        "`cluster` never names `session`, `app` or `transport` (what a node does for the others is handed to it as `cluster::Local`)",
        violations(
            |f| in_folder(f, "cluster"),
            |p| {
                within(p, "crate::session")
                    || within(p, "crate::app")
                    || within(p, "crate::AppState")
                    || within(p, "crate::transport")
            },
        ),
    );
}

#[test]
fn request_never_mentions_session_or_pipeline() {
    check(
        "`request` imports neither `session` nor `pipeline` (it sits below both)",
        violations(
            |f| in_folder(f, "request"),
            |p| within(p, "crate::session") || within(p, "crate::pipeline"),
        ),
    );
}

#[test]
fn config_never_calls_into_hub_transport_or_pipeline() {
    check(
        "`config` (the bottom floor) never names `hub`, `transport` or `pipeline`",
        violations(
            |f| f == "config.rs" || in_folder(f, "config"),
            |p| {
                within(p, "crate::hub")
                    || within(p, "crate::transport")
                    || within(p, "crate::pipeline")
            },
        ),
    );
}

#[test]
fn only_store_imports_rusqlite() {
    check(
        "only `store` imports rusqlite",
        violations(|f| !in_folder(f, "store"), |p| within(p, "rusqlite")),
    );
}

#[test]
fn only_store_imports_the_postgresql_client() {
    check(
        "only `store` imports tokio_postgres or deadpool_postgres",
        violations(
            |f| !in_folder(f, "store"),
            |p| within(p, "tokio_postgres") || within(p, "deadpool_postgres"),
        ),
    );
}

#[test]
fn session_never_imports_axum_or_rusqlite() {
    check(
        "`session` never imports axum or rusqlite (it runs over channels in tests)",
        violations(
            |f| in_folder(f, "session"),
            |p| within(p, "axum") || within(p, "rusqlite"),
        ),
    );
}

#[test]
fn protocol_and_audio_do_no_network_or_file_io() {
    check(
        "`protocol` and `audio` are pure: no tokio::net, tokio::fs, std::fs or std::net",
        violations(
            |f| in_folder(f, "protocol") || in_folder(f, "audio"),
            |p| {
                ["tokio::net", "tokio::fs", "std::fs", "std::net"]
                    .iter()
                    .any(|x| within(p, x))
            },
        ),
    );
}

/// What providers may take from `protocol`: function definitions (the tools they describe to an
/// LLM) and the error code vocabulary; frames, messages, payloads and the codec are not theirs.
fn provider_may_use(path: &str) -> bool {
    within(path, "crate::protocol::function")
        || within(path, "crate::protocol::FunctionDef")
        || within(path, "crate::protocol::ErrorCode")
        || within(path, "crate::protocol::error::ErrorCode")
}

#[test]
fn providers_never_see_protocol_frames_or_sessions() {
    check(
        "providers never see protocol frames or sessions",
        violations(
            |f| in_folder(f, "providers"),
            |p| {
                within(p, "crate::session")
                    || (within(p, "crate::protocol") && !provider_may_use(p))
            },
        ),
    );
}

#[test]
fn store_never_imports_retrieval_or_providers() {
    check(
        "`store` never imports `crate::retrieval` or `crate::providers` (no circle with retrieval)",
        violations(
            |f| in_folder(f, "store"),
            |p| within(p, "crate::retrieval") || within(p, "crate::providers"),
        ),
    );
}

#[test]
fn the_load_tool_is_not_part_of_the_server_library() {
    let lib = sources().into_iter().find(|s| s.rel == "lib.rs").unwrap();
    let t = tokens(&lib.text);
    let found: Vec<String> = t
        .windows(2)
        .filter(|w| w[0].0 == Tok::Ident("mod".into()) && w[1].0 == Tok::Ident("load".into()))
        .map(|w| format!("src/lib.rs:{}: mod load", w[0].1))
        .collect();
    check(
        "`src/lib.rs` does not declare `mod load` (the load tool is its own binary)",
        found,
    );
}

/// The scanner itself: it sees what the rules need and nothing in comments or strings, so a
/// green run above means the rules hold, not that the scanner is blind.
#[test]
fn the_scanner_finds_imports_in_every_form() {
    let src = Source {
        rel: "pipeline/reply.rs".into(),
        text: r####"
//! Never imports crate::session or rusqlite (a comment).
/* block comment: use axum::Router; /* nested */ use crate::session; */
use crate::{protocol::Response, session::{self, outbox::Outbox as O}};
use super::super::session::inflight::*;
use super::history::History;
pub(crate) use tokio::{fs, net::TcpStream};
const S: &str = "use crate::session::x; \" still a string";
const R: &str = r#"crate::session::raw "quoted" "#;
const C: char = '"';
const E: char = '\'';
fn f<'a>(x: &'a str) -> usize {
    let _b = b"std::fs";
    let _c = b'\'';
    crate::session::outbox::push(x);
    ::std::net::TcpStream::connect(x);
    Vec::<u8>::new();
    x.len()
}
mod tests {
    use super::*;
    use super::super::session as s;
}
"####
            .into(),
    };
    let got: Vec<(String, usize)> = named_paths(&src)
        .into_iter()
        .map(|n| (n.path, n.line))
        .collect();
    let want = [
        ("crate::protocol::Response", 4),
        ("crate::session", 4),
        ("crate::session::outbox::Outbox", 4),
        ("crate::session::inflight", 5),
        ("crate::pipeline::history::History", 6),
        ("tokio::fs", 7),
        ("tokio::net::TcpStream", 7),
        ("crate::session::outbox::push", 15),
        ("std::net::TcpStream::connect", 16),
        ("crate::pipeline::reply", 21),
        ("crate::pipeline::session", 22),
    ];
    for (path, line) in want {
        assert!(
            got.contains(&(path.to_string(), line)),
            "missing {path} at line {line}; got {got:?}"
        );
    }
    for (path, _) in &got {
        assert!(
            !path.contains("::x") && !path.contains("raw") && path != "std::fs",
            "a string or comment was read as code: {path}; got {got:?}"
        );
    }
    assert!(
        !got.iter().any(|(p, l)| p == "crate::session" && *l < 4),
        "comment read as code: {got:?}"
    );
    assert_eq!(
        Source {
            rel: "bin/museum-agent-load/scenarios.rs".into(),
            text: String::new()
        }
        .module(),
        vec!["scenarios".to_string()]
    );
    assert!(
        Source {
            rel: "lib.rs".into(),
            text: String::new()
        }
        .module()
        .is_empty()
    );
}

/// And on the real tree: paths that exist today are found where they are.
#[test]
fn the_scanner_reads_the_real_sources() {
    let all: Vec<(String, Named)> = sources()
        .iter()
        .flat_map(|s| named_paths(s).into_iter().map(|n| (s.rel.clone(), n)))
        .collect();
    assert!(
        all.iter()
            .any(|(f, n)| in_folder(f, "session") && within(&n.path, "crate::protocol")),
        "session's use of crate::protocol not seen"
    );
    assert!(
        all.iter()
            .any(|(f, n)| in_folder(f, "store") && within(&n.path, "rusqlite")),
        "store's use of rusqlite not seen"
    );
}

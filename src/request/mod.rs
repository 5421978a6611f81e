//! What a session hands each request task, below both `session` and `pipeline`: the table of
//! requests in flight (each with its own child `CancellationToken`, and the one place that
//! decides who ends a request), the bounded outbox every frame goes through to the socket's one
//! writer task, and the session attributes a request runs with.
//!
//! `session` creates these and `pipeline` uses them; neither needs the other to do so.

pub mod attributes;
pub mod inflight;
pub mod outbox;

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    /// Every `.rs` file under `src/<dir>`, with its text (for tests of the module map).
    pub(crate) fn sources(dir: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    out.push((p.display().to_string(), text));
                }
            }
        }
        assert!(!out.is_empty(), "no sources under src/{dir}");
        out
    }

    /// The module map: `request` sits below both `session` and `pipeline`.
    #[test]
    fn request_never_mentions_session_or_pipeline() {
        let above = [
            concat!("crate", "::session"),
            concat!("crate", "::pipeline"),
        ];
        for (path, text) in sources("request") {
            for a in above {
                assert!(!text.contains(a), "{path} mentions {a}");
            }
        }
    }
}

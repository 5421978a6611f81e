//! A second server in the same run: `--compare-spawn CMD` (or `--compare-url URL`) runs every
//! scenario against it right after the first, and [`ratio_table`] prints first ÷ second for
//! each figure both reported. Used to measure the project against the Python reference peer
//! (`../shared/peer/py_server.py`) on the same machine, in one invocation, one run each side.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::Report;
use super::scenarios::Target;

/// A server started from a shell command line by `--compare-spawn`.
pub struct CommandServer {
    pub child: tokio::process::Child,
    pub target: Target,
}

/// Fills in the placeholders of a `--compare-spawn` command line: `{port}` (a free loopback
/// port), `{upstream}` (the fake upstream's base URL, ending in `/v1`) and `{upstream_root}`
/// (the same without `/v1`).
pub fn fill(cmd: &str, port: u16, upstream: &str) -> String {
    let root = upstream.strip_suffix("/v1").unwrap_or(upstream);
    cmd.replace("{port}", &port.to_string())
        .replace("{upstream_root}", root)
        .replace("{upstream}", upstream)
}

impl CommandServer {
    /// Runs `cmd` (after [`fill`]) with `sh -c exec …`, so the pid read for CPU and RSS is the
    /// server's own, and waits (at most 30 s) until it accepts connections on `{port}`.
    pub async fn start(
        cmd: &str,
        upstream: &str,
        api_key: &str,
        path: &str,
    ) -> anyhow::Result<CommandServer> {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?.port()
        };
        let line = fill(cmd, port, upstream);
        let child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec {line}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let pid = child.id();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "`{line}` did not start listening on port {port} within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(CommandServer {
            child,
            target: Target {
                url: format!("ws://127.0.0.1:{port}{path}"),
                api_key: api_key.to_string(),
                pid,
            },
        })
    }
}

/// The figures both reports have, side by side, with first ÷ second.
pub fn ratio_table(first: &Report, second: &Report, names: (&str, &str)) -> (String, Value) {
    let mut s = format!(
        "== {} ratio  {} / {}\n  {:<40} {:>14} {:>14} {:>8}\n",
        first.scenario, names.0, names.1, "", names.0, names.1, "ratio"
    );
    let mut rows = Vec::new();
    for (name, a, unit) in &first.figures {
        let Some(b) = second.get(name) else { continue };
        let ratio = if b != 0.0 { a / b } else { f64::NAN };
        let num = |v: f64| {
            if v.is_nan() {
                "-".to_string()
            } else {
                format!("{v:.3}")
            }
        };
        s.push_str(&format!(
            "  {name:<40} {:>14} {:>14} {:>8} {unit}\n",
            num(*a),
            num(b),
            num(ratio)
        ));
        let opt = |v: f64| if v.is_finite() { json!(v) } else { Value::Null };
        rows.push(json!({"figure": name, "unit": unit, names.0: opt(*a), names.1: opt(b), "ratio": opt(ratio)}));
    }
    (
        s,
        json!({"scenario": first.scenario, "params": first.params, "rows": rows}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_ratios() {
        assert_eq!(
            fill(
                "py --port {port} --upstream {upstream_root} --x {upstream}",
                9,
                "http://127.0.0.1:5/v1"
            ),
            "py --port 9 --upstream http://127.0.0.1:5 --x http://127.0.0.1:5/v1"
        );
        let mut a = Report::new("stream", json!({}));
        a.add("cpu", 10.0, "us");
        a.add("only here", 1.0, "");
        let mut b = Report::new("stream", json!({}));
        b.add("cpu", 40.0, "us");
        let (text, v) = ratio_table(&a, &b, ("project", "peer"));
        assert!(text.contains("0.250"), "{text}");
        assert!(!text.contains("only here"));
        assert_eq!(v["rows"][0]["ratio"], json!(0.25));
        assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    }
}

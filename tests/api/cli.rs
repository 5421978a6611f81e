//! The admin commands of the real binary against a temporary database.

use std::io::Write;
use std::process::{Command, Stdio};

use museum_agent::auth::hash_api_key;
use museum_agent::store::Store;

fn bin(dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_museum-agent"));
    cmd.env("MUSEUM_AGENT__DATABASE__PATH", dir.join("cli.db"))
        .env("RUST_LOG", "warn")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn key_and_account_admin_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ok, key, _) = bin(d, &["key", "create", "--name", "kiosk-1"], None);
    assert!(ok);
    let key = key.trim().to_string();
    assert!(key.starts_with("mak_") && key.len() > 40, "{key}");
    // Shown once: the list never prints it, and the database holds only its hash.
    let (ok, list, _) = bin(d, &["key", "list"], None);
    assert!(ok && list.contains("kiosk-1") && list.contains("active") && !list.contains(&key));
    let raw = std::fs::read(d.join("cli.db")).unwrap();
    assert!(
        !raw.windows(key.len()).any(|w| w == key.as_bytes()),
        "plaintext key stored"
    );
    let store = Store::open(&d.join("cli.db")).unwrap();
    assert!(store.find_api_key(&hash_api_key(&key)).unwrap().is_some());
    drop(store);
    let (ok, _, err) = bin(d, &["key", "create", "--name", "kiosk-1"], None);
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, out, _) = bin(d, &["key", "revoke", "kiosk-1"], None);
    assert!(ok && out.contains("revoked"));
    assert!(bin(d, &["key", "list"], None).1.contains("revoked"));

    let (ok, _, err) = bin(d, &["account", "create", "bob"], Some("short\n"));
    assert!(!ok && err.contains("at least 8"), "{err}");
    let (ok, _, _) = bin(d, &["account", "create", "bob"], Some("a long password\n"));
    assert!(ok);
    let raw = std::fs::read(d.join("cli.db")).unwrap();
    assert!(
        !raw.windows(15).any(|w| w == b"a long password"),
        "plaintext password stored"
    );
    let (ok, out, _) = bin(d, &["account", "disable", "bob"], None);
    assert!(ok && out.contains("disabled"));
    assert!(bin(d, &["account", "list"], None).1.contains("disabled"));
    assert!(!bin(d, &["account", "disable", "nobody"], None).0);
    // A typo in the environment is refused, not ignored.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_museum-agent"));
    let out = cmd
        .env("MUSEUM_AGENT__LLM__MODLE", "x")
        .current_dir(d)
        .args(["key", "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

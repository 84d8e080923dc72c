//! tools/audit.py, the offline dependency audit of tools/test.sh: it fails
//! on a known vulnerability in a lockfile (rustls-webpki 0.102.8, which
//! rumqttc brought in before the shim of third_party/), passes the
//! project's own lockfiles, and skips path packages.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs the audit on `lockfiles` (none: the project's own); exit code and
/// output.
fn audit(lockfiles: &[&Path]) -> (i32, String) {
    let out = Command::new("python3")
        .arg(repo().join("tools/audit.py"))
        .args(lockfiles)
        .output()
        .expect("python3 runs (tools/test.sh needs it too)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn lockfile(dir: &Path, packages: &[(&str, &str, bool)]) -> PathBuf {
    let mut text = String::from("version = 4\n");
    for (name, version, registry) in packages {
        text.push_str(&format!("\n[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n"));
        if *registry {
            text.push_str("source = \"registry+https://github.com/rust-lang/crates.io-index\"\n");
        }
    }
    let path = dir.join(format!("lock-{}.lock", packages.len()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_lockfile_with_rustls_webpki_0_102_8_fails_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lockfile(dir.path(), &[("rustls-webpki", "0.102.8", true), ("serde", "1.0.200", true)]);
    let (code, out) = audit(&[&lock]);
    assert_eq!(code, 1, "{out}");
    for id in ["RUSTSEC-2026-0098", "RUSTSEC-2026-0099"] {
        assert!(out.contains(&format!("VULNERABLE: {}: rustls-webpki 0.102.8: {id}", lock.display())), "{out}");
    }
    assert!(out.contains("patched: >= 0.103.12"), "{out}");
}

#[test]
fn patched_versions_path_packages_and_the_projects_lockfiles_pass() {
    let dir = tempfile::tempdir().unwrap();
    let lock = lockfile(
        dir.path(),
        &[
            ("rustls-webpki", "0.103.17", true),
            // A shim from a path is no registry release: not checked.
            ("rumqttc-shim-like", "0.1.0", false),
            ("rustls-webpki", "0.104.0-alpha.7", true),
        ],
    );
    let (code, out) = audit(&[&lock]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 registry packages in 1 lockfile(s)"), "{out}");
    // A pre-release below the patched one is caught.
    let alpha = lockfile(dir.path(), &[("rustls-webpki", "0.104.0-alpha.5", true)]);
    let (code, out) = audit(&[&alpha]);
    assert_eq!(code, 1, "{out}");
    // The project's own Cargo.lock and fuzz/Cargo.lock, as tools/test.sh runs it.
    let (code, out) = audit(&[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("in 2 lockfile(s)") && out.contains("): 0 vulnerable,"), "{out}");
}

#[test]
fn an_unreadable_lockfile_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.lock");
    std::fs::write(&bad, "[[package]\nname = ").unwrap();
    let (code, out) = audit(&[&bad]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains(&format!("audit: cannot read {}", bad.display())), "{out}");
}

//! `--wait` and `--no-wait` of the built `ank`: both typed is a usage error
//! (exit 2) whose usage line shows no flag the environment set; a typed one
//! beats the other from the environment.

use std::process::Command;

fn ank() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ank"));
    for var in ["ANK_WAIT", "ANK_NO_WAIT", "ANK_INSECURE", "ANK_CONFIG"] {
        c.env_remove(var);
    }
    // No config file of the machine interferes.
    c.env("HOME", env!("CARGO_TARGET_TMPDIR"));
    c
}

#[test]
fn both_typed_is_a_usage_error_without_flags_from_the_environment() {
    let out = ank().env("ANK_INSECURE", "true").args(["--wait", "--no-wait", "apply", "x.yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the argument '--wait' cannot be used with '--no-wait'"), "{err}");
    assert!(!err.contains("--insecure"), "a flag only the environment set is not in the usage line: {err}");
}

#[test]
fn a_typed_flag_beats_the_other_from_the_environment() {
    // Nothing listens on port 1: past the parsing, the command fails to connect (exit 1, not 2).
    let out = ank()
        .env("ANK_WAIT", "1")
        .args(["-k", "--no-wait", "-s", "http://127.0.0.1:1", "--response-timeout", "500", "get", "workloads"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = ank().env("ANK_WAIT", "1").env("ANK_NO_WAIT", "1").args(["-k", "get", "workloads"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "both in the environment: {out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ANK_WAIT and ANK_NO_WAIT are both set"), "{err}");
}

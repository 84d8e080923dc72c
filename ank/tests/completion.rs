//! Shell completion of the built `ank`: `COMPLETE=bash ank` prints the
//! shell code, and the shell's call back completes subcommands.

use std::process::Command;

fn ank() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ank"))
}

#[test]
fn completion_script_and_candidates_come_from_the_binary() {
    let script = ank().env("COMPLETE", "bash").output().expect("ank runs");
    assert!(script.status.success());
    let text = String::from_utf8_lossy(&script.stdout);
    assert!(text.contains("complete") && text.contains("ank"), "{text}");

    // What bash runs on `ank lo<TAB>` (clap_complete's protocol).
    let out = ank()
        .env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", "1")
        .env("_CLAP_COMPLETE_COMP_TYPE", "9")
        .env("_CLAP_COMPLETE_SPACE", "true")
        .env("_CLAP_IFS", "\n")
        .args(["--", "ank", "lo"])
        .output()
        .expect("ank completes");
    let candidates = String::from_utf8_lossy(&out.stdout);
    assert_eq!(candidates.trim(), "logs", "{candidates:?}");
}

//! End to end with the built binaries and real podman: the short scenarios
//! of the twin harness (tests/twin/*.twin) run against our binaries and are
//! compared with the goldens recorded from Eclipse Ankaios
//! (`tests/harness/twin.sh --check target/debug`). Each scenario starts its own
//! server and agents on a free port and removes only the containers of its
//! agents. The long set (`--long`) is run by hand before a release, see
//! tests/twin/README.md.

use std::path::Path;
use std::process::Command;

use ank_tests::binaries::{bin, bin_dir};

#[test]
fn twin_short_scenarios_match_the_reference_goldens() {
    for b in ["ank-server", "ank-agent", "ank"] {
        bin(b);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = tempfile::tempdir().expect("temp dir");
    let run = Command::new("bash")
        .arg(root.join("tests/harness/twin.sh"))
        .arg("--check")
        .arg(bin_dir())
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run tests/harness/twin.sh");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut diffs = String::new();
    for entry in std::fs::read_dir(out.path()).expect("twin output folder").flatten() {
        if entry.path().extension().is_some_and(|e| e == "diff") {
            diffs.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    assert!(
        run.status.success(),
        "twin scenarios differ from the reference's goldens:\n{stdout}\n{}\n{diffs}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains(" same "), "no scenario ran:\n{stdout}");
}

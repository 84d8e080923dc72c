//! The documentation's command examples, run (tier: end to end, built
//! binaries and real podman). A doc example that drifts from the binary
//! fails here, naming the document, the line and the difference.

use std::path::PathBuf;

#[test]
fn the_docs_command_examples_run_as_shown() {
    ank_tests::require_podman();
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&docs)
        .expect("read docs/")
        .map(|e| e.expect("docs entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    // ANK_DOCTEST_ONLY=jobs.md runs one document (while writing it).
    let only = std::env::var("ANK_DOCTEST_ONLY").ok();
    if let Some(only) = &only {
        files.retain(|f| f.file_name().is_some_and(|n| n.to_string_lossy() == *only));
    }
    let (mut commands, mut checked, mut failures, mut skipped) = (0, 0, Vec::new(), Vec::new());
    for file in &files {
        let o = ank_tests::doctest::run_document(file);
        if o.commands > 0 || !o.skipped.is_empty() || !o.failures.is_empty() {
            eprintln!(
                "{}: {} commands run, {} outputs checked, {} examples skipped",
                file.file_name().unwrap_or_default().to_string_lossy(),
                o.commands,
                o.outputs_checked,
                o.skipped.len()
            );
        }
        for f in &o.failures {
            eprintln!("FAILED {f}");
        }
        commands += o.commands;
        checked += o.outputs_checked;
        failures.extend(o.failures);
        skipped.extend(o.skipped);
    }
    for (at, reason) in &skipped {
        eprintln!("skipped {at}: {reason}");
    }
    eprintln!("docs: {commands} commands run, {checked} outputs checked, {} examples skipped", skipped.len());
    assert!(
        failures.is_empty(),
        "{} doc example(s) drifted from the binaries:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // A parser that finds nothing would pass vacuously.
    assert!(
        only.is_some() || commands >= 20 && checked >= 5,
        "too few doc examples found: {commands} commands, {checked} outputs"
    );
}

//! `ank apply` checks manifests against schema/ank_schema.json as Eclipse
//! Ankaios' `ank apply` checks against its `ank_schema.json`: wrong types
//! and unknown enum values are refused with Ankaios' message shape and
//! exit 1; every manifest of examples/ and docs/ passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use ank_cli::manifest_schema::check;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The error text `check` gives for `manifest`, or `None` when it passes.
fn violations(manifest: &str) -> Option<String> {
    check(manifest).err().map(|e| e.to_string())
}

fn workload(fields: &str) -> String {
    format!("apiVersion: v1\nworkloads:\n  x:\n    agent: agent_A\n    runtime: podman\n{fields}")
}

/// The line Ankaios' schema adds under every violation inside `workloads`
/// (the map may also be empty, and this value is not that).
fn not_null(workloads: &str) -> String {
    format!("'/workloads': {workloads} is not of type \"null\"")
}

const X: &str = r#"{"x":{"agent":"agent_A","runtime":"podman","runtimeConfig":5}}"#;

#[test]
fn a_number_as_runtime_config_is_refused_as_ankaios_words_it() {
    assert_eq!(
        violations(&workload("    runtimeConfig: 5\n")),
        Some(format!(
            "Manifest schema validation failed:\n'/workloads/x/runtimeConfig': 5 is not of type \"string\"\n{}",
            not_null(X)
        ))
    );
}

#[test]
fn wrong_types_and_unknown_enum_values_of_ankaios_fields_are_refused() {
    let cases = [
        (
            "    runtimeConfig: ''\n    restartPolicy: SOMETIMES\n",
            "'/workloads/x/restartPolicy': \"NEVER\" was expected\n'/workloads/x/restartPolicy': \"ON_FAILURE\" was expected\n\
             '/workloads/x/restartPolicy': \"ALWAYS\" was expected",
        ),
        (
            "    runtimeConfig: ''\n    tags:\n      owner: 7\n",
            "'/workloads/x/tags/owner': 7 is not of type \"string\"",
        ),
        (
            "    runtimeConfig: ''\n    dependencies:\n      y: ADD_COND_DONE\n",
            "'/workloads/x/dependencies/y': \"ADD_COND_RUNNING\" was expected\n\
             '/workloads/x/dependencies/y': \"ADD_COND_SUCCEEDED\" was expected\n\
             '/workloads/x/dependencies/y': \"ADD_COND_FAILED\" was expected",
        ),
        ("    runtimeConfig: [a]\n", "'/workloads/x/runtimeConfig': [\"a\"] is not of type \"string\""),
        ("    runtimeConfig: true\n", "'/workloads/x/runtimeConfig': true is not of type \"string\""),
        (
            "    runtimeConfig: ''\n    files:\n      - data: x\n",
            "'/workloads/x/files/0': \"mountPoint\" is a required property",
        ),
    ];
    for (fields, expected) in cases {
        let text = violations(&workload(fields)).unwrap_or_else(|| panic!("refused: {fields}"));
        let prefix = format!("Manifest schema validation failed:\n{expected}\n'/workloads': {{\"x\":");
        assert!(text.starts_with(&prefix), "{fields}: {text}");
        assert!(text.ends_with(" is not of type \"null\""), "{fields}: {text}");
        assert_eq!(text.lines().count(), expected.lines().count() + 2, "{fields}: {text}");
    }
}

#[test]
fn names_and_shapes_ankaios_constrains_are_refused_as_it_words_them() {
    let cases = [
        (
            "apiVersion: v1\nworkloads: 5\n",
            "'/workloads': 5 is not of type \"object\"\n'/workloads': 5 is not of type \"null\"",
        ),
        (
            "apiVersion: v1\nworkloads:\n  bad.name:\n    runtime: podman\n    runtimeConfig: ''\n",
            "'/workloads': \"bad.name\" does not match \"^[a-zA-Z0-9_-]+$\"\n\
             '/workloads': {\"bad.name\":{\"runtime\":\"podman\",\"runtimeConfig\":\"\"}} is not of type \"null\"",
        ),
        ("apiVersion: v2\n", "'/apiVersion': \"v2\" does not match \"^v1$\""),
        ("workloads: {}\n", "'': \"apiVersion\" is a required property"),
        (
            "apiVersion: v1\nconfigs:\n  c: 5\n",
            "'/configs/c': 5 is not of type \"string\"\n'/configs/c': 5 is not of type \"array\"\n\
             '/configs/c': 5 is not of type \"object\"\n'/configs': {\"c\":5} is not of type \"null\"",
        ),
        // A workload without runtimeConfig: Ankaios' validator reports only
        // that the map is not empty (its check of `required` stays silent).
        (
            "apiVersion: v1\nworkloads:\n  x:\n    runtime: podman\n",
            "'/workloads': {\"x\":{\"runtime\":\"podman\"}} is not of type \"null\"",
        ),
    ];
    for (manifest, expected) in cases {
        assert_eq!(violations(manifest), Some(format!("Manifest schema validation failed:\n{expected}")), "{manifest}");
    }
    assert_eq!(violations("apiVersion: v1\nworkloads:\nconfigs:\n"), None, "empty maps are allowed");
}

#[test]
fn a_plain_ankaios_manifest_passes_and_unknown_fields_are_left_to_the_parser() {
    let manifest = workload(
        "    runtimeConfig: |\n      image: busybox\n    restartPolicy: ON_FAILURE\n    tags:\n      owner: me\n    \
         dependencies:\n      y: ADD_COND_RUNNING\n    controlInterfaceAccess:\n      allowRules:\n        - type: StateRule\n          \
         operation: Read\n          filterMasks: [desiredState]\n    files:\n      - mountPoint: /a\n        data: text\n    \
         someFieldOfANewerAnkaios: 1\n",
    );
    assert_eq!(violations(&manifest), None);
    assert_eq!(violations("apiVersion: v0.1\nworkloads:\n  x:\n    runtimeConfig: 5\n"), None, "v0.1 is not checked");
    assert_eq!(violations("not: [valid"), None, "YAML errors are the parser's");
}

#[test]
fn extension_fields_are_checked_too() {
    let text = violations(&workload("    runtimeConfig: ''\n    priority: high\n")).expect("refused");
    assert!(
        text.starts_with("Manifest schema validation failed:\n'/workloads/x/priority': \"high\" is not of type"),
        "{text}"
    );
    let text = violations(&workload("    runtimeConfig: ''\n    migration: sometimes\n")).expect("refused");
    assert!(text.contains("'/workloads/x/migration': \"onAgentLoss\" was expected"), "{text}");
}

/// The manifests of a Markdown file: the ```yaml blocks that start one.
fn doc_manifests(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in text.lines() {
        match block.as_mut() {
            None if line.trim_start().starts_with("```yaml") || line.trim_start().starts_with("```yml") => {
                block = Some(String::new());
            }
            None => {}
            Some(_) if line.trim_start().starts_with("```") => {
                let body = block.take().unwrap_or_default();
                if body.lines().any(|l| l.starts_with("apiVersion:")) {
                    out.push(body);
                }
            }
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    out
}

#[test]
fn every_manifest_in_examples_and_docs_passes() {
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    let examples = repo().join("examples");
    // The startup manifest the package installs, too.
    let mut files: Vec<PathBuf> = vec![repo().join("packaging/etc/ankaios/state.yaml")];
    let mut dirs = vec![examples];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("examples/ is readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                files.push(path);
            }
        }
    }
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        if !text.lines().any(|l| l.starts_with("apiVersion:")) {
            continue;
        }
        if let Some(e) = violations(&text) {
            failures.push(format!("{}: {e}", file.display()));
        }
        checked.push(file.display().to_string());
    }
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(repo().join("README.md"));
    for doc in docs {
        let text = std::fs::read_to_string(&doc).expect("readable");
        for (i, manifest) in doc_manifests(&text).into_iter().enumerate() {
            if let Some(e) = violations(&manifest) {
                failures.push(format!("{} (manifest {}): {e}", doc.display(), i + 1));
            }
            checked.push(format!("{}#{}", doc.display(), i + 1));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked.len() >= 15, "found only {} manifests: {checked:?}", checked.len());
}

#[test]
fn ank_apply_refuses_a_wrong_type_with_exit_1_before_contacting_a_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("m.yaml");
    std::fs::write(&file, workload("    runtimeConfig: 5\n")).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ank"))
        .env("HOME", dir.path())
        .args(["--insecure", "--server-url", "http://127.0.0.1:9", "apply"])
        .arg(&file)
        .output()
        .expect("ank runs");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: Command failed: 'Manifest schema validation failed:\n'/workloads/x/runtimeConfig': 5 is not of type \"string\"\n{}'\n",
            not_null(X)
        )
    );
}

#[test]
fn ank_apply_of_empty_workloads_and_configs_has_nothing_to_update_as_ankaios() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("empty.yaml");
    std::fs::write(&file, "apiVersion: v1\nworkloads:\nconfigs:\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ank"))
        .env("HOME", dir.path())
        .args(["--insecure", "--server-url", "http://127.0.0.1:9", "apply"])
        .arg(&file)
        .output()
        .expect("ank runs");
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stdout).as_ref()),
        (Some(0), "Nothing to update.\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

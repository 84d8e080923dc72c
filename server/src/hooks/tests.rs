//! Chains of real hook executables (shell scripts written to a temp dir).

use super::*;
use ank_proto::ank_base as pb;
use ank_proto::grpc_api as g;
use prost::Message;

fn script(dir: &std::path::Path, name: &str, body: &str) -> HookConfig {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    HookConfig { name: name.into(), prio: 0, path: dir.to_path_buf(), timeout: DEFAULT_TIMEOUT }
}

fn input() -> g::UpdateWorkload {
    let name = pb::WorkloadInstanceName { workload_name: "w".into(), agent_name: "A".into(), id: "1".into() };
    g::UpdateWorkload {
        added_workloads: vec![g::AddedWorkload {
            instance_name: Some(name),
            workload: Some(pb::Workload {
                runtime: Some("podman".into()),
                runtime_config: Some("image: x".into()),
                priority: Some(7),
                ..Default::default()
            }),
            generation: 0,
        }],
        deleted_workloads: vec![],
        resync: false,
    }
}

#[test]
fn hooks_registry_sorts_by_prio_stably() {
    let hook = |name: &str, prio| HookConfig { name: name.into(), prio, path: "/h".into(), timeout: DEFAULT_TIMEOUT };
    let r = HooksRegistry::new(vec![hook("c", 30), hook("a", 10), hook("first", 20), hook("second", 20)]);
    let names: Vec<&str> = r.hooks().iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["a", "first", "second", "c"]);
    assert!(HooksRegistry::default().is_empty());
}

#[tokio::test]
async fn hooks_noop_chain_returns_the_input_and_no_changes() {
    let dir = tempfile::tempdir().unwrap();
    let r = HooksRegistry::new(vec![script(dir.path(), "cat", "cat"), script(dir.path(), "cat2", "exec cat")]);
    let out = r.run(input()).await.unwrap();
    assert_eq!(out, HookOutcome { output: input(), changed_by: vec![] });
}

#[tokio::test]
async fn hooks_veto_carries_name_and_trimmed_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let r = HooksRegistry::new(vec![script(dir.path(), "deny", "echo '  no such image  ' >&2\nexit 1")]);
    let e = r.run(input()).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "Mutating hook 'deny' vetoed the state change: 'Hook 'deny' rejected the change: no such image'"
    );
    // The client gets Ankaios' answer to a veto.
    assert_eq!(
        e.rejection(),
        "Update rejected by mutating hook 'deny': 'Hook 'deny' rejected the change: no such image'"
    );
}

#[tokio::test]
async fn hooks_missing_executable_fails_naming_its_path() {
    let r = HooksRegistry::new(vec![HookConfig {
        name: "nope".into(),
        prio: 0,
        path: "/nonexistent/hooks".into(),
        timeout: DEFAULT_TIMEOUT,
    }]);
    let e = r.run(input()).await.unwrap_err().to_string();
    assert!(
        e.starts_with("Mutating hook 'nope' execution failed: 'Failed to execute hook '/nonexistent/hooks/nope': "),
        "{e}"
    );
}

#[tokio::test]
async fn hooks_killed_by_a_signal_or_answering_garbage_refuse_with_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let crash = HooksRegistry::new(vec![script(dir.path(), "crash", "echo 'about to crash' >&2\nkill -SEGV $$")]);
    let e = crash.run(input()).await.unwrap_err().to_string();
    assert_eq!(e, "Mutating hook 'crash' execution failed: 'Hook 'crash' was killed by signal 11: about to crash'");
    let garbage = HooksRegistry::new(vec![script(
        dir.path(),
        "garbage",
        "cat >/dev/null\necho oops >&2\nprintf '\\377\\377\\377'",
    )]);
    let e = garbage.run(input()).await.unwrap_err().to_string();
    assert!(
        e.starts_with("Resulting State is invalid, reason: 'Failed to decode protobuf output from hook 'garbage': "),
        "{e}"
    );
    assert!(e.ends_with(" (hook stderr: 'oops')"), "{e}");
}

// Paused clock: the timeout fires as soon as the loop has nothing else to do.
#[tokio::test(start_paused = true)]
async fn hooks_a_hook_past_its_timeout_is_killed_and_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let r = HooksRegistry::new(vec![script(dir.path(), "hang", "exec sleep 600")]);
    let e = r.run(input()).await.unwrap_err().to_string();
    assert_eq!(e, "Mutating hook 'hang' execution failed: 'no answer within 5000 ms; killed'");
}

#[tokio::test]
async fn hooks_a_changed_answer_is_decoded_and_keeps_our_extension_fields() {
    let dir = tempfile::tempdir().unwrap();
    // Answers a fixed message: the workload with another runtimeConfig and
    // no priority (as a hook built from Ankaios' proto would drop it).
    let mut answer = input();
    let wl = answer.added_workloads[0].workload.as_mut().unwrap();
    wl.runtime_config = Some("image: y".into());
    wl.priority = None;
    let answer_file = dir.path().join("answer.bin");
    std::fs::write(&answer_file, answer.encode_to_vec()).unwrap();
    let body = format!("cat >/dev/null\ncat '{}'", answer_file.display());
    let r = HooksRegistry::new(vec![script(dir.path(), "mutate", &body), script(dir.path(), "cat", "cat")]);
    let out = r.run(input()).await.unwrap();
    let wl = out.output.added_workloads[0].workload.as_ref().unwrap();
    assert_eq!((wl.runtime_config.as_deref(), wl.priority), (Some("image: y"), Some(7)));
    assert_eq!(out.changed_by, [("mutate".to_owned(), vec!["w".to_owned()])]);
}

// A hook entry whose file is missing or not executable is named at the
// server's start (the registry logs each problem as an error).
#[test]
fn a_missing_or_non_executable_hook_is_reported_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fine = script(dir.path(), "fine", "cat");
    assert_eq!(fine.problem(), None);
    let missing = HookConfig { name: "nope".into(), ..fine.clone() };
    let problem = missing.problem().unwrap();
    assert!(problem.starts_with(&format!("mutating hook 'nope': cannot use '{}' (", missing.executable().display())));
    assert!(problem.ends_with("; every change of the workloads is refused until it is there"), "{problem}");
    let plain = script(dir.path(), "plain", "cat");
    std::fs::set_permissions(plain.executable(), std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        plain.problem().unwrap(),
        format!(
            "mutating hook 'plain': '{}' is not an executable file; every change of the workloads is refused until it is there",
            plain.executable().display()
        )
    );
}

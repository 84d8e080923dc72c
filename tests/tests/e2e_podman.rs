//! End to end with the built binaries and real podman: `ank apply` runs
//! workloads, `podman ps` shows them with our labels, a failing workload is
//! reported Failed(ExecFailed), delete removes container and row, a
//! container removed or killed behind the agent's back is noticed from the
//! event log and exit files, and bad manifests are rejected without
//! touching the server's state.

use std::process::Command;
use std::time::{Duration, Instant};

use ank_tests::binaries::{Cluster, bin};

const IMAGE: &str = "localhost/busybox:latest";

fn agent_name(test: &str) -> String {
    format!("e2e_{test}_{}", std::process::id())
}

fn workload(name: &str, agent: &str, args: &str) -> String {
    format!(
        "  {name}:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: {args}\n"
    )
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn state_of(c: &Cluster, name: &str) -> Option<String> {
    c.workload_rows().into_iter().find(|(n, _)| n == name).map(|(_, s)| s)
}

#[test]
// [stest->swdd~agent-supports-podman~2]
// [stest->swdd~podman-create-workload-runs-workload~1]
// [stest->swdd~podman-delete-workload-stops-and-removes-workload~1]
// [stest->swdd~podman-create-workload-sets-optionally-container-name~1]
fn e2e_podman_apply_two_workloads_runs_them_with_labels_then_delete_removes_them() {
    let agent = agent_name("apply");
    let c = Cluster::start(&agent, None);
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}",
        workload("web", &agent, "[\"sleep\", \"100000\"]"),
        workload("db", &agent, "[\"sleep\", \"100001\"]")
    );
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", stderr(&o));
    c.wait_until(Duration::from_secs(30), |c| {
        state_of(c, "web").as_deref() == Some("Running(Ok)") && state_of(c, "db").as_deref() == Some("Running(Ok)")
    });

    let containers = c.containers();
    assert_eq!(containers.len(), 2, "podman ps: {containers:?}");
    let state = c.ank(&["get", "state", "-o", "json"]);
    let state: serde_json::Value = serde_json::from_slice(&state.stdout).expect("get state -o json is JSON");
    for ctr in &containers {
        let labels = &ctr["Labels"];
        assert_eq!(labels["agent"], agent.as_str());
        let instance = labels["name"].as_str().expect("name label");
        let parts: Vec<&str> = instance.split('.').collect();
        assert_eq!(parts.len(), 3, "{instance}");
        assert_eq!(parts[2], agent);
        assert!(state["workloadStates"][&agent][parts[0]][parts[1]].is_object(), "{instance} not in {state}");
        assert_eq!(ctr["State"], "running");
    }

    let o = c.ank(&["get", "workloads", "-o", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("get workloads -o json is JSON");
    assert_eq!(rows.as_array().map(Vec::len), Some(2), "{rows}");
    assert_eq!(rows[1]["name"], "web");
    assert_eq!(rows[1]["executionState"]["state"], "Running");
    let o = c.ank(&["get", "agents", "-o", "yaml"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("name: {agent}")), "{o:?}");

    let o = c.ank(&["delete", "workload", "web"]);
    assert!(o.status.success(), "delete failed: {}", stderr(&o));
    c.wait_until(Duration::from_secs(30), |c| state_of(c, "web").is_none() && c.containers().len() == 1);
    assert_eq!(state_of(&c, "db").as_deref(), Some("Running(Ok)"));
}

#[test]
fn e2e_podman_workload_exiting_1_is_reported_failed_exec_failed() {
    let agent = agent_name("fail");
    let c = Cluster::start(&agent, None);
    let manifest =
        format!("apiVersion: v1\nworkloads:\n{}", workload("failer", &agent, "[\"sh\", \"-c\", \"exit 1\"]"));
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", stderr(&o));
    c.wait_until(Duration::from_secs(30), |c| state_of(c, "failer").as_deref() == Some("Failed(ExecFailed)"));
}

/// The id of the container of workload `name`.
fn container_id(c: &Cluster, name: &str) -> String {
    let prefix = format!("{name}.");
    c.containers()
        .iter()
        .find(|ctr| ctr["Labels"]["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
        .and_then(|ctr| ctr["Id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no container of {name}"))
}

/// The command lines of the agent's child processes.
fn agent_children(pid: u32) -> Vec<String> {
    let o = Command::new("pgrep").args(["-P", &pid.to_string()]).output().expect("pgrep");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .filter_map(|child| std::fs::read(format!("/proc/{child}/cmdline")).ok())
        .map(|argv| String::from_utf8_lossy(&argv).replace('\0', " "))
        .collect()
}

/// Runs `podman ARGS` behind the agent's back; returns how long podman
/// took and how much longer until `ank get workloads` shows `name` in `state`.
fn notice_delay(c: &Cluster, name: &str, state: &str, args: &[&str]) -> (Duration, Duration) {
    let started = Instant::now();
    let o = Command::new("podman").args(args).output().expect("podman");
    assert!(o.status.success(), "podman {args:?}: {}", stderr(&o));
    let podman = started.elapsed();
    c.wait_until(Duration::from_secs(30), |c| state_of(c, name).as_deref() == Some(state));
    (podman, started.elapsed() - podman)
}

/// Removes one workload's container and kills another's behind the
/// agent's back and waits for the agent to report it. The agent reconciles
/// only once an hour: only podman's events (`event_args` say from where)
/// and conmon's exit files can explain a notice within the test.
fn removed_or_killed_behind_the_agents_back(test: &str, event_args: &[&str]) {
    let agent = agent_name(test);
    let mut args = vec!["--podman-reconcile-interval", "1h"];
    args.extend_from_slice(event_args);
    let c = Cluster::start_with(&agent, None, &args);
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}",
        workload("removed", &agent, "[\"sleep\", \"100004\"]"),
        workload("killed", &agent, "[\"sleep\", \"100005\"]")
    );
    assert!(c.ank_stdin(&["apply", "-"], Some(&manifest)).status.success());
    c.wait_until(Duration::from_secs(30), |c| {
        state_of(c, "removed").as_deref() == Some("Running(Ok)")
            && state_of(c, "killed").as_deref() == Some("Running(Ok)")
    });
    let backend = Command::new("podman").args(["info", "--format", "{{.Host.EventLogger}}"]).output().expect("podman");
    if event_args.is_empty() && String::from_utf8_lossy(&backend.stdout).trim() == "file" {
        let children = agent_children(c.agent_pid().expect("agent pid"));
        assert!(!children.iter().any(|argv| argv.contains("podman")), "a podman child stays alive: {children:?}");
    }

    let id = container_id(&c, "removed");
    let removed = notice_delay(&c, "removed", "Failed(Lost)", &["rm", "-f", "-t", "0", &id]);
    let id = container_id(&c, "killed");
    let killed = notice_delay(&c, "killed", "Failed(ExecFailed)", &["kill", &id]);
    // Measured, not asserted (polling `ank get workloads` every 100 ms adds up to that much).
    for ((podman, notice), what) in [(removed, "rm -f"), (killed, "kill")] {
        println!("{test}: podman {what} took {podman:?}; the new state was shown {notice:?} after it returned");
    }
}

#[test]
fn e2e_podman_container_removed_or_killed_behind_the_agents_back_is_noticed_without_a_reconcile() {
    removed_or_killed_behind_the_agents_back("behind", &[]);
}

#[test]
fn e2e_podman_the_podman_events_fallback_notices_a_container_removed_or_killed_behind_the_agents_back() {
    removed_or_killed_behind_the_agents_back("behind_child", &["--podman-events-child"]);
}

#[test]
fn e2e_podman_startup_manifest_workload_runs() {
    let agent = agent_name("startup");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("startup.yaml");
    let manifest = format!("apiVersion: v1\nworkloads:\n{}", workload("boot", &agent, "[\"sleep\", \"100002\"]"));
    std::fs::write(&path, manifest).expect("write manifest");
    let c = Cluster::start(&agent, Some(&path));
    c.wait_until(Duration::from_secs(30), |c| state_of(c, "boot").as_deref() == Some("Running(Ok)"));
}

#[test]
fn e2e_podman_bad_manifests_are_rejected_and_state_is_unchanged() {
    let agent = agent_name("bad");
    let c = Cluster::start(&agent, None);
    let good = format!("apiVersion: v1\nworkloads:\n{}", workload("keep", &agent, "[\"sleep\", \"100003\"]"));
    assert!(c.ank_stdin(&["apply", "-"], Some(&good)).status.success());
    let before = stdout(&c.ank(&["get", "state", "-o", "json", "desiredState"]));

    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        // Ankaios' schema check comes first, with Ankaios' message.
        (
            "version.yaml",
            "apiVersion: v2\nworkloads: {}\n",
            vec!["Manifest schema validation failed:", "'/apiVersion': \"v2\" does not match \"^v1$\""],
        ),
        (
            "unknown.yaml",
            &*good.replace("    restartPolicy", "    colour: red\n    restartPolicy"),
            vec!["unknown.yaml", "line 6", "colour"],
        ),
        (
            "name.yaml",
            &*good.replace("  keep:", "  ke.ep:"),
            vec!["Manifest schema validation failed:", "\"ke.ep\" does not match \"^[a-zA-Z0-9_-]+$\""],
        ),
        ("dup.yaml", &*format!("{good}{}", workload("keep", &agent, "[\"true\"]")), vec!["dup.yaml", "line 10"]),
        ("broken.yaml", "apiVersion: v1\nworkloads:\n  a: [\n", vec!["broken.yaml", "line"]),
    ];
    for (file, text, expected) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, text).expect("write manifest");
        // Unknown fields are refused only in strict mode (Ankaios ignores them).
        let o = c.ank(&["apply", "--strict", path.to_str().expect("utf-8 path")]);
        assert!(!o.status.success(), "{file}: apply must fail");
        let err = stderr(&o);
        for needle in expected {
            assert!(err.contains(needle), "{file}: stderr {err:?} lacks {needle:?}");
        }
    }
    assert_eq!(stdout(&c.ank(&["get", "state", "-o", "json", "desiredState"])), before, "state changed");
    assert!(c.ank(&["get", "workloads"]).status.success(), "server must keep serving");
    // By default an unknown field is ignored with a warning naming file, line and field.
    let path = dir.path().join("lenient.yaml");
    std::fs::write(&path, good.replace("    restartPolicy", "    colour: red\n    restartPolicy")).expect("write");
    let o = c.ank(&["apply", path.to_str().expect("utf-8 path")]);
    assert!(o.status.success(), "lenient apply: {}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("lenient.yaml") && err.contains("line 6") && err.contains("colour"), "{err}");
}

#[test]
// [stest->swdd~agent-fails-on-missing-file-paths-and-insecure-cli-arguments~1]
// [stest->swdd~agent-supports-cli-argument-for-insecure-communication~1]
fn e2e_daemons_refuse_to_start_without_insecure() {
    for name in ["ank-server", "ank-agent"] {
        let mut cmd = std::process::Command::new(bin(name));
        if name == "ank-agent" {
            cmd.args(["--name", "x"]);
        }
        let o = cmd.output().expect("run daemon");
        assert!(!o.status.success(), "{name} must refuse to start");
        assert!(stderr(&o).contains("--insecure"), "{name}: {}", stderr(&o));
    }
}

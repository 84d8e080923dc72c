//! End to end with the built binaries and real podman: an agent killed with
//! SIGKILL under 50 running workloads and started again takes over its
//! containers without restarting them, replaces those whose configuration
//! changed meanwhile and removes those deleted meanwhile. A server killed
//! with SIGKILL and started again from its `--state-file` serves the same
//! desired state, and its agent reconnects without restarting anything.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_tests::binaries::{Cluster, ClusterOptions};

const IMAGE: &str = "localhost/busybox:latest";

fn workload(name: &str, agent: &str, sleep: u32) -> String {
    format!(
        "  {name}:\n    runtime: podman\n    agent: {agent}\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sleep\", \"{sleep}\"]\n"
    )
}

fn manifest(agent: &str, workloads: &[(&str, u32)]) -> String {
    let body: String = workloads.iter().map(|(n, s)| workload(n, agent, *s)).collect();
    format!("apiVersion: v1\nworkloads:\n{body}")
}

/// Workload name -> (container id, StartedAt) of the agent's containers.
fn containers_by_workload(c: &Cluster) -> BTreeMap<String, (String, i64)> {
    c.containers()
        .iter()
        .filter_map(|ctr| {
            let name = ctr["Labels"]["name"].as_str()?.split('.').next()?.to_owned();
            Some((name, (ctr["Id"].as_str()?.to_owned(), ctr["StartedAt"].as_i64()?)))
        })
        .collect()
}

fn all_running(c: &Cluster, names: &[String]) -> bool {
    let rows = c.workload_rows();
    names.iter().all(|n| rows.iter().any(|(r, s)| r == n && s == "Running(Ok)"))
}

#[test]
// [stest->swdd~agent-existing-workloads-resume-existing~2]
// [stest->swdd~agent-resume-workload~2]
fn e2e_resume_after_kill_9_keeps_50_containers_running_untouched() {
    let agent = format!("e2e_resume_{}", std::process::id());
    let mut c = Cluster::start(&agent, None);
    let names: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
    let specs: Vec<(&str, u32)> = names.iter().map(|n| (n.as_str(), 100_000)).collect();
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent, &specs)));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(120), |c| all_running(c, &names));
    let before = containers_by_workload(&c);
    assert_eq!(before.len(), 50, "{before:?}");

    c.kill_agent();
    c.wait_until(Duration::from_secs(20), |c| {
        let o = c.ank(&["get", "agents"]);
        o.status.success() && !String::from_utf8_lossy(&o.stdout).contains(&c.agent)
    });
    c.start_agent();
    c.wait_until(Duration::from_secs(60), |c| all_running(c, &names));
    let after = containers_by_workload(&c);
    assert_eq!(after, before, "same containers, none restarted, none lost");
    assert_eq!(c.workload_rows().len(), 50, "every workload listed once");
}

#[test]
fn e2e_a_server_restarted_from_its_state_file_serves_the_same_state_and_restarts_nothing() {
    let agent = format!("e2e_srv_restart_{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let state_file = dir.path().join("state.json");
    let server_args = ["--state-file", state_file.to_str().unwrap()];
    let mut c = Cluster::start_opts(&agent, ClusterOptions { server_args: &server_args, ..Default::default() });
    let names: Vec<String> = (0..5).map(|i| format!("w{i}")).collect();
    let specs: Vec<(&str, u32)> = names.iter().map(|n| (n.as_str(), 100_000)).collect();
    let with_config = format!("{}configs:\n  greeting:\n    text: hello\n", manifest(&agent, &specs));
    let o = c.ank_stdin(&["apply", "-"], Some(&with_config));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(60), |c| all_running(c, &names));
    let desired = |c: &Cluster| {
        let o = c.ank(&["get", "state", "-o", "json", "desiredState"]);
        assert!(o.status.success(), "get state: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("json state")
    };
    let state_before = desired(&c);
    let before = containers_by_workload(&c);

    c.kill_server();
    c.start_server();
    c.wait_for_agent(Duration::from_secs(20));
    c.wait_until(Duration::from_secs(30), |c| all_running(c, &names));
    assert_eq!(desired(&c), state_before, "the same desired state, configs included");
    assert_eq!(containers_by_workload(&c), before, "no workload restarted");
}

#[test]
// [stest->swdd~agent-existing-workloads-delete-unneeded~1]
// [stest->swdd~agent-existing-workloads-replace-updated~2]
fn e2e_resume_applies_changes_made_while_the_agent_was_away() {
    let agent = format!("e2e_resume_chg_{}", std::process::id());
    let mut c = Cluster::start(&agent, None);
    let o = c.ank_stdin(
        &["apply", "-"],
        Some(&manifest(&agent, &[("keep", 100_000), ("change", 100_001), ("drop", 100_002)])),
    );
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    let three = ["keep".to_owned(), "change".to_owned(), "drop".to_owned()];
    c.wait_until(Duration::from_secs(60), |c| all_running(c, &three));
    let before = containers_by_workload(&c);

    c.kill_agent();
    let o = c.ank(&["delete", "workload", "drop", "--no-wait"]);
    assert!(o.status.success(), "delete: {}", String::from_utf8_lossy(&o.stderr));
    let o = c.ank_stdin(&["apply", "--no-wait", "-"], Some(&manifest(&agent, &[("change", 200_001)])));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.start_agent();

    let two = ["keep".to_owned(), "change".to_owned()];
    // Instances deleted meanwhile stay (AgentDisconnected) until the agent
    // confirms their removal; then the rows are exactly the two.
    c.wait_until(Duration::from_secs(30), |c| {
        all_running(c, &two) && containers_by_workload(c).len() == 2 && c.workload_rows().len() == 2
    });
    let after = containers_by_workload(&c);
    assert_eq!(after["keep"], before["keep"], "unchanged workload resumed");
    assert_ne!(after["change"].0, before["change"].0, "changed workload replaced");
    assert!(!after.contains_key("drop"), "deleted workload removed: {after:?}");
    assert!(c.workload_rows().iter().all(|(n, _)| n != "drop"), "no ghost row: {:?}", c.workload_rows());
}

/// Processes whose command line mentions `needle` (from /proc).
fn processes_with(needle: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmd| cmd.contains(needle))
        .collect()
}

#[test]
fn e2e_a_killed_agent_leaves_no_podman_events_process_behind() {
    let agent = format!("e2e_orphan_{}", std::process::id());
    // The `podman events` child is the fallback where podman's event log
    // cannot be read; asked for here.
    let mut c = ank_tests::binaries::Cluster::start_with(&agent, None, &["--podman-events-child"]);
    let needle = format!("label=agent={agent}");
    c.wait_until(std::time::Duration::from_secs(10), |_| !processes_with(&needle).is_empty());
    c.kill_agent();
    c.wait_until(std::time::Duration::from_secs(10), |_| processes_with(&needle).is_empty());
}

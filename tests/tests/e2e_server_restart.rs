//! End to end with the built binaries and real podman: a server with a
//! `--state-file`, killed with `kill -9` (or stopped with SIGTERM) under 20
//! running workloads (some with dependencies, restart policies NEVER,
//! ON_FAILURE and ALWAYS) and started again on the same state file, reports
//! every workload `Running(Ok)` again, and its agent restarts none of them:
//! the same container ids, main process ids and start times as before.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_tests::binaries::{Cluster, ClusterOptions};
use ank_tests::container_facts::{ContainerFacts, facts_of};

const IMAGE: &str = "localhost/busybox:latest";
const COUNT: usize = 20;
const POLICIES: [&str; 3] = ["NEVER", "ON_FAILURE", "ALWAYS"];

/// 20 workloads `s00`..`s19`: the policies in turn; `s01`..`s03` wait for
/// `s00` to run, `s05` for `s04`.
fn manifest(agent: &str) -> String {
    let mut text = String::from("apiVersion: v1\nworkloads:\n");
    for i in 0..COUNT {
        text.push_str(&format!(
            "  s{i:02}:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: {}\n",
            POLICIES[i % 3]
        ));
        let needs = match i {
            1..=3 => Some("s00"),
            5 => Some("s04"),
            _ => None,
        };
        if let Some(dep) = needs {
            text.push_str(&format!("    dependencies:\n      {dep}: ADD_COND_RUNNING\n"));
        }
        text.push_str(&format!(
            "    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sleep\", \"{}\"]\n",
            100_000 + i
        ));
    }
    text
}

fn names() -> Vec<String> {
    (0..COUNT).map(|i| format!("s{i:02}")).collect()
}

/// The workloads of `names` not reported `Running(Ok)`, with what is.
fn not_running(c: &Cluster, names: &[String]) -> Vec<String> {
    let rows = c.workload_rows();
    names
        .iter()
        .filter_map(|n| match rows.iter().find(|(r, _)| r == n) {
            Some((_, s)) if s == "Running(Ok)" => None,
            Some((_, s)) => Some(format!("{n}: {s}")),
            None => Some(format!("{n}: not listed")),
        })
        .collect()
}

/// Container identity (id, pid, start time) by instance name; every
/// container's main process must be alive.
fn identities(agent: &str) -> BTreeMap<String, (String, i32, String)> {
    let facts = facts_of(agent);
    let dead: Vec<&ContainerFacts> = facts.iter().filter(|f| !f.process_alive()).collect();
    assert!(dead.is_empty(), "containers whose main process is not alive: {dead:#?}");
    facts.iter().map(|f| (f.instance.clone(), f.identity())).collect()
}

#[derive(Clone, Copy, Debug)]
enum Stop {
    Kill9,
    Sigterm,
}

fn server_restart_restarts_nothing(stop: Stop, tag: &str) {
    let began = std::time::Instant::now();
    let agent = format!("e2e_srv_{tag}_{}", std::process::id());
    let dir = tempfile::tempdir().expect("temp dir");
    let state_file = dir.path().join("state.json");
    let server_args = ["--state-file", state_file.to_str().expect("utf-8 path")];
    let mut c = Cluster::start_opts(&agent, ClusterOptions { server_args: &server_args, ..Default::default() });
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent)));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    let names = names();
    ank_tests::poll_until_none(Duration::from_secs(60), "all 20 Running(Ok) after the apply", || {
        not_running(&c, &names)
    });
    let before = identities(&agent);
    assert_eq!(before.len(), COUNT, "one container per workload: {before:#?}");

    match stop {
        Stop::Kill9 => c.kill_server(),
        Stop::Sigterm => {
            let status = c.terminate_server(Duration::from_secs(20));
            assert!(status.success(), "the server exits cleanly on SIGTERM: {status}");
        }
    }
    c.start_server();
    c.wait_for_agent(Duration::from_secs(30));
    ank_tests::poll_until_none(Duration::from_secs(60), "all 20 Running(Ok) after the server's restart", || {
        not_running(&c, &names)
    });
    let after = identities(&agent);
    let restarted: Vec<String> = before
        .iter()
        .filter(|(instance, id)| after.get(*instance) != Some(id))
        .map(|(instance, id)| format!("{instance}: before {id:?}, after {:?}", after.get(instance)))
        .collect();
    assert!(restarted.is_empty(), "{stop:?}: workloads restarted or lost: {restarted:#?}");
    assert_eq!(after.len(), COUNT, "{stop:?}: no container more: {after:#?}");
    eprintln!("{stop:?}: server restarted, 20 workloads untouched, in {:.1} s", began.elapsed().as_secs_f64());
}

#[test]
// [stest->swdd~agent-initial-list-existing-workloads~1]
fn e2e_server_kill_9_with_a_state_file_restarts_none_of_20_workloads() {
    server_restart_restarts_nothing(Stop::Kill9, "k9");
}

#[test]
// [stest->swdd~agent-initial-list-existing-workloads~1]
fn e2e_server_sigterm_with_a_state_file_restarts_none_of_20_workloads() {
    server_restart_restarts_nothing(Stop::Sigterm, "term");
}

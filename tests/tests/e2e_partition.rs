//! End to end with the built binaries and real podman on two test hosts
//! (network namespaces made by the test): the agent is cut off from the
//! server for 60 s while it runs 10 workloads. Meanwhile 2 are deleted and 2
//! added on the server, and one container dies on the agent's side. After
//! the heal: no running workload was restarted, the deletions and additions
//! are applied, the death is reported, and `ank get workloads` has no ghost
//! rows. Default heartbeat settings throughout.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ank_tests::binaries::{Cluster, ClusterOptions};
use ank_tests::netns::TestNet;

const IMAGE: &str = "localhost/busybox:latest";
const PARTITION: Duration = Duration::from_secs(60);

fn manifest(agent: &str, names: &[String]) -> String {
    let body: String = names
        .iter()
        .map(|n| {
            format!(
                "  {n}:\n    runtime: podman\n    agent: {agent}\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sleep\", \"100000\"]\n"
            )
        })
        .collect();
    format!("apiVersion: v1\nworkloads:\n{body}")
}

/// Workload name -> (container id, StartedAt, running) of the agent's containers.
fn containers_by_workload(c: &Cluster) -> BTreeMap<String, (String, i64, bool)> {
    c.containers()
        .iter()
        .filter_map(|ctr| {
            let name = ctr["Labels"]["name"].as_str()?.split('.').next()?.to_owned();
            let running = ctr["State"].as_str() == Some("running");
            Some((name, (ctr["Id"].as_str()?.to_owned(), ctr["StartedAt"].as_i64()?, running)))
        })
        .collect()
}

fn rows(c: &Cluster) -> BTreeMap<String, String> {
    c.workload_rows().into_iter().collect()
}

fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn e2e_a_60_s_partition_restarts_nothing_and_applies_what_changed_meanwhile() {
    let net = TestNet::create("pt");
    let agent = format!("e2e_partition_{}", std::process::id());
    let c = Cluster::start_opts(&agent, ClusterOptions { net: Some(&net), ..Default::default() });
    let first = names("w", 0..10);
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent, &first)));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(60), |c| {
        let r = rows(c);
        first.iter().all(|n| r.get(n).map(String::as_str) == Some("Running(Ok)"))
    });
    let before = containers_by_workload(&c);
    assert_eq!(before.len(), 10, "{before:?}");

    net.partition();
    let cut_at = Instant::now();
    c.wait_until(Duration::from_secs(15), |c| rows(c).values().all(|s| s == "AgentDisconnected"));
    eprintln!("partition: all 10 workloads AgentDisconnected after {:?}", cut_at.elapsed());

    // Meanwhile on the server: 2 deleted, 2 added.
    let o = c.ank(&["delete", "workload", "w0", "w1", "--no-wait"]);
    assert!(o.status.success(), "delete: {}", String::from_utf8_lossy(&o.stderr));
    let added = names("n", 0..2);
    let o = c.ank_stdin(&["apply", "--no-wait", "-"], Some(&manifest(&agent, &added)));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    // ... and on the agent's side a container dies; the agent keeps the news.
    let died = &before["w9"].0;
    let o = std::process::Command::new("podman").args(["kill", died]).output().expect("podman kill");
    assert!(o.status.success(), "podman kill: {}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(PARTITION.saturating_sub(cut_at.elapsed()));
    let during = containers_by_workload(&c);
    let kept: Vec<String> = names("w", 0..9);
    assert!(kept.iter().all(|n| during[n].2), "the agent kept its workloads running while cut off: {during:?}");

    net.heal();
    let healed_at = Instant::now();
    c.wait_for_agent(Duration::from_secs(30));
    eprintln!("heal: agent listed again after {:?}", healed_at.elapsed());
    let expected: Vec<String> = names("w", 2..9).into_iter().chain(added.iter().cloned()).collect();
    c.wait_until(Duration::from_secs(60), |c| {
        let r = rows(c);
        expected.iter().all(|n| r.get(n).map(String::as_str) == Some("Running(Ok)"))
            && r.get("w9").is_some_and(|s| s.starts_with("Failed"))
            && !r.contains_key("w0")
            && !r.contains_key("w1")
            && containers_by_workload(c).len() == 10
    });
    // Dominated by podman stopping the two deleted containers: `sleep` as
    // PID 1 ignores SIGTERM, so podman waits its 10 s before SIGKILL.
    eprintln!("heal: changes applied and states current after {:?}", healed_at.elapsed());

    let after = containers_by_workload(&c);
    let restarted: Vec<String> = names("w", 2..9).into_iter().filter(|n| after[n] != before[n]).collect();
    assert!(restarted.is_empty(), "running workloads restarted: {restarted:?}");
    assert!(!after.contains_key("w0") && !after.contains_key("w1"), "deleted meanwhile, removed now: {after:?}");
    assert!(added.iter().all(|n| after.get(n).is_some_and(|c| c.2)), "added meanwhile, running now: {after:?}");
    assert_eq!(after["w9"].0, before["w9"].0, "the dead container was not replaced (restart policy NEVER)");
    let final_rows = rows(&c);
    assert_eq!(final_rows.len(), 10, "no ghost rows: {final_rows:?}");
    eprintln!(
        "partition counts: restarted {}, deletions applied 2, additions applied 2, ghost rows {}",
        restarted.len(),
        final_rows.len() - 10
    );
}

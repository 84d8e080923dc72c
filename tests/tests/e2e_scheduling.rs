//! End to end with the built binaries and real podman: the scheduling
//! features as a user sees them. A pipeline whose second step fails cancels
//! the third, which podman never sees; an agent with a quota of one starts
//! the higher-priority of two waiting workloads when the slot frees.

use std::time::Duration;

use ank_tests::binaries::Cluster;

const IMAGE: &str = "localhost/busybox:latest";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn job(agent: &str, name: &str, script: &str) -> String {
    format!(
        "  {name}:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sh\", \"-c\", \"{script}\"]\n"
    )
}

/// A service that ends at once on SIGTERM.
fn service(agent: &str, name: &str, priority: u32) -> String {
    format!(
        "  {name}:\n    runtime: podman\n    agent: {agent}\n    priority: {priority}\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep 100003 & wait\"]\n"
    )
}

fn state_of(c: &Cluster, name: &str) -> Option<String> {
    c.workload_rows().into_iter().find(|(n, _)| n == name).map(|(_, s)| s)
}

fn has_container(c: &Cluster, workload: &str) -> bool {
    c.containers().iter().any(|x| {
        x["Names"]
            .as_array()
            .is_some_and(|ns| ns.iter().any(|n| n.as_str().is_some_and(|n| n.starts_with(&format!("{workload}.")))))
    })
}

// [stest of feature K6: a failed pipeline step cancels the rest, never created in podman]
#[test]
fn e2e_a_failed_pipeline_step_cancels_the_rest_before_podman_sees_it() {
    ank_tests::require_podman();
    let agent = format!("e2e_sched_pipe_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}{}groups:\n  upd:\n    mode: pipeline\n    members: [s1, s2, s3]\n",
        job(&agent, "s1", "exit 0"),
        job(&agent, "s2", "exit 1"),
        job(&agent, "s3", "exit 0"),
    );
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    c.wait_until(Duration::from_secs(60), |c| {
        state_of(c, "s3").as_deref() == Some("Pending(Canceled)")
            && state_of(c, "s1").as_deref() == Some("Succeeded(Ok)")
            && state_of(c, "s2").as_deref() == Some("Failed(ExecFailed)")
    });
    assert!(has_container(&c, "s1") && has_container(&c, "s2"), "finished steps are kept for their retention");
    assert!(!has_container(&c, "s3"), "a canceled step is never created: {:?}", c.containers());
    let events = text(&c.ank(&["get", "events", "s3"]).stdout);
    assert!(events.contains("Canceled") && events.contains("pipeline upd: s2 failed"), "{events}");
    let groups = text(&c.ank(&["get", "groups"]).stdout);
    assert!(groups.contains("upd") && groups.contains("s3"), "{groups}");
}

// [stest of feature K1: a freed slot goes to the higher-priority workload]
// [stest of feature K2: QuotaBlocked with a counted event, the quota in ank get agents]
#[test]
fn e2e_a_quota_of_one_starts_the_higher_priority_workload_when_the_slot_frees() {
    ank_tests::require_podman();
    let agent = format!("e2e_sched_quota_{}", std::process::id());
    let c = Cluster::start_with(&agent, None, &["--max-workloads", "1", "--scheduler-tick", "200ms"]);
    let first = format!("apiVersion: v1\nworkloads:\n{}", service(&agent, "holder", 0));
    assert!(c.ank_stdin(&["--wait", "apply", "-"], Some(&first)).status.success());
    let both = format!("apiVersion: v1\nworkloads:\n{}{}", service(&agent, "low", 0), service(&agent, "high", 5));
    let o = c.ank_stdin(&["apply", "-"], Some(&both));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    c.wait_until(Duration::from_secs(30), |c| {
        state_of(c, "low").as_deref() == Some("Pending(QuotaBlocked)")
            && state_of(c, "high").as_deref() == Some("Pending(QuotaBlocked)")
    });
    // The agent reports its use with its load status (every 2 s).
    c.wait_until(Duration::from_secs(30), |c| {
        // The QUOTA column is in the wide table only (the default is Ankaios' table).
        let agents = text(&c.ank(&["get", "agents", "-o", "wide"]).stdout);
        agents.contains("QUOTA") && agents.contains("1/1")
    });
    // The event counts once per tick instead of adding entries.
    c.wait_until(Duration::from_secs(30), |c| {
        let yaml = text(&c.ank(&["get", "events", "high", "-o", "yaml"]).stdout);
        yaml.matches("kind: QuotaBlocked").count() == 1 && !yaml.contains("count: 1\n")
    });
    assert!(c.ank(&["delete", "workload", "holder"]).status.success());
    c.wait_until(Duration::from_secs(30), |c| state_of(c, "high").as_deref() == Some("Running(Ok)"));
    assert_eq!(state_of(&c, "low").as_deref(), Some("Pending(QuotaBlocked)"));
    assert!(!has_container(&c, "low"), "the waiting workload has no container");
}

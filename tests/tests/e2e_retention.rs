//! End to end with the built binaries and real podman: retention and
//! reaping (feature K7). An agent started with `--retain-succeeded 5s`
//! keeps a succeeded job's container (and its logs) for 5 s, then removes
//! it; the job stays `Succeeded(Ok)` with a `Reaped` event. After an agent
//! restart the job is not started again, and a container carrying the
//! agent's label that belongs to no workload is removed at the start, while
//! another agent's container is left alone.

use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ank_tests::binaries::Cluster;

const IMAGE: &str = "localhost/busybox:latest";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn manifest(agent: &str) -> String {
    format!(
        "apiVersion: v1\nworkloads:\n  job:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sh\", \"-c\", \"echo job-done\"]\n  svc:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep 100003 & wait\"]\n"
    )
}

/// Ids of the agent's containers of workload `name`.
fn containers_of(c: &Cluster, name: &str) -> Vec<String> {
    c.containers()
        .iter()
        .filter(|x| x["Labels"]["name"].as_str().is_some_and(|n| n.starts_with(&format!("{name}."))))
        .filter_map(|x| x["Id"].as_str().map(str::to_owned))
        .collect()
}

fn state_of(c: &Cluster, name: &str) -> Option<String> {
    c.workload_rows().into_iter().find(|(n, _)| n == name).map(|(_, s)| s)
}

/// Starts a long-running container with the labels the agent gives its
/// own; removed (with `podman rm -f`) on drop.
struct LabelledContainer(String);

impl LabelledContainer {
    fn start(agent: &str, workload: &str) -> Self {
        let out = Command::new("podman")
            .args(["run", "-d", "--label", &format!("agent={agent}")])
            .args(["--label", &format!("name={workload}.0123456.{agent}"), IMAGE])
            .args(["sh", "-c", "trap 'exit 0' TERM; sleep 100003 & wait"])
            .output()
            .expect("podman run");
        assert!(out.status.success(), "podman run: {}", text(&out.stderr));
        Self(text(&out.stdout).trim().to_owned())
    }

    fn exists(&self) -> bool {
        Command::new("podman").args(["container", "exists", &self.0]).status().is_ok_and(|s| s.success())
    }
}

impl Drop for LabelledContainer {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["rm", "-f", "-t", "0", &self.0]).output();
    }
}

/// Names of the agent's containers podman created since `since` (unix s).
fn created_since(agent: &str, since: u64) -> Vec<String> {
    let out = Command::new("podman")
        .args(["events", "--stream=false", "--since", &since.to_string(), "--filter", "event=create"])
        .args(["--filter", &format!("label=agent={agent}"), "--format", "{{.Name}}"])
        .output()
        .expect("podman events");
    text(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
// [stest of feature K7]
fn e2e_retention_a_succeeded_job_is_reaped_and_not_started_again_after_an_agent_restart() {
    ank_tests::require_podman();
    let agent = format!("e2e_retention_{}", std::process::id());
    let mut c = Cluster::start_with(&agent, None, &["--retain-succeeded", "5s"]);
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent)));
    assert!(o.status.success(), "apply: {}", text(&o.stderr));

    c.wait_until(Duration::from_secs(30), |c| state_of(c, "job").as_deref() == Some("Succeeded(Ok)"));
    let ended = Instant::now();
    assert_eq!(containers_of(&c, "job").len(), 1, "the finished job's container is kept for its retention");
    let logs = c.ank(&["logs", "job"]);
    assert_eq!(text(&logs.stdout), "job-done\n", "logs readable until reaped: {}", text(&logs.stderr));

    c.wait_until(Duration::from_secs(70), |c| containers_of(c, "job").is_empty());
    let reaped_after = ended.elapsed();
    println!("job container reaped {reaped_after:?} after Succeeded was seen (retention 5s)");
    assert!(reaped_after >= Duration::from_secs(3), "reaped too early: {reaped_after:?}");
    assert_eq!(state_of(&c, "job").as_deref(), Some("Succeeded(Ok)"), "the state stays");
    assert_eq!(state_of(&c, "svc").as_deref(), Some("Running(Ok)"));
    // Issue 26, bug 6: the logs of a reaped workload are gone, and `ank logs` says so.
    let logs = c.ank(&["logs", "job"]);
    assert_eq!(logs.status.code(), Some(1), "{logs:?}");
    let err = text(&logs.stderr);
    assert!(err.contains(&format!("no logs of 'job': agent '{agent}' has no container for it")), "{err}");
    c.wait_until(Duration::from_secs(10), |c| {
        // Events are an extension: plain `ank get state` prints Ankaios' state only.
        let state = text(&c.ank(&["get", "state", "-o", "yaml", "--extensions"]).stdout);
        state.contains("Reaped") && state.contains("retention succeeded 5s")
    });

    // An orphan of this agent and a container of another agent.
    let orphan = LabelledContainer::start(&agent, "stray");
    let foreign = LabelledContainer::start(&format!("{agent}_other"), "theirs");
    let svc_before = containers_of(&c, "svc");

    let status = c.terminate_agent(Duration::from_secs(30));
    assert!(status.success(), "agent exit: {status:?}");
    c.wait_until(Duration::from_secs(20), |c| state_of(c, "job").as_deref() == Some("AgentDisconnected"));
    let restarted_at = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    c.start_agent();
    c.wait_for_agent(Duration::from_secs(20));
    c.wait_until(Duration::from_secs(30), |c| state_of(c, "job").as_deref() == Some("Succeeded(Ok)"));
    c.wait_until(Duration::from_secs(30), |_| !orphan.exists());

    assert!(containers_of(&c, "job").is_empty(), "the reaped job is not started again");
    // `--since` counts whole seconds: the orphan made just before may be listed.
    let created: Vec<String> = created_since(&agent, restarted_at)
        .into_iter()
        .filter(|n| n.starts_with("job.") || n.starts_with("svc."))
        .collect();
    assert_eq!(created, Vec::<String>::new(), "no workload container created after the restart");
    assert_eq!(containers_of(&c, "svc"), svc_before, "the running workload is taken over");
    assert!(foreign.exists(), "another agent's container is not touched");
}

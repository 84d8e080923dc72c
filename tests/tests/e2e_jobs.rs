//! End to end with the built binaries and real podman: apply jobs as a user
//! sees them. A dependency chain is created in order and removed in
//! reverse order; a failed job makes `ank --wait apply` exit 1, and a rerun
//! after the missing image appeared starts the rest without touching what
//! already runs.

use std::process::Command;

use ank_tests::binaries::{Cluster, ClusterOptions};

const IMAGE: &str = "localhost/busybox:latest";

/// A container that ends at once on SIGTERM (a plain `sleep` as PID 1
/// would wait for the stop timeout).
fn workload(agent: &str, name: &str, image: &str, dep: Option<&str>) -> String {
    let deps = dep.map(|d| format!("    dependencies:\n      {d}: ADD_COND_RUNNING\n")).unwrap_or_default();
    format!(
        "  {name}:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n{deps}    runtimeConfig: |\n      image: {image}\n      commandArgs: [\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep 100003 & wait\"]\n"
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Workload name -> (created, started) of this agent's containers, in ns.
fn container_times(c: &Cluster) -> std::collections::BTreeMap<String, (u128, u128)> {
    let ids: Vec<String> = c.containers().iter().filter_map(|x| x["Id"].as_str().map(str::to_owned)).collect();
    if ids.is_empty() {
        return Default::default();
    }
    let out = Command::new("podman")
        .args(["inspect", "--format", "{{.Name}} {{.Created.UnixNano}} {{.State.StartedAt.UnixNano}}"])
        .args(&ids)
        .output()
        .expect("podman inspect");
    text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let name = parts.next()?.split('.').next()?.to_owned();
            Some((name, (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?)))
        })
        .collect()
}

fn container_id(c: &Cluster, workload: &str) -> Option<String> {
    c.containers().iter().find_map(|x| {
        let named =
            x["Names"].as_array()?.iter().any(|n| n.as_str().is_some_and(|n| n.starts_with(&format!("{workload}."))));
        if named { x["Id"].as_str().map(str::to_owned) } else { None }
    })
}

// [stest of feature L2]
// [stest of feature L5]
#[test]
fn e2e_a_chain_is_created_in_dependency_order_and_removed_in_reverse() {
    ank_tests::require_podman();
    let agent = format!("e2e_jobs_chain_{}", std::process::id());
    // The strict reverse order of removal is the server's (opt-in): by
    // default, as in Ankaios, a dependent that is stopping already lets its
    // dependency go.
    let c = Cluster::start_opts(&agent, ClusterOptions { server_args: &["--hold-dependents"], ..Default::default() });
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}{}",
        workload(&agent, "ui", IMAGE, Some("api")),
        workload(&agent, "api", IMAGE, Some("db")),
        workload(&agent, "db", IMAGE, None),
    );
    let o = c.ank_stdin(&["--wait", "apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    assert!(text(&o.stderr).contains("job 1 accepted"), "{}", text(&o.stderr));
    let job = text(&c.ank(&["get", "job", "1", "-o", "yaml"]).stdout);
    assert!(job.contains("phase: Succeeded"), "{job}");

    // [stest of feature H3]
    let o = c.ank_stdin(&["wait", "-f", "-", "--for", "Ready", "--timeout", "30s"], Some(&manifest));
    assert!(o.status.success(), "wait failed: {}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "manifest -: Ready\n");

    let t = container_times(&c);
    assert_eq!(t.len(), 3, "{t:?}");
    assert!(t["api"].0 > t["db"].1, "api created before db started: {t:?}");
    assert!(t["ui"].0 > t["api"].1, "ui created before api started: {t:?}");

    // Removal order as podman's event log has it, read after the delete.
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() - 1;
    let o = c.ank_stdin(&["--wait", "apply", "-d", "-"], Some(&manifest));
    assert!(o.status.success(), "delete failed: {}", text(&o.stderr));
    let label = format!("label=agent={agent}");
    let events = Command::new("podman")
        .args(["events", "--stream=false", "--since", &since.to_string(), "--filter", "event=remove"])
        .args(["--filter", &label, "--format", "{{.Name}}"])
        .output()
        .expect("podman events");
    let removed: Vec<&str> = std::str::from_utf8(&events.stdout)
        .expect("utf-8")
        .lines()
        .map(|name| name.split('.').next().unwrap_or_default())
        .collect();
    assert_eq!(removed, ["ui", "api", "db"]);
    let jobs = text(&c.ank(&["get", "jobs"]).stdout);
    assert!(jobs.lines().any(|l| l.starts_with("2 ") && l.contains("Succeeded")), "{jobs}");
}

/// Removes the tag again, also when the test fails.
struct Tag(String);

impl Drop for Tag {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["untag", IMAGE, &self.0]).output();
    }
}

// [stest of feature L3]
// [stest of feature L6]
#[test]
fn e2e_a_failed_job_fails_ank_wait_and_a_rerun_starts_the_rest() {
    ank_tests::require_podman();
    let agent = format!("e2e_jobs_rerun_{}", std::process::id());
    let missing = format!("localhost/busybox:e2e-jobs-{}", std::process::id());
    let tag = Tag(missing.clone());
    // One quick retry: the failure shows within seconds. The server holds
    // dependents and stops on a failure (opt-in), so `ui` waits for the rerun.
    let c = Cluster::start_opts(
        &agent,
        ClusterOptions {
            agent_args: &["--create-retries", "1", "--create-retry-interval-ms", "100"],
            server_args: &["--hold-dependents", "--job-stop-on-failure"],
            ..Default::default()
        },
    );
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}{}{}",
        workload(&agent, "db", IMAGE, None),
        workload(&agent, "api", &missing, Some("db")),
        workload(&agent, "ui", IMAGE, Some("api")),
        workload(&agent, "log", IMAGE, None),
    );
    let o = c.ank_stdin(&["--wait", "apply", "-"], Some(&manifest));
    assert_eq!(o.status.code(), Some(1), "a failed job fails the apply: {o:?}");
    let err = text(&o.stderr);
    assert!(err.contains("job 1 Failed: api: ") && err.contains("not started: ui"), "{err}");
    assert!(container_id(&c, "ui").is_none(), "ui is never created");
    let db = container_id(&c, "db").expect("db runs");
    let job = text(&c.ank(&["get", "job", "1"]).stdout);
    assert!(job.starts_with("job 1: Failed"), "{job}");
    assert!(job.lines().any(|l| l.starts_with("ui ") && l.contains("waiting")), "{job}");

    let o = Command::new("podman").args(["tag", IMAGE, &tag.0]).output().expect("podman tag");
    assert!(o.status.success(), "{o:?}");
    let o = c.ank(&["--wait", "job", "rerun"]);
    assert!(o.status.success(), "rerun failed: {}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("job 2 accepted"), "{}", text(&o.stdout));
    assert!(!text(&o.stdout).contains("No workloads updated"), "a rerun sends workloads: {}", text(&o.stdout));
    let job = text(&c.ank(&["get", "job", "2", "-o", "yaml"]).stdout);
    assert!(job.contains("phase: Succeeded"), "{job}");
    assert!(container_id(&c, "ui").is_some() && container_id(&c, "api").is_some());
    assert_eq!(container_id(&c, "db").as_deref(), Some(db.as_str()), "db is not touched");
}

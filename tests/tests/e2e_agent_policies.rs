//! End to end with the built binaries and real podman: inter-workload
//! dependencies, restart policies and create retries as a user sees them in
//! `ank get workloads` and `podman ps`.

use std::time::Duration;

use ank_tests::binaries::Cluster;

const IMAGE: &str = "localhost/busybox:latest";

fn workload(name: &str, agent: &str, extra: &str, args: &str) -> String {
    format!(
        "  {name}:\n    runtime: podman\n    agent: {agent}\n{extra}    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: {args}\n"
    )
}

fn state_of(c: &Cluster, name: &str) -> Option<String> {
    c.workload_rows().into_iter().find(|(n, _)| n == name).map(|(_, s)| s)
}

/// The id of the container of workload `name`, if there is one.
fn container_of(c: &Cluster, name: &str) -> Option<String> {
    c.containers().iter().find_map(|ctr| {
        let instance = ctr["Labels"]["name"].as_str()?;
        (instance.split('.').next() == Some(name)).then(|| ctr["Id"].as_str().map(str::to_owned))?
    })
}

fn apply(c: &Cluster, manifest: &str) {
    let o = c.ank_stdin(&["apply", "--no-wait", "-"], Some(manifest));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
// [stest->swdd~agent-enqueues-unfulfilled-create~1]
// [stest->swdd~agent-handles-workloads-with-fulfilled-dependencies~1]
// [stest->swdd~agent-handles-new-workload-operations]
fn e2e_dependencies_start_a_workload_after_its_dependency_succeeded() {
    let agent = format!("e2e_deps_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let deps = "    dependencies:\n      init: ADD_COND_SUCCEEDED\n";
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}",
        workload("init", &agent, "", r#"["sh", "-c", "sleep 1; exit 0"]"#),
        workload("app", &agent, deps, r#"["sleep", "100000"]"#)
    );
    apply(&c, &manifest);
    c.wait_until(Duration::from_secs(20), |c| state_of(c, "app").as_deref() == Some("Pending(WaitingToStart)"));
    assert!(container_of(&c, "app").is_none(), "app must not start before init succeeded");
    c.wait_until(Duration::from_secs(30), |c| {
        state_of(c, "init").as_deref() == Some("Succeeded(Ok)") && state_of(c, "app").as_deref() == Some("Running(Ok)")
    });
}

#[test]
// [stest->swdd~agent-enqueues-unfulfilled-delete~1]
fn e2e_dependencies_delete_a_dependency_only_after_its_dependent() {
    let agent = format!("e2e_deldeps_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let deps = "    dependencies:\n      db: ADD_COND_RUNNING\n";
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}",
        workload("db", &agent, "", r#"["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]"#),
        workload("web", &agent, deps, r#"["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]"#)
    );
    apply(&c, &manifest);
    c.wait_until(Duration::from_secs(30), |c| state_of(c, "web").as_deref() == Some("Running(Ok)"));
    let o = c.ank(&["delete", "workload", "db", "--no-wait"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(10), |c| state_of(c, "db").as_deref() == Some("Stopping(WaitingToStop)"));
    assert!(container_of(&c, "db").is_some(), "db still runs while web depends on it");
    let o = c.ank(&["delete", "workload", "web", "--no-wait"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(30), |c| c.containers().is_empty() && c.workload_rows().is_empty());
}

#[test]
// [stest->swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2]
fn e2e_restart_policy_on_failure_replaces_the_failed_container() {
    let agent = format!("e2e_restart_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let policy = "    restartPolicy: ON_FAILURE\n";
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}",
        workload("flaky", &agent, policy, r#"["sh", "-c", "sleep 1; exit 1"]"#),
        workload("done", &agent, policy, r#"["sh", "-c", "exit 0"]"#)
    );
    apply(&c, &manifest);
    c.wait_until(Duration::from_secs(20), |c| container_of(c, "flaky").is_some());
    let first = container_of(&c, "flaky").unwrap();
    c.wait_until(Duration::from_secs(20), |c| container_of(c, "flaky").is_some_and(|id| id != first));
    let second = container_of(&c, "flaky").unwrap();
    c.wait_until(Duration::from_secs(20), |c| container_of(c, "flaky").is_some_and(|id| id != second));
    assert_eq!(c.containers().len(), 2, "old containers are removed on restart: {:?}", c.containers());
    assert_eq!(state_of(&c, "done").as_deref(), Some("Succeeded(Ok)"), "exit 0 is not restarted on failure");
}

#[test]
// [stest->swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1]
// [stest->swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1]
// [stest->swdd~agent-workload-control-loop-executes-retry~1]
// [stest->swdd~agent-workload-control-loop-limits-retry-attempts~1]
// [stest->swdd~agent-workload-control-loop-retry-limit-set-execution-state~2]
fn e2e_failing_create_is_retried_then_starting_failed_while_others_run() {
    let agent = format!("e2e_retry_{}", std::process::id());
    let c = Cluster::start_with(&agent, None, &["--create-retries", "3", "--create-retry-interval-ms", "200"]);
    let missing = format!(
        "  ghost:\n    runtime: podman\n    agent: {agent}\n    runtimeConfig: |\n      image: localhost/does-not-exist:1\n      commandOptions: [\"--pull=never\"]\n"
    );
    let manifest =
        format!("apiVersion: v1\nworkloads:\n{missing}{}", workload("fine", &agent, "", r#"["sleep", "100000"]"#));
    apply(&c, &manifest);
    c.wait_until(Duration::from_secs(30), |c| {
        state_of(c, "ghost").as_deref() == Some("Pending(StartingFailed)")
            && state_of(c, "fine").as_deref() == Some("Running(Ok)")
    });
    let o = c.ank(&["get", "workloads"]);
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("No more retries"), "{table}");
}

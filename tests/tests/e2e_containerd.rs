//! End to end with the built binaries and a real containerd (Debian's
//! 1.6.20): the `containerd` runtime runs a workload (checked with `ctr`),
//! streams its logs, stops and removes it; exit codes give Succeeded and
//! Failed; restart policies restart it; a containerd workload depends on a
//! podman one; workload files and the control interface reach it; an agent
//! killed with SIGKILL and started again takes its running tasks over
//! (same pids); an unsupported `commandOptions` entry is refused by name.
//! Each test has a containerd namespace of its own, removed at its end.
//!
//! The steps of Ankaios' three system-test suites that use containerd are
//! in `e2e_containerd_suites.rs`.

use std::time::{Duration, Instant};

use ank_tests::binaries::Cluster;
use ank_tests::containerd::{IMAGE, Namespace};

fn agent_name(test: &str) -> String {
    format!("e2e_cd_{test}_{}", std::process::id())
}

/// A cluster whose agent's containerd workloads live in `ns`.
fn cluster(agent: &str, ns: &Namespace) -> Cluster {
    Cluster::start_with(agent, None, &["--containerd-namespace", &ns.name])
}

fn workload(name: &str, agent: &str, policy: &str, options: &str, args: &str) -> String {
    format!(
        "  {name}:\n    runtime: containerd\n    agent: {agent}\n    restartPolicy: {policy}\n    runtimeConfig: |\n      image: {IMAGE}\n      commandOptions: {options}\n      commandArgs: {args}\n"
    )
}

fn apply(c: &Cluster, workloads: &str) {
    let manifest = format!("apiVersion: v1\nworkloads:\n{workloads}");
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", String::from_utf8_lossy(&o.stderr));
}

fn out(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn e2e_containerd_runs_a_workload_streams_its_logs_then_removes_it() {
    let ns = Namespace::new("run");
    let agent = agent_name("run");
    let c = cluster(&agent, &ns);
    let args =
        r#"["sh", "-c", "echo hello from containerd; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"]"#;
    apply(&c, &workload("talker", &agent, "NEVER", "[\"--net=none\", \"-l\", \"team=a\"]", args));
    c.wait_state("talker", "Running(Ok)", Duration::from_secs(30));

    let containers = ns.ids("containers");
    assert_eq!(containers.len(), 1, "{containers:?}");
    let id = &containers[0];
    assert!(id.starts_with("talker.") && id.ends_with(&agent), "container id is the short name: {id}");
    let info = out(&ns.ctr(&["containers", "info", id]));
    assert!(info.contains(&format!("\"agent\": \"{agent}\"")), "{info}");
    assert!(info.contains("\"name\": \"talker."), "{info}");
    assert!(info.contains("\"team\": \"a\""), "{info}");
    let tasks = ns.tasks();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].2, "RUNNING");

    // Logs: all, the last two lines, and following.
    let logs = ank_tests::poll(Duration::from_secs(10), "the first ticks in the log", || {
        Some(out(&c.ank(&["logs", "talker"]))).filter(|l| l.contains("tick 1"))
    });
    assert!(logs.contains("hello from containerd") && logs.contains("tick 1"), "{logs}");
    let tail = out(&c.ank(&["logs", "--tail", "2", "talker"]));
    assert_eq!(tail.lines().count(), 2, "{tail}");
    assert!(tail.lines().all(|l| l.starts_with("tick ")), "{tail}");
    let mut follow = std::process::Command::new(ank_tests::binaries::bin("ank"))
        .args(["--insecure", "--server-url", &c.url, "logs", "-f", "--tail", "0", "talker"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("ank logs -f");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = follow.kill();
    let followed = follow.wait_with_output().expect("ank logs -f output");
    let followed = String::from_utf8_lossy(&followed.stdout);
    assert!(followed.lines().filter(|l| l.starts_with("tick ")).count() >= 3, "followed: {followed}");
    assert!(!followed.contains("hello from containerd"), "--tail 0 then new lines only: {followed}");

    let o = c.ank(&["delete", "workload", "talker"]);
    assert!(o.status.success(), "{}", out(&o));
    c.wait_until(Duration::from_secs(30), |c| c.state_of("talker").is_none());
    assert!(ns.ids("containers").is_empty(), "container left: {:?}", ns.ids("containers"));
    assert!(ns.tasks().is_empty(), "task left: {:?}", ns.tasks());
    let snapshots = ns.ids("snapshots");
    assert!(!snapshots.iter().any(|s| s == id), "snapshot left: {snapshots:?}");
    assert!(!c.run_folder.path().join("containerd").join(&ns.name).join(id).exists(), "state folder left");
}

#[test]
fn e2e_containerd_exit_codes_give_succeeded_and_failed_and_policies_restart() {
    let ns = Namespace::new("exit");
    let agent = agent_name("exit");
    let c = cluster(&agent, &ns);
    let none = "[\"--net=none\"]";
    apply(
        &c,
        &format!(
            "{}{}{}",
            workload("ok", &agent, "NEVER", none, "[\"sh\", \"-c\", \"exit 0\"]"),
            workload("bad", &agent, "NEVER", none, "[\"sh\", \"-c\", \"exit 3\"]"),
            workload("again", &agent, "ALWAYS", none, "[\"sh\", \"-c\", \"sleep 0.3; exit 1\"]"),
        ),
    );
    c.wait_state("ok", "Succeeded(Ok)", Duration::from_secs(30));
    c.wait_state("bad", "Failed(ExecFailed)", Duration::from_secs(30));
    let o = c.ank(&["get", "workloads", "-o", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let bad = rows.as_array().unwrap().iter().find(|r| r["name"] == "bad").expect("bad row");
    assert_eq!(bad["executionState"]["additionalInfo"], "Exit code: '3'", "{bad}");

    // ALWAYS: the task runs again and again (a new pid each time).
    let mut pids = std::collections::BTreeSet::new();
    let start = Instant::now();
    while pids.len() < 3 {
        assert!(start.elapsed() < Duration::from_secs(30), "restarts of 'again' seen: {pids:?}");
        for (id, pid, _) in ns.tasks() {
            if id.starts_with("again.") && pid > 0 {
                pids.insert(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn e2e_containerd_workload_depends_on_a_podman_workload() {
    let ns = Namespace::new("deps");
    let agent = agent_name("deps");
    let c = cluster(&agent, &ns);
    let manifest = format!(
        "  first:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sh\", \"-c\", \"sleep 2\"]\n  after:\n    runtime: containerd\n    agent: {agent}\n    restartPolicy: NEVER\n    dependencies:\n      first: ADD_COND_SUCCEEDED\n    runtimeConfig: |\n      image: {IMAGE}\n      commandOptions: [\"--net=none\"]\n      commandArgs: [\"sleep\", \"1000\"]\n"
    );
    apply(&c, &manifest);
    // Until `first` succeeded, `after` waits and has no container.
    let start = Instant::now();
    loop {
        let (first, after) = (c.state_of("first"), c.state_of("after"));
        if first.as_deref() == Some("Succeeded(Ok)") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "first never succeeded: {first:?}");
        assert!(after.as_deref() != Some("Running(Ok)"), "'after' runs before 'first' succeeded ({first:?})");
        if first.as_deref() == Some("Running(Ok)") {
            assert_eq!(after.as_deref(), Some("Pending(Waiting)"));
            assert!(ns.ids("containers").is_empty(), "created before its dependency succeeded");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    c.wait_state("after", "Running(Ok)", Duration::from_secs(30));
    assert_eq!(ns.ids("containers").len(), 1);
}

#[test]
fn e2e_containerd_refuses_an_unsupported_command_option_by_name() {
    let ns = Namespace::new("refuse");
    let agent = agent_name("refuse");
    let c = cluster(&agent, &ns);
    apply(&c, &workload("gpu", &agent, "NEVER", "[\"--gpus\", \"all\"]", "[\"sleep\", \"1\"]"));
    c.wait_until(Duration::from_secs(30), |c| {
        c.state_of("gpu").is_some_and(|s| s.starts_with("Pending(StartingFailed)"))
    });
    let o = c.ank(&["get", "workloads", "-o", "json"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("--gpus"), "the refusal names the option: {text}");
    assert!(ns.ids("containers").is_empty());
}

#[test]
fn e2e_containerd_workload_files_and_control_interface_are_mounted() {
    let ns = Namespace::new("files");
    let agent = agent_name("files");
    let c = cluster(&agent, &ns);
    let manifest = format!(
        "  reader:\n    runtime: containerd\n    agent: {agent}\n    restartPolicy: NEVER\n    controlInterfaceAccess:\n      allowRules:\n        - type: StateRule\n          operation: Read\n          filterMasks: [\"desiredState\"]\n    files:\n      - mountPoint: /etc/app/conf.txt\n        data: configured by ankaios\n    runtimeConfig: |\n      image: {IMAGE}\n      commandOptions: [\"--net=none\"]\n      commandArgs: [\"sh\", \"-c\", \"cat /etc/app/conf.txt; echo; ls /run/ankaios/control_interface; sleep 1000\"]\n"
    );
    apply(&c, &manifest);
    c.wait_state("reader", "Running(Ok)", Duration::from_secs(30));
    let start = Instant::now();
    loop {
        let logs = out(&c.ank(&["logs", "reader"]));
        if logs.contains("configured by ankaios") && logs.contains("input") && logs.contains("output") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "files or FIFOs not seen: {logs}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn e2e_containerd_agent_killed_and_started_again_takes_20_tasks_over() {
    let ns = Namespace::new("resume");
    let agent = agent_name("resume");
    let mut c = cluster(&agent, &ns);
    let workloads: String = (0..20)
        .map(|i| workload(&format!("w{i}"), &agent, "ALWAYS", "[\"--net=none\"]", "[\"sleep\", \"100000\"]"))
        .collect();
    apply(&c, &workloads);
    c.wait_until(Duration::from_secs(120), |c| {
        let rows = c.workload_rows();
        rows.len() == 20 && rows.iter().all(|(_, s)| s == "Running(Ok)")
    });
    let mut before = ns.tasks();
    before.sort();
    assert_eq!(before.len(), 20, "{before:?}");
    c.kill_agent();
    c.start_agent();
    c.wait_for_agent(Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(3));
    c.wait_until(Duration::from_secs(60), |c| {
        let rows = c.workload_rows();
        rows.len() == 20 && rows.iter().all(|(_, s)| s == "Running(Ok)")
    });
    let mut after = ns.tasks();
    after.sort();
    assert_eq!(before, after, "the tasks are untouched: same ids, pids and states");
}

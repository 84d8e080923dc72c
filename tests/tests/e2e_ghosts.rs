//! End to end with the built binaries and real podman: "ghost" workloads.
//! The OOM killer of a small ECU kills a container's conmon and its main
//! process; podman keeps listing the container as running, writes no exit
//! file and emits no event. The agent watches the processes with pidfds:
//! each such workload is reported Failed(ExecFailed) at once (the agent's
//! podman reconcile is set to an hour, so it cannot be what notices),
//! restarted under its restart policy and deleted cleanly; after a kill -9
//! of server and agent too, no workload is reported running without a
//! live process and each ALWAYS workload runs again once.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_tests::binaries::{Cluster, ClusterOptions};

const IMAGE: &str = "localhost/busybox:latest";

/// (name, restart policy) of the five workloads.
const WORKLOADS: [(&str, &str); 5] =
    [("a0", "ALWAYS"), ("a1", "ALWAYS"), ("a2", "ALWAYS"), ("f0", "ON_FAILURE"), ("n0", "NEVER")];

fn manifest(agent: &str) -> String {
    let body: String = WORKLOADS
        .iter()
        .map(|(name, policy)| {
            format!(
                "  {name}:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: {policy}\n    runtimeConfig: |\n      image: {IMAGE}\n      commandArgs: [\"sleep\", \"100000\"]\n"
            )
        })
        .collect();
    format!("apiVersion: v1\nworkloads:\n{body}")
}

/// One container of the agent: id, main pid and conmon pid.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ctr {
    id: String,
    pid: i32,
    conmon: i32,
}

/// Workload name -> its containers (more than one would be a double start).
fn containers(c: &Cluster) -> BTreeMap<String, Vec<Ctr>> {
    let mut by_name: BTreeMap<String, Vec<Ctr>> = BTreeMap::new();
    for ctr in c.containers() {
        let Some(name) = ctr["Labels"]["name"].as_str().and_then(|n| n.split('.').next()) else { continue };
        let Some(id) = ctr["Id"].as_str() else { continue };
        let out = std::process::Command::new("podman")
            .args(["container", "inspect", "--format", "{{.State.Pid}} {{.State.ConmonPid}}", id])
            .output()
            .expect("podman inspect");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut f = text.split_whitespace().map(|x| x.parse::<i32>().unwrap_or(0));
        let (pid, conmon) = (f.next().unwrap_or(0), f.next().unwrap_or(0));
        by_name.entry(name.to_owned()).or_default().push(Ctr { id: id.to_owned(), pid, conmon });
    }
    by_name
}

/// Whether `pid` is a live (not zombie) process of container `id`.
fn lives_in(pid: i32, id: &str) -> bool {
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')));
    pid > 0 && alive && std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(id))
}

/// What the OOM killer does: SIGKILL to conmon, then to the main process.
fn kill_conmon_and_process(ctrs: &BTreeMap<String, Vec<Ctr>>) {
    for ctr in ctrs.values().flatten() {
        assert!(ctr.pid > 0 && ctr.conmon > 0, "{ctr:?}");
        for pid in [ctr.conmon, ctr.pid] {
            let o = std::process::Command::new("kill").args(["-9", &pid.to_string()]).output().unwrap();
            assert!(o.status.success(), "kill -9 {pid}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}

fn all_running(c: &Cluster) -> bool {
    WORKLOADS.iter().all(|(n, _)| c.state_of(n).as_deref() == Some("Running(Ok)"))
}

/// No workload is shown Running(Ok) unless its only container's process lives.
fn assert_no_running_ghost(c: &Cluster) {
    let ctrs = containers(c);
    for (name, state) in c.workload_rows() {
        if state != "Running(Ok)" {
            continue;
        }
        let live = ctrs.get(&name).is_some_and(|v| v.iter().any(|ctr| lives_in(ctr.pid, &ctr.id)));
        // A fresh container may be between podman's start and the listing: look again.
        if !live {
            std::thread::sleep(Duration::from_millis(300));
            let again = containers(c);
            let live = again.get(&name).is_some_and(|v| v.iter().any(|ctr| lives_in(ctr.pid, &ctr.id)));
            let still = c.state_of(&name).as_deref() == Some("Running(Ok)");
            assert!(live || !still, "'{name}' Running(Ok) without a live process: {:?}", again.get(&name));
        }
    }
}

fn cluster(agent: &str, server_args: &[&str]) -> Cluster {
    let c = Cluster::start_opts(
        agent,
        ClusterOptions { server_args, agent_args: &["--podman-reconcile-interval", "1h"], ..Default::default() },
    );
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(agent)));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(60), all_running);
    c
}

#[test]
// [stest->swdd~podman-state-getter-maps-state~3]
fn e2e_ghosts_killed_conmon_and_process_are_failed_restarted_by_policy_and_deleted() {
    let agent = format!("e2e_ghosts_{}", std::process::id());
    let c = cluster(&agent, &[]);
    let before = containers(&c);
    assert_eq!(before.len(), 5, "{before:?}");
    kill_conmon_and_process(&before);

    // The NEVER one stays Failed; within moments, though the reconcile is an hour away.
    let killed = std::time::Instant::now();
    while c.state_of("n0").as_deref() != Some("Failed(ExecFailed)") {
        assert!(killed.elapsed() < Duration::from_secs(10), "n0 not Failed(ExecFailed) within 10 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("n0 shown Failed {:.0} ms after the kill", killed.elapsed().as_secs_f64() * 1e3);
    let o = c.ank(&["get", "workloads", "-o", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let n0 = rows.as_array().unwrap().iter().find(|r| r["name"] == "n0").expect("n0 row");
    let info = n0["executionState"]["additionalInfo"].as_str().unwrap_or_default();
    assert!(info.starts_with("Exit code: '137' (conmon"), "the additional info names what happened: {n0}");
    // The ALWAYS and ON_FAILURE ones run again: a new container with a live process, one each.
    let after = ank_tests::poll(Duration::from_secs(60), "the restarted workloads", || {
        let now = containers(&c);
        let restarted = WORKLOADS.iter().filter(|(n, _)| *n != "n0").all(|(n, _)| {
            now.get(*n).is_some_and(|v| v.len() == 1 && v[0].id != before[*n][0].id && lives_in(v[0].pid, &v[0].id))
                && c.state_of(n).as_deref() == Some("Running(Ok)")
        });
        restarted.then_some(now)
    });
    for (name, _) in WORKLOADS.iter().filter(|(n, _)| *n != "n0") {
        assert_ne!(after[*name][0].pid, before[*name][0].pid, "'{name}' has a new process");
    }
    assert_eq!(c.state_of("n0").as_deref(), Some("Failed(ExecFailed)"), "NEVER: not restarted");
    assert_no_running_ghost(&c);

    // `ank delete` removes them all, the dead one too.
    let names: Vec<&str> = WORKLOADS.iter().map(|(n, _)| *n).collect();
    let mut args = vec!["delete", "workload"];
    args.extend(&names);
    let o = c.ank(&args);
    assert!(o.status.success(), "delete: {}", String::from_utf8_lossy(&o.stderr));
    ank_tests::poll(Duration::from_secs(60), "no workload and no container left", || {
        (c.workload_rows().is_empty() && c.containers().is_empty()).then_some(())
    });
}

#[test]
// [stest->swdd~agent-existing-workloads-resume-existing~2]
fn e2e_ghosts_after_a_kill_of_server_and_agent_are_not_resumed_as_running() {
    let agent = format!("e2e_ghosts_restart_{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let state_file = dir.path().join("state.json");
    let server_args = ["--state-file", state_file.to_str().unwrap()];
    let mut c = cluster(&agent, &server_args);
    let before = containers(&c);
    assert_eq!(before.len(), 5, "{before:?}");

    c.kill_server();
    c.kill_agent();
    kill_conmon_and_process(&before);
    c.start_server();
    c.start_agent();
    c.wait_for_agent(Duration::from_secs(30));

    // Until every ALWAYS workload runs again, none is ever shown running on a dead process.
    let always: Vec<&str> = WORKLOADS.iter().filter(|(_, p)| *p == "ALWAYS").map(|(n, _)| *n).collect();
    let after = ank_tests::poll(Duration::from_secs(60), "the ALWAYS workloads running again", || {
        assert_no_running_ghost(&c);
        let now = containers(&c);
        let back = always.iter().all(|n| {
            c.state_of(n).as_deref() == Some("Running(Ok)")
                && now
                    .get(*n)
                    .is_some_and(|v| v.iter().any(|ctr| ctr.id != before[*n][0].id && lives_in(ctr.pid, &ctr.id)))
        });
        back.then_some(now)
    });
    // Exactly once: one container per instance, and it stays the same one.
    std::thread::sleep(Duration::from_secs(3));
    let settled = containers(&c);
    for n in &always {
        assert_eq!(settled[*n].len(), 1, "'{n}': one container: {:?}", settled[*n]);
        let new: Vec<&Ctr> = after[*n].iter().filter(|ctr| ctr.id != before[*n][0].id).collect();
        assert_eq!(settled[*n][0].id, new[0].id, "'{n}' was not started twice");
    }
    for ctrs in settled.values() {
        assert!(ctrs.len() <= 1, "one container per instance: {ctrs:?}");
    }
    assert_no_running_ghost(&c);
}

/// The shim of a containerd task: the parent of its process.
fn shim_of(pid: u32) -> i32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the task's process");
    let ppid: i32 = status.lines().find_map(|l| l.strip_prefix("PPid:")).and_then(|p| p.trim().parse().ok()).unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{ppid}/comm")).unwrap_or_default();
    assert!(comm.starts_with("containerd-shim"), "the parent of {pid} is '{comm}', not the shim");
    ppid
}

#[test]
fn e2e_ghosts_containerd_shim_and_task_killed_are_failed_restarted_by_policy_and_deleted() {
    use ank_tests::containerd::{IMAGE as CD_IMAGE, Namespace};
    let ns = Namespace::new("ghosts");
    let agent = format!("e2e_cd_ghosts_{}", std::process::id());
    let c = Cluster::start_with(&agent, None, &["--containerd-namespace", &ns.name]);
    let body: String = [("a0", "ALWAYS"), ("n0", "NEVER")]
        .iter()
        .map(|(name, policy)| {
            format!(
                "  {name}:\n    runtime: containerd\n    agent: {agent}\n    restartPolicy: {policy}\n    runtimeConfig: |\n      image: {CD_IMAGE}\n      commandOptions: [\"--net=none\"]\n      commandArgs: [\"sleep\", \"100000\"]\n"
            )
        })
        .collect();
    let o = c.ank_stdin(&["apply", "-"], Some(&format!("apiVersion: v1\nworkloads:\n{body}")));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_state("a0", "Running(Ok)", Duration::from_secs(60));
    c.wait_state("n0", "Running(Ok)", Duration::from_secs(60));
    let tasks = ns.tasks();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    let pid_of = |prefix: &str, tasks: &[(String, u32, String)]| {
        tasks.iter().find(|(id, pid, s)| id.starts_with(prefix) && *pid > 0 && s == "RUNNING").map(|t| t.1)
    };
    let old_a0 = pid_of("a0.", &tasks).expect("a0's task");
    for (_, pid, _) in &tasks {
        for p in [shim_of(*pid), i32::try_from(*pid).unwrap()] {
            let o = std::process::Command::new("kill").args(["-9", &p.to_string()]).output().unwrap();
            assert!(o.status.success(), "kill -9 {p}");
        }
    }
    // containerd sees its shim die and publishes the task's exit (137) itself.
    c.wait_state("n0", "Failed(ExecFailed)", Duration::from_secs(10));
    let o = c.ank(&["get", "workloads", "-o", "json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let n0 = rows.as_array().unwrap().iter().find(|r| r["name"] == "n0").expect("n0 row");
    assert_eq!(n0["executionState"]["additionalInfo"], "Exit code: '137'", "{n0}");
    let new_a0 = ank_tests::poll(Duration::from_secs(30), "a0 running again", || {
        let pid = pid_of("a0.", &ns.tasks())?;
        (pid != old_a0 && c.state_of("a0").as_deref() == Some("Running(Ok)")).then_some(pid)
    });
    assert_ne!(new_a0, old_a0);
    assert_eq!(c.state_of("n0").as_deref(), Some("Failed(ExecFailed)"), "NEVER: not restarted");

    let o = c.ank(&["delete", "workload", "a0", "n0"]);
    assert!(o.status.success(), "delete: {}", String::from_utf8_lossy(&o.stderr));
    ank_tests::poll(Duration::from_secs(30), "no workload, task or container left", || {
        (c.workload_rows().is_empty() && ns.tasks().is_empty() && ns.ids("containers").is_empty()).then_some(())
    });
}

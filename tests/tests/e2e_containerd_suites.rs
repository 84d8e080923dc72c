//! Ankaios' three system-test suites that use containerd, as end to end
//! tests of the built binaries on real containerd and podman: the same
//! steps and assertions, checked with `ctr` and `podman` instead of
//! `nerdctl` (which Debian lacks). Each test has a containerd namespace of
//! its own and agent names of its own.
//!
//! - `device_restart_with_dependencies.robot`: two agents (podman,
//!   containerd) run workloads with inter-workload dependencies; a full
//!   device restart is simulated (server and agents killed, the podman
//!   containers stopped, the containerd tasks ended, the containers left in
//!   place); the server comes back with a manifest in which
//!   `web_service_init` changed. `web_service` waits (Pending
//!   (WaitingToStart)) until its dependency succeeded again, then runs
//!   (Running(Ok)); `filesystem_init` is started again in its old container
//!   (same id, same configuration), `web_service_init` is replaced (a new
//!   id). The containerd task ended as the suite's `nerdctl stop` ends it
//!   (SIGTERM, on which sleepy exits 0): `web_service` is started again in
//!   the same container (same id, same `ctr containers info`, the same
//!   creation time) with a new task pid. A second test ends the task with
//!   SIGKILL instead: it ended Failed, and a failed workload is created
//!   anew (as in Ankaios, only a succeeded one is reused), under the same
//!   id (the short name) and configuration but a later creation time.
//! - `workload_files.robot`, its containerd case: a text file mounted into
//!   a podman and a containerd workload, served over a published port and
//!   fetched from the host (Running(Ok)); a binary file (`binaryData`)
//!   mounted into a podman and a containerd workload that `cat` it and end
//!   Succeeded(Ok); the bytes they print equal the declared ones.
//! - `workload_logs.robot`: a podman workload on one agent counts to five,
//!   a containerd workload on another agent to three, both end
//!   Succeeded(Ok), and `ank logs` of all workloads prints 8 lines, each
//!   starting with a workload name.
//!
//! Adapted to the local busybox image (no alpine, sleepy or nginx; no
//! `/tmp` in it): `--entrypoint /bin/sleep` with `["1"]` / `["2"]` stays
//! as it is; sleepy's `sleepy.sh` (exit 0 on SIGTERM, else sleep) is
//! `sh -c "trap 'exit 0' TERM; sleep 1000000 & wait"`; nginx with a mounted
//! `nginx.conf` is busybox `httpd -f -p 80 -h /www` serving the mounted
//! file `/www/custom`, fetched with a plain HTTP request instead of
//! `curl -Lf`; alpine's `cat /hello` and `echo -e '1\n2\n3'` stay as they
//! are (busybox sh). The host ports are free ones instead of 8087/8088.
//!
//! Not carried over:
//! - the suites' preconditions "podman/containerd has deleted all existing
//!   containers" (`rm --all`): the machine is shared, so each test works on
//!   its own agents' podman containers and its own containerd namespace,
//!   which start empty and are removed at the end;
//! - `podman stop --all` and `nerdctl stop $(nerdctl ps -aq)` of the
//!   device restart: only the test's agent's podman containers are stopped
//!   (`podman stop -t 0`; the ones left had exited or are replaced anyway),
//!   and the tasks of the test's namespace (`ctr tasks kill -s SIGTERM`,
//!   then waiting until they are STOPPED), for the same reason;
//! - "the CLI listens for workload states" (a background `ank get
//!   workloads --watch` the suites read states from): the states are
//!   polled with `ank get workloads`, so a state shorter than a poll could
//!   be missed; the one intermediate state asserted (web_service's
//!   Pending(WaitingToStart)) lasts until the other agent is started;
//! - the binary file's content: Ankaios' `Hello, World!` only proves
//!   text; here the declared bytes also hold control bytes, but no NUL or
//!   invalid UTF-8, because the bytes come back through a log line.

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use ank_tests::binaries::{Cluster, ClusterOptions, containers_of};
use ank_tests::containerd::{IMAGE, Namespace};

fn agent_name(test: &str) -> String {
    format!("e2e_cds_{test}_{}", std::process::id())
}

fn out(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The podman container of workload `workload` of agent `agent`.
fn podman_container(agent: &str, workload: &str) -> Option<serde_json::Value> {
    let prefix = format!("{workload}.");
    containers_of(agent).into_iter().find(|c| c["Labels"]["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
}

/// `podman inspect` of a container: its name and configuration.
fn podman_inspect(id: &str) -> serde_json::Value {
    let o = Command::new("podman").args(["inspect", id]).output().expect("podman inspect");
    assert!(o.status.success(), "podman inspect {id}: {}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("podman inspect json");
    let c = &v[0];
    serde_json::json!({"Name": c["Name"], "ImageName": c["ImageName"], "Config": c["Config"]})
}

/// The containerd container of workload `workload` in `ns`.
fn containerd_container(ns: &Namespace, workload: &str) -> Option<String> {
    let prefix = format!("{workload}.");
    ns.ids("containers").into_iter().find(|id| id.starts_with(&prefix))
}

/// `ctr containers info` without its update time.
fn containerd_info(ns: &Namespace, id: &str) -> serde_json::Value {
    let o = ns.ctr(&["containers", "info", id]);
    assert!(o.status.success(), "ctr containers info {id}: {}", out(&o));
    let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("ctr containers info json");
    v.as_object_mut().expect("an object").remove("UpdatedAt");
    v
}

fn restart_manifest(a: &str, b: &str, init_options: &str) -> String {
    format!(
        r#"apiVersion: v1
workloads:
  web_service_init:
    runtime: podman
    agent: {a}
    restartPolicy: NEVER
    dependencies:
      filesystem_init: ADD_COND_SUCCEEDED
    runtimeConfig: |
      image: {IMAGE}
      commandOptions: [ "--entrypoint", "/bin/sleep"{init_options} ]
      commandArgs: [ "2" ]
  filesystem_init:
    runtime: podman
    agent: {a}
    restartPolicy: NEVER
    runtimeConfig: |
      image: {IMAGE}
      commandOptions: [ "--entrypoint", "/bin/sleep" ]
      commandArgs: [ "1" ]
  web_service:
    runtime: containerd
    agent: {b}
    restartPolicy: NEVER
    dependencies:
      filesystem_init: ADD_COND_SUCCEEDED
    runtimeConfig: |
      image: {IMAGE}
      commandArgs: [ "sh", "-c", "trap 'exit 0' TERM; sleep 1000000 & wait" ]
"#
    )
}

/// How the device restart ends the containerd tasks.
#[derive(Clone, Copy, PartialEq, Debug)]
enum TaskEnd {
    /// SIGTERM, as the suite's `nerdctl stop`: sleepy's handler exits 0.
    Term,
    /// SIGKILL: the task ends Failed (exit 137).
    Kill,
}

/// The device restart of `device_restart_with_dependencies.robot`, the
/// containerd tasks ended by `end`; returns web_service's container id, its
/// `ctr containers info` and its task pid before and after the restart.
fn device_restart(test: &str, end: TaskEnd) -> (String, [(serde_json::Value, u32); 2]) {
    let ns = Namespace::new(test);
    let (a, b) = (agent_name(&format!("{test}_A")), agent_name(&format!("{test}_B")));
    let dir = tempfile::tempdir().expect("temp dir");
    let first = dir.path().join("device_restart_with_dependencies.yaml");
    let modified = dir.path().join("device_restart_with_dependencies_modified_web_service_init.yaml");
    std::fs::write(&first, restart_manifest(&a, &b, "")).expect("write manifest");
    std::fs::write(&modified, restart_manifest(&a, &b, r#", "-e", "ENV=TEST""#)).expect("write manifest");
    let ns_args = ["--containerd-namespace", ns.name.as_str()];
    let mut c =
        Cluster::start_opts(&a, ClusterOptions { manifest: Some(&first), agent_args: &ns_args, ..Default::default() });
    let mut agent_b = c.extra_agent(&b, &ns_args);
    agent_b.start();
    c.wait_for_agent_named(&b, Duration::from_secs(20));

    // The runtimes assigned ids; web_service (after filesystem_init
    // succeeded) runs in a task.
    let limit = Duration::from_secs(30);
    let fs_init = ank_tests::poll(limit, "filesystem_init container", || podman_container(&a, "filesystem_init"));
    let ws_init = ank_tests::poll(limit, "web_service_init container", || podman_container(&a, "web_service_init"));
    c.wait_state("web_service", "Running(Ok)", limit);
    let ws = containerd_container(&ns, "web_service").expect("web_service container");
    let fs_init_id = fs_init["Id"].as_str().expect("Id").to_owned();
    let ws_init_id = ws_init["Id"].as_str().expect("Id").to_owned();
    let fs_init_config = podman_inspect(&fs_init_id);
    let ws_info = containerd_info(&ns, &ws);
    let ws_pid = ns.tasks().into_iter().find(|t| t.0 == ws).map(|t| t.1).expect("web_service task");

    // Full device restart: Ankaios killed (as the suite's "Terminate
    // Process kill=True"), the containers stopped, the tasks ended.
    c.kill_server();
    c.kill_agent();
    agent_b.kill();
    let ids: Vec<String> = containers_of(&a).iter().filter_map(|x| x["Id"].as_str().map(str::to_owned)).collect();
    let o = Command::new("podman").args(["stop", "-t", "0"]).args(&ids).output().expect("podman stop");
    assert!(o.status.success(), "podman stop: {}", out(&o));
    let signal = if end == TaskEnd::Term { "SIGTERM" } else { "SIGKILL" };
    for (id, _, _) in ns.tasks() {
        let o = ns.ctr(&["tasks", "kill", "-s", signal, &id]);
        assert!(o.status.success() || out(&o).contains("not running"), "ctr tasks kill {id}: {}", out(&o));
    }
    ank_tests::poll(Duration::from_secs(10), "every containerd task stopped", || {
        ns.tasks().iter().all(|t| t.2 == "STOPPED").then_some(())
    });
    assert_eq!(ns.ids("containers"), vec![ws.clone()], "the containerd container stays");

    // Ankaios comes back with the modified manifest, agent_B first.
    c.set_startup_manifest(&modified);
    c.start_server();
    agent_b.start();
    c.wait_for_agent_named(&b, Duration::from_secs(20));
    // agent_A is not there yet, so filesystem_init cannot succeed.
    c.wait_state("web_service", "Pending(WaitingToStart)", Duration::from_secs(20));
    c.start_agent();
    c.wait_for_agent(Duration::from_secs(20));
    c.wait_state("web_service", "Running(Ok)", Duration::from_secs(30));

    // filesystem_init: succeeded before, so started again in its container.
    let now = ank_tests::poll(Duration::from_secs(20), "filesystem_init container", || {
        podman_container(&a, "filesystem_init")
    });
    assert_eq!(now["Id"].as_str(), Some(fs_init_id.as_str()), "filesystem_init has a new container");
    assert_eq!(podman_inspect(&fs_init_id), fs_init_config, "filesystem_init's configuration changed");
    // web_service_init: changed, so replaced.
    ank_tests::poll(Duration::from_secs(20), "web_service_init with a new container id", || {
        podman_container(&a, "web_service_init").filter(|x| x["Id"].as_str() != Some(ws_init_id.as_str()))
    });
    // web_service: the container of the same id, running a new task.
    assert_eq!(containerd_container(&ns, "web_service").as_deref(), Some(ws.as_str()), "web_service's container id");
    let task = ns.tasks().into_iter().find(|t| t.0 == ws).expect("web_service task");
    assert_eq!(task.2, "RUNNING", "{task:?}");
    let after = (containerd_info(&ns, &ws), task.1);
    drop(agent_b);
    (ws, [(ws_info, ws_pid), after])
}

#[test]
// [stest->swdd~agent-enqueues-unfulfilled-create~1]
// [stest->swdd~agent-handles-workloads-with-fulfilled-dependencies~1]
// [stest->swdd~agent-initial-list-existing-workloads~1]
// [stest->swdd~agent-existing-workloads-replace-updated~2]
fn e2e_suite_device_restart_with_dependencies_reuses_unchanged_containers() {
    let (ws, [(before, pid_before), (after, pid_after)]) = device_restart("restart", TaskEnd::Term);
    // The same container (created once, same configuration), a new task.
    assert_eq!(after, before, "web_service's container {ws} changed");
    assert_ne!(pid_after, pid_before, "web_service runs in a new task");
}

/// The device restart with the containerd task killed (SIGKILL) instead of
/// stopped: it ended Failed, and a failed workload is not started again
/// but created anew (Ankaios reuses only succeeded ones); with the same id
/// (the short name) and configuration, created later.
#[test]
// [stest->swdd~agent-existing-workloads-replace-updated~2]
fn e2e_suite_device_restart_with_a_killed_containerd_task_recreates_it() {
    let (ws, [(mut before, pid_before), (mut after, pid_after)]) = device_restart("restartkill", TaskEnd::Kill);
    let created = |v: &mut serde_json::Value| v.as_object_mut().and_then(|o| o.remove("CreatedAt"));
    let (c_before, c_after) = (created(&mut before), created(&mut after));
    assert_ne!(c_after, c_before, "web_service's container {ws} was not created anew");
    assert_eq!(after, before, "web_service's configuration changed");
    assert_ne!(pid_after, pid_before, "web_service runs in a new task");
}

/// The bytes of the binary file: control bytes and non-ASCII text, no NUL
/// (they come back through a log line).
const BINARY: &[u8] = b"\x01\x02\x1b[0m\x7fbin\xc3\xa4r\xe2\x82\xac\tHello, World!";

fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// `GET /custom` on 127.0.0.1:`port`: the body, or `None` while nothing
/// answers with 200.
fn http_get(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /custom HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then_some(())?;
    head.lines().next()?.contains(" 200 ").then(|| body.to_owned())
}

#[test]
fn e2e_suite_workload_files_text_and_binary_on_podman_and_containerd() {
    let ns = Namespace::new("wfiles");
    let agent = agent_name("wfiles");
    let (p_port, c_port) = (ank_tests::free_port(), ank_tests::free_port());
    let page = "The mounted custom file is being served!";
    let text_workload = |name: &str, runtime: &str, port: u16| {
        format!(
            "  {name}:\n    agent: {agent}\n    runtime: {runtime}\n    configs:\n      page: web_page\n    files:\n      - mountPoint: \"/www/custom\"\n        data: \"{{{{page}}}}\"\n    runtimeConfig: |\n      image: {IMAGE}\n      commandOptions: [ \"-p\", \"{port}:80\" ]\n      commandArgs: [ \"httpd\", \"-f\", \"-p\", \"80\", \"-h\", \"/www\" ]\n"
        )
    };
    let binary_workload = |name: &str, runtime: &str| {
        format!(
            "  {name}:\n    agent: {agent}\n    runtime: {runtime}\n    configs:\n      bin_data: bin_data\n    files:\n      - mountPoint: \"/hello\"\n        binaryData: \"{{{{bin_data}}}}\"\n    runtimeConfig: |\n      image: {IMAGE}\n      commandOptions: [ \"--entrypoint\", \"/bin/sh\" ]\n      commandArgs: [ \"-c\", \"cat /hello\" ]\n"
        )
    };
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n{}{}{}{}configs:\n  web_page: |\n    {page}\n  bin_data: {}\n",
        text_workload("podman_workload_with_mounted_text_file", "podman", p_port),
        binary_workload("podman_workload_with_mounted_binary_file", "podman"),
        text_workload("containerd_workload_with_mounted_text_file", "containerd", c_port),
        binary_workload("containerd_workload_with_mounted_binary_file", "containerd"),
        base64(BINARY),
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("manifest_with_workload_files.yaml");
    std::fs::write(&path, &manifest).expect("write manifest");
    let c = Cluster::start_with(&agent, Some(&path), &["--containerd-namespace", &ns.name]);

    let limit = Duration::from_secs(30);
    c.wait_state("podman_workload_with_mounted_text_file", "Running(Ok)", limit);
    c.wait_state("podman_workload_with_mounted_binary_file", "Succeeded(Ok)", limit);
    c.wait_state("containerd_workload_with_mounted_text_file", "Running(Ok)", limit);
    c.wait_state("containerd_workload_with_mounted_binary_file", "Succeeded(Ok)", limit);
    for port in [p_port, c_port] {
        let body = ank_tests::poll(Duration::from_secs(10), &format!("GET /custom on port {port}"), || http_get(port));
        assert_eq!(body, format!("{page}\n"), "the mounted text file on port {port}");
    }
    for name in ["podman_workload_with_mounted_binary_file", "containerd_workload_with_mounted_binary_file"] {
        let o = c.ank(&["logs", name]);
        assert!(o.status.success(), "ank logs {name}: {}", out(&o));
        assert_eq!(o.stdout.strip_suffix(b"\n").unwrap_or(&o.stdout), BINARY, "the bytes {name} read: {}", out(&o));
    }
}

#[test]
fn e2e_suite_workload_logs_of_two_agents_and_runtimes() {
    let ns = Namespace::new("wlogs");
    let (a, b) = (agent_name("wlogs_A"), agent_name("wlogs_B"));
    let manifest = format!(
        r#"apiVersion: v1
workloads:
  count_to_five:
    runtime: podman
    restartPolicy: NEVER
    agent: {a}
    runtimeConfig: |
      image: {IMAGE}
      commandOptions: [ "--entrypoint", "/bin/sh" ]
      commandArgs: [ "-c", "echo -e '1\n2\n3\n4\n5'" ]
  count_to_three:
    runtime: containerd
    restartPolicy: NEVER
    agent: {b}
    runtimeConfig: |
      image: {IMAGE}
      commandOptions: [ "--entrypoint", "/bin/sh" ]
      commandArgs: [ "-c", "echo -e '1\n2\n3'" ]
"#
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("workload_logs.yaml");
    std::fs::write(&path, &manifest).expect("write manifest");
    let ns_args = ["--containerd-namespace", ns.name.as_str()];
    let c =
        Cluster::start_opts(&a, ClusterOptions { manifest: Some(&path), agent_args: &ns_args, ..Default::default() });
    let mut agent_b = c.extra_agent(&b, &ns_args);
    agent_b.start();
    c.wait_for_agent_named(&b, Duration::from_secs(20));

    c.wait_state("count_to_five", "Succeeded(Ok)", Duration::from_secs(30));
    c.wait_state("count_to_three", "Succeeded(Ok)", Duration::from_secs(30));
    let names: Vec<String> = c.workload_rows().into_iter().map(|(n, _)| n).collect();
    let mut args = vec!["logs"];
    args.extend(names.iter().map(String::as_str));
    let o = c.ank(&args);
    assert!(o.status.success(), "ank logs: {}", out(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 8, "8 log lines in total: {text}");
    for line in &lines {
        let mut words = line.split(' ');
        let first = words.next().unwrap_or_default();
        assert!(names.iter().any(|n| n == first), "a line that does not start with a workload name: {line:?}");
        assert!(words.next().is_some(), "a line with only a name: {line:?}");
    }
    for (name, count) in [("count_to_five", 5), ("count_to_three", 3)] {
        let own: Vec<&str> = lines.iter().filter(|l| l.starts_with(&format!("{name} "))).copied().collect();
        let want: Vec<String> = (1..=count).map(|i| format!("{name} {i}")).collect();
        assert_eq!(own, want, "{text}");
    }
    drop(agent_b);
}

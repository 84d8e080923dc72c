//! Live takeover of an Ankaios node's containerd workloads: Ankaios' agent
//! makes them with `nerdctl run` (a 64-hex container id of nerdctl's, the
//! labels `name=<instance>` and `agent=<agent>`, the snapshot keyed by the
//! container id). Here `ctr run` makes such a container (nerdctl is not in
//! Debian), then our server and agent start with the manifest it came from:
//! the task runs on untouched (same pid) and is reported `Running(Ok)`, and
//! deleting the workload removes container, task and snapshot.

use std::time::{Duration, Instant};

use ank_tests::ankaios_podman::config_id;
use ank_tests::binaries::{Cluster, ClusterOptions};
use ank_tests::containerd::{IMAGE, Namespace};

#[test]
fn e2e_containerd_takeover_adopts_a_running_nerdctl_made_task_without_restarting_it() {
    let ns = Namespace::new("takeover");
    let agent = format!("e2e_cd_takeover_{}", std::process::id());
    let runtime_config =
        format!("image: {IMAGE}\ncommandOptions: [\"--net=none\"]\ncommandArgs: [\"sleep\", \"100000\"]\n");
    let instance = format!("kept.{}.{agent}", config_id(&runtime_config));
    // nerdctl's ids are 64 hex digits.
    let id = format!("{:0>64}", format!("{:x}", std::process::id()));
    let o = ns.ctr(&[
        "run",
        "-d",
        "--label",
        &format!("name={instance}"),
        "--label",
        &format!("agent={agent}"),
        IMAGE,
        &id,
        "sleep",
        "100000",
    ]);
    assert!(o.status.success(), "ctr run: {}", String::from_utf8_lossy(&o.stderr));
    let before = ns.tasks();
    assert_eq!(before.len(), 1, "{before:?}");

    let manifest_dir = tempfile::tempdir().expect("temp dir");
    let manifest = manifest_dir.path().join("state.yaml");
    let indented: String = runtime_config.lines().map(|l| format!("      {l}\n")).collect();
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nworkloads:\n  kept:\n    runtime: containerd\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n{indented}"
        ),
    )
    .expect("write the manifest");
    let c = Cluster::start_opts(
        &agent,
        ClusterOptions {
            manifest: Some(&manifest),
            agent_args: &["--containerd-namespace", &ns.name],
            ..Default::default()
        },
    );
    let start = Instant::now();
    loop {
        let rows = c.workload_rows();
        if rows.iter().any(|(n, s)| n == "kept" && s == "Running(Ok)") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "not adopted: {rows:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(ns.tasks(), before, "the task runs on: same id, pid and status");
    assert_eq!(ns.ids("containers"), std::slice::from_ref(&id), "no second container");

    let o = c.ank(&["delete", "workload", "kept"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(30), |c| c.workload_rows().is_empty());
    assert!(ns.ids("containers").is_empty(), "container left: {:?}", ns.ids("containers"));
    assert!(ns.tasks().is_empty(), "task left");
    assert!(!ns.ids("snapshots").contains(&id), "snapshot left");
}

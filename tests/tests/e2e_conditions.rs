//! End to end with the built binaries and real podman: generations and
//! the Ready / Available conditions as a user sees them (`ank get
//! workloads`, `-o yaml`, `ank wait`).

use ank_tests::binaries::Cluster;

fn manifest(agent: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {image}\n      commandArgs: [\"sleep\", \"100003\"]\n"
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// [stest of feature H3]
#[test]
fn e2e_ank_wait_for_ready_succeeds_and_times_out_naming_the_reason() {
    ank_tests::require_podman();
    let agent = format!("e2e_cond_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent, "localhost/busybox:latest")));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    let o = c.ank(&["wait", "workload/w", "--for", "Ready", "--timeout", "60s"]);
    assert!(o.status.success(), "wait failed: {}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "workload/w: Ready\n");

    let table = text(&c.ank(&["get", "workloads", "-o", "wide"]).stdout);
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("READY") && header.contains("AVAILABLE"), "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row[3..6], ["Running(Ok)", "True", "True"], "{table}");
    let yaml = text(&c.ank(&["get", "workloads", "-o", "yaml"]).stdout);
    assert!(yaml.contains("generation: 1") && yaml.contains("observedGeneration: 1"), "{yaml}");

    // An image that does not exist: not Ready, and wait says why.
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&manifest(&agent, "localhost/busybox:no-such-tag")));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    let o = c.ank(&["wait", "workload/w", "--for", "Ready", "--timeout", "5s"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = text(&o.stderr);
    assert!(err.contains("timed out after 5s waiting for Ready") && err.contains("workload/w: Ready=False ("), "{err}");
    let yaml = text(&c.ank(&["get", "workloads", "-o", "yaml"]).stdout);
    assert!(yaml.contains("generation: 2"), "{yaml}");
    let table = text(&c.ank(&["get", "workloads", "-o", "wide"]).stdout);
    let row: Vec<&str> = table.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row.get(4), Some(&"False"), "READY of the new generation: {table}");
}

// [stest of feature H3]
#[test]
fn e2e_ank_wait_follows_the_conditions_as_they_change() {
    ank_tests::require_podman();
    let agent = format!("e2e_cond_follow_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    // `w` waits for `d`, which is not there yet: the wait begins before `w` is Ready.
    let waiting =
        format!("{}    dependencies:\n      d: ADD_COND_RUNNING\n", manifest(&agent, "localhost/busybox:latest"));
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&waiting));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    c.wait_until(std::time::Duration::from_secs(20), |c| {
        c.workload_rows().iter().any(|(n, s)| n == "w" && s.starts_with("Pending"))
    });
    let wait = std::process::Command::new(ank_tests::binaries::bin("ank"))
        .args(["--insecure", "--server-url", &c.url, "wait", "workload/w", "--for", "Ready", "--timeout", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn ank wait");
    let d = manifest(&agent, "localhost/busybox:latest").replace("  w:\n", "  d:\n");
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&d));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    let o = wait.wait_with_output().expect("ank wait output");
    assert!(o.status.success(), "wait did not see w become Ready: {}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "workload/w: Ready\n");
}

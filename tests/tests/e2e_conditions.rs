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

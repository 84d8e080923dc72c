//! End to end with the built binaries and real podman: the streaming ank
//! commands, `ank logs` (through the server and the agent) and
//! `ank get workloads --watch`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use ank_tests::binaries::{Cluster, bin};

#[test]
fn e2e_logs_prints_tails_follows_and_names_unknown_workloads() {
    let agent = format!("e2e_logs_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n  talker:\n    runtime: podman\n    agent: {agent}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [\"sh\", \"-c\", \"echo one; echo two; echo three; sleep 2; echo later; sleep 100000\"]\n"
    );
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(20), |c| {
        let o = c.ank(&["logs", "talker"]);
        String::from_utf8_lossy(&o.stdout).contains("three")
    });

    let o = c.ank(&["logs", "talker"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("one\ntwo\nthree\n"), "{o:?}");
    let o = c.ank(&["logs", "-n", "-t", "1", "talker"]);
    let tail = String::from_utf8_lossy(&o.stdout).into_owned();
    // Ankaios' form: the name, a space, the line.
    assert!(tail == "talker three\n" || tail == "talker later\n", "one line, with the name: {tail:?}");

    let o = c.ank(&["logs", "nope"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Workload name 'nope' does not exist."), "Ankaios' message: {err}");

    // --follow streams the line printed later, until interrupted.
    let mut follow = Command::new(bin("ank"))
        .args(["--insecure", "--server-url", &c.url, "logs", "-f", "talker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ank logs -f");
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l == "later") {
        seen.push(lines.next().expect("a line").expect("readable"));
    }
    let _ = Command::new("kill").args(["-INT", &follow.id().to_string()]).status();
    let status = follow.wait().expect("ank logs -f ends on SIGINT");
    assert!(status.success(), "{status:?}");
}

#[test]
fn e2e_get_workloads_watch_shows_changes_until_interrupted() {
    let agent = format!("e2e_watch_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let mut watch = Command::new(bin("ank"))
        .args(["--insecure", "--server-url", &c.url, "get", "workloads", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ank get workloads -w");
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert!(lines.next().expect("the header").expect("readable").starts_with("WORKLOAD NAME"));
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n  watched:\n    runtime: podman\n    agent: {agent}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [\"sleep\", \"100000\"]\n"
    );
    let o = c.ank_stdin(&["apply", "--no-wait", "-"], Some(&manifest));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    loop {
        let line = lines.next().expect("the table is redrawn").expect("readable");
        if line.starts_with("watched") && line.contains("Running(Ok)") {
            break;
        }
    }
    let _ = Command::new("kill").args(["-INT", &watch.id().to_string()]).status();
    let status = watch.wait().expect("ank get workloads -w ends on SIGINT");
    assert!(status.success(), "{status:?}");
}

#[test]
fn e2e_get_events_prints_json_lines_until_interrupted() {
    let agent = format!("e2e_events_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let mut events = Command::new(bin("ank"))
        .args([
            "-v",
            "--insecure",
            "--server-url",
            &c.url,
            "get",
            "events",
            "-o",
            "json",
            "-c",
            "desiredState.workloads",
            "workloadStates",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ank get events");
    let mut lines = BufReader::new(events.stdout.take().unwrap()).lines();
    // With -v it says on stderr when the server has the subscription.
    let mut stderr = BufReader::new(events.stderr.take().unwrap()).lines();
    while !stderr.next().expect("ank is running").expect("readable").starts_with("subscribed to events") {}
    std::thread::spawn(move || stderr.for_each(drop));
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n  evt:\n    runtime: podman\n    agent: {agent}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [\"sleep\", \"100000\"]\n"
    );
    let o = c.ank_stdin(&["apply", "--no-wait", "-"], Some(&manifest));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    // With -c the state at subscription time comes first, as in Ankaios.
    let line = lines.next().expect("the current state").expect("readable");
    let current: serde_json::Value = serde_json::from_str(&line).expect("one JSON object per line");
    assert!(current.get("addedFields").is_none(), "{line}");
    assert!(current["completeState"]["desiredState"]["workloads"].get("evt").is_none(), "{line}");
    let line = lines.next().expect("an event").expect("readable");
    let event: serde_json::Value = serde_json::from_str(&line).expect("one JSON object per line");
    assert_eq!(event["addedFields"][0], "desiredState.workloads.evt", "{line}");
    assert!(event["timestamp"].as_str().is_some_and(|t| t.ends_with("+00:00")), "{line}");
    assert_eq!(event["completeState"]["desiredState"]["workloads"]["evt"]["agent"], agent.as_str(), "{line}");
    // Then the execution states of the new instance, up to Running.
    loop {
        let line = lines.next().expect("more events").expect("readable");
        let event: serde_json::Value = serde_json::from_str(&line).expect("one JSON object per line");
        let states = &event["completeState"]["workloadStates"][agent.as_str()]["evt"];
        if states.as_object().is_some_and(|ids| ids.values().any(|s| s["state"] == "Running")) {
            break;
        }
    }
    let _ = Command::new("kill").args(["-INT", &events.id().to_string()]).status();
    let status = events.wait().expect("ank get events ends on SIGINT");
    assert!(status.success(), "{status:?}");
}

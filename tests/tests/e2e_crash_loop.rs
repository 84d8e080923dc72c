//! End to end with the built binaries and real podman: the crash-loop
//! limits of issue 39 (`restartBackoff`) as a user sees them: the
//! `CrashLoop` events of `ank get events` show the restarts' delays grow,
//! and after `attempts` restarts the workload stays `Failed(ExecFailed)`
//! with the reason, its container no longer replaced.

use std::time::Duration;

use ank_tests::binaries::Cluster;

const IMAGE: &str = "localhost/busybox:latest";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn crashing(agent: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nworkloads:\n  {name}:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: ALWAYS\n    \
         restartBackoff: {{initialDelay: 1s, maxDelay: 8s, attempts: 4, interval: 10m}}\n    runtimeConfig: |\n      \
         image: {IMAGE}\n      commandArgs: [\"sh\", \"-c\", \"exit 1\"]\n"
    )
}

/// The `CrashLoop` events of `name` as (reason, firstSeen), oldest first.
fn crash_loop_events(c: &Cluster, name: &str) -> Vec<(String, String)> {
    let o = c.ank(&["get", "events", name, "-o", "json"]);
    let records: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    records[name]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "CrashLoop")
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_owned(),
                e["firstSeen"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Milliseconds of the day of an RFC 3339 time `...THH:MM:SS.mmmZ`.
fn ms_of_day(rfc3339: &str) -> i64 {
    let time = rfc3339.split('T').nth(1).and_then(|t| t.strip_suffix('Z')).expect("an RFC 3339 UTC time");
    let (hms, ms) = time.split_once('.').unwrap_or((time, "0"));
    let parts: Vec<i64> = hms.split(':').map(|p| p.parse().expect("a number")).collect();
    ((parts[0] * 60 + parts[1]) * 60 + parts[2]) * 1000 + ms.parse::<i64>().expect("milliseconds")
}

/// The time from `a` to `b`, across midnight too.
fn between(a: &str, b: &str) -> Duration {
    let ms = (ms_of_day(b) - ms_of_day(a)).rem_euclid(86_400_000);
    Duration::from_millis(ms.unsigned_abs())
}

// [stest of feature issue 39: growing restart delays, then the restart limit]
#[test]
fn e2e_crash_loop_restarts_grow_apart_and_stop_at_the_limit_with_a_crash_loop_event() {
    ank_tests::require_podman();
    let agent = format!("e2e_crashloop_{}", std::process::id());
    let name = format!("crashy{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&crashing(&agent, &name)));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    let limit = "restart limit reached: 4 restarts within 10m; not restarted again";
    c.wait_until(Duration::from_secs(120), |c| crash_loop_events(c, &name).iter().any(|(r, _)| r == limit));
    let events = crash_loop_events(&c, &name);
    let reasons: Vec<&str> = events.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(reasons.len(), 5, "4 delayed restarts and the limit: {reasons:?}");
    for (n, reason) in reasons[..4].iter().enumerate() {
        assert!(
            reason.starts_with(&format!("restart {} in ", n + 1)) && reason.ends_with("s (backoff)"),
            "{reasons:?}"
        );
    }
    // Each exit is recorded when the container exits; from one to the next
    // pass the delay (within the upper half of 1 s, 2 s, 4 s, 8 s) and
    // the time to create and run the container again.
    let times: Vec<&str> = events.iter().map(|(_, t)| t.as_str()).collect();
    let gaps: Vec<Duration> = times.windows(2).map(|w| between(w[0], w[1])).collect();
    eprintln!("CrashLoop events {events:#?}\nintervals {gaps:?}");
    let overhead = Duration::from_secs(10);
    for (n, gap) in gaps.iter().enumerate() {
        let ceiling = Duration::from_secs(1 << n);
        assert!(*gap >= ceiling / 2 && *gap <= ceiling + overhead, "gap {n}: {gap:?} ({times:?})");
    }
    assert!(gaps[3] > gaps[0] + Duration::from_secs(2), "the intervals grow: {gaps:?} ({times:?})");
    assert!(gaps[2] + gaps[3] > gaps[0] + gaps[1], "the intervals grow: {gaps:?}");

    // It stays failed, with the reason, and is not restarted again.
    let table = text(&c.ank(&["get", "workloads"]).stdout);
    assert!(table.contains("Failed(ExecFailed)") && table.contains("restart limit reached"), "{table}");
    let ids = |c: &Cluster| -> Vec<String> {
        c.containers().iter().filter_map(|ctr| ctr["Id"].as_str().map(str::to_owned)).collect()
    };
    let before = ids(&c);
    assert_eq!(before.len(), 1, "the failed container stays, as in Ankaios: {before:?}");
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(ids(&c), before, "not restarted after the limit");
    assert_eq!(crash_loop_events(&c, &name).len(), 5);
    let yaml = text(&c.ank(&["get", "workloads", "-o", "yaml"]).stdout);
    assert!(yaml.contains(limit), "the Available condition's message names the limit: {yaml}");

    let o = c.ank(&["delete", "workload", &name]);
    assert!(o.status.success(), "delete failed: {}", text(&o.stderr));
    c.wait_until(Duration::from_secs(30), |c| c.containers().is_empty());
}

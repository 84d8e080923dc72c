//! End to end on real systemd: the Debian package (`tools/build-deb.sh
//! --profile dev`) is installed with `dpkg -i` in a container that boots
//! systemd as PID 1 (`localhost/ank-systemd:latest`,
//! `tools/build-systemd-image.sh`), with podman nested inside. Checks that
//! the `Type=notify` units of server and agent become active with a status
//! text, the health checks pass, the sample manifest of the package runs
//! `hello` on `agent_A` with the certificates made by postinst, the journal
//! carries no timestamps of our own, a reload keeps the server up, stopping
//! ends the units as `inactive` within their timeout and leaves the
//! workload running, and a restarted agent takes the same container over.
//!
//! Fails (never skips) when podman, the image or the package is missing,
//! naming the command that makes it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const IMAGE: &str = "localhost/ank-systemd:latest";
/// `TimeoutStopSec=` of both units.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The package `tools/build-deb.sh --profile dev` wrote into
/// `<target>/debian/dev/`.
fn dev_package() -> PathBuf {
    let target = ank_tests::binaries::bin_dir().parent().expect("target folder").to_path_buf();
    let dir = target.join("debian").join("dev");
    let found = std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.unwrap_or_else(|| {
        panic!(
            "no .deb in {}: build it with `bash tools/build-deb.sh --profile dev` (tools/test.sh does)",
            dir.display()
        )
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A container running systemd as PID 1; removed on drop.
struct SystemdHost {
    name: String,
}

impl SystemdHost {
    fn boot() -> Self {
        ank_tests::require_podman();
        let exists = Command::new("podman").args(["image", "exists", IMAGE]).status().expect("podman image exists");
        assert!(
            exists.success(),
            "image {IMAGE} missing: build it with `bash tools/build-systemd-image.sh` (tools/test.sh does)"
        );
        let name = format!("ank-e2e-systemd-{}", std::process::id());
        let _ = Command::new("podman").args(["rm", "-f", "-t", "0", &name]).output();
        // --cgroupns=private: systemd and the nested podman see the
        // container's own cgroup tree as the root (needed on cgroup v1).
        let out = Command::new("podman")
            .args(["run", "-d", "--name", &name, "--systemd=always", "--privileged", "--cgroupns=private", IMAGE])
            .output()
            .expect("podman run");
        assert!(out.status.success(), "cannot start {IMAGE}: {}", text(&out.stderr));
        let host = Self { name };
        // `--wait` answers `offline` at once while PID 1 does not listen yet.
        let start = Instant::now();
        loop {
            let state = text(&host.sh("timeout 60 systemctl is-system-running --wait").stdout);
            if matches!(state.trim(), "running" | "degraded") {
                return host;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "systemd did not finish booting: '{}'; failed units: {}",
                state.trim(),
                text(&host.sh("systemctl --failed --no-legend --no-pager").stdout)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs `sh -c script` inside.
    fn sh(&self, script: &str) -> Output {
        Command::new("podman").args(["exec", &self.name, "sh", "-c", script]).output().expect("podman exec")
    }

    /// Runs `script`, panics with its output unless it exits 0; returns stdout.
    fn ok(&self, script: &str) -> String {
        let o = self.sh(script);
        assert!(o.status.success(), "'{script}' failed ({}):\n{}{}", o.status, text(&o.stdout), text(&o.stderr));
        text(&o.stdout)
    }

    fn copy_in(&self, from: &Path, to: &str) {
        let o = Command::new("podman")
            .args(["cp"])
            .arg(from)
            .arg(format!("{}:{to}", self.name))
            .output()
            .expect("podman cp");
        assert!(o.status.success(), "podman cp {}: {}", from.display(), text(&o.stderr));
    }

    fn property(&self, unit: &str, name: &str) -> String {
        self.ok(&format!("systemctl show -p {name} --value {unit}")).trim().to_owned()
    }

    /// Journal of `unit`, for failure messages.
    fn journal(&self, unit: &str) -> String {
        text(&self.sh(&format!("journalctl -u {unit} -o cat --no-pager | tail -n 30")).stdout)
    }

    fn assert_active(&self, unit: &str) {
        let state = self.property(unit, "ActiveState");
        assert_eq!(state, "active", "{unit} is {state}; its journal:\n{}", self.journal(unit));
    }

    /// Stops `unit`, checks it ends `inactive` (not `failed`) within its
    /// stop timeout; returns how long the stop took.
    fn stop(&self, unit: &str) -> Duration {
        let start = Instant::now();
        self.ok(&format!("systemctl stop {unit}"));
        let took = start.elapsed();
        assert!(took < STOP_TIMEOUT, "stopping {unit} took {took:?}, TimeoutStopSec is {STOP_TIMEOUT:?}");
        let state = self.property(unit, "ActiveState");
        let result = self.property(unit, "Result");
        assert_eq!(
            (state.as_str(), result.as_str()),
            ("inactive", "success"),
            "{unit} after stop; journal:\n{}",
            self.journal(unit)
        );
        took
    }

    /// `ank get workloads` (as root, with /etc/ankaios/ank.conf): state of `workload`.
    fn workload_state(&self, workload: &str) -> Option<String> {
        let o = self.sh("ank get workloads");
        if !o.status.success() {
            return None;
        }
        text(&o.stdout).lines().skip(1).find_map(|l| {
            let mut cols = l.split_whitespace();
            if cols.next()? != workload {
                return None;
            }
            cols.find(|c| c.contains('(')).map(str::to_owned)
        })
    }

    fn wait_running(&self, workload: &str, limit: Duration) {
        let start = Instant::now();
        loop {
            let state = self.workload_state(workload);
            if state.as_deref() == Some("Running(Ok)") {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "{workload} not Running(Ok) within {limit:?} (last: {state:?}); ank get workloads:\n{}\nagent journal:\n{}",
                text(&self.sh("ank get workloads 2>&1").stdout),
                self.journal("ank-agent")
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// (container id, StartedAt) of `workload`'s container of agent_A.
    fn container(&self, workload: &str) -> (String, i64) {
        let out = self.ok("podman ps --format json --filter label=agent=agent_A");
        let list: Vec<serde_json::Value> = serde_json::from_str(&out).expect("podman ps json");
        let found =
            list.iter().find(|c| c["Labels"]["name"].as_str().is_some_and(|n| n.split('.').next() == Some(workload)));
        let c = found.unwrap_or_else(|| panic!("no running container of {workload}: {out}"));
        (c["Id"].as_str().expect("Id").to_owned(), c["StartedAt"].as_i64().expect("StartedAt"))
    }
}

impl Drop for SystemdHost {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["rm", "-f", "-t", "0", &self.name]).output();
    }
}

/// A line that starts like `2026-04-01T16:05:59` or `16:05:59.123`.
fn starts_with_timestamp(line: &str) -> bool {
    let b = line.trim_start().as_bytes();
    let digits = |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
    (digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7) && b.get(7) == Some(&b'-'))
        || (digits(0..2) && b.get(2) == Some(&b':') && digits(3..5) && b.get(5) == Some(&b':'))
}

#[test]
fn timestamp_detection() {
    assert!(starts_with_timestamp("2026-04-01T16:05:59.123456Z  INFO ank_agent: x"));
    assert!(starts_with_timestamp("16:05:59.123 INFO x"));
    assert!(!starts_with_timestamp("INFO connected to server"));
    assert!(!starts_with_timestamp("<6>workload hello: Running(Ok)"));
}

#[test]
fn e2e_systemd_units_of_the_package_run_the_sample_manifest() {
    let deb = dev_package();
    let host = SystemdHost::boot();
    host.copy_in(&deb, "/tmp/ank.deb");

    // postinst: certificates, the busybox image, enabled (and started) units.
    let install = host.ok("dpkg -i /tmp/ank.deb 2>&1");
    assert!(install.contains("creating certificates"), "dpkg -i output:\n{install}");
    let modes = host.ok("stat -c '%a %n' /etc/ankaios/certs /etc/ankaios/certs/*-key.pem");
    for line in modes.lines() {
        assert!(line.starts_with("600 ") || line.starts_with("700 "), "too open: {line}");
    }
    assert_eq!(modes.lines().count(), 5, "certs folder and 4 keys (CA, server, agent_A, admin): {modes}");
    host.ok("podman image exists localhost/busybox:latest");
    for unit in ["ank-server", "ank-agent"] {
        assert_eq!(host.property(unit, "UnitFileState"), "enabled", "{unit}");
    }

    // Type=notify: `systemctl start` returns once READY=1 arrived.
    host.ok("systemctl start ank-server ank-agent");
    for unit in ["ank-server", "ank-agent"] {
        host.assert_active(unit);
        assert!(!host.property(unit, "StatusText").is_empty(), "{unit}: no STATUS=; journal:\n{}", host.journal(unit));
        assert_eq!(host.property(unit, "WatchdogUSec"), "30s", "{unit}");
    }
    host.ok("ank-server --check");
    host.ok("ank-agent --check");

    host.wait_running("hello", Duration::from_secs(60));
    let before = host.container("hello");

    // Where the agent reads podman's events from: the event log with the
    // `file` backend, else (journald here) a `podman events` child.
    let backend = host.ok("podman info --format '{{.Host.EventLogger}}'").trim().to_owned();
    let agent_log = host.ok("journalctl -u ank-agent -t ank-agent -o cat --no-pager");
    let source = agent_log.lines().find(|l| l.contains("container states from")).unwrap_or_default().to_owned();
    eprintln!("podman's events backend: {backend}; the agent: {source}");
    // The memory of the agent's process tree (PSS, kB), measured, not asserted.
    let tree = host.ok(
        "p=$(systemctl show -p MainPID --value ank-agent); for q in $p $(pgrep -P $p); do \
         printf '%s %s\\n' \"$(awk '/^Pss:/{print $2}' /proc/$q/smaps_rollup)\" \"$(tr '\\0' ' ' </proc/$q/cmdline | cut -c1-60)\"; done",
    );
    eprintln!("the agent's process tree (PSS kB, command):\n{tree}");
    // What systemd counts for the unit, children included (page cache too).
    let memory = host.property("ank-agent", "MemoryCurrent");
    eprintln!("MemoryCurrent of ank-agent.service: {memory} bytes");
    let expected = match backend.as_str() {
        "file" => "event log",
        "journald" => "systemd journal",
        _ => "(the fallback)",
    };
    assert!(source.contains(expected), "backend {backend}, but the agent says '{source}'");

    for unit in ["ank-server", "ank-agent"] {
        // -t: the daemon's own lines; podman's events (its journald event
        // logger, run from the agent's cgroup) carry their own timestamps.
        let journal = host.ok(&format!("journalctl -u {unit} -t {unit} -o cat --no-pager"));
        assert!(!journal.trim().is_empty(), "{unit}: empty journal");
        let stamped: Vec<&str> = journal.lines().filter(|l| starts_with_timestamp(l) || l.contains('\x1b')).collect();
        assert!(stamped.is_empty(), "{unit}: lines with a timestamp or colour of our own: {stamped:#?}");
    }

    // SIGHUP (certificates) keeps the server running.
    host.ok("systemctl reload ank-server");
    host.assert_active("ank-server");
    host.ok("ank-server --check");

    // Stopping the agent leaves the workload running, untouched.
    let agent_stop = host.stop("ank-agent");
    let check = host.sh("ank-agent --check");
    assert!(!check.status.success(), "ank-agent --check passes with the agent stopped");
    assert_eq!(host.container("hello"), before, "hello was not left running as it was");

    // The agent started again takes the same container over.
    host.ok("systemctl start ank-agent");
    host.assert_active("ank-agent");
    host.ok("ank-agent --check");
    host.wait_running("hello", Duration::from_secs(30));
    assert_eq!(host.container("hello"), before, "hello was restarted by the agent's restart");

    // A container removed behind the agent's back: seen from podman's events
    // (the reconcile runs every 30 s). Measured, not asserted.
    let victim = "apiVersion: v1\nworkloads:\n  victim:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [sleep, '100000']\n";
    host.ok(&format!("printf '%s' \"{victim}\" | ank apply -"));
    host.wait_running("victim", Duration::from_secs(60));
    let (id, _) = host.container("victim");
    host.ok(&format!("podman rm -f -t 0 {id}"));
    let removed = Instant::now();
    while host.workload_state("victim").as_deref() != Some("Failed(Lost)") {
        assert!(
            removed.elapsed() < Duration::from_secs(60),
            "victim not Failed(Lost): {:?}",
            host.workload_state("victim")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("a container removed behind the agent's back was shown Failed(Lost) {:?} later", removed.elapsed());

    let server_stop = host.stop("ank-server");
    let agent_stop_2 = host.stop("ank-agent");
    assert_eq!(host.container("hello"), before, "hello did not survive stopping both units");
    for unit in ["ank-server", "ank-agent"] {
        assert_eq!(host.property(unit, "NRestarts"), "0", "{unit} was restarted (crash or watchdog)");
    }
    eprintln!("stop times: ank-agent {agent_stop:?} and {agent_stop_2:?}, ank-server {server_stop:?}");
}

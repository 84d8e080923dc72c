//! End to end with the built binaries and real podman: five power cuts of
//! a device running a server (with `--state-file`), an agent and 20
//! workloads (restart policy ALWAYS, some with dependencies). Each cut
//! kills, with SIGKILL at a random moment, the server, the agent and every
//! conmon and container process of the agent (podman still lists those
//! containers as running: /run is not wiped here); in half of the cycles an
//! `ank apply` (a workload added, one changed, one deleted) is in flight.
//! The agent's podman calls in flight are killed too only with
//! `ANK_POWER_CUT_KILL_PODMAN=1` (see `ank_tests::power_cut`: podman's
//! locks outlive them on this host). After each "boot" (server and agent
//! started again on the same state file) it proves that:
//!
//! - the state file loads: the server starts and answers;
//! - the desired state is the last acknowledged one (an apply cut in
//!   flight may or may not have landed, but what the server says is what
//!   runs);
//! - every desired workload is reported `Running(Ok)` and runs exactly once
//!   (one container per workload of this agent, of the desired instance,
//!   whose main process is alive and in the container's cgroup);
//! - no orphan (a container of a workload that is not desired) and no
//!   ghost (a workload reported running whose process is dead) remain.
//!
//! The seed of the random moments is printed; `ANK_POWER_CUT_SEED=<seed>`
//! replays a run. Deviations name the cycle, the workload and what was seen.
//! `ANK_POWER_CUT_STOP_GHOSTS=1` makes podman mark the killed containers
//! exited before each boot (`podman stop`, about 5 s), as its refresh after
//! a real reboot does: the run then shows the deviations other than ghosts.

use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

use ank_tests::binaries::{Cluster, ClusterOptions};
use ank_tests::container_facts::{ContainerFacts, facts_of};
use ank_tests::power_cut::{Rng, cut_power};

const IMAGE: &str = "localhost/busybox:latest";
const CYCLES: usize = 5;
/// The workload the others depend on: never changed or deleted by the
/// test, so that every dependency stays satisfiable.
const DEPENDED_ON: &str = "p00";
/// The workloads that wait for it to run (also after a change).
const DEPENDENTS: [&str; 3] = ["p01", "p02", "p03"];

/// Desired workloads: name -> runtimeConfig.
type Workloads = BTreeMap<String, String>;

/// A service that stops at once on SIGTERM (a bare `sleep` as PID 1 ignores
/// it and waits out podman's stop timeout), so that an `ank apply` changing
/// one takes about a second and a cut lands in either of a change's steps.
fn runtime_config(sleep: u64) -> String {
    format!("image: {IMAGE}\ncommandArgs: [\"sh\", \"-c\", \"trap 'exit 0' TERM; sleep {sleep} & wait\"]")
}

/// What `b` has that `a` has not, or has otherwise: `+name`, `-name`,
/// `~name`.
fn difference(a: &Workloads, b: &Workloads) -> Vec<String> {
    let mut d: Vec<String> = b
        .iter()
        .filter_map(|(n, cfg)| match a.get(n) {
            None => Some(format!("+{n}")),
            Some(old) if old != cfg => Some(format!("~{n}")),
            Some(_) => None,
        })
        .collect();
    d.extend(a.keys().filter(|n| !b.contains_key(*n)).map(|n| format!("-{n}")));
    d
}

/// A manifest of `workloads` for `agent`: restart policy ALWAYS, and
/// `p01`..`p03` wait for `p00` to run.
fn manifest(agent: &str, workloads: &Workloads) -> String {
    let mut text = String::from("apiVersion: v1\nworkloads:\n");
    for (name, config) in workloads {
        text.push_str(&format!("  {name}:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: ALWAYS\n"));
        if DEPENDENTS.contains(&name.as_str()) {
            text.push_str("    dependencies:\n      p00: ADD_COND_RUNNING\n");
        }
        let indented: String = config.lines().map(|l| format!("      {l}\n")).collect();
        text.push_str(&format!("    runtimeConfig: |\n{indented}"));
    }
    text
}

/// One `ank apply` of a change: its arguments, manifest and the desired
/// workloads once it landed.
struct Step {
    args: Vec<&'static str>,
    manifest: String,
    after: Workloads,
}

/// A change of `acked` in two `ank apply`s: `x<cycle>` added and one
/// workload changed, then one deleted.
fn change(agent: &str, acked: &Workloads, cycle: usize, rng: &mut Rng) -> Vec<Step> {
    let movable: Vec<&String> = acked.keys().filter(|n| *n != DEPENDED_ON).collect();
    // Half of the time a dependent: after the cut its new instance waits
    // for `p00` while the dead container of its old one is still there.
    let dependents: Vec<&String> = movable.iter().copied().filter(|n| DEPENDENTS.contains(&n.as_str())).collect();
    let pool = if !dependents.is_empty() && rng.below(2) == 0 { &dependents } else { &movable };
    let changed = pool[rng.below(pool.len() as u64) as usize].clone();
    let deleted = loop {
        let d = movable[rng.below(movable.len() as u64) as usize];
        if *d != changed {
            break d.clone();
        }
    };
    let added = format!("x{cycle}");
    let mut first = Workloads::new();
    first.insert(added, runtime_config(200_000 + cycle as u64));
    first.insert(changed, runtime_config(300_000 + rng.below(100_000)));
    let mut after_first = acked.clone();
    after_first.extend(first.clone());
    let mut after_second = after_first.clone();
    let gone = Workloads::from([(deleted.clone(), after_second.remove(&deleted).unwrap_or_default())]);
    vec![
        Step { args: vec!["apply", "-"], manifest: manifest(agent, &first), after: after_first },
        Step { args: vec!["apply", "-d", "-"], manifest: manifest(agent, &gone), after: after_second },
    ]
}

/// Runs `steps` one after another until `cut_at`; returns the desired
/// workloads of the last acknowledged step (None: none was) and the one a
/// step in flight at the cut would give.
fn apply_until(c: &Cluster, steps: &[Step], cut_at: Instant) -> (Option<Workloads>, Option<Workloads>) {
    let mut acked = None;
    for step in steps {
        let mut child: Child = c.ank_spawn(&step.args, Some(&step.manifest));
        loop {
            if let Some(status) = child.try_wait().expect("wait for ank") {
                assert!(status.success(), "ank {:?} failed before any cut: {status}", step.args);
                acked = Some(step.after.clone());
                break;
            }
            if Instant::now() >= cut_at {
                cut(c);
                let _ = child.kill();
                let _ = child.wait();
                return (acked, Some(step.after.clone()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    while Instant::now() < cut_at {
        std::thread::sleep(Duration::from_millis(5));
    }
    cut(c);
    (acked, None)
}

fn cut(c: &Cluster) {
    let daemons: Vec<u32> = [c.server_pid(), c.agent_pid()].into_iter().flatten().collect();
    let killed = cut_power(&c.agent, &daemons, std::env::var_os("ANK_POWER_CUT_KILL_PODMAN").is_some());
    eprintln!("  power cut: {killed} processes killed");
    if std::env::var_os("ANK_POWER_CUT_STOP_GHOSTS").is_some() {
        let ids: Vec<String> = facts_of(&c.agent).into_iter().map(|f| f.id).collect();
        let _ = std::process::Command::new("podman").args(["stop", "-t", "1"]).args(&ids).output();
    }
}

/// `ank get state -o json` as JSON, if the server answers.
fn state(c: &Cluster) -> Option<serde_json::Value> {
    let o = c.ank(&["get", "state", "-o", "json"]);
    o.status.success().then(|| serde_json::from_slice(&o.stdout).ok()).flatten()
}

/// The desired workloads (name -> runtimeConfig) of `state`, and any
/// desired workload not on `agent`.
fn desired(state: &serde_json::Value, agent: &str) -> (Workloads, Vec<String>) {
    let mut wrong = Vec::new();
    let empty = serde_json::Map::new();
    let map = state["desiredState"]["workloads"].as_object().unwrap_or(&empty);
    let workloads = map
        .iter()
        .map(|(name, w)| {
            if w["agent"] != agent {
                wrong.push(format!("{name}: desired on agent {}", w["agent"]));
            }
            (name.clone(), w["runtimeConfig"].as_str().unwrap_or_default().trim_end().to_owned())
        })
        .collect();
    (workloads, wrong)
}

/// Every deviation of what runs from the desired state `want`: states the
/// server reports (`state`) and containers podman and /proc show.
fn deviations(state: &serde_json::Value, agent: &str, want: &Workloads, facts: &[ContainerFacts]) -> Vec<String> {
    let mut found = Vec::new();
    let empty = serde_json::Map::new();
    let reported = state["workloadStates"][agent].as_object().unwrap_or(&empty);
    for name in want.keys() {
        let instances = reported.get(name).and_then(|i| i.as_object()).unwrap_or(&empty);
        let states: Vec<String> =
            instances.iter().map(|(id, s)| format!("{id}: {}({})", s["state"], s["subState"])).collect();
        let [(id, s)] = instances.iter().collect::<Vec<_>>()[..] else {
            found.push(format!("{name}: reported instances {states:?}, want exactly one"));
            continue;
        };
        if s["state"] != "Running" || s["subState"] != "Ok" {
            found.push(format!("{name}: reported {states:?}, want Running(Ok)"));
        }
        let instance = format!("{name}.{id}.{agent}");
        let mine: Vec<&ContainerFacts> = facts.iter().filter(|f| f.workload == *name).collect();
        match mine[..] {
            [f] if f.instance != instance => {
                found.push(format!("{name}: its one container {} is of instance {}, not {instance}", f.id, f.instance))
            }
            [f] if f.status != "running" => found.push(format!("{name}: container {} is {}", f.id, f.status)),
            [f] if !f.process_alive() => found.push(format!(
                "{name}: GHOST: podman says {} with pid {}, but that process is dead or not the container's",
                f.status, f.pid
            )),
            [_] => {}
            [] => found.push(format!("{name}: no container")),
            _ => found.push(format!(
                "{name}: DUPLICATE: {} containers: {:?}",
                mine.len(),
                mine.iter().map(|f| (&f.id[..12], &f.instance, &f.status)).collect::<Vec<_>>()
            )),
        }
    }
    for f in facts {
        if !want.contains_key(&f.workload) {
            found.push(format!(
                "ORPHAN: container {} ({}, {}) of a workload not desired",
                &f.id[..12],
                f.instance,
                f.status
            ));
        }
    }
    found
}

/// Boots the device and checks it against the desired state, which must be
/// `acked` or (an apply cut in flight) `maybe`; returns the desired state.
fn boot_and_check(c: &mut Cluster, cycle: usize, acked: &Workloads, maybe: Option<&Workloads>) -> Workloads {
    let began = Instant::now();
    c.kill_server();
    c.kill_agent();
    c.start_server();
    c.start_agent();
    let first =
        ank_tests::poll(Duration::from_secs(30), &format!("cycle {cycle}: the server answers after the boot"), || {
            if let Some(status) = c.server_exited() {
                panic!("cycle {cycle}: the server exited at the boot ({status}): its state file did not load?");
            }
            state(c)
        });
    let (now, wrong) = desired(&first, &c.agent);
    assert!(wrong.is_empty(), "cycle {cycle}: {wrong:?}");
    let landed = if now == *acked {
        "the acknowledged state"
    } else if Some(&now) == maybe {
        "the acknowledged state and the apply in flight"
    } else {
        let in_flight = maybe.map(|m| difference(acked, m));
        panic!(
            "cycle {cycle}: LOST OR WRONG desired state after the boot: the server has {:?} against the acknowledged state; the apply in flight was {in_flight:?}",
            difference(acked, &now)
        )
    };
    let (mut polls, polling) = (0, Instant::now());
    ank_tests::poll_until_none(
        Duration::from_secs(60),
        &format!("cycle {cycle}: what runs is the desired state"),
        || {
            let Some(s) = state(c) else { return vec!["the server does not answer".to_owned()] };
            let (again, _) = desired(&s, &c.agent);
            let mut found = deviations(&s, &c.agent, &now, &inspect_when_due(&s, &c.agent, &now, &mut polls, polling));
            if again != now {
                found.push(format!("the desired state changed meanwhile: {again:?}"));
            }
            found.iter_mut().for_each(|d| *d = format!("cycle {cycle}: {d}"));
            found
        },
    );
    eprintln!(
        "cycle {cycle}: booted into {landed}, {} workloads running, in {:.1} s",
        now.len(),
        began.elapsed().as_secs_f64()
    );
    now
}

#[test]
// [stest->swdd~agent-existing-workloads-replace-updated~2]
// [stest->swdd~agent-existing-workloads-delete-unneeded~1]
// [stest->swdd~agent-existing-workloads-starts-new-if-not-found~1]
// [stest->swdd~agent-supports-restart-policies~1]
fn e2e_power_cut_5_cycles_20_workloads_boot_into_the_acknowledged_state() {
    let began = Instant::now();
    let mut rng = Rng::from_env_or_clock("ANK_POWER_CUT_SEED");
    let agent = format!("e2e_power_cut_{}", std::process::id());
    let dir = tempfile::tempdir().expect("temp dir");
    let state_file = dir.path().join("state.json");
    let server_args = ["--state-file", state_file.to_str().expect("utf-8 path")];
    let mut c = Cluster::start_opts(&agent, ClusterOptions { server_args: &server_args, ..Default::default() });
    let mut acked: Workloads = (0..20).map(|i| (format!("p{i:02}"), runtime_config(100_000 + i))).collect();
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent, &acked)));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    acked = boot_check_only(&c, &acked);

    for cycle in 1..=CYCLES {
        let in_flight = cycle % 2 == 1;
        let (steps, cut_at) = if in_flight {
            (change(&agent, &acked, cycle, &mut rng), Instant::now() + Duration::from_millis(rng.below(2500)))
        } else {
            (Vec::new(), Instant::now() + Duration::from_millis(rng.below(1000)))
        };
        eprintln!("cycle {cycle}: apply in flight: {in_flight}, cut after {:?}", cut_at - Instant::now());
        let (landed, maybe) = apply_until(&c, &steps, cut_at);
        if let Some(landed) = landed {
            acked = landed;
        }
        acked = boot_and_check(&mut c, cycle, &acked, maybe.as_ref());
    }
    eprintln!("{CYCLES} power cuts in {:.1} s", began.elapsed().as_secs_f64());
}

/// The agent's containers as podman and /proc show them, when due: once
/// the server reports every desired workload `Running(Ok)`, every tenth
/// poll, and in the last seconds before the deadline; else none (the
/// checks then only see what the server reports). Inspecting 20 containers
/// every 100 ms would slow the boot it watches on a small machine.
fn inspect_when_due(
    state: &serde_json::Value,
    agent: &str,
    want: &Workloads,
    polls: &mut u32,
    began: Instant,
) -> Vec<ContainerFacts> {
    *polls += 1;
    let reported_running = want.keys().all(|name| {
        let instances = state["workloadStates"][agent][name].as_object();
        instances.is_some_and(|i| i.len() == 1 && i.values().all(|s| s["state"] == "Running" && s["subState"] == "Ok"))
    });
    if reported_running || (*polls).is_multiple_of(10) || began.elapsed() > Duration::from_secs(55) {
        facts_of(agent)
    } else {
        Vec::new()
    }
}

/// The checks of a boot on the running first start.
fn boot_check_only(c: &Cluster, acked: &Workloads) -> Workloads {
    ank_tests::poll_until_none(Duration::from_secs(60), "the first start runs the desired state", || {
        let Some(s) = state(c) else { return vec!["the server does not answer".to_owned()] };
        deviations(&s, &c.agent, acked, &facts_of(&c.agent))
    });
    acked.clone()
}

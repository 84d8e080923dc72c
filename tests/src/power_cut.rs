//! A power cut for the end-to-end tests: the processes a power loss would
//! end on the device side of one agent are killed with SIGKILL, as close to
//! at once as a test can: the server, the agent, the conmon of each of the
//! agent's containers and every process in those containers' cgroups.
//! Podman's state under /run is left as it was (a test cannot wipe it
//! without touching other tests' containers), so podman still lists the
//! killed containers as running: ghosts the agent has to see through.
//!
//! The podman calls the agent has in flight (`run`, `rm`) are killed only
//! on request: podman's locks live in /dev/shm, which a real power cut
//! clears and this host does not; a podman killed while holding one could
//! leave every later podman call on the host waiting.
//!
//! Only /proc is read while killing (no podman call, which could wait on a
//! lock a killed podman held). And a small seeded random generator, so that
//! a failed run can be replayed with its seed.

use std::collections::BTreeSet;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A seeded, reproducible random source (fastrand's).
pub struct Rng(fastrand::Rng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }

    /// A generator seeded from the environment variable `var` when set (to
    /// replay a run), else from the clock; prints the seed and how to
    /// replay it.
    pub fn from_env_or_clock(var: &str) -> Self {
        let seed = std::env::var(var).ok().and_then(|s| s.trim().parse().ok()).unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            now.as_nanos() as u64 ^ u64::from(std::process::id())
        });
        eprintln!("random seed {seed} (replay with {var}={seed})");
        Self::new(seed)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.u64(0..n)
    }
}

/// One process of the host.
struct Proc {
    pid: i32,
    ppid: i32,
    cmdline: Vec<String>,
}

/// Every process of the host, from /proc (processes that end meanwhile are
/// left out).
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            let rest = &stat[stat.rfind(')')? + 2..];
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline =
                raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned());
            Some(Proc { pid, ppid, cmdline: cmdline.collect() })
        })
        .collect()
}

/// The processes below `root` (children, their children, ...).
fn descendants(root: i32, procs: &[Proc]) -> BTreeSet<i32> {
    let mut found = BTreeSet::from([root]);
    loop {
        let before = found.len();
        for p in procs {
            if found.contains(&p.ppid) {
                found.insert(p.pid);
            }
        }
        if found.len() == before {
            found.remove(&root);
            return found;
        }
    }
}

/// The value after `flag` in a command line.
fn arg_after<'a>(cmdline: &'a [String], flag: &str) -> Option<&'a str> {
    let i = cmdline.iter().position(|a| a == flag)?;
    cmdline.get(i + 1).map(String::as_str)
}

/// The conmons of `agent`'s containers (named `<workload>.<id>.<agent>`)
/// with the id of their container.
fn conmons_of(agent: &str, procs: &[Proc]) -> Vec<(i32, String)> {
    let suffix = format!(".{agent}");
    procs
        .iter()
        .filter(|p| p.cmdline.first().is_some_and(|a| a.ends_with("conmon")))
        .filter(|p| arg_after(&p.cmdline, "-n").is_some_and(|n| n.ends_with(&suffix)))
        .filter_map(|p| Some((p.pid, arg_after(&p.cmdline, "-c")?.to_owned())))
        .collect()
}

/// Whether the cgroup of `pid` names one of the containers `ids`.
pub fn in_container_cgroup(pid: i32, ids: &[String]) -> bool {
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    ids.iter().any(|id| cgroup.contains(id.as_str()))
}

/// Cuts the power of `agent`'s device: SIGSTOP to `daemons` (the server's
/// and agent's pids) so that they start nothing more, then SIGKILL to them,
/// with `children` to everything they started, and to every conmon and
/// container process of `agent`, again until a pass over /proc finds
/// nothing new. Returns how many processes were killed. The caller reaps
/// its own children.
pub fn cut_power(agent: &str, daemons: &[u32], children: bool) -> usize {
    let daemons: Vec<i32> = daemons.iter().filter_map(|p| i32::try_from(*p).ok()).collect();
    for pid in &daemons {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGSTOP);
    }
    let mut killed = BTreeSet::new();
    for _ in 0..10 {
        let procs = processes();
        let mut targets: BTreeSet<i32> = daemons.iter().copied().collect();
        for pid in daemons.iter().filter(|_| children) {
            targets.extend(descendants(*pid, &procs));
        }
        let conmons = conmons_of(agent, &procs);
        let ids: Vec<String> = conmons.iter().map(|(_, id)| id.clone()).collect();
        targets.extend(conmons.iter().map(|(pid, _)| *pid));
        targets.extend(procs.iter().filter(|p| in_container_cgroup(p.pid, &ids)).map(|p| p.pid));
        let new: Vec<i32> = targets.difference(&killed).copied().collect();
        if new.is_empty() {
            break;
        }
        for pid in &new {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        killed.extend(new);
    }
    killed.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..5).map(|_| a.below(1000)).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.below(1000)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().any(|x| *x != xs[0]), "{xs:?}");
    }

    #[test]
    fn descendants_are_found_through_every_generation() {
        let p = |pid, ppid| Proc { pid, ppid, cmdline: Vec::new() };
        let procs = [p(10, 1), p(11, 10), p(12, 11), p(13, 1)];
        assert_eq!(descendants(10, &procs), BTreeSet::from([11, 12]));
    }

    #[test]
    fn conmons_are_matched_by_the_container_name_of_the_agent() {
        let cmd = |name: &str| Proc {
            pid: 5,
            ppid: 1,
            cmdline: ["/usr/bin/conmon", "-c", "abc", "-n", name].map(str::to_owned).to_vec(),
        };
        assert_eq!(conmons_of("ag", &[cmd("w.1234567.ag")]), vec![(5, "abc".to_owned())]);
        assert!(conmons_of("ag", &[cmd("w.1234567.other_ag")]).is_empty());
    }
}

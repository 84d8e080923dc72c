//! [`OciRuntime`]: an `exec` probe through the container's own OCI runtime
//! (`runc exec` / `crun exec`) instead of `podman exec`.
//!
//! `podman exec` costs about 140 ms of CPU per try on the test machine
//! (podman, conmon, its cleanup and the runtime), `runc exec` of the same
//! container about 38 ms: see `docs/health.md`. The runtime runs the
//! command with the container's own process spec (namespaces, cgroup,
//! user, capabilities, seccomp, no_new_privs), so the command is confined
//! exactly as with `podman exec`.
//!
//! Which runtime and state root podman used is read from the container's
//! conmon (its command line names the runtime with `-r` and any `--root`
//! among its `--runtime-arg`s); the container must then answer `state` as
//! running. Anything else leaves the probe on `podman exec`.

use std::path::{Path, PathBuf};

/// The OCI runtime that runs a container, as its conmon calls it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRuntime {
    /// The runtime binary (`/usr/bin/runc`).
    pub binary: PathBuf,
    /// Its state root when conmon passes one; the runtime's default otherwise.
    pub root: Option<String>,
}

impl OciRuntime {
    /// The runtime of conmon's command line `args` (argv, without argv[0]
    /// or with it: only `-r` and `--runtime-arg` are read).
    pub fn from_conmon_args(args: &[String]) -> Option<Self> {
        let mut binary = None;
        let mut runtime_args = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                // The command conmon runs at the exit (podman's cleanup) has
                // options of its own, `-r` among them: skip its words.
                "--exit-command-arg" | "--exit-command" => {
                    it.next();
                }
                "-r" | "--runtime" if binary.is_none() => binary = it.next().map(PathBuf::from),
                "--runtime-arg" => runtime_args.extend(it.next().cloned()),
                other => {
                    if let Some(v) = other.strip_prefix("--runtime=") {
                        binary = Some(PathBuf::from(v));
                    } else if let Some(v) = other.strip_prefix("--runtime-arg=") {
                        runtime_args.push(v.to_owned());
                    }
                }
            }
        }
        let mut root = None;
        let mut ra = runtime_args.iter();
        while let Some(a) = ra.next() {
            if let Some(v) = a.strip_prefix("--root=") {
                root = Some(v.to_owned());
            } else if a == "--root" {
                root = ra.next().cloned();
            }
        }
        Some(Self { binary: binary?, root })
    }

    /// Reads conmon's command line from `/proc/<pid>/cmdline`.
    pub fn of_conmon(pid: u32) -> Option<Self> {
        let raw = std::fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline")).ok()?;
        let args: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        Self::from_conmon_args(&args)
    }

    /// `[--root R] <verb> <rest...>` for the runtime.
    pub fn args(&self, verb: &str, rest: &[String]) -> Vec<String> {
        let mut args = Vec::with_capacity(rest.len() + 3);
        if let Some(root) = &self.root {
            args.push(format!("--root={root}"));
        }
        args.push(verb.to_owned());
        args.extend(rest.iter().cloned());
        args
    }
}

/// Whether the output of `<runtime> state <id>` says the container runs.
pub fn state_says_running(json: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(json).is_ok_and(|v| v["status"] == "running")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_runtime_and_its_root_come_from_conmons_command_line() {
        let plain = strings(
            "/usr/bin/conmon --api-version 1 -c abc -u abc -r /usr/bin/runc -b /var/lib/x --runtime-arg --log-format=json --runtime-arg --log --runtime-arg=/run/x/oci-log",
        );
        assert_eq!(
            OciRuntime::from_conmon_args(&plain),
            Some(OciRuntime { binary: "/usr/bin/runc".into(), root: None })
        );
        let rooted = strings("conmon -r /usr/bin/crun --runtime-arg --root=/run/user/1000/crun -c abc");
        let rt = OciRuntime::from_conmon_args(&rooted).unwrap();
        assert_eq!(rt.root.as_deref(), Some("/run/user/1000/crun"));
        assert_eq!(
            rt.args("exec", &strings("abc cat /tmp/alive")),
            strings("--root=/run/user/1000/crun exec abc cat /tmp/alive")
        );
        let cleanup = strings(
            "conmon -r /usr/bin/runc --exit-dir /run/libpod/exits --exit-command /usr/bin/podman --exit-command-arg --root --exit-command-arg /var/lib/containers/storage --exit-command-arg -r --exit-command-arg --runtime --exit-command-arg runc",
        );
        assert_eq!(
            OciRuntime::from_conmon_args(&cleanup),
            Some(OciRuntime { binary: "/usr/bin/runc".into(), root: None })
        );
        let split = strings("conmon --runtime /usr/bin/runc --runtime-arg --root --runtime-arg /tmp/r");
        assert_eq!(OciRuntime::from_conmon_args(&split).unwrap().root.as_deref(), Some("/tmp/r"));
        assert_eq!(OciRuntime::from_conmon_args(&strings("conmon -c abc")), None, "no runtime named");
    }

    #[test]
    fn only_a_running_state_counts() {
        assert!(state_says_running(r#"{"ociVersion":"1.0.2","id":"abc","pid":42,"status":"running"}"#));
        assert!(!state_says_running(r#"{"status":"stopped"}"#));
        assert!(!state_says_running("container does not exist"));
    }
}

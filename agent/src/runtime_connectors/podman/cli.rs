//! [`PodmanCli`]: a value wrapping the podman binary (no statics, no global
//! cache; its clones share only [`FirstListing`], the agent's first `ps`).
//! Every call is a `tokio::process` child. A one-shot call (`run`,
//! `create`, `rm`, ...) runs to its end even when the agent stops meanwhile,
//! as under Ankaios: killing `podman run` half-way leaves a storage-only
//! container behind whose name blocks every later create of that instance.
//! Long-running children (`logs -f`, and `events` where neither podman's
//! event log nor the journal can be read) die with the agent. JSON
//! output is parsed into the typed structs of this module, in this one place.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Deserialize;
use tokio::process::{Child, Command};

use crate::runtime_connectors::WorkloadId;

/// A failed podman invocation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodmanError {
    #[error("could not run '{binary}': {reason}")]
    Spawn { binary: String, reason: String },
    #[error("podman {command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("podman {command} printed unexpected output: {reason}")]
    Output { command: String, reason: String },
}

impl PodmanError {
    /// The text worth showing a user: podman's stderr or the reason.
    pub fn message(&self) -> String {
        match self {
            PodmanError::Failed { stderr, .. } => stderr.clone(),
            other => other.to_string(),
        }
    }
}

/// A failed create as Ankaios words it for the user: podman's stderr, then
/// `. Execution of 'podman "arg" "arg" ...'` (the state's additionalInfo
/// shows it, e.g. after `Retry N: `).
pub fn with_command_line(e: PodmanError, args: &[String]) -> PodmanError {
    match e {
        PodmanError::Failed { command, stderr } => {
            let quoted: Vec<String> = args.iter().map(|a| format!("\"{a}\"")).collect();
            PodmanError::Failed { command, stderr: format!("{stderr}. Execution of 'podman {}'", quoted.join(" ")) }
        }
        other => other,
    }
}

/// One entry of `podman ps --all --format json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PsEntry {
    pub id: String,
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub exit_code: i32,
    #[serde(default)]
    pub labels: Option<HashMap<String, String>>,
    /// Id of the pod the container belongs to (empty for none).
    #[serde(default)]
    pub pod: String,
    /// Whether it is a pod's infra (pause) container.
    #[serde(default)]
    pub is_infra: bool,
}

impl PsEntry {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str)
    }
}

/// One line of `podman events --format json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EventLine {
    #[serde(rename = "ID", default)]
    pub id: String,
    #[serde(rename = "Name", default)]
    pub name: String,
    #[serde(rename = "Status", default)]
    pub status: String,
    #[serde(rename = "Type", default)]
    pub kind: String,
    /// Only present on `died`; podman omits it when the exit code is 0.
    #[serde(rename = "ContainerExitCode", default)]
    pub exit_code: Option<i32>,
    #[serde(rename = "Attributes", default)]
    pub attributes: Option<HashMap<String, String>>,
}

impl EventLine {
    /// Parses one line of the event stream.
    pub fn parse(line: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(line)
    }

    /// The value of attribute (label) `key`.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.as_ref().and_then(|l| l.get(key)).map(String::as_str)
    }
}

/// The podman command line tool.
#[derive(Debug, Clone)]
// [impl->swdd~podman-uses-podman-cli~1]
pub struct PodmanCli {
    /// Path or name (looked up on PATH) of the podman binary.
    pub binary: PathBuf,
    /// Seconds `podman stop -t` waits before killing.
    pub stop_timeout_secs: u32,
    /// The agent's first listing, shared by all clones.
    pub first_listing: FirstListing,
    /// Where the pids of running containers can be read, shared by all clones.
    pub pid_files: super::pid_files::PidFiles,
}

impl Default for PodmanCli {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("podman"),
            stop_timeout_secs: 10,
            first_listing: FirstListing::default(),
            pid_files: Default::default(),
        }
    }
}

/// The agent's first `podman ps` of its containers, run with podman's debug
/// log: that log names podman's events backend, so the event watcher (which
/// needs the backend) and the listing of the agent's start (which needs the
/// containers) share one podman call at the agent's start instead of two
/// that compete with each other and with the first `podman run`. Whichever
/// asks first runs it; the start listing takes its containers once; every
/// other listing runs its own `ps`. It is run after the watcher started, so
/// the watcher's events cover everything after it.
#[derive(Debug, Clone, Default)]
pub struct FirstListing {
    ps: Arc<tokio::sync::OnceCell<Result<DebugPs, PodmanError>>>,
    taken: Arc<AtomicBool>,
}

/// What `podman --log-level=debug ps` gave.
#[derive(Debug)]
struct DebugPs {
    label: String,
    entries: Vec<PsEntry>,
    backend: Option<String>,
}

impl PodmanCli {
    pub(crate) fn command(&self, args: &[String]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.args(args).stdin(Stdio::null());
        // The agent's own systemd notification socket and watchdog are not
        // podman's (conmon would otherwise send READY=1 and MAINPID= there).
        for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            cmd.env_remove(var);
        }
        cmd
    }

    /// A command for a long-running podman child (`events`, `logs -f`): it
    /// is killed when dropped and also gets SIGTERM when the agent dies
    /// without dropping it (kill -9), so no orphan keeps running.
    pub(crate) fn long_running_command(&self, args: &[String]) -> Command {
        let mut cmd = self.command(args);
        cmd.kill_on_drop(true);
        // SAFETY: the closure runs in the forked child before exec and only
        // makes the prctl system call, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).map_err(std::io::Error::from)
            });
        }
        cmd
    }

    /// The error of a podman process that could not be started or waited for.
    fn spawn_error(&self, e: &std::io::Error) -> PodmanError {
        PodmanError::Spawn { binary: self.binary.display().to_string(), reason: e.to_string() }
    }

    /// Runs podman with `args`; returns its stdout, or its trimmed stderr as error.
    pub async fn exec(&self, args: &[String]) -> Result<String, PodmanError> {
        let command = args.first().cloned().unwrap_or_default();
        let began = tokio::time::Instant::now();
        let out = self.command(args).output().await.map_err(|e| self.spawn_error(&e))?;
        log_timing(args, began, &out.status);
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            let stderr = if stderr.is_empty() { format!("exit status {}", out.status) } else { stderr };
            return Err(PodmanError::Failed { command, stderr });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs podman with `args`, writing `stdin` to its standard input.
    pub async fn exec_with_stdin(&self, args: &[String], stdin: &str) -> Result<String, PodmanError> {
        use tokio::io::AsyncWriteExt;
        let command = args.iter().find(|a| !a.starts_with('-')).cloned().unwrap_or_default();
        let spawn_error = |e: std::io::Error| self.spawn_error(&e);
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        let began = tokio::time::Instant::now();
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.as_bytes()).await.map_err(spawn_error)?;
        }
        let out = child.wait_with_output().await.map_err(spawn_error)?;
        log_timing(args, began, &out.status);
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            let stderr = if stderr.is_empty() { format!("exit status {}", out.status) } else { stderr };
            return Err(PodmanError::Failed { command, stderr });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `podman ps --all --format json` of every container of the host.
    // [impl->swdd~podmancli-container-state-cache-all-containers~1]
    pub async fn ps_all(&self) -> Result<Vec<PsEntry>, PodmanError> {
        let args: Vec<String> = ["ps", "--all", "--format", "json"].into_iter().map(str::to_owned).collect();
        parse_ps(&self.exec(&args).await?)
    }

    /// `podman <args>` where args hold everything from general options to
    /// the command's arguments of a `run --detach`; returns the new container's id.
    // [impl->swdd~podman-create-workload-returns-workload-id~1]
    pub async fn run_detached(&self, args: &[String]) -> Result<WorkloadId, PodmanError> {
        let out = self.exec(args).await.map_err(|e| with_command_line(e, args))?;
        let id = out.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("").to_owned();
        if id.is_empty() {
            return Err(PodmanError::Output { command: "run".into(), reason: "no container id".into() });
        }
        Ok(WorkloadId(id))
    }

    /// `podman [general options] start <id>`: runs an exited container
    /// again; its logs stay.
    // [impl->swdd~podman-create-workload-starts-existing-workload~1]
    pub async fn start(&self, general_options: &[String], id: &WorkloadId) -> Result<(), PodmanError> {
        let mut args = general_options.to_vec();
        args.extend(["start".into(), id.0.clone()]);
        self.exec(&args).await.map(|_| ())
    }

    /// `podman rm --force --time <timeout> <id>`: stops (SIGTERM, SIGKILL
    /// after the timeout) and removes in one podman call; a missing
    /// container counts as removed.
    // [impl->swdd~podman-delete-workload-stops-and-removes-workload~1]
    ///
    /// A container whose process and conmon are dead but which podman
    /// still has as running (a "ghost") makes podman wait 5 s for conmon's
    /// exit file and fail; podman has marked it exited by then, so the
    /// remove is tried once more (podman's error stands if that fails too).
    pub async fn stop_and_remove(&self, id: &WorkloadId) -> Result<(), PodmanError> {
        let rm = vec!["rm".into(), "--force".into(), "--time".into(), self.stop_timeout_secs.to_string(), id.0.clone()];
        let mut result = self.exec(&rm).await;
        if let Err(e) = &result
            && is_missing_exit_file(e)
        {
            tracing::info!("container '{id}' had no exit file (its conmon died): removing it again");
            result = self.exec(&rm).await;
        }
        match result {
            Err(e) if is_no_such_container(&e) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// `podman rm --storage <name>`: removes a container that exists only
    /// in podman's storage (a create cut short); podman refuses it for a
    /// container it manages.
    pub async fn remove_storage_container(&self, name: &str) -> Result<(), PodmanError> {
        self.exec(&["rm".into(), "--storage".into(), name.to_owned()]).await.map(|_| ())
    }

    /// `podman ps --all --format json --filter label=<label>`.
    pub async fn ps_by_label(&self, label: &str) -> Result<Vec<PsEntry>, PodmanError> {
        let args: Vec<String> = ["ps", "--all", "--format", "json", "--filter", &format!("label={label}")]
            .into_iter()
            .map(str::to_owned)
            .collect();
        let out = self.exec(&args).await?;
        parse_ps(&out)
    }

    /// `ps_by_label(label)` for the listing of the agent's start: it takes
    /// the containers of [`FirstListing`] (once; when that was run for the
    /// same label), which may be older than this call but not older than
    /// the event watcher.
    pub async fn ps_for_listing(&self, label: &str) -> Result<Vec<PsEntry>, PodmanError> {
        if !self.first_listing.taken.swap(true, Ordering::SeqCst) {
            // A failed first `ps` is tried again below, not passed on.
            if let Ok(first) = self.first_ps(label).await
                && first.label == label
            {
                return Ok(first.entries.clone());
            }
        }
        self.ps_by_label(label).await
    }

    /// [`FirstListing`], run now if nobody did yet.
    async fn first_ps(&self, label: &str) -> &Result<DebugPs, PodmanError> {
        self.first_listing
            .ps
            .get_or_init(|| async {
                let args: Vec<String> =
                    ["--log-level=debug", "ps", "--all", "--format", "json", "--filter", &format!("label={label}")]
                        .into_iter()
                        .map(str::to_owned)
                        .collect();
                let began = tokio::time::Instant::now();
                let out = self.command(&args).output().await.map_err(|e| self.spawn_error(&e))?;
                log_timing(&args, began, &out.status);
                let stderr = String::from_utf8_lossy(&out.stderr);
                if !out.status.success() {
                    // The debug lines would bury podman's own message.
                    let message: Vec<&str> =
                        stderr.lines().filter(|l| !l.contains("level=debug") && !l.trim().is_empty()).collect();
                    let stderr =
                        if message.is_empty() { format!("exit status {}", out.status) } else { message.join("\n") };
                    return Err(PodmanError::Failed { command: "ps".to_owned(), stderr });
                }
                Ok(DebugPs {
                    label: label.to_owned(),
                    entries: parse_ps(&String::from_utf8_lossy(&out.stdout))?,
                    backend: events_backend_in_debug_log(&stderr),
                })
            })
            .await
    }

    /// podman's events backend (`file`, `journald` or `none`). Read from the
    /// debug line `Initializing event backend <name>` that every podman
    /// command which opens its runtime logs: `podman --log-level=debug
    /// version` takes about 35 ms here. `podman info --format
    /// {{.Host.EventLogger}}` says the same but takes 0.3-0.6 s of CPU (it
    /// also probes the host's network tools and package database), which at
    /// the agent's start competed with the first workloads' `podman run`; it
    /// is asked only when the debug line is missing (another podman version).
    /// At the agent's start the debug line comes from [`FirstListing`] (the
    /// `ps` of the containers labelled `label`), so no extra podman runs.
    pub async fn events_backend(&self, label: &str) -> Result<String, PodmanError> {
        if let Ok(DebugPs { backend: Some(backend), .. }) = self.first_ps(label).await {
            return Ok(backend.clone());
        }
        let args: Vec<String> = ["--log-level=debug", "version"].into_iter().map(str::to_owned).collect();
        let out = self.command(&args).output().await.map_err(|e| self.spawn_error(&e))?;
        if let Some(backend) = events_backend_in_debug_log(&String::from_utf8_lossy(&out.stderr)) {
            return Ok(backend);
        }
        tracing::debug!("podman's debug log names no events backend; asking podman info");
        let args: Vec<String> = ["info", "--format", "{{.Host.EventLogger}}"].into_iter().map(str::to_owned).collect();
        Ok(self.exec(&args).await?.trim().to_owned())
    }

    /// Spawns `podman events --format json --since <since> --filter label=<label>`
    /// with stdout piped; killed when dropped.
    pub fn spawn_events(&self, label: &str, since: &str) -> Result<Child, PodmanError> {
        let args: Vec<String> = ["events", "--format", "json", "--since", since, "--filter", &format!("label={label}")]
            .into_iter()
            .map(str::to_owned)
            .collect();
        self.long_running_command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| self.spawn_error(&e))
    }

    /// How long a delete may take at most (stop timeout plus slack).
    pub fn delete_budget(&self) -> Duration {
        Duration::from_secs(u64::from(self.stop_timeout_secs) + 30)
    }
}

/// The debug line of a finished one-shot podman call: what ran (up to its
/// first 6 arguments), how long it took and how it ended. Together with the
/// server's and the workload's debug lines this is the timeline of a start.
fn log_timing(args: &[String], began: tokio::time::Instant, status: &std::process::ExitStatus) {
    if tracing::enabled!(tracing::Level::DEBUG) {
        let shown = args.iter().take(6).map(String::as_str).collect::<Vec<_>>().join(" ");
        let more = if args.len() > 6 { " ..." } else { "" };
        tracing::debug!("podman {shown}{more}: {status} after {:.1} ms", began.elapsed().as_secs_f64() * 1e3);
    }
}

/// The events backend named by podman's debug line `Initializing event
/// backend <name>` in `log`, if there is one.
pub fn events_backend_in_debug_log(log: &str) -> Option<String> {
    const MARK: &str = "Initializing event backend ";
    log.lines().find_map(|line| {
        let rest = &line[line.find(MARK)? + MARK.len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        (!name.is_empty()).then_some(name)
    })
}

/// Parses `podman ps --format json` output (podman prints `[]` or nothing
/// when there are no containers).
pub fn parse_ps(out: &str) -> Result<Vec<PsEntry>, PodmanError> {
    if out.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(out).map_err(|e| PodmanError::Output { command: "ps".into(), reason: e.to_string() })
}

fn is_no_such_container(e: &PodmanError) -> bool {
    matches!(e, PodmanError::Failed { stderr, .. } if stderr.to_lowercase().contains("no such container"))
}

/// podman's "timed out waiting for file .../exits/<id>" (a stop of a
/// container whose conmon is dead).
fn is_missing_exit_file(e: &PodmanError) -> bool {
    matches!(e, PodmanError::Failed { stderr, .. } if stderr.contains("timed out waiting for file") && stderr.contains("exits/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_without_conmons_exit_file_is_recognised() {
        let ghost = PodmanError::Failed {
            command: "rm".into(),
            stderr: "time=\"x\" level=error msg=\"container not running\"\nError: cannot remove container 3615 as it could not be stopped: timed out waiting for file /run/libpod/exits/3615: internal libpod error".into(),
        };
        assert!(is_missing_exit_file(&ghost));
        let other = PodmanError::Failed { command: "rm".into(), stderr: "Error: no such container x".into() };
        assert!(!is_missing_exit_file(&other));
        assert!(is_no_such_container(&other));
    }

    #[test]
    fn a_failed_create_names_its_command_line_as_ankaios_does() {
        let args: Vec<String> = ["run", "--detach", "--name", "a.1.x", "img"].map(str::to_owned).to_vec();
        let e = PodmanError::Failed { command: "run".into(), stderr: "Error: img: image not known".into() };
        assert_eq!(
            with_command_line(e, &args).message(),
            "Error: img: image not known. Execution of 'podman \"run\" \"--detach\" \"--name\" \"a.1.x\" \"img\"'"
        );
        let spawn = PodmanError::Spawn { binary: "podman".into(), reason: "gone".into() };
        assert_eq!(with_command_line(spawn.clone(), &args), spawn, "only podman's refusals carry the command line");
    }

    #[test]
    fn the_events_backend_is_read_from_podmans_debug_line() {
        let log = "time=\"2026-11-27T03:31:15Z\" level=debug msg=\"Using tmp dir /run/libpod\"\n\
                   time=\"2026-11-27T03:31:15Z\" level=debug msg=\"Initializing event backend journald\"\n";
        assert_eq!(events_backend_in_debug_log(log).as_deref(), Some("journald"));
        let plain = "DEBU[0000] Initializing event backend file\n";
        assert_eq!(events_backend_in_debug_log(plain).as_deref(), Some("file"));
        assert_eq!(events_backend_in_debug_log("level=debug msg=\"Initializing event backend \"\n"), None);
        assert_eq!(events_backend_in_debug_log("nothing about events\n"), None);
    }

    #[tokio::test]
    async fn the_events_backend_falls_back_to_podman_info_without_the_debug_line() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("podman");
        let says = |debug: &str| {
            let body = format!(
                "#!/bin/sh\nif [ \"$1\" = --log-level=debug ]; then echo '{debug}' >&2; echo 'Version: 9'; exit 0; fi\n\
                 [ \"$1\" = info ] && echo none\n"
            );
            std::fs::write(&script, body).unwrap();
            std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            PodmanCli { binary: script.clone(), ..PodmanCli::default() }
        };
        let cli = says("level=debug msg=\"Initializing event backend file\"");
        assert_eq!(cli.events_backend("agent=a").await.unwrap(), "file");
        let cli = says("level=debug msg=\"something else\"");
        assert_eq!(cli.events_backend("agent=a").await.unwrap(), "none", "podman info answers");
    }

    #[tokio::test]
    async fn a_one_shot_call_runs_to_its_end_when_the_agent_drops_it() {
        // A stand-in for `podman run` that is still busy when the caller
        // gives up on it (the agent stopping): it must not be killed.
        let dir = tempfile::tempdir().unwrap();
        let done = dir.path().join("done");
        let started = dir.path().join("started");
        let script = dir.path().join("podman");
        std::fs::write(
            &script,
            format!("#!/bin/sh\ntouch '{}'\nsleep 0.3\ntouch '{}'\n", started.display(), done.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let cli = PodmanCli { binary: script, ..PodmanCli::default() };
        let args = vec!["run".to_owned()];
        let mut call = Box::pin(cli.exec(&args));
        // Poll the call until the child runs, then drop it.
        while !started.exists() {
            tokio::select! {
                _ = &mut call => panic!("the stand-in ended too early"),
                _ = tokio::task::yield_now() => {}
            }
        }
        drop(call);
        let mut waited = 0;
        while !done.exists() {
            assert!(waited < 100, "the dropped podman call was killed before its end");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            waited += 1;
        }
    }

    #[test]
    fn podman_cli_parses_ps_output_of_this_podman() {
        let out = r#"[{"AutoRemove":false,"Command":["sh","-c","exit 3"],"Exited":true,"ExitCode":3,
            "Id":"16d9","Image":"localhost/busybox:latest","Labels":{"agent":"agent_Z","name":"x.abc.agent_Z"},
            "Names":["probe1"],"Pid":0,"Ports":null,"State":"exited","Status":"Exited (3) 1 second ago"}]"#;
        let ps = parse_ps(out).unwrap();
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].id, "16d9");
        assert_eq!(ps[0].state, "exited");
        assert_eq!(ps[0].exit_code, 3);
        assert_eq!(ps[0].label("name"), Some("x.abc.agent_Z"));
        assert!(parse_ps("").unwrap().is_empty());
        assert!(parse_ps("[]").unwrap().is_empty());
        assert!(parse_ps("garbage").is_err());
    }

    #[test]
    fn podman_cli_error_message_is_stderr() {
        let e = PodmanError::Failed { command: "run".into(), stderr: "Error: no image".into() };
        assert_eq!(e.message(), "Error: no image");
        assert!(is_no_such_container(&PodmanError::Failed {
            command: "rm".into(),
            stderr: "Error: no such container abc".into()
        }));
    }
}

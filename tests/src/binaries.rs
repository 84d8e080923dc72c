//! A cluster of the built binaries for end-to-end tests: `ank-server` and
//! one `ank-agent` on a free port, and `ank` invocations against them;
//! optionally on two test hosts ([`TestNet`]), the server (and `ank`) on one
//! and the agent on the other. Processes are killed and the agent's
//! containers removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::netns::TestNet;

/// The folder holding the built binaries (`target/debug` for `cargo test`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test binary>
    exe.parent().and_then(Path::parent).expect("target profile dir").to_path_buf()
}

/// Path of a built binary; panics with a hint when it was not built.
pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(p.exists(), "{} not found: build the binaries first with `cargo build --bins`", p.display());
    p
}

/// A running server and agent.
pub struct Cluster {
    pub url: String,
    pub agent: String,
    pub run_folder: tempfile::TempDir,
    server: Option<Child>,
    agent_proc: Option<Child>,
    /// How `ank-server` is started (program and arguments).
    server_cmd: Vec<String>,
    /// How `ank-agent` is started, without `--run-folder`.
    agent_cmd: Vec<String>,
    /// Prefix for programs on the server host (`ank`).
    on_server_host: Vec<String>,
}

/// What a [`Cluster`] is started with.
#[derive(Default)]
pub struct ClusterOptions<'a> {
    pub manifest: Option<&'a Path>,
    pub server_args: &'a [&'a str],
    pub agent_args: &'a [&'a str],
    /// Two test hosts instead of loopback.
    pub net: Option<&'a TestNet>,
    /// The agent's run folder (a new temporary one when `None`), e.g. one
    /// an Ankaios agent of the same name used before.
    pub run_folder: Option<tempfile::TempDir>,
}

fn command(argv: &[String]) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

impl Cluster {
    /// Starts `ank-server` (optionally with a startup manifest) and one
    /// agent named `agent`, and waits until the agent is listed.
    pub fn start(agent: &str, manifest: Option<&Path>) -> Self {
        Self::start_with(agent, manifest, &[])
    }

    /// Like [`Cluster::start`], with extra arguments for `ank-agent`.
    pub fn start_with(agent: &str, manifest: Option<&Path>, agent_args: &[&str]) -> Self {
        Self::start_opts(agent, ClusterOptions { manifest, agent_args, ..Default::default() })
    }

    /// Starts a cluster as `opts` say and waits until the agent is listed.
    pub fn start_opts(agent: &str, opts: ClusterOptions<'_>) -> Self {
        crate::require_podman();
        let port = crate::free_port();
        let host = opts.net.map_or_else(|| "127.0.0.1".to_owned(), |n| n.server_ip.clone());
        let addr = format!("{host}:{port}");
        let on_server_host = opts.net.map(TestNet::on_server_host).unwrap_or_default();
        let on_agent_host = opts.net.map(TestNet::on_agent_host).unwrap_or_default();
        let path = |name: &str| bin(name).display().to_string();
        let run_folder = opts.run_folder.unwrap_or_else(|| tempfile::tempdir().expect("temp run folder"));
        let mut server_cmd = on_server_host.clone();
        server_cmd.extend([path("ank-server"), "--insecure".into(), "--address".into(), addr.clone()]);
        server_cmd.extend(["--run-folder".into(), run_folder.path().display().to_string()]);
        if let Some(m) = opts.manifest {
            server_cmd.extend(["--startup-manifest".into(), m.display().to_string()]);
        }
        server_cmd.extend(opts.server_args.iter().map(|a| a.to_string()));
        let url = format!("http://{addr}");
        let mut agent_cmd = on_agent_host;
        agent_cmd.extend([path("ank-agent"), "--insecure".into(), "--name".into(), agent.to_owned()]);
        agent_cmd.extend(["--server-url".into(), url.clone()]);
        agent_cmd.extend(opts.agent_args.iter().map(|a| a.to_string()));
        let mut c = Self {
            url,
            agent: agent.to_owned(),
            run_folder,
            server: None,
            agent_proc: None,
            server_cmd,
            agent_cmd,
            on_server_host,
        };
        c.start_server();
        c.start_agent();
        c.wait_for_agent(Duration::from_secs(20));
        c
    }

    /// Starts the server (again); a running one is killed first.
    pub fn start_server(&mut self) {
        self.kill_server();
        let server = command(&self.server_cmd).stderr(self.log("server")).spawn().expect("spawn ank-server");
        self.server = Some(server);
    }

    /// Where a process' stderr goes: discarded, or appended to
    /// `$ANK_E2E_LOG_DIR/<agent>.<what>.log` when that variable names a
    /// folder (to read what the server and agent did in a failed test).
    fn log(&self, what: &str) -> Stdio {
        let Some(dir) = std::env::var_os("ANK_E2E_LOG_DIR") else { return Stdio::null() };
        let path = Path::new(&dir).join(format!("{}.{what}.log", self.agent));
        match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(file) => file.into(),
            Err(_) => Stdio::null(),
        }
    }

    /// How the server exited, if it did (e.g. refusing a broken state file).
    pub fn server_exited(&mut self) -> Option<std::process::ExitStatus> {
        self.server.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// The process id of the running server.
    pub fn server_pid(&self) -> Option<u32> {
        self.server.as_ref().map(Child::id)
    }

    /// Stops the server with SIGTERM and returns how it exited; panics if
    /// it takes longer than `limit`.
    pub fn terminate_server(&mut self, limit: Duration) -> std::process::ExitStatus {
        crate::terminate(self.server.take().expect("a running server"), limit)
    }

    /// Kills the server with SIGKILL.
    pub fn kill_server(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until `ank get agents` lists the agent.
    pub fn wait_for_agent(&self, limit: Duration) {
        self.wait_for_agent_named(&self.agent, limit);
    }

    /// Waits until `ank get agents` lists the agent `name` (one more agent
    /// of this cluster's server).
    pub fn wait_for_agent_named(&self, name: &str, limit: Duration) {
        self.wait_until(limit, |c| {
            let o = c.ank(&["get", "agents"]);
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).lines().any(|l| l.split_whitespace().next() == Some(name))
        });
    }

    /// Starts the agent (again); a running one is killed first.
    pub fn start_agent(&mut self) {
        self.kill_agent();
        let agent_proc = command(&self.agent_cmd)
            .arg("--run-folder")
            .arg(self.run_folder.path())
            .stderr(self.log("agent"))
            .spawn()
            .expect("spawn ank-agent");
        self.agent_proc = Some(agent_proc);
    }

    /// Stops the agent with SIGTERM, as systemd does, and returns how it
    /// exited; panics if it takes longer than `limit`.
    pub fn terminate_agent(&mut self, limit: Duration) -> std::process::ExitStatus {
        crate::terminate(self.agent_proc.take().expect("a running agent"), limit)
    }

    /// The process id of the running agent.
    pub fn agent_pid(&self) -> Option<u32> {
        self.agent_proc.as_ref().map(Child::id)
    }

    /// Kills the agent with SIGKILL (no goodbye, no cleanup), leaving its
    /// workloads running.
    pub fn kill_agent(&mut self) {
        if let Some(mut child) = self.agent_proc.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Makes the server start with `manifest` from its next start on (a
    /// device that boots with a changed startup manifest).
    pub fn set_startup_manifest(&mut self, manifest: &Path) {
        let m = manifest.display().to_string();
        match self.server_cmd.iter().position(|a| a == "--startup-manifest") {
            Some(i) => self.server_cmd[i + 1] = m,
            None => self.server_cmd.extend(["--startup-manifest".into(), m]),
        }
    }

    /// One more agent named `name` for this cluster's server, with a run
    /// folder of its own and `agent_args`; not started yet.
    pub fn extra_agent(&self, name: &str, agent_args: &[&str]) -> ExtraAgent {
        let mut argv = self.agent_cmd.clone();
        let i = argv.iter().position(|a| a == "--name").expect("--name in the agent command") + 1;
        argv[i] = name.to_owned();
        // Only the common arguments (up to --server-url URL) are kept.
        let end = argv.iter().position(|a| a == "--server-url").expect("--server-url in the agent command") + 2;
        argv.truncate(end);
        argv.extend(agent_args.iter().map(|a| a.to_string()));
        ExtraAgent {
            name: name.to_owned(),
            run_folder: tempfile::tempdir().expect("temp run folder"),
            argv,
            proc: None,
        }
    }

    /// Runs `ank --insecure --server-url <url> ARGS...`.
    pub fn ank(&self, args: &[&str]) -> Output {
        self.ank_stdin(args, None)
    }

    /// Runs `ank` with `stdin` as standard input.
    pub fn ank_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.ank_spawn(args, stdin).wait_with_output().expect("ank output")
    }

    /// Starts `ank` with `stdin` as standard input (its output piped) and
    /// returns at once: a command in flight.
    pub fn ank_spawn(&self, args: &[&str], stdin: Option<&str>) -> Child {
        use std::io::Write;
        let mut argv = self.on_server_host.clone();
        argv.extend([bin("ank").display().to_string(), "--insecure".into(), "--server-url".into(), self.url.clone()]);
        let mut cmd = command(&argv);
        cmd.args(args);
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn ank");
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes()).expect("write ank stdin");
        }
        child
    }

    /// The state of workload `name` as `ank get workloads` shows it.
    pub fn state_of(&self, name: &str) -> Option<String> {
        self.workload_rows().into_iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }

    /// Waits until workload `name` is in state `want`; panics after `limit`.
    pub fn wait_state(&self, name: &str, want: &str, limit: Duration) {
        crate::poll(limit, &format!("'{name}' {want}"), || {
            (self.state_of(name).as_deref() == Some(want)).then_some(())
        });
    }

    /// `ank get workloads` rows as (name, state) pairs.
    pub fn workload_rows(&self) -> Vec<(String, String)> {
        let o = self.ank(&["get", "workloads"]);
        assert!(o.status.success(), "ank get workloads failed: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip(1)
            .filter_map(|l| {
                let mut t = l.split_whitespace();
                let name = t.next()?.to_owned();
                let state = t
                    .find(|x| x.contains('(') || ["AgentDisconnected", "NotScheduled", "Removed"].contains(x))?
                    .to_owned();
                Some((name, state))
            })
            .collect()
    }

    /// Polls `pred` every 100 ms until it holds; panics after `limit`.
    pub fn wait_until(&self, limit: Duration, pred: impl Fn(&Self) -> bool) {
        let start = Instant::now();
        while !pred(self) {
            assert!(start.elapsed() < limit, "condition not reached within {limit:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Containers of this cluster's agent, as `podman ps` JSON objects.
    pub fn containers(&self) -> Vec<serde_json::Value> {
        containers_of(&self.agent)
    }
}

/// One more agent of a [`Cluster`]'s server (see [`Cluster::extra_agent`]):
/// killed and its podman containers removed on drop.
pub struct ExtraAgent {
    pub name: String,
    pub run_folder: tempfile::TempDir,
    argv: Vec<String>,
    proc: Option<Child>,
}

impl ExtraAgent {
    /// Starts the agent (again); a running one is killed first.
    pub fn start(&mut self) {
        self.kill();
        let child = command(&self.argv)
            .arg("--run-folder")
            .arg(self.run_folder.path())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ank-agent");
        self.proc = Some(child);
    }

    /// Kills the agent with SIGKILL, leaving its workloads as they are.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.proc.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ExtraAgent {
    fn drop(&mut self) {
        self.kill();
        remove_containers_of(&self.name);
    }
}

/// Containers of the agent `agent`, as `podman ps` JSON objects.
pub fn containers_of(agent: &str) -> Vec<serde_json::Value> {
    let out = Command::new("podman")
        .args(["ps", "--all", "--format", "json", "--filter"])
        .arg(format!("label=agent={agent}"))
        .output()
        .expect("podman ps");
    serde_json::from_slice(&out.stdout).unwrap_or_default()
}

/// Removes every container of the agent `agent` (clean-up, errors ignored),
/// trying again (five times at most) while some are left: one an agent
/// killed in the middle of a stop left `Stopping` may refuse the first time.
pub fn remove_containers_of(agent: &str) {
    for _ in 0..5 {
        let ids: Vec<String> =
            containers_of(agent).iter().filter_map(|c| c["Id"].as_str().map(str::to_owned)).collect();
        if ids.is_empty() {
            return;
        }
        let _ = Command::new("podman").args(["rm", "-f", "-t", "0"]).args(&ids).output();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in [self.agent_proc.take(), self.server.take()].into_iter().flatten() {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        remove_containers_of(&self.agent);
    }
}

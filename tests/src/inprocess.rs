//! An in-process cluster: `ank-server` on a free local port with an empty
//! desired state and one `ank-agent` named `agent_A` whose only runtime is
//! the in-memory FakeRuntime (registered as `podman`), with its run folder
//! in a temporary directory.
//!
//! The suites built on it run on a paused tokio clock
//! (`#[tokio::test(start_paused = true)]`): the server, the agent and the
//! test share one current-thread runtime and talk over loopback sockets,
//! whose data is ready the moment it is written, so time only moves when
//! everything waits for a timer, and every timeout, heartbeat and retry is
//! exact and instant. Suites that drive real processes (the mutating hooks,
//! the Python SDK) or the Rust SDK's own threads keep the real clock: a
//! child process works outside the runtime, and a paused clock would jump
//! past its deadlines while it runs.

use std::sync::Arc;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RuntimeRegistry};
use tokio_util::sync::CancellationToken;

/// An agent started with [`InProcess::spawn_agent`]; stop it with `stop`.
pub struct OtherAgent {
    pub fake: Arc<FakeRuntime>,
    pub stop: CancellationToken,
    run_folder: tempfile::TempDir,
}

/// The running server and agent; stop them with the tokens.
pub struct InProcess {
    pub url: String,
    pub fake: Arc<FakeRuntime>,
    pub server_stop: CancellationToken,
    pub agent_stop: CancellationToken,
    run_folder: tempfile::TempDir,
}

impl InProcess {
    /// Server and agent with the agent's defaults.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Server and agent, the agent's config changed by `tweak` first.
    pub async fn start_with(tweak: impl FnOnce(&mut AgentConfig)) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let server_stop = CancellationToken::new();
        let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
        tokio::spawn(ank_server::run(initial, listener, server_stop.clone()));
        let agent = spawn_agent(&url, "agent_A", tweak);
        Self { url, fake: agent.fake, server_stop, agent_stop: agent.stop, run_folder: agent.run_folder }
    }

    /// The agent's run folder (for an agent started again on it).
    pub fn run_folder(&self) -> &std::path::Path {
        self.run_folder.path()
    }

    /// Starts another agent, `name`, on this server with its own
    /// FakeRuntime (as `podman`) and run folder.
    pub fn spawn_agent(&self, name: &str) -> OtherAgent {
        spawn_agent(&self.url, name, |_| {})
    }

    /// Stops the agent and the server.
    pub fn stop(&self) {
        self.agent_stop.cancel();
        self.server_stop.cancel();
    }
}

/// Starts agent `name` on the server at `url` with its own FakeRuntime (as
/// `podman`) and run folder, its config changed by `tweak` first.
fn spawn_agent(url: &str, name: &str, tweak: impl FnOnce(&mut AgentConfig)) -> OtherAgent {
    let fake = Arc::new(FakeRuntime::new());
    let mut runtimes = RuntimeRegistry::new();
    runtimes.register(fake.clone());
    let run_folder = tempfile::tempdir().expect("run folder");
    let mut config =
        AgentConfig { run_folder: run_folder.path().to_path_buf(), ..AgentConfig::new(name, url.to_owned()) };
    tweak(&mut config);
    let stop = CancellationToken::new();
    tokio::spawn(ank_agent::run(config, runtimes, stop.clone()));
    OtherAgent { fake, stop, run_folder }
}

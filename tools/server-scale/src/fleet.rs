//! [`Fleet`]: N agents of the `ank_agent` library in this process, each
//! with its own name (`agent_000` ...), its own run folder and its own
//! in-memory `FakeRuntime` registered as `podman`, all connected to one
//! server over insecure gRPC. An agent can be stopped and started again
//! with the same name, run folder and fake (whose containers survive, as
//! podman's would).

use std::path::PathBuf;
use std::sync::Arc;

use ank_agent::runtime_connectors::fake::{FakeCall, FakeRuntime};
use ank_agent::{AgentConfig, RuntimeRegistry};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::error::{Result, ScaleError};

/// The name of agent `index`.
pub fn agent_name(index: usize) -> String {
    format!("agent_{index:03}")
}

/// One in-process agent.
struct Agent {
    name: String,
    fake: Arc<FakeRuntime>,
    run_folder: PathBuf,
    running: Option<(CancellationToken, JoinHandle<anyhow::Result<()>>)>,
}

/// The agents of one measurement.
pub struct Fleet {
    url: String,
    agents: Vec<Agent>,
    _root: tempfile::TempDir,
}

impl Fleet {
    /// Starts `count` agents against `url`.
    pub fn start(url: &str, count: usize) -> Result<Self> {
        let root = tempfile::tempdir().map_err(ScaleError::TempDir)?;
        let mut agents = Vec::with_capacity(count);
        for index in 0..count {
            let name = agent_name(index);
            let run_folder = root.path().join(&name);
            std::fs::create_dir_all(&run_folder).map_err(ScaleError::TempDir)?;
            agents.push(Agent { name, fake: Arc::new(FakeRuntime::new()), run_folder, running: None });
        }
        let mut fleet = Self { url: url.to_owned(), agents, _root: root };
        for index in 0..count {
            fleet.start_agent(index);
        }
        Ok(fleet)
    }

    /// How many agents.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// Starts agent `index` (again), on its run folder and fake.
    pub fn start_agent(&mut self, index: usize) {
        let agent = &mut self.agents[index];
        let mut runtimes = RuntimeRegistry::new();
        runtimes.register(agent.fake.clone());
        let config = AgentConfig {
            run_folder: agent.run_folder.clone(),
            ..AgentConfig::new(agent.name.clone(), self.url.clone())
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(ank_agent::run(config, runtimes, stop.clone()));
        agent.running = Some((stop, task));
    }

    /// Stops agent `index` (its workloads stay in its fake) and waits
    /// until it has ended.
    pub async fn stop_agent(&mut self, index: usize) {
        if let Some((stop, task)) = self.agents[index].running.take() {
            stop.cancel();
            let _ = task.await;
        }
    }

    /// How many workloads the fake of agent `index` created so far.
    pub fn created(&self, index: usize) -> usize {
        self.agents[index].fake.created().len()
    }

    /// Creates, starts and deletes the fake of agent `index` received so
    /// far: what a restart of its workloads would add to.
    pub fn lifecycle_calls(&self, index: usize) -> usize {
        let calls = self.agents[index].fake.calls();
        calls.iter().filter(|c| !matches!(c, FakeCall::List)).count()
    }

    /// The instance names the fake of agent `index` created, as
    /// `workload.id` strings.
    pub fn created_instances(&self, index: usize) -> Vec<String> {
        self.agents[index].fake.created().iter().map(ToString::to_string).collect()
    }

    /// Stops every agent.
    pub async fn shutdown(mut self) {
        for agent in &self.agents {
            if let Some((stop, _)) = &agent.running {
                stop.cancel();
            }
        }
        for index in 0..self.agents.len() {
            self.stop_agent(index).await;
        }
    }
}

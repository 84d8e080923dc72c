//! The scenarios of one measurement, each a function over the running
//! [`Fleet`], the tracking [`Subscriber`] and the [`Commander`]: connect,
//! apply all, change one workload, reconnect one agent. Each returns its
//! latency and what it checked; the caller reads the server's costs
//! around them.

use std::time::Duration;

use tokio::time::Instant;

use crate::commander::Commander;
use crate::error::{Result, ScaleError};
use crate::fleet::{Fleet, agent_name};
use crate::manifest::{self, Slot, WORKLOADS_PER_AGENT};
use crate::subscriber::Subscriber;

/// How often the fakes are looked at.
const POLL: Duration = Duration::from_millis(2);

/// The longest any one wait may take.
pub const WAIT_LIMIT: Duration = Duration::from_secs(180);

/// Until the server lists all agents of the fleet as connected.
pub async fn connect(commander: &mut Commander, fleet: &Fleet, started: Instant) -> Result<f64> {
    loop {
        if commander.connected_agents().await? >= fleet.len() {
            return Ok(started.elapsed().as_secs_f64());
        }
        if started.elapsed() > WAIT_LIMIT {
            return Err(timeout(format!("{} agents to connect", fleet.len())));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the apply of all workloads found.
pub struct Applied {
    pub created_s: f64,
    pub running_s: f64,
    pub creates: usize,
    pub agents_complete: usize,
}

/// Applies every workload at once; waits until every fake created its
/// workloads, then until the events show them all Running(Ok).
pub async fn apply_all(
    commander: &mut Commander,
    fleet: &Fleet,
    tracker: &mut Subscriber,
    folder: &std::path::Path,
) -> Result<Applied> {
    let agents = fleet.len();
    let request = manifest::request(folder, agents, None)?;
    let started = Instant::now();
    commander.apply(request).await?;
    let mut pending: Vec<usize> = (0..agents).collect();
    while !pending.is_empty() {
        pending.retain(|&i| fleet.created(i) < WORKLOADS_PER_AGENT);
        if started.elapsed() > WAIT_LIMIT {
            return Err(timeout(format!("{} agents' fakes to create their workloads", pending.len())));
        }
        if !pending.is_empty() {
            tokio::time::sleep(POLL).await;
        }
    }
    let created_s = started.elapsed().as_secs_f64();
    let all = agents * WORKLOADS_PER_AGENT;
    tracker.wait_for(&format!("{all} workloads Running(Ok)"), WAIT_LIMIT, |b| b.running_ok() >= all).await?;
    let running_s = started.elapsed().as_secs_f64();
    let creates = (0..agents).map(|i| fleet.created(i)).sum();
    let agents_complete = (0..agents).filter(|&i| fleet.created(i) == WORKLOADS_PER_AGENT).count();
    Ok(Applied { created_s, running_s, creates, agents_complete })
}

/// What the change of one workload found.
pub struct Updated {
    pub latency_s: f64,
    pub delivered: bool,
    pub side_effects: usize,
}

/// Applies the manifest again with the workload at `slot` changed; waits
/// until its agent's fake created the new instance and the events show it
/// Running(Ok).
pub async fn update_one(
    commander: &mut Commander,
    fleet: &Fleet,
    tracker: &mut Subscriber,
    folder: &std::path::Path,
    slot: Slot,
) -> Result<Updated> {
    let (agent, workload) = slot;
    let before: Vec<usize> = (0..fleet.len()).map(|i| fleet.lifecycle_calls(i)).collect();
    let created_before = fleet.created(agent);
    let old_id = tracker
        .book()
        .instance_of(&agent_name(agent), &manifest::workload_name(agent, workload))
        .map(|(id, _)| id.to_owned());
    let request = manifest::request(folder, fleet.len(), Some(slot))?;
    let started = Instant::now();
    commander.apply(request).await?;
    while fleet.created(agent) <= created_before {
        if started.elapsed() > WAIT_LIMIT {
            return Err(timeout(format!("{} to get its update", agent_name(agent))));
        }
        tokio::time::sleep(POLL).await;
    }
    let latency_s = started.elapsed().as_secs_f64();
    let (name, wl) = (agent_name(agent), manifest::workload_name(agent, workload));
    let is_new = |b: &crate::state_book::StateBook| {
        b.instance_of(&name, &wl).is_some_and(|(id, ok)| ok && Some(id) != old_id.as_deref())
    };
    tracker.wait_for(&format!("{wl} running again"), WAIT_LIMIT, is_new).await?;
    let created_now = fleet.created_instances(agent);
    let delivered =
        created_now.len() == created_before + 1 && created_now.last().is_some_and(|i| i.starts_with(&format!("{wl}.")));
    let side_effects = (0..fleet.len()).filter(|&i| i != agent).map(|i| fleet.lifecycle_calls(i) - before[i]).sum();
    Ok(Updated { latency_s, delivered, side_effects })
}

/// What the reconnection of one agent found.
pub struct Reconnected {
    /// `None` when the server never showed the agent gone (an Ankaios
    /// server takes an agent's Goodbye for no disconnection).
    pub latency_s: Option<f64>,
    pub restarts: usize,
}

/// How long the server may take to show a stopped agent's workloads gone.
const GONE_LIMIT: Duration = Duration::from_secs(5);

/// Stops agent `index`, waits until the events show its workloads no longer
/// Running(Ok), starts it again and waits until they all are.
pub async fn reconnect(fleet: &mut Fleet, tracker: &mut Subscriber, index: usize) -> Result<Reconnected> {
    let name = agent_name(index);
    let calls_before = fleet.lifecycle_calls(index);
    fleet.stop_agent(index).await;
    let gone = format!("{name}'s workloads to be reported disconnected");
    let seen_gone = match tracker.wait_for(&gone, GONE_LIMIT, |b| b.running_ok_of(&name) == 0).await {
        Ok(()) => true,
        Err(ScaleError::Timeout { .. }) => false,
        Err(e) => return Err(e),
    };
    let started = Instant::now();
    fleet.start_agent(index);
    let back = format!("{name}'s workloads Running(Ok) again");
    tracker.wait_for(&back, WAIT_LIMIT, |b| b.running_ok_of(&name) >= WORKLOADS_PER_AGENT).await?;
    let latency_s = seen_gone.then(|| started.elapsed().as_secs_f64());
    // A restart would show right after the hello; give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(Reconnected { latency_s, restarts: fleet.lifecycle_calls(index) - calls_before })
}

fn timeout(what: String) -> ScaleError {
    ScaleError::Timeout { what, after: WAIT_LIMIT }
}

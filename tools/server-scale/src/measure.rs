//! One measurement: a server (a [`Target`]), N in-process agents, the
//! event subscribers, then the scenarios one after the other with the
//! server's CPU read around each and its memory after the apply and at
//! the end. The result is a [`Sample`].

use tokio::time::Instant;

use crate::commander::Commander;
use crate::error::{Result, ScaleError};
use crate::fleet::Fleet;
use crate::manifest::WORKLOADS_PER_AGENT;
use crate::phases;
use crate::procstat::{cpu_seconds, memory};
use crate::sample::{Correctness, CpuSeconds, Sample};
use crate::server::Target;
use crate::subscriber::Subscriber;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The label of the server (`ours`, `reference`).
    pub server: String,
    pub agents: usize,
    pub round: usize,
    /// Event subscribers following `workloadStates` throughout.
    pub subscribers: usize,
}

/// Runs every scenario against `target` with a new fleet of agents.
pub async fn measure(target: &Target, plan: &Plan) -> Result<Sample> {
    let pid = target.pid;
    let folder = tempfile::tempdir().map_err(ScaleError::TempDir)?;
    let cpu_start = cpu_seconds(pid)?;
    // The first subscriber tracks the states; the others only receive.
    let mut subscribers = Vec::with_capacity(plan.subscribers.max(1));
    for _ in 0..plan.subscribers.max(1) {
        subscribers.push(Subscriber::start(&target.url, &["workloadStates"]).await?);
    }
    let mut commander = Commander::connect(&target.url).await?;

    let mut cpu = CpuSeconds::default();
    let mut mark = cpu_seconds(pid)?;
    let mut lap = |cpu_now: f64| {
        let used = cpu_now - mark;
        mark = cpu_now;
        used
    };
    let started = Instant::now();
    let mut fleet = Fleet::start(&target.url, plan.agents)?;
    let connect_s = phases::connect(&mut commander, &fleet, started).await?;
    cpu.connect = lap(cpu_seconds(pid)?);

    let tracker = &mut subscribers[0];
    let applied = phases::apply_all(&mut commander, &fleet, tracker, folder.path()).await?;
    cpu.apply = lap(cpu_seconds(pid)?);
    let rss_after_apply_kib = memory(pid)?.rss_kib;

    let slot = (plan.agents - 1, WORKLOADS_PER_AGENT - 1);
    let updated = phases::update_one(&mut commander, &fleet, tracker, folder.path(), slot).await?;
    cpu.update = lap(cpu_seconds(pid)?);

    let reconnected = phases::reconnect(&mut fleet, tracker, plan.agents / 2).await?;
    cpu.reconnect = lap(cpu_seconds(pid)?);

    let peak_rss_kib = memory(pid)?.hwm_kib;
    cpu.total = cpu_seconds(pid)? - cpu_start;
    let (mut events_per_subscriber, mut resubscriptions) = (Vec::with_capacity(subscribers.len()), 0);
    for subscriber in subscribers {
        let (events, lost) = subscriber.stop().await;
        events_per_subscriber.push(events);
        resubscriptions += lost;
    }
    commander.close().await;
    fleet.shutdown().await;

    let correctness = Correctness {
        creates_after_apply: applied.creates,
        agents_complete: applied.agents_complete,
        update_delivered: updated.delivered,
        update_side_effects: updated.side_effects,
        reconnect_restarts: reconnected.restarts,
    };
    Ok(Sample {
        server: plan.server.clone(),
        agents: plan.agents,
        round: plan.round,
        connect_s,
        apply_created_s: applied.created_s,
        apply_running_s: applied.running_s,
        update_s: updated.latency_s,
        reconnect_s: reconnected.latency_s,
        cpu,
        rss_after_apply_kib,
        peak_rss_kib,
        events_per_subscriber,
        resubscriptions,
        correctness,
    })
}

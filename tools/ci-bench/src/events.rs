//! `events`: every workload subscribes to events on a field mask, then the
//! first one changes a config item again and again (each change waits for
//! its UpdateStateSuccess). Counted: the events each subscriber receives
//! and the time from sending the first change to the last event at the
//! last subscriber.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use ank_proto::ank_base::{self as pb, response::ResponseContent};
use ank_proto::control_api::from_ankaios::FromAnkaiosEnum;
use anyhow::bail;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::pipes::{self, Inbox, Received, Workload};

/// What to run.
pub struct Options {
    pub folders: Vec<PathBuf>,
    pub changes: usize,
    /// The field mask of the subscriptions.
    pub mask: String,
    /// The config item changed, a key under `desiredState.configs`.
    pub config: String,
    /// How long to wait for events still missing after the last change.
    pub settle: Duration,
}

/// Events seen per workload.
#[derive(Debug, Default, Clone)]
struct Tally {
    events: usize,
    last: Option<Instant>,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let (tx, mut inbox) = mpsc::unbounded_channel();
    let mut workloads = Vec::new();
    for (i, folder) in options.folders.iter().enumerate() {
        workloads.push(Workload::open(folder, i, tx.clone())?);
    }
    drop(tx);
    if workloads.is_empty() {
        bail!("no pipe folders given");
    }
    pipes::connect(&mut workloads, &mut inbox).await?;
    let run = pipes::run_id();
    let subscription = format!("{run}-events");
    subscribe(&mut workloads, &mut inbox, &subscription, &options.mask).await?;

    let mut tallies = vec![Tally::default(); workloads.len()];
    let first = Instant::now();
    for i in 0..options.changes {
        let id = format!("{run}-update-{i}");
        workloads[0].request(&id, update(&options.config, &format!("{run}-{i}"))).await?;
        loop {
            let r = pipes::next(&mut inbox, &format!("the response to '{id}'")).await?;
            tally(&r, &subscription, &mut tallies);
            if let Some(content) = response_to(&r, &id) {
                match content {
                    ResponseContent::UpdateStateSuccess(_) => break,
                    ResponseContent::Error(e) => bail!("change '{id}' failed: {}", e.message),
                    other => bail!("unexpected response to '{id}': {other:?}"),
                }
            }
        }
    }
    let deadline = Instant::now() + options.settle;
    while tallies.iter().any(|t| t.events < options.changes) {
        let Ok(Some(r)) = tokio::time::timeout_at(deadline, inbox.recv()).await else { break };
        tally(&r, &subscription, &mut tallies);
    }
    report(&workloads, &tallies, first, options.changes);
    cancel(&mut workloads, &mut inbox, &subscription).await;
    Ok(())
}

/// Opens the subscriptions and waits for each initial state.
async fn subscribe(workloads: &mut [Workload], inbox: &mut Inbox, id: &str, mask: &str) -> anyhow::Result<()> {
    for w in workloads.iter_mut() {
        let content = pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
            field_mask: vec![mask.to_owned()],
            subscribe_for_events: true,
        });
        w.request(id, content).await?;
    }
    let mut subscribed = vec![false; workloads.len()];
    while subscribed.contains(&false) {
        let r = pipes::next(inbox, "the initial states of the subscriptions").await?;
        match response_to(&r, id) {
            Some(ResponseContent::CompleteStateResponse(_)) => subscribed[r.from] = true,
            Some(ResponseContent::Error(e)) => bail!("{}: subscription failed: {}", workloads[r.from].name, e.message),
            _ => {}
        }
    }
    Ok(())
}

/// Ends the subscriptions, so the server stops sending to pipes nobody
/// reads once this process is gone; best effort.
async fn cancel(workloads: &mut [Workload], inbox: &mut Inbox, id: &str) {
    for w in workloads.iter_mut() {
        let _ = w.request(id, pb::request::RequestContent::EventsCancelRequest(pb::EventsCancelRequest {})).await;
    }
    let mut pending = workloads.len();
    let deadline = Instant::now() + Duration::from_secs(2);
    while pending > 0 {
        let Ok(Some(r)) = tokio::time::timeout_at(deadline, inbox.recv()).await else { break };
        if matches!(response_to(&r, id), Some(ResponseContent::EventsCancelAccepted(_))) {
            pending -= 1;
        }
    }
}

fn report(workloads: &[Workload], tallies: &[Tally], first: Instant, changes: usize) {
    let total: usize = tallies.iter().map(|t| t.events).sum();
    let last = tallies.iter().filter_map(|t| t.last).max();
    let elapsed = last.map_or(Duration::ZERO, |l| l - first);
    let rate = if elapsed.is_zero() { 0.0 } else { total as f64 / elapsed.as_secs_f64() };
    println!(
        "events: {changes} changes, {} subscribers: {total} of {} events in {:.3} s (first change to last event): {rate:.0} events/s",
        workloads.len(),
        changes * workloads.len(),
        elapsed.as_secs_f64(),
    );
    for (w, t) in workloads.iter().zip(tallies) {
        println!("  {}: {} events", w.name, t.events);
    }
    if tallies.iter().any(|t| t.events != changes) {
        println!("events: not every subscriber got every event");
    }
}

/// Counts `r` if it is an event of the subscription `id`.
fn tally(r: &Received, id: &str, tallies: &mut [Tally]) {
    if is_event(r, id) {
        tallies[r.from].events += 1;
        tallies[r.from].last = Some(r.at);
    }
}

/// The content of a response to `id`.
fn response_to<'a>(r: &'a Received, id: &str) -> Option<&'a ResponseContent> {
    match &r.message {
        FromAnkaiosEnum::Response(response) if response.request_id == id => response.response_content.as_ref(),
        _ => None,
    }
}

/// An event of the subscription `id`: a state with altered fields (the
/// initial state has none).
fn is_event(r: &Received, id: &str) -> bool {
    matches!(response_to(r, id), Some(ResponseContent::CompleteStateResponse(c)) if c.altered_fields.is_some())
}

/// Sets `desiredState.configs.<key>` to `value`.
fn update(key: &str, value: &str) -> pb::request::RequestContent {
    let item = pb::ConfigItem { config_item_enum: Some(pb::config_item::ConfigItemEnum::String(value.to_owned())) };
    let configs = pb::ConfigMap { configs: HashMap::from([(key.to_owned(), item)]) };
    let state = pb::State { configs: Some(configs), ..Default::default() };
    pb::request::RequestContent::UpdateStateRequest(pb::UpdateStateRequest {
        new_state: Some(pb::CompleteState { desired_state: Some(state), ..Default::default() }),
        update_mask: vec![format!("desiredState.configs.{key}")],
    })
}

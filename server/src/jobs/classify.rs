//! How a job sees one of its items now: succeeded, failed, in progress,
//! ready or waiting (and why), from what the workloads do ([`JobView`]).

use ank_common::StateKind;
use ank_common::execution_state::{Pending, Stopping};
use ank_common::jobs::{ItemClass, JobItem};

use super::engine::{Item, JobView, NewItem};

/// Whether an item was handed out and reached a result.
pub(super) fn settled(item: &Item) -> bool {
    item.frozen.is_none() && item.new.triggered && matches!(item.shown.class, ItemClass::Succeeded | ItemClass::Failed)
}

/// Whether an item counts for its job's phase.
pub(super) fn counts(item: &Item) -> bool {
    !item.superseded
}

/// Whether the item removes its workload (an unplaced one is to be added).
pub(super) fn is_deletion(item: &NewItem) -> bool {
    item.add.is_none() && !item.unplaced
}

/// The class of an item now; `hold`: an untriggered item waits for its
/// dependencies (else it is ready at once and its agent waits).
pub(super) fn classify(item: &Item, view: &dyn JobView, hold: bool) -> JobItem {
    let mut shown = JobItem { delete: is_deletion(&item.new), ..JobItem::default() };
    if let Some((class, reason)) = &item.frozen {
        shown.class = *class;
        shown.reason = reason.clone();
        shown.state = item.shown.state.clone();
        return shown;
    }
    if item.new.unplaced {
        shown.class = ItemClass::Waiting;
        shown.state = "NotScheduled".to_owned();
        shown.reason = "waits for an agent that matches its agentSelector".to_owned();
        return shown;
    }
    let target = item.new.add.as_ref().map(|s| &s.instance_name).or(item.new.delete.as_ref().map(|d| &d.instance_name));
    let now = target.and_then(|n| view.instance(n));
    shown.state = now.as_ref().map(|(s, _)| s.to_string()).unwrap_or_default();
    if !item.new.triggered {
        let waits = if hold || depends_on_gated(item, view) { waiting_for(item, view) } else { Vec::new() };
        if waits.is_empty() {
            shown.class = ItemClass::Ready;
        } else {
            shown.class = ItemClass::Waiting;
            shown.reason = format!("waits for {}", waits.join(", "));
        }
        return shown;
    }
    shown.class = match (&item.new.add, now) {
        (Some(_), None) => ItemClass::InProgress,
        // A report about an older spec says nothing about this one (0:
        // an agent that does not report generations).
        (Some(_), Some((_, observed))) if observed != 0 && observed < item.generation => ItemClass::InProgress,
        (Some(_), Some((state, _))) => match state {
            StateKind::Running | StateKind::Succeeded => ItemClass::Succeeded,
            StateKind::Failed(_)
            | StateKind::Pending(Pending::StartingFailed | Pending::Canceled)
            | StateKind::Stopping(Stopping::DeleteFailed) => {
                shown.reason = state.to_string();
                ItemClass::Failed
            }
            _ => ItemClass::InProgress,
        },
        (None, None) => ItemClass::Succeeded,
        (None, Some((state, _))) => match state {
            StateKind::Removed => ItemClass::Succeeded,
            StateKind::Stopping(Stopping::DeleteFailed) => {
                shown.reason = state.to_string();
                ItemClass::Failed
            }
            _ => ItemClass::InProgress,
        },
    };
    // Under an open update gate the result is the gate's: a failure may
    // still heal, and running is not yet healthy.
    if matches!(shown.class, ItemClass::Succeeded | ItemClass::Failed)
        && let Some(spec) = &item.new.add
        && let Some(why) = view.gate(spec.name(), item.generation)
    {
        shown.class = ItemClass::InProgress;
        shown.reason = why;
    }
    // Handed to an agent that is not there: nothing is in flight.
    if shown.class == ItemClass::InProgress
        && let Some(away) = target.and_then(|n| view.away(&n.agent_name))
    {
        shown.class = ItemClass::Waiting;
        shown.reason = format!("waits for {away}");
    }
    // Handed out, and its agent holds it for its dependencies: nothing is
    // in flight either (the job may be stuck, or done after a failure).
    if shown.class == ItemClass::InProgress
        && now.is_some_and(|(s, _)| s == StateKind::Pending(Pending::WaitingToStart))
    {
        let waits = waiting_for(item, view);
        if !waits.is_empty() {
            shown.class = ItemClass::Waiting;
            shown.reason = format!("waits for {}", waits.join(", "));
        }
    }
    shown
}

/// Whether an item to add depends on a workload under an open update gate.
fn depends_on_gated(item: &Item, view: &dyn JobView) -> bool {
    item.new.add.as_ref().is_some_and(|spec| spec.workload.dependencies.keys().any(|d| view.gated(d.as_str())))
}

/// What an untriggered item waits for, as "db (Pending(Initial))" parts.
fn waiting_for(item: &Item, view: &dyn JobView) -> Vec<String> {
    match &item.new.add {
        Some(spec) => spec
            .workload
            .dependencies
            .iter()
            .filter_map(|(dep, cond)| view.dependency(dep.as_str(), *cond).err())
            .collect(),
        None => item
            .new
            .delete_after
            .iter()
            .filter(|n| view.instance(n).is_some_and(|(s, _)| s != StateKind::Removed))
            .map(|n| format!("{} to stop", n.workload_name))
            .collect(),
    }
}

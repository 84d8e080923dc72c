//! The phase of an unfinished job from its items' classes: progressing,
//! completing, succeeded, failed (once nothing is in flight) or stuck, and
//! the bounded reason a finished job shows.

use ank_common::jobs::{ItemClass, JobPhase};
use tokio::time::Instant;

use super::classify::counts;
use super::engine::{Item, JobSettings, Run};

/// Sets the phase of an unfinished job from its items' classes. A job with
/// a failed item ends once nothing is in flight, unless it still holds items
/// it will hand out (`hold_dependents` without `stop_on_failure`).
// [feature L3: stop on failure, wait for in-flight]
// [feature L4: stuck detection]
pub(super) fn decide_phase(run: &mut Run, settings: &JobSettings, now: Instant) {
    let counted: Vec<(&String, &Item)> = run.items.iter().filter(|(_, i)| counts(i)).collect();
    let of = |class: ItemClass| counted.iter().filter(move |(_, i)| i.shown.class == class).map(|(n, i)| (*n, *i));
    let (failed, active, ready, waiting) = (
        of(ItemClass::Failed).count(),
        of(ItemClass::InProgress).count(),
        of(ItemClass::Ready).count(),
        of(ItemClass::Waiting).count(),
    );
    let (fail_phase, busy_phase) = if run.delete_only {
        (JobPhase::DeleteFailed, JobPhase::Deleting)
    } else {
        (JobPhase::Failed, JobPhase::Progressing)
    };
    let holds_more = !settings.stop_on_failure && counted.iter().any(|(_, i)| !i.new.triggered && i.frozen.is_none());
    if failed > 0 && !holds_more {
        if active == 0 {
            let mut parts: Vec<String> =
                of(ItemClass::Failed).map(|(n, i)| format!("{n}: {}", i.shown.reason)).collect();
            let unstarted: Vec<&str> =
                of(ItemClass::Waiting).chain(of(ItemClass::Ready)).map(|(n, _)| n.as_str()).collect();
            if !unstarted.is_empty() {
                let verb = if run.delete_only { "not stopped" } else { "not started" };
                parts.push(format!("{verb}: {}", bounded(unstarted, ", ")));
            }
            finish(run, fail_phase, bounded(parts, "; "));
        } else {
            run.job.phase = busy_phase;
        }
        return;
    }
    if active == 0 && ready == 0 && waiting == 0 {
        let reason = if counted.is_empty() && !run.items.is_empty() { "superseded".to_owned() } else { String::new() };
        finish(run, JobPhase::Succeeded, reason);
        return;
    }
    if active == 0 && ready == 0 {
        let since = *run.stuck_since.get_or_insert(now);
        if let Some(stuck_after) = settings.stuck_after
            && now.saturating_duration_since(since) >= stuck_after
        {
            let chain: Vec<String> = of(ItemClass::Waiting).map(|(n, i)| format!("{n} {}", i.shown.reason)).collect();
            finish(run, fail_phase, format!("stuck: {}", bounded(chain, "; ")));
            return;
        }
    } else {
        run.stuck_since = None;
    }
    // Everything handed out, only results outstanding: Completing.
    run.job.phase = if !run.delete_only && ready == 0 && waiting == 0 { JobPhase::Completing } else { busy_phase };
}

/// Joins at most [`REASON_ITEMS`] parts and says how many more there are:
/// the items themselves are listed by `ank get job`.
pub(super) fn bounded<T: AsRef<str>>(parts: Vec<T>, sep: &str) -> String {
    let shown: Vec<&str> = parts.iter().take(REASON_ITEMS).map(AsRef::as_ref).collect();
    let mut text = shown.join(sep);
    if parts.len() > REASON_ITEMS {
        text.push_str(&format!("{sep}and {} more", parts.len() - REASON_ITEMS));
    }
    text
}

/// How many items a job's reason names.
const REASON_ITEMS: usize = 5;

pub(super) fn finish(run: &mut Run, phase: JobPhase, reason: String) {
    run.job.phase = phase;
    run.job.reason = reason;
    run.job.finished_at = ank_common::daemon::clock::now_rfc3339();
    run.stuck_since = None;
}

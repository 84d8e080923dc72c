//! Waiting on an apply job: the wait mode of a server with jobs follows the
//! tracked instances as before, and also asks for the job after every
//! state update (at least every second, since a job can end without one:
//! stuck, interrupted). It ends when the job is over or, unless `--wait`
//! asked for the job's outcome, when every instance settled.

use std::time::Duration;

use ank_common::jobs::{Job, JobPhase};
use anyhow::Context;

use crate::connection::Connection;
use crate::wait::{Progress, SPINNER_STEP, WaitTracker, read_state, snapshot};

/// How often the job is asked for when no state update comes.
const POLL: Duration = Duration::from_secs(1);

/// The job `id` as the server shows it now, `None` if it keeps no such job.
pub async fn fetch_job(conn: &mut Connection, id: u64) -> anyhow::Result<Option<Job>> {
    let state = read_state(conn, vec![format!("jobs.{id}")], "the job").await?;
    Ok(state.jobs.and_then(|mut jobs| jobs.remove(&id.to_string())))
}

/// Follows `tracker` and job `id` until the job is over, or (when not
/// `whole_job`) until every tracked instance settled. Returns the job as
/// last seen. `progress` sees the tracker after the snapshot, after every
/// pushed update and at every spinner step.
pub async fn wait_for_job(
    conn: &mut Connection,
    tracker: &mut WaitTracker,
    mut id: u64,
    whole_job: bool,
    progress: &mut dyn Progress,
) -> anyhow::Result<Option<Job>> {
    snapshot(conn, tracker).await?;
    progress.changed(tracker)?;
    let mut ticks = tokio::time::interval(SPINNER_STEP);
    loop {
        let job = fetch_job(conn, id).await?;
        while let Some(states) = conn.take_pushed() {
            tracker.apply_update(&states);
            progress.changed(tracker)?;
        }
        tracker.expire(tokio::time::Instant::now());
        // A job whose every workload a later job took over (placement found
        // an agent for them) goes on in that job.
        if let Some(next) = job.as_ref().and_then(successor) {
            id = next;
            continue;
        }
        let over = job.as_ref().is_none_or(|j| j.phase.is_final());
        if over || (!whole_job && tracker.is_done()) {
            return Ok(job);
        }
        let poll = tokio::time::sleep(POLL);
        tokio::pin!(poll);
        loop {
            tokio::select! {
                states = conn.next_state_update() => {
                    tracker.apply_update(&states.context("lost the server while waiting for the job")?);
                    progress.changed(tracker)?;
                    break;
                }
                now = ticks.tick() => {
                    tracker.expire(now);
                    if !whole_job && tracker.is_done() {
                        break;
                    }
                    progress.tick(tracker)?;
                }
                () = &mut poll => break,
            }
        }
    }
}

/// The job that took over every workload of `job`, once `job` is over
/// because of it ("superseded by job N" on each of its items).
fn successor(job: &Job) -> Option<u64> {
    if job.phase != JobPhase::Succeeded || job.reason != "superseded" {
        return None;
    }
    job.workloads.values().filter_map(|item| item.reason.strip_prefix("superseded by job ")?.parse().ok()).max()
}

#[cfg(test)]
mod tests {
    use ank_common::jobs::JobItem;

    use super::*;

    #[test]
    fn a_superseded_job_goes_on_in_the_job_that_took_its_workloads_over() {
        let item = |reason: &str| JobItem { reason: reason.into(), ..JobItem::default() };
        let mut job = Job { id: 1, phase: JobPhase::Succeeded, reason: "superseded".into(), ..Job::default() };
        job.workloads.insert("a".into(), item("superseded by job 2"));
        job.workloads.insert("b".into(), item("superseded by job 4"));
        assert_eq!(successor(&job), Some(4));
        job.reason = String::new();
        assert_eq!(successor(&job), None, "a job that succeeded on its own is over");
        job.reason = "superseded".into();
        job.phase = JobPhase::Failed;
        assert_eq!(successor(&job), None);
    }
}

//! `ank-fleet rollout`: publishes a manifest wave by wave and waits for
//! each wave to be Ready. The plan and progress are kept in the retained
//! record `<prefix>/rollouts/<id>`, so `rollout status` reads them from
//! anywhere and `rollout resume` continues where it stopped; `rollout
//! halt` is a retained control message the driving process watches.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::view::{Fleet, Vehicle};
use crate::payload::{RolloutAction, RolloutPhase, RolloutRecord, RolloutResult, encode};
use crate::topics::VehicleTopic;

/// Where one vehicle of a rollout is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Runs the rollout and every managed workload is Ready.
    Ready,
    /// Refused the manifest, or its apply job failed; with why.
    Failed(String),
    /// Not there yet.
    Pending,
}

/// Where `vehicle` is in rollout `id`.
pub fn progress(id: &str, vehicle: Option<&Vehicle>) -> Progress {
    let Some(status) = vehicle.and_then(|v| v.status.as_ref()) else { return Progress::Pending };
    if let Some(r) = status.rollout.as_ref().filter(|r| r.id == id && r.result == RolloutResult::Rejected) {
        return Progress::Failed(format!("rejected: {}", r.reason));
    }
    if status.applied_rollout.as_deref() != Some(id) {
        return Progress::Pending;
    }
    match &status.job {
        Some(job) if job.phase == "Failed" => Progress::Failed(format!("job {} failed: {}", job.id, job.reason)),
        Some(job) if job.phase != "Succeeded" => Progress::Pending,
        _ if status.ready => Progress::Ready,
        _ => Progress::Pending,
    }
}

/// How a drive ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Halted,
}

/// How often progress is looked at when no message came.
const TICK: Duration = Duration::from_millis(250);

/// `1 vehicle`, `2 vehicles`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

fn fmt_secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

async fn save(fleet: &Fleet, record: &mut RolloutRecord) -> anyhow::Result<()> {
    record.updated_at = crate::payload::now();
    fleet.publish(&fleet.topics.rollout(&record.id), encode(record), true).await
}

async fn halt(fleet: &Fleet, record: &mut RolloutRecord, reason: String) -> anyhow::Result<Outcome> {
    println!("rollout {} halted: {reason}", record.id);
    for (vehicle, why) in &record.failed {
        println!("  {vehicle}: {why}");
    }
    record.phase = RolloutPhase::Halted;
    record.reason = reason;
    save(fleet, record).await?;
    Ok(Outcome::Halted)
}

/// Drives `record` from its next wave to the end or a halt.
pub async fn drive(fleet: &mut Fleet, record: &mut RolloutRecord) -> anyhow::Result<Outcome> {
    fleet.watch(&fleet.topics.rollout_control(&record.id)).await?;
    let total: usize = record.waves.iter().map(Vec::len).sum();
    let started = Instant::now();
    record.phase = RolloutPhase::Progressing;
    record.reason.clear();
    // A resumed rollout looks at every vehicle afresh: one that failed and was fixed counts no more.
    record.failed.clear();
    save(fleet, record).await?;
    while record.waves_done < record.waves.len() {
        let index = record.waves_done;
        let wave = record.waves[index].clone();
        for vehicle in &wave {
            let payload = fleet.desired_payload(vehicle, &record.id, &record.manifest)?;
            fleet.publish(&fleet.topics.vehicle(vehicle, VehicleTopic::Desired), payload, true).await?;
        }
        let wave_start = Instant::now();
        let timeout = Duration::from_secs(record.wave_timeout_secs);
        loop {
            if fleet.control(&record.id).is_some_and(|c| c.action == RolloutAction::Halt) {
                return halt(fleet, record, "halted by the operator".to_owned()).await;
            }
            let published: Vec<&String> = record.waves[..=index].iter().flatten().collect();
            let mut pending = Vec::new();
            for vehicle in published {
                match progress(&record.id, fleet.vehicles.get(vehicle)) {
                    Progress::Failed(why) => {
                        record.failed.insert(vehicle.clone(), why);
                    }
                    Progress::Pending if wave.contains(vehicle) => pending.push(vehicle.clone()),
                    _ => {}
                }
            }
            if record.failed.len() > record.max_failures {
                let reason = format!(
                    "{} of {} failed, more than the {} allowed",
                    record.failed.len(),
                    count(total, "vehicle"),
                    record.max_failures
                );
                return halt(fleet, record, reason).await;
            }
            if pending.is_empty() {
                break;
            }
            if wave_start.elapsed() >= timeout {
                let reason = format!(
                    "wave {}/{} timed out after {}: not Ready: {}",
                    index + 1,
                    record.waves.len(),
                    humantime::format_duration(timeout),
                    pending.join(", ")
                );
                return halt(fleet, record, reason).await;
            }
            fleet.drain(TICK).await?;
        }
        let failed_here = wave.iter().filter(|v| record.failed.contains_key(*v)).count();
        println!(
            "wave {}/{}: {} ready{} in {}",
            index + 1,
            record.waves.len(),
            count(wave.len() - failed_here, "vehicle"),
            if failed_here > 0 { format!(", {failed_here} failed") } else { String::new() },
            fmt_secs(wave_start.elapsed())
        );
        record.waves_done = index + 1;
        save(fleet, record).await?;
    }
    record.phase = RolloutPhase::Succeeded;
    save(fleet, record).await?;
    println!("rollout {} succeeded: {} in {}", record.id, count(total, "vehicle"), fmt_secs(started.elapsed()));
    Ok(Outcome::Succeeded)
}

/// Per vehicle of a record: its wave and progress (for `rollout status`).
pub fn vehicle_progress(record: &RolloutRecord, fleet: &Fleet) -> BTreeMap<String, (usize, Progress)> {
    record
        .waves
        .iter()
        .enumerate()
        .flat_map(|(i, wave)| wave.iter().map(move |v| (i, v)))
        .map(|(i, v)| {
            let p = if i < record.waves_done || (i == record.waves_done && record.phase != RolloutPhase::Succeeded) {
                progress(&record.id, fleet.vehicles.get(v))
            } else {
                Progress::Pending
            };
            (v.clone(), (i + 1, p))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{JobStatus, RolloutStatus, Status};

    fn vehicle(applied: Option<&str>, ready: bool, job: Option<&str>, rejected: Option<&str>) -> Vehicle {
        Vehicle {
            info: None,
            online: Some(true),
            status: Some(Status {
                version: 1,
                vehicle: "v".into(),
                seq: 1,
                published_at: String::new(),
                rollout: rejected.map(|id| RolloutStatus {
                    id: id.into(),
                    result: RolloutResult::Rejected,
                    reason: "bad".into(),
                }),
                applied_rollout: applied.map(Into::into),
                accepted_seq: 0,
                job: job.map(|p| JobStatus { id: 3, phase: p.into(), reason: "r".into() }),
                ready,
                available: ready,
                workloads: BTreeMap::new(),
            }),
        }
    }

    #[test]
    fn counts_are_singular_for_one() {
        assert_eq!(count(1, "vehicle"), "1 vehicle");
        assert_eq!(count(0, "vehicle"), "0 vehicles");
        assert_eq!(count(3, "wave"), "3 waves");
    }

    #[test]
    fn a_vehicle_is_ready_failed_or_pending_for_a_rollout() {
        assert_eq!(progress("r2", None), Progress::Pending);
        assert_eq!(progress("r2", Some(&vehicle(Some("r1"), true, None, None))), Progress::Pending, "older rollout");
        assert_eq!(progress("r2", Some(&vehicle(Some("r2"), true, Some("Succeeded"), None))), Progress::Ready);
        assert_eq!(progress("r2", Some(&vehicle(Some("r2"), true, None, None))), Progress::Ready, "job forgotten");
        assert_eq!(progress("r2", Some(&vehicle(Some("r2"), true, Some("Progressing"), None))), Progress::Pending);
        assert_eq!(progress("r2", Some(&vehicle(Some("r2"), false, Some("Succeeded"), None))), Progress::Pending);
        assert_eq!(
            progress("r2", Some(&vehicle(Some("r2"), false, Some("Failed"), None))),
            Progress::Failed("job 3 failed: r".into())
        );
        assert_eq!(
            progress("r2", Some(&vehicle(Some("r1"), true, None, Some("r2")))),
            Progress::Failed("rejected: bad".into())
        );
        assert_eq!(progress("r3", Some(&vehicle(Some("r1"), true, None, Some("r2")))), Progress::Pending);
    }
}

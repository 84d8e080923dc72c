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
    // Failed on health: the vehicle put a managed workload's last healthy spec back.
    if let Some((name, w)) = status.workloads.iter().find(|(_, w)| !w.reverted.is_empty()) {
        return Progress::Failed(format!("{name} reverted: {}", w.reverted));
    }
    match &status.job {
        Some(job) if job.phase == "Failed" => Progress::Failed(format!("job {} failed: {}", job.id, job.reason)),
        Some(job) if job.phase != "Succeeded" => Progress::Pending,
        _ if status.ready => Progress::Ready,
        _ => Progress::Pending,
    }
}

/// What one look at a wave decided.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WaveStep {
    Waiting,
    Done,
    Halt(String),
}

/// Looks at wave `index` of `record` (and the vehicles of the waves before
/// it): records failures, and decides whether the wave is done, still
/// waiting, or halts the rollout. `timed_out`: the wave's time is up, so a
/// vehicle still pending failed on health (it did not become Ready, or a
/// managed workload was reverted without the job saying so yet) and counts
/// against `--max-failures` like one that refused the rollout.
fn look_at_wave(
    record: &mut RolloutRecord,
    index: usize,
    vehicles: &BTreeMap<String, Vehicle>,
    timed_out: bool,
) -> WaveStep {
    let total: usize = record.waves.iter().map(Vec::len).sum();
    let wave = &record.waves[index];
    let mut pending = Vec::new();
    for vehicle in record.waves[..=index].iter().flatten() {
        match progress(&record.id, vehicles.get(vehicle)) {
            Progress::Failed(why) => {
                record.failed.insert(vehicle.clone(), why);
            }
            Progress::Pending if wave.contains(vehicle) => pending.push(vehicle.clone()),
            _ => {}
        }
    }
    let over = |record: &RolloutRecord| record.failed.len() > record.max_failures;
    let too_many = |record: &RolloutRecord| {
        format!(
            "{} of {} failed, more than the {} allowed",
            record.failed.len(),
            count(total, "vehicle"),
            record.max_failures
        )
    };
    if over(record) {
        return WaveStep::Halt(too_many(record));
    }
    if pending.is_empty() {
        return WaveStep::Done;
    }
    if !timed_out {
        return WaveStep::Waiting;
    }
    let waited = humantime::format_duration(Duration::from_secs(record.wave_timeout_secs)).to_string();
    for vehicle in &pending {
        let why = not_ready_reason(vehicles.get(vehicle), &waited);
        record.failed.insert(vehicle.clone(), why);
    }
    if over(record) {
        return WaveStep::Halt(format!(
            "wave {}/{} timed out after {waited}: not Ready: {}; {}",
            index + 1,
            record.waves.len(),
            pending.join(", "),
            too_many(record)
        ));
    }
    WaveStep::Done
}

/// Why a vehicle that is still pending after `waited` failed: the managed
/// workloads that are not Ready, with their states.
fn not_ready_reason(vehicle: Option<&Vehicle>, waited: &str) -> String {
    let Some(status) = vehicle.and_then(|v| v.status.as_ref()) else {
        return format!("not Ready within {waited}: no status");
    };
    let not_ready: Vec<String> = status
        .workloads
        .iter()
        .filter(|(_, w)| !w.ready)
        .map(|(name, w)| {
            let sub = if w.sub_state.is_empty() { String::new() } else { format!("({})", w.sub_state) };
            format!("{name} {}{sub}", w.state)
        })
        .collect();
    if not_ready.is_empty() {
        format!("not Ready within {waited}")
    } else {
        format!("not Ready within {waited}: {}", not_ready.join(", "))
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
            match look_at_wave(record, index, &fleet.vehicles, wave_start.elapsed() >= timeout) {
                WaveStep::Waiting => {}
                WaveStep::Done => break,
                WaveStep::Halt(reason) => return halt(fleet, record, reason).await,
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

    fn record(waves: Vec<Vec<&str>>, max_failures: usize) -> RolloutRecord {
        RolloutRecord {
            version: 1,
            id: "r2".into(),
            manifest: String::new(),
            selector: String::new(),
            waves: waves.into_iter().map(|w| w.into_iter().map(Into::into).collect()).collect(),
            max_failures,
            wave_timeout_secs: 60,
            waves_done: 0,
            phase: RolloutPhase::Progressing,
            reason: String::new(),
            failed: BTreeMap::new(),
            started_at: String::new(),
            updated_at: String::new(),
        }
    }

    fn not_ready_web() -> Vehicle {
        let mut v = vehicle(Some("r2"), false, Some("Succeeded"), None);
        let status = v.status.as_mut().unwrap();
        status.workloads.insert(
            "web".into(),
            crate::payload::WorkloadStatus {
                agent: "a".into(),
                state: "Running".into(),
                sub_state: "Ok".into(),
                ..Default::default()
            },
        );
        v
    }

    #[test]
    fn a_vehicle_not_ready_in_time_fails_on_health_and_counts_against_max_failures() {
        let fleet: BTreeMap<String, Vehicle> = [
            ("v1".to_owned(), vehicle(Some("r2"), true, Some("Succeeded"), None)),
            ("v2".to_owned(), not_ready_web()),
            ("v3".to_owned(), not_ready_web()),
        ]
        .into();
        // Before the timeout the wave waits for v2.
        let mut r = record(vec![vec!["v1", "v2"], vec!["v3"]], 1);
        assert_eq!(look_at_wave(&mut r, 0, &fleet, false), WaveStep::Waiting);
        assert!(r.failed.is_empty());
        // At the timeout v2 failed on health; one failure is allowed, so the wave is done.
        assert_eq!(look_at_wave(&mut r, 0, &fleet, true), WaveStep::Done);
        assert_eq!(r.failed["v2"], "not Ready within 1m: web Running(Ok)");
        // The next wave's v3 fails the same way: two are more than allowed.
        let WaveStep::Halt(why) = look_at_wave(&mut r, 1, &fleet, true) else { panic!("must halt") };
        assert_eq!(why, "wave 2/2 timed out after 1m: not Ready: v3; 2 of 3 vehicles failed, more than the 1 allowed");
        // Without tolerance the first wave halts at its timeout.
        let mut strict = record(vec![vec!["v1", "v2"]], 0);
        assert!(matches!(look_at_wave(&mut strict, 0, &fleet, true), WaveStep::Halt(_)));
    }

    #[test]
    fn a_failed_job_halts_the_wave_at_once() {
        let fleet: BTreeMap<String, Vehicle> =
            [("v1".to_owned(), vehicle(Some("r2"), true, Some("Failed"), None))].into();
        let mut r = record(vec![vec!["v1"]], 0);
        assert_eq!(
            look_at_wave(&mut r, 0, &fleet, false),
            WaveStep::Halt("1 of 1 vehicle failed, more than the 0 allowed".into())
        );
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
        // Reverted by the vehicle's update gate: failed, though the old spec is Ready again.
        let mut reverted = vehicle(Some("r2"), true, Some("Succeeded"), None);
        let w = crate::payload::WorkloadStatus { reverted: "not Ready within 30s".into(), ..Default::default() };
        reverted.status.as_mut().unwrap().workloads.insert("web".into(), w);
        assert_eq!(progress("r2", Some(&reverted)), Progress::Failed("web reverted: not Ready within 30s".into()));
    }
}

//! Wire <-> domain for apply jobs.

use ank_proto::ank_base as pb;

use super::ConvertError;
use crate::jobs::{ItemClass, Job, JobItem, JobPhase};

fn phase_to_pb(p: JobPhase) -> pb::JobPhase {
    match p {
        JobPhase::Init => pb::JobPhase::JobInit,
        JobPhase::Progressing => pb::JobPhase::JobProgressing,
        JobPhase::Completing => pb::JobPhase::JobCompleting,
        JobPhase::Succeeded => pb::JobPhase::JobSucceeded,
        JobPhase::Failed => pb::JobPhase::JobFailed,
        JobPhase::InitDelete => pb::JobPhase::JobInitDelete,
        JobPhase::Deleting => pb::JobPhase::JobDeleting,
        JobPhase::DeleteFailed => pb::JobPhase::JobDeleteFailed,
    }
}

fn class_to_pb(c: ItemClass) -> pb::JobItemClass {
    match c {
        ItemClass::Succeeded => pb::JobItemClass::ItemSucceeded,
        ItemClass::Failed => pb::JobItemClass::ItemFailed,
        ItemClass::InProgress => pb::JobItemClass::ItemInProgress,
        ItemClass::Ready => pb::JobItemClass::ItemReady,
        ItemClass::Waiting => pb::JobItemClass::ItemWaiting,
    }
}

pub fn job_to_pb(j: &Job) -> pb::Job {
    pb::Job {
        id: j.id,
        phase: phase_to_pb(j.phase) as i32,
        reason: j.reason.clone(),
        created_at: j.created_at.clone(),
        finished_at: j.finished_at.clone(),
        workloads: j
            .workloads
            .iter()
            .map(|(n, i)| {
                let item = pb::JobItem {
                    class: class_to_pb(i.class) as i32,
                    state: i.state.clone(),
                    reason: i.reason.clone(),
                    delete: i.delete,
                };
                (n.clone(), item)
            })
            .collect(),
    }
}

pub fn job_from_pb(j: pb::Job) -> Result<Job, ConvertError> {
    let phase = JobPhase::ALL
        .into_iter()
        .find(|p| phase_to_pb(*p) as i32 == j.phase)
        .ok_or_else(|| ConvertError(format!("job {}: unknown phase {}", j.id, j.phase)))?;
    let mut workloads = std::collections::BTreeMap::new();
    for (name, i) in j.workloads {
        let class = ItemClass::ALL
            .into_iter()
            .find(|c| class_to_pb(*c) as i32 == i.class)
            .ok_or_else(|| ConvertError(format!("job {}: unknown class {} of '{name}'", j.id, i.class)))?;
        workloads.insert(name, JobItem { class, state: i.state, reason: i.reason, delete: i.delete });
    }
    Ok(Job { id: j.id, phase, reason: j.reason, created_at: j.created_at, finished_at: j.finished_at, workloads })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_round_trip_through_the_wire() {
        let mut job = Job { id: 17, phase: JobPhase::DeleteFailed, reason: "api".into(), ..Default::default() };
        job.workloads.insert("db".into(), JobItem { class: ItemClass::Ready, delete: true, ..Default::default() });
        assert_eq!(job_from_pb(job_to_pb(&job)).unwrap(), job);
        let bad = pb::Job { phase: 99, ..Default::default() };
        assert!(job_from_pb(bad).unwrap_err().to_string().contains("unknown phase 99"));
    }
}

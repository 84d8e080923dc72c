//! Apply jobs (the Landscaper model): every accepted change of the desired
//! state becomes a [`Job`] with a monotonic id and a phase; each workload it
//! adds or deletes is an item in one of the classes A–E. These are the
//! shapes `ank get jobs` and the complete state show; the server's job
//! engine decides them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum JobPhase {
    #[default]
    Init,
    Progressing,
    Completing,
    Succeeded,
    Failed,
    InitDelete,
    Deleting,
    DeleteFailed,
}

impl JobPhase {
    pub const ALL: [JobPhase; 8] = [
        JobPhase::Init,
        JobPhase::Progressing,
        JobPhase::Completing,
        JobPhase::Succeeded,
        JobPhase::Failed,
        JobPhase::InitDelete,
        JobPhase::Deleting,
        JobPhase::DeleteFailed,
    ];

    /// Whether the job is over.
    pub fn is_final(self) -> bool {
        matches!(self, JobPhase::Succeeded | JobPhase::Failed | JobPhase::DeleteFailed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobPhase::Init => "Init",
            JobPhase::Progressing => "Progressing",
            JobPhase::Completing => "Completing",
            JobPhase::Succeeded => "Succeeded",
            JobPhase::Failed => "Failed",
            JobPhase::InitDelete => "InitDelete",
            JobPhase::Deleting => "Deleting",
            JobPhase::DeleteFailed => "DeleteFailed",
        }
    }
}

/// The classes of the Landscaper execution controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemClass {
    /// A: triggered and done (running, finished, or removed).
    Succeeded,
    /// B: triggered and failed.
    Failed,
    /// C: triggered, not done yet.
    InProgress,
    /// D: not triggered, nothing it waits for is pending.
    Ready,
    /// E: not triggered, waits for others.
    #[default]
    Waiting,
}

impl ItemClass {
    pub const ALL: [ItemClass; 5] =
        [ItemClass::Succeeded, ItemClass::Failed, ItemClass::InProgress, ItemClass::Ready, ItemClass::Waiting];

    pub fn as_str(self) -> &'static str {
        match self {
            ItemClass::Succeeded => "succeeded",
            ItemClass::Failed => "failed",
            ItemClass::InProgress => "inProgress",
            ItemClass::Ready => "ready",
            ItemClass::Waiting => "waiting",
        }
    }
}

/// One workload of a job. Every field has a default so that a masked or
/// partial tree (an event) still reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobItem {
    pub class: ItemClass,
    /// The workload's execution state as last seen (display form).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// Why it waits or failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The job removes this workload.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delete: bool,
}

/// One accepted change and its rollout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Job {
    pub id: u64,
    pub phase: JobPhase,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub created_at: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub finished_at: String,
    #[serde(default)]
    pub workloads: BTreeMap<String, JobItem>,
}

impl Job {
    /// The names of the items of one class.
    pub fn names_in(&self, class: ItemClass) -> Vec<&str> {
        self.workloads.iter().filter(|(_, i)| i.class == class).map(|(n, _)| n.as_str()).collect()
    }
}

//! [`FinishedStore`]: the agent's persistent record of workloads that ran
//! to their end and whose container was reaped (feature K7), one entry per
//! workload name: the instance name, a hash of the spec, its generation and
//! the final state. It lives in `<run folder>/<agent>_io/finished_workloads.json`
//! so that a restarted agent does not run a reaped workload again and
//! reports its final state instead; a changed spec runs again.
//!
//! A small map behind a short-held lock (nothing awaits inside it), shared
//! by the `RuntimeManager` (which asks it at a ServerHello) and the control
//! loops (which record a reap and forget the record on a new create or a
//! delete). Every change is written at once (temporary file + rename).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ank_common::ExecutionState;
use ank_common::workload::WorkloadSpec;
use serde::{Deserialize, Serialize};

/// File name below the agent's io folder.
pub const FILE_NAME: &str = "finished_workloads.json";

/// One reaped workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    instance_name: String,
    /// SHA-256 of the workload's spec (see [`spec_hash`]).
    spec_hash: String,
    /// The generation the server gave the spec (informational: a server
    /// that restarted counts anew, so it does not decide equality).
    generation: u64,
    state: ExecutionState,
    reaped_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FileFormat {
    version: u32,
    workloads: BTreeMap<String, Record>,
}

/// The persistent record of reaped workloads of one agent.
#[derive(Debug)]
pub struct FinishedStore {
    path: PathBuf,
    records: Mutex<BTreeMap<String, Record>>,
}

/// A hash of everything that decides what a workload runs: its instance
/// name and its spec (the same notion of "unchanged" as `WorkloadSpec`'s
/// equality, which leaves the generation out).
pub fn spec_hash(spec: &WorkloadSpec) -> String {
    let workload = serde_json::to_string(&spec.workload).unwrap_or_default();
    ank_common::instance_name::runtime_config_id(&format!("{}\n{workload}", spec.instance_name))
}

impl FinishedStore {
    /// The store of the agent whose io folder is `io_folder`, with the
    /// records an earlier run left. An unreadable file is reported and
    /// treated as empty (the workloads then run again, as without it).
    pub fn open(io_folder: &Path) -> Self {
        let path = io_folder.join(FILE_NAME);
        let records = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<FileFormat>(&bytes) {
                Ok(file) => file.workloads,
                Err(e) => {
                    tracing::warn!("ignoring the reaped-workload record '{}': {e}", path.display());
                    BTreeMap::new()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                tracing::warn!("cannot read the reaped-workload record '{}': {e}", path.display());
                BTreeMap::new()
            }
        };
        Self { path, records: Mutex::new(records) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Record>> {
        self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that `spec` ended in `state` and its container was removed.
    // [feature K7: the agent persists which spec finished and was reaped]
    pub fn record(&self, spec: &WorkloadSpec, state: &ExecutionState) {
        let record = Record {
            instance_name: spec.instance_name.to_string(),
            spec_hash: spec_hash(spec),
            generation: spec.generation,
            state: state.clone(),
            reaped_at: ank_common::daemon::clock::now_rfc3339(),
        };
        let mut records = self.lock();
        records.insert(spec.name().to_owned(), record);
        self.save(&records);
    }

    /// The final state `spec` was reaped in, if exactly this spec was.
    pub fn final_state(&self, spec: &WorkloadSpec) -> Option<ExecutionState> {
        let records = self.lock();
        let record = records.get(spec.name())?;
        let same = record.instance_name == spec.instance_name.to_string() && record.spec_hash == spec_hash(spec);
        same.then(|| record.state.clone())
    }

    /// Forgets the record of `workload` (it runs again, or was deleted).
    pub fn forget(&self, workload: &str) {
        let mut records = self.lock();
        if records.remove(workload).is_some() {
            self.save(&records);
        }
    }

    /// Keeps only the records of workloads `keep` accepts.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut records = self.lock();
        let before = records.len();
        records.retain(|name, _| keep(name));
        if records.len() != before {
            self.save(&records);
        }
    }

    /// The names of the recorded workloads.
    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn save(&self, records: &BTreeMap<String, Record>) {
        let file = FileFormat { version: 1, workloads: records.clone() };
        let result = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other).and_then(|bytes| {
            let tmp = self.path.with_extension("json.tmp");
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &self.path)
        });
        if let Err(e) = result {
            tracing::warn!("cannot write the reaped-workload record '{}': {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ank_common::workload::{RestartPolicy, Workload};
    use ank_common::{AgentName, WorkloadName};

    fn spec(name: &str, image: &str) -> WorkloadSpec {
        let wl = Workload {
            agent: "agent_A".into(),
            runtime: "podman".into(),
            runtime_config: format!("image: {image}\n"),
            ..Default::default()
        };
        WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), wl)
    }

    #[test]
    // [test of feature K7]
    fn finished_store_survives_a_restart_and_matches_only_the_same_spec() {
        let dir = tempfile::tempdir().unwrap();
        let job = spec("job", "img:1").at_generation(3);
        let failed = ExecutionState::failed("Exit code: '2'");
        FinishedStore::open(dir.path()).record(&job, &failed);
        let store = FinishedStore::open(dir.path());
        assert_eq!(store.final_state(&job), Some(failed.clone()));
        assert_eq!(store.final_state(&job.clone().at_generation(1)), Some(failed), "a renumbered spec is the same");
        assert_eq!(store.final_state(&spec("job", "img:2")), None, "another runtimeConfig is another instance");
        let mut policy = job.clone();
        policy.workload.restart_policy = RestartPolicy::OnFailure;
        assert_eq!(store.final_state(&policy), None, "a changed spec runs again");
        assert_eq!(store.final_state(&spec("other", "img:1")), None);
        store.forget("job");
        assert_eq!(FinishedStore::open(dir.path()).final_state(&job), None, "forgetting is persisted");
    }

    #[test]
    // [test of feature K7]
    fn finished_store_retains_only_wanted_names_and_ignores_a_broken_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = FinishedStore::open(dir.path());
        store.record(&spec("a", "x"), &ExecutionState::succeeded());
        store.record(&spec("b", "x"), &ExecutionState::succeeded());
        store.retain(|n| n == "b");
        assert_eq!(FinishedStore::open(dir.path()).names(), vec!["b".to_owned()]);
        std::fs::write(dir.path().join(FILE_NAME), b"{not json").unwrap();
        assert!(FinishedStore::open(dir.path()).names().is_empty());
    }
}

//! The `${seq:N}` number pools: which number each macro occurrence of each
//! workload holds. Pools are per agent and per N; a workload's successive
//! occurrences get the lowest free numbers from N up, and keep them as
//! long as the workload stays on its agent with a macro of the same pool
//! at that position, so values are stable across applies and restarts.
//! The numbers of a deleted (or moved) workload are free again, and a
//! later workload reuses them, lowest first.
//!
//! With a state file the table is kept next to it ([`StateFile::seq_path`],
//! written atomically before the state file); without one it lives in
//! memory only. Allocation is planned on a copy ([`SeqPools::plan`]) and
//! taken over once the change is saved ([`SeqPools::commit`]).
//!
//! [`StateFile::seq_path`]: crate::state_file::StateFile::seq_path

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ank_common::State;
use ank_common::seq_macro;
use serde::{Deserialize, Serialize};

/// One occurrence's number from its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub pool: u64,
    pub number: u64,
}

/// The numbers of one workload's occurrences, in order, on one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub agent: String,
    pub slots: Vec<Slot>,
}

/// Workload name -> its allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqTable {
    #[serde(default)]
    pub workloads: BTreeMap<String, Allocation>,
}

/// Why the pools cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SeqPoolsError {
    #[error("cannot read the ${{seq:N}} allocations '{path}': {source}")]
    Read { path: String, source: std::io::Error },
    #[error("the ${{seq:N}} allocations '{path}' are not valid ({reason}); fix or move the file away")]
    Invalid { path: String, reason: String },
    #[error("cannot write the ${{seq:N}} allocations '{path}': {source}")]
    Write { path: String, source: std::io::Error },
    #[error("macro: pool {pool} on agent '{agent}' has no number left for workload '{workload}'")]
    Exhausted { pool: u64, agent: String, workload: String },
}

/// The allocation table and where it is kept.
#[derive(Debug, Default)]
pub struct SeqPools {
    table: SeqTable,
    file: Option<PathBuf>,
}

impl SeqPools {
    /// Pools kept in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// Pools kept in `path`, loaded from it when it exists.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, SeqPoolsError> {
        let path = path.into();
        let label = path.display().to_string();
        let table = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| SeqPoolsError::Invalid { path: label, reason: e.to_string() })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => SeqTable::default(),
            Err(source) => return Err(SeqPoolsError::Read { path: label, source }),
        };
        Ok(Self { table, file: Some(path) })
    }

    /// The file the table is kept in, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The current table.
    pub fn table(&self) -> &SeqTable {
        &self.table
    }

    /// Expands every `${seq:N}` of the workloads of `rendered` that have an
    /// agent, and returns the table that holds the numbers used. Workloads
    /// without an agent keep their macros until they get one.
    // [feature K9: numbers per agent and pool, stable per (workload, occurrence), freed on delete]
    pub fn plan(&self, rendered: &mut State) -> Result<SeqTable, SeqPoolsError> {
        let mut wanted: BTreeMap<String, (String, Vec<u64>)> = BTreeMap::new();
        for (name, wl) in &rendered.workloads {
            if wl.agent.is_empty() {
                continue;
            }
            let pools = seq_macro::pools(wl);
            if !pools.is_empty() {
                wanted.insert(name.to_string(), (wl.agent.clone(), pools));
            }
        }
        // First what stays: an occurrence keeps its number while the
        // workload stays on its agent with the same pool at that position.
        let mut kept: BTreeMap<&str, Vec<Option<u64>>> = BTreeMap::new();
        let mut used: BTreeMap<(String, u64), BTreeSet<u64>> = BTreeMap::new();
        for (name, (agent, pools)) in &wanted {
            let before = self.table.workloads.get(name).filter(|a| &a.agent == agent);
            let slots = pools
                .iter()
                .enumerate()
                .map(|(i, pool)| {
                    let slot = before.and_then(|a| a.slots.get(i)).filter(|s| s.pool == *pool)?;
                    used.entry((agent.clone(), *pool)).or_default().insert(slot.number);
                    Some(slot.number)
                })
                .collect();
            kept.insert(name.as_str(), slots);
        }
        // Then the new occurrences, lowest free number first.
        let mut table = SeqTable::default();
        for (name, (agent, pools)) in &wanted {
            let mut slots = Vec::with_capacity(pools.len());
            for (i, pool) in pools.iter().enumerate() {
                let number = match kept[name.as_str()][i] {
                    Some(n) => n,
                    None => {
                        let taken = used.entry((agent.clone(), *pool)).or_default();
                        let n = lowest_free(*pool, taken).ok_or_else(|| SeqPoolsError::Exhausted {
                            pool: *pool,
                            agent: agent.clone(),
                            workload: name.clone(),
                        })?;
                        taken.insert(n);
                        n
                    }
                };
                slots.push(Slot { pool: *pool, number });
            }
            table.workloads.insert(name.clone(), Allocation { agent: agent.clone(), slots });
        }
        for (name, wl) in rendered.workloads.iter_mut() {
            if let Some(a) = table.workloads.get(name.as_str()) {
                let numbers: Vec<u64> = a.slots.iter().map(|s| s.number).collect();
                seq_macro::substitute(wl, &numbers);
            }
        }
        Ok(table)
    }

    /// Saves `table` (when it differs from the committed one and a file is
    /// configured); the in-memory table is not changed yet.
    pub fn save(&self, table: &SeqTable) -> Result<(), SeqPoolsError> {
        let Some(path) = &self.file else { return Ok(()) };
        if *table == self.table {
            return Ok(());
        }
        let write = |source| SeqPoolsError::Write { path: path.display().to_string(), source };
        let mut text = serde_json::to_vec_pretty(table).map_err(|e| write(std::io::Error::other(e)))?;
        text.push(b'\n');
        crate::state_file::write_atomically(path, &text).map_err(write)
    }

    /// Takes over a saved table.
    pub fn commit(&mut self, table: SeqTable) {
        self.table = table;
    }
}

/// The lowest number from `pool` up that `taken` lacks.
fn lowest_free(pool: u64, taken: &BTreeSet<u64>) -> Option<u64> {
    let mut candidate = pool;
    for n in taken.range(pool..) {
        if *n != candidate {
            break;
        }
        candidate = candidate.checked_add(1)?;
    }
    Some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(names: &[(&str, &str)]) -> State {
        let mut text = String::from("apiVersion: v1\nworkloads:\n");
        for (name, agent) in names {
            text.push_str(&format!(
                "  {name}:\n    runtime: podman\n    agent: '{agent}'\n    runtimeConfig: \"image: x\\ncommandOptions: [-e, PORT_A=${{seq:8000}}, -e, PORT_B=${{seq:8000}}]\"\n"
            ));
        }
        ank_common::manifest::parse_manifest("t", &text).unwrap()
    }

    fn ports(s: &State, name: &str) -> String {
        let rc = &s.workloads[name].runtime_config;
        let get = |key: &str| {
            rc.split(key)
                .nth(1)
                .map(|r| r.chars().take_while(char::is_ascii_digit).collect::<String>())
                .unwrap_or_default()
        };
        format!("{}/{}", get("PORT_A="), get("PORT_B="))
    }

    fn apply(pools: &mut SeqPools, mut s: State) -> State {
        let table = pools.plan(&mut s).unwrap();
        pools.save(&table).unwrap();
        pools.commit(table);
        s
    }

    // [test of feature K9]
    #[test]
    fn seq_pools_allocate_in_order_keep_numbers_and_reuse_freed_ones_lowest_first() {
        let mut pools = SeqPools::in_memory();
        let s = apply(&mut pools, state(&[("w1", "agent_A"), ("w2", "agent_A")]));
        assert_eq!((ports(&s, "w1"), ports(&s, "w2")), ("8000/8001".to_owned(), "8002/8003".to_owned()));
        // Re-planned: stable.
        let again = apply(&mut pools, state(&[("w1", "agent_A"), ("w2", "agent_A")]));
        assert_eq!(again, s);
        // Delete w1, add w3: w3 gets w1's numbers.
        let s = apply(&mut pools, state(&[("w2", "agent_A"), ("w3", "agent_A")]));
        assert_eq!((ports(&s, "w2"), ports(&s, "w3")), ("8002/8003".to_owned(), "8000/8001".to_owned()));
        // Another agent has its own pool; no agent: not expanded yet.
        let s = apply(&mut pools, state(&[("w2", "agent_A"), ("w3", "agent_A"), ("b", "agent_B"), ("u", "")]));
        assert_eq!(ports(&s, "b"), "8000/8001");
        assert!(s.workloads["u"].runtime_config.contains("${seq:8000}"));
        assert!(!pools.table().workloads.contains_key("u"));
    }

    #[test]
    fn seq_pools_survive_a_restart_through_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.seq.json");
        let mut pools = SeqPools::open(&path).unwrap();
        let first = apply(&mut pools, state(&[("w2", "agent_A")]));
        assert_eq!(ports(&first, "w2"), "8000/8001");
        // A new server on the same file keeps w2's numbers.
        let mut pools = SeqPools::open(&path).unwrap();
        let s = apply(&mut pools, state(&[("w1", "agent_A"), ("w2", "agent_A")]));
        assert_eq!((ports(&s, "w1"), ports(&s, "w2")), ("8002/8003".to_owned(), "8000/8001".to_owned()));
        std::fs::write(&path, "{").unwrap();
        let e = SeqPools::open(&path).unwrap_err().to_string();
        assert!(e.contains("state.seq.json") && e.contains("are not valid"), "{e}");
    }

    #[test]
    fn lowest_free_fills_gaps_and_ends_at_the_top() {
        let taken: BTreeSet<u64> = [8000, 8001, 8003].into();
        assert_eq!(lowest_free(8000, &taken), Some(8002));
        assert_eq!(lowest_free(7000, &taken), Some(7000));
        assert_eq!(lowest_free(u64::MAX, &[u64::MAX].into()), None);
    }
}

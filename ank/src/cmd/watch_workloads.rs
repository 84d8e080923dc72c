//! `ank get workloads --watch`: the workload table, redrawn on every state
//! change the server pushes, until interrupted.

use std::collections::BTreeMap;
use std::io::IsTerminal;

use ank_common::messages::{RequestContent, ResponseContent};
use ank_common::{StateKind, WorkloadState};
use anyhow::bail;

use super::get_workloads::WorkloadFilter;
use crate::cmd::Ctx;
use crate::connection::Connection;
use crate::output::{self, WorkloadRow};
use crate::view::StateView;

/// The rows being watched, by instance name.
#[derive(Debug, Default)]
pub struct WatchTable {
    rows: BTreeMap<String, WorkloadRow>,
    runtimes: BTreeMap<String, String>,
    filter: WorkloadFilter,
    /// `-o wide`: our columns too.
    wide: bool,
}

impl WatchTable {
    /// The table of a state snapshot.
    pub fn new(view: &StateView, filter: WorkloadFilter, wide: bool) -> Self {
        let mut table = Self { rows: BTreeMap::new(), runtimes: view.runtimes(), filter, wide };
        table.apply(&view.workload_state_list());
        table
    }

    /// Applies pushed states; `Removed` drops the row.
    pub fn apply(&mut self, states: &[WorkloadState]) {
        for s in states {
            let key = s.instance_name.to_string();
            if s.execution_state.kind == StateKind::Removed {
                self.rows.remove(&key);
                continue;
            }
            let name = s.instance_name.workload_name.clone();
            let row = WorkloadRow {
                runtime: self.runtimes.get(&name).cloned().unwrap_or_default(),
                name,
                agent: s.instance_name.agent_name.clone(),
                state: Some(s.execution_state.clone()),
                status: s.status.clone(),
                priority: None,
            };
            self.rows.insert(key, row);
        }
    }

    /// Takes a full snapshot: its rows replace all others (a row absent
    /// from it is gone), and its runtimes are learnt.
    pub fn replace(&mut self, view: &StateView) {
        self.rows.clear();
        self.runtimes = view.runtimes();
        self.apply(&view.workload_state_list());
    }

    /// Whether some row's runtime is not known yet (a workload added later).
    pub fn misses_runtimes(&self) -> bool {
        self.rows.values().any(|r| r.runtime.is_empty())
    }

    /// Learns the runtimes of the desired state.
    pub fn set_runtimes(&mut self, runtimes: BTreeMap<String, String>) {
        for row in self.rows.values_mut() {
            if let Some(rt) = runtimes.get(&row.name) {
                row.runtime = rt.clone();
            }
        }
        self.runtimes = runtimes;
    }

    /// The table text of the rows that pass the filter.
    pub fn render(&self) -> String {
        let rows: Vec<WorkloadRow> = self.rows.values().filter(|r| self.filter.matches(r)).cloned().collect();
        if self.wide { output::workload_table_wide(&rows) } else { output::workload_table(&rows) }
    }
}

async fn snapshot(conn: &mut Connection) -> anyhow::Result<StateView> {
    let masks = vec!["desiredState.workloads".to_owned(), "workloadStates".to_owned()];
    match conn.request(RequestContent::CompleteState { field_mask: masks, subscribe_for_events: false }).await? {
        ResponseContent::CompleteState(state) => StateView::from_tree(&state.to_json()?),
        ResponseContent::Error(e) => bail!("the server rejected the request: {e}"),
        other => bail!("unexpected answer to a state request: {other:?}"),
    }
}

/// Prints the table and again on every update until a termination
/// signal (Ctrl-C, SIGTERM), then says goodbye.
pub async fn run(ctx: &mut Ctx<'_>, filter: WorkloadFilter, wide: bool) -> anyhow::Result<()> {
    let interrupted = crate::signals::termination();
    tokio::pin!(interrupted);
    let mut conn = ctx.connect().await?;
    let mut table = WatchTable::new(&snapshot(&mut conn).await?, filter, wide);
    let redraw_in_place = std::io::stdout().is_terminal();
    let mut shown = table.render();
    // Like Ankaios: a pipe or file gets the whole table, then a blank
    // line, after every update; a terminal has it redrawn in place.
    ctx.print(&if redraw_in_place { shown.clone() } else { format!("{shown}\n") })?;
    // Ankaios' server pushes no workload states to a commander (ours does):
    // from such a server the state is read every second.
    let poll = !conn.pushes_states();
    let mut polls =
        tokio::time::interval_at(tokio::time::Instant::now() + crate::wait::POLL_EVERY, crate::wait::POLL_EVERY);
    let result: anyhow::Result<()> = async {
        loop {
            tokio::select! {
                s = conn.next_state_update() => {
                    table.apply(&s?);
                    if table.misses_runtimes() {
                        table.set_runtimes(snapshot(&mut conn).await?.runtimes());
                    }
                }
                _ = polls.tick(), if poll => table.replace(&snapshot(&mut conn).await?),
                _ = &mut interrupted => return Ok(()),
            };
            let next = table.render();
            if next == shown {
                continue;
            }
            if redraw_in_place {
                ctx.print(&output::redraw(&shown, &next))?;
            } else {
                ctx.print(&format!("{next}\n"))?;
            }
            shown = next;
        }
    }
    .await;
    conn.goodbye().await;
    result
}

#[cfg(test)]
mod tests {
    use ank_common::{ExecutionState, WorkloadInstanceName};

    use super::*;

    fn state(instance: &str, s: ExecutionState) -> WorkloadState {
        WorkloadState::new(WorkloadInstanceName::parse(instance).unwrap(), s)
    }

    #[test]
    fn watch_table_follows_pushed_states_and_drops_removed_rows() {
        let tree = serde_json::json!({
            "desiredState": {"workloads": {"web": {"runtime": "podman", "agent": "A", "runtimeConfig": ""}}},
            "workloadStates": {"A": {"web": {"abc": {"state": "Pending", "subState": "Starting"}}}},
        });
        let view = StateView::from_tree(&tree).unwrap();
        let mut t = WatchTable::new(&view, WorkloadFilter::default(), false);
        assert!(t.render().contains("Pending(Starting)"));
        t.apply(&[state("web.abc.A", ExecutionState::running())]);
        assert!(t.render().contains("Running(Ok)") && t.render().contains("podman"));
        t.apply(&[state("db.def.A", ExecutionState::running())]);
        assert!(t.misses_runtimes());
        t.set_runtimes([("db".to_owned(), "podman-kube".to_owned())].into_iter().collect());
        assert!(!t.misses_runtimes());
        assert!(t.render().contains("podman-kube"));
        t.apply(&[state("web.abc.A", ExecutionState::removed())]);
        assert!(!t.render().contains("web"));
    }

    #[test]
    fn watch_table_replaced_by_a_snapshot_drops_rows_it_lacks() {
        let tree = serde_json::json!({"workloadStates": {"A": {"w": {"1": {"state": "Running", "subState": "Ok"}}}}});
        let mut table = WatchTable::new(&StateView::from_tree(&tree).unwrap(), WorkloadFilter::default(), false);
        table.apply(&[state("v.2.A", ExecutionState::running())]);
        assert!(table.render().contains("v ") && table.render().contains("w "), "{}", table.render());
        let later =
            serde_json::json!({"workloadStates": {"A": {"v": {"2": {"state": "Succeeded", "subState": "Ok"}}}}});
        table.replace(&StateView::from_tree(&later).unwrap());
        let text = table.render();
        assert!(text.contains("Succeeded(Ok)") && !text.contains("w "), "{text}");
    }

    #[test]
    fn watch_table_applies_the_filter() {
        let view = StateView::from_tree(&serde_json::json!({})).unwrap();
        let filter = WorkloadFilter { names: vec!["db".into()], agent: None, state: None };
        let mut t = WatchTable::new(&view, filter, false);
        t.apply(&[state("web.abc.A", ExecutionState::running()), state("db.def.A", ExecutionState::running())]);
        let text = t.render();
        assert!(text.contains("db") && !text.contains("web"), "{text}");
    }
}

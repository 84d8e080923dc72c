//! What `apply`, `run`, `delete` and `set state` print while they wait, as
//! Ankaios' `ank` prints it: the table of the changed workloads with a
//! spinner before each state still awaited. On a terminal the table is
//! redrawn in place; a pipe or file gets the whole table and a blank line
//! after every update and every spinner step, so a log shows each state a
//! workload went through.

use std::io::Write;

use anyhow::Context;

use crate::output;
use crate::wait::{Progress, WaitTracker};

/// The spinner's symbols, in turn.
const SPINNER: [char; 4] = ['|', '/', '-', '\\'];

/// Prints the wait table to `out`.
pub struct TablePrinter<'w> {
    out: &'w mut dyn Write,
    /// Redraw in place (a terminal) instead of appending.
    live: bool,
    /// The width to fit, `None` for no limit.
    width: Option<usize>,
    spinner: usize,
    /// The text last drawn (live mode).
    shown: String,
}

impl<'w> TablePrinter<'w> {
    /// A printer for a terminal (`live`) or not.
    pub fn new(out: &'w mut dyn Write, live: bool, width: Option<usize>) -> Self {
        Self { out, live, width, spinner: 0, shown: String::new() }
    }

    fn print(&mut self, tracker: &WaitTracker) -> anyhow::Result<()> {
        let table = output::wait_table(&tracker.rows(), SPINNER[self.spinner], self.width);
        let text = if self.live {
            let next = format!("{table}\n");
            if next == self.shown {
                return Ok(());
            }
            let text = output::redraw(&self.shown, &next);
            self.shown = next;
            text
        } else {
            format!("{table}\n\n")
        };
        self.out.write_all(text.as_bytes()).and_then(|()| self.out.flush()).context("cannot write the output")
    }
}

impl Progress for TablePrinter<'_> {
    fn changed(&mut self, tracker: &WaitTracker) -> anyhow::Result<()> {
        self.print(tracker)
    }

    fn tick(&mut self, tracker: &WaitTracker) -> anyhow::Result<()> {
        self.spinner = (self.spinner + 1) % SPINNER.len();
        self.print(tracker)
    }
}

/// Prints nothing (`--quiet`).
pub struct Silent;

impl Progress for Silent {
    fn changed(&mut self, _: &WaitTracker) -> anyhow::Result<()> {
        Ok(())
    }

    fn tick(&mut self, _: &WaitTracker) -> anyhow::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ank_common::{ExecutionState, WorkloadInstanceName, WorkloadState};

    fn state(instance: &str, s: ExecutionState) -> WorkloadState {
        WorkloadState::new(WorkloadInstanceName::parse(instance).unwrap(), s)
    }

    #[test]
    fn progress_appends_a_table_per_update_and_step_with_the_spinner() {
        let mut tracker = WaitTracker::new(&["web.1.agent_A".into()], &[])
            .unwrap()
            .with_runtimes([("web".to_owned(), "podman".to_owned())].into());
        let mut out = Vec::new();
        let mut printer = TablePrinter::new(&mut out, false, None);
        tracker.apply_update(&[state("web.1.agent_A", ExecutionState::pending_initial())]);
        printer.changed(&tracker).unwrap();
        printer.tick(&tracker).unwrap();
        tracker.apply_update(&[state("web.1.agent_A", ExecutionState::running())]);
        printer.changed(&tracker).unwrap();
        let text = String::from_utf8(out).unwrap();
        let pad = " ".repeat(15);
        let header = "WORKLOAD NAME   AGENT     RUNTIME     EXECUTION STATE    ADDITIONAL INFO";
        let settled_header = "WORKLOAD NAME   AGENT     RUNTIME     EXECUTION STATE   ADDITIONAL INFO";
        let expected = [
            format!("{header}\nweb             agent_A   podman    | Pending(Initial)   {pad}\n\n"),
            format!("{header}\nweb             agent_A   podman    / Pending(Initial)   {pad}\n\n"),
            format!("{settled_header}\nweb             agent_A   podman      Running(Ok)       {pad}\n\n"),
        ]
        .concat();
        assert_eq!(text, expected);
    }

    #[test]
    fn progress_on_a_terminal_redraws_only_changes() {
        let mut tracker = WaitTracker::new(&["web.1.agent_A".into()], &[]).unwrap();
        tracker.apply_update(&[state("web.1.agent_A", ExecutionState::running())]);
        let mut out = Vec::new();
        let mut printer = TablePrinter::new(&mut out, true, Some(200));
        printer.changed(&tracker).unwrap();
        printer.tick(&tracker).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("WORKLOAD NAME").count(), 1, "a settled table does not change: {text:?}");
    }
}

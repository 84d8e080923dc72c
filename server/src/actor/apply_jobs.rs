//! The actor's side of apply jobs: it opens the job of every accepted
//! change (the engine decides its items; the actor forgets the states the
//! engine says are gone) and advances the jobs once per command that may
//! change the state, sending what [`Advance`] hands out.

use ank_common::State;
use ank_common::messages::FromServer;
use tokio::time::Instant;

use super::AnkaiosServer;
use crate::connections::Outbox;
use crate::desired_state::StateDiff;
use crate::jobs::Advance;

impl AnkaiosServer {
    /// Opens the job of an accepted change from rendered state `old` to the
    /// current one (`startup`: the items go out at once), and forgets the
    /// held workloads it replaces that never reached their agent.
    pub(crate) fn open_job(&mut self, old: &State, diff: &StateDiff, startup: bool) -> u64 {
        let opened = self.jobs.open_change(old, diff, startup, &self.desired.generations);
        for n in &opened.forget {
            if let Some(gone) = self.states.forget(n) {
                self.io.out.broadcast(None, FromServer::UpdateWorkloadState(vec![gone]));
            }
        }
        opened.id
    }

    /// Steps the jobs until nothing more goes out: hands out what became
    /// ready and shows what is held. Runs once per command that may change
    /// the state; what it sends goes where the first job not advanced yet
    /// opened.
    pub(crate) fn advance_jobs(&mut self) {
        let advance = Advance {
            jobs: &mut self.jobs,
            states: &mut self.states,
            conns: &self.conns,
            current: &self.desired.current,
            generations: &self.desired.generations,
            gates: &self.lifecycle.gates,
            out: Outbox::default(),
        };
        let out = advance.run(Instant::now());
        self.io.out.jobs_advanced(out);
    }

    /// Advances the jobs if a change opened one since they last did (the
    /// server's own changes, at its ticks).
    pub(crate) fn advance_jobs_if_opened(&mut self) {
        if self.io.out.job_pending() {
            self.advance_jobs();
        }
    }
}

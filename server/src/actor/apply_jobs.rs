//! The actor's side of apply jobs: the engine opens the job of every
//! accepted change (`JobEngine::open_job`, in `update.rs`); the actor
//! advances the jobs once per command that may change the state, sending
//! what [`Advance`] hands out.

use tokio::time::Instant;

use super::AnkaiosServer;
use crate::connections::Outbox;
use crate::jobs::Advance;

impl AnkaiosServer {
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

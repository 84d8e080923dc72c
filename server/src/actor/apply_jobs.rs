//! The actor's side of apply jobs: the engine opens the job of every
//! accepted change (`JobEngine::open_job`, in `change.rs`); the actor
//! advances the jobs once per command that may change the state, sending
//! what [`Advance`] hands out.

use tokio::time::Instant;

use super::AnkaiosServer;
use crate::connections::Outbox;
use crate::jobs::Advance;

impl AnkaiosServer {
    /// Steps the jobs until nothing more goes out: hands out what became
    /// ready and shows what is held. Runs once per command that may change
    /// the state (and, for the server's own changes, when one opened a
    /// job: `Outbox::job_pending`); what it sends goes where the first job
    /// not advanced yet opened.
    pub(super) fn advance_jobs(&mut self) {
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
}

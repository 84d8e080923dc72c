//! Apply jobs. The engine ([`JobEngine`], `engine.rs`) owns the jobs, the
//! items they hold back and the history; `classify.rs` says what each item
//! is now and `phase.rs` what each job is. `dispatch.rs` opens a job for an
//! accepted change or a rerun, `advance.rs` hands out what the engine lets
//! go, `pipelines.rs` cancels the members of failed pipeline groups.

mod advance;
mod classify;
mod dispatch;
mod engine;
mod phase;
mod pipelines;

pub(crate) use advance::Advance;
pub(crate) use dispatch::job_accepted;
pub use engine::*;

impl crate::workload_states::HeldBack for JobEngine {
    fn is_held(&self, workload: &str) -> bool {
        JobEngine::is_held(self, workload)
    }
}

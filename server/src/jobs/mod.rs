//! Apply jobs. The engine ([`JobEngine`], `engine.rs`) owns the jobs, the
//! items they hold back and the history; `dispatch.rs` opens a job for an
//! accepted change and hands out what the engine lets go, `pipelines.rs`
//! cancels the members of failed pipeline groups.

mod advance;
mod dispatch;
mod engine;
mod pipelines;

pub use engine::*;

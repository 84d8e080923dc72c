//! The docs' examples as a test: every fenced `sh`/`console` block in
//! `docs/` that runs `ank` is executed against a sample cluster of the
//! built binaries, and where the document shows output it must match
//! (see `docs/doc-tests.md` for the directives a document uses).

mod expect;
mod parse;
mod session;

pub use session::{Outcome, run_document};

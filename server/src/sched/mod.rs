//! The scheduling features on the desired state: effective priorities
//! (`priorities.rs`), the `${seq:N}` number pools (`seq_pools.rs`) and the
//! last rendering steps before a state goes to the agents (`render.rs`).

pub mod priorities;
pub(crate) mod render;
pub mod seq_pools;

pub use render::SchedOptions;

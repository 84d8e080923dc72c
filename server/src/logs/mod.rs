//! Log requests: the campaigns the server serves (`campaigns.rs`) and the
//! handlers that accept, forward, route and cancel them (`requests.rs`).

pub mod campaigns;
mod requests;

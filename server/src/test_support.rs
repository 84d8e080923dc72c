//! Helpers of the server's unit tests.

use ank_common::convert::PartialCompleteState;

/// The typed new state of an update request written as a JSON tree.
pub fn typed(tree: serde_json::Value) -> Box<PartialCompleteState> {
    Box::new(PartialCompleteState::from_json(&tree).expect("a valid state"))
}

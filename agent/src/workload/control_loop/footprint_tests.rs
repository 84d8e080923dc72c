//! What an idle control loop costs: one task per workload, so its size
//! is paid a hundred times on a node with a hundred workloads.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{LoopContext, StateReporter, WorkloadControlLoop};
use crate::runtime_connectors::RuntimeRegistry;
use crate::runtime_connectors::fake::FakeRuntime;

/// The task of an idle loop holds a pointer to the loop's state and the
/// futures it waits on, not the futures of its handlers (a create with its
/// runtime calls was 16 KB in a debug build) nor a second copy of the state.
#[test]
fn an_idle_loops_task_holds_its_wait_not_its_handlers() {
    let mut registry = RuntimeRegistry::new();
    registry.register(Arc::new(FakeRuntime::new()));
    let io = tempfile::tempdir().expect("temp io folder");
    let (reporter, _reports) = StateReporter::channel(1);
    let ctx = LoopContext::for_tests(registry, reporter, io.path(), Default::default());
    let (_commands, receiver) = mpsc::unbounded_channel();
    let task = WorkloadControlLoop::new(ctx, receiver).run();

    let task_size = std::mem::size_of_val(&task);
    let state_size = std::mem::size_of::<WorkloadControlLoop>();
    assert!(task_size <= 1024, "the loop's task is {task_size} bytes");
    assert!(state_size <= 4096, "the loop's state is {state_size} bytes");
}

//! [`LoopContext::for_tests`]: the context the control loop's own tests
//! run a loop in.

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc};

use super::{LoopContext, RetryPolicy, StateReporter};
use crate::control_interface::registry::ControlInterfaces;
use crate::runtime_connectors::RuntimeRegistry;
use crate::workload::finished_store::FinishedStore;

impl LoopContext {
    /// A context for the loop's tests: `registry`'s runtimes, 4 create
    /// slots, the agent's defaults otherwise, its files below `io`.
    pub fn for_tests(
        registry: RuntimeRegistry,
        reporter: StateReporter,
        io: &std::path::Path,
        retry_policy: RetryPolicy,
    ) -> Self {
        Self {
            registry: Arc::new(registry),
            reporter,
            create_permits: Arc::new(Semaphore::new(4)),
            delete_permits: Arc::new(Semaphore::new(4)),
            runtime_events: tokio::sync::mpsc::channel(16).0,
            retry_policy,
            io_folder: io.to_owned(),
            control_interfaces: ControlInterfaces::new(mpsc::unbounded_channel().0),
            retention: Default::default(),
            finished: Arc::new(FinishedStore::open(io)),
            restart_backoff: None,
        }
    }
}

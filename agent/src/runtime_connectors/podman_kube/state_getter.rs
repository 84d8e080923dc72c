//! The PodmanKubeStateGetter: the state of a played manifest is combined
//! from the states of all containers of its pods, read from the PodmanCli
//! container state cache. The lowest-priority state wins:
//! Failed < Starting < Unknown < Running < Stopping < Succeeded.

use std::sync::Arc;

use ank_common::execution_state::{Failed, Pending, Stopping};
use ank_common::{ExecutionState, StateKind};
use async_trait::async_trait;

use super::workload_id::KubeWorkloadId;
use crate::runtime_connectors::podman::cli::PsEntry;
use crate::runtime_connectors::podman::events::exit_state;
use crate::runtime_connectors::podman::ps_cache::PsCache;
use crate::runtime_connectors::polling_checker::RuntimeStateGetter;
use crate::runtime_connectors::{Observed, WorkloadId};

/// The state of one container of a pod, ordered by the design's priority.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ContainerState {
    Failed(i32),
    Starting,
    Unknown(String),
    Running,
    Stopping,
    Succeeded,
}

/// Maps one container as podman lists it.
// [impl->swdd~podman-kube-state-getter-maps-state~2]
fn container_state(entry: &PsEntry) -> ContainerState {
    match entry.state.as_str() {
        "created" => ContainerState::Starting,
        "running" => ContainerState::Running,
        "exited" if entry.exit_code == 0 => ContainerState::Succeeded,
        "exited" => ContainerState::Failed(entry.exit_code),
        "stopping" => ContainerState::Stopping,
        other => ContainerState::Unknown(other.to_owned()),
    }
}

fn execution_state(s: ContainerState) -> ExecutionState {
    match s {
        ContainerState::Failed(code) => exit_state(code),
        ContainerState::Starting => ExecutionState::new(StateKind::Pending(Pending::Starting)),
        ContainerState::Unknown(info) => ExecutionState::with_info(StateKind::Failed(Failed::Unknown), info),
        ContainerState::Running => ExecutionState::running(),
        ContainerState::Stopping => ExecutionState::new(StateKind::Stopping(Stopping::Stopping)),
        ContainerState::Succeeded => ExecutionState::succeeded(),
    }
}

/// The combined state of the pods `pods` among the host's `containers`.
// [impl->swdd~podman-kube-state-getter-uses-container-states~1]
// [impl->swdd~podman-kube-state-getter-combines-states~2]
// [impl->swdd~podman-kube-state-getter-treats-missing-pods-as-unknown~1]
// [impl->swdd~podman-kube-state-getter-removed-if-no-container~1]
pub fn combined_state(pods: &[String], containers: &[PsEntry]) -> Observed {
    let mut any = false;
    let mut lowest: Option<ContainerState> = None;
    for pod in pods {
        let mut found = false;
        for c in containers.iter().filter(|c| &c.pod == pod && !c.is_infra) {
            found = true;
            let s = container_state(c);
            lowest = Some(lowest.map_or(s.clone(), |l| l.min(s)));
        }
        any |= found;
        if !found {
            let s = ContainerState::Unknown(format!("pod '{pod}' is missing"));
            lowest = Some(lowest.map_or(s.clone(), |l| l.min(s)));
        }
    }
    match lowest {
        Some(s) if any => Observed::State(execution_state(s)),
        _ => Observed::Gone,
    }
}

/// The state getter of the podman-kube runtime.
// [impl->swdd~podman-kube-implements-runtime-state-getter~1]
pub struct PodmanKubeStateGetter {
    cache: Arc<PsCache>,
}

impl PodmanKubeStateGetter {
    /// A getter for a new workload: the cached listing cannot know its
    /// containers yet, so it is dropped.
    // [impl->swdd~podman-kube-state-getter-reset-cache~1]
    pub async fn new(cache: Arc<PsCache>) -> Self {
        cache.reset().await;
        Self { cache }
    }
}

#[async_trait]
impl RuntimeStateGetter for PodmanKubeStateGetter {
    async fn get_state(&self, workload_id: &WorkloadId) -> Observed {
        let Ok(id) = KubeWorkloadId::parse(workload_id) else {
            return Observed::State(ExecutionState::with_info(StateKind::Failed(Failed::Unknown), "bad workload id"));
        };
        match self.cache.containers().await {
            Ok(containers) => combined_state(&id.pods, &containers),
            Err(e) => Observed::State(ExecutionState::with_info(StateKind::Failed(Failed::Unknown), e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctr(pod: &str, state: &str, code: i32) -> PsEntry {
        PsEntry {
            id: format!("{pod}-{state}"),
            names: vec![],
            state: state.into(),
            exit_code: code,
            labels: None,
            pod: pod.into(),
            is_infra: false,
        }
    }

    fn kind(o: Observed) -> StateKind {
        match o {
            Observed::State(s) => s.kind,
            Observed::Gone => StateKind::Removed,
        }
    }

    #[test]
    // [utest->swdd~podman-kube-state-getter-maps-state~2]
    fn podman_kube_container_states_map_like_the_design() {
        let one = |state: &str, code: i32| kind(combined_state(&["p".into()], &[ctr("p", state, code)]));
        assert_eq!(one("created", 0), StateKind::Pending(Pending::Starting));
        assert_eq!(one("paused", 0), StateKind::Failed(Failed::Unknown));
        assert_eq!(one("running", 0), StateKind::Running);
        assert_eq!(one("exited", 0), StateKind::Succeeded);
        assert_eq!(one("exited", 2), StateKind::Failed(Failed::ExecFailed));
        assert_eq!(one("stopping", 0), StateKind::Stopping(Stopping::Stopping));
        assert_eq!(one("weird", 0), StateKind::Failed(Failed::Unknown));
    }

    #[test]
    // [utest->swdd~podman-kube-state-getter-combines-states~2]
    // [utest->swdd~podman-kube-state-getter-uses-container-states~1]
    fn podman_kube_combines_the_lowest_priority_state_of_all_pods() {
        let pods = ["p1".to_owned(), "p2".to_owned()];
        let mut infra = ctr("p1", "exited", 9);
        infra.is_infra = true;
        let all = [ctr("p1", "running", 0), ctr("p2", "exited", 0), infra.clone(), ctr("other", "exited", 1)];
        assert_eq!(kind(combined_state(&pods, &all)), StateKind::Running, "infra and foreign pods are ignored");
        let all = [ctr("p1", "running", 0), ctr("p2", "created", 0)];
        assert_eq!(kind(combined_state(&pods, &all)), StateKind::Pending(Pending::Starting));
        let all = [ctr("p1", "running", 0), ctr("p1", "exited", 4), ctr("p2", "exited", 0)];
        assert_eq!(kind(combined_state(&pods, &all)), StateKind::Failed(Failed::ExecFailed));
        let all = [ctr("p1", "exited", 0), ctr("p2", "stopping", 0)];
        assert_eq!(kind(combined_state(&pods, &all)), StateKind::Stopping(Stopping::Stopping));
    }

    #[test]
    // [utest->swdd~podman-kube-state-getter-treats-missing-pods-as-unknown~1]
    // [utest->swdd~podman-kube-state-getter-removed-if-no-container~1]
    fn podman_kube_missing_pod_is_unknown_and_no_container_is_removed() {
        let pods = ["p1".to_owned(), "p2".to_owned()];
        let state = combined_state(&pods, &[ctr("p1", "running", 0)]);
        assert_eq!(kind(state.clone()), StateKind::Failed(Failed::Unknown));
        assert!(matches!(state, Observed::State(s) if s.additional_info.contains("p2")));
        assert_eq!(combined_state(&pods, &[ctr("other", "running", 0)]), Observed::Gone);
        assert_eq!(combined_state(&pods, &[]), Observed::Gone);
    }

    #[tokio::test]
    // [utest->swdd~podman-kube-state-getter-reset-cache~1]
    async fn podman_kube_state_getter_resets_the_cache_when_created() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        use crate::runtime_connectors::podman::cli::PodmanError;
        use crate::runtime_connectors::podman::ps_cache::ContainerLister;

        struct Count(AtomicUsize);
        #[async_trait]
        impl ContainerLister for Count {
            async fn list_all(&self) -> Result<Vec<PsEntry>, PodmanError> {
                self.0.fetch_add(1, Ordering::SeqCst);
                Ok(vec![])
            }
        }
        let lister = Arc::new(Count(AtomicUsize::new(0)));
        let cache = Arc::new(PsCache::new(lister.clone()));
        cache.containers().await.unwrap();
        let getter = PodmanKubeStateGetter::new(cache.clone()).await;
        let id = KubeWorkloadId {
            instance_name: "k.h.a".into(),
            pods: vec!["p".into()],
            manifest: String::new(),
            down_options: vec![],
            general_options: vec![],
        };
        assert_eq!(getter.get_state(&id.to_workload_id()).await, Observed::Gone);
        assert_eq!(lister.0.load(Ordering::SeqCst), 2, "a fresh listing after the getter was created");
    }
}

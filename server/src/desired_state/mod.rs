//! The desired state the server holds: validation and rendering of a new
//! state ([`DesiredState`]), applying an UpdateStateRequest ([`update`]:
//! empty mask = replace, masks = per path) and the diff between two states
//! as per-agent added and deleted workloads.

mod error;
pub mod generations;
mod server_change;
mod update;

use std::collections::BTreeMap;
use std::sync::Arc;

use ank_common::config_renderer::ConfigRenderer;
use ank_common::messages::{DeleteCondition, DeletedWorkload};
use ank_common::workload::{AddCondition, WorkloadSpec};
use ank_common::{AgentName, State, Workload, WorkloadName};

pub use error::InvalidState;
pub(crate) use server_change::{ChangeName, ServerChange};
pub use update::{apply_update, names_one_entry};

/// A validated desired state together with its rendering: `state` is what
/// users wrote and get back (templates unrendered), `rendered` is what agents
/// run and what diffs compare: templates, group defaults and pipeline order
/// applied, with effective priorities (also written into `state`). The
/// server expands the `${seq:N}` macros of `rendered` once workloads have
/// their agent. With mutating hooks, `rendered` is what the hooks made of
/// the rendering and `pre_hook` the rendering itself, which the next update
/// is compared with (`None`: the same as `rendered`, always without hooks).
/// `configured` keeps what the config templates of the workloads with
/// config aliases rendered to, so that the next state renders only the
/// workloads whose spec or config items changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredState {
    pub state: State,
    pub rendered: State,
    pub pre_hook: Option<State>,
    configured: Renderings,
}

/// What the config templates of workloads rendered to, by workload.
type Renderings = BTreeMap<WorkloadName, Arc<Workload>>;

/// The largest desired state, as encoded on the wire together with its
/// effective state (a complete-state answer carries both): three quarters
/// of what one gRPC message may carry, leaving the rest of the answer for
/// workload states and agents. A larger state could be stored but not read
/// back whole, nor handed to an agent in one ServerHello.
pub const MAX_DESIRED_STATE_BYTES: usize = ank_proto::MAX_MESSAGE_BYTES / 4 * 3;

impl DesiredState {
    /// Validates and renders `state`; the error names the problem.
    pub fn new(state: State) -> Result<Self, InvalidState> {
        Self::build(state, None)
    }

    /// Validates and renders `state`, the successor of `self`: workloads
    /// whose spec and config items are unchanged keep their rendering.
    pub fn after(&self, state: State) -> Result<Self, InvalidState> {
        Self::build(state, Some(self))
    }

    fn build(mut state: State, previous: Option<&DesiredState>) -> Result<Self, InvalidState> {
        ank_common::manifest::validate_state(&state).map_err(|e| InvalidState::Invalid(e.to_string()))?;
        let (mut rendered, configured) = render_configs(&state, previous)?;
        render_scheduling(&mut state, &mut rendered)?;
        let desired = Self { state, rendered, pre_hook: None, configured };
        let size = desired.encoded_size();
        if size > MAX_DESIRED_STATE_BYTES {
            return Err(InvalidState::TooLarge { size });
        }
        Ok(desired)
    }

    /// Bytes the state and the effective state take as the desired states
    /// of complete-state messages.
    fn encoded_size(&self) -> usize {
        use ank_common::convert::size;
        size::desired_state_len(&self.state)
            + size::effective_state_len(&self.state.api_version, &self.rendered.workloads)
    }

    /// The rendering before mutating hooks: what a change is detected against.
    pub fn base(&self) -> &State {
        self.pre_hook.as_ref().unwrap_or(&self.rendered)
    }

    /// The effective state, as Ankaios (>= 1.1) shows it: the rendered
    /// workloads the agents get, with the desired state's apiVersion and no
    /// configs, neither the state's nor each workload's aliases (they are
    /// rendered into the workloads already).
    // [feature: effectiveState, read-only]
    pub fn effective(&self) -> State {
        let workloads = self
            .rendered
            .workloads
            .iter()
            .map(|(name, wl)| {
                let mut wl = wl.clone();
                wl.configs.clear();
                (name.clone(), wl)
            })
            .collect();
        State { api_version: self.state.api_version.clone(), workloads, ..State::default() }
    }
}

/// `state` with its config templates rendered, and the renderings of the
/// workloads that have config aliases. A workload that is unchanged against
/// `previous`, as are the config items its aliases name, keeps its earlier
/// rendering: only what changed goes through the template engine.
fn render_configs(state: &State, previous: Option<&DesiredState>) -> Result<(State, Renderings), InvalidState> {
    let renderer = ConfigRenderer::new();
    let mut configured = BTreeMap::new();
    let mut workloads = BTreeMap::new();
    for (name, wl) in &state.workloads {
        if wl.configs.is_empty() {
            workloads.insert(name.clone(), wl.clone());
            continue;
        }
        let earlier = previous.and_then(|p| {
            let unchanged = p.state.workloads.get(name) == Some(wl)
                && wl.configs.values().all(|key| p.state.configs.get(key) == state.configs.get(key));
            unchanged.then(|| p.configured.get(name)).flatten()
        });
        let done = match earlier {
            Some(done) => Arc::clone(done),
            // Kept without the effective priority, which reuse takes from the input.
            None => {
                Arc::new(Workload { effective_priority: None, ..renderer.render_workload(name, wl, &state.configs)? })
            }
        };
        // The rendering leaves the effective priority as it finds it.
        workloads.insert(name.clone(), Workload { effective_priority: wl.effective_priority, ..(*done).clone() });
        configured.insert(name.clone(), done);
    }
    let rendered = State {
        api_version: state.api_version.clone(),
        workloads,
        configs: state.configs.clone(),
        groups: state.groups.clone(),
    };
    Ok((rendered, configured))
}

/// The scheduling part of rendering: group members checked, group defaults
/// and pipeline order applied (a cycle they close is rejected), effective
/// priorities written.
fn render_scheduling(state: &mut State, rendered: &mut State) -> Result<(), InvalidState> {
    ank_common::groups::validate_members(&state.groups, &state.workloads)
        .map_err(|e| InvalidState::Invalid(e.to_string()))?;
    ank_common::groups::render(&state.groups, &mut rendered.workloads);
    if let Some(cycle) = ank_common::dependency_graph::find_cycle(rendered) {
        return Err(InvalidState::Cycle(cycle));
    }
    crate::priorities::write(state, rendered);
    Ok(())
}

/// The spec an agent gets for a workload, or `None` if it is not scheduled.
pub fn spec_of(name: &WorkloadName, wl: &Workload) -> Option<WorkloadSpec> {
    if wl.agent.is_empty() {
        return None;
    }
    let agent = AgentName::new(wl.agent.as_str()).ok()?;
    Some(WorkloadSpec::new(name, &agent, wl.clone()))
}

/// Whether `instance` is exactly an instance the rendered `state` wants
/// (same workload, agent and runtime configuration).
pub fn wants_instance(state: &State, instance: &ank_common::WorkloadInstanceName) -> bool {
    state
        .workloads
        .get_key_value(instance.workload_name.as_str())
        .and_then(|(name, wl)| spec_of(name, wl))
        .is_some_and(|spec| spec.instance_name == *instance)
}

/// What changed between two desired states.
#[derive(Debug, Default, PartialEq)]
pub struct StateDiff {
    /// Specs to add, by agent.
    pub added: BTreeMap<String, Vec<WorkloadSpec>>,
    /// Instances to delete, by agent.
    pub deleted: BTreeMap<String, Vec<DeletedWorkload>>,
    /// Newly added workloads without an agent.
    pub unscheduled: Vec<WorkloadName>,
    /// Unscheduled workloads that were removed or moved to an agent.
    pub unscheduled_gone: Vec<WorkloadName>,
    /// Every added instance, unscheduled ones too (`name.id.` with an empty
    /// agent): changed workloads first, then new ones, each by name.
    added_names: Vec<String>,
    /// Every deleted instance, unscheduled ones too, by name.
    deleted_names: Vec<String>,
}

impl StateDiff {
    /// The added instances as UpdateStateSuccess lists them, as in Ankaios.
    pub fn added_instance_names(&self) -> Vec<String> {
        self.added_names.clone()
    }
    /// The deleted instances as UpdateStateSuccess lists them, as in Ankaios.
    pub fn deleted_instance_names(&self) -> Vec<String> {
        self.deleted_names.clone()
    }
}

/// The instance name of a workload, `name.id.` if it has no agent.
pub(crate) fn instance_of(name: &WorkloadName, wl: &Workload) -> ank_common::WorkloadInstanceName {
    match spec_of(name, wl) {
        Some(spec) => spec.instance_name,
        None => ank_common::WorkloadInstanceName::new(name, &AgentName::unscheduled(), &wl.runtime_config),
    }
}

/// Compares two rendered states; a workload whose rendering changed (also
/// through a config item it uses) is deleted and added again.
pub fn diff(old: &State, new: &State) -> StateDiff {
    let mut d = StateDiff::default();
    for (name, old_wl) in &old.workloads {
        if new.workloads.get(name) == Some(old_wl) {
            continue;
        }
        d.deleted_names.push(instance_of(name, old_wl).to_string());
        if let Some(new_wl) = new.workloads.get(name) {
            d.added_names.push(instance_of(name, new_wl).to_string());
        }
        match spec_of(name, old_wl) {
            Some(spec) => d.deleted.entry(spec.instance_name.agent_name.clone()).or_default().push(DeletedWorkload {
                instance_name: spec.instance_name,
                dependencies: delete_conditions(old, name),
            }),
            None => d.unscheduled_gone.push(name.clone()),
        }
    }
    for (name, new_wl) in &new.workloads {
        if old.workloads.get(name) == Some(new_wl) {
            continue;
        }
        if !old.workloads.contains_key(name) {
            d.added_names.push(instance_of(name, new_wl).to_string());
        }
        match spec_of(name, new_wl) {
            Some(spec) => d.added.entry(spec.instance_name.agent_name.clone()).or_default().push(spec),
            None => d.unscheduled.push(name.clone()),
        }
    }
    d
}

/// The delete conditions of `workload` in `state`: every workload that
/// needs it running (ADD_COND_RUNNING) must be neither pending nor running
/// before it is deleted. Other add conditions only matter at start.
pub fn delete_conditions(state: &State, workload: &WorkloadName) -> BTreeMap<String, DeleteCondition> {
    state
        .workloads
        .iter()
        .filter(|(_, wl)| wl.dependencies.get(workload) == Some(&AddCondition::Running))
        .map(|(dependent, _)| (dependent.to_string(), DeleteCondition::NotPendingNorRunning))
        .collect()
}

/// All scheduled workloads of one agent.
pub fn specs_for_agent(state: &State, agent: &str) -> Vec<WorkloadSpec> {
    state.workloads.iter().filter(|(_, wl)| wl.agent == agent).filter_map(|(name, wl)| spec_of(name, wl)).collect()
}

#[cfg(test)]
mod tests;

//! The inter-workload dependency graph of a state: finds a cycle, which
//! would leave every workload on it waiting forever, so that an update with
//! one is rejected naming it ("a -> b -> c -> a").

use std::collections::BTreeMap;

use crate::complete_state::State;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Visiting,
    Done,
}

/// The first dependency cycle of `state` (by workload name order), as the
/// list of names with the first repeated at the end.
pub fn find_cycle(state: &State) -> Option<Vec<String>> {
    let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
    for start in state.workloads.keys() {
        let mut path = Vec::new();
        if let Some(cycle) = visit(state, start.as_str(), &mut marks, &mut path) {
            return Some(cycle);
        }
    }
    None
}

fn visit<'a>(
    state: &'a State,
    name: &'a str,
    marks: &mut BTreeMap<&'a str, Mark>,
    path: &mut Vec<&'a str>,
) -> Option<Vec<String>> {
    match marks.get(name) {
        Some(Mark::Done) => return None,
        Some(Mark::Visiting) => {
            let from = path.iter().position(|n| *n == name).unwrap_or(0);
            let mut cycle: Vec<String> = path[from..].iter().map(|n| n.to_string()).collect();
            cycle.push(name.to_owned());
            return Some(cycle);
        }
        None => {}
    }
    let (key, wl) = state.workloads.get_key_value(name)?;
    marks.insert(key.as_str(), Mark::Visiting);
    path.push(key.as_str());
    for dependency in wl.dependencies.keys() {
        if let Some(cycle) = visit(state, dependency.as_str(), marks, path) {
            return Some(cycle);
        }
    }
    path.pop();
    marks.insert(key.as_str(), Mark::Done);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(deps: &[(&str, &[&str])]) -> State {
        let mut yaml = String::from("apiVersion: v1\nworkloads:\n");
        for (name, on) in deps {
            yaml.push_str(&format!("  {name}:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n"));
            if !on.is_empty() {
                yaml.push_str("    dependencies:\n");
                for d in *on {
                    yaml.push_str(&format!("      {d}: ADD_COND_RUNNING\n"));
                }
            }
        }
        serde_saphyr::from_str(&yaml).unwrap()
    }

    #[test]
    fn dependency_cycle_is_found_and_named() {
        let s = state(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("d", &[])]);
        assert_eq!(find_cycle(&s), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
        let self_loop = state(&[("x", &["x"])]);
        assert_eq!(find_cycle(&self_loop), Some(vec!["x".into(), "x".into()]));
    }

    #[test]
    fn dependency_graph_without_cycle_passes_also_with_missing_and_shared_dependencies() {
        let s = state(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[]), ("d", &["elsewhere"])]);
        assert_eq!(find_cycle(&s), None);
    }
}

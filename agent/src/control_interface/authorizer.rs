//! The Authorizer: decides from a workload's `controlInterfaceAccess` which
//! of its requests go to the server. Default deny. State requests need an
//! allow rule for every mask entry (a Read rule for CompleteStateRequest, a
//! Write rule for UpdateStateRequest; ReadWrite counts for both) and no deny
//! rule that covers it; log requests need an allow LogRule for every
//! workload and no deny LogRule; cancel requests are always allowed.

use ank_common::messages::RequestContent;
use ank_common::workload::{AccessRule, ControlInterfaceAccess, ReadWrite};

/// Which side of a state rule a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

impl Access {
    fn granted_by(self, op: ReadWrite) -> bool {
        matches!(
            (self, op),
            (_, ReadWrite::ReadWrite) | (Access::Read, ReadWrite::Read) | (Access::Write, ReadWrite::Write)
        )
    }

    fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// The rules of one workload, ready to check requests.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    access: ControlInterfaceAccess,
}

impl Authorizer {
    pub fn new(access: ControlInterfaceAccess) -> Self {
        Self { access }
    }

    /// `Ok` if the request may go to the server, else why not.
    pub fn authorize(&self, request: &RequestContent) -> Result<(), String> {
        match request {
            RequestContent::CompleteState { field_mask, .. } | RequestContent::RenderedState { field_mask } => {
                self.state(Access::Read, field_mask)
            }
            RequestContent::UpdateState { update_mask, .. } => self.state(Access::Write, update_mask),
            RequestContent::Logs(logs) => logs.workload_names.iter().try_for_each(|n| self.logs_of(&n.workload_name)),
            RequestContent::LogsCancel | RequestContent::EventsCancel => Ok(()),
            // A rerun re-triggers the whole desired state; an interrupt
            // changes a job.
            RequestContent::JobRerun { .. } => self.state(Access::Write, &["desiredState".to_owned()]),
            RequestContent::JobInterrupt { job_id } => self.state(Access::Write, &[format!("jobs.{job_id}")]),
        }
    }

    fn state_rules(&self, deny: bool, access: Access) -> impl Iterator<Item = &String> {
        let rules = if deny { &self.access.deny_rules } else { &self.access.allow_rules };
        rules.iter().flat_map(move |rule| match rule {
            AccessRule::StateRule { operation, filter_masks } if access.granted_by(*operation) => {
                filter_masks.iter().collect::<Vec<_>>()
            }
            _ => Vec::new(),
        })
    }

    fn state(&self, access: Access, masks: &[String]) -> Result<(), String> {
        if masks.is_empty() {
            // The whole state: only a literal `*` rule grants it.
            let allowed = self.state_rules(false, access).any(|m| m == "*");
            let denied = self.state_rules(true, access).any(|m| m == "*");
            return if allowed && !denied {
                Ok(())
            } else {
                Err(format!("access denied: {} of the whole state is not allowed", access.name()))
            };
        }
        for mask in masks {
            let path: Vec<&str> = mask.split('.').collect();
            let allowed = self.state_rules(false, access).any(|rule| allow_matches(rule, &path));
            let denied = self.state_rules(true, access).any(|rule| deny_matches(rule, &path));
            if !allowed || denied {
                return Err(format!("access denied: {} of '{mask}' is not allowed", access.name()));
            }
        }
        Ok(())
    }

    fn log_patterns(&self, deny: bool) -> impl Iterator<Item = &String> {
        let rules = if deny { &self.access.deny_rules } else { &self.access.allow_rules };
        rules.iter().flat_map(|rule| match rule {
            AccessRule::LogRule { workload_names } => workload_names.iter().collect::<Vec<_>>(),
            AccessRule::StateRule { .. } => Vec::new(),
        })
    }

    fn logs_of(&self, workload: &str) -> Result<(), String> {
        let allowed = self.log_patterns(false).any(|p| name_matches(p, workload));
        let denied = self.log_patterns(true).any(|p| name_matches(p, workload));
        if allowed && !denied {
            Ok(())
        } else {
            Err(format!("access denied: the logs of workload '{workload}' are not allowed"))
        }
    }
}

fn segments(rule: &str) -> Vec<&str> {
    rule.split('.').filter(|s| !s.is_empty()).collect()
}

/// An allow rule covers a request path it equals or is a prefix of; a rule
/// `*` segment matches any one request segment (a request `*` only a rule `*`).
fn allow_matches(rule: &str, path: &[&str]) -> bool {
    let rule = segments(rule);
    !rule.is_empty() && rule.len() <= path.len() && rule.iter().zip(path).all(|(r, p)| *r == "*" || r == p)
}

/// A deny rule blocks a request path that equals it or is a prefix of it
/// (asking for a parent includes the denied part); `*` on either side
/// matches any segment.
fn deny_matches(rule: &str, path: &[&str]) -> bool {
    let rule = segments(rule);
    !rule.is_empty() && path.len() <= rule.len() && rule.iter().zip(path).all(|(r, p)| *r == "*" || *p == "*" || r == p)
}

/// A log rule entry: the name itself, `*`, or `prefix*suffix`.
fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len() && name.starts_with(prefix) && name.ends_with(suffix)
        }
    }
}

#[cfg(test)]
mod tests {
    use ank_common::messages::LogsRequest;
    use ank_common::{AgentName, WorkloadInstanceName, WorkloadName};

    use super::*;

    fn rule(op: ReadWrite, masks: &[&str]) -> AccessRule {
        AccessRule::StateRule { operation: op, filter_masks: masks.iter().map(|m| (*m).to_owned()).collect() }
    }

    fn log_rule(names: &[&str]) -> AccessRule {
        AccessRule::LogRule { workload_names: names.iter().map(|m| (*m).to_owned()).collect() }
    }

    fn read(masks: &[&str]) -> RequestContent {
        RequestContent::CompleteState {
            field_mask: masks.iter().map(|m| (*m).to_owned()).collect(),
            subscribe_for_events: false,
        }
    }

    fn write(masks: &[&str]) -> RequestContent {
        RequestContent::UpdateState {
            new_state: Box::new(serde_json::json!({})),
            update_mask: masks.iter().map(|m| (*m).to_owned()).collect(),
        }
    }

    fn logs(names: &[&str]) -> RequestContent {
        let agent = AgentName::new("A").unwrap();
        RequestContent::Logs(LogsRequest {
            workload_names: names
                .iter()
                .map(|n| WorkloadInstanceName::new(&WorkloadName::new(*n).unwrap(), &agent, "x"))
                .collect(),
            follow: false,
            tail: -1,
            since: None,
            until: None,
        })
    }

    fn authorizer(allow: Vec<AccessRule>, deny: Vec<AccessRule>) -> Authorizer {
        Authorizer::new(ControlInterfaceAccess { allow_rules: allow, deny_rules: deny })
    }

    #[test]
    fn default_is_deny_and_cancels_are_always_allowed() {
        let a = Authorizer::default();
        assert!(a.authorize(&read(&["desiredState"])).is_err());
        assert!(a.authorize(&write(&["desiredState.workloads.x"])).is_err());
        assert!(a.authorize(&logs(&["x"])).is_err());
        assert_eq!(a.authorize(&RequestContent::LogsCancel), Ok(()));
        assert_eq!(a.authorize(&RequestContent::EventsCancel), Ok(()));
    }

    #[test]
    fn allow_rules_cover_their_paths_and_below_for_their_operation() {
        let a = authorizer(
            vec![
                rule(ReadWrite::Read, &["desiredState.workloads"]),
                rule(ReadWrite::ReadWrite, &["workloadStates.*.web"]),
            ],
            vec![],
        );
        assert_eq!(a.authorize(&read(&["desiredState.workloads.nginx.agent"])), Ok(()));
        assert_eq!(a.authorize(&read(&["desiredState.workloads", "workloadStates.A.web"])), Ok(()));
        assert_eq!(
            a.authorize(&read(&["desiredState"])),
            Err("access denied: read of 'desiredState' is not allowed".into()),
            "a parent of the allowed path"
        );
        assert!(a.authorize(&read(&["desiredState.workloads.a", "configs"])).is_err(), "every entry must be allowed");
        assert!(a.authorize(&write(&["desiredState.workloads.a"])).is_err(), "Read does not grant write");
        assert_eq!(a.authorize(&write(&["workloadStates.B.web.id"])), Ok(()));
        assert!(a.authorize(&read(&["workloadStates.*.db"])).is_err());
        assert!(a.authorize(&read(&["workloadStates.*.web"])).is_ok());
        assert!(a.authorize(&read(&[])).is_err(), "the whole state needs a literal *");
        let nothing = authorizer(vec![rule(ReadWrite::Nothing, &["*"])], vec![]);
        assert!(nothing.authorize(&read(&["desiredState"])).is_err());
    }

    #[test]
    fn deny_rules_block_their_paths_and_parents() {
        let a = authorizer(
            vec![rule(ReadWrite::ReadWrite, &["*"])],
            vec![rule(ReadWrite::Write, &["desiredState.workloads.secret"])],
        );
        assert_eq!(a.authorize(&read(&[])), Ok(()));
        assert_eq!(a.authorize(&read(&["desiredState.workloads.secret"])), Ok(()), "deny is for write only");
        assert!(a.authorize(&write(&["desiredState.workloads.secret"])).is_err());
        assert!(a.authorize(&write(&["desiredState"])).is_err(), "a parent includes the denied part");
        assert!(a.authorize(&write(&["desiredState.workloads.*"])).is_err(), "a wildcard includes it too");
        assert_eq!(a.authorize(&write(&["desiredState.workloads.public"])), Ok(()));
        assert_eq!(a.authorize(&write(&["desiredState.workloads.secret2"])), Ok(()));
        let whole = authorizer(vec![rule(ReadWrite::Read, &["*"])], vec![rule(ReadWrite::Read, &["*"])]);
        assert!(whole.authorize(&read(&[])).is_err());
    }

    #[test]
    fn log_rules_match_names_with_one_wildcard() {
        let a = authorizer(vec![log_rule(&["db", "web_*", "*_job"])], vec![log_rule(&["web_secret"])]);
        assert_eq!(a.authorize(&logs(&["db", "web_1", "nightly_job"])), Ok(()));
        assert_eq!(
            a.authorize(&logs(&["db", "web_secret"])),
            Err("access denied: the logs of workload 'web_secret' are not allowed".into())
        );
        assert!(a.authorize(&logs(&["cache"])).is_err());
        let all = authorizer(vec![log_rule(&["*"])], vec![]);
        assert_eq!(all.authorize(&logs(&["anything"])), Ok(()));
        assert!(!name_matches("ab*ba", "aba"), "prefix and suffix may not overlap");
    }

    #[test]
    fn reference_edge_cases() {
        let a = authorizer(
            vec![rule(ReadWrite::ReadWrite, &["desiredState"]), rule(ReadWrite::Read, &[""])],
            vec![rule(ReadWrite::ReadWrite, &["desiredState.workloads.secret"])],
        );
        // (request, allowed?) in the reference's matching rules.
        let cases: &[(RequestContent, bool)] = &[
            // A deny rule matches the request path or its parents, not the
            // paths below it (as Eclipse Ankaios does).
            (write(&["desiredState.workloads.secret.agent"]), true),
            (read(&["desiredState.workloads.secret"]), false),
            (read(&["desiredState.workloads"]), false),
            // An empty rule never matches anything.
            (read(&["workloadStates"]), false),
            // A subscription is authorized like a read.
            (
                RequestContent::CompleteState {
                    field_mask: vec!["desiredState.configs".into()],
                    subscribe_for_events: true,
                },
                true,
            ),
            (
                RequestContent::CompleteState {
                    field_mask: vec!["desiredState.workloads.secret".into()],
                    subscribe_for_events: true,
                },
                false,
            ),
            // A state rule does not grant logs.
            (logs(&["secret"]), false),
            // The rendered state is read like the desired state.
            (RequestContent::RenderedState { field_mask: vec!["desiredState.configs".into()] }, true),
            (RequestContent::RenderedState { field_mask: vec!["desiredState.workloads.secret".into()] }, false),
        ];
        for (request, allowed) in cases {
            assert_eq!(a.authorize(request).is_ok(), *allowed, "{request:?}");
        }
    }

    #[test]
    fn job_requests_need_write_access_to_the_desired_state_or_the_job() {
        let rerun = RequestContent::JobRerun { failed_only: false };
        let interrupt = RequestContent::JobInterrupt { job_id: 7 };
        let writer = authorizer(vec![rule(ReadWrite::Write, &["desiredState"])], vec![]);
        assert!(writer.authorize(&rerun).is_ok());
        assert!(writer.authorize(&interrupt).is_err());
        let one_workload = authorizer(vec![rule(ReadWrite::ReadWrite, &["desiredState.workloads.a"])], vec![]);
        assert!(one_workload.authorize(&rerun).is_err(), "a rerun touches every workload");
        let jobs = authorizer(vec![rule(ReadWrite::Write, &["jobs"])], vec![]);
        assert!(jobs.authorize(&interrupt).is_ok());
        assert!(authorizer(vec![rule(ReadWrite::Read, &["*"])], vec![]).authorize(&interrupt).is_err());
    }
}

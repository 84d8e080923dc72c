//! The Authorizer: decides from a workload's `controlInterfaceAccess` which
//! of its requests go to the server, with Eclipse Ankaios' matching rules.
//! Default deny. A state request needs, for every mask entry (an empty mask
//! list is one empty entry: the whole state), an allow rule of its side (a
//! Read rule for CompleteStateRequest, a Write rule for UpdateStateRequest;
//! ReadWrite counts for both) that matches, and no deny rule of that side
//! that matches. A log request needs an allow LogRule for every workload and
//! no deny LogRule; cancel requests are always allowed.
//!
//! Masks and rules are read with the server's definition of a mask path
//! ([`ank_common::mask_path`]), so what is authorized is what the server
//! reads or writes: a mask with an empty segment is refused; a rule's `*`
//! segment matches any one segment, a rule without segments never matches.
//! - An allow rule matches the paths it equals or is a prefix of; the rule
//!   `*` also matches the empty path (the whole state).
//! - A deny rule matches over the shorter of both paths: the paths it equals,
//!   the paths below it (they are part of the denied one) and its parents
//!   (they include it); so every non-empty deny rule matches the whole state.
//!   A `*` segment of the request also matches (the server expands it to every
//!   entry, the denied one included).
//! - A read is checked against the deny rules for everything the server
//!   returns for it ([`field_mask::read_masks`]: an execution state's
//!   `state` comes with its `subState` and back).

use ank_common::field_mask;
use ank_common::mask_path::{MaskPath, MaskPathError};
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

/// Why a request of a workload does not go to the server (for the log; the
/// workload is only told "Access denied").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// A mask entry that is no mask path.
    #[error(transparent)]
    Mask(#[from] MaskPathError),
    #[error("{access} of {what} is not allowed by any rule")]
    StateNotAllowed { access: &'static str, what: String },
    #[error("{access} of {what} is allowed by '{allowed_by}' but denied by '{denied_by}'")]
    StateDenied { access: &'static str, what: String, allowed_by: String, denied_by: String },
    #[error("the logs of workload '{0}' are not allowed by any rule")]
    LogsNotAllowed(String),
    #[error("the logs of workload '{workload}' are denied by '{denied_by}'")]
    LogsDenied { workload: String, denied_by: String },
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

    /// `Ok` if the request may go to the server, else why not (for the log;
    /// the workload is only told "Access denied", as by Ankaios).
    pub fn authorize(&self, request: &RequestContent) -> Result<(), Denied> {
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

    fn state(&self, access: Access, masks: &[String]) -> Result<(), Denied> {
        let whole_state = [String::new()];
        let masks = if masks.is_empty() { &whole_state[..] } else { masks };
        for mask in masks {
            let path = MaskPath::parse(mask)?;
            let what = if path.is_whole() { "the whole state".to_owned() } else { format!("'{mask}'") };
            let Some(allowed_by) = self.state_rules(false, access).find(|rule| allow_matches(rule, &path)) else {
                return Err(Denied::StateNotAllowed { access: access.name(), what });
            };
            // A write touches the mask's path; a read returns what the
            // server reads for it.
            let touched = match access {
                Access::Read => field_mask::read_masks(&path),
                Access::Write => vec![path],
            };
            if let Some(denied_by) =
                self.state_rules(true, access).find(|rule| touched.iter().any(|p| deny_matches(rule, p)))
            {
                return Err(Denied::StateDenied {
                    access: access.name(),
                    what,
                    allowed_by: allowed_by.clone(),
                    denied_by: denied_by.clone(),
                });
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

    fn logs_of(&self, workload: &str) -> Result<(), Denied> {
        if !self.log_patterns(false).any(|p| name_matches(p, workload)) {
            return Err(Denied::LogsNotAllowed(workload.to_owned()));
        }
        if let Some(denied_by) = self.log_patterns(true).find(|p| name_matches(p, workload)) {
            return Err(Denied::LogsDenied { workload: workload.to_owned(), denied_by: denied_by.clone() });
        }
        Ok(())
    }
}

/// Whether an allow rule matches; a rule that is no valid mask path (the
/// server refuses such rules) never does.
fn allow_matches(rule: &str, path: &MaskPath) -> bool {
    MaskPath::parse(rule).is_ok_and(|rule| rule.covers(path))
}

/// Whether a deny rule matches; a rule that is no valid mask path (the
/// server refuses such rules) matches everything: fail closed.
fn deny_matches(rule: &str, path: &MaskPath) -> bool {
    MaskPath::parse(rule).map_or(true, |rule| rule.overlaps(path))
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
            new_state: Box::default(),
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

    /// The cases of Ankaios' `authorization.robot`: the controller's rules,
    /// then each request with whether it succeeds.
    #[test]
    fn reference_authorization_suite() {
        let update_simple = || write(&["desiredState.workloads.simple"]);
        let update_tags = || write(&["desiredState.workloads.simple_existing.tags"]);
        let get_all = || read(&[]);
        let get_existing = || read(&["desiredState.workloads.simple_existing"]);
        let get_tags = || read(&["desiredState.workloads.simple_existing.tags"]);
        let get_controller = || read(&["desiredState.workloads.controller"]);
        type Case = (RequestContent, bool);
        let suite: Vec<(&str, Authorizer, Vec<Case>)> = vec![
            (
                "no rules",
                authorizer(vec![], vec![]),
                vec![
                    (update_simple(), false),
                    (update_tags(), false),
                    (get_all(), false),
                    (get_existing(), false),
                    (get_tags(), false),
                    (get_controller(), false),
                ],
            ),
            (
                "write on *",
                authorizer(vec![rule(ReadWrite::Write, &["*"])], vec![]),
                vec![
                    (update_simple(), true),
                    (update_tags(), true),
                    (get_all(), false),
                    (get_existing(), false),
                    (get_tags(), false),
                ],
            ),
            (
                "read on *",
                authorizer(vec![rule(ReadWrite::Read, &["*"])], vec![]),
                vec![
                    (update_simple(), false),
                    (update_tags(), false),
                    (get_all(), true),
                    (get_existing(), true),
                    (get_tags(), true),
                    (logs(&["simple_existing"]), false),
                ],
            ),
            (
                "read and write on *",
                authorizer(vec![rule(ReadWrite::ReadWrite, &["*"])], vec![]),
                vec![
                    (update_simple(), true),
                    (update_tags(), true),
                    (get_all(), true),
                    (get_existing(), true),
                    (get_tags(), true),
                ],
            ),
            (
                "write on desiredState.workloads.*.tags",
                authorizer(vec![rule(ReadWrite::Write, &["desiredState.workloads.*.tags"])], vec![]),
                vec![
                    (update_tags(), true),
                    (update_simple(), false),
                    (get_all(), false),
                    (get_existing(), false),
                    (get_tags(), false),
                ],
            ),
            (
                "read on desiredState.workloads.*.tags",
                authorizer(vec![rule(ReadWrite::Read, &["desiredState.workloads.*.tags"])], vec![]),
                vec![
                    (get_tags(), true),
                    (update_simple(), false),
                    (update_tags(), false),
                    (get_all(), false),
                    (get_existing(), false),
                ],
            ),
            (
                "read and write on desiredState.workloads, no write on simple_existing",
                authorizer(
                    vec![rule(ReadWrite::ReadWrite, &["desiredState.workloads"])],
                    vec![rule(ReadWrite::Write, &["desiredState.workloads.simple_existing"])],
                ),
                vec![
                    (update_simple(), true),
                    (get_existing(), true),
                    (get_tags(), true),
                    // The security bug: a path below a denied one.
                    (update_tags(), false),
                    (get_all(), false),
                ],
            ),
            (
                "logs of simple_existing",
                authorizer(vec![log_rule(&["simple_existing"])], vec![]),
                vec![(logs(&["simple_existing"]), true), (logs(&["simple"]), false)],
            ),
        ];
        for (name, a, cases) in suite {
            for (request, allowed) in cases {
                assert_eq!(a.authorize(&request).is_ok(), allowed, "{name}: {request:?}");
            }
        }
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
            a.authorize(&read(&["desiredState"])).map_err(|e| e.to_string()),
            Err("read of 'desiredState' is not allowed by any rule".into()),
            "a parent of the allowed path"
        );
        assert!(a.authorize(&read(&["desiredState.workloads.a", "configs"])).is_err(), "every entry must be allowed");
        assert!(a.authorize(&write(&["desiredState.workloads.a"])).is_err(), "Read does not grant write");
        assert_eq!(a.authorize(&write(&["workloadStates.B.web.id"])), Ok(()));
        assert!(a.authorize(&read(&["workloadStates.*.db"])).is_err());
        assert!(a.authorize(&read(&["workloadStates.*.web"])).is_ok(), "a rule * matches a request *");
        assert!(
            authorizer(vec![rule(ReadWrite::Read, &["desiredState.workloads.a"])], vec![])
                .authorize(&read(&["desiredState.workloads.*"]))
                .is_err(),
            "a request * is not matched by a named rule segment"
        );
        assert_eq!(
            a.authorize(&read(&[])).map_err(|e| e.to_string()),
            Err("read of the whole state is not allowed by any rule".into())
        );
        let nothing = authorizer(vec![rule(ReadWrite::Nothing, &["*"])], vec![]);
        assert!(nothing.authorize(&read(&["desiredState"])).is_err());
        let empty = authorizer(vec![rule(ReadWrite::Read, &[""])], vec![]);
        assert!(empty.authorize(&read(&[])).is_err(), "a rule without segments never matches");
        assert!(empty.authorize(&read(&["desiredState"])).is_err());
    }

    #[test]
    fn a_leading_wildcard_rule_does_not_grant_the_parents_of_what_it_names() {
        // Only the rule `*` matches paths shorter than itself (the whole
        // state); Ankaios lets any rule starting with `*` do so.
        let tags = authorizer(vec![rule(ReadWrite::Read, &["*.workloads.*.tags"])], vec![]);
        assert_eq!(tags.authorize(&read(&["desiredState.workloads.a.tags"])), Ok(()));
        assert!(tags.authorize(&read(&["desiredState.workloads"])).is_err());
        assert!(tags.authorize(&read(&[])).is_err());
        let all = authorizer(vec![rule(ReadWrite::Read, &["*"])], vec![]);
        assert_eq!(all.authorize(&read(&["", "desiredState.workloads.a.tags"])), Ok(()));
    }

    #[test]
    fn deny_rules_block_their_paths_their_children_and_their_parents() {
        let a = authorizer(
            vec![rule(ReadWrite::ReadWrite, &["*"])],
            vec![rule(ReadWrite::Write, &["desiredState.workloads.secret"])],
        );
        assert_eq!(a.authorize(&read(&[])), Ok(()));
        assert_eq!(a.authorize(&read(&["desiredState.workloads.secret"])), Ok(()), "deny is for write only");
        assert_eq!(
            a.authorize(&write(&["desiredState.workloads.secret"])).map_err(|e| e.to_string()),
            Err("write of 'desiredState.workloads.secret' is allowed by '*' but denied by 'desiredState.workloads.secret'"
                .into())
        );
        assert!(a.authorize(&write(&["desiredState.workloads.secret.agent"])).is_err(), "a child is denied");
        assert!(a.authorize(&write(&["desiredState"])).is_err(), "a parent includes the denied part");
        assert!(a.authorize(&write(&[])).is_err(), "so does the whole state");
        assert!(a.authorize(&write(&["desiredState.workloads.*"])).is_err(), "a wildcard includes it too");
        assert_eq!(a.authorize(&write(&["desiredState.workloads.public"])), Ok(()));
        assert_eq!(a.authorize(&write(&["desiredState.workloads.secret2"])), Ok(()));
        assert_eq!(a.authorize(&write(&["desiredState.configs"])), Ok(()));
        let wild = authorizer(
            vec![rule(ReadWrite::Read, &["*"])],
            vec![rule(ReadWrite::Read, &["desiredState.workloads.*.agent"])],
        );
        assert!(wild.authorize(&read(&["desiredState.workloads.a.agent"])).is_err());
        assert!(wild.authorize(&read(&["desiredState.workloads.a"])).is_err());
        assert_eq!(wild.authorize(&read(&["desiredState.workloads.a.tags"])), Ok(()));
        let whole = authorizer(vec![rule(ReadWrite::Read, &["*"])], vec![rule(ReadWrite::Read, &["*"])]);
        assert!(whole.authorize(&read(&[])).is_err());
        let empty = authorizer(vec![rule(ReadWrite::Read, &["*"])], vec![rule(ReadWrite::Read, &[""])]);
        assert_eq!(empty.authorize(&read(&[])), Ok(()), "a deny rule without segments never matches");
    }

    #[test]
    fn log_rules_match_names_with_one_wildcard() {
        let a = authorizer(vec![log_rule(&["db", "web_*", "*_job"])], vec![log_rule(&["web_secret"])]);
        assert_eq!(a.authorize(&logs(&["db", "web_1", "nightly_job"])), Ok(()));
        assert_eq!(
            a.authorize(&logs(&["db", "web_secret"])).map_err(|e| e.to_string()),
            Err("the logs of workload 'web_secret' are denied by 'web_secret'".into())
        );
        assert!(a.authorize(&logs(&["cache"])).is_err());
        let all = authorizer(vec![log_rule(&["*"])], vec![]);
        assert_eq!(all.authorize(&logs(&["anything"])), Ok(()));
        assert!(!name_matches("ab*ba", "aba"), "prefix and suffix may not overlap");
        let later = authorizer(vec![log_rule(&["web_*", "db"])], vec![]);
        assert_eq!(later.authorize(&logs(&["db"])), Ok(()), "every pattern of a rule is tried");
    }

    #[test]
    fn reference_edge_cases() {
        let a = authorizer(
            vec![rule(ReadWrite::ReadWrite, &["desiredState"]), rule(ReadWrite::Read, &[""])],
            vec![rule(ReadWrite::ReadWrite, &["desiredState.workloads.secret"])],
        );
        // (request, allowed?) in the reference's matching rules.
        let cases: &[(RequestContent, bool)] = &[
            (write(&["desiredState.workloads.secret.agent"]), false),
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

    #[test]
    fn masks_with_empty_segments_are_refused() {
        let deny_secret = authorizer(
            vec![rule(ReadWrite::ReadWrite, &["*"])],
            vec![rule(ReadWrite::Write, &["desiredState.workloads.secret"])],
        );
        // Before: the empty last segment matched the deny's `secret` not,
        // and the server dropped it and replaced every workload.
        assert_eq!(
            deny_secret.authorize(&write(&["desiredState.workloads."])).map_err(|e| e.to_string()),
            Err("field mask 'desiredState.workloads.' has an empty segment: segments are separated by single dots and none may be empty".into())
        );
        let tags = authorizer(vec![rule(ReadWrite::Write, &["desiredState.workloads.*.tags"])], vec![]);
        assert_eq!(tags.authorize(&write(&["desiredState.workloads.web.tags"])), Ok(()));
        // Before: `*` matched the empty segment and the server created a workload.
        assert!(
            tags.authorize(&write(&["desiredState.workloads..tags"]))
                .unwrap_err()
                .to_string()
                .contains("empty segment"),
            "an empty segment is no workload name"
        );
        for bad in [".desiredState", "desiredState..workloads", "."] {
            assert!(deny_secret.authorize(&read(&[bad])).is_err(), "{bad}");
        }
        assert!(deny_secret.authorize(&read(&["desiredState.configs", "a."])).is_err(), "every mask is checked");
    }

    #[test]
    fn a_read_is_denied_for_what_the_server_returns_with_it() {
        // The server returns an execution state's `state` with its
        // `subState` (one field on the wire) and back.
        let a = authorizer(
            vec![rule(ReadWrite::Read, &["workloadStates"])],
            vec![rule(ReadWrite::Read, &["workloadStates.*.secret.*.state"])],
        );
        assert!(a.authorize(&read(&["workloadStates.A.secret.id.subState"])).is_err(), "beside the deny");
        assert!(a.authorize(&read(&["workloadStates.A.secret.id.events"])).is_err(), "events come with the state");
        assert_eq!(a.authorize(&read(&["workloadStates.A.secret.id.additionalInfo"])), Ok(()));
        assert_eq!(a.authorize(&read(&["workloadStates.A.web.id.subState"])), Ok(()));
        let info = authorizer(
            vec![rule(ReadWrite::Read, &["workloadStates"])],
            vec![rule(ReadWrite::Read, &["workloadStates.*.*.*.additionalInfo"])],
        );
        assert_eq!(info.authorize(&read(&["workloadStates.A.w.id.state"])), Ok(()), "the server returns no info");
        assert_eq!(info.authorize(&read(&["workloadStates.A.w.id.state.deeper"])), Ok(()));
        assert!(info.authorize(&read(&["workloadStates.A.w.id"])).is_err());
        // A write touches only its path.
        let w = authorizer(
            vec![rule(ReadWrite::Write, &["*"])],
            vec![rule(ReadWrite::Write, &["workloadStates.*.*.*.state"])],
        );
        assert_eq!(w.authorize(&write(&["workloadStates.A.w.id.subState"])), Ok(()));
    }

    #[test]
    fn a_deny_rule_that_is_no_mask_path_denies_everything() {
        let a = authorizer(vec![rule(ReadWrite::Read, &["*"])], vec![rule(ReadWrite::Read, &["a..b"])]);
        assert!(a.authorize(&read(&["desiredState"])).is_err());
        let allow = authorizer(vec![rule(ReadWrite::Read, &["desiredState."])], vec![]);
        assert!(allow.authorize(&read(&["desiredState"])).is_err());
    }
}

//! Shape checks of a workload's control-interface access rules, done when
//! a manifest or update is validated: state-rule masks are non-empty
//! dotted paths of `*` or `[A-Za-z0-9_-]+` segments; log-rule workload
//! names are names with at most one `*`, at most 64 characters.

use crate::workload::{AccessRule, ControlInterfaceAccess};

/// Longest workload-name pattern of a log rule.
const MAX_LOG_PATTERN: usize = 64;

/// An access rule of the wrong shape: which list, which rule, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("controlInterfaceAccess.{list}[{index}]: {problem}")]
pub struct AccessRuleError {
    /// `allowRules` or `denyRules`.
    pub list: &'static str,
    pub index: usize,
    pub problem: RuleProblem,
}

/// What is wrong with one access rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    #[error("a StateRule needs at least one filter mask")]
    NoFilterMask,
    #[error("a LogRule needs at least one workload name")]
    NoWorkloadName,
    #[error("filter mask '{0}' is invalid: segments must be '*' or [A-Za-z0-9_-]+")]
    Mask(String),
    #[error(
        "workload name pattern '{0}' is invalid: [A-Za-z0-9_-] with at most one '*', at most {MAX_LOG_PATTERN} characters"
    )]
    LogPattern(String),
}

/// Checks every allow and deny rule; the error names the rule and value.
pub fn validate(access: &ControlInterfaceAccess) -> Result<(), AccessRuleError> {
    for (list, rules) in [("allowRules", &access.allow_rules), ("denyRules", &access.deny_rules)] {
        for (index, rule) in rules.iter().enumerate() {
            check_rule(rule).map_err(|problem| AccessRuleError { list, index, problem })?;
        }
    }
    Ok(())
}

fn check_rule(rule: &AccessRule) -> Result<(), RuleProblem> {
    match rule {
        AccessRule::StateRule { filter_masks, .. } => {
            if filter_masks.is_empty() {
                return Err(RuleProblem::NoFilterMask);
            }
            filter_masks.iter().try_for_each(|m| check_mask(m))
        }
        AccessRule::LogRule { workload_names } => {
            if workload_names.is_empty() {
                return Err(RuleProblem::NoWorkloadName);
            }
            workload_names.iter().try_for_each(|n| check_log_pattern(n))
        }
    }
}

fn check_mask(mask: &str) -> Result<(), RuleProblem> {
    let valid_segment = |s: &str| s == "*" || (!s.is_empty() && s.chars().all(is_name_char));
    if mask.is_empty() || !mask.split('.').all(valid_segment) {
        return Err(RuleProblem::Mask(mask.to_owned()));
    }
    Ok(())
}

fn check_log_pattern(pattern: &str) -> Result<(), RuleProblem> {
    let stars = pattern.matches('*').count();
    if pattern.is_empty()
        || pattern.len() > MAX_LOG_PATTERN
        || stars > 1
        || !pattern.chars().all(|c| c == '*' || is_name_char(c))
    {
        return Err(RuleProblem::LogPattern(pattern.to_owned()));
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ReadWrite;

    fn state_rule(masks: &[&str]) -> AccessRule {
        AccessRule::StateRule {
            operation: ReadWrite::Read,
            filter_masks: masks.iter().map(|m| (*m).to_owned()).collect(),
        }
    }

    fn log_rule(names: &[&str]) -> AccessRule {
        AccessRule::LogRule { workload_names: names.iter().map(|m| (*m).to_owned()).collect() }
    }

    #[test]
    fn valid_rules_pass() {
        let access = ControlInterfaceAccess {
            allow_rules: vec![state_rule(&["desiredState.workloads.*", "*"]), log_rule(&["web_*", "db", "*"])],
            deny_rules: vec![state_rule(&["desiredState.workloads.secret"])],
        };
        assert_eq!(validate(&access), Ok(()));
    }

    #[test]
    fn bad_masks_and_patterns_are_named() {
        let bad = |rule: AccessRule| {
            validate(&ControlInterfaceAccess { allow_rules: vec![], deny_rules: vec![rule] }).unwrap_err().to_string()
        };
        assert_eq!(
            bad(state_rule(&["desiredState..workloads"])),
            "controlInterfaceAccess.denyRules[0]: filter mask 'desiredState..workloads' is invalid: segments must be '*' or [A-Za-z0-9_-]+"
        );
        assert!(bad(state_rule(&[""])).contains("filter mask ''"));
        assert!(bad(state_rule(&[])).contains("at least one filter mask"));
        assert!(bad(log_rule(&["a*b*"])).contains("'a*b*'"));
        assert!(bad(log_rule(&[&"x".repeat(65)])).contains("at most 64"));
        assert!(bad(log_rule(&["a.b"])).contains("'a.b'"));
        assert!(bad(log_rule(&[])).contains("at least one workload name"));
    }
}

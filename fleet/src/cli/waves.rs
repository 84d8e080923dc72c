//! A rollout's plan: `--waves 5%,25%,100%` splits the selected vehicles
//! (by name) into waves that reach those shares cumulatively, each wave at
//! least one vehicle; `--max-failures 2%` (or a count) is how many may
//! fail in all before the rollout halts.

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("invalid --waves '{0}': expected increasing percentages ending at 100%, e.g. 5%,25%,100%")]
    Waves(String),
    #[error("invalid --max-failures '{0}': expected a count (3) or a percentage (2%)")]
    MaxFailures(String),
}

/// The cumulative percentages of `--waves`.
pub fn parse_waves(text: &str) -> Result<Vec<u32>, PlanError> {
    let bad = || PlanError::Waves(text.to_owned());
    let shares: Vec<u32> = text
        .split(',')
        .map(|p| p.trim().trim_end_matches('%').parse::<u32>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let increasing = shares.windows(2).all(|w| w[0] < w[1]);
    if shares.is_empty() || !increasing || shares[0] == 0 || shares.last() != Some(&100) {
        return Err(bad());
    }
    Ok(shares)
}

/// Splits `vehicles` into waves reaching `shares` percent cumulatively.
pub fn split(vehicles: &[String], shares: &[u32]) -> Vec<Vec<String>> {
    let n = vehicles.len();
    let mut waves = Vec::new();
    let mut done = 0;
    for &share in shares {
        let reach = (n * share as usize).div_ceil(100).max(done + 1).min(n);
        if reach > done {
            waves.push(vehicles[done..reach].to_vec());
            done = reach;
        }
    }
    waves
}

/// How many of `total` vehicles may fail: a count, or a percentage rounded down.
pub fn max_failures(text: &str, total: usize) -> Result<usize, PlanError> {
    let bad = || PlanError::MaxFailures(text.to_owned());
    let t = text.trim();
    match t.strip_suffix('%') {
        Some(p) => {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&p) {
                return Err(bad());
            }
            Ok((total as f64 * p / 100.0).floor() as usize)
        }
        None => t.parse().map_err(|_| bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("v{i:02}")).collect()
    }

    #[test]
    fn waves_reach_their_shares_with_at_least_one_vehicle_each() {
        let shares = parse_waves("5%,25%,100%").unwrap();
        let sizes = |n| split(&names(n), &shares).iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(20), [1, 4, 15]);
        assert_eq!(sizes(100), [5, 20, 75]);
        assert_eq!(sizes(3), [1, 1, 1]);
        assert_eq!(sizes(1), [1]);
        assert_eq!(split(&names(20), &shares)[0], ["v01"]);
        assert_eq!(parse_waves("100%").unwrap(), [100]);
        for bad in ["", "50%", "50%,25%,100%", "0%,100%", "x,100%"] {
            assert!(parse_waves(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn failure_budget_as_count_or_share() {
        assert_eq!(max_failures("2%", 20), Ok(0));
        assert_eq!(max_failures("10%", 20), Ok(2));
        assert_eq!(max_failures("3", 20), Ok(3));
        assert_eq!(max_failures("0", 20), Ok(0));
        assert!(max_failures("many", 20).is_err());
        assert!(max_failures("150%", 20).is_err());
    }
}

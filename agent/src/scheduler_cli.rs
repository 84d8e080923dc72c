//! The WorkloadScheduler's flags (flattened into `ank-agent`'s `Cli`),
//! environment variables and the parsers of their config-file values: its
//! tick, the agent's quota (features K1/K2) and preemption (feature K4).
//! Each flag has an `ANKAGENT_*` variable and a config-file key (declared
//! in `config_file.rs`, with the `[preemption]` table), merged with the
//! usual precedence: flag, environment, file, default. [`SchedulerArgs`]
//! builds the scheduler's own [`SchedulerSettings`].

use std::time::Duration;

use ank_common::duration::parse_duration;
use ank_common::quota::{QuotaLimits, SizeUnits, parse_memory};
use serde::{Deserialize, Deserializer};

use crate::workload_scheduler::{PreemptionSettings, SchedulerSettings};

/// Flags of the scheduler.
#[derive(Debug, Clone, clap::Args)]
pub struct SchedulerArgs {
    /// Most workloads of this agent in Pending(Starting) or Running at once;
    /// 0 is unlimited. Others wait in Pending(QuotaBlocked).
    #[arg(long, env = "ANKAGENT_MAX_WORKLOADS", default_value_t = 0, value_name = "N")]
    pub max_workloads: u32,
    /// Most declared memory (podman --memory, podman-kube limits) of those
    /// workloads, e.g. 2g or 1536Mi; 0 is unlimited.
    #[arg(long, env = "ANKAGENT_MAX_MEMORY", default_value = "0", value_name = "SIZE", value_parser = parse_size_arg)]
    pub max_memory: u64,
    /// How often waiting workloads are checked again (and their events
    /// counted) while some are quota-blocked, postponed or preempted.
    #[arg(long, env = "ANKAGENT_SCHEDULER_TICK", default_value = "1s", value_name = "DURATION", value_parser = parse_tick_arg)]
    pub scheduler_tick: Duration,
    /// Let every quota-blocked workload preempt lower-priority ones (without
    /// it only workloads with policy.preemptEnabled do).
    #[arg(long, env = "ANKAGENT_PREEMPTION_ENABLED", value_parser = clap::builder::BoolishValueParser::new())]
    pub preemption_enabled: bool,
    /// How long a workload must be quota-blocked before it preempts.
    #[arg(long, env = "ANKAGENT_PREEMPTION_DELAY", default_value = "60s", value_name = "DURATION", value_parser = parse_duration)]
    pub preemption_delay: Duration,
    /// How long a preempted workload is kept from starting again.
    #[arg(long, env = "ANKAGENT_PREEMPTION_POSTPONE", default_value = "60s", value_name = "DURATION", value_parser = parse_duration)]
    pub preemption_postpone: Duration,
    /// Percent of the candidates one tick may preempt (at least one).
    #[arg(long, env = "ANKAGENT_PREEMPTION_RATE", default_value_t = 10, value_name = "PERCENT",
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub preemption_rate: u8,
}

impl SchedulerArgs {
    /// The scheduler's settings.
    pub fn settings(&self) -> SchedulerSettings {
        SchedulerSettings {
            tick: self.scheduler_tick,
            quota: QuotaLimits { max_workloads: self.max_workloads, max_memory: self.max_memory },
            preemption: PreemptionSettings {
                enabled: self.preemption_enabled,
                delay: self.preemption_delay,
                postpone: self.preemption_postpone,
                rate: self.preemption_rate,
            },
        }
    }
}

fn parse_size_arg(text: &str) -> Result<u64, String> {
    parse_memory(text, SizeUnits::Podman).map_err(String::from)
}

/// A scheduler tick that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TickError {
    #[error(transparent)]
    Duration(#[from] ank_common::duration::DurationError),
    #[error("the scheduler tick '{0}' must be longer than 0")]
    Zero(String),
}

fn parse_tick_arg(text: &str) -> Result<Duration, TickError> {
    match parse_duration(text)? {
        Duration::ZERO => Err(TickError::Zero(text.to_owned())),
        tick => Ok(tick),
    }
}

/// A positive duration key (the tick).
pub fn tick<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_tick_arg(&text).map(Some).map_err(serde::de::Error::custom)
}

/// A memory size key: bytes, or a text like `"2g"` / `"1536Mi"`.
pub fn memory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    match Size::deserialize(d)? {
        Size::Bytes(b) => Ok(Some(b)),
        Size::Text(t) => parse_size_arg(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

/// The `[preemption]` table's `rate`: a percentage.
pub fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    match u8::deserialize(d)? {
        r @ 0..=100 => Ok(Some(r)),
        r => Err(serde::de::Error::custom(format!("rate {r} is not a percentage (0 to 100)"))),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::Path;

    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::Cli;

    fn resolve_with(cmd: clap::Command, argv: &[&str], file: Option<&str>) -> Result<SchedulerSettings, String> {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(format!("version = 'v1'\n{}", file.unwrap_or_default()).as_bytes()).unwrap();
        let path = f.path().to_str().unwrap().to_owned();
        let mut args = vec!["ank-agent", "-n", "a", "-k", "-x", &path];
        args.extend_from_slice(argv);
        let m = cmd.try_get_matches_from(args).map_err(|e| e.to_string())?;
        let mut cli = Cli::from_arg_matches(&m).unwrap();
        crate::config_file::apply(&mut cli, &m, Path::new("/nonexistent")).map_err(|e| e.to_string())?;
        Ok(cli.into_config().unwrap().scheduler)
    }

    fn resolve(argv: &[&str], file: Option<&str>) -> Result<SchedulerSettings, String> {
        resolve_with(Cli::command(), argv, file)
    }

    #[test]
    // [test of feature K2]
    // [test of feature K4]
    fn scheduler_defaults_are_unlimited_a_1s_tick_and_no_preemption() {
        let s = resolve(&[], None).unwrap();
        assert_eq!(s, SchedulerSettings::default());
        assert_eq!(s.tick, Duration::from_secs(1));
        assert_eq!(s.quota, QuotaLimits::default());
        let p = s.preemption;
        assert_eq!(
            (p.enabled, p.delay, p.postpone, p.rate),
            (false, Duration::from_secs(60), Duration::from_secs(60), 10)
        );
    }

    #[test]
    // [test of feature K2]
    // [test of feature K4]
    fn scheduler_flags_beat_the_config_file_and_its_preemption_section() {
        let file = "max_workloads = 4\nmax_memory = '2g'\nscheduler_tick = '500ms'\n\
                    [preemption]\nenabled = true\ndelay = '30s'\npostpone = '2m'\nrate = 25\n";
        let s = resolve(&[], Some(file)).unwrap();
        assert_eq!(s.quota, QuotaLimits { max_workloads: 4, max_memory: 2 << 30 });
        assert_eq!(s.tick, Duration::from_millis(500));
        assert_eq!(
            s.preemption,
            PreemptionSettings {
                enabled: true,
                delay: Duration::from_secs(30),
                postpone: Duration::from_secs(120),
                rate: 25
            }
        );
        let argv =
            ["--max-workloads", "2", "--max-memory", "1536Mi", "--preemption-delay", "5s", "--preemption-rate", "100"];
        let s = resolve(&argv, Some(file)).unwrap();
        assert_eq!(s.quota, QuotaLimits { max_workloads: 2, max_memory: 1536 << 20 });
        assert_eq!((s.preemption.delay, s.preemption.rate), (Duration::from_secs(5), 100));
        assert_eq!(s.preemption.postpone, Duration::from_secs(120), "keys without a flag still come from the file");
        assert_eq!(resolve(&[], Some("max_memory = 1048576\n")).unwrap().quota.max_memory, 1 << 20, "bytes");
    }

    #[test]
    // [test of feature K2]
    fn scheduler_env_beats_the_file() {
        // Remapped to variables no other test uses (nextest runs each test
        // in its own process). SAFETY: only this test touches them.
        unsafe {
            std::env::set_var("ANKAGENT_TEST_SCHED_MAX_WORKLOADS", "7");
            std::env::set_var("ANKAGENT_TEST_SCHED_PREEMPTION", "true");
        }
        let cmd = Cli::command()
            .mut_arg("max_workloads", |a| a.env("ANKAGENT_TEST_SCHED_MAX_WORKLOADS"))
            .mut_arg("preemption_enabled", |a| a.env("ANKAGENT_TEST_SCHED_PREEMPTION"));
        let s = resolve_with(cmd, &[], Some("max_workloads = 3\n[preemption]\nenabled = false\n")).unwrap();
        assert_eq!(s.quota.max_workloads, 7);
        assert!(s.preemption.enabled);
    }

    #[test]
    fn scheduler_bad_values_name_the_key_or_flag() {
        let e = resolve(&[], Some("max_memory = 'lots'\n")).unwrap_err();
        assert!(e.contains("max_memory") && e.contains("'lots'"), "{e}");
        let e = resolve(&[], Some("[preemption]\nrate = 150\n")).unwrap_err();
        assert!(e.contains("rate") && e.contains("percentage"), "{e}");
        // An unknown key is ignored with a warning, as Ankaios ignores it.
        let s = resolve(&[], Some("[preemption]\nwhen = 1\nenabled = true\n")).unwrap();
        assert!(s.preemption.enabled);
        let e = resolve(&[], Some("scheduler_tick = '0s'\n")).unwrap_err();
        assert!(e.contains("scheduler_tick") && e.contains("longer than 0"), "{e}");
        let e = resolve(&["--preemption-rate", "101"], None).unwrap_err();
        assert!(e.contains("--preemption-rate"), "{e}");
        let e = resolve(&["--preemption-delay", "soon"], None).unwrap_err();
        assert!(e.contains("'soon'"), "{e}");
    }
}

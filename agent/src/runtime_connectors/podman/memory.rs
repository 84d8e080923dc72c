//! The memory a `podman` workload declares (feature K2): the `--memory` /
//! `-m` value of its runtimeConfig's `commandOptions`, in podman's units
//! (`512m`, `1g`). Nothing declared counts 0.

use super::config::PodmanRuntimeConfig;
use ank_common::quota::{SizeUnits, parse_memory};

use crate::runtime_connectors::RuntimeError;

/// The declared memory of a podman runtimeConfig, in bytes.
// [feature K2: how a workload declares its memory]
pub fn declared(runtime_config: &str) -> Result<u64, RuntimeError> {
    let config = PodmanRuntimeConfig::parse(runtime_config)?;
    memory_option(&config.command_options)
}

/// The last `--memory` / `-m` of podman's run options (podman takes the
/// last one too).
fn memory_option(options: &[String]) -> Result<u64, RuntimeError> {
    let mut value: Option<&str> = None;
    let mut args = options.iter();
    while let Some(arg) = args.next() {
        if arg == "--memory" || arg == "-m" {
            value = Some(
                args.next()
                    .map(String::as_str)
                    .ok_or_else(|| RuntimeError::InvalidConfig(format!("'{arg}' without a value")))?,
            );
        } else if let Some(v) = arg.strip_prefix("--memory=") {
            value = Some(v);
        } else if let Some(v) = arg.strip_prefix("-m") {
            value = Some(v.strip_prefix('=').unwrap_or(v));
        }
    }
    value.map_or(Ok(0), |v| {
        parse_memory(v, SizeUnits::Podman).map_err(|e| RuntimeError::InvalidConfig(format!("commandOptions: {e}")))
    })
}

#[cfg(test)]
mod tests {
    use ank_common::quota::MIB;

    use super::*;

    #[test]
    // [test of feature K2]
    fn declared_memory_of_podman_is_its_memory_option() {
        let mem = |options: &str| declared(&format!("image: a\ncommandOptions: {options}\n"));
        assert_eq!(mem("[--memory, 512m]"), Ok(512 * MIB));
        assert_eq!(mem("['--memory=1g']"), Ok(1024 * MIB));
        assert_eq!(mem("[-p, '80:80', -m, 256Mi]"), Ok(256 * MIB));
        assert_eq!(mem("['-m=64m', '-m128m']"), Ok(128 * MIB), "the last one counts");
        assert_eq!(mem("[--name, x]"), Ok(0));
        assert!(mem("[--memory, lots]").unwrap_err().to_string().contains("'lots'"));
        assert!(mem("[--memory]").unwrap_err().to_string().contains("without a value"));
        assert_eq!(declared("image: a\n"), Ok(0));
    }
}

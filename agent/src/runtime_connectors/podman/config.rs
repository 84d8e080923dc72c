//! The `runtimeConfig` of the `podman` runtime: `generalOptions`, `image`,
//! `commandOptions`, `commandArgs` (snake_case aliases accepted), turned into
//! the argument list of `podman [general] run [options] image [args]`.

use crate::runtime_connectors::runtime_config::RuntimeConfigError;
use serde::Deserialize;

/// Parsed podman runtime config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
// Unknown keys are ignored, as Ankaios ignores them.
#[serde(rename_all = "camelCase")]
pub struct PodmanRuntimeConfig {
    #[serde(default, alias = "general_options")]
    pub general_options: Vec<String>,
    pub image: String,
    #[serde(default, alias = "command_options")]
    pub command_options: Vec<String>,
    #[serde(default, alias = "command_args")]
    pub command_args: Vec<String>,
}

impl PodmanRuntimeConfig {
    /// Parses a runtime config; the error names the problem.
    pub fn parse(text: &str) -> Result<Self, RuntimeConfigError> {
        let cfg: Self = serde_saphyr::from_str(text).map_err(|e| RuntimeConfigError::unreadable("podman", &e))?;
        if cfg.image.trim().is_empty() {
            return Err(RuntimeConfigError::Empty { runtime: "podman", field: "image" });
        }
        Ok(cfg)
    }

    /// Whether the user chose a container name in `commandOptions`.
    pub fn has_name_option(&self) -> bool {
        self.command_options.iter().any(|o| o == "--name" || o.starts_with("--name="))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_config_parses_all_keys_and_aliases() {
        let c = PodmanRuntimeConfig::parse(
            "generalOptions: [\"--log-level\", \"info\"]\nimage: busybox\ncommand_options: [\"--name\", \"x\"]\ncommandArgs: [sleep, \"9\"]\n",
        )
        .unwrap();
        assert_eq!(c.general_options, ["--log-level", "info"]);
        assert_eq!(c.image, "busybox");
        assert!(c.has_name_option());
        assert_eq!(c.command_args, ["sleep", "9"]);
    }

    #[test]
    fn podman_config_rejects_missing_image_and_ignores_unknown_keys() {
        assert!(PodmanRuntimeConfig::parse("commandArgs: [a]\n").unwrap_err().to_string().contains("image"));
        let c = PodmanRuntimeConfig::parse("image: a\nfoo: 1\nhealthCheck: {cmd: x}\n").unwrap();
        assert_eq!(c, PodmanRuntimeConfig { image: "a".into(), ..Default::default() });
    }
}

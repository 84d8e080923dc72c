//! The `runtimeConfig` of the `podman-kube` runtime: `generalOptions`
//! (before the subcommand), `playOptions` (to `podman kube play`),
//! `downOptions` (to `podman kube down`) and `manifest` (the Kubernetes
//! YAML); snake_case aliases accepted.

use serde::{Deserialize, Serialize};

/// Parsed podman-kube runtime config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodmanKubeRuntimeConfig {
    #[serde(default, alias = "general_options")]
    pub general_options: Vec<String>,
    #[serde(default, alias = "play_options")]
    pub play_options: Vec<String>,
    #[serde(default, alias = "down_options")]
    pub down_options: Vec<String>,
    pub manifest: String,
}

impl PodmanKubeRuntimeConfig {
    /// Parses a runtime config; the error names the problem.
    pub fn parse(text: &str) -> Result<Self, String> {
        let cfg: Self = serde_saphyr::from_str(text).map_err(|e| {
            format!("invalid podman-kube runtimeConfig: {}", e.to_string().lines().next().unwrap_or(""))
        })?;
        if cfg.manifest.trim().is_empty() {
            return Err("invalid podman-kube runtimeConfig: field 'manifest' must not be empty".to_owned());
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_kube_config_parses_all_keys() {
        let cfg = PodmanKubeRuntimeConfig::parse(
            "generalOptions: [--log-level, debug]\nplayOptions: [--quiet]\ndown_options: [--force]\nmanifest: |\n  kind: Pod\n",
        )
        .unwrap();
        assert_eq!(cfg.general_options, ["--log-level", "debug"]);
        assert_eq!(cfg.play_options, ["--quiet"]);
        assert_eq!(cfg.down_options, ["--force"]);
        assert_eq!(cfg.manifest, "kind: Pod\n");
    }

    #[test]
    fn podman_kube_config_errors_name_the_problem() {
        let e = PodmanKubeRuntimeConfig::parse("playOptions: []\n").unwrap_err();
        assert!(e.contains("manifest"), "{e}");
        let e = PodmanKubeRuntimeConfig::parse("manifest: x\nimage: y\n").unwrap_err();
        assert!(e.contains("image"), "{e}");
        let e = PodmanKubeRuntimeConfig::parse("manifest: '  '\n").unwrap_err();
        assert!(e.contains("must not be empty"), "{e}");
    }
}

//! The `runtimeConfig` of the `podman-kube` runtime: `generalOptions`
//! (before the subcommand), `playOptions` (to `podman kube play`),
//! `downOptions` (to `podman kube down`), `manifest` (the Kubernetes
//! YAML) and `controlInterfaceTarget` (`<pod>/<container>` that gets the
//! control interface mounted); snake_case aliases accepted.

use crate::runtime_connectors::runtime_config::RuntimeConfigError;
use serde::{Deserialize, Serialize};

/// Parsed podman-kube runtime config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
// Unknown keys are ignored, as Ankaios ignores them.
#[serde(rename_all = "camelCase")]
pub struct PodmanKubeRuntimeConfig {
    #[serde(default, alias = "general_options")]
    pub general_options: Vec<String>,
    #[serde(default, alias = "play_options")]
    pub play_options: Vec<String>,
    #[serde(default, alias = "down_options")]
    pub down_options: Vec<String>,
    pub manifest: String,
    /// `<pod>/<container>` of the manifest into which the agent mounts the
    /// workload's control interface; needed only when it has one.
    #[serde(default, alias = "control_interface_target", skip_serializing_if = "Option::is_none")]
    pub control_interface_target: Option<String>,
}

impl PodmanKubeRuntimeConfig {
    /// Parses a runtime config; the error names the problem.
    pub fn parse(text: &str) -> Result<Self, RuntimeConfigError> {
        let cfg: Self = serde_saphyr::from_str(text).map_err(|e| RuntimeConfigError::unreadable("podman-kube", &e))?;
        if cfg.manifest.trim().is_empty() {
            return Err(RuntimeConfigError::Empty { runtime: "podman-kube", field: "manifest" });
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
        assert_eq!(cfg.control_interface_target, None);
    }

    #[test]
    fn podman_kube_config_reads_the_control_interface_target() {
        let cfg = PodmanKubeRuntimeConfig::parse("manifest: x\ncontrolInterfaceTarget: web/frontend\n").unwrap();
        assert_eq!(cfg.control_interface_target.as_deref(), Some("web/frontend"));
        let cfg = PodmanKubeRuntimeConfig::parse("manifest: x\ncontrol_interface_target: a/b\n").unwrap();
        assert_eq!(cfg.control_interface_target.as_deref(), Some("a/b"));
    }

    #[test]
    fn podman_kube_config_errors_name_the_problem() {
        let e = PodmanKubeRuntimeConfig::parse("playOptions: []\n").unwrap_err().to_string();
        assert!(e.contains("manifest"), "{e}");
        let cfg = PodmanKubeRuntimeConfig::parse("manifest: x\nimage: y\n").unwrap();
        assert_eq!(cfg.manifest, "x", "an unknown key is ignored, as by Ankaios");
        let e = PodmanKubeRuntimeConfig::parse("manifest: '  '\n").unwrap_err().to_string();
        assert!(e.contains("must not be empty"), "{e}");
    }
}

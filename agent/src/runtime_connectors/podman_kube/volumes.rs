//! The volumes a podman-kube workload leaves for an agent restart:
//! `<instance>.config` holds the runtimeConfig and `<instance>.pods` the
//! JSON list of pod ids, each base64-encoded in the volume's `data` label
//! (labels are easy to read with the CLI, also against a remote podman).
//! Both carry `agent=<agent>` so that an agent lists only its own.

use base64::Engine;
use serde::Deserialize;

use crate::runtime_connectors::podman::cli::{PodmanCli, PodmanError};

pub const CONFIG_SUFFIX: &str = ".config";
pub const PODS_SUFFIX: &str = ".pods";

/// One entry of `podman volume ls --format json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct VolumeEntry {
    pub name: String,
    #[serde(default)]
    pub labels: Option<std::collections::HashMap<String, String>>,
}

impl VolumeEntry {
    /// The decoded `data` label.
    pub fn data(&self) -> Option<String> {
        let b64 = self.labels.as_ref()?.get("data")?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        String::from_utf8(bytes).ok()
    }
}

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// (Re)creates volume `name` with `data` and the agent label.
pub async fn store(cli: &PodmanCli, name: &str, agent: &str, data: &str) -> Result<(), PodmanError> {
    let _ = cli.exec(&args(&["volume", "rm", "--force", name])).await;
    let encoded = base64::engine::general_purpose::STANDARD.encode(data);
    let data_label = format!("data={encoded}");
    let agent_label = format!("agent={agent}");
    cli.exec(&args(&["volume", "create", "--label", &data_label, "--label", &agent_label, name])).await.map(|_| ())
}

/// Removes the volumes of `instance`.
pub async fn remove(cli: &PodmanCli, instance: &str) -> Result<(), PodmanError> {
    let config = format!("{instance}{CONFIG_SUFFIX}");
    let pods = format!("{instance}{PODS_SUFFIX}");
    cli.exec(&args(&["volume", "rm", "--force", &config, &pods])).await.map(|_| ())
}

/// The volumes labelled for `agent`.
pub async fn list(cli: &PodmanCli, agent: &str) -> Result<Vec<VolumeEntry>, PodmanError> {
    let filter = format!("label=agent={agent}");
    let out = cli.exec(&args(&["volume", "ls", "--format", "json", "--filter", &filter])).await?;
    parse_volume_ls(&out)
}

/// Parses `podman volume ls --format json`.
pub fn parse_volume_ls(out: &str) -> Result<Vec<VolumeEntry>, PodmanError> {
    if out.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(out).map_err(|e| PodmanError::Output { command: "volume ls".into(), reason: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_kube_volume_listing_decodes_the_data_label() {
        let out = r#"[{"Name":"k.h.a.config","Driver":"local","Labels":{"agent":"a","data":"bWFuaWZlc3Q6IHgK"}},
                      {"Name":"k.h.a.pods","Labels":{"agent":"a","data":"WyJwMSJd"}}, {"Name":"bare"}]"#;
        let v = parse_volume_ls(out).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].data().as_deref(), Some("manifest: x\n"));
        assert_eq!(v[1].data().as_deref(), Some("[\"p1\"]"));
        assert_eq!(v[2].data(), None);
        assert!(parse_volume_ls("").unwrap().is_empty());
        assert!(parse_volume_ls("{").is_err());
    }
}

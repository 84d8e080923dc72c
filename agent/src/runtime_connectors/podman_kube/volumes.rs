//! The volumes a podman-kube workload leaves for an agent restart:
//! `<instance>.config` holds the runtimeConfig and `<instance>.pods` the
//! JSON list of pod ids, each base64-encoded in the volume's `data` label
//! (labels are easy to read with the CLI, also against a remote podman).
//! The layout is Ankaios' own, so that either agent takes over the other's
//! kube workloads: Ankaios encodes without `=` padding and finds the
//! volumes by name (`*.<agent>.config`), it sets no `agent` label. We write
//! the same unpadded data (plus an `agent` label it ignores), read padded
//! and unpadded data, and find volumes by their name as well.

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
        let bytes = DATA_ENCODING.decode(b64.trim_end_matches('=')).ok()?;
        String::from_utf8(bytes).ok()
    }
}

/// Ankaios' encoding of the `data` label: standard base64 without padding
/// (it rejects padded data; older versions of this agent wrote it padded).
const DATA_ENCODING: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD_NO_PAD;

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// (Re)creates volume `name` with `data` and the agent label.
pub async fn store(cli: &PodmanCli, name: &str, agent: &str, data: &str) -> Result<(), PodmanError> {
    let _ = cli.exec(&args(&["volume", "rm", "--force", name])).await;
    let encoded = DATA_ENCODING.encode(data);
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

/// The volumes of `agent`'s workloads: named `<workload>.<id>.<agent>.config`
/// or `.pods`, as Ankaios names them (its volumes carry no agent label).
pub async fn list(cli: &PodmanCli, agent: &str) -> Result<Vec<VolumeEntry>, PodmanError> {
    let out = cli.exec(&args(&["volume", "ls", "--format", "json"])).await?;
    Ok(of_agent(parse_volume_ls(&out)?, agent))
}

/// The entries of `all` whose names end in `.<agent>.config` or `.<agent>.pods`.
pub fn of_agent(all: Vec<VolumeEntry>, agent: &str) -> Vec<VolumeEntry> {
    let ends = [format!(".{agent}{CONFIG_SUFFIX}"), format!(".{agent}{PODS_SUFFIX}")];
    all.into_iter().filter(|v| ends.iter().any(|e| v.name.ends_with(e.as_str()))).collect()
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

    #[test]
    fn podman_kube_volume_data_is_written_unpadded_and_read_either_way_as_ankaios_does() {
        // "ab" is "YWI=" padded; Ankaios writes and reads "YWI".
        assert_eq!(DATA_ENCODING.encode("ab"), "YWI");
        for data in ["YWI", "YWI="] {
            let v = VolumeEntry {
                name: "v".into(),
                labels: Some([("data".to_owned(), data.to_owned())].into_iter().collect()),
            };
            assert_eq!(v.data().as_deref(), Some("ab"), "{data}");
        }
    }

    #[test]
    fn podman_kube_volumes_of_an_agent_are_found_by_name_without_an_agent_label() {
        let out = r#"[{"Name":"k.h1.agent_A.config","Labels":{"data":"eA"}},{"Name":"k.h1.agent_A.pods"},
                      {"Name":"k.h2.agent_AB.config"},{"Name":"k.h3.agent_B.config","Labels":{"agent":"agent_A"}},
                      {"Name":"mydata"}]"#;
        let names: Vec<String> =
            of_agent(parse_volume_ls(out).unwrap(), "agent_A").into_iter().map(|v| v.name).collect();
        assert_eq!(names, ["k.h1.agent_A.config", "k.h1.agent_A.pods"]);
    }
}

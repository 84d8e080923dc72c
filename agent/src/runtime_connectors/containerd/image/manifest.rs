//! The JSON of images: manifests (Docker v2 schema 2 and OCI), indexes
//! (OCI index, Docker manifest list) and the image config; choosing this
//! machine's manifest from an index; chain ids.

use std::collections::HashMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Media types containerd and registries use for the blobs of an image.
pub mod media {
    pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
    pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
    pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
    /// All four, as a registry's `Accept`.
    pub const ALL: [&str; 4] = [OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST];
}

/// A content descriptor.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default)]
    pub platform: Option<Platform>,
    #[serde(default)]
    pub annotations: HashMap<String, String>,
}

/// The platform of an index entry.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct Platform {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
}

/// An image manifest or an index, told apart by their fields (and media
/// type when there is one).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestOrIndex {
    #[serde(default)]
    pub media_type: Option<String>,
    /// Set in a manifest.
    #[serde(default)]
    pub config: Option<Descriptor>,
    /// A manifest's layers, in order from the base.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// Set in an index.
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
}

impl ManifestOrIndex {
    /// Whether this is an index (manifest list).
    pub fn is_index(&self) -> bool {
        match self.media_type.as_deref() {
            Some(media::OCI_INDEX) | Some(media::DOCKER_LIST) => true,
            Some(media::OCI_MANIFEST) | Some(media::DOCKER_MANIFEST) => false,
            _ => self.config.is_none() && !self.manifests.is_empty(),
        }
    }
}

/// The image config blob (the parts of it a container needs).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ConfigBlob {
    #[serde(default)]
    pub config: Option<ContainerConfig>,
    pub rootfs: RootFs,
}

/// The image config's `config` object.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ContainerConfig {
    #[serde(default)]
    pub env: Option<Vec<String>>,
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub working_dir: Option<String>,
    #[serde(default)]
    pub labels: Option<HashMap<String, String>>,
}

/// The image config's `rootfs`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RootFs {
    #[serde(default)]
    pub diff_ids: Vec<String>,
}

/// This machine's platform as OCI names it: (`linux`, `amd64`|`arm64`|…,
/// variant).
pub fn host_platform() -> (&'static str, &'static str, &'static str) {
    let (architecture, variant) = match std::env::consts::ARCH {
        "x86_64" => ("amd64", ""),
        "aarch64" => ("arm64", "v8"),
        "arm" => ("arm", "v7"),
        "x86" => ("386", ""),
        other => (other, ""),
    };
    ("linux", architecture, variant)
}

/// The entry of `manifests` for `(os, architecture, variant)`: an exact
/// variant first, then one without a variant (arm64's `v8` is its default).
pub fn choose_manifest<'a>(
    manifests: &'a [Descriptor],
    (os, architecture, variant): (&str, &str, &str),
) -> Option<&'a Descriptor> {
    let candidates = || {
        manifests
            .iter()
            .filter(move |m| m.platform.as_ref().is_some_and(|p| p.os == os && p.architecture == architecture))
    };
    let variant_of = |m: &Descriptor| m.platform.as_ref().and_then(|p| p.variant.clone()).unwrap_or_default();
    candidates()
        .find(|m| variant_of(m) == variant)
        .or_else(|| candidates().find(|m| variant_of(m).is_empty() || variant.is_empty()))
}

/// The chain id of layers with these diff ids (OCI image spec):
/// `ChainID(L0) = DiffID(L0)`, `ChainID(Ln) = sha256(ChainID(Ln-1) + " " + DiffID(Ln))`.
/// Each prefix's, in order: the last is the image's.
pub fn chain_ids(diff_ids: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(diff_ids.len());
    for diff_id in diff_ids {
        let next = match out.last() {
            None => diff_id.clone(),
            Some(parent) => format!("sha256:{:x}", Sha256::digest(format!("{parent} {diff_id}").as_bytes())),
        };
        out.push(next);
    }
    out
}

/// The sha256 digest of `data`, as `sha256:<hex>`.
pub fn digest_of(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_chain_id_of_one_layer_is_its_diff_id() {
        let d = "sha256:aaaa".to_string();
        assert_eq!(chain_ids(std::slice::from_ref(&d)), vec![d]);
        assert!(chain_ids(&[]).is_empty());
    }

    #[test]
    fn containerd_chain_id_follows_the_oci_spec() {
        let ids = vec!["sha256:a".to_string(), "sha256:b".to_string(), "sha256:c".to_string()];
        let chain = chain_ids(&ids);
        let second = digest_of(b"sha256:a sha256:b");
        assert_eq!(chain[1], second);
        assert_eq!(chain[2], digest_of(format!("{second} sha256:c").as_bytes()));
        // A known value: sha256("sha256:a sha256:b").
        assert_eq!(second, format!("sha256:{:x}", Sha256::digest(b"sha256:a sha256:b")));
    }

    fn entry(arch: &str, variant: Option<&str>, digest: &str) -> Descriptor {
        Descriptor {
            digest: digest.into(),
            platform: Some(Platform {
                os: "linux".into(),
                architecture: arch.into(),
                variant: variant.map(String::from),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn containerd_index_picks_this_platform() {
        let list =
            vec![entry("arm", Some("v7"), "arm"), entry("arm64", Some("v8"), "arm64"), entry("amd64", None, "amd64")];
        let pick = |p| choose_manifest(&list, p).map(|d| d.digest.as_str());
        assert_eq!(pick(("linux", "amd64", "")), Some("amd64"));
        assert_eq!(pick(("linux", "arm64", "v8")), Some("arm64"));
        assert_eq!(pick(("linux", "arm", "v7")), Some("arm"));
        assert_eq!(pick(("linux", "riscv64", "")), None);
        let no_variant = vec![entry("arm64", None, "plain")];
        assert_eq!(choose_manifest(&no_variant, ("linux", "arm64", "v8")).map(|d| d.digest.as_str()), Some("plain"));
    }

    #[test]
    fn containerd_manifest_and_index_are_told_apart() {
        let index: ManifestOrIndex =
            serde_json::from_str(r#"{"schemaVersion":2,"manifests":[{"digest":"sha256:x","size":1}]}"#)
                .unwrap_or_default();
        assert!(index.is_index());
        let manifest: ManifestOrIndex =
            serde_json::from_str(r#"{"schemaVersion":2,"config":{"digest":"sha256:c","size":2},"layers":[]}"#)
                .unwrap_or_default();
        assert!(!manifest.is_index());
    }
}

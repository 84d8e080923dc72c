//! The memory a `podman-kube` workload declares (feature K2): the sum of
//! `resources.limits.memory` over the containers of its manifest's Pods
//! and Deployment pod templates, in Kubernetes quantities (`256Mi`, `1Gi`,
//! `500M`). Nothing declared counts 0.

use super::config::PodmanKubeRuntimeConfig;
use ank_common::quota::{SizeUnits, parse_memory};
use serde_json::Value;

use super::control_interface_target::read_documents;
use crate::runtime_connectors::RuntimeError;

/// The declared memory of a podman-kube runtimeConfig, in bytes.
// [feature K2: how a workload declares its memory]
pub fn declared(runtime_config: &str) -> Result<u64, RuntimeError> {
    let config = PodmanKubeRuntimeConfig::parse(runtime_config)?;
    manifest_memory(&config.manifest)
}

/// The pod spec of a Pod or a Deployment document.
fn pod_spec(doc: &Value) -> Option<&Value> {
    match doc.get("kind")?.as_str()? {
        "Pod" => doc.get("spec"),
        "Deployment" => doc.pointer("/spec/template/spec"),
        _ => None,
    }
}

fn manifest_memory(manifest: &str) -> Result<u64, RuntimeError> {
    let invalid = RuntimeError::InvalidConfig;
    let docs = read_documents(manifest).map_err(|e| invalid(e.to_string()))?;
    let mut total: u64 = 0;
    for spec in docs.iter().filter_map(pod_spec) {
        let containers = spec.get("containers").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for container in containers {
            let Some(limit) = container.pointer("/resources/limits/memory") else { continue };
            let text = match limit {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(invalid(format!("manifest: resources.limits.memory {other} is not a quantity"))),
            };
            let bytes = parse_memory(&text, SizeUnits::Kube).map_err(|e| invalid(format!("manifest: {e}")))?;
            total = total.saturating_add(bytes);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use ank_common::quota::MIB;

    use super::*;

    #[test]
    // [test of feature K2]
    fn declared_memory_of_podman_kube_sums_the_container_limits() {
        let manifest = "manifest: |\n  apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    \
                        - {name: a, image: x, resources: {limits: {memory: 256Mi}}}\n    - {name: b, image: y}\n  \
                        ---\n  kind: Deployment\n  metadata: {name: d}\n  spec:\n    template:\n      spec:\n        \
                        containers:\n        - {name: c, image: z, resources: {limits: {memory: 1Gi}}}\n  ---\n  \
                        kind: ConfigMap\n  metadata: {name: m}\n";
        assert_eq!(declared(manifest), Ok(1280 * MIB));
        let bad = "manifest: |\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    \
                   - {name: a, resources: {limits: {memory: 2x}}}\n";
        assert!(declared(bad).unwrap_err().to_string().contains("'2x'"));
    }
}

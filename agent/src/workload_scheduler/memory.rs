//! The memory a workload declares, which the agent's `max_memory` quota
//! counts (feature K2): for `podman` the `--memory` / `-m` value of its
//! runtimeConfig `commandOptions` (podman units: `512m`, `1g`), for
//! `podman-kube` the sum of `resources.limits.memory` over the containers
//! of its manifest's Pods and Deployment pod templates (Kubernetes
//! quantities: `256Mi`, `1Gi`, `500M`). A workload that declares nothing
//! counts 0; other runtimes declare nothing.

use ank_common::podman_config::PodmanRuntimeConfig;
use ank_common::podman_kube_config::PodmanKubeRuntimeConfig;
use ank_common::quota::{SizeUnits, parse_memory};
use ank_common::workload::WorkloadSpec;
use serde_json::Value;

use crate::runtime_connectors::podman::PODMAN;
use crate::runtime_connectors::podman_kube::PODMAN_KUBE;
use crate::runtime_connectors::podman_kube::control_interface_target::read_documents;

/// The declared memory of `spec` in bytes; the error names what cannot be
/// read (the workload's own runtime would refuse it too).
// [feature K2: how a workload declares its memory]
pub fn declared_memory(spec: &WorkloadSpec) -> Result<u64, String> {
    let config = &spec.workload.runtime_config;
    match spec.workload.runtime.as_str() {
        PODMAN => podman_memory(&PodmanRuntimeConfig::parse(config)?.command_options),
        PODMAN_KUBE => kube_memory(&PodmanKubeRuntimeConfig::parse(config)?.manifest),
        _ => Ok(0),
    }
}

/// The last `--memory` / `-m` of podman's run options (podman takes the
/// last one too).
fn podman_memory(options: &[String]) -> Result<u64, String> {
    let mut value: Option<&str> = None;
    let mut args = options.iter();
    while let Some(arg) = args.next() {
        if arg == "--memory" || arg == "-m" {
            value = Some(args.next().map(String::as_str).ok_or_else(|| format!("'{arg}' without a value"))?);
        } else if let Some(v) = arg.strip_prefix("--memory=") {
            value = Some(v);
        } else if let Some(v) = arg.strip_prefix("-m") {
            value = Some(v.strip_prefix('=').unwrap_or(v));
        }
    }
    value.map_or(Ok(0), |v| parse_memory(v, SizeUnits::Podman).map_err(|e| format!("commandOptions: {e}")))
}

/// The pod specs of a Pod or a Deployment document.
fn pod_spec(doc: &Value) -> Option<&Value> {
    match doc.get("kind")?.as_str()? {
        "Pod" => doc.get("spec"),
        "Deployment" => doc.pointer("/spec/template/spec"),
        _ => None,
    }
}

fn kube_memory(manifest: &str) -> Result<u64, String> {
    let docs = read_documents(manifest)?;
    let mut total: u64 = 0;
    for spec in docs.iter().filter_map(pod_spec) {
        let containers = spec.get("containers").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for container in containers {
            let Some(limit) = container.pointer("/resources/limits/memory") else { continue };
            let text = match limit {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(format!("manifest: resources.limits.memory {other} is not a quantity")),
            };
            let bytes = parse_memory(&text, SizeUnits::Kube).map_err(|e| format!("manifest: {e}"))?;
            total = total.saturating_add(bytes);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use ank_common::quota::MIB;
    use ank_common::workload::Workload;
    use ank_common::{AgentName, WorkloadName};

    use super::*;

    fn spec(runtime: &str, config: &str) -> WorkloadSpec {
        let wl = Workload { runtime: runtime.into(), runtime_config: config.into(), ..Default::default() };
        WorkloadSpec::new(&WorkloadName::new("w").unwrap(), &AgentName::new("agent_A").unwrap(), wl)
    }

    #[test]
    // [test of feature K2]
    fn declared_memory_of_podman_is_its_memory_option() {
        let mem = |options: &str| declared_memory(&spec("podman", &format!("image: a\ncommandOptions: {options}\n")));
        assert_eq!(mem("[--memory, 512m]"), Ok(512 * MIB));
        assert_eq!(mem("['--memory=1g']"), Ok(1024 * MIB));
        assert_eq!(mem("[-p, '80:80', -m, 256Mi]"), Ok(256 * MIB));
        assert_eq!(mem("['-m=64m', '-m128m']"), Ok(128 * MIB), "the last one counts");
        assert_eq!(mem("[--name, x]"), Ok(0));
        assert!(mem("[--memory, lots]").unwrap_err().contains("'lots'"));
        assert!(mem("[--memory]").unwrap_err().contains("without a value"));
        assert_eq!(declared_memory(&spec("podman", "image: a\n")), Ok(0));
        assert_eq!(declared_memory(&spec("containerd", "anything")), Ok(0));
    }

    #[test]
    // [test of feature K2]
    fn declared_memory_of_podman_kube_sums_the_container_limits() {
        let manifest = "manifest: |\n  apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    \
                        - {name: a, image: x, resources: {limits: {memory: 256Mi}}}\n    - {name: b, image: y}\n  \
                        ---\n  kind: Deployment\n  metadata: {name: d}\n  spec:\n    template:\n      spec:\n        \
                        containers:\n        - {name: c, image: z, resources: {limits: {memory: 1Gi}}}\n  ---\n  \
                        kind: ConfigMap\n  metadata: {name: m}\n";
        assert_eq!(declared_memory(&spec("podman-kube", manifest)), Ok(1280 * MIB));
        let bad = "manifest: |\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    \
                   - {name: a, resources: {limits: {memory: 2x}}}\n";
        assert!(declared_memory(&spec("podman-kube", bad)).unwrap_err().contains("'2x'"));
    }
}

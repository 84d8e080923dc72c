//! Puts a workload's control interface into its Kubernetes manifest: the
//! pod named by `controlInterfaceTarget` (`<pod>/<container>`: a `kind: Pod`
//! by its name, or the pod template of a `kind: Deployment` by the name podman
//! gives its pod, `<deployment>-pod`, as Ankaios does) gets a `hostPath` volume of
//! the host folder holding the FIFOs, and the named container mounts it at
//! [`CONTROL_INTERFACE_MOUNT`]. Owns reading the (multi-document) manifest
//! and writing the changed one; every other document and field is kept.
//!
//! The manifest is read as YAML 1.1 as Kubernetes reads it (`0644` is
//! octal, `yes` a boolean) and written as JSON documents separated by `---`,
//! which `podman kube play` reads the same and which leaves no YAML scalar
//! open to a second interpretation.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::runtime_connectors::podman::CONTROL_INTERFACE_MOUNT;

/// Name of the injected volume, Ankaios' (with `-2`, `-3`, ... when the pod
/// already has one of that name).
pub const VOLUME_NAME: &str = "control-interface-volume";

/// What podman appends to a Deployment's name to name its pod.
const DEPLOYMENT_POD_SUFFIX: &str = "-pod";

/// Why the control interface cannot be put into a workload's manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The runtimeConfig names no target.
    #[error(
        "the workload has a control interface, so its podman-kube runtimeConfig needs \
         'controlInterfaceTarget: <pod>/<container>' naming the container to mount it in"
    )]
    Missing,
    /// The target is not `<pod>/<container>`.
    #[error("controlInterfaceTarget '{0}': expected '<pod>/<container>', e.g. 'web/frontend'")]
    Malformed(String),
    /// The manifest has no place for it.
    #[error("controlInterfaceTarget '{target}': {problem}")]
    Manifest { target: String, problem: ManifestProblem },
}

/// What is wrong with the manifest (or the folder) for a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestProblem {
    #[error("the control interface folder {0} is not UTF-8")]
    FolderNotUtf8(String),
    #[error("cannot read the manifest: {0}")]
    Unreadable(String),
    #[error("the manifest has no Pod or Deployment named '{pod}' (pods: {names})")]
    NoPod { pod: String, names: String },
    #[error("'{path}' of the pod '{pod}' is not an object")]
    NotAnObject { path: String, pod: String },
    #[error("the pod '{0}' has no list of containers")]
    NoContainers(String),
    #[error("the pod '{pod}' has no container '{container}' (containers: {names})")]
    NoContainer { pod: String, container: String, names: String },
    #[error("the container '{0}' already mounts something at {CONTROL_INTERFACE_MOUNT}")]
    AlreadyMounted(String),
    #[error("'{key}' of '{owner}' is not a list")]
    NotAList { key: String, owner: String },
}

/// `<pod>/<container>` of a `controlInterfaceTarget`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlInterfaceTarget {
    pub pod: String,
    pub container: String,
}

impl ControlInterfaceTarget {
    /// Parses `<pod>/<container>`; both parts non-empty, exactly one `/`.
    pub fn parse(text: &str) -> Result<Self, TargetError> {
        match text.split_once('/') {
            Some((pod, container)) if !pod.is_empty() && !container.is_empty() && !container.contains('/') => {
                Ok(Self { pod: pod.to_owned(), container: container.to_owned() })
            }
            _ => Err(TargetError::Malformed(text.to_owned())),
        }
    }
}

/// The manifest to play for a workload whose control interface lives in
/// `host_folder`: `manifest` with the volume and the mount of `target`
/// added. `target` is the runtimeConfig's `controlInterfaceTarget`; the
/// error says what is missing or wrong.
pub fn inject(manifest: &str, target: Option<&str>, host_folder: &Path) -> Result<String, TargetError> {
    let Some(text) = target else { return Err(TargetError::Missing) };
    let target = ControlInterfaceTarget::parse(text)?;
    let fail = |problem: ManifestProblem| TargetError::Manifest { target: text.to_owned(), problem };
    let Some(folder) = host_folder.to_str() else {
        return Err(fail(ManifestProblem::FolderNotUtf8(host_folder.display().to_string())));
    };
    let mut docs = read_documents(manifest).map_err(&fail)?;
    let pod_spec = find_pod_spec(&mut docs, &target.pod).map_err(&fail)?;
    add_to_pod(pod_spec, &target, folder).map_err(&fail)?;
    Ok(write_documents(&docs))
}

/// The documents of a (multi-document) manifest, read as Kubernetes reads them.
pub(crate) fn read_documents(manifest: &str) -> Result<Vec<Value>, ManifestProblem> {
    let options = serde_saphyr::options! {
        legacy_octal_numbers: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    };
    serde_saphyr::from_multiple_with_options(manifest, options).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid YAML").trim().to_owned();
        ManifestProblem::Unreadable(first)
    })
}

fn write_documents(docs: &[Value]) -> String {
    docs.iter().map(|doc| format!("{doc}\n")).collect::<Vec<_>>().join("---\n")
}

/// The name podman gives a document's pod, with the pod spec's path in it:
/// a Pod's `metadata.name` and `spec`, a Deployment's `<metadata.name>-pod`
/// and `spec.template.spec`.
fn pod_of(doc: &Value) -> Option<(String, &'static [&'static str])> {
    let name = doc.pointer("/metadata/name")?.as_str()?;
    match doc.get("kind")?.as_str()? {
        "Pod" => Some((name.to_owned(), &["spec"])),
        "Deployment" => Some((format!("{name}{DEPLOYMENT_POD_SUFFIX}"), &["spec", "template", "spec"])),
        _ => None,
    }
}

/// The pod spec (as an object) of the first Pod or Deployment named `pod`.
fn find_pod_spec<'a>(docs: &'a mut [Value], pod: &str) -> Result<&'a mut Map<String, Value>, ManifestProblem> {
    let found =
        docs.iter().enumerate().find_map(|(i, doc)| pod_of(doc).filter(|(name, _)| name == pod).map(|(_, p)| (i, p)));
    let Some((index, path)) = found else {
        let names: Vec<String> = docs.iter().filter_map(pod_of).map(|(name, _)| name).collect();
        let names = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
        return Err(ManifestProblem::NoPod { pod: pod.to_owned(), names });
    };
    let not_an_object = || ManifestProblem::NotAnObject { path: path.join("."), pod: pod.to_owned() };
    let mut node = &mut docs[index];
    for key in path {
        let Value::Object(object) = node else { return Err(not_an_object()) };
        node = object.entry(*key).or_insert_with(|| json!({}));
    }
    node.as_object_mut().ok_or_else(not_an_object)
}

/// Adds the hostPath volume to `spec` and the mount to the target container.
fn add_to_pod(
    spec: &mut Map<String, Value>,
    target: &ControlInterfaceTarget,
    folder: &str,
) -> Result<(), ManifestProblem> {
    let pod = &target.pod;
    let volume_names: Vec<String> = list(spec, "volumes", pod)?
        .iter()
        .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let volume = free_name(&volume_names);

    let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) else {
        return Err(ManifestProblem::NoContainers(pod.clone()));
    };
    let name_of = |c: &Map<String, Value>| c.get("name").and_then(Value::as_str).map(str::to_owned);
    let names: Vec<String> = containers.iter().filter_map(Value::as_object).filter_map(name_of).collect();
    let wanted = Some(target.container.as_str());
    let Some(container) =
        containers.iter_mut().filter_map(Value::as_object_mut).find(|c| name_of(c).as_deref() == wanted)
    else {
        return Err(ManifestProblem::NoContainer {
            pod: pod.clone(),
            container: target.container.clone(),
            names: names.join(", "),
        });
    };
    let mounts = list(container, "volumeMounts", &format!("{pod}/{}", target.container))?;
    if mounts.iter().any(|m| {
        m.get("mountPath").and_then(Value::as_str).map(|p| p.trim_end_matches('/')) == Some(CONTROL_INTERFACE_MOUNT)
    }) {
        return Err(ManifestProblem::AlreadyMounted(target.container.clone()));
    }
    mounts.push(json!({ "name": volume, "mountPath": CONTROL_INTERFACE_MOUNT }));
    list(spec, "volumes", pod)?.push(json!({ "name": volume, "hostPath": { "path": folder, "type": "Directory" } }));
    Ok(())
}

/// `object[key]` as a list, created when absent (or null).
fn list<'a>(object: &'a mut Map<String, Value>, key: &str, owner: &str) -> Result<&'a mut Vec<Value>, ManifestProblem> {
    let entry = object.entry(key).or_insert(Value::Null);
    if entry.is_null() {
        *entry = json!([]);
    }
    entry.as_array_mut().ok_or_else(|| ManifestProblem::NotAList { key: key.to_owned(), owner: owner.to_owned() })
}

fn free_name(taken: &[String]) -> String {
    let mut name = VOLUME_NAME.to_owned();
    let mut n = 1;
    while taken.contains(&name) {
        n += 1;
        name = format!("{VOLUME_NAME}-{n}");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOLDER: &str = "/tmp/ankaios/a_io/w.1.a/control_interface";

    const WEB: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: frontend
    image: localhost/busybox:latest
  - name: sidecar
    image: localhost/busybox:latest
";

    fn inject_into(manifest: &str, target: &str) -> Result<Vec<Value>, TargetError> {
        let played = inject(manifest, Some(target), Path::new(FOLDER))?;
        Ok(serde_saphyr::from_multiple(&played).expect("the result reads back"))
    }

    fn volume(name: &str) -> Value {
        json!({ "name": name, "hostPath": { "path": FOLDER, "type": "Directory" } })
    }

    fn mount(name: &str) -> Value {
        json!({ "name": name, "mountPath": "/run/ankaios/control_interface" })
    }

    #[test]
    fn control_interface_target_parses_pod_and_container() {
        let t = ControlInterfaceTarget::parse("web/frontend").unwrap();
        assert_eq!(t, ControlInterfaceTarget { pod: "web".into(), container: "frontend".into() });
        for bad in ["web", "web/", "/frontend", "a/b/c", ""] {
            let e = ControlInterfaceTarget::parse(bad).unwrap_err().to_string();
            assert_eq!(e, format!("controlInterfaceTarget '{bad}': expected '<pod>/<container>', e.g. 'web/frontend'"));
        }
    }

    #[test]
    fn control_interface_target_injects_into_a_single_pod() {
        let docs = inject_into(WEB, "web/sidecar").unwrap();
        assert_eq!(docs.len(), 1);
        let spec = &docs[0]["spec"];
        assert_eq!(spec["volumes"], json!([volume("control-interface-volume")]));
        assert_eq!(spec["containers"][1]["volumeMounts"], json!([mount("control-interface-volume")]));
        assert_eq!(spec["containers"][1]["image"], "localhost/busybox:latest");
        assert!(spec["containers"][0].get("volumeMounts").is_none(), "only the target container mounts it");
        assert_eq!(docs[0]["metadata"], json!({ "name": "web" }));
        assert_eq!(docs[0]["apiVersion"], "v1");
    }

    #[test]
    fn control_interface_target_keeps_the_other_documents() {
        let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  mode: '0644'\n";
        let other = WEB.replace("name: web", "name: db");
        let manifest = format!("{config_map}---\n{other}---\n{WEB}");
        let docs = inject_into(&manifest, "web/frontend").unwrap();
        assert_eq!(docs.len(), 3);
        let original: Vec<Value> = serde_saphyr::from_multiple(&manifest).unwrap();
        assert_eq!(docs[0], original[0], "the ConfigMap is unchanged");
        assert_eq!(docs[1], original[1], "the other pod is unchanged");
        assert_eq!(docs[2]["spec"]["volumes"], json!([volume("control-interface-volume")]));
        assert_eq!(docs[2]["spec"]["containers"][0]["volumeMounts"], json!([mount("control-interface-volume")]));
    }

    #[test]
    fn control_interface_target_keeps_existing_volumes_and_mounts() {
        let manifest = "kind: Pod
metadata: {name: web}
spec:
  volumes:
  - name: control-interface-volume
    emptyDir: {}
  - name: data
    hostPath: {path: /srv/data}
  containers:
  - name: frontend
    volumeMounts:
    - {name: data, mountPath: /data, readOnly: true}
";
        let docs = inject_into(manifest, "web/frontend").unwrap();
        let spec = &docs[0]["spec"];
        assert_eq!(
            spec["volumes"],
            json!([
                { "name": "control-interface-volume", "emptyDir": {} },
                { "name": "data", "hostPath": { "path": "/srv/data" } },
                volume("control-interface-volume-2"),
            ])
        );
        assert_eq!(
            spec["containers"][0]["volumeMounts"],
            json!([{ "name": "data", "mountPath": "/data", "readOnly": true }, mount("control-interface-volume-2")])
        );
    }

    #[test]
    fn control_interface_target_injects_into_a_deployment_template() {
        let manifest = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: frontend, image: localhost/busybox:latest}
";
        // podman names the Deployment's pod `web-pod` (Ankaios'
        // multi_container_podman_kube_deployment.yaml targets `pod_A-pod`).
        let docs = inject_into(manifest, "web-pod/frontend").unwrap();
        let template = &docs[0]["spec"]["template"];
        assert_eq!(template["spec"]["volumes"], json!([volume("control-interface-volume")]));
        assert_eq!(template["spec"]["containers"][0]["volumeMounts"], json!([mount("control-interface-volume")]));
        assert_eq!(template["metadata"], json!({ "labels": { "app": "web" } }));
        assert_eq!(docs[0]["spec"]["replicas"], 1);
        let e = inject(manifest, Some("web/frontend"), Path::new(FOLDER)).unwrap_err().to_string();
        assert_eq!(
            e,
            "controlInterfaceTarget 'web/frontend': the manifest has no Pod or Deployment named 'web' (pods: web-pod)"
        );
    }

    #[test]
    fn control_interface_target_reads_yaml_as_kubernetes_does() {
        let manifest = format!("{WEB}  volumes:\n  - name: s\n    secret: {{secretName: s, defaultMode: 0644}}\n");
        let manifest = manifest.replace("  - name: sidecar\n", "  - name: sidecar\n    stdin: yes\n");
        let docs = inject_into(&manifest, "web/frontend").unwrap();
        assert_eq!(docs[0]["spec"]["volumes"][0]["secret"]["defaultMode"], 0o644, "YAML 1.1 octal");
        assert_eq!(docs[0]["spec"]["containers"][1]["stdin"], true, "YAML 1.1 boolean");
    }

    #[test]
    fn control_interface_target_missing_is_an_error() {
        let e = inject(WEB, None, Path::new(FOLDER)).unwrap_err().to_string();
        assert!(e.contains("needs 'controlInterfaceTarget: <pod>/<container>'"), "{e}");
    }

    #[test]
    fn control_interface_target_of_bad_format_is_an_error() {
        let e = inject(WEB, Some("frontend"), Path::new(FOLDER)).unwrap_err().to_string();
        assert_eq!(e, "controlInterfaceTarget 'frontend': expected '<pod>/<container>', e.g. 'web/frontend'");
    }

    #[test]
    fn control_interface_target_naming_an_unknown_pod_is_an_error() {
        let manifest = format!("{}---\n{WEB}", WEB.replace("name: web", "name: db"));
        let e = inject(&manifest, Some("cache/frontend"), Path::new(FOLDER)).unwrap_err().to_string();
        assert_eq!(
            e,
            "controlInterfaceTarget 'cache/frontend': the manifest has no Pod or Deployment named 'cache' (pods: db, web)"
        );
        let e = inject("kind: ConfigMap\nmetadata: {name: web}\n", Some("web/x"), Path::new(FOLDER))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "controlInterfaceTarget 'web/x': the manifest has no Pod or Deployment named 'web' (pods: none)");
    }

    #[test]
    fn control_interface_target_naming_an_unknown_container_is_an_error() {
        let e = inject(WEB, Some("web/x"), Path::new(FOLDER)).unwrap_err().to_string();
        assert_eq!(
            e,
            "controlInterfaceTarget 'web/x': the pod 'web' has no container 'x' (containers: frontend, sidecar)"
        );
    }

    #[test]
    fn control_interface_target_in_an_unreadable_manifest_is_an_error() {
        let e = inject("kind: Pod\n  bad: [\n", Some("web/x"), Path::new(FOLDER)).unwrap_err().to_string();
        assert!(e.starts_with("controlInterfaceTarget 'web/x': cannot read the manifest: "), "{e}");
        let e = inject("kind: Pod\nmetadata: {name: web}\nspec: {containers: 5}\n", Some("web/x"), Path::new(FOLDER))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "controlInterfaceTarget 'web/x': the pod 'web' has no list of containers");
        let e =
            inject(&format!("{WEB}  volumes: 3\n"), Some("web/frontend"), Path::new(FOLDER)).unwrap_err().to_string();
        assert_eq!(e, "controlInterfaceTarget 'web/frontend': 'volumes' of 'web' is not a list");
        let e = inject("kind: Deployment\nmetadata: {name: web}\nspec: 5\n", Some("web-pod/x"), Path::new(FOLDER))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "controlInterfaceTarget 'web-pod/x': 'spec.template.spec' of the pod 'web-pod' is not an object");
    }

    #[test]
    fn control_interface_target_container_mounting_the_path_already_is_an_error() {
        let manifest = "kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: frontend
    volumeMounts: [{name: mine, mountPath: /run/ankaios/control_interface/}]
";
        let e = inject(manifest, Some("web/frontend"), Path::new(FOLDER)).unwrap_err().to_string();
        assert_eq!(
            e,
            "controlInterfaceTarget 'web/frontend': the container 'frontend' already mounts something at \
             /run/ankaios/control_interface"
        );
    }
}

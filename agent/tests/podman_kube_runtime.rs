//! The podman-kube runtime connector against real podman: play, state via
//! the polling checker, volumes for an agent restart, failure and down, and
//! the control interface mounted into the `controlInterfaceTarget`.

use std::process::Command;
use std::time::Duration;

use ank_agent::runtime_connectors::podman::PodmanCli;
use ank_agent::runtime_connectors::podman_kube::PodmanKubeRuntime;
use ank_agent::runtime_connectors::{CreateOptions, Observed, RuntimeConnector, RuntimeError, RuntimeEvent};
use ank_common::execution_state::Failed;
use ank_common::workload::{Workload, WorkloadSpec};
use ank_common::{AgentName, StateKind, WorkloadName};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(30);

fn require_podman() {
    let ok = Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "podman not found: run tools/setup.sh");
    let image = Command::new("podman").args(["image", "exists", "localhost/busybox:latest"]).status();
    assert!(image.is_ok_and(|s| s.success()), "image localhost/busybox:latest missing: run tools/setup.sh");
}

fn manifest(pod: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"/bin/sh\", \"-c\", \"{script}\"]\n"
    )
}

fn spec(agent: &str, name: &str, manifest: &str) -> WorkloadSpec {
    spec_with(agent, name, manifest, "")
}

/// A podman-kube workload spec with `extra` runtimeConfig lines.
fn spec_with(agent: &str, name: &str, manifest: &str, extra: &str) -> WorkloadSpec {
    let indented: String = manifest.lines().map(|l| format!("  {l}\n")).collect();
    let wl = Workload {
        agent: agent.into(),
        runtime: "podman-kube".into(),
        runtime_config: format!("downOptions: []\n{extra}manifest: |\n{indented}"),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new(agent).unwrap(), wl)
}

/// Removes the test's pods and volumes, also when the test fails.
struct Cleanup {
    pods: Vec<String>,
    agent: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pod in &self.pods {
            let _ = Command::new("podman").args(["pod", "rm", "-f", "-t", "0", pod]).output();
        }
        let filter = format!("label=agent={}", self.agent);
        if let Ok(out) = Command::new("podman").args(["volume", "ls", "-q", "--filter", &filter]).output() {
            for v in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("podman").args(["volume", "rm", "-f", v]).output();
            }
        }
    }
}

fn volume_exists(name: &str) -> bool {
    Command::new("podman").args(["volume", "exists", name]).status().is_ok_and(|s| s.success())
}

async fn next_state(rx: &mut mpsc::Receiver<RuntimeEvent>) -> Observed {
    match tokio::time::timeout(WAIT, rx.recv()).await.expect("a state within 30 s").expect("checker alive") {
        RuntimeEvent::Changed { observed, .. } => observed,
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
// [stest->swdd~agent-supports-podman-kube-runtime~1]
// [stest->swdd~podman-kube-create-workload-apply-manifest~1]
// [stest->swdd~podman-kube-create-workload-creates-config-volume~1]
// [stest->swdd~podman-kube-create-workload-creates-pods-volume~1]
// [stest->swdd~podman-kube-delete-workload-downs-manifest-file~1]
// [stest->swdd~podman-kube-delete-removes-volumes~1]
// [stest->swdd~podman-kube-implements-runtime-connector~1]
// [stest->swdd~podman-kube-create-workload-returns-workload-id~1]
// [stest->swdd~podman-kube-list-existing-workloads-using-config-volumes~1]
// [stest->swdd~podman-kube-create-starts-podman-kube-state-getter~1]
// [stest->swdd~podman-kube-implements-runtime-state-getter~1]
// [stest->swdd~podman-kube-uses-podman-cli~1]
// [stest->swdd~podman-kube-workload-id]
async fn podman_kube_plays_watches_finds_and_downs_a_pod() {
    require_podman();
    let agent = format!("kube_{}", std::process::id());
    let pod = format!("kpod-{}", std::process::id());
    let _cleanup = Cleanup { pods: vec![pod.clone()], agent: agent.clone() };
    let rt = PodmanKubeRuntime::new(PodmanCli::default());
    let w = spec(&agent, "web", &manifest(&pod, "sleep 3600"));
    let id = rt.create(&w, &CreateOptions::default()).await.expect("kube play");
    let instance = w.instance_name.to_string();
    assert!(volume_exists(&format!("{instance}.config")) && volume_exists(&format!("{instance}.pods")));

    let (tx, mut rx) = mpsc::channel(16);
    let _checker = rt.start_state_checker(&w.instance_name, &id, tx).expect("kube has a checker");
    let mut state = next_state(&mut rx).await;
    while !matches!(&state, Observed::State(s) if s.kind == StateKind::Running) {
        state = next_state(&mut rx).await;
    }

    assert_eq!(rt.workload_id(&w.instance_name).await.unwrap(), Some(id.clone()), "id rebuilt from the volumes");
    let listed = rt.list_workloads(&agent).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].workload_id, id);
    assert_eq!(listed[0].state.kind, StateKind::Running);

    rt.delete(&id).await.expect("kube down");
    let pods = Command::new("podman").args(["pod", "exists", &pod]).status().unwrap();
    assert!(!pods.success(), "pod removed");
    assert!(!volume_exists(&format!("{instance}.config")) && !volume_exists(&format!("{instance}.pods")));
    assert_eq!(next_state(&mut rx).await, Observed::Gone);
    assert!(rt.list_workloads(&agent).await.unwrap().is_empty());
    rt.delete(&id).await.expect("a second down of a gone pod is fine");
}

#[tokio::test]
async fn podman_kube_container_exiting_3_is_failed_exec_failed() {
    require_podman();
    let agent = format!("kubefail_{}", std::process::id());
    let pod = format!("kfail-{}", std::process::id());
    let _cleanup = Cleanup { pods: vec![pod.clone()], agent: agent.clone() };
    let rt = PodmanKubeRuntime::new(PodmanCli::default());
    let w = spec(&agent, "job", &manifest(&pod, "sleep 0.5; exit 3"));
    let id = rt.create(&w, &CreateOptions::default()).await.expect("kube play");
    let (tx, mut rx) = mpsc::channel(16);
    let _checker = rt.start_state_checker(&w.instance_name, &id, tx).unwrap();
    loop {
        if let Observed::State(s) = next_state(&mut rx).await
            && s.kind == StateKind::Failed(Failed::ExecFailed)
        {
            assert_eq!(s.additional_info, "Exit code: '3'");
            break;
        }
    }
    rt.delete(&id).await.unwrap();
}

#[tokio::test]
async fn podman_kube_manifest_podman_rejects_is_a_create_error_naming_it() {
    require_podman();
    let agent = format!("kubebad_{}", std::process::id());
    let _cleanup = Cleanup { pods: vec![], agent: agent.clone() };
    let rt = PodmanKubeRuntime::new(PodmanCli::default());
    let w = spec(
        &agent,
        "bad",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: 'Not A Valid Name!'\nspec:\n  containers: 5\n",
    );
    let err = rt.create(&w, &CreateOptions::default()).await.unwrap_err();
    let RuntimeError::Create(message) = &err else { panic!("{err:?}") };
    assert!(!message.message().is_empty(), "podman's error is passed on");
    assert!(!volume_exists(&format!("{}.config", w.instance_name)), "nothing left behind");
}

#[tokio::test]
// [stest->swdd~podman-kube-create-continues-if-cannot-create-volume~1]
async fn podman_kube_plays_even_when_its_volumes_cannot_be_created() {
    use std::os::unix::fs::PermissionsExt;

    require_podman();
    let agent = format!("kubenovol_{}", std::process::id());
    let pod = format!("knovol-{}", std::process::id());
    let _cleanup = Cleanup { pods: vec![pod.clone()], agent: agent.clone() };
    // A podman whose `volume create` always fails.
    let dir = tempfile::tempdir().unwrap();
    let shim = dir.path().join("podman");
    std::fs::write(
        &shim,
        "#!/bin/sh\nif [ \"$1\" = volume ] && [ \"$2\" = create ]; then echo 'Error: no space' >&2; exit 125; fi\nexec podman \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rt = PodmanKubeRuntime::new(PodmanCli { binary: shim, stop_timeout_secs: 1, ..PodmanCli::default() });
    let w = spec(&agent, "novol", &manifest(&pod, "sleep 3600"));
    let id = rt.create(&w, &CreateOptions::default()).await.expect("played despite the volumes");
    assert!(!volume_exists(&format!("{}.config", w.instance_name)));
    let pods = Command::new("podman").args(["pod", "exists", &pod]).status().unwrap();
    assert!(pods.success(), "the pod runs");
    rt.delete(&id).await.expect("down works with the id alone");
}

#[tokio::test]
async fn podman_kube_delete_removes_the_remaining_pods_when_one_is_already_gone() {
    require_podman();
    let agent = format!("kubetwo_{}", std::process::id());
    let (p1, p2) = (format!("ktwo-a-{}", std::process::id()), format!("ktwo-b-{}", std::process::id()));
    let _cleanup = Cleanup { pods: vec![p1.clone(), p2.clone()], agent: agent.clone() };
    let rt = PodmanKubeRuntime::new(PodmanCli::default());
    let both = format!("{}---\n{}", manifest(&p1, "sleep 3600"), manifest(&p2, "sleep 3600"));
    let w = spec(&agent, "two", &both);
    let id = rt.create(&w, &CreateOptions::default()).await.expect("kube play of two pods");
    let exists = |p: &str| Command::new("podman").args(["pod", "exists", p]).status().unwrap().success();
    assert!(exists(&p1) && exists(&p2));
    let o = Command::new("podman").args(["pod", "rm", "-f", "-t", "0", &p1]).output().unwrap();
    assert!(o.status.success());
    rt.delete(&id).await.expect("delete");
    assert!(!exists(&p2), "the pod kube down left behind is removed too");
}

#[tokio::test]
async fn podman_kube_mounts_the_control_interface_into_the_target_container() {
    use nix::sys::stat::Mode;
    use tokio::io::AsyncReadExt;
    use tokio::net::unix::pipe;

    require_podman();
    let agent = format!("kubeci_{}", std::process::id());
    let (other, web) = (format!("kci-other-{}", std::process::id()), format!("kci-web-{}", std::process::id()));
    let _cleanup = Cleanup { pods: vec![other.clone(), web.clone()], agent: agent.clone() };
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("control_interface");
    std::fs::create_dir(&folder).unwrap();
    for fifo in ["input", "output"] {
        nix::unistd::mkfifo(&folder.join(fifo), Mode::from_bits_truncate(0o600)).expect("mkfifo");
    }
    // Opened read-write, so that neither side waits for the other to open it.
    let mut output = pipe::OpenOptions::new().read_write(true).open_receiver(folder.join("output")).unwrap();

    // The target pod is the second document and has a second container.
    let writer = "echo hello > /run/ankaios/control_interface/output; sleep 3600";
    let target_pod = format!(
        "{}  - name: sidecar\n    image: localhost/busybox:latest\n    imagePullPolicy: Never\n    command: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\n",
        manifest(&web, writer)
    );
    let both = format!("{}---\n{target_pod}", manifest(&other, "sleep 3600"));
    let w = spec_with(&agent, "ci", &both, &format!("controlInterfaceTarget: {web}/main\n"));
    let options = CreateOptions { control_interface: Some(folder.clone()), files: vec![] };
    let id = rt_default().create(&w, &options).await.expect("kube play with the control interface");

    let mut line = [0u8; 6];
    tokio::time::timeout(WAIT, output.read_exact(&mut line)).await.expect("the container writes within 30 s").unwrap();
    assert_eq!(&line, b"hello\n", "written by the container into the host's output FIFO");

    let ls = |container: &str| {
        let path = "/run/ankaios/control_interface";
        let o = Command::new("podman").args(["exec", container, "/bin/ls", "-l", path]).output().unwrap();
        (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (ok, listing) = ls(&format!("{web}-main"));
    assert!(ok, "the target container sees the folder");
    let fifos: Vec<&str> = listing.lines().filter(|l| l.starts_with('p')).collect();
    assert_eq!(fifos.len(), 2, "input and output are FIFOs in the container: {listing}");
    assert!(fifos[0].ends_with(" input") && fifos[1].ends_with(" output"), "{listing}");
    assert!(!ls(&format!("{web}-sidecar")).0, "the other container of the pod has no control interface");
    assert!(!ls(&format!("{other}-main")).0, "the other pod has no control interface");

    // After an agent restart the id comes from the stored (original) manifest: its `kube down` removes both pods.
    let rt = rt_default();
    let stored = rt.workload_id(&w.instance_name).await.unwrap().expect("id from the volumes");
    assert_eq!(stored, id);
    rt.delete(&stored).await.expect("kube down");
    let exists = |p: &str| Command::new("podman").args(["pod", "exists", p]).status().unwrap().success();
    assert!(!exists(&web) && !exists(&other), "both pods removed");
}

fn rt_default() -> PodmanKubeRuntime {
    PodmanKubeRuntime::new(PodmanCli::default())
}

//! Adversarial suite, trust boundary "a local non-root user on the node":
//! they may create files in the temporary directory before the agent does
//! (a planted run folder), swap a FIFO for a link when they can reach it,
//! and try to read what the agent writes (rendered configs in workload
//! files, the control-interface FIFOs). Each test is one "must not". The
//! other user is `nobody` (uid 65534), played with `setpriv`; the tests
//! run as root, as the agent does with rootful podman.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use ank_agent::control_interface::fifo;
use ank_agent::{AgentConfig, RuntimeRegistry};
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;
use tokio_util::sync::CancellationToken;

const NOBODY: u32 = 65534;

/// Runs `sh -c script` as `nobody`: whether it failed for lack of
/// permission (any other outcome, success or another error, is false).
fn denied_to_nobody(script: &str) -> bool {
    assert!(nix::unistd::geteuid().is_root(), "these tests play another user, so they run as root");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", script])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("setpriv (util-linux) is needed to play another local user");
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("Permission denied")
}

fn chown_to_nobody(path: &Path) {
    nix::unistd::chown(path, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
}

/// Starts the agent alone on `run_folder` (no server: it fails at its run
/// folder before it connects, or runs until stopped) and returns how its
/// start ended within 2 s of paused time.
async fn agent_start(run_folder: &Path) -> Option<anyhow::Result<()>> {
    let stop = CancellationToken::new();
    let config =
        AgentConfig { run_folder: run_folder.to_path_buf(), ..AgentConfig::new("agent_A", "http://127.0.0.1:1") };
    let task = tokio::spawn(ank_agent::run(config, RuntimeRegistry::new(), stop.clone()));
    let ended = tokio::time::timeout(Duration::from_secs(2), task).await.ok().map(Result::unwrap);
    stop.cancel();
    ended
}

#[tokio::test(start_paused = true)]
async fn must_not_hand_the_agent_a_run_folder_they_own() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("ankaios");
    std::fs::create_dir(&run).unwrap();
    chown_to_nobody(&run);
    let e = agent_start(&run).await.expect("the agent refuses at once").unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("is owned by uid 65534, not by the agent's user"), "{e}");
    assert!(!run.join("agent_A_io").exists(), "nothing written in it");
}

#[tokio::test(start_paused = true)]
async fn must_not_hand_the_agent_a_run_folder_link() {
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let run = tmp.path().join("ankaios");
    std::os::unix::fs::symlink(&theirs, &run).unwrap();
    let e = format!("{:#}", agent_start(&run).await.expect("the agent refuses at once").unwrap_err());
    assert!(e.contains("is not a directory (a symbolic link is refused)"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn must_not_plant_the_agents_io_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let io = tmp.path().join("agent_A_io");
    std::fs::create_dir(&io).unwrap();
    chown_to_nobody(&io);
    let e = format!("{:#}", agent_start(tmp.path()).await.expect("the agent refuses at once").unwrap_err());
    assert!(e.contains("agent_A_io' is owned by uid 65534"), "{e}");
    // Owned by the agent's user but open to all: they could have put
    // links in it.
    nix::unistd::chown(&io, Some(0.into()), Some(0.into())).unwrap();
    std::fs::set_permissions(&io, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = format!("{:#}", agent_start(tmp.path()).await.expect("the agent refuses at once").unwrap_err());
    assert!(e.contains("is writable by group or others (mode 0777)"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn must_not_write_into_a_world_writable_default_style_run_folder() {
    // Ankaios leaves its default run folder 0777; the agent owns it, so it
    // takes the write bits away instead of refusing to start.
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("ankaios");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(agent_start(&run).await.is_none_or(|r| r.is_ok()), "the agent starts");
    assert_eq!(std::fs::metadata(&run).unwrap().permissions().mode() & 0o777, 0o755);
    assert!(denied_to_nobody(&format!("touch {}/planted", run.display())), "nobody can write there now");
}

#[tokio::test]
async fn must_not_swap_a_fifo_for_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("w.1/control_interface");
    fifo::create_pipes(&folder).unwrap();
    // A link in place of a FIFO, planted between the agent's check and its
    // open: the open refuses to follow it.
    let target = tmp.path().join("target");
    std::fs::write(&target, "untouched").unwrap();
    std::fs::remove_file(fifo::input_pipe(&folder)).unwrap();
    std::os::unix::fs::symlink(&target, fifo::input_pipe(&folder)).unwrap();
    let e = fifo::open_pipes(&folder).unwrap_err();
    assert!(e.to_string().contains("is a symbolic link, not a FIFO: refused"), "{e}");
    // Created again, the link is replaced by a FIFO, not followed.
    fifo::create_pipes(&folder).unwrap();
    let meta = std::fs::symlink_metadata(fifo::input_pipe(&folder)).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
}

const WITH_SECRET_FILE: &str = "apiVersion: v1
workloads:
  app:
    runtime: podman
    agent: agent_A
    configs:
      db: db
    files:
      - mountPoint: /etc/app/db.conf
        data: \"password={{db.password}}\"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"desiredState.workloads.app\"]
    runtimeConfig: |
      image: localhost/busybox:latest
configs:
  db:
    password: s3cr3t
";

/// An in-process server and agent running `app` (a rendered secret in a
/// workload file, and a control interface); the fake runtime's options.
async fn running_app() -> (InProcess, ank_agent::runtime_connectors::CreateOptions) {
    // The run folder as the default one is: readable by all.
    let p = InProcess::start_with(|config| {
        std::fs::set_permissions(&config.run_folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    })
    .await;
    let mut c = Commander::connect(&p.url).await;
    c.apply(WITH_SECRET_FILE).await;
    c.wait_for_state("app", "Running(Ok)").await;
    let app = p.fake.created().into_iter().find(|n| n.workload_name == "app").unwrap();
    let options = p.fake.options_of(&app).unwrap();
    (p, options)
}

#[tokio::test]
async fn must_not_read_a_workload_files_rendered_secret() {
    let (p, options) = running_app().await;
    let file = &options.files[0].host_path;
    assert_eq!(std::fs::read_to_string(file).unwrap(), "password=s3cr3t", "the agent wrote it");
    assert!(denied_to_nobody(&format!("cat {}", file.display())), "nobody reads '{}'", file.display());
    let io = p.run_folder().join("agent_A_io");
    assert_eq!(std::fs::metadata(&io).unwrap().mode() & 0o777, 0o700);
    assert!(denied_to_nobody(&format!("ls {}", io.display())), "nobody lists the workloads' folders");
    p.stop();
}

#[tokio::test]
async fn must_not_talk_on_a_workloads_control_interface() {
    let (p, options) = running_app().await;
    let folder = options.control_interface.expect("app has a control interface");
    // Not even with the FIFOs' path known: the folders are closed to them.
    let output = fifo::output_pipe(&folder);
    assert!(denied_to_nobody(&format!("printf x > {}", output.display())), "nobody writes requests");
    let input = fifo::input_pipe(&folder);
    assert!(denied_to_nobody(&format!("timeout 5 head -c1 < {}", input.display())), "nobody reads answers");
    p.stop();
}

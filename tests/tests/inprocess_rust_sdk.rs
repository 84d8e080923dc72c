//! The official Ankaios Rust SDK (`ankaios_sdk` from crates.io, unchanged)
//! drives our in-process server and agent (FakeRuntime): once over the
//! command interface (gRPC, as a commander next to `ank`) and once from
//! inside a workload over the control-interface FIFOs our agent serves.
//! Every test also asserts that the SDK logged no warning or error, so a
//! message the SDK does not expect (e.g. a workload-state push to a
//! commander) fails the test.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;
use ankaios_sdk::{
    Ankaios, AnkaiosError, GrpcConfig, LogResponse, LogsRequest, Manifest, WorkloadInstanceName, WorkloadStateEnum,
};

/// A `log` sink that keeps every warning and error the SDK logs.
struct SdkLog(Mutex<Vec<String>>);

impl log::Log for SdkLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn && metadata.target().starts_with("ankaios_sdk")
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            self.0.lock().unwrap().push(format!("{} {}: {}", record.level(), record.target(), record.args()));
        }
    }

    fn flush(&self) {}
}

/// Installs the capturing logger once per test process and returns it.
fn sdk_log() -> &'static SdkLog {
    static LOG: OnceLock<&'static SdkLog> = OnceLock::new();
    LOG.get_or_init(|| {
        let sink: &'static SdkLog = Box::leak(Box::new(SdkLog(Mutex::new(Vec::new()))));
        log::set_logger(sink).expect("no other logger in this test process");
        log::set_max_level(log::LevelFilter::Warn);
        sink
    })
}

/// Warnings and errors the SDK logged so far.
fn sdk_complaints() -> Vec<String> {
    sdk_log().0.lock().unwrap().clone()
}

const NGINX: &str = "apiVersion: v1
workloads:
  nginx:
    runtime: podman
    agent: agent_A
    restartPolicy: NEVER
    tags:
      owner: sdk
    runtimeConfig: |
      image: localhost/busybox:latest
";

const NGINX_CHANGED: &str = "apiVersion: v1
workloads:
  nginx:
    runtime: podman
    agent: agent_A
    restartPolicy: NEVER
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [sleep, '1000']
";

const SDK_APP: &str = "apiVersion: v1
workloads:
  sdk_app:
    runtime: podman
    agent: agent_A
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: [\"desiredState\", \"configs\"]
        - type: StateRule
          operation: Read
          filterMasks: [\"workloadStates\"]
        - type: LogRule
          workloadNames: [\"nginx\"]
      denyRules:
        - type: StateRule
          operation: Write
          filterMasks: [\"desiredState.workloads.sdk_app\"]
    runtimeConfig: |
      image: localhost/busybox:latest
";

async fn connect_commander(url: &str) -> Ankaios {
    Ankaios::builder()
        .command_interface(GrpcConfig::insecure(url))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .expect("the SDK connects over the command interface")
}

/// Polls the server through the SDK until `agent_A` has said hello.
async fn wait_for_agent(ank: &mut Ankaios) {
    let connected = async || ank.get_agents().await.expect("get agents").contains_key("agent_A").then_some(());
    ank_tests::eventually("agent_A connected", Duration::from_secs(5), connected).await
}

/// Polls until the desired state has no workload `name`.
async fn wait_until_gone(ank: &mut Ankaios, name: &str) {
    let gone = async || ank.get_workload(name.to_owned()).await.expect("get workload").is_empty().then_some(());
    ank_tests::eventually(&format!("{name} gone from the desired state"), Duration::from_secs(5), gone).await
}

/// Polls until the workload-state list has no entry of `name`.
async fn wait_until_no_state(ank: &mut Ankaios, name: &str) {
    let gone = async || {
        let states = ank.get_workload_states_for_name(name.to_owned()).await.expect("states for name");
        states.as_list().is_empty().then_some(())
    };
    ank_tests::eventually(&format!("the state of {name} removed"), Duration::from_secs(5), gone).await
}

fn fake_instance(fake: &FakeRuntime, sdk: &WorkloadInstanceName) -> ank_common::WorkloadInstanceName {
    fake.created()
        .into_iter()
        .find(|n| n.workload_name == sdk.workload_name && n.id == sdk.workload_id)
        .unwrap_or_else(|| panic!("the fake never created {sdk:?}"))
}

/// Workload, config, state, event and log calls of the SDK against our
/// server and agent, whichever interface `ank` uses. `fake` feeds the log
/// lines the SDK asks for.
async fn drive_sdk(ank: &mut Ankaios, fake: &FakeRuntime) {
    // Apply: the SDK reads the added instance names from UpdateStateSuccess.
    let applied = ank.apply_manifest(Manifest::from_string(NGINX).unwrap()).await.expect("apply manifest");
    assert_eq!(applied.added_workloads.len(), 1, "{applied:?}");
    assert!(applied.deleted_workloads.is_empty(), "{applied:?}");
    let nginx = applied.added_workloads[0].clone();
    assert_eq!((nginx.workload_name.as_str(), nginx.agent_name.as_str()), ("nginx", "agent_A"));
    assert!(!nginx.workload_id.is_empty());
    ank.wait_for_workload_to_reach_state(nginx.clone(), WorkloadStateEnum::Running)
        .await
        .expect("nginx reaches Running");

    // State reads.
    let state = ank.get_state(vec!["desiredState.workloads.nginx".into(), "workloadStates".into()]).await.unwrap();
    assert_eq!(state.get_api_version(), "v1");
    let workload = state.get_workload("nginx").expect("nginx in the desired state");
    assert_eq!(workload.get_tags(), HashMap::from([("owner".to_owned(), "sdk".to_owned())]));
    let exec = ank.get_execution_state_for_instance_name(&nginx).await.expect("execution state");
    assert_eq!(exec.state, WorkloadStateEnum::Running);
    let on_agent = ank.get_workload_states_on_agent("agent_A".into()).await.unwrap().as_list();
    assert!(on_agent.iter().any(|s| s.workload_instance_name == nginx), "{on_agent:?}");

    // Configs: set, add, read one and all, delete one and all.
    let configs = HashMap::from([
        ("greeting".to_owned(), serde_yaml_value("hi")),
        ("settings".to_owned(), serde_yaml_map(&[("level", "3")])),
    ]);
    ank.update_configs(configs.clone()).await.expect("update configs");
    assert_eq!(ank.get_configs().await.unwrap(), configs);
    ank.add_config("extra".into(), serde_yaml_value("x")).await.expect("add config");
    assert_eq!(
        ank.get_config("extra".into()).await.unwrap(),
        HashMap::from([("extra".to_owned(), serde_yaml_value("x"))])
    );
    ank.delete_config("greeting".into()).await.expect("delete config");
    let left: Vec<String> = ank.get_configs().await.unwrap().into_keys().collect();
    assert!(!left.contains(&"greeting".to_owned()) && left.len() == 2, "{left:?}");
    ank.delete_all_configs().await.expect("delete all configs");
    assert!(ank.get_configs().await.unwrap().is_empty());

    // Logs: the entries the runtime has, then a stop when cancelled.
    // The line is printed once the campaign is accepted: the SDK registers
    // its campaign only after the acceptance and drops entries before that.
    let mut campaign = ank
        .request_logs(LogsRequest { workload_names: vec![nginx.clone()], follow: true, ..Default::default() })
        .await
        .expect("request logs");
    assert_eq!(campaign.accepted_workload_names, vec![nginx.clone()]);
    fake.push_log(&fake_instance(fake, &nginx), "hello from nginx").await;
    let entries = match tokio::time::timeout(Duration::from_secs(10), campaign.logs_receiver.recv()).await {
        Ok(Some(LogResponse::LogEntries(entries))) => entries,
        other => panic!("expected log entries, got {other:?}"),
    };
    assert_eq!(entries.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["hello from nginx"]);
    assert_eq!(entries[0].workload_name, nginx);
    ank.stop_receiving_logs(campaign).await.expect("stop receiving logs");

    // Events: the current state first, then the change with its fields.
    let mut events = ank.register_event(vec!["desiredState.workloads.nginx".into()]).await.expect("register");
    let first = tokio::time::timeout(Duration::from_secs(10), events.events_receiver.recv()).await.unwrap().unwrap();
    assert_eq!(first.complete_state.get_workloads().iter().map(|w| w.name.clone()).collect::<Vec<_>>(), ["nginx"]);
    let changed = ank.apply_manifest(Manifest::from_string(NGINX_CHANGED).unwrap()).await.expect("change nginx");
    assert_eq!((changed.added_workloads.len(), changed.deleted_workloads.len()), (1, 1), "{changed:?}");
    assert_eq!(changed.deleted_workloads[0], nginx, "the old instance is the deleted one");
    let event = tokio::time::timeout(Duration::from_secs(10), events.events_receiver.recv()).await.unwrap().unwrap();
    let fields: Vec<&String> = event.added_fields.iter().chain(&event.updated_fields).collect();
    assert!(fields.iter().any(|f| f.starts_with("desiredState.workloads.nginx")), "{event:?}");
    ank.unregister_event(events).await.expect("unregister");
    let nginx = changed.added_workloads[0].clone();
    ank.wait_for_workload_to_reach_state(nginx, WorkloadStateEnum::Running).await.expect("new nginx runs");

    // Delete: the SDK reads the deleted instance from UpdateStateSuccess.
    let deleted = ank.delete_workload("nginx".into()).await.expect("delete workload");
    assert_eq!(deleted.deleted_workloads.iter().map(|n| n.workload_name.as_str()).collect::<Vec<_>>(), ["nginx"]);
    assert!(deleted.added_workloads.is_empty());
    wait_until_gone(ank, "nginx").await;
    wait_until_no_state(ank, "nginx").await;
}

fn serde_yaml_value(s: &str) -> serde_yaml::Value {
    serde_yaml::Value::String(s.to_owned())
}

fn serde_yaml_map(pairs: &[(&str, &str)]) -> serde_yaml::Value {
    serde_yaml::Value::Mapping(pairs.iter().map(|(k, v)| (serde_yaml_value(k), serde_yaml_value(v))).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn itest_rust_sdk_command_interface_drives_workloads_configs_events_and_logs() {
    sdk_log();
    let cluster = InProcess::start().await;
    let mut ank = connect_commander(&cluster.url).await;
    wait_for_agent(&mut ank).await;
    let agents = ank.get_agents().await.unwrap();
    assert_eq!(agents.keys().collect::<Vec<_>>(), ["agent_A"]);
    let tags = HashMap::from([("location".to_owned(), "lab".to_owned())]);
    ank.set_agent_tags("agent_A".into(), tags.clone()).await.expect("set agent tags");
    assert_eq!(ank.get_agent("agent_A".into()).await.unwrap().tags, tags);
    let full = ank.get_state(Vec::new()).await.expect("the whole state");
    assert_eq!(full.get_api_version(), "v1");
    assert!(full.get_agents().contains_key("agent_A"));

    drive_sdk(&mut ank, &cluster.fake).await;

    // An unknown agent is the SDK's own error, not a server error.
    assert!(matches!(ank.get_agent("nobody".into()).await, Err(AnkaiosError::AnkaiosResponseError(_))));
    // What the SDK said while it was used. When it is dropped, its reader
    // task can still see the server end the stream before its abort takes
    // effect (a race on a busy machine), which is no fault of the session.
    let complaints = sdk_complaints();
    drop(ank);
    cluster.stop();
    assert!(complaints.is_empty(), "the SDK logged warnings or errors:\n{}", complaints.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn itest_rust_sdk_command_interface_gets_a_refused_update_as_an_error_response() {
    sdk_log();
    let cluster = InProcess::start().await;
    let mut ank = connect_commander(&cluster.url).await;
    // Two workloads waiting for each other are refused by the server (the
    // SDK does not check this itself); the SDK hands the server's message
    // back as AnkaiosResponseError.
    let cycle = "apiVersion: v1
workloads:
  a:
    runtime: podman
    agent: agent_A
    dependencies:
      b: ADD_COND_RUNNING
    runtimeConfig: |
      image: localhost/busybox:latest
  b:
    runtime: podman
    agent: agent_A
    dependencies:
      a: ADD_COND_RUNNING
    runtimeConfig: |
      image: localhost/busybox:latest
";
    match ank.apply_manifest(Manifest::from_string(cycle).unwrap()).await {
        Err(AnkaiosError::AnkaiosResponseError(message)) => assert!(message.contains("cycle"), "{message}"),
        other => panic!("expected an error response, got {other:?}"),
    }
    assert!(ank.get_workload("a".into()).await.unwrap().is_empty());
    // Taken before the drop, as above.
    let complaints: Vec<String> =
        sdk_complaints().into_iter().filter(|c| !c.contains("Error while trying to apply manifest")).collect();
    drop(ank);
    cluster.stop();
    assert!(complaints.is_empty(), "the SDK logged warnings or errors:\n{}", complaints.join("\n"));
}

/// Waits until the fake created `name` with its FIFOs and returns their folder.
async fn control_interface_of(cluster: &InProcess, name: &str) -> PathBuf {
    let pipes = async || {
        let created = cluster.fake.created().into_iter().find(|n| n.workload_name == name);
        let folder = created.and_then(|i| cluster.fake.options_of(&i)).and_then(|o| o.control_interface)?;
        (folder.join("input").exists() && folder.join("output").exists()).then_some(folder)
    };
    ank_tests::eventually(&format!("{name} created with a control interface"), Duration::from_secs(10), pipes).await
}

/// Runs `body` on a thread of its own in a private mount namespace where
/// `folder` is bind-mounted at the fixed path the SDK opens
/// (`/run/ankaios/control_interface`, under a private tmpfs on `/run`),
/// as a container runtime would mount it; on a single-threaded runtime so
/// every task and blocking thread of the SDK shares that namespace.
fn in_workload_mount_namespace<F, Fut>(folder: PathBuf, body: F) -> std::thread::JoinHandle<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    use nix::mount::{MsFlags, mount};
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
            .expect("unshare a mount namespace (needs root / CAP_SYS_ADMIN)");
        mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
            .expect("make mounts private");
        mount(Some("tmpfs"), "/run", Some("tmpfs"), MsFlags::empty(), None::<&str>).expect("private /run");
        let target = Path::new("/run/ankaios/control_interface");
        std::fs::create_dir_all(target).expect("mount point");
        mount(Some(folder.as_path()), target, None::<&str>, MsFlags::MS_BIND, None::<&str>).expect("bind the FIFOs");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(body());
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// [itest->swdd~agent-uses-length-delimited-protobuf-for-pipes~1]
// [itest->swdd~agent-listens-for-requests-from-pipe~1]
async fn itest_rust_sdk_control_interface_drives_the_cluster_from_inside_a_workload() {
    sdk_log();
    let cluster = InProcess::start().await;
    // The SDK's own manifest parser rejects LogRule allow rules (it wants a
    // filter mask in every rule), so the workload comes in as `ank` would.
    let mut commander = Commander::connect(&cluster.url).await;
    commander.apply(SDK_APP).await;
    let folder = control_interface_of(&cluster, "sdk_app").await;

    let fake: Arc<FakeRuntime> = cluster.fake.clone();
    let workload = in_workload_mount_namespace(folder, move || async move {
        let mut ank = Ankaios::builder()
            .control_interface()
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("the SDK connects over the control interface");
        let own = ank.get_workload("sdk_app".into()).await.expect("read own workload");
        assert_eq!(own.len(), 1);
        drive_sdk(&mut ank, &fake).await;
        // Outside its rules: the SDK's delete is an UpdateState with the mask
        // `desiredState.workloads.sdk_app`, allowed by `desiredState` but
        // denied by the Write deny rule on that very path. As in Ankaios the
        // workload only learns "Access denied" (the reason stays in the log).
        match ank.delete_workload("sdk_app".into()).await {
            Err(AnkaiosError::AnkaiosResponseError(reason)) => assert_eq!(reason, "Access denied"),
            other => panic!("deleting itself must be denied, got {other:?}"),
        }
        // `agents` is not covered by any allow rule.
        match ank.get_agents().await {
            Err(AnkaiosError::AnkaiosResponseError(reason)) => assert_eq!(reason, "Access denied"),
            other => panic!("reading the agents must be denied, got {other:?}"),
        }
    });
    tokio::task::spawn_blocking(move || workload.join()).await.unwrap().expect("the SDK workload passed");
    // Taken before the commander is dropped, as above.
    let complaints: Vec<String> =
        sdk_complaints().into_iter().filter(|c| !c.contains("Error while trying to")).collect();
    drop(commander);
    cluster.stop();
    assert!(complaints.is_empty(), "the SDK logged warnings or errors:\n{}", complaints.join("\n"));
}

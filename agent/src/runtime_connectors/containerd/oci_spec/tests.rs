use std::path::PathBuf;

use serde_json::{Value, json};

use super::*;

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n# comment\nbroken line\n";
const GROUP: &str = "root:x:0:\nwheel:x:10:root,app\napp:x:1000:app\naudio:x:29:app\nstaff:x:50:\nwheel2:x:10:app\n";

fn rootfs(path: &str) -> Option<Vec<u8>> {
    match path {
        "/etc/passwd" => Some(PASSWD.as_bytes().to_vec()),
        "/etc/group" => Some(GROUP.as_bytes().to_vec()),
        _ => None,
    }
}

fn no_files(_: &str) -> Option<Vec<u8>> {
    None
}

fn image() -> ImageConfig {
    ImageConfig {
        env: vec!["PATH=/bin".into(), "LANG=C".into()],
        entrypoint: vec!["/entry".into()],
        cmd: vec!["serve".into(), "--port=80".into()],
        working_dir: "/srv".into(),
        ..Default::default()
    }
}

fn config(args: &[&str]) -> ContainerdRuntimeConfig {
    ContainerdRuntimeConfig {
        image: "example/app".into(),
        command_args: args.iter().map(|a| (*a).to_owned()).collect(),
        ..Default::default()
    }
}

fn run(options: &[&str]) -> RunOptions {
    let words: Vec<String> = options.iter().map(|s| (*s).to_owned()).collect();
    RunOptions::parse_with_env(&words, &|_| None).unwrap()
}

fn spec_with(
    image: &ImageConfig,
    config: &ContainerdRuntimeConfig,
    run: &RunOptions,
    netns: NetNamespace,
) -> Result<Value, SpecError> {
    let binds = [BindMount {
        source: "/host/ci".into(),
        destination: "/run/ankaios/control_interface".into(),
        read_only: false,
    }];
    let input = SpecInput {
        container_id: "0123456789abcdef",
        image,
        config,
        run,
        binds: &binds,
        hostname: "0123456789ab",
        etc_files: None,
        netns,
        cgroups_path: "/ankaios/0123456789abcdef".into(),
        all_capabilities: ALL_CAPABILITIES,
        rootfs_files: &rootfs,
    };
    build_json(&input).map(|bytes| serde_json::from_slice(&bytes).unwrap())
}

fn spec(options: &[&str], args: &[&str]) -> Value {
    spec_with(&image(), &config(args), &run(options), NetNamespace::New).unwrap()
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

#[test]
fn spec_has_containerds_frame() {
    let s = spec(&[], &[]);
    assert_eq!(s["ociVersion"], "1.0.2-dev");
    assert_eq!(s["root"], json!({"path": "rootfs", "readonly": false}));
    assert_eq!(s["hostname"], "0123456789ab");
    assert_eq!(s["process"]["terminal"], false);
    assert_eq!(s["process"]["noNewPrivileges"], false);
    assert_eq!(s["process"]["rlimits"], json!([{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}]));
    assert_eq!(s["linux"]["cgroupsPath"], "/ankaios/0123456789abcdef");
    assert_eq!(strings(&s["linux"]["maskedPaths"])[0], "/proc/acpi");
    assert_eq!(
        strings(&s["linux"]["readonlyPaths"]),
        ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
    );
    let devices = s["linux"]["resources"]["devices"].as_array().unwrap();
    assert_eq!(devices[0], json!({"allow": false, "access": "rwm"}));
    assert!(devices.contains(&json!({"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"})));
    assert!(devices.contains(&json!({"allow": true, "type": "c", "major": 136, "access": "rwm"})));
    assert!(s["linux"]["resources"].get("memory").is_none() && s["linux"]["resources"].get("cpu").is_none());
}

#[test]
fn spec_args_follow_dockers_entrypoint_rules() {
    let args = |options: &[&str], command: &[&str]| strings(&spec(options, command)["process"]["args"]);
    assert_eq!(args(&[], &[]), ["/entry", "serve", "--port=80"]);
    assert_eq!(args(&[], &["other"]), ["/entry", "other"]);
    assert_eq!(args(&["--entrypoint", "/bin/sh"], &[]), ["/bin/sh"], "--entrypoint drops the image's Cmd");
    assert_eq!(args(&["--entrypoint=/bin/sh"], &["-c", "id"]), ["/bin/sh", "-c", "id"]);
    assert_eq!(args(&["--entrypoint="], &["true"]), ["true"], "an empty --entrypoint removes the image's");
    let err = spec_with(&image(), &config(&[]), &run(&["--entrypoint", ""]), NetNamespace::New).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no command for image 'example/app': it has no Entrypoint or Cmd, and neither commandArgs nor --entrypoint give one"
    );
}

#[test]
fn spec_env_merges_path_image_hostname_and_user_entries_by_key() {
    let s = spec(&["-e", "LANG=de", "-e", "X=1", "-e", "X=2"], &[]);
    assert_eq!(strings(&s["process"]["env"]), ["PATH=/bin", "LANG=de", "HOSTNAME=0123456789ab", "X=2"]);
    let bare = ImageConfig { env: vec![], ..image() };
    let s = spec_with(&bare, &config(&[]), &run(&["-e", "HOSTNAME=mine"]), NetNamespace::New).unwrap();
    assert_eq!(
        strings(&s["process"]["env"]),
        ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=mine"]
    );
}

#[test]
fn spec_cwd_is_workdir_then_image_then_root() {
    assert_eq!(spec(&["-w", "/x"], &[])["process"]["cwd"], "/x");
    assert_eq!(spec(&[], &[])["process"]["cwd"], "/srv");
    let no_dir = ImageConfig { working_dir: String::new(), ..image() };
    assert_eq!(spec_with(&no_dir, &config(&[]), &run(&[]), NetNamespace::New).unwrap()["process"]["cwd"], "/");
}

#[test]
fn spec_user_resolves_numbers_and_names_in_the_images_files() {
    let user = |options: &[&str]| spec(options, &[])["process"]["user"].clone();
    assert_eq!(user(&[]), json!({"uid": 0, "gid": 0, "additionalGids": [10]}));
    assert_eq!(user(&["-u", "app"]), json!({"uid": 1000, "gid": 1000, "additionalGids": [10, 29]}));
    assert_eq!(user(&["-u", "1000"]), json!({"uid": 1000, "gid": 1000, "additionalGids": [10, 29]}));
    assert_eq!(user(&["-u", "4242"]), json!({"uid": 4242, "gid": 0}));
    assert_eq!(user(&["-u", "app:staff"]), json!({"uid": 1000, "gid": 50}));
    assert_eq!(user(&["-u", "7:8"]), json!({"uid": 7, "gid": 8}));
    let image_user = ImageConfig { user: "app".into(), ..image() };
    assert_eq!(
        spec_with(&image_user, &config(&[]), &run(&[]), NetNamespace::New).unwrap()["process"]["user"]["uid"],
        1000
    );
    let err =
        |options: &[&str]| spec_with(&image(), &config(&[]), &run(options), NetNamespace::New).unwrap_err().to_string();
    assert_eq!(err(&["-u", "nobody"]), "user 'nobody' is not in the image's /etc/passwd");
    assert_eq!(err(&["-u", "app:nogroup"]), "group 'nogroup' is not in the image's /etc/group");
    let input_without_files = |u: &str| user::resolve(u, &no_files);
    assert!(input_without_files("app").is_err());
    assert_eq!(input_without_files("5:6").unwrap(), model::User { uid: 5, gid: 6, additional_gids: vec![] });
}

#[test]
fn spec_capabilities_default_add_drop_and_privileged() {
    let caps = |options: &[&str]| strings(&spec(options, &[])["process"]["capabilities"]["bounding"]);
    assert_eq!(caps(&[]), defaults::DEFAULT_CAPABILITIES);
    let s = spec(&[], &[]);
    assert_eq!(s["process"]["capabilities"]["effective"], s["process"]["capabilities"]["permitted"]);
    let added = caps(&["--cap-add", "NET_ADMIN", "--cap-drop", "MKNOD", "--cap-drop", "CAP_NET_RAW"]);
    assert!(added.contains(&"CAP_NET_ADMIN".to_owned()));
    assert!(!added.contains(&"CAP_MKNOD".to_owned()) && !added.contains(&"CAP_NET_RAW".to_owned()));
    assert_eq!(added.len(), 13);
    assert_eq!(caps(&["--cap-drop", "ALL", "--cap-add", "KILL"]), ["CAP_KILL"]);
    assert_eq!(caps(&["--cap-add", "ALL"]).len(), ALL_CAPABILITIES.len());
    assert_eq!(caps(&["--privileged"]).len(), ALL_CAPABILITIES.len());
    assert_eq!(caps(&["--privileged", "--cap-drop", "SYS_ADMIN"]).len(), ALL_CAPABILITIES.len() - 1);
    let run = run(&["--privileged"]);
    let agents = ["CAP_CHOWN", "CAP_KILL"];
    assert_eq!(capabilities(&run, &agents).bounding, agents, "privileged grants the agent's own");
}

#[test]
fn spec_agent_capabilities_are_the_bits_of_its_bounding_set() {
    assert_eq!(defaults::capabilities_in(0b10_0001), ["CAP_CHOWN", "CAP_KILL"]);
    assert_eq!(defaults::capabilities_in(0x1ff_feff_ffff).len(), ALL_CAPABILITIES.len() - 1);
    assert!(!defaults::capabilities_in(0x1ff_feff_ffff).contains(&"CAP_SYS_RESOURCE"));
    assert_eq!(defaults::capabilities_in(u64::MAX), ALL_CAPABILITIES);
    assert!(agent_capabilities().iter().all(|c| ALL_CAPABILITIES.contains(c)));
}

#[test]
fn spec_privileged_unmasks_and_allows_all_devices() {
    let s = spec(&["--privileged"], &[]);
    assert!(s["linux"].get("maskedPaths").is_none() && s["linux"].get("readonlyPaths").is_none());
    assert_eq!(s["linux"]["resources"]["devices"], json!([{"allow": true, "access": "rwm"}]));
    assert_eq!(strings(&s["mounts"][5]["options"]), ["nosuid", "noexec", "nodev", "rw"]);
}

#[test]
fn spec_namespaces_for_host_new_and_joined_networks() {
    let kinds = |netns| {
        let s = spec_with(&image(), &config(&[]), &run(&[]), netns).unwrap();
        s["linux"]["namespaces"].clone()
    };
    let base = [json!({"type": "pid"}), json!({"type": "ipc"}), json!({"type": "uts"}), json!({"type": "mount"})];
    assert_eq!(kinds(NetNamespace::Host), json!(base));
    let mut new = base.to_vec();
    new.push(json!({"type": "network"}));
    assert_eq!(kinds(NetNamespace::New), json!(new));
    new[4] = json!({"type": "network", "path": "/var/run/netns/cni-1"});
    assert_eq!(kinds(NetNamespace::Path(PathBuf::from("/var/run/netns/cni-1"))), json!(new));
}

#[test]
fn spec_read_only_root_and_resources() {
    let s = spec(&["--read-only", "--memory", "256m", "--cpus", "1.5"], &[]);
    assert_eq!(s["root"]["readonly"], true);
    assert_eq!(s["linux"]["resources"]["memory"], json!({"limit": 268_435_456}));
    assert_eq!(s["linux"]["resources"]["cpu"], json!({"quota": 150_000, "period": 100_000}));
    assert_eq!(spec(&["--cpus=0.25"], &[])["linux"]["resources"]["cpu"]["quota"], 25_000);
}

#[test]
fn spec_mounts_system_then_etc_files_then_connector_then_user_binds() {
    let etc =
        EtcFiles { hosts: "/b/hosts".into(), resolv_conf: "/b/resolv.conf".into(), hostname: "/b/hostname".into() };
    let (img, cfg, opts) = (image(), config(&[]), run(&["-v", "/data:/data:ro", "--mount", "type=bind,src=/s,dst=/d"]));
    let binds = [BindMount {
        source: "/host/ci".into(),
        destination: "/run/ankaios/control_interface".into(),
        read_only: false,
    }];
    let input = SpecInput {
        container_id: "c",
        image: &img,
        config: &cfg,
        run: &opts,
        binds: &binds,
        hostname: "c",
        etc_files: Some(&etc),
        netns: NetNamespace::New,
        cgroups_path: String::new(),
        all_capabilities: ALL_CAPABILITIES,
        rootfs_files: &rootfs,
    };
    let s = build_spec(&input).unwrap();
    let destinations: Vec<&str> = s.mounts.iter().map(|m| m.destination.as_str()).collect();
    assert_eq!(
        destinations,
        [
            "/proc",
            "/dev",
            "/dev/pts",
            "/dev/shm",
            "/dev/mqueue",
            "/sys",
            "/sys/fs/cgroup",
            "/etc/hosts",
            "/etc/resolv.conf",
            "/etc/hostname",
            "/run/ankaios/control_interface",
            "/data",
            "/d"
        ]
    );
    assert_eq!(s.mounts[5].options, ["nosuid", "noexec", "nodev", "ro"]);
    assert_eq!((s.mounts[6].kind.as_str(), s.mounts[6].options.last().map(String::as_str)), ("cgroup", Some("ro")));
    assert_eq!((s.mounts[7].kind.as_str(), s.mounts[7].source.as_str()), ("bind", "/b/hosts"));
    assert_eq!(s.mounts[10].options, ["rbind", "rprivate", "rw"]);
    assert_eq!(s.mounts[11].options, ["rbind", "rprivate", "ro"]);
    assert_eq!(s.mounts[12].source, "/s");
}

#[test]
fn spec_hostname_is_nerdctls_rule() {
    assert_eq!(hostname_of("0123456789abcdef", &run(&[])), "0123456789ab");
    assert_eq!(hostname_of("short", &run(&[])), "short");
    assert_eq!(hostname_of("0123456789abcdef", &run(&["--hostname", "box"])), "box");
    assert_eq!(hostname_of("w10.3d427a6.manA", &run(&[])), "w10.3d427a6", "no trailing dot");
    assert_eq!(hostname_of("my_app.1234567.a", &run(&[])), "my-app.12345", "no underscore");
    assert_eq!(hostname_of("__", &run(&[])), "ankaios");
}

#[test]
fn spec_errors_are_invalid_configs() {
    let err: RuntimeError = SpecError::UnknownUser { user: "x".into() }.into();
    assert_eq!(err, RuntimeError::InvalidConfig("user 'x' is not in the image's /etc/passwd".into()));
}

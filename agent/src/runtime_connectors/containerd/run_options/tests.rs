use ank_common::quota::MIB;

use super::*;

fn words(options: &[&str]) -> Vec<String> {
    options.iter().map(|s| (*s).to_owned()).collect()
}

fn agent_env(key: &str) -> Option<String> {
    (key == "FROM_AGENT").then(|| "agent-value".to_owned())
}

fn parse(options: &[&str]) -> Result<RunOptions, RunOptionsError> {
    RunOptions::parse_with_env(&words(options), &agent_env)
}

fn error(options: &[&str]) -> String {
    parse(options).expect_err("refused").to_string()
}

#[test]
fn containerd_config_parses_camel_case_and_snake_case_keys() {
    let c = ContainerdRuntimeConfig::parse(
        "generalOptions: [--debug]\nimage: busybox\ncommand_options: [--name, x]\ncommandArgs: [sleep, '9']\n",
    )
    .unwrap();
    assert_eq!(c.general_options, ["--debug"]);
    assert_eq!(c.image, "busybox");
    assert_eq!(c.command_options, ["--name", "x"]);
    assert_eq!(c.command_args, ["sleep", "9"]);
    let snake = ContainerdRuntimeConfig::parse("image: a\ngeneral_options: [-n, x]\ncommand_args: [b]\n").unwrap();
    assert_eq!((snake.general_options, snake.command_args), (words(&["-n", "x"]), words(&["b"])));
}

#[test]
fn containerd_config_needs_an_image_and_ignores_unknown_keys() {
    let missing = ContainerdRuntimeConfig::parse("commandArgs: [a]\n").unwrap_err().to_string();
    assert!(missing.starts_with("invalid containerd runtimeConfig:"), "{missing}");
    assert_eq!(
        ContainerdRuntimeConfig::parse("image: '  '\n").unwrap_err().to_string(),
        "invalid containerd runtimeConfig: field 'image' must not be empty"
    );
    let c = ContainerdRuntimeConfig::parse("image: a\nfoo: 1\n").unwrap();
    assert_eq!(c, ContainerdRuntimeConfig { image: "a".into(), ..Default::default() });
}

#[test]
fn run_options_env_takes_pairs_and_the_agents_value_of_a_bare_key() {
    let run = parse(&["-e", "A=1", "--env=B=x=y", "-eC=3", "-e=D=4", "--env", "FROM_AGENT", "-e", "UNSET"]).unwrap();
    assert_eq!(run.env, ["A=1", "B=x=y", "C=3", "D=4", "FROM_AGENT=agent-value"]);
}

#[test]
fn run_options_env_files_come_before_env_options() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("env");
    std::fs::write(&file, "# comment\n\nA=from-file\n  B=with spaces \nFROM_AGENT\nUNSET\n").unwrap();
    let path = file.display().to_string();
    let run = parse(&["-e", "A=from-option", "--env-file", &path]).unwrap();
    assert_eq!(run.env, ["A=from-file", "B=with spaces ", "FROM_AGENT=agent-value", "A=from-option"]);

    std::fs::write(&file, "GOOD=1\nBAD KEY=2\n").unwrap();
    assert!(error(&["--env-file", &path]).contains("line 2 has no valid variable name: 'BAD KEY=2'"));
    let missing = error(&["--env-file=/no/such/file"]);
    assert!(missing.starts_with("--env-file '/no/such/file' of a containerd workload:"), "{missing}");
}

#[test]
fn run_options_volumes_are_binds_of_host_paths() {
    let run = parse(&["-v", "/src:/dst", "--volume=/a:/b:ro", "-v/c:/d:rw"]).unwrap();
    let bind = |s: &str, d: &str, ro| BindMount { source: s.into(), destination: d.into(), read_only: ro };
    assert_eq!(run.binds, [bind("/src", "/dst", false), bind("/a", "/b", true), bind("/c", "/d", false)]);
    assert_eq!(
        error(&["-v", "data:/data"]),
        "volume 'data:/data' of a containerd workload is not supported: only bind mounts of absolute host paths (/SRC:/DST[:ro|rw]) are, no named or anonymous volumes"
    );
    assert!(error(&["-v", "/anonymous"]).starts_with("volume '/anonymous'"));
    assert!(error(&["-v", "/a:/b:z"]).contains("mode 'z' is not ro or rw"));
    assert!(error(&["-v", "/a:b"]).contains("invalid value 'b' of option '-v'"));
}

#[test]
fn run_options_mount_takes_bind_with_all_spellings() {
    let run = parse(&[
        "--mount",
        "type=bind,source=/s,destination=/d",
        "--mount=type=bind,src=/s2,dst=/d2,readonly",
        "--mount",
        "type=bind,src=/s3,target=/d3,ro=true",
        "--mount",
        "type=bind,src=/s4,target=/d4,readonly=false",
    ])
    .unwrap();
    let ro: Vec<(&str, &str, bool)> =
        run.binds.iter().map(|b| (b.source.as_str(), b.destination.as_str(), b.read_only)).collect();
    assert_eq!(ro, [("/s", "/d", false), ("/s2", "/d2", true), ("/s3", "/d3", true), ("/s4", "/d4", false)]);
    assert!(error(&["--mount", "type=volume,src=v,dst=/d"]).starts_with("volume 'type=volume,src=v,dst=/d'"));
    assert!(error(&["--mount", "src=/a,dst=/d"]).starts_with("volume 'src=/a,dst=/d'"), "docker's default is volume");
    assert!(error(&["--mount", "type=bind,src=rel,dst=/d"]).starts_with("volume "));
    assert!(error(&["--mount", "type=bind,src=/a"]).contains("no destination"));
    assert!(
        error(&["--mount", "type=bind,src=/a,dst=/d,bind-propagation=shared"]).contains("'bind-propagation=shared'")
    );
}

#[test]
fn run_options_take_user_entrypoint_workdir_labels_name_and_hostname() {
    let run = parse(&[
        "-u",
        "1000:100",
        "--entrypoint",
        "/bin/sh",
        "-w",
        "/work",
        "-l",
        "a=b",
        "--label=c",
        "--name",
        "my.app-1_x",
        "-h",
        "box",
    ])
    .unwrap();
    assert_eq!(run.user.as_deref(), Some("1000:100"));
    assert_eq!(run.entrypoint.as_deref(), Some("/bin/sh"));
    assert_eq!(run.workdir.as_deref(), Some("/work"));
    assert_eq!(run.labels, [("a".to_owned(), "b".to_owned()), ("c".to_owned(), String::new())]);
    assert_eq!(run.name.as_deref(), Some("my.app-1_x"));
    assert_eq!(run.hostname.as_deref(), Some("box"));
    assert_eq!(parse(&["--user=app", "--hostname=h.example"]).unwrap().hostname.as_deref(), Some("h.example"));
    assert!(error(&["-w", "rel"]).contains("not an absolute path"));
    assert!(error(&["--name", "-bad"]).contains("a container name is 1 to 76"));
    assert!(error(&["--name", "has space"]).contains("'has space'"));
    assert!(parse(&["--name", &"a".repeat(76)]).is_ok());
    assert!(error(&["--name", &"a".repeat(77)]).contains("a container name"));
    assert!(error(&["-h", "bad_host"]).contains("a host name"));
}

#[test]
fn run_options_network_modes() {
    assert_eq!(parse(&[]).unwrap().network, NetworkMode::Bridge);
    assert_eq!(parse(&["--net", "host"]).unwrap().network, NetworkMode::Host);
    assert_eq!(parse(&["--network=none"]).unwrap().network, NetworkMode::None);
    assert_eq!(parse(&["--net=bridge"]).unwrap().network, NetworkMode::Bridge);
    assert!(error(&["--network", "mynet"]).contains("supports the networks bridge, host and none"));
}

#[test]
fn run_options_publish_ports() {
    let run =
        parse(&["-p", "8080:80", "--publish=127.0.0.1:53:53/udp", "-p", "[::1]:443:8443/tcp", "-p", ":81:82"]).unwrap();
    let port = |ip: Option<&str>, h, c, protocol| PortMapping {
        host_ip: ip.map(|ip| ip.parse().unwrap()),
        host_port: h,
        container_port: c,
        protocol,
    };
    assert_eq!(
        run.ports,
        [
            port(None, 8080, 80, Protocol::Tcp),
            port(Some("127.0.0.1"), 53, 53, Protocol::Udp),
            port(Some("::1"), 443, 8443, Protocol::Tcp),
            port(None, 81, 82, Protocol::Tcp),
        ]
    );
    assert!(error(&["-p", "8000-8010:80-90"]).contains("port ranges are not supported"));
    assert!(error(&["-p", "80"]).contains("a random host port is not supported"));
    assert!(error(&["-p", "80:80/sctp"]).contains("tcp or udp"));
    assert!(error(&["-p", "70000:80"]).contains("1 to 65535"));
    assert!(error(&["-p", "host:80:80"]).contains("no IP address"));
}

#[test]
fn run_options_memory_cpus_and_switches() {
    let run = parse(&["--memory", "512m", "--cpus=1.5", "--read-only", "--privileged=true"]).unwrap();
    assert_eq!(run.memory, Some(512 * MIB));
    assert_eq!(run.cpus, Some(1.5));
    assert!(run.read_only && run.privileged);
    assert_eq!(parse(&["-m", "1g"]).unwrap().memory, Some(1024 * MIB));
    assert_eq!(parse(&["--memory=100b"]).unwrap().memory, Some(100));
    assert_eq!(parse(&["-m=64k"]).unwrap().memory, Some(64 * 1024));
    assert!(!parse(&["--read-only=false"]).unwrap().read_only);
    assert!(error(&["--memory", "lots"]).contains("'lots'"));
    assert!(error(&["--cpus", "0"]).contains("positive number of CPUs"));
    assert!(error(&["--cpus", "x"]).contains("invalid value 'x' of option '--cpus'"));
    assert!(error(&["--privileged=maybe"]).contains("expected true or false"));
}

#[test]
fn run_options_capabilities_are_normalised() {
    let run =
        parse(&["--cap-add", "net_admin", "--cap-add=CAP_SYS_TIME", "--cap-drop", "all", "--cap-drop=MKNOD"]).unwrap();
    assert_eq!(run.cap_add, ["CAP_NET_ADMIN", "CAP_SYS_TIME"]);
    assert_eq!(run.cap_drop, ["ALL", "CAP_MKNOD"]);
    assert!(error(&["--cap-add", "FLY"]).contains("not a Linux capability"));
}

#[test]
fn run_options_accept_and_ignore_rm_detach_interactive_tty_and_restart_no() {
    let run = parse(&["--rm", "-d", "-it", "--detach=true", "-i", "-t", "--restart=no", "--restart", "no"]).unwrap();
    assert_eq!(run, RunOptions::default());
    assert_eq!(
        error(&["--restart", "always"]),
        "--restart=always of a containerd workload is not supported: only 'no' is, the agent restarts workloads by their restartPolicy"
    );
}

#[test]
fn run_options_refuse_other_options_and_stray_words_by_name() {
    let gpus = error(&["--gpus", "all"]);
    assert!(
        gpus.starts_with(
            "unsupported nerdctl run option '--gpus' in commandOptions of a containerd workload (supported: -e/--env,"
        ),
        "{gpus}"
    );
    assert!(error(&["-x"]).starts_with("unsupported nerdctl run option '-x'"));
    assert!(error(&["-itx"]).starts_with("unsupported nerdctl run option '-x'"));
    assert!(error(&["--pid=host"]).starts_with("unsupported nerdctl run option '--pid'"));
    assert!(error(&["busybox"]).starts_with("unexpected word 'busybox' in commandOptions"));
    assert_eq!(error(&["--name"]), "option '--name' in commandOptions of a containerd workload needs a value");
}

#[test]
fn run_options_errors_are_invalid_configs() {
    let err: RuntimeError = RunOptionsError::StrayWord { word: "x".into() }.into();
    assert!(matches!(err, RuntimeError::InvalidConfig(ref m) if m.starts_with("unexpected word 'x'")));
}

#[test]
// [test of feature K2]
fn declared_memory_of_containerd_is_its_memory_option() {
    let mem = |options: &str| declared_memory(&format!("image: a\ncommandOptions: {options}\n"));
    assert_eq!(mem("[--memory, 512m]"), Ok(512 * MIB));
    assert_eq!(mem("['--memory=1g', -m, 2g]"), Ok(2048 * MIB), "the last one counts");
    assert_eq!(mem("[--name, x]"), Ok(0));
    assert_eq!(declared_memory("image: a\n"), Ok(0));
    assert!(mem("[--memory, lots]").unwrap_err().to_string().contains("'lots'"));
    assert!(matches!(declared_memory("commandArgs: [x]\n"), Err(RuntimeError::Config(_))));
}

const AGENT: AgentContainerd<'static> =
    AgentContainerd { namespace: "ankaios", address: "/run/containerd/containerd.sock", snapshotter: "overlayfs" };

fn general(options: &[&str]) -> Result<Vec<String>, RunOptionsError> {
    check_general_options(&words(options), AGENT)
}

#[test]
fn general_options_take_the_agents_own_values() {
    let same = general(&[
        "--namespace",
        "ankaios",
        "-n=ankaios",
        "--address=unix:///run/containerd/containerd.sock",
        "-a",
        "/run/containerd/containerd.sock",
        "--snapshotter",
        "overlayfs",
    ]);
    assert_eq!(same, Ok(Vec::new()));
    assert_eq!(
        general(&["-n", "default"]).unwrap_err().to_string(),
        "generalOptions of a containerd workload set -n 'default', but this agent uses 'ankaios': a workload cannot choose its own"
    );
    assert!(general(&["--address", "/other.sock"]).unwrap_err().to_string().contains("set --address '/other.sock'"));
    assert!(general(&["--storage-driver=native"]).unwrap_err().to_string().contains("set --storage-driver 'native'"));
}

#[test]
fn general_options_ignore_harmless_ones_with_a_warning_and_refuse_others() {
    let warnings = general(&[
        "--debug",
        "--debug-full",
        "--cni-path",
        "/opt/cni/bin",
        "--data-root=/x",
        "--insecure-registry",
        "--hosts-dir",
        "/d",
        "--experimental",
        "--host-gateway-ip",
        "10.0.0.1",
        "--cgroup-manager",
        "systemd",
        "--cni-netconfpath",
        "/n",
    ])
    .unwrap();
    assert_eq!(warnings.len(), 10);
    assert_eq!(warnings[0], "generalOptions '--debug' of a containerd workload is ignored");
    let refused = general(&["--log-level", "info"]).unwrap_err().to_string();
    assert!(refused.starts_with("unsupported nerdctl global option '--log-level' in generalOptions"), "{refused}");
    assert!(general(&["stray"]).unwrap_err().to_string().contains("option 'stray'"));
    assert!(general(&["--namespace"]).unwrap_err().to_string().contains("option '--namespace'"));
}

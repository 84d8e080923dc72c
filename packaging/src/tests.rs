//! Checks of the packaged files: the default configs through the config
//! readers of `ank-server`, `ank-agent` and `ank`; the units against the
//! configs (config paths, state and run folders, stop timeout); postinst
//! against the certificates the configs name; the startup manifest through
//! the manifest parser.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches};

fn packaged(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(packaged(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The `Key=value` settings of a unit file, every value of a repeated key
/// in order (sections are not told apart: our keys are unique to one).
fn unit(name: &str) -> BTreeMap<String, Vec<String>> {
    let mut keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in read(&format!("systemd/{name}")).lines().map(str::trim) {
        if line.is_empty() || line.starts_with(['#', ';', '[']) {
            continue;
        }
        let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("{name}: not a setting: '{line}'"));
        keys.entry(k.trim().to_owned()).or_default().push(v.trim().to_owned());
    }
    keys
}

/// The one value of `key`; panics when it is missing or repeated.
fn one<'a>(unit: &'a BTreeMap<String, Vec<String>>, key: &str) -> &'a str {
    match unit.get(key).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("{key}: expected one value, found {other:?}"),
    }
}

/// `TimeoutStopSec=` in milliseconds (plain seconds, as our units write it).
fn stop_timeout_ms(unit: &BTreeMap<String, Vec<String>>) -> u64 {
    let secs: u64 = one(unit, "TimeoutStopSec").parse().expect("TimeoutStopSec in plain seconds");
    secs * 1000
}

/// The `-x` file of `ExecStart=`, which must name `binary`.
fn exec_config(unit: &BTreeMap<String, Vec<String>>, binary: &str) -> String {
    let exec: Vec<&str> = one(unit, "ExecStart").split_whitespace().collect();
    assert_eq!(exec.first(), Some(&binary), "ExecStart: {exec:?}");
    let x = exec.iter().position(|a| *a == "-x").unwrap_or_else(|| panic!("no -x in ExecStart: {exec:?}"));
    exec[x + 1].to_owned()
}

/// What the units have in common.
fn assert_notify_daemon(unit: &BTreeMap<String, Vec<String>>) {
    for (key, value) in [
        ("Type", "notify"),
        ("NotifyAccess", "main"),
        ("WatchdogSec", "30s"),
        ("Restart", "on-failure"),
        ("RestartSec", "2"),
        ("Wants", "network-online.target"),
        ("WantedBy", "multi-user.target"),
    ] {
        assert_eq!(one(unit, key), value, "{key}");
    }
    assert!(one(unit, "After").split_whitespace().any(|t| t == "network-online.target"));
}

#[test]
fn server_config_is_accepted_by_ank_server_and_matches_its_unit() {
    let conf = packaged("etc/ankaios/ank-server.conf");
    let argv = ["ank-server", "-x", conf.to_str().unwrap()];
    let m = ank_server::cli::Args::command().try_get_matches_from(argv).unwrap();
    let mut args = ank_server::cli::Args::from_arg_matches(&m).unwrap();
    let used = ank_server::config_file::apply(&mut args, &m, Path::new("/nonexistent")).unwrap();
    assert_eq!(used.path.as_deref(), Some(conf.as_path()));
    assert!(used.warnings.is_empty(), "{:?}", used.warnings);
    args.validate().unwrap();
    assert!(args.tls_sources().unwrap().is_some(), "mTLS, not insecure");
    assert_eq!(args.address.to_string(), "127.0.0.1:25551");
    assert_eq!(args.startup_manifest.as_deref(), Some(Path::new("/etc/ankaios/state.yaml")));
    assert_eq!(args.tls.ca_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/ca.pem")));
    assert_eq!(args.tls.crt_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/server.pem")));
    assert_eq!(args.tls.key_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/server-key.pem")));

    let unit = unit("ank-server.service");
    assert_notify_daemon(&unit);
    assert_eq!(exec_config(&unit, "/usr/bin/ank-server"), ank_server::config_file::DEFAULT_SERVER_CONFIG);
    let state_file = args.state_file.clone().expect("state_file");
    assert_eq!(state_file.parent(), Some(Path::new("/var/lib").join(one(&unit, "StateDirectory")).as_path()));
    assert_eq!(args.run_folder, Some(Path::new("/run").join(one(&unit, "RuntimeDirectory"))));
    assert_eq!(args.health_socket(), Path::new("/run/ank-server/ank-server.sock"));
    assert!(args.shutdown_grace_ms < stop_timeout_ms(&unit), "grace within TimeoutStopSec");
    assert_eq!(one(&unit, "ExecReload"), "/bin/kill -HUP $MAINPID");
    for (key, value) in [("ProtectSystem", "strict"), ("NoNewPrivileges", "yes"), ("PrivateTmp", "yes")] {
        assert_eq!(one(&unit, key), value, "{key}");
    }
    assert_eq!(unit.get("CapabilityBoundingSet").map(Vec::as_slice), Some(&[String::new()][..]), "no capabilities");
}

#[test]
fn agent_config_is_accepted_by_ank_agent_and_matches_its_unit() {
    let conf = packaged("etc/ankaios/ank-agent.conf");
    let argv = ["ank-agent", "-x", conf.to_str().unwrap()];
    let m = ank_agent::cli::Cli::command().try_get_matches_from(argv).unwrap();
    let mut cli = ank_agent::cli::Cli::from_arg_matches(&m).unwrap();
    let used = ank_agent::config_file::apply(&mut cli, &m, Path::new("/nonexistent")).unwrap();
    assert_eq!(used.path.as_deref(), Some(conf.as_path()));
    assert!(used.warnings.is_empty(), "{:?}", used.warnings);
    assert_eq!(cli.name.as_deref(), Some("agent_A"));
    assert_eq!(cli.server_url.as_deref(), Some("https://127.0.0.1:25551"));
    assert!(!cli.tls.insecure);
    assert_eq!(cli.tls.ca_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/ca.pem")));
    assert_eq!(cli.tls.crt_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/agent-agent_A.pem")));
    assert_eq!(cli.tls.key_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/agent-agent_A-key.pem")));
    // [test of feature K7: the package keeps finished workloads, as Ankaios does]
    assert_eq!(cli.retain_succeeded, ank_agent::workload::retention::RetainFor::Never);
    assert_eq!(cli.retain_failed, ank_agent::workload::retention::RetainFor::Never);

    let unit = unit("ank-agent.service");
    assert_notify_daemon(&unit);
    assert_eq!(exec_config(&unit, "/usr/bin/ank-agent"), ank_agent::config_file::DEFAULT_AGENT_CONFIG);
    assert_eq!(cli.run_folder, Some(Path::new("/run").join(one(&unit, "RuntimeDirectory"))), "not in /tmp");
    assert_eq!(cli.health_socket().unwrap(), Path::new("/run/ankaios/ank-agent-agent_A.sock"));
    assert_eq!(one(&unit, "RuntimeDirectoryPreserve"), "yes", "workloads' FIFOs outlive the agent");
    assert_eq!(one(&unit, "TimeoutStartSec"), "infinity", "READY=1 waits for a server");
    let postinst = read("debian/postinst");
    assert!(
        postinst.contains("systemctl --no-block \"$action\" ank-agent.service"),
        "postinst must not wait for the agent"
    );
    assert!(cli.shutdown_grace_ms < stop_timeout_ms(&unit), "grace within TimeoutStopSec");
    assert!(!cli.stop_workloads_on_shutdown, "a stop of the agent leaves the workloads running");
    let defaults = ank_agent::workload_scheduler::SchedulerSettings::default();
    assert_eq!(cli.scheduling.settings(), defaults, "the packaged scheduler keys are the defaults");
    // Ordering only: the agent runs without a local server on other nodes.
    assert!(one(&unit, "After").split_whitespace().any(|t| t == "ank-server.service"));
    for key in ["Requires", "BindsTo", "Requisite", "PartOf"] {
        assert!(!unit.contains_key(key), "{key} would tie the agent to a local server");
    }
    // No own mount namespace: podman's mounts must reach the host.
    for key in
        ["ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "ReadWritePaths", "ProtectKernelTunables"]
    {
        assert!(!unit.contains_key(key), "{key} gives the agent its own mount namespace");
    }
    assert_eq!(one(&unit, "KillMode"), "process", "a stop leaves the workloads running");
}

#[test]
fn ank_config_is_accepted_by_ank() {
    let conf = packaged("etc/ankaios/ank.conf");
    let argv = ["ank", "-x", conf.to_str().unwrap(), "get", "workloads"];
    let m = ank_cli::cli::Cli::command().try_get_matches_from(argv).unwrap();
    let mut cli = ank_cli::cli::Cli::from_arg_matches(&m).unwrap();
    let used = ank_cli::config_file::apply(&mut cli, &m, &[]).unwrap();
    assert_eq!(used.path.as_deref(), Some(conf.as_path()));
    assert!(used.warnings.is_empty(), "{:?}", used.warnings);
    assert!(cli.tls_sources().unwrap().is_some(), "mTLS, not insecure");
    assert_eq!(cli.resolved_server_url().unwrap(), "https://127.0.0.1:25551");
    assert_eq!(cli.tls.crt_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/cli-admin.pem")));
    assert_eq!(cli.tls.key_pem.as_deref(), Some(Path::new("/etc/ankaios/certs/cli-admin-key.pem")));
    assert_eq!(
        packaged("etc/ankaios/ank.conf").file_name(),
        Path::new(ank_cli::config_file::SYSTEM_ANK_CONFIG).file_name()
    );
}

#[test]
fn postinst_makes_the_certificates_the_configs_name() {
    let postinst = read("debian/postinst");
    let call = postinst.lines().skip_while(|l| !l.trim_start().starts_with("ank-certs ")).take(2).collect::<String>();
    for arg in ["--out \"$certs\"", "--server ", "--server-san localhost,127.0.0.1", "--agent agent_A", "--cli admin"] {
        assert!(call.contains(arg), "postinst's ank-certs call lacks '{arg}': {call}");
    }
    assert!(postinst.contains("certs=/etc/ankaios/certs"));
    assert_eq!(postinst.matches("#DEBHELPER#").count(), 1, "cargo-deb inserts its scripts at every token");
    assert_eq!(read("debian/postrm").matches("#DEBHELPER#").count(), 1);
}

#[test]
fn startup_manifest_runs_hello_on_agent_a() {
    let state = ank_common::manifest::parse_manifest("state.yaml", &read("etc/ankaios/state.yaml")).unwrap();
    assert_eq!(state.workloads.len(), 1);
    let (name, hello) = state.workloads.iter().next().unwrap();
    assert_eq!(name.as_str(), "hello");
    assert_eq!((hello.agent.as_str(), hello.runtime.as_str()), ("agent_A", "podman"));
    assert!(hello.runtime_config.contains("image: localhost/busybox:latest"), "{}", hello.runtime_config);
}

#[test]
fn changelog_names_this_version_and_the_packages_maintainer() {
    let changelog = read("debian/changelog");
    let first = changelog.lines().next().unwrap_or_default();
    assert!(first.starts_with(&format!("ank ({}-1) ", env!("CARGO_PKG_VERSION"))), "{first}");
    let cargo = read("Cargo.toml");
    let maintainer = cargo
        .lines()
        .find_map(|l| l.strip_prefix("maintainer = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("maintainer in [package.metadata.deb]");
    let signature = changelog.lines().find(|l| l.starts_with(" -- ")).expect("signature line");
    assert!(signature.starts_with(&format!(" -- {maintainer}  ")), "{signature}");
}

/// postinst's `make_certs` run by `sh` against a temporary folder, with a
/// stand-in `ank-certs` on PATH that records its arguments and writes the
/// files ank-certs writes.
fn run_make_certs(
    env: &[(&str, &str)],
    defaults: Option<&str>,
    existing_ca: bool,
) -> (String, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("ank-certs");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"$@\" > \"$FAKE_ARGS\"\nwhile [ $# -gt 0 ]; do [ \"$1\" = --out ] && out=$2; shift; done\n\
         for f in ca ca-key server server-key agent-agent_A agent-agent_A-key cli-admin cli-admin-key; do echo x > \"$out/$f.pem\"; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    if existing_ca {
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::write(certs.join("ca.pem"), "old").unwrap();
    }
    let defaults_file = dir.path().join("default-ank");
    if let Some(text) = defaults {
        std::fs::write(&defaults_file, text).unwrap();
    }
    // The script's definitions, pointed at the temporary folder, then the call.
    let postinst = read("debian/postinst");
    let definitions = &postinst[..postinst.find("if [ \"$1\" = \"configure\" ]").unwrap()];
    let script = definitions
        .replace("certs=/etc/ankaios/certs", &format!("certs={}", certs.display()))
        .replace("defaults=/etc/default/ank", &format!("defaults={}", defaults_file.display()))
        + "make_certs\n";
    let args = dir.path().join("args");
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .env_remove("ANK_CERT_DAYS")
        .env_remove("ANK_CA_KEY")
        .envs(env.iter().copied())
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env("FAKE_ARGS", &args)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let called = std::fs::read_to_string(&args).unwrap_or_default();
    (format!("status={} args={} out={text}", out.status.code().unwrap_or(-1), called.trim()), certs, dir)
}

#[test]
fn postinst_issues_one_year_certificates_and_keeps_the_ca_key_by_default() {
    let (out, certs, _dir) = run_make_certs(&[], None, false);
    assert!(out.starts_with("status=0 ") && out.contains("--days 365 "), "{out}");
    assert!(out.contains("valid for 365 days") && out.contains("move it off the node"), "{out}");
    assert!(certs.join("ca-key.pem").exists(), "kept: more nodes can be added (docs/user-guide.md)");
    let mode = std::fs::metadata(&certs).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o700);
}

#[test]
fn postinst_takes_the_lifetime_and_removes_the_ca_key_when_asked() {
    let (out, certs, _dir) = run_make_certs(&[], Some("ANK_CERT_DAYS=90\nANK_CA_KEY=remove\n"), false);
    assert!(out.starts_with("status=0 ") && out.contains("--days 90 "), "{out}");
    assert!(out.contains("removed the CA key"), "{out}");
    assert!(!certs.join("ca-key.pem").exists() && certs.join("server-key.pem").exists(), "{out}");
    // The environment wins over /etc/default/ank.
    let (out, certs, _dir) = run_make_certs(
        &[("ANK_CERT_DAYS", "30"), ("ANK_CA_KEY", "keep")],
        Some("ANK_CERT_DAYS=90\nANK_CA_KEY=remove\n"),
        false,
    );
    assert!(out.contains("--days 30 ") && certs.join("ca-key.pem").exists(), "{out}");
}

#[test]
fn postinst_refuses_bad_settings_and_leaves_an_existing_ca_alone() {
    let (out, _, _dir) = run_make_certs(&[("ANK_CERT_DAYS", "ten")], None, false);
    assert!(
        out.starts_with("status=1 ") && out.contains("ANK_CERT_DAYS must be a positive number of days, not 'ten'"),
        "{out}"
    );
    let (out, _, _dir) = run_make_certs(&[("ANK_CA_KEY", "shred")], None, false);
    assert!(out.starts_with("status=1 ") && out.contains("ANK_CA_KEY must be 'keep' or 'remove'"), "{out}");
    // An existing installation (as Ankaios' or an earlier package left it) is untouched.
    let (out, certs, _dir) = run_make_certs(&[("ANK_CA_KEY", "remove")], None, true);
    assert!(out.starts_with("status=0 args= "), "ank-certs not called: {out}");
    assert_eq!(std::fs::read_to_string(certs.join("ca.pem")).unwrap(), "old");
}

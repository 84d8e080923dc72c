//! Tests of [`EtcFilesWriter`] on made-up host files.

use std::net::IpAddr;
use std::path::Path;

use super::*;

fn writer(dir: &Path, resolv: &str, upstream: Option<&str>) -> EtcFilesWriter {
    let host = dir.join("host");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("resolv.conf"), resolv).unwrap();
    if let Some(upstream) = upstream {
        std::fs::write(host.join("upstream.conf"), upstream).unwrap();
    }
    std::fs::write(host.join("hosts"), "127.0.0.1 localhost\n192.0.2.2 myhost").unwrap();
    EtcFilesWriter {
        host_resolv_conf: host.join("resolv.conf"),
        resolved_upstream: host.join("upstream.conf"),
        host_hosts: host.join("hosts"),
        ..EtcFilesWriter::default()
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

async fn write(w: &EtcFilesWriter, dir: &Path, mode: NetworkMode, addr: Option<IpAddr>) -> EtcFiles {
    let extra = [("db.local".to_string(), ip("10.4.0.9"))];
    let req = EtcRequest { mode, hostname: "web1", ip: addr, extra_hosts: &extra };
    w.write(&dir.join("ctr"), &req).await.unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[tokio::test]
async fn bridge_takes_resolveds_upstream_instead_of_its_stub() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(
        tmp.path(),
        "# stub\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n",
        Some("nameserver 192.0.2.53\nnameserver 2001:db8::53\nsearch lan\n"),
    );
    let files = write(&w, tmp.path(), NetworkMode::Bridge, Some(ip("10.4.0.5"))).await;
    assert_eq!(read(&files.resolv_conf), "nameserver 192.0.2.53\nsearch lan\n");
    assert_eq!(
        read(&files.hosts),
        "127.0.0.1\tlocalhost localhost.localdomain\n\
         ::1\tlocalhost localhost.localdomain ip6-localhost ip6-loopback\n\
         10.4.0.5\tweb1\n10.4.0.9\tdb.local\n"
    );
    assert_eq!(read(&files.hostname), "web1\n");
    assert_eq!(files.hosts, tmp.path().join("ctr/hosts"));
    assert_eq!(files.resolv_conf, tmp.path().join("ctr/resolv.conf"));
    assert_eq!(files.hostname, tmp.path().join("ctr/hostname"));
}

#[tokio::test]
async fn bridge_drops_loopback_nameservers_and_falls_back_when_none_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(tmp.path(), "nameserver 127.0.0.53\nsearch lan\n", None);
    let files = write(&w, tmp.path(), NetworkMode::Bridge, Some(ip("10.4.0.5"))).await;
    assert_eq!(read(&files.resolv_conf), "search lan\nnameserver 8.8.8.8\nnameserver 8.8.4.4\n");
}

#[tokio::test]
async fn a_hosts_resolv_conf_without_stub_is_kept_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(tmp.path(), "nameserver 10.255.255.53\noptions ndots:2\n", Some("nameserver 192.0.2.99\n"));
    let files = write(&w, tmp.path(), NetworkMode::None, None).await;
    assert_eq!(read(&files.resolv_conf), "nameserver 10.255.255.53\noptions ndots:2\n");
    // No address: no line for the hostname, as docker.
    assert_eq!(
        read(&files.hosts),
        "127.0.0.1\tlocalhost localhost.localdomain\n\
         ::1\tlocalhost localhost.localdomain ip6-localhost ip6-loopback\n\
         10.4.0.9\tdb.local\n"
    );
}

#[tokio::test]
async fn host_mode_copies_the_hosts_files_stub_and_all() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(tmp.path(), "nameserver 127.0.0.53\n", Some("nameserver 192.0.2.53\n"));
    let files = write(&w, tmp.path(), NetworkMode::Host, None).await;
    assert_eq!(read(&files.resolv_conf), "nameserver 127.0.0.53\n");
    assert_eq!(read(&files.hosts), "127.0.0.1 localhost\n192.0.2.2 myhost\n10.4.0.9\tdb.local\n");
    // Copies, not the host's files.
    assert_ne!(files.resolv_conf, w.host_resolv_conf);
}

#[test]
fn an_fqdn_also_gets_its_short_name() {
    let hosts = namespaced_hosts("web1.example.org", Some(ip("10.4.0.7")), &[]);
    assert!(hosts.ends_with("10.4.0.7\tweb1.example.org web1\n"), "{hosts}");
}

#[tokio::test]
async fn bad_hostnames_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let w = writer(tmp.path(), "", None);
    for bad in ["", "a\nb", "-a", "a b", "a..b", &"x".repeat(64)] {
        let req = EtcRequest { mode: NetworkMode::Bridge, hostname: bad, ip: None, extra_hosts: &[] };
        let err = w.write(tmp.path(), &req).await.unwrap_err();
        assert!(matches!(err, NetworkError::InvalidHostname(_)), "{bad:?}: {err}");
    }
}

#[test]
fn resolv_conf_drops_broken_nameserver_lines() {
    let out = namespaced_resolv_conf("nameserver\nnameserver x\nnameserver 192.0.2.1\n", &[]);
    assert_eq!(out, "nameserver 192.0.2.1\n");
}

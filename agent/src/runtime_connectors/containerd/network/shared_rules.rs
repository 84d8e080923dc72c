//! The bridge network's host rules, one set for the whole network instead
//! of one per container: masquerading of what leaves the subnet through
//! another interface, and forwarding from the bridge (and of the answers
//! to it) accepted even where the `FORWARD` policy drops. The bridge
//! plugin's `ipMasq` and the `firewall` plugin would add and remove rules
//! of their own for every container, a dozen `iptables` runs per create
//! and delete: these three rules are checked at most every
//! [`RECHECK`] (a firewall reload may have flushed them) and set when missing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::NetworkError;
use super::Subnet;
use super::masquerade::iptables;

/// How long rules found in place are trusted without a look.
pub const RECHECK: Duration = Duration::from_secs(30);

/// When each bridge's rules were last found or set.
static CHECKED: Mutex<Option<HashMap<String, Instant>>> = Mutex::new(None);

/// The comment that marks the rules of `bridge`.
fn comment(bridge: &str) -> String {
    format!("ankaios containerd bridge {bridge}")
}

/// The rules of `bridge` on `subnet`: (table, chain, insert at the top,
/// rule arguments).
pub fn rules(bridge: &str, subnet: &Subnet) -> Vec<(&'static str, &'static str, bool, Vec<String>)> {
    let c = comment(bridge);
    let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        (
            "nat",
            "POSTROUTING",
            false,
            words(&[
                "-s",
                &subnet.to_string(),
                "!",
                "-o",
                bridge,
                "-m",
                "comment",
                "--comment",
                &c,
                "-j",
                "MASQUERADE",
            ]),
        ),
        ("filter", "FORWARD", true, words(&["-i", bridge, "-m", "comment", "--comment", &c, "-j", "ACCEPT"])),
        (
            "filter",
            "FORWARD",
            true,
            words(&[
                "-o",
                bridge,
                "-m",
                "conntrack",
                "--ctstate",
                "RELATED,ESTABLISHED",
                "-m",
                "comment",
                "--comment",
                &c,
                "-j",
                "ACCEPT",
            ]),
        ),
    ]
}

/// Sets the rules of `bridge` that are missing, unless they were found in
/// place less than [`RECHECK`] ago.
pub async fn ensure(bridge: &str, subnet: &Subnet, timeout: Duration) -> Result<(), NetworkError> {
    let fresh = CHECKED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(bridge))
        .is_some_and(|at| at.elapsed() < RECHECK);
    if fresh {
        return Ok(());
    }
    for (table, chain, top, rule) in rules(bridge, subnet) {
        let mut check = vec!["-w", "-t", table, "-C", chain];
        check.extend(rule.iter().map(String::as_str));
        if iptables(&check, timeout).await.is_ok() {
            continue;
        }
        let mut add = vec!["-w", "-t", table];
        if top {
            add.extend(["-I", chain, "1"]);
        } else {
            add.extend(["-A", chain]);
        }
        add.extend(rule.iter().map(String::as_str));
        iptables(&add, timeout).await?;
    }
    CHECKED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(bridge.to_owned(), Instant::now());
    Ok(())
}

/// Removes the rules of `bridge` (all copies) and forgets they were set:
/// for a network that is taken down.
pub fn remove_blocking(bridge: &str, subnet: &Subnet) {
    if let Some(m) = CHECKED.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        m.remove(bridge);
    }
    for (table, chain, _, rule) in rules(bridge, subnet) {
        for _ in 0..10 {
            let deleted = std::process::Command::new("iptables")
                .args(["-w", "-t", table, "-D", chain])
                .args(&rule)
                .output()
                .is_ok_and(|o| o.status.success());
            if !deleted {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_rules_mark_the_bridge_and_cover_its_subnet() {
        let subnet: Subnet = "10.4.0.0/24".parse().unwrap();
        let r = rules("nerdctl0", &subnet);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].0, r[0].1, r[0].2), ("nat", "POSTROUTING", false));
        assert_eq!(r[0].3[..5], ["-s", "10.4.0.0/24", "!", "-o", "nerdctl0"]);
        assert!(r.iter().all(|(_, _, _, w)| w.contains(&"ankaios containerd bridge nerdctl0".to_owned())));
        assert!(r[1..].iter().all(|(t, c, top, _)| (*t, *c, *top) == ("filter", "FORWARD", true)));
    }
}

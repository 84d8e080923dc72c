//! Removes the bridge plugin's masquerade rules of a container whose
//! network namespace is gone.
//!
//! The bridge plugin of containernetworking-plugins 1.1 (Debian 12's)
//! removes its `ipMasq` rules on DEL only when it finds the container's
//! addresses inside the namespace: a DEL with an empty `CNI_NETNS` leaves
//! a `POSTROUTING` rule (`-s <ip> -m comment --comment 'name: "<network>"
//! id: "<container>"' -j CNI-<hash>`) and its chain behind. [`Cni::del`]
//! pins the namespace so this is not needed, except when the pin is lost;
//! then the rules are found by their comment and removed here.
//!
//! [`Cni::del`]: super::Cni::del

use std::time::Duration;

use tokio::process::Command;

use super::NetworkError;

/// The `iptables` argument lists that remove the masquerade rules of
/// `container_id` on `network`, found in the output of `iptables -t nat -S
/// POSTROUTING`.
pub(super) fn removal_commands(rules: &str, network: &str, container_id: &str) -> Vec<Vec<String>> {
    let comment = format!("name: \"{network}\" id: \"{container_id}\"");
    let listed = format!("--comment \"{}\"", comment.replace('"', "\\\""));
    let mut commands = Vec::new();
    for line in rules.lines().filter(|l| l.contains(&listed)) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let after =
            |flag: &str| words.iter().position(|w| *w == flag).and_then(|i| words.get(i + 1)).map(|w| w.to_string());
        let (Some(source), Some(chain)) = (after("-s"), after("-j")) else {
            continue;
        };
        if !chain.starts_with("CNI-") {
            continue;
        }
        let nat = |args: &[&str]| ["-w", "-t", "nat"].iter().chain(args).map(|a| a.to_string()).collect::<Vec<_>>();
        commands.push(nat(&["-D", "POSTROUTING", "-s", &source, "-m", "comment", "--comment", &comment, "-j", &chain]));
        commands.push(nat(&["-F", &chain]));
        commands.push(nat(&["-X", &chain]));
    }
    commands
}

/// Removes the masquerade rules of `container_id` on `network`.
pub(super) async fn remove(network: &str, container_id: &str, timeout: Duration) -> Result<(), NetworkError> {
    let listed = iptables(&["-w", "-t", "nat", "-S", "POSTROUTING"], timeout).await?;
    for args in removal_commands(&listed, network, container_id) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        iptables(&args, timeout).await?;
    }
    Ok(())
}

pub(super) async fn iptables(args: &[&str], timeout: Duration) -> Result<String, NetworkError> {
    let failed = |msg: String| NetworkError::Plugin {
        plugin: "iptables".into(),
        command: "DEL",
        code: None,
        msg,
        details: args.join(" "),
    };
    let run = Command::new("iptables")
        .args(args)
        .env("PATH", "/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| failed(format!("did not finish within {timeout:?}")))?
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_rule_and_chain_of_the_container_only() {
        let listed = r#"-P POSTROUTING ACCEPT
-A POSTROUTING -s 10.4.0.2/32 -m comment --comment "name: \"bridge\" id: \"abc\"" -j CNI-26bdc9ad710fb9a0ad075fdf
-A POSTROUTING -s 10.4.0.3/32 -m comment --comment "name: \"bridge\" id: \"abcd\"" -j CNI-aaaaaaaaaaaaaaaaaaaaaaaa
-A POSTROUTING -s 10.4.0.4/32 -m comment --comment "name: \"other\" id: \"abc\"" -j CNI-bbbbbbbbbbbbbbbbbbbbbbbb
"#;
        let commands = removal_commands(listed, "bridge", "abc");
        assert_eq!(commands.len(), 3);
        assert_eq!(
            commands[0],
            [
                "-w",
                "-t",
                "nat",
                "-D",
                "POSTROUTING",
                "-s",
                "10.4.0.2/32",
                "-m",
                "comment",
                "--comment",
                "name: \"bridge\" id: \"abc\"",
                "-j",
                "CNI-26bdc9ad710fb9a0ad075fdf"
            ]
        );
        assert_eq!(commands[1][3..], ["-F", "CNI-26bdc9ad710fb9a0ad075fdf"]);
        assert_eq!(commands[2][3..], ["-X", "CNI-26bdc9ad710fb9a0ad075fdf"]);
    }
}

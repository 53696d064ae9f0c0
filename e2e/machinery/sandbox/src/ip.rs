//! Links and addresses through the `ip` tool (iproute2): simpler to read and debug than netlink
//! messages, and each call is one short process.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::error::Error;

/// Runs `ip args...`.
pub(crate) async fn ip(args: &[&str]) -> Result<(), Error> {
    run(
        Command::new("ip").args(args),
        None,
        &format!("ip {}", args.join(" ")),
    )
    .await
}

/// What `ip link del` answers for a link that is already gone: "Cannot find device" when the name
/// no longer resolves, "No such device" when it vanished between the lookup and the delete (a
/// killed pod's namespace is torn down by the kernel in the background, taking its veth along).
pub(crate) const LINK_ALREADY_GONE: &[&str] = &["Cannot find device", "No such device"];

/// Runs `ip args...`, treating a failure whose stderr contains one of `benign` as success
/// (e.g. "Cannot find device" when deleting what is already gone).
pub(crate) async fn ip_tolerant(args: &[&str], benign: &[&str]) -> Result<(), Error> {
    match ip(args).await {
        Err(Error::Command { stderr, .. }) if benign.iter().any(|b| stderr.contains(b)) => Ok(()),
        other => other,
    }
}

/// Runs `ip -batch -` inside the network namespace of `pid` (through nsenter), one command a
/// line: the pod side of the veth is configured in one process.
pub(crate) async fn ip_batch_in_netns(pid: u32, commands: &[String]) -> Result<(), Error> {
    let net = format!("--net=/proc/{pid}/ns/net");
    let script = commands.join("\n") + "\n";
    run(
        Command::new("nsenter").args([net.as_str(), "ip", "-batch", "-"]),
        Some(script.as_bytes()),
        &format!("nsenter {net} ip -batch - <<< {script:?}"),
    )
    .await
}

/// `ip -br link` names, without the `@peer` suffix veths carry.
pub(crate) async fn link_names() -> Result<Vec<String>, Error> {
    let out = Command::new("ip")
        .args(["-br", "link"])
        .output()
        .await
        .map_err(|e| Error::io("running ip -br link", e))?;
    Ok(parse_link_names(&String::from_utf8_lossy(&out.stdout)))
}

pub(crate) fn parse_link_names(ip_br_link: &str) -> Vec<String> {
    ip_br_link
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .collect()
}

async fn run(cmd: &mut Command, stdin: Option<&[u8]>, shown: &str) -> Result<(), Error> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io(format!("running {shown}"), e))?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input)
            .await
            .map_err(|e| Error::io(format!("writing to {shown}"), e))?;
    }
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| Error::io(format!("running {shown}"), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            command: shown.to_string(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_names_drop_peer_suffix() {
        let out = "lo               UNKNOWN        00:00:00:00:00:00 <LOOPBACK,UP,LOWER_UP>\n\
                   lkbr3            UP             aa:bb <BROADCAST,MULTICAST,UP,LOWER_UP>\n\
                   lkv3x0@if2       UP             cc:dd <BROADCAST,MULTICAST,UP,LOWER_UP>\n";
        assert_eq!(parse_link_names(out), ["lo", "lkbr3", "lkv3x0"]);
    }
}

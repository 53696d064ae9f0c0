//! The command-line shell the three operator binaries share: the same flags, environment
//! variables and defaults everywhere, so a chart value or a runbook line means the same to each
//! operator (issue 22: the binaries disagreed on `--identity` vs `--pod-name`, the default of
//! `--leader-elect` and of `--log-format`). No I/O but reading the hostname.
//!
//! | flag | env | default |
//! |---|---|---|
//! | `--log-level` | `LOG_LEVEL` | `info` |
//! | `--log-format` (`json`\|`text`) | `LOG_FORMAT` | `json` |
//! | `--leader-elect[=BOOL]` | `LEADER_ELECT` | `true` |
//! | `--lease-name` | `LEASE_NAME` | the binary's name |
//! | `--lease-namespace` | `POD_NAMESPACE` | `default` |
//! | `--identity` | `POD_NAME` | the hostname |
//! | `--probe-addr` | `PROBE_ADDR` | `0.0.0.0:8080` |
//! | `--watch-namespace` | `WATCH_NAMESPACE` | every namespace |
//!
//! Older spellings stay accepted as hidden aliases: `--pod-name` (backup, restore) for
//! `--identity`, `--namespace` for `--watch-namespace`.

use std::net::SocketAddr;

use crate::{
    LeaseConfig, LeaseError, LogFormat, LoggingError, hostname, init_logging, lease_identity,
};

/// Logging flags; `global`, so they may follow a subcommand.
#[derive(Clone, Debug, clap::Args)]
pub struct LogArgs {
    /// Log filter: a level (`info`) or tracing-subscriber directives (`info,kube=warn`).
    #[arg(long, env = "LOG_LEVEL", default_value = "info", global = true)]
    pub log_level: String,
    /// Log format: `json` (one object per line) or `text`.
    #[arg(long, env = "LOG_FORMAT", default_value = "json", global = true)]
    pub log_format: LogFormat,
}

impl LogArgs {
    /// Installs the global subscriber.
    pub fn init(&self) -> Result<(), LoggingError> {
        init_logging(&self.log_level, self.log_format)
    }
}

/// The flags of an operator's controller: leader election, identity, probes, scope.
#[derive(Clone, Debug, clap::Args)]
pub struct ShellArgs {
    /// Elect one active replica through a Lease (`--leader-elect`, `--leader-elect=false`).
    #[arg(long, env = "LEADER_ELECT", num_args = 0..=1, default_value_t = true,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Name of the Lease (default: the binary's name). The chart derives it from the release,
    /// so two releases never share one.
    #[arg(long, env = "LEASE_NAME")]
    pub lease_name: Option<String>,
    /// Namespace of the Lease (the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,
    /// This replica's identity in the Lease and in events (default: the hostname).
    #[arg(long, env = "POD_NAME", alias = "pod-name")]
    pub identity: Option<String>,
    /// Address of the /healthz, /readyz and /metrics endpoints.
    #[arg(long, env = "PROBE_ADDR", default_value = "0.0.0.0:8080")]
    pub probe_addr: SocketAddr,
    /// Watch this namespace only (default: every namespace).
    #[arg(long, env = "WATCH_NAMESPACE", alias = "namespace")]
    pub watch_namespace: Option<String>,
}

impl ShellArgs {
    /// The replica's identity: `--identity`/POD_NAME, else the hostname; never a shared
    /// default (two replicas with one identity would both hold the Lease).
    pub fn identity(&self) -> Result<String, LeaseError> {
        lease_identity(self.identity.as_deref(), hostname().as_deref())
    }

    /// The Lease to hold, if leader election is on. Under a `--lease-name` other than the
    /// binary's, the binary's own Lease is the previous one: releases before the chart derived
    /// the name from the release held it, and the new replica waits for it to be let go.
    pub fn election(&self, default_lease_name: &str, identity: &str) -> Option<LeaseConfig> {
        self.leader_elect.then(|| {
            let name = self.lease_name.as_deref().unwrap_or(default_lease_name);
            LeaseConfig {
                previous_name: (name != default_lease_name).then(|| default_lease_name.to_owned()),
                ..LeaseConfig::new(&self.lease_namespace, name, identity)
            }
        })
    }

    /// This install's identity in the namespace claims ([`crate::claim`]):
    /// `<lease namespace>/<lease name>`, the same for every replica of a release and different
    /// for two releases (the chart passes a per-release `--lease-name` also when leader election
    /// is off).
    pub fn install_identity(&self, default_lease_name: &str) -> String {
        let name = self.lease_name.as_deref().unwrap_or(default_lease_name);
        format!("{}/{name}", self.lease_namespace)
    }

    /// The watched namespace, `None` for every namespace (an empty value means every one, as
    /// the chart's empty `watchNamespace` does).
    pub fn watch_namespace(&self) -> Option<String> {
        self.watch_namespace.clone().filter(|ns| !ns.is_empty())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        log: LogArgs,
        #[command(flatten)]
        shell: ShellArgs,
    }

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("op").chain(args.iter().copied())).unwrap()
    }

    // The env-dependent defaults are left to the e2e runs: tests here pass every flag that has
    // an env var, or none whose env var a CI runner could set (POD_NAME, WATCH_NAMESPACE...).
    #[test]
    fn one_set_of_defaults() {
        let cli = parse(&[]);
        if std::env::var_os("LEADER_ELECT").is_none() {
            assert!(cli.shell.leader_elect, "leader election is on by default");
        }
        if std::env::var_os("LOG_FORMAT").is_none() {
            assert_eq!(cli.log.log_format, LogFormat::Json);
        }
        if std::env::var_os("PROBE_ADDR").is_none() {
            assert_eq!(cli.shell.probe_addr.to_string(), "0.0.0.0:8080");
        }
    }

    #[test]
    fn leader_elect_takes_a_bare_flag_or_a_boolean() {
        assert!(parse(&["--leader-elect"]).shell.leader_elect);
        assert!(parse(&["--leader-elect=true"]).shell.leader_elect);
        assert!(!parse(&["--leader-elect=false"]).shell.leader_elect);
        assert!(Cli::try_parse_from(["op", "--leader-elect=maybe"]).is_err());
    }

    #[test]
    fn old_spellings_are_hidden_aliases() {
        let cli = parse(&["--pod-name=op-1", "--namespace=db"]);
        assert_eq!(cli.shell.identity.as_deref(), Some("op-1"));
        assert_eq!(cli.shell.watch_namespace().as_deref(), Some("db"));
        let cli = parse(&["--identity=op-2", "--watch-namespace="]);
        assert_eq!(cli.shell.identity().unwrap(), "op-2");
        assert_eq!(
            cli.shell.watch_namespace(),
            None,
            "empty means every namespace"
        );
        let help = {
            use clap::CommandFactory;
            Cli::command().render_long_help().to_string()
        };
        assert!(
            help.contains("--identity") && !help.contains("--pod-name"),
            "{help}"
        );
    }

    #[test]
    fn the_lease_defaults_to_the_binary_and_follows_the_flags() {
        let cli = parse(&["--lease-namespace=ops", "--identity=a"]);
        let lease = cli.shell.election("etcd-backup-operator", "a").unwrap();
        assert_eq!(
            (lease.namespace.as_str(), lease.name.as_str()),
            ("ops", "etcd-backup-operator")
        );
        assert_eq!(lease.previous_name, None);
        let cli = parse(&[
            "--lease-name=rel-etcd-operator-backup",
            "--lease-namespace=ops",
        ]);
        let lease = cli.shell.election("etcd-backup-operator", "a").unwrap();
        assert_eq!(lease.name, "rel-etcd-operator-backup");
        assert_eq!(lease.previous_name.as_deref(), Some("etcd-backup-operator"));
        assert_eq!(
            cli.shell.install_identity("etcd-backup-operator"),
            "ops/rel-etcd-operator-backup"
        );
        assert!(
            parse(&["--leader-elect=false"])
                .shell
                .election("x", "a")
                .is_none()
        );
    }

    #[test]
    fn a_bad_log_format_is_refused_naming_the_flag() {
        let err = Cli::try_parse_from(["op", "--log-format=yaml"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--log-format") && err.contains("yaml"),
            "{err}"
        );
    }
}

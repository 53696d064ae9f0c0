//! Probes: what to run ([`ProbeAction`], extracted from the spec so the caller only performs
//! it), when ([`ProbeTracker::next_due`]) and what the results mean (thresholds, startup
//! gating), following kubelet's prober `worker.doProbe`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    Startup,
    Readiness,
    Liveness,
}

impl ProbeKind {
    /// `Startup`, `Readiness`, `Liveness`, as event messages capitalise them.
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Liveness => "Liveness",
        }
    }
}

/// The timing of one probe with the API defaults applied (values below 1 become 1, as
/// validation would have required).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSettings {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

impl ProbeSettings {
    pub fn from_probe(probe: &Probe) -> ProbeSettings {
        let secs = |v: Option<i32>, default: i32, min: i32| {
            Duration::from_secs(u64::try_from(v.unwrap_or(default).max(min)).unwrap_or(0))
        };
        let count =
            |v: Option<i32>, default: i32| u32::try_from(v.unwrap_or(default).max(1)).unwrap_or(1);
        ProbeSettings {
            initial_delay: secs(probe.initial_delay_seconds, 0, 0),
            period: secs(probe.period_seconds, 10, 1),
            timeout: secs(probe.timeout_seconds, 1, 1),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }
    }
}

/// What the caller runs for a probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeAction {
    /// Run inside the container's namespaces; exit status 0 is success.
    Exec { command: Vec<String> },
    /// GET; a status in 200..400 is success. `host` defaults to the pod IP; `headers` already
    /// include kubelet's `User-Agent` and `Accept` unless the probe sets its own.
    HttpGet {
        scheme: String,
        host: String,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    /// A TCP connect is success.
    TcpSocket { host: String, port: u16 },
    /// gRPC health checking (`grpc.health.v1`).
    Grpc { port: u16, service: Option<String> },
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProbeError {
    #[error("port {0} not found")]
    PortNotFound(String),
    #[error("invalid port number: {0}")]
    InvalidPort(i64),
    #[error("missing probe handler for {container}:{kind}")]
    NoHandler { container: String, kind: String },
}

/// The `User-Agent` kubelet probes with.
pub const USER_AGENT: &str = "kube-probe/1.33";

/// Extracts the action of `probe` for `container`, with named ports resolved.
pub fn probe_action(
    probe: &Probe,
    kind: ProbeKind,
    container: &Container,
    pod_ip: &str,
) -> Result<ProbeAction, ProbeError> {
    if let Some(exec) = &probe.exec {
        return Ok(ProbeAction::Exec {
            command: exec.command.clone().unwrap_or_default(),
        });
    }
    if let Some(http) = &probe.http_get {
        let mut headers: Vec<(String, String)> = http
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        let has = |name: &str, headers: &[(String, String)]| {
            headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        if !has("User-Agent", &headers) {
            headers.push(("User-Agent".into(), USER_AGENT.into()));
        }
        if !has("Accept", &headers) {
            headers.push(("Accept".into(), "*/*".into()));
        }
        let path = http.path.clone().unwrap_or_default();
        return Ok(ProbeAction::HttpGet {
            scheme: http
                .scheme
                .clone()
                .unwrap_or_else(|| "HTTP".into())
                .to_uppercase(),
            host: http
                .host
                .clone()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| pod_ip.to_owned()),
            port: resolve_port(&http.port, container)?,
            path: if path.starts_with('/') {
                path
            } else {
                format!("/{path}")
            },
            headers,
        });
    }
    if let Some(tcp) = &probe.tcp_socket {
        return Ok(ProbeAction::TcpSocket {
            host: tcp
                .host
                .clone()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| pod_ip.to_owned()),
            port: resolve_port(&tcp.port, container)?,
        });
    }
    if let Some(grpc) = &probe.grpc {
        return Ok(ProbeAction::Grpc {
            port: valid_port(i64::from(grpc.port))?,
            service: grpc.service.clone().filter(|s| !s.is_empty()),
        });
    }
    Err(ProbeError::NoHandler {
        container: container.name.clone(),
        kind: kind.title().to_lowercase(),
    })
}

/// kubelet's `resolveContainerPort`: a number, a named container port, or a number written as
/// a string.
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, ProbeError> {
    match port {
        IntOrString::Int(n) => valid_port(i64::from(*n)),
        IntOrString::String(name) => {
            let named = container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| p.container_port);
            match named {
                Some(n) => valid_port(i64::from(n)),
                None => match name.parse::<i64>() {
                    Ok(n) => valid_port(n),
                    Err(_) => Err(ProbeError::PortNotFound(name.clone())),
                },
            }
        }
    }
}

fn valid_port(n: i64) -> Result<u16, ProbeError> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(ProbeError::InvalidPort(n))
}

/// One probe run's result. `Failure` carries the output kubelet puts in the `Unhealthy` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeOutcome {
    Success,
    Failure(String),
}

/// The state a probe reports: startup starts `Unknown`, readiness `Failure`, liveness `Success`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeState {
    Unknown,
    Success,
    Failure,
}

/// One probe of one container instance. Create a new tracker when the container restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeTracker {
    pub kind: ProbeKind,
    pub settings: ProbeSettings,
    state: ProbeState,
    last_result: Option<bool>,
    run: u32,
    last_probe: Option<Timestamp>,
    /// After a liveness/startup failure the container is killed; kubelet stops probing it.
    on_hold: bool,
}

impl ProbeTracker {
    pub fn new(kind: ProbeKind, settings: ProbeSettings) -> ProbeTracker {
        let state = match kind {
            ProbeKind::Startup => ProbeState::Unknown,
            ProbeKind::Readiness => ProbeState::Failure,
            ProbeKind::Liveness => ProbeState::Success,
        };
        ProbeTracker {
            kind,
            settings,
            state,
            last_result: None,
            run: 0,
            last_probe: None,
            on_hold: false,
        }
    }

    pub fn state(&self) -> ProbeState {
        self.state
    }

    /// When to probe next, for a container running since `started_at`: not before
    /// `initialDelaySeconds`, then every `periodSeconds`. `None` once on hold.
    pub fn next_due(&self, started_at: Timestamp) -> Option<Timestamp> {
        if self.on_hold {
            return None;
        }
        let first = add(started_at, self.settings.initial_delay);
        Some(match self.last_probe {
            Some(last) => add(last, self.settings.period).max(first),
            None => first,
        })
    }

    /// Feeds one result; returns the new state when it changed (a threshold was reached).
    pub fn record(&mut self, now: Timestamp, outcome: &ProbeOutcome) -> Option<ProbeState> {
        self.last_probe = Some(now);
        let success = matches!(outcome, ProbeOutcome::Success);
        if self.last_result == Some(success) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last_result = Some(success);
            self.run = 1;
        }
        let threshold = if success {
            self.settings.success_threshold
        } else {
            self.settings.failure_threshold
        };
        if self.run < threshold {
            return None;
        }
        let new_state = if success {
            ProbeState::Success
        } else {
            ProbeState::Failure
        };
        if !success && matches!(self.kind, ProbeKind::Liveness | ProbeKind::Startup) {
            self.on_hold = true;
            self.run = 0;
        }
        if new_state == self.state {
            return None;
        }
        self.state = new_state;
        Some(new_state)
    }
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(t)
}

/// The probes of one running container, gated as kubelet gates them: readiness and liveness
/// wait until the startup probe succeeded, after which startup is no longer probed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerProbes {
    pub startup: Option<ProbeTracker>,
    pub readiness: Option<ProbeTracker>,
    pub liveness: Option<ProbeTracker>,
}

impl ContainerProbes {
    /// Trackers for the probes the container declares.
    pub fn for_container(container: &Container) -> ContainerProbes {
        let tracker = |p: &Option<Probe>, kind| {
            p.as_ref()
                .map(|p| ProbeTracker::new(kind, ProbeSettings::from_probe(p)))
        };
        ContainerProbes {
            startup: tracker(&container.startup_probe, ProbeKind::Startup),
            readiness: tracker(&container.readiness_probe, ProbeKind::Readiness),
            liveness: tracker(&container.liveness_probe, ProbeKind::Liveness),
        }
    }

    /// `containerStatuses[].started`: no startup probe, or it succeeded.
    pub fn started(&self) -> bool {
        self.startup
            .as_ref()
            .is_none_or(|s| s.state() == ProbeState::Success)
    }

    /// `containerStatuses[].ready`: started, and no readiness probe or it succeeds.
    pub fn ready(&self) -> bool {
        self.started()
            && self
                .readiness
                .as_ref()
                .is_none_or(|r| r.state() == ProbeState::Success)
    }

    /// The probe whose failure means the container must be killed and restarted.
    pub fn failed(&self) -> Option<ProbeKind> {
        [&self.startup, &self.liveness]
            .into_iter()
            .flatten()
            .find(|t| t.state() == ProbeState::Failure)
            .map(|t| t.kind)
    }

    /// The probes due at `now` for a container running since `started_at`.
    pub fn due(&self, now: Timestamp, started_at: Timestamp) -> Vec<ProbeKind> {
        let started = self.started();
        [&self.startup, &self.readiness, &self.liveness]
            .into_iter()
            .flatten()
            .filter(|t| (t.kind == ProbeKind::Startup) != started)
            .filter(|t| t.next_due(started_at).is_some_and(|due| due <= now))
            .map(|t| t.kind)
            .collect()
    }

    /// The earliest moment any probe is due (for the caller's timer).
    pub fn next_due(&self, started_at: Timestamp) -> Option<Timestamp> {
        let started = self.started();
        [&self.startup, &self.readiness, &self.liveness]
            .into_iter()
            .flatten()
            .filter(|t| (t.kind == ProbeKind::Startup) != started)
            .filter_map(|t| t.next_due(started_at))
            .min()
    }

    pub fn record(
        &mut self,
        kind: ProbeKind,
        now: Timestamp,
        outcome: &ProbeOutcome,
    ) -> Option<ProbeState> {
        let tracker = match kind {
            ProbeKind::Startup => self.startup.as_mut(),
            ProbeKind::Readiness => self.readiness.as_mut(),
            ProbeKind::Liveness => self.liveness.as_mut(),
        }?;
        tracker.record(now, outcome)
    }
}

/// The `Unhealthy` Warning event message for a failed probe run.
pub fn unhealthy_message(kind: ProbeKind, output: &str) -> String {
    format!("{} probe failed: {output}", kind.title())
}

/// The `Killing` event message when a liveness or startup failure restarts the container.
pub fn kill_message(kind: ProbeKind, container: &str) -> String {
    format!(
        "Container {container} failed {} probe, will be restarted",
        kind.title().to_lowercase()
    )
}

/// Failure output kubelet reports for an HTTP probe answered outside 200..400.
pub fn http_failure_output(status: u16) -> String {
    format!("HTTP probe failed with statuscode: {status}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn container(v: serde_json::Value) -> Container {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults() {
        let s = ProbeSettings::from_probe(&Probe::default());
        assert_eq!(
            s,
            ProbeSettings {
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
            }
        );
        let absurd = Probe {
            period_seconds: Some(-5),
            failure_threshold: Some(0),
            initial_delay_seconds: Some(-1),
            ..Default::default()
        };
        let s = ProbeSettings::from_probe(&absurd);
        assert_eq!(
            (s.period, s.failure_threshold, s.initial_delay),
            (Duration::from_secs(1), 1, Duration::ZERO)
        );
    }

    #[test]
    fn actions() {
        let c = container(
            json!({"name": "etcd", "ports": [{"name": "client", "containerPort": 2379}],
            "livenessProbe": {"httpGet": {"path": "health", "port": "client"}},
            "readinessProbe": {"tcpSocket": {"port": 2380}},
            "startupProbe": {"exec": {"command": ["etcdctl", "endpoint", "health"]}}}),
        );
        assert_eq!(
            probe_action(
                c.liveness_probe.as_ref().unwrap(),
                ProbeKind::Liveness,
                &c,
                "10.244.0.5"
            )
            .unwrap(),
            ProbeAction::HttpGet {
                scheme: "HTTP".into(),
                host: "10.244.0.5".into(),
                port: 2379,
                path: "/health".into(),
                headers: vec![
                    ("User-Agent".into(), USER_AGENT.into()),
                    ("Accept".into(), "*/*".into())
                ],
            }
        );
        assert_eq!(
            probe_action(
                c.readiness_probe.as_ref().unwrap(),
                ProbeKind::Readiness,
                &c,
                "10.244.0.5"
            )
            .unwrap(),
            ProbeAction::TcpSocket {
                host: "10.244.0.5".into(),
                port: 2380
            }
        );
        assert_eq!(
            probe_action(
                c.startup_probe.as_ref().unwrap(),
                ProbeKind::Startup,
                &c,
                "10.244.0.5"
            )
            .unwrap(),
            ProbeAction::Exec {
                command: vec!["etcdctl".into(), "endpoint".into(), "health".into()]
            }
        );
        let probe = |v: serde_json::Value| -> Probe { serde_json::from_value(v).unwrap() };
        let cases: &[(serde_json::Value, Result<ProbeAction, ProbeError>)] = &[
            (
                json!({"tcpSocket": {"port": "nope"}}),
                Err(ProbeError::PortNotFound("nope".into())),
            ),
            (
                json!({"tcpSocket": {"port": "8080"}}),
                Ok(ProbeAction::TcpSocket {
                    host: "10.244.0.5".into(),
                    port: 8080,
                }),
            ),
            (
                json!({"tcpSocket": {"port": 70000}}),
                Err(ProbeError::InvalidPort(70000)),
            ),
            (
                json!({"tcpSocket": {"port": 0}}),
                Err(ProbeError::InvalidPort(0)),
            ),
            (
                json!({"grpc": {"port": 2379}}),
                Ok(ProbeAction::Grpc {
                    port: 2379,
                    service: None,
                }),
            ),
            (
                json!({"httpGet": {"port": 80, "host": "127.0.0.1", "scheme": "HTTPS",
                "httpHeaders": [{"name": "user-agent", "value": "mine"}]}}),
                Ok(ProbeAction::HttpGet {
                    scheme: "HTTPS".into(),
                    host: "127.0.0.1".into(),
                    port: 80,
                    path: "/".into(),
                    headers: vec![
                        ("user-agent".into(), "mine".into()),
                        ("Accept".into(), "*/*".into()),
                    ],
                }),
            ),
            (
                json!({}),
                Err(ProbeError::NoHandler {
                    container: "etcd".into(),
                    kind: "liveness".into(),
                }),
            ),
        ];
        for (p, expected) in cases {
            assert_eq!(
                &probe_action(&probe(p.clone()), ProbeKind::Liveness, &c, "10.244.0.5"),
                expected,
                "{p}"
            );
        }
    }

    #[test]
    fn thresholds_flip_the_state() {
        let settings = ProbeSettings {
            success_threshold: 2,
            ..ProbeSettings::from_probe(&Probe::default())
        };
        let mut r = ProbeTracker::new(ProbeKind::Readiness, settings);
        assert_eq!(r.state(), ProbeState::Failure);
        assert_eq!(r.record(t(0), &ProbeOutcome::Success), None);
        assert_eq!(
            r.record(t(10), &ProbeOutcome::Success),
            Some(ProbeState::Success)
        );
        assert_eq!(r.record(t(20), &ProbeOutcome::Failure("x".into())), None);
        assert_eq!(r.record(t(30), &ProbeOutcome::Failure("x".into())), None);
        // a success in between resets the failure run
        assert_eq!(r.record(t(40), &ProbeOutcome::Success), None);
        assert_eq!(r.record(t(50), &ProbeOutcome::Failure("x".into())), None);
        assert_eq!(r.record(t(60), &ProbeOutcome::Failure("x".into())), None);
        assert_eq!(
            r.record(t(70), &ProbeOutcome::Failure("x".into())),
            Some(ProbeState::Failure)
        );
        assert_eq!(r.next_due(t(0)), Some(t(80)));
    }

    #[test]
    fn liveness_failure_holds_until_restart() {
        let c = container(
            json!({"name": "c", "livenessProbe": {"exec": {"command": ["false"]}, "initialDelaySeconds": 5, "periodSeconds": 3}}),
        );
        let mut probes = ContainerProbes::for_container(&c);
        assert!(probes.started() && probes.ready());
        assert_eq!(probes.due(t(4), t(0)), vec![]);
        assert_eq!(probes.due(t(5), t(0)), vec![ProbeKind::Liveness]);
        let fail = ProbeOutcome::Failure("exit 1".into());
        assert_eq!(probes.record(ProbeKind::Liveness, t(5), &fail), None);
        assert_eq!(probes.next_due(t(0)), Some(t(8)));
        assert_eq!(probes.record(ProbeKind::Liveness, t(8), &fail), None);
        assert_eq!(probes.failed(), None);
        assert_eq!(
            probes.record(ProbeKind::Liveness, t(11), &fail),
            Some(ProbeState::Failure)
        );
        assert_eq!(probes.failed(), Some(ProbeKind::Liveness));
        assert_eq!(probes.next_due(t(0)), None);
        assert_eq!(
            kill_message(ProbeKind::Liveness, "c"),
            "Container c failed liveness probe, will be restarted"
        );
        assert_eq!(
            unhealthy_message(ProbeKind::Liveness, "exit 1"),
            "Liveness probe failed: exit 1"
        );
    }

    #[test]
    fn startup_gates_readiness_and_liveness() {
        let c = container(json!({"name": "c",
            "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 2},
            "readinessProbe": {"exec": {"command": ["true"]}},
            "livenessProbe": {"exec": {"command": ["true"]}}}));
        let mut probes = ContainerProbes::for_container(&c);
        assert!(!probes.started());
        assert!(!probes.ready());
        assert_eq!(probes.due(t(0), t(0)), vec![ProbeKind::Startup]);
        assert_eq!(
            probes.record(ProbeKind::Startup, t(0), &ProbeOutcome::Success),
            Some(ProbeState::Success)
        );
        assert!(probes.started());
        assert!(!probes.ready(), "readiness starts failed");
        assert_eq!(
            probes.due(t(0), t(0)),
            vec![ProbeKind::Readiness, ProbeKind::Liveness]
        );
        assert_eq!(
            probes.record(ProbeKind::Readiness, t(0), &ProbeOutcome::Success),
            Some(ProbeState::Success)
        );
        assert!(probes.ready());

        let mut slow = ContainerProbes::for_container(&c);
        let fail = ProbeOutcome::Failure("no".into());
        slow.record(ProbeKind::Startup, t(0), &fail);
        assert_eq!(
            slow.record(ProbeKind::Startup, t(10), &fail),
            Some(ProbeState::Failure)
        );
        assert_eq!(slow.failed(), Some(ProbeKind::Startup));
        assert_eq!(slow.due(t(100), t(0)), vec![]);
    }
}

//! `PodStatus` from what the node agent observed, as kubelet's `generateAPIPodStatus` computes
//! it: container statuses, `getPhase`, the kubelet-owned conditions (with
//! `lastTransitionTime` kept while a condition's status holds), IPs, start time and QoS class.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::quantity::Amount;

/// The runtime name in `containerID` (`localkube://<id>`), where real nodes say `containerd://`.
pub const RUNTIME_NAME: &str = "localkube";

pub fn container_id(id: &str) -> String {
    format!("{RUNTIME_NAME}://{id}")
}

/// A finished container instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObservedTerminated {
    /// The exit status; ignored when `signal` is set.
    pub exit_code: i32,
    /// The signal that killed the process: reported as exit code 128 + signal, the way
    /// containerd reports it (the API's `signal` field stays unset, as on real nodes).
    pub signal: Option<i32>,
    /// Defaults to `Completed` for exit code 0 and `Error` otherwise.
    pub reason: Option<String>,
    pub message: Option<String>,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// The runtime id of that instance.
    pub container_id: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObservedState {
    /// Not running: `ContainerCreating`, `ErrImagePull`, `ImagePullBackOff`, `CrashLoopBackOff`,
    /// `CreateContainerConfigError`...
    Waiting {
        reason: String,
        message: Option<String>,
    },
    /// `started` and `ready` come from the probes ([`crate::probes::ContainerProbes`]).
    Running {
        started_at: Timestamp,
        started: bool,
        ready: bool,
    },
    Terminated(ObservedTerminated),
}

/// What the node agent knows of one container (init or regular), matched to the spec by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedContainer {
    pub name: String,
    /// The image as the runtime reports it; defaults to the spec's image.
    pub image: Option<String>,
    pub image_id: String,
    /// The runtime id of the current (or last) instance, without the `localkube://` prefix.
    pub container_id: Option<String>,
    pub state: ObservedState,
    pub restart_count: i32,
    /// The previous instance's end, shown as `lastState.terminated`.
    pub last_state: Option<ObservedTerminated>,
}

/// Everything observed about a pod at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodObservation {
    pub containers: Vec<ObservedContainer>,
    /// The sandbox (network namespace with its IP) exists: `PodReadyToStartContainers`.
    pub sandbox_ready: bool,
    pub pod_ips: Vec<String>,
    pub host_ips: Vec<String>,
    /// The agent decided the pod is finished (its containers will not be restarted), e.g.
    /// after deletion: lets `getPhase` report Succeeded/Failed under `restartPolicy: Always`.
    pub pod_is_terminal: bool,
}

/// The pod's status as kubelet would write it at `now`. The previous status is the pod's own
/// `status`: conditions keep their `lastTransitionTime`, terminal phases stay terminal, and
/// conditions kubelet does not own (readiness gates, `DisruptionTarget`) are carried over.
pub fn pod_status(pod: &Pod, observed: &PodObservation, now: Timestamp) -> PodStatus {
    let now = Timestamp::from_second(now.as_second()).unwrap_or(now);
    let old = pod.status.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let init_specs = spec.init_containers.clone().unwrap_or_default();
    let has_init = !init_specs.is_empty();
    let init_statuses = container_statuses(
        &init_specs,
        observed,
        old.init_container_statuses.as_deref().unwrap_or(&[]),
        has_init,
        true,
    );
    let statuses = container_statuses(
        &spec.containers,
        observed,
        old.container_statuses.as_deref().unwrap_or(&[]),
        has_init,
        false,
    );
    let all: Vec<ContainerStatus> = statuses.iter().chain(&init_statuses).cloned().collect();
    let regular_running = spec.containers.iter().any(|c| {
        observed
            .containers
            .iter()
            .any(|o| o.name == c.name && matches!(o.state, ObservedState::Running { .. }))
    });
    let mut phase = pod_phase(pod, &all, observed.pod_is_terminal, regular_running);
    let old_phase = old.phase.clone().unwrap_or_default();
    let terminal = |p: &str| p == "Succeeded" || p == "Failed";
    if !terminal(phase) && terminal(&old_phase) {
        phase = if old_phase == "Succeeded" {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    let (reason, message) = if phase == old_phase {
        (old.reason.clone(), old.message.clone())
    } else {
        (None, None)
    };

    let old_conditions = old.conditions.clone().unwrap_or_default();
    let mut conditions: Vec<PodCondition> = old_conditions
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    let all_init_first: Vec<ContainerStatus> =
        init_statuses.iter().chain(&statuses).cloned().collect();
    conditions.push(condition(
        "PodReadyToStartContainers",
        observed.sandbox_ready,
        None,
        None,
    ));
    conditions.push(initialized_condition(
        &spec.containers,
        &init_specs,
        &all_init_first,
        phase,
    ));
    let containers_ready =
        containers_ready_condition(&spec.containers, &init_specs, &all_init_first, phase);
    conditions.push(ready_condition(pod, &containers_ready, &conditions));
    conditions.push(containers_ready);
    conditions.push(condition("PodScheduled", true, None, None));
    for c in &mut conditions {
        if !KUBELET_CONDITIONS.contains(&c.type_.as_str()) {
            continue;
        }
        let kept = old_conditions
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
            .and_then(|o| o.last_transition_time.clone());
        c.last_transition_time = Some(kept.unwrap_or(Time(now)));
    }

    let pod_ips = if observed.pod_ips.is_empty() {
        old.pod_ips.clone().unwrap_or_default()
    } else {
        observed
            .pod_ips
            .iter()
            .map(|ip| PodIP { ip: ip.clone() })
            .collect()
    };
    let host_ips = if observed.host_ips.is_empty() {
        old.host_ips.clone().unwrap_or_default()
    } else {
        observed
            .host_ips
            .iter()
            .map(|ip| HostIP { ip: ip.clone() })
            .collect()
    };
    PodStatus {
        phase: Some(phase.to_owned()),
        reason,
        message,
        conditions: Some(conditions),
        container_statuses: Some(statuses),
        init_container_statuses: has_init.then_some(init_statuses),
        pod_ip: pod_ips.first().map(|p| p.ip.clone()),
        pod_ips: (!pod_ips.is_empty()).then_some(pod_ips),
        host_ip: host_ips.first().map(|h| h.ip.clone()),
        host_ips: (!host_ips.is_empty()).then_some(host_ips),
        start_time: old.start_time.clone().or(Some(Time(now))),
        qos_class: Some(qos_class(pod).to_owned()),
        nominated_node_name: old.nominated_node_name.clone(),
        ..Default::default()
    }
}

/// Conditions kubelet sets (`PodConditionsByKubelet` + `PodReadyToStartContainers`).
const KUBELET_CONDITIONS: [&str; 5] = [
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
];

/// Whether kubelet owns the condition `type_` (it writes those; readiness gates and
/// `DisruptionTarget` belong to other writers).
pub fn is_kubelet_condition(type_: &str) -> bool {
    KUBELET_CONDITIONS.contains(&type_)
}

fn condition(
    type_: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
) -> PodCondition {
    PodCondition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message,
        ..Default::default()
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn find<'a>(statuses: &'a [ContainerStatus], name: &str) -> Option<&'a ContainerStatus> {
    statuses.iter().find(|s| s.name == name)
}

/// Go's `%s` of a `[]string`: `[a b]`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn state(s: &ContainerStatus) -> (bool, bool, bool) {
    let st = s.state.as_ref();
    (
        st.is_some_and(|s| s.running.is_some()),
        st.is_some_and(|s| s.terminated.is_some()),
        st.is_some_and(|s| s.waiting.is_some()),
    )
}

fn last_terminated(s: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    s.last_state.as_ref().and_then(|l| l.terminated.as_ref())
}

/// `status.GeneratePodInitializedCondition`.
fn initialized_condition(
    containers: &[Container],
    init: &[Container],
    statuses: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    let mut unknown = Vec::new();
    let mut incomplete = Vec::new();
    for c in init {
        match find(statuses, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) => {
                let done = if is_sidecar(c) {
                    s.started == Some(true)
                } else {
                    s.ready
                };
                if !done {
                    incomplete.push(c.name.as_str());
                }
            }
        }
    }
    if phase == "Succeeded" && unknown.is_empty() {
        return condition("Initialized", true, Some("PodCompleted"), None);
    }
    let regular_started = statuses.iter().any(|s| {
        containers.iter().any(|c| c.name == s.name) && {
            let (running, terminated, _) = state(s);
            running || terminated
        }
    });
    if regular_started {
        return condition("Initialized", true, None, None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !incomplete.is_empty() {
        messages.push(format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        ));
    }
    if messages.is_empty() {
        condition("Initialized", true, None, None)
    } else {
        condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(messages.join(", ")),
        )
    }
}

/// `status.GenerateContainersReadyCondition`.
fn containers_ready_condition(
    containers: &[Container],
    init: &[Container],
    statuses: &[ContainerStatus],
    phase: &str,
) -> PodCondition {
    let mut unknown = Vec::new();
    let mut unready = Vec::new();
    for c in init.iter().filter(|c| is_sidecar(c)).chain(containers) {
        match find(statuses, &c.name) {
            None => unknown.push(c.name.as_str()),
            Some(s) if !s.ready => unready.push(c.name.as_str()),
            Some(_) => {}
        }
    }
    if (phase == "Succeeded" && unknown.is_empty()) || phase == "Failed" {
        let reason = if phase == "Failed" {
            "PodFailed"
        } else {
            "PodCompleted"
        };
        return condition("ContainersReady", false, Some(reason), None);
    }
    let mut messages = Vec::new();
    if !unknown.is_empty() {
        messages.push(format!(
            "containers with unknown status: {}",
            go_list(&unknown)
        ));
    }
    if !unready.is_empty() {
        messages.push(format!(
            "containers with unready status: {}",
            go_list(&unready)
        ));
    }
    if messages.is_empty() {
        condition("ContainersReady", true, None, None)
    } else {
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            Some(messages.join(", ")),
        )
    }
}

/// `status.GeneratePodReadyCondition`: ContainersReady, then every readiness gate.
fn ready_condition(
    pod: &Pod,
    containers_ready: &PodCondition,
    conditions: &[PodCondition],
) -> PodCondition {
    if containers_ready.status != "True" {
        return PodCondition {
            type_: "Ready".to_owned(),
            ..containers_ready.clone()
        };
    }
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_deref())
        .unwrap_or(&[]);
    let mut messages = Vec::new();
    for gate in gates {
        let gate_name = localkube_gofmt::quote(&gate.condition_type);
        match conditions.iter().find(|c| c.type_ == gate.condition_type) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate {gate_name} does not exist."
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate {gate_name} is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        condition("Ready", true, None, None)
    } else {
        condition(
            "Ready",
            false,
            Some("ReadinessGatesNotReady"),
            Some(messages.join(", ")),
        )
    }
}

/// kubelet's `convertToAPIContainerStatuses` over observed containers.
fn container_statuses(
    specs: &[Container],
    observed: &PodObservation,
    old: &[ContainerStatus],
    has_init: bool,
    init: bool,
) -> Vec<ContainerStatus> {
    specs
        .iter()
        .map(|spec| {
            let previous = find(old, &spec.name);
            match observed.containers.iter().find(|o| o.name == spec.name) {
                Some(o) => convert(spec, o, init),
                None => match previous {
                    Some(p) if p.state.as_ref().is_some_and(|s| s.terminated.is_some()) => {
                        p.clone()
                    }
                    _ => ContainerStatus {
                        name: spec.name.clone(),
                        image: spec.image.clone().unwrap_or_default(),
                        state: Some(ContainerState {
                            waiting: Some(ContainerStateWaiting {
                                reason: Some(
                                    if has_init {
                                        "PodInitializing"
                                    } else {
                                        "ContainerCreating"
                                    }
                                    .to_owned(),
                                ),
                                message: None,
                            }),
                            ..Default::default()
                        }),
                        restart_count: previous.map_or(0, |p| p.restart_count),
                        last_state: Some(
                            previous
                                .and_then(|p| p.last_state.clone())
                                .unwrap_or_default(),
                        ),
                        started: Some(false),
                        ..Default::default()
                    },
                },
            }
        })
        .collect()
}

fn convert(spec: &Container, o: &ObservedContainer, init: bool) -> ContainerStatus {
    let regular_init = init && !is_sidecar(spec);
    let (state, started, ready) = match &o.state {
        ObservedState::Waiting { reason, message } => (
            ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.clone()),
                    message: message.clone(),
                }),
                ..Default::default()
            },
            false,
            false,
        ),
        ObservedState::Running {
            started_at,
            started,
            ready,
        } => (
            ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(Time(*started_at)),
                }),
                ..Default::default()
            },
            *started,
            // a regular init container is ready only once it completed
            *started && *ready && !regular_init,
        ),
        ObservedState::Terminated(t) => {
            let terminated = terminated(t, o.container_id.as_deref());
            let ok = terminated.exit_code == 0;
            (
                ContainerState {
                    terminated: Some(terminated),
                    ..Default::default()
                },
                false,
                regular_init && ok,
            )
        }
    };
    ContainerStatus {
        name: spec.name.clone(),
        image: o
            .image
            .clone()
            .unwrap_or_else(|| spec.image.clone().unwrap_or_default()),
        image_id: o.image_id.clone(),
        container_id: o.container_id.as_deref().map(container_id),
        ready,
        started: Some(started),
        restart_count: o.restart_count,
        state: Some(state),
        last_state: Some(ContainerState {
            terminated: o.last_state.as_ref().map(|t| terminated(t, None)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn terminated(t: &ObservedTerminated, current_id: Option<&str>) -> ContainerStateTerminated {
    let exit_code = match t.signal {
        Some(signal) => 128i32.saturating_add(signal),
        None => t.exit_code,
    };
    let reason = t
        .reason
        .clone()
        .unwrap_or_else(|| if exit_code == 0 { "Completed" } else { "Error" }.to_owned());
    ContainerStateTerminated {
        exit_code,
        signal: None,
        reason: Some(reason),
        message: t.message.clone(),
        started_at: t.started_at.map(Time),
        finished_at: t.finished_at.map(Time),
        container_id: t.container_id.as_deref().or(current_id).map(container_id),
    }
}

/// kubelet's `getPhase` (without the 1.34+ container restart rules). `statuses` holds the
/// regular and init container statuses; `regular_running` is whether a regular container is
/// running now (the pod has initialized even if a sidecar restarts).
pub fn pod_phase(
    pod: &Pod,
    statuses: &[ContainerStatus],
    pod_is_terminal: bool,
    regular_running: bool,
) -> &'static str {
    let empty_spec = Default::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty_spec);
    let init = spec.init_containers.as_deref().unwrap_or(&[]);
    let restart_policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let mut pending_regular_init = 0;
    let mut pending_sidecars = 0;
    let mut failed_init = 0;
    for c in init.iter().filter(|c| !is_sidecar(c)) {
        let Some(s) = find(statuses, &c.name) else {
            pending_regular_init += 1;
            continue;
        };
        let (running, terminated, waiting) = state(s);
        if running {
            pending_regular_init += 1;
        } else if terminated {
            if s.state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code != 0)
            {
                failed_init += 1;
            }
        } else if waiting {
            match last_terminated(s) {
                Some(t) if t.exit_code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_regular_init += 1,
            }
        } else {
            pending_regular_init += 1;
        }
    }
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in init.iter().filter(|c| is_sidecar(c)) {
        let Some(s) = find(statuses, &c.name) else {
            unknown += 1;
            continue;
        };
        let (is_running, is_terminated, is_waiting) = state(s);
        if is_running {
            if s.started != Some(true) {
                pending_sidecars += 1;
            }
            running += 1;
        } else if is_terminated {
        } else if is_waiting {
            if last_terminated(s).is_none() {
                pending_sidecars += 1;
                waiting += 1;
            }
        } else {
            pending_sidecars += 1;
            unknown += 1;
        }
    }
    for c in &spec.containers {
        let Some(s) = find(statuses, &c.name) else {
            unknown += 1;
            continue;
        };
        let (is_running, is_terminated, is_waiting) = state(s);
        if is_running {
            running += 1;
        } else if is_terminated {
            stopped += 1;
            if s.state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0)
            {
                succeeded += 1;
            }
        } else if is_waiting {
            if last_terminated(s).is_some() {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            unknown += 1;
        }
    }
    if failed_init > 0 && restart_policy == "Never" {
        return "Failed";
    }
    if pending_regular_init > 0 || (pending_sidecars > 0 && !regular_running) || waiting > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if pod_is_terminal {
            return if stopped == succeeded {
                "Succeeded"
            } else {
                "Failed"
            };
        }
        if restart_policy == "Always" {
            return "Running";
        }
        if stopped == succeeded {
            return "Succeeded";
        }
        if restart_policy == "Never" {
            return "Failed";
        }
        return "Running";
    }
    "Pending"
}

/// `qos.GetPodQOS`: BestEffort without any cpu/memory request or limit; Guaranteed when every
/// container (init included) limits both cpu and memory and the summed requests equal the
/// summed limits; Burstable otherwise.
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = &pod.spec else {
        return "BestEffort";
    };
    let mut requests: BTreeMap<&str, Amount> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Amount> = BTreeMap::new();
    let mut guaranteed = true;
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let resources = c.resources.as_ref();
        for (name, q) in resources
            .and_then(|r| r.requests.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(amount) = qos_amount(name, &q.0) {
                add(&mut requests, name, amount);
            }
        }
        let mut found = (false, false);
        for (name, q) in resources
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(amount) = qos_amount(name, &q.0) {
                add(&mut limits, name, amount);
                if name == "cpu" {
                    found.0 = true;
                } else {
                    found.1 = true;
                }
            }
        }
        if found != (true, true) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests
            .iter()
            .all(|(name, req)| limits.get(name) == Some(req))
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// A positive cpu or memory amount; other resources (and unparsable values) do not count.
fn qos_amount(name: &str, quantity: &str) -> Option<Amount> {
    if name != "cpu" && name != "memory" {
        return None;
    }
    Amount::parse(quantity).ok().filter(|a| a.is_positive())
}

fn add<'a>(map: &mut BTreeMap<&'a str, Amount>, name: &'a str, amount: Amount) {
    let total = match map.get(name) {
        Some(existing) => existing.checked_add(amount).unwrap_or(*existing),
        None => amount,
    };
    map.insert(name, total);
}

#[cfg(test)]
mod tests;

use super::*;
use serde_json::{Value, json};

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}),
    )
    .unwrap()
}

fn cs(name: &str, state: Value, last: Value) -> ContainerStatus {
    serde_json::from_value(
        json!({"name": name, "image": "", "imageID": "", "ready": false, "restartCount": 0,
        "state": state, "lastState": last, "started": state.get("running").is_some()}),
    )
    .unwrap()
}

fn running(name: &str) -> ContainerStatus {
    cs(name, json!({"running": {}}), json!({}))
}

fn waiting(name: &str) -> ContainerStatus {
    cs(
        name,
        json!({"waiting": {"reason": "ContainerCreating"}}),
        json!({}),
    )
}

fn waiting_after(name: &str, code: i32) -> ContainerStatus {
    cs(
        name,
        json!({"waiting": {"reason": "CrashLoopBackOff"}}),
        json!({"terminated": {"exitCode": code}}),
    )
}

fn exited(name: &str, code: i32) -> ContainerStatus {
    cs(name, json!({"terminated": {"exitCode": code}}), json!({}))
}

/// Cases of kubelet's `TestPodPhaseWithRestart{Always,Never,OnFailure}` and the init
/// container variants, for a pod with containers a and b.
#[test]
fn phase_like_get_phase() {
    let two = |policy: &str| {
        pod(json!({"restartPolicy": policy, "containers": [{"name": "a"}, {"name": "b"}]}))
    };
    let cases: Vec<(&str, Pod, Vec<ContainerStatus>, bool, &str)> = vec![
        (
            "always: all running",
            two("Always"),
            vec![running("a"), running("b")],
            false,
            "Running",
        ),
        (
            "always: all stopped",
            two("Always"),
            vec![exited("a", 0), exited("b", 1)],
            false,
            "Running",
        ),
        (
            "always: mixed",
            two("Always"),
            vec![running("a"), exited("b", 0)],
            false,
            "Running",
        ),
        (
            "always: one waiting",
            two("Always"),
            vec![running("a"), waiting("b")],
            false,
            "Pending",
        ),
        (
            "always: restarting",
            two("Always"),
            vec![running("a"), waiting_after("b", 1)],
            false,
            "Running",
        ),
        (
            "always: unknown",
            two("Always"),
            vec![running("a")],
            false,
            "Pending",
        ),
        (
            "always: terminal, all succeeded",
            two("Always"),
            vec![exited("a", 0), exited("b", 0)],
            true,
            "Succeeded",
        ),
        (
            "always: terminal, one failed",
            two("Always"),
            vec![exited("a", 0), exited("b", 137)],
            true,
            "Failed",
        ),
        (
            "never: all running",
            two("Never"),
            vec![running("a"), running("b")],
            false,
            "Running",
        ),
        (
            "never: all succeeded",
            two("Never"),
            vec![exited("a", 0), exited("b", 0)],
            false,
            "Succeeded",
        ),
        (
            "never: one failed",
            two("Never"),
            vec![exited("a", 0), exited("b", 1)],
            false,
            "Failed",
        ),
        (
            "never: mixed",
            two("Never"),
            vec![running("a"), exited("b", 1)],
            false,
            "Running",
        ),
        (
            "never: waiting",
            two("Never"),
            vec![running("a"), waiting("b")],
            false,
            "Pending",
        ),
        (
            "onfailure: all succeeded",
            two("OnFailure"),
            vec![exited("a", 0), exited("b", 0)],
            false,
            "Succeeded",
        ),
        (
            "onfailure: failed restarts",
            two("OnFailure"),
            vec![exited("a", 0), exited("b", 1)],
            false,
            "Running",
        ),
        (
            "onfailure: crash loop",
            two("OnFailure"),
            vec![exited("a", 0), waiting_after("b", 1)],
            false,
            "Running",
        ),
        ("no statuses", two("Always"), vec![], false, "Pending"),
    ];
    let init = |policy: &str| {
        pod(
            json!({"restartPolicy": policy, "initContainers": [{"name": "i"}], "containers": [{"name": "a"}]}),
        )
    };
    let sidecar = pod(
        json!({"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{"name": "a"}]}),
    );
    let mut started_sidecar = running("s");
    started_sidecar.started = Some(true);
    let mut unstarted_sidecar = running("s");
    unstarted_sidecar.started = Some(false);
    let more: Vec<(&str, Pod, Vec<ContainerStatus>, bool, &str)> = vec![
        (
            "init running",
            init("Always"),
            vec![running("i"), waiting("a")],
            false,
            "Pending",
        ),
        (
            "init done, container creating",
            init("Always"),
            vec![exited("i", 0), waiting("a")],
            false,
            "Pending",
        ),
        (
            "init done, container running",
            init("Always"),
            vec![exited("i", 0), running("a")],
            false,
            "Running",
        ),
        (
            "init failed, never",
            init("Never"),
            vec![exited("i", 1), waiting("a")],
            false,
            "Failed",
        ),
        (
            "init crash loop, onfailure",
            init("OnFailure"),
            vec![waiting_after("i", 1), waiting("a")],
            false,
            "Pending",
        ),
        (
            "init crash loop, never",
            init("Never"),
            vec![waiting_after("i", 1), waiting("a")],
            false,
            "Failed",
        ),
        (
            "sidecar started, container running",
            sidecar.clone(),
            vec![started_sidecar.clone(), running("a")],
            false,
            "Running",
        ),
        (
            "sidecar not started yet",
            sidecar.clone(),
            vec![unstarted_sidecar.clone(), waiting("a")],
            false,
            "Pending",
        ),
        (
            "sidecar restarting after init",
            sidecar,
            vec![unstarted_sidecar, running("a")],
            false,
            "Running",
        ),
    ];
    for (name, p, statuses, terminal, expected) in cases.into_iter().chain(more) {
        let regular_running = statuses.iter().any(|s| s.name == "a" && state(s).0);
        assert_eq!(
            pod_phase(&p, &statuses, terminal, regular_running),
            expected,
            "{name}"
        );
    }
}

/// Cases after kubelet's `TestComputePodQOS`.
#[test]
fn qos_classes() {
    let res = |requests: Value, limits: Value| json!({"requests": requests, "limits": limits});
    let cases: &[(&str, Value, &str)] = &[
        (
            "no resources",
            json!({"containers": [{"name": "a"}]}),
            "BestEffort",
        ),
        (
            "zero requests",
            json!({"containers": [{"name": "a", "resources": res(json!({"cpu": "0"}), json!({}))}]}),
            "BestEffort",
        ),
        (
            "only hugepages",
            json!({"containers": [{"name": "a", "resources": res(json!({}), json!({"hugepages-2Mi": "2Mi"}))}]}),
            "BestEffort",
        ),
        (
            "cpu request",
            json!({"containers": [{"name": "a", "resources": res(json!({"cpu": "100m"}), json!({}))}]}),
            "Burstable",
        ),
        (
            "equal requests and limits",
            json!({"containers": [{"name": "a", "resources": res(json!({"cpu": "100m", "memory": "100Mi"}), json!({"cpu": "0.1", "memory": "104857600"}))}]}),
            "Guaranteed",
        ),
        (
            "limits above requests",
            json!({"containers": [{"name": "a", "resources": res(json!({"cpu": "100m", "memory": "100Mi"}), json!({"cpu": "200m", "memory": "100Mi"}))}]}),
            "Burstable",
        ),
        (
            "only memory limited",
            json!({"containers": [{"name": "a", "resources": res(json!({"memory": "100Mi"}), json!({"memory": "100Mi"}))}]}),
            "Burstable",
        ),
        (
            "one guaranteed, one best effort",
            json!({"containers": [{"name": "a", "resources": res(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"}))}, {"name": "b"}]}),
            "Burstable",
        ),
        (
            "init containers count",
            json!({"initContainers": [{"name": "i", "resources": res(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"}))}],
                "containers": [{"name": "a", "resources": res(json!({"cpu": "1", "memory": "1Gi"}), json!({"cpu": "1", "memory": "1Gi"}))}]}),
            "Guaranteed",
        ),
        (
            "garbage quantity ignored",
            json!({"containers": [{"name": "a", "resources": res(json!({"cpu": "lots"}), json!({}))}]}),
            "BestEffort",
        ),
    ];
    for (name, spec, expected) in cases {
        assert_eq!(qos_class(&pod(spec.clone())), *expected, "{name}");
    }
}

fn etcd_pod(extra_status: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "etcd-0", "namespace": "db", "uid": "u"},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "etcd", "image": "gcr.io/etcd-development/etcd:v3.5.17"}],
            "restartPolicy": "Always"
        },
        "status": extra_status
    }))
    .unwrap()
}

fn observed(name: &str, state: ObservedState) -> ObservedContainer {
    ObservedContainer {
        name: name.into(),
        image: None,
        image_id: format!("{name}@sha256:00"),
        container_id: Some(format!("{name}-1")),
        state,
        restart_count: 0,
        last_state: None,
    }
}

fn cond<'a>(status: &'a PodStatus, type_: &str) -> &'a PodCondition {
    status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap()
}

fn summary(status: &PodStatus) -> Vec<(String, String, Option<String>, Option<String>)> {
    status
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect()
}

fn s(v: &str) -> String {
    v.to_owned()
}

#[test]
fn pod_lifecycle_statuses() {
    // 1. scheduled, nothing observed yet
    let p = etcd_pod(json!({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:00Z"}]}));
    let st = pod_status(&p, &PodObservation::default(), t(0));
    assert_eq!(st.phase.as_deref(), Some("Pending"));
    assert_eq!(
        summary(&st),
        vec![
            (s("PodReadyToStartContainers"), s("False"), None, None),
            (
                s("Initialized"),
                s("False"),
                Some(s("ContainersNotInitialized")),
                Some(s("containers with incomplete status: [init]"))
            ),
            (
                s("Ready"),
                s("False"),
                Some(s("ContainersNotReady")),
                Some(s("containers with unready status: [etcd]"))
            ),
            (
                s("ContainersReady"),
                s("False"),
                Some(s("ContainersNotReady")),
                Some(s("containers with unready status: [etcd]"))
            ),
            (s("PodScheduled"), s("True"), None, None),
        ]
    );
    // PodScheduled kept its time, the others start now
    assert_eq!(
        cond(&st, "PodScheduled")
            .last_transition_time
            .as_ref()
            .unwrap()
            .0
            .to_string(),
        "2023-11-14T22:13:00Z"
    );
    assert_eq!(cond(&st, "Ready").last_transition_time, Some(Time(t(0))));
    let init = &st.init_container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        init.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("PodInitializing")
    );
    let etcd = &st.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        etcd.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("PodInitializing")
    );
    assert_eq!(
        (etcd.image.as_str(), etcd.ready, etcd.started),
        ("gcr.io/etcd-development/etcd:v3.5.17", false, Some(false))
    );
    assert_eq!(st.start_time, Some(Time(t(0))));
    assert_eq!(st.qos_class.as_deref(), Some("BestEffort"));

    // 2. init done, etcd running but not ready yet
    let mut p = p;
    p.status = Some(st);
    let obs = PodObservation {
        containers: vec![
            observed(
                "init",
                ObservedState::Terminated(ObservedTerminated {
                    exit_code: 0,
                    started_at: Some(t(1)),
                    finished_at: Some(t(2)),
                    ..Default::default()
                }),
            ),
            observed(
                "etcd",
                ObservedState::Running {
                    started_at: t(3),
                    started: true,
                    ready: false,
                },
            ),
        ],
        sandbox_ready: true,
        pod_ips: vec!["10.244.0.9".into()],
        host_ips: vec!["10.244.0.1".into()],
        pod_is_terminal: false,
    };
    let st = pod_status(&p, &obs, t(5));
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(cond(&st, "Initialized").status, "True");
    assert_eq!(
        cond(&st, "Initialized").last_transition_time,
        Some(Time(t(5)))
    );
    assert_eq!(cond(&st, "Ready").status, "False");
    assert_eq!(
        cond(&st, "Ready").last_transition_time,
        Some(Time(t(0))),
        "still False: time kept"
    );
    assert_eq!(st.start_time, Some(Time(t(0))));
    assert_eq!(
        (st.pod_ip.as_deref(), st.host_ip.as_deref()),
        (Some("10.244.0.9"), Some("10.244.0.1"))
    );
    let init = &st.init_container_statuses.as_ref().unwrap()[0];
    let term = init.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(
        (
            term.reason.as_deref(),
            term.container_id.as_deref(),
            init.ready
        ),
        (Some("Completed"), Some("localkube://init-1"), true)
    );
    let etcd = &st.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        (etcd.ready, etcd.started, etcd.container_id.as_deref()),
        (false, Some(true), Some("localkube://etcd-1"))
    );
    assert_eq!(etcd.image_id, "etcd@sha256:00");

    // 3. ready
    p.status = Some(st);
    let mut obs = obs;
    obs.containers[1].state = ObservedState::Running {
        started_at: t(3),
        started: true,
        ready: true,
    };
    let st = pod_status(&p, &obs, t(8));
    assert_eq!(
        (
            cond(&st, "Ready").status.as_str(),
            cond(&st, "ContainersReady").status.as_str()
        ),
        ("True", "True")
    );
    assert_eq!(cond(&st, "Ready").last_transition_time, Some(Time(t(8))));
    assert_eq!(
        cond(&st, "Initialized").last_transition_time,
        Some(Time(t(5)))
    );

    // 4. killed by SIGKILL, now crash-looping
    p.status = Some(st);
    obs.containers[1] = ObservedContainer {
        state: ObservedState::Waiting {
            reason: "CrashLoopBackOff".into(),
            message: Some("back-off 10s restarting failed container=etcd pod=etcd-0_db(u)".into()),
        },
        restart_count: 1,
        last_state: Some(ObservedTerminated {
            exit_code: -1,
            signal: Some(9),
            started_at: Some(t(3)),
            finished_at: Some(t(20)),
            container_id: Some("etcd-1".into()),
            ..Default::default()
        }),
        ..obs.containers[1].clone()
    };
    let st = pod_status(&p, &obs, t(21));
    assert_eq!(st.phase.as_deref(), Some("Running"));
    let etcd = &st.container_statuses.as_ref().unwrap()[0];
    let last = etcd
        .last_state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref(), last.signal),
        (137, Some("Error"), None)
    );
    assert_eq!(etcd.restart_count, 1);
    assert_eq!(cond(&st, "Ready").status, "False");
    assert_eq!(
        cond(&st, "Ready").message.as_deref(),
        Some("containers with unready status: [etcd]")
    );
}

#[test]
fn completed_pods_and_terminal_phases() {
    let job: Pod = serde_json::from_value(json!({
        "metadata": {"name": "job", "namespace": "ns", "uid": "u"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}
    }))
    .unwrap();
    let done = PodObservation {
        containers: vec![observed(
            "main",
            ObservedState::Terminated(ObservedTerminated::default()),
        )],
        sandbox_ready: false,
        ..Default::default()
    };
    let st = pod_status(&job, &done, t(0));
    assert_eq!(st.phase.as_deref(), Some("Succeeded"));
    assert_eq!(cond(&st, "Ready").reason.as_deref(), Some("PodCompleted"));
    assert_eq!(
        cond(&st, "ContainersReady").reason.as_deref(),
        Some("PodCompleted")
    );
    assert_eq!(
        cond(&st, "Initialized").reason.as_deref(),
        Some("PodCompleted")
    );
    assert_eq!(init_none(&st), None);

    // a terminal phase never goes back, even if nothing is observed any more
    let mut job = job;
    job.status = Some(st);
    let st = pod_status(&job, &PodObservation::default(), t(10));
    assert_eq!(st.phase.as_deref(), Some("Succeeded"));
    let main = &st.container_statuses.as_ref().unwrap()[0];
    assert!(
        main.state.as_ref().unwrap().terminated.is_some(),
        "old terminated status kept"
    );

    let failed = PodObservation {
        containers: vec![observed(
            "main",
            ObservedState::Terminated(ObservedTerminated {
                exit_code: 2,
                ..Default::default()
            }),
        )],
        ..Default::default()
    };
    job.status = None;
    let st = pod_status(&job, &failed, t(0));
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(cond(&st, "Ready").reason.as_deref(), Some("PodFailed"));
    let main = &st.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        main.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Error")
    );
}

fn init_none(st: &PodStatus) -> Option<usize> {
    st.init_container_statuses.as_ref().map(Vec::len)
}

#[test]
fn readiness_gates_and_foreign_conditions() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"containers": [{"name": "a"}], "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/gone"}]},
        "status": {"conditions": [{"type": "example.com/lb", "status": "False"}]}
    }))
    .unwrap();
    let obs = PodObservation {
        containers: vec![observed(
            "a",
            ObservedState::Running {
                started_at: t(0),
                started: true,
                ready: true,
            },
        )],
        sandbox_ready: true,
        ..Default::default()
    };
    let st = pod_status(&p, &obs, t(1));
    assert_eq!(
        st.conditions.as_ref().unwrap()[0].type_,
        "example.com/lb",
        "foreign conditions kept first"
    );
    let ready = cond(&st, "Ready");
    assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some(
            "the status of pod readiness gate \"example.com/lb\" is not \"True\", but False, corresponding condition of pod readiness gate \"example.com/gone\" does not exist."
        )
    );
    assert_eq!(cond(&st, "ContainersReady").status, "True");
}

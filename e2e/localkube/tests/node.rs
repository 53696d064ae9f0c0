//! The node agent with real clients (spec §g item 6): pods really run, with env, volumes,
//! init containers, probes, restarts, graceful termination, logs and in-cluster kube-rs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams};

const POD_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn env_volumes_init_containers_readiness_and_logs() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {MODE: fast, app.conf: "level=debug\n"}
---
apiVersion: v1
kind: Service
metadata: {name: envtest}
spec:
  selector: {app: envtest}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: envtest, labels: {app: envtest}}
spec:
  initContainers:
  - {name: first, image: busybox, command: [sh, -c, 'echo first >> /work/order'], volumeMounts: [{name: work, mountPath: /work}]}
  - {name: second, image: busybox, command: [sh, -c, 'echo second >> /work/order'], volumeMounts: [{name: work, mountPath: /work}]}
  containers:
  - name: main
    image: busybox
    command: [sh, -c]
    args:
    - |
      echo "pod=$(POD_NAME) ns=$POD_NS ip=$POD_IP mode=$MODE pw=$PASSWORD greeting=$GREETING home=${HOME:-unset}"
      echo "order=$(cat /work/order | tr '\n' ,)"
      echo "conf=$(cat /etc/settings/app.conf)"
      echo "sa-ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)"
      test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token-present
      echo "hostname=$(hostname)"
      (sleep 15; touch /work/ready) &
      exec sleep 3600
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: POD_NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}
    - {name: GREETING, value: "hello-$(POD_NAME)"}
    envFrom: [{configMapRef: {name: settings}}]
    volumeMounts: [{name: work, mountPath: /work}, {name: settings, mountPath: /etc/settings}]
    readinessProbe: {exec: {command: [test, -f, /work/ready]}, periodSeconds: 1}
  volumes:
  - {name: work, emptyDir: {}}
  - {name: settings, configMap: {name: settings}}
"#,
    );
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    // Running but not yet Ready: the EndpointSlice lists the pod as not ready. That state lasts
    // until the container touches /work/ready, 15 s after it starts: the EndpointSlice
    // controller must publish it before then (a few seconds under CI load; 6 s left too little).
    let running = wait_until("envtest Running", POD_TIMEOUT, || async {
        let p = pods.get("envtest").await.map_err(|e| e.to_string())?;
        let status = p.status.clone().unwrap_or_default();
        match status.phase.as_deref() {
            Some("Running") => Ok(p),
            _ => Err(format!("{status:?}")),
        }
    })
    .await;
    let ip = running.status.as_ref().unwrap().pod_ip.clone().unwrap();
    assert!(ip.starts_with("10.244."), "pod IP from the pod CIDR: {ip}");
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let readiness_of = |want: bool| {
        let slices = slices.clone();
        let ip = ip.clone();
        async move {
            let list = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=envtest"))
                .await
                .map_err(|e| e.to_string())?;
            let ready = list
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .find(|e| e.addresses.contains(&ip))
                .and_then(|e| e.conditions.as_ref()?.ready);
            if ready == Some(want) {
                Ok(())
            } else {
                Err(format!("ready={ready:?}"))
            }
        }
    };
    wait_until("endpoint listed not ready", Duration::from_secs(20), || {
        readiness_of(false)
    })
    .await;
    wait_pod_ready(&client, "default", "envtest", POD_TIMEOUT).await;
    wait_until("endpoint ready", Duration::from_secs(20), || {
        readiness_of(true)
    })
    .await;

    let logs = lk.kubectl(&kc, &["logs", "envtest"]).unwrap();
    for want in [
        format!(
            "pod=envtest ns=default ip={ip} mode=fast pw=s3cret greeting=hello-envtest home=/root"
        ),
        "order=first,second,".to_string(),
        "conf=level=debug".to_string(),
        "sa-ns=default".to_string(),
        "token-present".to_string(),
        "hostname=envtest".to_string(),
    ] {
        assert!(logs.contains(&want), "logs lack {want:?}:\n{logs}");
    }
    let tail = lk.kubectl(&kc, &["logs", "envtest", "--tail=1"]).unwrap();
    assert_eq!(tail.trim(), "hostname=envtest");
    let init = lk
        .kubectl(&kc, &["logs", "envtest", "-c", "first"])
        .unwrap();
    assert_eq!(init, "", "the init container printed nothing");
    let describe = lk.kubectl(&kc, &["describe", "pod", "envtest"]).unwrap();
    assert!(describe.contains("Started"), "{describe}");
}

#[tokio::test]
async fn liveness_restarts_bad_images_and_missing_keys_show_as_on_kubernetes() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: flaky}
spec:
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'touch /work/alive; sleep 2; rm /work/alive; exec sleep 3600']
    volumeMounts: [{name: work, mountPath: /work}]
    livenessProbe: {exec: {command: [test, -f, /work/alive]}, periodSeconds: 1, failureThreshold: 1}
  volumes: [{name: work, emptyDir: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: unmapped}
spec:
  containers: [{name: main, image: "example.com/not-an-image:1.0"}]
---
apiVersion: v1
kind: Pod
metadata: {name: nosecret}
spec:
  containers:
  - name: main
    image: busybox
    command: [sleep, "3600"]
    env: [{name: X, valueFrom: {secretKeyRef: {name: missing, key: k}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: nocommand}
spec:
  restartPolicy: Never
  containers: [{name: main, image: busybox, command: [no-such-command-here]}]
"#,
    );
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let waiting_reason = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            let s = p
                .status
                .and_then(|s| s.container_statuses)
                .and_then(|cs| cs.into_iter().next());
            Ok::<_, String>(s)
        }
    };
    wait_until("liveness restart", Duration::from_secs(60), || async {
        match waiting_reason("flaky").await? {
            Some(s) if s.restart_count >= 1 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    wait_until("ImagePullBackOff", Duration::from_secs(60), || async {
        match waiting_reason("unmapped").await? {
            Some(s)
                if s.state
                    .as_ref()
                    .and_then(|st| st.waiting.as_ref())
                    .and_then(|w| w.reason.as_deref())
                    == Some("ImagePullBackOff") =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    wait_until(
        "CreateContainerConfigError",
        Duration::from_secs(30),
        || async {
            match waiting_reason("nosecret").await? {
                Some(s) => {
                    let w = s.state.and_then(|st| st.waiting).unwrap_or_default();
                    if w.reason.as_deref() == Some("CreateContainerConfigError")
                        && w.message.as_deref() == Some("secret \"missing\" not found")
                    {
                        Ok(())
                    } else {
                        Err(format!("{w:?}"))
                    }
                }
                None => Err("no status".into()),
            }
        },
    )
    .await;
    wait_until(
        "a missing command fails the pod",
        Duration::from_secs(30),
        || async {
            let p = pods.get("nocommand").await.map_err(|e| e.to_string())?;
            let status = p.status.unwrap_or_default();
            if status.phase.as_deref() == Some("Failed") {
                Ok(())
            } else {
                Err(format!("{status:?}"))
            }
        },
    )
    .await;
    let describe = lk.kubectl(&kc, &["describe", "pod", "unmapped"]).unwrap();
    assert!(
        describe.contains("Failed to pull image \"example.com/not-an-image:1.0\""),
        "{describe}"
    );
    assert!(describe.contains("ImagePullBackOff"), "{describe}");
}

#[tokio::test]
async fn graceful_termination_pvc_data_and_in_cluster_kube_rs() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - name: main
    image: busybox
    command: [sh, -c]
    args: ["echo started >> /data/log; trap 'echo got-term >> /data/log; exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - {name: main, image: busybox, command: [sh, -c, "trap '' TERM; while true; do sleep 0.2; done"]}
"#,
    );
    wait_pod_ready(&client, "default", "writer", POD_TIMEOUT).await;
    wait_pod_ready(&client, "default", "stubborn", POD_TIMEOUT).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());

    // SIGTERM first: the trap runs and the pod goes well before its 60 s grace period (a long
    // one, so that a loaded machine's slow deletion is not mistaken for the SIGKILL at its end).
    let started = Instant::now();
    pods.delete("writer", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("writer gone", Duration::from_secs(90), || async {
        match pods.get_opt("writer").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.map(|p| p.status)))),
        }
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "gone only after {:?}: at the grace period's SIGKILL, not on SIGTERM",
        started.elapsed()
    );
    // SIGKILL at the grace period for a process that ignores SIGTERM.
    let started = Instant::now();
    pods.delete("stubborn", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("stubborn gone", Duration::from_secs(30), || async {
        match pods.get_opt("stubborn").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.is_some()))),
        }
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "killed only after the grace period: {:?}",
        started.elapsed()
    );

    // The PVC outlives the pod: a new pod sees what the first one wrote, the trap's line too.
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: busybox, command: [cat, /data/log], volumeMounts: [{name: data, mountPath: /data}]}
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: lister}
spec:
  restartPolicy: Never
  containers: [{name: main, image: localkube.io/localkube, args: [in-cluster, list-pods]}]
"#,
    );
    wait_until("reader Succeeded", POD_TIMEOUT, || async {
        let p = pods.get("reader").await.map_err(|e| e.to_string())?;
        match p.status.and_then(|s| s.phase).as_deref() {
            Some("Succeeded") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let log = lk.kubectl(&kc, &["logs", "reader"]).unwrap();
    assert_eq!(log, "started\ngot-term\n");

    // The provisioned volume is in this instance's state directory, not under the host's
    // /tmp/hostpath_pv that kube-controller-manager's provisioner names; deleting the claim
    // removes it (reclaim policy Delete, upstream's host-path deleter).
    let pvcs: Api<PersistentVolumeClaim> = Api::default_namespaced(client.clone());
    let pv_name = pvcs
        .get("data")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.volume_name)
        .unwrap();
    let pv = Api::<PersistentVolume>::all(client.clone())
        .get(&pv_name)
        .await
        .unwrap();
    let pv_path = std::path::PathBuf::from(pv.spec.unwrap().host_path.unwrap().path);
    let uuid = pv_path.file_name().unwrap();
    assert!(pv_path.starts_with("/tmp/hostpath_pv"), "{pv_path:?}");
    assert!(!pv_path.exists(), "{pv_path:?} exists on the host");
    let volume_dir = lk.state_dir().join("hostpath_pv").join(uuid);
    assert_eq!(
        std::fs::read_to_string(volume_dir.join("log")).unwrap(),
        "started\ngot-term\n"
    );
    pods.delete("reader", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("reader gone", Duration::from_secs(30), || async {
        match pods.get_opt("reader").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.is_some()))),
        }
    })
    .await;
    pvcs.delete("data", &DeleteParams::default()).await.unwrap();
    wait_until(
        "volume directory removed",
        Duration::from_secs(60),
        || async {
            match volume_dir.exists() {
                false => Ok(()),
                true => Err(format!("{volume_dir:?} still exists")),
            }
        },
    )
    .await;

    // In-cluster kube-rs: forbidden without a Role, allowed with one.
    let finished = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            match p.status.and_then(|s| s.phase).as_deref() {
                Some(phase @ ("Succeeded" | "Failed")) => Ok(phase.to_string()),
                other => Err(format!("{other:?}")),
            }
        }
    };
    let phase = wait_until("lister done", POD_TIMEOUT, || finished("lister")).await;
    let log = lk.kubectl(&kc, &["logs", "lister"]).unwrap();
    assert_eq!(phase, "Failed", "{log}");
    assert!(
        log.contains("pods is forbidden: User \"system:serviceaccount:default:default\" cannot list resource \"pods\""),
        "{log}"
    );
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader}
rules: [{apiGroups: [""], resources: [pods], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pod-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
---
apiVersion: v1
kind: Pod
metadata: {name: lister2}
spec:
  restartPolicy: Never
  containers: [{name: main, image: localkube.io/localkube, args: [in-cluster, list-pods]}]
"#,
    );
    let phase = wait_until("lister2 done", POD_TIMEOUT, || finished("lister2")).await;
    let log = lk.kubectl(&kc, &["logs", "lister2"]).unwrap();
    assert_eq!(phase, "Succeeded", "{log}");
    assert!(log.contains("lister2"), "the pod lists itself: {log}");
}

/// The security context as a container runtime applies it: the user, groups and fsGroup, no
/// privilege escalation, a read-only root with writable volumes; and kubelet's refusal of a
/// container that would run as root under `runAsNonRoot`.
#[tokio::test]
async fn security_context_is_enforced_as_on_kubernetes() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: confined}
spec:
  securityContext: {runAsUser: 1000, runAsGroup: 3000, fsGroup: 2000, supplementalGroups: [4000]}
  containers:
  - name: main
    image: busybox
    command: [sh, -c]
    args:
    - |
      echo "id=$(id -u):$(id -g) groups=$(id -G) home=$HOME"
      echo "$(grep NoNewPrivs /proc/self/status | tr -d '\t')"
      touch /work/mine && echo "work-writable group=$(stat -c %g /work/mine)"
      touch /tmp/confined-$$ 2>&1 | grep -q 'Read-only file system' && echo root-read-only
      echo "password=$(cat /etc/creds/password) mode=$(stat -c %a /etc/creds/password)"
      echo done
      exec sleep 3600
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true}
    volumeMounts: [{name: work, mountPath: /work}, {name: creds, mountPath: /etc/creds}]
  volumes:
  - {name: work, emptyDir: {}}
  - {name: creds, secret: {secretName: creds}}
---
apiVersion: v1
kind: Pod
metadata: {name: rootimage}
spec:
  securityContext: {runAsNonRoot: true}
  containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
"#,
    );
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    wait_until("the confined pod's output", POD_TIMEOUT, || async {
        let logs = lk.kubectl(&kc, &["logs", "confined"]).unwrap_or_default();
        if logs.contains("done") {
            Ok(())
        } else {
            Err(logs)
        }
    })
    .await;
    let logs = lk.kubectl(&kc, &["logs", "confined"]).unwrap();
    // The primary group first, then the supplementary ones as the kernel keeps them: sorted.
    assert_eq!(
        logs.lines().collect::<Vec<_>>(),
        [
            "id=1000:3000 groups=3000 2000 4000 home=/",
            "NoNewPrivs:1",
            "work-writable group=2000",
            "root-read-only",
            "password=s3cret mode=644",
            "done",
        ],
        "{logs}"
    );

    let uid = pods.get("rootimage").await.unwrap().metadata.uid.unwrap();
    let expected = format!(
        "container has runAsNonRoot and image will run as root (pod: \"rootimage_default({uid})\", container: main)"
    );
    wait_until("runAsNonRoot refuses a root image", POD_TIMEOUT, || async {
        let p = pods.get("rootimage").await.map_err(|e| e.to_string())?;
        let waiting = p
            .status
            .and_then(|s| s.container_statuses)
            .and_then(|cs| cs.into_iter().next())
            .and_then(|c| c.state?.waiting)
            .unwrap_or_default();
        if waiting.reason.as_deref() == Some("CreateContainerConfigError")
            && waiting.message.as_deref() == Some(expected.as_str())
        {
            Ok(())
        } else {
            Err(format!("{waiting:?}"))
        }
    })
    .await;
    let describe = lk.kubectl(&kc, &["describe", "pod", "rootimage"]).unwrap();
    assert!(
        describe.contains(&format!("Error: {expected}")),
        "{describe}"
    );
}

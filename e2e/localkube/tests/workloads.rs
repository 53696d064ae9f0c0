//! Controllers with real clients (spec §g items 8 and 9, and helm --wait): a Deployment that
//! helm waits for, a CronJob every minute, and evictions under a PodDisruptionBudget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

#[tokio::test]
async fn helm_install_wait_sees_the_deployment_available() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    let chart = workspace().join("e2e/localkube/tests/fixtures/web");
    let out = lk
        .helm(
            &kc,
            &[
                "install",
                "web",
                chart.to_str().unwrap(),
                "--wait",
                "--timeout",
                "120s",
            ],
        )
        .unwrap();
    assert!(out.contains("STATUS: deployed"), "{out}");
    let deploy: Deployment = Api::default_namespaced(client.clone())
        .get("web")
        .await
        .unwrap();
    let status = deploy.status.unwrap();
    assert_eq!(status.available_replicas, Some(2));
    assert_eq!(
        status.observed_generation, deploy.metadata.generation,
        "helm's readiness rule"
    );
    let rollout = lk
        .kubectl(
            &kc,
            &["rollout", "status", "deployment/web", "--timeout=60s"],
        )
        .unwrap();
    assert!(rollout.contains("successfully rolled out"), "{rollout}");
    lk.helm(&kc, &["uninstall", "web", "--wait"]).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    wait_until("web pods gone", Duration::from_secs(60), || async {
        let left = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .map_err(|e| e.to_string())?;
        if left.items.is_empty() {
            Ok(())
        } else {
            Err(format!("{} left", left.items.len()))
        }
    })
    .await;
}

#[tokio::test]
async fn cronjob_every_minute_creates_jobs_that_complete_and_keeps_history() {
    let lk = start_full().await;
    let kc = clients(KubePair::Previous);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    apply(
        &lk,
        &kc,
        "default",
        r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 1
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox, command: [sh, -c, 'echo tick']}]
"#,
    );
    // kubectl 1.32 sends this Job as protobuf. The CronJob is suspended until it completes:
    // the controller counts a Job created `--from` it in its history, and a scheduled run
    // completing first under load had it deleted before this test saw it complete.
    lk.kubectl(&kc, &["create", "job", "--from=cronjob/tick", "manual"])
        .unwrap();
    let jobs: Api<Job> = Api::default_namespaced(client.clone());
    let complete = |job: &Job| {
        job.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            })
    };
    wait_until("manual job complete", Duration::from_secs(60), || async {
        let j = jobs.get("manual").await.map_err(|e| e.to_string())?;
        if complete(&j) {
            Ok(())
        } else {
            Err(format!("{:?}", j.status))
        }
    })
    .await;
    lk.kubectl(
        &kc,
        &[
            "patch",
            "cronjob",
            "tick",
            "--type=merge",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ],
    )
    .unwrap();
    // Two scheduled runs complete; the history limit keeps only the newest of them.
    let scheduled = |all: &[Job]| -> Vec<String> {
        all.iter()
            // `kubectl create job --from` owns its Job by the CronJob too; only tick-* are scheduled.
            .filter(|j| {
                j.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("tick-"))
            })
            .map(|j| j.metadata.name.clone().unwrap())
            .collect()
    };
    // Every completed scheduled Job seen along the way (the history limit deletes old ones).
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    wait_until("two scheduled runs", Duration::from_secs(150), || async {
        let all = jobs
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut seen = seen.lock().unwrap();
        for j in &all.items {
            if complete(j) && scheduled(std::slice::from_ref(j)).len() == 1 {
                seen.insert(j.metadata.name.clone().unwrap());
            }
        }
        if seen.len() >= 2 {
            Ok(())
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await;
    let seen = seen.into_inner().unwrap();
    wait_until("history limit of 1", Duration::from_secs(30), || async {
        let all = jobs
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let finished: Vec<_> = all
            .items
            .iter()
            .filter(|j| complete(j) && !scheduled(std::slice::from_ref(j)).is_empty())
            .collect();
        if finished.len() == 1 {
            Ok(())
        } else {
            Err(format!("{} finished scheduled jobs", finished.len()))
        }
    })
    .await;
    let first = seen.iter().next().unwrap();
    let minutes: i64 = first.trim_start_matches("tick-").parse().unwrap();
    assert!(
        minutes > 29_000_000,
        "job names carry the scheduled unix minute: {first}"
    );
}

#[tokio::test]
async fn the_second_eviction_under_a_quorum_budget_is_refused() {
    let lk = start_full().await;
    let kc = clients(KubePair::Current);
    let client = client(&lk).await;
    wait_for_default_sa(&client, "default").await;
    // Bare Pods, as etcd members are to the budget (no controller replaces an evicted one).
    // With a Deployment, a replacement Ready within a second let the disruption controller
    // allow the second eviction again (seen once in a fresh-clone run): a race, not a refusal.
    let members: Vec<String> = (0..3)
        .map(|n| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: quorum-{n}, labels: {{app: quorum}}}}\n\
                 spec:\n  containers:\n  - name: main\n    image: busybox\n    command: [sleep, \"3600\"]\n    \
                 readinessProbe: {{exec: {{command: [\"true\"]}}, periodSeconds: 1}}\n"
            )
        })
        .collect();
    let budget = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: quorum}\n\
                  spec:\n  minAvailable: 2\n  selector: {matchLabels: {app: quorum}}\n";
    apply(
        &lk,
        &kc,
        "default",
        &format!("{}---\n{budget}", members.join("---\n")),
    );
    lk.kubectl(
        &kc,
        &[
            "wait",
            "--for=condition=Ready",
            "pod",
            "-l",
            "app=quorum",
            "--timeout=90s",
        ],
    )
    .unwrap();
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::default_namespaced(client.clone());
    wait_until(
        "budget allows one disruption",
        Duration::from_secs(30),
        || async {
            let pdb = pdbs.get("quorum").await.map_err(|e| e.to_string())?;
            let s = pdb.status.unwrap_or_default();
            if s.disruptions_allowed == 1 && s.current_healthy == 3 {
                Ok(())
            } else {
                Err(format!("{s:?}"))
            }
        },
    )
    .await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let list = pods
        .list(&ListParams::default().labels("app=quorum"))
        .await
        .unwrap();
    let names: Vec<String> = list
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    // Through kubectl: kube-rs's client retries 429s by itself (until the budget allows).
    let evict = |name: &str| {
        let body = format!(
            r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{name}"}}}}"#
        );
        lk.kubectl_stdin(
            &kc,
            &[
                "create",
                "--raw",
                &format!("/api/v1/namespaces/default/pods/{name}/eviction"),
            ],
            &body,
        )
    };
    let first = evict(&names[0]).unwrap();
    assert!(first.contains(r#""status":"Success""#), "{first}");
    let refused = failure(evict(&names[1]));
    assert!(
        refused.contains(
            "Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's disruption budget."
        ),
        "{refused}"
    );
    let pod = pods.get(&names[1]).await.unwrap();
    assert!(
        pod.metadata.deletion_timestamp.is_none(),
        "the refused pod stays"
    );
}

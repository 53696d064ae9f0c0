use k8s_pb::api::batch::v1::{
    Job, JobCondition, JobSpec, JobStatus, PodFailurePolicy,
    PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyOnPodConditionsPattern,
    PodFailurePolicyRule, SuccessPolicy, SuccessPolicyRule, UncountedTerminatedPods,
};

use crate::go_json::json_table;

json_table! {
    PodFailurePolicyOnExitCodesRequirement {
        container_name: ptr "containerName",
        operator: always "operator",
        values: always "values",
    }
    PodFailurePolicyOnPodConditionsPattern {
        r#type: always "type",
        status: always "status",
    }
    PodFailurePolicyRule {
        action: always "action",
        on_exit_codes: ptr "onExitCodes",
        on_pod_conditions: omit "onPodConditions",
    }
    PodFailurePolicy {
        rules: always "rules",
    }
    SuccessPolicyRule {
        succeeded_indexes: ptr "succeededIndexes",
        succeeded_count: ptr "succeededCount",
    }
    SuccessPolicy {
        rules: always "rules",
    }
    JobSpec {
        parallelism: ptr "parallelism",
        completions: ptr "completions",
        active_deadline_seconds: ptr "activeDeadlineSeconds",
        pod_failure_policy: ptr "podFailurePolicy",
        success_policy: ptr "successPolicy",
        backoff_limit: ptr "backoffLimit",
        backoff_limit_per_index: ptr "backoffLimitPerIndex",
        max_failed_indexes: ptr "maxFailedIndexes",
        selector: ptr "selector",
        manual_selector: ptr "manualSelector",
        template: always "template",
        ttl_seconds_after_finished: ptr "ttlSecondsAfterFinished",
        completion_mode: ptr "completionMode",
        suspend: ptr "suspend",
        pod_replacement_policy: ptr "podReplacementPolicy",
        managed_by: ptr "managedBy",
    }
    JobCondition {
        r#type: always "type",
        status: always "status",
        last_probe_time: always "lastProbeTime",
        last_transition_time: always "lastTransitionTime",
        reason: omit "reason",
        message: omit "message",
    }
    UncountedTerminatedPods {
        succeeded: omit "succeeded",
        failed: omit "failed",
    }
    JobStatus {
        conditions: omit "conditions",
        start_time: ptr "startTime",
        completion_time: ptr "completionTime",
        active: omit "active",
        succeeded: omit "succeeded",
        failed: omit "failed",
        terminating: ptr "terminating",
        completed_indexes: omit "completedIndexes",
        failed_indexes: ptr "failedIndexes",
        uncounted_terminated_pods: ptr "uncountedTerminatedPods",
        ready: ptr "ready",
    }
    Job {
        metadata: always "metadata",
        spec: always "spec",
        status: always "status",
    }
}

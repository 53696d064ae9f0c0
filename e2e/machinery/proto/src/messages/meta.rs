use k8s_pb::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, LabelSelector, LabelSelectorRequirement, ManagedFieldsEntry, ObjectMeta,
    OwnerReference, Preconditions,
};

use crate::go_json::json_table;

json_table! {
    OwnerReference {
        api_version: always "apiVersion",
        kind: always "kind",
        name: always "name",
        uid: always "uid",
        controller: ptr "controller",
        block_owner_deletion: ptr "blockOwnerDeletion",
    }
    ManagedFieldsEntry {
        manager: omit "manager",
        operation: omit "operation",
        api_version: omit "apiVersion",
        time: ptr "time",
        fields_type: omit "fieldsType",
        fields_v1: ptr "fieldsV1",
        subresource: omit "subresource",
    }
    ObjectMeta {
        name: omit "name",
        generate_name: omit "generateName",
        namespace: omit "namespace",
        self_link: omit "selfLink",
        uid: omit "uid",
        resource_version: omit "resourceVersion",
        generation: omit "generation",
        creation_timestamp: always "creationTimestamp",
        deletion_timestamp: ptr "deletionTimestamp",
        deletion_grace_period_seconds: ptr "deletionGracePeriodSeconds",
        labels: omit "labels",
        annotations: omit "annotations",
        owner_references: omit "ownerReferences",
        finalizers: omit "finalizers",
        managed_fields: omit "managedFields",
    }
    Preconditions {
        uid: ptr "uid",
        resource_version: ptr "resourceVersion",
    }
    DeleteOptions {
        grace_period_seconds: ptr "gracePeriodSeconds",
        preconditions: ptr "preconditions",
        orphan_dependents: ptr "orphanDependents",
        propagation_policy: ptr "propagationPolicy",
        dry_run: omit "dryRun",
        ignore_store_read_error_with_cluster_breaking_potential: ptr "ignoreStoreReadErrorWithClusterBreakingPotential",
    }
    LabelSelectorRequirement {
        key: always "key",
        operator: always "operator",
        values: omit "values",
    }
    LabelSelector {
        match_labels: omit "matchLabels",
        match_expressions: omit "matchExpressions",
    }
}

use k8s_pb::api::core::v1::{
    Affinity, AppArmorProfile, AwsElasticBlockStoreVolumeSource, AzureDiskVolumeSource,
    AzureFileVolumeSource, CSIVolumeSource, Capabilities, CephFsVolumeSource, CinderVolumeSource,
    ClusterTrustBundleProjection, ConfigMap, ConfigMapEnvSource, ConfigMapKeySelector,
    ConfigMapProjection, ConfigMapVolumeSource, Container, ContainerPort, ContainerResizePolicy,
    ContainerRestartRule, ContainerRestartRuleOnExitCodes, DownwardAPIProjection,
    DownwardAPIVolumeFile, DownwardAPIVolumeSource, EmptyDirVolumeSource, EnvFromSource, EnvVar,
    EnvVarSource, EphemeralContainer, EphemeralContainerCommon, EphemeralVolumeSource, Event,
    EventSeries, EventSource, ExecAction, FcVolumeSource, FileKeySelector, FlexVolumeSource,
    FlockerVolumeSource, GcePersistentDiskVolumeSource, GitRepoVolumeSource, GlusterfsVolumeSource,
    GrpcAction, HostAlias, HostPathVolumeSource, HttpGetAction, HttpHeader, ImageVolumeSource,
    IscsiVolumeSource, KeyToPath, Lifecycle, LifecycleHandler, LocalObjectReference, Namespace,
    NamespaceCondition, NamespaceSpec, NamespaceStatus, NfsVolumeSource, NodeAffinity,
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectFieldSelector, ObjectReference,
    PersistentVolumeClaimSpec, PersistentVolumeClaimTemplate, PersistentVolumeClaimVolumeSource,
    PhotonPersistentDiskVolumeSource, PodAffinity, PodAffinityTerm, PodAntiAffinity,
    PodCertificateProjection, PodDnsConfig, PodDnsConfigOption, PodOs, PodReadinessGate,
    PodResourceClaim, PodSchedulingGate, PodSecurityContext, PodSpec, PodTemplateSpec,
    PortworxVolumeSource, PreferredSchedulingTerm, Probe, ProbeHandler, ProjectedVolumeSource,
    QuobyteVolumeSource, RbdVolumeSource, ResourceClaim, ResourceFieldSelector,
    ResourceRequirements, ScaleIoVolumeSource, SeLinuxOptions, SeccompProfile, Secret,
    SecretEnvSource, SecretKeySelector, SecretProjection, SecretVolumeSource, SecurityContext,
    ServiceAccount, ServiceAccountTokenProjection, SleepAction, StorageOsVolumeSource, Sysctl,
    TcpSocketAction, Toleration, TopologySpreadConstraint, TypedLocalObjectReference,
    TypedObjectReference, Volume, VolumeDevice, VolumeMount, VolumeProjection,
    VolumeResourceRequirements, VolumeSource, VsphereVirtualDiskVolumeSource,
    WeightedPodAffinityTerm, WindowsSecurityContextOptions, WorkloadReference,
};

use crate::go_json::json_table;

json_table! {
    Secret {
        metadata: always "metadata",
        immutable: ptr "immutable",
        data: omit "data",
        string_data: omit "stringData",
        r#type: omit "type",
    }
    ConfigMap {
        metadata: always "metadata",
        immutable: ptr "immutable",
        data: omit "data",
        binary_data: omit "binaryData",
    }
    NamespaceSpec {
        finalizers: omit "finalizers",
    }
    NamespaceCondition {
        r#type: always "type",
        status: always "status",
        last_transition_time: always "lastTransitionTime",
        reason: omit "reason",
        message: omit "message",
    }
    NamespaceStatus {
        phase: omit "phase",
        conditions: omit "conditions",
    }
    Namespace {
        metadata: always "metadata",
        spec: always "spec",
        status: always "status",
    }
    ObjectReference {
        kind: omit "kind",
        namespace: omit "namespace",
        name: omit "name",
        uid: omit "uid",
        api_version: omit "apiVersion",
        resource_version: omit "resourceVersion",
        field_path: omit "fieldPath",
    }
    EventSource {
        component: omit "component",
        host: omit "host",
    }
    EventSeries {
        count: omit "count",
        last_observed_time: always "lastObservedTime",
    }
    Event {
        metadata: always "metadata",
        involved_object: always "involvedObject",
        reason: omit "reason",
        message: omit "message",
        source: always "source",
        first_timestamp: always "firstTimestamp",
        last_timestamp: always "lastTimestamp",
        count: omit "count",
        r#type: omit "type",
        event_time: always "eventTime",
        series: ptr "series",
        action: omit "action",
        related: ptr "related",
        reporting_component: always "reportingComponent",
        reporting_instance: always "reportingInstance",
    }
    LocalObjectReference {
        name: omit "name",
    }
    ServiceAccount {
        metadata: always "metadata",
        secrets: omit "secrets",
        image_pull_secrets: omit "imagePullSecrets",
        automount_service_account_token: ptr "automountServiceAccountToken",
    }
    HostPathVolumeSource {
        path: always "path",
        r#type: ptr "type",
    }
    EmptyDirVolumeSource {
        medium: omit "medium",
        size_limit: ptr "sizeLimit",
    }
    GcePersistentDiskVolumeSource {
        pd_name: always "pdName",
        fs_type: omit "fsType",
        partition: omit "partition",
        read_only: omit "readOnly",
    }
    AwsElasticBlockStoreVolumeSource {
        volume_id: always "volumeID",
        fs_type: omit "fsType",
        partition: omit "partition",
        read_only: omit "readOnly",
    }
    GitRepoVolumeSource {
        repository: always "repository",
        revision: omit "revision",
        directory: omit "directory",
    }
    KeyToPath {
        key: always "key",
        path: always "path",
        mode: ptr "mode",
    }
    SecretVolumeSource {
        secret_name: omit "secretName",
        items: omit "items",
        default_mode: ptr "defaultMode",
        optional: ptr "optional",
    }
    NfsVolumeSource {
        server: always "server",
        path: always "path",
        read_only: omit "readOnly",
    }
    IscsiVolumeSource {
        target_portal: always "targetPortal",
        iqn: always "iqn",
        lun: always "lun",
        iscsi_interface: omit "iscsiInterface",
        fs_type: omit "fsType",
        read_only: omit "readOnly",
        portals: omit "portals",
        chap_auth_discovery: omit "chapAuthDiscovery",
        chap_auth_session: omit "chapAuthSession",
        secret_ref: ptr "secretRef",
        initiator_name: ptr "initiatorName",
    }
    GlusterfsVolumeSource {
        endpoints: always "endpoints",
        path: always "path",
        read_only: omit "readOnly",
    }
    PersistentVolumeClaimVolumeSource {
        claim_name: always "claimName",
        read_only: omit "readOnly",
    }
    RbdVolumeSource {
        monitors: always "monitors",
        image: always "image",
        fs_type: omit "fsType",
        pool: omit "pool",
        user: omit "user",
        keyring: omit "keyring",
        secret_ref: ptr "secretRef",
        read_only: omit "readOnly",
    }
    FlexVolumeSource {
        driver: always "driver",
        fs_type: omit "fsType",
        secret_ref: ptr "secretRef",
        read_only: omit "readOnly",
        options: omit "options",
    }
    CinderVolumeSource {
        volume_id: always "volumeID",
        fs_type: omit "fsType",
        read_only: omit "readOnly",
        secret_ref: ptr "secretRef",
    }
    CephFsVolumeSource {
        monitors: always "monitors",
        path: omit "path",
        user: omit "user",
        secret_file: omit "secretFile",
        secret_ref: ptr "secretRef",
        read_only: omit "readOnly",
    }
    FlockerVolumeSource {
        dataset_name: omit "datasetName",
        dataset_uuid: omit "datasetUUID",
    }
    ObjectFieldSelector {
        api_version: omit "apiVersion",
        field_path: always "fieldPath",
    }
    ResourceFieldSelector {
        container_name: omit "containerName",
        resource: always "resource",
        divisor: always "divisor",
    }
    DownwardAPIVolumeFile {
        path: always "path",
        field_ref: ptr "fieldRef",
        resource_field_ref: ptr "resourceFieldRef",
        mode: ptr "mode",
    }
    DownwardAPIVolumeSource {
        items: omit "items",
        default_mode: ptr "defaultMode",
    }
    FcVolumeSource {
        target_ww_ns: omit "targetWWNs",
        lun: ptr "lun",
        fs_type: omit "fsType",
        read_only: omit "readOnly",
        wwids: omit "wwids",
    }
    AzureFileVolumeSource {
        secret_name: always "secretName",
        share_name: always "shareName",
        read_only: omit "readOnly",
    }
    ConfigMapVolumeSource {
        local_object_reference: inline,
        items: omit "items",
        default_mode: ptr "defaultMode",
        optional: ptr "optional",
    }
    VsphereVirtualDiskVolumeSource {
        volume_path: always "volumePath",
        fs_type: omit "fsType",
        storage_policy_name: omit "storagePolicyName",
        storage_policy_id: omit "storagePolicyID",
    }
    QuobyteVolumeSource {
        registry: always "registry",
        volume: always "volume",
        read_only: omit "readOnly",
        user: omit "user",
        group: omit "group",
        tenant: omit "tenant",
    }
    AzureDiskVolumeSource {
        disk_name: always "diskName",
        disk_uri: always "diskURI",
        caching_mode: ptr "cachingMode",
        fs_type: ptr "fsType",
        read_only: ptr "readOnly",
        kind: ptr "kind",
    }
    PhotonPersistentDiskVolumeSource {
        pd_id: always "pdID",
        fs_type: omit "fsType",
    }
    SecretProjection {
        local_object_reference: inline,
        items: omit "items",
        optional: ptr "optional",
    }
    DownwardAPIProjection {
        items: omit "items",
    }
    ConfigMapProjection {
        local_object_reference: inline,
        items: omit "items",
        optional: ptr "optional",
    }
    ServiceAccountTokenProjection {
        audience: omit "audience",
        expiration_seconds: ptr "expirationSeconds",
        path: always "path",
    }
    ClusterTrustBundleProjection {
        name: ptr "name",
        signer_name: ptr "signerName",
        label_selector: ptr "labelSelector",
        optional: ptr "optional",
        path: always "path",
    }
    PodCertificateProjection {
        signer_name: omit "signerName",
        key_type: omit "keyType",
        max_expiration_seconds: ptr "maxExpirationSeconds",
        credential_bundle_path: omit "credentialBundlePath",
        key_path: omit "keyPath",
        certificate_chain_path: omit "certificateChainPath",
        user_annotations: omit "userAnnotations",
    }
    VolumeProjection {
        secret: ptr "secret",
        downward_api: ptr "downwardAPI",
        config_map: ptr "configMap",
        service_account_token: ptr "serviceAccountToken",
        cluster_trust_bundle: ptr "clusterTrustBundle",
        pod_certificate: ptr "podCertificate",
    }
    ProjectedVolumeSource {
        sources: always "sources",
        default_mode: ptr "defaultMode",
    }
    PortworxVolumeSource {
        volume_id: always "volumeID",
        fs_type: omit "fsType",
        read_only: omit "readOnly",
    }
    ScaleIoVolumeSource {
        gateway: always "gateway",
        system: always "system",
        secret_ref: ptr "secretRef",
        ssl_enabled: omit "sslEnabled",
        protection_domain: omit "protectionDomain",
        storage_pool: omit "storagePool",
        storage_mode: omit "storageMode",
        volume_name: omit "volumeName",
        fs_type: omit "fsType",
        read_only: omit "readOnly",
    }
    StorageOsVolumeSource {
        volume_name: omit "volumeName",
        volume_namespace: omit "volumeNamespace",
        fs_type: omit "fsType",
        read_only: omit "readOnly",
        secret_ref: ptr "secretRef",
    }
    CSIVolumeSource {
        driver: always "driver",
        read_only: ptr "readOnly",
        fs_type: ptr "fsType",
        volume_attributes: omit "volumeAttributes",
        node_publish_secret_ref: ptr "nodePublishSecretRef",
    }
    VolumeResourceRequirements {
        limits: omit "limits",
        requests: omit "requests",
    }
    TypedLocalObjectReference {
        api_group: ptr "apiGroup",
        kind: always "kind",
        name: always "name",
    }
    TypedObjectReference {
        api_group: ptr "apiGroup",
        kind: always "kind",
        name: always "name",
        namespace: ptr "namespace",
    }
    PersistentVolumeClaimSpec {
        access_modes: omit "accessModes",
        selector: ptr "selector",
        resources: always "resources",
        volume_name: omit "volumeName",
        storage_class_name: ptr "storageClassName",
        volume_mode: ptr "volumeMode",
        data_source: ptr "dataSource",
        data_source_ref: ptr "dataSourceRef",
        volume_attributes_class_name: ptr "volumeAttributesClassName",
    }
    PersistentVolumeClaimTemplate {
        metadata: always "metadata",
        spec: always "spec",
    }
    EphemeralVolumeSource {
        volume_claim_template: ptr "volumeClaimTemplate",
    }
    ImageVolumeSource {
        reference: omit "reference",
        pull_policy: omit "pullPolicy",
    }
    VolumeSource {
        host_path: ptr "hostPath",
        empty_dir: ptr "emptyDir",
        gce_persistent_disk: ptr "gcePersistentDisk",
        aws_elastic_block_store: ptr "awsElasticBlockStore",
        git_repo: ptr "gitRepo",
        secret: ptr "secret",
        nfs: ptr "nfs",
        iscsi: ptr "iscsi",
        glusterfs: ptr "glusterfs",
        persistent_volume_claim: ptr "persistentVolumeClaim",
        rbd: ptr "rbd",
        flex_volume: ptr "flexVolume",
        cinder: ptr "cinder",
        cephfs: ptr "cephfs",
        flocker: ptr "flocker",
        downward_api: ptr "downwardAPI",
        fc: ptr "fc",
        azure_file: ptr "azureFile",
        config_map: ptr "configMap",
        vsphere_volume: ptr "vsphereVolume",
        quobyte: ptr "quobyte",
        azure_disk: ptr "azureDisk",
        photon_persistent_disk: ptr "photonPersistentDisk",
        projected: ptr "projected",
        portworx_volume: ptr "portworxVolume",
        scale_io: ptr "scaleIO",
        storageos: ptr "storageos",
        csi: ptr "csi",
        ephemeral: ptr "ephemeral",
        image: ptr "image",
    }
    Volume {
        name: always "name",
        volume_source: inline,
    }
    ContainerPort {
        name: omit "name",
        host_port: omit "hostPort",
        container_port: always "containerPort",
        protocol: omit "protocol",
        host_ip: omit "hostIP",
    }
    ConfigMapEnvSource {
        local_object_reference: inline,
        optional: ptr "optional",
    }
    SecretEnvSource {
        local_object_reference: inline,
        optional: ptr "optional",
    }
    EnvFromSource {
        prefix: omit "prefix",
        config_map_ref: ptr "configMapRef",
        secret_ref: ptr "secretRef",
    }
    ConfigMapKeySelector {
        local_object_reference: inline,
        key: always "key",
        optional: ptr "optional",
    }
    SecretKeySelector {
        local_object_reference: inline,
        key: always "key",
        optional: ptr "optional",
    }
    FileKeySelector {
        volume_name: always "volumeName",
        path: always "path",
        key: always "key",
        optional: ptr "optional",
    }
    EnvVarSource {
        field_ref: ptr "fieldRef",
        resource_field_ref: ptr "resourceFieldRef",
        config_map_key_ref: ptr "configMapKeyRef",
        secret_key_ref: ptr "secretKeyRef",
        file_key_ref: ptr "fileKeyRef",
    }
    EnvVar {
        name: always "name",
        value: omit "value",
        value_from: ptr "valueFrom",
    }
    ResourceClaim {
        name: always "name",
        request: omit "request",
    }
    ResourceRequirements {
        limits: omit "limits",
        requests: omit "requests",
        claims: omit "claims",
    }
    ContainerResizePolicy {
        resource_name: always "resourceName",
        restart_policy: always "restartPolicy",
    }
    ContainerRestartRuleOnExitCodes {
        operator: omit "operator",
        values: omit "values",
    }
    ContainerRestartRule {
        action: omit "action",
        exit_codes: ptr "exitCodes",
    }
    VolumeMount {
        name: always "name",
        read_only: omit "readOnly",
        recursive_read_only: ptr "recursiveReadOnly",
        mount_path: always "mountPath",
        sub_path: omit "subPath",
        mount_propagation: ptr "mountPropagation",
        sub_path_expr: omit "subPathExpr",
    }
    VolumeDevice {
        name: always "name",
        device_path: always "devicePath",
    }
    ExecAction {
        command: omit "command",
    }
    HttpHeader {
        name: always "name",
        value: always "value",
    }
    HttpGetAction {
        path: omit "path",
        port: always "port",
        host: omit "host",
        scheme: omit "scheme",
        http_headers: omit "httpHeaders",
    }
    TcpSocketAction {
        port: always "port",
        host: omit "host",
    }
    GrpcAction {
        port: always "port",
        service: ptr "service",
    }
    ProbeHandler {
        exec: ptr "exec",
        http_get: ptr "httpGet",
        tcp_socket: ptr "tcpSocket",
        grpc: ptr "grpc",
    }
    Probe {
        handler: inline,
        initial_delay_seconds: omit "initialDelaySeconds",
        timeout_seconds: omit "timeoutSeconds",
        period_seconds: omit "periodSeconds",
        success_threshold: omit "successThreshold",
        failure_threshold: omit "failureThreshold",
        termination_grace_period_seconds: ptr "terminationGracePeriodSeconds",
    }
    SleepAction {
        seconds: always "seconds",
    }
    LifecycleHandler {
        exec: ptr "exec",
        http_get: ptr "httpGet",
        tcp_socket: ptr "tcpSocket",
        sleep: ptr "sleep",
    }
    Lifecycle {
        post_start: ptr "postStart",
        pre_stop: ptr "preStop",
        stop_signal: ptr "stopSignal",
    }
    Capabilities {
        add: omit "add",
        drop: omit "drop",
    }
    SeLinuxOptions {
        user: omit "user",
        role: omit "role",
        r#type: omit "type",
        level: omit "level",
    }
    WindowsSecurityContextOptions {
        gmsa_credential_spec_name: ptr "gmsaCredentialSpecName",
        gmsa_credential_spec: ptr "gmsaCredentialSpec",
        run_as_user_name: ptr "runAsUserName",
        host_process: ptr "hostProcess",
    }
    SeccompProfile {
        r#type: always "type",
        localhost_profile: ptr "localhostProfile",
    }
    AppArmorProfile {
        r#type: always "type",
        localhost_profile: ptr "localhostProfile",
    }
    SecurityContext {
        capabilities: ptr "capabilities",
        privileged: ptr "privileged",
        se_linux_options: ptr "seLinuxOptions",
        windows_options: ptr "windowsOptions",
        run_as_user: ptr "runAsUser",
        run_as_group: ptr "runAsGroup",
        run_as_non_root: ptr "runAsNonRoot",
        read_only_root_filesystem: ptr "readOnlyRootFilesystem",
        allow_privilege_escalation: ptr "allowPrivilegeEscalation",
        proc_mount: ptr "procMount",
        seccomp_profile: ptr "seccompProfile",
        app_armor_profile: ptr "appArmorProfile",
    }
    Container {
        name: always "name",
        image: omit "image",
        command: omit "command",
        args: omit "args",
        working_dir: omit "workingDir",
        ports: omit "ports",
        env_from: omit "envFrom",
        env: omit "env",
        resources: always "resources",
        resize_policy: omit "resizePolicy",
        restart_policy: ptr "restartPolicy",
        restart_policy_rules: omit "restartPolicyRules",
        volume_mounts: omit "volumeMounts",
        volume_devices: omit "volumeDevices",
        liveness_probe: ptr "livenessProbe",
        readiness_probe: ptr "readinessProbe",
        startup_probe: ptr "startupProbe",
        lifecycle: ptr "lifecycle",
        termination_message_path: omit "terminationMessagePath",
        termination_message_policy: omit "terminationMessagePolicy",
        image_pull_policy: omit "imagePullPolicy",
        security_context: ptr "securityContext",
        stdin: omit "stdin",
        stdin_once: omit "stdinOnce",
        tty: omit "tty",
    }
    EphemeralContainerCommon {
        name: always "name",
        image: omit "image",
        command: omit "command",
        args: omit "args",
        working_dir: omit "workingDir",
        ports: omit "ports",
        env_from: omit "envFrom",
        env: omit "env",
        resources: always "resources",
        resize_policy: omit "resizePolicy",
        restart_policy: ptr "restartPolicy",
        restart_policy_rules: omit "restartPolicyRules",
        volume_mounts: omit "volumeMounts",
        volume_devices: omit "volumeDevices",
        liveness_probe: ptr "livenessProbe",
        readiness_probe: ptr "readinessProbe",
        startup_probe: ptr "startupProbe",
        lifecycle: ptr "lifecycle",
        termination_message_path: omit "terminationMessagePath",
        termination_message_policy: omit "terminationMessagePolicy",
        image_pull_policy: omit "imagePullPolicy",
        security_context: ptr "securityContext",
        stdin: omit "stdin",
        stdin_once: omit "stdinOnce",
        tty: omit "tty",
    }
    EphemeralContainer {
        ephemeral_container_common: inline,
        target_container_name: omit "targetContainerName",
    }
    Sysctl {
        name: always "name",
        value: always "value",
    }
    PodSecurityContext {
        se_linux_options: ptr "seLinuxOptions",
        windows_options: ptr "windowsOptions",
        run_as_user: ptr "runAsUser",
        run_as_group: ptr "runAsGroup",
        run_as_non_root: ptr "runAsNonRoot",
        supplemental_groups: omit "supplementalGroups",
        supplemental_groups_policy: ptr "supplementalGroupsPolicy",
        fs_group: ptr "fsGroup",
        sysctls: omit "sysctls",
        fs_group_change_policy: ptr "fsGroupChangePolicy",
        seccomp_profile: ptr "seccompProfile",
        app_armor_profile: ptr "appArmorProfile",
        se_linux_change_policy: ptr "seLinuxChangePolicy",
    }
    NodeSelectorRequirement {
        key: always "key",
        operator: always "operator",
        values: omit "values",
    }
    NodeSelectorTerm {
        match_expressions: omit "matchExpressions",
        match_fields: omit "matchFields",
    }
    NodeSelector {
        node_selector_terms: always "nodeSelectorTerms",
    }
    PreferredSchedulingTerm {
        weight: always "weight",
        preference: always "preference",
    }
    NodeAffinity {
        required_during_scheduling_ignored_during_execution: ptr "requiredDuringSchedulingIgnoredDuringExecution",
        preferred_during_scheduling_ignored_during_execution: omit "preferredDuringSchedulingIgnoredDuringExecution",
    }
    PodAffinityTerm {
        label_selector: ptr "labelSelector",
        namespaces: omit "namespaces",
        topology_key: always "topologyKey",
        namespace_selector: ptr "namespaceSelector",
        match_label_keys: omit "matchLabelKeys",
        mismatch_label_keys: omit "mismatchLabelKeys",
    }
    WeightedPodAffinityTerm {
        weight: always "weight",
        pod_affinity_term: always "podAffinityTerm",
    }
    PodAffinity {
        required_during_scheduling_ignored_during_execution: omit "requiredDuringSchedulingIgnoredDuringExecution",
        preferred_during_scheduling_ignored_during_execution: omit "preferredDuringSchedulingIgnoredDuringExecution",
    }
    PodAntiAffinity {
        required_during_scheduling_ignored_during_execution: omit "requiredDuringSchedulingIgnoredDuringExecution",
        preferred_during_scheduling_ignored_during_execution: omit "preferredDuringSchedulingIgnoredDuringExecution",
    }
    Affinity {
        node_affinity: ptr "nodeAffinity",
        pod_affinity: ptr "podAffinity",
        pod_anti_affinity: ptr "podAntiAffinity",
    }
    Toleration {
        key: omit "key",
        operator: omit "operator",
        value: omit "value",
        effect: omit "effect",
        toleration_seconds: ptr "tolerationSeconds",
    }
    HostAlias {
        ip: always "ip",
        hostnames: omit "hostnames",
    }
    PodDnsConfigOption {
        name: omit "name",
        value: ptr "value",
    }
    PodDnsConfig {
        nameservers: omit "nameservers",
        searches: omit "searches",
        options: omit "options",
    }
    PodReadinessGate {
        condition_type: always "conditionType",
    }
    TopologySpreadConstraint {
        max_skew: always "maxSkew",
        topology_key: always "topologyKey",
        when_unsatisfiable: always "whenUnsatisfiable",
        label_selector: ptr "labelSelector",
        min_domains: ptr "minDomains",
        node_affinity_policy: ptr "nodeAffinityPolicy",
        node_taints_policy: ptr "nodeTaintsPolicy",
        match_label_keys: omit "matchLabelKeys",
    }
    PodOs {
        name: always "name",
    }
    PodSchedulingGate {
        name: always "name",
    }
    PodResourceClaim {
        name: always "name",
        resource_claim_name: ptr "resourceClaimName",
        resource_claim_template_name: ptr "resourceClaimTemplateName",
    }
    WorkloadReference {
        name: always "name",
        pod_group: always "podGroup",
        pod_group_replica_key: omit "podGroupReplicaKey",
    }
    PodSpec {
        volumes: omit "volumes",
        init_containers: omit "initContainers",
        containers: always "containers",
        ephemeral_containers: omit "ephemeralContainers",
        restart_policy: omit "restartPolicy",
        termination_grace_period_seconds: ptr "terminationGracePeriodSeconds",
        active_deadline_seconds: ptr "activeDeadlineSeconds",
        dns_policy: omit "dnsPolicy",
        node_selector: omit "nodeSelector",
        service_account_name: omit "serviceAccountName",
        service_account: omit "serviceAccount",
        automount_service_account_token: ptr "automountServiceAccountToken",
        node_name: omit "nodeName",
        host_network: omit "hostNetwork",
        host_pid: omit "hostPID",
        host_ipc: omit "hostIPC",
        share_process_namespace: ptr "shareProcessNamespace",
        security_context: ptr "securityContext",
        image_pull_secrets: omit "imagePullSecrets",
        hostname: omit "hostname",
        subdomain: omit "subdomain",
        affinity: ptr "affinity",
        scheduler_name: omit "schedulerName",
        tolerations: omit "tolerations",
        host_aliases: omit "hostAliases",
        priority_class_name: omit "priorityClassName",
        priority: ptr "priority",
        dns_config: ptr "dnsConfig",
        readiness_gates: omit "readinessGates",
        runtime_class_name: ptr "runtimeClassName",
        enable_service_links: ptr "enableServiceLinks",
        preemption_policy: ptr "preemptionPolicy",
        overhead: omit "overhead",
        topology_spread_constraints: omit "topologySpreadConstraints",
        set_hostname_as_fqdn: ptr "setHostnameAsFQDN",
        os: ptr "os",
        host_users: ptr "hostUsers",
        scheduling_gates: omit "schedulingGates",
        resource_claims: omit "resourceClaims",
        resources: ptr "resources",
        hostname_override: ptr "hostnameOverride",
        workload_ref: ptr "workloadRef",
    }
    PodTemplateSpec {
        metadata: always "metadata",
        spec: always "spec",
    }
}

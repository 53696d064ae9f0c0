{{/*
What the three operators share: their ServiceAccount and Deployment. Each operator's templates
call these with
  (dict "root" $ "key" "clusterOperator" "suffix" "cluster" "component" "cluster-operator"
        "command" (list "/usr/local/bin/etcd-cluster-operator") "args" (list ...)
        "terminationGracePeriodSeconds" 60)
where "key" names the operator's block of values.
*/}}

{{/* An operator's ServiceAccount name: serviceAccount.name, else <fullname>-<suffix>. */}}
{{- define "etcd-operator.serviceAccountName" -}}
{{- $v := index .root.Values .key -}}
{{- $sa := $v.serviceAccount | default dict -}}
{{- if $sa.name -}}
{{- $sa.name -}}
{{- else -}}
{{- printf "%s-%s" (include "etcd-operator.fullname" .root) .suffix -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object: the recommended set plus commonLabels. */}}
{{- define "etcd-operator.allLabels" -}}
{{ include "etcd-operator.labels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Where an operator's main Role lives: empty for a ClusterRole (rbac.scope=cluster), else its
watchNamespace (rbac.scope=namespaced), which that scope requires.
*/}}
{{- define "etcd-operator.rbacNamespace" -}}
{{- $v := index .root.Values .key -}}
{{- if eq .root.Values.rbac.scope "namespaced" -}}
{{- if not $v.watchNamespace -}}
{{- fail (printf "rbac.scope=namespaced needs %s.watchNamespace: a namespaced operator gets a Role in the one namespace it watches (set it, disable the operator, or use rbac.scope=cluster)" .key) -}}
{{- end -}}
{{- $v.watchNamespace -}}
{{- end -}}
{{- end -}}

{{- define "etcd-operator.operatorServiceAccount" -}}
{{- $v := index .root.Values .key -}}
{{- $sa := $v.serviceAccount | default dict -}}
{{- if ne $sa.create false }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "etcd-operator.serviceAccountName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "etcd-operator.allLabels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  {{- with $sa.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{- define "etcd-operator.operatorDeployment" -}}
{{- $root := .root -}}
{{- $v := index $root.Values .key -}}
{{- $name := printf "%s-%s" (include "etcd-operator.fullname" $root) .suffix -}}
{{- $selector := include "etcd-operator.selectorLabels" (dict "root" $root "component" .component) -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "etcd-operator.allLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  replicas: {{ $v.replicas }}
  revisionHistoryLimit: {{ $root.Values.revisionHistoryLimit }}
  selector:
    matchLabels:
      {{- $selector | nindent 6 }}
  template:
    metadata:
      labels:
        {{- $selector | nindent 8 }}
        {{- with $root.Values.commonLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $root.Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "etcd-operator.serviceAccountName" . }}
      {{- with .terminationGracePeriodSeconds }}
      terminationGracePeriodSeconds: {{ . }}
      {{- end }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with ($v.priorityClassName | default $root.Values.priorityClassName) }}
      priorityClassName: {{ . }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: operator
          image: {{ include "etcd-operator.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: {{ toJson .command }}
          args:
            - --leader-elect={{ $root.Values.leaderElection.enabled }}
            {{- /* Per release: two releases in one namespace never share a Lease, and the
                   name is the install's identity in the namespace claims (also without
                   leader election). */}}
            - --lease-name={{ $name }}
            {{- with $v.watchNamespace }}
            - --watch-namespace={{ . }}
            {{- end }}
            {{- range .args }}
            - {{ . }}
            {{- end }}
            {{- range $v.extraArgs }}
            - {{ . }}
            {{- end }}
          env:
            - {name: LOG_LEVEL, value: {{ $root.Values.logging.level | quote }}}
            - {name: LOG_FORMAT, value: {{ $root.Values.logging.format | quote }}}
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - {name: probes, containerPort: 8080}
          livenessProbe:
            httpGet: {path: /healthz, port: probes}
            periodSeconds: 10
          readinessProbe:
            httpGet: {path: /readyz, port: probes}
            periodSeconds: 5
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          {{- with $v.extraVolumeMounts }}
          volumeMounts:
            {{- toYaml . | nindent 12 }}
          {{- end }}
      {{- with $v.extraVolumes }}
      volumes:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- range . }}
        - {{- toYaml (merge (dict "labelSelector" (dict "matchLabels" ($selector | fromYaml))) .) | nindent 10 }}
        {{- end }}
      {{- end }}
{{- end -}}

{{/* The chart's name, or nameOverride. */}}
{{- define "opendlc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of every object's name: fullnameOverride, the release name when it holds the
chart's name, else RELEASE-NAME. */}}
{{- define "opendlc.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "opendlc.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "opendlc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "opendlc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component; call with (list . "server"). */}}
{{- define "opendlc.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "opendlc.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* The worker's service account. */}}
{{- define "opendlc.workerServiceAccount" -}}
{{- default (printf "%s-worker" (include "opendlc.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The image reference. */}}
{{- define "opendlc.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Names of the Secrets in use: the existing one, or the chart's. */}}
{{- define "opendlc.s3Secret" -}}
{{- default (printf "%s-s3" (include "opendlc.fullname" .)) .Values.s3.existingSecret -}}
{{- end -}}
{{- define "opendlc.natsSecret" -}}
{{- default (printf "%s-nats" (include "opendlc.fullname" .)) .Values.nats.credentials.existingSecret -}}
{{- end -}}
{{- define "opendlc.adminTokenSecret" -}}
{{- default (printf "%s-admin-token" (include "opendlc.fullname" .)) .Values.server.adminToken.existingSecret -}}
{{- end -}}

{{/* Which NATS credentials are in use: "creds", "userPassword" or "" (none). */}}
{{- define "opendlc.natsAuth" -}}
{{- $c := .Values.nats.credentials -}}
{{- if $c.existingSecret -}}
{{- if not (has $c.existingSecretType (list "creds" "userPassword")) -}}
{{- fail (printf "nats.credentials.existingSecretType: %q is neither creds nor userPassword" $c.existingSecretType) -}}
{{- end -}}
{{- $c.existingSecretType -}}
{{- else if and $c.creds (or $c.user $c.password) -}}
{{- fail "nats.credentials: set creds or user and password, not both" -}}
{{- else if $c.creds -}}
creds
{{- else if or $c.user $c.password -}}
{{- if not (and $c.user $c.password) -}}
{{- fail "nats.credentials: user and password go together" -}}
{{- end -}}
userPassword
{{- end -}}
{{- end -}}

{{/* Whether the admin token Secret is mounted. */}}
{{- define "opendlc.adminToken" -}}
{{- if or .Values.server.adminToken.existingSecret .Values.server.adminToken.create -}}true{{- end -}}
{{- end -}}

{{/* The checks of values no template can render without. */}}
{{- define "opendlc.validate" -}}
{{- if not (has .Values.rbac.mode (list "cluster" "namespaced")) -}}
{{- fail (printf "rbac.mode: %q is neither cluster nor namespaced" .Values.rbac.mode) -}}
{{- end -}}
{{- if and (eq .Values.rbac.mode "namespaced") (not .Values.rbac.namespaces) -}}
{{- fail "rbac.namespaces: namespaced mode needs at least one namespace" -}}
{{- end -}}
{{- if and (eq .Values.rbac.mode "namespaced") .Values.worker.namespacePrefix -}}
{{- fail "worker.namespacePrefix: applies to cluster-wide mode only; in namespaced mode a workspace names its namespace" -}}
{{- end -}}
{{- if not .Values.nats.urls -}}
{{- fail "nats.urls: at least one NATS URL is required" -}}
{{- end -}}
{{- if not .Values.temporal.address -}}
{{- fail "temporal.address: the Temporal frontend host:port is required" -}}
{{- end -}}
{{- if and .Values.nats.tls.enabled (not .Values.nats.tls.existingSecret) -}}
{{- fail "nats.tls.existingSecret: required when nats.tls.enabled (the CA to verify the servers with)" -}}
{{- end -}}
{{- if and .Values.server.tls.enabled (not .Values.server.tls.existingSecret) -}}
{{- fail "server.tls.existingSecret: required when server.tls.enabled (the serving certificate)" -}}
{{- end -}}
{{- if and (not .Values.s3.existingSecret) (ne (empty .Values.s3.accessKeyId) (empty .Values.s3.secretAccessKey)) -}}
{{- fail "s3.accessKeyId and s3.secretAccessKey go together" -}}
{{- end -}}
{{- if and .Values.temporal.tls.existingSecret (not .Values.temporal.tls.enabled) -}}
{{- fail "temporal.tls.existingSecret: set temporal.tls.enabled too" -}}
{{- end -}}
{{- range $c := list "server" "worker" -}}
{{- $v := index $.Values $c -}}
{{- if and $v.podDisruptionBudget.enabled (ge (int $v.podDisruptionBudget.minAvailable) (int $v.replicas)) -}}
{{- fail (printf "%s.podDisruptionBudget.minAvailable: %v is not below %s.replicas (%v): no pod could ever be evicted, and a node drain would hang" $c $v.podDisruptionBudget.minAvailable $c $v.replicas) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.s3.pathStyle (not (has (toString .Values.s3.pathStyle) (list "true" "false"))) -}}
{{- fail (printf "s3.pathStyle: %q is neither \"true\" nor \"false\" (nor empty)" (toString .Values.s3.pathStyle)) -}}
{{- end -}}
{{- $_ := include "opendlc.natsAuth" . -}}
{{- end -}}

{{/* Whether the worker gets S3 credentials from a Secret. */}}
{{- define "opendlc.s3Credentials" -}}
{{- if or .Values.s3.existingSecret .Values.s3.accessKeyId -}}true{{- end -}}
{{- end -}}

{{/* Flags, environment, volumes and mounts both processes share: the Temporal and NATS
connections. Call each with the root context. */}}
{{- define "opendlc.connectionArgs" -}}
{{- if .Values.temporal.tls.enabled }}
{{- with .Values.temporal.tls }}
{{- if .existingSecret }}
- --temporal-tls-cert=/etc/opendlc/temporal-tls/{{ .certKey }}
- --temporal-tls-key=/etc/opendlc/temporal-tls/{{ .keyKey }}
{{- if .caKey }}
- --temporal-tls-ca=/etc/opendlc/temporal-tls/{{ .caKey }}
{{- end }}
{{- end }}
- --temporal-tls-server-name={{ default (regexReplaceAll ":[0-9]+$" $.Values.temporal.address "") .serverName }}
{{- end }}
{{- end }}
{{- if eq (include "opendlc.natsAuth" .) "creds" }}
- --nats-creds=/etc/opendlc/nats-creds/{{ .Values.nats.credentials.credsKey }}
{{- end }}
{{- if .Values.nats.tls.enabled }}
{{- with .Values.nats.tls }}
- --nats-tls-ca=/etc/opendlc/nats-tls/{{ .caKey }}
{{- if .certKey }}
- --nats-tls-cert=/etc/opendlc/nats-tls/{{ .certKey }}
- --nats-tls-key=/etc/opendlc/nats-tls/{{ .keyKey }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.metrics.enabled }}
- --metrics-addr=:{{ .Values.metrics.port }}
{{- end }}
{{- end -}}

{{- define "opendlc.connectionEnv" -}}
- name: DLC_TEMPORAL_ADDRESS
  valueFrom: {configMapKeyRef: {name: {{ include "opendlc.fullname" . }}-config, key: DLC_TEMPORAL_ADDRESS}}
- name: DLC_TEMPORAL_NAMESPACE
  valueFrom: {configMapKeyRef: {name: {{ include "opendlc.fullname" . }}-config, key: DLC_TEMPORAL_NAMESPACE}}
- name: DLC_NATS_URL
  valueFrom: {configMapKeyRef: {name: {{ include "opendlc.fullname" . }}-config, key: DLC_NATS_URL}}
{{- if .Values.nats.streamReplicas }}
- name: DLC_NATS_STREAM_REPLICAS
  valueFrom: {configMapKeyRef: {name: {{ include "opendlc.fullname" . }}-config, key: DLC_NATS_STREAM_REPLICAS}}
{{- end }}
{{- if eq (include "opendlc.natsAuth" .) "userPassword" }}
- name: DLC_NATS_USER
  valueFrom: {secretKeyRef: {name: {{ include "opendlc.natsSecret" . }}, key: {{ .Values.nats.credentials.userKey }}}}
- name: DLC_NATS_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ include "opendlc.natsSecret" . }}, key: {{ .Values.nats.credentials.passwordKey }}}}
{{- end }}
{{- end -}}

{{/* The run record database's environment, for the server and the worker. */}}
{{- define "opendlc.runsEnv" -}}
{{- if .Values.runs.database }}
- name: DLC_RUNS_DATABASE
  valueFrom: {configMapKeyRef: {name: {{ include "opendlc.fullname" . }}-config, key: DLC_RUNS_DATABASE}}
{{- with .Values.runs.passwordSecret }}
{{- if .name }}
- name: PGPASSWORD
  valueFrom: {secretKeyRef: {name: {{ .name }}, key: {{ .key }}}}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "opendlc.connectionVolumeMounts" -}}
- {name: tmp, mountPath: /tmp}
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret }}
- {name: temporal-tls, mountPath: /etc/opendlc/temporal-tls, readOnly: true}
{{- end }}
{{- if eq (include "opendlc.natsAuth" .) "creds" }}
- {name: nats-creds, mountPath: /etc/opendlc/nats-creds, readOnly: true}
{{- end }}
{{- if .Values.nats.tls.enabled }}
- {name: nats-tls, mountPath: /etc/opendlc/nats-tls, readOnly: true}
{{- end }}
{{- end -}}

{{- define "opendlc.connectionVolumes" -}}
- {name: tmp, emptyDir: {}}
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret }}
- {name: temporal-tls, secret: {secretName: {{ .Values.temporal.tls.existingSecret }}}}
{{- end }}
{{- if eq (include "opendlc.natsAuth" .) "creds" }}
- name: nats-creds
  secret:
    secretName: {{ include "opendlc.natsSecret" . }}
    items: [{key: {{ .Values.nats.credentials.credsKey }}, path: {{ .Values.nats.credentials.credsKey }}}]
{{- end }}
{{- if .Values.nats.tls.enabled }}
- {name: nats-tls, secret: {secretName: {{ .Values.nats.tls.existingSecret }}}}
{{- end }}
{{- end -}}

{{/* Peers of the metrics port (networkpolicy.yaml): metricsFrom, or every namespace but the
workspaces'; call with (list . WORKSPACE-NAMESPACES). */}}
{{- define "opendlc.metricsFrom" -}}
{{- $root := index . 0 -}}
{{- $workspaceNamespaces := index . 1 -}}
{{- if $root.Values.networkPolicy.metricsFrom -}}
{{- toYaml $root.Values.networkPolicy.metricsFrom -}}
{{- else -}}
- namespaceSelector:
    matchExpressions:
      - {key: opendlc.io/workspace, operator: DoesNotExist}
      {{- if $workspaceNamespaces }}
      - {key: kubernetes.io/metadata.name, operator: NotIn, values: {{ toJson $workspaceNamespaces }}}
      {{- end }}
{{- end -}}
{{- end }}

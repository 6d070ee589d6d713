{{/*
Names, labels and the pieces every workload shares. Per-service environment is in _env.tpl.
*/}}

{{/* Chart name, 63 chars at most. */}}
{{- define "threatview.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name, 63 chars at most: the prefix of every object. */}}
{{- define "threatview.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of one component's objects: (list $ "data-collector"). */}}
{{- define "threatview.componentName" -}}
{{- $ctx := index . 0 }}
{{- printf "%s-%s" (include "threatview.fullname" $ctx) (index . 1) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Chart name and version for the helm.sh/chart label. */}}
{{- define "threatview.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels. */}}
{{- define "threatview.labels" -}}
helm.sh/chart: {{ include "threatview.chart" . }}
{{ include "threatview.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: threatview
{{- end }}

{{/* Selector labels shared by every object of the release. */}}
{{- define "threatview.selectorLabels" -}}
app.kubernetes.io/name: {{ include "threatview.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one component: (list $ "data-collector"). */}}
{{- define "threatview.componentLabels" -}}
{{ include "threatview.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Selector labels of one component: (list $ "data-collector"). */}}
{{- define "threatview.componentSelectorLabels" -}}
{{ include "threatview.selectorLabels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/*
The long-running services. scalable: may run several replicas behind an HPA;
the others consume a queue in order and run exactly one replica.
*/}}
{{- define "threatview.services" -}}
- {key: dataCollector, component: data-collector, scalable: true}
- {key: dataProcessor, component: data-processor, scalable: false}
- {key: auditLogger, component: audit-logger, scalable: true}
- {key: auditLoggerWorker, component: audit-logger-worker, scalable: false}
- {key: tokens, component: tokens, scalable: true}
{{- if .Values.identity.enabled }}
- {key: identity, component: identity, scalable: true}
{{- end }}
{{- if .Values.visualRenderer.enabled }}
- {key: visualRenderer, component: visual-renderer, scalable: true}
{{- end }}
{{- if .Values.adminInterface.enabled }}
- {key: adminInterface, component: admin-interface, scalable: true}
{{- end }}
{{- if .Values.privacy.enabled }}
- {key: privacy, component: privacy, scalable: false}
{{- end }}
{{- if .Values.alerts.enabled }}
- {key: alerts, component: alerts, scalable: false}
{{- end }}
{{- end }}

{{/* The CronJobs, archiver before cleanup. */}}
{{- define "threatview.jobs" -}}
- {key: archiver, component: archiver}
- {key: cleanup, component: cleanup}
- {key: auditVerify, component: audit-verify}
{{- end }}

{{/* Image reference: (list $ .Values.dataCollector.image). Registry-less unless image.registry is set. */}}
{{- define "threatview.image" -}}
{{- $ctx := index . 0 }}
{{- $img := index . 1 }}
{{- $tag := $img.tag | default $ctx.Values.image.tag | default $ctx.Chart.AppVersion }}
{{- if $ctx.Values.image.registry }}
{{- printf "%s/%s:%s" (trimSuffix "/" $ctx.Values.image.registry) $img.repository $tag }}
{{- else }}
{{- printf "%s:%s" $img.repository $tag }}
{{- end }}
{{- end }}

{{/*
ServiceAccount of one component: (list $ "archiver"). Created: <name or fullname>-<component>,
one per component; not created: serviceAccount.name (or "default") for all.
*/}}
{{- define "threatview.serviceAccountName" -}}
{{- $ctx := index . 0 }}
{{- if $ctx.Values.serviceAccount.create }}
{{- printf "%s-%s" (default (include "threatview.fullname" $ctx) $ctx.Values.serviceAccount.name) (index . 1) | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- default "default" $ctx.Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Autoscaling settings of a scalable service: (list $ $values) -> YAML
{enabled, minReplicas, maxReplicas, cpu, memory}. The service's autoscaling map
overrides the global block key by key; minReplicas defaults to defaultReplicas.
hasKey (not default) so that an explicit `enabled: false` wins over a global true.
*/}}
{{- define "threatview.autoscaling" -}}
{{- $ctx := index . 0 }}
{{- $svc := (index . 1).autoscaling | default dict }}
{{- $g := $ctx.Values.autoscaling }}
{{- $enabled := $g.enabled }}
{{- if hasKey $svc "enabled" }}{{ $enabled = $svc.enabled }}{{ end }}
{{- $min := $ctx.Values.defaultReplicas }}
{{- if hasKey $svc "minReplicas" }}{{ $min = $svc.minReplicas }}{{ end }}
{{- $max := $g.maxReplicas }}
{{- if hasKey $svc "maxReplicas" }}{{ $max = $svc.maxReplicas }}{{ end }}
{{- $cpu := $g.targetCPUUtilizationPercentage }}
{{- if hasKey $svc "targetCPUUtilizationPercentage" }}{{ $cpu = $svc.targetCPUUtilizationPercentage }}{{ end }}
{{- $mem := $g.targetMemoryUtilizationPercentage }}
{{- if hasKey $svc "targetMemoryUtilizationPercentage" }}{{ $mem = $svc.targetMemoryUtilizationPercentage }}{{ end }}
enabled: {{ $enabled }}
minReplicas: {{ int $min }}
maxReplicas: {{ max (int $min) (int $max) }}
cpu: {{ int $cpu }}
memory: {{ int $mem }}
{{- end }}

{{/* Replicas of a scalable service when autoscaling is off: (list $ $values). */}}
{{- define "threatview.replicas" -}}
{{- $ctx := index . 0 }}
{{- $v := index . 1 }}
{{- if hasKey $v "replicas" }}{{ int $v.replicas }}{{ else }}{{ int $ctx.Values.defaultReplicas }}{{ end }}
{{- end }}

{{/* Pod-level security context: non-root, RuntimeDefault seccomp. */}}
{{- define "threatview.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.podSecurityContext.runAsUser }}
runAsGroup: {{ .Values.podSecurityContext.runAsGroup }}
fsGroup: {{ .Values.podSecurityContext.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container security context: read-only root, no capabilities, no escalation. */}}
{{- define "threatview.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
GOMAXPROCS and GOMEMLIMIT from the container's own limits. resourceFieldRef rounds
limits.cpu up to whole CPUs (divisor 1) and gives limits.memory in bytes (divisor 1),
which GOMEMLIMIT reads as bytes. The soft memory limit is thus the container limit
itself: a fraction (say 90%) cannot be expressed with resourceFieldRef, and the services
are pure Go, so nearly all their memory is under the runtime's control.
*/}}
{{- define "threatview.env.runtime" -}}
- name: GOMAXPROCS
  valueFrom:
    resourceFieldRef:
      resource: limits.cpu
      divisor: "1"
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
      divisor: "1"
{{- end }}

{{/* Pod scheduling settings shared by every pod. */}}
{{- define "threatview.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A component's ConfigMap data, normalized (sorted keys, quoted values): (list $ "dataCollector"). */}}
{{- define "threatview.configData" -}}
{{- include (printf "threatview.config.%s" (index . 1)) (index . 0) | fromYaml | toYaml }}
{{- end }}

{{/* A component's env list: the Go runtime's settings, then its Secret-backed variables: (list $ "dataCollector"). */}}
{{- define "threatview.containerEnv" -}}
{{- $ctx := index . 0 }}
{{- printf "%s\n%s" (include "threatview.env.runtime" $ctx) (include (printf "threatview.secretEnv.%s" (index . 1)) $ctx) | fromYamlArray | toYaml }}
{{- end }}

{{/* Labels of one alert: (list $ "critical"). */}}
{{- define "threatview.alertLabels" -}}
{{- $ctx := index . 0 }}
severity: {{ index . 1 }}
{{- with $ctx.Values.prometheusRule.alertLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Runbook URL of one alert: (list $ "ThreatViewTargetDown") -> BASE#threatviewtargetdown. */}}
{{- define "threatview.runbook" -}}
{{- printf "%s#%s" (index . 0).Values.prometheusRule.runbookBaseUrl (lower (index . 1)) }}
{{- end }}

{{/*
Topology spread of a scalable service's pods: (list $ "data-collector"). One constraint
per topology key (zones, then nodes); matchLabelKeys keeps a rollout's new ReplicaSet
spread on its own.
*/}}
{{- define "threatview.topologySpread" -}}
{{- $ctx := index . 0 }}
{{- $ts := $ctx.Values.topologySpread }}
{{- range $k := list (list "topology.kubernetes.io/zone" $ts.zone) (list "kubernetes.io/hostname" $ts.node) }}
{{- if (index $k 1).enabled }}
- maxSkew: {{ (index $k 1).maxSkew }}
  topologyKey: {{ index $k 0 }}
  whenUnsatisfiable: {{ (index $k 1).whenUnsatisfiable }}
  labelSelector:
    matchLabels:
      {{- include "threatview.componentSelectorLabels" (list $ctx (index $ 1)) | nindent 6 }}
  matchLabelKeys:
    - pod-template-hash
{{- end }}
{{- end }}
{{- end }}

{{/*
Who talks to whom (templates/networkpolicy.yaml). service: true marks a Deployment (its
policy exists only while the component is enabled); public: reachable from
networkPolicy.publicFrom (default anywhere); from: components allowed in (the admin
interface always is, for its status page); fromRelease: every pod of the release; to:
components called; toRelease: every pod of the release; ext: outside services.
*/}}
{{- define "threatview.flows" -}}
data-collector: {service: true, public: true, to: [tokens, audit-logger], ext: [broker]}
data-processor: {service: true, ext: [broker, postgres]}
audit-logger: {service: true, from: [data-collector, tokens, identity, visual-renderer, privacy, alerts], to: [identity], ext: [broker, mariadb]}
audit-logger-worker: {service: true, ext: [broker, mariadb]}
tokens: {service: true, from: [data-collector], to: [audit-logger, identity], ext: [broker, mariadb]}
identity: {service: true, fromRelease: true, to: [audit-logger], ext: [mariadb, https]}
visual-renderer: {service: true, public: true, to: [identity, audit-logger], ext: [postgres]}
admin-interface: {service: true, public: true, toRelease: true, ext: [broker]}
privacy: {service: true, to: [audit-logger, identity], ext: [postgres, mariadb]}
alerts: {service: true, to: [audit-logger, identity], ext: [postgres, https, syslog{{ if .Values.alerts.smtpAddr }}, smtp{{ end }}]}
{{- if .Values.archiver.enabled }}
archiver: {ext: [postgres, mariadb, https]}
{{- end }}
{{- if .Values.auditVerify.enabled }}
audit-verify: {ext: [mariadb]}
{{- end }}
{{- if .Values.cleanup.enabled }}
cleanup: {ext: [postgres, mariadb, https]}
{{- end }}
{{- if .Values.migrations.enabled }}
migrations: {ext: [postgres, mariadb]}
{{- end }}
{{- if .Values.helmTest.enabled }}
test: {to: [data-collector, visual-renderer]}
{{- end }}
{{- end }}

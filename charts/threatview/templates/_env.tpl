{{/*
Environment of each component. Every variable set here must be one the component's
Config struct reads (checked by the chart test against the services' Config types).

"threatview.config.<key>" is the plain configuration (a YAML map) that goes into the
component's ConfigMap, whose checksum rolls the pods on change.
"threatview.secretEnv.<key>" is the env list built from existing Secrets.

Passwords reach the database URLs by Kubernetes' dependent-variable expansion:
a *_DATABASE_PASSWORD variable from the Secret is listed first and the URL refers to
it as $(NAME). The helper variable is read by the kubelet, not the service. A password
that is not URL-safe (Postgres) or contains "/" (MariaDB DSN) needs the whole URL or DSN
in the Secret instead (postgres.urlKey, mariadb.<db>.dsnKey).
*/}}

{{/* HTTP address and log level: (list $ $values). */}}
{{- define "threatview.config.common" -}}
{{- $ctx := index . 0 }}
HTTP_ADDR: {{ printf ":%d" (int (index . 1).port) | quote }}
LOG_LEVEL: {{ $ctx.Values.logLevel | quote }}
{{- end }}

{{/* Broker connection, non-secret part. */}}
{{- define "threatview.config.broker" -}}
STOMP_ADDR: {{ printf "%s:%d" .Values.broker.host (int .Values.broker.port) | quote }}
STOMP_LOGIN: {{ .Values.broker.login | quote }}
STOMP_TLS: {{ .Values.broker.tls | toString | quote }}
{{- end }}

{{/* Extra variables of one component: $values. */}}
{{- define "threatview.config.extra" -}}
{{- range $k, $v := .extraEnv }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end }}

{{- define "threatview.config.dataCollector" -}}
{{- $v := .Values.dataCollector }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
TOKENS_SERVICE_URL: {{ tpl $v.tokensServiceUrl . | quote }}
AUDITLOGGER_SERVICE_URL: {{ tpl $v.auditLoggerServiceUrl . | quote }}
{{- if or $v.geoip.existingConfigMap $v.geoip.volume }}
GEOIP_DB_PATH: {{ printf "%s/%s" (trimSuffix "/" $v.geoip.mountPath) $v.geoip.file | quote }}
{{- end }}
{{- with $v.trustedProxies }}
COLLECTOR_TRUSTED_PROXIES: {{ join "," . | quote }}
{{- end }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.dataProcessor" -}}
{{- $v := .Values.dataProcessor }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.auditLogger" -}}
{{- $v := .Values.auditLogger }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.auditLoggerWorker" -}}
{{- $v := .Values.auditLoggerWorker }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.tokens" -}}
{{- $v := .Values.tokens }}
{{ include "threatview.config.common" (list . $v) }}
AUDITLOGGER_SERVICE_URL: {{ tpl $v.auditLoggerServiceUrl . | quote }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{/* Archive location, shared by the archiver and the cleanup; blank settings are left out. */}}
{{- define "threatview.config.archive" -}}
{{- $a := .Values.archive }}
{{- with $a.target }}
ARCHIVE_TARGET: {{ . | quote }}
{{- end }}
{{- with $a.dir }}
ARCHIVE_DIR: {{ . | quote }}
{{- end }}
{{- with $a.s3.endpoint }}
ARCHIVE_S3_ENDPOINT: {{ . | quote }}
{{- end }}
{{- with $a.s3.region }}
ARCHIVE_S3_REGION: {{ . | quote }}
{{- end }}
{{- with $a.s3.bucket }}
ARCHIVE_S3_BUCKET: {{ . | quote }}
{{- end }}
{{- with $a.s3.prefix }}
ARCHIVE_S3_PREFIX: {{ . | quote }}
{{- end }}
{{- if $a.s3.forcePathStyle }}
ARCHIVE_S3_FORCE_PATH_STYLE: "true"
{{- end }}
{{- end }}

{{/* The cleanup drops only when CLEANUP_ENABLED is true: the CronJob existing is the switch. */}}
{{- define "threatview.config.cleanup" -}}
{{- $v := .Values.cleanup }}
LOG_LEVEL: {{ .Values.logLevel | quote }}
CLEANUP_ENABLED: "true"
CLEANUP_EVENTS_RETENTION_MONTHS: {{ $v.eventsRetentionMonths | int | toString | quote }}
CLEANUP_AUDIT_RETENTION_MONTHS: {{ $v.auditRetentionMonths | int | toString | quote }}
{{- with $v.requireArchive }}
CLEANUP_REQUIRE_ARCHIVE: {{ . | quote }}
{{- end }}
{{ include "threatview.config.archive" . }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.archiver" -}}
{{- if not .Values.archive.target }}
{{- fail "archiver.enabled needs archive.target (s3://bucket/prefix or dir:///path)" }}
{{- end }}
LOG_LEVEL: {{ .Values.logLevel | quote }}
ARCHIVE_CHUNK_ROWS: {{ .Values.archiver.chunkRows | int | toString | quote }}
{{ include "threatview.config.archive" . }}
{{ include "threatview.config.extra" .Values.archiver }}
{{- end }}

{{/* A variable from an existing Secret: (list NAME secret key). */}}
{{- define "threatview.env.fromSecret" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ index . 1 | quote }}
      key: {{ index . 2 | quote }}
{{- end }}

{{- define "threatview.env.brokerPasscode" -}}
{{ include "threatview.env.fromSecret" (list "STOMP_PASSCODE" .Values.broker.existingSecret .Values.broker.passcodeKey) }}
{{- end }}

{{- define "threatview.env.adminKey" -}}
{{ include "threatview.env.fromSecret" (list "ADMIN_KEY" .Values.secrets.existingSecret .Values.secrets.adminKeyKey) }}
{{- end }}

{{- define "threatview.env.internalKey" -}}
{{ include "threatview.env.fromSecret" (list "INTERNAL_KEY" .Values.secrets.existingSecret .Values.secrets.internalKeyKey) }}
{{- end }}

{{/* EVENTS_DATABASE_URL (postgres URL). */}}
{{- define "threatview.env.eventsDatabase" -}}
{{- $pg := .Values.postgres }}
{{- if $pg.urlKey }}
{{ include "threatview.env.fromSecret" (list "EVENTS_DATABASE_URL" $pg.existingSecret $pg.urlKey) }}
{{- else }}
{{ include "threatview.env.fromSecret" (list "EVENTS_DATABASE_PASSWORD" $pg.existingSecret $pg.passwordKey) }}
- name: EVENTS_DATABASE_URL
  value: {{ printf "postgres://%s:$(EVENTS_DATABASE_PASSWORD)@%s:%d/%s%s" $pg.user $pg.host (int $pg.port) $pg.database (ternary (printf "?%s" $pg.params) "" (ne $pg.params "")) | quote }}
{{- end }}
{{- end }}

{{/* A go-sql-driver DSN for one MariaDB database: (list $ "AUDIT" .Values.mariadb.audit). */}}
{{- define "threatview.env.mariadbDSN" -}}
{{- $ctx := index . 0 }}
{{- $prefix := index . 1 }}
{{- $db := index . 2 }}
{{- $m := $ctx.Values.mariadb }}
{{- if $db.dsnKey }}
{{ include "threatview.env.fromSecret" (list (printf "%s_DATABASE_DSN" $prefix) $m.existingSecret $db.dsnKey) }}
{{- else }}
{{ include "threatview.env.fromSecret" (list (printf "%s_DATABASE_PASSWORD" $prefix) $m.existingSecret $db.passwordKey) }}
- name: {{ $prefix }}_DATABASE_DSN
  value: {{ printf "%s:$(%s_DATABASE_PASSWORD)@tcp(%s:%d)/%s%s" $db.user $prefix ($db.host | default $m.host) (int $m.port) $db.database (ternary (printf "?%s" $m.params) "" (ne $m.params "")) | quote }}
{{- end }}
{{- end }}

{{- define "threatview.env.auditDatabase" -}}
{{ include "threatview.env.mariadbDSN" (list . "AUDIT" .Values.mariadb.audit) }}
{{- end }}

{{- define "threatview.env.tokensDatabase" -}}
{{ include "threatview.env.mariadbDSN" (list . "TOKENS" .Values.mariadb.tokens) }}
{{- end }}

{{- define "threatview.secretEnv.dataCollector" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.internalKey" . }}
{{- end }}

{{- define "threatview.secretEnv.dataProcessor" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.eventsDatabase" . }}
{{- end }}

{{- define "threatview.secretEnv.auditLogger" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.auditDatabase" . }}
{{- end }}

{{- define "threatview.secretEnv.auditLoggerWorker" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.auditDatabase" . }}
{{- end }}

{{- define "threatview.secretEnv.tokens" -}}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.tokensDatabase" . }}
{{- end }}

{{- define "threatview.secretEnv.migrations" -}}
{{ include "threatview.env.eventsDatabase" . }}
{{ include "threatview.env.auditDatabase" . }}
{{ include "threatview.env.tokensDatabase" . }}
{{- end }}

{{- define "threatview.secretEnv.cleanup" -}}
{{ include "threatview.env.eventsDatabase" . }}
{{ include "threatview.env.auditDatabase" . }}
{{- end }}

{{- define "threatview.secretEnv.archiver" -}}
{{ include "threatview.env.eventsDatabase" . }}
{{ include "threatview.env.auditDatabase" . }}
{{- end }}

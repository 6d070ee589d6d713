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
COLLECTOR_CLIENT_IP: {{ $v.clientIP | default "truncate" | quote }}
COLLECTOR_LOCATION_GRID: {{ $v.locationGrid | toString | quote }}
COLLECTOR_SHARDS: {{ int .Values.shards | toString | quote }}
{{- with $v.trustedProxies }}
COLLECTOR_TRUSTED_PROXIES: {{ join "," . | quote }}
{{- end }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.dataProcessor" -}}
{{- $v := .Values.dataProcessor }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
{{- if not .Values.alerts.enabled }}
{{/* Only the alerts service prunes alerts.outbox: without it the processor writes none. */}}
PROCESSOR_ALERTS_OUTBOX: "false"
{{- end }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{/* IDENTITY_JWKS_URL: with the identity service on, people's access tokens are accepted. */}}
{{- define "threatview.config.identityJWKS" -}}
{{- if .Values.identity.enabled }}
IDENTITY_JWKS_URL: {{ printf "http://%s:%d/.well-known/jwks.json" (include "threatview.componentName" (list . "identity")) (int .Values.identity.port) | quote }}
{{- end }}
{{- end }}

{{/* The audit trail's public keys and store, for the audit logger and auditverify. */}}
{{- define "threatview.config.auditTrail" -}}
{{- with .Values.auditTrail.publicKeys }}
AUDIT_PUBLIC_KEYS: {{ join "," . | quote }}
{{- end }}
{{- with .Values.auditTrail.dir }}
AUDIT_TRAIL_DIR: {{ . | quote }}
{{- end }}
{{ include "threatview.config.auditTrailS3" . }}
{{- end }}

{{/* The audit trail's S3 copy: the archive's endpoint settings, the trail's bucket and prefix. */}}
{{- define "threatview.config.auditTrailS3" -}}
{{- $t := .Values.auditTrail.s3 }}
{{- if $t.enabled }}
{{- $a := .Values.archive }}
{{- $bucket := $t.bucket | default $a.s3.bucket }}
{{- if and (not $bucket) (hasPrefix "s3://" $a.target) }}
{{- $bucket = (urlParse $a.target).host }}
{{- end }}
{{- if not $bucket }}
{{- fail "auditTrail.s3.enabled needs auditTrail.s3.bucket or an S3 archive (archive.s3.bucket or archive.target s3://...)" }}
{{- end }}
AUDIT_TRAIL_S3_BUCKET: {{ $bucket | quote }}
AUDIT_TRAIL_S3_PREFIX: {{ $t.prefix | quote }}
{{- with $a.s3.endpoint }}
ARCHIVE_S3_ENDPOINT: {{ . | quote }}
{{- end }}
{{- with $a.s3.region }}
ARCHIVE_S3_REGION: {{ . | quote }}
{{- end }}
{{- if $a.s3.forcePathStyle }}
ARCHIVE_S3_FORCE_PATH_STYLE: "true"
{{- end }}
{{- end }}
{{- end }}

{{/* auditverify: the archive is read from archive.dir when the archive is a directory. */}}
{{- define "threatview.config.auditVerify" -}}
{{ include "threatview.config.auditTrail" . }}
{{- if and .Values.archive.dir .Values.archive.volume }}
AUDITVERIFY_ARCHIVE_DIR: {{ .Values.archive.dir | quote }}
{{- end }}
{{ include "threatview.config.extra" .Values.auditVerify }}
{{- end }}

{{- define "threatview.config.auditLogger" -}}
{{- $v := .Values.auditLogger }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
{{ include "threatview.config.identityJWKS" . }}
{{ include "threatview.config.auditTrail" . }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.auditLoggerWorker" -}}
{{- $v := .Values.auditLoggerWorker }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
AUDITWORKER_CHECKPOINT_EVERY: {{ .Values.auditTrail.checkpointEvery | quote }}
{{- with .Values.auditTrail.dir }}
AUDIT_TRAIL_DIR: {{ . | quote }}
{{- end }}
{{ include "threatview.config.auditTrailS3" . }}
{{- if .Values.auditTrail.s3.enabled }}
{{- with .Values.auditTrail.s3.lockMode }}
AUDIT_TRAIL_S3_LOCK_MODE: {{ . | quote }}
AUDIT_TRAIL_S3_LOCK_DAYS: {{ $.Values.auditTrail.s3.lockDays | quote }}
{{- end }}
{{- end }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.tokens" -}}
{{- $v := .Values.tokens }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
{{ include "threatview.config.identityJWKS" . }}
AUDITLOGGER_SERVICE_URL: {{ tpl $v.auditLoggerServiceUrl . | quote }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.identity" -}}
{{- $v := .Values.identity }}
{{ include "threatview.config.common" (list . $v) }}
AUDITLOGGER_SERVICE_URL: {{ tpl $v.auditLoggerServiceUrl . | quote }}
{{- with $v.trustedProxies }}
IDENTITY_TRUSTED_PROXIES: {{ join "," . | quote }}
{{- end }}
{{- with $v.oidc.issuer }}
IDENTITY_OIDC_ISSUER: {{ . | quote }}
IDENTITY_OIDC_CLIENT_ID: {{ $v.oidc.clientId | quote }}
IDENTITY_OIDC_REDIRECT_URL: {{ $v.oidc.redirectUrl | quote }}
{{- with $v.oidc.roleMap }}
IDENTITY_OIDC_ROLE_MAP: {{ . | quote }}
{{- end }}
{{- end }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.visualRenderer" -}}
{{- $v := .Values.visualRenderer }}
{{ include "threatview.config.common" (list . $v) }}
{{- with tpl $v.identityServiceUrl . }}
IDENTITY_SERVICE_URL: {{ . | quote }}
{{- end }}
{{- with $v.trustedProxies }}
RENDERER_TRUSTED_PROXIES: {{ join "," . | quote }}
{{- end }}
{{- with $v.adminUiUrl }}
RENDERER_ADMIN_URL: {{ . | quote }}
{{- end }}
{{- /* Searches, timelines and taxonomy changes are audited (with INTERNAL_KEY). */}}
{{- with tpl $v.auditLoggerServiceUrl . }}
AUDITLOGGER_SERVICE_URL: {{ . | quote }}
{{- end }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.privacy" -}}
{{- $v := .Values.privacy }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.identityJWKS" . }}
AUDITLOGGER_SERVICE_URL: {{ tpl $v.auditLoggerServiceUrl . | quote }}
PRIVACY_BATCH_ROWS: {{ $v.batchRows | quote }}
PRIVACY_SETTLE: {{ $v.settle | quote }}
{{- /* An erasure rewrites the archived months holding the subject: the archiver's target. */}}
ARCHIVE_CHUNK_ROWS: {{ .Values.archiver.chunkRows | int | toString | quote }}
{{ include "threatview.config.archive" . }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{- define "threatview.config.alerts" -}}
{{- $v := .Values.alerts }}
{{ include "threatview.config.common" (list . $v) }}
{{- if .Values.identity.enabled }}
IDENTITY_SERVICE_URL: {{ printf "http://%s:%d" (include "threatview.componentName" (list . "identity")) (int .Values.identity.port) | quote }}
{{- end }}
AUDITLOGGER_SERVICE_URL: {{ tpl $v.auditLoggerServiceUrl . | quote }}
ALERTS_EVALUATE_EVERY: {{ $v.evaluateEvery | quote }}
ALERTS_OUTBOX_KEEP: {{ $v.outboxKeep | quote }}
ALERTS_FORWARD_BATCH: {{ $v.forwardBatch | quote }}
{{- if lt (int64 $v.forwardMaxBacklog) (int64 $v.forwardBatch) }}
{{- fail "alerts.forwardMaxBacklog must be at least alerts.forwardBatch" }}
{{- end }}
ALERTS_FORWARD_MAX_BACKLOG: {{ $v.forwardMaxBacklog | int64 | toString | quote }}
{{- with $v.egressAllow }}
ALERTS_EGRESS_ALLOW: {{ join "," . | quote }}
{{- end }}
{{- with $v.smtpAddr }}
ALERTS_SMTP_ADDR: {{ . | quote }}
{{- end }}
ALERTS_SMTP_FROM: {{ $v.smtpFrom | quote }}
ALERTS_SMTP_TLS: {{ $v.smtpTLS | quote }}
{{- if $v.smtpCAFile }}
ALERTS_SMTP_CA_FILE: {{ $v.smtpCAFile | quote }}
{{- else if $v.smtpCAVolume }}
{{- fail "alerts.smtpCAVolume needs alerts.smtpCAFile (the CA file's path in it)" }}
{{- end }}
{{- with $v.s3Endpoint }}
ALERTS_S3_ENDPOINT: {{ . | quote }}
ALERTS_S3_PATH_STYLE: "true"
{{- end }}
ALERTS_S3_REGION: {{ $v.s3Region | quote }}
{{- with $v.s3Buckets }}
ALERTS_S3_BUCKETS: {{ join "," . | quote }}
{{- end }}
{{ include "threatview.config.extra" $v }}
{{- end }}

{{/* ADMINUI_STATUS_TARGETS: name=URL of every running service, for the status page. */}}
{{- define "threatview.adminStatusTargets" -}}
{{- $out := list }}
{{- range $c := include "threatview.services" . | fromYamlArray }}
{{- if ne $c.key "adminInterface" }}
{{- $out = append $out (printf "%s=http://%s:%d" $c.component (include "threatview.componentName" (list $ $c.component)) (int (index $.Values $c.key).port)) }}
{{- end }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{- define "threatview.config.adminInterface" -}}
{{- $v := .Values.adminInterface }}
{{- $svc := include "threatview.fullname" . }}
{{ include "threatview.config.common" (list . $v) }}
{{ include "threatview.config.broker" . }}
{{- /* The status and DLQ pages list each shard's events queue. */}}
ADMINUI_EVENTS_SHARDS: {{ int .Values.shards | toString | quote }}
IDENTITY_SERVICE_URL: {{ printf "http://%s-identity:%d" $svc (int .Values.identity.port) | quote }}
TOKENS_SERVICE_URL: {{ printf "http://%s-tokens:%d" $svc (int .Values.tokens.port) | quote }}
AUDITLOGGER_SERVICE_URL: {{ printf "http://%s-audit-logger:%d" $svc (int .Values.auditLogger.port) | quote }}
{{- if .Values.visualRenderer.enabled }}
VISUALRENDERER_SERVICE_URL: {{ printf "http://%s-visual-renderer:%d" $svc (int .Values.visualRenderer.port) | quote }}
{{- end }}
{{- if .Values.alerts.enabled }}
ALERTS_SERVICE_URL: {{ printf "http://%s-alerts:%d" $svc (int .Values.alerts.port) | quote }}
{{- end }}
{{- if .Values.privacy.enabled }}
PRIVACY_SERVICE_URL: {{ printf "http://%s-privacy:%d" $svc (int .Values.privacy.port) | quote }}
{{- end }}
ADMINUI_COLLECTOR_PUBLIC_URL: {{ tpl $v.collectorPublicUrl . | quote }}
ADMINUI_STATUS_TARGETS: {{ include "threatview.adminStatusTargets" . | quote }}
{{- with $v.trustedProxies }}
ADMINUI_TRUSTED_PROXIES: {{ join "," . | quote }}
{{- end }}
{{- if and .Values.identity.enabled .Values.identity.oidc.issuer }}
ADMINUI_OIDC: "true"
{{- end }}
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

{{/*
A postgres URL variable: (dict "ctx" $ "name" "EVENTS_DATABASE_URL" "secret" S "user" U "passwordKey" K "urlKey" K2).
The password helper variable is NAME with _URL replaced by _PASSWORD.
*/}}
{{- define "threatview.env.pgURL" -}}
{{- $pg := .ctx.Values.postgres }}
{{- if .urlKey }}
{{ include "threatview.env.fromSecret" (list .name .secret .urlKey) }}
{{- else }}
{{- $pw := printf "%s_PASSWORD" (trimSuffix "_URL" .name) }}
{{ include "threatview.env.fromSecret" (list $pw .secret .passwordKey) }}
- name: {{ .name }}
  value: {{ printf "postgres://%s:$(%s)@%s:%d/%s%s" .user $pw $pg.host (int $pg.port) $pg.database (ternary (printf "?%s" $pg.params) "" (ne $pg.params "")) | quote }}
{{- end }}
{{- end }}

{{/* EVENTS_DATABASE_URL (postgres URL) with the services' (DML) user. */}}
{{- define "threatview.env.eventsDatabase" -}}
{{- $pg := .Values.postgres }}
{{ include "threatview.env.pgURL" (dict "ctx" . "name" "EVENTS_DATABASE_URL" "secret" $pg.existingSecret "user" $pg.user "passwordKey" $pg.passwordKey "urlKey" $pg.urlKey) }}
{{- end }}

{{/* RENDERER_DATABASE_URL: the visual renderer's read-only user on the events database. */}}
{{- define "threatview.env.rendererDatabase" -}}
{{- $pg := .Values.postgres }}
{{ include "threatview.env.pgURL" (dict "ctx" . "name" "RENDERER_DATABASE_URL" "secret" $pg.existingSecret "user" $pg.renderer.user "passwordKey" $pg.renderer.passwordKey "urlKey" $pg.renderer.urlKey) }}
{{- end }}

{{/* A go-sql-driver DSN for one MariaDB database: (list $ "AUDIT" .Values.mariadb.audit [secret]). */}}
{{- define "threatview.env.mariadbDSN" -}}
{{- $ctx := index . 0 }}
{{- $prefix := index . 1 }}
{{- $db := index . 2 }}
{{- $m := $ctx.Values.mariadb }}
{{- $secret := $m.existingSecret }}
{{- if gt (len .) 3 }}{{ $secret = index . 3 }}{{ end }}
{{- if $db.dsnKey }}
{{ include "threatview.env.fromSecret" (list (printf "%s_DATABASE_DSN" $prefix) $secret $db.dsnKey) }}
{{- else }}
{{ include "threatview.env.fromSecret" (list (printf "%s_DATABASE_PASSWORD" $prefix) $secret $db.passwordKey) }}
- name: {{ $prefix }}_DATABASE_DSN
  value: {{ printf "%s:$(%s_DATABASE_PASSWORD)@tcp(%s:%d)/%s%s" $db.user $prefix ($db.host | default $m.host) (int $m.port) $db.database (ternary (printf "?%s" $m.params) "" (ne $m.params "")) | quote }}
{{- end }}
{{- end }}

{{- define "threatview.env.auditDatabase" -}}
{{ include "threatview.env.mariadbDSN" (list . "AUDIT" .Values.mariadb.audit) }}
{{- end }}

{{/* AUDIT_DATABASE_DSN with one audit-database client's own user: (list $ "auditLogger"). */}}
{{- define "threatview.env.auditClientDatabase" -}}
{{- $ctx := index . 0 }}
{{- $a := $ctx.Values.mariadb.audit }}
{{- $c := index $a.clients (index . 1) }}
{{ include "threatview.env.mariadbDSN" (list $ctx "AUDIT" (dict "user" $c.user "passwordKey" $c.passwordKey "dsnKey" $c.dsnKey "host" $a.host "database" $a.database)) }}
{{- end }}

{{/* A service's own PostgreSQL user: (list $ "EVENTS_DATABASE_URL" .Values.postgres.processor). */}}
{{- define "threatview.env.pgServiceURL" -}}
{{- $ctx := index . 0 }}
{{- $u := index . 2 }}
{{ include "threatview.env.pgURL" (dict "ctx" $ctx "name" (index . 1) "secret" $ctx.Values.postgres.existingSecret "user" $u.user "passwordKey" $u.passwordKey "urlKey" $u.urlKey) }}
{{- end }}

{{- define "threatview.env.tokensDatabase" -}}
{{ include "threatview.env.mariadbDSN" (list . "TOKENS" .Values.mariadb.tokens) }}
{{- end }}

{{- define "threatview.env.identityDatabase" -}}
{{ include "threatview.env.mariadbDSN" (list . "IDENTITY" .Values.mariadb.identity) }}
{{- end }}

{{/*
The user id key ring (dataCollector.userIdKeys) as NAME: (list $ NAME). The collector
pseudonymises with it, the renderer searches by raw id with the same keys. Optional: a
Secret without the key leaves it blank, and user ids are dropped, never kept.
*/}}
{{- define "threatview.env.userIdKeys" -}}
{{- $k := (index . 0).Values.dataCollector.userIdKeys }}
{{- if $k.key }}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ $k.existingSecret | default (index . 0).Values.secrets.existingSecret | quote }}
      key: {{ $k.key | quote }}
      optional: true
{{- end }}
{{- end }}

{{- define "threatview.secretEnv.dataCollector" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.userIdKeys" (list . "COLLECTOR_USER_ID_KEYS") }}
{{- end }}

{{- define "threatview.secretEnv.dataProcessor" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.pgServiceURL" (list . "EVENTS_DATABASE_URL" .Values.postgres.processor) }}
{{- end }}

{{- define "threatview.secretEnv.auditLogger" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.auditClientDatabase" (list . "auditLogger") }}
{{ include "threatview.env.auditPublicKeys" . }}
{{- end }}

{{- define "threatview.secretEnv.auditLoggerWorker" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.auditClientDatabase" (list . "auditLoggerWorker") }}
{{- if .Values.auditTrail.enabled }}
{{- /* Required: a missing key keeps the pod from starting instead of leaving the trail unsigned. */}}
{{ include "threatview.env.fromSecret" (list "AUDIT_SIGNING_KEYS" .Values.secrets.existingSecret .Values.secrets.auditSigningKeysKey) }}
{{- end }}
{{- end }}

{{/*
With the trail on, checkpoints must go to a store outside the database (S3, or a directory
with its volume): fails the render otherwise.
*/}}
{{- define "threatview.auditTrail.check" -}}
{{- $t := .Values.auditTrail }}
{{- if and $t.enabled (not $t.s3.enabled) (not (and $t.dir $t.volume)) }}
{{- fail "auditTrail.enabled needs a checkpoint store outside the database: auditTrail.s3.enabled (a bucket with Object Lock), or auditTrail.dir with auditTrail.volume; or set auditTrail.enabled=false (nothing signed, every verification unanchored)" }}
{{- end }}
{{- end }}

{{/* AUDIT_PUBLIC_KEYS from the Secret unless auditTrail.publicKeys gives them. */}}
{{- define "threatview.env.auditPublicKeys" -}}
{{- if not .Values.auditTrail.publicKeys }}
- name: AUDIT_PUBLIC_KEYS
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secrets.existingSecret | quote }}
      key: {{ .Values.secrets.auditPublicKeysKey | quote }}
      optional: true
{{- end }}
{{- end }}

{{- define "threatview.secretEnv.auditVerify" -}}
{{ include "threatview.env.auditClientDatabase" (list . "auditVerify") }}
{{ include "threatview.env.auditPublicKeys" . }}
{{- end }}

{{- define "threatview.secretEnv.tokens" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.tokensDatabase" . }}
{{- end }}

{{- define "threatview.secretEnv.identity" -}}
{{ include "threatview.env.fromSecret" (list "IDENTITY_SIGNING_KEYS" .Values.secrets.existingSecret .Values.secrets.identitySigningKeysKey) }}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.identityDatabase" . }}
{{- if .Values.identity.oidc.issuer }}
{{ include "threatview.env.fromSecret" (list "IDENTITY_OIDC_CLIENT_SECRET" .Values.secrets.existingSecret .Values.identity.oidc.clientSecretKey) }}
{{- end }}
{{- end }}

{{- define "threatview.secretEnv.visualRenderer" -}}
{{- /* The renderer is internet-facing: the admin key only when asked for (automation without identity). */}}
{{- if .Values.visualRenderer.adminKey }}
{{ include "threatview.env.adminKey" . }}
{{- else if not (and .Values.identity.enabled (tpl .Values.visualRenderer.identityServiceUrl .)) }}
{{- fail "visualRenderer needs identity.enabled (people sign in) or visualRenderer.adminKey=true (the admin key on the internet-facing renderer)" }}
{{- end }}
{{/* INTERNAL_KEY: the renderer derives identity's forwarder key from it, as identity does, and audits with it. */}}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.rendererDatabase" . }}
{{ include "threatview.env.userIdKeys" (list . "RENDERER_USER_ID_KEYS") }}
{{- end }}

{{- define "threatview.secretEnv.privacy" -}}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.pgServiceURL" (list . "EVENTS_DATABASE_URL" .Values.postgres.privacy) }}
{{ include "threatview.env.auditClientDatabase" (list . "privacy") }}
{{- end }}

{{- define "threatview.secretEnv.alerts" -}}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.pgServiceURL" (list . "ALERTS_DATABASE_URL" .Values.postgres.alerts) }}
{{- end }}

{{- define "threatview.secretEnv.adminInterface" -}}
{{ include "threatview.env.brokerPasscode" . }}
{{ include "threatview.env.internalKey" . }}
{{ include "threatview.env.adminKey" . }}
{{ include "threatview.env.fromSecret" (list "ADMINUI_SESSION_KEY" .Values.secrets.existingSecret .Values.secrets.adminSessionKeyKey) }}
{{- end }}

{{/*
Owner (DDL) credentials, with migrations.ddlCredentials.enabled: the migration Job creates
tables and partitions, the cleanup drops partitions; the services keep their own (DML)
users. Hosts and database names stay those of the services' settings.
*/}}
{{- define "threatview.env.ddlEvents" -}}
{{- $d := .Values.migrations.ddlCredentials }}
{{ include "threatview.env.pgURL" (dict "ctx" . "name" "EVENTS_DATABASE_URL" "secret" $d.existingSecret "user" $d.postgres.user "passwordKey" $d.postgres.passwordKey "urlKey" $d.postgres.urlKey) }}
{{- end }}

{{/* (list $ "AUDIT" "audit"): one MariaDB database's owner DSN. */}}
{{- define "threatview.env.ddlMariadb" -}}
{{- $ctx := index . 0 }}
{{- $d := $ctx.Values.migrations.ddlCredentials }}
{{- $svc := index $ctx.Values.mariadb (index . 2) }}
{{- $owner := index $d (index . 2) }}
{{ include "threatview.env.mariadbDSN" (list $ctx (index . 1) (merge (dict) $owner (dict "host" $svc.host "database" $svc.database)) $d.existingSecret) }}
{{- end }}

{{/* The migration Job's databases (migrate -db all): owner users or the services' users. */}}
{{- define "threatview.secretEnv.migrations" -}}
{{- if .Values.migrations.ddlCredentials.enabled }}
{{ include "threatview.env.ddlEvents" . }}
{{ include "threatview.env.ddlMariadb" (list . "AUDIT" "audit") }}
{{ include "threatview.env.ddlMariadb" (list . "TOKENS" "tokens") }}
{{ include "threatview.env.ddlMariadb" (list . "IDENTITY" "identity") }}
{{- else }}
{{ include "threatview.env.eventsDatabase" . }}
{{ include "threatview.env.auditDatabase" . }}
{{ include "threatview.env.tokensDatabase" . }}
{{ include "threatview.env.identityDatabase" . }}
{{- end }}
{{- end }}

{{/* The cleanup drops partitions: DDL, so the owner users when they are configured. */}}
{{- define "threatview.secretEnv.cleanup" -}}
{{- if .Values.migrations.ddlCredentials.enabled }}
{{ include "threatview.env.ddlEvents" . }}
{{ include "threatview.env.ddlMariadb" (list . "AUDIT" "audit") }}
{{- else }}
{{ include "threatview.env.eventsDatabase" . }}
{{ include "threatview.env.auditDatabase" . }}
{{- end }}
{{- end }}

{{- define "threatview.secretEnv.archiver" -}}
{{ include "threatview.env.eventsDatabase" . }}
{{ include "threatview.env.auditDatabase" . }}
{{- end }}

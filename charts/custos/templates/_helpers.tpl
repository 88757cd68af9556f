{{/*
Helpers of the Custos chart. Most take a context dict:
  root: the chart's top-level context ($)
  name: a service name, a key of .Values.services (gateway, identity, vault-crypto, ...)
*/}}

{{/* Chart name, overridable. */}}
{{- define "custos.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Prefix of every object name. Truncated to 44 characters because the longest suffix,
"-webhook-dispatcher", must still fit in a 63-character DNS label.
*/}}
{{- define "custos.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 44 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 44 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 44 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of a service's Deployment, Service, ServiceAccount and NetworkPolicy. (dict root name) */}}
{{- define "custos.componentName" -}}
{{- printf "%s-%s" (include "custos.fullname" .root) .name -}}
{{- end -}}

{{/* Labels that select one service's pods. (dict root name) */}}
{{- define "custos.selectorLabels" -}}
app.kubernetes.io/name: {{ include "custos.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* Labels of every object. (dict root name) */}}
{{- define "custos.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "custos.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: custos
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Whether a service owns a Postgres schema (all but the gateway). (dict root name) → "true" or "" */}}
{{- define "custos.hasDatabase" -}}
{{- if ne .name "gateway" }}true{{ end -}}
{{- end -}}

{{/*
The effective settings of one service as YAML (use with fromYaml): serviceDefaults overlaid by
services.<name>. A key set for the service replaces the default, except env and secretEnv, which
are merged key by key (the service wins), and extraEnv, envFrom, extraVolumes and
extraVolumeMounts, which are appended.
(dict root name)
*/}}
{{- define "custos.serviceConfig" -}}
{{- $own := index .root.Values.services .name | default dict -}}
{{- $cfg := deepCopy .root.Values.serviceDefaults -}}
{{- range $key, $value := $own -}}
{{- if has $key (list "env" "secretEnv") -}}
{{- $_ := set $cfg $key (merge (deepCopy ($value | default dict)) (index $cfg $key | default dict)) -}}
{{- else if has $key (list "extraEnv" "envFrom" "extraVolumes" "extraVolumeMounts") -}}
{{- $_ := set $cfg $key (concat (index $cfg $key | default list) ($value | default list)) -}}
{{- else -}}
{{- $_ := set $cfg $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
Image reference of a service: image.reference when set (skaffold passes the fully qualified
reference there), else <repository>:<tag> with repository defaulting to
<image.registry>/custos-<name> and tag to image.tag, then the chart's appVersion.
(dict root name cfg)
*/}}
{{- define "custos.image" -}}
{{- $img := .cfg.image | default dict -}}
{{- if $img.reference -}}
{{- $img.reference -}}
{{- else -}}
{{- $registry := .root.Values.image.registry | default "" | trimSuffix "/" -}}
{{- $repository := $img.repository | default (ternary (printf "%s/custos-%s" $registry .name) (printf "custos-%s" .name) (ne $registry "")) -}}
{{- $tag := $img.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- printf "%s:%s" $repository (toString $tag) -}}
{{- end -}}
{{- end -}}

{{/* Pull policy of a service's image. (dict root name cfg) */}}
{{- define "custos.imagePullPolicy" -}}
{{- $img := .cfg.image | default dict -}}
{{- $img.pullPolicy | default .root.Values.image.pullPolicy -}}
{{- end -}}

{{/* host:port of a service's gRPC endpoint, the value of <NAME>_ADDR. (dict root name) */}}
{{- define "custos.grpcAddress" -}}
{{- $peer := index .root.Values.services .name -}}
{{- if not $peer -}}
{{- fail (printf "unknown service %q in peers or allowedCallers" .name) -}}
{{- end -}}
{{- printf "%s:%d" (include "custos.componentName" .) ($peer.grpcPort | int) -}}
{{- end -}}

{{/* Name of the Secret the chart creates for values given inline (postgres.url, ...). */}}
{{- define "custos.managedSecretName" -}}
{{- printf "%s-env" (include "custos.fullname" .) -}}
{{- end -}}

{{/*
Data of the chart-managed Secret as YAML (key: base64 value); empty when every dependency uses an
existingSecret. Also fails early when a required connection or key is configured neither way.
*/}}
{{- define "custos.managedSecretData" -}}
{{- if not .Values.postgres.existingSecret -}}
{{- if not .Values.postgres.url -}}
{{- fail "postgres: set postgres.existingSecret (recommended) or postgres.url" -}}
{{- end }}
database-url: {{ .Values.postgres.url | b64enc | quote }}
{{- end -}}
{{- if not .Values.redis.existingSecret -}}
{{- if not .Values.redis.url -}}
{{- fail "redis: set redis.existingSecret (recommended) or redis.url" -}}
{{- end }}
redis-url: {{ .Values.redis.url | b64enc | quote }}
{{- end -}}
{{- if and (not .Values.kms.existingSecret) .Values.kms.localMasterKey }}
local-kms-master-key: {{ .Values.kms.localMasterKey | b64enc | quote }}
{{- end -}}
{{- /* audit cannot start without its HMAC key. */ -}}
{{- if not .Values.audit.existingSecret -}}
{{- if .Values.audit.hmacKey }}
audit-hmac-key: {{ .Values.audit.hmacKey | b64enc | quote }}
{{- else if not (hasKey ((include "custos.serviceConfig" (dict "root" . "name" "audit") | fromYaml).secretEnv | default dict) "AUDIT_HMAC_KEY") -}}
{{- fail "audit: the audit service needs AUDIT_HMAC_KEY: set audit.existingSecret (recommended) or audit.hmacKey to base64 of 32 random bytes (openssl rand -base64 32)" -}}
{{- end -}}
{{- end -}}
{{- /* webhook-dispatcher cannot start without the key that seals webhook signing secrets. */ -}}
{{- if not .Values.webhooks.existingSecret -}}
{{- if .Values.webhooks.secretKey }}
webhook-secret-key: {{ .Values.webhooks.secretKey | b64enc | quote }}
{{- else if not (hasKey ((include "custos.serviceConfig" (dict "root" . "name" "webhook-dispatcher") | fromYaml).secretEnv | default dict) "WEBHOOK_SECRET_KEY") -}}
{{- fail "webhooks: the webhook-dispatcher service needs WEBHOOK_SECRET_KEY: set webhooks.existingSecret (recommended) or webhooks.secretKey to base64 of 32 random bytes (openssl rand -base64 32)" -}}
{{- end -}}
{{- end -}}
{{- /* identity cannot start without these two, so unlike the local KMS key they are required. */ -}}
{{- $identitySecretEnv := (include "custos.serviceConfig" (dict "root" . "name" "identity") | fromYaml).secretEnv | default dict -}}
{{- if not .Values.tokens.existingSecret -}}
{{- if .Values.tokens.signingKek }}
token-signing-kek: {{ .Values.tokens.signingKek | b64enc | quote }}
{{- else if not (hasKey $identitySecretEnv "TOKEN_SIGNING_KEK") -}}
{{- fail "tokens: identity needs TOKEN_SIGNING_KEK: set tokens.existingSecret (recommended) or tokens.signingKek to base64 of 32 random bytes (openssl rand -base64 32)" -}}
{{- end -}}
{{- end -}}
{{- if not .Values.mail.existingSecret -}}
{{- if .Values.mail.smtpUrl }}
smtp-url: {{ .Values.mail.smtpUrl | b64enc | quote }}
{{- else if not (hasKey $identitySecretEnv "SMTP_URL") -}}
{{- fail "mail: identity needs SMTP_URL to send e-mail: set mail.existingSecret (recommended) or mail.smtpUrl (smtp:// or smtps://)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
secretKeyRef (name, key) of a dependency's Secret as YAML; empty if unset. (dict root dep)
  postgres → DATABASE_URL, redis → REDIS_URL, kms → LOCAL_KMS_MASTER_KEY,
  tokens → TOKEN_SIGNING_KEK, mail → SMTP_URL, audit → AUDIT_HMAC_KEY,
  webhooks → WEBHOOK_SECRET_KEY.
existingSecret wins; else the value given inline, kept in the chart-managed Secret.
*/}}
{{- define "custos.dependencySecretRef" -}}
{{- $dep := index .root.Values .dep -}}
{{- $inlineValue := index (dict "postgres" "url" "redis" "url" "kms" "localMasterKey" "tokens" "signingKek" "mail" "smtpUrl" "audit" "hmacKey" "webhooks" "secretKey") .dep -}}
{{- $managedKey := index (dict "postgres" "database-url" "redis" "redis-url" "kms" "local-kms-master-key" "tokens" "token-signing-kek" "mail" "smtp-url" "audit" "audit-hmac-key" "webhooks" "webhook-secret-key") .dep -}}
{{- if $dep.existingSecret -}}
name: {{ $dep.existingSecret }}
key: {{ $dep.existingSecretKey }}
{{- else if index $dep $inlineValue -}}
name: {{ include "custos.managedSecretName" .root }}
key: {{ $managedKey }}
{{- end -}}
{{- end -}}

{{/* An optional integer value as a decimal string; "" when blank (the service's default applies). */}}
{{- define "custos.optionalInt" -}}
{{- if not (or (kindIs "invalid" .) (kindIs "string" .)) -}}
{{- . | int | toString -}}
{{- end -}}
{{- end -}}

{{/*
TOKEN_ISSUER: tokens.issuer, else the Ingress's URL (https://<host> with TLS, http://<host>
without), else empty (the service's default, only right for a local setup).
*/}}
{{- define "custos.tokenIssuer" -}}
{{- if .Values.tokens.issuer -}}
{{- .Values.tokens.issuer -}}
{{- else if and .Values.ingress.enabled .Values.ingress.host -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host -}}
{{- end -}}
{{- end -}}

{{/*
The container env of a service, as a YAML list. Precedence, lowest first: variables the chart
derives from the values (ports, peers' _ADDR, connections), then services.<name>.env, then
services.<name>.secretEnv; extraEnv entries are appended last as given.
Blank derived values are left out: the services treat a blank variable as unset anyway.
(dict root name cfg)
*/}}
{{- define "custos.env" -}}
{{- $root := .root -}}
{{- $cfg := .cfg -}}
{{- $plain := dict
  "LOG_LEVEL" $root.Values.logLevel
  "GRPC_HOST" "0.0.0.0"
  "GRPC_PORT" ($cfg.grpcPort | int | toString)
  "METRICS_HOST" "0.0.0.0"
  "METRICS_PORT" ($root.Values.metrics.port | int | toString)
  "OTEL_EXPORTER_OTLP_ENDPOINT" $root.Values.otel.endpoint
  "OTEL_BSP_SCHEDULE_DELAY" ($root.Values.otel.scheduleDelayMs | int | toString)
  "SHUTDOWN_GRACE_MS" ($root.Values.shutdownGraceMs | int | toString)
-}}
{{- $secret := dict -}}
{{- range $peer := $cfg.peers | default list -}}
{{- $_ := set $plain (printf "%s_ADDR" ($peer | upper | replace "-" "_")) (include "custos.grpcAddress" (dict "root" $root "name" $peer)) -}}
{{- end -}}
{{- if include "custos.hasDatabase" . -}}
{{- $_ := set $plain "DATABASE_POOL_MAX" (($cfg.databasePoolMax | default $root.Values.postgres.poolMax) | int | toString) -}}
{{- $_ := set $plain "MIGRATE_ON_START" "false" -}}
{{- $_ := set $plain "NATS_URL" $root.Values.nats.url -}}
{{- $_ := set $plain "NATS_STREAM" $root.Values.nats.stream -}}
{{- $_ := set $plain "NATS_SUBJECT_PREFIX" $root.Values.nats.subjectPrefix -}}
{{- $_ := set $secret "DATABASE_URL" (include "custos.dependencySecretRef" (dict "root" $root "dep" "postgres") | fromYaml) -}}
{{- end -}}
{{- if eq .name "gateway" -}}
{{- $_ := set $plain "PORT" ($root.Values.http.port | int | toString) -}}
{{- $_ := set $plain "HOST" "0.0.0.0" -}}
{{- $_ := set $plain "RATE_LIMIT_RPS" ($root.Values.http.rateLimit.rps | int | toString) -}}
{{- $_ := set $plain "RATE_LIMIT_BURST" ($root.Values.http.rateLimit.burst | int | toString) -}}
{{- $_ := set $plain "TRUSTED_PROXIES" (join "," ($root.Values.http.trustedProxies | default list)) -}}
{{- end -}}
{{- /* Redis: the gateway's rate limits; identity mirrors revocations there; the services that verify tokens read them. */ -}}
{{- if has .name (list "gateway" "identity" "vault-crypto" "policy" "billing" "audit" "webhook-dispatcher") -}}
{{- $_ := set $secret "REDIS_URL" (include "custos.dependencySecretRef" (dict "root" $root "dep" "redis") | fromYaml) -}}
{{- end -}}
{{- if eq .name "audit" -}}
{{- $auditKeyRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "audit") | fromYaml -}}
{{- if $auditKeyRef -}}
{{- $_ := set $secret "AUDIT_HMAC_KEY" $auditKeyRef -}}
{{- end -}}
{{- end -}}
{{- if eq .name "webhook-dispatcher" -}}
{{- $_ := set $plain "WEBHOOK_ALLOWED_CIDRS" (join "," ($root.Values.webhooks.allowedCidrs | default list)) -}}
{{- $_ := set $plain "WEBHOOK_ALLOW_HTTP" (toString ($root.Values.webhooks.allowHttp | default false)) -}}
{{- $webhookKeyRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "webhooks") | fromYaml -}}
{{- if $webhookKeyRef -}}
{{- $_ := set $secret "WEBHOOK_SECRET_KEY" $webhookKeyRef -}}
{{- end -}}
{{- end -}}
{{- if eq .name "billing" -}}
{{- $_ := set $plain "BILLING_DEFAULT_PLAN" $root.Values.billing.defaultPlan -}}
{{- end -}}
{{- if eq .name "identity" -}}
{{- $issuer := include "custos.tokenIssuer" $root -}}
{{- $_ := set $plain "TOKEN_ISSUER" $issuer -}}
{{- $_ := set $plain "TOKEN_LEGACY_ISSUERS" (join "," ($root.Values.tokens.legacyIssuers | default list)) -}}
{{- $_ := set $plain "TOKEN_AUDIENCE" $root.Values.tokens.audience -}}
{{- $_ := set $plain "ACCESS_TOKEN_TTL_SECONDS" (include "custos.optionalInt" $root.Values.tokens.accessTokenTtlSeconds) -}}
{{- $_ := set $plain "REFRESH_TOKEN_TTL_SECONDS" (include "custos.optionalInt" $root.Values.tokens.refreshTokenTtlSeconds) -}}
{{- $_ := set $plain "SIGNING_KEY_ROTATION_DAYS" (include "custos.optionalInt" $root.Values.tokens.signingKeyRotationDays) -}}
{{- $_ := set $plain "EMAIL_VERIFICATION_REQUIRED" (toString $root.Values.auth.emailVerificationRequired) -}}
{{- $_ := set $plain "EMAIL_VERIFICATION_TTL_SECONDS" (include "custos.optionalInt" $root.Values.auth.emailVerificationTtlSeconds) -}}
{{- $_ := set $plain "MAIL_FROM" $root.Values.mail.from -}}
{{- $_ := set $plain "PUBLIC_BASE_URL" ($root.Values.mail.publicBaseUrl | default $issuer) -}}
{{- $kekRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "tokens") | fromYaml -}}
{{- if $kekRef -}}
{{- $_ := set $secret "TOKEN_SIGNING_KEK" $kekRef -}}
{{- end -}}
{{- $smtpRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "mail") | fromYaml -}}
{{- if $smtpRef -}}
{{- $_ := set $secret "SMTP_URL" $smtpRef -}}
{{- end -}}
{{- end -}}
{{- if eq .name "vault-crypto" -}}
{{- $_ := set $plain "KMS_PROVIDER" $root.Values.kms.provider -}}
{{- $kmsRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "kms") | fromYaml -}}
{{- if and $kmsRef (eq $root.Values.kms.provider "local") -}}
{{- $_ := set $secret "LOCAL_KMS_MASTER_KEY" $kmsRef -}}
{{- end -}}
{{- if eq $root.Values.kms.provider "aws-kms" -}}
{{- $aws := $root.Values.kms.aws -}}
{{- $_ := set $plain "AWS_KMS_KEY_ID" $aws.keyId -}}
{{- $_ := set $plain "AWS_REGION" $aws.region -}}
{{- $_ := set $plain "AWS_KMS_ENDPOINT" $aws.endpoint -}}
{{- $_ := set $plain "AWS_KMS_TIMEOUT_MS" (include "custos.optionalInt" $aws.timeoutMs) -}}
{{- end -}}
{{- if eq $root.Values.kms.provider "pkcs11" -}}
{{- $p := $root.Values.kms.pkcs11 -}}
{{- $_ := set $plain "PKCS11_LIBRARY" $p.library -}}
{{- $_ := set $plain "PKCS11_TOKEN_LABEL" $p.tokenLabel -}}
{{- $_ := set $plain "PKCS11_SLOT" (include "custos.optionalInt" $p.slot) -}}
{{- $_ := set $plain "PKCS11_KEY_LABEL" $p.keyLabel -}}
{{- $_ := set $plain "PKCS11_GENERATE_KEY" (toString $p.generateKey) -}}
{{- $_ := set $secret "PKCS11_PIN" (dict "name" $p.pinSecret "key" $p.pinSecretKey) -}}
{{- end -}}
{{- end -}}
{{- /* Values from services.<name>.env, then secretEnv, replace derived variables of the same name. */ -}}
{{- range $k, $v := $cfg.env | default dict -}}
{{- $_ := set $plain $k (toString $v) -}}
{{- $_ := unset $secret $k -}}
{{- end -}}
{{- range $k, $v := $cfg.secretEnv | default dict -}}
{{- $_ := set $secret $k $v -}}
{{- $_ := unset $plain $k -}}
{{- end -}}
{{- range $k, $v := $plain }}
{{- if ne (toString $v) "" }}
- name: {{ $k }}
  value: {{ toString $v | quote }}
{{- end }}
{{- end }}
{{- range $k, $ref := $secret }}
- name: {{ $k }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.name }}
      key: {{ $ref.key }}
{{- end }}
{{- with $cfg.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod-level security context shared by the services and the migration Job. */}}
{{- define "custos.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level security context shared by the services and the migration Job. */}}
{{- define "custos.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

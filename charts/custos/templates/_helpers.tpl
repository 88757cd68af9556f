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
(and autoscaling) are merged key by key (the service wins), and extraEnv, envFrom, extraVolumes and
extraVolumeMounts, which are appended.
(dict root name)
*/}}
{{- define "custos.serviceConfig" -}}
{{- $own := index .root.Values.services .name | default dict -}}
{{- $cfg := deepCopy .root.Values.serviceDefaults -}}
{{- range $key, $value := $own -}}
{{- if has $key (list "env" "secretEnv" "autoscaling") -}}
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

{{/*
Name of a service's headless gRPC Service: <prefix>-<service>-grpc, the prefix shortened so that
the name fits in 63 characters. (dict root name)
*/}}
{{- define "custos.grpcHeadlessName" -}}
{{- $suffix := printf "-%s-grpc" .name -}}
{{- printf "%s%s" (include "custos.fullname" .root | trunc (sub 63 (len $suffix) | int) | trimSuffix "-") $suffix -}}
{{- end -}}

{{/*
The value of <NAME>_ADDR: with grpc.headlessServices dns:///<headless>.<namespace>.svc.<domain>:<port>
(the client resolves every pod and balances round robin), else <service>:<port>. (dict root name)
*/}}
{{- define "custos.grpcAddress" -}}
{{- $peer := index .root.Values.services .name -}}
{{- if not $peer -}}
{{- fail (printf "unknown service %q in peers or allowedCallers" .name) -}}
{{- end -}}
{{- if .root.Values.grpc.headlessServices -}}
{{- printf "dns:///%s.%s.svc.%s:%d" (include "custos.grpcHeadlessName" .) .root.Release.Namespace .root.Values.clusterDomain ($peer.grpcPort | int) -}}
{{- else -}}
{{- printf "%s:%d" (include "custos.componentName" .) ($peer.grpcPort | int) -}}
{{- end -}}
{{- end -}}

{{/* Whether a service uses NATS: every service with a database (its outbox and consumers). */}}
{{- define "custos.usesNats" -}}
{{- include "custos.hasDatabase" . -}}
{{- end -}}

{{/*
Whether a service uses Redis: the gateway's rate limits; identity mirrors token revocations there;
the services that verify tokens read them. (dict root name) → "true" or ""
*/}}
{{- define "custos.usesRedis" -}}
{{- if has .name (list "gateway" "identity" "vault-crypto" "policy" "signer" "approvals" "billing" "audit" "webhook-dispatcher") }}true{{ end -}}
{{- end -}}

{{/* Name of the Secret the chart creates for shared values given inline (keys, SMTP URL, ...). */}}
{{- define "custos.managedSecretName" -}}
{{- printf "%s-env" (include "custos.fullname" .) -}}
{{- end -}}

{{/* Name of the Secret the chart creates for one service's own inline credentials. (dict root name) */}}
{{- define "custos.credentialsSecretName" -}}
{{- printf "%s-credentials" (include "custos.componentName" .) -}}
{{- end -}}

{{/*
Refuses values that cannot work, with a message naming what to set: values removed in this
version, the development-only local KMS without kms.allowLocal. Renders nothing.
*/}}
{{- define "custos.validate" -}}
{{- range $old := list "url" "existingSecret" "existingSecretKey" -}}
{{- if hasKey $.Values.postgres $old -}}
{{- fail (printf "postgres.%s was removed: services no longer share the owner's database URL. Give the schema owner's URL to the migration Job as postgres.migrationUrl or postgres.migrationExistingSecret(+Key), and each service its own role and credentials in postgres.serviceCredentials.<service> (docs/deployment.md, \"Database roles\")" $old) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.migrations.enabled (not .Values.postgres.migrationExistingSecret) (not .Values.postgres.migrationUrl) -}}
{{- fail "postgres: the migration Job needs the schema owner's URL: set postgres.migrationExistingSecret (recommended) or postgres.migrationUrl" -}}
{{- end -}}
{{- range $old := list "url" "existingSecret" "existingSecretKey" -}}
{{- if hasKey $.Values.redis $old -}}
{{- fail (printf "redis.%s was removed: the services no longer share one Redis URL and password. Each signs in as its own ACL user: give each service redis.users.<service>.existingSecret (a Secret with its REDIS_URL, recommended) or redis.users.<service>.password with redis.host, redis.port and redis.db, and give your Redis the users of the ConfigMap <release>-redis-acl (docs/deployment.md, \"Redis\")" $old) -}}
{{- end -}}
{{- end -}}
{{- if .Values.redis.auth.enabled -}}
{{- $redisUsers := dict -}}
{{- range $name, $_ := .Values.services -}}
{{- if include "custos.usesRedis" (dict "root" $ "name" $name) -}}
{{- $user := (index $.Values.redis.users $name).user -}}
{{- if hasKey $redisUsers $user -}}
{{- fail (printf "redis.users: %s and %s are both the Redis user %s; each service needs a user of its own, or one could do what the other may" (index $redisUsers $user) $name $user) -}}
{{- end -}}
{{- $_ := set $redisUsers $user $name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.redis.sentinel.enabled (not .Values.redis.sentinel.hosts) -}}
{{- fail "redis.sentinel.enabled: list the sentinels in redis.sentinel.hosts (host:port, Sentinel's port is 26379)" -}}
{{- end -}}
{{- if not .Values.http.allowBroadTrustedProxies -}}
{{- $net := .Values.networkPolicy.internet -}}
{{- $clusterNets := concat ($net.podCidrs | default list) ($net.serviceCidrs | default list) ($net.nodeCidrs | default list) -}}
{{- range .Values.http.trustedProxies | default list -}}
{{- $entry := lower . -}}
{{- $addr := splitList "/" $entry | first -}}
{{- $bits := ternary (splitList "/" $entry | last | int) (ternary 128 32 (contains ":" $entry)) (contains "/" $entry) -}}
{{- $min := ternary 64 20 (contains ":" $addr) -}}
{{- if lt $bits $min -}}
{{- fail (printf "http.trustedProxies: %s is wider than /%d: every pod in it could set X-Forwarded-For and choose the client address the gateway sees (rate limits, IP rules, audit). List only the ingress controller's pods, e.g. a dedicated IP pool (docs/deployment.md, \"Trusted proxies\"), or set http.allowBroadTrustedProxies=true if nothing else can hold those addresses" . $min) -}}
{{- end -}}
{{- if contains ":" $addr -}}
{{- /* IPv4-mapped and -compatible IPv6 (::ffff:a.b.c.d, ::a.b.c.d, 0:0:…) would trust IPv4 peers under an IPv6 spelling. */ -}}
{{- if or (hasPrefix "::" $addr) (regexMatch "^0+:" $addr) (contains "." $addr) -}}
{{- fail (printf "http.trustedProxies: %s is an IPv4-mapped or zero-prefixed IPv6 range, which would trust IPv4 peers: list the ingress controller's IPv4 pool as IPv4" .) -}}
{{- end -}}
{{- end -}}
{{- range $cluster := $clusterNets -}}
{{- if include "custos.cidrContains" (dict "outer" $entry "inner" (lower $cluster)) -}}
{{- fail (printf "http.trustedProxies: %s contains %s, a whole pod, Service or node network of networkPolicy.internet: every pod there could choose its client address. List the ingress controller's own pool only (docs/deployment.md, \"Trusted proxies\")" $entry $cluster) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $registry := .Values.image.registry | default "" | trimSuffix "/" -}}
{{- if or (eq $registry "registry.example.com") (hasPrefix "registry.example.com/" $registry) -}}
{{- range $name, $svc := .Values.services -}}
{{- $img := $svc.image | default dict -}}
{{- if not (or $img.reference $img.repository) -}}
{{- fail (printf "image.registry: %s is a placeholder, nothing is published there (there is no public registry of Custos images). Build the images and push them to your registry (docker buildx bake --push, docs/images.md), then set image.registry to it (or image.registry='' for images loaded into the cluster)" $registry) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.kms.provider "local") (not .Values.kms.allowLocal) -}}
{{- fail "kms: provider \"local\" keeps the master key of every stored secret in a Kubernetes Secret and is for development only. For a throwaway evaluation install set kms.allowLocal=true; for anything you keep, set kms.provider to aws-kms or pkcs11 (docs/kms.md)" -}}
{{- end -}}
{{- end -}}

{{/*
Data of the chart-managed shared Secret as YAML (key: base64 value); empty when every value uses
an existingSecret. Also fails early when a required connection or key is configured neither way.
*/}}
{{- define "custos.managedSecretData" -}}
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
{{- /* The audit checkpoint key is optional: without it no checkpoints are signed (docs/security.md). */ -}}
{{- if and (not .Values.audit.checkpointExistingSecret) .Values.audit.checkpointSigningKey }}
audit-checkpoint-signing-key: {{ .Values.audit.checkpointSigningKey | b64enc | quote }}
{{- end -}}
{{- $sentinel := .Values.redis.sentinel | default dict -}}
{{- if and $sentinel.enabled (not $sentinel.existingSecret) $sentinel.password }}
redis-sentinel-password: {{ $sentinel.password | b64enc | quote }}
{{- end -}}
{{- /* signer's chain endpoints: a provider URL often embeds its API key, so they live in a Secret. */ -}}
{{- if and (not .Values.signer.chainRpcUrlsExistingSecret) .Values.signer.chainRpcUrls }}
chain-rpc-urls: {{ .Values.signer.chainRpcUrls | b64enc | quote }}
{{- end -}}
{{- /* webhook-dispatcher cannot start without the key that seals webhook signing secrets. */ -}}
{{- if not .Values.webhooks.existingSecret -}}
{{- if .Values.webhooks.secretKey }}
webhook-secret-key: {{ .Values.webhooks.secretKey | b64enc | quote }}
{{- else if not (hasKey ((include "custos.serviceConfig" (dict "root" . "name" "webhook-dispatcher") | fromYaml).secretEnv | default dict) "WEBHOOK_SECRET_KEY") -}}
{{- fail "webhooks: the webhook-dispatcher service needs WEBHOOK_SECRET_KEY: set webhooks.existingSecret (recommended) or webhooks.secretKey to base64 of 32 random bytes (openssl rand -base64 32)" -}}
{{- end -}}
{{- end -}}
{{- /* identity cannot start without these three, so unlike the local KMS key they are required. */ -}}
{{- $identitySecretEnv := (include "custos.serviceConfig" (dict "root" . "name" "identity") | fromYaml).secretEnv | default dict -}}
{{- if not .Values.tokens.existingSecret -}}
{{- if .Values.tokens.signingKek }}
token-signing-kek: {{ .Values.tokens.signingKek | b64enc | quote }}
{{- else if not (hasKey $identitySecretEnv "TOKEN_SIGNING_KEK") -}}
{{- fail "tokens: identity needs TOKEN_SIGNING_KEK: set tokens.existingSecret (recommended) or tokens.signingKek to base64 of 32 random bytes (openssl rand -base64 32)" -}}
{{- end -}}
{{- end -}}
{{- if not .Values.mfa.existingSecret -}}
{{- if .Values.mfa.secretKey }}
mfa-secret-key: {{ .Values.mfa.secretKey | b64enc | quote }}
{{- else if not (hasKey $identitySecretEnv "MFA_SECRET_KEY") -}}
{{- fail "mfa: identity needs MFA_SECRET_KEY, the key that seals TOTP secrets (separate from the token-signing KEK): set mfa.existingSecret (recommended) or mfa.secretKey to base64 of 32 random bytes (openssl rand -base64 32)" -}}
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
secretKeyRef (name, key) of a shared value's Secret as YAML; empty if unset. (dict root dep)
  kms → LOCAL_KMS_MASTER_KEY, tokens → TOKEN_SIGNING_KEK, mfa → MFA_SECRET_KEY,
  mail → SMTP_URL, audit → AUDIT_HMAC_KEY, webhooks → WEBHOOK_SECRET_KEY.
existingSecret wins; else the value given inline, kept in the chart-managed Secret.
*/}}
{{- define "custos.dependencySecretRef" -}}
{{- $dep := index .root.Values .dep -}}
{{- $inlineValue := index (dict "kms" "localMasterKey" "tokens" "signingKek" "mfa" "secretKey" "mail" "smtpUrl" "audit" "hmacKey" "webhooks" "secretKey") .dep -}}
{{- $managedKey := index (dict "kms" "local-kms-master-key" "tokens" "token-signing-kek" "mfa" "mfa-secret-key" "mail" "smtp-url" "audit" "audit-hmac-key" "webhooks" "webhook-secret-key") .dep -}}
{{- if $dep.existingSecret -}}
name: {{ $dep.existingSecret }}
key: {{ $dep.existingSecretKey }}
{{- else if index $dep $inlineValue -}}
name: {{ include "custos.managedSecretName" .root }}
key: {{ $managedKey }}
{{- end -}}
{{- end -}}

{{/*
A service's DATABASE_URL derived for a demo install: postgres.migrationUrl's scheme, host, port,
database and parameters with the service's role and inline password as the user. (dict root name)
*/}}
{{- define "custos.derivedDatabaseUrl" -}}
{{- $c := index .root.Values.postgres.serviceCredentials .name -}}
{{- $owner := urlParse .root.Values.postgres.migrationUrl -}}
{{- $userinfo := $c.role -}}
{{- if $c.password -}}
{{- $userinfo = printf "%s:%s" $c.role $c.password -}}
{{- end -}}
{{- urlJoin (dict "scheme" $owner.scheme "host" $owner.host "path" $owner.path "query" $owner.query "userinfo" $userinfo) -}}
{{- end -}}

{{/*
Data of the chart-managed Secret <prefix>-<service>-credentials as YAML: the service's own
DATABASE_URL (derived, unless an existingSecret or a services.<name> override gives it), NATS
password (inline) and REDIS_URL (built from redis.host/port/db and its own user's inline password).
Empty when everything comes from existing Secrets. Fails when a credential the service needs is
configured no way, or when the derived URL would have no password (a passwordless LOGIN role)
without postgres.allowPasswordlessRoles. (dict root name)
*/}}
{{- define "custos.serviceSecretData" -}}
{{- $root := .root -}}
{{- $cfg := include "custos.serviceConfig" . | fromYaml -}}
{{- $own := merge (deepCopy ($cfg.secretEnv | default dict)) ($cfg.env | default dict) -}}
{{- if include "custos.hasDatabase" . -}}
{{- $c := index $root.Values.postgres.serviceCredentials .name -}}
{{- if and (not $c.existingSecret) (not (hasKey $own "DATABASE_URL")) -}}
{{- if or $root.Values.postgres.migrationExistingSecret (not $root.Values.postgres.migrationUrl) -}}
{{- fail (printf "postgres.serviceCredentials.%s: set existingSecret, a Secret holding the service's own DATABASE_URL (connecting as %s); the chart derives one only from an inline postgres.migrationUrl (demo installs)" .name $c.role) -}}
{{- end -}}
{{- if and (not $c.password) (not $root.Values.postgres.allowPasswordlessRoles) -}}
{{- fail (printf "postgres.serviceCredentials.%s: no existingSecret and an empty password would make %s a LOGIN role without a password, which signs in only under trust authentication, where separate roles protect nothing. Set postgres.serviceCredentials.%s.existingSecret (recommended) or .password, or postgres.allowPasswordlessRoles=true on a development cluster with trust authentication" .name $c.role .name) -}}
{{- end }}
database-url: {{ include "custos.derivedDatabaseUrl" . | b64enc | quote }}
{{- end -}}
{{- end -}}
{{- if and (include "custos.usesNats" .) $root.Values.nats.auth.enabled -}}
{{- $n := index $root.Values.nats.users .name -}}
{{- if not $n.existingSecret -}}
{{- if $n.password }}
nats-password: {{ $n.password | b64enc | quote }}
{{- else if not (hasKey $own "NATS_PASSWORD") -}}
{{- fail (printf "nats: %s needs its NATS password: set nats.users.%s.existingSecret (recommended) or nats.users.%s.password (or nats.auth.enabled=false for a NATS server without authorization, development only)" .name .name .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (include "custos.usesRedis" .) $root.Values.redis.auth.enabled -}}
{{- $r := index $root.Values.redis.users .name -}}
{{- if and (not $r.existingSecret) (not (hasKey $own "REDIS_URL")) -}}
{{- if $r.password }}
redis-url: {{ include "custos.redisUrl" . | b64enc | quote }}
{{- else -}}
{{- fail (printf "redis: %s needs its own Redis user's credentials: set redis.users.%s.existingSecret (a Secret with its REDIS_URL, recommended) or redis.users.%s.password (or redis.auth.enabled=false for a Redis without authentication, development only)" .name .name .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* secretKeyRef of a service's own DATABASE_URL as YAML. (dict root name) */}}
{{- define "custos.databaseUrlRef" -}}
{{- $c := index .root.Values.postgres.serviceCredentials .name -}}
{{- if $c.existingSecret -}}
name: {{ $c.existingSecret }}
key: {{ $c.existingSecretKey }}
{{- else -}}
name: {{ include "custos.credentialsSecretName" . }}
key: database-url
{{- end -}}
{{- end -}}

{{/*
A service's REDIS_URL built from the values: redis[s]://<user>:<password>@<host>:<port>/<db> with
its own user's inline password, or without credentials when redis.auth.enabled is false. rediss://
with redis.tls.enabled or a redis.tls.caSecret. The schema keeps user and password to characters a
URL carries as they are. (dict root name)
*/}}
{{- define "custos.redisUrl" -}}
{{- $r := .root.Values.redis -}}
{{- $scheme := ternary "rediss" "redis" (or $r.tls.enabled (ne ($r.tls.caSecret | default "") "")) -}}
{{- $login := "" -}}
{{- if $r.auth.enabled -}}
{{- $u := index $r.users .name -}}
{{- $login = printf "%s:%s@" $u.user $u.password -}}
{{- end -}}
{{- printf "%s://%s%s:%d/%d" $scheme $login $r.host ($r.port | int) ($r.db | int) -}}
{{- end -}}

{{/* secretKeyRef of a service's own REDIS_URL as YAML. (dict root name) */}}
{{- define "custos.redisUrlRef" -}}
{{- $u := index .root.Values.redis.users .name -}}
{{- if $u.existingSecret -}}
name: {{ $u.existingSecret }}
key: {{ $u.existingSecretKey }}
{{- else -}}
name: {{ include "custos.credentialsSecretName" . }}
key: redis-url
{{- end -}}
{{- end -}}

{{/* secretKeyRef of a service's NATS_PASSWORD as YAML. (dict root name) */}}
{{- define "custos.natsPasswordRef" -}}
{{- $n := index .root.Values.nats.users .name -}}
{{- if $n.existingSecret -}}
name: {{ $n.existingSecret }}
key: {{ $n.existingSecretKey }}
{{- else -}}
name: {{ include "custos.credentialsSecretName" . }}
key: nats-password
{{- end -}}
{{- end -}}

{{/*
Data of the migration Job's hook Secret <prefix>-env-migrate as YAML: the owner's URL given inline,
and with postgres.manageRoles the inline passwords of the service roles. The Job runs before the
release's own Secrets exist (pre-install), hence this copy.
*/}}
{{- define "custos.migrationSecretData" -}}
{{- if not .Values.postgres.migrationExistingSecret -}}
{{- if not .Values.postgres.migrationUrl -}}
{{- fail "postgres: the migration Job needs the schema owner's URL: set postgres.migrationExistingSecret (recommended) or postgres.migrationUrl" -}}
{{- end }}
database-url: {{ .Values.postgres.migrationUrl | b64enc | quote }}
{{- end -}}
{{- if .Values.postgres.manageRoles -}}
{{- range $name, $c := .Values.postgres.serviceCredentials -}}
{{- if and (not $c.existingSecret) $c.password }}
{{ $name }}-database-password: {{ $c.password | b64enc | quote }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* secretKeyRef of the owner's URL for the migration Job, as YAML. */}}
{{- define "custos.migrationUrlRef" -}}
{{- if .Values.postgres.migrationExistingSecret -}}
name: {{ .Values.postgres.migrationExistingSecret }}
key: {{ .Values.postgres.migrationExistingSecretKey }}
{{- else -}}
name: {{ include "custos.managedSecretName" . }}-migrate
key: database-url
{{- end -}}
{{- end -}}

{{/*
secretKeyRef of the password the migration Job gives a service's role (DATABASE_SERVICE_PASSWORD),
as YAML; empty when postgres.manageRoles is false or the service has no password. (dict root name)
*/}}
{{- define "custos.migrationPasswordRef" -}}
{{- if .root.Values.postgres.manageRoles -}}
{{- $c := index .root.Values.postgres.serviceCredentials .name -}}
{{- if $c.existingSecret -}}
name: {{ $c.existingSecret }}
key: {{ $c.existingSecretPasswordKey }}
{{- else if $c.password -}}
name: {{ include "custos.managedSecretName" .root }}-migrate
key: {{ .name }}-database-password
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Where a pod mounts its mesh certificate Secret (tls.crt, tls.key, ca.crt). */}}
{{- define "custos.meshTlsDir" -}}/etc/custos/tls{{- end -}}

{{/*
Name of the Secret with a service's mesh certificate: mtls.existingSecrets.<name>, else the one
cert-manager writes for the chart's Certificate. (dict root name)
*/}}
{{- define "custos.meshTlsSecretName" -}}
{{- $existing := index (.root.Values.mtls.existingSecrets | default dict) .name | default "" -}}
{{- if $existing -}}
{{- $existing -}}
{{- else if .root.Values.mtls.certManager.enabled -}}
{{- printf "%s-tls" (include "custos.componentName" .) -}}
{{- else -}}
{{- fail (printf "mtls: %s has no certificate: set mtls.existingSecrets.%s (a Secret with tls.crt, tls.key and ca.crt) or mtls.certManager.enabled=true" .name .name) -}}
{{- end -}}
{{- end -}}

{{/*
A CIDR or bare address as a CIDR: a bare IPv4 address becomes <address>/32, a bare IPv6 address
<address>/128 (the services read a bare address as one host; an ipBlock needs the prefix). (string)
*/}}
{{- define "custos.cidr" -}}
{{- if contains "/" . -}}
{{- . -}}
{{- else if contains ":" . -}}
{{- printf "%s/128" . -}}
{{- else -}}
{{- printf "%s/32" . -}}
{{- end -}}
{{- end -}}

{{/* webhooks.allowedCidrs, each as a CIDR (custos.cidr), as a list. (root) */}}
{{- define "custos.webhookAllowedCidrs" -}}
{{- $cidrs := list -}}
{{- range .Values.webhooks.allowedCidrs | default list -}}
{{- $cidrs = append $cidrs (include "custos.cidr" .) -}}
{{- end -}}
{{- toJson $cidrs -}}
{{- end -}}

{{/*
The NetworkPolicyPeer entries of "the internet" as YAML: 0.0.0.0/0 and ::/0, each without the
cluster's pod and Service networks, networkPolicy.internet.privateCidrs and nodeCidrs, and always
the cloud metadata and host addresses: 169.254.169.254 (AWS, GCP, Azure IMDS), 100.100.100.200
(Alibaba), 192.0.0.192 (Oracle), fd00:ec2::254 (AWS IPv6) and 168.63.129.16 (Azure's wireserver,
a public address that no private range covers). (root)
*/}}
{{- define "custos.internetPeers" -}}
{{- $net := .Values.networkPolicy.internet -}}
{{- $metadata := list "169.254.169.254/32" "100.100.100.200/32" "192.0.0.192/32" "168.63.129.16/32" "fd00:ec2::254/128" -}}
{{- $blocked := concat ($net.podCidrs | default list) ($net.serviceCidrs | default list) ($net.privateCidrs | default list) ($net.nodeCidrs | default list) $metadata | uniq -}}
{{- $v4 := list -}}
{{- $v6 := list -}}
{{- range $blocked -}}
{{- if contains ":" . -}}
{{- $v6 = append $v6 . -}}
{{- else -}}
{{- $v4 = append $v4 . -}}
{{- end -}}
{{- end -}}
- ipBlock:
    cidr: 0.0.0.0/0
    except:
      {{- toYaml $v4 | nindent 6 }}
- ipBlock:
    cidr: ::/0
    except:
      {{- toYaml $v6 | nindent 6 }}
{{- end -}}

{{/*
Where a dependency is (postgres, nats, redis) as a YAML list of NetworkPolicyPeer entries:
networkPolicy.<dep>.to, plus its pods' selectors when it runs in the cluster. Fails when that
leaves nothing: an egress rule without `to` would admit every address. (dict root dep)
*/}}
{{- define "custos.dependencyPeers" -}}
{{- $d := index .root.Values.networkPolicy .dep -}}
{{- $peers := $d.to | default list -}}
{{- $in := $d.inCluster | default dict -}}
{{- if $in.enabled -}}
{{- if not $in.podSelector -}}
{{- fail (printf "networkPolicy.%s.inCluster.podSelector: name the labels of the %s pods" .dep .dep) -}}
{{- end -}}
{{- $peer := dict "podSelector" $in.podSelector -}}
{{- if and $in.namespace (ne $in.namespace .root.Release.Namespace) -}}
{{- $_ := set $peer "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" $in.namespace)) -}}
{{- end -}}
{{- $peers = append $peers $peer -}}
{{- end -}}
{{- if not $peers -}}
{{- fail (printf "networkPolicy.%s: set `to` (where %s is: an ipBlock, or selectors) or inCluster; an egress rule without destinations would allow every address" .dep .dep) -}}
{{- end -}}
{{- toYaml $peers -}}
{{- end -}}

{{/* An egress rule to `peers` (YAML list) on `ports` (list) with a comment line. (dict comment peers ports) */}}
{{- define "custos.egressRule" -}}
# {{ .comment }}
- to:
    {{- .peers | nindent 4 }}
  {{- with .ports }}
  ports:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}

{{/* An optional integer value as a decimal string; "" when blank (the service's default applies). */}}
{{- define "custos.optionalInt" -}}
{{- if not (or (kindIs "invalid" .) (kindIs "string" .)) -}}
{{- . | int | toString -}}
{{- end -}}
{{- end -}}

{{/*
TOKEN_ISSUER: tokens.issuer, else the Ingress's URL (https://<host> with TLS, http://<host>
without), else https://<the HTTPRoute's first host name>, else empty (the service's default, only right for a local setup).
*/}}
{{- define "custos.tokenIssuer" -}}
{{- if .Values.tokens.issuer -}}
{{- .Values.tokens.issuer -}}
{{- else if and .Values.ingress.enabled .Values.ingress.host -}}
{{- if contains "*" .Values.ingress.host -}}
{{- fail (printf "tokens.issuer: the Ingress host %s is a wildcard and cannot be the token issuer or the start of e-mail links: set tokens.issuer to the public base URL (e.g. https://custos.example.com)" .Values.ingress.host) -}}
{{- end -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host -}}
{{- else if and .Values.httpRoute.enabled .Values.httpRoute.hostnames -}}
{{- /* TLS ends at the Gateway. The first host name that is not a wildcard. */ -}}
{{- $hosts := list -}}
{{- range .Values.httpRoute.hostnames -}}
{{- if not (contains "*" .) -}}{{- $hosts = append $hosts . -}}{{- end -}}
{{- end -}}
{{- if not $hosts -}}
{{- fail "tokens.issuer: every httpRoute host name is a wildcard, which cannot be the token issuer or the start of e-mail links: set tokens.issuer to the public base URL (e.g. https://custos.example.com)" -}}
{{- end -}}
{{- printf "https://%s" (first $hosts) -}}
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
  "GRPC_MAX_CONNECTION_AGE_MS" (include "custos.optionalInt" $root.Values.grpc.maxConnectionAgeMs)
  "GRPC_TLS_CA_FILE" (printf "%s/ca.crt" (include "custos.meshTlsDir" .))
  "GRPC_TLS_CERT_FILE" (printf "%s/tls.crt" (include "custos.meshTlsDir" .))
  "GRPC_TLS_KEY_FILE" (printf "%s/tls.key" (include "custos.meshTlsDir" .))
-}}
{{- $secret := dict -}}
{{- /* Token trust: every service verifies access tokens (identity issues them) with the same
issuer and audience from its own configuration, never from a peer's answer. */ -}}
{{- $_ := set $plain "TOKEN_ISSUER" (include "custos.tokenIssuer" $root) -}}
{{- $_ := set $plain "TOKEN_LEGACY_ISSUERS" (join "," ($root.Values.tokens.legacyIssuers | default list)) -}}
{{- $_ := set $plain "TOKEN_AUDIENCE" $root.Values.tokens.audience -}}
{{- range $peer := $cfg.peers | default list -}}
{{- $_ := set $plain (printf "%s_ADDR" ($peer | upper | replace "-" "_")) (include "custos.grpcAddress" (dict "root" $root "name" $peer)) -}}
{{- end -}}
{{- if include "custos.hasDatabase" . -}}
{{- /* The service's own role; never the owner's URL, which only the migration Job gets. */ -}}
{{- $_ := set $plain "DATABASE_POOL_MAX" (($cfg.databasePoolMax | default $root.Values.postgres.poolMax) | int | toString) -}}
{{- $_ := set $secret "DATABASE_URL" (include "custos.databaseUrlRef" .  | fromYaml) -}}
{{- end -}}
{{- if include "custos.usesNats" . -}}
{{- $_ := set $plain "NATS_URL" $root.Values.nats.url -}}
{{- $_ := set $plain "NATS_STREAM" $root.Values.nats.stream -}}
{{- $_ := set $plain "NATS_SUBJECT_PREFIX" $root.Values.nats.subjectPrefix -}}
{{- $_ := set $plain "NATS_STREAM_MAX_AGE_HOURS" (toString (int $root.Values.nats.streamMaxAgeHours)) -}}
{{- $_ := set $plain "NATS_STREAM_REPLICAS" (toString (int ($root.Values.nats.streamReplicas | default 1))) -}}
{{- if ne (int ($root.Values.nats.streamMaxBytes | default -1)) -1 -}}
{{- $_ := set $plain "NATS_STREAM_MAX_BYTES" (toString (int64 $root.Values.nats.streamMaxBytes)) -}}
{{- end -}}
{{- $_ := set $plain "NATS_BATCH_AUDIT_RECORDS" (ternary "true" "false" (ne $root.Values.nats.batchAuditRecords false)) -}}
{{- if $root.Values.nats.auth.enabled -}}
{{- $_ := set $plain "NATS_USER" (index $root.Values.nats.users .name).user -}}
{{- $_ := set $secret "NATS_PASSWORD" (include "custos.natsPasswordRef" . | fromYaml) -}}
{{- end -}}
{{- if $root.Values.nats.tls.caSecret -}}
{{- $_ := set $plain "NATS_TLS_CA_FILE" "/etc/custos/nats-ca/ca.crt" -}}
{{- end -}}
{{- end -}}
{{- if eq .name "gateway" -}}
{{- $_ := set $plain "PORT" ($root.Values.http.port | int | toString) -}}
{{- $_ := set $plain "HOST" "0.0.0.0" -}}
{{- $_ := set $plain "RATE_LIMIT_RPS" ($root.Values.http.rateLimit.rps | int | toString) -}}
{{- $_ := set $plain "RATE_LIMIT_BURST" ($root.Values.http.rateLimit.burst | int | toString) -}}
{{- $rl := $root.Values.http.rateLimit -}}
{{- $_ := set $plain "AUTH_RATE_LIMIT_PER_MINUTE" (include "custos.optionalInt" $rl.authPerMinute) -}}
{{- $_ := set $plain "AUTH_RATE_LIMIT_BURST" (include "custos.optionalInt" $rl.authBurst) -}}
{{- $ex := $rl.exchange | default dict -}}
{{- $_ := set $plain "EXCHANGE_RATE_LIMIT_PER_KEY_PER_MINUTE" (include "custos.optionalInt" $ex.perKeyPerMinute) -}}
{{- $_ := set $plain "EXCHANGE_RATE_LIMIT_PER_KEY_BURST" (include "custos.optionalInt" $ex.perKeyBurst) -}}
{{- $_ := set $plain "EXCHANGE_RATE_LIMIT_PER_IP_PER_MINUTE" (include "custos.optionalInt" $ex.perIpPerMinute) -}}
{{- $_ := set $plain "EXCHANGE_RATE_LIMIT_PER_IP_BURST" (include "custos.optionalInt" $ex.perIpBurst) -}}
{{- $_ := set $plain "TRUSTED_PROXIES" (join "," ($root.Values.http.trustedProxies | default list)) -}}
{{- end -}}
{{- if include "custos.usesRedis" . -}}
{{- /* Its own Redis user's URL, from its own Secret; without authentication (development) a plain value. */ -}}
{{- if $root.Values.redis.auth.enabled -}}
{{- $_ := set $secret "REDIS_URL" (include "custos.redisUrlRef" . | fromYaml) -}}
{{- else -}}
{{- $_ := set $plain "REDIS_URL" (include "custos.redisUrl" .) -}}
{{- end -}}
{{- if $root.Values.redis.tls.caSecret -}}
{{- $_ := set $plain "REDIS_TLS_CA_FILE" "/etc/custos/redis-ca/ca.crt" -}}
{{- end -}}
{{- $sentinel := $root.Values.redis.sentinel | default dict -}}
{{- if $sentinel.enabled -}}
{{- $_ := set $plain "REDIS_SENTINELS" (join "," $sentinel.hosts) -}}
{{- $_ := set $plain "REDIS_SENTINEL_MASTER" $sentinel.masterName -}}
{{- $_ := set $plain "REDIS_SENTINEL_USERNAME" ($sentinel.username | default "") -}}
{{- if $sentinel.existingSecret -}}
{{- $_ := set $secret "REDIS_SENTINEL_PASSWORD" (dict "name" $sentinel.existingSecret "key" $sentinel.existingSecretKey) -}}
{{- else if $sentinel.password -}}
{{- $_ := set $secret "REDIS_SENTINEL_PASSWORD" (dict "name" (include "custos.managedSecretName" $root) "key" "redis-sentinel-password") -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if eq .name "audit" -}}
{{- $auditKeyRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "audit") | fromYaml -}}
{{- if $auditKeyRef -}}
{{- $_ := set $secret "AUDIT_HMAC_KEY" $auditKeyRef -}}
{{- end -}}
{{- if $root.Values.audit.checkpointExistingSecret -}}
{{- /* optional: an install whose Secret predates the key keeps its audit service running, unsigned. */ -}}
{{- $_ := set $secret "AUDIT_CHECKPOINT_SIGNING_KEY" (dict "name" $root.Values.audit.checkpointExistingSecret "key" $root.Values.audit.checkpointExistingSecretKey "optional" true) -}}
{{- else if $root.Values.audit.checkpointSigningKey -}}
{{- $_ := set $secret "AUDIT_CHECKPOINT_SIGNING_KEY" (dict "name" (include "custos.managedSecretName" $root) "key" "audit-checkpoint-signing-key") -}}
{{- end -}}
{{- end -}}
{{- if eq .name "webhook-dispatcher" -}}
{{- $_ := set $plain "WEBHOOK_ALLOWED_CIDRS" (join "," (include "custos.webhookAllowedCidrs" $root | fromJsonArray)) -}}
{{- $_ := set $plain "WEBHOOK_ALLOW_HTTP" (toString ($root.Values.webhooks.allowHttp | default false)) -}}
{{- $webhookKeyRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "webhooks") | fromYaml -}}
{{- if $webhookKeyRef -}}
{{- $_ := set $secret "WEBHOOK_SECRET_KEY" $webhookKeyRef -}}
{{- end -}}
{{- end -}}
{{- if eq .name "billing" -}}
{{- $_ := set $plain "BILLING_DEFAULT_PLAN" $root.Values.billing.defaultPlan -}}
{{- end -}}
{{- if eq .name "approvals" -}}
{{- $ap := $root.Values.approvals | default dict -}}
{{- $_ := set $plain "APPROVAL_TTL_SECONDS" (include "custos.optionalInt" $ap.ttlSeconds) -}}
{{- $_ := set $plain "APPROVAL_SWEEP_INTERVAL_MS" (include "custos.optionalInt" $ap.sweepIntervalMs) -}}
{{- end -}}
{{- if eq .name "signer" -}}
{{- if $root.Values.signer.chainRpcUrlsExistingSecret -}}
{{- $_ := set $secret "CHAIN_RPC_URLS" (dict "name" $root.Values.signer.chainRpcUrlsExistingSecret "key" $root.Values.signer.chainRpcUrlsExistingSecretKey) -}}
{{- else if $root.Values.signer.chainRpcUrls -}}
{{- $_ := set $secret "CHAIN_RPC_URLS" (dict "name" (include "custos.managedSecretName" $root) "key" "chain-rpc-urls") -}}
{{- end -}}
{{- end -}}
{{- if eq .name "identity" -}}
{{- $issuer := include "custos.tokenIssuer" $root -}}
{{- $_ := set $plain "ACCESS_TOKEN_TTL_SECONDS" (include "custos.optionalInt" $root.Values.tokens.accessTokenTtlSeconds) -}}
{{- $_ := set $plain "REFRESH_TOKEN_TTL_SECONDS" (include "custos.optionalInt" $root.Values.tokens.refreshTokenTtlSeconds) -}}
{{- $_ := set $plain "REFRESH_TOKEN_FAMILY_TTL_SECONDS" (include "custos.optionalInt" $root.Values.tokens.refreshTokenFamilyTtlSeconds) -}}
{{- $_ := set $plain "SIGNUP_MODE" ($root.Values.auth.signupMode | default "") -}}
{{- $hash := $root.Values.auth.passwordHash | default dict -}}
{{- $_ := set $plain "ARGON2_MEMORY_KIB" (include "custos.optionalInt" $hash.memoryKib) -}}
{{- $_ := set $plain "ARGON2_TIME_COST" (include "custos.optionalInt" $hash.timeCost) -}}
{{- $_ := set $plain "ARGON2_PARALLELISM" (include "custos.optionalInt" $hash.parallelism) -}}
{{- /* Development only: identity refuses SMTP without TLS or with an unverified certificate without it. */ -}}
{{- if $root.Values.mail.allowInsecure -}}
{{- $_ := set $plain "SMTP_ALLOW_INSECURE" "true" -}}
{{- end -}}
{{- $_ := set $plain "SIGNING_KEY_ROTATION_DAYS" (include "custos.optionalInt" $root.Values.tokens.signingKeyRotationDays) -}}
{{- $_ := set $plain "EMAIL_VERIFICATION_REQUIRED" (toString $root.Values.auth.emailVerificationRequired) -}}
{{- $_ := set $plain "EMAIL_VERIFICATION_TTL_SECONDS" (include "custos.optionalInt" $root.Values.auth.emailVerificationTtlSeconds) -}}
{{- $lock := $root.Values.auth.loginLockout | default dict -}}
{{- $_ := set $plain "LOGIN_LOCKOUT_THRESHOLD" (include "custos.optionalInt" $lock.threshold) -}}
{{- $_ := set $plain "LOGIN_LOCKOUT_WINDOW_SECONDS" (include "custos.optionalInt" $lock.windowSeconds) -}}
{{- $_ := set $plain "LOGIN_LOCKOUT_SECONDS" (include "custos.optionalInt" $lock.lockSeconds) -}}
{{- $delay := $root.Values.auth.loginDelay | default dict -}}
{{- $_ := set $plain "LOGIN_DELAY_FREE_FAILURES" (include "custos.optionalInt" $delay.freeFailures) -}}
{{- $_ := set $plain "LOGIN_DELAY_BASE_MS" (include "custos.optionalInt" $delay.baseMs) -}}
{{- $_ := set $plain "LOGIN_DELAY_MAX_MS" (include "custos.optionalInt" $delay.maxMs) -}}
{{- $_ := set $plain "EXCHANGE_WRONG_SECRETS_PER_KEY_PER_MINUTE" (include "custos.optionalInt" $root.Values.auth.exchangeWrongSecretsPerKeyPerMinute) -}}
{{- $_ := set $plain "MAIL_FROM" $root.Values.mail.from -}}
{{- $_ := set $plain "PUBLIC_BASE_URL" ($root.Values.mail.publicBaseUrl | default $issuer) -}}
{{- $kekRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "tokens") | fromYaml -}}
{{- if $kekRef -}}
{{- $_ := set $secret "TOKEN_SIGNING_KEK" $kekRef -}}
{{- end -}}
{{- $mfaRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "mfa") | fromYaml -}}
{{- if $mfaRef -}}
{{- $_ := set $secret "MFA_SECRET_KEY" $mfaRef -}}
{{- end -}}
{{- $smtpRef := include "custos.dependencySecretRef" (dict "root" $root "dep" "mail") | fromYaml -}}
{{- if $smtpRef -}}
{{- $_ := set $secret "SMTP_URL" $smtpRef -}}
{{- end -}}
{{- end -}}
{{- if eq .name "vault-crypto" -}}
{{- $_ := set $plain "KMS_PROVIDER" $root.Values.kms.provider -}}
{{- /* Development only: the service refuses the local KMS without it. */ -}}
{{- if and (eq $root.Values.kms.provider "local") $root.Values.kms.allowLocal -}}
{{- $_ := set $plain "KMS_ALLOW_LOCAL" "true" -}}
{{- end -}}
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
      {{- if $ref.optional }}
      optional: true
      {{- end }}
{{- end }}
{{- with $cfg.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod-level security context shared by the services and the migration Job (podSecurityContext). */}}
{{- define "custos.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{/* Container-level security context shared by the services and the migration Job (containerSecurityContext). */}}
{{- define "custos.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{/* The ports of redis.sentinel.hosts (host:port, [v6]:port) as a YAML list of {port, protocol}; empty without sentinels. (root) */}}
{{- define "custos.sentinelPorts" -}}
{{- $ports := list -}}
{{- if .Values.redis.sentinel.enabled -}}
{{- range .Values.redis.sentinel.hosts -}}
{{- $port := regexFind "[0-9]+$" . | int -}}
{{- $ports = append $ports $port -}}
{{- end -}}
{{- range $port := $ports | uniq | sortAlpha }}
- port: {{ $port }}
  protocol: TCP
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Where a pod mounts the Postgres server's CA (postgres.tls.caSecret). */}}
{{- define "custos.postgresCaDir" -}}/etc/custos/postgres-ca{{- end -}}

{{/*
The Secrets of the operator's that a service's pods read, as a sorted, comma-separated list: every
secretKeyRef of its env, every envFrom secretRef, the CA Secrets it mounts and its extraVolumes'
Secrets; without the Secrets the chart renders (a checksum annotation rolls the pods for those) and
the mesh certificate Secret (re-read in place). (dict root name cfg)
*/}}
{{- define "custos.referencedExistingSecrets" -}}
{{- $root := .root -}}
{{- $ctx := dict "root" .root "name" .name -}}
{{- /* Only the Secrets the chart does render: an operator's Secret may carry the same name. */ -}}
{{- $skip := list (include "custos.meshTlsSecretName" $ctx) -}}
{{- if include "custos.managedSecretData" $root -}}
{{- $skip = append $skip (include "custos.managedSecretName" $root) -}}
{{- end -}}
{{- if include "custos.serviceSecretData" $ctx -}}
{{- $skip = append $skip (include "custos.credentialsSecretName" $ctx) -}}
{{- end -}}
{{- $names := list -}}
{{- range include "custos.env" . | fromYamlArray -}}
{{- with ((.valueFrom | default dict).secretKeyRef | default dict).name -}}
{{- $names = append $names . -}}
{{- end -}}
{{- end -}}
{{- range .cfg.envFrom | default list -}}
{{- with (.secretRef | default dict).name -}}
{{- $names = append $names . -}}
{{- end -}}
{{- end -}}
{{- if and (include "custos.hasDatabase" $ctx) $root.Values.postgres.tls.caSecret -}}
{{- $names = append $names $root.Values.postgres.tls.caSecret -}}
{{- end -}}
{{- if and (include "custos.usesNats" $ctx) $root.Values.nats.tls.caSecret -}}
{{- $names = append $names $root.Values.nats.tls.caSecret -}}
{{- end -}}
{{- if and (include "custos.usesRedis" $ctx) $root.Values.redis.tls.caSecret -}}
{{- $names = append $names $root.Values.redis.tls.caSecret -}}
{{- end -}}
{{- range .cfg.extraVolumes | default list -}}
{{- with (.secret | default dict).secretName -}}
{{- $names = append $names . -}}
{{- end -}}
{{- end -}}
{{- $kept := list -}}
{{- range $names | uniq | sortAlpha -}}
{{- if not (has . $skip) -}}
{{- $kept = append $kept . -}}
{{- end -}}
{{- end -}}
{{- join "," $kept -}}
{{- end -}}

{{/* An IPv4 address as an integer. (string a.b.c.d) */}}
{{- define "custos.ipv4Int" -}}
{{- $o := splitList "." . -}}
{{- add (mul (index $o 0 | int64) 16777216) (mul (index $o 1 | int64) 65536) (mul (index $o 2 | int64) 256) (index $o 3 | int64) -}}
{{- end -}}

{{/*
"true" when CIDR `outer` contains (or equals) CIDR `inner`. IPv4 by arithmetic; IPv6 only when the
two are equal as written (wider IPv6 entries are refused by prefix length first). (dict outer inner)
*/}}
{{- define "custos.cidrContains" -}}
{{- $o := include "custos.cidr" .outer -}}
{{- $i := include "custos.cidr" .inner -}}
{{- if or (contains ":" $o) (contains ":" $i) -}}
{{- if eq $o $i }}true{{ end -}}
{{- else -}}
{{- $ob := splitList "/" $o | last | int -}}
{{- $ib := splitList "/" $i | last | int -}}
{{- if le $ob $ib -}}
{{- $size := 1 -}}
{{- range until (sub 32 $ob | int) -}}{{- $size = mul $size 2 -}}{{- end -}}
{{- $oa := include "custos.ipv4Int" (splitList "/" $o | first) | int64 -}}
{{- $ia := include "custos.ipv4Int" (splitList "/" $i | first) | int64 -}}
{{- if eq (div $oa $size) (div $ia $size) }}true{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Name of a monitoring object: `base`, with the release namespace after the prefix when the object
lives in another namespace (two releases called "custos" in different namespaces may share one
monitoring namespace). (dict root base namespace)
*/}}
{{- define "custos.monitoringName" -}}
{{- if and .namespace (ne .namespace .root.Release.Namespace) -}}
{{- $prefix := include "custos.fullname" .root -}}
{{- printf "%s-%s%s" $prefix .root.Release.Namespace (trimPrefix $prefix .base) | trunc 253 | trimSuffix "-" -}}
{{- else -}}
{{- .base -}}
{{- end -}}
{{- end -}}

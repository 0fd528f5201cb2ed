{{/*
Names and labels.
*/}}
{{- define "tamp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tamp.fullname" -}}
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

{{- define "tamp.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tamp.labels" -}}
helm.sh/chart: {{ include "tamp.chart" . }}
{{ include "tamp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tamp
{{- end }}

{{- define "tamp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tamp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one service's objects; call with (dict "root" $ "name" "gateway"). */}}
{{- define "tamp.componentLabels" -}}
{{ include "tamp.labels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{- define "tamp.componentSelectorLabels" -}}
{{ include "tamp.selectorLabels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{/* Object name of one service: <fullname>-<service>. */}}
{{- define "tamp.componentName" -}}
{{- printf "%s-%s" (include "tamp.fullname" .root) .name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The operator's own ServiceAccount: the only pods that get an API token. */}}
{{- define "tamp.operatorServiceAccountName" -}}
{{- include "tamp.componentName" (dict "root" . "name" "operator") }}
{{- end }}

{{- define "tamp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tamp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tamp.secretName" -}}
{{- default (printf "%s-secrets" (include "tamp.fullname" .)) .Values.secrets.name }}
{{- end }}

{{/*
What each service is, fixed by its code (services/<name>/src/config.ts): the values key of its
settings, which connection variables its schema has, which credentials it reads, whether it is
a pipeline worker (scratch directory, KEDA stream consumer) and its Dockerfile.
*/}}
{{- define "tamp.components" -}}
gateway:
  values: gateway
  mongo: false
  s3: true
  secrets: [S3_ACCESS_KEY, S3_SECRET_KEY, ADMIN_TOKEN]
upload:
  values: upload
  mongo: true
  s3: true
  secrets: [MONGO_URL, S3_ACCESS_KEY, S3_SECRET_KEY]
job:
  values: job
  mongo: true
  s3: true
  secrets: [MONGO_URL, S3_ACCESS_KEY, S3_SECRET_KEY, JOB_CURSOR_SECRET]
billing:
  values: billing
  mongo: true
  s3: false
  secrets: [MONGO_URL, SECRETS_ENCRYPTION_KEY]
webhook:
  values: webhook
  mongo: true
  s3: false
  secrets: [MONGO_URL]
operator:
  values: operator
  mongo: false
  s3: false
  secrets: []
worker-image:
  values: workerImage
  mongo: false
  s3: true
  secrets: [S3_ACCESS_KEY, S3_SECRET_KEY]
  pipeline: image
worker-text:
  values: workerText
  mongo: false
  s3: true
  secrets: [S3_ACCESS_KEY, S3_SECRET_KEY]
  pipeline: text
worker-audio:
  values: workerAudio
  mongo: false
  s3: true
  secrets: [S3_ACCESS_KEY, S3_SECRET_KEY]
  pipeline: audio
{{- end }}

{{/* The enabled services as a dict name -> facts (+ "settings": their values block). */}}
{{- define "tamp.enabledComponents" -}}
{{- $out := dict }}
{{- range $name, $facts := (include "tamp.components" . | fromYaml) }}
{{- $settings := index $.Values $facts.values }}
{{- if $settings.enabled }}
{{- $_ := set $out $name $facts }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The image of one service: <repository>@<digest> when it has a digest (<service>.image.digest,
else image.digests.<service>), <repository>:<tag> otherwise. Call with (dict "root" $ "name" ..).
*/}}
{{- define "tamp.image" -}}
{{- $settings := index .root.Values (index (include "tamp.components" .root | fromYaml) .name).values }}
{{- $image := $settings.image | default dict }}
{{- $repository := $image.repository | default (printf "%s-%s" .root.Values.image.repository .name) }}
{{- $digest := $image.digest | default (index (.root.Values.image.digests | default dict) .name) | default "" }}
{{- if $digest }}
{{- printf "%s@%s" $repository $digest }}
{{- else }}
{{- $tag := $image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion }}
{{- printf "%s:%s" $repository $tag }}
{{- end }}
{{- end }}

{{/*
A Kubernetes quantity (2Gi, 1500M, 64Mi, 1073741824) in MiB, rounded up, for the checks below.
Call with (dict "quantity" q "path" "values.path.of.it").
*/}}
{{- define "tamp.mebibytes" -}}
{{- $quantity := toString .quantity | trim }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $quantity }}
{{- $unit := trimPrefix $number $quantity }}
{{- $bytes := dict "" 1.0 "k" 1000.0 "M" 1e6 "G" 1e9 "T" 1e12 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 }}
{{- if or (not $number) (not (hasKey $bytes $unit)) }}
{{- fail (printf "%s: %q is not a storage quantity this chart reads (e.g. 512Mi, 2Gi)" .path $quantity) }}
{{- end }}
{{- divf (mulf (float64 $number) (index $bytes $unit)) 1048576.0 | ceil | int }}
{{- end }}

{{/*
The extra EnvVar objects of one service as a YAML list: the global extraEnv, then the service's
own (replacing a global one of the same name). A variable the chart sets already (its plain
environment, its credentials) is refused, naming the values path. Call with
(dict "root" $ "name" "gateway" "managed" <list of the names the chart sets>).
*/}}
{{- define "tamp.extraEnv" -}}
{{- $facts := index (include "tamp.components" .root | fromYaml) .name }}
{{- $settings := index .root.Values $facts.values }}
{{- $sources := list (dict "path" "extraEnv" "items" (.root.Values.extraEnv | default list)) (dict "path" (printf "%s.extraEnv" $facts.values) "items" ($settings.extraEnv | default list)) }}
{{- $order := list }}
{{- $byName := dict }}
{{- range $source := $sources }}
{{- range $index, $variable := $source.items }}
{{- $at := printf "%s[%d]" $source.path $index }}
{{- if has $variable.name $.managed }}
{{- fail (printf "%s: %s is set by the chart for %s (use %s.env, or the values that set it)" $at $variable.name $.name $facts.values) }}
{{- end }}
{{- if not (hasKey $byName $variable.name) }}
{{- $order = append $order $variable.name }}
{{- end }}
{{- $_ := set $byName $variable.name $variable }}
{{- end }}
{{- end }}
{{- $out := list }}
{{- range $order }}
{{- $out = append $out (index $byName .) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The extra volumes and mounts of one service: the global lists, then the service's own, as
(dict "volumes" list "mounts" list). Names clashing with the chart's volumes or with each
other, and mounts of volumes that do not exist, are refused naming the values path.
Call with (dict "root" $ "name" "gateway" "builtin" (dict "tmp" "/tmp" ...)).
*/}}
{{- define "tamp.extraVolumes" -}}
{{- $facts := index (include "tamp.components" .root | fromYaml) .name }}
{{- $settings := index .root.Values $facts.values }}
{{- $volumes := list }}
{{- $names := dict }}
{{- range $name, $path := .builtin }}
{{- $_ := set $names $name "the chart" }}
{{- end }}
{{- range $source := list (dict "path" "extraVolumes" "items" (.root.Values.extraVolumes | default list)) (dict "path" (printf "%s.extraVolumes" $facts.values) "items" ($settings.extraVolumes | default list)) }}
{{- range $index, $volume := $source.items }}
{{- $at := printf "%s[%d]" $source.path $index }}
{{- if hasKey $names $volume.name }}
{{- fail (printf "%s: the volume name %s is taken (by %s)" $at $volume.name (index $names $volume.name)) }}
{{- end }}
{{- $_ := set $names $volume.name $at }}
{{- $volumes = append $volumes $volume }}
{{- end }}
{{- end }}
{{- $mounts := list }}
{{- $paths := dict }}
{{- range $name, $path := .builtin }}
{{- $_ := set $paths $path (printf "the chart's %s volume" $name) }}
{{- end }}
{{- range $source := list (dict "path" "extraVolumeMounts" "items" (.root.Values.extraVolumeMounts | default list)) (dict "path" (printf "%s.extraVolumeMounts" $facts.values) "items" ($settings.extraVolumeMounts | default list)) }}
{{- range $index, $mount := $source.items }}
{{- $at := printf "%s[%d]" $source.path $index }}
{{- if or (not (hasKey $names $mount.name)) (eq (index $names $mount.name) "the chart") }}
{{- fail (printf "%s: no volume named %s in extraVolumes or %s.extraVolumes" $at $mount.name $facts.values) }}
{{- end }}
{{- if hasKey $paths $mount.mountPath }}
{{- fail (printf "%s: %s is already mounted (%s)" $at $mount.mountPath (index $paths $mount.mountPath)) }}
{{- end }}
{{- $_ := set $paths $mount.mountPath $at }}
{{- $mounts = append $mounts $mount }}
{{- end }}
{{- end }}
{{- toYaml (dict "volumes" $volumes "mounts" $mounts) }}
{{- end }}

{{/* The JetStream stream name of the JOBS stream, as proto/src/topology.ts derives it. */}}
{{- define "tamp.jobsStream" -}}
{{- if .Values.nats.namespace -}}
{{ .Values.nats.namespace | upper | replace "-" "_" }}_JOBS
{{- else -}}
JOBS
{{- end }}
{{- end }}

{{/*
The plain (non-secret) environment of one service as a dict, chart-managed variables first,
then the service's `env` values over them (values.schema.json refuses overriding the
chart-managed ones). Call with (dict "root" $ "name" "gateway").
*/}}
{{- define "tamp.plainEnv" -}}
{{- $root := .root }}
{{- $facts := index (include "tamp.components" $root | fromYaml) .name }}
{{- $settings := index $root.Values $facts.values }}
{{- $env := dict
  "LOG_LEVEL" $root.Values.logLevel
  "OPS_PORT" (toString $root.Values.opsPort)
  "SHUTDOWN_TIMEOUT_MS" (toString $root.Values.shutdownTimeoutMs)
}}
{{- if $root.Values.otelEndpoint }}
{{- $_ := set $env "OTEL_EXPORTER_OTLP_ENDPOINT" $root.Values.otelEndpoint }}
{{- end }}
{{- if not $root.Values.secrets.env.NATS_URL }}
{{- $_ := set $env "NATS_URL" $root.Values.nats.url }}
{{- end }}
{{- if $root.Values.nats.namespace }}
{{- $_ := set $env "NATS_NAMESPACE" $root.Values.nats.namespace }}
{{- end }}
{{- $_ := set $env "NATS_STREAM_REPLICAS" (toString $root.Values.nats.streamReplicas) }}
{{- if $facts.mongo }}
{{- $_ := set $env "MONGO_DATABASE" $root.Values.mongo.database }}
{{- end }}
{{- if $facts.s3 }}
{{- $_ := set $env "S3_ENDPOINT" $root.Values.s3.endpoint }}
{{- $_ := set $env "S3_REGION" $root.Values.s3.region }}
{{- $_ := set $env "S3_BUCKET" $root.Values.s3.bucket }}
{{- if $root.Values.s3.publicEndpoint }}
{{- $_ := set $env "S3_PUBLIC_ENDPOINT" $root.Values.s3.publicEndpoint }}
{{- end }}
{{- if eq $root.Values.s3.manageBucket false }}
{{- $_ := set $env "S3_MANAGE_BUCKET" "false" }}
{{- end }}
{{- end }}
{{- if eq .name "gateway" }}
{{- $_ := set $env "PORT" (toString $settings.port) }}
{{- $_ := set $env "ADMIN_PORT" (toString $settings.adminPort) }}
{{- /* The admin API binds to loopback unless told otherwise; its Service needs the pod IP. */}}
{{- $_ := set $env "ADMIN_HOST" "0.0.0.0" }}
{{- /* In the cluster connections arrive from the ingress, a load balancer or a node (SNAT),
never from clients: a per-address limit would cap those. Clients are limited at the ingress;
gateway.env may set it when clients do reach the pods directly. */}}
{{- $_ := set $env "MAX_CONNECTIONS_PER_ADDRESS" "0" }}
{{- /* Behind the Ingress the API's public address is its first host: the OpenAPI document names
it as its server. gateway.env.PUBLIC_URL wins, for an address the chart cannot see. */}}
{{- $ingress := $root.Values.ingress }}
{{- if and $ingress.enabled $ingress.hosts (not (hasKey ($settings.env | default dict) "PUBLIC_URL")) }}
{{- $host := (first $ingress.hosts).host }}
{{- $secure := false }}
{{- range $ingress.tls }}{{- if has $host (.hosts | default list) }}{{- $secure = true }}{{- end }}{{- end }}
{{- $_ := set $env "PUBLIC_URL" (printf "%s://%s" (ternary "https" "http" $secure) $host) }}
{{- end }}
{{- end }}
{{- if $facts.pipeline }}
{{- $_ := set $env "WORKER_TEMP_DIR" "/scratch" }}
{{- end }}
{{- if eq .name "operator" }}
{{- $lease := ($settings.leaderElection | default dict).leaseDurationSeconds | default 15 | int }}
{{- $_ := set $env "WATCH_NAMESPACE" $root.Release.Namespace }}
{{- $_ := set $env "LEASE_NAME" (include "tamp.componentName" .) }}
{{- $_ := set $env "LEASE_DURATION_SECONDS" (toString $lease) }}
{{- $_ := set $env "LEASE_RENEW_DEADLINE_MS" (toString (div (mul $lease 2000) 3)) }}
{{- $_ := set $env "LEASE_RETRY_PERIOD_MS" (toString (div (mul $lease 2000) 15)) }}
{{- end }}
{{- /* One webhook target policy: the gateway refuses a webhookUrl when it is given by the same
rules the webhook service applies at delivery. */}}
{{- if or (eq .name "webhook") (eq .name "gateway") }}
{{- if $root.Values.webhook.allowHttp }}
{{- $_ := set $env "WEBHOOK_ALLOW_HTTP" "true" }}
{{- end }}
{{- with $root.Values.webhook.allowedPrivateCidrs }}
{{- $_ := set $env "WEBHOOK_ALLOW_CIDRS" (join "," .) }}
{{- end }}
{{- end }}
{{- range $key, $value := ($settings.env | default dict) }}
{{- $_ := set $env $key (toString $value) }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
The worker-image memory rule (services/worker-image/README.md): the pod needs
IMAGE_MEMORY_BUDGET_MB plus 160 MiB for the worker itself, rounded up to a multiple of 64 MiB:
512Mi for the default budget of 320.
*/}}
{{- define "tamp.imageWorkerMemory" -}}
{{- $env := include "tamp.plainEnv" (dict "root" . "name" "worker-image") | fromYaml }}
{{- $budget := index $env "IMAGE_MEMORY_BUDGET_MB" | default "320" | atoi }}
{{- printf "%dMi" (mul (div (add $budget 160 63) 64) 64) }}
{{- end }}

{{/*
The data of the Secret the chart creates (secrets.create), base64-encoded, as a dict. Each key
is, in order: the value given in secrets.values; the value already in the cluster's Secret
(lookup, so upgrades keep it); derived from secrets.seed (the same on every render, so
`helm template` pipelines such as Argo CD, where lookup sees no cluster, render the same Secret
each time); or random. It is computed once per render and cached, so the Secret and every
Deployment's checksum/secrets annotation of one render always agree.
*/}}
{{- define "tamp.secretData" -}}
{{- if not (hasKey .Values.secrets "renderedData") }}
{{- $name := include "tamp.secretName" . }}
{{- $given := .Values.secrets.values | default dict }}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace $name).data | default dict }}
{{- $seed := .Values.secrets.seed | default "" }}
{{- $data := dict }}
{{- range $variable, $ref := .Values.secrets.env }}
{{- if and $ref (not $ref.name) }}
{{- $key := $ref.key }}
{{- $derived := printf "%s/%s/%s" $seed $.Release.Namespace $key | sha256sum }}
{{- if hasKey $given $key }}
{{- $_ := set $data $key (index $given $key | toString | b64enc) }}
{{- else if hasKey $existing $key }}
{{- $_ := set $data $key (index $existing $key) }}
{{- else if or (eq $variable "ADMIN_TOKEN") (eq $variable "JOB_CURSOR_SECRET") }}
{{- $_ := set $data $key (ternary $derived (randAlphaNum 40) (ne $seed "") | b64enc) }}
{{- else if eq $variable "SECRETS_ENCRYPTION_KEY" }}
{{- /* Base64 of 32 bytes: random bytes, or 43 base64 characters of the seed's digest (128 bits). */}}
{{- $fromSeed := printf "%s=" (printf "%s%s" $derived (sha256sum $derived) | b64enc | trunc 43) }}
{{- $_ := set $data $key (ternary $fromSeed (randBytes 32) (ne $seed "") | b64enc) }}
{{- else if or (eq $variable "S3_ACCESS_KEY") (eq $variable "S3_SECRET_KEY") }}
{{- /* Not given: no static keys, the AWS credential chain (tamp.s3StaticKeys). */}}
{{- else }}
{{- $_ := required (printf "secrets.values.%s is required when secrets.create is true (%s)" $key $variable) nil }}
{{- end }}
{{- end }}
{{- end }}
{{- $_ := set .Values.secrets "renderedData" $data }}
{{- end }}
{{- toYaml .Values.secrets.renderedData }}
{{- end }}

{{/*
"true" when the S3 services get static keys (S3_ACCESS_KEY and S3_SECRET_KEY from secretKeyRefs),
empty when they take their credentials from the AWS credential chain instead (IRSA or EKS Pod
Identity through the ServiceAccount, see docs/kubernetes.md). A key is given when its
secrets.env entry is not null and, if it points into the Secret the chart creates, that Secret
holds it (secrets.values, or the Secret already in the cluster). One key without the other is
refused.
*/}}
{{- define "tamp.s3StaticKeys" -}}
{{- $given := list }}
{{- range $variable := list "S3_ACCESS_KEY" "S3_SECRET_KEY" }}
{{- $ref := index $.Values.secrets.env $variable }}
{{- if $ref }}
{{- if or $ref.name (not $.Values.secrets.create) }}
{{- $given = append $given $variable }}
{{- else if hasKey (include "tamp.secretData" $ | fromYaml) $ref.key }}
{{- $given = append $given $variable }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq (len $given) 1 }}
{{- $missing := ternary "S3_SECRET_KEY" "S3_ACCESS_KEY" (eq (first $given) "S3_ACCESS_KEY") }}
{{- fail (printf "S3 credentials: %s is given but %s is not (secrets.env, secrets.values): give both static keys, or neither to use the AWS credential chain (IRSA, EKS Pod Identity)" (first $given) $missing) }}
{{- end }}
{{- if eq (len $given) 2 }}true{{ end }}
{{- end }}

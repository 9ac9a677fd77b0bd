{{/* The base name of every object: the release's when it says regokite, else <release>-regokite. */}}
{{- define "regokite.fullname" -}}
{{- if contains "regokite" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-regokite" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "regokite.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* regokite's labels for a component, and Helm's own. (dict "root" $ "component" "admission") */}}
{{- define "regokite.labels" -}}
app.kubernetes.io/name: regokite
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* (dict "root" $ "name" ... "component" ... "automount" bool) */}}
{{- define "regokite.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "regokite.labels" . | nindent 4 }}
automountServiceAccountToken: {{ .automount }}
{{- with .root.Values.image.pullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Each `rbac` entry (from `regokite manifests <role> --helm-values`) and its binding to the role's
ServiceAccount. (dict "root" $ "name" ... "component" ... "rbac" list) */}}
{{- define "regokite.rbac" -}}
{{- $ctx := . -}}
{{- range .rbac }}
{{- $name := printf "%s%s" $ctx.name .nameSuffix }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ .kind }}
metadata:
  name: {{ $name }}
  {{- if eq .kind "Role" }}
  namespace: {{ .namespace | default $ctx.root.Release.Namespace }}
  {{- end }}
  labels: {{- include "regokite.labels" $ctx | nindent 4 }}
rules: {{- toYaml .rules | nindent 0 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ .kind }}Binding
metadata:
  name: {{ $name }}
  {{- if eq .kind "Role" }}
  namespace: {{ .namespace | default $ctx.root.Release.Namespace }}
  {{- end }}
  labels: {{- include "regokite.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ .kind }}
  name: {{ $name }}
subjects:
- kind: ServiceAccount
  name: {{ $ctx.name }}
  namespace: {{ $ctx.root.Release.Namespace }}
{{- end }}
{{- end -}}

{{/* The policies' ConfigMap, when they are not baked in the image. (dict "root" "name" "component" "policies") */}}
{{- define "regokite.policiesConfigMap" -}}
{{- if not .policies.baked }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .name }}-policies
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "regokite.labels" . | nindent 4 }}
data: {{- toYaml .policies.files | nindent 2 }}
{{- end }}
{{- end -}}

{{/* What the server containers share: the log level first, then the role's arguments. */}}
{{- define "regokite.args" -}}
{{- $args := list -}}
{{- with .root.Values.logLevel }}{{ $args = list "--log-level" (lower .) }}{{ end -}}
{{- toYaml (concat $args .args) -}}
{{- end -}}

{{/* --engine opa, --v0-compatible */}}
{{- define "regokite.engineArgs" -}}
{{- $args := list -}}
{{- if .Values.v0Compatible }}{{ $args = append $args "--v0-compatible" }}{{ end -}}
{{- if eq .Values.engine "opa" }}{{ $args = concat $args (list "--engine" "opa" "--opa-url" "http://127.0.0.1:8181") }}{{ end -}}
{{- toYaml $args -}}
{{- end -}}

{{/* --replicate / --replicate-cluster of a role's values */}}
{{- define "regokite.replicateArgs" -}}
{{- $args := list -}}
{{- range .replicate }}{{ $args = concat $args (list "--replicate" .) }}{{ end -}}
{{- range .replicateCluster }}{{ $args = concat $args (list "--replicate-cluster" .) }}{{ end -}}
{{- toYaml $args -}}
{{- end -}}

{{- define "regokite.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
  - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "regokite.probe" -}}
httpGet:
  path: {{ .path }}
  port: {{ .port }}
  scheme: {{ .scheme | default "HTTP" }}
periodSeconds: {{ .period | default 10 }}
timeoutSeconds: 3
failureThreshold: 3
{{- end -}}

{{/* The OPA sidecar (engine: opa), serving on the pod's loopback only. */}}
{{- define "regokite.opaSidecar" -}}
- name: opa
  image: {{ .Values.opa.image }}
  imagePullPolicy: IfNotPresent
  args:
  - run
  - --server
  - --addr=127.0.0.1:8181
  - --diagnostic-addr=0.0.0.0:8282
  - --disable-telemetry
  - --log-format=json
  {{- if .Values.v0Compatible }}
  - --v0-compatible
  {{- end }}
  ports:
  - name: opa-health
    containerPort: 8282
    protocol: TCP
  livenessProbe: {{- include "regokite.probe" (dict "path" "/health" "port" "opa-health") | nindent 4 }}
  readinessProbe: {{- include "regokite.probe" (dict "path" "/health" "port" "opa-health" "period" 5) | nindent 4 }}
  resources:
    requests:
      cpu: 50m
      memory: 64Mi
    limits:
      cpu: "1"
      memory: 256Mi
  securityContext: {{- include "regokite.securityContext" . | nindent 4 }}
{{- end -}}

{{/* A role's Deployment. (dict "root" $ "name" "component" "role" (its values) "replicas" "automount"
"containers" (YAML text of the list) "volumes" (list)) */}}
{{- define "regokite.deployment" -}}
{{- $selector := dict "app.kubernetes.io/name" "regokite" "app.kubernetes.io/instance" .name -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "regokite.labels" . | nindent 4 }}
    app.kubernetes.io/instance: {{ .name }}
spec:
  replicas: {{ .replicas }}
  selector:
    matchLabels: {{- toYaml $selector | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        app.kubernetes.io/name: regokite
        app.kubernetes.io/component: {{ .component }}
        app.kubernetes.io/instance: {{ .name }}
    spec:
      serviceAccountName: {{ .name }}
      automountServiceAccountToken: {{ .automount }}
      securityContext: {{- toYaml .role.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: 30
      {{- with .role.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with .role.nodeSelector }}
      nodeSelector: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .role.tolerations }}
      tolerations: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .role.affinity }}
      affinity: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .root.Values.image.pullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      topologySpreadConstraints:
      {{- if .role.topologySpreadConstraints }}
      {{- toYaml .role.topologySpreadConstraints | nindent 6 }}
      {{- else }}
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: ScheduleAnyway
        labelSelector:
          matchLabels: {{- toYaml $selector | nindent 12 }}
      {{- end }}
      containers: {{- .containers | nindent 6 }}
      volumes: {{- toYaml .volumes | nindent 6 }}
{{- end -}}

{{/* A role's Service. (dict "root" "name" "component" "port" "target") */}}
{{- define "regokite.service" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "regokite.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    app.kubernetes.io/name: regokite
    app.kubernetes.io/instance: {{ .name }}
  ports:
  - name: {{ .target }}
    port: {{ .port }}
    targetPort: {{ .target }}
    protocol: TCP
{{- end -}}

{{/* A PodDisruptionBudget where the role runs 2 replicas or more. (dict "root" "name" "component" "replicas") */}}
{{- define "regokite.pdb" -}}
{{- if and .root.Values.podDisruptionBudget.enabled (ge (int .replicas) 2) }}
---
{{- /* policy/v1 from Kubernetes 1.21; older API servers serve policy/v1beta1 only */}}
apiVersion: {{ ternary "policy/v1" "policy/v1beta1" (.root.Capabilities.APIVersions.Has "policy/v1") }}
kind: PodDisruptionBudget
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "regokite.labels" . | nindent 4 }}
spec:
  minAvailable: {{ .root.Values.podDisruptionBudget.minAvailable }}
  selector:
    matchLabels:
      app.kubernetes.io/name: regokite
      app.kubernetes.io/instance: {{ .name }}
{{- end }}
{{- end -}}

{{/* regokite admission over HTTPS on 8443. (dict "root" "role" "args" "mounts") */}}
{{- define "regokite.serverContainer" -}}
- name: regokite
  image: {{ include "regokite.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args: {{- include "regokite.args" . | nindent 2 }}
  ports:
  - name: https
    containerPort: 8443
    protocol: TCP
  livenessProbe: {{- include "regokite.probe" (dict "path" "/healthz" "port" "https" "scheme" "HTTPS") | nindent 4 }}
  readinessProbe: {{- include "regokite.probe" (dict "path" "/readyz" "port" "https" "scheme" "HTTPS" "period" 5) | nindent 4 }}
  resources: {{- toYaml .role.resources | nindent 4 }}
  securityContext: {{- include "regokite.securityContext" . | nindent 4 }}
  volumeMounts: {{- toYaml .mounts | nindent 2 }}
{{- end -}}

{{/* The audit's and the controller's container: metrics, health on the metrics port. (dict "root" "role" "args"
"mounts" "env") */}}
{{- define "regokite.metricsContainer" -}}
- name: regokite
  image: {{ include "regokite.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args: {{- include "regokite.args" . | nindent 2 }}
  {{- with .env }}
  env: {{- toYaml . | nindent 2 }}
  {{- end }}
  ports:
  - name: metrics
    containerPort: {{ .role.metricsPort }}
    protocol: TCP
  livenessProbe: {{- include "regokite.probe" (dict "path" "/healthz" "port" "metrics") | nindent 4 }}
  readinessProbe: {{- include "regokite.probe" (dict "path" "/readyz" "port" "metrics" "period" (.readinessPeriod | default 10)) | nindent 4 }}
  resources: {{- toYaml .role.resources | nindent 4 }}
  securityContext: {{- include "regokite.securityContext" . | nindent 4 }}
  volumeMounts: {{- toYaml .mounts | nindent 2 }}
{{- end -}}

{{/* Gatekeeper's role: the template syncer beside the server, sharing the generated files. */}}
{{- define "regokite.syncContainer" -}}
- name: gatekeeper-sync
  image: {{ include "regokite.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args: {{- include "regokite.args" . | nindent 2 }}
  resources: {{- toYaml .role.syncResources | nindent 4 }}
  securityContext: {{- include "regokite.securityContext" . | nindent 4 }}
  volumeMounts: {{- toYaml .mounts | nindent 2 }}
{{- end -}}

{{/* admission.bundles' configuration as the Secret holds it, and whether a bundle persists (a volume at
persistence_directory, which the config gets when it has none): YAML {config, persisted}. An existing
Secret is not read, so its bundles may persist. (dict "bundles" ...) */}}
{{- define "regokite.bundlesConfig" -}}
{{- $b := .bundles -}}
{{- if and $b.config $b.existingSecret }}{{ fail "admission.bundles: give config or existingSecret, not both" }}{{ end -}}
{{- $config := deepCopy ($b.config | default dict) -}}
{{- $persisted := not (empty $b.existingSecret) -}}
{{- range $_, $bundle := ($config.bundles | default dict) }}{{ if and (kindIs "map" $bundle) $bundle.persist }}{{ $persisted = true }}{{ end }}{{ end -}}
{{- if $persisted }}{{ $_ := set $config "persistence_directory" ($config.persistence_directory | default $b.persistenceDirectory) }}{{ end -}}
{{- toYaml (dict "config" $config "persisted" $persisted) -}}
{{- end -}}

{{/* The Secret of OPA's configuration file rendered from admission.bundles.config. (dict "root" "name" "component" "bundles") */}}
{{- define "regokite.bundlesSecret" -}}
{{- if .bundles.config }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}-bundles
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "regokite.labels" . | nindent 4 }}
type: Opaque
data:
  config.yaml: {{ (include "regokite.bundlesConfig" . | fromYaml).config | toYaml | b64enc }}
{{- end }}
{{- end -}}

{{/* What serves admission.bundles: --config-file (the Secret mounted), --bundle, the persistence volume.
YAML {args, volumes, mounts}. (dict "root" "name" "component" "bundles") */}}
{{- define "regokite.bundles" -}}
{{- $b := .bundles -}}
{{- $out := dict "args" list "volumes" list "mounts" list -}}
{{- if or $b.config $b.existingSecret }}
{{- $plan := include "regokite.bundlesConfig" . | fromYaml }}
{{- $secret := $b.existingSecret | default (printf "%s-bundles" .name) }}
{{- $_ := set $out "args" (list "--config-file" "/etc/regokite/bundles/config.yaml") }}
{{- $_ := set $out "volumes" (list (dict "name" "bundles-config" "secret" (dict "secretName" $secret))) }}
{{- $_ := set $out "mounts" (list (dict "name" "bundles-config" "mountPath" "/etc/regokite/bundles" "readOnly" true)) }}
{{- if $plan.persisted }}
{{- $directory := $plan.config.persistence_directory }}
{{- if not (isAbs $directory) }}{{ fail (printf "admission.bundles: persistence_directory %q must be an absolute path" $directory) }}{{ end }}
{{- $_ := set $out "volumes" (append $out.volumes (merge (dict "name" "bundles-persistence") ($b.persistenceVolume | default (dict "emptyDir" dict)))) }}
{{- $_ := set $out "mounts" (append $out.mounts (dict "name" "bundles-persistence" "mountPath" $directory)) }}
{{- end }}
{{- end }}
{{- range $b.urls }}{{ $_ := set $out "args" (concat $out.args (list "--bundle" .)) }}{{ end }}
{{- toYaml $out -}}
{{- end -}}

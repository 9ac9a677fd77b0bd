{{/* Webhooks: what each policy computes (`regokite manifests admission --helm-values`: the entries of
admission.webhooks) under the knobs, lowest first: global (validatingWebhook* / mutatingWebhook*), the
policy's own declaration, webhookPolicies.<policy>. regokite/manifests/webhooks.py render_webhook does
the same; tests/charts compares the two. */}}

{{/* Label selectors merged: matchLabels (the second's win), matchExpressions added up. (list a b) */}}
{{- define "regokite.mergeSelectors" -}}
{{- $a := index . 0 | default dict -}}
{{- $b := index . 1 | default dict -}}
{{- $out := dict -}}
{{- $labels := merge (deepCopy ($b.matchLabels | default dict)) ($a.matchLabels | default dict) -}}
{{- if $labels }}{{ $_ := set $out "matchLabels" $labels }}{{ end -}}
{{- $exprs := concat ($a.matchExpressions | default list) ($b.matchExpressions | default list) -}}
{{- if $exprs }}{{ $_ := set $out "matchExpressions" $exprs }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Knob layers, lowest first: scalars replace, lists of conditions and expressions add up. */}}
{{- define "regokite.mergeKnobs" -}}
{{- $out := dict "namespaceExpressions" (list) "matchConditions" (list) -}}
{{- $selector := dict -}}
{{- range . -}}
{{- if .failurePolicy }}{{ $_ := set $out "failurePolicy" .failurePolicy }}{{ end -}}
{{- if not (kindIs "invalid" .timeoutSeconds) }}{{ $_ := set $out "timeoutSeconds" .timeoutSeconds }}{{ end -}}
{{- with .namespaceSelector }}{{ $_ := set $out "namespaceExpressions" (concat $out.namespaceExpressions (.matchExpressions | default list)) }}{{ end -}}
{{- with .objectSelector }}{{ $selector = include "regokite.mergeSelectors" (list $selector .) | fromYaml }}{{ end -}}
{{- with .matchConditions }}{{ $_ := set $out "matchConditions" (concat $out.matchConditions .) }}{{ end -}}
{{- with .operations }}{{ $_ := set $out "operations" . }}{{ end -}}
{{- with .rules }}{{ $_ := set $out "rules" . }}{{ end -}}
{{- end -}}
{{- if $selector }}{{ $_ := set $out "objectSelector" $selector }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The global knobs of a mode ("validate" or "mutate"), from the values' prefixed names. */}}
{{- define "regokite.globalKnobs" -}}
{{- $v := .root.Values -}}
{{- $p := ternary "validatingWebhook" "mutatingWebhook" (eq .mode "validate") -}}
{{- $out := dict -}}
{{- range $key := list "FailurePolicy" "TimeoutSeconds" "NamespaceSelector" "ObjectSelector" "MatchConditions" "Operations" "Rules" -}}
{{- $value := index $v (printf "%s%s" $p $key) -}}
{{- if not (kindIs "invalid" $value) }}{{ $_ := set $out (printf "%s%s" (lower (substr 0 1 $key)) (substr 1 -1 $key)) $value }}{{ end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* One webhook. (dict "root" $ "base" entry "mode" "validate"|"mutate" "service" name "timeout" role's
default "caBundle" base64 or "" "knobs" false to ignore every knob "reinvocation" policy) */}}
{{- define "regokite.webhook" -}}
{{- $v := .root.Values -}}
{{- $k := dict -}}
{{- if ne (toString .knobs) "false" -}}
{{- $global := include "regokite.globalKnobs" . | fromYaml -}}
{{- $own := index ($v.webhookPolicies | default dict) .base.policy | default dict -}}
{{- $k = include "regokite.mergeKnobs" (list $global (.base.declared | default dict) $own) | fromYaml -}}
{{- end -}}
{{- $rules := $k.rules | default .base.rules -}}
{{- if $k.operations -}}
{{- $replaced := list -}}
{{- range $rules }}{{ $replaced = append $replaced (merge (dict "operations" $k.operations) (deepCopy .)) }}{{ end -}}
{{- $rules = $replaced -}}
{{- end -}}
{{- $exempt := ternary (list) ($v.exemptNamespaces | default list) (eq (toString .knobs) "false") -}}
{{- $skip := concat .base.excludedNamespaces $exempt (list .root.Release.Namespace) | uniq | sortAlpha -}}
{{- $notIn := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" $skip -}}
{{- $expressions := concat (.base.namespaceExpressions | default list) (list $notIn) ($k.namespaceExpressions | default list) -}}
{{- $objectSelector := dict -}}
{{- if or .base.objectSelector $k.objectSelector -}}
{{- $objectSelector = include "regokite.mergeSelectors" (list .base.objectSelector $k.objectSelector) | fromYaml -}}
{{- end -}}
- name: {{ .base.name }}
  clientConfig:
    service:
      name: {{ .service }}
      namespace: {{ .root.Release.Namespace }}
      port: 443
      path: {{ .base.path }}
    {{- with .caBundle }}
    caBundle: {{ . }}
    {{- end }}
  rules: {{- toYaml $rules | nindent 2 }}
  namespaceSelector:
    {{- with .base.namespaceMatchLabels }}
    matchLabels: {{- toYaml . | nindent 6 }}
    {{- end }}
    matchExpressions: {{- toYaml $expressions | nindent 4 }}
  failurePolicy: {{ $k.failurePolicy | default .base.failurePolicy }}
  sideEffects: None
  admissionReviewVersions: [v1, v1beta1]
  timeoutSeconds: {{ ternary .timeout $k.timeoutSeconds (kindIs "invalid" $k.timeoutSeconds) }}
  matchPolicy: {{ .matchPolicy | default "Equivalent" }}
  {{- with $objectSelector }}
  objectSelector: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $k.matchConditions }}
  matchConditions: {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with .reinvocation }}
  reinvocationPolicy: {{ . }}
  {{- end }}
{{- end -}}

{{/* The serving certificate of a webhook server: the existing Secret's (so an upgrade keeps the CA the
webhooks trust), else a new CA and a certificate for <service>.<namespace>.svc. (dict "root" "name") */}}
{{- define "regokite.certificate" -}}
{{- $existing := lookup "v1" "Secret" .root.Release.Namespace (printf "%s-tls" .name) -}}
{{- if and $existing $existing.data (index $existing.data "ca.crt") -}}
ca: {{ index $existing.data "ca.crt" }}
crt: {{ index $existing.data "tls.crt" }}
key: {{ index $existing.data "tls.key" }}
{{- else -}}
{{- $days := int .root.Values.generatedCertificate.validityDays -}}
{{- $dns := printf "%s.%s.svc" .name .root.Release.Namespace -}}
{{- $ca := genCA (printf "%s-ca" .name) $days -}}
{{- $cert := genSignedCert $dns nil (list $dns (printf "%s.cluster.local" $dns)) $days $ca -}}
ca: {{ $ca.Cert | b64enc }}
crt: {{ $cert.Cert | b64enc }}
key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}

{{/* The Secret (generated) or the cert-manager Issuer and Certificate (cert-manager's CA injector fills the
caBundles). (dict "root" "name" "component" "certificate" (from regokite.certificate)) */}}
{{- define "regokite.tlsObjects" -}}
{{- $ns := .root.Release.Namespace -}}
{{- if .root.Values.certManager.enabled }}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: {{ .name }}-selfsigned
  namespace: {{ $ns }}
  labels: {{- include "regokite.labels" (dict "root" .root "component" "admission") | nindent 4 }}
spec:
  selfSigned: {}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ .name }}
  namespace: {{ $ns }}
  labels: {{- include "regokite.labels" (dict "root" .root "component" "admission") | nindent 4 }}
spec:
  secretName: {{ .name }}-tls
  dnsNames:
  - {{ .name }}.{{ $ns }}.svc
  - {{ .name }}.{{ $ns }}.svc.cluster.local
  duration: 2160h
  renewBefore: 360h
  privateKey:
    algorithm: ECDSA
    size: 256
    rotationPolicy: Always
  issuerRef:
    name: {{ .name }}-selfsigned
    kind: Issuer
    group: cert-manager.io
{{- else }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .name }}-tls
  namespace: {{ $ns }}
  labels: {{- include "regokite.labels" . | nindent 4 }}
type: kubernetes.io/tls
data:
  ca.crt: {{ .certificate.ca }}
  tls.crt: {{ .certificate.crt }}
  tls.key: {{ .certificate.key }}
{{- end }}
{{- end -}}

{{/* A webhook configuration's metadata. (dict "root" "name" "server") */}}
{{- define "regokite.webhookMetadata" -}}
name: {{ .name }}
labels:
  app.kubernetes.io/name: regokite
  app.kubernetes.io/managed-by: {{ .root.Release.Service }}
  helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- if .root.Values.certManager.enabled }}
annotations:
  cert-manager.io/inject-ca-from: {{ .root.Release.Namespace }}/{{ .server }}
{{- end }}
{{- end -}}

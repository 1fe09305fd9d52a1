{{/*
Names are <release>-<component>: the operator's RBAC (operator-rbac.yaml) uses the same rule for its ServiceAccount,
so the two files agree without sharing a helper. Helm caps release names at 53 characters, so every suffix here fits
in a 63-character name.
*/}}

{{- define "trafficsplit.operatorName" -}}
{{ .Release.Name }}-operator
{{- end }}

{{- define "trafficsplit.gatewayName" -}}
{{ .Release.Name }}-gateway
{{- end }}

{{- define "trafficsplit.publishServiceName" -}}
{{ .Release.Name }}-gateway-publish
{{- end }}

{{- define "trafficsplit.bootstrapName" -}}
{{ .Release.Name }}-gateway-bootstrap
{{- end }}

{{- define "trafficsplit.tokenSecretName" -}}
{{- if .Values.publish.token.existingSecret -}}
{{ .Values.publish.token.existingSecret }}
{{- else -}}
{{ .Release.Name }}-publish-token
{{- end -}}
{{- end }}

{{- define "trafficsplit.leaseName" -}}
{{ .Values.operator.leaderElection.leaseName | default (printf "%s-operator" .Release.Name) }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "trafficsplit.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: trafficsplit
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trafficsplit
{{- end }}

{{/* Selector labels: stable across upgrades (a Deployment's selector is immutable). Call with (list $ "component"). */}}
{{- define "trafficsplit.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: trafficsplit
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* An image reference: repository@digest when a digest is given, else repository:tag (tag defaults to appVersion). */}}
{{- define "trafficsplit.image" -}}
{{- $img := index . 0 -}}
{{- $root := index . 1 -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ $img.tag | default $root.Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The container securityContext, with the container's own numeric user. Call with (list $ uid). */}}
{{- define "trafficsplit.containerSecurityContext" -}}
{{- $root := index . 0 -}}
{{- $uid := index . 1 -}}
{{- toYaml $root.Values.securityContext.container }}
runAsUser: {{ $uid }}
runAsGroup: {{ $uid }}
runAsNonRoot: true
{{- end }}

{{/* Where both the operator and the extproc read the publish token from. */}}
{{- define "trafficsplit.tokenDir" -}}
/var/run/secrets/trafficsplit.dev/publish
{{- end }}

{{/* A preferred anti-affinity that spreads one component's replicas across nodes. Call with (list $ "component"). */}}
{{- define "trafficsplit.spreadAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "trafficsplit.selectorLabels" . | nindent 12 }}
{{- end }}

{{/* The publish API's TLS Secrets: the user's (publish.tls.*Secret) or the chart-generated ones. */}}
{{- define "trafficsplit.publishTlsGatewaySecret" -}}
{{ .Values.publish.tls.gatewaySecret | default (printf "%s-publish-tls-gateway" .Release.Name) }}
{{- end }}

{{- define "trafficsplit.publishTlsOperatorSecret" -}}
{{ .Values.publish.tls.operatorSecret | default (printf "%s-publish-tls-operator" .Release.Name) }}
{{- end }}

{{/* The DNS name in the gateways' publish certificate, which the operator checks (it dials pod IPs). */}}
{{- define "trafficsplit.publishServerName" -}}
{{ .Values.publish.tls.serverName | default (printf "%s.%s.svc" (include "trafficsplit.publishServiceName" .) .Release.Namespace) }}
{{- end }}

{{/* Where the extproc and the operator read their publish TLS files from (tls.crt, tls.key, ca.crt). */}}
{{- define "trafficsplit.tlsDir" -}}
/var/run/secrets/trafficsplit.dev/publish-tls
{{- end }}

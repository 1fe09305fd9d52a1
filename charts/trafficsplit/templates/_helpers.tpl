{{/*
Names are <prefix>-<component>. The prefix is the release name, so a release "ts" makes ts-operator, ts-gateway, …
(the component says what an object is; the chart's name would only repeat it). fullnameOverride replaces the
prefix; nameOverride follows Helm's usual rule (<release>-<nameOverride>, or the release name alone when it already
contains nameOverride) and also sets the app.kubernetes.io/name label. The prefix is cut to 47 characters, so the
longest Service name (<prefix>-gateway-publish) stays a 63-character DNS label.
*/}}

{{- define "trafficsplit.name" -}}
{{ .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "trafficsplit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{ .Values.fullnameOverride | trunc 47 | trimSuffix "-" }}
{{- else if and .Values.nameOverride (not (contains .Values.nameOverride .Release.Name)) -}}
{{ printf "%s-%s" .Release.Name .Values.nameOverride | trunc 47 | trimSuffix "-" }}
{{- else -}}
{{ .Release.Name | trunc 47 | trimSuffix "-" }}
{{- end -}}
{{- end }}

{{- define "trafficsplit.operatorName" -}}
{{ include "trafficsplit.fullname" . }}-operator
{{- end }}

{{- define "trafficsplit.gatewayName" -}}
{{ include "trafficsplit.fullname" . }}-gateway
{{- end }}

{{- define "trafficsplit.publishServiceName" -}}
{{ include "trafficsplit.fullname" . }}-gateway-publish
{{- end }}

{{- define "trafficsplit.bootstrapName" -}}
{{ include "trafficsplit.fullname" . }}-gateway-bootstrap
{{- end }}

{{/*
The ServiceAccounts. serviceAccount.create (default): the chart creates <prefix>-<component>, or serviceAccount.name
if given. create false: the pods run as serviceAccount.name, an account you manage (with the identity annotations of
IRSA or Workload Identity, say), else the namespace's "default". The operator's RBAC binds whichever it is.
*/}}
{{- define "trafficsplit.operatorServiceAccountName" -}}
{{- $sa := .Values.operator.serviceAccount -}}
{{- if $sa.create -}}
{{ $sa.name | default (include "trafficsplit.operatorName" .) }}
{{- else -}}
{{ $sa.name | default "default" }}
{{- end -}}
{{- end }}

{{- define "trafficsplit.gatewayServiceAccountName" -}}
{{- $sa := .Values.gateway.serviceAccount -}}
{{- if $sa.create -}}
{{ $sa.name | default (include "trafficsplit.gatewayName" .) }}
{{- else -}}
{{ $sa.name | default "default" }}
{{- end -}}
{{- end }}

{{- define "trafficsplit.tokenSecretName" -}}
{{- if .Values.publish.token.existingSecret -}}
{{ .Values.publish.token.existingSecret }}
{{- else -}}
{{ include "trafficsplit.fullname" . }}-publish-token
{{- end -}}
{{- end }}

{{- define "trafficsplit.leaseName" -}}
{{ .Values.operator.leaderElection.leaseName | default (include "trafficsplit.operatorName" .) }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "trafficsplit.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "trafficsplit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trafficsplit
{{- end }}

{{/* Selector labels: stable across upgrades (a Deployment's selector is immutable). Call with (list $ "component"). */}}
{{- define "trafficsplit.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "trafficsplit.name" $root }}
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
{{ .Values.publish.tls.gatewaySecret | default (printf "%s-publish-tls-gateway" (include "trafficsplit.fullname" .)) }}
{{- end }}

{{- define "trafficsplit.publishTlsOperatorSecret" -}}
{{ .Values.publish.tls.operatorSecret | default (printf "%s-publish-tls-operator" (include "trafficsplit.fullname" .)) }}
{{- end }}

{{/* The DNS name in the gateways' publish certificate, which the operator checks (it dials pod IPs). */}}
{{- define "trafficsplit.publishServerName" -}}
{{ .Values.publish.tls.serverName | default (printf "%s.%s.svc" (include "trafficsplit.publishServiceName" .) .Release.Namespace) }}
{{- end }}

{{/* Where the extproc and the operator read their publish TLS files from (tls.crt, tls.key, ca.crt). */}}
{{- define "trafficsplit.tlsDir" -}}
/var/run/secrets/trafficsplit.dev/publish-tls
{{- end }}

{{/*
"true" when the operator may place Gateways' data planes in their own namespaces (gatewayAPI.dataplanes): the RBAC
of templates/operator-rbac.yaml's -dataplanes-gateway-namespaces rules and the operator's settings follow it.
*/}}
{{- define "trafficsplit.gatewayNamespaceDataplanes" -}}
{{- $d := .Values.gatewayAPI.dataplanes -}}
{{- or $d.allowGatewayNamespace (eq $d.placement "GatewayNamespace") -}}
{{- end }}

{{- define "chart.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "chart.fullname" -}}
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

{{- define "chart.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "chart.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/created-by: {{ include "chart.name" . }}
app.kubernetes.io/part-of: {{ include "chart.name" . }}
{{- end }}

{{- define "chart.managerSelectorLabels" -}}
control-plane: controller-manager
app.kubernetes.io/name: {{ include "chart.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "chart.webhookServiceName" -}}
{{- default (printf "%s-webhook-service" (include "chart.fullname" .)) .Values.webhook.serviceName }}
{{- end }}

{{- define "chart.validatingWebhookName" -}}
{{ include "chart.fullname" . }}-validating-webhook
{{- end }}

{{- define "chart.mutatingWebhookName" -}}
{{ include "chart.fullname" . }}-mutating-webhook
{{- end }}

{{- define "chart.image" -}}
{{- $tag := default .root.Chart.AppVersion .image.tag -}}
{{- if and .image.tag .image.digest -}}
{{ .image.repository }}:{{ .image.tag }}@{{ .image.digest }}
{{- else if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{- /* "true" for a value the operator reads as true (true or "true"), else empty. */}}
{{- define "chart.truthy" -}}
{{- if eq (toString .) "true" }}true{{ end -}}
{{- end }}

{{/* hitl's image reference: repository, then the digest or the tag (default the appVersion). */}}
{{- define "hitl.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Labels of everything the chart writes by hand. */}}
{{- define "hitl.labels" -}}
app.kubernetes.io/name: hitl
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The manager's pods, as config/manager selects them. */}}
{{- define "hitl.managerSelector" -}}
app.kubernetes.io/name: hitl
app.kubernetes.io/component: manager
{{- end -}}

{{/* The web inbox's pods, as config/inbox selects them. */}}
{{- define "hitl.inboxSelector" -}}
app.kubernetes.io/name: hitl
app.kubernetes.io/component: inbox
{{- end -}}

{{/* The notifier's pods, as config/notify selects them. */}}
{{- define "hitl.notifySelector" -}}
app.kubernetes.io/name: hitl
app.kubernetes.io/component: notify
{{- end -}}

{{/* Non-empty when the manager serves webhooks: the feedback webhook alone, or all of them (webhook mode). */}}
{{- define "hitl.webhooks" -}}
{{- if or .Values.webhook.feedback.enabled .Values.webhook.mode.enabled }}true{{ end -}}
{{- end -}}

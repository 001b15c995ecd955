{{- define "nicpick.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default "nicpick" -}}
{{- end -}}

{{- define "nicpick.labels" -}}
app.kubernetes.io/name: nicpick
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

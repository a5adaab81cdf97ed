{{- /* At most 28 characters: the longest name derived from it, <fullname>-controller-manager-metrics-service,
must stay a valid Service name (63). */ -}}
{{- define "task-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 28 | trimSuffix "-" -}}
{{- else if contains "task-operator" .Release.Name -}}
{{- .Release.Name | trunc 28 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-task-operator" .Release.Name | trunc 28 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; the selector labels are fixed, as in config/. */}}
{{- define "task-operator.labels" -}}
app.kubernetes.io/name: task-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- /* Labels of an object that the user's own tools select (the ServiceMonitor, the PrometheusRule,
the dashboard ConfigMap): the chart's labels, then .own (the object's extra chart labels), then
the user's .extra over both. On a key they share, the user's value wins: it is what their
Prometheus or Grafana selects by (e.g. app.kubernetes.io/instance), and a key rendered twice is
invalid YAML. Called with (dict "root" $ "own" (dict ...) "extra" .Values...labels). */ -}}
{{- define "task-operator.selectableLabels" -}}
{{- $chart := include "task-operator.labels" .root | fromYaml -}}
{{- toYaml (merge (dict) (.extra | default dict) (.own | default dict) $chart) -}}
{{- end -}}

{{- define "task-operator.selectorLabels" -}}
app.kubernetes.io/name: task-operator
control-plane: controller-manager
{{- end -}}

{{- define "task-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "task-operator.serviceAccountName" -}}
{{ include "task-operator.fullname" . }}-controller-manager
{{- end -}}

{{- define "task-operator.webhookSecret" -}}
{{ include "task-operator.fullname" . }}-webhook-cert
{{- end -}}

{{- define "task-operator.metricsSecret" -}}
{{ include "task-operator.fullname" . }}-metrics-cert
{{- end -}}

{{/*
The extraEnv entries, each name once. env is a list keyed by name: server-side apply (Helm 4's
default) refuses a name given twice, and a client-side apply keeps both and lets the last win.
The schema cannot compare items by one key, so the duplicate is refused here, before anything
is applied.
*/}}
{{- define "task-operator.extraEnv" -}}
{{- $seen := dict -}}
{{- range $i, $e := .Values.extraEnv -}}
{{- if hasKey $seen $e.name -}}
{{- fail (printf "extraEnv[%d]: %s is given twice (extraEnv[%d]); env is keyed by name" $i $e.name (get $seen $e.name)) -}}
{{- end -}}
{{- $_ := set $seen $e.name $i -}}
{{- end -}}
{{- with .Values.extraEnv -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

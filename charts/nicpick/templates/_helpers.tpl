{{/*
Names.  Everything the chart creates is named after the release, so two
releases in one namespace never clash.
*/}}
{{- define "nicpick.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nicpick.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nicpick.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nicpick.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nicpick.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nicpick.labels" -}}
helm.sh/chart: {{ include "nicpick.chart" . }}
{{ include "nicpick.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nicpick
{{- end -}}

{{- define "nicpick.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nicpick.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "nicpick.jobName" -}}
{{- default (include "nicpick.fullname" .) .Values.job.name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* registry/repository:tag, or @digest when a digest is given. */}}
{{- define "nicpick.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .Values.image.registry) $repo -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "nicpick.expect" -}}
{{- if gt (int .Values.expectPods) 0 -}}
{{- .Values.expectPods -}}
{{- else if .Values.job.enabled -}}
{{- .Values.job.pods -}}
{{- else -}}
0
{{- end -}}
{{- end -}}

{{/* `nicpick select` and its flags, one JSON-quoted item a line. */}}
{{- define "nicpick.selectArgs" -}}
{{- $v := .Values -}}
- select
- --peers
- k8s
- --out-dir
- {{ $v.outDir | toJson }}
- --timeout
- {{ $v.timeoutSeconds | toString | toJson }}
- --probe-port
- {{ $v.probePort | toString | toJson }}
- --smoke
- {{ $v.smoke.mode | toJson }}
{{- if ne $v.smoke.mode "off" }}
- --smoke-port
- {{ $v.smoke.port | toString | toJson }}
{{- if $v.smoke.minBusbw }}
- --min-busbw
- {{ $v.smoke.minBusbw | toString | toJson }}
{{- end }}
{{- if $v.smoke.bytes }}
- --smoke-bytes
- {{ $v.smoke.bytes | int64 | toString | toJson }}
{{- end }}
{{- end }}
{{- with $v.policy }}
{{- if .include }}
- --include
- {{ .include | toJson }}
{{- end }}
{{- if .exclude }}
- --exclude
- {{ .exclude | toJson }}
{{- end }}
{{- if .cidr }}
- --cidr
- {{ .cidr | toJson }}
{{- end }}
{{- if .family }}
- --family
- {{ .family | toJson }}
{{- end }}
{{- if .minSpeed }}
- --min-speed
- {{ .minSpeed | int64 | toString | toJson }}
{{- end }}
{{- end }}
{{- range $v.extraArgs }}
- {{ . | toString | toJson }}
{{- end }}
{{- end -}}

{{/*
nicpick.initContainer: nicpick's init containers, as items of a pod's
initContainers list.  Use from another chart (nicpick as a dependency):
  initContainers:
    {{- include "nicpick.initContainer" .Subcharts.nicpick | trim | nindent 4 }}
With smoke.runIn=trainImage there are two: nicpick-install copies nicpick
into the shared emptyDir, then nicpick runs it in the training image with
smoke.gpus GPUs, 0 meaning job.gpusPerPod, whether or not job.enabled (so
from another chart too: set smoke.gpus to what the training container
requests).  Only the container named nicpick mounts the API token.
*/}}
{{- define "nicpick.initContainer" -}}
{{- $v := .Values -}}
{{- $inTrain := eq $v.smoke.runIn "trainImage" -}}
{{- $gpus := int $v.smoke.gpus -}}
{{- if and $inTrain (eq $gpus 0) -}}
{{- $gpus = int $v.job.gpusPerPod -}}
{{- end -}}
{{- if $inTrain }}
- name: nicpick-install
  image: {{ include "nicpick.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  args: ["install", {{ $v.outDir | toJson }}]
  resources:
    {{- toYaml $v.resources | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: nicpick
      mountPath: {{ $v.outDir | toJson }}
{{- end }}
- name: nicpick
{{- if $inTrain }}
  image: {{ default $v.job.trainImage $v.smoke.trainImage | quote }}
  command: [{{ printf "%s/nicpick" $v.outDir | toJson }}]
{{- else }}
  image: {{ include "nicpick.image" . | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
{{- end }}
  args:
    {{- include "nicpick.selectArgs" . | nindent 4 }}
  env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NAMESPACE
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    {{- $expect := include "nicpick.expect" . | int }}
    {{- if gt $expect 0 }}
    - name: NICPICK_EXPECT
      value: {{ $expect | toString | quote }}
    {{- end }}
  resources:
    {{- $res := deepCopy $v.resources }}
    {{- if gt $gpus 0 }}
    {{- $lim := default dict $res.limits }}
    {{- $_ := set $lim $v.smoke.gpuResource $gpus }}
    {{- $_ := set $res "limits" $lim }}
    {{- end }}
    {{- toYaml $res | nindent 4 }}
  securityContext:
    {{- if $inTrain }}
    {{- toYaml (omit $v.securityContext "runAsUser" "runAsGroup") | nindent 4 }}
    {{- else }}
    {{- toYaml $v.securityContext | nindent 4 }}
    {{- end }}
  volumeMounts:
    - name: nicpick
      mountPath: {{ $v.outDir | toJson }}
    - name: nicpick-token
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
    {{- if $inTrain }}
    - name: nicpick-tmp
      mountPath: /tmp
    {{- end }}
{{- end -}}

{{/*
nicpick.volumes: the shared emptyDir, the API token for nicpick's init
container alone (the files nicpick reads from
/var/run/secrets/kubernetes.io/serviceaccount: token, ca.crt, namespace),
and /tmp for the smoke step.  Pair with automountServiceAccountToken: false.
*/}}
{{- define "nicpick.volumes" -}}
- name: nicpick
  emptyDir: {}
- name: nicpick-token
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - {key: ca.crt, path: ca.crt}
      - downwardAPI:
          items:
            - path: namespace
              fieldRef: {fieldPath: metadata.namespace}
{{- if eq .Values.smoke.runIn "trainImage" }}
- name: nicpick-tmp
  emptyDir: {}
{{- end }}
{{- end -}}

{{/*
nicpick.trainEnv: env items for the training container: NCCL_CONF_FILE,
set beside the command's `. OUTDIR/nccl.env` (job.yaml).  NCCL reads
NCCL_CONF_FILE only from 2.23.4 (src/misc/param.cc, v2.23.4-1), so the
file alone is not enough on older NCCL (PyTorch 2.5/2.6 CUDA 12.4 wheels
ship 2.21.5); sourcing nccl.env works on every NCCL.
nicpick.trainVolumeMounts: the matching read-only mount.
*/}}
{{- define "nicpick.trainEnv" -}}
- name: NCCL_CONF_FILE
  value: {{ printf "%s/nccl.conf" .Values.outDir | toJson }}
{{- end -}}

{{- define "nicpick.trainVolumeMounts" -}}
- name: nicpick
  mountPath: {{ .Values.outDir | toJson }}
  readOnly: true
{{- end -}}

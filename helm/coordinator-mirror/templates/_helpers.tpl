{{/* Names and labels ------------------------------------------------------------------------ */}}
{{- define "cm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cm.fullname" -}}
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

{{- define "cm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cm.labels" -}}
helm.sh/chart: {{ include "cm.chart" . }}
{{ include "cm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: coordinator-mirror
{{- end -}}

{{/* The pods serving the API and /metrics: the Deployment's pod, or the SparkApplication's
driver (Spark labels it spark-role=driver; executors carry the same app labels). */}}
{{- define "cm.podSelectorLabels" -}}
{{ include "cm.selectorLabels" . }}
{{- if eq .Values.mode "sparkApplication" }}
spark-role: driver
{{- else }}
app.kubernetes.io/component: mirror
{{- end }}
{{- end -}}

{{- define "cm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "cm.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Paths inside the image and the pod (docker/ and the Dockerfile define the image side). */}}
{{- /* Siblings, never nested: a mount point inside the read-only ConfigMap volume cannot be
created, so the Secrets are not mounted below the settings' directory. */ -}}
{{- define "cm.settingsDir" -}}/etc/coordinator-mirror/config{{- end -}}
{{- define "cm.secretsDir" -}}/etc/coordinator-mirror/secrets{{- end -}}
{{- define "cm.httpTlsDir" -}}/etc/coordinator-mirror/http-tls{{- end -}}
{{- define "cm.httpAuthDir" -}}/etc/coordinator-mirror/http-auth{{- end -}}
{{- define "cm.httpScheme" -}}{{ if .Values.httpSecurity.tlsSecretName }}HTTPS{{ else }}HTTP{{ end }}{{- end -}}
{{- define "cm.settingsPath" -}}{{ include "cm.settingsDir" . }}/settings.yaml{{- end -}}
{{- define "cm.localDirs" -}}/var/lib/spark/local{{- end -}}
{{- define "cm.home" -}}/home/mirror{{- end -}}
{{- define "cm.connectorClasspath" -}}
/opt/coordinator-mirror/jars/spark-kafka-{{ .Values.sparkApplication.sparkVersion }}/*
{{- end -}}

{{/* A checkpoint (or events) location on the pod's file system rather than a Hadoop URI. */}}
{{- define "cm.isLocalPath" -}}
{{- if or (hasPrefix "file:" .) (not (regexMatch "^[a-zA-Z][a-zA-Z0-9+.-]*://" .)) -}}true{{- end -}}
{{- end -}}

{{- define "cm.localPath" -}}
{{- regexReplaceAll "^file:(//)?" . "" -}}
{{- end -}}

{{/* Fail early, naming the value, on combinations that would deploy a broken or unsafe mirror. */}}
{{- define "cm.validate" -}}
{{- $s := .Values.settings -}}
{{- if and (eq (default "kafka" $s.source) "kafka") (not $s.bootstrap_servers) (not $s.clusters) -}}
{{- fail "settings.bootstrap_servers is required when settings.source is kafka (or settings.clusters)" -}}
{{- end -}}
{{- if not $s.http_port -}}
{{- fail "settings.http_port must be a fixed port (not 0): probes, Services and Prometheus use it" -}}
{{- end -}}
{{- if has (default "" $s.http_host) (list "127.0.0.1" "localhost" "::1") -}}
{{- fail (printf "settings.http_host %s is unreachable from probes, Services and Prometheus; use 0.0.0.0" $s.http_host) -}}
{{- end -}}
{{- /* Secrets never inline: Kafka's password-typed options, and Hadoop/Spark credentials. */ -}}
{{- $where := dict "settings" $s -}}
{{- range $i, $c := ($s.clusters | default list) -}}
{{- $_ := set $where (printf "settings.clusters[%d]" $i) $c -}}
{{- end -}}
{{- range $prefix, $m := $where -}}
{{- range $setting := list "kafka_options" "output_kafka_options" -}}
{{- range $option, $_ := (get $m $setting | default dict) -}}
{{- if regexMatch "(?i)(password|passphrase|secret|jaas)|^ssl\\.keystore\\.key$" $option -}}
{{- fail (printf "%s.%s.%s looks like a secret: values must not carry secrets inline; reference a key of an existing Secret with kafkaSecretOptions (option: %s)" $prefix $setting $option $option) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $where, $conf := dict "settings.spark_conf" ($s.spark_conf | default dict) "sparkApplication.sparkConf" (.Values.sparkApplication.sparkConf | default dict) "objectStore.hadoopConf" (.Values.objectStore.hadoopConf | default dict) -}}
{{- range $key, $_ := $conf -}}
{{- if regexMatch "(?i)(password|secret|token|access\\.key|account\\.key)" $key -}}
{{- fail (printf "%s.%s looks like a credential: values must not carry secrets inline; use objectStore.credentialsSecret, extraEnv with secretKeyRef or secretMounts" $where $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $auth := .Values.httpSecurity.auth -}}
{{- if and (ne $auth.type "none") (not $auth.secretName) -}}
{{- fail (printf "httpSecurity.auth.secretName is required with httpSecurity.auth.type %s (an existing Secret; the credentials never go into values)" $auth.type) -}}
{{- end -}}
{{- if and (ne $auth.type "none") (eq (toString $s.http_open_probes) "false") -}}
{{- fail "settings.http_open_probes is false with httpSecurity.auth on: the kubelet's probes carry no credentials and would fail" -}}
{{- end -}}
{{- range $name := list "http_tls_cert_file" "http_tls_key_file" "http_auth_token_file" "http_basic_auth_file" -}}
{{- if get $s $name -}}
{{- fail (printf "settings.%s is set by the chart from httpSecurity (a mounted Secret): leave it null" $name) -}}
{{- end -}}
{{- end -}}
{{- $checkpoint := $s.checkpoint_location | default "" -}}
{{- if eq .Values.mode "sparkApplication" -}}
{{- if not (regexMatch "^(s3a|gs|abfss?)://[^/]+" $checkpoint) -}}
{{- fail (printf "settings.checkpoint_location %q: sparkApplication mode needs an object-store URI (s3a://, gs://, abfs:// or abfss://): the executors write the state store, and every one of them must reach the checkpoint" $checkpoint) -}}
{{- end -}}
{{- if $s.events_path -}}
{{- fail "settings.events_path is a directory on the driver's local disk, lost with the driver pod in sparkApplication mode; use settings.events_topic" -}}
{{- end -}}
{{- else -}}
{{- $mount := trimSuffix "/" .Values.persistence.mountPath -}}
{{- if include "cm.isLocalPath" $checkpoint -}}
{{- if not .Values.persistence.enabled -}}
{{- fail (printf "settings.checkpoint_location %q is a local path but persistence.enabled is false: the checkpoint would be lost with the pod (enable persistence or use an object-store URI)" $checkpoint) -}}
{{- end -}}
{{- if not (hasPrefix (printf "%s/" $mount) (include "cm.localPath" $checkpoint)) -}}
{{- fail (printf "settings.checkpoint_location %q must be under persistence.mountPath %s (the PersistentVolumeClaim)" $checkpoint $mount) -}}
{{- end -}}
{{- if not (hasPrefix "local" ($s.spark_master | default "local")) -}}
{{- fail (printf "settings.spark_master %q: a checkpoint on the pod's volume needs local mode (local[N]); executors elsewhere cannot reach it (use mode: sparkApplication with an object-store checkpoint)" $s.spark_master) -}}
{{- end -}}
{{- end -}}
{{- if $s.events_path -}}
{{- if not (and .Values.persistence.enabled (hasPrefix (printf "%s/" $mount) (toString $s.events_path))) -}}
{{- fail (printf "settings.events_path %q must be under persistence.mountPath %s with persistence enabled (the root file system is read-only and emptyDirs are lost with the pod)" (toString $s.events_path) $mount) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The settings file: .Values.settings plus what the mode requires (see values.yaml). */}}
{{- define "cm.settingsFile" -}}
{{- $s := deepCopy .Values.settings -}}
{{- $chartConf := dict -}}
{{- if eq .Values.mode "sparkApplication" -}}
{{- if hasPrefix "local" ($s.spark_master | default "local") -}}
{{- $_ := set $s "spark_master" "k8s://https://kubernetes.default.svc:443" -}}
{{- end -}}
{{- else -}}
{{- if .Values.deployment.driverMemory -}}
{{- $_ := set $chartConf "spark.driver.memory" .Values.deployment.driverMemory -}}
{{- end -}}
{{- range $key, $value := .Values.objectStore.hadoopConf -}}
{{- $_ := set $chartConf (printf "spark.hadoop.%s" $key) (toString $value) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $s "spark_conf" (merge (deepCopy ($s.spark_conf | default dict)) $chartConf) -}}
{{- with .Values.httpSecurity.tlsSecretName -}}
{{- $_ := set $s "http_tls_cert_file" (printf "%s/tls.crt" (include "cm.httpTlsDir" $)) -}}
{{- $_ := set $s "http_tls_key_file" (printf "%s/tls.key" (include "cm.httpTlsDir" $)) -}}
{{- end -}}
{{- $auth := .Values.httpSecurity.auth -}}
{{- if ne $auth.type "none" -}}
{{- $_ := set $s (ternary "http_auth_token_file" "http_basic_auth_file" (eq $auth.type "bearer")) (printf "%s/%s" (include "cm.httpAuthDir" .) $auth.key) -}}
{{- end -}}
{{- toYaml $s -}}
{{- end -}}

{{/* Environment: secret Kafka options, object-store credentials, then the user's extras. */}}
{{- define "cm.env" -}}
{{- range .Values.kafkaSecretOptions }}
{{- if .cluster }}
- name: {{ printf "CM_CLUSTERS__%s__%s__%s" (regexReplaceAll "[^A-Za-z0-9]" .cluster "_" | upper) (upper (default "kafka_options" .setting)) (.option | replace "." "_" | upper) }}
{{- else }}
- name: {{ printf "CM_%s__%s" (upper (default "kafka_options" .setting)) (.option | replace "." "_" | upper) }}
{{- end }}
  valueFrom:
    secretKeyRef:
      name: {{ required "kafkaSecretOptions[].secretName is required" .secretName }}
      key: {{ required "kafkaSecretOptions[].key is required" .key }}
{{- end }}
{{- include "cm.objectStoreEnv" . }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "cm.executorEnv" -}}
{{- include "cm.objectStoreEnv" . }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "cm.objectStoreEnv" -}}
{{- with .Values.objectStore.credentialsSecret }}
{{- if .name }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .accessKeyIdKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .secretAccessKeyKey }}
{{- if .sessionTokenKey }}
- name: AWS_SESSION_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ .sessionTokenKey }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Volumes every pod of the mirror mounts: settings, scratch, secrets, extras. The root file
system is read-only: /tmp (JVM, Python, py4j), and the home directory (the working directory and
Ivy's cache when settings.spark_packages is used) are emptyDirs. */}}
{{- define "cm.commonVolumes" -}}
- name: settings
  configMap:
    name: {{ include "cm.fullname" . }}-settings
- name: tmp
  emptyDir: {}
- name: home
  emptyDir: {}
{{- with .Values.httpSecurity.tlsSecretName }}
- name: http-tls
  secret:
    secretName: {{ . }}
    items: [{key: tls.crt, path: tls.crt}, {key: tls.key, path: tls.key}]
{{- end }}
{{- if ne .Values.httpSecurity.auth.type "none" }}
- name: http-auth
  secret:
    secretName: {{ .Values.httpSecurity.auth.secretName }}
    items: [{key: {{ .Values.httpSecurity.auth.key }}, path: {{ .Values.httpSecurity.auth.key }}}]
{{- end }}
{{- range .Values.secretMounts }}
- name: {{ printf "secret-%s" (required "secretMounts[].secretName is required" .secretName) | trunc 63 | trimSuffix "-" }}
  secret:
    secretName: {{ .secretName }}
    {{- with .items }}
    items:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "cm.commonVolumeMounts" -}}
- name: settings
  mountPath: {{ include "cm.settingsDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
- name: home
  mountPath: {{ include "cm.home" . }}
{{- if .Values.httpSecurity.tlsSecretName }}
- name: http-tls
  mountPath: {{ include "cm.httpTlsDir" . }}
  readOnly: true
{{- end }}
{{- if ne .Values.httpSecurity.auth.type "none" }}
- name: http-auth
  mountPath: {{ include "cm.httpAuthDir" . }}
  readOnly: true
{{- end }}
{{- range .Values.secretMounts }}
- name: {{ printf "secret-%s" .secretName | trunc 63 | trimSuffix "-" }}
  mountPath: {{ default (printf "%s/%s" (include "cm.secretsDir" $) .secretName) .mountPath }}
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* A probe from values, its httpGet switched to HTTPS when the endpoint serves TLS. */}}
{{- define "cm.probe" -}}
{{- $root := index . 0 -}}
{{- $probe := deepCopy (index . 1) -}}
{{- if and $probe.httpGet $root.Values.httpSecurity.tlsSecretName -}}
{{- $_ := set $probe.httpGet "scheme" "HTTPS" -}}
{{- end -}}
{{- toYaml $probe -}}
{{- end -}}

{{/* Monitoring -------------------------------------------------------------------------------- */}}
{{/* The job label of the mirror's scrape targets, chosen once: the metrics Service carries it as
its `jobLabel` label, the ServiceMonitor's spec.jobLabel makes the Prometheus Operator use it as
`job`, and the PrometheusRule's CoordinatorMirrorDown selects `up{job=...}` with it. */}}
{{- define "cm.job" -}}
{{- default (include "cm.fullname" .) .Values.serviceMonitor.job -}}
{{- end -}}

{{/* The matchers of the mirror's own `up` series: the job, and -- when the chart's ServiceMonitor
scrapes it -- the namespace the Prometheus Operator labels its targets with. */}}
{{- define "cm.upMatchers" -}}
job="{{ include "cm.job" . }}"{{ if .Values.serviceMonitor.enabled }},namespace="{{ .Release.Namespace }}"{{ end }}
{{- end -}}

{{/* A threshold as the rules file writes it: an integer without a decimal point. */}}
{{- define "cm.number" -}}
{{- if kindIs "string" . -}}{{ . }}
{{- else if eq (float64 .) (float64 (int64 .)) -}}{{ int64 . }}
{{- else -}}{{ float64 . }}
{{- end -}}
{{- end -}}

{{/* A Prometheus duration (1h30m, 15m, 500ms) in whole seconds. */}}
{{- define "cm.durationSeconds" -}}
{{- $units := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 "d" 86400.0 "w" 604800.0 "y" 31536000.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(ms|s|m|h|d|w|y)" (toString .) -1 -}}
{{- $n := regexFind "^[0-9]+" . -}}
{{- $total = addf $total (mulf (float64 $n) (get $units (trimPrefix $n .))) -}}
{{- end -}}
{{- int64 $total -}}
{{- end -}}

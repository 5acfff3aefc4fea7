{{/*
Labels of every object: app.kubernetes.io/name=olmguard is how `kubectl olmguard uninstall` finds
olmguard's Deployments and webhook configurations, so commonLabels cannot replace it.
*/}}
{{- define "olmguard.labels" -}}
{{- range $k, $_ := .Values.commonLabels }}
{{- if has $k (list "app.kubernetes.io/name" "app.kubernetes.io/component" "app.kubernetes.io/part-of") }}
{{- fail (printf "commonLabels: %s is olmguard's own label (kubectl olmguard uninstall finds olmguard's objects by app.kubernetes.io/name=olmguard)" $k) }}
{{- end }}
{{- end -}}
app.kubernetes.io/name: olmguard
app.kubernetes.io/part-of: olmguard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of one component's objects and pods. */}}
{{- define "olmguard.componentLabels" -}}
{{ include "olmguard.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The selector of one component's pods: fixed, since a Deployment's selector cannot change. */}}
{{- define "olmguard.selector" -}}
app.kubernetes.io/name: olmguard
app.kubernetes.io/component: {{ . }}
{{- end }}

{{/* The image of both binaries: a digest wins over the tag; the tag defaults to appVersion. */}}
{{- define "olmguard.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
Pod scheduling of one component (.values: .Values.webhook or .Values.controller): its node
selector, tolerations, priority class and affinity; an empty affinity spreads the replicas across
nodes.
*/}}
{{- define "olmguard.scheduling" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
{{- if .values.affinity }}
  {{- toYaml .values.affinity | nindent 2 }}
{{- else }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "olmguard.selector" .component | nindent 14 }}
{{- end }}
{{- end }}

{{/* The container security context of both binaries: what Pod Security "restricted" requires. */}}
{{- define "olmguard.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end }}

{{/*
The namespaceSelector of every webhook: the namespaces the admission table excludes (.excluded,
written by `make manifests`), webhook.excludeNamespaces, and webhook.namespaceSelector.
*/}}
{{- define "olmguard.namespaceSelector" -}}
{{- $values := .root.Values.webhook -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  {{- toYaml (concat .excluded $values.excludeNamespaces | uniq) | nindent 2 }}
{{- with $values.namespaceSelector.matchExpressions }}
{{ toYaml . }}
{{- end }}
{{- with $values.namespaceSelector.matchLabels }}
matchLabels:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Annotations of the webhook configurations: cert-manager's cainjector fills their CA bundle. */}}
{{- define "olmguard.webhookConfigurationAnnotations" -}}
{{- if eq .Values.certificate.mode "certManager" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/olmguard-webhook
{{- end -}}
{{- end }}

{{/* The webhook's serving certificate Secret when it is mounted (certManager, existingSecret). */}}
{{- define "olmguard.certificateSecret" -}}
{{- if eq .Values.certificate.mode "certManager" -}}
olmguard-webhook-cert
{{- else if eq .Values.certificate.mode "existingSecret" -}}
{{ required "certificate.existingSecret.name is required with certificate.mode existingSecret" .Values.certificate.existingSecret.name }}
{{- end -}}
{{- end }}

{{/*
The controller's --controllers value: empty when every reconciler runs (the binary's default),
else the enabled ones.
*/}}
{{- define "olmguard.reconcilers" -}}
{{- $r := .Values.controller.reconcilers -}}
{{- $on := list -}}
{{- range $name, $key := dict "installplan-owners" "installPlanOwners" "subscription-drift" "subscriptionDrift" "csv-cleanup" "csvCleanup" "unpack-jobs" "unpackJobs" "catalog-pods" "catalogPods" "olm-audit" "olmAudit" "webhook-probe" "webhookProbe" -}}
{{- if index $r $key }}{{ $on = append $on $name }}{{ end -}}
{{- end -}}
{{- if not $on }}{{ fail "controller.reconcilers: enable at least one reconciler" }}{{ end -}}
{{- if lt (len $on) (len $r) }}{{ join "," (sortAlpha $on) }}{{ end -}}
{{- end }}

{{/*
The namespaces olmguard refuses to share unless allowSharedNamespace is true: Kubernetes' own and
OLM's. olmguard's Roles, NetworkPolicy and webhook exclusions there would reach other workloads
(the release namespace is never sent to the webhook, so OLM's own writes there would go unguarded).
*/}}
{{- define "olmguard.sharedNamespaces" -}}
{{ list "kube-system" "kube-public" "kube-node-lease" "olm" "operator-lifecycle-manager" "openshift-operator-lifecycle-manager" "openshift-marketplace" "openshift-operators" "operators" | toJson }}
{{- end }}

{{/* Fails the render in a shared namespace unless allowSharedNamespace is set. */}}
{{- define "olmguard.checkNamespace" -}}
{{- if and (has .Release.Namespace (include "olmguard.sharedNamespaces" . | fromJsonArray)) (not .Values.allowSharedNamespace) }}
{{- fail (printf "namespace %s is shared with Kubernetes' or OLM's own workloads: install olmguard into a namespace of its own (olmguard-system), or set allowSharedNamespace=true to install there anyway" .Release.Namespace) }}
{{- end }}
{{- end }}

{{/*
Labels of every object: app.kubernetes.io/name=olmguard is how `kubectl olmguard uninstall` finds
olmguard's Deployments and webhook configurations, so commonLabels cannot replace it.
*/}}
{{- define "olmguard.labels" -}}
{{- range $k, $_ := .Values.commonLabels }}
{{- if has $k (include "olmguard.ownLabels" $ | fromJsonArray) }}
{{- fail (printf "commonLabels: %s is olmguard's own label (kubectl olmguard uninstall finds olmguard's objects by app.kubernetes.io/name=olmguard)" $k) }}
{{- end }}
{{- end -}}
app.kubernetes.io/name: olmguard
app.kubernetes.io/part-of: olmguard
{{ include "olmguard.helmLabels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Helm's standard labels. `make manifests` leaves helm.sh/chart, app.kubernetes.io/managed-by and
app.kubernetes.io/version out of the kustomize tree (charts.KustomizeDropsLabels): kubectl apply -k
is not a Helm release, and its image (so its version) may be changed by an overlay.
*/}}
{{- define "olmguard.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | replace "+" "_" | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
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

{{/*
The image of both binaries: a digest wins over the tag; the tag defaults to appVersion. A registry
(image.registry, else global.imageRegistry) replaces the repository's registry host (its first
path element when that has a dot or a port, or is localhost) or, without one, is put before it.
*/}}
{{- define "olmguard.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $registry := .Values.image.registry | default (dig "imageRegistry" "" (.Values.global | default dict)) | trimSuffix "/" -}}
{{- if $registry -}}
{{- $parts := splitList "/" $repo -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $repo = rest $parts | join "/" -}}
{{- end -}}
{{- $repo = printf "%s/%s" $registry $repo -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{ $repo }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repo }}:{{ .Values.image.tag | default .Chart.AppVersion }}
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
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
{{- $c := . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $c = merge (dict "labelSelector" (dict "matchLabels" (include "olmguard.selector" $.component | fromYaml))) $c }}
{{- end }}
  - {{ toYaml $c | nindent 4 | trim }}
{{- end }}
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

{{/*
The metadata of one component's pod template (.values: .Values.webhook or .Values.controller): the
component's labels and its podLabels, which may not replace olmguard's own labels (the selector's
among them: a Deployment whose pods lose a selector label owns none), and its podAnnotations.
*/}}
{{- define "olmguard.podMetadata" -}}
{{- range $k, $_ := .values.podLabels }}
{{- if has $k (include "olmguard.ownLabels" $.root | fromJsonArray) }}
{{- fail (printf "%s.podLabels: %s is olmguard's own label (the Deployment selects its pods by app.kubernetes.io/name and component)" $.component $k) }}
{{- end }}
{{- end -}}
labels:
  {{- include "olmguard.componentLabels" (dict "root" .root "component" .component) | nindent 2 }}
  {{- with .values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The labels commonLabels and podLabels may not set: olmguard's own and Helm's standard ones. */}}
{{- define "olmguard.ownLabels" -}}
{{ list "app.kubernetes.io/name" "app.kubernetes.io/component" "app.kubernetes.io/part-of" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "helm.sh/chart" | toJson }}
{{- end }}

{{/* The container security context of both binaries (containerSecurityContext): by default what
Pod Security "restricted" requires, and the schema keeps it so. */}}
{{- define "olmguard.containerSecurityContext" -}}
{{ toYaml .Values.containerSecurityContext }}
{{- end }}

{{/* Further environment variables of one container (.values.extraEnv), after GOMEMLIMIT. */}}
{{- define "olmguard.extraEnv" -}}
{{- range .extraEnv }}
{{- if eq .name "GOMEMLIMIT" }}
{{- fail "extraEnv: GOMEMLIMIT is set by the chart from the memory limit" }}
{{- end }}
{{- end }}
{{- with .extraEnv }}{{ toYaml . }}{{ end }}
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

{{/*
Annotations of the webhook configurations: webhook.configurationAnnotations (e.g. AKS's
admissions.enforcer/disabled), and in the certManager mode the one by which cert-manager's
cainjector fills their CA bundle, which they may not replace.
*/}}
{{- define "olmguard.webhookConfigurationAnnotations" -}}
{{- $a := .Values.webhook.configurationAnnotations | default dict -}}
{{- if hasKey $a "cert-manager.io/inject-ca-from" -}}
{{- fail "webhook.configurationAnnotations: cert-manager.io/inject-ca-from is the chart's (certificate.mode certManager)" -}}
{{- end -}}
{{- $a = deepCopy $a -}}
{{- if eq .Values.certificate.mode "certManager" -}}
{{- $_ := set $a "cert-manager.io/inject-ca-from" (printf "%s/olmguard-webhook" .Release.Namespace) -}}
{{- end -}}
{{- with $a }}{{ toYaml . }}{{ end -}}
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

{{/* Fails the render in a shared namespace unless allowSharedNamespace is set, on a
fullnameOverride other than olmguard's own name, and when two of the webhook's ports are one. */}}
{{- define "olmguard.checkNamespace" -}}
{{- $w := .Values.webhook }}
{{- if ne (list $w.port $w.metricsPort $w.probePort | uniq | len) 3 }}
{{- fail (printf "webhook.port %v, webhook.metricsPort %v and webhook.probePort %v must differ" $w.port $w.metricsPort $w.probePort) }}
{{- end }}
{{- if not (has .Values.fullnameOverride (list "" "olmguard")) }}
{{- fail (printf "fullnameOverride %q: olmguard's object names are fixed (its binaries, kubectl olmguard, its alerts and the webhook configurations use them; charts/olmguard/README.md, \"Names that stay fixed\"): leave it empty" .Values.fullnameOverride) }}
{{- end }}
{{- if and (has .Release.Namespace (include "olmguard.sharedNamespaces" . | fromJsonArray)) (not .Values.allowSharedNamespace) }}
{{- fail (printf "namespace %s is shared with Kubernetes' or OLM's own workloads: install olmguard into a namespace of its own (olmguard-system), or set allowSharedNamespace=true to install there anyway" .Release.Namespace) }}
{{- end }}
{{- end }}

{{/*
The disruption budget of one component's PodDisruptionBudget (.values.podDisruptionBudget):
minAvailable or maxUnavailable, not both; neither: minAvailable 1.
*/}}
{{- define "olmguard.disruptionBudget" -}}
{{- $pdb := .values.podDisruptionBudget | default dict -}}
{{- if and (hasKey $pdb "minAvailable") (hasKey $pdb "maxUnavailable") -}}
{{- fail (printf "%s.podDisruptionBudget: set minAvailable or maxUnavailable, not both" .component) -}}
{{- end -}}
{{- if hasKey $pdb "maxUnavailable" -}}
maxUnavailable: {{ $pdb.maxUnavailable | toJson }}
{{- else -}}
minAvailable: {{ hasKey $pdb "minAvailable" | ternary $pdb.minAvailable 1 | toJson }}
{{- end -}}
{{- end }}

{{/*
The labels of a hook's pod (.component: uninstall, test): not app.kubernetes.io/name=olmguard,
by which kubectl-olmguard uninstall finds the pods it waits to be gone (it would wait for its own
pod, or for a test pod left after a failed helm test).
*/}}
{{- define "olmguard.hookPodLabels" -}}
app.kubernetes.io/part-of: olmguard
app.kubernetes.io/component: {{ .component }}
{{ include "olmguard.helmLabels" .root }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The pod spec of a hook's Job or Pod (.root, .serviceAccount): the chart's image, pull secrets and
security contexts (Pod Security "restricted"), and the controller's scheduling and extraEnv.
.command is the container's command, .resources its resources.
*/}}
{{- define "olmguard.hookPodSpec" -}}
serviceAccountName: {{ .serviceAccount }}
restartPolicy: Never
{{- with .root.Values.controller.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.controller.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.controller.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: {{ .name }}
    image: {{ include "olmguard.image" .root }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    command:
      {{- toYaml .command | nindent 6 }}
    {{- with include "olmguard.extraEnv" .root.Values.controller }}
    env:
      {{- . | nindent 6 }}
    {{- end }}
    resources:
      {{- toYaml .resources | nindent 6 }}
    securityContext:
      {{- include "olmguard.containerSecurityContext" .root | nindent 6 }}
{{- end }}

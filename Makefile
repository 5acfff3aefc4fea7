# olmguard: `make demo` shows it fixing OLM's failures on a local cluster; `make test` runs every test.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -o pipefail -c
GO ?= go
BIN_DIR := $(shell hack/test-binaries.sh dir)
# Packages whose tests also run against OLM's real CRDs.
REAL_CRD_PKGS := ./test/olmsim/ ./pkg/setup/
TEST_ENV := OLMGUARD_BIN_DIR=$(BIN_DIR) KUBEBUILDER_ASSETS=$(BIN_DIR) OLMGUARD_REQUIRE_BINARIES=1

.PHONY: all build test binaries generate lint
all: build

# VERSION and COMMIT are stamped into every binary (--version): the newest v* tag describing HEAD,
# or v0.1.0-dev.<commit> before the first release.
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.1.0-dev.$$(git rev-parse --short HEAD 2>/dev/null || echo unknown))
LDFLAGS := -X github.com/olmguard/olmguard/internal/version.version=$(VERSION) -X github.com/olmguard/olmguard/internal/version.commit=$(COMMIT)

# bin/kubectl_complete-olmguard: kubectl's completion of `kubectl olmguard ...` (kubectl v1.26+)
# runs it; the plugin answers by the name it was started as.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...
	ln -sf kubectl-olmguard bin/kubectl_complete-olmguard

## dist: the release artifacts in dist/: the binaries for linux and darwin on amd64 and arm64 and
## the kubectl plugin for windows/amd64 (kubectl-olmguard.exe), stamped with VERSION and COMMIT,
## the kubectl plugin's archives and krew manifest
## (dist/krew/olmguard.yaml), the image archives for linux/amd64 and linux/arm64, the rendered
## manifests, the packaged Helm chart (dist/olmguard-<version without v>.tgz), the multi-arch image
## index (dist/olmguard-image-<version>.oci.tar) and the chart as an OCI artifact
## (dist/olmguard-chart-<version without v>.oci.tar), both OCI layouts to push with skopeo or oras,
## an SPDX SBOM (dist/olmguard-<version>.spdx.json, dated by SOURCE_DATE_EPOCH or the commit), and
## SHA256SUMS.
## PLATFORMS=linux/amd64 builds one platform only.
.PHONY: dist
dist:
	$(GO) run ./hack/dist -o dist -version $(VERSION) -commit $(COMMIT) $(if $(PLATFORMS),-platforms $(PLATFORMS))

## binaries: build the test binaries (kube-apiserver, etcd, kwok, ...) once per machine, cached outside the clone.
binaries:
	@hack/test-binaries.sh build >/dev/null

## generate: regenerate deepcopy code and olmguard's own OLM CRDs from pkg/olm, and the manifests.
generate: manifests
	$(GO) tool controller-gen object paths=./pkg/olm/... crd:crdVersions=v1 output:crd:dir=./pkg/olm/crds

## manifests: regenerate from their sources (charts.Generate): the Helm chart's webhook
## configurations (charts/olmguard/templates/webhook-configurations.yaml) from pkg/setup's admission
## table, then the kustomize tree (manifests/base, overlays, components) from the chart. The chart is
## the source of truth; a test (charts TestSync) fails when the two differ.
.PHONY: manifests
manifests:
	$(GO) run ./hack/manifests generate

## lint: gofmt, go vet, and golangci-lint (the version pinned in hack/versions.env, built once into
## the binary cache; linters in .golangci.yml) on the whole tree, tests included.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@lint=$$(hack/test-binaries.sh golangci-lint) && GOLANGCI_LINT_CACHE=$$(dirname $$(dirname $$lint))/../golangci-lint-cache $$lint run ./...

# OLM's published CRDs, when the checkout sits beside them (CI does), or OLM_CRDS=<dir>.
OLM_CRDS ?= $(wildcard $(CURDIR)/../shared/olm-crds)

## test: every tier (hack/test.sh), in four lanes side by side: kwok end to end; real OLM on each OLM
## build (and the hostile tenant); and, at a lower priority, lint (gofmt, go vet, golangci-lint), unit
## and envtest integration, the two-apiserver tier (test/ha), the simulator and the webhook paths
## again against OLM's real CRDs (when OLM_CRDS is set or ../shared/olm-crds exists), then the real
## node. Ends with a table of each tier's wall time.
test: binaries
	$(TEST_ENV) OLM_CRDS=$(OLM_CRDS) REAL_CRD_PKGS="$(REAL_CRD_PKGS)" hack/test.sh

## cluster-up / cluster-down: a local kwok cluster (kube-apiserver, etcd, kube-controller-manager,
## kube-scheduler and fake nodes) from the cached binaries. Prints the kubeconfig path.
.PHONY: cluster-up cluster-down
cluster-up: binaries
	@OLMGUARD_BIN_DIR=$(BIN_DIR) hack/cluster.sh up $(CLUSTER)

cluster-down:
	@OLMGUARD_BIN_DIR=$(BIN_DIR) hack/cluster.sh down $(CLUSTER)

## demo: start a local cluster, replay OLM's failures without and with olmguard, print the results.
## The first run builds the test binaries (about 13 minutes on 2 cores, 3 of them promtool); later runs take about 6 minutes
## (3 with DEMO_FLAGS=--sim-only or without ../shared/olm).
.PHONY: demo
demo: binaries
	OLMGUARD_BIN_DIR=$(BIN_DIR) $(GO) run ./test/demo $(DEMO_FLAGS)

## test-realnode: the real-node tier alone: a kubelet with containerd beside the local cluster,
## olmguard installed on it with the README's kubectl apply -k (needs root; installs the Debian
## packages it needs with apt-get when missing).
.PHONY: test-realnode
test-realnode: binaries
	hack/install-node-packages.sh
	hack/test-binaries.sh kubelet >/dev/null
	$(TEST_ENV) $(GO) test -count=1 -p 1 -timeout 20m -v ./test/node/ ./test/realnode/

## bench-realnode: docs/performance.md's figures of olmguard in its pods: each container's cgroup
## working set idle and under 20,000 admissions, and the latency the webhook adds through the
## kube-apiserver (3,000 InstallPlan creates each way). Output in bench/realnode.txt.
.PHONY: bench-realnode
bench-realnode: binaries
	hack/install-node-packages.sh
	hack/test-binaries.sh kubelet >/dev/null
	@mkdir -p bench
	$(TEST_ENV) OLMGUARD_MEASURE_SCALE=10 $(GO) test -count=1 -timeout 40m -v -run 'TestInstallSelfSigned/in_its_pods_under_disruption/memory' ./test/realnode/ | grep -E 'RESULT|^(--- |ok|FAIL)' | tee bench/realnode.txt

## test-hostile: the hostile-tenant tier alone (issue 31), with the webhook authenticating the
## kube-apiserver as make test runs it (OLMGUARD_HOSTILE_CLIENT_AUTH=0: default flags); RUN=<regexp> picks tests.
.PHONY: test-hostile
test-hostile: binaries
	$(TEST_ENV) OLMGUARD_HOSTILE_CLIENT_AUTH=$${OLMGUARD_HOSTILE_CLIENT_AUTH:-1} $(GO) test -count=1 -timeout 20m -v -run '$(RUN)' ./test/hostile/

## test-realolm: the real-OLM tier alone (OLM's own operators, ../shared/olm; OLMGUARD_OLM_VERSION);
## RUN=<regexp> picks tests, e.g. make test-realolm RUN=TestF3.
.PHONY: test-realolm
test-realolm: binaries
	$(TEST_ENV) $(GO) test -count=1 -timeout 30m -v -run '$(RUN)' ./test/realolm/tier/

## OLM_BUILDS: the OLM builds of ../shared/olm the real-OLM tier runs on (upstream and OpenShift's).
OLM_BUILDS ?= v0.46.0 openshift-4.16 openshift-4.18 openshift-4.20
## REALOLM_RESULTS: where the real-OLM tier records each scenario's result per build (make test too).
REALOLM_RESULTS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/olmguard/realolm-results

## test-realolm-all: every scenario on every build of OLM_BUILDS, one build after another (make
## test runs every scenario on v0.46.0 and openshift-4.20 and the core ones on 4.16 and 4.18), then
## prints the support matrix of the results.
.PHONY: test-realolm-all
test-realolm-all: binaries
	@rm -rf '$(REALOLM_RESULTS)'; failed=0; for b in $(OLM_BUILDS); do \
	  echo "== real OLM $$b"; \
	  $(TEST_ENV) OLMGUARD_OLM_VERSION=$$b OLMGUARD_REALOLM_ALL=1 OLMGUARD_REALOLM_RESULTS='$(REALOLM_RESULTS)' $(GO) test -count=1 -timeout 40m -run '$(RUN)' ./test/realolm/tier/ || failed=1; \
	done; $(GO) run ./hack/supportmatrix '$(REALOLM_RESULTS)'; exit $$failed

## support-matrix: write README.md's support matrix (and docs/support-matrix.jsonl) from the
## results of the last make test or make test-realolm-all (REALOLM_RESULTS).
.PHONY: support-matrix
support-matrix:
	$(GO) run ./hack/supportmatrix -write '$(REALOLM_RESULTS)'

## e2e-long: the long end-to-end runs: stock OLM's catalog recovery (about six minutes), the webhook
## killed under 500 plans and CSVs, and 50 controller kills during cleanups (docs/reliability.md).
.PHONY: e2e-long
e2e-long: binaries
	$(TEST_ENV) OLMGUARD_LONG=1 $(GO) test -count=1 -timeout 60m -v -run 'Measure|TestWebhookKilledUnderLoad|TestControllerKilledDuringCleanup' ./test/e2e/

## image: build olmguard's container image (needs Docker). IMG=<repo:tag> to name it.
IMG ?= ghcr.io/olmguard/olmguard:dev
OVERLAY ?= self-signed
## image-archive: the same image without Docker, as an OCI archive, bin/olmguard-image.tar, named
## IMG (internal/image; a test keeps it and the Dockerfile in agreement).
.PHONY: image-archive
image-archive:
	$(GO) run ./hack/image -name $(IMG) -o bin/olmguard-image.tar

.PHONY: image deploy undeploy e2e-kind
image:
	docker build -t $(IMG) .

## deploy: install olmguard into the cluster of the current kubeconfig (kubectl needed):
## OVERLAY=self-signed (default) or cert-manager; IMG=<image>; COMPONENTS=servicemonitor,prometheusrule.
deploy:
	$(GO) run ./hack/manifests render -overlay $(OVERLAY) -image $(IMG) -components "$(COMPONENTS)" | kubectl apply --server-side -f -
	kubectl -n olmguard-system rollout status deploy/olmguard-webhook deploy/olmguard-controller --timeout=3m

## undeploy: free every CSV from olmguard's finalizer first (kubectl olmguard uninstall), then
## delete what deploy created.
undeploy: build
	bin/kubectl-olmguard uninstall --yes
	$(GO) run ./hack/manifests render -overlay $(OVERLAY) -image $(IMG) | kubectl delete --ignore-not-found -f -

## e2e-kind: for machines with Docker: a kind cluster with real OLM and cert-manager, olmguard
## deployed from a locally built image, then the end-to-end suite against it (hack/e2e-kind.sh).
e2e-kind:
	IMG=$(IMG) hack/e2e-kind.sh

## bench: the performance figures of docs/performance.md: admission handlers against full-decode
## baselines (6 runs, benchstat), the Subscription lookup and 2,000 InstallPlan creates and CSV
## updates per mode through a real kube-apiserver, with and without the webhook, interleaved, the
## F1 read (consistent against watch cache) on one and two apiservers, isolated and in bursts, a
## 1,000-operand cleanup, and the controller's peak memory with 2,000 CSVs of 500 KB, 10,000 Jobs
## and 5,000 Pods, and both processes' peak memory with 200 Subscriptions of 1 MiB in one namespace.
## About 35 minutes; output in bench/.
.PHONY: bench
bench: binaries
	@mkdir -p bench
	$(GO) test -run '^$$' -bench Admission -count 6 ./pkg/mutate/ | tee bench/admission.txt
	$(GO) tool benchstat -col /impl bench/admission.txt | tee bench/admission-benchstat.txt
	$(TEST_ENV) $(GO) test -run '^$$' -bench 'Load|Lookup' -benchtime 2000x -count 1 -timeout 40m ./pkg/setup/ | tee bench/load.txt
	$(GO) tool benchstat bench/load.txt | tee bench/load-benchstat.txt
	$(TEST_ENV) $(GO) test -run '^$$' -bench InstallPlanCreate -benchtime 300x -count 1 -timeout 40m ./test/ha/ | tee bench/f1-read.txt
	$(TEST_ENV) OLMGUARD_BENCH=1 $(GO) test -count=1 -v -timeout 60m -run 'TestMeasure(OperandCleanup|ControllerMemory|LargeSubscriptions)' ./test/e2e/ | grep -E 'RESULT|^(--- |ok|FAIL)' | tee bench/measure.txt

## bench-large-subscriptions: the webhook's and the controller's peak RSS with 200 Subscriptions of
## 1 MiB in one namespace, every policy enforced, each process at its pod's GOMEMLIMIT (also part
## of `make bench`). About 5 minutes; output in bench/large-subscriptions.txt.
.PHONY: bench-large-subscriptions
bench-large-subscriptions: binaries
	@mkdir -p bench
	$(TEST_ENV) OLMGUARD_BENCH=1 $(GO) test -count=1 -v -timeout 20m -run 'TestMeasureLargeSubscriptions' ./test/e2e/ | grep -E 'RESULT|decided=|^(--- |ok|FAIL)|_test.go' | tee bench/large-subscriptions.txt

## bench-scale: a kwok cluster of 2,000 namespaces (20,000 copied CSVs with a 40 KB alm-examples,
## 2,000 originals, 20,000 Subscriptions and InstallPlans, 10,000 Jobs, 5,000 Pods): the
## controller's peak RSS and cgroup working set at 2,000 and 20,000 copies, its time to caches
## synced, first reconcile pass, first audit and back to serving after a kill, doctor's wall time,
## peak and pages, and the webhook's admission p50/p99 with 200 Subscriptions in a namespace.
## SCALE_BEFORE (a commit; empty to skip) is built by hack/build-ref.sh and measured in the same
## run: by default the code before the controller's cache declarations (issue 32). About 25
## minutes; output in bench/scale.txt. SCALE_NAMESPACES=50 gives a quick rehearsal.
SCALE_BEFORE ?= 31583c4
SCALE_NAMESPACES ?= 2000
.PHONY: bench-scale
bench-scale: binaries
	@mkdir -p bench
	@before=""; if [ -n "$(SCALE_BEFORE)" ]; then before=$$(hack/build-ref.sh $(SCALE_BEFORE)) || exit 1; fi; \
	set -o pipefail; $(TEST_ENV) OLMGUARD_BENCH=1 OLMGUARD_SCALE_BEFORE_BIN=$$before OLMGUARD_SCALE_NAMESPACES=$(SCALE_NAMESPACES) \
	  $(GO) test -count=1 -v -timeout 180m -run 'TestMeasureScale' ./test/e2e/ 2>&1 | grep --line-buffered -E 'RESULT|scale_test.go|^(--- |ok|FAIL)' | tee bench/scale.txt

## fuzz: run every fuzz target for FUZZTIME each (default 2m); new crashers land in testdata/fuzz.
FUZZTIME ?= 2m
# Go minimizes each new interesting input for 60 s by default, with no execs meanwhile.
FUZZMINIMIZE ?= 5s
FUZZ_TARGETS := ./pkg/mutate:FuzzInstallPlanHandler ./pkg/mutate:FuzzJobHandler ./pkg/mutate:FuzzCSVHandler ./pkg/mutate:FuzzServiceAccountHandler ./pkg/mutate:FuzzWebhookProbeHandler \
	./pkg/validate:FuzzHandlers ./pkg/validate:FuzzOperatorGroupHandler ./pkg/validate:FuzzCatalogSourceHandler ./pkg/validate:FuzzCSVReplacesHandler ./pkg/review:FuzzFields ./pkg/webhook:FuzzReviewGuard \
	./internal/shellquote:FuzzQuote ./internal/printable:FuzzEscape ./internal/kubectlcmd:FuzzCommand
.PHONY: fuzz
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; echo "== $$fn ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg || exit 1; done

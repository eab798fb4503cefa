# hitl — Makefile. `make help` lists the targets.

# Pinned tool and control-plane versions (DEVELOPERS.md).
CONTROLLER_TOOLS_VERSION ?= v0.23.0
K8S_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.6.16
GOVULNCHECK_VERSION ?= v1.9.0
# The Go vulnerability database, as a version of the golang.org/x/vulndb module
# (`go list -m golang.org/x/vulndb@latest` names the newest).
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018

LOCALBIN ?= $(shell pwd)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOVULNCHECK ?= $(LOCALBIN)/govulncheck-$(GOVULNCHECK_VERSION)
VULNDB_DIR ?= $(LOCALBIN)/vulndb-$(VULNDB_VERSION)
ENVTEST_DIR ?= $(LOCALBIN)/k8s
# Flux's source-controller and kustomize-controller and their CRDs, for
# make test-gitops (hack/flux-assets.sh pins the versions).
FLUX_DIR ?= $(LOCALBIN)/flux
# The local SMTP server of the email tests (hack/mailpit.sh pins the version).
export MAILPIT ?= $(LOCALBIN)/mailpit
# The node binaries of make e2e-cluster (beside kube-apiserver, each stamped
# with its version), and the helm CLI it installs the chart with.
NODE_DIR ?= $(ENVTEST_DIR)
CLUSTER_HELM_VERSION ?= $(shell awk '$$1 == "helm.sh/helm/v4" {print $$2}' go.mod)
CLUSTER_HELM ?= $(LOCALBIN)/helm-$(CLUSTER_HELM_VERSION)

# The go commands of this Makefile build with at least the Go release named by
# go.mod's toolchain line (one with the security fixes), which the go command
# fetches from the module proxy when the installed Go is older, even where
# `go env` says GOTOOLCHAIN=local. Set GOTOOLCHAIN to override.
export GOTOOLCHAIN ?= auto

# Tests find kube-apiserver and etcd here.
export KUBEBUILDER_ASSETS := $(ENVTEST_DIR)

# Packages of `make test`: everything but the end-to-end and benchmark suites.
TEST_PKGS = $(shell go list ./... | grep -v -e /test/e2e -e /test/bench -e /test/browser -e /test/gitops -e /test/mcpclient)

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs, RBAC and webhook manifests under config/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate the DeepCopy methods of the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: test
test: manifests generate vet envtest-assets mailpit ## Run the unit and envtest suites.
	go test $(TEST_PKGS) -count=1 -coverprofile cover.out

.PHONY: model
model: manifests envtest-assets ## Drive the controller and the model of SPEC §1 with MODEL_OPS random operations (default 3000) and compare after each; MODEL_SEED replays a run.
	HITL_MODEL_OPS=$(or $(MODEL_OPS),3000) HITL_MODEL_SEED=$(MODEL_SEED) go test ./test/model -run '^TestModel$$' -count=1 -v -timeout 120m

.PHONY: test-e2e
test-e2e: build envtest-assets controller-manager ## Run the end-to-end suite: the real manager and kubectl hitl against the local control plane, then the web inbox in Chromium (test-browser).
	HITL_BIN=$(LOCALBIN) go test ./test/e2e -count=1 -v -timeout 15m
	$(MAKE) --no-print-directory test-browser

.PHONY: e2e-cluster
e2e-cluster: build image release envtest-assets node-assets cluster-helm ## Bring up a real single-node Kubernetes in a network namespace (hack/cluster), install hitl with the Helm chart and with dist/install.yaml, run test/cluster against the Pods, tear it all down (docs/real-node.md).
	@mkdir -p $(LOCALBIN)/cluster
	CGO_ENABLED=0 go build -trimpath -ldflags=-s -o $(LOCALBIN)/cluster/pause ./hack/cluster/pause
	CGO_ENABLED=0 go build -trimpath -ldflags=-s -o $(LOCALBIN)/cluster/agent ./test/e2e/agent
	go run ./hack/image --image hitl.local/pause:1 --out $(LOCALBIN)/cluster/pause.tar $(LOCALBIN)/cluster/pause
	go run ./hack/image --image hitl.local/e2e-agent:1 --out $(LOCALBIN)/cluster/agent.tar $(LOCALBIN)/cluster/agent
	go test -c -tags e2ecluster -o $(LOCALBIN)/cluster/cluster.test ./test/cluster
	NODE_BIN=$(NODE_DIR) ENVTEST_BIN=$(ENVTEST_DIR) HITL_BIN=$(LOCALBIN) HITL_IMAGE_ARCHIVE=$(LOCALBIN)/hitl-image.tar \
		HITL_HELM=$(CLUSTER_HELM) HITL_HELM_ARGS="--set image.repository=$(firstword $(subst :, ,$(IMG))) --set image.tag=$(lastword $(subst :, ,$(IMG)))" \
		HITL_INSTALL_YAML=$(shell pwd)/dist/install.yaml ./hack/cluster/e2e.sh

.PHONY: test-browser
test-browser: envtest-assets ## Drive the web inbox in headless Chromium (hack/chromium.sh installs Debian's chromium when missing); SCREENSHOTS=1 rewrites docs/images.
	CHROMIUM="$$(./hack/chromium.sh)" HITL_SCREENSHOTS=$(SCREENSHOTS) go test ./test/browser -count=1 -v -timeout 10m

.PHONY: test-mcp-client
test-mcp-client: envtest-assets ## Run test/mcpclient: the official TypeScript MCP SDK (npm ci by hack/mcpclient.sh) on its default 60 s request timeout asks through hitl-mcp and gets an answer given after 70 s (QUICK=1: max wait 5 s, answer after 8 s).
	./hack/mcpclient.sh
	HITL_MCPCLIENT_QUICK=$(QUICK) go test ./test/mcpclient/... -count=1 -v -timeout 10m

.PHONY: test-gitops
test-gitops: envtest-assets flux-assets ## Run test/gitops: hitl as it ships under a real Flux (source-controller, kustomize-controller) applying replies committed to a local Git server (hack/git.sh installs Debian's git when missing).
	./hack/git.sh
	FLUX_ASSETS=$(FLUX_DIR) go test ./test/gitops/... -v -count=1 -timeout 20m

.PHONY: bench-gitops
bench-gitops: envtest-assets flux-assets ## Measure an answer through Git, from `git push` to Settled, split into Flux's part and hitl's (N pushes, 50 unless given; figures in bin/bench/gitops.json).
	./hack/git.sh
	HITL_GITOPS_BENCH=$(or $(N),50) HITL_BENCH_OUT=$(LOCALBIN)/bench/gitops.json FLUX_ASSETS=$(FLUX_DIR) go test ./test/gitops/... -run TestGitOpsBench -v -count=1 -timeout 30m

.PHONY: bench
bench: build envtest-assets ## Measure hitl against the API server's own limit (QUICK=1 for a run of a few minutes; SCALE=100k for the scale mode alone: 100,000 questions across 1,000 namespaces).
	go run ./test/bench $(if $(QUICK),--quick) $(if $(SCALE),--scale $(SCALE)) --manager $(LOCALBIN)/manager --out $(LOCALBIN)/bench/$(if $(SCALE),scale-)results.json

.PHONY: chaos
chaos: build envtest-assets ## Run two leader-elected manager replicas under a mixed workload while killing, hanging and failing them over and restarting the API server, then check the recorded history (QUICK=1 for a 2-minute run; CHAOS_SEED replays a schedule).
	go run ./test/chaos $(if $(QUICK),--quick) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) --manager $(LOCALBIN)/manager --out $(LOCALBIN)/chaos

.PHONY: fuzz
fuzz: ## Fuzz the answer-batch and ask validators, the CLI's answer parsing and the admission webhooks' handlers, each target in turn for FUZZTIME (default 30s).
	for t in ./api/v1alpha1/validation:FuzzValidateAnswers ./api/v1alpha1/validation:FuzzValidateAsk ./internal/cli:FuzzAnswerFlags ./internal/cli:FuzzPromptBatch ./internal/admission:FuzzWebhookHandlers; do \
		echo "fuzzing $$t for $${FUZZTIME:-30s}"; \
		go test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $${FUZZTIME:-30s} || exit 1; \
	done

.PHONY: verify
verify: manifests generate chart apidocs ## Fail when regeneration or go mod tidy changes the tree.
	go mod tidy
	@if [ -n "$$(git status --porcelain -- api config charts docs/api go.mod go.sum)" ]; then \
		echo "verify: generated files or go.mod are out of date:"; git status --porcelain -- api config charts docs/api go.mod go.sum; \
		git --no-pager diff -- api config charts docs/api go.mod go.sum | head -50; exit 1; fi

.PHONY: vulncheck
vulncheck: govulncheck vulndb ## Report the known vulnerabilities the code reaches, offline, from the pinned database.
	$(GOVULNCHECK) -db file://$(VULNDB_DIR) ./...

##@ Build

.PHONY: build
build: ## Build the manager, kubectl-hitl, hitl-mcp, hitl-inbox and localcp into bin/.
	go build -o $(LOCALBIN)/manager ./cmd/manager
	go build -o $(LOCALBIN)/kubectl-hitl ./cmd/kubectl-hitl
	go build -o $(LOCALBIN)/hitl-mcp ./cmd/hitl-mcp
	go build -o $(LOCALBIN)/hitl-inbox ./cmd/hitl-inbox
	go build -o $(LOCALBIN)/hitl-notify ./cmd/hitl-notify
	go build -o $(LOCALBIN)/localcp ./hack/localcp

# A release's version (image tag, krew manifest, chart appVersion): the
# newest v* tag, else v0.1.0-dev. IMG is the image the manifests and `make
# image` name; ARCH the architecture `make image` builds for.
VERSION ?= $(shell git describe --tags --match 'v*' 2>/dev/null || echo v0.1.0-dev)
IMG ?= ghcr.io/hitl-dev/hitl:$(VERSION)
ARCH ?= $(shell go env GOARCH)
# File times and the image's creation time: the last commit's, so that one
# commit builds one image digest and one set of archive sums.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH

.PHONY: image
image: ## Build hitl's container image (manager, hitl-mcp, hitl-inbox) without Docker into bin/hitl-image.tar (IMG, ARCH); docker/podman load, ctr images import and kind take it.
	@mkdir -p $(LOCALBIN)/image/linux-$(ARCH)
	for b in manager hitl-mcp hitl-inbox; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) go build -trimpath -ldflags=-s -o $(LOCALBIN)/image/linux-$(ARCH)/$$b ./cmd/$$b || exit 1; \
	done
	go run ./hack/image --image $(IMG) --arch $(ARCH) --revision "$$(git rev-parse HEAD 2>/dev/null)" \
		--out $(LOCALBIN)/hitl-image.tar $(LOCALBIN)/image/linux-$(ARCH)/manager $(LOCALBIN)/image/linux-$(ARCH)/hitl-mcp $(LOCALBIN)/image/linux-$(ARCH)/hitl-inbox

.PHONY: apidocs
apidocs: ## Regenerate the API reference docs/api/reference.md from the CRDs.
	go run ./hack/apidocs

.PHONY: chart
chart: ## Regenerate the parts of charts/hitl that config/ says (CRDs, RBAC, admission policies, MCP server).
	go run ./hack/chart

.PHONY: release
release: ## Write dist/: install.yaml (config/default with IMG), kubectl-hitl archives for linux/darwin x amd64/arm64, checksums.txt, krew/hitl.yaml.
	go run ./hack/release --version $(VERSION) --image $(IMG) --out dist

.PHONY: run
run: build envtest-assets controller-manager ## Start a local control plane with the CRDs, admission (ADMISSION=policies, feedback or webhooks) and the manager (Ctrl-C stops everything).
	$(LOCALBIN)/localcp --write-kubeconfig $(LOCALBIN)/kubeconfig --manager $(LOCALBIN)/manager --admission $(or $(ADMISSION),policies)

##@ Dependencies

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $(CONTROLLER_GEN)

.PHONY: govulncheck
govulncheck: $(GOVULNCHECK) ## Install govulncheck into bin/.
$(GOVULNCHECK):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
	mv $(LOCALBIN)/govulncheck $(GOVULNCHECK)

.PHONY: vulndb
vulndb: $(VULNDB_DIR)/index/db.json ## Build the vulnerability database of golang.org/x/vulndb into bin/ (no network at check time).
$(VULNDB_DIR)/index/db.json:
	@mkdir -p $(LOCALBIN)
	rm -rf $(VULNDB_DIR) $(VULNDB_DIR).tmp
	osv="$$(go mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')/data/osv"; \
		go run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns "$$osv" -out $(VULNDB_DIR).tmp
	mv $(VULNDB_DIR).tmp $(VULNDB_DIR)

.PHONY: node-assets
node-assets: ## Put kube-controller-manager, kube-scheduler, kubelet and kube-proxy under bin/k8s (built from Go modules).
	K8S_VERSION=$(K8S_VERSION) ./hack/envtest-assets.sh --components $(NODE_DIR) kube-controller-manager kube-scheduler kubelet kube-proxy

.PHONY: controller-manager
controller-manager: ## Put kube-controller-manager under bin/k8s (built from Go modules) for localcp.
	K8S_VERSION=$(K8S_VERSION) ./hack/envtest-assets.sh --components $(ENVTEST_DIR) kube-controller-manager

.PHONY: cluster-helm
cluster-helm: $(CLUSTER_HELM) ## Build the helm CLI that make e2e-cluster installs the chart with into bin/.
# It is built in this module (go.mod's tool directive pins the version), so
# it shares the Kubernetes packages that make test already compiled for
# test/helm instead of compiling its own set.
$(CLUSTER_HELM):
	@mkdir -p $(LOCALBIN)
	go build -o $(CLUSTER_HELM) helm.sh/helm/v4/cmd/helm

.PHONY: flux-assets
flux-assets: ## Put Flux's source-controller and kustomize-controller and their CRDs under bin/flux (built from Go modules).
	./hack/flux-assets.sh $(FLUX_DIR)

.PHONY: mailpit
mailpit: ## Put mailpit, the SMTP server with an HTTP API that the email tests send to, at bin/mailpit (built from its Go module).
	./hack/mailpit.sh $(MAILPIT)

.PHONY: envtest-assets
envtest-assets: ## Put kube-apiserver and etcd under bin/k8s (download, or build from Go modules).
	K8S_VERSION=$(K8S_VERSION) ETCD_VERSION=$(ETCD_VERSION) ./hack/envtest-assets.sh $(ENVTEST_DIR)

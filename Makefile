# task-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

CONTROLLER_GEN := go tool controller-gen
CONTROLPLANE_BIN ?= $(CURDIR)/bin/controlplane
CLUSTER_DIR ?= $(CURDIR)/.cache/cluster
IMG ?= example.com/task-operator:latest
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# The commit time: images built from the same commit get the same digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
GOARCH ?= $(shell go env GOARCH)
LDFLAGS := -X example.com/task-operator/internal/version.version=$(VERSION) -X example.com/task-operator/internal/version.revision=$(REVISION)
IMAGE_DIR ?= $(CURDIR)/bin/image
GOLANGCI_LINT_VERSION ?= v2.15.0
TEST_TIMEOUT ?= 40m
export CONTROLPLANE_BIN

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object paths=./apis/...

.PHONY: manifests
manifests: ## Generate the CRD, RBAC roles and webhook configurations under config/ (and the chart's copies).
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) webhook paths=./webhook/... output:webhook:artifacts:config=config/webhook
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./reconciler/... paths=./webhook paths=./webhook/cert/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=task-operator-local-role paths=./webhook/local/... output:rbac:artifacts:config=config/local
	@# The Helm chart templates these generated files (and the alerts and dashboard) rather than copies of its own.
	cp config/crd/bases/example.com_tasks.yaml charts/task-operator/files/crd.yaml
	cp config/rbac/role.yaml charts/task-operator/files/role.yaml
	cp config/webhook/manifests.yaml charts/task-operator/files/webhooks.yaml
	cp config/prometheus/rules.yaml charts/task-operator/files/rules.yaml
	cp config/grafana/task-operator-dashboard.json charts/task-operator/files/dashboard.json

.PHONY: chart-docs
chart-docs: ## Write the Helm chart's README (its values table) from values.yaml and values.schema.json.
	go run ./hack/chart-docs --chart charts/task-operator

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet ## Run golangci-lint (built from the module proxy on first use).
	go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

.PHONY: build
build: ## Build bin/task-operator and the kubectl plugin bin/kubectl-task (--version, version say VERSION).
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/task-operator ./cmd/task-operator
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/kubectl-task ./cmd/kubectl-task

# Where install-plugin puts kubectl-task: PREFIX/bin if PREFIX is given, else GOBIN, else
# $(go env GOPATH)/bin. It must be on PATH for kubectl to find `kubectl task`.
PLUGIN_DIR ?= $(if $(PREFIX),$(PREFIX)/bin,$(or $(GOBIN),$(shell go env GOBIN),$(shell go env GOPATH)/bin))

.PHONY: install-plugin
install-plugin: build ## Install the kubectl plugin (kubectl task ...) into PREFIX/bin, else GOBIN, else GOPATH/bin.
	install -D -m 0755 bin/kubectl-task $(PLUGIN_DIR)/kubectl-task
	@echo "installed $(PLUGIN_DIR)/kubectl-task; with it on PATH: kubectl task --help"

.PHONY: controlplane
controlplane: ## Build (or reuse) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and Kueue.
	hack/controlplane.sh

.PHONY: test
test: controlplane image ## Run every test: unit, fuzz round trips, integration and e2e on a real control plane.
	gofmt_out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$gofmt_out" ]]; then echo "gofmt needed: $$gofmt_out"; exit 1; fi
	go vet ./...
	IMAGE_LAYOUT=$(IMAGE_DIR)/oci go test -timeout $(TEST_TIMEOUT) -count=1 ./...

.PHONY: fuzz
fuzz: ## Fuzz the converter and the conversion webhook: a count of inputs each (30-90 s here), or FUZZTIME each (30s, 100000x).
	@# A count, not a duration: a duration can end in a bare "context deadline exceeded" with no
	@# failing input (golang/go#75804, a race in Go's fuzzing coordinator).
	go test ./conversion/ -run '^$$' -fuzz '^FuzzConvert$$' -fuzztime $${FUZZTIME:-130000x}
	go test ./conversion/ -run '^$$' -fuzz '^FuzzInBytesAgreesWithTheTypedPath$$' -fuzztime $${FUZZTIME:-380000x}
	go test ./webhook/ -run '^$$' -fuzz '^FuzzConversionReview$$' -fuzztime $${FUZZTIME:-110000x}

##@ Local cluster

.PHONY: cluster-up
cluster-up: controlplane ## Start a local control plane in the background; prints export KUBECONFIG=...
	go run ./hack/cluster up --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the local control plane.
	go run ./hack/cluster down --dir $(CLUSTER_DIR)

.PHONY: run
run: controlplane build ## Run the operator on a local control plane with sample Tasks (QUEUES=1: and Kueue, with queued samples; Ctrl-C stops everything).
	QUEUES=$(QUEUES) hack/run.sh

##@ Deployment

.PHONY: image-binary
image-binary:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(IMAGE_DIR)/task-operator-linux-$(GOARCH) ./cmd/task-operator

.PHONY: plugin-binary
plugin-binary:
	CGO_ENABLED=0 GOOS=$(GOOS) GOARCH=$(GOARCH) go build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(PLUGIN_BUILD_DIR)/kubectl-task-$(GOOS)-$(GOARCH) ./cmd/kubectl-task

IMAGE_ARGS = --binary $(IMAGE_DIR)/task-operator-linux-$(GOARCH) --arch $(GOARCH) --tag $(IMG) --version $(VERSION) --revision $(REVISION)

.PHONY: image
image: image-binary ## Build the image IMG without a Docker engine: OCI layout bin/image/oci, docker-load tarball bin/image/task-operator.tar.
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/image $(IMAGE_ARGS) --layout $(IMAGE_DIR)/oci --tarball $(IMAGE_DIR)/task-operator.tar

.PHONY: image-push
image-push: image-binary ## Build the image and push it to IMG's registry (credentials of docker login).
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/image $(IMAGE_ARGS) --push

.PHONY: docker-build
docker-build: ## Build the image with a Docker engine instead (Dockerfile).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

DIST ?= dist

.PHONY: build-installer
build-installer: ## Write dist/install.yaml (config/default) and dist/migration.yaml (config/migration) with the image IMG.
	hack/overlay.sh $(IMG) config/default .cache/installer/default
	hack/overlay.sh $(IMG) config/migration .cache/installer/migration
	mkdir -p $(DIST)
	kubectl kustomize .cache/installer/default > $(DIST)/install.yaml
	kubectl kustomize .cache/installer/migration > $(DIST)/migration.yaml

RELEASE_REPO ?= example.com/task-operator
RELEASE_ARCHES ?= amd64 arm64
RELEASE_DIR ?= $(CURDIR)/bin/release/$(VERSION)
# The kubectl plugin's release: a tar.gz per platform, built into PLUGIN_BUILD_DIR, and the
# krew manifest (hack/krew/task.yaml.tmpl) whose archives are downloaded from RELEASE_URL.
RELEASE_PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_URL ?= https://example.com/task-operator/releases/download/$(VERSION)
PLUGIN_BUILD_DIR ?= $(CURDIR)/bin/plugin
comma := ,
empty :=
space := $(empty) $(empty)

.PHONY: release
release: ## make release VERSION=vX.Y.Z: the image for RELEASE_ARCHES as an OCI layout, the packaged chart, kubectl-task archives for RELEASE_PLUGIN_PLATFORMS with sha256 sums and the krew manifest plugins/task.yaml in RELEASE_DIR, dist/install.yaml and dist/migration.yaml, all of that version.
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release VERSION=vX.Y.Z (got VERSION=$(VERSION))"; exit 1; }
	for arch in $(RELEASE_ARCHES); do $(MAKE) --no-print-directory image-binary GOARCH=$$arch VERSION=$(VERSION); done
	for p in $(RELEASE_PLUGIN_PLATFORMS); do $(MAKE) --no-print-directory plugin-binary GOOS=$${p%/*} GOARCH=$${p#*/} VERSION=$(VERSION); done
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/release --version $(VERSION) --repo $(RELEASE_REPO) \
		--arch $(subst $(space),$(comma),$(strip $(RELEASE_ARCHES))) --binaries $(IMAGE_DIR) --revision $(REVISION) \
		--plugin-binaries $(PLUGIN_BUILD_DIR) --plugin-platforms $(subst $(space),$(comma),$(strip $(RELEASE_PLUGIN_PLATFORMS))) \
		--plugin-url $(RELEASE_URL) --krew-template hack/krew/task.yaml.tmpl --out $(RELEASE_DIR)
	$(MAKE) --no-print-directory build-installer IMG=$(RELEASE_REPO):$(VERSION) DIST=$(DIST)
	cp $(DIST)/install.yaml $(DIST)/migration.yaml $(RELEASE_DIR)/

.PHONY: install
install: ## Install the CRD alone (no conversion webhook: for operators run outside the cluster).
	kubectl apply --server-side --field-manager=task-operator-install -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRD, and with it every Task (stop anything using it first).
	kubectl delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: ## Deploy config/default with the image IMG to the current kubectl context.
	hack/overlay.sh $(IMG) config/default .cache/deploy
	kubectl apply --server-side -k .cache/deploy

.PHONY: undeploy
undeploy: ## Delete every Task (while the operator still runs to finish them), then everything make deploy and make migrate made.
	hack/undeploy.sh .cache/deploy config/default config/migration

MIGRATE_TIMEOUT ?= 30m

.PHONY: migrate
migrate: ## Run task-operator migrate in the cluster as a Job (config/migration, image IMG); waits until it completes or fails and prints its log.
	hack/overlay.sh $(IMG) config/migration .cache/migration
	kubectl -n task-operator-system delete job task-operator-migrate --ignore-not-found --wait=true
	kubectl apply --server-side -k .cache/migration
	hack/wait-job.sh task-operator-system task-operator-migrate $(MIGRATE_TIMEOUT)

.PHONY: deploy-render
deploy-render: ## Render config/default with kustomize.
	kubectl kustomize config/default

##@ Benchmarks

BENCH_ARGS ?=

.PHONY: bench
bench: controlplane ## Run the five measurement scenarios at full size (go run ./bench; BENCH_ARGS adds flags).
	go run ./bench -scenarios measurements $(BENCH_ARGS)

.PHONY: bench-scale
bench-scale: controlplane ## Grow to 50,000 Tasks (one namespace, then 100): start, leader handover and peak RSS at 10k, 25k, 50k.
	go run ./bench -scenarios scale $(BENCH_ARGS)

.PHONY: faults
faults: controlplane ## Run the fault scenarios (SIGKILLs, leader failover, rolling restart) and the run-semantics chaos test at full size.
	go run ./bench -scenarios faults $(BENCH_ARGS)
	go test ./reconciler -run '^TestChaos$$' -count=1 -timeout 40m -v -chaos.full

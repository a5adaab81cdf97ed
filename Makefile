# task-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

CONTROLLER_GEN := go tool controller-gen
CONTROLPLANE_BIN ?= $(CURDIR)/bin/controlplane
CLUSTER_DIR ?= $(CURDIR)/.cache/cluster
IMG ?= example.com/task-operator:latest
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
manifests: ## Generate the CRD, RBAC role and webhook configurations under config/.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) webhook paths=./webhook/... output:webhook:artifacts:config=config/webhook
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./reconciler/... paths=./webhook/cert/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=task-operator-local-role paths=./webhook/local/... output:rbac:artifacts:config=config/local

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
build: ## Build bin/task-operator.
	CGO_ENABLED=0 go build -trimpath -o bin/task-operator ./cmd/task-operator

.PHONY: controlplane
controlplane: ## Build (or reuse) etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
	hack/controlplane.sh

.PHONY: test
test: controlplane ## Run every test: unit, fuzz round trips, integration and e2e on a real control plane.
	gofmt_out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$gofmt_out" ]]; then echo "gofmt needed: $$gofmt_out"; exit 1; fi
	go vet ./...
	go test -timeout $(TEST_TIMEOUT) -count=1 ./...

.PHONY: fuzz
fuzz: ## Fuzz the converter and the conversion webhook for FUZZTIME each (default 60s).
	go test ./conversion/ -run '^$$' -fuzz '^FuzzConvert$$' -fuzztime $${FUZZTIME:-60s}
	go test ./conversion/ -run '^$$' -fuzz '^FuzzConversionReview$$' -fuzztime $${FUZZTIME:-60s}

##@ Local cluster

.PHONY: cluster-up
cluster-up: controlplane ## Start a local control plane in the background; prints export KUBECONFIG=...
	go run ./e2e/cmd/cluster up --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: ## Stop the local control plane.
	go run ./e2e/cmd/cluster down --dir $(CLUSTER_DIR)

.PHONY: run
run: controlplane build ## Run the operator on a local control plane with sample Tasks (Ctrl-C stops everything).
	hack/run.sh

##@ Deployment

.PHONY: docker-build
docker-build: ## Build the operator image (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: deploy-render
deploy-render: ## Render config/default with kustomize.
	kubectl kustomize config/default

##@ Benchmarks

BENCH_ARGS ?=

.PHONY: bench
bench: controlplane ## Run the five measurement scenarios at full size (go run ./bench; BENCH_ARGS adds flags).
	go run ./bench -scenarios measurements $(BENCH_ARGS)

.PHONY: faults
faults: controlplane ## Run the fault scenarios (SIGKILLs, leader failover, rolling restart) at full size.
	go run ./bench -scenarios faults $(BENCH_ARGS)

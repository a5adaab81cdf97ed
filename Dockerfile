# syntax=docker/dockerfile:1
# The task-operator image: one static binary on distroless. The same image runs the manager
# and, as `task-operator http`, the pods of HTTP Tasks.

# Build on the builder's own platform and cross-compile, so multi-arch builds
# (docker buildx build --platform linux/amd64,linux/arm64) need no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
# make docker-build passes the release; --version prints it.
ARG VERSION=dev
WORKDIR /src

# Modules first, in a layer of their own: it is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
# The compile cache survives between builds (BuildKit cache mount); the modules come from
# the layer above.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w -X example.com/task-operator/internal/version.version=${VERSION}" -o /task-operator ./cmd/task-operator

FROM gcr.io/distroless/static:nonroot
COPY --from=build /task-operator /task-operator
USER 65532:65532
ENTRYPOINT ["/task-operator"]

#!/usr/bin/env bash
# Builds Kueue's manager from its Go module (hack/kueue, a module of its own: Kueue needs older
# k8s.io and controller-runtime versions than hack/tools and the main module) into
# $CONTROLPLANE_BIN/kueue, and renders its release manifests from the same module into
# $CONTROLPLANE_BIN/kueue-manifests.yaml (hack/kueue/kustomization.yaml). Skipped when the stamp
# (the module's go.mod and go.sum, the overlay, the Go version) still matches.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${CONTROLPLANE_BIN:-$root/bin/controlplane}"
mod="$root/hack/kueue"
stamp_file="$out/.stamp-kueue"

stamp="$(cat "$mod/go.mod" "$mod/go.sum" "$mod/kustomization.yaml" <(go version) | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" && -x "$out/kueue" && -s "$out/kueue-manifests.yaml" ]]; then
  echo "kueue up to date in $out"
  exit 0
fi

command -v kubectl >/dev/null || { echo "kubectl is needed to render Kueue's manifests (kubectl kustomize)"; exit 1; }
mkdir -p "$out"
start=$(date +%s)
go -C "$mod" mod download
version="$(go -C "$mod" list -m -f '{{.Version}}' sigs.k8s.io/kueue)"
echo "building kueue $version into $out (cold build takes ~5 minutes on 2 cores)"
CGO_ENABLED=0 go -C "$mod" build -trimpath \
  -ldflags "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$version -X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01T00:00:00Z" \
  -o "$out/kueue" sigs.k8s.io/kueue/cmd/kueue

# kustomize reads a base only below the kustomization: render from a copy of the module's config.
render="$(mktemp -d)"
trap 'rm -rf "$render"' EXIT
cp -r "$(go -C "$mod" list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config" "$render/config"
chmod -R u+w "$render"
sed "s/KUEUE_VERSION/$version/" "$mod/kustomization.yaml" >"$render/kustomization.yaml"
kubectl kustomize "$render" >"$out/kueue-manifests.yaml.tmp"
mv "$out/kueue-manifests.yaml.tmp" "$out/kueue-manifests.yaml"

echo "$stamp" >"$stamp_file"
echo "kueue built in $(( $(date +%s) - start ))s"

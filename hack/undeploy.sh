#!/usr/bin/env bash
# undeploy.sh DIR [FALLBACK [MIGRATION]]: delete every Task first, while the operator still runs
# to remove their finalizers and Jobs, then what `make migrate` installed (the kustomization
# MIGRATION, when given: its ClusterRole and ClusterRoleBinding would outlive the namespace),
# then everything the kustomization DIR (or FALLBACK, when make deploy never wrote DIR here)
# renders. Deleting the CRD or the operator first would leave Tasks whose finalizers nobody
# removes, and the CRD's deletion hanging on them.
set -euo pipefail
dir="${1:?usage: undeploy.sh DIR [FALLBACK [MIGRATION]]}"
[[ -f "$dir/kustomization.yaml" ]] || dir="${2:-$dir}"
migration="${3:-}"

if kubectl get crd tasks.example.com >/dev/null 2>&1; then
  echo "deleting every Task (the operator finishes them) ..."
  kubectl delete tasks.example.com --all --all-namespaces --ignore-not-found --wait=true --timeout=5m
fi
if [[ -n "$migration" ]]; then
  kubectl delete --ignore-not-found --wait=true --timeout=5m -k "$migration"
fi
kubectl delete --ignore-not-found --wait=true --timeout=5m -k "$dir"

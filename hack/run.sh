#!/usr/bin/env bash
# make run: a local control plane, the operator running on this machine with its webhooks on
# loopback, as the manager's ServiceAccount, and the sample Tasks at all three apiVersions. Ctrl-C stops everything it started.
# RUN_EXIT_WHEN_DONE=1 stops once the samples have succeeded (used by tests and CI smoke runs).
# QUEUES=1 also installs Kueue (its manager as a stand-in pod: needs root and ip) and applies
# config/samples/queues: a ClusterQueue, a LocalQueue, two priorities and four queued Tasks.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
state="$root/.cache/run"
cluster_dir="$state/cluster"
mkdir -p "$state"
operator_pid=""

cleanup() {
  trap - EXIT INT TERM
  echo
  echo "stopping the operator and the control plane ..."
  if [[ -n "$operator_pid" ]]; then
    kill "$operator_pid" 2>/dev/null || true
    wait "$operator_pid" 2>/dev/null || true
  fi
  go run ./hack/cluster down --dir "$cluster_dir" >/dev/null 2>&1 || true
  echo "stopped."
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The operator's three ports on 127.0.0.1: free ones unless WEBHOOK_PORT, METRICS_PORT or
# HEALTH_PORT says which. A port given that is in use stops everything here, naming it: the
# readiness check must never be answered by another process, nor the apiserver call another
# process's webhook.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
mapfile -t free_ports < <(go run ./hack/cluster ports 3)
webhook_port="${WEBHOOK_PORT:-${free_ports[0]}}"
metrics_port="${METRICS_PORT:-${free_ports[1]}}"
health_port="${HEALTH_PORT:-${free_ports[2]}}"
for named in "WEBHOOK_PORT=$webhook_port" "METRICS_PORT=$metrics_port" "HEALTH_PORT=$health_port"; do
  if port_in_use "${named#*=}"; then
    echo "make run: port ${named#*=} (${named%%=*}) on 127.0.0.1 is in use by another process; free it or set ${named%%=*} to another port" >&2
    exit 1
  fi
done
echo "==> operator ports on 127.0.0.1: webhook $webhook_port, metrics $metrics_port, health $health_port"

queues="${QUEUES:-}"
[[ "$queues" == "0" ]] && queues=""
up_flags=()
if [[ -n "$queues" ]]; then
  up_flags+=(--kueue --timeout=6m)
  echo "==> starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) and Kueue"
else
  echo "==> starting the local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)"
fi
up_output="$(go run ./hack/cluster up --dir "$cluster_dir" "${up_flags[@]}")"
echo "$up_output"
export_line="$(grep '^export KUBECONFIG=' <<<"$up_output" | tail -1)"
eval "$export_line"

echo "==> installing the namespace, CRD and RBAC (config/local) and running the operator as its ServiceAccount"
# config/local is config/default without the Deployment, plus the role only local runs get
# (creating and re-pointing the CRD and webhook configurations): the operator runs here with
# exactly the rights it has in a cluster, plus those.
kubectl apply --server-side -k config/local >/dev/null
operator_kubeconfig="$state/operator.kubeconfig"
write_operator_kubeconfig() {
  local server ca token
  server="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  ca="$(kubectl config view --minify --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
  token="$(kubectl -n task-operator-system create token task-operator-controller-manager --duration=24h)"
  umask 077
  cat >"$operator_kubeconfig" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$server", certificate-authority-data: "$ca"}
users:
- name: task-operator-controller-manager
  user: {token: "$token"}
contexts:
- name: operator
  context: {cluster: local, user: task-operator-controller-manager}
current-context: operator
EOK
}
write_operator_kubeconfig

echo "==> starting the operator (log: $state/operator.log)"
bin/task-operator manager \
  --kubeconfig="$operator_kubeconfig" \
  --leader-elect=false \
  --webhook-host=127.0.0.1 --webhook-port="$webhook_port" \
  --webhook-local-url="https://localhost:$webhook_port" \
  --webhook-namespace=task-operator-system \
  --webhook-cert-dir="$state/certs" \
  --metrics-bind-address="127.0.0.1:$metrics_port" --metrics-secure=false \
  --health-probe-bind-address="127.0.0.1:$health_port" \
  >"$state/operator.log" 2>&1 &
operator_pid=$!

# Ready means our process answers: it is alive, /readyz says so, and its /metrics are the
# operator's (a process that took a port meanwhile is caught here, or the operator exits
# failing to bind it).
# (The metrics are read whole before grep: with pipefail, grep -q stopping at the first match
# would fail the pipeline on curl's broken pipe.)
ours_ready() {
  local metrics
  kill -0 "$operator_pid" 2>/dev/null &&
    curl -fsS "http://127.0.0.1:$health_port/readyz" >/dev/null 2>&1 &&
    metrics="$(curl -fsS "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null)" &&
    grep -q '^taskoperator_' <<<"$metrics"
}
ready=false
for _ in $(seq 1 120); do
  if ours_ready; then ready=true; break; fi
  if ! kill -0 "$operator_pid" 2>/dev/null; then
    echo "the operator exited; last log lines:"; tail -30 "$state/operator.log"; exit 1
  fi
  sleep 1
done
$ready || { echo "operator not ready after 120s"; tail -30 "$state/operator.log"; exit 1; }
echo "operator ready"

echo "==> applying the sample Tasks (config/samples) at v1alpha1, v1beta1 and v1"
# The webhook's CA bundle is injected moments after start; retry until the apiserver trusts it.
applied=false
for _ in $(seq 1 30); do
  if kubectl apply -k config/samples >"$state/apply.out" 2>&1; then applied=true; break; fi
  sleep 1
done
cat "$state/apply.out"
$applied || exit 1

one_shot=(sample-v1alpha1 sample-v1beta1 sample-v1 sample-http)
if [[ -n "$queues" ]]; then
  echo "==> applying the queue samples (config/samples/queues)"
  kubectl apply --server-side -k config/samples/queues
  one_shot+=(queued-report-1 queued-report-2 queued-report-3 queued-hotfix)
fi
echo "==> waiting for the one-shot samples to succeed"
for _ in $(seq 1 120); do
  kubectl get tasks.v1.example.com -o wide
  done_count=0
  for t in "${one_shot[@]}"; do
    phase="$(kubectl get task "$t" -o jsonpath='{.status.phase}' 2>/dev/null || true)"
    [[ "$phase" == "Succeeded" || "$phase" == "Failed" ]] && done_count=$((done_count + 1))
  done
  [[ $done_count -eq ${#one_shot[@]} ]] && break
  sleep 2
done
kubectl wait --for=condition=Succeeded --timeout=60s "${one_shot[@]/#/task/}"
echo "samples Succeeded"

cat <<EOT

Try:
  $export_line
  kubectl get tasks.v1alpha1.example.com
  kubectl get tasks.v1beta1.example.com
  kubectl get tasks.v1.example.com -o wide
  kubectl describe task sample-v1
  kubectl get jobs,pods -l task.example.com/name
  kubectl get events --field-selector involvedObject.kind=Task
  curl -s http://127.0.0.1:$metrics_port/metrics | grep ^taskoperator_
EOT
if [[ -n "$queues" ]]; then cat <<EOT
  kubectl get clusterqueues,localqueues,workloads
  kubectl get tasks -l e2e.example.com/run-seconds -o custom-columns=NAME:.metadata.name,PHASE:.status.phase,ADMITTED:.status.currentRun.admittedTime
EOT
fi
cat <<EOT

The operator log is $state/operator.log. Press Ctrl-C to stop everything.
EOT

if [[ "${RUN_EXIT_WHEN_DONE:-}" == "1" ]]; then exit 0; fi
wait "$operator_pid"

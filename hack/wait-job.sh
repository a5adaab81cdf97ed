#!/usr/bin/env bash
# wait-job.sh NAMESPACE JOB TIMEOUT: wait until the Job completes or fails (kubectl wait
# --for=condition=Complete would keep waiting on a failed Job until TIMEOUT), print its log,
# and exit 0 only if it completed. TIMEOUT is a duration for timeout(1): 30m, 90s.
set -euo pipefail
ns="${1:?usage: wait-job.sh NAMESPACE JOB TIMEOUT}"
job="${2:?usage: wait-job.sh NAMESPACE JOB TIMEOUT}"
limit="${3:?usage: wait-job.sh NAMESPACE JOB TIMEOUT}"

state=0
timeout "$limit" bash -c '
  while :; do
    conditions=" $(kubectl -n "$1" get job "$2" -o jsonpath="{range .status.conditions[?(@.status==\"True\")]}{.type}{\" \"}{end}") "
    case "$conditions" in
    *" Complete "*) echo "job/$2 completed"; exit 0 ;;
    *" Failed "*) echo "job/$2 failed" >&2; exit 1 ;;
    esac
    sleep 2
  done' wait-job "$ns" "$job" || state=$?
[[ $state -eq 124 ]] && echo "job/$job: neither complete nor failed after $limit" >&2
kubectl -n "$ns" logs "job/$job" || true
exit "$state"

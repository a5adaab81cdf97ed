package reconciler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestFailedPodNameIsReadFromTheJobsMessage(t *testing.T) {
	for _, tc := range []struct{ msg, ns, pod string }{
		{"Container task for pod ns/doomed-0-3-98crz failed with exit code 1 matching FailJob rule at index 1", "ns", "doomed-0-3-98crz"},
		{"Job has reached the specified backoff limit", "", ""},
		{"Container task for pod doomed failed with exit code 1", "", ""},
	} {
		m := failedPodName.FindStringSubmatch(tc.msg)
		switch {
		case tc.pod == "" && m != nil:
			t.Errorf("%q: read pod %v, want none", tc.msg, m)
		case tc.pod != "" && (m == nil || m[1] != tc.ns || m[2] != tc.pod):
			t.Errorf("%q: read %v, want %s/%s", tc.msg, m, tc.ns, tc.pod)
		}
	}
}

func TestTerminatedReasonIsTheRunContainers(t *testing.T) {
	terminated := func(name, reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: 137}}}
	}
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{terminated("sidecar", "Completed"), terminated(containerName, "OOMKilled")}}}
	if got := terminatedReason(pod); got != "OOMKilled" {
		t.Errorf("terminatedReason = %q, want OOMKilled", got)
	}
	if got := terminatedReason(&corev1.Pod{}); got != "" {
		t.Errorf("a pod without statuses: %q", got)
	}
	j := oneShotJob(1, jobFailed, 150)
	j.Reason, j.Message, j.Terminated = "PodFailurePolicy", "Container task for pod ns/p failed with exit code 137 matching FailJob rule at index 1", "OOMKilled"
	if got, want := j.failure(), "Job t-0-1 failed: PodFailurePolicy: Container task for pod ns/p failed with exit code 137 matching FailJob rule at index 1 (OOMKilled)"; got != want {
		t.Errorf("failure = %q, want %q", got, want)
	}
}

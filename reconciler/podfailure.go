package reconciler

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A failed run's Job says which pod failed and its exit code (the FailJob rule of its pod
// failure policy, see ignoreDisruptions), but not why its container ended: Error and
// OOMKilled can share exit code 137. The pod says it, while it exists.

// failedPodName reads the pod out of the Job controller's message for a FailJob rule:
// "Container task for pod <namespace>/<name> failed with exit code N matching FailJob rule…".
var failedPodName = regexp.MustCompile(`for pod ([^/ ]+)/([^ ]+) failed with exit code`)

// podFailures fills in Terminated for the failed Jobs whose failure the stored status does not
// tell yet: one live GET of the failed pod each, once (the Job is released after the status
// records it). A pod gone, or no right to read pods, leaves the reason out.
func (r *Reconciler) podFailures(ctx context.Context, s *scope) error {
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.State != jobFailed || !j.Protected || j.Reason != "PodFailurePolicy" || tellsOf(s.task.Status.LastError, j.Name) {
			continue
		}
		m := failedPodName.FindStringSubmatch(j.Message)
		if m == nil || m[1] != s.task.Namespace {
			continue
		}
		pod := &corev1.Pod{}
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: m[1], Name: m[2]}, pod)
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			continue
		case err != nil:
			return fmt.Errorf("get failed pod %s of job %s: %w", m[2], j.Name, err)
		}
		j.Terminated = terminatedReason(pod)
	}
	return nil
}

// tellsOf says lastError is about the Job called name (every failure message starts so).
func tellsOf(lastError, name string) bool {
	return strings.HasPrefix(lastError, "Job "+name+" ")
}

// terminatedReason is why the run's container in pod ended, "" if it has not or does not say.
func terminatedReason(pod *corev1.Pod) string {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == containerName && c.State.Terminated != nil {
			return c.State.Terminated.Reason
		}
	}
	return ""
}

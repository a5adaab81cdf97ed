package webhook

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The admission metric's labels are bounded whatever a caller sends: a version no served one
// and an operation no AdmissionReview has count as "other", so that a caller of the webhook
// cannot add series without end.
func TestTheAdmissionMetricCountsUnknownVersionsAndOperationsAsOther(t *testing.T) {
	before := testutil.CollectAndCount(admissionRequests)
	for i, version := range []string{"v9", "zz-1", "v1alpha1"} {
		req := rawCreate(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"t","namespace":"ns"},"spec":{"runner":{"type":"Shell","shell":{"script":"true"}}}}`, false)
		req.RequestKind = &metav1.GroupVersionKind{Group: "example.com", Version: version, Kind: "Task"}
		req.Operation = admissionv1.Operation([]string{"CREATE", "EXPLODE", "REBOOT"}[i])
		req.UserInfo.Username = "alice"
		Validator{}.Handle(context.Background(), req)
	}
	if got := testutil.ToFloat64(admissionRequests.WithLabelValues("other", "CREATE", "user")); got < 1 {
		t.Errorf("a request at version v9 counted %v times as other", got)
	}
	if got := testutil.ToFloat64(admissionRequests.WithLabelValues("other", "other", "user")); got < 1 {
		t.Errorf("a request of operation EXPLODE at zz-1 counted %v times as other, other", got)
	}
	if added := testutil.CollectAndCount(admissionRequests) - before; added > 3 {
		t.Errorf("%d series added by 3 requests", added)
	}
	for _, labels := range [][]string{{"v9", "CREATE", "user"}, {"zz-1", "EXPLODE", "user"}} {
		if admissionRequests.DeleteLabelValues(labels...) {
			t.Errorf("a series labelled %v exists", labels)
		}
	}
}

package versions

import (
	"context"
	"testing"
	"time"
)

// When the apiserver's /metrics cannot be read (no get on that non-resource URL), the report
// has no request counts and no watch gauge for the version: nothing then proves that no
// client watches or reads at it, so the retirement must be blocked (forceably, as the
// observation's own read error is) rather than pass as if nothing used the version.
func TestRetireIsBlockedWhenTheAPIServerMetricsCouldNotBeRead(t *testing.T) {
	r := &Report{
		CRD: "tasks.example.com", Group: "example.com", Kind: "Task", Resource: "tasks",
		StorageVersion: "v1", StoredVersions: []string{"v1"}, Conversion: "None", Taken: time.Now(),
		Versions: []VersionReport{
			{Name: "v1alpha1", Served: true, Requests: nil /* metrics unreadable */},
			{Name: "v1", Served: true, Storage: true, Requests: nil},
		},
		Notes: []string{"requests and watches per version unknown: forbidden"},
	}
	opts := Options{Observe: time.Millisecond}.withDefaults()
	blockers := (&clients{}).preflight(context.Background(), opts, r, "v1alpha1")
	if len(blockers) == 0 {
		t.Fatal("preflight found no blocker although neither the live watches nor the requests at v1alpha1 could be read")
	}
	for _, b := range blockers {
		if !b.Forceable {
			t.Errorf("blocker %v should be forceable", b)
		}
	}
}

package versions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/config"
)

func TestAPIServerMetricsAreReadPerVersion(t *testing.T) {
	raw := []byte(`# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.com",resource="tasks",scope="cluster",subresource="",verb="LIST",version="v1alpha1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="example.com",resource="tasks",scope="namespace",subresource="",verb="LIST",version="v1alpha1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="example.com",resource="tasks",scope="namespace",subresource="",verb="POST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 9
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="example.com",resource="tasks",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 1
apiserver_longrunning_requests{component="apiserver",group="example.com",resource="tasks",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
`)
	got, err := parseAPIServerMetrics(raw, "example.com", "tasks")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]apiserverUse{
		"v1alpha1": {requests: map[string]float64{"LIST": 5}, watches: 1},
		"v1":       {requests: map[string]float64{"POST": 7}, watches: 2},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(apiserverUse{})); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestAuditLogCountsOneEventPerRequest(t *testing.T) {
	log := `{"stage":"RequestReceived","verb":"list","user":{"username":"alice"},"userAgent":"kubectl/v1.37","objectRef":{"resource":"tasks","apiGroup":"example.com","apiVersion":"v1alpha1"},"stageTimestamp":"2030-01-01T00:00:00Z"}
{"stage":"ResponseComplete","verb":"list","user":{"username":"alice"},"userAgent":"kubectl/v1.37","objectRef":{"resource":"tasks","apiGroup":"example.com","apiVersion":"v1alpha1"},"stageTimestamp":"2030-01-01T00:00:01Z"}
{"stage":"ResponseStarted","verb":"watch","user":{"username":"bob"},"userAgent":"ctrl/v1","objectRef":{"resource":"tasks","apiGroup":"example.com","apiVersion":"v1alpha1"},"stageTimestamp":"2030-01-01T00:00:02Z"}
{"stage":"ResponseComplete","verb":"watch","user":{"username":"bob"},"userAgent":"ctrl/v1","objectRef":{"resource":"tasks","apiGroup":"example.com","apiVersion":"v1alpha1"},"stageTimestamp":"2030-01-01T00:10:00Z"}
{"stage":"ResponseComplete","verb":"get","user":{"username":"carol"},"userAgent":"curl","objectRef":{"resource":"pods","apiGroup":"","apiVersion":"v1"},"stageTimestamp":"2030-01-01T00:00:03Z"}
not json
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := readAuditLog(path, "example.com", "tasks")
	if err != nil {
		t.Fatal(err)
	}
	ts := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	want := []AuditCount{
		{Version: "v1alpha1", User: "bob", UserAgent: "ctrl/v1", Verb: "watch", Count: 1, Last: ts("2030-01-01T00:00:02Z")},
		{Version: "v1alpha1", User: "alice", UserAgent: "kubectl/v1.37", Verb: "list", Count: 1, Last: ts("2030-01-01T00:00:01Z")},
	}
	if bad != 1 {
		t.Errorf("bad = %d, want 1", bad)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestWritersAtMergesReplicas(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	records := []UsageRecord{
		{Replica: "a", Entries: []UsageEntry{
			{Version: "v1alpha1", User: "alice", Agent: "kubectl", Count: 2, First: t0, Last: t0.Add(time.Minute)},
			{Version: "v1", User: "op", Agent: "task-operator", Count: 9, First: t0, Last: t0},
		}},
		{Replica: "b", Entries: []UsageEntry{
			{Version: "v1alpha1", User: "alice", Agent: "kubectl", Count: 3, First: t0.Add(-time.Minute), Last: t0},
			{Version: "v1alpha1", User: "bob", Agent: "", Count: 1, First: t0, Last: t0.Add(time.Hour)},
		}},
	}
	got := writersAt(records, "v1alpha1")
	want := []UsageEntry{
		{Version: "v1alpha1", User: "bob", Count: 1, First: t0, Last: t0.Add(time.Hour)},
		{Version: "v1alpha1", User: "alice", Agent: "kubectl", Count: 5, First: t0.Add(-time.Minute), Last: t0.Add(time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestRewrittenRefsMoveOnlyTheGroupsKind(t *testing.T) {
	tests := []struct {
		name        string
		in, want    []metav1.OwnerReference
		wantChanged bool
	}{
		{
			name:        "a Task at v1alpha1 moves, the uid stays",
			in:          []metav1.OwnerReference{{APIVersion: "example.com/v1alpha1", Kind: "Task", Name: "t", UID: "u"}},
			want:        []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Task", Name: "t", UID: "u"}},
			wantChanged: true,
		},
		{
			name: "other owners stay",
			in:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}, {APIVersion: "other.example.com/v1alpha1", Kind: "Task", Name: "x"}},
			want: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}, {APIVersion: "other.example.com/v1alpha1", Kind: "Task", Name: "x"}},
		},
		{
			name: "already at v1",
			in:   []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Task", Name: "t"}},
			want: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Task", Name: "t"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := rewrittenRefs(tt.in, "example.com", "Task", "example.com/v1")
			if changed != tt.wantChanged {
				t.Errorf("changed = %t, want %t", changed, tt.wantChanged)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestTheShippedWarningIsTheDefaultOne(t *testing.T) {
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(config.CRD, crd); err != nil {
		t.Fatal(err)
	}
	v, err := versionOf(crd, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultWarning(crd.Spec.Group, crd.Spec.Names.Kind, "v1alpha1", storageVersion(crd))
	if !v.Deprecated || v.DeprecationWarning == nil || *v.DeprecationWarning != want {
		t.Errorf("the CRD's v1alpha1: deprecated %t, warning %v; want the warning %q (the marker on apis/v1alpha1)", v.Deprecated, v.DeprecationWarning, want)
	}
}

func TestCommandRefusesBadArgumentsNamingThem(t *testing.T) {
	tests := []struct {
		sub  string
		args []string
		want string
	}{
		{"retire", nil, "versions retire: want one VERSION argument, got 0"},
		{"serve", []string{"a", "b"}, "versions serve: want one VERSION argument, got 2"},
		{"status", []string{"v1"}, "versions status takes no arguments"},
		{"drop", nil, `unknown subcommand "drop"`},
	}
	for _, tt := range tests {
		t.Run(tt.sub, func(t *testing.T) {
			err := Command(t.Context(), nil, tt.sub, tt.args, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

package readguard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kjson "sigs.k8s.io/json"

	"example.com/task-operator/apis/install"
	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/readguard"
)

// taskJSON is a stored v1 Task with resources (JSON) and annotations (JSON, "" for none).
func taskJSON(name, resources, annotations string) string {
	meta := fmt.Sprintf(`"name":%q,"namespace":"ns","uid":"u-%s","resourceVersion":"7"`, name, name)
	if annotations != "" {
		meta += `,"annotations":` + annotations
	}
	spec := `"runner":{"type":"Shell","shell":{"script":"echo hi"}}`
	if resources != "" {
		spec += `,"resources":` + resources
	}
	return `{"apiVersion":"example.com/v1","kind":"Task","metadata":{` + meta + `},"spec":{` + spec + `}}`
}

const boundsMessage = "a quantity must be at most 64 characters long, with an exponent between -64 and 64"

func TestTaskLeavesOutTheQuantitiesNoDecodingReadsAndNamesThem(t *testing.T) {
	long := "1" + strings.Repeat("0", 5000)
	for _, tc := range []struct {
		name, resources, annotations string
		// wantUnreadable is the annotation the filtered Task carries; "" for unchanged bytes.
		wantUnreadable string
		// wantLimits and wantRequests are the quantities left (name: text).
		wantLimits, wantRequests map[string]string
		wantAnnotations          map[string]string
	}{
		{name: "no resources"},
		{name: "quantities within bounds", resources: `{"limits":{"cpu":"1e3","memory":"64Mi"},"requests":{"cpu":0.5}}`},
		{
			name:           "an exponent out of bounds, as a string",
			resources:      `{"limits":{"cpu":"1e3000000000","memory":"64Mi"}}`,
			wantUnreadable: `spec.resources.limits.cpu: Invalid value: "1e3000000000": ` + boundsMessage,
			wantLimits:     map[string]string{"memory": "64Mi"},
		},
		{
			name:           "an exponent out of bounds, as a number",
			resources:      `{"requests":{"memory":1e3000000000,"cpu":"2"}}`,
			wantUnreadable: `spec.resources.requests.memory: Invalid value: "1e3000000000": ` + boundsMessage,
			wantRequests:   map[string]string{"cpu": "2"},
		},
		{
			name:           "a negative exponent out of bounds",
			resources:      `{"requests":{"cpu":"1e-100000000"}}`,
			wantUnreadable: `spec.resources.requests.cpu: Invalid value: "1e-100000000": ` + boundsMessage,
		},
		{
			name:           "a quantity too long, named but not quoted whole",
			resources:      `{"limits":{"example.com/gpu":"` + long + `"}}`,
			wantUnreadable: `spec.resources.limits.example.com/gpu: Invalid value: "` + long[:80] + `... (5001 characters)": ` + boundsMessage,
		},
		{
			name:      "one in limits and one in requests",
			resources: `{"requests":{"cpu":"1e99"},"limits":{"cpu":"1e300","memory":"1Gi"}}`,
			wantUnreadable: `spec.resources.limits.cpu: Invalid value: "1e300": ` + boundsMessage +
				`; spec.resources.requests.cpu: Invalid value: "1e99": ` + boundsMessage,
			wantLimits: map[string]string{"memory": "1Gi"},
		},
		{
			name:            "a stored annotation of the filter's, nothing unreadable",
			resources:       `{"limits":{"cpu":"1"}}`,
			annotations:     `{"task.example.com/unreadable":"forged","team":"a"}`,
			wantLimits:      map[string]string{"cpu": "1"},
			wantAnnotations: map[string]string{"team": "a"},
		},
		{
			name:            "a stored annotation of the filter's beside an unreadable quantity",
			resources:       `{"limits":{"cpu":"1e65"}}`,
			annotations:     `{"task.example.com/unreadable":"forged","task.example.com/run-requested":"2026-01-01T00:00:00Z"}`,
			wantUnreadable:  `spec.resources.limits.cpu: Invalid value: "1e65": ` + boundsMessage,
			wantAnnotations: map[string]string{v1.AnnotationRunRequested: "2026-01-01T00:00:00Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := taskJSON("t", tc.resources, tc.annotations)
			out, changed := readguard.Task([]byte(in))
			if tc.wantUnreadable == "" && tc.wantAnnotations == nil {
				if changed || string(out) != in {
					t.Fatalf("changed a Task it has no reason to:\n in  %s\n out %s", in, out)
				}
				return
			}
			if !changed {
				t.Fatalf("left the Task as it was: %s", shortened(in))
			}
			task := decodeTyped(t, out)
			if got := task.Annotations[v1.AnnotationUnreadable]; got != tc.wantUnreadable {
				t.Errorf("%s:\n got  %q\n want %q", v1.AnnotationUnreadable, got, tc.wantUnreadable)
			}
			wantAnnotations := map[string]string{}
			for k, v := range tc.wantAnnotations {
				wantAnnotations[k] = v
			}
			if tc.wantUnreadable != "" {
				wantAnnotations[v1.AnnotationUnreadable] = tc.wantUnreadable
			}
			if diff := cmp.Diff(wantAnnotations, nonNil(task.Annotations)); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if task.Spec.Resources == nil {
				t.Fatal("spec.resources is gone")
			}
			for list, pair := range map[string][2]map[string]string{
				"limits":   {tc.wantLimits, texts(task.Spec.Resources.Limits)},
				"requests": {tc.wantRequests, texts(task.Spec.Resources.Requests)},
			} {
				if diff := cmp.Diff(nonNil(pair[0]), nonNil(pair[1])); diff != "" {
					t.Errorf("spec.resources.%s (-want +got):\n%s", list, diff)
				}
			}
			if task.Spec.Runner.Shell == nil || task.Spec.Runner.Shell.Script != "echo hi" || task.UID != "u-t" || task.ResourceVersion != "7" {
				t.Errorf("the rest of the Task changed: %s", out)
			}
		})
	}
}

// Only what the client's decoder reads is judged: it matches keys case-sensitively, so a
// "Spec" is never parsed, and a body that is not JSON is the decoder's to refuse.
func TestTaskLeavesAloneWhatTheClientNeverParses(t *testing.T) {
	for name, in := range map[string]string{
		"another case": strings.Replace(taskJSON("t", `{"limits":{"cpu":"1e3000000000"}}`, ""), `"spec"`, `"Spec"`, 1),
		"not JSON":     `{"spec":{"resources":{"limits":{"cpu":"1e3000000000"`,
	} {
		if out, changed := readguard.Task([]byte(in)); changed || string(out) != in {
			t.Errorf("%s: changed to %s", name, out)
		}
	}
}

func TestDocumentFiltersEachTaskOfAListAndLeavesTheOthersAsTheyWere(t *testing.T) {
	good := taskJSON("good", `{"limits":{"cpu":"500m"}}`, `{"team":"a"}`)
	bad := taskJSON("bad", `{"limits":{"cpu":"1e3000000000"}}`, "")
	list := `{"apiVersion":"example.com/v1","kind":"TaskList","metadata":{"resourceVersion":"9"},"items":[` + good + `,` + bad + `]}`
	out := readguard.Document([]byte(list))
	var got v1.TaskList
	if err := kjson.UnmarshalCaseSensitivePreserveInts(out, &got); err != nil {
		t.Fatalf("the filtered list does not decode: %v\n%s", err, shortened(string(out)))
	}
	if len(got.Items) != 2 || got.ResourceVersion != "9" {
		t.Fatalf("list %+v", got.ListMeta)
	}
	if diff := cmp.Diff(decodeTyped(t, []byte(good)), &got.Items[0]); diff != "" {
		t.Errorf("the readable Task changed (-want +got):\n%s", diff)
	}
	if got.Items[1].Annotations[v1.AnnotationUnreadable] == "" || len(got.Items[1].Spec.Resources.Limits) != 0 {
		t.Errorf("the unreadable Task was not filtered: %+v", got.Items[1].ObjectMeta)
	}

	readable := `{"apiVersion":"example.com/v1","kind":"TaskList","metadata":{},"items":[` + good + `]}`
	if out := readguard.Document([]byte(readable)); string(out) != readable {
		t.Errorf("a list with nothing to filter changed:\n%s", out)
	}
}

func TestEventFiltersTheObjectOfAWatchEvent(t *testing.T) {
	bad := taskJSON("bad", `{"limits":{"cpu":"1e3000000000"}}`, "")
	out := readguard.Event([]byte(`{"type":"MODIFIED","object":` + bad + `}`))
	var ev struct {
		Type   string  `json:"type"`
		Object v1.Task `json:"object"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(out, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "MODIFIED" || ev.Object.Name != "bad" || ev.Object.Annotations[v1.AnnotationUnreadable] == "" {
		t.Errorf("event %s", out)
	}
	bookmark := `{"type":"BOOKMARK","object":{"apiVersion":"example.com/v1","kind":"Task","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`
	if out := readguard.Event([]byte(bookmark)); string(out) != bookmark {
		t.Errorf("a bookmark changed: %s", out)
	}
}

// A client with the filter on its transport reads a Task holding a quantity no decoding parses
// in bounded time by GET, LIST and WATCH (its events arriving a few bytes at a time), as
// client-go decodes them, typed. Without the filter each read hangs, taking gigabytes.
func TestAClientReadsATaskWithAnUnreadableQuantityWithoutHanging(t *testing.T) {
	bad := taskJSON("bad", `{"limits":{"cpu":"1e3000000000","memory":"1Gi"}}`, "")
	good := taskJSON("good", `{"limits":{"cpu":"1"}}`, "")
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			stream := `{"type":"ADDED","object":` + good + "}\n" + `{"type":"ADDED","object":` + bad + "}\n"
			for len(stream) > 0 {
				n := min(7, len(stream))
				_, _ = w.Write([]byte(stream[:n]))
				w.(http.Flusher).Flush()
				stream = stream[n:]
			}
		case r.URL.Path == "/apis/example.com/v1/namespaces/ns/tasks/bad":
			_, _ = w.Write([]byte(bad))
		case r.URL.Path == "/apis/example.com/v1/namespaces/ns/tasks":
			_, _ = w.Write([]byte(`{"apiVersion":"example.com/v1","kind":"TaskList","metadata":{"resourceVersion":"9"},"items":[` + good + `,` + bad + `]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer server.Close()

	cfg := &rest.Config{Host: server.URL}
	readguard.Wrap(cfg)
	scheme := runtime.NewScheme()
	if err := install.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme, Mapper: taskMapper(scheme)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	checkUnreadable := func(how string, task *v1.Task) {
		t.Helper()
		if !strings.HasPrefix(task.Annotations[v1.AnnotationUnreadable], "spec.resources.limits.cpu: ") {
			t.Errorf("%s: %s = %q", how, v1.AnnotationUnreadable, task.Annotations[v1.AnnotationUnreadable])
		}
		if q := task.Spec.Resources.Limits.Memory(); q.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("%s: the readable quantity beside it is %v", how, q)
		}
	}
	withoutHanging(t, "GET", func() {
		var task v1.Task
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "bad"}, &task); err != nil {
			t.Errorf("GET: %v", err)
			return
		}
		checkUnreadable("GET", &task)
	})
	withoutHanging(t, "LIST", func() {
		var list v1.TaskList
		if err := c.List(ctx, &list, client.InNamespace("ns")); err != nil || len(list.Items) != 2 {
			t.Errorf("LIST: %v, %d items", err, len(list.Items))
			return
		}
		checkUnreadable("LIST", &list.Items[1])
	})
	withoutHanging(t, "WATCH", func() {
		w, err := c.Watch(ctx, &v1.TaskList{}, client.InNamespace("ns"))
		if err != nil {
			t.Errorf("WATCH: %v", err)
			return
		}
		defer w.Stop()
		var names []string
		for ev := range w.ResultChan() {
			task, ok := ev.Object.(*v1.Task)
			if !ok {
				t.Errorf("WATCH: event %s of %T", ev.Type, ev.Object)
				return
			}
			names = append(names, task.Name)
			if task.Name == "bad" {
				checkUnreadable("WATCH", task)
				break
			}
		}
		if diff := cmp.Diff([]string{"good", "bad"}, names); diff != "" {
			t.Errorf("WATCH events (-want +got):\n%s", diff)
		}
	})
}

// withoutHanging runs read, failing the test if it has not returned in a minute: a decoding
// of an unreadable quantity takes many minutes. (A hang detector, not a timing.)
func withoutHanging(t *testing.T, what string, read func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); read() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s of a Task with an unreadable quantity did not return in a minute", what)
	}
}

func decodeTyped(t *testing.T, data []byte) *v1.Task {
	t.Helper()
	var task v1.Task
	done := make(chan error, 1)
	go func() { done <- kjson.UnmarshalCaseSensitivePreserveInts(data, &task) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the filtered Task does not decode: %v\n%s", err, shortened(string(data)))
		}
	case <-time.After(time.Minute):
		t.Fatalf("the filtered Task still hangs its decoding: %s", shortened(string(data)))
	}
	return &task
}

func texts(list corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func shortened(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// taskMapper maps the Task kinds to their resource, without discovery.
func taskMapper(scheme *runtime.Scheme) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Group == v1.Group {
			m.Add(gvk, meta.RESTScopeNamespace)
		}
	}
	return m
}

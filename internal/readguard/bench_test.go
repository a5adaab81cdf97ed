package readguard_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	kjson "sigs.k8s.io/json"

	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/readguard"
)

// typicalTask is a stored v1 Task as the apiserver serves it: managedFields of kubectl and the
// operator, a status with conditions, and resources when withResources.
func typicalTask(name string, withResources bool) string {
	resources := ""
	if withResources {
		resources = `,"resources":{"limits":{"cpu":"500m","memory":"256Mi"},"requests":{"cpu":"250m","memory":"128Mi"}}`
	}
	return `{"apiVersion":"example.com/v1","kind":"Task","metadata":{"creationTimestamp":"2026-12-07T10:00:00Z","finalizers":["task.example.com/jobs"],"generation":1,` +
		`"labels":{"app":"report","team":"data"},"managedFields":[{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:team":{}}},"f:spec":{".":{},"f:parallelism":{},"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}}},"f:retry":{".":{},"f:backoff":{".":{},"f:factor":{},"f:initial":{},"f:max":{}},"f:maxRetries":{}},"f:runner":{".":{},"f:shell":{".":{},"f:script":{}},"f:type":{}}}},"manager":"kubectl-client-side-apply","operation":"Update","time":"2026-12-07T10:00:00Z"},` +
		`{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:phase":{},"f:runs":{}}},"manager":"task-operator","operation":"Update","subresource":"status","time":"2026-12-07T10:00:05Z"}],` +
		`"name":"` + name + `","namespace":"ns","resourceVersion":"123456","uid":"6f1c2d3e-1111-2222-3333-444455556666"},` +
		`"spec":{"parallelism":1,"retry":{"backoff":{"factor":2,"initial":"10s","max":"5m"},"maxRetries":3},"runner":{"shell":{"script":"./report.sh --all"},"type":"Shell"}` + resources + `},` +
		`"status":{"conditions":[{"lastTransitionTime":"2026-12-07T10:00:05Z","message":"the run succeeded","observedGeneration":1,"reason":"Succeeded","status":"True","type":"Ready"},` +
		`{"lastTransitionTime":"2026-12-07T10:00:05Z","message":"","observedGeneration":1,"reason":"Succeeded","status":"False","type":"Reconciling"},` +
		`{"lastTransitionTime":"2026-12-07T10:00:05Z","message":"","observedGeneration":1,"reason":"Succeeded","status":"False","type":"Stalled"}],` +
		`"phase":"Succeeded","runs":[{"job":"` + name + `-1","phase":"Succeeded","startTime":"2026-12-07T10:00:01Z","completionTime":"2026-12-07T10:00:04Z"}]}}`
}

func benchEvent(b *testing.B, withResources bool) {
	ev := []byte(`{"type":"MODIFIED","object":` + typicalTask("t", withResources) + `}`)
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		_ = readguard.Event(ev)
	}
}

func BenchmarkEventTaskWithoutResources(b *testing.B) { benchEvent(b, false) }
func BenchmarkEventTaskWithResources(b *testing.B)    { benchEvent(b, true) }

func BenchmarkEventTaskWithAnUnreadableQuantity(b *testing.B) {
	ev := []byte(`{"type":"MODIFIED","object":` + strings.Replace(typicalTask("t", true), `"500m"`, `"1e3000000000"`, 1) + `}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = readguard.Event(ev)
	}
}

func benchList(b *testing.B, withResources bool) {
	items := make([]string, 500)
	for i := range items {
		items[i] = typicalTask("t"+string(rune('a'+i%26)), withResources)
	}
	list := []byte(`{"apiVersion":"example.com/v1","kind":"TaskList","metadata":{"resourceVersion":"9"},"items":[` + strings.Join(items, ",") + `]}`)
	b.SetBytes(int64(len(list)))
	b.ReportAllocs()
	for b.Loop() {
		_ = readguard.Document(list)
	}
}

func BenchmarkDocumentListOf500WithoutResources(b *testing.B) { benchList(b, false) }
func BenchmarkDocumentListOf500WithResources(b *testing.B)    { benchList(b, true) }

// The typed decoding every event gets anyway, for scale.
func BenchmarkTypedDecodeOfTheSameEvent(b *testing.B) {
	ev := []byte(`{"type":"MODIFIED","object":` + typicalTask("t", true) + `}`)
	b.ReportAllocs()
	for b.Loop() {
		var e struct {
			Type   string  `json:"type"`
			Object v1.Task `json:"object"`
		}
		_ = kjson.UnmarshalCaseSensitivePreserveInts(ev, &e)
	}
}

// A watch stream of 100 events read whole through the wrapped transport, and without it.
func benchWatchStream(b *testing.B, wrap, withResources bool) {
	var stream bytes.Buffer
	for range 100 {
		stream.WriteString(`{"type":"MODIFIED","object":` + typicalTask("t", withResources) + "}\n")
	}
	data := stream.Bytes()
	var rt http.RoundTripper = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(data))}, nil
	})
	if wrap {
		cfg := &rest.Config{}
		readguard.Wrap(cfg)
		rt = cfg.WrapTransport(rt)
	}
	req, _ := http.NewRequest("GET", "https://h/apis/example.com/v1/namespaces/ns/tasks?watch=true", nil)
	buf := make([]byte, 32*1024)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		resp, _ := rt.RoundTrip(req)
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
	}
}

func BenchmarkWatchStream100EventsWithResourcesUnwrapped(b *testing.B) {
	benchWatchStream(b, false, true)
}
func BenchmarkWatchStream100EventsWithResourcesWrapped(b *testing.B) { benchWatchStream(b, true, true) }
func BenchmarkWatchStream100EventsWithoutResourcesWrapped(b *testing.B) {
	benchWatchStream(b, true, false)
}

// A list of 500 typical Tasks with resources, one of them holding an unreadable quantity: the
// whole list is decoded and encoded again.
func BenchmarkDocumentListOf500WithOneUnreadable(b *testing.B) {
	items := make([]string, 500)
	for i := range items {
		items[i] = typicalTask("t", true)
	}
	items[250] = strings.Replace(items[250], `"500m"`, `"1e3000000000"`, 1)
	list := []byte(`{"apiVersion":"example.com/v1","kind":"TaskList","metadata":{"resourceVersion":"9"},"items":[` + strings.Join(items, ",") + `]}`)
	b.SetBytes(int64(len(list)))
	b.ReportAllocs()
	for b.Loop() {
		_ = readguard.Document(list)
	}
}

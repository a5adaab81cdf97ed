package readguard_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/apis/install"
	v1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/readguard"
)

// A kubeconfig's server URL may carry a path (Rancher's https://rancher/k8s/clusters/c-xxx, an
// API gateway, kubectl proxy --api-prefix): client-go sends every request below it. The filter
// must still recognise the Task path and take the unreadable quantity out.
func TestAClientWhoseServerURLHasAPathStillHasUnreadableQuantitiesFiltered(t *testing.T) {
	bad := taskJSON("bad", `{"limits":{"cpu":"1e3000000000","memory":"1Gi"}}`, "")
	const prefix = "/k8s/clusters/c-m-abc"
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == prefix+"/apis/example.com/v1/namespaces/ns/tasks/bad" {
			_, _ = w.Write([]byte(bad))
			return
		}
		http.NotFound(w, r)
	}))
	defer server.Close()

	cfg := &rest.Config{Host: server.URL + prefix}
	readguard.Wrap(cfg)
	scheme := runtime.NewScheme()
	if err := install.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The bytes the typed decoder receives, recorded after the filter: decoding them here would
	// hang the test for minutes, so check them instead of decoding.
	var seen []byte
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if err == nil && resp.Body != nil {
				var b strings.Builder
				buf := make([]byte, 4096)
				for {
					n, rerr := resp.Body.Read(buf)
					b.Write(buf[:n])
					if rerr != nil {
						break
					}
				}
				seen = []byte(b.String())
				resp.Body.Close()
				// Answer NotFound instead of handing the (possibly unfiltered) Task on.
				resp.StatusCode = http.StatusNotFound
				resp.Body = http.NoBody
			}
			return resp, err
		})
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: taskMapper(scheme)})
	if err != nil {
		t.Fatal(err)
	}
	var task v1.Task
	_ = c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "bad"}, &task)
	if len(seen) == 0 {
		t.Fatal("no response reached the client")
	}
	if holdsUnreadableCPU(t, seen) || !strings.Contains(string(seen), v1.AnnotationUnreadable) {
		t.Errorf("the Task reached the typed decoder unfiltered (a decoding that spins for minutes):\n%s", seen)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The typed decoder (sigs.k8s.io/json, as encoding/json) parses every occurrence of a repeated
// key, the quantity's UnmarshalJSON included, before the last one wins; the filter's probe keeps
// only the last one and so misses an unreadable quantity repeated under a readable one. It also
// reads a key spelled with \u escapes as the field, which mayNeedFilter's byte test misses. The
// check is on the bytes (a typed decoding of them spins for minutes: measured, over 10s each).
func TestAnUnreadableQuantityBehindARepeatedOrEscapedKeyIsStillTakenOut(t *testing.T) {
	for name, resources := range map[string]string{
		"the quantity's key repeated": `{"limits":{"cpu":"1e3000000000","cpu":"1"}}`,
		"the limits key repeated":     `{"limits":{"cpu":"1e3000000000"},"limits":{"cpu":"1"}}`,
		"the resources key repeated":  `{"limits":{"cpu":"1e3000000000"}},"resources":{"limits":{"cpu":"1"}}`,
		// Not repeated, but spelled with a \u escape, which the decoder reads as "resources"
		// and the filter's byte test for "resources" does not see.
		"the resources key escaped": `{"limits":{"cpu":"1e3000000000"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			in := taskJSON("t", resources, "")
			if name == "the resources key escaped" {
				in = strings.Replace(in, `"resources"`, `"re\u0073ources"`, 1)
			}
			out, _ := readguard.Task([]byte(in))
			if holdsUnreadableCPU(t, out) {
				t.Errorf("the filtered Task still holds the unreadable quantity where the typed decoder parses it:\n in  %s\n out %s", in, out)
			}
		})
	}
}

// holdsUnreadableCPU says a Task (JSON) still holds the string "1e3000000000" as a value, in
// any occurrence of a repeated key too; in the annotation that names it, it is quoted with
// escapes (\"1e3000000000\"), which this does not match.
func holdsUnreadableCPU(t *testing.T, task []byte) bool {
	t.Helper()
	return bytes.Contains(task, []byte(`"1e3000000000"`))
}

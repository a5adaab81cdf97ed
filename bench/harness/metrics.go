package harness

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/kubernetes"

	"example.com/task-operator/internal/testenv"
)

// OperatorWrites returns the write requests an operator's clients sent so far, by HTTP method.
func OperatorWrites(ctx context.Context, o *testenv.Operator) (map[string]float64, error) {
	samples, err := o.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	return ClientWrites(samples), nil
}

func isWrite(method string) bool {
	switch strings.ToUpper(method) {
	case "POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION":
		return true
	}
	return false
}

// ClientWrites sums client-go's rest_client_requests_total over the write methods, by method:
// the requests a process's own clients sent, whatever their answer.
func ClientWrites(samples []testenv.Sample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.Name == "rest_client_requests_total" && isWrite(s.Labels["method"]) {
			out[strings.ToUpper(s.Labels["method"])] += s.Value
		}
	}
	return out
}

// Sum adds up the values of a map.
func Sum(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// Delta is after minus before, per key, dropping zeros.
func Delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// APIServerWrites reads apiserver_request_total from the apiserver's /metrics and sums the
// write verbs by "group/resource[/subresource] VERB". The metric has no user-agent label, so
// these are the writes of every client.
func APIServerWrites(ctx context.Context, kube kubernetes.Interface) (map[string]float64, error) {
	samples, err := apiserverMetrics(ctx, kube)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		if s.Name != "apiserver_request_total" || !isWrite(s.Labels["verb"]) || s.Labels["dry_run"] != "" {
			continue
		}
		res := s.Labels["resource"]
		if g := s.Labels["group"]; g != "" {
			res = g + "/" + res
		}
		if sub := s.Labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[res+" "+s.Labels["verb"]] += s.Value
	}
	return out, nil
}

// apiserverMetrics reads and parses the apiserver's /metrics.
func apiserverMetrics(ctx context.Context, kube kubernetes.Interface) ([]testenv.Sample, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	return testenv.ParseMetrics(strings.NewReader(string(raw)))
}

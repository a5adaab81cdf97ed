package versions

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// apiserverUse is what one apiserver's /metrics says about a version of the CRD's resource.
type apiserverUse struct {
	// requests counts the requests served at the version since the apiserver started, by verb
	// (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE, ...).
	requests map[string]float64
	// watches is the number of watches open at the version now.
	watches float64
}

func (u apiserverUse) total() float64 {
	var t float64
	for _, n := range u.requests {
		t += n
	}
	return t
}

// readAPIServerMetrics scrapes the apiserver the client reaches and returns, by version, its
// apiserver_request_total and apiserver_longrunning_requests{verb="WATCH"} for group/resource.
func (c *clients) readAPIServerMetrics(ctx context.Context, group, resource string) (map[string]apiserverUse, error) {
	raw, err := c.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the apiserver's /metrics: %w", err)
	}
	return parseAPIServerMetrics(raw, group, resource)
}

func parseAPIServerMetrics(raw []byte, group, resource string) (map[string]apiserverUse, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse the apiserver's /metrics: %w", err)
	}
	out := map[string]apiserverUse{}
	at := func(v string) apiserverUse {
		u, ok := out[v]
		if !ok {
			u = apiserverUse{requests: map[string]float64{}}
		}
		return u
	}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l := labels(m)
		if l["group"] != group || l["resource"] != resource {
			continue
		}
		u := at(l["version"])
		u.requests[strings.ToUpper(l["verb"])] += m.GetCounter().GetValue()
		out[l["version"]] = u
	}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		l := labels(m)
		if l["group"] != group || l["resource"] != resource || l["verb"] != "WATCH" {
			continue
		}
		u := at(l["version"])
		u.watches += m.GetGauge().GetValue()
		out[l["version"]] = u
	}
	return out, nil
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

package harness

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// conversionMetric is the apiserver's own timing of each conversion it asks a CRD's webhook for:
// the request, its encoding and decoding included.
const conversionMetric = "apiserver_crd_conversion_webhook_duration_seconds"

// Histogram is one Prometheus histogram: the count of observations, their sum, and the
// cumulative count at or below each bucket's upper bound.
type Histogram struct {
	Count, Sum float64
	Buckets    map[float64]float64
}

// Sub is what was observed between before and h.
func (h Histogram) Sub(before Histogram) Histogram {
	out := Histogram{Count: h.Count - before.Count, Sum: h.Sum - before.Sum, Buckets: map[float64]float64{}}
	for le, n := range h.Buckets {
		out.Buckets[le] = n - before.Buckets[le]
	}
	return out
}

// Add merges o into h.
func (h *Histogram) Add(o Histogram) {
	h.Count += o.Count
	h.Sum += o.Sum
	if h.Buckets == nil {
		h.Buckets = map[float64]float64{}
	}
	for le, n := range o.Buckets {
		h.Buckets[le] += n
	}
}

// Within is the share of observations at or below le, one of the bucket bounds.
func (h Histogram) Within(le float64) float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Buckets[le] / h.Count
}

// Quantile interpolates linearly within the bucket holding the q-quantile, as Prometheus'
// histogram_quantile does: the answer is only as fine as the buckets.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return math.NaN()
	}
	bounds := make([]float64, 0, len(h.Buckets))
	for le := range h.Buckets {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		n := h.Buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, n
	}
	return lower
}

// Conversions is the apiserver's conversion histogram for one CRD, by "from→to" version.
type Conversions map[string]Histogram

// APIServerConversions reads the conversion webhook histogram of crd from the apiserver.
func APIServerConversions(ctx context.Context, kube kubernetes.Interface, crd string) (Conversions, error) {
	samples, err := apiserverMetrics(ctx, kube)
	if err != nil {
		return nil, err
	}
	out := Conversions{}
	for _, s := range samples {
		if !strings.HasPrefix(s.Name, conversionMetric) || s.Labels["crd_name"] != crd {
			continue
		}
		key := s.Labels["from_version"] + "→" + s.Labels["to_version"]
		h := out[key]
		if h.Buckets == nil {
			h.Buckets = map[float64]float64{}
		}
		switch strings.TrimPrefix(s.Name, conversionMetric) {
		case "_count":
			h.Count += s.Value
		case "_sum":
			h.Sum += s.Value
		case "_bucket":
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: bucket bound %q: %w", conversionMetric, s.Labels["le"], err)
			}
			h.Buckets[le] += s.Value
		}
		out[key] = h
	}
	return out, nil
}

// Sub is what was converted between before and c.
func (c Conversions) Sub(before Conversions) Conversions {
	out := Conversions{}
	for k, h := range c {
		if d := h.Sub(before[k]); d.Count > 0 {
			out[k] = d
		}
	}
	return out
}

// Total merges every direction.
func (c Conversions) Total() Histogram {
	var t Histogram
	for _, h := range c {
		t.Add(h)
	}
	return t
}

// PerObject says how many calls each direction made per object, largest first, as
// "v1→v1alpha1 7.0, …"; "none" when there were none.
func (c Conversions) PerObject(objects int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c[a].Count != c[b].Count {
			return int(c[b].Count - c[a].Count)
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, c[k].Count/float64(max(objects, 1))))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Sample is one line of the Prometheus text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseMetrics reads the Prometheus text exposition format; comments and malformed lines are
// skipped.
func ParseMetrics(r io.Reader) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if s, ok := parseSample(line); ok {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, bool) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, false
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, false
			}
			key := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, false
			}
			s.Labels[key] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.Value = v
	return s, true
}

// WriteVerbs are the HTTP methods that change state.
var WriteVerbs = []string{"POST", "PUT", "PATCH", "DELETE"}

func isWrite(method string) bool {
	switch strings.ToUpper(method) {
	case "POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION":
		return true
	}
	return false
}

// ClientWrites sums client-go's rest_client_requests_total over the write methods, by method:
// the requests a process's own clients sent, whatever their answer.
func ClientWrites(samples []Sample) map[string]float64 {
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
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	samples, err := ParseMetrics(strings.NewReader(string(raw)))
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

// ScrapeURL fetches and parses a plain-HTTP metrics endpoint.
func ScrapeURL(ctx context.Context, url string) ([]Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

package observability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/testenv"
)

// TestDashboardAndAlertsQueryExportedMetrics: every metric that a query of the Grafana
// dashboard or an alert names is on the /metrics of a running operator, once it has Tasks in
// the states they watch (one succeeded, one scheduled) and has converted a request.
func TestDashboardAndAlertsQueryExportedMetrics(t *testing.T) {
	setUp(t)
	ctx := t.Context()
	ns := testenv.NewNamespace(t, kube)
	createTask(ctx, t, ns, "once")
	scheduled := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": taskv1.GroupVersion.String(), "kind": taskv1.Kind,
		"metadata": map[string]any{"name": "scheduled", "namespace": ns},
		"spec": map[string]any{
			"runner":   map[string]any{"type": "Shell", "shell": map[string]any{"script": "true"}},
			"schedule": map[string]any{"cron": "0 0 1 1 *"},
		},
	}}
	if _, err := dyn.Resource(taskv1.ResourceAt("v1")).Namespace(ns).Create(ctx, scheduled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	queried := map[string][]string{} // metric -> where
	for _, q := range dashboardQueries(t, "../../config/grafana/task-operator-dashboard.json") {
		for _, m := range metricNames(q) {
			queried[m] = append(queried[m], "dashboard: "+q)
		}
	}
	for _, q := range alertQueries(t, "../../config/prometheus/rules.yaml") {
		for _, m := range metricNames(q) {
			queried[m] = append(queried[m], "alert: "+q)
		}
	}
	if len(queried) < 10 {
		t.Fatalf("found only %d metrics in the queries: %v", len(queried), queried)
	}

	// The per-Task series of both Tasks are there once the Task that runs once has succeeded
	// and the scheduled one has a next run.
	var exported map[string]bool
	err := testenv.Poll(ctx, 2*time.Minute, 500*time.Millisecond, "per-Task series of both Tasks", func(ctx context.Context) (bool, error) {
		samples, err := operator.Metrics(ctx)
		if err != nil {
			return false, err
		}
		exported = map[string]bool{}
		for _, s := range samples {
			exported[s.Name] = true
		}
		// The run of "once" is counted where its outcome is recorded.
		if !slices.ContainsFunc(samples, func(s testenv.Sample) bool {
			return s.Name == "taskoperator_task_runs_total" && s.Labels["namespace"] == ns && s.Labels["task"] == "once" &&
				s.Labels["outcome"] == string(taskv1.RunSucceeded) && s.Value == 1
		}) {
			return false, fmt.Errorf("taskoperator_task_runs_total of Task once is not 1 Succeeded")
		}
		for _, want := range []struct{ metric, task string }{
			{"taskoperator_task_last_success_timestamp_seconds", "once"},
			{"taskoperator_task_next_run_timestamp_seconds", "scheduled"},
			{"taskoperator_task_last_run_duration_seconds", "once"},
		} {
			if !slices.ContainsFunc(samples, func(s testenv.Sample) bool {
				return s.Name == want.metric && s.Labels["namespace"] == ns && s.Labels["task"] == want.task
			}) {
				return false, fmt.Errorf("no %s for Task %s", want.metric, want.task)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%v\noperator log (tail):\n%s", err, operator.Tail(30))
	}
	for _, m := range slices.Sorted(maps.Keys(queried)) {
		if !exported[m] {
			t.Errorf("%s is not exported by the operator; queried by:\n  %s", m, strings.Join(queried[m], "\n  "))
		}
	}
}

// dashboardQueries are the PromQL expressions of the dashboard's panels and variables.
func dashboardQueries(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Type  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			out = append(out, target.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			out = append(out, fmt.Sprint(q["query"]))
		}
	}
	return out
}

// alertQueries are the expressions of the PrometheusRule's alerts.
func alertQueries(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Expr string }
			}
		}
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGroupings = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promNames     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	labelValues   = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	promKeywords  = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true}
)

// metricNames are the metrics a PromQL expression selects: what is left once strings, label
// matchers, ranges and groupings are cut, less function names (followed by a parenthesis) and
// keywords. Grafana's label_values(metric, label) names its metric.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promGroupings.ReplaceAllString(e, " ")
	var out []string
	for _, m := range promNames.FindAllStringSubmatch(e, -1) {
		name := m[0]
		if m[1] != "" || promKeywords[name] {
			continue // a function or an aggregation, or a keyword
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// TestMetricNames pins the extraction the test above relies on.
func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`max by (phase) (taskoperator_tasks)`, []string{"taskoperator_tasks"}},
		{`histogram_quantile(0.95, sum by (le) (rate(taskoperator_run_duration_seconds_bucket[$__rate_interval])))`, []string{"taskoperator_run_duration_seconds_bucket"}},
		{`max by (namespace, task) (taskoperator_task_failing) == 1 and on (namespace, task) max by (namespace, task) (taskoperator_task_next_run_timestamp_seconds)`,
			[]string{"taskoperator_task_failing", "taskoperator_task_next_run_timestamp_seconds"}},
		{`max(leader_election_master_status{name="task-operator.example.com"}) < 1 or absent(leader_election_master_status{name="x"})`, []string{"leader_election_master_status"}},
		{`time() - max by (namespace, task) (taskoperator_task_last_success_timestamp_seconds{namespace=~"$namespace"})`, []string{"taskoperator_task_last_success_timestamp_seconds"}},
		{`label_values(taskoperator_task_failing, namespace)`, []string{"taskoperator_task_failing"}},
	}
	for _, tt := range tests {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%s) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/internal/testenv"
)

// convert LISTs s.Tasks Tasks at each served version through the apiserver (v1alpha1 and
// v1beta1 go through the operator's conversion webhook) and runs the converter's Go benchmarks.
func convert(ctx context.Context, e *harness.Env, s Size, r *Result) error {
	const ns = "bench-conversion"
	if err := e.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	// Suspended Tasks: the operator records them but starts no Jobs.
	e.Logf("creating %d suspended Tasks", s.Tasks)
	if _, err := e.CreateTasks(ctx, ns, "c", s.Tasks, e.Workers, true, func(_ int, t *taskv1.Task) { t.Spec.Suspend = true }); err != nil {
		return err
	}
	if err := testenv.Poll(ctx, timeoutFor(s.Tasks, time.Minute, 100*time.Millisecond), 0, "status of the suspended Tasks", func(ctx context.Context) (bool, error) {
		var tasks taskv1.TaskList
		if err := e.Client.List(ctx, &tasks, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, t := range tasks.Items {
			if t.Status.Phase == "" {
				return false, nil
			}
		}
		time.Sleep(time.Second)
		return len(tasks.Items) >= s.Tasks, nil
	}); err != nil {
		return err
	}

	hc, err := rest.HTTPClientFor(e.Cfg)
	if err != nil {
		return err
	}
	versions := []string{"v1", "v1beta1", "v1alpha1"}
	times := map[string][]time.Duration{}
	var failed int
	var failures []string
	for rep := range s.Reps {
		for _, v := range versions {
			url := fmt.Sprintf("%s/apis/example.com/%s/namespaces/%s/tasks", strings.TrimRight(e.Cfg.Host, "/"), v, ns)
			began := time.Now()
			body, err := get(ctx, hc, url)
			d := time.Since(began)
			if err == nil && rep == 0 {
				var list struct {
					Items []json.RawMessage `json:"items"`
				}
				if err = json.Unmarshal(body, &list); err == nil && len(list.Items) != s.Tasks {
					err = fmt.Errorf("LIST at %s returned %d items, want %d", v, len(list.Items), s.Tasks)
				}
			}
			if err != nil {
				failed++
				if len(failures) < 3 {
					failures = append(failures, err.Error())
				}
				continue
			}
			times[v] = append(times[v], d)
		}
	}
	r.Addf("Tasks per LIST", fmt.Sprintf("%d LISTs per version, median shown", s.Reps), "%d", s.Tasks)
	base := median(times["v1"])
	for _, v := range versions {
		m := median(times[v])
		note := fmt.Sprintf("%.0f objects/s", rate(s.Tasks, m))
		if v != "v1" && base > 0 {
			note += fmt.Sprintf("; %.2f× the v1 LIST", m.Seconds()/base.Seconds())
		}
		r.Addf("LIST at "+v, note, "%.0f ms", float64(m.Microseconds())/1000)
	}
	r.Violation("failed LISTs", failed, strings.Join(failures, "; "))
	if s.Benchtime != "" {
		if err := goBench(ctx, e, s.Benchtime, r); err != nil {
			return err
		}
	}
	return e.DeleteTasks(ctx, ns, timeoutFor(s.Tasks, 2*time.Minute, 50*time.Millisecond))
}

func get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return body, nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// goBench runs the converter's Go benchmarks and adds their objects/s and allocations.
func goBench(ctx context.Context, e *harness.Env, benchtime string, r *Result) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	e.Logf("go test ./conversion -bench . -benchtime %s", benchtime)
	cmd := exec.CommandContext(ctx, "go", "test", "./conversion", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", benchtime)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test ./conversion -bench: %w\n%s", err, out.String())
	}
	sc := bufio.NewScanner(&out)
	found := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		metrics := map[string]string{}
		for i := 2; i+1 < len(fields); i += 2 {
			metrics[fields[i+1]] = fields[i]
		}
		name := strings.TrimPrefix(fields[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i] // GOMAXPROCS suffix
		}
		if metrics["objects/s"] == "" {
			if ns, err := strconv.ParseFloat(metrics["ns/op"], 64); err == nil && ns > 0 {
				metrics["objects/s"] = strconv.FormatFloat(1e9/ns, 'f', 0, 64)
			}
		}
		r.Add("go bench "+name, metrics["objects/s"]+" objects/s",
			fmt.Sprintf("%s ns/op, %s B/op, %s allocs/op", metrics["ns/op"], metrics["B/op"], metrics["allocs/op"]))
		found++
	}
	if found == 0 {
		return fmt.Errorf("no benchmark lines in go test output:\n%s", out.String())
	}
	return nil
}

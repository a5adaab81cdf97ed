package plugin_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// task is a v1 Task manifest: a shell runner plus extra spec lines and pod labels.
func task(name, labels, spec string) string {
	return fmt.Sprintf(`apiVersion: example.com/v1
kind: Task
metadata:
  name: %s
  labels: {%s}
spec:
  runner: {type: Shell, shell: {script: ./report.sh}}
%s`, name, labels, spec)
}

func waitFor(t *testing.T, ns, name, condition string) {
	t.Helper()
	ok(t, "wait", "-n", ns, "--for=condition="+condition, "task/"+name, "--timeout=90s")
}

// TestPluginIsFoundByKubectl: kubectl's plugin discovery finds kubectl-task on PATH, and its
// version says what it is, the cluster's version, and that no operator Deployment is there
// (the suite's operator runs as a process).
func TestPluginIsFoundByKubectl(t *testing.T) {
	setUp(t)
	contains(t, "kubectl plugin list", ok(t, "plugin", "list"), "/kubectl-task")
	contains(t, "kubectl task version", ok(t, "task", "version"),
		"Client: kubectl-task ", "Kubernetes: v1.", "Operator: not found in the cluster (no Deployment labelled app.kubernetes.io/name=task-operator,control-plane=controller-manager)")
	if out := ok(t, "task", "version", "--client"); strings.Contains(out, "Kubernetes") {
		t.Errorf("version --client asked the cluster:\n%s", out)
	}
}

// TestVersionNamesTheOperatorsDeployment: an operator installed as config/default or the chart
// installs it is found by its Deployment's labels, and its version is the manager's image.
func TestVersionNamesTheOperatorsDeployment(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: task-operator-controller-manager
  labels: {app.kubernetes.io/name: task-operator, control-plane: controller-manager, app.kubernetes.io/version: "1.2.3"}
spec:
  replicas: 0
  selector: {matchLabels: {app.kubernetes.io/name: task-operator, control-plane: controller-manager}}
  template:
    metadata: {labels: {app.kubernetes.io/name: task-operator, control-plane: controller-manager}}
    spec:
      containers:
      - {name: manager, image: registry.example.com/task-operator:v1.2.3}
`)
	contains(t, "kubectl task version", ok(t, "task", "version"),
		"Operator: 1.2.3, registry.example.com/task-operator:v1.2.3 (deployment "+ns+"/task-operator-controller-manager, 0/0 ready)")
	ok(t, "delete", "deployment", "task-operator-controller-manager", "-n", ns, "--wait=true")
}

// TestStatusRunsAndLogsOfASucceededTask reads a one-shot Task that succeeded at its first
// attempt through every reading command and output format.
func TestStatusRunsAndLogsOfASucceededTask(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("report", "", ""))
	waitFor(t, ns, "report", "Succeeded")

	contains(t, "status", ok(t, "task", "status", "report", "-n", ns),
		"Name:", "report", "Namespace:", ns, "Phase:", "Succeeded, since", "Schedule:", "<none: runs once>",
		"Ready", "True, Succeeded", "Current run:", "Attempt:", "1 of at most 4", "Job:", "report-0-1",
		"Outcome:", "Succeeded", "Finished:", "Pods:", "report-0-1-", "Next run:", "<none>", "Last error:", "Events:", "JobCreated")

	table := ok(t, "task", "runs", "report", "-n", ns)
	contains(t, "runs", table, "ATTEMPT", "JOB", "OUTCOME", "REASON", "report-0-1", "Succeeded")
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 2 {
		t.Errorf("runs: want a header and one run:\n%s", table)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Task       string `json:"task"`
			Attempt    int    `json:"attempt"`
			Job        string `json:"job"`
			Outcome    string `json:"outcome"`
			StartTime  string `json:"startTime"`
			FinishTime string `json:"finishTime"`
			JobExists  bool   `json:"jobExists"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(ok(t, "task", "runs", "report", "-n", ns, "-o", "json")), &list); err != nil {
		t.Fatalf("runs -o json: %v", err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("runs -o json: %d items, want 1: %+v", len(list.Items), list)
	}
	if r := list.Items[0]; r.APIVersion != "cli.task.example.com/v1" || r.Kind != "Run" || r.Task != "report" || r.Attempt != 1 ||
		r.Job != "report-0-1" || r.Outcome != "Succeeded" || r.StartTime == "" || r.FinishTime == "" || !r.JobExists {
		t.Errorf("runs -o json: %+v", r)
	}
	contains(t, "runs -o yaml", ok(t, "task", "runs", "report", "-n", ns, "-o", "yaml"), "kind: Run", "job: report-0-1", "outcome: Succeeded")
	if got := ok(t, "task", "runs", "report", "-n", ns, "-o", "name"); got != "run.cli.task.example.com/report-0-1\n" {
		t.Errorf("runs -o name: %q", got)
	}
	if got := ok(t, "task", "runs", "report", "-n", ns, "-o", `jsonpath={range .items[*]}{.job} {.outcome}{"\n"}{end}`); got != "report-0-1 Succeeded\n" {
		t.Errorf("runs -o jsonpath: %q", got)
	}
	contains(t, "runs -o custom-columns", ok(t, "task", "runs", "report", "-n", ns, "-o", "custom-columns=JOB:.job,OUTCOME:.outcome"),
		"JOB", "OUTCOME", "report-0-1", "Succeeded")

	// Logs through the apiserver's pods/log subresource, served by KWOK as the node's kubelet.
	for _, args := range [][]string{{}, {"--attempt", "1"}, {"-f"}} {
		if got := ok(t, append([]string{"task", "logs", "report", "-n", ns}, args...)...); got != podLog {
			t.Errorf("logs %v: %q, want %q", args, got, podLog)
		}
	}
	if got := ok(t, "logs", "-n", ns, "job/report-0-1"); got != podLog {
		t.Errorf("kubectl logs job/report-0-1 (the same path): %q", got)
	}
}

// TestRunsAndLogsOfEveryAttemptAndPod: a Task whose pod fails runs twice (maxRetries 1); runs
// lists both attempts with the Job controller's reason and logs reads either attempt. A Task
// of two pods shows both with --all-pods.
func TestRunsAndLogsOfEveryAttemptAndPod(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("flaky", "e2e.example.com/outcome: fail", `  retry: {maxRetries: 1, backoff: {initial: 1s, max: 1s}}
`))

	apply(t, ns, task("wide", "", `  parallelism: 2
`))
	waitFor(t, ns, "flaky", "Failed")
	waitFor(t, ns, "wide", "Succeeded")

	table := ok(t, "task", "runs", "flaky", "-n", ns)
	contains(t, "runs", table, "flaky-0-1", "flaky-0-2", "Failed")
	if n := strings.Count(table, "Failed"); n < 2 {
		t.Errorf("runs: %d failed attempts shown, want 2:\n%s", n, table)
	}
	contains(t, "status", ok(t, "task", "status", "flaky", "-n", ns), "Phase:", "Failed", "Attempt:", "2 of at most 2", "flaky-0-2", "Last error:", "RetriesExhausted")

	if got := ok(t, "task", "logs", "flaky", "-n", ns, "--attempt", "1"); got != podLog {
		t.Errorf("logs --attempt 1: %q", got)
	}
	all := ok(t, "task", "logs", "wide", "-n", ns, "--all-pods")
	if n := strings.Count(all, "[pod/wide-0-1-"); n != 2*strings.Count(podLog, "\n") {
		t.Errorf("logs --all-pods: %d prefixed lines, want a log from each of 2 pods:\n%s", n, all)
	}
	contains(t, "logs --all-pods", all, "] report: 42 rows\n", "] report: done\n")
	if got := ok(t, "task", "logs", "flaky", "-n", ns, "--attempt", "2"); got != podLog {
		t.Errorf("logs --attempt 2: %q", got)
	}

	// Once a user deletes the first attempt's Job, its logs are gone, and runs no longer lists it.
	ok(t, "delete", "job", "flaky-0-1", "-n", ns, "--wait=true")
	if r := kubectl(t, "", "task", "logs", "flaky", "-n", ns, "--attempt", "1"); r.code != 1 ||
		r.stderr != "error: task \"flaky\": the Job of attempt 1 no longer exists (its TTL, a history limit or a user deleted it): its logs are gone\n" {
		t.Errorf("logs of an attempt whose Job is gone: exit %d, stderr %q", r.code, r.stderr)
	}
	if table := ok(t, "task", "runs", "flaky", "-n", ns); strings.Contains(table, "flaky-0-1") || !strings.Contains(table, "flaky-0-2") {
		t.Errorf("runs after the first attempt's Job was deleted:\n%s", table)
	}
}

// TestSuspendAndResumeSayWhatTheyDid: each is one patch of spec.suspend, and a repeat changes
// nothing and says so.
func TestSuspendAndResumeSayWhatTheyDid(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("nightly", "", `  schedule: {cron: "0 2 * * *"}
`))
	for _, step := range []struct {
		args    []string
		want    string
		suspend string
	}{
		{[]string{"suspend"}, "task.example.com/nightly suspended\n", "true"},
		{[]string{"suspend"}, "task.example.com/nightly already suspended: nothing to do\n", "true"},
		{[]string{"resume"}, "task.example.com/nightly resumed\n", "false"},
		{[]string{"resume"}, "task.example.com/nightly not suspended: nothing to do\n", "false"},
	} {
		if got := ok(t, append([]string{"task"}, append(step.args, "nightly", "-n", ns)...)...); got != step.want {
			t.Errorf("%v: %q, want %q", step.args, got, step.want)
		}
		got := ok(t, "get", "task", "nightly", "-n", ns, "-o", "jsonpath={.spec.suspend}")
		if got == "" {
			got = "false"
		}
		if got != step.suspend {
			t.Errorf("after %v: spec.suspend %q, want %s", step.args, got, step.suspend)
		}
	}
	waitFor(t, ns, "nightly", "Ready")
	contains(t, "status", ok(t, "task", "status", "nightly", "-n", ns), "Schedule:", "0 2 * * * (UTC), concurrency Allow", "Next run:", "Current run:", "<none yet>")
}

// TestConvertedManifestsApplyAtV1: what convert writes from the samples of the old versions is
// accepted by the apiserver as written, at v1.
func TestConvertedManifestsApplyAtV1(t *testing.T) {
	ns := setUp(t)
	for _, sample := range []string{"v1alpha1_task.yaml", "v1beta1_task.yaml"} {
		out := ok(t, "task", "convert", "-f", "../../config/samples/"+sample)
		contains(t, "convert "+sample, out, "apiVersion: example.com/v1\n")
		apply(t, ns, out)
	}
	waitFor(t, ns, "sample-v1alpha1", "Succeeded")
}

// TestConvertedSpecIsWhatTheClusterStores: `kubectl task convert --to v1` prints, for a manifest
// at any version (v1 included, which holds no defaults as written), the spec the apiserver
// stores when that manifest is applied as it is: defaults included.
func TestConvertedSpecIsWhatTheClusterStores(t *testing.T) {
	ns := setUp(t)
	// Beside the samples, Tasks that leave out what an old version's schema defaults
	// (maxRetries, parallelism, method, replicas), and a scheduled one, whose history limits
	// v1beta1 cannot say: each printed at v1 and at its own version as the cluster serves it.
	dir := t.TempDir()
	for name, text := range map[string]string{
		"v1beta1_bare.yaml":      "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: bare-v1beta1}\nspec:\n  runner: {type: HTTP, http: {url: http://e.invalid/}}\n",
		"v1beta1_scheduled.yaml": "apiVersion: example.com/v1beta1\nkind: Task\nmetadata: {name: scheduled-v1beta1}\nspec:\n  runner: {type: Shell, shell: {script: echo}}\n  schedule: \"0 1 * * *\"\n  suspend: true\n",
		"v1alpha1_bare.yaml":     "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: bare-v1alpha1}\nspec: {type: shell, shell: echo}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, at string }{
		{"../../config/samples/v1_task.yaml", "v1"},
		{"../../config/samples/v1_task_http.yaml", "v1"},
		{"../../config/samples/v1_task_scheduled.yaml", "v1"},
		{"../../config/samples/v1alpha1_task.yaml", "v1alpha1"},
		{"../../config/samples/v1beta1_task.yaml", "v1beta1"},
		{filepath.Join(dir, "v1beta1_bare.yaml"), "v1beta1"},
		{filepath.Join(dir, "v1beta1_scheduled.yaml"), "v1beta1"},
		{filepath.Join(dir, "v1alpha1_bare.yaml"), "v1alpha1"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			ok(t, "apply", "-n", ns, "-f", tc.path)
			for _, to := range slices.Compact([]string{"v1", tc.at}) {
				var converted struct {
					Metadata struct{ Name string }
					Spec     map[string]any
				}
				if err := yaml.Unmarshal([]byte(ok(t, "task", "convert", "-f", tc.path, "--to", to)), &converted); err != nil {
					t.Fatalf("convert --to %s printed no Task: %v", to, err)
				}
				var stored map[string]any
				if err := json.Unmarshal([]byte(ok(t, "get", "tasks."+to+".example.com", converted.Metadata.Name, "-n", ns, "-o", "jsonpath={.spec}")), &stored); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(stored, converted.Spec); diff != "" {
					t.Errorf("convert --to %s printed a spec the cluster does not store (-stored +printed):\n%s", to, diff)
				}
			}
		})
	}
}

// jobOfRequest is the Job name the plugin says a run request gets ("... as Job NAME").
func jobOfRequest(t *testing.T, out string) string {
	t.Helper()
	_, job, found := strings.Cut(strings.TrimSpace(out), " as Job ")
	if !found || job == "" {
		t.Fatalf("the request names no Job:\n%s", out)
	}
	return job
}

// TestRerunAndCancelAsTyped: a one-shot Task that hangs is not rerun while it runs (one line, a
// non-zero exit); cancel stops it, Failed without a retry; a second cancel has nothing to do;
// rerun then starts one new run under the Job name it announced.
func TestRerunAndCancelAsTyped(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("stuck", `e2e.example.com/outcome: hang`, "  retry: {maxRetries: 2}\n"))
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Running", "task/stuck", "--timeout=90s")

	r := kubectl(t, "", "task", "rerun", "stuck", "-n", ns)
	if want := `error: task "stuck" in namespace "` + ns + `" is Running, not finished: rerun it once it Succeeded or Failed (or cancel it first)`; r.code == 0 || strings.TrimRight(r.stderr, "\n") != want {
		t.Errorf("rerun of a running Task: exit %d, stderr %q; want a non-zero exit and %q", r.code, r.stderr, want)
	}

	contains(t, "cancel", ok(t, "task", "cancel", "stuck", "-n", ns), "task.example.com/stuck: cancel requested at ")
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Failed", "task/stuck", "--timeout=90s")
	lastError := ok(t, "get", "task", "stuck", "-n", ns, "-o", "jsonpath={.status.attempts} {.status.lastError}")
	if !strings.HasPrefix(lastError, "1 cancelled at ") || !strings.HasSuffix(lastError, " by request") {
		t.Errorf("after cancel: attempts and lastError %q, want attempt 1 cancelled by request", lastError)
	}
	contains(t, "status after the cancel", ok(t, "task", "status", "stuck", "-n", ns), "\nCancel request:", ", honoured\n")
	if got := ok(t, "task", "cancel", "stuck", "-n", ns); got != "task.example.com/stuck is Failed: nothing to cancel\n" {
		t.Errorf("a second cancel said %q", got)
	}

	out := ok(t, "task", "rerun", "stuck", "-n", ns)
	contains(t, "rerun", out, "task.example.com/stuck: run requested at ", "; it starts now as Job stuck-")
	job := jobOfRequest(t, out)
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.lastJob.name}="+job, "task/stuck", "--timeout=90s")
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Running", "task/stuck", "--timeout=90s")
	contains(t, "runs after the rerun", ok(t, "task", "runs", "stuck", "-n", ns), job)
	contains(t, "cancel of the rerun", ok(t, "task", "cancel", "stuck", "-n", ns), "cancel requested at ")
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Failed", "task/stuck", "--timeout=90s")
}

// TestARerunOfATaskWithALongNameAnnouncesItsJob: a Task whose Jobs' names are cut and hashed to
// 63 characters is rerun under the Job name the plugin announced.
func TestARerunOfATaskWithALongNameAnnouncesItsJob(t *testing.T) {
	ns := setUp(t)
	name := "long-" + strings.Repeat("a", 65)
	apply(t, ns, task(name, "", ""))
	waitFor(t, ns, name, "Succeeded")
	out := ok(t, "task", "rerun", name, "-n", ns)
	job := jobOfRequest(t, out)
	if len(job) != 63 || !strings.HasPrefix(job, name[:30]) {
		t.Fatalf("rerun announced Job %q, want a 63-character name cut from the Task's", job)
	}
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.lastJob.name}="+job, "task/"+name, "--timeout=90s")
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "task/"+name, "--timeout=90s")
}

// TestRunOfAScheduledTaskAsTyped: run starts a scheduled Task's run now, under the Job name it
// announced, and leaves the schedule's lastScheduleTime alone.
func TestRunOfAScheduledTaskAsTyped(t *testing.T) {
	ns := setUp(t)
	apply(t, ns, task("hourly", "", "  schedule: {cron: '@every 1h'}\n"))
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Scheduled", "task/hourly", "--timeout=90s")
	out := ok(t, "task", "run", "hourly", "-n", ns)
	contains(t, "run", out, "task.example.com/hourly: run requested at ", " (unless a later schedule time is due by then: that run answers it); it starts now as Job hourly-")
	job := jobOfRequest(t, out)
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.currentRun.job.name}="+job, "task/hourly", "--timeout=90s")
	ok(t, "wait", "-n", ns, "--for=jsonpath={.status.currentRun.outcome}=Succeeded", "task/hourly", "--timeout=90s")
	if got := ok(t, "get", "task", "hourly", "-n", ns, "-o", "jsonpath={.status.lastScheduleTime}|{.status.runRequest}"); !strings.HasPrefix(got, "|20") {
		t.Errorf("lastScheduleTime|runRequest = %q, want no schedule time and the request", got)
	}
	status := ok(t, "task", "status", "hourly", "-n", ns)
	contains(t, "status after the run", status, "\nRun request:", ", honoured\n")
	if strings.Contains(status, "Cancel request") {
		t.Errorf("status of a Task never cancelled shows a cancel request:\n%s", status)
	}
}

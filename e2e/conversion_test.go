package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
)

// The same Task written at each version; whichever version it is read at, it says the same.
var sameTaskAtEachVersion = map[string]string{
	"v1alpha1": `apiVersion: example.com/v1alpha1
kind: Task
metadata: {name: %s}
spec: {type: shell, replicas: 2, shell: "echo hello", maxRetry: 1}
`,
	"v1beta1": `apiVersion: example.com/v1beta1
kind: Task
metadata: {name: %s}
spec:
  runner: {type: Shell, shell: {script: "echo hello"}}
  parallelism: 2
  maxRetries: 1
`,
	"v1": `apiVersion: example.com/v1
kind: Task
metadata: {name: %s}
spec:
  runner: {type: Shell, shell: {script: "echo hello"}}
  parallelism: 2
  retry: {maxRetries: 1}
`,
}

func TestCreateAtEachVersionReadAtAll(t *testing.T) {
	ns := setUp(t)
	for version, manifest := range sameTaskAtEachVersion {
		name := "written-at-" + version
		mustKubectl(t, fmt.Sprintf(manifest, name), "apply", "-n", ns, "-f", "-")

		var alpha v1alpha1.Task
		get(t, ns, name, &alpha)
		if s := alpha.Spec; s.Type != "shell" || s.Replicas != 2 || s.Shell != "echo hello" || s.MaxRetry != 1 {
			t.Errorf("%s read at v1alpha1: %+v", name, s)
		}
		var beta v1beta1.Task
		get(t, ns, name, &beta)
		if s := beta.Spec; s.Runner.Type != "Shell" || s.Runner.Shell == nil || s.Runner.Shell.Script != "echo hello" || s.Parallelism != 2 || s.MaxRetries != 1 {
			t.Errorf("%s read at v1beta1: %+v", name, s)
		}
		var hub taskv1.Task
		get(t, ns, name, &hub)
		s := hub.Spec
		if s.Runner.Type != taskv1.RunnerShell || s.Runner.Shell == nil || s.Runner.Shell.Script != "echo hello" || s.Parallelism != 2 ||
			s.Retry == nil || s.Retry.MaxRetries != 1 || s.Retry.Backoff == nil || s.Retry.Backoff.Factor != taskv1.DefaultBackoffFactor {
			t.Errorf("%s read at v1: %+v", name, s)
		}
		// Status holds v1-only fields once the operator has run the Task; the spec does not.
		for _, obj := range []client.Object{&alpha, &beta, &hub} {
			preserved := obj.GetAnnotations()[conversion.PreservedAnnotation]
			if preserved == "" {
				continue
			}
			var layout struct {
				Patch map[string]json.RawMessage `json:"patch"`
			}
			if err := json.Unmarshal([]byte(preserved), &layout); err != nil {
				t.Fatalf("%s read as %T: annotation %q: %v", name, obj, preserved, err)
			}
			if _, found := layout.Patch["spec"]; found {
				t.Errorf("%s read as %T preserves spec fields although every version expresses them: %s", name, obj, preserved)
			}
		}
	}
}

const richV1Task = `apiVersion: example.com/v1
kind: Task
metadata: {name: rich}
spec:
  runner:
    type: Shell
    shell:
      script: "echo rich"
      image: alpine:3.20
      env: [{name: MODE, value: full}]
  parallelism: 1
  retry: {maxRetries: 2, backoff: {initial: 1s, factor: 3, max: 1m}}
  timeout: 10m
  ttlSecondsAfterFinished: 600
  suspend: true
`

func TestUpdateAtOldVersionKeepsV1OnlyFields(t *testing.T) {
	ns := setUp(t)
	mustKubectl(t, richV1Task, "apply", "-n", ns, "-f", "-")
	var before taskv1.Task
	get(t, ns, "rich", &before)

	// A user still on v1alpha1 changes maxRetry with kubectl apply.
	mustKubectl(t, `apiVersion: example.com/v1alpha1
kind: Task
metadata: {name: rich}
spec: {type: shell, replicas: 1, shell: "echo rich", maxRetry: 7}
`, "apply", "-n", ns, "-f", "-")

	var after taskv1.Task
	get(t, ns, "rich", &after)
	want := before.Spec.DeepCopy()
	want.Retry.MaxRetries = 7
	if fmt.Sprint(after.Spec.Runner.Shell.Env) != fmt.Sprint(want.Runner.Shell.Env) || after.Spec.Runner.Shell.Image != "alpine:3.20" ||
		after.Spec.Retry.Backoff.Factor != 3 || after.Spec.Timeout == nil || after.Spec.Timeout.Duration != 10*time.Minute ||
		after.Spec.TTLSecondsAfterFinished == nil || !after.Spec.Suspend || after.Spec.Retry.MaxRetries != 7 {
		t.Errorf("after an update at v1alpha1 the v1 spec is %+v; want %+v", after.Spec, *want)
	}
	if _, ok := after.Annotations[conversion.PreservedAnnotation]; ok {
		t.Error("the preserved-fields annotation reached the stored v1 object")
	}
}

func TestPrinterColumnsAndIdempotentApply(t *testing.T) {
	ns := setUp(t)
	manifest := fmt.Sprintf(sameTaskAtEachVersion["v1alpha1"], "columns")
	first := mustKubectl(t, manifest, "apply", "-n", ns, "-f", "-")
	if !strings.Contains(first, "created") {
		t.Errorf("first apply: %q", first)
	}
	second := mustKubectl(t, manifest, "apply", "-n", ns, "-f", "-")
	if !strings.Contains(second, "unchanged") {
		t.Errorf("second apply of the same v1alpha1 manifest is not a no-op: %q", second)
	}
	for resource, header := range map[string][]string{
		"tasks.v1alpha1.example.com": {"NAME", "TYPE", "STATE", "RETRIES", "LAST JOB", "AGE"},
		"tasks.v1beta1.example.com":  {"NAME", "TYPE", "PHASE", "ATTEMPTS", "LAST JOB", "AGE"},
		"tasks.v1.example.com":       {"NAME", "TYPE", "PHASE", "ATTEMPTS", "LAST JOB", "AGE"},
	} {
		out := mustKubectl(t, "", "get", resource, "-n", ns)
		firstLine := strings.SplitN(out, "\n", 2)[0]
		if got := strings.Join(strings.Fields(strings.ReplaceAll(firstLine, "LAST JOB", "LAST_JOB")), " "); got != strings.ReplaceAll(strings.Join(header, " "), "LAST JOB", "LAST_JOB") {
			t.Errorf("kubectl get %s header = %q, want %v", resource, firstLine, header)
		}
		if !strings.Contains(out, "columns") {
			t.Errorf("kubectl get %s does not list the Task:\n%s", resource, out)
		}
	}
	// -o wide adds the schedule and when the latest attempt succeeded.
	wide := strings.SplitN(mustKubectl(t, "", "get", "tasks.v1.example.com", "-n", ns, "-o", "wide"), "\n", 2)[0]
	if got, want := strings.Join(strings.Fields(wide), " "), "NAME TYPE PHASE ATTEMPTS LAST JOB SCHEDULE LAST SUCCESS AGE"; got != want {
		t.Errorf("kubectl get tasks.v1.example.com -o wide header = %q, want %q", got, want)
	}
	wantType := map[string]string{"tasks.v1alpha1.example.com": "shell", "tasks.v1.example.com": "Shell"}
	for resource, typ := range wantType {
		out := mustKubectl(t, "", "get", resource, "columns", "-n", ns, "--no-headers")
		if fields := strings.Fields(out); len(fields) < 2 || fields[1] != typ {
			t.Errorf("kubectl get %s TYPE column: %q, want %s", resource, out, typ)
		}
	}
	// The short name and the category work too.
	mustKubectl(t, "", "get", "tsk", "-n", ns)
	mustKubectl(t, "", "get", "tasks", "-n", ns)
}

func TestInvalidTasksAreRejectedNamingTheField(t *testing.T) {
	ns := setUp(t)
	tests := []struct {
		name, manifest, wantField string
	}{
		{"v1alpha1 enum", `{apiVersion: example.com/v1alpha1, kind: Task, metadata: {name: a}, spec: {type: bash, shell: x}}`, "spec.type"},
		{"v1alpha1 minimum", `{apiVersion: example.com/v1alpha1, kind: Task, metadata: {name: b}, spec: {type: shell, shell: x, replicas: 0}}`, "spec.replicas"},
		{"v1alpha1 CEL runner matches type", `{apiVersion: example.com/v1alpha1, kind: Task, metadata: {name: c}, spec: {type: shell, shell: x, url: "http://a"}}`, "spec.url"},
		{"v1beta1 CEL one-of", `{apiVersion: example.com/v1beta1, kind: Task, metadata: {name: d}, spec: {runner: {type: Shell}}}`, "spec.runner.shell"},
		{"v1beta1 webhook cron", `{apiVersion: example.com/v1beta1, kind: Task, metadata: {name: e}, spec: {runner: {type: Shell, shell: {script: x}}, schedule: "every tuesday"}}`, "spec.schedule: Invalid value"}, // v1beta1's field, not v1's spec.schedule.cron
		{"v1 webhook time zone", `{apiVersion: example.com/v1, kind: Task, metadata: {name: f}, spec: {runner: {type: Shell, shell: {script: x}}, schedule: {cron: "@hourly", timeZone: Mars/Olympus_Mons}}}`, "spec.schedule.timeZone"},
		{"v1 url format", `{apiVersion: example.com/v1, kind: Task, metadata: {name: g}, spec: {runner: {type: HTTP, http: {url: "ftp://files"}}}}`, "spec.runner.http.url"},
		{"v1 backoff order", `{apiVersion: example.com/v1, kind: Task, metadata: {name: h}, spec: {runner: {type: Shell, shell: {script: x}}, retry: {backoff: {initial: 10m, max: 1m}}}}`, "spec.retry.backoff.initial"},
		{"v1 timeout", `{apiVersion: example.com/v1, kind: Task, metadata: {name: i}, spec: {runner: {type: Shell, shell: {script: x}}, timeout: 100ms}}`, "spec.timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The comment keeps kubectl from taking the flow-style YAML for JSON.
			out, err := kubectl("# invalid Task\n"+tt.manifest, "apply", "-n", ns, "-f", "-")
			if err == nil {
				t.Fatalf("accepted: %s", out)
			}
			if !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("error does not name %s: %v", tt.wantField, err)
			}
		})
	}
}

func TestCertificateRotationLosesNoRead(t *testing.T) {
	ns := setUp(t)
	mustKubectl(t, fmt.Sprintf(sameTaskAtEachVersion["v1"], "rotating"), "apply", "-n", ns, "-f", "-")
	secretKey := types.NamespacedName{Namespace: testenv.OperatorNamespace, Name: "task-operator-webhook-cert"}
	servingCert := func() [32]byte {
		var s corev1.Secret
		if err := kube.Get(context.Background(), secretKey, &s); err != nil {
			t.Fatalf("get webhook secret: %v", err)
		}
		return sha256.Sum256(s.Data[corev1.TLSCertKey])
	}

	ctx, cancel := context.WithCancel(context.Background())
	var reads, failures atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var list v1alpha1.TaskList
				err := kube.List(ctx, &list, client.InNamespace(ns))
				if ctx.Err() != nil {
					return
				}
				reads.Add(1)
				if err != nil || len(list.Items) != 1 {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%v (items: %d)", err, len(list.Items)))
				}
			}
		}()
	}

	rotations := 0
	for range 3 {
		before := servingCert()
		// Dropping the serving certificate makes the rotator issue a new one from the same CA.
		patch := []byte(`{"data":{"tls.crt":null}}`)
		if err := kube.Patch(context.Background(), &corev1.Secret{ObjectMeta: metaFor(secretKey)}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatalf("drop serving certificate: %v", err)
		}
		testenv.Eventually(t, 30*time.Second, "a new serving certificate", func(context.Context) (bool, error) {
			after := servingCert()
			return after != before && after != sha256.Sum256(nil), nil
		})
		rotations++
		time.Sleep(2 * time.Second) // keep reading with the new certificate in use
	}
	cancel()
	wg.Wait()
	t.Logf("%d reads at v1alpha1 across %d certificate rotations, %d failed", reads.Load(), rotations, failures.Load())
	if failures.Load() != 0 {
		t.Errorf("%d of %d reads failed during rotation; first: %v", failures.Load(), reads.Load(), firstFailure.Load())
	}
	if reads.Load() < 10 {
		t.Errorf("only %d reads happened; the test proves nothing", reads.Load())
	}
}

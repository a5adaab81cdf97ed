package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
	"example.com/task-operator/conversion/fuzzer"
	"example.com/task-operator/internal/jsonvalue"
)

// TestInBytesAgreesWithTheTypedPath holds every spoke's template to the typed path it stands in
// for, on hub objects sent as the apiserver sends them:
//   - the stored form of every combination of what the spoke expresses: the template must
//     answer exactly where the typed path takes its shortcut, with the same bytes (a default
//     added to v1 but not to the template, or a field it forgets, fails here);
//   - random Tasks, Tasks written at an old version, respelled, and the accepted bodies
//     damaged a byte at a time: wherever the template answers, the typed path took its
//     shortcut and wrote the same bytes.
func TestInBytesAgreesWithTheTypedPath(t *testing.T) {
	for version, s := range spokes {
		if s.inBytes == nil {
			continue
		}
		t.Run(version, func(t *testing.T) {
			t.Run("every combination of what it expresses", func(t *testing.T) {
				combos := v1alpha1Combinations()
				answered := 0
				for i, spoke := range combos {
					data := mustJSON(t, storedAtV1(t, spoke, v1alpha1.GroupVersion.String()))
					_, shortcut, err := typedWay(t, data, version)
					if err != nil {
						t.Fatalf("combination %d: %v", i, err)
					}
					ok := requireAgreement(t, data, version)
					if ok != shortcut {
						t.Fatalf("combination %d: the typed path's shortcut %v, the template answered %v, for\n%s", i, shortcut, ok, data)
					}
					if ok {
						answered++
					}
				}
				t.Logf("the template answered %d of %d combinations, as the typed path's shortcut did", answered, len(combos))
				if answered < len(combos)/2 {
					t.Fatalf("the template answered %d of %d combinations, want most", answered, len(combos))
				}
			})
			t.Run("random, respelled and damaged Tasks", func(t *testing.T) {
				answered := 0
				for _, data := range agreementCases(t, 2000) {
					if requireAgreement(t, data, version) {
						answered++
					}
				}
				t.Logf("the template answered %d cases, each as the typed path did", answered)
				if answered == 0 {
					t.Fatal("the template answered no case: the agreement was never tested")
				}
			})
		})
	}
}

// FuzzInBytesAgreesWithTheTypedPath sends arbitrary hub bodies: wherever a spoke's template
// answers, the typed path must have taken its shortcut and written the same bytes; a
// malformed body must never panic either way.
func FuzzInBytesAgreesWithTheTypedPath(f *testing.F) {
	for _, spoke := range v1alpha1Combinations()[:16] {
		f.Add(mustJSON(f, storedAtV1(f, spoke, v1alpha1.GroupVersion.String())))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := DecodeForConvert(data); err != nil {
			return
		}
		for version, s := range spokes {
			if s.inBytes != nil {
				requireAgreement(t, data, version)
			}
		}
	})
}

// v1alpha1Combinations are v1alpha1 Tasks of every combination of a runner (shell, HTTP, both,
// neither, an unknown type), replicas and maxRetry (zero or not) and each status field present
// or absent, retryCount zero, one or more.
func v1alpha1Combinations() []*v1alpha1.Task {
	var out []*v1alpha1.Task
	when := metav1.NewTime(time.Date(2026, 12, 6, 13, 4, 5, 0, time.UTC))
	for runner := range 5 {
		for status := range 1 << 5 {
			for _, retries := range []int32{0, 1, 4} {
				task := &v1alpha1.Task{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: taskv1.Kind}}
				task.Name, task.Namespace = fmt.Sprintf("t-%d-%d-%d", runner, status, retries), "ns"
				spec := &task.Spec
				spec.Type, spec.Replicas, spec.MaxRetry = "shell", int32(runner%2), int32(runner)
				switch runner {
				case 0:
					spec.Shell = "echo 1 && echo 2 > /dev/null"
				case 1:
					spec.Type, spec.URL = "http", "https://example.com/a?b=c"
				case 2:
					spec.Shell, spec.URL = "echo", "http://x"
				case 4:
					spec.Type, spec.Shell = "batch", "run"
				}
				st := &task.Status
				for bit, set := range []func(){
					func() { st.State = "Running" },
					func() { st.LastJobName = "t-1" },
					func() { st.LastError = "exit code 1: naïve \"quote\" \u2028 <b>\t\\" },
					func() { st.LastUpdateTime = &when },
					func() { st.RetryCount = retries },
				} {
					if status&(1<<bit) != 0 {
						set()
					}
				}
				out = append(out, task)
			}
		}
	}
	return out
}

// agreementCases are hub objects as sent: random v1 Tasks, Tasks written at both old versions,
// the same respelled, and accepted combinations damaged at one byte (flipped, removed,
// repeated) or with white space.
func agreementCases(t *testing.T, perKind int) [][]byte {
	f := fuzzer.New(11)
	rnd := rand.New(rand.NewPCG(11, 12))
	var out [][]byte
	for range perKind {
		hub := &taskv1.Task{}
		f.Fill(hub)
		out = append(out, mustJSON(t, hubObject(t, hub)))
		a := &v1alpha1.Task{}
		f.Fill(a)
		stored := storedAtV1(t, a, v1alpha1.GroupVersion.String())
		out = append(out, mustJSON(t, stored))
		respell(rnd, stored)
		out = append(out, mustJSON(t, stored))
		b := &v1beta1.Task{}
		f.Fill(b)
		out = append(out, mustJSON(t, storedAtV1(t, b, v1beta1.GroupVersion.String())))
	}
	for _, spoke := range v1alpha1Combinations() {
		stored := storedAtV1(t, spoke, v1alpha1.GroupVersion.String())
		data := mustJSON(t, stored)
		out = append(out, data)
		for range 8 {
			out = append(out, damaged(rnd, data))
		}
		for _, edit := range hubEdits {
			edited := deepCopy(stored).(map[string]any)
			edit(edited)
			out = append(out, mustJSON(t, edited))
		}
	}
	return out
}

// hubEdits change a stored Task at v1 in ways an old version may or may not express: the
// values next to the edges of what it reads back (zeros, empty strings, one attempt without a
// Job), hidden fields set, and spellings of the same value.
var hubEdits = []func(obj map[string]any){
	func(obj map[string]any) { setAt(obj, "status.attempts", int64(1)); cut(obj, "status.lastJob") },
	func(obj map[string]any) { setAt(obj, "status.attempts", int64(1)) },
	func(obj map[string]any) { setAt(obj, "status.attempts", int64(-1)) },
	func(obj map[string]any) { setAt(obj, "status.attempts", int64(0)) },
	func(obj map[string]any) { cut(obj, "status.attempts") },
	func(obj map[string]any) { setAt(obj, "status.lastJob.uid", "u-1") },
	func(obj map[string]any) { setAt(obj, "status.lastJob.name", "") },
	func(obj map[string]any) { setAt(obj, "status.phase", "") },
	func(obj map[string]any) { setAt(obj, "status.lastPhaseTransitionTime", "2026-12-06T13:04:05.5Z") },
	func(obj map[string]any) { setAt(obj, "status.lastPhaseTransitionTime", "2026-12-06T14:04:05+01:00") },
	func(obj map[string]any) { setAt(obj, "status.lastPhaseTransitionTime", "0001-01-01T00:00:00Z") },
	func(obj map[string]any) { setAt(obj, "status.observedGeneration", int64(2)) },
	func(obj map[string]any) { setAt(obj, "status", map[string]any{}) },
	func(obj map[string]any) { setAt(obj, "spec.parallelism", int64(0)) },
	func(obj map[string]any) { setAt(obj, "spec.parallelism", int64(-2)) },
	func(obj map[string]any) { setAt(obj, "spec.retry.maxRetries", int64(-1)) },
	func(obj map[string]any) { setAt(obj, "spec.retry.backoff.factor", int64(3)) },
	func(obj map[string]any) { setAt(obj, "spec.retry.backoff.initial", "10000ms") },
	func(obj map[string]any) { cut(obj, "spec.retry.backoff") },
	func(obj map[string]any) { setAt(obj, "spec.runner.type", "shell") },
	func(obj map[string]any) { setAt(obj, "spec.runner.type", "") },
	func(obj map[string]any) { setAt(obj, "spec.runner.shell.script", "") },
	func(obj map[string]any) { setAt(obj, "spec.runner.shell.script", "a<b && c>d") },
	func(obj map[string]any) { setAt(obj, "spec.runner.shell.script", "naïve \u2028") },
	func(obj map[string]any) { setAt(obj, "spec.runner.shell.image", "busybox") },
	func(obj map[string]any) { setAt(obj, "spec.runner.http.url", "") },
	func(obj map[string]any) { setAt(obj, "spec.runner.http.method", "POST") },
	func(obj map[string]any) { setAt(obj, "spec.runner.http.timeout", "30000ms") },
	func(obj map[string]any) { setAt(obj, "spec.suspend", false) },
	func(obj map[string]any) { setAt(obj, "spec.timeout", "1m") },
}

// damaged is data with one byte changed, removed or repeated, or a space inserted.
func damaged(rnd *rand.Rand, data []byte) []byte {
	i := rnd.IntN(len(data))
	out := bytes.Clone(data)
	switch rnd.IntN(4) {
	case 0:
		out[i] = " \"\\01-.eE{}[],:<&zZT"[rnd.IntN(20)]
	case 1:
		out = append(out[:i], out[i+1:]...)
	case 2:
		out = append(out[:i+1], out[i:]...)
	default:
		out = append(out[:i], append([]byte{' '}, out[i:]...)...)
	}
	return out
}

// typedWay converts data to version by the typed path, as the webhook did before templates:
// the answer the webhook writes, whether the shortcut was taken, or the error.
func typedWay(t testing.TB, data []byte, version string) ([]byte, bool, error) {
	t.Helper()
	d, err := DecodeForConvert(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	s := spokes[version]
	before := s.shortcuts.Load()
	out, err := s.fromHubDecoding(d.obj, d.sent, d.decodeBody)
	if err != nil {
		return nil, false, err
	}
	return answerBytes(t, out), s.shortcuts.Load() > before, nil
}

// templateWay converts data to version by the spoke's template; answered is false when it does
// not answer.
func templateWay(t testing.TB, data []byte, version string) (out []byte, answered bool, err error) {
	t.Helper()
	d, err := DecodeForConvert(data)
	if err != nil {
		return nil, false, nil // the webhook fails before either way
	}
	if v, err := versionOf(d.obj); err != nil || v != hubVersion {
		return nil, false, nil
	}
	obj, answered, err := spokes[version].fromHubInBytes(d.obj, d.sent)
	if !answered || err != nil {
		return nil, answered, err
	}
	return answerBytes(t, obj), true, nil
}

// requireAgreement converts data by the template and, where it answers, by the typed path,
// and fails unless the typed path took its shortcut and answered the same, or failed alike.
// It reports whether the template answered.
func requireAgreement(t testing.TB, data []byte, version string) bool {
	t.Helper()
	fast, answered, fastErr := templateWay(t, data, version)
	if !answered {
		return false
	}
	typed, shortcut, typedErr := typedWay(t, data, version)
	switch {
	case fastErr != nil || typedErr != nil:
		if fastErr == nil || typedErr == nil || fastErr.Error() != typedErr.Error() {
			t.Fatalf("to %s: the typed path fails with %v, the template with %v, for\n%s", version, typedErr, fastErr, data)
		}
	case !shortcut:
		t.Fatalf("to %s: the template answered where the typed path finds something lost:\n%s", version, data)
	default:
		requireSameAnswer(t, data, typed, fast)
	}
	return true
}

// answerBytes is obj as the webhook writes it in its answer.
func answerBytes(t testing.TB, obj map[string]any) []byte {
	t.Helper()
	out, err := jsonvalue.Append(nil, obj, false)
	if err != nil {
		t.Fatalf("encode the answer: %v", err)
	}
	if !json.Valid(out) {
		t.Fatalf("the answer is not JSON:\n%s", out)
	}
	return out
}

func requireSameAnswer(t testing.TB, data, typed, fast []byte) {
	t.Helper()
	if !bytes.Equal(typed, fast) {
		t.Fatalf("for\n%s\nthe typed path answers\n%s\nthe template\n%s", data, typed, fast)
	}
}

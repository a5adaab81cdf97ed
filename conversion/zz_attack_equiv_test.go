package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
	"example.com/task-operator/conversion/fuzzer"
	"example.com/task-operator/internal/jsonvalue"
)

var attackPieces = []string{"", "a", "<", ">", "&", "\u2028", "\u2029", "\x00", "\x1f", "\x7f", "é", "\"", "\\", "/", "\ufffd", "{}", "[]", "null", "日本", "😀", " ", "\n", "\t", "\\u0041", "</script>"}

func attackString(r *rand.Rand) string {
	n := r.IntN(4)
	s := ""
	for range n {
		s += attackPieces[r.IntN(len(attackPieces))]
	}
	return s
}

func attackTime(r *rand.Rand) *metav1.Time {
	switch r.IntN(8) {
	case 0:
		return &metav1.Time{}
	case 1:
		return &metav1.Time{Time: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}
	case 2:
		return &metav1.Time{Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}
	case 3:
		return &metav1.Time{Time: time.Date(2024, 2, 29, 12, 0, 0, r.IntN(1e9), time.FixedZone("x", -3600*r.IntN(12)))}
	case 4:
		return &metav1.Time{Time: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Local()}
	default:
		return &metav1.Time{Time: time.Unix(r.Int64N(1<<34), 0).Local()}
	}
}

func attackDuration(r *rand.Rand) *metav1.Duration {
	switch r.IntN(6) {
	case 0:
		return &metav1.Duration{}
	case 1:
		return &metav1.Duration{Duration: -time.Duration(r.Int64())}
	case 2:
		return &metav1.Duration{Duration: math.MaxInt64}
	case 3:
		return &metav1.Duration{Duration: math.MinInt64}
	default:
		return &metav1.Duration{Duration: time.Duration(r.Int64N(1 << 40))}
	}
}

var attackQuantities = []string{"0", "1", "1.5", "1e3", "1E3", "100m", "0.1", "1Gi", "1024Mi", "1k", "1000", "-1", "0.000001", "1n", "123456789012345678901234567890", "1.0", "+1", "5e-3", "0Ki"}

func attackInt32(r *rand.Rand) int32 {
	return []int32{0, 1, -1, math.MaxInt32, math.MinInt32, int32(r.Uint32())}[r.IntN(6)]
}

func ptr[T any](v T) *T { return &v }

// attackTask mutates a random hub Task with odd values in every kind of field.
func attackTask(r *rand.Rand, task *taskv1.Task) {
	s := &task.Spec
	st := &task.Status
	if r.IntN(2) == 0 {
		s.Runner.Type = taskv1.RunnerType(attackString(r))
	}
	if s.Runner.Shell != nil {
		s.Runner.Shell.Script = attackString(r)
		s.Runner.Shell.Image = attackString(r)
		if r.IntN(3) == 0 {
			s.Runner.Shell.Env = []taskv1.EnvVar{}
		}
	}
	if s.Runner.HTTP != nil {
		s.Runner.HTTP.URL = attackString(r)
		s.Runner.HTTP.Method = attackString(r)
		if r.IntN(3) == 0 {
			s.Runner.HTTP.Headers = []taskv1.HTTPHeader{}
		} else {
			s.Runner.HTTP.Headers = append(s.Runner.HTTP.Headers, taskv1.HTTPHeader{Name: attackString(r), Value: attackString(r)})
		}
		if r.IntN(3) == 0 {
			s.Runner.HTTP.AcceptedStatusCodes = []int32{}
		}
		if r.IntN(2) == 0 {
			s.Runner.HTTP.Timeout = attackDuration(r)
		}
	}
	s.Parallelism = attackInt32(r)
	if r.IntN(2) == 0 {
		s.Timeout = attackDuration(r)
	}
	if r.IntN(3) == 0 {
		s.Retry = &taskv1.RetryPolicy{MaxRetries: attackInt32(r), Backoff: &taskv1.Backoff{}}
		if r.IntN(2) == 0 {
			s.Retry.Backoff.Initial = attackDuration(r)
		}
	}
	if r.IntN(3) == 0 {
		s.Schedule = &taskv1.Schedule{Cron: attackString(r), TimeZone: attackString(r), StartingDeadlineSeconds: ptr(int64(math.MinInt64))}
	}
	if r.IntN(2) == 0 {
		s.Resources = &corev1.ResourceRequirements{}
		if r.IntN(3) > 0 {
			s.Resources.Limits = corev1.ResourceList{}
			s.Resources.Requests = corev1.ResourceList{}
			for range r.IntN(3) {
				s.Resources.Limits[corev1.ResourceName(attackString(r))] = resource.MustParse(attackQuantities[r.IntN(len(attackQuantities))])
				q := resource.MustParse(attackQuantities[r.IntN(len(attackQuantities))])
				_ = q.String() // cache its string, as a decoded one may have
				s.Resources.Requests[corev1.ResourceName("cpu")] = q
			}
		}
		if r.IntN(2) == 0 {
			s.Resources.Claims = []corev1.ResourceClaim{{Name: attackString(r), Request: attackString(r)}}
		}
	}
	s.QueueName = attackString(r)
	st.ObservedGeneration = []int64{0, -1, math.MaxInt64, math.MinInt64, 1 << 53, 1<<53 + 1}[r.IntN(6)]
	st.Phase = taskv1.Phase(attackString(r))
	st.Attempts = attackInt32(r)
	st.LastError = attackString(r)
	if r.IntN(2) == 0 {
		st.StartTime = attackTime(r)
	}
	if r.IntN(2) == 0 {
		st.LastPhaseTransitionTime = attackTime(r)
	}
	if r.IntN(2) == 0 {
		st.CompletionTime = attackTime(r)
	}
	if r.IntN(2) == 0 {
		st.ObservedSchedule = &taskv1.ObservedSchedule{Cron: attackString(r), Since: *attackTime(r)}
	}
	if r.IntN(2) == 0 {
		st.Conditions = []metav1.Condition{}
		for range r.IntN(3) {
			st.Conditions = append(st.Conditions, metav1.Condition{
				Type: attackString(r), Status: metav1.ConditionStatus(attackString(r)), Reason: attackString(r),
				Message: attackString(r), ObservedGeneration: int64(attackInt32(r)), LastTransitionTime: *attackTime(r),
			})
		}
	}
	if r.IntN(2) == 0 {
		st.LastJob = &taskv1.JobReference{Name: attackString(r)}
	}
	if r.IntN(3) == 0 {
		st.CurrentRun = &taskv1.RunRecord{Job: taskv1.JobReference{}, ScheduledTime: attackTime(r)}
	}
}

// sortedOf is losesNothing's encoding of a Task's body.
func sortedOf(t testing.TB, task *taskv1.Task) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(taskBody{Spec: &task.Spec, Status: &task.Status}); err != nil {
		t.Fatal(err)
	}
	sorted, ok := jsonvalue.Sorted(nil, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), true)
	if !ok {
		return nil
	}
	return sorted
}

// TestAttackEncodingIsTheConvertersBody: the assumption losesNothing rests on, directly: the
// typed body encoded by encoding/json, sorted and compacted, decodes to toBody's maps.
func TestAttackEncodingIsTheConvertersBody(t *testing.T) {
	f := fuzzer.New(11)
	r := rand.New(rand.NewPCG(1, 2))
	refused, sameBytes := 0, 0
	const n = 20000
	for i := range n {
		task := &taskv1.Task{}
		f.Fill(task)
		attackTask(r, task)
		if r.IntN(2) == 0 {
			taskv1.SetFieldDefaults(task)
		}
		sorted := sortedOf(t, task)
		if sorted == nil {
			refused++
			continue
		}
		decoded, err := jsonvalue.Decode(sorted)
		if err != nil {
			t.Fatalf("%d: sorted does not decode: %v\n%s", i, err, sorted)
		}
		want, err := toBody(task.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if len(diff(want, decoded.(map[string]any))) > 0 || !jsonvalue.Equal(map[string]any(want), decoded) {
			t.Fatalf("%d: the encoding decodes to another body: patch %v\nsorted %s", i, diff(want, decoded.(map[string]any)), sorted)
		}
		apiserver, _ := jsonvalue.Append(nil, map[string]any(want), true)
		if bytes.Equal(apiserver, sorted) {
			sameBytes++
		}
	}
	t.Logf("%d of %d refused by Sorted; %d byte-equal to the maps' encoding", refused, n, sameBytes)
}

// TestAttackFixedPoints sends, for random odd Tasks, a hub whose body is exactly the spoke's
// defaulted baseline (so the shortcut fires), plus variants, and holds the shortcut to preserve
// and the webhook's way to Convert's bytes.
func TestAttackFixedPoints(t *testing.T) {
	f := fuzzer.New(13)
	r := rand.New(rand.NewPCG(3, 4))
	hits := 0
	for i := range 4000 {
		task := &taskv1.Task{}
		f.Fill(task)
		attackTask(r, task)
		for _, version := range []string{v1alpha1.GroupVersion.Version, v1beta1.GroupVersion.Version} {
			_, pure, err := spokes[version].down(task.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			baseline := pure.DeepCopy()
			taskv1.SetFieldDefaults(baseline)
			body := sortedOf(t, baseline)
			if body == nil {
				continue
			}
			data := []byte(fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Task","metadata":{"name":"n","annotations":{%q:"x"}},%s`,
				PreservedAnnotation, body[1:]))
			hub, err := decodeJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			shortcut, lost := compareWithPreserve(t, hub, version)
			if shortcut {
				hits++
			}
			// compareWithPreserve re-encodes hub; check data as sent too.
			d, err := DecodeForConvert(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.decodeBody(); err != nil {
				t.Fatal(err)
			}
			sb, p2, err := spokes[version].toSpoke(d.obj, d.sent, d.decodeBody)
			if err != nil {
				t.Fatal(err)
			}
			s2 := losesNothing(p2, d.sent)
			pp, err := spokes[version].preserve(bodyOf(d.obj), sb, p2)
			if err != nil {
				t.Fatal(err)
			}
			if (shortcut && lost) || (s2 && len(pp.Patch) > 0) {
				t.Fatalf("%d at %s: shortcut with a patch %v:\n%s", i, version, pp.Patch, data)
			}
			requireWebhookWayMatchesConvert(t, hub, version)
			d3, err := DecodeForConvert(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d3.Convert(version)
			if err != nil {
				t.Fatal(err)
			}
			want := mustJSON(t, mustConvert(t, hub, version))
			if have := mustJSON(t, got); !bytes.Equal(want, have) {
				t.Fatalf("to %s: Convert gave\n%s\nthe webhook's way\n%s", version, want, have)
			}
		}
	}
	t.Logf("shortcut hits: %d", hits)
	if hits == 0 {
		t.Fatal("no hits")
	}
}

// TestAttackPooledBuffersConcurrently: losesNothing from many goroutines answers as it does alone.
func TestAttackPooledBuffersConcurrently(t *testing.T) {
	f := fuzzer.New(17)
	r := rand.New(rand.NewPCG(5, 6))
	type tc struct {
		pure *taskv1.Task
		sent []byte
		want bool
	}
	var cases []tc
	for range 200 {
		task := &taskv1.Task{}
		f.Fill(task)
		if r.IntN(2) == 0 {
			attackTask(r, task)
		}
		_, pure, err := spokes[v1beta1.GroupVersion.Version].down(task)
		if err != nil {
			t.Fatal(err)
		}
		b := pure.DeepCopy()
		taskv1.SetFieldDefaults(b)
		sent := sortedOf(t, b)
		if sent == nil {
			continue
		}
		if r.IntN(3) == 0 {
			sent = append(sent[:len(sent)-1:len(sent)-1], ' ', '}')
		}
		cases = append(cases, tc{pure, sent, losesNothing(pure, sent)})
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				c := cases[(i*7+g)%len(cases)]
				if got := losesNothing(c.pure, c.sent); got != c.want {
					t.Errorf("concurrent losesNothing %v, alone %v", got, c.want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

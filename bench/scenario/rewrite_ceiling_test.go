package scenario

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/task-operator/bench/harness"
)

// TestTheSameCallsFloorCountsEveryOtherCall: the floor's check is zero only for migrate.Run's
// two calls per write (up to 1 % of them), and counts a missing, an extra or a foreign call.
func TestTheSameCallsFloorCountsEveryOtherCall(t *testing.T) {
	const n = 1000
	calls := func(pairs map[string]float64) harness.Conversions {
		out := harness.Conversions{}
		for pair, count := range pairs {
			out[pair] = harness.Histogram{Count: count}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		calls harness.Conversions
		want  int
	}{
		{"migrate.Run's two per write", calls(map[string]float64{"v1→v1alpha1": n, "v1→v1beta1": n}), 0},
		{"a relist's few more", calls(map[string]float64{"v1→v1alpha1": n + 10, "v1→v1beta1": n + 10}), 0},
		{"a read from etcd per write", calls(map[string]float64{"v1→v1alpha1": n, "v1→v1beta1": n, "v1alpha1→v1": n}), n - 20},
		{"one watch cache silent", calls(map[string]float64{"v1→v1alpha1": n}), n - 20},
		{"no calls at all", calls(nil), 2*n - 20},
	} {
		if got := offMigrateRunCalls(tc.calls, n); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestCeilingsAreTimedSymmetrically: after migrate.Run, the ceilings run B B with no middle
// arm, or B C, then the middle arms D E F and F E D in turn, then C B: for every even count the
// order reads the same both ways, so that a drift of the machine weighs on both sides of every
// ratio alike.
func TestCeilingsAreTimedSymmetrically(t *testing.T) {
	named := func(name string) func(string) ceiling {
		return func(label string) ceiling { return ceiling{name: name, label: label} }
	}
	for _, tc := range []struct {
		k    int
		want string
	}{
		{0, "BB"},
		{2, "BCDEFFEDCB"},
		{4, "BCDEFFEDDEFFEDCB"},
	} {
		order, middle := ceilingOrder(tc.k, named("B"), named("C"), named("D"), named("E"), named("F"))
		var letters strings.Builder
		seen := map[string]bool{}
		for _, c := range order {
			letters.WriteString(c.name)
			if seen[c.String()] {
				t.Errorf("k=%d: %q timed twice under one name", tc.k, c)
			}
			seen[c.String()] = true
		}
		if letters.String() != tc.want {
			t.Errorf("k=%d: order %s, want %s", tc.k, letters.String(), tc.want)
		}
		for j, runs := range middle {
			if len(runs) != tc.k || tc.k > 0 && runs[0].name != string(rune('D'+j)) {
				t.Errorf("k=%d: middle arm %d has %d timings: %v", tc.k, j, len(runs), runs)
			}
		}
	}
}

// TestTheCeilingsFactorsMultiplyToGoalTwo: migrate.Run against the Task's-schemas ceiling, that
// against the Task-shape ceiling, and that against the no-webhook ceiling multiply to goal 2's
// ratio, each the slower side over the faster where the names say so.
func TestTheCeilingsFactorsMultiplyToGoalTwo(t *testing.T) {
	const n = 1000
	schemas := []ceiling{{name: taskSchemasCeiling, label: "1"}, {name: taskSchemasCeiling, label: "2"}}
	shapes := []ceiling{{name: taskShapeCeiling, label: "1"}, {name: taskShapeCeiling, label: "2"}}
	// Every ratio differs from the others, so that a row computed by another's formula fails.
	times := map[string]time.Duration{
		schemas[0].String(): 5 * time.Second, schemas[1].String(): 7 * time.Second, // mean 6 s
		shapes[0].String(): 4 * time.Second, shapes[1].String(): 6 * time.Second, // mean 5 s
	}
	ours := 16.0            // migrate.Run: 8 s a timing
	none := 8 * time.Second // no-webhook ceiling: 4 s a timing
	r := &Result{}
	reportSchemaCeiling(n, schemas, shapes, times, ours, none, r)
	want := map[string]float64{
		"migrate.Run speed ÷ the Task's schemas without a webhook":               0.75, // 6 ÷ 8
		"the Task's schemas without a webhook ÷ the no-webhook ceiling":          4.0 / 6,
		"the Task's schemas without a webhook ÷ the same Floors without them":    5.0 / 6,
		"Task-shaped Floors without the Task's schemas ÷ the no-webhook ceiling": 4.0 / 5,
	}
	product := 1.0
	for _, row := range r.Rows {
		w, ok := want[row.Metric]
		if !ok {
			t.Errorf("unexpected row %q", row.Metric)
			continue
		}
		got, err := strconv.ParseFloat(row.Value, 64)
		if err != nil || math.Abs(got-w) > 0.005 {
			t.Errorf("%s = %q, want %.2f", row.Metric, row.Value, w)
		}
		delete(want, row.Metric)
		if row.Metric != "the Task's schemas without a webhook ÷ the no-webhook ceiling" {
			product *= got
		}
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v", want)
	}
	if goal2 := none.Seconds() / ours; math.Abs(product-goal2) > 0.01 {
		t.Errorf("the three factors multiply to %.3f, goal 2's ratio is %.3f", product, goal2)
	}
}

// TestTheOnePassCeilingIsSetAgainstBothSides: migrate.Run and the no-webhook ceiling are each
// set against the marked Floors' mean timing, the slower side over the faster.
func TestTheOnePassCeilingIsSetAgainstBothSides(t *testing.T) {
	runs := []ceiling{{name: markedCeiling, label: "1"}, {name: markedCeiling, label: "2"}}
	times := map[string]time.Duration{runs[0].String(): 3 * time.Second, runs[1].String(): 5 * time.Second} // mean 4 s
	r := &Result{}
	reportOnePassCeiling(1000, runs, times, 16, 10*time.Second, r) // migrate.Run 8 s a timing, the ceiling 5 s
	want := map[string]string{
		"migrate.Run speed ÷ the one-pass no-webhook ceiling":           "0.50",
		"the no-webhook ceiling ÷ the same Floors marked on each write": "0.80",
	}
	for _, row := range r.Rows {
		if want[row.Metric] != row.Value {
			t.Errorf("%s = %s, want %s", row.Metric, row.Value, want[row.Metric])
		}
		delete(want, row.Metric)
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v", want)
	}
}

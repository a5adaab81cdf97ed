package testenv_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

func TestPollReturnsOnceDone(t *testing.T) {
	calls := 0
	err := testenv.Poll(t.Context(), time.Second, time.Millisecond, "three calls", func(context.Context) (bool, error) {
		calls++
		return calls == 3, errors.New("not yet")
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollTimeoutQuotesTheLastError(t *testing.T) {
	calls := 0
	err := testenv.Poll(t.Context(), 50*time.Millisecond, time.Millisecond, "the impossible", func(context.Context) (bool, error) {
		calls++
		if calls == 1 {
			return false, errors.New("first state")
		}
		return false, errors.New("latest state")
	})
	if err == nil || !strings.Contains(err.Error(), "waiting for the impossible: not done after 50ms") || !strings.Contains(err.Error(), "latest state") {
		t.Fatalf("Poll = %v; want the timeout, naming what and the latest state", err)
	}
}

func TestPollStopsAtAPermanentError(t *testing.T) {
	gone := errors.New("gone for good")
	calls := 0
	began := time.Now()
	err := testenv.Poll(t.Context(), time.Minute, time.Millisecond, "a dead process", func(context.Context) (bool, error) {
		calls++
		return false, testenv.Permanent(gone)
	})
	if !errors.Is(err, gone) || calls != 1 || time.Since(began) > time.Second {
		t.Fatalf("Poll = %v after %d calls in %s; want %v at once", err, calls, time.Since(began), gone)
	}
}

func TestPollEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := testenv.Poll(ctx, time.Minute, time.Millisecond, "anything", func(context.Context) (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("Poll with a cancelled context = %v", err)
	}
}

func TestParallelStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	err := testenv.Parallel(t.Context(), 1000, 4, func(ctx context.Context, i int) error {
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Parallel = %v, want %v", err, boom)
	}
	seen := make([]bool, 50)
	if err := testenv.Parallel(t.Context(), len(seen), 3, func(_ context.Context, i int) error { seen[i] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("Parallel skipped %d", i)
		}
	}
}

func TestTail(t *testing.T) {
	if got := testenv.Tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("Tail = %q", got)
	}
	if got := testenv.Tail("only", 5); got != "only" {
		t.Errorf("Tail of a short text = %q", got)
	}
}

func TestParseMetrics(t *testing.T) {
	in := `# HELP rest_client_requests_total x
rest_client_requests_total{code="200",host="127.0.0.1:1",method="POST"} 3
rest_client_requests_total{code="409",host="a\"b,c",method="PUT"} 2
leader_election_master_status{name="x"} 1
malformed{code="200" 1
other 1.5
`
	samples, err := testenv.ParseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 4 {
		t.Fatalf("parsed %d samples, want 4 (comment and malformed line skipped): %+v", len(samples), samples)
	}
	if s := samples[1]; s.Name != "rest_client_requests_total" || s.Labels["host"] != `a"b,c` || s.Labels["method"] != "PUT" || s.Value != 2 {
		t.Errorf("sample with an escaped label = %+v", s)
	}
	if s := samples[3]; s.Name != "other" || len(s.Labels) != 0 || s.Value != 1.5 {
		t.Errorf("sample without labels = %+v", s)
	}
}

package observability_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

// TestStartLogsNoErrors: a first start of the operator (certificates issued and injected,
// leader elected, webhooks served) is an expected course of events, and its log says so: no
// line at error level. An error line is something for a human to look at.
func TestStartLogsNoErrors(t *testing.T) {
	setUp(t)
	// The start is over once the rotator has injected the CA everywhere (it logs so last).
	testenv.Eventually(t, time.Minute, "the CA injected into the webhooks", func(context.Context) (bool, error) {
		return strings.Contains(operator.Logs(), "CA certs are injected to webhooks"), nil
	})
	lines := strings.Split(operator.Logs(), "\n")
	if len(lines) < 5 {
		t.Fatalf("the operator logged %d lines; is it logging?\n%s", len(lines), operator.Logs())
	}
	for _, line := range lines {
		if isErrorLine(line) {
			t.Errorf("error-level line at start:\n%s", line)
		}
	}
}

// isErrorLine says whether a log line (zap's JSON, or its console encoding) is at error level
// or above.
func isErrorLine(line string) bool {
	var entry struct{ Level string }
	if json.Unmarshal([]byte(line), &entry) == nil && entry.Level != "" {
		return entry.Level == "error" || entry.Level == "dpanic" || entry.Level == "panic" || entry.Level == "fatal"
	}
	fields := strings.Fields(line)
	return len(fields) > 1 && (fields[1] == "ERROR" || fields[1] == "DPANIC")
}

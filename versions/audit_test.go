package versions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An audit policy at level RequestResponse records the whole response: one LIST of many Tasks
// is one line of tens of megabytes. Such a line is one event the reader cannot decode, to be
// counted as bad like any other; it must not make the whole log (and with it status and
// retire) fail.
func TestAuditLogSkipsALineTooLongToRead(t *testing.T) {
	event := `{"objectRef":{"apiGroup":"example.com","resource":"tasks","apiVersion":"v1alpha1"},"verb":"list","user":{"username":"alice"},"stage":"ResponseComplete","stageTimestamp":"2030-01-01T00:00:00Z"`
	huge := event + `,"responseObject":{"items":"` + strings.Repeat("x", 17<<20) + `"}}`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(huge+"\n"+event+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	counts, _, err := readAuditLog(path, "example.com", "tasks")
	if err != nil {
		t.Fatalf("one long line failed the whole audit log: %v", err)
	}
	if len(counts) == 0 || counts[0].User != "alice" {
		t.Errorf("counts = %v, want alice's list at v1alpha1 (at least the line after the long one)", counts)
	}
}

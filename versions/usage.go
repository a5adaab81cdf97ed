package versions

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UsageConfigMap is the ConfigMap, in the operator's namespace, where each replica of the
// operator's admission webhook keeps its rolling record of writes per version, user and field
// manager: one data key per replica (its host name), a JSON UsageRecord each.
const UsageConfigMap = "task-operator-version-usage"

// MaxUsageEntries bounds a replica's record: past it the entry seen least recently goes.
const MaxUsageEntries = 64

// UsageRecord is one replica's record.
type UsageRecord struct {
	// Replica is the host name of the operator process that wrote it.
	Replica string `json:"replica"`
	// Since is when the process started recording: writes before it are not in the record.
	Since time.Time `json:"since"`
	// Updated is when the record was last written.
	Updated time.Time `json:"updated"`
	// Entries, most recently seen first.
	Entries []UsageEntry `json:"entries"`
	// Evicted counts entries dropped to keep the record within MaxUsageEntries.
	Evicted int `json:"evicted,omitempty"`
}

// UsageEntry counts the writes of one user through one field manager at one version.
type UsageEntry struct {
	Version string `json:"version"`
	User    string `json:"user"`
	// Agent is the write's field manager: what the client named itself with (kubectl's
	// "kubectl-client-side-apply", an SSA manager), or the user agent's program name the
	// apiserver defaults it to. "" when neither could be told.
	Agent string    `json:"agent"`
	Count int64     `json:"count"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// String is "user via agent".
func (e UsageEntry) String() string {
	agent := e.Agent
	if agent == "" {
		agent = "an unknown agent"
	}
	return fmt.Sprintf("%s via %s (%d writes, last %s)", e.User, agent, e.Count, e.Last.UTC().Format(time.RFC3339))
}

// DecodeUsage reads every replica's record from the ConfigMap's data; a key that does not
// decode is reported in bad, not fatal.
func DecodeUsage(data map[string]string) (records []UsageRecord, bad []string) {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range data {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		var r UsageRecord
		if err := json.Unmarshal([]byte(data[k]), &r); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		records = append(records, r)
	}
	return records, bad
}

// writersAt merges the records' entries at version (the same user and agent on several
// replicas add up), most recently seen first.
func writersAt(records []UsageRecord, version string) []UsageEntry {
	byKey := map[string]*UsageEntry{}
	for _, r := range records {
		for _, e := range r.Entries {
			if e.Version != version {
				continue
			}
			k := e.User + "\x00" + e.Agent
			have, ok := byKey[k]
			if !ok {
				e := e
				byKey[k] = &e
				continue
			}
			have.Count += e.Count
			if e.First.Before(have.First) {
				have.First = e.First
			}
			if e.Last.After(have.Last) {
				have.Last = e.Last
			}
		}
	}
	out := make([]UsageEntry, 0, len(byKey))
	for _, e := range byKey {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b UsageEntry) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.User+a.Agent, b.User+b.Agent)
	})
	return out
}

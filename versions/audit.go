package versions

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// AuditCount is how often one user and user agent sent one verb at a version, by an audit log.
type AuditCount struct {
	Version, User, UserAgent, Verb string
	Count                          int
	Last                           time.Time
}

func (a AuditCount) String() string {
	return fmt.Sprintf("%s %s by %s (%s): %d, last %s", a.Verb, a.Version, a.User, a.UserAgent, a.Count, a.Last.UTC().Format(time.RFC3339))
}

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource   string `json:"resource"`
		APIGroup   string `json:"apiGroup"`
		APIVersion string `json:"apiVersion"`
	} `json:"objectRef"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

type auditKey struct{ version, user, agent, verb string }

// countAuditLine counts one line of an audit log into byKey; false if it is not an event.
func countAuditLine(byKey map[auditKey]*AuditCount, line []byte, group, resource string) bool {
	if len(line) == 0 {
		return true
	}
	var e auditEvent
	if err := json.Unmarshal(line, &e); err != nil {
		return false
	}
	if e.ObjectRef == nil || e.ObjectRef.APIGroup != group || e.ObjectRef.Resource != resource {
		return true
	}
	want := "ResponseComplete"
	if e.Verb == "watch" {
		want = "ResponseStarted" // a watch completes only when it ends
	}
	if e.Stage != want {
		return true
	}
	k := auditKey{e.ObjectRef.APIVersion, e.User.Username, e.UserAgent, e.Verb}
	c, ok := byKey[k]
	if !ok {
		c = &AuditCount{Version: k.version, User: k.user, UserAgent: k.agent, Verb: k.verb}
		byKey[k] = c
	}
	c.Count++
	if e.StageTimestamp.After(c.Last) {
		c.Last = e.StageTimestamp
	}
	return true
}

// readAuditLog counts the requests to group/resource in an audit log of JSON lines, one per
// request (its ResponseComplete or, for a watch, ResponseStarted stage; other stages of the
// same request are not counted again), by version, user, user agent and verb. Lines that are
// not events of the CRD's resource are skipped; bad counts lines that do not decode.
func readAuditLog(path, group, resource string) (counts []AuditCount, bad int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	byKey := map[auditKey]*AuditCount{}
	// Lines of any length are read: a policy that records responses writes a LIST of many
	// Tasks as one line.
	rd := bufio.NewReaderSize(f, 1<<20)
	for {
		line, readErr := rd.ReadBytes('\n')
		if readErr != nil && readErr != io.EOF {
			return nil, bad, fmt.Errorf("audit log %s: %w", path, readErr)
		}
		if !countAuditLine(byKey, bytes.TrimSpace(line), group, resource) {
			bad++
		}
		if readErr == io.EOF {
			break
		}
	}
	for _, c := range byKey {
		counts = append(counts, *c)
	}
	slices.SortFunc(counts, func(a, b AuditCount) int {
		return cmp.Or(cmp.Compare(a.Version, b.Version), b.Last.Compare(a.Last), cmp.Compare(a.User, b.User), cmp.Compare(a.Verb, b.Verb))
	})
	return counts, bad, nil
}

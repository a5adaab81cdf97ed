// Package readguard keeps a client that decodes Tasks typed from hanging on one it cannot read.
//
// resource.Quantity spins for minutes and takes gigabytes parsing some quantities the Task
// schema's pattern takes ("1e3000000000"). The admission webhooks refuse them, but a Task stored
// by an earlier release, or written while the webhooks were removed, still holds one, and every
// typed decoding of it hangs: an informer's would stop the operator, and with it the conversion
// and admission webhooks it serves, for every Task. Wrap puts a filter on a client's transport
// that takes such a quantity out of each Task as it arrives, before any decoding, and names it
// in the annotation v1.AnnotationUnreadable; the operator then starts no run of that Task and
// says why in its status. Nothing is written back: the operator writes Tasks only by patches of
// what it changed.
package readguard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
	kjson "sigs.k8s.io/json"

	v1 "example.com/task-operator/apis/v1"
)

// Wrap makes every Task read through cfg (a GET, each item of a LIST, each event of a WATCH,
// the answer to a write) arrive without a spec.resources quantity outside v1.QuantityFits'
// bounds, and with v1.AnnotationUnreadable naming each one dropped. A stored
// v1.AnnotationUnreadable is removed, so that only this filter sets it.
func Wrap(cfg *rest.Config) {
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return &transport{next: next} })
}

type transport struct{ next http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil || !isTaskPath(req.URL.Path) || !isJSON(resp.Header.Get("Content-Type")) {
		return resp, err
	}
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
		resp.Body = &watchFilter{body: resp.Body}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", req.Method, req.URL.Path, err)
	}
	filtered := Document(body)
	resp.Body = io.NopCloser(bytes.NewReader(filtered))
	if len(filtered) != len(body) {
		resp.ContentLength = int64(len(filtered))
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// isTaskPath says path is the Task collection, a Task or one of its subresources, in a
// namespace or across all, at any version: /apis/example.com/<version>[/namespaces/<ns>]/tasks[/...],
// below the path of the server's URL if it has one (a Rancher cluster's, kubectl proxy's
// --api-prefix).
func isTaskPath(path string) bool {
	i := strings.Index(path, "/apis/"+v1.Group+"/")
	if i < 0 {
		return false
	}
	rest := path[i+len("/apis/"+v1.Group+"/"):]
	parts := strings.Split(rest, "/")
	if len(parts) >= 4 && parts[1] == "namespaces" {
		parts = parts[3:]
	} else {
		parts = parts[1:]
	}
	return len(parts) > 0 && parts[0] == v1.Resource
}

func isJSON(contentType string) bool {
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && media == "application/json"
}

// watchFilter passes a watch's events through Event, one at a time as each arrives. Events are
// framed by their brackets, as client-go's JSON framer reads them, without decoding; the
// framing resumes where it stopped, so an event arriving in many reads is scanned once.
type watchFilter struct {
	body    io.ReadCloser
	read    []byte // read from body; read[off:] is not framed yet
	off     int
	scan    objectScan
	pending []byte // filtered, not returned yet
	err     error  // body's, once it has one
	chunk   [32 << 10]byte
}

func (w *watchFilter) Read(p []byte) (int, error) {
	for len(w.pending) == 0 {
		if w.frame() {
			continue
		}
		if w.err != nil {
			return 0, w.err
		}
		// What is framed goes before more is read: one move a read, not one an event.
		w.read, w.off = append(w.read[:0], w.read[w.off:]...), 0
		n, err := w.body.Read(w.chunk[:])
		w.read, w.err = append(w.read, w.chunk[:n]...), err
	}
	n := copy(p, w.pending)
	w.pending = w.pending[n:]
	return n, nil
}

// frame moves the next complete event from read to pending, filtered; false when there is none
// yet. What does not begin an object, or what is left when the body ends, goes on as it is: the
// client's decoder says what is wrong with it.
func (w *watchFilter) frame() bool {
	rest := w.read[w.off:]
	if w.scan.at == 0 {
		trimmed := skipSpace(rest)
		w.off += len(rest) - len(trimmed)
		rest = trimmed
	}
	if len(rest) == 0 {
		return false
	}
	end, ok := 0, false
	if rest[0] == '{' {
		end, ok = w.scan.end(rest)
	}
	switch {
	case ok:
		w.pending = append(append(w.pending[:0], Event(rest[:end])...), '\n')
	case rest[0] != '{' || w.err != nil:
		end, w.scan = len(rest), objectScan{}
		w.pending = append(w.pending[:0], rest...)
	default:
		return false
	}
	w.off += end
	return true
}

// objectScan finds where an object arriving in pieces ends, resuming where it stopped.
type objectScan struct {
	at       int // the next byte to look at, counted from the object's start
	depth    int
	inString bool
}

// end is the index just after the object b begins with, once b holds all of it (the scan then
// starts afresh); ok is false until then. Within a string it jumps to the next quote that no
// backslash escapes; outside, it looks at each byte.
func (s *objectScan) end(b []byte) (int, bool) {
	for s.at < len(b) {
		if s.inString {
			i := bytes.IndexByte(b[s.at:], '"')
			if i < 0 {
				s.at = len(b)
				return 0, false
			}
			s.at += i
			s.inString = escapedQuote(b, s.at)
			s.at++
			continue
		}
		switch b[s.at] {
		case '"':
			s.inString = true
		case '{', '[':
			s.depth++
		case '}', ']':
			if s.depth--; s.depth == 0 {
				end := s.at + 1
				*s = objectScan{}
				return end, true
			}
		}
		s.at++
	}
	return 0, false
}

// escapedQuote says the quote at b[i] is escaped: an odd number of backslashes runs up to it.
func escapedQuote(b []byte, i int) bool {
	n := 0
	for i--; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func (w *watchFilter) Close() error { return w.body.Close() }

// Document is a response body (a Task, or a list of Tasks) with Task applied to each Task;
// body itself when nothing changes or it does not decode (the client's decoder then says why).
func Document(body []byte) []byte {
	if !mayNeedFilter(body) {
		return body
	}
	var top map[string]json.RawMessage
	strict, err := kjson.UnmarshalStrict(body, &top)
	if err != nil {
		return body
	}
	items, isList := top["items"]
	if !isList {
		if out, changed := Task(body); changed {
			return out
		}
		return body
	}
	var list []json.RawMessage
	if kjson.UnmarshalCaseSensitivePreserveInts(items, &list) != nil {
		return body
	}
	// items given twice: the typed decoding reads each; encoded again, only the last is left.
	changed := repeatedKey(strict)
	for i, item := range list {
		if out, c := Task(item); c {
			list[i], changed = out, true
		}
	}
	if !changed {
		return body
	}
	return reencode(top, "items", list, body)
}

// Event is a watch event with Task applied to its object; event itself when nothing changes.
func Event(event []byte) []byte {
	if !mayNeedFilter(event) {
		return event
	}
	var ev map[string]json.RawMessage
	if kjson.UnmarshalCaseSensitivePreserveInts(event, &ev) != nil {
		return event
	}
	out, changed := Task(ev["object"])
	if !changed {
		return event
	}
	return reencode(ev, "object", json.RawMessage(out), event)
}

// reencode is top with key set to value, encoded; fallback if that fails.
func reencode[V any](top map[string]json.RawMessage, key string, value V, fallback []byte) []byte {
	raw, err := json.Marshal(value)
	if err != nil {
		return fallback
	}
	top[key] = raw
	out, err := json.Marshal(top)
	if err != nil {
		return fallback
	}
	return out
}

// probe is what Task reads of a Task before deciding to change it, matched as the client's
// decoder (sigs.k8s.io/json, case-sensitive) matches keys, so that it sees the quantities the
// typed decoding would parse. Each quantity stays raw JSON: a number too large for a float64
// would not decode otherwise, and Quantity parses its text.
type probe struct {
	Metadata struct {
		Annotations map[string]json.RawMessage `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Resources struct {
			Limits   map[string]json.RawMessage `json:"limits"`
			Requests map[string]json.RawMessage `json:"requests"`
		} `json:"resources"`
	} `json:"spec"`
}

// Task is a Task (JSON) without the spec.resources quantities outside v1.QuantityFits' bounds,
// each named in v1.AnnotationUnreadable, and without a stored v1.AnnotationUnreadable; changed
// is false, and task returned, when it has neither.
func Task(task []byte) (out []byte, changed bool) {
	if !mayNeedFilter(task) {
		return task, false
	}
	var p probe
	// A member of the wrong type is an error the typed decoding records and goes past, parsing
	// the quantities all the same: only JSON that does not parse is left to the decoder.
	strict, err := kjson.UnmarshalStrict(task, &p)
	if err != nil && !json.Valid(task) {
		return task, false
	}
	if err != nil || repeatedKey(strict) || escapedKeyOfInterest(task) { // strict errors are not reported beside a type error
		// A key given twice (the typed decoding parses every occurrence before the last wins),
		// or spelled with an escape: decoded into maps and encoded again, only the last is
		// left, spelled plainly, and the probe below sees what the typed decoding would.
		deduplicated, err := rewrite(task, nil, "", false)
		if err != nil {
			return task, false
		}
		task, changed, p = deduplicated, true, probe{}
		_ = kjson.UnmarshalCaseSensitivePreserveInts(task, &p) // valid JSON: a type error at most
	}
	unreadable := map[string][]string{}
	var problems []string
	for _, list := range []struct {
		name       string
		quantities map[string]json.RawMessage
	}{{"limits", p.Spec.Resources.Limits}, {"requests", p.Spec.Resources.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(list.quantities)) {
			text := quantityText(list.quantities[name])
			if v1.QuantityFits(text) {
				continue
			}
			unreadable[list.name] = append(unreadable[list.name], name)
			problems = append(problems, fmt.Sprintf("spec.resources.%s.%s: Invalid value: %s: %s",
				list.name, shorten(name), strconv.Quote(shorten(text)), v1.QuantityBoundsMessage))
		}
	}
	_, stored := p.Metadata.Annotations[v1.AnnotationUnreadable]
	if len(problems) == 0 && !stored {
		return task, changed
	}
	filtered, err := rewrite(task, unreadable, unreadableMessage(problems), true)
	if err != nil {
		return task, changed
	}
	return filtered, true
}

// repeatedKey says the strict decoding's errors tell of a key given twice.
func repeatedKey(strict []error) bool {
	return slices.ContainsFunc(strict, func(err error) bool { return strings.Contains(err.Error(), "duplicate field") })
}

// namedProblems is how many of a Task's unreadable quantities its annotation names; the rest are
// counted. The message ends in the Task's conditions, which the CRD bounds.
const namedProblems = 3

func unreadableMessage(problems []string) string {
	if len(problems) <= namedProblems {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more quantities out of bounds", strings.Join(problems[:namedProblems], "; "), len(problems)-namedProblems)
}

// quantityText is a quantity's text as Quantity's UnmarshalJSON parses it: what is between a
// string's quotes, escapes and all, or a number as written, spaces trimmed.
func quantityText(raw json.RawMessage) string {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		raw = raw[1 : n-1]
	}
	return string(bytes.TrimSpace(raw))
}

// shorten keeps a message about a quantity readable: the quantity can be megabytes long.
func shorten(s string) string {
	const keep = v1.MaxQuantityLength + 16
	if len(s) <= keep {
		return s
	}
	return s[:keep] + "..." + fmt.Sprintf(" (%d characters)", len(s))
}

// rewrite decodes task keeping every number as written and the last of a repeated key, deletes
// the quantities named in unreadable from spec.resources, and when annotate sets
// AnnotationUnreadable to message (removes it when message is empty), and encodes the Task again.
func rewrite(task []byte, unreadable map[string][]string, message string, annotate bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(task))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	if resources, ok := nested(obj, "spec", "resources"); ok {
		for list, names := range unreadable {
			if quantities, ok := resources[list].(map[string]any); ok {
				for _, name := range names {
					delete(quantities, name)
				}
			}
		}
	}
	if !annotate {
		return json.Marshal(obj)
	}
	metadata, ok := obj["metadata"].(map[string]any)
	if !ok {
		metadata = map[string]any{}
		obj["metadata"] = metadata
	}
	annotations, _ := metadata["annotations"].(map[string]any)
	delete(annotations, v1.AnnotationUnreadable)
	if message != "" {
		if annotations == nil {
			annotations = map[string]any{}
			metadata["annotations"] = annotations
		}
		annotations[v1.AnnotationUnreadable] = message
	}
	return json.Marshal(obj)
}

// nested is the object at keys under obj.
func nested(obj map[string]any, keys ...string) (map[string]any, bool) {
	for _, k := range keys {
		next, ok := obj[k].(map[string]any)
		if !ok {
			return nil, false
		}
		obj = next
	}
	return obj, true
}

package conversion

import (
	"encoding/json"
	"slices"
	"strconv"

	"example.com/task-operator/internal/jsonvalue"
)

// Converting from the hub in bytes: most objects the apiserver asks an old version of are
// written as the typed path's shortcut (losesNothing) would accept them, the one spelling of
// what the old version says read back at v1 and defaulted, its keys sorted. A spoke that has a
// template (spoke.inBytes) reads such a body by matching it against that spelling, the
// template's holes giving the old version's values, and writes the old version's body from
// them: no typed decode, no mapping through structs, no encoding to compare.
//
// The template only ever answers where the typed path would have taken its shortcut, with the
// same bytes; anything else it declines, and the typed path decides as before. Its holes admit
// only values in the one spelling encoding/json gives them (answerText, bodyReader.int32), so
// that the bytes matched are the typed path's baseline and nothing else.
// TestInBytesAgreesWithTheTypedPath holds each template to the typed path: on the baseline of
// every combination of the fields its version expresses, which it must accept (a default added
// to v1 and not to the template fails it), and on random, respelled and damaged Tasks, where it
// must agree whenever it answers.

// bodyReader matches a JSON text against a template, a piece at a time; once a piece does not
// match, every later read fails too, so that a template reads as a straight sequence.
type bodyReader struct {
	data []byte
	i    int
	ok   bool
}

func newBodyReader(data []byte) *bodyReader { return &bodyReader{data: data, ok: true} }

// literal consumes s, which must come next.
func (r *bodyReader) literal(s string) {
	if !r.optional(s) {
		r.ok = false
	}
}

// optional consumes s if it comes next, and reports whether it did.
func (r *bodyReader) optional(s string) bool {
	if r.ok && len(r.data)-r.i >= len(s) && string(r.data[r.i:r.i+len(s)]) == s {
		r.i += len(s)
		return true
	}
	return false
}

// member consumes the key of an object's member, `"key":`, preceded by a comma unless it is the
// object's first (members counts those read); it reports whether the member came next.
func (r *bodyReader) member(members *int, key string) bool {
	start := r.i
	if *members > 0 && !r.optional(",") {
		return false
	}
	if !r.optional(`"`) || !r.optional(key) || !r.optional(`":`) {
		r.i = start
		return false
	}
	*members++
	return true
}

// text reads a string and returns what is between its quotes, escapes as sent, sharing the
// data's bytes (empty for ""). Whether it is spelled as the typed path would spell it is
// answerText's to say.
func (r *bodyReader) text() []byte {
	if !r.ok || !r.optional(`"`) {
		r.ok = false
		return nil
	}
	start := r.i
	for ; r.i < len(r.data); r.i++ {
		switch c := r.data[r.i]; {
		case c == '"':
			r.i++
			return r.data[start : r.i-1]
		case c == '\\':
			r.i++ // the escaped byte; answerText checks the escape whole
		case c < 0x20:
			r.ok = false
			return nil
		}
	}
	r.ok = false
	return nil
}

// int32 reads an integer in its one canonical spelling (no sign on 0, no leading zero, no
// fraction or exponent) that an int32 holds.
func (r *bodyReader) int32() int32 {
	start := r.i
	r.optional("-")
	digits := r.i
	for r.ok && r.i < len(r.data) && '0' <= r.data[r.i] && r.data[r.i] <= '9' {
		r.i++
	}
	if !r.ok || r.i == digits || r.i-digits > 1 && r.data[digits] == '0' {
		r.ok = false
		return 0
	}
	n, err := strconv.ParseInt(string(r.data[start:r.i]), 10, 32)
	if err != nil || n == 0 && digits > start {
		r.ok = false
		return 0
	}
	if r.i < len(r.data) && (r.data[r.i] == '.' || r.data[r.i] == 'e' || r.data[r.i] == 'E') {
		r.ok = false
	}
	return int32(n)
}

// end reports whether every piece matched and nothing is left.
func (r *bodyReader) end() bool { return r.ok && r.i == len(r.data) }

// plainText is a byte of a string that encoding/json writes as it is, escaping nothing, with
// HTML escaping (the apiserver's objects) and without (the webhook's answer): printable ASCII
// but for the quote, the backslash, and the <, > and & that only the former escapes.
func plainText(c byte) bool {
	return 0x20 <= c && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// answerText returns, for the inside of a string as sent, the string as the webhook's answer
// spells it (quoted, without HTML escaping); ok is false unless sent is exactly how
// encoding/json spells that string with HTML escaping, the one spelling the typed path's
// shortcut accepts (losesNothing compares the bytes).
func answerText(sent []byte) (answer []byte, ok bool) {
	quoted := quote(sent)
	if !slices.ContainsFunc(sent, func(c byte) bool { return !plainText(c) }) {
		return quoted, true
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return nil, false
	}
	if again, err := jsonvalue.Append(nil, s, true); err != nil || string(again) != string(quoted) {
		return nil, false
	}
	answer, err := jsonvalue.Append(nil, s, false)
	return answer, err == nil
}

// quote is text between two quotes, in a new slice.
func quote(text []byte) []byte {
	return append(append(append(make([]byte, 0, len(text)+2), '"'), text...), '"')
}

// bodyWriter writes a JSON object's members in the order they are given, which the template
// gives sorted: a json.Encoder's order for a map.
type bodyWriter struct {
	buf     []byte
	members int
}

func (w *bodyWriter) key(key string) {
	if w.members > 0 {
		w.buf = append(w.buf, ',')
	} else {
		w.buf = append(w.buf, '{')
	}
	w.members++
	w.buf = append(w.buf, '"')
	w.buf = append(w.buf, key...)
	w.buf = append(w.buf, '"', ':')
}

// text writes a member whose value is a string as answerText spells it.
func (w *bodyWriter) text(key string, answer []byte) {
	w.key(key)
	w.buf = append(w.buf, answer...)
}

func (w *bodyWriter) int32(key string, value int32) {
	w.key(key)
	w.buf = strconv.AppendInt(w.buf, int64(value), 10)
}

// object returns the object written, or nil when it has no member: the typed path drops an
// empty object from a body (toBody).
func (w *bodyWriter) object() json.RawMessage {
	if w.members == 0 {
		return nil
	}
	return append(w.buf, '}')
}

// jsonLiteral is v as encoding/json writes it, its members sorted (json.Marshal, then
// jsonvalue.Sorted), for the templates' fixed pieces: built from the API's own values, a
// default that changes changes the template with it.
func jsonLiteral(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	sorted, ok := jsonvalue.Sorted(nil, raw, true)
	if !ok {
		panic("jsonLiteral: cannot sort " + string(raw))
	}
	return string(sorted)
}

// Package jsonvalue encodes and compares decoded JSON (map[string]any, []any, string, int64,
// float64, bool, nil and json.RawMessage, as sigs.k8s.io/json decodes and the converter builds
// it) without reflection. The conversion webhook encodes every object it answers with and
// fingerprints every spoke it makes; through encoding/json's reflection and key sorting that
// was a fifth of a call.
//
// Append's output is encoding/json's byte for byte (FuzzAppendMatchesEncodingJSON): a
// fingerprint taken by an older release must still match, and an answer must not change
// spelling between releases. What the fast paths do not cover (floats, strings that need
// escaping, uncompacted raw values, other types) is handed to encoding/json itself.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Append appends the JSON encoding of v to dst as json.Marshal does (escapeHTML true) or as a
// json.Encoder with SetEscapeHTML(false) does, without the Encoder's trailing newline. A
// json.RawMessage must hold valid JSON, as every value a decoder split off does: a compact one
// is written as it is, without encoding/json's second validation of it.
func Append(dst []byte, v any, escapeHTML bool) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, v, escapeHTML), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case map[string]any:
		return appendObject(dst, v, escapeHTML)
	case []any:
		return appendArray(dst, v, escapeHTML)
	case json.RawMessage:
		if !escapeHTML && v != nil && isCompact(v) {
			return append(dst, v...), nil
		}
	}
	return appendByEncodingJSON(dst, v, escapeHTML)
}

// scratch holds buffers for With: most encodings are read once and dropped (hashed, decoded),
// and allocating their buffer afresh each time was a tenth of the webhook's garbage.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// With encodes v as Append does into a pooled buffer and hands it to use; the bytes are valid
// only until use returns.
func With(v any, escapeHTML bool, use func([]byte) error) error {
	buf := scratch.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= 64<<10 { // keep no giant buffer alive
			scratch.Put(buf)
		}
	}()
	out, err := Append((*buf)[:0], v, escapeHTML)
	if err != nil {
		return err
	}
	*buf = out
	return use(out)
}

func appendObject(dst []byte, m map[string]any, escapeHTML bool) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k, escapeHTML)
		dst = append(dst, ':')
		var err error
		if dst, err = Append(dst, m[k], escapeHTML); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func appendArray(dst []byte, a []any, escapeHTML bool) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, e := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = Append(dst, e, escapeHTML); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendString quotes s as is when no byte of it needs escaping, else as encoding/json does.
func appendString(dst []byte, s string, escapeHTML bool) []byte {
	if !needsEscaping(s, escapeHTML) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	out, _ := appendByEncodingJSON(dst, s, escapeHTML) // a string always encodes
	return out
}

// needsEscaping reports whether encoding/json writes s other than between two quotes: a
// control character, a quote or backslash, invalid UTF-8, U+2028 or U+2029, or with
// escapeHTML one of <, > and &.
func needsEscaping(s string, escapeHTML bool) bool {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b < 0x20 || b == '"' || b == '\\' || escapeHTML && (b == '<' || b == '>' || b == '&') {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return true
		}
		i += size
	}
	return false
}

// isCompact reports whether raw has no white space outside its strings: encoding/json would
// write it unchanged (with escapeHTML false) if it is valid JSON, as anything a decoder split
// off is.
func isCompact(raw []byte) bool {
	var s Strings
	for _, c := range raw {
		if s.Structural(c) && (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			return false
		}
	}
	return len(raw) > 0
}

// Strings follows JSON text a byte at a time to tell its strings from its structure, for the
// passes that only need that: finding a value's end, counting values, spotting white space.
type Strings struct{ in, escaped bool }

// Structural reports whether c, the text's next byte, lies outside every string and is no
// quote.
func (s *Strings) Structural(c byte) bool {
	switch {
	case s.escaped:
		s.escaped = false
	case s.in:
		switch c {
		case '\\':
			s.escaped = true
		case '"':
			s.in = false
		}
	case c == '"':
		s.in = true
	default:
		return true
	}
	return false
}

// InString reports whether the bytes so far end inside a string.
func (s *Strings) InString() bool { return s.in }

// appendByEncodingJSON is encoding/json's encoding of v, for what the fast paths leave out.
func appendByEncodingJSON(dst []byte, v any, escapeHTML bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...), nil
}

// Equal reports whether two decoded JSON values are equal as reflect.DeepEqual says, a nil map
// or list included (not equal to an empty one).
func Equal(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || (a == nil) != (b == nil) || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !Equal(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || (a == nil) != (b == nil) || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !Equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case string, bool, int64, nil:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

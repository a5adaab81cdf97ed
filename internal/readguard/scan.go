package readguard

import (
	"bytes"
	"encoding/json"
	"slices"

	v1 "example.com/task-operator/apis/v1"
)

// The byte scans that keep the filter's cost near nothing for what it lets through: most Tasks
// have no resources, and those that have hold short quantities ("500m", "1Gi"). Only a Task
// whose resources hold a value or key that could be out of bounds is decoded to be checked.

var resourcesKey = []byte(`"resources"`)

// mayNeedFilter is false when no Task in data can be one Task would change: each value under a
// "resources" key holds only strings and numbers within v1.QuantityFits' bounds, none with an
// escape, and there is no AnnotationUnreadable.
func mayNeedFilter(data []byte) bool {
	if bytes.Contains(data, []byte(v1.AnnotationUnreadable)) || escapedKeyOfInterest(data) {
		return true
	}
	for rest := data; ; {
		i := bytes.Index(rest, resourcesKey)
		if i < 0 {
			return false
		}
		rest = rest[i+len(resourcesKey):]
		value := skipSpace(rest)
		if len(value) == 0 || value[0] != ':' {
			continue // a string value "resources", not a key
		}
		value = skipSpace(value[1:])
		end, ok := valueEnd(value)
		if !ok || suspicious(value[:end]) {
			return true
		}
		rest = value[end:]
	}
}

// suspicious says a JSON value holds a string or number out of v1.QuantityFits' bounds, or a
// string with an escape (which could spell a key, or a quantity, otherwise).
func suspicious(value []byte) bool {
	for i := 0; i < len(value); {
		switch c := value[i]; {
		case c == '"':
			end, escaped := stringEnd(value, i)
			if escaped || !v1.QuantityFits(string(value[i+1:end-1])) {
				return true
			}
			i = end
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(value) && bytes.IndexByte([]byte("+-.eE0123456789"), value[j]) >= 0 {
				j++
			}
			if !v1.QuantityFits(string(value[i:j])) {
				return true
			}
			i = j
		default:
			i++
		}
	}
	return false
}

// keysOfInterest are the keys on the way to what Task reads and changes.
var keysOfInterest = []string{"spec", "resources", "limits", "requests", "metadata", "annotations"}

// escapedKeyOfInterest says data spells one of keysOfInterest with an escape ("re\u0073ources"),
// which the client's decoder reads as the key and the byte searches above do not see. The
// apiserver never writes one; something between it and the client could.
func escapedKeyOfInterest(data []byte) bool {
	if !bytes.Contains(data, []byte(`\u`)) {
		return false
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '"' {
			continue
		}
		end, escaped := stringEnd(data, i)
		if end > len(data) {
			return false
		}
		if rest := skipSpace(data[end:]); escaped && len(rest) > 0 && rest[0] == ':' {
			var key string
			if json.Unmarshal(data[i:end], &key) == nil && slices.Contains(keysOfInterest, key) {
				return true
			}
		}
		i = end - 1
	}
	return false
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// valueEnd is the index just after the JSON value b begins with (objects, arrays and strings
// matched by their brackets and quotes, anything else up to a delimiter); ok is false when b
// ends first.
func valueEnd(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	switch b[0] {
	case '"':
		end, _ := stringEnd(b, 0)
		return end, end <= len(b) && end > 0 && b[end-1] == '"'
	case '{', '[':
		depth := 0
		for i := 0; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, _ := stringEnd(b, i)
				if end > len(b) || b[end-1] != '"' {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	default:
		for i, c := range b {
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\t' || c == '\r' {
				return i, true
			}
		}
		return len(b), false
	}
}

// stringEnd is the index just after the string whose opening quote is b[start] (len(b)+1 if it
// is not closed), and whether it holds an escape.
func stringEnd(b []byte, start int) (int, bool) {
	escaped := false
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped
		}
	}
	return len(b) + 1, escaped
}

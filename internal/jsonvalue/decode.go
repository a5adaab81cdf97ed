package jsonvalue

import (
	"encoding/json"
	"strconv"

	kjson "sigs.k8s.io/json"
)

// maxDepth is encoding/json's nesting limit: deeper text goes to it, for its error.
const maxDepth = 10000

// Decode decodes a JSON text as sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts does into
// an any (whole numbers that fit as int64, others as float64; the last of a repeated key wins),
// the outcome and its error included (FuzzDecodeMatchesKubernetesJSON). Text a parser without
// reflection reads plainly (no escape nor non-ASCII byte in a string) is decoded by it; anything
// else, errors included, by sigs.k8s.io/json.
func Decode(data []byte) (any, error) {
	p := parser{data: data}
	if v, ok := p.document(); ok {
		return v, nil
	}
	var v any
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, &v)
	return v, err
}

// DecodeUnique is Decode of text without a repeated key in any object, decoded without
// reflection; ok is false for any other text (a repeated key, invalid JSON, anything Decode
// would hand to sigs.k8s.io/json). A caller decoding into a struct can map its values onto
// the fields knowing that encoding/json's merging of a repeated object never came into play.
func DecodeUnique(data []byte) (v any, ok bool) {
	p := parser{data: data, unique: true}
	return p.document()
}

// SplitObject splits a JSON object into its members' raw values as json.Unmarshal into a
// map[string]json.RawMessage does (the last of a repeated key wins); ok is false when data is
// not an object this parser reads plainly, and the caller must use encoding/json. The values
// share data's bytes.
func SplitObject(data []byte) (fields map[string]json.RawMessage, ok bool) {
	p := parser{data: data, skip: true}
	p.space()
	if !p.consume('{') {
		return nil, false
	}
	fields = map[string]json.RawMessage{}
	if p.space(); p.consume('}') {
		return fields, p.end()
	}
	for {
		p.space()
		key, ok := p.str(true)
		if !ok {
			return nil, false
		}
		if p.space(); !p.consume(':') {
			return nil, false
		}
		p.space()
		start := p.i
		if _, ok := p.value(2); !ok { // a member is one level below its object
			return nil, false
		}
		fields[key.(string)] = json.RawMessage(data[start:p.i])
		p.space()
		if p.consume(',') {
			continue
		}
		if p.consume('}') {
			return fields, p.end()
		}
		return nil, false
	}
}

// parser reads JSON text at i. With skip, it checks values without building them.
type parser struct {
	data []byte
	i    int
	skip bool
	// unique fails an object that repeats a key.
	unique bool
}

func (p *parser) document() (any, bool) {
	p.space()
	v, ok := p.value(1)
	return v, ok && p.end()
}

// end reports whether only white space is left.
func (p *parser) end() bool {
	p.space()
	return p.i == len(p.data)
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) consume(c byte) bool {
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) value(depth int) (any, bool) {
	if p.i >= len(p.data) || depth > maxDepth {
		return nil, false
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str(!p.skip)
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return p.number()
	}
}

func (p *parser) literal(word string) bool {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

func (p *parser) object(depth int) (any, bool) {
	p.i++ // {
	var m map[string]any
	if !p.skip {
		m = map[string]any{}
	}
	if p.space(); p.consume('}') {
		return m, true
	}
	for {
		p.space()
		key, ok := p.str(!p.skip)
		if !ok {
			return nil, false
		}
		if p.space(); !p.consume(':') {
			return nil, false
		}
		p.space()
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		if !p.skip {
			k := key.(string)
			if _, repeated := m[k]; repeated && p.unique {
				return nil, false
			}
			m[k] = v
		}
		p.space()
		if p.consume(',') {
			continue
		}
		return m, p.consume('}')
	}
}

func (p *parser) array(depth int) (any, bool) {
	p.i++ // [
	var a []any
	if !p.skip {
		a = []any{}
	}
	if p.space(); p.consume(']') {
		return a, true
	}
	for {
		p.space()
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		if !p.skip {
			a = append(a, v)
		}
		p.space()
		if p.consume(',') {
			continue
		}
		return a, p.consume(']')
	}
}

// str reads a string, and returns it when build is set. A string with escapes or non-ASCII
// bytes is unquoted by encoding/json (its replacement of invalid UTF-8, its surrogate rules).
func (p *parser) str(build bool) (any, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start, plain := p.i, true
	for ; p.i < len(p.data); p.i++ {
		switch c := p.data[p.i]; {
		case c == '"':
			end := p.i
			p.i++
			switch {
			case !build:
				return nil, true
			case plain:
				return string(p.data[start:end]), true
			}
			var s string
			err := json.Unmarshal(p.data[start-1:p.i], &s)
			return s, err == nil
		case c == '\\':
			plain = false
			if !p.escape() {
				return nil, false
			}
		case c < 0x20:
			return nil, false
		case c >= 0x80:
			plain = false
		}
	}
	return nil, false
}

// escape checks the escape at i, its backslash, and leaves i on its last byte.
func (p *parser) escape() bool {
	if p.i+1 >= len(p.data) {
		return false
	}
	p.i++
	switch p.data[p.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if p.i+4 >= len(p.data) {
			return false
		}
		for _, h := range p.data[p.i+1 : p.i+5] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return false
			}
		}
		p.i += 4
		return true
	}
	return false
}

// number reads a number by JSON's grammar: an integer that fits is an int64, any other a
// float64 (one strconv cannot represent is encoding/json's to refuse).
func (p *parser) number() (any, bool) {
	start := p.i
	p.consume('-')
	switch {
	case p.consume('0'):
	case p.digits() == 0:
		return nil, false
	}
	integer := true
	if p.consume('.') {
		integer = false
		if p.digits() == 0 {
			return nil, false
		}
	}
	if p.consume('e') || p.consume('E') {
		integer = false
		if !p.consume('+') {
			p.consume('-')
		}
		if p.digits() == 0 {
			return nil, false
		}
	}
	if p.skip {
		return nil, true
	}
	s := string(p.data[start:p.i])
	if integer {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// digits consumes a run of decimal digits and returns its length.
func (p *parser) digits() int {
	start := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

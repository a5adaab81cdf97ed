package jsonvalue

import (
	"bytes"
	"slices"
)

// Sorted appends to dst the JSON text data with the members of every object in encoding/json's
// order for a map's keys (byte order), no space between tokens, and, with dropEmpty, without a
// member whose value is an object that is empty or left empty by the same rule; objects inside a
// list keep theirs. Numbers, strings and literals are copied as they are written.
//
// Its purpose is comparison without decoding: the JSON encoding/json writes for a struct,
// Sorted, is byte for byte what it writes for the same value decoded into maps (and compacted
// as the converter compacts a typed object's body, with dropEmpty), with no map built.
//
// ok is false for text that is not one valid JSON value, and for a key with an escape or a byte
// beyond ASCII: its order would be that of the decoded key, which Sorted does not decode.
// Repeated keys are kept, both, as no encoding of a map could hold them.
func Sorted(dst, data []byte, dropEmpty bool) ([]byte, bool) {
	s := parser{data: data, skip: true}
	s.space()
	out, ok := s.sorted(dst, 1, dropEmpty)
	return out, ok && s.end()
}

// sortedMember is one member of an object being sorted: its key, and its value already sorted,
// as offsets into the object's buffer.
type sortedMember struct {
	key        []byte
	start, end int
}

// sorted appends the value at i, sorted.
func (p *parser) sorted(dst []byte, depth int, dropEmpty bool) ([]byte, bool) {
	if p.i >= len(p.data) || depth > maxDepth {
		return dst, false
	}
	switch p.data[p.i] {
	case '{':
		return p.sortedObject(dst, depth, dropEmpty)
	case '[':
		return p.sortedArray(dst, depth)
	}
	start := p.i
	if _, ok := p.value(depth); !ok {
		return dst, false
	}
	return append(dst, p.data[start:p.i]...), true
}

func (p *parser) sortedObject(dst []byte, depth int, dropEmpty bool) ([]byte, bool) {
	p.i++ // '{'
	var members []sortedMember
	var values []byte
	if p.space(); !p.consume('}') {
		for {
			p.space()
			key, ok := p.plainKey()
			if !ok {
				return dst, false
			}
			if p.space(); !p.consume(':') {
				return dst, false
			}
			p.space()
			start := len(values)
			if values, ok = p.sorted(values, depth+1, dropEmpty); !ok {
				return dst, false
			}
			if !dropEmpty || string(values[start:]) != "{}" {
				members = append(members, sortedMember{key: key, start: start, end: len(values)})
			}
			p.space()
			if p.consume(',') {
				continue
			}
			if p.consume('}') {
				break
			}
			return dst, false
		}
	}
	slices.SortStableFunc(members, func(a, b sortedMember) int { return bytes.Compare(a.key, b.key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, m.key...)
		dst = append(dst, '"', ':')
		dst = append(dst, values[m.start:m.end]...)
	}
	return append(dst, '}'), true
}

func (p *parser) sortedArray(dst []byte, depth int) ([]byte, bool) {
	p.i++ // '['
	dst = append(dst, '[')
	if p.space(); p.consume(']') {
		return append(dst, ']'), true
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',')
		}
		p.space()
		var ok bool
		if dst, ok = p.sorted(dst, depth+1, false); !ok {
			return dst, false
		}
		p.space()
		if p.consume(',') {
			continue
		}
		if p.consume(']') {
			return append(dst, ']'), true
		}
		return dst, false
	}
}

// plainKey reads an object's key that is written as it decodes: printable ASCII, no escape.
func (p *parser) plainKey() ([]byte, bool) {
	if !p.consume('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.data); p.i++ {
		switch c := p.data[p.i]; {
		case c == '"':
			p.i++
			return p.data[start : p.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

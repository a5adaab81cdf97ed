package jsonvalue

import (
	"bytes"
	"slices"
	"sync"
	"unsafe"
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
// ok is false for text that is not one valid JSON value, for a key with an escape or a byte
// beyond ASCII (its order would be that of the decoded key, which Sorted does not decode), and
// for an object that repeats a key: no encoding of a map holds one, and which of them counts
// (the last, once decoded) would decide what dropEmpty drops.
func Sorted(dst, data []byte, dropEmpty bool) ([]byte, bool) {
	s := sorters.Get().(*sorter)
	defer s.release()
	s.parser = parser{data: data, skip: true}
	s.space()
	out, ok := s.sorted(dst, 1, dropEmpty)
	return out, ok && s.end()
}

// sorter is a parser with the scratch space of the objects it is sorting: an object at depth d
// gathers its members and their sorted values in levels[d]. Only an object's ancestors are
// open while it is sorted, each at a smaller depth, so one level per depth serves every object
// and a Task's body is sorted without an allocation once the pool holds a sorter.
type sorter struct {
	parser
	levels []sortLevel
}

type sortLevel struct {
	members []sortedMember
	values  []byte
}

var sorters = sync.Pool{New: func() any { return new(sorter) }}

// maxPooledSortBytes bounds the scratch space a pooled sorter keeps: one huge text must not pin
// its size in memory.
const maxPooledSortBytes = 64 << 10

func (s *sorter) release() {
	size := cap(s.levels) * int(unsafe.Sizeof(sortLevel{}))
	for _, l := range s.levels {
		size += cap(l.values) + cap(l.members)*int(unsafe.Sizeof(sortedMember{}))
	}
	s.parser = parser{}
	if size > maxPooledSortBytes {
		return
	}
	for i := range s.levels {
		// The keys point into the texts sorted, up to the capacity any earlier text used.
		members := s.levels[i].members
		clear(members[:cap(members)])
		s.levels[i].members = members[:0]
	}
	sorters.Put(s)
}

// level is depth's scratch space, emptied.
func (s *sorter) level(depth int) *sortLevel {
	for len(s.levels) <= depth {
		s.levels = append(s.levels, sortLevel{})
	}
	l := &s.levels[depth]
	l.members, l.values = l.members[:0], l.values[:0]
	return l
}

// sortedMember is one member of an object being sorted: its key, and its value already sorted,
// as offsets into the object's buffer; dropped when dropEmpty drops it.
type sortedMember struct {
	key        []byte
	start, end int
	dropped    bool
}

// sorted appends the value at i, sorted. depth counts the objects and lists it is in, itself
// included should it be one: encoding/json refuses text deeper than maxDepth.
func (p *sorter) sorted(dst []byte, depth int, dropEmpty bool) ([]byte, bool) {
	if p.i >= len(p.data) {
		return dst, false
	}
	switch c := p.data[p.i]; {
	case (c == '{' || c == '[') && depth > maxDepth:
		return dst, false
	case c == '{':
		return p.sortedObject(dst, depth, dropEmpty)
	case c == '[':
		return p.sortedArray(dst, depth)
	}
	start := p.i
	if _, ok := p.value(1); !ok { // a scalar: no depth of its own
		return dst, false
	}
	return append(dst, p.data[start:p.i]...), true
}

func (p *sorter) sortedObject(dst []byte, depth int, dropEmpty bool) ([]byte, bool) {
	p.i++ // '{'
	l := p.level(depth)
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
			// The value is sorted into this level's buffer: a deeper object uses a deeper level,
			// and l stays valid however many levels it adds (it points into s.levels, which
			// may move: l is read again after).
			start := len(p.levels[depth].values)
			values, ok := p.sorted(p.levels[depth].values, depth+1, dropEmpty)
			l = &p.levels[depth]
			l.values = values
			if !ok {
				return dst, false
			}
			dropped := dropEmpty && string(values[start:]) == "{}"
			l.members = append(l.members, sortedMember{key: key, start: start, end: len(values), dropped: dropped})
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
	members := l.members
	slices.SortFunc(members, func(a, b sortedMember) int { return bytes.Compare(a.key, b.key) })
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i-1].key, members[i].key) {
			return dst, false
		}
	}
	dst = append(dst, '{')
	written := 0
	for _, m := range members {
		if m.dropped {
			continue
		}
		if written++; written > 1 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, m.key...)
		dst = append(dst, '"', ':')
		dst = append(dst, l.values[m.start:m.end]...)
	}
	return append(dst, '}'), true
}

func (p *sorter) sortedArray(dst []byte, depth int) ([]byte, bool) {
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

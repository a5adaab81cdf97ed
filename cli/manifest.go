package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// A segment is a run of a manifest file's bytes: a document (a YAML document, or one value of
// a JSON stream), or what lies between documents (a --- line with its comment, the whitespace
// between JSON values). Joining a file's segments gives the file back byte for byte.
type segment struct {
	text []byte
	doc  bool
	// json marks a value of a JSON stream: its text holds no whitespace around it.
	json bool
}

// splitManifest cuts a file into documents the way kubectl apply -f reads it
// (utilyaml.NewYAMLOrJSONDecoder): a file whose first non-space byte is { is a stream of JSON
// values ({...}{...}, or one per line); should it not be (the first value is YAML's flow
// style, not JSON), it is YAML, and after a single JSON value the rest of the file may be YAML.
// YAML documents are separated by lines starting with --- followed by nothing but a comment.
func splitManifest(data []byte) ([]segment, error) {
	if !utilyaml.IsJSONBuffer(data) {
		return splitYAML(data, 0)
	}
	var segs []segment
	dec := json.NewDecoder(bytes.NewReader(data))
	end := 0 // where the last value decoded ends
	for n := 0; ; n++ {
		var v json.RawMessage
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			if end < len(data) {
				segs = append(segs, segment{text: data[end:]})
			}
			return segs, nil
		}
		if err != nil {
			switch n {
			case 0: // not JSON: YAML (a flow mapping, say)
				return splitYAML(data, 0)
			case 1: // one JSON value, then YAML: kubectl reads on as YAML from the next line
				rest := end + whitespaceToNewline(data[end:])
				yamlSegs, yerr := splitYAML(data[rest:], 1)
				if yerr != nil {
					return nil, yerr
				}
				if rest > end {
					segs = append(segs, segment{text: data[end:rest]})
				}
				return append(segs, yamlSegs...), nil
			}
			return nil, fmt.Errorf("document %d: not JSON, after %d JSON documents: %w", n+1, n, err)
		}
		stop := int(dec.InputOffset())
		start := stop - len(v)
		if start > end {
			segs = append(segs, segment{text: data[end:start]})
		}
		segs = append(segs, segment{text: data[start:stop], doc: true, json: true})
		end = stop
	}
}

// whitespaceToNewline is the length of the whitespace b starts with, up to and including the
// first newline: what kubectl skips after a JSON value before it reads the rest as YAML.
func whitespaceToNewline(b []byte) int {
	n := 0
	for n < len(b) {
		r, size := utf8.DecodeRune(b[n:])
		if !unicode.IsSpace(r) {
			break
		}
		n += size
		if r == '\n' {
			break
		}
	}
	return n
}

// splitYAML cuts YAML text into documents and the separator lines between them, as
// utilyaml.NewYAMLReader does, keeping every byte; numbered is how many documents came before.
func splitYAML(data []byte, numbered int) ([]segment, error) {
	var segs []segment
	start := 0 // where the current document starts
	for at := 0; at < len(data); {
		lineEnd := bytes.IndexByte(data[at:], '\n')
		if lineEnd < 0 {
			lineEnd = len(data)
		} else {
			lineEnd += at + 1
		}
		line := data[at:lineEnd]
		if bytes.HasPrefix(line, []byte("---")) {
			rest := strings.TrimSpace(string(line[3:]))
			if rest != "" && rest[0] != '#' {
				return nil, fmt.Errorf("document %d: invalid YAML document separator: %s", numbered+1, rest)
			}
			if at > start {
				segs = append(segs, segment{text: data[start:at], doc: true})
				numbered++
			}
			segs = append(segs, segment{text: line})
			start = lineEnd
		}
		at = lineEnd
	}
	if start < len(data) {
		segs = append(segs, segment{text: data[start:], doc: true})
	}
	return segs, nil
}

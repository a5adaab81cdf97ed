// Command chart-docs writes the values table of the Helm chart's README from values.yaml: one
// row per value, its comment in values.yaml as the description, its type from
// values.schema.json and its default as values.yaml has it. `make chart-docs` runs it; a test
// fails when the committed README is stale.
//
// The README is README.md.tmpl with the table in place of the line "{{ .Values }}", so the
// prose stays hand-written and the table cannot drift from the values.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

const placeholder = "{{ .Values }}"

func main() {
	chart := flag.String("chart", "charts/task-operator", "the chart's folder")
	check := flag.Bool("check", false, "do not write: fail if README.md is stale")
	flag.Parse()
	if err := run(*chart, *check); err != nil {
		fmt.Fprintln(os.Stderr, "chart-docs:", err)
		os.Exit(1)
	}
}

func run(chart string, check bool) error {
	want, err := Generate(chart)
	if err != nil {
		return err
	}
	path := filepath.Join(chart, "README.md")
	if check {
		have, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(have, want) {
			return fmt.Errorf("%s is stale: run make chart-docs", path)
		}
		return nil
	}
	return os.WriteFile(path, want, 0o644)
}

// Generate renders the chart's README from its README.md.tmpl, values.yaml and
// values.schema.json.
func Generate(chart string) ([]byte, error) {
	tmpl, err := os.ReadFile(filepath.Join(chart, "README.md.tmpl"))
	if err != nil {
		return nil, err
	}
	if bytes.Count(tmpl, []byte(placeholder)) != 1 {
		return nil, fmt.Errorf("README.md.tmpl must hold %q exactly once", placeholder)
	}
	values, err := readValues(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return nil, err
	}
	schema, err := readSchema(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		return nil, err
	}
	var rows []row
	if err := collect(values, "", "", &rows); err != nil {
		return nil, err
	}
	for i := range rows {
		rows[i].typ = schema.typeOf(rows[i].key)
		if rows[i].typ == "" {
			return nil, fmt.Errorf("values.schema.json does not describe %s", rows[i].key)
		}
	}
	return bytes.Replace(tmpl, []byte(placeholder), []byte(table(rows)), 1), nil
}

// row is one value of the table.
type row struct {
	key, typ, def, desc string
}

func readValues(path string) (*yaml.Node, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: not a mapping", path)
	}
	return doc.Content[0], nil
}

// collect appends a row for each leaf of m (a scalar, a list, or an empty map), and for each
// map that has a comment of its own. A value without a comment is covered by the comment
// before it (values.yaml comments a group of values once): its row points there.
func collect(m *yaml.Node, prefix, covering string, rows *[]row) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := k.Value
		if prefix != "" {
			key = prefix + "." + k.Value
		}
		desc := comment(k.HeadComment)
		if desc != "" {
			covering = key
		}
		if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
			if desc != "" {
				*rows = append(*rows, row{key: key, def: "", desc: desc})
			}
			if err := collect(v, key, covering, rows); err != nil {
				return err
			}
			continue
		}
		if desc == "" && covering != "" {
			desc = "See `" + covering + "`."
		}
		def, err := defaultOf(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*rows = append(*rows, row{key: key, def: def, desc: desc})
	}
	return nil
}

// comment joins a YAML comment's lines into one sentence-run.
func comment(c string) string {
	var parts []string
	for _, line := range strings.Split(c, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, " ")
}

// defaultOf renders a value as compact JSON, the way --set-json takes it.
func defaultOf(v *yaml.Node) (string, error) {
	var x any
	if err := v.Decode(&x); err != nil {
		return "", err
	}
	out, err := json.Marshal(x)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n|---|---|---|---|\n")
	for _, r := range rows {
		def := ""
		if r.def != "" {
			def = "`" + r.def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.key, r.typ, cell(def), cell(r.desc))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cell escapes what would end a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// schemaNode is the part of JSON Schema the chart's schema uses.
type schemaNode struct {
	Type        any                    `json:"type"`
	Ref         string                 `json:"$ref"`
	Properties  map[string]*schemaNode `json:"properties"`
	Definitions map[string]*schemaNode `json:"definitions"`
	// AdditionalProperties is false or a schema (of a map's values).
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
}

// child is the schema of the property name of n, "" if n has none.
func (n *schemaNode) child(name string) *schemaNode {
	if c := n.Properties[name]; c != nil {
		return c
	}
	var extra schemaNode
	if len(n.AdditionalProperties) == 0 || n.AdditionalProperties[0] != '{' || json.Unmarshal(n.AdditionalProperties, &extra) != nil {
		return nil
	}
	return &extra
}

type schema struct{ root *schemaNode }

func readSchema(path string) (schema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return schema{}, err
	}
	var root schemaNode
	if err := json.Unmarshal(data, &root); err != nil {
		return schema{}, fmt.Errorf("%s: %w", path, err)
	}
	return schema{&root}, nil
}

func (s schema) resolve(n *schemaNode) *schemaNode {
	for n != nil && n.Ref != "" {
		n = s.root.Definitions[strings.TrimPrefix(n.Ref, "#/definitions/")]
	}
	return n
}

// typeOf is the schema's type of the value at a dotted key, "" if the schema lacks it.
func (s schema) typeOf(key string) string {
	n := s.root
	for _, part := range strings.Split(key, ".") {
		if n = s.resolve(n); n != nil {
			n = n.child(part)
		}
		if n == nil {
			return ""
		}
	}
	switch t := s.resolve(n).Type.(type) {
	case string:
		return t
	case []any:
		var names []string
		for _, x := range t {
			names = append(names, fmt.Sprint(x))
		}
		return strings.Join(names, " or ")
	}
	return "any"
}

package conversion

import (
	"slices"
	"strings"
)

// A FieldMapping says which v1 fields one field of an old version is converted to: the paths
// under which bookkeeping that names fields rather than values (server-side apply's
// managedFields) must record, at v1, what was recorded at the old version.
//
// Each old version declares its mappings next to its typed mapping functions
// (v1alpha1Fields, v1beta1Fields); TestFieldMapsMatchTheConverter checks them against those
// functions and against every field of the old version's Go type and CRD schema.
type FieldMapping struct {
	// Spoke is the field at the old version, as JSON keys from the object's root joined by
	// dots: "spec.shell".
	Spoke string
	// Hub are the v1 fields the converter fills from Spoke alone, in the same form. A v1 field
	// filled from two old fields (v1alpha1's status.attempts, from retryCount and lastJobName)
	// is listed under both: whoever owned either owns it.
	Hub []string
	// Same means the value below Spoke has the same shape at v1 (the items of a list keyed
	// alike, the same fields in them): every path below Spoke is the same path below Hub[0].
	Same bool
}

// FieldMap is the field table of one old version.
type FieldMap struct {
	version string
	fields  map[string]FieldMapping
	// objects maps each object the table's fields lie in (spec, spec.runner, ...) to the
	// deepest v1 object holding every field the fields below it map to.
	objects map[string]string
	// sorted is the table sorted by Spoke, made once: checkExplicitZeros reads it on every
	// up-conversion.
	sorted []FieldMapping
}

// FieldMaps returns the field table of an old version (v1alpha1, v1beta1); ok is false for
// the hub and for versions this package does not convert.
func FieldMaps(version string) (m FieldMap, ok bool) {
	m, ok = fieldMaps[version]
	return m, ok
}

// Version is the old version the table is of.
func (m FieldMap) Version() string { return m.version }

// Mappings returns the table, sorted by Spoke.
func (m FieldMap) Mappings() []FieldMapping {
	out := slices.Clone(m.sorted)
	for i := range out {
		out[i].Hub = slices.Clone(out[i].Hub)
	}
	return out
}

// mappings is Mappings without the copy, for readers in this package.
func (m FieldMap) mappings() []FieldMapping { return m.sorted }

// Map returns the v1 fields of the old version's field named by keys (its JSON field names
// from the object's root): a field of the table maps to its Hub; a field below a Same field to
// the same path below that field's hub; an object the table's fields lie in to the deepest v1
// object holding everything its fields map to. ok is false for any other path: the old version
// has no such field, or the table does not know it.
func (m FieldMap) Map(keys []string) (hub [][]string, ok bool) {
	if len(keys) == 0 || !plainKeys(keys) {
		return nil, false
	}
	if f, ok := m.fields[strings.Join(keys, ".")]; ok {
		for _, h := range f.Hub {
			hub = append(hub, strings.Split(h, "."))
		}
		return hub, true
	}
	if below, ok := m.SameShape(keys); ok {
		return [][]string{below}, true
	}
	if obj, ok := m.objects[strings.Join(keys, ".")]; ok {
		return [][]string{strings.Split(obj, ".")}, true
	}
	return nil, false
}

// SameShape returns the v1 path of the field named by keys when it is, or lies below, a Same
// field: there, anything below (list items by their keys, their fields) carries over as it is.
func (m FieldMap) SameShape(keys []string) (hub []string, ok bool) {
	if !plainKeys(keys) {
		return nil, false
	}
	for i := len(keys); i > 0; i-- {
		f, found := m.fields[strings.Join(keys[:i], ".")]
		if !found {
			continue
		}
		if !f.Same {
			return nil, false
		}
		return append(strings.Split(f.Hub[0], "."), keys[i:]...), true
	}
	return nil, false
}

// plainKeys reports whether no key contains a dot: the table joins keys with dots, and a key
// such as "runner.type" (no field of any version, but a client may name it in managedFields)
// must not be read as the path spec.runner.type.
func plainKeys(keys []string) bool {
	for _, k := range keys {
		if strings.Contains(k, ".") {
			return false
		}
	}
	return true
}

var fieldMaps = map[string]FieldMap{}

func init() {
	for version, table := range map[string][]FieldMapping{
		v1alpha1Spoke.version: v1alpha1Fields,
		v1beta1Spoke.version:  v1beta1Fields,
	} {
		fieldMaps[version] = newFieldMap(version, table)
	}
}

func newFieldMap(version string, table []FieldMapping) FieldMap {
	m := FieldMap{version: version, fields: map[string]FieldMapping{}, objects: map[string]string{}}
	below := map[string][][]string{} // object -> the hub paths of the fields below it
	for _, f := range table {
		if _, dup := m.fields[f.Spoke]; dup || len(f.Hub) == 0 || (f.Same && len(f.Hub) != 1) {
			panic("conversion: bad field table of " + version + " at " + f.Spoke)
		}
		m.fields[f.Spoke] = f
		keys := strings.Split(f.Spoke, ".")
		for i := 1; i < len(keys); i++ {
			obj := strings.Join(keys[:i], ".")
			for _, h := range f.Hub {
				below[obj] = append(below[obj], strings.Split(h, "."))
			}
		}
	}
	for obj, hubs := range below {
		common := hubs[0][:len(hubs[0])-1]
		for _, h := range hubs[1:] {
			n := 0
			for n < len(common) && n < len(h)-1 && common[n] == h[n] {
				n++
			}
			common = common[:n]
		}
		if len(common) == 0 {
			panic("conversion: the fields below " + version + " " + obj + " map to no common v1 object")
		}
		m.objects[obj] = strings.Join(common, ".")
	}
	for _, f := range m.fields {
		f.Hub = slices.Clone(f.Hub)
		m.sorted = append(m.sorted, f)
	}
	slices.SortFunc(m.sorted, func(a, b FieldMapping) int { return strings.Compare(a.Spoke, b.Spoke) })
	return m
}

// SpokePath is the path at the old version m is of that the v1 path hub (dotted, as a field
// error names it: "spec.schedule.cron", "spec.runner.shell.env[0].name") is written at: the
// field whose Hub it is or lies below; ok is false when the old version has no field for it.
func (m FieldMap) SpokePath(hub string) (string, bool) {
	best, bestHub := "", ""
	for _, f := range m.sorted {
		for _, h := range f.Hub {
			if (hub == h || strings.HasPrefix(hub, h+".") || strings.HasPrefix(hub, h+"[")) && len(h) > len(bestHub) {
				best, bestHub = f.Spoke, h
			}
		}
	}
	if bestHub == "" {
		return "", false
	}
	rest := hub[len(bestHub):]
	if f := m.fields[best]; rest != "" && !f.Same {
		rest = "" // below a field that changes shape, the old version names the field itself
	}
	return best + rest, true
}

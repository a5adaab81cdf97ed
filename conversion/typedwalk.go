package conversion

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// walkTyped calls visit for every value in v (decoded JSON) with the Go type encoding/json
// would decode it into, t being v's own, and the value's path ("spec.resources.limits.cpu",
// "status.conditions[1].lastTransitionTime"). Object keys are met in sorted order, matched to
// fields as encoding/json matches them (exactly, else without regard to case); a key no field
// has is passed over. visit returns true to go no deeper than the value it was given.
func walkTyped(v any, t reflect.Type, at string, visit func(v any, t reflect.Type, at string) bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if visit(v, t, at) {
		return
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return // its own decoder reads what is inside
	}
	switch t.Kind() {
	case reflect.Struct:
		m, _ := v.(map[string]any)
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if ft, ok := fieldType(fields, k); ok {
				walkTyped(m[k], ft, joinPath(at, k), visit)
			}
		}
	case reflect.Map:
		m, _ := v.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			walkTyped(m[k], t.Elem(), joinPath(at, k), visit)
		}
	case reflect.Slice:
		list, _ := v.([]any)
		for i, item := range list {
			walkTyped(item, t.Elem(), fmt.Sprintf("%s[%d]", at, i), visit)
		}
	}
}

// fieldsByType caches jsonFields, which every walkTyped asks of each struct it goes through.
var fieldsByType sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields are a struct's fields by JSON name, those of embedded structs without a name
// of their own included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if cached, ok := fieldsByType.Load(t); ok {
		return cached.(map[string]reflect.Type)
	}
	fields := structFields(t)
	fieldsByType.Store(t, fields)
	return fields
}

func structFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					fields[k] = v
				}
			}
		case name != "-" && f.IsExported():
			if name == "" {
				name = f.Name
			}
			fields[name] = f.Type
		}
	}
	return fields
}

func fieldType(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	if t, ok := fields[key]; ok {
		return t, true
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t, true
		}
	}
	return nil, false
}

func joinPath(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

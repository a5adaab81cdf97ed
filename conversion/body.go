package conversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "sigs.k8s.io/json"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/jsonvalue"
)

// A body is the part of a Task that versions map: {"spec": ..., "status": ...}, as decoded JSON.
// Metadata is the same at every version and is carried over untouched.
type body = map[string]any

// bodyOf returns obj's spec and status (absent ones stay absent).
func bodyOf(obj map[string]any) body {
	b := body{}
	for _, key := range []string{"spec", "status"} {
		if v, ok := obj[key]; ok {
			b[key] = v
		}
	}
	return b
}

// toBody encodes a typed object's spec and status as a body, dropping empty objects: a struct
// without omitempty encodes as {} where the JSON a client sent simply has no such key.
func toBody(typed any) (body, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return nil, err
	}
	return compact(bodyOf(m)), nil
}

// fromBody decodes b into typed through JSON, so that a value of the wrong type is reported
// with the path of its field (encoding/json names it), e.g. "spec.retry.maxRetries".
func fromBody(b body, typed any) error {
	if err := checkQuantities(b, typed); err != nil {
		return err
	}
	// json.Marshal's bytes, without its reflection, in a buffer used once.
	err := jsonvalue.With(b, true, func(raw []byte) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		return dec.Decode(typed)
	})
	var typeErr *json.UnmarshalTypeError
	if err == nil || errors.As(err, &typeErr) {
		return err
	}
	// A type's own decoder (a time's, a quantity's) says what is wrong but not where.
	if at := unreadableField(map[string]any(b), reflect.TypeOf(typed), ""); at != "" {
		return fmt.Errorf("%s: %w", at, err)
	}
	return err
}

// unreadableField is the path of the value in v that encoding/json's decoding into t (keys in
// the order jsonvalue writes them, sorted) meets first and that the type its field has there
// refuses to decode on its own (a type with its own UnmarshalJSON); "" when there is none.
func unreadableField(v any, t reflect.Type, at string) string {
	found := ""
	walkTyped(v, t, at, func(v any, t reflect.Type, at string) bool {
		if found != "" || !reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
			return found != ""
		}
		raw, err := json.Marshal(v)
		if err == nil && json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
			found = at
		}
		return true
	})
	return found
}

// decodeTyped decodes b into typed. sent, when not nil, is b as the client sent it, the JSON
// {"spec":...,"status":...} that b was decoded from (DecodeForConvert): decoding it skips
// encoding b again, a third of a typed decode's cost. sent is decoded strictly: every key spelled
// as its field is, none twice in an object. Only then do the two give the same typed object:
// encoding/json merges a repeated object into its field where b kept the last one, and matches
// keys case-insensitively, in the order sent where b's are sorted. Should sent not decode so (or
// at all: a number such as 1.0 for an integer field, which b holds as 1), b is decoded as
// always, so the outcome and its error are fromBody's.
func decodeTyped(b body, sent []byte, typed any) error {
	if decodeSent(sent, typed) {
		return nil
	}
	return fromBody(b, typed)
}

// decodeSent is decodeTyped's first way: it reports whether sent decoded into typed strictly,
// and leaves typed zero when it did not.
func decodeSent(sent []byte, typed any) bool {
	if sent == nil || mayHoldAnOversizedQuantity(sent) {
		return false // the decoded body's way checks its quantities first (checkQuantities)
	}
	strict, err := kjson.UnmarshalStrict(sent, typed)
	if err == nil && len(strict) == 0 {
		return true
	}
	reflect.ValueOf(typed).Elem().SetZero()
	return false
}

// mayHoldAnOversizedQuantity says raw may hold a quantity, which checkQuantities must see
// first: quantities are only under spec.resources, and the strict decoding matches that key
// exactly, as written or spelled with \u escapes. Task bodies without resources keep the fast
// way.
func mayHoldAnOversizedQuantity(raw []byte) bool {
	return bytes.Contains(raw, []byte(`"resources"`)) || bytes.Contains(raw, []byte(`\u`))
}

// compact removes, recursively, keys whose value is an empty object.
func compact(m map[string]any) map[string]any {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			if len(compact(sub)) == 0 {
				delete(m, k)
			}
		}
	}
	return m
}

// diff returns the JSON merge patch (RFC 7386) that turns from into to. Objects are diffed key by
// key; every other value, lists included, is replaced whole.
func diff(from, to map[string]any) map[string]any {
	patch := map[string]any{}
	for key, want := range to {
		have, ok := from[key]
		if !ok {
			patch[key] = want
			continue
		}
		haveObj, haveIsObj := have.(map[string]any)
		wantObj, wantIsObj := want.(map[string]any)
		if haveIsObj && wantIsObj {
			if sub := diff(haveObj, wantObj); len(sub) > 0 {
				patch[key] = sub
			}
			continue
		}
		if !jsonvalue.Equal(have, want) {
			patch[key] = want
		}
	}
	for key := range from {
		if _, ok := to[key]; !ok {
			patch[key] = nil
		}
	}
	return patch
}

// apply applies a JSON merge patch to doc in place.
func apply(doc, patch map[string]any) {
	for key, value := range patch {
		if value == nil {
			delete(doc, key)
			continue
		}
		sub, isObj := value.(map[string]any)
		if !isObj {
			doc[key] = deepCopy(value)
			continue
		}
		target, ok := doc[key].(map[string]any)
		if !ok {
			target = map[string]any{}
			doc[key] = target
		}
		apply(target, sub)
	}
}

// deepCopy copies decoded JSON, so that a patch and the documents it is applied to never share
// maps or slices.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

// A path names a field by its JSON keys, e.g. "spec.runner.http.url".
type path string

func (p path) keys() []string { return strings.Split(string(p), ".") }

// lookup returns the value at p in doc; a value that is not an object on the way means there
// is none. It walks the path itself rather than through unstructured.NestedFieldNoCopy, whose
// error for such a value prints the value whole: milliseconds for a large list, thrown away.
func lookup(doc map[string]any, p path) (any, bool) {
	// Cut rather than keys: lookup runs for every field of a spoke on every up-conversion.
	var cur any = doc
	for rest, more := string(p), true; more; {
		var k string
		k, rest, more = strings.Cut(rest, ".")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// cut removes the value at p from doc, if there is one.
func cut(doc map[string]any, p path) { unstructured.RemoveNestedField(doc, p.keys()...) }

// within reports whether p is root or lies below it.
func within(p, root path) bool {
	return p == root || strings.HasPrefix(string(p), string(root)+".")
}

func join(p path, key string) path {
	if p == "" {
		return path(key)
	}
	return path(string(p) + "." + key)
}

// UnreadableField is the path of the first value of a v1 Task (decoded JSON) that its field's
// own decoder refuses (a time Go cannot parse, which the schema's date-time check takes, such
// as "2026-01-01t00:00:00z"); "" when there is none.
func UnreadableField(obj map[string]any) string {
	return unreadableField(map[string]any(bodyOf(obj)), reflect.TypeFor[taskv1.Task](), "")
}

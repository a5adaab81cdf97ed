package jsonvalue

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"
)

func TestSortedOrdersKeysAndDropsEmptyObjects(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		dropEmpty bool
		want      string
		ok        bool
	}{
		{"keys in byte order at every depth", `{"b":1,"a":{"z":true,"Z":null}}`, false, `{"a":{"Z":null,"z":true},"b":1}`, true},
		{"space between tokens goes", " {\n \"b\" : [ 1 , 2 ] ,\t\"a\":\"x y\" } ", false, `{"a":"x y","b":[1,2]}`, true},
		{"values are copied as written", `{"n":1.0e0,"s":"\u0041<&"}`, false, `{"n":1.0e0,"s":"\u0041<&"}`, true},
		{"empty objects stay without dropEmpty", `{"a":{},"b":{"c":{}}}`, false, `{"a":{},"b":{"c":{}}}`, true},
		{"empty objects go with dropEmpty, emptied ones too", `{"a":{},"b":{"c":{}},"d":1}`, true, `{"d":1}`, true},
		{"the root stays, even empty", `{"a":{}}`, true, `{}`, true},
		{"objects in lists keep their empty members", `{"l":[{"a":{}},{}],"m":{"e":{}}}`, true, `{"l":[{"a":{}},{}]}`, true},
		{"empty lists and strings are not empty objects", `{"l":[],"s":"{}","n":null}`, true, `{"l":[],"n":null,"s":"{}"}`, true},
		{"a repeated key is refused", `{"b":2,"a":1,"b":3}`, false, "", false},
		{"a repeated key is refused, dropped or not", `{"a":{"b":1,"b":{}}}`, true, "", false},
		{"a value at the deepest level encoding/json reads", strings.Repeat("[", 10000) + "1" + strings.Repeat("]", 10000), false, strings.Repeat("[", 10000) + "1" + strings.Repeat("]", 10000), true},
		{"a member at the deepest level", strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), true, strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), true},
		{"an empty object at the deepest level", strings.Repeat(`{"a":`, 9999) + "{}" + strings.Repeat("}", 9999), true, "{}", true},
		{"one level deeper is refused", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), false, "", false},
		{"a key with an escape is refused", `{"\u0061":1}`, false, "", false},
		{"a key beyond ASCII is refused", `{"é":1}`, false, "", false},
		{"trailing text is refused", `{"a":1} x`, false, "", false},
		{"a trailing comma is refused", `{"a":1,}`, false, "", false},
		{"an unterminated list is refused", `{"a":[1,2}`, false, "", false},
		{"a bad number is refused", `{"a":01}`, false, "", false},
		{"nothing is refused", ``, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Sorted([]byte("prefix"), []byte(tc.in), tc.dropEmpty)
			if ok != tc.ok {
				t.Fatalf("Sorted(%s) ok %v, want %v (%s)", tc.in, ok, tc.ok, got)
			}
			if ok && string(got) != "prefix"+tc.want {
				t.Fatalf("Sorted(%s)\n got %s\nwant prefix%s", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzSortedKeepsTheValue: text Sorted accepts is valid JSON that decodes to the same value
// (compacted, with dropEmpty), and encoding/json's encoding of a value is already sorted; text
// without a repeated key (DecodeUnique reads it), an escape or a byte beyond ASCII is accepted.
func FuzzSortedKeepsTheValue(f *testing.F) {
	for _, seed := range []string{
		`{"spec":{"runner":{"type":"Shell","shell":{"script":"echo <hi> & bye"}},"parallelism":2},"status":{"attempts":3}}`,
		`[1, 2.5, -0, 1e400, "a\u2028b", null, true, {"": {}, "b": [{"d":1,"c":{}}]}]`,
		`{"b":1,"a":{"b":[[],[{}]],"c":{"d":{}}},"a":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dropEmpty := range []bool{false, true} {
			sorted, ok := Sorted(nil, data, dropEmpty)
			if _, unique := DecodeUnique(data); unique && plainText(data) && !ok {
				t.Fatalf("Sorted refused %q (dropEmpty %v), which has no repeated key nor escape", data, dropEmpty)
			}
			if !ok {
				continue
			}
			if !json.Valid(data) {
				t.Fatalf("Sorted accepted %q, which is not JSON", data)
			}
			var want any
			if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &want); err != nil {
				continue // valid, but out of range for a Go value: 1e400
			}
			if m, isObject := want.(map[string]any); isObject && dropEmpty {
				want = compacted(m)
			}
			var got any
			if err := kjson.UnmarshalCaseSensitivePreserveInts(sorted, &got); err != nil {
				t.Fatalf("Sorted(%q) = %q, which does not decode: %v", data, sorted, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Sorted(%q, dropEmpty %v) = %q: decodes to %#v, the text to %#v", data, dropEmpty, sorted, got, want)
			}
			encoded, err := Append(nil, got, false)
			if err != nil {
				continue
			}
			if again, ok := Sorted(nil, encoded, false); ok && !bytes.Equal(again, encoded) {
				t.Fatalf("encoding/json's %q sorts to %q", encoded, again)
			}
		}
	})
}

// compacted removes, recursively, an object's members whose value is an object left empty, as
// the converter compacts a typed object's body; lists are left alone.
func compacted(m map[string]any) map[string]any {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(compacted(sub)) == 0 {
			delete(m, k)
		}
	}
	return m
}

// plainText reports whether data has no escape and no byte beyond ASCII.
func plainText(data []byte) bool {
	for _, c := range data {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

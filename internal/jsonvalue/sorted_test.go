package jsonvalue

import (
	"bytes"
	"encoding/json"
	"reflect"
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
		{"repeated keys are kept, in order", `{"b":2,"a":1,"b":3}`, false, `{"a":1,"b":2,"b":3}`, true},
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

// FuzzSortedKeepsTheValue: text Sorted accepts is valid JSON, and text that decodes to the same value
// sorted as before, and encoding/json's encoding of that value is already sorted.
func FuzzSortedKeepsTheValue(f *testing.F) {
	for _, seed := range []string{
		`{"spec":{"runner":{"type":"Shell","shell":{"script":"echo <hi> & bye"}},"parallelism":2},"status":{"attempts":3}}`,
		`[1, 2.5, -0, 1e400, "a\u2028b", null, true, {"": {}, "b": [{"d":1,"c":2}]}]`,
		`{"b":1,"a":{"b":[[],[{}]]},"a":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sorted, ok := Sorted(nil, data, false)
		var want any
		wantErr := kjson.UnmarshalCaseSensitivePreserveInts(data, &want)
		if !ok {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("Sorted accepted %q, which is not JSON", data)
		}
		if wantErr != nil {
			return // valid, but out of range for a Go value: 1e400
		}
		var got any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(sorted, &got); err != nil {
			t.Fatalf("Sorted(%q) = %q, which does not decode: %v", data, sorted, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Sorted(%q) = %q: decodes to %#v, the text to %#v", data, sorted, got, want)
		}
		encoded, err := Append(nil, want, false)
		if err != nil {
			return
		}
		if again, ok := Sorted(nil, encoded, false); ok && !bytes.Equal(again, encoded) {
			t.Fatalf("encoding/json's %q sorts to %q", encoded, again)
		}
	})
}

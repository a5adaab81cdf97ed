package jsonvalue

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"
)

// byEncodingJSON is what Append must equal: json.Marshal, or an Encoder without HTML escaping.
func byEncodingJSON(v any, escapeHTML bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

func checkAppend(t *testing.T, v any) {
	t.Helper()
	for _, escapeHTML := range []bool{false, true} {
		want, wantErr := byEncodingJSON(v, escapeHTML)
		got, err := Append([]byte("prefix"), v, escapeHTML)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("escapeHTML %v: Append(%#v) error %v, encoding/json's %v", escapeHTML, v, err, wantErr)
		}
		if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("escapeHTML %v: Append(%#v)\n got %s\nwant prefix%s", escapeHTML, v, got, want)
		}
	}
}

func TestAppendMatchesEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"nil", nil},
		{"plain string", "echo hello"},
		{"escapes", "a\"b\\c\n\t\r\b\f\x00\x1f"},
		{"html", "<a href='x'>&amp;</a>"},
		{"unicode", "naïve — 日本語 🎉"},
		{"line separators", "a\u2028b\u2029c"},
		{"invalid utf-8", "a\xffb\xc3"},
		{"numbers", []any{int64(0), int64(-7), int64(1) << 62, 1.5, 1e21, 1e-7, -0.0, 3.0}},
		{"bools", []any{true, false}},
		{"nil map and list", map[string]any{"m": map[string]any(nil), "l": []any(nil), "e": map[string]any{}, "a": []any{}}},
		{"sorted keys", map[string]any{"b": int64(1), "a": "x", "B": nil, "é": true, "<": "&"}},
		{"nested", map[string]any{"spec": map[string]any{"runner": map[string]any{"shell": map[string]any{"script": "echo <ok> & done"}}, "list": []any{map[string]any{"x": int64(1)}}}}},
		{"compact raw", map[string]any{"managedFields": json.RawMessage(`[{"manager":"a b","f:x":{}}]`)}},
		{"raw with spaces", map[string]any{"m": json.RawMessage("[ 1 ,\n {\"a\" : \"x y\"} ]")}},
		{"raw with html", map[string]any{"m": json.RawMessage(`{"a":"<b>&\u2028"}`)}},
		{"raw with a line separator", map[string]any{"m": json.RawMessage("\"a\u2028b\"")}},
		{"nil raw", json.RawMessage(nil)},
		{"empty raw", map[string]any{"m": json.RawMessage{}}},
		{"other types", map[string]any{"i": 3, "u": uint64(4), "f32": float32(1.25), "s": []string{"a"}, "ms": map[string]string{"k": "v"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkAppend(t, tc.v) })
	}
}

func TestEqualMatchesDeepEqual(t *testing.T) {
	values := []any{
		nil, "", "a", true, false, int64(0), int64(1), 0.0, 1.0,
		map[string]any(nil), map[string]any{}, map[string]any{"a": int64(1)}, map[string]any{"a": 1.0}, map[string]any{"b": int64(1)},
		map[string]any{"a": nil}, []any(nil), []any{}, []any{int64(1)}, []any{int64(1), "x"}, []any{"x", int64(1)},
		json.RawMessage(`1`), json.RawMessage(`1`), json.RawMessage(nil),
	}
	for _, a := range values {
		for _, b := range values {
			if got, want := Equal(a, b), reflect.DeepEqual(a, b); got != want {
				t.Errorf("Equal(%#v, %#v) = %v, reflect.DeepEqual says %v", a, b, got, want)
			}
		}
	}
}

// FuzzAppendMatchesEncodingJSON decodes any JSON text as the converter does and checks that
// Append encodes it as encoding/json does, as a value, as a raw value and as a string, and that
// Equal agrees with reflect.DeepEqual on it and on a changed copy.
func FuzzAppendMatchesEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"spec":{"runner":{"type":"Shell","shell":{"script":"echo <hi> & bye"}},"parallelism":2},"status":{"attempts":3}}`,
		`[1, 2.5, -0, 1e400, "a\u2028b", "\ud800", null, true, {"": {}}]`,
		"\"\xff\"",
		`{"a":{"b":[[],[{}]]}, "A": "é\\n"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAppend(t, string(data))
		var v any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &v); err != nil {
			return
		}
		checkAppend(t, v)
		checkAppend(t, map[string]any{"raw": json.RawMessage(data), "value": v})
		if !Equal(v, v) {
			t.Fatalf("Equal(v, v) is false for %s", data)
		}
		other := map[string]any{"x": v}
		changed := map[string]any{"x": []any{v}}
		if got, want := Equal(other, changed), reflect.DeepEqual(other, changed); got != want {
			t.Fatalf("Equal = %v, reflect.DeepEqual %v for %s", got, want, data)
		}
	})
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var want any
	wantErr := kjson.UnmarshalCaseSensitivePreserveInts(data, &want)
	got, err := Decode(data)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("Decode(%q) error %v, sigs.k8s.io/json's %v", data, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q)\n got %#v\nwant %#v", data, got, want)
	}
	var wantFields map[string]json.RawMessage
	wantErr = json.Unmarshal(data, &wantFields)
	fields, ok := SplitObject(data)
	if ok && (wantErr != nil || wantFields == nil || !reflect.DeepEqual(fields, wantFields)) {
		t.Fatalf("SplitObject(%q) = %q, encoding/json's %q (error %v)", data, fields, wantFields, wantErr)
	}
}

func TestDecodeMatchesKubernetesJSON(t *testing.T) {
	for _, text := range []string{
		`{}`, `[]`, `null`, ` {"a" : [1, -0, 0.5, 1e3, 1E-2, -12345678901234567890, 9223372036854775807, 9223372036854775808, true, false, null, "x"]} `,
		`{"a":1,"a":2}`, `{"a":{"b":1},"a":{"c":2}}`, `"\u00e9"`, `"é"`, "\"\xff\"", `"a\"b"`, `{"\u0061":1}`,
		`01`, `1.`, `.5`, `-`, `1e`, `1e400`, `+1`, `0x10`, `Infinity`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `[1 2]`, `tru`, `nul`, `{"a":1}x`, ``, ` `, "\"a\tb\"",
		`{"spec":{"runner":{"type":"Shell"}},"status":{}}`, `[[[[[]]]]]`,
		`{"script":"echo a\nb\t\"c\" \\ \/","x":"\u00e9\ud83d\ude00 \ud800"}`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\`, `{"a\"b":1}`, `{"é":{"ü":"ö"}}`,
	} {
		t.Run(text, func(t *testing.T) { checkDecode(t, []byte(text)) })
	}
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		checkDecode(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
		checkDecode(t, []byte(strings.Repeat(`{"a":`, depth)+"1"+strings.Repeat("}", depth)))
	}
}

// FuzzDecodeMatchesKubernetesJSON checks Decode and SplitObject against sigs.k8s.io/json and
// encoding/json on any text: the same values, the same errors.
func FuzzDecodeMatchesKubernetesJSON(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"a","managedFields":[{"manager":"x","fieldsV1":{"f:spec":{}}}]},"spec":{"parallelism":2}}`,
		`[1, 2.5, -0, 1e400, "a\u2028b", "\ud800", null, true, {"": {}}]`,
		`{"a":1,"a":{"b":[]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, data) })
}

func TestDecodeUniqueRefusesRepeatedKeys(t *testing.T) {
	for text, want := range map[string]bool{
		`{"a":1,"b":{"c":[{"d":1,"e":2}]}}`: true,
		`{"a":1,"a":1}`:                     false,
		`{"a":{"b":1,"b":2}}`:               false,
		`[{"x":1},{"x":2}]`:                 true,
		`{"a\u0062":1,"ab":2}`:              false,
		`{"a":1`:                            false,
	} {
		v, ok := DecodeUnique([]byte(text))
		if ok != want {
			t.Errorf("DecodeUnique(%s) ok = %v, want %v", text, ok, want)
			continue
		}
		if ok {
			want, _ := Decode([]byte(text))
			if !reflect.DeepEqual(v, want) {
				t.Errorf("DecodeUnique(%s) = %#v, Decode %#v", text, v, want)
			}
		}
	}
}

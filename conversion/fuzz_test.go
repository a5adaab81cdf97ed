package conversion

import (
	"bytes"
	"encoding/json"
	"testing"

	"example.com/task-operator/internal/sample"
)

// FuzzConvert feeds arbitrary JSON objects, as any served version, to Convert: it must never
// panic, and a v1 object it can read at an old version must come back byte for byte.
func FuzzConvert(f *testing.F) {
	for _, hub := range []map[string]any{hubObject(f, sample.RichTask("echo seed")), hubObject(f, sample.HTTPTask()), hubObject(f, sample.SimpleTask())} {
		seed, _ := json.Marshal(hub)
		f.Add(seed, uint8(0))
	}
	f.Add([]byte(`{"spec":{"runner":{"type":"HTTP","http":{"url":"http://a","headers":[{"name":"a"}]}},"retry":{"maxRetries":1}}}`), uint8(1))
	f.Add([]byte(`{"metadata":{"annotations":{"task.example.com/preserved-v1-fields":"{\"v\":2,\"patch\":{\"spec\":{\"timeout\":5}}}"}},"spec":{"type":"shell","shell":"x"}}`), uint8(2))
	f.Add([]byte(`{"metadata":{"annotations":{"task.example.com/preserved-v1-fields":"gz:H4sI"}},"spec":{}}`), uint8(2))
	// Keys an apiserver never repeats nor respells, as the webhook may still be sent them.
	f.Add([]byte(`{"spec":{"runner":{"type":"Shell","shell":{"script":"a"}},"retry":{"maxRetries":1},"Retry":{"maxRetries":2}}}`), uint8(0))
	f.Add([]byte(`{"spec":{"type":"shell","shell":"a","maxRetry":1,"maxRetry":2,"MaxRetry":3}}`), uint8(2))
	versions := ServedVersions()
	f.Fuzz(func(t *testing.T, data []byte, from uint8) {
		obj, err := decodeJSON(data)
		if err != nil || obj == nil {
			return
		}
		version := versions[int(from)%len(versions)]
		obj["apiVersion"] = taskGroupPrefix + version
		for _, to := range versions {
			out, err := Convert(deepCopy(obj).(map[string]any), to)
			requireSameFromSent(t, data, obj, to, out, err)
			if err != nil || version != hubVersion || to == hubVersion {
				continue
			}
			back, err := Convert(reencode(t, out), hubVersion)
			if err != nil {
				t.Fatalf("%s read at %s does not convert back: %v", version, to, err)
			}
			requireSameBody(t, "round trip through "+to, obj, back)
		}
	})
}

// requireSameFromSent fails unless the object data, sent as it is (but for its apiVersion, which
// is version's) and converted to version the way the webhook does (DecodeFields, whose typed
// decoding reads the body as sent), gives what Convert gave for obj, data decoded: out, or an
// error with the same message. Sending data, not obj encoded again, lets the fuzzer write what
// encoding/json never does: repeated keys, keys differing in case, numbers such as 1e2.
func requireSameFromSent(t *testing.T, data []byte, obj map[string]any, version string, out map[string]any, err error) {
	t.Helper()
	var top map[string]json.RawMessage
	if uErr := json.Unmarshal(data, &top); uErr != nil {
		t.Fatalf("encoding/json cannot split what Convert read: %v", uErr)
	}
	// Metadata as encoding/json writes it: managedFields, kept raw, would come back as fuzzed.
	for _, key := range []string{"apiVersion", "metadata"} {
		if v, ok := obj[key]; ok {
			top[key], _ = json.Marshal(v)
		}
	}
	d, dErr := DecodeFields(top)
	if dErr != nil {
		t.Fatalf("DecodeFields of what Convert read: %v", dErr)
	}
	got, gotErr := d.Convert(version)
	if (err == nil) != (gotErr == nil) || (err != nil && err.Error() != gotErr.Error()) {
		t.Fatalf("to %s: Convert gave error %v, the webhook's way %v", version, err, gotErr)
	}
	if err != nil {
		return
	}
	want, _ := json.Marshal(out)
	have, _ := json.Marshal(got)
	if !bytes.Equal(want, have) {
		t.Fatalf("to %s: Convert gave\n%s\nthe webhook's way\n%s", version, want, have)
	}
}

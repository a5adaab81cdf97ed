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
			requireSameFromSent(t, obj, to, out, err)
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

// requireSameFromSent fails unless obj, sent as JSON and converted to version the way the
// webhook does (DecodeForConvert, whose typed decoding reads the body as sent), gives what
// Convert gave for it: out, or an error with the same message.
func requireSameFromSent(t *testing.T, obj map[string]any, version string, out map[string]any, err error) {
	t.Helper()
	sent, mErr := json.Marshal(obj)
	if mErr != nil {
		t.Fatal(mErr)
	}
	d, dErr := DecodeForConvert(sent)
	if dErr != nil {
		t.Fatalf("DecodeForConvert of what Convert read: %v", dErr)
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

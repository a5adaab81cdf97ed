package conversion

import (
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

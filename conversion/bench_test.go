package conversion

import (
	"encoding/json"
	"strings"
	"testing"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/internal/sample"
)

func BenchmarkConvert(b *testing.B) {
	for _, tc := range []struct {
		name string
		hub  *taskv1.Task
	}{
		{"simple", sample.SimpleTask()},
		{"rich", sample.RichTask(strings.Repeat("echo step; ", 100))},
	} {
		hub := hubObject(b, tc.hub)
		data, _ := json.Marshal(hub)
		b.Run(tc.name+"/v1-to-v1alpha1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _ := decodeJSON(data)
				if _, err := Convert(obj, v1alpha1.GroupVersion.Version); err != nil {
					b.Fatal(err)
				}
			}
		})
		spoke := mustConvert(b, hub, v1alpha1.GroupVersion.Version)
		spokeData, _ := json.Marshal(spoke)
		b.Run(tc.name+"/v1alpha1-to-v1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _ := decodeJSON(spokeData)
				if _, err := Convert(obj, hubVersion); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

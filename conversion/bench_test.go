package conversion

import (
	"context"
	"testing"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

// Simple: a Task as written at v1alpha1, with nothing to preserve. Rich: every v1-only field.
func BenchmarkConvertV1ToV1alpha1(b *testing.B) {
	for _, tc := range benchHubs() {
		b.Run(tc.name, func(b *testing.B) {
			benchConvert(b, func() error {
				var s v1alpha1.Task
				return ConvertV1ToV1alpha1(context.Background(), tc.hub, &s)
			})
		})
	}
}

func BenchmarkConvertV1ToV1beta1(b *testing.B) {
	for _, tc := range benchHubs() {
		b.Run(tc.name, func(b *testing.B) {
			benchConvert(b, func() error {
				var s v1beta1.Task
				return ConvertV1ToV1beta1(context.Background(), tc.hub, &s)
			})
		})
	}
}

func BenchmarkConvertV1alpha1ToV1(b *testing.B) {
	for _, tc := range benchHubs() {
		var spoke v1alpha1.Task
		if err := ConvertV1ToV1alpha1(context.Background(), tc.hub, &spoke); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			benchConvert(b, func() error {
				var hub taskv1.Task
				return ConvertV1alpha1ToV1(context.Background(), &spoke, &hub)
			})
		})
	}
}

func benchHubs() []struct {
	name string
	hub  *taskv1.Task
} {
	simple := &v1alpha1.Task{Spec: v1alpha1.TaskSpec{Type: "shell", Shell: "echo hi", Replicas: 1, MaxRetry: 3}}
	var simpleHub taskv1.Task
	_ = ConvertV1alpha1ToV1(context.Background(), simple, &simpleHub)
	return []struct {
		name string
		hub  *taskv1.Task
	}{{"simple", &simpleHub}, {"rich", richHub("echo hi")}}
}

func benchConvert(b *testing.B, convert func() error) {
	b.ReportAllocs()
	for b.Loop() {
		if err := convert(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
}

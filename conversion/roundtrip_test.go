package conversion

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
	"example.com/task-operator/conversion/fuzzer"
)

const roundTrips = 10000

func TestRoundTripV1alpha1(t *testing.T) {
	roundTrip(t, func() *v1alpha1.Task { return &v1alpha1.Task{} }, ConvertV1alpha1ToV1, ConvertV1ToV1alpha1)
}

func TestRoundTripV1beta1(t *testing.T) {
	roundTrip(t, func() *v1beta1.Task { return &v1beta1.Task{} }, ConvertV1beta1ToV1, ConvertV1ToV1beta1)
}

type (
	upFunc[S client.Object]   func(context.Context, S, *taskv1.Task) error
	downFunc[S client.Object] func(context.Context, *taskv1.Task, S) error
)

// roundTrip checks spoke→hub→spoke and hub→spoke→hub on random objects, roundTrips times each.
func roundTrip[S client.Object](t *testing.T, newSpoke func() S, up upFunc[S], down downFunc[S]) {
	t.Helper()
	ctx := context.Background()
	opts := cmp.Options{cmpopts.EquateEmpty()}
	t.Run("spoke-hub-spoke", func(t *testing.T) {
		f := fuzzer.New(1)
		for i := range roundTrips {
			original := newSpoke()
			f.Fill(original)
			want := original.DeepCopyObject()
			hub := &taskv1.Task{}
			if err := up(ctx, original, hub); err != nil {
				t.Fatalf("iteration %d: up: %v", i, err)
			}
			got := newSpoke()
			if err := down(ctx, hub, got); err != nil {
				t.Fatalf("iteration %d: down: %v", i, err)
			}
			got.GetObjectKind().SetGroupVersionKind(want.GetObjectKind().GroupVersionKind())
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Fatalf("iteration %d: spoke changed in a round trip (-want +got):\n%s", i, diff)
			}
		}
	})
	t.Run("hub-spoke-hub", func(t *testing.T) {
		f := fuzzer.New(2)
		for i := range roundTrips {
			original := &taskv1.Task{}
			f.Fill(original)
			want := original.DeepCopy()
			spoke := newSpoke()
			if err := down(ctx, original, spoke); err != nil {
				t.Fatalf("iteration %d: down: %v", i, err)
			}
			got := &taskv1.Task{}
			if err := up(ctx, spoke, got); err != nil {
				t.Fatalf("iteration %d: up: %v", i, err)
			}
			got.TypeMeta = want.TypeMeta
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Fatalf("iteration %d: hub changed in a round trip (-want +got):\n%s", i, diff)
			}
			if !cmp.Equal(original, want, opts) {
				t.Fatalf("iteration %d: down-conversion modified its source", i)
			}
		}
	})
}

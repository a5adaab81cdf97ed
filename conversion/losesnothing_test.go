package conversion

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
	"example.com/task-operator/conversion/fuzzer"
)

// TestLosesNothingAgreesWithThePreservedPatch holds the webhook's shortcut to the rule it
// stands for, on random Tasks sent as the apiserver sends them (encoding/json from maps): it
// may say "nothing lost" only where preserve's patch is empty, and the object it answers must
// be byte for byte the one Convert makes from the maps. The Tasks are
//   - random v1 Tasks, nearly all with hidden fields;
//   - Tasks written at an old version and stored at v1, which hide nothing, with a status and
//     before their first: here the shortcut must be taken for at least 9 in 10 of those that
//     lose nothing, or it could die unnoticed;
//   - the same respelled (durations, explicit zeros, timestamps with fractions).
func TestLosesNothingAgreesWithThePreservedPatch(t *testing.T) {
	const perKind = 3000
	f := fuzzer.New(7)
	rnd := rand.New(rand.NewPCG(7, 8))
	spokeWritten := func() map[string]any {
		if rnd.IntN(2) == 0 {
			s := &v1alpha1.Task{}
			f.Fill(s)
			return storedAtV1(t, s, v1alpha1.GroupVersion.String())
		}
		s := &v1beta1.Task{}
		f.Fill(s)
		return storedAtV1(t, s, v1beta1.GroupVersion.String())
	}
	withoutStatus := func() map[string]any {
		hub := spokeWritten()
		delete(hub, "status")
		return hub
	}
	for _, kind := range []struct {
		name    string
		hub     func() map[string]any
		minHits float64
	}{
		{"random v1 Tasks", func() map[string]any {
			task := &taskv1.Task{}
			f.Fill(task)
			return hubObject(t, task)
		}, 0},
		{"Tasks written at an old version", spokeWritten, 0.9},
		{"the same before their first status", withoutStatus, 0.9},
		{"the same respelled", func() map[string]any {
			hub := spokeWritten()
			respell(rnd, hub)
			return hub
		}, 0},
	} {
		t.Run(kind.name, func(t *testing.T) {
			nothingLost, hits := 0, 0
			for i := range perKind {
				hub := kind.hub()
				for _, version := range []string{v1alpha1.GroupVersion.Version, v1beta1.GroupVersion.Version} {
					shortcut, lost := compareWithPreserve(t, hub, version)
					if shortcut && lost {
						t.Fatalf("Task %d at %s: the shortcut says nothing is lost, preserve keeps a patch:\n%s", i, version, mustJSON(t, hub))
					}
					if !lost {
						nothingLost++
						if shortcut {
							hits++
						}
					}
					requireWebhookWayMatchesConvert(t, hub, version)
				}
			}
			rate := float64(hits) / float64(max(nothingLost, 1))
			t.Logf("%d of %d conversions lose nothing; the shortcut saw %d of them (%.2f)", nothingLost, 2*perKind, hits, rate)
			if rate < kind.minHits || (kind.minHits > 0 && nothingLost == 0) {
				t.Fatalf("the shortcut saw %.2f of the conversions that lose nothing, want at least %.2f", rate, kind.minHits)
			}
		})
	}
}

// storedAtV1 is a spoke Task as the apiserver stores it once written at apiVersion: converted to
// v1, without the preserved annotation a random spoke's metadata may carry.
func storedAtV1(t testing.TB, spoke any, apiVersion string) map[string]any {
	obj := rawOf(t, spoke)
	obj["apiVersion"], obj["kind"] = apiVersion, taskv1.Kind
	if m, ok := obj["metadata"].(map[string]any); ok {
		if a, ok := m["annotations"].(map[string]any); ok {
			delete(a, PreservedAnnotation)
		}
	}
	return mustConvert(t, obj, hubVersion)
}

// compareWithPreserve sends hub as the apiserver does and reports what losesNothing says and
// whether preserve keeps a patch.
func compareWithPreserve(t *testing.T, hub map[string]any, version string) (shortcut, lost bool) {
	t.Helper()
	d, err := DecodeForConvert(mustJSON(t, hub))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.decodeBody(); err != nil {
		t.Fatal(err)
	}
	s := spokes[version]
	spokeBody, pure, err := s.toSpoke(d.obj, d.sent, d.decodeBody)
	if err != nil {
		t.Fatal(err)
	}
	shortcut = losesNothing(baselineOf(pure), d.sent)
	p, err := s.preserve(bodyOf(d.obj), spokeBody, baselineOf(pure))
	if err != nil {
		t.Fatal(err)
	}
	return shortcut, len(p.Patch) > 0
}

// requireWebhookWayMatchesConvert fails unless hub, sent as the apiserver sends it and converted
// to version the webhook's way, gives Convert's object from the maps, byte for byte.
func requireWebhookWayMatchesConvert(t *testing.T, hub map[string]any, version string) {
	t.Helper()
	want := mustJSON(t, mustConvert(t, hub, version))
	d, err := DecodeForConvert(mustJSON(t, hub))
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Convert(version)
	if err != nil {
		t.Fatalf("the webhook's way to %s: %v", version, err)
	}
	if have := mustJSON(t, got); !bytes.Equal(want, have) {
		t.Fatalf("to %s: Convert gave\n%s\nthe webhook's way\n%s", version, want, have)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

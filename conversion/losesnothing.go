package conversion

import (
	"bytes"
	"encoding/json"
	"sync"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/internal/jsonvalue"
)

// losesNothing reports, without building the maps preserve diffs, that a hub object read at a
// spoke loses nothing: sent, its body as sent, is byte for byte the body of baseline (baselineOf:
// what the spoke says, read back at the hub and defaulted), as encoding/json writes that body
// decoded into maps and compacted (toBody). Then preserve's patch, the difference between that
// baseline and the body, would be empty.
//
// Most objects the apiserver sends qualify: it writes JSON from maps, keys sorted, and a Task
// whose every hidden field holds its default has the baseline for its body. A false answer only
// means preserve decides, the way it always has; a true one must never be wrong, which
// TestLosesNothingAgreesWithThePreservedPatch checks against preserve on random Tasks.
//
// It rests on encoding/json writing a struct as it writes the same value decoded into maps but
// for the order of keys (Sorted puts them in a map's), which is what
// runtime.DefaultUnstructuredConverter promises for the maps toBody makes.
func losesNothing(baseline *taskv1.Task, sent []byte) bool {
	if sent == nil {
		return false
	}
	bufs := encodeBuffers.Get().(*encodeBuffer)
	defer bufs.release()
	bufs.encoded.Reset()
	// HTML escaped, as encoding/json writes the objects the apiserver sends.
	if err := json.NewEncoder(&bufs.encoded).Encode(taskBody{Spec: &baseline.Spec, Status: &baseline.Status}); err != nil {
		return false
	}
	encoded := bytes.TrimSuffix(bufs.encoded.Bytes(), []byte{'\n'})
	if len(encoded) < len(sent) {
		// Sorting only drops bytes: the most common loss, hidden fields the body has and the
		// baseline has not, is told without it.
		return false
	}
	sorted, ok := jsonvalue.Sorted(bufs.sorted[:0], encoded, true)
	bufs.sorted = sorted
	return ok && bytes.Equal(sorted, sent)
}

// taskBody is the part of a Task that versions map, as its JSON: spec and status, every other
// field left out.
type taskBody struct {
	Spec   *taskv1.TaskSpec   `json:"spec"`
	Status *taskv1.TaskStatus `json:"status"`
}

type encodeBuffer struct {
	encoded bytes.Buffer
	sorted  []byte
}

var encodeBuffers = sync.Pool{New: func() any { return &encodeBuffer{} }}

// maxPooledBuffer is the largest buffer kept for the next call: a Task near etcd's limit must
// not keep a megabyte alive for the small ones after it.
const maxPooledBuffer = 64 << 10

// release returns b to the pool, unless it grew past maxPooledBuffer.
func (b *encodeBuffer) release() {
	if b.encoded.Cap() > maxPooledBuffer || cap(b.sorted) > maxPooledBuffer {
		return
	}
	encodeBuffers.Put(b)
}

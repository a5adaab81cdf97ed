package queues_test

import (
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

// TestREADMEQueues runs the README's Queues block (marked <!-- test: queues -->) as written,
// from the repository root, on the suite's cluster: Kueue and the operator running, as after
// `make run QUEUES=1`.
func TestREADMEQueues(t *testing.T) {
	setUp(t)
	block := testenv.READMEBlocks(t, "queues")["queues"]
	testenv.RunREADME(t, cluster, "queues", block, 4*time.Minute)
}

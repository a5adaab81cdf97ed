package plugin_test

import (
	"testing"
	"time"

	"example.com/task-operator/internal/testenv"
)

// TestREADMEEverydayUse runs the README's "Everyday use" block (<!-- test: everyday -->) as
// written, from the repository root, with the plugin on PATH as make install-plugin leaves it.
func TestREADMEEverydayUse(t *testing.T) {
	setUp(t)
	block := testenv.READMEBlocks(t, "everyday")["everyday"]
	out := testenv.RunREADME(t, cluster, "everyday", block, 3*time.Minute)
	contains(t, "README everyday", out, "Phase:", "Succeeded", "sample-v1-0-1 Succeeded\n", podLog,
		"task.example.com/sample-v1 suspended", "task.example.com/sample-v1 resumed",
		"task.example.com/sample-v1 is Succeeded: nothing to cancel", "task.example.com/sample-v1: run requested at ", "; it starts now as Job sample-v1-",
		"apiVersion: example.com/v1\n")
}

package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"example.com/task-operator/internal/version"
)

// captureStdout runs fn with os.Stdout going to a pipe and returns what it wrote.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	fn()
	os.Stdout = saved
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := io.Copy(&out, r); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestVersionAnswersEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"--version"}, {"-version"}, {"version"},
		{"manager", "--version"}, {"migrate", "--version"}, {"http", "-version"},
		{"--leader-elect=false", "--version"},
	} {
		var code int
		out := captureStdout(t, func() { code = run(args) })
		if code != 0 || strings.TrimSpace(out) != version.Get().String() {
			t.Errorf("task-operator %v: exit %d, printed %q; want 0 and %q", args, code, out, version.Get().String())
		}
	}
}

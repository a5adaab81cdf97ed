package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"os"
	"slices"
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

func TestMetricsServerOffersHTTP2OnlyWhenEnabled(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"http/1.1"}},
		{[]string{"--enable-http2"}, []string{"h2", "http/1.1"}},
	} {
		f, err := parseManagerFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		opts := managerOptions(f, nil, nil)
		c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
		for _, o := range opts.Metrics.TLSOpts {
			o(c)
		}
		if !slices.Equal(c.NextProtos, tc.want) {
			t.Errorf("manager %v: the metrics server offers %v, want %v", tc.args, c.NextProtos, tc.want)
		}
	}
}

package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

const chartDir = "../../charts/task-operator"

// TestChartREADMEIsCurrent: the committed README is what `make chart-docs` writes now.
func TestChartREADMEIsCurrent(t *testing.T) {
	want, err := Generate(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(chartDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Error("charts/task-operator/README.md is stale: run make chart-docs and commit it")
	}
}

// TestValuesTableNamesEveryValue: each leaf of values.yaml is a row, with its type from the
// schema, its default and a description.
func TestValuesTableNamesEveryValue(t *testing.T) {
	out, err := Generate(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `replicaCount` | integer | `2` |",
		"| `image.repository` | string | `\"example.com/task-operator\"` |",
		"| `nodeSelector` | object | `{}` |",
		"| `extraArgs` | array | `[]` |",
		"| `metrics.serviceMonitor.labels` | object | `{}` |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no row %q in:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "| `") && strings.HasSuffix(line, "|  |") {
			t.Errorf("a value without a description: %s", line)
		}
	}
}

package cli

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestConvertReadsStandardInputForDash: as with kubectl, -f - reads the manifest from standard
// input (kubectl get tasks -o yaml | kubectl task convert -f -); --in-place, which has no file
// to write back, is refused saying so.
func TestConvertReadsStandardInputForDash(t *testing.T) {
	text := "apiVersion: example.com/v1alpha1\nkind: Task\nmetadata: {name: piped}\nspec: {type: shell, shell: echo}\n"
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		root := NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(text), Out: &out, ErrOut: &errOut})
		root.SetArgs(append([]string{"convert"}, args...))
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "apiVersion: example.com/v1\n") || !strings.Contains(out, "name: piped") {
		t.Errorf("got:\n%s", out)
	}
	if _, err := run("-f", "-", "--in-place"); err == nil || !strings.Contains(err.Error(), "--in-place cannot write back to standard input") {
		t.Errorf("--in-place with -f -: error %v, want one saying it cannot write to standard input", err)
	}
}

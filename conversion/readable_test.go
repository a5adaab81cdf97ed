package conversion

import (
	"fmt"
	"strings"
	"testing"

	"example.com/task-operator/conversion/fuzzer"
	"example.com/task-operator/internal/sample"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"

	taskv1 "example.com/task-operator/apis/v1"
)

// maximalShell fills every shell field at its schema limit with text that does not compress, and
// escapes badly in JSON (<, >, &).
func maximalShell(envs int) *taskv1.Task {
	task := sample.RichTask(strings.Repeat("<&>", 65536/3))
	task.Spec.Runner.Shell.Image = fuzzer.IncompressibleText(0, 512)
	task.Spec.Runner.Shell.Env = nil
	for i := range envs {
		name := fmt.Sprintf("E%03d_%s", i, fuzzer.IncompressibleText(i, 251))
		task.Spec.Runner.Shell.Env = append(task.Spec.Runner.Shell.Env, taskv1.EnvVar{Name: name, Value: fuzzer.IncompressibleText(1000+i, 4096)})
	}
	return task
}

// TestMaximalTaskIsRefusedNamingTheField: a Task with every field at its schema limit cannot be
// read at the old versions; the write is refused, naming the field to shorten.
func TestMaximalTaskIsRefusedNamingTheField(t *testing.T) {
	errs := CheckReadable(hubObject(t, maximalShell(64)))
	if len(errs) != 2 {
		t.Fatalf("CheckReadable = %v, want one error per old version", errs)
	}
	for _, err := range errs {
		if err.Field != "spec.runner.shell.env" {
			t.Errorf("error names %s, want spec.runner.shell.env: %v", err.Field, err)
		}
	}
}

// TestLargestAcceptedTaskIsReadable finds the largest Task CheckReadable accepts (more env
// entries only add to what is preserved, so a binary search finds the boundary) and reads it at
// every old version: its annotations must fit the apiserver's limit.
func TestLargestAcceptedTaskIsReadable(t *testing.T) {
	accepted := func(envs int) bool { return len(CheckReadable(hubObject(t, maximalShell(envs)))) == 0 }
	lo, hi := 0, 64 // accepted(lo), !accepted(hi)
	if !accepted(lo) || accepted(hi) {
		t.Fatalf("accepted(0) = %t, accepted(64) = %t: the boundary is not between", accepted(lo), accepted(hi))
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; accepted(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	hub := hubObject(t, maximalShell(lo))
	for _, version := range []string{alpha, beta} {
		spoke := mustConvert(t, hub, version)
		size := annotationsSize(spoke) + int64(len(PreservedAnnotation)+len(preservedValue(spoke)))
		if size > int64(apivalidation.TotalAnnotationSizeLimitB) {
			t.Fatalf("%d env entries: accepted, but its annotations at %s take %d bytes", lo, version, size)
		}
		requireSameBody(t, "largest accepted through "+version, hub, mustConvert(t, spoke, hubVersion))
	}
	if lo < 40 {
		t.Fatalf("only %d env entries of 4 KiB fit: the encoding wastes room", lo)
	}
	t.Logf("with the maximal script and image, up to %d env entries of 4 KiB of incompressible text stay readable", lo)
}

func TestOtherAnnotationsCount(t *testing.T) {
	task := sample.RichTask("echo")
	task.Annotations["huge"] = strings.Repeat("x", apivalidation.TotalAnnotationSizeLimitB-200)
	errs := CheckReadable(hubObject(t, task))
	if len(errs) == 0 || errs[0].Field != "metadata.annotations" {
		t.Fatalf("CheckReadable = %v, want an error naming metadata.annotations", errs)
	}
}

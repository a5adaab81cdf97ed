// Package fuzzer fills Task objects of every version with random but well-formed content for
// round-trip tests. Random values are kept inside what the API schema admits wherever the
// schema would reject them anyway (enums, required non-empty strings, non-negative counts).
package fuzzer

import (
	"math/rand"

	apifuzzer "k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/apis/v1alpha1"
	"example.com/task-operator/apis/v1beta1"
)

// Funcs are the custom fill functions for the Task API of every version.
var Funcs = apifuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, taskFuncs)

// New returns a filler seeded with seed.
func New(seed int64) *randfill.Filler {
	return apifuzzer.FuzzerFor(Funcs, rand.NewSource(seed), runtimeserializer.CodecFactory{})
}

func taskFuncs(_ runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(r *taskv1.Runner, c randfill.Continue) {
			c.FillNoCustom(r)
			r.Type = pick(c, taskv1.RunnerShell, taskv1.RunnerHTTP)
		},
		func(s *taskv1.ShellRunner, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Script = nonEmpty(c, s.Script)
		},
		func(h *taskv1.HTTPRunner, c randfill.Continue) {
			c.FillNoCustom(h)
			h.URL = nonEmpty(c, h.URL)
		},
		func(s *taskv1.Schedule, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Cron = nonEmpty(c, s.Cron)
		},
		func(j *taskv1.JobReference, c randfill.Continue) {
			c.FillNoCustom(j)
			j.Name = nonEmpty(c, j.Name)
		},
		func(s *taskv1.TaskStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Attempts = nonNegative(s.Attempts)
			s.MissedRuns = nonNegative(s.MissedRuns)
		},
		func(s *v1beta1.Runner, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Type = pick(c, v1beta1.RunnerType("Shell"), v1beta1.RunnerType("HTTP"))
		},
		func(s *v1beta1.ShellRunner, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Script = nonEmpty(c, s.Script)
		},
		func(h *v1beta1.HTTPRunner, c randfill.Continue) {
			c.FillNoCustom(h)
			h.URL = nonEmpty(c, h.URL)
			// The schema defaults the method, so an old-version object always has one.
			h.Method = pick(c, "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
		},
		func(s *v1beta1.TaskSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Parallelism = positive(s.Parallelism) // defaulted to 1, at least 1
		},
		func(s *v1beta1.TaskStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Attempts = nonNegative(s.Attempts)
		},
		func(s *v1alpha1.TaskSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Type = pick(c, v1alpha1.TaskType("shell"), v1alpha1.TaskType("http"))
			s.Replicas = positive(s.Replicas) // defaulted to 1, at least 1
		},
		func(s *v1alpha1.TaskStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.RetryCount = nonNegative(s.RetryCount)
		},
	}
}

func pick[T any](c randfill.Continue, choices ...T) T {
	return choices[c.Intn(len(choices))]
}

func nonEmpty(c randfill.Continue, s string) string {
	if s != "" {
		return s
	}
	return "x" + c.String(8)
}

func nonNegative(n int32) int32 {
	if n < 0 {
		return -(n + 1)
	}
	return n
}

func positive(n int32) int32 {
	if n := nonNegative(n); n > 0 {
		return n
	}
	return 1
}

// IncompressibleText is n characters from seed with no repetition gzip could use: what a Task
// filled to its schema limits may hold, for tests of the preserved-fields annotation's size.
func IncompressibleText(seed, n int) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	b := make([]byte, n)
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = letters[x%uint64(len(letters))]
	}
	return string(b)
}

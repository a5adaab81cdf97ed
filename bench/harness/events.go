package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"example.com/task-operator/internal/testenv"
)

// EventReporter is the operator's events.k8s.io reportingController.
const EventReporter = "task-operator"

// EventWrites counts the Events the operator recorded in ns, and the writes they took at least:
// a POST each, and a PATCH for each that became a series (repeats of one reason on one object
// within minutes; later repeats are written every 30 minutes or when the series ends).
func EventWrites(ctx context.Context, c client.Client, ns string) (events, writes int, byType map[string]int, err error) {
	var list eventsv1.EventList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, 0, nil, fmt.Errorf("list events in %s: %w", ns, err)
	}
	byType = map[string]int{}
	for _, ev := range list.Items {
		if ev.ReportingController != EventReporter {
			continue
		}
		events++
		writes++
		if ev.Series != nil {
			writes++
		}
		byType[ev.Type]++
	}
	return events, writes, byType, nil
}

// OperatorCounter sums the samples of the metric name an operator serves.
func OperatorCounter(ctx context.Context, o *testenv.Operator, name string) (float64, error) {
	samples, err := o.Metrics(ctx)
	if err != nil {
		return 0, err
	}
	return SampleSum(samples, name), nil
}

// SampleSum adds up the samples of one metric, across its labels.
func SampleSum(samples []testenv.Sample, name string) float64 {
	var sum float64
	for _, s := range samples {
		if s.Name == name {
			sum += s.Value
		}
	}
	return sum
}

// OperatorFlag returns the value of the last --name=value (or -name=value) among the extra
// operator arguments, if any.
func (e *Env) OperatorFlag(name string) (string, bool) {
	value, found := "", false
	for _, a := range e.opts.OperatorArgs {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}

// OperatorIntFlag is OperatorFlag as a number, or def when not given (or not a number).
func (e *Env) OperatorIntFlag(name string, def int) int {
	if v, ok := e.OperatorFlag(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

package cli

import (
	"testing"

	taskv1 "example.com/task-operator/apis/v1"
)

func TestRequestsRefusedForTheTaskAsItStands(t *testing.T) {
	schedule := &taskv1.Schedule{Cron: "@hourly"}
	tests := []struct {
		name     string
		kind     requestKind
		schedule *taskv1.Schedule
		phase    taskv1.Phase
		want     string // "" for accepted
	}{
		{name: "rerun of a succeeded one-shot Task", kind: rerunRequest, phase: taskv1.PhaseSucceeded},
		{name: "rerun of a failed one-shot Task", kind: rerunRequest, phase: taskv1.PhaseFailed},
		{name: "rerun of a running one-shot Task", kind: rerunRequest, phase: taskv1.PhaseRunning,
			want: `task "t" in namespace "ns" is Running, not finished: rerun it once it Succeeded or Failed (or cancel it first)`},
		{name: "rerun of a retrying one-shot Task", kind: rerunRequest, phase: taskv1.PhaseRetrying,
			want: `task "t" in namespace "ns" is Retrying, not finished: rerun it once it Succeeded or Failed (or cancel it first)`},
		{name: "rerun of a one-shot Task not started yet", kind: rerunRequest,
			want: `task "t" in namespace "ns" is not started yet, not finished: rerun it once it Succeeded or Failed (or cancel it first)`},
		{name: "rerun of a scheduled Task is a run", kind: rerunRequest, schedule: schedule, phase: taskv1.PhaseRunning},
		{name: "run of a scheduled Task", kind: runRequest, schedule: schedule, phase: taskv1.PhaseScheduled},
		{name: "run of a one-shot Task", kind: runRequest, phase: taskv1.PhaseSucceeded,
			want: `task "t" in namespace "ns" has no schedule: use rerun to run it again`},
		{name: "cancel", kind: cancelRequest, phase: taskv1.PhaseSucceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := &taskv1.Task{}
			task.Name, task.Spec.Schedule, task.Status.Phase = "t", tc.schedule, tc.phase
			got := ""
			if err := refuseRequest(task, tc.kind, "ns"); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

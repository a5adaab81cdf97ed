package webhook

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
)

func shellTask(mutate func(*taskv1.TaskSpec)) *taskv1.Task {
	task := &taskv1.Task{
		ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec:       taskv1.TaskSpec{Runner: taskv1.Runner{Type: taskv1.RunnerShell, Shell: &taskv1.ShellRunner{Script: "true"}}},
	}
	if mutate != nil {
		mutate(&task.Spec)
	}
	return task
}

func TestValidator(t *testing.T) {
	tests := []struct {
		name      string
		schedule  *taskv1.Schedule
		wantField string // empty: valid
	}{
		{"no schedule", nil, ""},
		{"five fields", &taskv1.Schedule{Cron: "*/5 * * * *"}, ""},
		{"descriptor", &taskv1.Schedule{Cron: "@hourly", TimeZone: "Europe/Paris"}, ""},
		{"every", &taskv1.Schedule{Cron: "@every 2s"}, ""},
		{"bad cron", &taskv1.Schedule{Cron: "every tuesday"}, "spec.schedule.cron"},
		{"six fields", &taskv1.Schedule{Cron: "0 */5 * * * *"}, "spec.schedule.cron"},
		{"unknown zone", &taskv1.Schedule{Cron: "@daily", TimeZone: "Mars/Olympus_Mons"}, "spec.schedule.timeZone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := shellTask(func(s *taskv1.TaskSpec) { s.Schedule = tt.schedule })
			_, errCreate := TaskValidator{}.ValidateCreate(context.Background(), task)
			_, errUpdate := TaskValidator{}.ValidateUpdate(context.Background(), task, task)
			for _, err := range []error{errCreate, errUpdate} {
				switch {
				case tt.wantField == "" && err != nil:
					t.Errorf("rejected a valid Task: %v", err)
				case tt.wantField != "" && (err == nil || !strings.Contains(err.Error(), tt.wantField)):
					t.Errorf("error %v does not name %s", err, tt.wantField)
				}
			}
		})
	}
}

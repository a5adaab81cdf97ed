package reconciler

import "time"

// A jobChange is what a step did to one of the Task's Jobs, as the rest of the reconcile must
// see it. Steps report their writes (scope.changed); execute applies them to s.jobs in one
// place (applyChanges), so the status is computed from the Jobs as they now are and no step
// edits another's view.
type jobChange struct {
	name string
	// created is the Job as created, or as found under its name (startRun).
	created *observedJob
	// suspended and protected are spec.suspend and FinalizerRunOutcome as written.
	suspended, protected *bool
	// deleted says why the step deleted the Job; cancelAt is the cancel request's time.
	deleted  deletionCause
	cancelAt time.Time
}

// deletionCause is why a step deleted a Job.
type deletionCause int

const (
	notDeleted deletionCause = iota
	// deletedAsHistory: a finished Job past the history limits.
	deletedAsHistory
	// deletedReplaced: an active Job replaced by a newer run (policy Replace).
	deletedReplaced
	// deletedCancelled: an active Job of a run a cancel request stops.
	deletedCancelled
)

// changed reports a write to one of the Task's Jobs.
func (s *scope) changed(c jobChange) { s.changes = append(s.changes, c) }

// applyChanges folds the reported writes into what the reconcile knows of the Jobs.
func (s *scope) applyChanges() {
	created := false
	for _, c := range s.changes {
		s.applyChange(c)
		created = created || c.created != nil
	}
	s.changes = s.changes[:0]
	if created {
		sortJobs(s.jobs) // only a new Job can change the order (by run, then name)
	}
}

func (s *scope) applyChange(c jobChange) {
	j := findJob(s.jobs, c.name)
	if c.created != nil {
		if j != nil {
			*j = *c.created
		} else {
			s.jobs = append(s.jobs, *c.created)
		}
		return
	}
	if j == nil {
		return
	}
	if c.suspended != nil {
		j.Suspended = *c.suspended
	}
	if c.protected != nil {
		j.Protected = *c.protected
	}
	switch c.deleted {
	case deletedAsHistory:
		j.Deleting = true
	case deletedReplaced:
		j.Deleting, j.Replaced, j.Finished = true, true, s.now
	case deletedCancelled:
		if !j.Deleting {
			j.Deleting, j.Finished = true, s.now
		}
		j.Cancelled = c.cancelAt
	}
}

// Package invariants judges what a fault or load scenario left behind: the one checker the
// reconciler's chaos test (reconciler/chaos_test.go) and the bench's scenarios
// (bench/scenario: kill, failover, throughput, queue, memory) share.
//
// Check takes the Tasks and the operator's Jobs as they are at the end (Collect lists them)
// and, when the scenario watched them, every Job seen over its life, deleted ones included.
// It counts, by Category:
//
//   - duplicate Jobs: two Jobs for one attempt of one run of a Task, a Job name used twice, or
//     more Jobs for a Task without a schedule than its status counts attempts;
//   - succeeded runs run again: an attempt after an attempt of the same run completed;
//   - Jobs with more pods than the Task's parallelism;
//   - orphaned Jobs: an operator Job (with the Task label) whose controlling Task does not
//     exist and that is not being deleted;
//   - non-terminal Tasks: neither Succeeded nor Failed;
//   - failed Tasks: Failed although the scenario meant it to succeed;
//   - wrong final state: Succeeded although meant to fail, or terminal without any Job;
//   - status disagreeing with Jobs: currentRun, attempts, phase, conditions (and their
//     observedGeneration) or kstatus not what the Jobs say;
//   - finalizers left: a Task or a Job still holding one.
//
// What differs by scenario is in Options: what each Task was set up to do (Expect: one run or
// a schedule, meant to succeed, to fail, or either) and whether Jobs were deleted on purpose.
//
// Check is pure, so its tests build Task and Job sets by hand and show that each violation is
// caught. Unsettled says what still moves, for the wait before Check.
package invariants

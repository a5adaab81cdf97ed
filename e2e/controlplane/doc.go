// Package controlplane runs a real, local Kubernetes control plane for tests
// and for development, without Docker.
//
// In API-only mode (the default) it is controller-runtime's envtest: etcd and
// kube-apiserver with the project's CRDs installed. In Full mode it adds
// kube-controller-manager (Job, garbage collector, namespace, node lifecycle,
// TTL-after-finished, pod GC and storage version migration controllers),
// kube-scheduler and KWOK, which fakes Nodes and plays the pods on them, so
// that Jobs really run to completion.
//
// Pods on the fake Nodes follow the stages embedded from stages/*.yaml:
// Pending → Running at once, then Succeeded (exit code 0) after one second,
// whatever their restartPolicy. Labels on the pod change that:
//
//	e2e.example.com/outcome: fail        ends Failed (exit code 1, reason Error)
//	e2e.example.com/outcome: hang        stays Running until deleted
//	e2e.example.com/run-seconds: "N"     completes after N seconds instead of 1
//
// A deleted pod that is still running is marked Failed (exit code 137) and
// then removed, as a kubelet would do. Finalizers other than the Job
// controller's batch.kubernetes.io/job-tracking are cleared; that one is
// left to the Job controller, which must count the pod before it goes.
//
// The ServiceAccount admission plugin is off (envtest's default) and no
// ServiceAccount controller runs, so pods need no "default" ServiceAccount.
//
// Every process runs in its own process group and Stop kills the groups.
// Should the process using the harness die without calling Stop (a panic
// outside the test goroutine, `go test -timeout`, SIGKILL), a watchdog
// process it started kills them instead and removes the temporary state.
//
// The binaries come from hack/controlplane.sh (bin/controlplane by default).
package controlplane

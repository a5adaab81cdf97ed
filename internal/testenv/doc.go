// Package testenv is what the project's tests and benchmarks stand on: a real local control
// plane, the operator binary as a process, the upgrade from the previous release, and the
// waits between them.
//
//   - ControlPlane (Start): etcd and kube-apiserver through controller-runtime's envtest with
//     the project's CRDs; in Full mode also kube-controller-manager, kube-scheduler and KWOK
//     fake Nodes, so that Jobs really run. Raw etcd access reads what the apiserver stored.
//   - Operator (StartOperator): cmd/task-operator built once per process and run with its
//     webhooks on loopback, as `make run` does, under any kubeconfig and on any ports.
//   - Upgrade (NewUpgrade): the previous release's CRD, Tasks written at v1alpha1, the CRD
//     upgrade with conversion by the product's /convert handler served in process, and the
//     encodings etcd holds.
//   - Kueue (InstallKueue): Kueue's release manifests applied as shipped and its manager pod
//     run as a stand-in, for Tasks with spec.queueName.
//   - Stand-in pods (RunStandIns): a namespace's pods run as processes by package
//     internal/kubelet, which has no knowledge of this harness beyond a rest.Config.
//   - Poll and Eventually: the one way to wait.
//   - Main and Shared: one control plane per test package; StartT: one for a single test.
//
// Only testing.go takes a testing.TB; the rest also serves programs (hack/cluster, bench).
//
// # The control plane
//
// kube-controller-manager runs the Job, garbage collector, namespace, node lifecycle,
// TTL-after-finished, pod GC and storage version migration controllers.
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
// Should the process using the package die without calling Stop (a panic
// outside the test goroutine, `go test -timeout`, SIGKILL), a watchdog
// process it started kills them instead and removes the temporary state.
// Operator processes die with the thread that started them.
//
// The binaries come from hack/controlplane.sh (bin/controlplane by default).
//
// # Kueue
//
// hack/kueue.sh (run by hack/controlplane.sh, so by make controlplane and CI) builds Kueue's
// manager from its own Go module, hack/kueue (Kueue needs other Kubernetes library versions
// than the main module and hack/tools), into BinDir/kueue, and renders the release manifests
// of the same module version (its config/default with the released image) into
// BinDir/kueue-manifests.yaml; a stamp of the module's go.mod, go.sum, the overlay and the Go
// version skips both when nothing changed.
//
// InstallKueue runs Kueue in the cluster, as shipped, rather than out of the cluster: Kueue's
// CRDs are served at two versions through its own conversion webhook and its admission
// webhooks guard Jobs, so the apiserver must reach Kueue's webhook server; Kueue's internal
// certificate management issues a certificate for its Service's DNS name only and starts no
// controller before that certificate is ready, so a loopback URL would fail verification, and
// without it Kueue reads certificates from fixed paths under /etc. As a stand-in pod (a
// control plane started with KueueNamespace among Options.StandInNamespaces) the kueue binary
// runs in a network namespace holding the pod IP, as the Deployment's ServiceAccount, with its
// ConfigMap and certificate Secret mounted where the pod spec says, and the apiserver calls its
// webhooks, and its visibility API through the aggregator (testenv configures the front-proxy
// client certificate for that), through the Services' EndpointSlices. That needs root and ip,
// as every stand-in; tests using Kueue skip without them.
package testenv

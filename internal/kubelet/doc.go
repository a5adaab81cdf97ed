// Package kubelet stands in for a kubelet where no container runtime exists: the pods of one
// namespace run as real processes on this machine, as a kubelet would run them. KWOK only
// starts them (a pod IP, Running, not Ready); the control plane (internal/testenv, its
// Options.StandInNamespaces) keeps KWOK off them after that and turns on
// --enable-aggregator-routing, so the apiserver reaches webhook Services at pod IPs. StandIns
// does the rest:
//
//   - each pod gets a PodNetwork holding its pod IP, so the apiserver reaches it at the address
//     its EndpointSlices list;
//   - the container's image is looked up in Options.Binaries and run with the container's args
//     and environment (downward API included), in a mount namespace where the pod's volumes
//     (emptyDir, Secret, ConfigMap) and its ServiceAccount token (a TokenRequest bound to the
//     pod: the process runs with exactly the pod's RBAC) sit where the pod spec mounts them, and
//     KUBERNETES_SERVICE_HOST/PORT name the apiserver's loopback address, forwarded into the
//     namespace;
//   - the readiness probe is the process's own: the pod's Ready condition follows it, and
//     Endpoints with it;
//   - a deleted pod's process gets SIGTERM and terminationGracePeriodSeconds to exit, the probe
//     still followed meanwhile; then the pod is removed. A process that exits by itself is
//     restarted or ends the pod, per the restart policy.
//
// The API: Run(Options) gives a StandIns; Processes lists what runs, by pod; Stop ends it as a
// node failure would. PodNetworksSupported says whether this machine can (root, iproute2), and
// CleanStalePodNetworks removes what a killed test process left behind.
package kubelet

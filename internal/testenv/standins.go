package testenv

import (
	"fmt"
	"path/filepath"
	"slices"

	"example.com/task-operator/internal/kubelet"
)

// RunStandIns runs the pods of one of the control plane's Options.StandInNamespaces as
// processes on this machine (package kubelet), each pod's directory under WorkDir unless
// opts.Dir says otherwise.
func (cp *ControlPlane) RunStandIns(opts kubelet.Options) (*kubelet.StandIns, error) {
	if err := kubelet.PodNetworksSupported(); err != nil {
		return nil, err // before anything is made for the pods
	}
	if !slices.Contains(cp.opts.StandInNamespaces, opts.Namespace) {
		return nil, fmt.Errorf("stand-ins: namespace %q is not in the control plane's StandInNamespaces", opts.Namespace)
	}
	if opts.Dir == "" {
		work, err := WorkDir()
		if err != nil {
			return nil, err
		}
		opts.Dir = filepath.Join(work, "standins", opts.Namespace)
	}
	opts.Config = cp.Config
	return kubelet.Run(opts)
}

package conversion

import (
	"fmt"

	taskv1 "example.com/task-operator/apis/v1"
)

// hubVersion is the version every spoke converts through and the storage version.
var hubVersion = taskv1.GroupVersion.Version

// taskGroupPrefix starts the apiVersion of every served version.
const taskGroupPrefix = taskv1.Group + "/"

// ServedVersions returns the versions of Task this package converts between, the hub first.
func ServedVersions() []string {
	return []string{hubVersion, v1beta1Spoke.version, v1alpha1Spoke.version}
}

// ServedVersionOf returns the version of apiVersion ("example.com/v1beta1" gives "v1beta1") if
// it is a served version of Task, else "".
func ServedVersionOf(apiVersion string) string {
	for _, v := range ServedVersions() {
		if apiVersion == taskGroupPrefix+v {
			return v
		}
	}
	return ""
}

// servedVersionOfObject returns the served version obj's apiVersion names, else "".
func servedVersionOfObject(obj map[string]any) string {
	apiVersion, _ := obj["apiVersion"].(string)
	return ServedVersionOf(apiVersion)
}

// versionOf reads the version of a Task's apiVersion; an error when it is not a served one.
func versionOf(obj map[string]any) (string, error) {
	if v := servedVersionOfObject(obj); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%s: apiVersion %q is not a served version of %s", nameOf(obj), obj["apiVersion"], taskv1.GroupKind)
}

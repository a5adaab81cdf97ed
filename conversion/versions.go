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

// versionOf reads the version of a Task's apiVersion; an error, naming the field, when obj is
// not a Task or its apiVersion is not a served one. A kind other than Task would otherwise come
// back converted and relabelled as a Task.
func versionOf(obj map[string]any) (string, error) {
	if kind, _ := obj["kind"].(string); kind != taskv1.Kind {
		return "", fmt.Errorf("%s: kind %s is not %s", nameOf(obj), describe(obj["kind"]), taskv1.Kind)
	}
	if v := servedVersionOfObject(obj); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%s: apiVersion %s is not a served version of %s", nameOf(obj), describe(obj["apiVersion"]), taskv1.GroupKind)
}

// describe quotes a string field's value for an error message; any other value is only said
// not to be a string, so that a huge one does not flood the message.
func describe(value any) string {
	switch v := value.(type) {
	case nil:
		return "(missing)"
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return "(not a string)"
	}
}

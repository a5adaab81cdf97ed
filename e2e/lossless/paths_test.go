package lossless_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"

	jsonmerge "github.com/evanphx/json-patch/v5"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
)

// A writePath is one way a client writes a Task it read at an old version.
type writePath struct {
	name string
	// status says whether it writes the status subresource (else the main resource).
	status bool
	// kubectl marks the paths that run kubectl: slower, so the property test uses them less.
	kubectl bool
	// apply marks the paths that apply a manifest (server- or client-side).
	apply bool
	write func(ctx context.Context, version string, read, changed *unstructured.Unstructured) error
}

var writePaths = []writePath{
	{name: "update", write: func(ctx context.Context, version string, _, changed *unstructured.Unstructured) error {
		_, err := tasks(version, changed.GetNamespace()).Update(ctx, changed, metav1.UpdateOptions{})
		return err
	}},
	{name: "merge patch", write: mergePatch("")},
	{name: "json patch", write: jsonPatch("")},
	{name: "server-side apply (alice)", apply: true, write: serverSideApply("alice", "")},
	{name: "server-side apply (bob)", apply: true, write: serverSideApply("bob", "")},
	{name: "kubectl apply", kubectl: true, apply: true, write: kubectlApply(false)},
	{name: "kubectl apply --server-side", kubectl: true, apply: true, write: kubectlApply(true)},
	{name: "kubectl edit", kubectl: true, write: kubectlEdit("")},
	{name: "update status", status: true, write: func(ctx context.Context, version string, _, changed *unstructured.Unstructured) error {
		_, err := tasks(version, changed.GetNamespace()).UpdateStatus(ctx, changed, metav1.UpdateOptions{})
		return err
	}},
	{name: "merge patch status", status: true, write: mergePatch("status")},
	{name: "json patch status", status: true, write: jsonPatch("status")},
	{name: "server-side apply status", status: true, apply: true, write: serverSideApply("carol", "status")},
	{name: "kubectl edit status", status: true, kubectl: true, write: kubectlEdit("status")},
}

func mergePatch(subresource string) func(context.Context, string, *unstructured.Unstructured, *unstructured.Unstructured) error {
	return func(ctx context.Context, version string, read, changed *unstructured.Unstructured) error {
		patch, err := jsonmerge.CreateMergePatch(mustJSON(read), mustJSON(changed))
		if err != nil {
			return err
		}
		_, err = tasks(version, read.GetNamespace()).Patch(ctx, read.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, subresources(subresource)...)
		return err
	}
}

func jsonPatch(subresource string) func(context.Context, string, *unstructured.Unstructured, *unstructured.Unstructured) error {
	return func(ctx context.Context, version string, read, changed *unstructured.Unstructured) error {
		ops, err := jsonpatch.CreatePatch(mustJSON(read), mustJSON(changed))
		if err != nil {
			return err
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		_, err = tasks(version, read.GetNamespace()).Patch(ctx, read.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{}, subresources(subresource)...)
		return err
	}
}

func serverSideApply(manager, subresource string) func(context.Context, string, *unstructured.Unstructured, *unstructured.Unstructured) error {
	return func(ctx context.Context, version string, _, changed *unstructured.Unstructured) error {
		m := manifest(changed, subresource == "status")
		opts := metav1.ApplyOptions{FieldManager: manager, Force: true}
		res := tasks(version, changed.GetNamespace())
		var err error
		if subresource == "status" {
			_, err = res.ApplyStatus(ctx, changed.GetName(), m, opts)
		} else {
			_, err = res.Apply(ctx, changed.GetName(), m, opts)
		}
		return err
	}
}

// kubectlApply applies the changed object as a manifest, the way a user applies a file.
func kubectlApply(serverSide bool) func(context.Context, string, *unstructured.Unstructured, *unstructured.Unstructured) error {
	return func(ctx context.Context, _ string, _, changed *unstructured.Unstructured) error {
		args := []string{"apply", "-f", "-"}
		if serverSide {
			args = append(args, "--server-side", "--force-conflicts", "--field-manager=dave")
		}
		_, _, err := testenv.Kubectl(ctx, cluster.KubeconfigPath, mustJSON(manifest(changed, false)), args...)
		return err
	}
}

// kubectlEdit runs kubectl edit with an editor that writes the changed object.
func kubectlEdit(subresource string) func(context.Context, string, *unstructured.Unstructured, *unstructured.Unstructured) error {
	return func(ctx context.Context, version string, read, changed *unstructured.Unstructured) error {
		file := filepath.Join(os.TempDir(), fmt.Sprintf("lossless-edit-%d.json", rand.Int64()))
		if err := os.WriteFile(file, mustJSON(changed), 0o600); err != nil {
			return err
		}
		defer os.Remove(file)
		args := []string{"edit", "-n", read.GetNamespace(), "-o", "json", "tasks." + version + ".example.com/" + read.GetName()}
		if subresource != "" {
			args = append(args, "--subresource="+subresource)
		}
		cmd := exec.CommandContext(ctx, "kubectl", args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.KubeconfigPath, "KUBE_EDITOR=cp "+file)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %v: %w: %s", args, err, out)
		}
		return nil
	}
}

// manifest is what a user keeps in a file: the object without the fields the server sets, and
// for a status write only the status.
func manifest(o *unstructured.Unstructured, statusOnly bool) *unstructured.Unstructured {
	m := &unstructured.Unstructured{Object: obj{
		"apiVersion": o.GetAPIVersion(), "kind": o.GetKind(),
		"metadata": obj{"name": o.GetName(), "namespace": o.GetNamespace()},
	}}
	if a := o.GetAnnotations(); len(a) > 0 {
		m.SetAnnotations(a)
	}
	if statusOnly {
		m.Object["status"] = clone(o.Object["status"])
	} else {
		m.Object["spec"] = clone(o.Object["spec"])
	}
	return m
}

func subresources(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// An annotationGame is what a client does with the preserved annotation it read.
type annotationGame struct {
	name string
	play func(rnd *rand.Rand, o *unstructured.Unstructured, other string)
}

var annotationGames = []annotationGame{
	{"kept", func(*rand.Rand, *unstructured.Unstructured, string) {}},
	{"deleted", func(_ *rand.Rand, o *unstructured.Unstructured, _ string) { setAnnotation(o, "") }},
	{"another Task's", func(_ *rand.Rand, o *unstructured.Unstructured, other string) { setAnnotation(o, other) }},
	{"forged", func(rnd *rand.Rand, o *unstructured.Unstructured, _ string) { setAnnotation(o, forgery(rnd)) }},
	{"garbage-free old format", func(_ *rand.Rand, o *unstructured.Unstructured, _ string) {
		setAnnotation(o, `{"spec":{"parallelism":99,"runner":{"shell":{"image":"evil"}}}}`)
	}},
}

func setAnnotation(o *unstructured.Unstructured, value string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	if value == "" {
		delete(a, conversion.PreservedAnnotation)
	} else {
		a[conversion.PreservedAnnotation] = value
	}
	o.SetAnnotations(a)
}

// forgery is an annotation in the current layout that tries to set v1 fields and status: a
// different image, env, schedule, parallelism 50000, a negative timeout, a Succeeded phase.
func forgery(rnd *rand.Rand) string {
	p := obj{"v": 2, "spec": fmt.Sprintf("%016x", rnd.Uint64()), "status": fmt.Sprintf("%016x", rnd.Uint64()), "patch": obj{
		"spec": obj{
			"parallelism": 50000, "timeout": "-5s",
			"runner":   obj{"shell": obj{"image": "evil:latest", "env": []any{obj{"name": "X", "value": "rm -rf /data"}}}},
			"schedule": obj{"cron": "* * * * *", "timeZone": "Mars/Olympus"},
		},
		"status": obj{"phase": "Succeeded", "conditions": []any{obj{"type": "Succeeded", "status": "True", "reason": "Forged", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}}},
	}}
	return string(mustJSON(p))
}

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/apis/install"
	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
)

type convertOptions struct {
	files   []string
	to      string
	inPlace bool
}

func newConvertCommand(o *Options) *cobra.Command {
	co := convertOptions{to: taskv1.GroupVersion.Version}
	cmd := &cobra.Command{
		Use:   "convert -f FILE|DIR|-",
		Short: "Rewrite Task manifests from v1alpha1 or v1beta1 to v1, offline",
		Long: `Rewrite the Tasks of manifests kept in Git to another served version (v1 by default) with
the operator's own converter, as the cluster would store them: the same fields, the same
defaults. No cluster is contacted. A directory is read recursively (*.yaml, *.yml, *.json);
-f - reads standard input.

A file is read as kubectl apply -f reads it: YAML documents separated by ---, or JSON objects
one after another. Documents that are not Tasks, the separators and their comments are printed
unchanged, byte for byte, and a file without a Task to change is not written; the Tasks among the items
of a List (as kubectl get tasks -o yaml saves them) are converted. A Task is rewritten with
its keys sorted, as YAML (as JSON if it was written as JSON): comments inside it are lost. The result is printed (documents
separated by ---; when several files are printed, each value of a JSON stream is a document of
its own, so that kubectl apply -f - reads them all), or written back over each file with
--in-place.

A Task that the target version cannot express (a v1-only field for --to v1beta1 or v1alpha1,
unless its value is the default the cluster gives back) is refused with an error naming the field, as is a manifest the converter cannot read
and a Task the cluster's schema for its version refuses (checked against the CRD this plugin was
built with: a value outside an enum or a bound, a required field left out, a failed rule).`,
		Example: `  kubectl task convert -f config/samples/v1alpha1_task.yaml
  kubectl task convert -f manifests/ --in-place
  kubectl task convert -f task.yaml --to v1beta1
  kubectl get tasks -o yaml | kubectl task convert -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(co.files) == 0 {
				return usageError(cmd, "-f FILE|DIR is required")
			}
			if !slices.Contains(install.Versions, co.to) {
				return usageError(cmd, fmt.Sprintf("--to %s: not a served version of %s (want one of %s)", co.to, taskv1.GroupKind, strings.Join(install.Versions, ", ")))
			}
			if co.inPlace && slices.Contains(co.files, stdinFile) {
				return usageError(cmd, "--in-place cannot write back to standard input (-f -): name the file")
			}
			return runConvert(co, o.Streams.In, o.Streams.Out)
		},
	}
	cmd.Flags().StringSliceVarP(&co.files, "filename", "f", nil, "Manifest file or directory (repeatable); - reads standard input")
	cmd.Flags().StringVar(&co.to, "to", co.to, "Version to convert Tasks to: "+strings.Join(install.Versions, ", "))
	cmd.Flags().BoolVar(&co.inPlace, "in-place", false, "Write each file back instead of printing")
	return cmd
}

// stdinFile is the -f value that names standard input, as kubectl's does.
const stdinFile = "-"

func runConvert(co convertOptions, in io.Reader, out io.Writer) error {
	paths, err := manifestPaths(co.files)
	if err != nil {
		return err
	}
	first := true
	several := len(paths) > 1
	for _, p := range paths {
		name, data, err := readManifest(p, in)
		if err != nil {
			return err
		}
		converted, err := convertManifest(data, co.to)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if co.inPlace {
			if !bytes.Equal(converted, data) {
				if err := os.WriteFile(p, converted, 0o644); err != nil {
					return err
				}
			}
			continue
		}
		if !first {
			fmt.Fprintln(out, "---")
		}
		first = false
		if several {
			converted = documentsOfAStream(converted)
		}
		if _, err := out.Write(converted); err != nil {
			return err
		}
		if len(converted) > 0 && converted[len(converted)-1] != '\n' {
			// The next file's --- must start a line of its own.
			fmt.Fprintln(out)
		}
	}
	return nil
}

// documentsOfAStream gives each JSON value of a file a document of its own, separated by ---.
// Printed files are joined with ---, and kubectl reads a stream as JSON for as long as it
// starts with JSON values: a --- after two of them fails it, and YAML after one JSON value in
// a document is no YAML at all. One value per document reads either way. A file of YAML, or
// of one JSON value alone, comes back as it is.
func documentsOfAStream(data []byte) []byte {
	segs, err := splitManifest(data)
	if err != nil {
		return data
	}
	docs, values := 0, 0
	for _, s := range segs {
		if s.doc {
			docs++
		}
		if s.json {
			values++
		}
	}
	if values == 0 || docs == 1 {
		return data
	}
	var b bytes.Buffer
	afterValue := false
	for _, s := range segs {
		switch {
		case s.json:
			if docs--; docs > 0 {
				b.Write(s.text)
				b.WriteString("\n---\n")
			} else {
				b.Write(s.text)
				b.WriteByte('\n')
			}
			afterValue = true
			continue
		case afterValue && !s.doc && len(bytes.TrimSpace(s.text)) == 0:
			// The white space after a value, which its --- replaces.
		default:
			if s.doc {
				docs--
			}
			b.Write(s.text)
		}
		afterValue = false
	}
	return b.Bytes()
}

// readManifest reads the file p, or in for -, and returns the name errors give it.
func readManifest(p string, in io.Reader) (string, []byte, error) {
	if p != stdinFile {
		data, err := os.ReadFile(p)
		return p, data, err
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return "", nil, fmt.Errorf("standard input: %w", err)
	}
	return "standard input", data, nil
}

// manifestPaths expands directories into their manifest files, in lexical order; - (standard
// input) stays as it is.
func manifestPaths(args []string) ([]string, error) {
	var paths []string
	for _, arg := range args {
		if arg == stdinFile {
			paths = append(paths, arg)
			continue
		}
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			paths = append(paths, arg)
			continue
		}
		err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					paths = append(paths, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// convertManifest converts the Tasks among the documents of one file and keeps everything
// else as it was, byte for byte: the other documents, the separators and their comments, the
// whitespace between JSON values. A file without a Task to convert comes back unchanged.
func convertManifest(data []byte, to string) ([]byte, error) {
	segs, err := splitManifest(data)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	n := 0
	for _, s := range segs {
		if !s.doc {
			b.Write(s.text)
			continue
		}
		n++
		converted, err := convertDocument(s.text, to)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if s.json && !bytes.Equal(converted, s.text) {
			// The value only: the whitespace after it is a segment of its own.
			converted = bytes.TrimRight(converted, "\n")
		}
		b.Write(converted)
	}
	return b.Bytes(), nil
}

// convertDocument converts one document if it is a Task of a served version, or a List (kind:
// List, or TaskList) holding such Tasks. A document written as JSON is written back as JSON.
func convertDocument(doc []byte, to string) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return doc, nil
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		if looksLikeTask(doc) {
			return nil, fmt.Errorf("a %s that is not valid YAML: %w", taskv1.Kind, err)
		}
		return doc, nil // not a Task (or not YAML this command understands): leave it
	}
	ours := strings.HasPrefix(head.APIVersion, taskv1.Group+"/")
	var convert func(map[string]any, string) (map[string]any, error)
	switch {
	case head.Kind == taskv1.Kind && ours:
		convert = convertTask
	case head.Kind == "List" || (head.Kind == taskv1.Kind+"List" && ours):
		convert = convertList
	default:
		return doc, nil
	}
	obj, err := decodeTask(doc)
	if err != nil {
		return nil, err
	}
	before, err := json.Marshal(obj) // before convert, which may change obj
	if err != nil {
		return nil, err
	}
	result, err := convert(obj, to)
	if err != nil {
		return nil, err
	}
	if result == nil {
		return doc, nil // a List without Tasks: not ours to rewrite
	}
	if after, err := json.Marshal(result); err == nil && bytes.Equal(after, before) {
		return doc, nil // already what the cluster stores: its comments and key order stay
	}
	if writtenAsJSON(doc) {
		b, err := json.MarshalIndent(result, "", "  ")
		return append(b, '\n'), err
	}
	return yaml.Marshal(result)
}

// taskKindLine and taskAPIVersionLine find a document's top-level kind: Task and apiVersion of the Task's group in text
// that does not parse, in YAML or JSON form: such a document is a Task the command cannot read,
// refused rather than left unconverted.
var (
	taskKindLine       = regexp.MustCompile(`(?m)^kind:\s*["']?` + taskv1.Kind + `["']?\s*$|"kind"\s*:\s*"` + taskv1.Kind + `"`)
	taskAPIVersionLine = regexp.MustCompile(`(?m)^apiVersion:\s*["']?` + regexp.QuoteMeta(taskv1.Group) + `/|"apiVersion"\s*:\s*"` + regexp.QuoteMeta(taskv1.Group) + `/`)
)

func looksLikeTask(doc []byte) bool {
	return taskKindLine.Match(doc) && taskAPIVersionLine.Match(doc)
}

func writtenAsJSON(doc []byte) bool {
	return bytes.HasPrefix(bytes.TrimSpace(doc), []byte("{"))
}

// convertList converts the Tasks among a List's items (`kubectl get tasks -o yaml` saves a
// kind: List) and keeps the other items as they were; a TaskList takes the target version. It
// is nil for a List without Tasks, which is left byte for byte.
func convertList(list map[string]any, to string) (map[string]any, error) {
	items, ok := list["items"].([]any)
	if !ok && list["items"] != nil {
		return nil, fmt.Errorf("items of the %s is not a list", list["kind"])
	}
	tasks := 0
	for i, item := range items {
		obj, ok := item.(map[string]any)
		if !ok || obj["kind"] != taskv1.Kind {
			continue
		}
		if v, _ := obj["apiVersion"].(string); !strings.HasPrefix(v, taskv1.Group+"/") {
			continue
		}
		converted, err := convertTask(obj, to)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		items[i] = converted
		tasks++
	}
	if tasks == 0 && list["kind"] == "List" {
		return nil, nil
	}
	if list["kind"] == taskv1.Kind+"List" {
		list["apiVersion"] = taskv1.Group + "/" + to
	}
	return list, nil
}

// convertTask converts one Task object to version to, refusing what to cannot express.
func convertTask(obj map[string]any, to string) (map[string]any, error) {
	_, hadStatus := obj["status"]
	// The cluster defaults a Task at the version it is written at, then converts it: a v1beta1
	// Task without maxRetries is stored with 3, not with the 0 its typed form reads.
	// What the cluster would refuse on apply, named as the manifest spells it, before the
	// converter reads it (its typed decoding names a field of the wrong type the Go way).
	apiVersion, _ := obj["apiVersion"].(string)
	if version := conversion.ServedVersionOf(apiVersion); version != "" {
		if err := checkSchema(obj, version); err != nil {
			return nil, fmt.Errorf("%s: %w", taskName(obj), err)
		}
	}
	written := obj // what a refusal names: the fields the manifest sets, not the defaults added below
	obj, err := conversion.WithSchemaDefaults(obj)
	if err != nil {
		return nil, err
	}
	hub, err := conversion.Convert(obj, taskv1.GroupVersion.Version)
	if err != nil {
		return nil, err
	}
	if err := validateHub(hub); err != nil {
		return nil, err
	}
	// What the cluster would store: a manifest written at v1 gets its defaults as one written
	// at an old version does (and an old version must not be refused for their absence).
	if hub, err = conversion.WithDefaults(hub); err != nil {
		return nil, err
	}
	fields, err := conversion.Inexpressible(hub, to)
	if err != nil {
		return nil, err
	}
	if len(fields) > 0 {
		fields = conversion.OnlyWritten(fields, written)
		return nil, fmt.Errorf("%s: %s cannot express %s: keep it at %s, or remove the field%s",
			taskName(obj), to, strings.Join(fields, ", "), taskv1.GroupVersion.Version, plural(len(fields)))
	}
	result, err := conversion.Convert(hub, to)
	if err != nil {
		return nil, err
	}
	// What the annotation keeps is, after Inexpressible, only what the cluster gives back on
	// its own; the webhook would remove it from a client's write anyway.
	dropAnnotation(result, conversion.PreservedAnnotation)
	if !hadStatus {
		delete(result, "status")
	}
	tidyMetadata(result)
	return result, nil
}

// decodeTask reads a manifest document as the converter wants it: JSON numbers as int64.
func decodeTask(doc []byte) (map[string]any, error) {
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	obj, err := conversion.DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// validateHub refuses, naming the field, what the API would refuse at any version and the
// converter lets through: a schedule that does not parse, an unknown time zone.
func validateHub(hub map[string]any) error {
	task := &taskv1.Task{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(hub, task); err != nil {
		return fmt.Errorf("%s: %w", taskName(hub), err)
	}
	if errs := taskv1.Validate(task); len(errs) > 0 {
		return fmt.Errorf("%s: %w", taskName(hub), errs.ToAggregate())
	}
	return nil
}

// dropAnnotation removes the annotation key from obj's metadata.
func dropAnnotation(obj map[string]any, key string) {
	meta, _ := obj["metadata"].(map[string]any)
	if a, ok := meta["annotations"].(map[string]any); ok {
		delete(a, key)
	}
}

// tidyMetadata drops what the converter adds to metadata that a manifest did not hold: an
// empty annotations map, a null creationTimestamp.
func tidyMetadata(obj map[string]any) {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	if a, ok := meta["annotations"].(map[string]any); ok && len(a) == 0 {
		delete(meta, "annotations")
	}
	if meta["creationTimestamp"] == nil {
		delete(meta, "creationTimestamp")
	}
}

func taskName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		return fmt.Sprintf("task %q in namespace %q", name, ns)
	}
	return fmt.Sprintf("task %q", name)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

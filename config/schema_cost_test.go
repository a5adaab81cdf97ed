package config_test

// What the Task CRD's schemas cost the apiserver on each write, in process, with the
// apiserver's own libraries: every watch cache decodes the write's event at its version, then
// prunes and defaults it by that version's schema; an update at v1 is validated against v1's
// OpenAPI schema and its CEL rules, ratcheting as the apiserver does. The migration's rewrite
// ceilings measure the sum on a control plane (docs/benchmarks.md); this says which step it is.
//
//	go test ./config -run '^$' -bench TaskSchemas -benchmem
//
// Each step is timed with the JSON decode it follows, beside the decode alone (the baseline).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"

	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
)

// taskSchema is one served version's schema as the apiserver builds it from the CRD.
type taskSchema struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func taskSchemas(tb testing.TB) map[string]taskSchema {
	tb.Helper()
	crd, err := testenv.CurrentCRD()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]taskSchema{}
	for _, v := range crd.Spec.Versions {
		internal := &apiextensions.JSONSchemaProps{}
		if err := apix.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			tb.Fatalf("%s: %v", v.Name, err)
		}
		structural, err := structuralschema.NewStructural(internal)
		if err != nil {
			tb.Fatalf("%s: structural schema: %v", v.Name, err)
		}
		openAPI, _, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			tb.Fatalf("%s: OpenAPI validator: %v", v.Name, err)
		}
		out[v.Name] = taskSchema{structural: structural, openAPI: openAPI, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
	}
	return out
}

// validateUpdate is the schema part of the apiserver's ValidateUpdate of a Task (OpenAPI, then
// CEL), ratcheting on unchanged values as it does by default.
func (s taskSchema) validateUpdate(obj, old map[string]any) []string {
	correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: s.structural})
	var errs []string
	for _, e := range s.openAPI.ValidateUpdate(obj, old, apiservervalidation.WithRatcheting(correlated)).Errors {
		errs = append(errs, e.Error())
	}
	celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(correlated))
	for _, e := range celErrs {
		errs = append(errs, e.Error())
	}
	return errs
}

// migrationTask is the migration fixture's i-th Task at version, encoded as etcd holds it.
func migrationTask(tb testing.TB, i int, version string) []byte {
	tb.Helper()
	name := fmt.Sprintf("task-%05d", i)
	task := testenv.V1alpha1Task("default", name, i)
	if i%3 == 0 {
		task.Object["status"] = testenv.V1alpha1Status(name, i)
	}
	obj, err := conversion.Convert(task.Object, version)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

func decoded(tb testing.TB, raw []byte) map[string]any {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		tb.Fatal(err)
	}
	return obj
}

// TestTheTimedSchemasCheckTasks: the validators the benchmark times are the Task's, doing the
// work: the fixture passes, and an update that breaks the OpenAPI schema or a CEL rule is refused
// by name.
func TestTheTimedSchemasCheckTasks(t *testing.T) {
	v1 := taskSchemas(t)["v1"]
	for i := range 3 {
		raw := migrationTask(t, i, "v1")
		if errs := v1.validateUpdate(decoded(t, raw), decoded(t, raw)); len(errs) > 0 {
			t.Errorf("fixture %d refused: %v", i, errs)
		}
	}
	old := decoded(t, migrationTask(t, 0, "v1"))
	for _, tc := range []struct {
		name   string
		break_ func(spec map[string]any)
		want   string
	}{
		{"a string where an integer goes", func(spec map[string]any) { spec["parallelism"] = "two" }, "spec.parallelism"},
		{"an HTTP runner without its URL's block (CEL)", func(spec map[string]any) {
			spec["runner"].(map[string]any)["type"] = "HTTP"
		}, "spec.runner"},
	} {
		obj := decoded(t, migrationTask(t, 0, "v1"))
		tc.break_(obj["spec"].(map[string]any))
		errs := v1.validateUpdate(obj, old)
		if len(errs) == 0 || !strings.Contains(strings.Join(errs, "; "), tc.want) {
			t.Errorf("%s: errors %v, want one naming %s", tc.name, errs, tc.want)
		}
	}
}

func BenchmarkTaskSchemas(b *testing.B) {
	schemas := taskSchemas(b)
	for _, version := range []string{"v1alpha1", "v1beta1", "v1"} {
		raw := migrationTask(b, 0, version)
		s := schemas[version]
		b.Run(version+"/decode", func(b *testing.B) {
			for b.Loop() {
				decoded(b, raw)
			}
		})
		b.Run(version+"/decode+prune+default", func(b *testing.B) {
			for b.Loop() {
				obj := decoded(b, raw)
				pruning.Prune(obj, s.structural, true)
				structuraldefaulting.Default(obj, s.structural)
			}
		})
	}
	raw := migrationTask(b, 0, "v1")
	old := decoded(b, raw)
	v1 := schemas["v1"]
	b.Run("v1/decode+validate-update", func(b *testing.B) {
		for b.Loop() {
			if errs := v1.validateUpdate(decoded(b, raw), old); len(errs) > 0 {
				b.Fatal(errs)
			}
		}
	})
	b.Run("v1/decode+validate-update-openapi", func(b *testing.B) {
		for b.Loop() {
			obj := decoded(b, raw)
			correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: v1.structural})
			v1.openAPI.ValidateUpdate(obj, old, apiservervalidation.WithRatcheting(correlated))
		}
	})
	b.Run("v1/decode+validate-update-cel", func(b *testing.B) {
		for b.Loop() {
			obj := decoded(b, raw)
			correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: v1.structural})
			v1.cel.Validate(context.Background(), nil, v1.structural, obj, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(correlated))
		}
	})
}

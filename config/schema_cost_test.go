package config_test

// What steps of the Task CRD's schemas cost the apiserver, in process, with the apiserver's own
// libraries, on the migration fixture's Tasks as etcd holds them (at v1, defaulted, with the
// metadata the apiserver sets):
//
//   - a decode of v1's bytes as the apiserver decodes (runtime.Decode, integers kept), pruned and
//     defaulted by v1's schema: what each watch cache, the request and the read after a write
//     do with a stored Task before anything else (a write passes through it about five times);
//   - a spoke's body, decoded and pruned by its schema: what the v1alpha1 and v1beta1 caches do
//     with the conversion webhook's answer;
//   - the schema part of an update's validation at v1 (strategy.go's ValidateUpdate: OpenAPI and
//     CEL with ratcheting, the embedded ObjectMeta, list types), and OpenAPI and CEL each alone.
//
// Not timed: the field manager's typed walk of the object, which the Task's schemas also make
// (its type converter needs the apiserver's own OpenAPI models), and the ObjectMeta checks that
// do not depend on the schema. docs/benchmarks.md sets these figures against the apiserver's
// profiles on the control plane.
//
//	go test ./config -run '^$' -bench TaskSchemas -benchmem
//
// Each step is timed with the decode it follows, beside the decode alone (the baseline).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
		// As the apiserver serves it: its own copy, defaults pruned of unknown fields.
		structural = structural.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(structural); err != nil {
			tb.Fatalf("%s: %v", v.Name, err)
		}
		openAPI, _, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			tb.Fatalf("%s: OpenAPI validator: %v", v.Name, err)
		}
		out[v.Name] = taskSchema{structural: structural, openAPI: openAPI, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
	}
	return out
}

// decodeStored decodes as the apiserver decodes a custom resource: integers stay integers.
func decodeStored(tb testing.TB, raw []byte) map[string]any {
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, raw)
	if err != nil {
		tb.Fatal(err)
	}
	return obj.(*unstructured.Unstructured).Object
}

// pruneAndDefault is what a decode from etcd does with a custom resource by the schema of its
// version before anything else.
func (s taskSchema) pruneAndDefault(obj map[string]any) {
	pruning.Prune(obj, s.structural, true)
	structuraldefaulting.Default(obj, s.structural)
}

// validateUpdate is the schema part of the apiserver's ValidateUpdate of a Task
// (customResourceStrategy.ValidateUpdate), ratcheting on unchanged values as it does.
func (s taskSchema) validateUpdate(obj, old map[string]any) field.ErrorList {
	return s.validateCorrelated(obj, old, s.correlate(obj, old))
}

// correlate pairs an update's object with the stored one, as ratcheting walks them.
func (s taskSchema) correlate(obj, old map[string]any) *common.CorrelatedObject {
	return common.NewCorrelatedObject(obj, old, &model.Structural{Structural: s.structural})
}

func (s taskSchema) validateCorrelated(obj, old map[string]any, correlated *common.CorrelatedObject) field.ErrorList {
	var errs field.ErrorList
	for _, e := range s.openAPI.ValidateUpdate(obj, old, apiservervalidation.WithRatcheting(correlated)).Errors {
		errs = append(errs, field.Invalid(nil, nil, e.Error()))
	}
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, obj, s.structural, false)...)
	if len(structurallisttype.ValidateListSetsAndMaps(nil, s.structural, old)) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, obj)...)
	}
	if len(errs) > 0 { // the apiserver evaluates no rule on an object the schema refused
		return errs
	}
	celErrs, _ := s.cel.Validate(context.Background(), nil, s.structural, obj, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(correlated))
	return append(errs, celErrs...)
}

// fixtureSize is how many of the migration fixture's Tasks the benchmark cycles through: shell
// and HTTP runners, with and without a status.
const fixtureSize = 6

// storedTask is the migration fixture's i-th Task as etcd holds it at v1: converted, defaulted
// by v1's schema as the apiserver defaults a create, with the metadata the apiserver sets.
func storedTask(tb testing.TB, v1 taskSchema, i int) []byte {
	tb.Helper()
	name := fmt.Sprintf("task-%05d", i)
	task := testenv.V1alpha1Task("default", name, i)
	if i%3 == 0 {
		task.Object["status"] = testenv.V1alpha1Status(name, i)
	}
	obj, err := conversion.Convert(task.Object, "v1")
	if err != nil {
		tb.Fatal(err)
	}
	v1.pruneAndDefault(obj)
	u := &unstructured.Unstructured{Object: obj}
	u.SetUID("6a1f3c1e-0d4b-4f7e-9a55-1d2c3b4a5f60")
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)))
	u.SetGeneration(1)
	u.SetAnnotations(map[string]string{"bench.example.com/rewritten": "true"})
	raw, err := json.Marshal(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// spokeBody is the i-th stored Task at a spoke version, as the conversion webhook answers.
func spokeBody(tb testing.TB, stored []byte, version string) []byte {
	tb.Helper()
	obj, err := conversion.Convert(decodeStored(tb, stored), version)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// TestTheTimedSchemasCheckTasks: the validators the benchmark times are v1's, doing the work as
// the apiserver does: the fixture passes; an update that breaks the OpenAPI schema, or a CEL rule
// only v1 has, is refused by the field; an invalid value the stored object already had is let
// through (ratcheting) until the update changes it.
func TestTheTimedSchemasCheckTasks(t *testing.T) {
	v1 := taskSchemas(t)["v1"]
	for i := range fixtureSize {
		raw := storedTask(t, v1, i)
		if errs := v1.validateUpdate(decodeStored(t, raw), decodeStored(t, raw)); len(errs) > 0 {
			t.Errorf("fixture %d refused: %v", i, errs)
		}
	}
	stored := storedTask(t, v1, 0)
	backoff := func(obj map[string]any, initial string) map[string]any {
		obj["spec"].(map[string]any)["retry"].(map[string]any)["backoff"].(map[string]any)["initial"] = initial
		return obj
	}
	for _, tc := range []struct {
		name     string
		obj, old map[string]any
		want     string // the field an error names; "" for none
	}{
		{"a string where an integer goes", func() map[string]any {
			obj := decodeStored(t, stored)
			obj["spec"].(map[string]any)["parallelism"] = "two"
			return obj
		}(), decodeStored(t, stored), "spec.parallelism"},
		{"a backoff that starts past its maximum (v1's CEL)", backoff(decodeStored(t, stored), "6m"), decodeStored(t, stored), "spec.retry.backoff.initial"},
		{"the same invalid backoff, already stored", backoff(decodeStored(t, stored), "6m"), backoff(decodeStored(t, stored), "6m"), ""},
		{"an invalid backoff changed to another", backoff(decodeStored(t, stored), "7m"), backoff(decodeStored(t, stored), "6m"), "spec.retry.backoff.initial"},
	} {
		errs := v1.validateUpdate(tc.obj, tc.old)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", tc.name, errs)
		case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
			t.Errorf("%s: errors %v, want one naming %s", tc.name, errs, tc.want)
		}
	}
}

func BenchmarkTaskSchemas(b *testing.B) {
	schemas := taskSchemas(b)
	v1 := schemas["v1"]
	var stored [fixtureSize][]byte
	for i := range stored {
		stored[i] = storedTask(b, v1, i)
	}
	cycle := func(b *testing.B, step func(raw []byte)) {
		i := 0
		for b.Loop() {
			step(stored[i%fixtureSize])
			i++
		}
	}
	b.Run("v1/decode", func(b *testing.B) { cycle(b, func(raw []byte) { decodeStored(b, raw) }) })
	b.Run("v1/decode+prune+default", func(b *testing.B) {
		cycle(b, func(raw []byte) { v1.pruneAndDefault(decodeStored(b, raw)) })
	})
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		var answers [fixtureSize][]byte
		for i := range answers {
			answers[i] = spokeBody(b, stored[i], version)
		}
		s := schemas[version]
		spokeCycle := func(b *testing.B, step func(raw []byte)) {
			i := 0
			for b.Loop() {
				step(answers[i%fixtureSize])
				i++
			}
		}
		b.Run(version+"/decode", func(b *testing.B) { spokeCycle(b, func(raw []byte) { decodeStored(b, raw) }) })
		b.Run(version+"/decode+prune", func(b *testing.B) {
			spokeCycle(b, func(raw []byte) { pruning.Prune(decodeStored(b, raw), s.structural, true) })
		})
	}
	var old [fixtureSize]map[string]any
	for i := range old {
		old[i] = decodeStored(b, stored[i])
	}
	validate := func(name string, check func(tb testing.TB, obj, old map[string]any, correlated *common.CorrelatedObject)) {
		b.Run("v1/decode+"+name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				obj, was := decodeStored(b, stored[i%fixtureSize]), old[i%fixtureSize]
				check(b, obj, was, v1.correlate(obj, was))
				i++
			}
		})
	}
	validate("validate-update", func(tb testing.TB, obj, old map[string]any, correlated *common.CorrelatedObject) {
		if errs := v1.validateCorrelated(obj, old, correlated); len(errs) > 0 {
			tb.Fatal(errs)
		}
	})
	validate("validate-update-openapi-only", func(_ testing.TB, obj, old map[string]any, correlated *common.CorrelatedObject) {
		v1.openAPI.ValidateUpdate(obj, old, apiservervalidation.WithRatcheting(correlated))
	})
	validate("validate-update-cel-only", func(_ testing.TB, obj, old map[string]any, correlated *common.CorrelatedObject) {
		v1.cel.Validate(context.Background(), nil, v1.structural, obj, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(correlated))
	})
}

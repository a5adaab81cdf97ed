package cli

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"example.com/task-operator/config"
)

// versionSchema is one served version's schema as the apiserver checks a create with it: the
// OpenAPI validation, the list types, then the CEL rules.
type versionSchema struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	rules      *cel.Validator
}

// taskSchemas reads the schemas of the CRD this plugin was built with, once.
var taskSchemas = sync.OnceValues(func() (map[string]versionSchema, error) {
	crd := &apix.CustomResourceDefinition{}
	if err := yaml.Unmarshal(config.CRD, crd); err != nil {
		return nil, fmt.Errorf("the plugin's own CRD: %w", err)
	}
	out := map[string]versionSchema{}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apix.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, fmt.Errorf("the plugin's own CRD, %s: %w", v.Name, err)
		}
		structural, err := structuralschema.NewStructural(internal)
		if err != nil {
			return nil, fmt.Errorf("the plugin's own CRD, %s: %w", v.Name, err)
		}
		// The apiserver checks rules against the schema without its defaults, as here.
		if err := structuraldefaulting.PruneDefaults(structural); err != nil {
			return nil, fmt.Errorf("the plugin's own CRD, %s: %w", v.Name, err)
		}
		openAPI, _, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			return nil, fmt.Errorf("the plugin's own CRD, %s: %w", v.Name, err)
		}
		out[v.Name] = versionSchema{structural: structural, openAPI: openAPI, rules: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
	}
	return out, nil
})

// checkSchema refuses, naming each field, what the cluster's schema for version refuses when
// obj (decoded JSON, its defaults set) is created there. The status is left out: a create
// does not keep it.
func checkSchema(obj map[string]any, version string) error {
	schemas, err := taskSchemas()
	if err != nil {
		return err
	}
	s, ok := schemas[version]
	if !ok {
		return fmt.Errorf("the plugin's CRD has no schema for %s", version)
	}
	// What the apiserver validates: the object as created (no status), with the nulls of fields
	// that cannot be null dropped and the schema's defaults set.
	withoutStatus := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			withoutStatus[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(withoutStatus, s.structural)
	structuraldefaulting.Default(withoutStatus, s.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, withoutStatus, s.openAPI)
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, withoutStatus, s.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.structural, withoutStatus)...)
	if len(errs) == 0 { // as the apiserver, no rule is evaluated on an object the schema refused
		ruleErrs, _ := s.rules.Validate(context.Background(), nil, s.structural, withoutStatus, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, ruleErrs...)
	}
	return aggregate(errs)
}

func aggregate(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return errs.ToAggregate()
}

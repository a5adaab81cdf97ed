// Package config embeds the generated manifests that the operator itself applies when it runs
// outside a cluster, so that the files in this folder stay the single source of truth.
package config

import _ "embed"

// CRD is the Task CustomResourceDefinition, all versions.
//
//go:embed crd/bases/example.com_tasks.yaml
var CRD []byte

// WebhookConfigurations holds the mutating and validating webhook configurations for Task.
//
//go:embed webhook/manifests.yaml
var WebhookConfigurations []byte

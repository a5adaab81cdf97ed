package testenv

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// excludeNamespaces adds to every Stage of a KWOK stage file a selector that skips the pods of
// the stand-in namespaces: their processes, not KWOK, decide readiness and termination.
func excludeNamespaces(stages []byte, namespaces []string) ([]byte, error) {
	if len(namespaces) == 0 {
		return stages, nil
	}
	var out []string
	for _, doc := range strings.Split(string(stages), "\n---\n") {
		var stage map[string]any
		if err := yaml.Unmarshal([]byte(doc), &stage); err != nil {
			return nil, err
		}
		if stage == nil {
			continue
		}
		spec, _ := stage["spec"].(map[string]any)
		selector, _ := spec["selector"].(map[string]any)
		if selector == nil {
			return nil, fmt.Errorf("stage %v has no selector", stage["metadata"])
		}
		exprs, _ := selector["matchExpressions"].([]any)
		selector["matchExpressions"] = append(exprs, map[string]any{
			"key": ".metadata.namespace", "operator": "NotIn", "values": toAny(namespaces),
		})
		data, err := yaml.Marshal(stage)
		if err != nil {
			return nil, err
		}
		out = append(out, string(data))
	}
	return []byte(strings.Join(out, "---\n")), nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// standInStage starts a stand-in pod bound to a fake Node as a kubelet would start its
// containers — Running, with a pod IP — but not Ready: its process's readiness probe decides.
func standInStage(namespaces []string) []byte {
	values, _ := yaml.Marshal(namespaces)
	return []byte(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: testenv-standin-start
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: [Pending]
    - key: .metadata.namespace
      operator: In
      values:
` + indent(string(values), "      ") + `
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        phase: Running
        startTime: {{ $now | Quote }}
        hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
        podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
        conditions:
        - type: Initialized
          status: "True"
          lastTransitionTime: {{ $now | Quote }}
        - type: ContainersReady
          status: "False"
          lastTransitionTime: {{ $now | Quote }}
        - type: Ready
          status: "False"
          lastTransitionTime: {{ $now | Quote }}
        containerStatuses:
        {{ range .spec.containers }}
        - name: {{ .name | Quote }}
          image: {{ .image | Quote }}
          ready: false
          started: true
          restartCount: 0
          state:
            running:
              startedAt: {{ $now | Quote }}
        {{ end }}
`)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

package jsonvalue

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSplitObjectCountsTheObjectAsTheFirstLevel: a member is one level below its object, so
// text one level deeper than encoding/json's limit, which json.Unmarshal refuses ("exceeded
// max depth"), is not split, whether the innermost value is a scalar or an empty container.
func TestSplitObjectCountsTheObjectAsTheFirstLevel(t *testing.T) {
	for name, text := range map[string]string{
		"arrays":  `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
		"objects": strings.Repeat(`{"a":`, maxDepth) + `{}` + strings.Repeat(`}`, maxDepth),
	} {
		t.Run(name, func(t *testing.T) {
			var want map[string]json.RawMessage
			wantErr := json.Unmarshal([]byte(text), &want)
			if wantErr == nil {
				t.Fatal("encoding/json accepted the text; the fixture is wrong")
			}
			if fields, ok := SplitObject([]byte(text)); ok {
				t.Errorf("SplitObject ok with %d fields; json.Unmarshal: %v", len(fields), wantErr)
			}
		})
	}
}

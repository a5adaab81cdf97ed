package conversion

import (
	"encoding/json"
	"fmt"

	kjson "sigs.k8s.io/json"
)

// decodeJSON decodes a JSON object as the apiserver and runtime.DefaultUnstructuredConverter
// represent it: whole numbers as int64, so that values decoded from a request and values
// encoded from a typed object compare equal.
func decodeJSON(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeForConvert decodes a Task only to Convert it (the /convert webhook's objects):
// metadata.managedFields, often the larger half of an object and the same at every version,
// stays raw JSON and is written back as it came, never decoded into maps nor encoded from them.
func DecodeForConvert(data []byte) (map[string]any, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	obj := make(map[string]any, len(top))
	for key, raw := range top {
		var err error
		if key == "metadata" {
			obj[key], err = decodeMetadata(raw)
		} else {
			obj[key], err = decodeValue(raw)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return obj, nil
}

// decodeMetadata decodes metadata but for managedFields; metadata that is not an object is
// decoded whole, for Convert to reject.
func decodeMetadata(raw json.RawMessage) (any, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		// null decodes into a nil map without an error: it is no object either.
		return decodeValue(raw)
	}
	meta := make(map[string]any, len(fields))
	for key, v := range fields {
		if key == "managedFields" {
			meta[key] = v
			continue
		}
		var err error
		if meta[key], err = decodeValue(v); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	return meta, nil
}

func decodeValue(raw json.RawMessage) (any, error) {
	var v any
	err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &v)
	return v, err
}

// DecodeObject decodes a Task sent as JSON (by the apiserver, to a webhook).
func DecodeObject(data []byte) (map[string]any, error) {
	obj, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("decode Task: %w", err)
	}
	return obj, nil
}

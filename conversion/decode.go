package conversion

import (
	"encoding/json"
	"fmt"

	kjson "sigs.k8s.io/json"

	"example.com/task-operator/internal/jsonvalue"
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

// A Decoded Task is one decoded by DecodeForConvert, ready to Convert.
type Decoded struct {
	obj map[string]any
	// body is spec and status as sent, decoded into obj only when a conversion reads their
	// maps (decodeBody): one from the hub that loses nothing never does (losesNothing).
	body map[string]json.RawMessage
	// sent is the object's spec and status as sent, {"spec":...,"status":...}: a conversion
	// decodes them into the typed object of their version from it (decodeTyped).
	sent []byte
}

// bodyKeys are the top-level fields that versions map, in the order they are decoded.
var bodyKeys = []string{"spec", "status"}

// APIVersion is the apiVersion the object was sent with; "" when it has none or not a string.
func (d Decoded) APIVersion() string {
	v, _ := d.obj["apiVersion"].(string)
	return v
}

// Convert converts the object to version, as Convert does; d must not be converted twice. The
// spec and status of an object converted by a spoke's template (inbytes.go) are
// json.RawMessage, as its metadata's undecoded fields are.
func (d Decoded) Convert(version string) (map[string]any, error) {
	if from, err := versionOf(d.obj); err == nil && from == hubVersion {
		if to, ok := spokes[version]; ok {
			if out, answered, err := to.fromHubInBytes(d.obj, d.sent); answered {
				return out, err
			}
			return to.fromHubDecoding(d.obj, d.sent, d.decodeBody)
		}
	}
	if err := d.decodeBody(); err != nil {
		return nil, err
	}
	return convert(d.obj, d.sent, version)
}

// decodeBody decodes spec and status into obj, where they are not yet; an error names the
// field, as the error of decoding the whole object would.
func (d Decoded) decodeBody() error {
	for _, key := range bodyKeys {
		raw, ok := d.body[key]
		if _, done := d.obj[key]; !ok || done {
			continue
		}
		v, err := decodeValue(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		d.obj[key] = v
	}
	return nil
}

// DecodeForConvert decodes a Task only to Convert it (the /convert webhook's objects):
// metadata.managedFields, often the larger half of an object and the same at every version,
// stays raw JSON and is written back as it came, never decoded into maps nor encoded from them.
func DecodeForConvert(data []byte) (Decoded, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return Decoded{}, err
	}
	return DecodeFields(top)
}

// DecodeFields is DecodeForConvert of an object already split into its top-level fields, as a
// stream's json.Decoder splits it while it reads the object: that spares encoding/json two
// more passes over every byte of it (validating the object whole, then splitting it).
func DecodeFields(top map[string]json.RawMessage) (Decoded, error) {
	obj := make(map[string]any, len(top))
	d := Decoded{obj: obj, body: map[string]json.RawMessage{}, sent: sentBody(top)}
	for key, raw := range top {
		var err error
		switch key {
		case "metadata":
			obj[key], err = decodeMetadata(raw)
		case "spec", "status":
			d.body[key] = raw
		default:
			obj[key], err = decodeValue(raw)
		}
		if err != nil {
			return Decoded{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	return d, nil
}

// sentBody is the JSON object of spec and status as sent (an absent one stays absent): raw
// values joined, not encoded.
func sentBody(top map[string]json.RawMessage) []byte {
	b := make([]byte, 0, len(top["spec"])+len(top["status"])+len(`{"spec":,"status":}`))
	b = append(b, '{')
	for _, key := range bodyKeys {
		raw, ok := top[key]
		if !ok {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		b = append(b, raw...)
	}
	return append(b, '}')
}

// decodeMetadata decodes of metadata only what a conversion reads or changes: the annotations
// (the preserved one is read, set or removed) and the name and namespace (errors name the
// Task). Every other field, managedFields the largest, is the same at every version: it stays
// raw JSON and is written back as it came, never decoded into maps nor encoded from them.
// Metadata that is not an object is decoded whole, for Convert to reject.
func decodeMetadata(raw json.RawMessage) (any, error) {
	fields, ok := jsonvalue.SplitObject(raw)
	if !ok {
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			// null decodes into a nil map without an error: it is no object either.
			return decodeValue(raw)
		}
	}
	meta := make(map[string]any, len(fields))
	for key, v := range fields {
		if !decodedMetadata[key] {
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

// decodedMetadata are the metadata fields decodeMetadata decodes (see metadataWithout,
// preservedOf, setAnnotation and nameOf, their only readers during a conversion).
var decodedMetadata = map[string]bool{"annotations": true, "name": true, "namespace": true}

// decodeValue decodes as sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts does, mostly
// without its reflection (jsonvalue.Decode).
func decodeValue(raw json.RawMessage) (any, error) {
	return jsonvalue.Decode(raw)
}

// DecodeObject decodes a Task sent as JSON (by the apiserver, to a webhook).
func DecodeObject(data []byte) (map[string]any, error) {
	obj, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("decode Task: %w", err)
	}
	return obj, nil
}

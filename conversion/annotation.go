package conversion

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	kjson "sigs.k8s.io/json"

	"example.com/task-operator/internal/jsonvalue"
)

// PreservedAnnotation carries, on a Task read at an old version, the hub fields that version
// cannot express, so that the apiserver's own round trips through the old version (admission,
// patches, deletion, server-side apply bookkeeping) lose nothing. It exists only on old-version
// objects: up-conversion consumes it and the admission webhook removes it from v1 objects.
//
// It is never trusted for a client's write: the admission webhook takes hidden fields from the
// stored object (see Decide). It only carries the server's own decision from admission to
// storage.
const PreservedAnnotation = "task.example.com/preserved-v1-fields"

// preservedFormat is the version of the annotation's layout; values of another layout (an older
// release's) are ignored.
const preservedFormat = 2

// gzipPrefix marks a compressed value: base64 of the gzipped JSON, used when that is shorter.
const gzipPrefix = "gz:"

// compressAbove is the size of JSON above which compression is tried. Small values stay
// readable in `kubectl get -o yaml`.
const compressAbove = 4 << 10

// preserved is what the annotation holds.
type preserved struct {
	Format int `json:"v"`
	// Fingerprints of the spoke's spec and status as the annotation was made. While a part is
	// unchanged, its patch applies as a whole and gives back the hub byte for byte; once it
	// changed, only hidden fields the edit did not touch are restored (see restoreHidden).
	SpecFingerprint   string `json:"spec"`
	StatusFingerprint string `json:"status"`
	// Owners fingerprints the visible values that own hidden fields (spokeRules.owners).
	Owners map[path]string `json:"owners,omitempty"`
	// Patch is the JSON merge patch from the spoke's defaulted up-conversion to the hub body.
	Patch body `json:"patch"`
}

// encode renders p as the annotation's value: compact JSON without HTML escaping (which would
// turn every <, > and & into six bytes), gzipped when large and that is shorter.
func (p *preserved) encode() (string, error) {
	raw, err := p.appendJSON(make([]byte, 0, 1<<10))
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", PreservedAnnotation, err)
	}
	plain := string(raw)
	if len(plain) <= compressAbove {
		return plain, nil
	}
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
	_, _ = zw.Write(raw)
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("compress %s: %w", PreservedAnnotation, err)
	}
	if packed := gzipPrefix + base64.StdEncoding.EncodeToString(zipped.Bytes()); len(packed) < len(plain) {
		return packed, nil
	}
	return plain, nil
}

// appendJSON appends p as a json.Encoder without HTML escaping writes it (fields in the
// struct's order, owners omitted when empty, keys sorted), without its reflection:
// TestPreservedEncodesAsEncodingJSON holds the two together.
func (p *preserved) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, int64(p.Format), 10)
	dst = append(dst, `,"spec":`...)
	dst, _ = jsonvalue.Append(dst, p.SpecFingerprint, false)
	dst = append(dst, `,"status":`...)
	dst, _ = jsonvalue.Append(dst, p.StatusFingerprint, false)
	if len(p.Owners) > 0 {
		owners := make(map[string]any, len(p.Owners))
		for k, v := range p.Owners {
			owners[string(k)] = v
		}
		dst = append(dst, `,"owners":`...)
		dst, _ = jsonvalue.Append(dst, owners, false)
	}
	dst = append(dst, `,"patch":`...)
	dst, err := jsonvalue.Append(dst, p.Patch, false)
	if err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

// maxPreservedBytes bounds a decompressed annotation: the apiserver limits all annotations
// together to 256 KiB, and a valid hub body is far below this.
const maxPreservedBytes = 8 << 20

// maxPreservedValues bounds the values (objects, arrays, strings, numbers, ...) in an annotation.
// Every list of a v1 Task has a maxItems of at most 64, so a valid annotation holds a few
// thousand values; decoding and merging cost about 10 µs and 1 KiB per value, so a forged
// annotation of millions of tiny values (a few KiB gzipped) would otherwise take the webhook
// tens of seconds and gigabytes.
const maxPreservedValues = 20_000

// countJSONValues counts the values in a JSON text without decoding it: one per comma and per
// opening bracket outside strings, plus one. It overcounts nothing that matters: malformed
// text is rejected by the decoder that follows.
func countJSONValues(raw []byte) int {
	count := 1
	var s jsonvalue.Strings
	for _, c := range raw {
		if s.Structural(c) && (c == ',' || c == '{' || c == '[') {
			count++
		}
	}
	return count
}

// unpackPreserved returns the annotation's JSON text, decompressing a gzipped value within
// maxPreservedBytes.
func unpackPreserved(value string) ([]byte, error) {
	rest, zipped := strings.CutPrefix(value, gzipPrefix)
	if !zipped {
		return []byte(value), nil
	}
	packed, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("not base64 after %q: %w", gzipPrefix, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxPreservedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	if len(raw) > maxPreservedBytes {
		return nil, fmt.Errorf("decompresses to more than %d bytes", maxPreservedBytes)
	}
	return raw, nil
}

// decodePreserved reads the annotation's value. ok is false for a value of another layout (an
// older release's), which is ignored; a damaged value is an error naming the annotation and what
// to do: a write without it keeps the fields it carries (the mutating webhook decides them).
func decodePreserved(value string) (p *preserved, ok bool, err error) {
	fail := func(err error) (*preserved, bool, error) {
		return nil, false, fmt.Errorf("metadata.annotations[%s]: %w (the converter writes this annotation for reads at old versions: leave it out of a write, and the server keeps the fields it carries)", PreservedAnnotation, err)
	}
	raw, err := unpackPreserved(value)
	if err != nil {
		return fail(err)
	}
	if n := countJSONValues(raw); n > maxPreservedValues {
		return fail(fmt.Errorf("holds %d JSON values, more than the %d any valid Task needs", n, maxPreservedValues))
	}
	p, decided := decodeOnce(raw)
	switch {
	case decided && p.Format != preservedFormat:
		return nil, false, nil
	case !decided:
		var probe struct {
			Format *int `json:"v"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return fail(fmt.Errorf("not a JSON object: %w", err))
		}
		if probe.Format == nil || *probe.Format != preservedFormat {
			return nil, false, nil
		}
		p = &preserved{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, p); err != nil {
			return fail(err)
		}
	}
	for key := range p.Patch {
		if key != "spec" && key != "status" {
			return fail(fmt.Errorf("patch may only hold spec and status, not %q", key))
		}
	}
	return p, true, nil
}

// decodeOnce decodes raw in one pass, without the probe of its layout, when that is sure to
// agree with the probe and the decoding after it. decided is false when raw does not decode so
// (the probe then words the error), or when raw may hold a key that encoding/json's
// case-insensitive probe reads as "v" and this case-sensitive decoding does not ("V", or either
// spelled as a \u escape). A Format other than preservedFormat, 0 for none, is another layout,
// as a probe without "v" finds.
func decodeOnce(raw []byte) (p *preserved, decided bool) {
	for _, other := range []string{`"V"`, `\u0056`, `\u0076`} {
		if bytes.Contains(raw, []byte(other)) {
			return nil, false
		}
	}
	if v, ok := jsonvalue.DecodeUnique(raw); ok {
		if p, ok := preservedFrom(v); ok {
			return p, true
		}
	}
	p = &preserved{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, p); err != nil {
		return nil, false
	}
	return p, true
}

// preservedFrom maps the decoded annotation v onto preserved as sigs.k8s.io/json's decoding
// into the struct does (case-sensitive keys, unknown keys ignored, null leaves a field zero),
// without its reflection; ok is false for any value whose type differs from its field's, for
// that decoding to judge. v must come from text without repeated keys (jsonvalue.DecodeUnique),
// which encoding/json would merge. TestPreservedFromMatchesKubernetesJSON holds the two together.
func preservedFrom(v any) (*preserved, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	p := &preserved{}
	for key, value := range m {
		if value == nil {
			continue
		}
		switch key {
		case "v":
			n, ok := value.(int64)
			if !ok || int64(int(n)) != n {
				return nil, false
			}
			p.Format = int(n)
		case "spec", "status":
			s, ok := value.(string)
			if !ok {
				return nil, false
			}
			if key == "spec" {
				p.SpecFingerprint = s
			} else {
				p.StatusFingerprint = s
			}
		case "owners":
			owners, ok := value.(map[string]any)
			if !ok {
				return nil, false
			}
			p.Owners = make(map[path]string, len(owners))
			for k, o := range owners {
				s, ok := o.(string)
				if !ok {
					return nil, false
				}
				p.Owners[path(k)] = s
			}
		case "patch":
			if p.Patch, ok = value.(map[string]any); !ok {
				return nil, false
			}
		}
	}
	return p, true
}

// fingerprint identifies a decoded JSON value: the first 16 hex digits of the SHA-256 of its
// canonical JSON (encoding/json sorts map keys). It detects edits, it authenticates nothing.
func fingerprint(v any) string {
	var sum [sha256.Size]byte
	if err := jsonvalue.With(v, true, func(raw []byte) error {
		sum = sha256.Sum256(raw)
		return nil
	}); err != nil {
		return "" // decoded JSON always encodes
	}
	return hex.EncodeToString(sum[:8])
}

// Package conversion maps a Task between its served versions (v1, the hub and storage version;
// v1beta1 and v1alpha1, the spokes) in unstructured (map) space, losslessly, and decides what a
// write at an old version means for the stored object. It is pure: no HTTP, no client. The
// /convert, /mutate and /validate endpoints that use it are package webhook's.
//
//   - Convert (convert.go): hub ↔ spoke through the typed spokes (v1alpha1.go, v1beta1.go,
//     spoke.go); what a spoke cannot express travels in the preserved-fields annotation
//     (annotation.go), fingerprinted so that a later edit of the spoke is detected, and is
//     restored on the way back (restore.go) with the defaults a spoke leaves out (defaults.go).
//   - Decide (decide.go): at admission, which fields of a write at an old version come from the
//     stored object; CheckReadable (readable.go) refuses what an old version could not read back.
//   - FieldMaps (fieldmap.go): the field paths of each spoke at v1, for managedFields (migrate).
//   - ServedVersions and ServedVersionOf (versions.go); DecodeForConvert (decode.go) decodes a
//     review's objects keeping metadata.managedFields raw, and their spec and status as sent for
//     the typed decoding a conversion starts with. A hub object whose body as sent is already
//     what its old version says, defaulted, loses nothing and is converted without the diff
//     (losesnothing.go; LosslessShortcuts counts them). v1alpha1 reads such a body without a
//     typed object at all: its template (v1alpha1_bytes.go, on inbytes.go) matches the bytes
//     as sent against the one spelling the shortcut accepts and writes the old body from them,
//     and declines anything else (ShortcutsInBytes counts the ones it answered).
//
// Decoded JSON is decoded, encoded and compared with internal/jsonvalue, encoding/json's and
// sigs.k8s.io/json's bytes and values without their reflection: the /convert handler's hot path.
package conversion

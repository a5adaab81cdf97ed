package conversion

import (
	"fmt"

	taskv1 "example.com/task-operator/apis/v1"
)

// Convert converts a Task, as decoded JSON of any served version, to version. It never fails for
// a Task the v1 schema admits; a spoke object whose preserved annotation is damaged, or whose
// fields have the wrong types, is an error that names the field.
//
// Hub to spoke: the spoke's fields, and the preserved annotation holding the difference between
// the hub and what the spoke says (raw JSON values, so durations keep their spelling and explicit
// zero values stay). Spoke to hub: the spoke's fields, defaults, and the hidden fields from the
// annotation (see restore).
func Convert(obj map[string]any, version string) (map[string]any, error) {
	return convert(obj, nil, version)
}

// convert is Convert with sent, obj's spec and status as sent (decodeTyped), or nil.
func convert(obj map[string]any, sent []byte, version string) (map[string]any, error) {
	from, err := versionOf(obj)
	if err != nil {
		return nil, err
	}
	if from == version {
		return obj, nil
	}
	if from != hubVersion {
		if obj, err = spokes[from].toHub(obj, sent); err != nil {
			return nil, err
		}
		sent = nil // the hub object is not what was sent
	}
	if version == hubVersion {
		return obj, nil
	}
	to, ok := spokes[version]
	if !ok {
		return nil, fmt.Errorf("cannot convert to %s: the served versions are %v", version, ServedVersions())
	}
	return to.fromHub(obj, sent)
}

// fromHub converts a hub object to the spoke; sent is its body as sent, or nil.
func (s spoke) fromHub(obj map[string]any, sent []byte) (map[string]any, error) {
	return s.fromHubDecoding(obj, sent, bodyDecoded)
}

// fromHubInBytes is fromHub by the spoke's template, for a hub object whose body as sent the
// template reads; answered is false when it does not (or there is no template, or no body as
// sent), and the typed path must decide.
func (s spoke) fromHubInBytes(obj map[string]any, sent []byte) (out map[string]any, answered bool, err error) {
	if s.inBytes == nil || sent == nil {
		return nil, false, nil
	}
	spokeBody, ok := s.inBytes(sent)
	if !ok {
		return nil, false, nil
	}
	meta, err := metadataWithout(obj)
	if err != nil {
		return nil, true, err
	}
	s.shortcuts.Add(1)
	s.inBytesTaken.Add(1)
	return assemble(s.version, meta, spokeBody), true, nil
}

// bodyDecoded is the decodeBody of an object whose spec and status are maps already.
func bodyDecoded() error { return nil }

// baselineOf is what preserve diffs a hub body against: pure, what the spoke says read back at
// the hub, with the defaults of taskv1.SetFieldDefaults. It defaults pure in place: pure is made
// for one conversion (toSpoke), shares memory with nothing read after, and is read no more.
func baselineOf(pure *taskv1.Task) *taskv1.Task {
	taskv1.SetFieldDefaults(pure)
	return pure
}

// fromHubDecoding is fromHub of an object whose spec and status maps decodeBody puts in obj, for
// the paths that read them: decoding them is the first thing those paths do, so that their
// errors come first as they would for an object decoded whole. An object that loses nothing
// takes none of those paths: what it was sent as is what its typed form encodes to, so it
// decodes without an error.
func (s spoke) fromHubDecoding(obj map[string]any, sent []byte, decodeBody func() error) (map[string]any, error) {
	spokeBody, pure, err := s.toSpoke(obj, sent, decodeBody)
	if err != nil {
		return nil, err
	}
	baseline := baselineOf(pure)
	if losesNothing(baseline, sent) {
		meta, err := metadataWithout(obj)
		if err != nil {
			return nil, err
		}
		s.shortcuts.Add(1)
		return assemble(s.version, meta, spokeBody), nil
	}
	if err := decodeBody(); err != nil {
		return nil, err
	}
	meta, err := metadataWithout(obj)
	if err != nil {
		return nil, err
	}
	p, err := s.preserve(bodyOf(obj), spokeBody, baseline)
	if err != nil {
		return nil, err
	}
	if len(p.Patch) > 0 {
		value, err := p.encode()
		if err != nil {
			return nil, err
		}
		setAnnotation(meta, PreservedAnnotation, value)
	}
	return assemble(s.version, meta, spokeBody), nil
}

// read maps a hub object to the spoke's body and what that body does not express; sent is its
// body as sent, or nil.
func (s spoke) read(obj map[string]any, sent []byte) (body, *preserved, error) {
	spokeBody, pure, err := s.toSpoke(obj, sent, bodyDecoded)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.preserve(bodyOf(obj), spokeBody, baselineOf(pure))
	return spokeBody, p, err
}

// toSpoke maps a hub object to the spoke's body, and that body back to the hub as the spoke
// says it (pure); sent is the hub's body as sent, or nil. decodeBody puts obj's spec and status
// maps in obj, should the typed object have to be decoded from them (decodeTyped).
func (s spoke) toSpoke(obj map[string]any, sent []byte, decodeBody func() error) (body, *taskv1.Task, error) {
	hub := &taskv1.Task{}
	if !decodeSent(sent, hub) {
		if err := decodeBody(); err != nil {
			return nil, nil, err
		}
		if err := fromBody(bodyOf(obj), hub); err != nil {
			return nil, nil, fmt.Errorf("decode v1 %s: %w", nameOf(obj), err)
		}
	}
	return s.down(hub)
}

// preserve returns what the spoke loses of the hub body raw: the merge patch from the baseline
// (baselineOf, the spoke's defaulted up-conversion) to raw, empty when nothing is lost, with the
// fingerprints that tell later whether the spoke was edited.
//
// The owners' values are read off the baseline: no default sets one (TestOwnersAreNeverDefaulted),
// so they are the pure body's, without encoding that body too.
func (s spoke) preserve(raw, spokeBody body, typedBaseline *taskv1.Task) (*preserved, error) {
	baseline, err := toBody(typedBaseline)
	if err != nil {
		return nil, err
	}
	return &preserved{
		Format:            preservedFormat,
		SpecFingerprint:   fingerprint(spokeBody["spec"]),
		StatusFingerprint: fingerprint(spokeBody["status"]),
		Owners:            s.rules.ownerPrints(baseline),
		Patch:             diff(baseline, raw),
	}, nil
}

// toHub converts a spoke object to the hub; sent is its body as sent, or nil.
func (s spoke) toHub(obj map[string]any, sent []byte) (map[string]any, error) {
	pure, canonical, err := s.up(bodyOf(obj), sent)
	if err != nil {
		return nil, invalidObject(obj, err)
	}
	if err := s.checkExplicitZeros(bodyOf(obj), canonical); err != nil {
		return nil, invalidObject(obj, err)
	}
	meta, err := metadataWithout(obj)
	if err != nil {
		return nil, err
	}
	p, err := preservedOf(obj)
	if err != nil {
		return nil, invalidObject(obj, err)
	}
	var result body
	if p == nil {
		result, err = defaultedBody(pure, taskv1.SetDefaults)
	} else {
		result, err = s.restore(pure, canonical, p)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nameOf(obj), err)
	}
	return assemble(hubVersion, meta, result), nil
}

// invalidObject is err, a refusal of what obj says, naming obj.
func invalidObject(obj map[string]any, err error) error {
	return &InvalidObjectError{fmt.Errorf("%s: %w", nameOf(obj), err)}
}

package conversion

import (
	"fmt"
	"reflect"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	taskv1 "example.com/task-operator/apis/v1"
)

// A spoke is an old version of the Task API: how its objects map to and from the hub, and the
// rules for the hub fields it cannot express (hidden fields) when an object is edited at it.
type spoke struct {
	version string
	// down maps a hub to the spoke's body, and that body back to the hub as the spoke says it
	// (pure: no hidden fields, no defaults).
	down func(hub *taskv1.Task) (spokeBody body, pure *taskv1.Task, err error)
	// up reads a spoke body and maps it to the hub as the spoke says it; canonical is the body
	// re-encoded from its typed form, the form down produces. sent is b's JSON as sent, or nil
	// (decodeTyped).
	up    func(b body, sent []byte) (pure *taskv1.Task, canonical body, err error)
	rules spokeRules
	// inBytes is the spoke's template (inbytes.go), or nil: the spoke's body of a hub body as
	// sent that loses nothing, false where the typed path must decide.
	inBytes func(sent []byte) (body, bool)
	// shortcuts counts the conversions from the hub that losesNothing or the template
	// answered; inBytesTaken those the template did.
	shortcuts, inBytesTaken *atomic.Uint64
}

// spokeRules say which hidden fields survive an edit made at the spoke.
type spokeRules struct {
	// containers are hub objects whose existence the spoke decides: one the spoke removed takes
	// its hidden fields with it (a runner switched from Shell to HTTP drops the shell's env).
	containers []path
	// owners tie hidden fields to a visible value: when the value changes at the spoke, the
	// hidden fields it owns return to their defaults.
	owners []owner
	// defaults are the spoke's schema defaults of the fields that map to a v1 field one to one,
	// by spoke path: what a field an apply at the spoke dropped becomes (removeDropped).
	// TestSpokeDefaultsMatchTheCRD holds them to the CRD.
	defaults map[string]any
}

// owner ties the hidden fields below owns to the visible field value.
type owner struct {
	value path
	owns  path
}

// spokeObject is the typed object of a spoke version.
type spokeObject[T any] interface {
	*T
	client.Object
}

// newSpoke builds the spoke of a version from its typed mapping functions.
func newSpoke[T any, P spokeObject[T]](version string, down func(*taskv1.Task, P), up func(P, *taskv1.Task) error, rules spokeRules) spoke {
	toHub := func(s P) (body, *taskv1.Task, error) {
		b, err := toBody(s)
		if err != nil {
			return nil, nil, fmt.Errorf("encode %s Task: %w", version, err)
		}
		hub := &taskv1.Task{}
		if err := up(s, hub); err != nil {
			return nil, nil, err
		}
		return b, hub, nil
	}
	return spoke{
		version: version,
		down: func(hub *taskv1.Task) (body, *taskv1.Task, error) {
			s := P(new(T))
			down(hub, s)
			return toHub(s)
		},
		up: func(b body, sent []byte) (*taskv1.Task, body, error) {
			s := P(new(T))
			if err := decodeTyped(b, sent, s); err != nil {
				return nil, nil, fmt.Errorf("decode %s Task: %w", version, err)
			}
			clearUnsetTimes(reflect.ValueOf(s))
			canonical, pure, err := toHub(s)
			return pure, canonical, err
		},
		rules:        rules,
		shortcuts:    new(atomic.Uint64),
		inBytesTaken: new(atomic.Uint64),
	}
}

// withTemplate is s converting from the hub by template inBytes where it answers.
func (s spoke) withTemplate(inBytes func(sent []byte) (body, bool)) spoke {
	s.inBytes = inBytes
	return s
}

// LosslessShortcuts is how many objects this process converted from v1 to version (an old
// one) without working out what they lose, since their body as sent showed they lose nothing
// (losesNothing); 0 for any other version.
func LosslessShortcuts(version string) uint64 {
	s, ok := spokes[version]
	if !ok {
		return 0
	}
	return s.shortcuts.Load()
}

// ShortcutsInBytes is how many of LosslessShortcuts(version) the version's template answered,
// reading and writing bytes without a typed object (inbytes.go); 0 for a version without one.
func ShortcutsInBytes(version string) uint64 {
	s, ok := spokes[version]
	if !ok {
		return 0
	}
	return s.inBytesTaken.Load()
}

// spokes are the old versions, by version name.
var spokes = map[string]spoke{}

func init() {
	for _, s := range []spoke{v1alpha1Spoke, v1beta1Spoke} {
		spokes[s.version] = s
	}
}

// clearUnsetTimes sets to nil every *metav1.Time in v (a pointer to a spoke's typed object)
// that Go writes as a time it reads back as unset (settableTime): such a time written at an old
// version is unset there, and nothing of it must reach v1 but its absence (as null, it would
// make the spoke look edited and cost the hidden fields their place).
func clearUnsetTimes(v reflect.Value) {
	timePtr := reflect.TypeFor[*metav1.Time]()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if v.Type() == timePtr {
			if readsAsUnset(v.Interface().(*metav1.Time).Time) && v.CanSet() {
				v.Set(reflect.Zero(timePtr))
			}
			return
		}
		clearUnsetTimes(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				clearUnsetTimes(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			clearUnsetTimes(v.Index(i))
		}
	}
}

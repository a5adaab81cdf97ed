package conversion

import (
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	taskv1 "example.com/task-operator/apis/v1"
)

// v1alpha1's template (see inbytes.go): a hub body that is the defaulted baseline of what
// v1alpha1 says, spelled as the typed path spells it, and the v1alpha1 body it maps to.

// The pieces of the baseline that hold defaults, cut from the typed defaults around a
// placeholder (cutAround), so that they follow apis/v1.
var (
	// retryBefore, retryAfter surround maxRetries in a defaulted retry policy: the backoff.
	retryBefore, retryAfter = cutAround(func(spec *taskv1.TaskSpec) any {
		spec.Retry = &taskv1.RetryPolicy{MaxRetries: placeholderInt}
		return spec.Retry
	}, strconv.Itoa(placeholderInt))
	// httpBefore, httpAfter surround the URL of a defaulted HTTP runner: method and timeout.
	httpBefore, httpAfter = cutAround(func(spec *taskv1.TaskSpec) any {
		spec.Runner.HTTP = &taskv1.HTTPRunner{URL: placeholderText}
		return spec.Runner.HTTP
	}, `"`+placeholderText+`"`)

	// The template's pieces around maxRetries, joined once.
	beforeMaxRetries = `,"retry":` + retryBefore
	afterMaxRetries  = retryAfter + `,"runner":`
)

const (
	placeholderInt  = 123456789
	placeholderText = "@placeholder@"
)

// cutAround defaults a spec that set sets a part of, writes that part as the typed path's
// baseline spells it (jsonLiteral), and returns what comes before and after hole in it.
func cutAround(set func(*taskv1.TaskSpec) any, hole string) (before, after string) {
	task := &taskv1.Task{}
	part := set(&task.Spec)
	taskv1.SetFieldDefaults(task)
	before, after, found := strings.Cut(jsonLiteral(part), hole)
	if !found || strings.Contains(after, hole) {
		panic("conversion: no single " + hole + " in the defaulted " + jsonLiteral(part))
	}
	return before, after
}

// v1alpha1Values are what a v1alpha1 body says, as read from the hub body's bytes: strings as
// sent between their quotes, nil when absent; lossless spells them for the answer.
type v1alpha1Values struct {
	parallelism, maxRetries, attempts int32
	runnerType, script, url           []byte
	phase, lastError, lastJobName     []byte
	transitionTime                    []byte
	// spokeType is the runner type's name at v1alpha1, spelled for the answer (lossless).
	spokeType []byte
}

// v1alpha1InBytes is v1alpha1's template: the v1alpha1 body of a hub body as sent that loses
// nothing at v1alpha1, or false where the typed path must decide.
func v1alpha1InBytes(sent []byte) (body, bool) {
	r := newBodyReader(sent)
	var v v1alpha1Values
	r.literal(`{"spec":{"parallelism":`)
	v.parallelism = r.int32()
	r.literal(beforeMaxRetries)
	v.maxRetries = r.int32()
	r.literal(afterMaxRetries)
	readV1alpha1Runner(r, &v)
	r.literal("}")
	if r.optional(`,"status":`) {
		readV1alpha1Status(r, &v)
	}
	r.literal("}")
	if !r.end() || !v.lossless() {
		return nil, false
	}
	return v.body(), true
}

// readV1alpha1Runner reads the runner of the baseline: the HTTP runner's defaults around its
// URL, the shell's script, the type.
func readV1alpha1Runner(r *bodyReader, v *v1alpha1Values) {
	r.literal("{")
	members := 0
	if r.member(&members, "http") {
		r.literal(httpBefore)
		v.url = r.text()
		r.literal(httpAfter)
	}
	if r.member(&members, "shell") {
		r.literal(`{"script":`)
		v.script = r.text()
		r.literal("}")
	}
	if !r.member(&members, "type") {
		r.ok = false
	}
	v.runnerType = r.text()
	r.literal("}")
}

// readV1alpha1Status reads a status of the fields v1alpha1 expresses, at least one of them
// (the typed path drops an empty status).
func readV1alpha1Status(r *bodyReader, v *v1alpha1Values) {
	r.literal("{")
	members := 0
	if r.member(&members, "attempts") {
		if v.attempts = r.int32(); v.attempts < 1 {
			r.ok = false
		}
	}
	if r.member(&members, "lastError") {
		v.lastError = r.text()
	}
	if r.member(&members, "lastJob") {
		r.literal(`{"name":`)
		v.lastJobName = r.text()
		r.literal("}")
	}
	if r.member(&members, "lastPhaseTransitionTime") {
		v.transitionTime = r.text()
	}
	if r.member(&members, "phase") {
		v.phase = r.text()
	}
	r.literal("}")
	if members == 0 {
		r.ok = false
	}
}

// lossless reports whether v1alpha1's values, read back at v1 and defaulted, are the body they
// were read from, as far as the template's bytes do not already say so: v1alpha1 omits empty
// strings and a zero replicas (which v1 defaults to 1), knows two runner types, counts retries
// where v1 counts attempts (a last Job means one), and writes times at one spelling; and every
// string is spelled as encoding/json spells it. Then it spells each string for the answer.
func (v *v1alpha1Values) lossless() bool {
	if v.parallelism == 0 || !v.mapType() {
		return false
	}
	switch {
	case v.attempts == 0 && v.lastJobName != nil, v.attempts == 1 && v.lastJobName == nil:
		return false
	case v.transitionTime != nil && !canonicalTime(v.transitionTime):
		return false
	}
	for _, s := range []*[]byte{&v.script, &v.url, &v.phase, &v.lastError, &v.lastJobName, &v.transitionTime} {
		if *s == nil {
			continue
		}
		answer, ok := answerText(*s)
		if !ok || len(*s) == 0 {
			return false
		}
		*s = answer
	}
	return true
}

// v1alpha1TypeNames are the answer's spelling of each runner type v1alpha1Types maps, by its
// name at v1.
var v1alpha1TypeNames = func() map[string][]byte {
	names := map[string][]byte{}
	for _, t := range v1alpha1Types {
		names[string(t.hub)] = []byte(jsonLiteral(t.spoke))
	}
	return names
}()

// mapType sets spokeType to v1alpha1's name of the runner type: v1alpha1Types maps the types
// both know, and any other passes as it is, but for one spelled as a v1alpha1 name (v1's
// "shell" would come back as "Shell"), for which it reports false.
func (v *v1alpha1Values) mapType() bool {
	if name, ok := v1alpha1TypeNames[string(v.runnerType)]; ok {
		v.spokeType = name
		return true
	}
	for _, t := range v1alpha1Types {
		if string(v.runnerType) == string(t.spoke) {
			return false
		}
	}
	answer, ok := answerText(v.runnerType)
	v.spokeType = answer
	return ok
}

// canonicalTime reports whether text is a time metav1.Time writes back as it is (RFC 3339 in
// UTC, whole seconds) and not the zero time, which it writes as null.
func canonicalTime(text []byte) bool {
	quoted := quote(text)
	var t metav1.Time
	if err := t.UnmarshalJSON(quoted); err != nil || t.IsZero() {
		return false
	}
	again, err := t.MarshalJSON()
	return err == nil && string(again) == string(quoted)
}

// body writes v1alpha1's body: its members sorted, empty strings and a zero retry count left
// out (omitempty), an empty status dropped.
func (v *v1alpha1Values) body() body {
	spec := bodyWriter{buf: make([]byte, 0, 64+len(v.script)+len(v.url))}
	spec.int32("maxRetry", v.maxRetries)
	spec.int32("replicas", v.parallelism)
	optionalText(&spec, "shell", v.script)
	spec.text("type", v.spokeType)
	optionalText(&spec, "url", v.url)
	b := body{"spec": spec.object()}

	status := bodyWriter{}
	optionalText(&status, "lastError", v.lastError)
	optionalText(&status, "lastJobName", v.lastJobName)
	optionalText(&status, "lastUpdateTime", v.transitionTime)
	if v.attempts > 1 {
		status.int32("retryCount", v.attempts-1)
	}
	optionalText(&status, "state", v.phase)
	if raw := status.object(); raw != nil {
		b["status"] = raw
	}
	return b
}

// optionalText writes a string member unless it is absent.
func optionalText(w *bodyWriter, key string, value []byte) {
	if value != nil {
		w.text(key, value)
	}
}

package webhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/jsonvalue"
)

// maxObjectBytes bounds one object of a ConversionReview: etcd refuses values over 1.5 MiB, so a
// larger one is not a Task the apiserver could have stored. It bounds every other value of the
// review too, as it is read: the handler never buffers more than about one such value.
const maxObjectBytes = 4 << 20

// maxPendingBytes bounds the objects a review may send before its uid and desired version (the
// apiserver sends those first): they must be kept until both are known.
const maxPendingBytes = 2 * maxObjectBytes

// pendingObjectCost is what keeping an object costs beyond its bytes (its map of fields, or its
// error): counted against maxPendingBytes, so that millions of one-byte objects cannot grow the
// heap a hundredfold past the bytes they were sent in.
const pendingObjectCost = 1 << 10

// Buffers are reused across requests: at 64 KiB each, allocating two per call cost more than
// converting the object most calls carry.
var (
	reviewReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}
	reviewWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}
)

// NewConvertHandler serves /convert: the CRD's conversion webhook (conversion.Convert). It streams the review: objects are
// read, converted and written one at a time, so a LIST page of any size costs the memory of one
// object, not of the page. Every answer, a failed one included, is a ConversionReview with HTTP
// 200, so that the apiserver reports its message rather than a bare status code. A converted
// object carries only the metadata the apiserver reads from it (answeredMetadata).
func NewConvertHandler() http.Handler {
	return convertHandler{}
}

type convertHandler struct{}

// reviewHeader is what is known of a ConversionReview request before its objects.
type reviewHeader struct {
	apiVersion, kind string
	uid              string
	desired          string
	version          string // desired's version, "" if not a served one of Task
	// notAConversionReview: its kind or apiVersion says it is some other review. Objects read
	// before that was (keys come in any order) may have been streamed; the Failure voids them.
	notAConversionReview bool
}

func (convertHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	buf := reviewWriters.Get().(*bufio.Writer)
	buf.Reset(w)
	in := reviewReaders.Get().(*bufio.Reader)
	in.Reset(r.Body)
	defer func() {
		in.Reset(nil)
		reviewReaders.Put(in)
		buf.Reset(nil)
		reviewWriters.Put(buf)
	}()
	out := newReviewResponder(w, buf)
	rv, err := serveReview(in, out)
	to := metricVersion(rv.version)
	result := "success"
	switch {
	case err != nil && (rv.uid == "" || rv.notAConversionReview):
		result = "malformed"
	case conversion.IsInvalidObject(err):
		result = "invalid" // a client's write the converter refuses: not an outage
	case err != nil:
		result = "failure"
	}
	out.finish(rv, err)
	convertRequestsTotal.WithLabelValues(to, result).Inc()
	convertRequestDuration.WithLabelValues(to).Observe(time.Since(start).Seconds())
}

// serveReview reads the review from body and streams the converted objects to out.
func serveReview(body *bufio.Reader, out *reviewResponder) (reviewHeader, error) {
	var rv reviewHeader
	dec := newReviewDecoder(body)
	if err := dec.open('{'); err != nil {
		return rv, fmt.Errorf("malformed ConversionReview: %w", err)
	}
	var pending []sentObject // objects that came before the uid and desired version
	seenRequest := false
	for dec.more() {
		key, err := dec.key()
		if err != nil {
			return rv, fmt.Errorf("malformed ConversionReview: %w", err)
		}
		key = asDecoded(key, "apiVersion", "kind", "request")
		if key == "request" && seenRequest {
			return rv, errors.New("malformed ConversionReview: request given twice (only the last one would be read, and the first one's objects are converted already)")
		}
		switch key {
		case "apiVersion":
			err = decodeReviewField(dec, &rv.apiVersion, isReviewAPIVersion)
			rv.notAConversionReview = err != nil
		case "kind":
			err = decodeReviewField(dec, &rv.kind, func(kind string) bool { return kind == reviewKind })
			rv.notAConversionReview = err != nil
		case "request":
			seenRequest = true
			var more []sentObject
			more, err = serveRequest(dec, &rv, out, pendingSize(pending))
			pending = append(pending, more...)
		default:
			err = dec.skip()
		}
		if err != nil {
			if key != "request" {
				err = fmt.Errorf("malformed ConversionReview: %s: %w", key, err)
			}
			return rv, err
		}
	}
	if err := dec.close('}'); err != nil {
		return rv, fmt.Errorf("malformed ConversionReview: %w", err)
	}
	if err := dec.end(); err != nil {
		return rv, fmt.Errorf("malformed ConversionReview: %w", err)
	}
	switch {
	case rv.uid == "" && rv.desired == "":
		return rv, errors.New("malformed ConversionReview: no request")
	case rv.uid == "":
		return rv, errors.New("malformed ConversionReview: request.uid is missing")
	}
	for _, o := range pending {
		if err := out.convert(rv, o); err != nil {
			return rv, err
		}
	}
	return rv, nil
}

// reviewKind is the kind of every review the handler answers.
const reviewKind = "ConversionReview"

// isReviewAPIVersion says apiVersion is one a CRD may ask its webhook to speak
// (conversionReviewVersions); both have the same shape.
func isReviewAPIVersion(apiVersion string) bool {
	return apiVersion == apix.SchemeGroupVersion.String() || apiVersion == "apiextensions.k8s.io/v1beta1"
}

// decodeReviewField reads the review's apiVersion or kind into field when valid says it may be
// answered: a review that names another kind or version is not one to answer as a
// ConversionReview, nor to echo. An absent one is taken as apiextensions.k8s.io/v1's.
func decodeReviewField(dec *reviewDecoder, field *string, valid func(string) bool) error {
	var value string
	if err := dec.decodeString(&value); err != nil {
		return err
	}
	if !valid(value) {
		return fmt.Errorf("%q is not a %s this webhook answers", value, reviewKind)
	}
	*field = value
	return nil
}

// serveRequest reads the request object; objects are converted as they arrive once the uid
// and the desired version are known (the apiserver sends them first), and kept until then
// otherwise.
func serveRequest(dec *reviewDecoder, rv *reviewHeader, out *reviewResponder, pendingBefore int) ([]sentObject, error) {
	if err := dec.open('{'); err != nil {
		return nil, fmt.Errorf("malformed ConversionReview request: %w", err)
	}
	var pending []sentObject
	seenObjects := false
	for dec.more() {
		key, err := dec.key()
		if err != nil {
			return nil, fmt.Errorf("malformed ConversionReview request: %w", err)
		}
		key = asDecoded(key, "uid", "desiredAPIVersion", "objects")
		switch key {
		case "uid":
			err = decodeOnce(dec, key, &rv.uid, out.started)
		case "desiredAPIVersion":
			if err = decodeOnce(dec, key, &rv.desired, out.started); err == nil {
				rv.version = conversion.ServedVersionOf(rv.desired)
			}
		case "objects":
			if seenObjects {
				return nil, errors.New("malformed ConversionReview request: objects given twice (only the last list would be read, and the first one's objects are converted already)")
			}
			seenObjects = true
			var more []sentObject
			more, err = serveObjects(dec, rv, out, pendingBefore+pendingSize(pending))
			pending = append(pending, more...)
		default:
			err = dec.skip()
		}
		if err != nil {
			if key != "objects" {
				err = fmt.Errorf("malformed ConversionReview request: %s: %w", key, err)
			}
			return nil, err
		}
	}
	if err := dec.close('}'); err != nil {
		return nil, fmt.Errorf("malformed ConversionReview request: %w", err)
	}
	return pending, nil
}

// asDecoded is the review key encoding/json (which the apiserver and any other reader of the
// review decode with) reads key as: one of known, matched exactly or else without regard to
// case, or key itself.
func asDecoded(key string, known ...string) string {
	for _, k := range known {
		if key == k {
			return k
		}
	}
	for _, k := range known {
		if strings.EqualFold(key, k) {
			return k
		}
	}
	return key
}

// decodeOnce reads a request's uid or desiredAPIVersion into field. A second one replaces the
// first, as encoding/json reads it, until objects have been answered with the first: a
// different one then is refused, the answer being already on its way.
func decodeOnce(dec *reviewDecoder, key string, field *string, answered bool) error {
	was := *field
	if err := dec.decodeString(field); err != nil {
		return err
	}
	if answered && *field != was {
		return fmt.Errorf("%s %q given after objects were converted with %q", key, *field, was)
	}
	return nil
}

// pendingSize is what the objects kept until the uid and desired version are known cost.
func pendingSize(pending []sentObject) int {
	n := 0
	for _, o := range pending {
		n += o.size + pendingObjectCost
	}
	return n
}

// serveObjects converts the objects as they arrive, or returns them when they came before the
// uid or the desired version.
func serveObjects(dec *reviewDecoder, rv *reviewHeader, out *reviewResponder, pendingBefore int) ([]sentObject, error) {
	if err := dec.open('['); err != nil {
		return nil, fmt.Errorf("malformed ConversionReview objects: %w", err)
	}
	var pending []sentObject
	pendingBytes := pendingBefore
	for i := 0; dec.more(); i++ {
		o, err := readObject(dec)
		if err != nil {
			return nil, fmt.Errorf("malformed ConversionReview object %d: %w", i, err)
		}
		if o.size > maxObjectBytes {
			return nil, fmt.Errorf("object %d is %d bytes, over the %d a Task can have", i, o.size, maxObjectBytes)
		}
		if rv.uid == "" || rv.desired == "" {
			if pendingBytes += o.size + pendingObjectCost; pendingBytes > maxPendingBytes {
				return nil, fmt.Errorf("malformed ConversionReview: more than %d bytes of objects before the uid and desiredAPIVersion", maxPendingBytes)
			}
			pending = append(pending, o)
			continue
		}
		if err := out.convert(*rv, o); err != nil {
			return nil, err
		}
	}
	if err := dec.close(']'); err != nil {
		return nil, fmt.Errorf("malformed ConversionReview objects: %w", err)
	}
	return pending, nil
}

// reviewResponder writes the response review as objects are converted: convertedObjects first, the
// result last, so that a failure after some objects were written is still reported as a failed
// review (the apiserver reads the result before the objects).
type reviewResponder struct {
	w       http.ResponseWriter
	buf     *bufio.Writer
	started bool
	count   int
}

func newReviewResponder(w http.ResponseWriter, buf *bufio.Writer) *reviewResponder {
	return &reviewResponder{w: w, buf: buf}
}

// writeHead writes, once, the HTTP header and the response up to its first converted object.
func (o *reviewResponder) writeHead(rv reviewHeader) {
	if o.started {
		return
	}
	o.started = true
	o.w.Header().Set("Content-Type", "application/json")
	o.w.WriteHeader(http.StatusOK)
	fmt.Fprintf(o.buf, `{"apiVersion":%s,"kind":"ConversionReview","response":{"uid":%s,"convertedObjects":[`,
		jsonString(reviewAPIVersion(rv)), jsonString(rv.uid))
}

// convert converts one object of the review and writes it.
func (o *reviewResponder) convert(rv reviewHeader, sent sentObject) error {
	began := time.Now()
	var decoded conversion.Decoded
	err := sent.err
	if err == nil {
		decoded, err = conversion.DecodeFields(sent.fields)
	}
	from := "unknown"
	if err == nil {
		from = metricVersion(conversion.ServedVersionOf(decoded.APIVersion()))
	}
	to := metricVersion(rv.version)
	var obj map[string]any
	if err == nil {
		if rv.version == "" {
			err = fmt.Errorf("desiredAPIVersion %q is not a served version of Task", rv.desired)
		} else {
			obj, err = decoded.Convert(rv.version)
		}
	}
	convertObjectDuration.WithLabelValues(from, to).Observe(time.Since(began).Seconds())
	if err != nil {
		result := "failure"
		if conversion.IsInvalidObject(err) {
			result = "invalid"
		}
		convertObjectsTotal.WithLabelValues(from, to, result).Inc()
		return err
	}
	convertObjectsTotal.WithLabelValues(from, to, "success").Inc()
	keepWhatTheApiserverReads(obj)
	o.writeHead(rv)
	if o.count > 0 {
		_ = o.buf.WriteByte(',')
	}
	o.count++
	// Encoded as a json.Encoder without HTML escaping writes it, newline included, but
	// without its reflection (jsonvalue), into the writer's free space when the object fits.
	out, err := jsonvalue.Append(o.buf.AvailableBuffer(), obj, false)
	if err != nil {
		return err
	}
	_, err = o.buf.Write(append(out, '\n'))
	return err
}

// answeredMetadata are the metadata fields the apiserver reads from a converted object. It
// rejects an answer whose name, namespace or uid differ from the object it sent, takes labels
// and annotations from the answer (an absent one is removed), and restores every other field
// from the object it sent (restoreObjectMeta in k8s.io/apiextensions-apiserver's webhook
// converter; "all other changes are ignored" in the CRD versioning documentation).
var answeredMetadata = map[string]bool{"name": true, "namespace": true, "uid": true, "labels": true, "annotations": true}

// keepWhatTheApiserverReads drops from obj's metadata what the apiserver would discard:
// managedFields first, often the larger half of a Task, which the answer would otherwise carry
// back to be decoded into maps and thrown away, on every call.
func keepWhatTheApiserverReads(obj map[string]any) {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	for key := range meta {
		if !answeredMetadata[key] {
			delete(meta, key)
		}
	}
}

// finish closes the response with the result: success, or the error that stopped it.
func (o *reviewResponder) finish(rv reviewHeader, err error) {
	o.writeHead(rv)
	result := `{"status":"Success","metadata":{}}`
	if err != nil {
		result = failureResult(err)
	}
	fmt.Fprintf(o.buf, `],"result":%s}}`, result)
	_ = o.buf.Flush()
}

// failureResult is the result of a failed review as JSON: a BadRequest Status with err's message.
func failureResult(err error) string {
	status := map[string]any{"status": "Failure", "message": err.Error(), "reason": "BadRequest", "code": http.StatusBadRequest, "metadata": map[string]any{}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(status)
	return string(bytes.TrimSpace(b.Bytes()))
}

// reviewAPIVersion is the apiVersion to answer with: the request's, else apiextensions.k8s.io/v1.
func reviewAPIVersion(rv reviewHeader) string {
	if rv.apiVersion != "" {
		return rv.apiVersion
	}
	return apix.SchemeGroupVersion.String()
}

// jsonString is s as a JSON string literal, quoted and escaped.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

package conversion

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// maxObjectBytes bounds one object of a ConversionReview: etcd refuses values over 1.5 MiB, so a
// larger one is not a Task the apiserver could have stored. It bounds every other value of the
// review too, as it is read: the handler never buffers more than about one such value.
const maxObjectBytes = 4 << 20

// maxPendingBytes bounds the objects a review may send before its uid and desired version (the
// apiserver sends those first): they must be kept until both are known.
const maxPendingBytes = 2 * maxObjectBytes

// errValueTooLarge is what reading a value of more than maxObjectBytes returns.
var errValueTooLarge = fmt.Errorf("a JSON value of more than %d bytes", maxObjectBytes)

// budget is a reader that lets one value of the review be read at a time: reset before each,
// it fails once maxObjectBytes (and a read's slack) have been read since, so that json.Decoder,
// which buffers a whole value before it returns it, cannot be made to buffer more.
type budget struct {
	r    io.Reader
	left int
}

func (b *budget) reset() { b.left = maxObjectBytes + 64<<10 }

func (b *budget) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errValueTooLarge
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= n
	return n, err
}

// reviewDecoder reads a review a value at a time, each within the budget.
type reviewDecoder struct {
	dec    *json.Decoder
	budget *budget
}

// Buffers are reused across requests: at 64 KiB each, allocating two per call cost more than
// converting the object most calls carry.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}
)

func newReviewDecoder(r *bufio.Reader) reviewDecoder {
	b := &budget{r: r}
	b.reset()
	return reviewDecoder{dec: json.NewDecoder(b), budget: b}
}

// value decodes the next value into v.
func (d reviewDecoder) value(v any) error {
	d.budget.reset()
	return d.dec.Decode(v)
}

func (d reviewDecoder) token() (json.Token, error) {
	d.budget.reset()
	return d.dec.Token()
}

func (d reviewDecoder) more() bool {
	d.budget.reset()
	return d.dec.More()
}

// NewHandler serves /convert: the CRD's conversion webhook. It streams the review: objects are
// read, converted and written one at a time, so a LIST page of any size costs the memory of one
// object, not of the page. Every answer, a failed one included, is a ConversionReview with HTTP
// 200, so that the apiserver reports its message rather than a bare status code.
func NewHandler() http.Handler {
	return handler{}
}

type handler struct{}

// review is what is known of a ConversionReview request before its objects.
type review struct {
	apiVersion, kind string
	uid              string
	desired          string
	version          string // desired's version, "" if not a served one of Task
}

func (handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	buf := writers.Get().(*bufio.Writer)
	buf.Reset(w)
	in := readers.Get().(*bufio.Reader)
	in.Reset(r.Body)
	defer func() {
		in.Reset(nil)
		readers.Put(in)
		buf.Reset(nil)
		writers.Put(buf)
	}()
	out := newResponder(w, buf)
	rv, err := serveReview(in, out)
	to := metricVersion(rv.version)
	result := "success"
	switch {
	case err != nil && rv.uid == "":
		result = "malformed"
	case err != nil:
		result = "failure"
	}
	out.finish(rv, err)
	requestsTotal.WithLabelValues(to, result).Inc()
	requestDuration.WithLabelValues(to).Observe(time.Since(start).Seconds())
}

// serveReview reads the review from body and streams the converted objects to out.
func serveReview(body *bufio.Reader, out *responder) (review, error) {
	var rv review
	dec := newReviewDecoder(body)
	if err := expectDelim(dec, '{'); err != nil {
		return rv, fmt.Errorf("malformed ConversionReview: %w", err)
	}
	var pending []json.RawMessage // objects that came before the uid and desired version
	for dec.more() {
		key, err := nextKey(dec)
		if err != nil {
			return rv, fmt.Errorf("malformed ConversionReview: %w", err)
		}
		switch key {
		case "apiVersion":
			err = dec.value(&rv.apiVersion)
		case "kind":
			err = dec.value(&rv.kind)
		case "request":
			var more []json.RawMessage
			more, err = serveRequest(dec, &rv, out, pendingSize(pending))
			pending = append(pending, more...)
		default:
			var skip json.RawMessage
			err = dec.value(&skip)
		}
		if err != nil {
			if key != "request" {
				err = fmt.Errorf("malformed ConversionReview: %s: %w", key, err)
			}
			return rv, err
		}
	}
	if rv.uid == "" && rv.desired == "" {
		return rv, errors.New("malformed ConversionReview: no request")
	}
	for _, raw := range pending {
		if err := out.convert(rv, raw); err != nil {
			return rv, err
		}
	}
	return rv, nil
}

// serveRequest reads the request object; objects are converted as they arrive once the uid
// and the desired version are known (the apiserver sends them first), and kept until then
// otherwise.
func serveRequest(dec reviewDecoder, rv *review, out *responder, pendingBefore int) ([]json.RawMessage, error) {
	if err := expectDelim(dec, '{'); err != nil {
		return nil, fmt.Errorf("malformed ConversionReview request: %w", err)
	}
	var pending []json.RawMessage
	for dec.more() {
		key, err := nextKey(dec)
		if err != nil {
			return nil, fmt.Errorf("malformed ConversionReview request: %w", err)
		}
		switch key {
		case "uid":
			err = dec.value(&rv.uid)
		case "desiredAPIVersion":
			if err = dec.value(&rv.desired); err == nil {
				rv.version = servedVersionOf(rv.desired)
			}
		case "objects":
			var more []json.RawMessage
			more, err = serveObjects(dec, rv, out, pendingBefore+pendingSize(pending))
			pending = append(pending, more...)
		default:
			var skip json.RawMessage
			err = dec.value(&skip)
		}
		if err != nil {
			if key != "objects" {
				err = fmt.Errorf("malformed ConversionReview request: %s: %w", key, err)
			}
			return nil, err
		}
	}
	_, err := dec.token() // '}'
	return pending, err
}

func pendingSize(pending []json.RawMessage) int {
	n := 0
	for _, raw := range pending {
		n += len(raw)
	}
	return n
}

// serveObjects converts the objects as they arrive, or returns them when they came before the
// uid or the desired version.
func serveObjects(dec reviewDecoder, rv *review, out *responder, pendingBefore int) ([]json.RawMessage, error) {
	if err := expectDelim(dec, '['); err != nil {
		return nil, fmt.Errorf("malformed ConversionReview objects: %w", err)
	}
	var pending []json.RawMessage
	pendingBytes := pendingBefore
	for i := 0; dec.more(); i++ {
		var raw json.RawMessage
		if err := dec.value(&raw); err != nil {
			return nil, fmt.Errorf("malformed ConversionReview object %d: %w", i, err)
		}
		if len(raw) > maxObjectBytes {
			return nil, fmt.Errorf("object %d is %d bytes, over the %d a Task can have", i, len(raw), maxObjectBytes)
		}
		if rv.uid == "" || rv.desired == "" {
			if pendingBytes += len(raw); pendingBytes > maxPendingBytes {
				return nil, fmt.Errorf("malformed ConversionReview: more than %d bytes of objects before the uid and desiredAPIVersion", maxPendingBytes)
			}
			pending = append(pending, raw)
			continue
		}
		if err := out.convert(*rv, raw); err != nil {
			return nil, err
		}
	}
	_, err := dec.token() // ']'
	return pending, err
}

// responder writes the response review as objects are converted: convertedObjects first, the
// result last, so that a failure after some objects were written is still reported as a failed
// review (the apiserver reads the result before the objects).
type responder struct {
	w       http.ResponseWriter
	buf     *bufio.Writer
	enc     *json.Encoder
	started bool
	count   int
}

func newResponder(w http.ResponseWriter, buf *bufio.Writer) *responder {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return &responder{w: w, buf: buf, enc: enc}
}

func (o *responder) start(rv review) {
	if o.started {
		return
	}
	o.started = true
	o.w.Header().Set("Content-Type", "application/json")
	o.w.WriteHeader(http.StatusOK)
	fmt.Fprintf(o.buf, `{"apiVersion":%s,"kind":"ConversionReview","response":{"uid":%s,"convertedObjects":[`,
		quote(reviewAPIVersion(rv)), quote(rv.uid))
}

// convert converts one object of the review and writes it.
func (o *responder) convert(rv review, raw json.RawMessage) error {
	began := time.Now()
	obj, err := decodeForConversion(raw)
	from := "unknown"
	if err == nil {
		from = metricVersion(versionOfObject(obj))
	}
	to := metricVersion(rv.version)
	if err == nil {
		if rv.version == "" {
			err = fmt.Errorf("desiredAPIVersion %q is not a served version of Task", rv.desired)
		} else {
			obj, err = Convert(obj, rv.version)
		}
	}
	objectDuration.WithLabelValues(from, to).Observe(time.Since(began).Seconds())
	if err != nil {
		objectsTotal.WithLabelValues(from, to, "failure").Inc()
		return err
	}
	objectsTotal.WithLabelValues(from, to, "success").Inc()
	o.start(rv)
	if o.count > 0 {
		_ = o.buf.WriteByte(',')
	}
	o.count++
	return o.enc.Encode(obj)
}

// finish closes the response with the result: success, or the error that stopped it.
func (o *responder) finish(rv review, err error) {
	o.start(rv)
	result := `{"status":"Success","metadata":{}}`
	if err != nil {
		result = failure(err)
	}
	fmt.Fprintf(o.buf, `],"result":%s}}`, result)
	_ = o.buf.Flush()
}

func failure(err error) string {
	status := map[string]any{"status": "Failure", "message": err.Error(), "reason": "BadRequest", "code": http.StatusBadRequest, "metadata": map[string]any{}}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(status)
	return string(bytes.TrimSpace(b.Bytes()))
}

func reviewAPIVersion(rv review) string {
	if rv.apiVersion != "" {
		return rv.apiVersion
	}
	return apix.SchemeGroupVersion.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func expectDelim(dec reviewDecoder, want json.Delim) error {
	tok, err := dec.token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, found %v", want, tok)
	}
	return nil
}

func nextKey(dec reviewDecoder) (string, error) {
	tok, err := dec.token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("want an object key, found %v", tok)
	}
	return key, nil
}

// servedVersionOf returns the version of apiVersion if it is a served version of Task, else "".
func servedVersionOf(apiVersion string) string {
	for _, v := range servedVersions() {
		if apiVersion == taskGroupPrefix+v {
			return v
		}
	}
	return ""
}

func versionOfObject(obj map[string]any) string {
	apiVersion, _ := obj["apiVersion"].(string)
	return servedVersionOf(apiVersion)
}

// metricVersion is a version as a metric label: only served versions, so that a request cannot
// mint label values.
func metricVersion(version string) string {
	if version == "" {
		return "unknown"
	}
	return version
}

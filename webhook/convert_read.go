package webhook

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Reading a ConversionReview a value at a time, within a budget per value.

// errValueTooLarge is what reading a value of more than maxObjectBytes returns.
var errValueTooLarge = fmt.Errorf("a JSON value of more than %d bytes", maxObjectBytes)

// valueBudget is a reader that lets one value of the review be read at a time: reset before each,
// it fails once maxObjectBytes (and a read's slack) have been read since, so that json.Decoder,
// which buffers a whole value before it returns it, cannot be made to buffer more.
type valueBudget struct {
	r    io.Reader
	left int
}

func (b *valueBudget) reset() { b.left = maxObjectBytes + 64<<10 }

func (b *valueBudget) Read(p []byte) (int, error) {
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
	dec         *json.Decoder
	valueBudget *valueBudget
}

func newReviewDecoder(r *bufio.Reader) reviewDecoder {
	b := &valueBudget{r: r}
	b.reset()
	return reviewDecoder{dec: json.NewDecoder(b), valueBudget: b}
}

// decode decodes the next value into v.
func (d reviewDecoder) decode(v any) error {
	d.valueBudget.reset()
	return d.dec.Decode(v)
}

func (d reviewDecoder) token() (json.Token, error) {
	d.valueBudget.reset()
	return d.dec.Token()
}

func (d reviewDecoder) more() bool {
	d.valueBudget.reset()
	return d.dec.More()
}

// A sentObject is one object of the review as read: its top-level fields, or the error of one
// that is no JSON object (which fails its conversion, not the review's reading), and its size.
type sentObject struct {
	fields map[string]json.RawMessage
	err    error
	size   int
}

// readObject reads the next object of the review, split into its top-level fields as it is
// read (conversion.DecodeFields). size counts the bytes read for it, the separator before it
// included.
func readObject(dec reviewDecoder) (sentObject, error) {
	start := dec.dec.InputOffset()
	var o sentObject
	err := dec.decode(&o.fields)
	if typeErr := (*json.UnmarshalTypeError)(nil); errors.As(err, &typeErr) {
		// The decoder read the value whole: the review can be read on.
		o.err, err = err, nil
	}
	o.size = int(dec.dec.InputOffset() - start)
	return o, err
}

// expectDelim reads the next token and fails unless it is the delimiter want.
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

// nextKey reads the next token as an object key.
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

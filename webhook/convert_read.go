package webhook

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"example.com/task-operator/internal/jsonvalue"
)

// Reading a ConversionReview a value at a time, within a budget per value.
//
// The review is read by hand rather than by json.Decoder: the decoder runs its state machine
// over every byte of an object twice (to find its end, then to hand it over raw), which was a
// fifth of a call. Here a value's end is found by a plain pass that only tracks strings and
// nesting, and the value is then checked by jsonvalue's parser as it is split or decoded.

// errValueTooLarge is what reading a value of more than maxObjectBytes returns.
var errValueTooLarge = fmt.Errorf("a JSON value of more than %d bytes", maxObjectBytes)

// valueLimit is the most bytes one value may have as it is read: an object over maxObjectBytes
// is refused once read whole (naming its size), anything past the slack as it streams in.
const valueLimit = maxObjectBytes + 64<<10

// reviewDecoder reads a review's tokens and values from r. It is not a general JSON reader: it
// reads the shape serveReview walks (objects of keys and values, one array of objects).
type reviewDecoder struct {
	r      *bufio.Reader
	offset int64 // bytes consumed
	// first is, per open object or array, whether no element has been read in it yet.
	first []bool
	// err is why more last reported false other than at a closing delimiter: close reports it.
	err error
}

func newReviewDecoder(r *bufio.Reader) *reviewDecoder {
	return &reviewDecoder{r: r}
}

// peek returns the next byte that is not white space, without consuming it.
func (d *reviewDecoder) peek() (byte, error) {
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			return 0, unexpectedEOF(err)
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			d.offset++
			continue
		}
		return c, d.r.UnreadByte()
	}
}

// expect consumes the next byte that is not white space, which must be want.
func (d *reviewDecoder) expect(want byte) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("invalid character %q at offset %d, want %q", c, d.offset, want)
	}
	_, _ = d.r.ReadByte()
	d.offset++
	return nil
}

// open reads the opening delimiter of an object or array.
func (d *reviewDecoder) open(delim byte) error {
	if err := d.expect(delim); err != nil {
		return err
	}
	d.first = append(d.first, true)
	return nil
}

// close reads the closing delimiter of the innermost open object or array, or reports why
// more stopped before it.
func (d *reviewDecoder) close(delim byte) error {
	if d.err != nil {
		return d.err
	}
	if err := d.expect(delim); err != nil {
		return err
	}
	d.first = d.first[:len(d.first)-1]
	return nil
}

// end checks that nothing but white space follows the review.
func (d *reviewDecoder) end() error {
	c, err := d.peek()
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("invalid character %q at offset %d after the review", c, d.offset)
}

// more reports whether the innermost open object or array has another element, and consumes
// the comma before it. On an error it reports false; the close that follows reports the error.
func (d *reviewDecoder) more() bool {
	c, err := d.peek()
	switch {
	case err != nil:
		d.err = err
		return false
	case c == '}' || c == ']' || len(d.first) == 0:
		return false
	}
	top := len(d.first) - 1
	if d.first[top] {
		d.first[top] = false
		return true
	}
	if err := d.expect(','); err != nil {
		d.err = err
		return false
	}
	return true
}

// key reads an object's key, a string, and the colon after it.
func (d *reviewDecoder) key() (string, error) {
	c, err := d.peek()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", fmt.Errorf("invalid character %q at offset %d, want an object key", c, d.offset)
	}
	var k string
	if err := d.decodeString(&k); err != nil {
		return "", err
	}
	return k, d.expect(':')
}

// decodeString reads a string value into s as json.Unmarshal does. A review has a dozen keys
// and strings: unquoted without reflection (jsonvalue.Decode), they cost a twentieth of a call
// less; anything but a string (null leaves s alone; a number is an error) is encoding/json's.
func (d *reviewDecoder) decodeString(s *string) error {
	raw, err := d.value()
	if err != nil {
		return err
	}
	if v, err := jsonvalue.Decode(raw); err == nil {
		if str, ok := v.(string); ok {
			*s = str
			return nil
		}
	}
	return json.Unmarshal(raw, s)
}

// skip reads a value and checks that it is JSON.
func (d *reviewDecoder) skip() error {
	raw, err := d.value()
	if err != nil {
		return err
	}
	if json.Valid(raw) {
		return nil
	}
	var v any
	return json.Unmarshal(raw, &v) // its syntax error
}

// value reads the next value's bytes: a string to its closing quote, an object or array to
// its closing delimiter, anything else to the byte that ends it. It finds the end only; the
// caller checks the bytes are JSON. More than valueLimit bytes fail as they arrive.
func (d *reviewDecoder) value() ([]byte, error) {
	c, err := d.peek()
	if err != nil {
		return nil, err
	}
	var end valueEnd
	end.scalar = c != '{' && c != '[' && c != '"'
	var raw []byte
	for {
		chunk, err := d.r.Peek(max(d.r.Buffered(), 1))
		if len(chunk) == 0 {
			if end.scalar && errors.Is(err, io.EOF) && len(raw) > 0 {
				return raw, nil
			}
			return nil, unexpectedEOF(err)
		}
		n, done := end.scan(chunk)
		if len(raw)+n > valueLimit {
			return nil, errValueTooLarge
		}
		raw = append(raw, chunk[:n]...)
		_, _ = d.r.Discard(n)
		d.offset += int64(n)
		if done {
			return raw, nil
		}
	}
}

// valueEnd finds where a value ends, over the chunks it arrives in.
type valueEnd struct {
	scalar  bool
	depth   int
	strings jsonvalue.Strings
}

// scan consumes chunk up to the value's end; done reports whether it was found.
func (e *valueEnd) scan(chunk []byte) (n int, done bool) {
	for i, c := range chunk {
		if e.scalar {
			switch c {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, true
			}
			continue
		}
		wasIn := e.strings.InString()
		if !e.strings.Structural(c) {
			if wasIn && !e.strings.InString() && e.depth == 0 {
				return i + 1, true // a string value's closing quote
			}
			continue
		}
		switch c {
		case '{', '[':
			e.depth++
		case '}', ']':
			if e.depth--; e.depth == 0 {
				return i + 1, true
			}
		}
	}
	return len(chunk), false
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// A sentObject is one object of the review as read: its top-level fields, or the error of one
// that is no JSON object (which fails its conversion, not the review's reading), and its size.
type sentObject struct {
	fields map[string]json.RawMessage
	err    error
	size   int
}

// readObject reads the next object of the review, split into its top-level fields
// (conversion.DecodeFields). size counts the bytes read for it, the white space before it
// included. Splitting it checks it is JSON (jsonvalue.SplitObject); what that parser does not
// read plainly, and any other value, is encoding/json's to judge: a syntax error fails the
// review, a value that is no object only its own conversion.
func readObject(dec *reviewDecoder) (sentObject, error) {
	start := dec.offset
	raw, err := dec.value()
	if err != nil {
		return sentObject{}, err
	}
	o := sentObject{size: int(dec.offset - start)}
	var ok bool
	if o.fields, ok = jsonvalue.SplitObject(raw); ok {
		return o, nil
	}
	o.fields = nil
	o.err = json.Unmarshal(raw, &o.fields)
	if syntaxErr := (*json.SyntaxError)(nil); errors.As(o.err, &syntaxErr) {
		return sentObject{}, o.err
	}
	return o, nil
}

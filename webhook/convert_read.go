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

// key reads an object's key, a string, and the colon after it. The keys of a review are
// returned without an allocation.
func (d *reviewDecoder) key() (string, error) {
	c, err := d.peek()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", fmt.Errorf("invalid character %q at offset %d, want an object key", c, d.offset)
	}
	raw, err := d.transientValue()
	if err != nil {
		return "", err
	}
	if inner, ok := plainString(raw); ok {
		if known, ok := reviewKeys[string(inner)]; ok {
			return known, d.expect(':')
		}
	}
	k, err := unquote(raw)
	if err != nil {
		return "", err
	}
	return k, d.expect(':')
}

// reviewKeys are the keys a ConversionReview has, each its own string.
var reviewKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"apiVersion", "kind", "request", "response", "uid", "desiredAPIVersion", "objects", "convertedObjects", "result"} {
		m[k] = k
	}
	return m
}()

// decodeString reads a string value into s as json.Unmarshal does: a string of printable ASCII
// without an escape as it is written, anything else (null leaves s alone; a number is an
// error) through jsonvalue.Decode, or encoding/json where that parser does not read it.
func (d *reviewDecoder) decodeString(s *string) error {
	raw, err := d.transientValue()
	if err != nil {
		return err
	}
	if inner, ok := plainString(raw); ok {
		*s = string(inner)
		return nil
	}
	if len(raw) > 0 && raw[0] == '"' {
		str, err := unquote(raw)
		if err == nil {
			*s = str
		}
		return err
	}
	return json.Unmarshal(raw, s)
}

// plainString is the content of the JSON string raw when it needs no unquoting: printable
// ASCII, no escape.
func plainString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return nil, false
		}
	}
	return inner, true
}

// unquote decodes the JSON string raw as json.Unmarshal does, its error included.
func unquote(raw []byte) (string, error) {
	if v, err := jsonvalue.Decode(raw); err == nil {
		if str, ok := v.(string); ok {
			return str, nil
		}
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// skip reads a value and checks that it is JSON.
func (d *reviewDecoder) skip() error {
	raw, err := d.transientValue()
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
	return d.readValue(false)
}

// transientValue is value, but the bytes may be the reader's own, valid until the next read:
// a value that has arrived whole is not copied.
func (d *reviewDecoder) transientValue() ([]byte, error) {
	return d.readValue(true)
}

func (d *reviewDecoder) readValue(transient bool) ([]byte, error) {
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
		if transient && done && raw == nil {
			// Discard leaves the buffer's bytes in place until the reader fills it again.
			raw = chunk[:n:n]
		} else {
			raw = append(raw, chunk[:n]...)
		}
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

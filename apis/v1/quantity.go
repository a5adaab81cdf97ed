package v1

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The bounds of a quantity in spec.resources. The schema's pattern takes any length and any
// exponent, and resource.Quantity spins for minutes and takes gigabytes on some ("1e3000000000",
// "1e-100000000" to parse; "1e2000000000" to compare with 1): in every typed decoding of the
// Task, a client's as much as the operator's. Within them every operation is immediate.
const (
	MaxQuantityLength   = 64
	MaxQuantityExponent = 64
)

// QuantityBoundsMessage is the error's detail for a quantity out of bounds.
var QuantityBoundsMessage = fmt.Sprintf("a quantity must be at most %d characters long, with an exponent between -%d and %d",
	MaxQuantityLength, MaxQuantityExponent, MaxQuantityExponent)

// QuantityFits says a quantity (a string, or a number as JSON decodes it: float64, int64 or
// json.Number) is within the bounds: its length, and its decimal exponent ("1e3", "2E-5") if
// it has one. What is not a number after the e (the suffix Ei, a malformed "1e.5") is the
// quantity parser's to refuse, quickly.
func QuantityFits(v any) bool {
	var s string
	switch v := v.(type) {
	case string:
		if len(v) > MaxQuantityLength {
			return false
		}
		s = strings.TrimSpace(v) // as Quantity's UnmarshalJSON reads it
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	case json.Number:
		s = string(v)
	default:
		return true // an integer, or no quantity at all: the decoder's to judge
	}
	if len(s) > MaxQuantityLength {
		return false
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.ParseInt(s[i+1:], 10, 64)
	return err != nil && !errors.Is(err, strconv.ErrRange) || err == nil && exp >= -MaxQuantityExponent && exp <= MaxQuantityExponent
}

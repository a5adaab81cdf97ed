package conversion

import "errors"

// InvalidObjectError is a refusal of what an object says, not a failure of the converter: an
// old-version object v1 cannot take as it is (a value its Go type cannot decode or v1 cannot
// hold, a zero it cannot tell from unset, a preserved annotation the converter did not write).
// The apiserver reports it as any failed conversion (HTTP 500 naming the field); the webhook
// counts it apart from failures, which are the converter's bugs or the webhook's outages.
type InvalidObjectError struct{ err error }

func (e *InvalidObjectError) Error() string { return e.err.Error() }

func (e *InvalidObjectError) Unwrap() error { return e.err }

// IsInvalidObject says err refuses what an object says (InvalidObjectError).
func IsInvalidObject(err error) bool {
	var invalid *InvalidObjectError
	return errors.As(err, &invalid)
}

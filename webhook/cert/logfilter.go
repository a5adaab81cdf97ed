package cert

import (
	"strings"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// rotatorLogger is the name cert-controller's rotator logs under (its package-level logger,
// taken from controller-runtime's).
const rotatorLogger = "cert-rotation"

// expectedLevel is the verbosity the rotator's expected errors are logged at instead: visible
// with --zap-log-level=debug, silent by default.
const expectedLevel = 1

// QuietExpectedErrors returns log with the errors that cert-controller's rotator logs in the
// normal course of things turned into debug lines without a stack trace. The rotator logs at
// error level, with a stack trace, on every first start:
//   - a write conflict on the Secret: its start-up refresh and its reconcile of the Secret race
//     to fill it, and the loser retries (the conflict is inside a retry loop);
//   - "Cert secret is not well-formed, missing ca.crt": its reconcile read the Secret as
//     shipped (empty) from the cache before the refresh's write arrived; the write's watch
//     event reconciles again.
//
// Neither needs anyone's attention, and an operator that logs errors at every start teaches
// its users to ignore its errors. Every other error, of the rotator or not, is left as it is;
// one that persists shows up as the webhooks not being served (readiness fails).
func QuietExpectedErrors(log logr.Logger) logr.Logger {
	sink := log.GetSink()
	if sink == nil {
		return log
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1) // the wrapper's own frame: quietSink.Info or quietSink.Error
	}
	return logr.New(&quietSink{LogSink: sink})
}

// quietSink forwards to the wrapped sink. Every logging method it has is one real frame
// between logr.Logger and the wrapped sink (hence the WithCallDepth(1) above), so it defines
// Info itself rather than promoting it: a promoted method's wrapper is elided from stacks, and
// the depth would then be one too many for Info lines.
type quietSink struct {
	logr.LogSink
	name string // the logger's name, as WithName built it
}

// Init does nothing: the wrapped sink was initialised by the logr.New that built the caller's
// logger, and initialising it again (zapr adds the call depth it is given to its caller skip)
// would count logr's own frame twice.
func (s *quietSink) Init(logr.RuntimeInfo) {}

func (s *quietSink) Info(level int, msg string, keysAndValues ...any) {
	s.LogSink.Info(level, msg, keysAndValues...)
}

// WithCallDepth passes a caller's extra depth (logr.Logger.WithCallDepth, used by helpers that
// log for their callers) through to the wrapped sink, keeping the wrapper around it.
func (s *quietSink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.LogSink.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return &quietSink{LogSink: cd.WithCallDepth(depth), name: s.name}
}

func (s *quietSink) Error(err error, msg string, keysAndValues ...any) {
	if strings.HasPrefix(s.name, rotatorLogger) && expectedRotatorError(err) {
		if s.LogSink.Enabled(expectedLevel) {
			s.LogSink.Info(expectedLevel, msg+" (expected, retried)", append(keysAndValues, "reason", err.Error())...)
		}
		return
	}
	s.LogSink.Error(err, msg, keysAndValues...)
}

func (s *quietSink) WithValues(keysAndValues ...any) logr.LogSink {
	return &quietSink{LogSink: s.LogSink.WithValues(keysAndValues...), name: s.name}
}

func (s *quietSink) WithName(name string) logr.LogSink {
	full := name
	if s.name != "" {
		full = s.name + "." + name
	}
	return &quietSink{LogSink: s.LogSink.WithName(name), name: full}
}

// expectedRotatorError says whether err is one of the states the rotator passes through on
// its own (see QuietExpectedErrors).
func expectedRotatorError(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsConflict(err) {
		return true
	}
	return strings.Contains(err.Error(), "Cert secret is not well-formed, missing ca.")
}

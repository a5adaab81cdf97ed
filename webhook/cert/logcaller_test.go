package cert

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestQuietExpectedErrorsKeepsTheCaller: the wrapper must not move the caller zap reports,
// nor cut the top of the stack trace it writes with every error line (controller-runtime's
// default --zap-stacktrace-level=error): a line logged through it names the line that logged
// it, and an error's stack trace starts at the function that logged it, as without it.
func TestQuietExpectedErrorsKeepsTheCaller(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := QuietExpectedErrors(zapr.NewLogger(zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel))))
	log.Info("info line")
	log.Error(errors.New("boom"), "error line")
	log.WithName("other").WithValues("k", "v").Info("named line")
	for _, e := range logs.All() {
		if !e.Caller.Defined || !strings.HasSuffix(e.Caller.File, "logcaller_test.go") {
			t.Errorf("%q logged with caller %s, want this test file", e.Message, e.Caller.String())
		}
	}
	for _, e := range logs.FilterMessage("error line").All() {
		if first, _, _ := strings.Cut(e.Stack, "\n"); !strings.Contains(first, "TestQuietExpectedErrorsKeepsTheCaller") {
			t.Errorf("the error's stack trace starts at %q, not at the function that logged it:\n%s", first, e.Stack)
		}
	}
	if n := logs.Len(); n != 3 {
		t.Errorf("%d lines logged, want 3", n)
	}
}

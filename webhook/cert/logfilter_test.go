package cert

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	uzap "go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func TestQuietExpectedErrors(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "task-operator-webhook-cert", errors.New("the object has been modified"))
	notWellFormed := errors.New("Cert secret is not well-formed, missing ca.crt")
	tests := []struct {
		name      string
		logger    func(logr.Logger) logr.Logger
		err       error
		wantError bool
	}{
		{"rotator conflict", rotatorLog, conflict, false},
		{"rotator conflict, wrapped", rotatorLog, fmt.Errorf("refresh: %w", conflict), false},
		{"rotator secret without ca.crt", rotatorLog, notWellFormed, false},
		{"rotator conflict, logger with values", func(l logr.Logger) logr.Logger { return rotatorLog(l).WithValues("name", "x") }, conflict, false},
		{"rotator, another error", rotatorLog, errors.New("max retries for checking certs existence"), true},
		{"another logger's conflict", func(l logr.Logger) logr.Logger { return l.WithName("task") }, conflict, true},
		{"the root logger", func(l logr.Logger) logr.Logger { return l }, notWellFormed, true},
	}
	for _, tt := range tests {
		for _, debug := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, debug %v", tt.name, debug), func(t *testing.T) {
				var out bytes.Buffer
				level := uzap.InfoLevel
				if debug {
					level = uzap.DebugLevel
				}
				log := QuietExpectedErrors(zap.New(zap.WriteTo(&out), zap.Level(level)))
				tt.logger(log).Error(tt.err, "could not refresh CA and server certs")
				text := out.String()
				isError := strings.Contains(text, `"level":"error"`)
				if isError != tt.wantError {
					t.Fatalf("logged at error level: %v, want %v:\n%s", isError, tt.wantError, text)
				}
				if tt.wantError {
					return
				}
				if strings.Contains(text, "stacktrace") {
					t.Errorf("an expected state logged a stack trace:\n%s", text)
				}
				if logged := strings.Contains(text, "(expected, retried)"); logged != debug {
					t.Errorf("debug %v: the expected error logged: %v, want %v:\n%s", debug, logged, debug, text)
				}
			})
		}
	}
}

func rotatorLog(l logr.Logger) logr.Logger { return l.WithName(rotatorLogger) }

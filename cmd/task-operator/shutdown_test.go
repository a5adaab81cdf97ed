package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestShutdownDrainsBeforeCancelling(t *testing.T) {
	var s shutdown
	sigs := make(chan os.Signal, 3)
	ctx := s.context(sigs, 200*time.Millisecond, logr.Discard())
	if err := s.readyCheck(nil); err != nil {
		t.Fatalf("ready before any signal: %v", err)
	}
	sigs <- syscall.SIGTERM
	// Readiness fails first, while the context (and with it every server) still runs.
	for s.readyCheck(nil) == nil {
		time.Sleep(time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("context cancelled as soon as readiness failed: no drain")
	}
	<-ctx.Done()
}

func TestShutdownSecondSignalCancelsAtOnce(t *testing.T) {
	var s shutdown
	sigs := make(chan os.Signal, 3)
	ctx := s.context(sigs, time.Hour, logr.Discard())
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	<-ctx.Done() // would wait an hour without the second signal
}

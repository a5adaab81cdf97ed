package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// shutdown turns the first SIGTERM (or SIGINT) into an orderly stop in two steps:
//
//  1. Draining: /readyz fails at once, so the pod leaves the webhook Service's endpoints, while
//     everything keeps running — the webhook server above all, because the apiserver may still
//     send it conversion and admission requests until it sees the endpoint go.
//  2. After the drain delay the manager's context is cancelled: the leader gives up its Lease,
//     the webhook server finishes the requests in flight, and the process exits.
//
// A second signal cancels at once. The pod's terminationGracePeriodSeconds must cover the delay
// plus the manager's graceful shutdown timeout (config/manager/manager.yaml).
type shutdown struct {
	draining atomic.Bool
}

// errDraining is what /readyz reports while the process drains.
var errDraining = errors.New("shutting down: draining before exit")

// readyCheck is a healthz.Checker for /readyz.
func (s *shutdown) readyCheck(*http.Request) error {
	if s.draining.Load() {
		return errDraining
	}
	return nil
}

// context returns the manager's context: cancelled delay after the first signal on sigs, or
// at once on the second.
func (s *shutdown) context(sigs <-chan os.Signal, delay time.Duration, log logr.Logger) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		sig := <-sigs
		s.draining.Store(true)
		log.Info("draining: not ready any more, still serving webhooks", "signal", sig.String(), "delay", delay)
		select {
		case <-time.After(delay):
			log.Info("drain delay over, stopping")
		case sig := <-sigs:
			log.Info("second signal, stopping at once", "signal", sig.String())
		}
		cancel()
		// A third signal is the impatient kind: leave without waiting for the runnables.
		<-sigs
		os.Exit(1)
	}()
	return ctx
}

// signals delivers SIGTERM and SIGINT.
func signals() <-chan os.Signal {
	ch := make(chan os.Signal, 3)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	return ch
}

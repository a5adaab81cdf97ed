// Package http is the built-in HTTP runner: the program a Task of runner type HTTP runs inside
// its Job's pods. It performs one request and reports through its exit code whether the
// response status was accepted. It knows nothing of Kubernetes; the operator passes everything
// it needs as flags:
//
//	http --url=https://example.com/hook --method=POST --header=Content-Type:application/json \
//	     --body='{"a":1}' --timeout=30s --accept=200,204
//
// Redirects are not followed: the status code judged is the one the URL answers.
//
// Exit codes: 0 when the status code is accepted, 1 when the request failed or the status code
// was not accepted, 2 when the flags are wrong.
package http

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	taskv1 "example.com/task-operator/apis/v1"
)

// Exit codes returned by Main.
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitBadUsage = 2
)

// DefaultTimeout bounds the whole request when --timeout is not given: the API's default.
const DefaultTimeout = taskv1.DefaultHTTPTimeout

// maxBodyShown caps how much of a rejected response body is quoted in the failure message.
const maxBodyShown = 256

// config is what the flags describe.
type config struct {
	url      string
	method   string
	headers  http.Header
	body     string
	hasBody  bool
	timeout  time.Duration
	accepted map[int]bool // empty means any 2xx
}

// Main runs the HTTP runner with args (without the program or subcommand name), writing a
// one-line outcome to stdout on success and a one-line reason to stderr on failure. It returns
// the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	// Parse errors are reported as one line; only -h prints the usage.
	fs.SetOutput(io.Discard)
	f := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "usage: http --url=URL [--method=GET] [--header=Name:Value]... [--body=TEXT] [--timeout=30s] [--accept=200,204]")
			fs.PrintDefaults()
			return ExitOK
		}
		fmt.Fprintf(stderr, "http runner: %v\n", err)
		return ExitBadUsage
	}
	return f.Run(fs.Args(), stdout, stderr)
}

// Flags are the runner's flags bound to a FlagSet: Main parses them with package flag, the
// operator's command line (cmd/task-operator) with cobra; both then call Run.
type Flags struct {
	cfg    config
	accept string
}

// BindFlags defines the runner's flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{cfg: config{headers: http.Header{}}}
	fs.StringVar(&f.cfg.url, "url", "", "absolute http or https URL to call (required)")
	fs.StringVar(&f.cfg.method, "method", http.MethodGet, "HTTP method")
	fs.Var(&headerFlags{f.cfg.headers}, "header", "request header as Name:Value (repeatable)")
	fs.Var(&bodyFlag{&f.cfg}, "body", "request body")
	fs.DurationVar(&f.cfg.timeout, "timeout", DefaultTimeout, "bound on the whole request")
	fs.StringVar(&f.accept, "accept", "", "comma-separated accepted status codes (default any 2xx)")
	return f
}

// Run performs the call the parsed flags describe; args are the arguments left after the
// flags (there must be none). It returns the process exit code.
func (f *Flags) Run(args []string, stdout, stderr io.Writer) int {
	cfg, err := f.complete(args)
	if err != nil {
		fmt.Fprintf(stderr, "http runner: %v\n", err)
		return ExitBadUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	code, snippet, err := do(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "http runner: %s %s: %v\n", cfg.method, cfg.url, err)
		return ExitFailed
	}
	if !cfg.accepts(code) {
		msg := fmt.Sprintf("http runner: %s %s: status %d is not accepted (want %s)", cfg.method, cfg.url, code, cfg.acceptedString())
		if snippet != "" {
			msg += fmt.Sprintf("; body: %q", snippet)
		}
		fmt.Fprintln(stderr, msg)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "http runner: %s %s: status %d\n", cfg.method, cfg.url, code)
	return ExitOK
}

// headerFlags collects repeated --header=Name:Value flags.
type headerFlags struct{ h http.Header }

func (f *headerFlags) String() string { return "" }

func (f *headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("header %q is not of the form Name:Value", v)
	}
	f.h.Add(name, strings.TrimSpace(value))
	return nil
}

// bodyFlag is --body; it records being given, since an empty body sent is not no body.
type bodyFlag struct{ cfg *config }

func (f *bodyFlag) String() string {
	if f == nil || f.cfg == nil {
		return ""
	}
	return f.cfg.body
}

func (f *bodyFlag) Set(v string) error {
	f.cfg.body, f.cfg.hasBody = v, true
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return config{}, err
	}
	return f.complete(fs.Args())
}

// complete checks the parsed flags and derives the request's settings.
func (f *Flags) complete(args []string) (config, error) {
	cfg := f.cfg
	if len(args) > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(args, " "))
	}
	if err := validateURL(cfg.url); err != nil {
		return config{}, err
	}
	cfg.method = strings.ToUpper(strings.TrimSpace(cfg.method))
	if cfg.method == "" {
		return config{}, errors.New("--method must not be empty")
	}
	if cfg.timeout <= 0 {
		return config{}, fmt.Errorf("--timeout must be positive, got %s", cfg.timeout)
	}
	codes, err := parseAccepted(f.accept)
	if err != nil {
		return config{}, err
	}
	cfg.accepted = codes
	return cfg, nil
}

func validateURL(raw string) error {
	if raw == "" {
		return errors.New("--url is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q must be an absolute http or https URL", raw)
	}
	return nil
}

// parseAccepted reads "200,204" into a set; an empty string yields an empty set (any 2xx).
func parseAccepted(s string) (map[int]bool, error) {
	codes := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 100 || n > 599 {
			return nil, fmt.Errorf("--accept: %q is not a status code between 100 and 599", part)
		}
		codes[n] = true
	}
	return codes, nil
}

func (c config) accepts(code int) bool {
	if len(c.accepted) == 0 {
		return code >= 200 && code <= 299
	}
	return c.accepted[code]
}

func (c config) acceptedString() string {
	if len(c.accepted) == 0 {
		return "2xx"
	}
	parts := make([]string, 0, len(c.accepted))
	for code := 100; code <= 599; code++ {
		if c.accepted[code] {
			parts = append(parts, strconv.Itoa(code))
		}
	}
	return strings.Join(parts, ",")
}

// client does not follow redirects: the status code judged is the one the URL answers, so a
// 3xx can be accepted (or rejected) explicitly.
var client = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends the request and returns the status code and, for quoting in a failure message, the
// start of the response body.
func do(ctx context.Context, cfg config) (int, string, error) {
	var body io.Reader
	if cfg.hasBody {
		body = strings.NewReader(cfg.body)
	}
	req, err := http.NewRequestWithContext(ctx, cfg.method, cfg.url, body)
	if err != nil {
		return 0, "", fmt.Errorf("build request: %w", err)
	}
	for name, values := range cfg.headers {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	if host := cfg.headers.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, "", fmt.Errorf("no response within %s", cfg.timeout)
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the method and URL are in the message already
		}
		return 0, "", err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyShown))
	// Drain a little more so the connection can be reused; the process exits soon anyway.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(head)), nil
}

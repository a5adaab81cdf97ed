package http_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	httprunner "example.com/task-operator/runner/http"
)

// recorded is what the test server saw of one request.
type recorded struct {
	method string
	header http.Header
	body   string
}

// newServer starts a loopback server that answers /status/N with code N, /slow after a pause,
// and anything else with 200, recording every request on seen.
func newServer(t *testing.T, seen chan<- recorded) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	record := func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case seen <- recorded{method: r.Method, header: r.Header.Clone(), body: string(b)}:
		default:
		}
	}
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		var code int
		for _, c := range r.PathValue("code") {
			code = code*10 + int(c-'0')
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "status body\nsecond line")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.WriteHeader(http.StatusOK)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestRun(t *testing.T) {
	seen := make(chan recorded, 1)
	srv := newServer(t, seen)

	// A port that was listening a moment ago and is closed now refuses connections.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() + "/"
	closed.Close()

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string // substring; empty means stderr must be empty
		wantStdout string
		check      func(t *testing.T, r recorded)
	}{
		{
			name:       "GET 200 default accept",
			args:       []string{"--url=" + srv.URL + "/ok"},
			wantCode:   0,
			wantStdout: "status 200",
			check: func(t *testing.T, r recorded) {
				if r.method != http.MethodGet {
					t.Errorf("method = %s, want GET", r.method)
				}
			},
		},
		{
			name:     "POST with headers and body",
			args:     []string{"--url=" + srv.URL + "/ok", "--method=post", "--header=Content-Type: application/json", "--header=X-Token:abc:def", "--header=X-Multi:1", "--header=X-Multi:2", `--body={"a":1}`},
			wantCode: 0,
			check: func(t *testing.T, r recorded) {
				if r.method != http.MethodPost {
					t.Errorf("method = %s, want POST", r.method)
				}
				if got := r.header.Get("Content-Type"); got != "application/json" {
					t.Errorf("Content-Type = %q", got)
				}
				if got := r.header.Get("X-Token"); got != "abc:def" {
					t.Errorf("X-Token = %q, want value with colon kept", got)
				}
				if got := r.header.Values("X-Multi"); len(got) != 2 {
					t.Errorf("X-Multi = %q, want two values", got)
				}
				if r.body != `{"a":1}` {
					t.Errorf("body = %q", r.body)
				}
			},
		},
		{
			name:     "DELETE",
			args:     []string{"--url=" + srv.URL + "/ok", "--method=DELETE"},
			wantCode: 0,
			check: func(t *testing.T, r recorded) {
				if r.method != http.MethodDelete {
					t.Errorf("method = %s, want DELETE", r.method)
				}
			},
		},
		{
			name:     "HEAD",
			args:     []string{"--url=" + srv.URL + "/ok", "--method=HEAD"},
			wantCode: 0,
			check: func(t *testing.T, r recorded) {
				if r.method != http.MethodHead {
					t.Errorf("method = %s, want HEAD", r.method)
				}
			},
		},
		{name: "204 is 2xx", args: []string{"--url=" + srv.URL + "/status/204"}, wantCode: 0},
		{name: "299 is 2xx", args: []string{"--url=" + srv.URL + "/status/299"}, wantCode: 0},
		{name: "500 fails", args: []string{"--url=" + srv.URL + "/status/500"}, wantCode: 1, wantStderr: "status 500 is not accepted (want 2xx)"},
		{name: "404 fails", args: []string{"--url=" + srv.URL + "/status/404"}, wantCode: 1, wantStderr: "status 404"},
		{name: "redirect is not followed", args: []string{"--url=" + srv.URL + "/redirect"}, wantCode: 1, wantStderr: "status 302"},
		{name: "redirect can be accepted", args: []string{"--url=" + srv.URL + "/redirect", "--accept=302"}, wantCode: 0},
		{name: "accepted list accepts 404", args: []string{"--url=" + srv.URL + "/status/404", "--accept=200,404"}, wantCode: 0},
		{name: "accepted list rejects 200", args: []string{"--url=" + srv.URL + "/status/200", "--accept=201, 204"}, wantCode: 1, wantStderr: "(want 201,204)"},
		{name: "timeout", args: []string{"--url=" + srv.URL + "/slow", "--timeout=200ms"}, wantCode: 1, wantStderr: "no response within 200ms"},
		{name: "connection refused", args: []string{"--url=" + refused}, wantCode: 1, wantStderr: "GET " + refused + ": dial tcp"},
		{name: "missing url", args: nil, wantCode: 2, wantStderr: "--url is required"},
		{name: "relative url", args: []string{"--url=/path"}, wantCode: 2, wantStderr: "absolute http or https"},
		{name: "ftp url", args: []string{"--url=ftp://127.0.0.1/"}, wantCode: 2, wantStderr: "absolute http or https"},
		{name: "bad header", args: []string{"--url=" + srv.URL, "--header=NoColon"}, wantCode: 2, wantStderr: "Name:Value"},
		{name: "bad accept", args: []string{"--url=" + srv.URL, "--accept=ok"}, wantCode: 2, wantStderr: "--accept"},
		{name: "accept out of range", args: []string{"--url=" + srv.URL, "--accept=700"}, wantCode: 2, wantStderr: "--accept"},
		{name: "bad timeout", args: []string{"--url=" + srv.URL, "--timeout=soon"}, wantCode: 2, wantStderr: "timeout"},
		{name: "zero timeout", args: []string{"--url=" + srv.URL, "--timeout=0s"}, wantCode: 2, wantStderr: "must be positive"},
		{name: "unknown flag", args: []string{"--url=" + srv.URL, "--nope"}, wantCode: 2, wantStderr: "nope"},
		{name: "stray argument", args: []string{"--url=" + srv.URL, "extra"}, wantCode: 2, wantStderr: "unexpected arguments: extra"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Drop what an earlier case may have left.
			select {
			case <-seen:
			default:
			}
			var stdout, stderr bytes.Buffer
			code := httprunner.Main(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tc.wantCode, stderr.String())
			}
			if tc.wantStderr == "" && code == 0 && stderr.Len() != 0 {
				t.Errorf("stderr = %q, want empty", stderr.String())
			}
			if tc.wantStderr != "" && !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.wantStderr)
			}
			if code != 0 {
				if lines := strings.Count(strings.TrimSuffix(stderr.String(), "\n"), "\n"); lines != 0 {
					t.Errorf("failure message spans %d lines, want one: %q", lines+1, stderr.String())
				}
			}
			if tc.wantStdout != "" && !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tc.wantStdout)
			}
			if tc.check != nil {
				select {
				case r := <-seen:
					tc.check(t, r)
				case <-time.After(5 * time.Second):
					t.Fatal("server saw no request")
				}
			}
		})
	}
}

func TestHelpIsNotAFailure(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := httprunner.Main([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code = %d, want 0", code)
	}
	if !strings.Contains(stderr.String(), "-url") {
		t.Errorf("usage not printed: %q", stderr.String())
	}
}

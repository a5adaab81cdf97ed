package webhook

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync/atomic"
	"testing"
)

func TestDrainingResponsesCloseTheirConnection(t *testing.T) {
	var draining atomic.Bool
	srv := httptest.NewServer(closeConnectionsWhile(draining.Load, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})))
	defer srv.Close()
	client := srv.Client()

	// post sends one POST and says whether it went over a reused connection and whether the
	// response told the client to close it.
	post := func() (reused, closed bool) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return reused, resp.Close
	}

	steps := []struct {
		draining              bool
		wantReused, wantClose bool
	}{
		{draining: false, wantReused: false, wantClose: false},
		{draining: false, wantReused: true, wantClose: false},
		{draining: true, wantReused: true, wantClose: true},
		// The connection the last response closed is not reused.
		{draining: true, wantReused: false, wantClose: true},
	}
	for i, s := range steps {
		draining.Store(s.draining)
		reused, closed := post()
		if reused != s.wantReused || closed != s.wantClose {
			t.Errorf("request %d (draining %v): reused %v, Connection: close %v; want %v, %v", i, s.draining, reused, closed, s.wantReused, s.wantClose)
		}
	}
}

func TestNoDrainingFuncLeavesTheHandlerAsItIs(t *testing.T) {
	h := http.NotFoundHandler()
	rec := httptest.NewRecorder()
	closeConnectionsWhile(nil, h).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Header().Get("Connection") != "" {
		t.Errorf("Connection = %q without a draining func", rec.Header().Get("Connection"))
	}
}

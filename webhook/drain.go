package webhook

import "net/http"

// closeConnectionsWhile has every response ask the client to close its connection while
// draining reports true (the process got SIGTERM and is about to exit).
//
// The apiserver keeps its HTTP/1.1 connections to a webhook alive and reuses them. They outlive
// the replica's removal from the Service's endpoints, so a draining replica keeps receiving
// requests on them, and when it finally exits it closes the idle ones under the apiserver's
// feet: a POST written onto a connection the server closed at that moment fails with EOF,
// the apiserver does not retry a POST, and the read it was converting for fails. With
// "Connection: close" each connection the apiserver still uses ends cleanly after its
// response, and the next request dials again, through the Service, to a replica that stays.
func closeConnectionsWhile(draining func() bool, h http.Handler) http.Handler {
	if draining == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

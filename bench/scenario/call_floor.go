package scenario

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	apix "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/bench/harness"
	"example.com/task-operator/conversion"
	"example.com/task-operator/internal/testenv"
	"example.com/task-operator/webhook"
)

// The floor probe asks how much of a conversion call, as the apiserver times it, any webhook
// could save. It reads objects at v1alpha1 that are stored at v1, one GET at a time (one call
// each, nothing else running), for Tasks through the product's /convert and for a twin CRD
// whose webhook only renames apiVersion, and times the same review sent by a plain Go client
// over the same loopback TLS.

// floorTarget is one webhook the probe times: the objects it converts, the server that serves
// it and how to read one object through it.
type floorTarget struct {
	name    string
	crd     string
	server  *testenv.ConversionServer
	url     string
	objects []*unstructured.Unstructured
	read    func(ctx context.Context, name string) error
}

// probeCallFloor times reads GETs through each webhook, spread over k Tasks created at v1 and
// their twins, first over HTTP/1.1 (up's server, as the operator's) and then over HTTP/2 (a
// second server), which the apiserver uses at a loopback URL if offered. It does so for two
// kinds of Task (callKinds): the write probe's, which hide nothing from v1alpha1, and Tasks
// with a finished run's status, which do.
func probeCallFloor(ctx context.Context, e *harness.Env, up *testenv.Upgrade, f *floors, k, reads int, r *Result) (err error) {
	defer func() { err = errors.Join(err, f.uninstall(context.WithoutCancel(ctx))) }()
	if err := f.install(ctx, "v1", f.renameOnly(), taskSchemas); err != nil {
		return err
	}
	for i := range k {
		if err := createAtV1(ctx, up, ranProbeName(i), i); err != nil {
			return fmt.Errorf("floor probe: %w", err)
		}
		if err := finishedRunAtV1(ctx, up, ranProbeName(i), i); err != nil {
			return fmt.Errorf("floor probe: %w", err)
		}
	}
	h2, err := testenv.StartConversionServer(ctx, testenv.ConversionServerOptions{HTTP2: true})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, h2.Close()) }()
	h2Rename := h2.Handle(floorPath, http.HandlerFunc(webhook.RenameOnly))
	// Whatever happens, Tasks must be converted by up's server again for what follows.
	defer func() {
		err = errors.Join(err, f.point(context.WithoutCancel(ctx), taskv1.CRDName, up.Conversion().URL, up.Conversion().CABundle))
	}()
	for _, kind := range callKinds {
		tasks, twins, err := f.twins(ctx, up, k, kind.name)
		if err != nil {
			return err
		}
		for _, p := range []struct {
			proto             string
			server            *testenv.ConversionServer
			taskURL, floorURL string
		}{
			{"HTTP/1.1", up.Conversion(), up.Conversion().URL, f.url},
			{"HTTP/2", h2, h2.URL, h2Rename},
		} {
			if err := f.point(ctx, taskv1.CRDName, p.taskURL, p.server.CABundle); err != nil {
				return err
			}
			if err := f.point(ctx, floorCRDName, p.floorURL, p.server.CABundle); err != nil {
				return err
			}
			targets := []floorTarget{
				{name: "the product's /convert, " + p.proto + kind.label, crd: taskv1.CRDName, server: p.server, url: p.taskURL, objects: tasks, read: func(ctx context.Context, name string) error {
					_, err := up.Tasks("v1alpha1", callsNS).Get(ctx, name, metav1.GetOptions{})
					return err
				}},
				{name: "a webhook that only renames apiVersion, " + p.proto + kind.label, crd: floorCRDName, server: p.server, url: p.floorURL, objects: twins, read: func(ctx context.Context, name string) error {
					_, err := f.in("v1alpha1")(callsNS).Get(ctx, name, metav1.GetOptions{})
					return err
				}},
			}
			if err := timeFloor(ctx, e, targets, p.proto == "HTTP/2", reads, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// callKinds are the Tasks the floor probe reads: the write probe's, created at v1 with a status
// v1alpha1 expresses whole (goal 1's Tasks until the converter learned to tell, without its
// diff, that such a Task loses nothing), and Tasks with a finished run's status, which keep v1
// fields in the preserved annotation and so take the converter's full path.
var callKinds = []struct {
	label string
	name  func(int) string
}{
	{"", probeName},
	{" (a finished run's status)", ranProbeName},
}

// timeFloor times the targets' reads at the apiserver and the same reviews from a Go client,
// each target's calls in turn with the others' in one window, and reports the difference for
// each and the ratio of the first (ours) to the last (the floor). Timed one after the other,
// the two sides saw different minutes of the machine and the ratio moved with them.
func timeFloor(ctx context.Context, e *harness.Env, targets []floorTarget, http2 bool, reads int, r *Result) error {
	client, err := reviewClient(targets[0].server.CABundle, http2)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	for _, t := range targets {
		if err := waitServed(ctx, e, t); err != nil {
			return err
		}
	}
	atAPIServer, ok, err := timeReads(ctx, e, targets, reads, r)
	if err != nil || !ok {
		return err
	}
	atClient, err := timeReviews(ctx, client, targets, reads, r)
	if err != nil {
		return err
	}
	for i, t := range targets {
		r.Addf("conversion call floor, apiserver mean − Go client mean: "+t.name, "what the apiserver adds to a call: its own work and the wake-ups between two processes",
			"%s", (atAPIServer[i].mean - atClient[i].mean).Round(time.Microsecond))
	}
	last := len(targets) - 1
	ours, floor := atAPIServer[0], atAPIServer[last]
	r.Addf("conversion call ÷ the no-op floor: "+targets[0].name, "apiserver's mean and p50 of ours over the rename-only webhook's, GETs of the two in turn in one window; goal ≤ 1.10× mean, ≤ 1.25× p50",
		"mean %.2f×, p50 %.2f×", ours.mean.Seconds()/floor.mean.Seconds(), ours.p50/floor.p50)
	r.Addf("GET at v1alpha1 ÷ the no-op floor's, as the bench times each: "+targets[0].name, "the same GETs, each timed by the bench: an exact p50 (the apiserver's histogram cannot resolve one under 1 ms), the call diluted by the apiserver's own work of a GET",
		"mean %.2f× (%s ÷ %s), p50 %.2f× (%s ÷ %s)", ratio(ours.gets.mean, floor.gets.mean), ours.gets.mean, floor.gets.mean,
		ratio(ours.gets.p50, floor.gets.p50), ours.gets.p50, floor.gets.p50)
	r.Addf("conversion handler ÷ the no-op floor's, as the webhook's server times each: "+targets[0].name, "the same calls, inside the handler: what the webhook itself spends, undiluted by the apiserver's side of a call",
		"mean %.2f× (%s ÷ %s), p50 %.2f× (%s ÷ %s)", ratio(ours.handler.mean, floor.handler.mean), ours.handler.mean, floor.handler.mean,
		ratio(ours.handler.p50, floor.handler.p50), ours.handler.p50, floor.handler.p50)
	r.Addf("conversion round trip ÷ the no-op floor, Go client: "+targets[0].name, "the same reviews sent in turn by a Go client: what the webhook itself costs over the floor",
		"mean %.2f×, p50 %.2f×", atClient[0].mean.Seconds()/atClient[last].mean.Seconds(), atClient[0].p50.Seconds()/atClient[last].p50.Seconds())
	return nil
}

// callTiming is the apiserver's timing of one target's conversion calls: the exact mean (sum ÷
// count) and the p50 interpolated in its histogram, in seconds; and, exact per call, the GETs
// as the bench timed them and the handler as the webhook's server timed it.
type callTiming struct {
	mean    time.Duration
	p50     float64
	gets    durations
	handler durations
}

// floorAttempts is how many windows timeReads tries for one in which the calls are exactly one
// per GET: a conversion another client of the cluster causes meanwhile (a controller's list,
// a watch cache) spoils a window, and is no fault of what is measured.
const floorAttempts = 3

// timeReads GETs each target's objects at v1alpha1, reads times per target, the targets in
// turn, and reports the apiserver's timing of the conversion calls they made; it returns each
// target's timing, and false when in none of floorAttempts windows the calls were one per GET
// through the targets' server (a violation, reported).
func timeReads(ctx context.Context, e *harness.Env, targets []floorTarget, reads int, r *Result) ([]callTiming, bool, error) {
	var spoiled string
	for range floorAttempts {
		timings, note, err := timeReadsOnce(ctx, e, targets, reads, r)
		if err != nil || note == "" {
			return timings, err == nil, err
		}
		spoiled = note
	}
	r.Violation("conversion call floor: not one call per GET through "+targets[0].name+" and "+targets[len(targets)-1].name, 1, fmt.Sprintf("in %d windows; the last: %s", floorAttempts, spoiled))
	return nil, false, nil
}

// timeReadsOnce is one window of timeReads; note says how it was spoiled, empty when it was not.
// The targets share one server; each round starts with the next target, so that neither
// always follows the other.
func timeReadsOnce(ctx context.Context, e *harness.Env, targets []floorTarget, reads int, r *Result) ([]callTiming, string, error) {
	before := make([]harness.Conversions, len(targets))
	for i, t := range targets {
		var err error
		if before[i], err = harness.APIServerConversions(ctx, e.Kube, t.crd); err != nil {
			return nil, "", err
		}
	}
	server := targets[0].server
	server.HandlerTimesByPath()
	server.Protocols()
	shortcutsBefore := conversion.LosslessShortcuts("v1alpha1")
	inBytesBefore := conversion.ShortcutsInBytes("v1alpha1")
	gets := make([][]time.Duration, len(targets))
	for i := range reads {
		for j := range targets {
			k := (i + j) % len(targets)
			t := targets[k]
			began := time.Now()
			if err := t.read(ctx, t.objects[i%len(t.objects)].GetName()); err != nil {
				return nil, "", fmt.Errorf("GET at v1alpha1 (%s): %w", t.name, err)
			}
			gets[k] = append(gets[k], time.Since(began))
		}
	}
	calls := make([]harness.Histogram, len(targets))
	for i, t := range targets {
		after, err := harness.APIServerConversions(ctx, e.Kube, t.crd)
		if err != nil {
			return nil, "", err
		}
		calls[i] = after.Sub(before[i]).Total()
	}
	handler, _ := server.HandlerTimesByPath()
	protocols := server.Protocols()
	// Every /convert in this process counts: the product's are the first target's calls.
	shortcuts := conversion.LosslessShortcuts("v1alpha1") - shortcutsBefore
	inBytes := conversion.ShortcutsInBytes("v1alpha1") - inBytesBefore
	for i, t := range targets {
		if served := len(handler[urlPath(t.url)]); int(calls[i].Count) != reads || served != reads {
			return nil, fmt.Sprintf("%d GETs, %.0f calls timed by the apiserver, %d served by %s", reads, calls[i].Count, served, t.url), nil
		}
	}
	timings := make([]callTiming, len(targets))
	for i, t := range targets {
		hs := summarize(handler[urlPath(t.url)])
		timings[i] = callTiming{mean: time.Duration(float64(time.Second) * calls[i].Sum / calls[i].Count), p50: calls[i].Quantile(0.5),
			gets: summarize(gets[i]), handler: hs}
		shortcut := ""
		if t.crd == taskv1.CRDName {
			shortcut = fmt.Sprintf("; %d of the calls took the converter's lossless shortcut, %d of them in bytes", shortcuts, inBytes)
		}
		r.Addf("conversion call floor, apiserver, one GET at a time: "+t.name,
			fmt.Sprintf("%d GETs at v1alpha1, one call each, in turn with the other webhook's, %v in all; %.0f%% ≤ 1 ms, %.0f%% ≤ 2 ms (the first buckets: p50 ≤ 0.5 ms needs all ≤ 1 ms); handler p50 %s, mean %s; object %s%s",
				reads, protocols, 100*calls[i].Within(0.001), 100*calls[i].Within(0.002), hs.p50, hs.mean, objectSize(t.objects[0]), shortcut),
			"mean %s, p50 %.2f ms / p99 %.2f ms", timings[i].mean.Round(time.Microsecond), 1000*calls[i].Quantile(0.5), 1000*calls[i].Quantile(0.99))
	}
	return timings, "", nil
}

// urlPath is the path of a webhook's URL, as its server's timing keys it.
func urlPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Path
}

func objectSize(obj *unstructured.Unstructured) string {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%d bytes", len(raw))
}

// reviewClient speaks to a conversion server as the apiserver does: over TLS, connections
// kept, HTTP/2 if asked and offered.
func reviewClient(caBundle []byte, http2 bool) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return nil, errors.New("floor probe: the conversion server's CA bundle holds no certificate")
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: http2}
	return &http.Client{Timeout: 10 * time.Second, Transport: transport}, nil
}

// timeReviews sends the review asking for each target's objects at v1alpha1, reads times per
// target, the targets in turn as timeReadsOnce reads them, and reports the round trip as the
// client times it; it returns each target's summary.
func timeReviews(ctx context.Context, client *http.Client, targets []floorTarget, reads int, r *Result) ([]durations, error) {
	bodies := make([][][]byte, len(targets))
	for i, t := range targets {
		var err error
		if bodies[i], err = reviewBodies(t.objects); err != nil {
			return nil, err
		}
	}
	taken := make([][]time.Duration, len(targets))
	protos := make([]string, len(targets))
	for i := range reads + 1 {
		for j := range targets {
			k := (i + j) % len(targets)
			began := time.Now()
			var err error
			if protos[k], err = postReview(ctx, client, targets[k].url, bodies[k][i%len(bodies[k])]); err != nil {
				return nil, fmt.Errorf("review to %s: %w", targets[k].name, err)
			}
			if i > 0 { // the first round opens the connection
				taken[k] = append(taken[k], time.Since(began))
			}
		}
	}
	out := make([]durations, len(targets))
	for k, t := range targets {
		out[k] = summarize(taken[k])
		r.Addf("conversion call floor, Go client, one at a time: "+t.name, fmt.Sprintf("%d reviews of one object, %s over loopback TLS, connection kept, in turn with the other webhook's", reads, protos[k]),
			"mean %s, p50 %s / p99 %s", out[k].mean, out[k].p50, out[k].p99)
	}
	return out, nil
}

// reviewBodies encodes, for each object, the review the apiserver sends to read it at v1alpha1.
func reviewBodies(objects []*unstructured.Unstructured) ([][]byte, error) {
	bodies := make([][]byte, len(objects))
	for i, obj := range objects {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return nil, err
		}
		review := apix.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apix.SchemeGroupVersion.String(), Kind: "ConversionReview"},
			Request: &apix.ConversionRequest{UID: "floor-probe", DesiredAPIVersion: obj.GroupVersionKind().Group + "/v1alpha1",
				Objects: []runtime.RawExtension{{Raw: raw}}},
		}
		if bodies[i], err = json.Marshal(&review); err != nil {
			return nil, err
		}
	}
	return bodies, nil
}

// postReview sends one review and checks the answer holds one object; it returns the HTTP
// version spoken.
func postReview(ctx context.Context, client *http.Client, url string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var review apix.ConversionReview
	if err := json.Unmarshal(answer, &review); err != nil || review.Response == nil || len(review.Response.ConvertedObjects) != 1 {
		return "", fmt.Errorf("status %d, answer %.200q: %v", resp.StatusCode, answer, err)
	}
	return resp.Proto, nil
}

// durations is a summary of timings, rounded to the microsecond.
type durations struct{ mean, p50, p99 time.Duration }

// ratio is a ÷ b; 0 when b is.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}

func summarize(d []time.Duration) durations {
	if len(d) == 0 {
		return durations{}
	}
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	var sum time.Duration
	for _, x := range sorted {
		sum += x
	}
	us := func(x time.Duration) time.Duration { return x.Round(time.Microsecond) }
	return durations{mean: us(sum / time.Duration(len(sorted))), p50: us(quantile(sorted, 0.5)), p99: us(quantile(sorted, 0.99))}
}

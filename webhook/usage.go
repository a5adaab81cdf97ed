package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"

	"example.com/task-operator/versions"
)

// The validating webhook sees every write of a Task, at every version, status included (the
// mutating one is spared v1 status writes), with the version the client wrote at and who it
// is: it counts them, for `task-operator versions` to tell who still writes at an old version.
// Reads and deletes never reach admission; the apiserver's own metrics and audit log are the
// only record of those.
//
// The ConfigMap the record is kept in (one data key per replica):
// +kubebuilder:rbac:groups="",namespace=task-operator-system,resources=configmaps,verbs=create
// +kubebuilder:rbac:groups="",namespace=task-operator-system,resources=configmaps,resourceNames=task-operator-version-usage,verbs=get;patch

// admissionRequests counts admitted writes by the version written at, the operation and a
// class of user with a handful of values, so that its cardinality stays bounded whoever the
// clients are; the record names them.
var admissionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "taskoperator_admission_requests_total",
	Help: "Task writes admitted by the validating webhook, by the API version the client wrote at, the operation (CREATE, UPDATE) and the class of user (serviceaccount, node, system, user).",
}, []string{"version", "operation", "user_class"})

func init() { metrics.Registry.MustRegister(admissionRequests) }

// userClass maps a user name to a bounded label value.
func userClass(user string) string {
	switch {
	case strings.HasPrefix(user, "system:serviceaccount:"):
		return "serviceaccount"
	case strings.HasPrefix(user, "system:node:"):
		return "node"
	case strings.HasPrefix(user, "system:"):
		return "system"
	default:
		return "user"
	}
}

// UsageRecorder keeps the rolling record of writes per version, user and field manager, and
// writes it to the ConfigMap versions.UsageConfigMap at most once per interval, under this
// replica's key, when it changed. The record holds at most versions.MaxUsageEntries entries:
// the one seen least recently makes room.
type UsageRecorder struct {
	c         client.Client
	live      client.Reader
	namespace string
	interval  time.Duration
	replica   string
	now       func() time.Time

	mu      sync.Mutex
	since   time.Time
	entries map[usageKey]*versions.UsageEntry
	evicted int
	dirty   bool
	// resumed says the record this replica's key held when the process started (a restarted
	// container keeps its host name) has been merged in, so that a flush does not replace it
	// with only what this process saw.
	resumed bool
}

type usageKey struct{ version, user, agent string }

// NewUsageRecorder records into namespace's ConfigMap through c every interval; live reads the
// record a restarted replica resumes. It must read the API server, not a cache: a cache of
// ConfigMaps would watch every namespace's, which the operator may not list.
func NewUsageRecorder(c client.Client, live client.Reader, namespace string, interval time.Duration) *UsageRecorder {
	host, _ := os.Hostname()
	return &UsageRecorder{
		c: c, live: live, namespace: namespace, interval: interval, replica: configMapKey(host), now: time.Now,
		since: time.Now().UTC(), entries: map[usageKey]*versions.UsageEntry{},
	}
}

var badKeyChars = regexp.MustCompile(`[^-._a-zA-Z0-9]`)

func configMapKey(s string) string {
	if s = badKeyChars.ReplaceAllString(s, "_"); s == "" {
		return "operator"
	}
	return s
}

// observe counts one admission request; dry runs are not writes and are not counted.
// admissionOperations are the operations an AdmissionReview names.
var admissionOperations = []string{string(admissionv1.Create), string(admissionv1.Update), string(admissionv1.Delete), string(admissionv1.Connect)}

// boundedLabel is value if it is one of known, else "other": the webhook answers whoever calls
// it, and a label taken as sent would let a caller add series without bound.
func boundedLabel(value string, known []string) string {
	if slices.Contains(known, value) {
		return value
	}
	return "other"
}

func (r *UsageRecorder) observe(req admission.Request) {
	if req.DryRun != nil && *req.DryRun {
		return
	}
	version := req.Kind.Version
	if req.RequestKind != nil {
		version = req.RequestKind.Version
	}
	admissionRequests.WithLabelValues(boundedLabel(version, conversion.ServedVersions()), boundedLabel(string(req.Operation), admissionOperations),
		userClass(req.UserInfo.Username)).Inc()
	if r == nil {
		return
	}
	k := usageKey{version: version, user: req.UserInfo.Username, agent: agentOf(req, version)}
	now := r.now().UTC().Truncate(time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty = true
	if e, ok := r.entries[k]; ok {
		e.Count++
		e.Last = now
		return
	}
	if len(r.entries) >= versions.MaxUsageEntries {
		r.evictOldest()
	}
	r.entries[k] = &versions.UsageEntry{Version: k.version, User: k.user, Agent: k.agent, Count: 1, First: now, Last: now}
}

func (r *UsageRecorder) evictOldest() {
	// Writers at the storage version go first: the record is read to find who still writes at
	// an old one, and many v1 writers must not push that one out.
	var oldest usageKey
	var at time.Time
	oldestStorage := false
	for k, e := range r.entries {
		storage := k.version == taskv1.GroupVersion.Version
		switch {
		case at.IsZero(), storage && !oldestStorage, storage == oldestStorage && e.Last.Before(at):
			oldest, at, oldestStorage = k, e.Last, storage
		}
	}
	delete(r.entries, oldest)
	r.evicted++
}

// agentOf names the write's agent, its field manager: the one the client gave in the
// operation's options (CreateOptions, UpdateOptions, PatchOptions), else the manager whose
// managedFields entry this write changed (writerOf), else "": unknown, never a guess.
func agentOf(req admission.Request, version string) string {
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	if len(req.Options.Raw) > 0 && json.Unmarshal(req.Options.Raw, &opts) == nil && opts.FieldManager != "" {
		return opts.FieldManager
	}
	updated, ok := managedFieldsOf(req.Object.Raw)
	if !ok {
		return ""
	}
	var old []metav1.ManagedFieldsEntry
	if req.Operation != admissionv1.Create {
		if old, ok = managedFieldsOf(req.OldObject.Raw); !ok {
			return ""
		}
	}
	return writerOf(old, updated, req.SubResource, version)
}

func managedFieldsOf(raw []byte) ([]metav1.ManagedFieldsEntry, bool) {
	var obj struct {
		Metadata struct {
			ManagedFields []metav1.ManagedFieldsEntry `json:"managedFields"`
		} `json:"metadata"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	return obj.Metadata.ManagedFields, true
}

// writerOf is the manager of the one managedFields entry, at the version and subresource
// written, that the write changed, "" when there is not exactly one. The apiserver records a
// write (before admission) in its manager's entry only: a new entry, a new time, or fields the
// entry did not own. Another manager's entry can only lose fields, and the newest entry is no
// evidence (times are whole seconds; a write that only removes another manager's fields, or
// sets fields its manager owns already within the same second, changes no entry of its own).
func writerOf(old, updated []metav1.ManagedFieldsEntry, subresource, version string) string {
	writer := ""
	for _, e := range updated {
		if e.Subresource != subresource || !strings.HasSuffix(e.APIVersion, "/"+version) || !changedBy(e, old) {
			continue
		}
		if writer != "" && writer != e.Manager {
			return "" // two managers' entries changed: which one wrote cannot be told
		}
		writer = e.Manager
	}
	return writer
}

// changedBy says whether the write recorded itself in entry e: old has no entry of the same
// manager, operation, version and subresource, or that entry has another time, or e owns a
// field it did not.
func changedBy(e metav1.ManagedFieldsEntry, old []metav1.ManagedFieldsEntry) bool {
	i := slices.IndexFunc(old, func(o metav1.ManagedFieldsEntry) bool {
		return o.Manager == e.Manager && o.Operation == e.Operation && o.APIVersion == e.APIVersion && o.Subresource == e.Subresource
	})
	if i < 0 {
		return true
	}
	o := old[i]
	if (o.Time == nil) != (e.Time == nil) || (e.Time != nil && !e.Time.Equal(o.Time)) {
		return true
	}
	fields, err := fieldSet(e.FieldsV1)
	if err != nil {
		return false
	}
	before, err := fieldSet(o.FieldsV1)
	if err != nil {
		return false
	}
	return !fields.Difference(before).Empty()
}

func fieldSet(f *metav1.FieldsV1) (*fieldpath.Set, error) {
	s := &fieldpath.Set{}
	if f == nil || len(f.Raw) == 0 {
		return s, nil
	}
	return s, s.FromJSON(bytes.NewReader(f.Raw))
}

// snapshot is the record as it stands, most recently seen first, and whether it changed
// since the last snapshot.
func (r *UsageRecorder) snapshot() (versions.UsageRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := versions.UsageRecord{Replica: r.replica, Since: r.since, Updated: r.now().UTC().Truncate(time.Second), Evicted: r.evicted}
	for _, e := range r.entries {
		rec.Entries = append(rec.Entries, *e)
	}
	slices.SortFunc(rec.Entries, func(a, b versions.UsageEntry) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.Version+a.User+a.Agent, b.Version+b.User+b.Agent)
	})
	dirty := r.dirty
	r.dirty = false
	return rec, dirty
}

// Start writes the record every interval until ctx ends, and once more then. Every replica
// records what it admitted, so it needs no leader election.
func (r *UsageRecorder) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("usage-record")
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := r.flush(flushCtx); err != nil {
				log.Error(err, "write the version usage record at shutdown")
			}
			return nil
		case <-tick.C:
			if err := r.flush(ctx); err != nil {
				log.Error(err, "write the version usage record")
			}
		}
	}
}

// NeedLeaderElection is false: see Start.
func (r *UsageRecorder) NeedLeaderElection() bool { return false }

func (r *UsageRecorder) flush(ctx context.Context) error {
	if err := r.resume(ctx); err != nil {
		return fmt.Errorf("ConfigMap %s/%s: read the record to resume: %w", r.namespace, versions.UsageConfigMap, err)
	}
	rec, dirty := r.snapshot()
	if !dirty {
		return nil
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{r.replica: string(raw)}})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: versions.UsageConfigMap}}
	err = r.c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		cm.Data = map[string]string{r.replica: string(raw)}
		err = r.c.Create(ctx, cm)
	}
	if err != nil {
		r.mu.Lock()
		r.dirty = true // try again next time
		r.mu.Unlock()
		return fmt.Errorf("ConfigMap %s/%s: %w", r.namespace, versions.UsageConfigMap, err)
	}
	return nil
}

// resume merges into the record, once, what this replica's key already holds: the record of an
// earlier process on the same host. Its entries keep their counts and times (one seen by both
// adds up), its start is the record's if earlier, and the bound holds as for new entries.
func (r *UsageRecorder) resume(ctx context.Context) error {
	r.mu.Lock()
	done := r.resumed
	r.mu.Unlock()
	if done {
		return nil
	}
	var cm corev1.ConfigMap
	err := r.live.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: versions.UsageConfigMap}, &cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var stored versions.UsageRecord
	if raw, ok := cm.Data[r.replica]; ok {
		if err := json.Unmarshal([]byte(raw), &stored); err != nil {
			stored = versions.UsageRecord{} // unreadable: versions status reports it; this write replaces it
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumed = true
	if !stored.Since.IsZero() && stored.Since.Before(r.since) {
		r.since = stored.Since
	}
	r.evicted += stored.Evicted
	if len(stored.Entries) > 0 {
		r.dirty = true
	}
	for _, e := range stored.Entries {
		k := usageKey{version: e.Version, user: e.User, agent: e.Agent}
		if have, ok := r.entries[k]; ok {
			have.Count += e.Count
			have.First = minTime(have.First, e.First)
			have.Last = maxTime(have.Last, e.Last)
			continue
		}
		if len(r.entries) >= versions.MaxUsageEntries {
			r.evictOldest()
		}
		entry := e
		r.entries[k] = &entry
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

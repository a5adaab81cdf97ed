package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	taskv1 "example.com/task-operator/apis/v1"
	"example.com/task-operator/conversion"
)

// The /convert handler's metrics (the names are the ones dashboards and alerts use).
var (
	convertRequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskoperator_conversion_requests_total",
		Help: "ConversionReview requests served, by desired version and result (success; invalid: an object the converter refuses, a client's bad write; failure; malformed).",
	}, []string{"to", "result"})

	convertRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "taskoperator_conversion_request_duration_seconds",
		Help:    "Time to serve one ConversionReview, by desired version.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	}, []string{"to"})

	convertObjectsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "taskoperator_conversion_objects_total",
		Help: "Objects converted, by source and target version and result (success, invalid, failure).",
	}, []string{"from", "to", "result"})

	convertObjectDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "taskoperator_conversion_object_duration_seconds",
		Help:    "Time to convert one object, by source and target version.",
		Buckets: prometheus.ExponentialBuckets(0.000005, 4, 10),
	}, []string{"from", "to"})
)

// losslessShortcutsName counts, by old version, what conversion.LosslessShortcuts does, and
// shortcutsInBytesName what conversion.ShortcutsInBytes does.
const (
	losslessShortcutsName = "taskoperator_conversion_lossless_shortcuts_total"
	shortcutsInBytesName  = "taskoperator_conversion_shortcuts_in_bytes_total"
)

func init() {
	metrics.Registry.MustRegister(convertRequestsTotal, convertRequestDuration, convertObjectsTotal, convertObjectDuration)
	for _, version := range conversion.ServedVersions() {
		if version == taskv1.GroupVersion.Version {
			continue
		}
		metrics.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        losslessShortcutsName,
			Help:        "Objects converted from v1 to an old version without working out what they lose: their body as sent showed they lose nothing.",
			ConstLabels: prometheus.Labels{"to": version},
		}, func() float64 { return float64(conversion.LosslessShortcuts(version)) }))
		metrics.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        shortcutsInBytesName,
			Help:        "Of the lossless shortcuts, those the old version's template answered from the bytes as sent, without a typed object.",
			ConstLabels: prometheus.Labels{"to": version},
		}, func() float64 { return float64(conversion.ShortcutsInBytes(version)) }))
	}
}

// metricVersion is a version as a metric label: only served versions, so that a request cannot
// mint label values.
func metricVersion(version string) string {
	if version == "" {
		return "unknown"
	}
	return version
}

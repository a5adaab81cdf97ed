package lossless_test

import (
	"fmt"
	"math/rand/v2"
)

// An edit is a change a client makes to a Task read at an old version, and the change it must
// make to the stored v1 Task: the README's rules ("Hidden fields follow what owns them") stated
// once more, independently of conversion/, so that the two are held against each other.
type edit struct {
	name string
	// status says the edit is written to the status subresource.
	status bool
	// spoke changes the object as read at the old version.
	spoke func(o obj)
	// hub changes the stored v1 object to what the edit must leave.
	hub func(o obj)
	// removes says the edit removes a field, which an apply of a manifest cannot do to a field
	// another manager owns (nor client-side apply to one its last-applied never had).
	removes bool
}

const (
	alpha = "v1alpha1"
	beta  = "v1beta1"
)

// randomEdit picks an edit that makes sense for the stored v1 Task hub at version.
func randomEdit(rnd *rand.Rand, version string, hub obj) edit {
	if rnd.IntN(4) == 0 {
		return randomStatusEdit(rnd, version, hub)
	}
	if version == alpha {
		return randomAlphaEdit(rnd, hub)
	}
	return randomBetaEdit(rnd, hub)
}

func isShell(hub obj) bool { return field(hub, "spec.runner.type") == "Shell" }

func set(path string, v any) func(o obj) { return func(o obj) { setField(o, path, v) } }

func randomAlphaEdit(rnd *rand.Rand, hub obj) edit {
	choices := []func() edit{
		func() edit {
			r := int64(1 + rnd.IntN(6))
			return edit{name: "replicas", spoke: set("spec.replicas", r), hub: set("spec.parallelism", r)}
		},
		func() edit {
			m := int64(rnd.IntN(6))
			return edit{name: "maxRetry", spoke: set("spec.maxRetry", m), hub: set("spec.retry.maxRetries", m)}
		},
	}
	if isShell(hub) {
		choices = append(choices,
			func() edit {
				s := text(rnd)
				return edit{name: "shell", spoke: set("spec.shell", s), hub: set("spec.runner.shell.script", s)}
			},
			func() edit {
				u := randomURL(rnd)
				return edit{name: "switch to http", removes: true,
					spoke: func(o obj) {
						setField(o, "spec.type", "http")
						setField(o, "spec.shell", nil)
						setField(o, "spec.url", u)
					},
					hub: set("spec.runner", obj{"type": "HTTP", "http": obj{"url": u, "method": "GET", "timeout": "30s"}}),
				}
			})
	} else {
		choices = append(choices,
			func() edit {
				u := randomURL(rnd)
				return edit{name: "url", spoke: set("spec.url", u), hub: func(o obj) {
					if field(o, "spec.runner.http.url") != u {
						setField(o, "spec.runner.http", obj{"url": u, "method": "GET", "timeout": "30s"})
					}
				}}
			},
			func() edit {
				s := text(rnd)
				return edit{name: "switch to shell", removes: true,
					spoke: func(o obj) {
						setField(o, "spec.type", "shell")
						setField(o, "spec.url", nil)
						setField(o, "spec.shell", s)
					},
					hub: set("spec.runner", obj{"type": "Shell", "shell": obj{"script": s}}),
				}
			})
	}
	return pick(rnd, choices...)()
}

func randomBetaEdit(rnd *rand.Rand, hub obj) edit {
	choices := []func() edit{
		func() edit {
			p := int64(1 + rnd.IntN(6))
			return edit{name: "parallelism", spoke: set("spec.parallelism", p), hub: set("spec.parallelism", p)}
		},
		func() edit {
			m := int64(rnd.IntN(6))
			return edit{name: "maxRetries", spoke: set("spec.maxRetries", m), hub: set("spec.retry.maxRetries", m)}
		},
		func() edit {
			on := field(hub, "spec.suspend") != true
			var v any // false is left out at v1beta1, and then at v1
			if on {
				v = true
			}
			return edit{name: "suspend", spoke: set("spec.suspend", v), hub: set("spec.suspend", v), removes: !on}
		},
		func() edit { return scheduleEdit(rnd, hub) },
	}
	if isShell(hub) {
		choices = append(choices,
			func() edit {
				s := text(rnd)
				return edit{name: "script", spoke: set("spec.runner.shell.script", s), hub: set("spec.runner.shell.script", s)}
			},
			func() edit {
				image := pick[any](rnd, "alpine:3.21", nil)
				return edit{name: "image", spoke: set("spec.runner.shell.image", image), hub: set("spec.runner.shell.image", image), removes: image == nil}
			},
			func() edit {
				u, m := randomURL(rnd), pick(rnd, "GET", "POST")
				return edit{name: "switch to HTTP", removes: true,
					spoke: set("spec.runner", obj{"type": "HTTP", "http": obj{"url": u, "method": m}}),
					hub:   set("spec.runner", obj{"type": "HTTP", "http": obj{"url": u, "method": m, "timeout": "30s"}}),
				}
			})
	} else {
		choices = append(choices,
			func() edit {
				u := randomURL(rnd)
				return edit{name: "url", spoke: set("spec.runner.http.url", u), hub: func(o obj) {
					if field(o, "spec.runner.http.url") == u {
						return
					}
					setField(o, "spec.runner.http.url", u)
					setField(o, "spec.runner.http.body", nil)
					setField(o, "spec.runner.http.acceptedStatusCodes", nil)
					setField(o, "spec.runner.http.timeout", "30s")
				}}
			},
			func() edit {
				m := pick(rnd, "GET", "HEAD", "PATCH")
				return edit{name: "method", spoke: set("spec.runner.http.method", m), hub: set("spec.runner.http.method", m)}
			},
			func() edit {
				// Replacing the list removes entries, which apply cannot do to entries another
				// manager owns (a list of listType map merges by name).
				headers := pick[any](rnd, []any{obj{"name": "X-Team", "value": text(rnd)}}, nil)
				return edit{name: "headers", spoke: set("spec.runner.http.headers", headers), hub: set("spec.runner.http.headers", headers), removes: true}
			},
			func() edit {
				s := text(rnd)
				return edit{name: "switch to Shell", removes: true,
					spoke: set("spec.runner", obj{"type": "Shell", "shell": obj{"script": s}}),
					hub:   set("spec.runner", obj{"type": "Shell", "shell": obj{"script": s}}),
				}
			})
	}
	return pick(rnd, choices...)()
}

func scheduleEdit(rnd *rand.Rand, hub obj) edit {
	cron := pick(rnd, "15 4 * * *", "@daily", "*/10 * * * *")
	switch {
	case field(hub, "spec.schedule") == nil:
		return edit{name: "schedule added", spoke: set("spec.schedule", cron), hub: func(o obj) {
			setField(o, "spec.schedule", obj{"cron": cron, "concurrencyPolicy": "Allow"})
			for path, limit := range map[string]int64{"spec.successfulJobsHistoryLimit": 3, "spec.failedJobsHistoryLimit": 1} {
				if field(o, path) == nil {
					setField(o, path, limit)
				}
			}
		}}
	case rnd.IntN(2) == 0:
		return edit{name: "schedule removed", spoke: set("spec.schedule", nil), hub: set("spec.schedule", nil), removes: true}
	default:
		return edit{name: "cron changed", spoke: set("spec.schedule", cron), hub: set("spec.schedule.cron", cron)}
	}
}

func randomStatusEdit(rnd *rand.Rand, version string, hub obj) edit {
	job := fmt.Sprintf("job-%d", rnd.IntN(100))
	if version == alpha {
		return pick(rnd,
			func() edit {
				p := pick(rnd, "Running", "Failed")
				return edit{name: "state", status: true, spoke: set("status.state", p), hub: set("status.phase", p)}
			},
			func() edit {
				return edit{name: "lastJobName", status: true, spoke: set("status.lastJobName", job), hub: func(o obj) {
					if field(o, "status.lastJob.name") != job {
						setField(o, "status.lastJob", obj{"name": job})
					}
				}}
			},
			func() edit {
				c := int64(rnd.IntN(4))
				return edit{name: "retryCount", status: true, spoke: set("status.retryCount", c), hub: set("status.attempts", c+1)}
			},
			func() edit {
				e := text(rnd)
				return edit{name: "lastError", status: true, spoke: set("status.lastError", e), hub: set("status.lastError", e)}
			},
		)()
	}
	return pick(rnd,
		func() edit {
			p := pick(rnd, "Running", "Failed")
			return edit{name: "phase", status: true, spoke: set("status.phase", p), hub: set("status.phase", p)}
		},
		func() edit {
			a := int64(1 + rnd.IntN(4))
			return edit{name: "attempts", status: true, spoke: set("status.attempts", a), hub: set("status.attempts", a)}
		},
		func() edit {
			return edit{name: "lastJobName", status: true, spoke: set("status.lastJobName", job), hub: func(o obj) {
				if field(o, "status.lastJob.name") != job {
					setField(o, "status.lastJob", obj{"name": job})
				}
			}}
		},
	)()
}

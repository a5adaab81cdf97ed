package lossless_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The generator makes random Tasks the v1 schema accepts, as decoded JSON, in the spellings a
// client may use (durations as "5m" or "300s", explicit false), and random edits at the old
// versions with the v1 result each must have.

// obj is a Task or a part of one, as decoded JSON.
type obj = map[string]any

func pick[T any](rnd *rand.Rand, choices ...T) T { return choices[rnd.IntN(len(choices))] }

// text is short random text with characters JSON escapes (<, >, &, quotes) and non-ASCII.
func text(rnd *rand.Rand) string {
	parts := []string{"echo", "<b>", "&&", `"q"`, "ünïcødé", "$HOME", "x", "--flag=1", "日本"}
	var b strings.Builder
	for range 1 + rnd.IntN(5) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(pick(rnd, parts...))
	}
	return b.String()
}

func duration(rnd *rand.Rand, choices ...string) string { return pick(rnd, choices...) }

// randomSpec is a valid v1 spec.
func randomSpec(rnd *rand.Rand) obj {
	spec := obj{"parallelism": int64(1 + rnd.IntN(4))}
	if rnd.IntN(2) == 0 {
		spec["runner"] = obj{"type": "Shell", "shell": randomShell(rnd)}
	} else {
		spec["runner"] = obj{"type": "HTTP", "http": randomHTTP(rnd)}
	}
	retry := obj{"maxRetries": int64(rnd.IntN(5))}
	if rnd.IntN(2) == 0 {
		retry["backoff"] = obj{
			"initial": duration(rnd, "1s", "10s", "90s", "1m30s"),
			"factor":  int64(1 + rnd.IntN(3)),
			"max":     duration(rnd, "5m", "300s", "10m0s", "1h"),
		}
	}
	spec["retry"] = retry
	if rnd.IntN(2) == 0 {
		s := obj{"cron": pick(rnd, "0 2 * * *", "*/5 * * * *", "@hourly", "30 9 * * MON-FRI")}
		if rnd.IntN(2) == 0 {
			s["timeZone"] = pick(rnd, "UTC", "Europe/Paris", "America/New_York")
		}
		s["concurrencyPolicy"] = pick(rnd, "Allow", "Forbid", "Replace")
		if rnd.IntN(2) == 0 {
			s["startingDeadlineSeconds"] = int64(10 + rnd.IntN(100))
		}
		spec["schedule"] = s
	}
	if rnd.IntN(2) == 0 {
		spec["timeout"] = duration(rnd, "5m", "90s", "1h0m0s", "45m")
	}
	if rnd.IntN(3) == 0 {
		spec["ttlSecondsAfterFinished"] = int64(rnd.IntN(1000))
	}
	if rnd.IntN(3) == 0 {
		spec["successfulJobsHistoryLimit"] = int64(rnd.IntN(5))
	}
	if rnd.IntN(3) == 0 {
		spec["failedJobsHistoryLimit"] = int64(rnd.IntN(5))
	}
	spec["suspend"] = rnd.IntN(2) == 0 // explicit, true or false
	return spec
}

func randomShell(rnd *rand.Rand) obj {
	shell := obj{"script": text(rnd)}
	if rnd.IntN(2) == 0 {
		shell["image"] = pick(rnd, "alpine:3.20", "busybox:1.37", "registry.example/tools:v2")
	}
	if n := rnd.IntN(4); n > 0 {
		var env []any
		for i := range n {
			env = append(env, obj{"name": fmt.Sprintf("VAR_%d", i), "value": text(rnd)})
		}
		shell["env"] = env
	}
	return shell
}

func randomURL(rnd *rand.Rand) string {
	return fmt.Sprintf("https://host%d.example/%s", rnd.IntN(5), pick(rnd, "hook", "rebuild", "a/b?c=d"))
}

func randomHTTP(rnd *rand.Rand) obj {
	h := obj{"url": randomURL(rnd), "method": pick(rnd, "GET", "POST", "PUT", "DELETE")}
	if rnd.IntN(2) == 0 {
		h["headers"] = []any{obj{"name": "Authorization", "value": "Bearer " + text(rnd)}}
	}
	if rnd.IntN(2) == 0 {
		h["body"] = `{"q": "` + text(rnd) + `"}`
	}
	h["timeout"] = duration(rnd, "5s", "30s", "90s", "1m")
	if rnd.IntN(2) == 0 {
		h["acceptedStatusCodes"] = []any{int64(200), int64(202)}
	}
	return h
}

// randomStatus is a status the operator could have written.
func randomStatus(rnd *rand.Rand, name string) obj {
	attempt := int64(1 + rnd.IntN(3))
	job := fmt.Sprintf("%s-%d", name, attempt)
	st := obj{
		"phase":              pick(rnd, "Running", "Succeeded", "Failed", "Scheduled", "Retrying"),
		"attempts":           attempt,
		"lastJob":            obj{"name": job, "uid": fmt.Sprintf("uid-%d", rnd.IntN(1000))},
		"observedGeneration": int64(1),
		"startTime":          "2026-11-30T10:00:00Z",
		"conditions": []any{obj{
			"type": "Ready", "status": "True", "reason": "Healthy", "message": text(rnd),
			"lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": int64(1),
		}},
		"missedRuns":              int64(rnd.IntN(3)),
		"lastPhaseTransitionTime": "2026-11-30T10:00:01Z",
	}
	if rnd.IntN(2) == 0 {
		st["lastError"] = text(rnd)
	}
	if rnd.IntN(2) == 0 {
		st["activeJobs"] = []any{obj{"name": job, "uid": "uid-a"}}
	}
	return st
}

// field returns the value at a dotted path, or nil.
func field(o obj, path string) any {
	var cur any = o
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// setField sets the value at a dotted path, creating objects on the way; nil deletes it.
func setField(o obj, path string, v any) {
	keys := strings.Split(path, ".")
	cur := o
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = obj{}
			cur[k] = next
		}
		cur = next
	}
	if v == nil {
		delete(cur, keys[len(keys)-1])
		return
	}
	cur[keys[len(keys)-1]] = v
}

func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = clone(e)
		}
		return out
	default:
		return v
	}
}

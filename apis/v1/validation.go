package v1

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	// Time zones must resolve even in an image without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CronSchedule is a parsed spec.schedule: the cron expression evaluated in the Task's time zone.
// The admission webhook and the reconciler both parse with ParseSchedule, so a schedule the API
// accepts is one the reconciler can run.
// +kubebuilder:object:generate=false
type CronSchedule struct {
	cron cron.Schedule
	loc  *time.Location
}

// Next is the first schedule time strictly after t, or the zero time if there is none.
func (s CronSchedule) Next(t time.Time) time.Time {
	n := s.next(t)
	// robfig/cron re-checks the day (the hour) only when the hour (the minute) wraps to 0; a
	// clock change that skips that 0 leaves it in a day or hour it never checked.
	for i := 0; i < 1000 && !n.IsZero() && !s.matches(n); i++ {
		n = s.next(n)
	}
	return n
}

// next is robfig/cron's answer, corrected where it goes past a clock change or lands in a
// repeated hour; Next checks that it is a time the expression names.
func (s CronSchedule) next(t time.Time) time.Time {
	n := s.cron.Next(t.In(s.loc))
	if n.IsZero() || n.After(t) {
		return s.notPastAClockChange(t, n)
	}
	return s.nextAfterRepeatedHour(t, n)
}

// matches says u's wall clock in the zone is one the expression names, by robfig/cron's own
// rule for day of month against day of week (either, unless one is a *).
func (s CronSchedule) matches(u time.Time) bool {
	ss, ok := s.cron.(*cron.SpecSchedule)
	if !ok {
		return true
	}
	l := u.In(s.loc)
	dom, dow := 1<<uint(l.Day())&ss.Dom != 0, 1<<uint(l.Weekday())&ss.Dow != 0
	day := dom || dow
	if ss.Dom&(1<<63) != 0 || ss.Dow&(1<<63) != 0 {
		day = dom && dow
	}
	return day && 1<<uint(l.Second())&ss.Second != 0 && 1<<uint(l.Minute())&ss.Minute != 0 &&
		1<<uint(l.Hour())&ss.Hour != 0 && 1<<uint(l.Month())&ss.Month != 0
}

// notPastAClockChange answers Next when robfig/cron answered n, after t, and the time zone's
// clocks change between an hour before t and n. robfig/cron goes back to the whole wall hour
// before stepping an hour at a time; across a change of half an hour (Lord Howe Island's) or
// three quarters (the Chatham Islands') it then lands on hh:30 or hh:45 and climbs past the
// wanted hh:00 into the next day. Searches started at each change, and at the first whole wall
// hour after it, do not cross it; the earliest answer after t is the one.
func (s CronSchedule) notPastAClockChange(t, n time.Time) time.Time {
	for from := t.Add(-time.Hour); !n.IsZero(); {
		change, ok := s.firstClockChange(from, n)
		if !ok {
			return n
		}
		for _, start := range []time.Time{change, s.wholeHourFrom(change)} {
			if m := s.cron.Next(start.Add(-time.Second).In(s.loc)); !m.IsZero() && m.After(t) && m.Before(n) {
				n = m
			}
		}
		from = change
	}
	return n
}

// wholeHourFrom is the first instant at or after u whose wall clock reads a whole hour.
func (s CronSchedule) wholeHourFrom(u time.Time) time.Time {
	u = u.Truncate(time.Minute)
	for u.In(s.loc).Minute() != 0 {
		u = u.Add(time.Minute)
	}
	return u
}

// clockChangeScan is the step at which firstClockChange looks for a change of UTC offset:
// shorter than any time between two changes of a zone.
const clockChangeScan = 7 * 24 * time.Hour

// firstClockChange is the first second after from, not after to, at which the zone's UTC
// offset differs from the second before; ok is false if there is none.
func (s CronSchedule) firstClockChange(from, to time.Time) (time.Time, bool) {
	offset := func(u time.Time) int { _, o := u.In(s.loc).Zone(); return o }
	lo := from
	for lo.Before(to) {
		hi := lo.Add(clockChangeScan)
		if hi.After(to) {
			hi = to
		}
		if offset(lo) == offset(hi) {
			lo = hi
			continue
		}
		// The offset differs between lo and hi: halve until the second it changes.
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if offset(mid) == offset(lo) {
				lo = mid
			} else {
				hi = mid
			}
		}
		return hi, true
	}
	return time.Time{}, false
}

// nextAfterRepeatedHour answers Next when robfig/cron answered n, not after t: t lies in the
// hour a time zone repeats when its clocks go back, and n is the first occurrence of a wall
// time whose second occurrence is still to come (a daily 03:00 in Pacific/Chatham, asked at
// the second 02:50). That second occurrence is the answer; if it too has passed, the search
// moves on a minute at a time past the repeated hour.
func (s CronSchedule) nextAfterRepeatedHour(t, n time.Time) time.Time {
	_, offsetAtN := n.Zone()
	_, offsetAtT := t.In(s.loc).Zone()
	if again := n.Add(time.Duration(offsetAtN-offsetAtT) * time.Second); again.After(t) {
		return again
	}
	for probe, i := t, 0; i < 24*60; i++ {
		probe = probe.Add(time.Minute)
		if n = s.cron.Next(probe.In(s.loc)); n.IsZero() || n.After(t) {
			return n
		}
	}
	return time.Time{}
}

// Every is the interval of an "@every <duration>" schedule, whose times count from the one
// before rather than from the clock; zero for a cron expression or descriptor.
func (s CronSchedule) Every() time.Duration {
	if c, ok := s.cron.(cron.ConstantDelaySchedule); ok {
		return c.Delay
	}
	return 0
}

// cronParser reads five fields or a descriptor (@hourly, @every 5m): what a CronJob accepts.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses s; its error names the field at fault (spec.schedule.cron or
// spec.schedule.timeZone).
func ParseSchedule(s *Schedule) (CronSchedule, error) {
	if errs := validateSchedule(s, field.NewPath("spec", "schedule")); len(errs) > 0 {
		return CronSchedule{}, errs.ToAggregate()
	}
	c, _ := parseCron(s.Cron)
	loc, _ := time.LoadLocation(s.TimeZone)
	return CronSchedule{cron: c, loc: loc}, nil
}

// Validate returns every problem of task's spec that the OpenAPI schema and CEL rules cannot
// see, each naming its field.
func Validate(task *Task) field.ErrorList {
	errs := validateResources(task.Spec.Resources, field.NewPath("spec", "resources"))
	if task.Spec.Schedule != nil {
		errs = append(errs, validateSchedule(task.Spec.Schedule, field.NewPath("spec", "schedule"))...)
	}
	return errs
}

// ReservedPodLabel says the Job controller owns a pod label key: it sets job-name,
// controller-uid and batch.kubernetes.io/* on every pod of a Job and the API server refuses a
// Job whose pod template carries them. The operator never copies such a Task label to a run's
// pods, and admission refuses a Task that adds one.
func ReservedPodLabel(key string) bool {
	switch key {
	case "job-name", "controller-uid":
		return true
	}
	return strings.HasPrefix(key, "batch.kubernetes.io/")
}

// ValidateLabels refuses the reserved pod labels (ReservedPodLabel) that labels adds or
// changes relative to old (nil on create): a Task stored with one before this rule still takes
// every other write, its finalizers' removal included.
func ValidateLabels(labels, old map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		if prev, ok := old[key]; ReservedPodLabel(key) && (!ok || prev != labels[key]) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "labels").Key(key), labels[key],
				"is reserved for the Job controller, which sets it on every pod of a Job: a Task's labels are copied to its runs' pods, so use another key"))
		}
	}
	return errs
}

// validateResources checks what the Job's pods would be refused for: a resource name that is
// not a qualified name, a negative quantity, a request above its limit.
func validateResources(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for _, name := range slices.Sorted(maps.Keys(list.list)) {
			p := path.Child(list.name).Key(string(name))
			for _, msg := range validation.IsQualifiedName(string(name)) {
				errs = append(errs, field.Invalid(p, string(name), msg))
			}
			if !strings.Contains(string(name), "/") && !standardContainerResource(name) {
				errs = append(errs, field.Invalid(p, string(name), "must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>) or a prefixed extended resource"))
			}
			q := list.list[name]
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p, q.String(), "must not be negative"))
			}
			if extendedResource(name) && !q.IsZero() && q.MilliValue()%1000 != 0 {
				errs = append(errs, field.Invalid(p, q.String(), "must be an integer"))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		req := r.Requests[name]
		p := path.Child("requests").Key(string(name))
		limit, ok := r.Limits[name]
		switch {
		case ok && !overcommitAllowed(name) && req.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(p, req.String(), fmt.Sprintf("must equal its limit (%s): %s cannot be overcommitted", limit.String(), name)))
		case ok && req.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(p, req.String(), fmt.Sprintf("must not exceed its limit (%s)", limit.String())))
		case !ok && !overcommitAllowed(name):
			errs = append(errs, field.Required(path.Child("limits").Key(string(name)), fmt.Sprintf("a limit must be set for %s, which cannot be overcommitted", name)))
		}
	}
	return errs
}

// standardContainerResource, extendedResource and overcommitAllowed are the API server's rules
// for a container's resources (k8s.io/kubernetes pkg/apis/core/helper): a Job whose pods break
// them is refused.
func standardContainerResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func nativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), "kubernetes.io/")
}

func extendedResource(name corev1.ResourceName) bool {
	return !nativeResource(name) && !strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix)
}

func overcommitAllowed(name corev1.ResourceName) bool {
	return nativeResource(name) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func validateSchedule(s *Schedule, path *field.Path) field.ErrorList {
	if s == nil {
		return field.ErrorList{field.Required(path, "a schedule")}
	}
	var errs field.ErrorList
	c, err := parseCron(s.Cron)
	switch {
	case err != nil:
		errs = append(errs, field.Invalid(path.Child("cron"), s.Cron, err.Error()))
	case c.Next(time.Now()).IsZero():
		// As a CronJob's InvalidSchedule: a date that does not exist (30 February) never comes.
		errs = append(errs, field.Invalid(path.Child("cron"), s.Cron, "never comes: no such date in the next five years"))
	}
	switch _, err := time.LoadLocation(s.TimeZone); {
	case s.TimeZone == "Local":
		// As a CronJob: "Local" is whatever zone the operator's machine has, not an IANA name.
		errs = append(errs, field.Invalid(path.Child("timeZone"), s.TimeZone, "not an IANA time zone: Local is the operator's machine's zone"))
	case err != nil:
		errs = append(errs, field.Invalid(path.Child("timeZone"), s.TimeZone, "unknown time zone"))
	}
	return errs
}

// parseCron parses a cron expression. A TZ= or CRON_TZ= prefix is refused before the parser
// sees it: the time zone has a field of its own, and robfig/cron panics on a prefix without a
// following expression.
func parseCron(spec string) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("a time zone is not part of the expression: it is spec.schedule.timeZone, a field of v1")
	}
	return cronParser.Parse(spec)
}

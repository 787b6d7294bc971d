// Package schedule computes when a schedule fires: a cron expression (parsed by
// github.com/robfig/cron/v3) read in a named time zone, bounded by a start and an end time,
// with a deterministic jitter, and the overlap policy's decisions. It is pure: no I/O, no
// clock, no randomness, so workflow code may call it.
//
// Daylight saving time. robfig/cron alone skips a fixed-time run whose wall-clock time
// falls in the hour that spring-forward removes (a daily 02:30 in America/New_York does not
// run on that day) and runs it twice in the hour that fall-back repeats (a daily 01:30
// runs at 01:30 EDT and again at 01:30 EST). Package schedule follows ISC cron instead:
//
//   - A fixed-time expression (neither its minute nor its hour field starts with '*', such
//     as "30 2 * * *" or @daily) names wall-clock times. Each matched wall-clock time fires
//     exactly once: a time repeated by fall-back fires at its first occurrence only, a time
//     skipped by spring-forward fires at the transition (03:00 local), once.
//   - A wildcard expression ("0 * * * *", "*/15 * * * *", @hourly) follows the real clock:
//     it fires at every instant whose local time matches. An hourly schedule therefore runs
//     every 3600 seconds across both transitions: 23 runs on the spring-forward day and 25
//     on the fall-back day, none doubled and none lost.
//   - "@every d" fires at every multiple of d since 1970-01-01T00:00:00Z, whatever the zone.
package schedule

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	// Time zone names resolve even on hosts without a zoneinfo database.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Sentinel errors; Parse wraps them with the details.
var (
	// ErrInvalidCron: the cron expression cannot be parsed or never fires.
	ErrInvalidCron = errors.New("schedule: invalid cron expression")
	// ErrUnknownTimeZone: the time zone is not an IANA zone name.
	ErrUnknownTimeZone = errors.New("schedule: unknown time zone")
	// ErrInvalidBounds: the end time is before the start time.
	ErrInvalidBounds = errors.New("schedule: end time before start time")
)

// MinEvery is the shortest "@every" interval.
const MinEvery = time.Second

// parser reads five fields, an optional leading seconds field, and descriptors (@daily,
// @hourly, @every 6h...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is what a schedule is made of.
type Spec struct {
	// Name seeds the jitter, so that schedules with the same expression spread out.
	Name string
	// Cron is a five-field expression ("0 2 * * *"), a six-field one whose first field is
	// seconds ("*/10 * * * * *"), or a descriptor (@yearly, @monthly, @weekly, @daily,
	// @hourly, "@every 6h").
	Cron string
	// TimeZone is an IANA zone name such as "Asia/Shanghai"; empty means UTC.
	TimeZone string
	// Start, when not zero, is the earliest nominal time that fires (inclusive).
	Start time.Time
	// End, when not zero, is the latest nominal time that fires (inclusive).
	End time.Time
	// Jitter, when positive, delays each run by a fixed offset in [0, Jitter) derived from
	// Name and the nominal time: the same every time it is computed.
	Jitter time.Duration
}

// clock says how an expression relates wall-clock time to instants.
type clock int

const (
	// wallClock: a fixed-time expression; matched wall-clock times fire once each.
	wallClock clock = iota
	// realClock: a wildcard expression; instants whose local time matches fire.
	realClock
	// interval: "@every d"; multiples of d since the Unix epoch.
	interval
)

// Schedule computes a Spec's fire times. It is immutable and safe for concurrent use.
type Schedule struct {
	spec  Spec
	loc   *time.Location
	clock clock
	// cron is the parsed expression: in UTC on naive wall-clock times (wallClock), or in
	// loc (realClock).
	cron  *cron.SpecSchedule
	every time.Duration
}

// Parse checks a Spec and returns its Schedule. Errors wrap ErrInvalidCron,
// ErrUnknownTimeZone or ErrInvalidBounds.
func Parse(spec Spec) (*Schedule, error) {
	loc, err := LoadLocation(spec.TimeZone)
	if err != nil {
		return nil, err
	}
	if !spec.Start.IsZero() && !spec.End.IsZero() && spec.End.Before(spec.Start) {
		return nil, fmt.Errorf("%w: %s is before %s", ErrInvalidBounds,
			spec.End.Format(time.RFC3339), spec.Start.Format(time.RFC3339))
	}
	s := &Schedule{spec: spec, loc: loc}
	expr := strings.TrimSpace(spec.Cron)
	if every, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(every))
		if err != nil {
			return nil, fmt.Errorf("%w %q: %q is not a duration such as 90s, 30m or 6h", ErrInvalidCron, spec.Cron, every)
		}
		if d < MinEvery || d%time.Second != 0 {
			return nil, fmt.Errorf("%w %q: the interval must be a whole number of seconds, at least %s", ErrInvalidCron, spec.Cron, MinEvery)
		}
		s.clock, s.every = interval, d
		return s, nil
	}
	cs, err := ParseCron(expr)
	if err != nil {
		return nil, err
	}
	s.cron = cs
	s.clock = wallClock
	if isWildcard(expr) {
		s.clock = realClock
		s.cron.Location = loc
	} else {
		s.cron.Location = time.UTC
	}
	// An expression that matches no date at all ("0 0 30 2 *") never fires.
	// robfig searches five years ahead, which always holds a leap day.
	if s.cron.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%w %q: it matches no date", ErrInvalidCron, spec.Cron)
	}
	return s, nil
}

// ParseCron parses a cron expression (not "@every") with robfig/cron/v3: five fields, six
// with a leading seconds field, or a descriptor. The result's Location is not meaningful.
func ParseCron(expr string) (*cron.SpecSchedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidCron)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("%w %q: give the time zone separately, not in the expression", ErrInvalidCron, expr)
	}
	if strings.HasPrefix(expr, "@every") {
		return nil, fmt.Errorf("%w %q: @every needs a duration, such as \"@every 6h\"", ErrInvalidCron, expr)
	}
	parsed, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidCron, expr, err)
	}
	cs, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w %q: unsupported form", ErrInvalidCron, expr)
	}
	return cs, nil
}

// LoadLocation resolves an IANA time zone name; "" and "UTC" are UTC. "Local" is refused:
// it would mean different things on different machines.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("%w %q: name a zone, such as Asia/Shanghai or UTC", ErrUnknownTimeZone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q: must be an IANA zone name such as Asia/Shanghai, Europe/Berlin or UTC", ErrUnknownTimeZone, name)
	}
	return loc, nil
}

// isWildcard reports whether an expression follows the real clock: its minute or hour
// field starts with '*' (or '?'), or it is @hourly.
func isWildcard(expr string) bool {
	if strings.HasPrefix(expr, "@") {
		return expr == "@hourly"
	}
	f := strings.Fields(expr)
	if len(f) == 6 { // seconds first
		f = f[1:]
	}
	if len(f) < 2 {
		return false
	}
	star := func(s string) bool { return strings.HasPrefix(s, "*") || strings.HasPrefix(s, "?") }
	return star(f[0]) || star(f[1])
}

// Spec returns the schedule's spec.
func (s *Schedule) Spec() Spec { return s.spec }

// Location returns the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// NextAfter returns the first nominal fire time strictly after t, within the schedule's
// start and end, or false when there is none. The time is in the schedule's zone.
func (s *Schedule) NextAfter(t time.Time) (time.Time, bool) {
	if !s.spec.Start.IsZero() && t.Before(s.spec.Start) {
		t = s.spec.Start.Add(-time.Nanosecond)
	}
	n := s.next(t)
	if n.IsZero() || (!s.spec.End.IsZero() && n.After(s.spec.End)) {
		return time.Time{}, false
	}
	return n.In(s.loc), true
}

// Next returns up to n nominal fire times after t, in order.
func (s *Schedule) Next(t time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		next, ok := s.NextAfter(t)
		if !ok {
			break
		}
		out = append(out, next)
		t = next
	}
	return out
}

// FireTimesBetween returns the nominal fire times in [from, to), in order, at most limit
// of them; truncated reports whether there were more.
func (s *Schedule) FireTimesBetween(from, to time.Time, limit int) (times []time.Time, truncated bool) {
	t := from.Add(-time.Nanosecond)
	for {
		next, ok := s.NextAfter(t)
		if !ok || !next.Before(to) {
			return times, false
		}
		if len(times) == limit {
			return times, true
		}
		times = append(times, next)
		t = next
	}
}

// Jitter returns the delay of the run of a nominal time: a fixed offset in [0, Spec.Jitter),
// at millisecond resolution, derived from the schedule's name and the nominal time.
func (s *Schedule) Jitter(nominal time.Time) time.Duration {
	ms := uint64(s.spec.Jitter / time.Millisecond)
	if ms == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(s.spec.Name))
	h.Write([]byte{0})
	h.Write([]byte(nominal.UTC().Format(time.RFC3339Nano)))
	return time.Duration(h.Sum64()%ms) * time.Millisecond
}

// FireTime is when the run of a nominal time is due: the nominal time plus its jitter.
func (s *Schedule) FireTime(nominal time.Time) time.Time {
	return nominal.Add(s.Jitter(nominal))
}

// maxSteps bounds the searches below; no real expression comes near it.
const maxSteps = 100000

// next returns the first fire instant strictly after t, ignoring the bounds; zero when
// there is none within robfig's five-year horizon.
func (s *Schedule) next(t time.Time) time.Time {
	switch s.clock {
	case interval:
		// The first multiple of every (since the epoch) strictly after t.
		ns := s.every.Nanoseconds()
		u := t.UnixNano()
		k := u / ns
		if u < 0 && u%ns != 0 {
			k-- // floor for times before 1970
		}
		return time.Unix(0, (k+1)*ns).UTC()
	case realClock:
		// robfig follows the real clock here; the loop only guards against a result that
		// is not after t.
		x := t
		for range maxSteps {
			r := s.cron.Next(x)
			if r.IsZero() || r.After(t) {
				return r
			}
			x = r
		}
		return time.Time{}
	}
	// wallClock: search matching wall-clock times on a timeline without daylight saving
	// (naive local times labelled UTC), map each to the instant it fires, and take the
	// first after t. Instants are non-decreasing in wall-clock time, and a wall-clock time
	// not after t's own maps to an instant not after t, so the search may start there.
	w := s.naive(t)
	for range maxSteps {
		wall := s.cron.Next(w)
		if wall.IsZero() {
			return time.Time{}
		}
		if inst := s.instant(wall); inst.After(t) {
			return inst
		}
		w = wall
	}
	return time.Time{}
}

// naive returns t's wall-clock time in the schedule's zone, labelled UTC.
func (s *Schedule) naive(t time.Time) time.Time {
	l := t.In(s.loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// instant maps a wall-clock time (naive, labelled UTC) to the instant it fires: the only
// instant with that local time; the first of two when fall-back repeats it; the end of the
// gap (the transition) when spring-forward skips it.
func (s *Schedule) instant(wall time.Time) time.Time {
	// Offsets lie between -12h and +14h, so every instant whose local time is wall lies in
	// [wall-14h, wall+12h]: try the offset of each zone period overlapping that window.
	lo, hi := wall.Add(-15*time.Hour), wall.Add(13*time.Hour)
	var best time.Time
	var transitions []time.Time
	x := lo
	for range 64 {
		_, off := x.In(s.loc).Zone()
		if cand := wall.Add(-time.Duration(off) * time.Second); s.naive(cand).Equal(wall) && (best.IsZero() || cand.Before(best)) {
			best = cand
		}
		_, end := x.In(s.loc).ZoneBounds()
		if end.IsZero() || end.After(hi) {
			break
		}
		transitions = append(transitions, end)
		x = end
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: fire at the transition that skipped it.
	for _, tr := range transitions {
		if s.naive(tr.Add(-time.Nanosecond)).Before(wall) && s.naive(tr).After(wall) {
			return tr
		}
	}
	// Unreachable for real zones; Go's own normalization is the fallback.
	return time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), wall.Nanosecond(), s.loc)
}

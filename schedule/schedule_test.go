package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schedule"
)

func mustParse(t *testing.T, spec schedule.Spec) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%+v): %v", spec, err)
	}
	return s
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func loc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// formatted renders times as RFC 3339 in their zone, which shows the offset.
func formatted(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.RFC3339)
	}
	return out
}

func TestParseErrors(t *testing.T) {
	tests := map[string]struct {
		spec schedule.Spec
		want error
	}{
		"garbage":               {spec: schedule.Spec{Cron: "every night"}, want: schedule.ErrInvalidCron},
		"empty":                 {spec: schedule.Spec{Cron: ""}, want: schedule.ErrInvalidCron},
		"too many fields":       {spec: schedule.Spec{Cron: "0 0 0 1 1 1 1"}, want: schedule.ErrInvalidCron},
		"minute out of range":   {spec: schedule.Spec{Cron: "61 * * * *"}, want: schedule.ErrInvalidCron},
		"zone in expression":    {spec: schedule.Spec{Cron: "CRON_TZ=Asia/Tokyo 0 2 * * *"}, want: schedule.ErrInvalidCron},
		"unknown descriptor":    {spec: schedule.Spec{Cron: "@fortnightly"}, want: schedule.ErrInvalidCron},
		"every without a value": {spec: schedule.Spec{Cron: "@every"}, want: schedule.ErrInvalidCron},
		"every not a duration":  {spec: schedule.Spec{Cron: "@every often"}, want: schedule.ErrInvalidCron},
		"every below a second":  {spec: schedule.Spec{Cron: "@every 500ms"}, want: schedule.ErrInvalidCron},
		"every fraction":        {spec: schedule.Spec{Cron: "@every 1500ms"}, want: schedule.ErrInvalidCron},
		"never matches":         {spec: schedule.Spec{Cron: "0 0 30 2 *"}, want: schedule.ErrInvalidCron},
		"unknown zone":          {spec: schedule.Spec{Cron: "@daily", TimeZone: "Mars/Olympus_Mons"}, want: schedule.ErrUnknownTimeZone},
		"local zone":            {spec: schedule.Spec{Cron: "@daily", TimeZone: "Local"}, want: schedule.ErrUnknownTimeZone},
		"end before start": {spec: schedule.Spec{Cron: "@daily", Start: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
			End: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, want: schedule.ErrInvalidBounds},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := schedule.Parse(tt.spec)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	from := "2026-01-01T10:00:00Z"
	tests := map[string]struct {
		spec schedule.Spec
		from string
		want []string
	}{
		"five fields": {
			spec: schedule.Spec{Cron: "0 2 * * *"},
			want: []string{"2026-01-02T02:00:00Z", "2026-01-03T02:00:00Z", "2026-01-04T02:00:00Z"},
		},
		"seconds field": {
			spec: schedule.Spec{Cron: "*/20 * * * * *"},
			want: []string{"2026-01-01T10:00:20Z", "2026-01-01T10:00:40Z", "2026-01-01T10:01:00Z"},
		},
		"daily in Shanghai": {
			spec: schedule.Spec{Cron: "@daily", TimeZone: "Asia/Shanghai"},
			want: []string{"2026-01-02T00:00:00+08:00", "2026-01-03T00:00:00+08:00", "2026-01-04T00:00:00+08:00"},
		},
		"hourly": {
			spec: schedule.Spec{Cron: "@hourly"},
			want: []string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z", "2026-01-01T13:00:00Z"},
		},
		"every 6h is aligned to the epoch": {
			spec: schedule.Spec{Cron: "@every 6h", TimeZone: "Asia/Shanghai"},
			want: []string{"2026-01-01T20:00:00+08:00", "2026-01-02T02:00:00+08:00", "2026-01-02T08:00:00+08:00"},
		},
		"weekdays at 02:00 Shanghai": {
			spec: schedule.Spec{Cron: "0 2 * * MON-FRI", TimeZone: "Asia/Shanghai"},
			from: "2026-01-02T10:00:00Z", // Friday 18:00 in Shanghai
			want: []string{"2026-01-05T02:00:00+08:00", "2026-01-06T02:00:00+08:00", "2026-01-07T02:00:00+08:00"},
		},
		"start bound is inclusive": {
			spec: schedule.Spec{Cron: "@daily", Start: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
			want: []string{"2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"},
		},
		"end bound is inclusive": {
			spec: schedule.Spec{Cron: "@daily", End: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)},
			want: []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			f := tt.from
			if f == "" {
				f = from
			}
			got := mustParse(t, tt.spec).Next(at(t, f), 3)
			if diff := cmp.Diff(tt.want, formatted(got)); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
}

// Across both daylight-saving changes of 2026 (America/New_York: 8 March 02:00 → 03:00,
// 1 November 02:00 → 01:00; Europe/Berlin: 29 March 02:00 → 03:00, 25 October 03:00 →
// 02:00) no run is doubled or lost.
func TestDaylightSaving(t *testing.T) {
	tests := map[string]struct {
		cron, zone string
		from, to   string
		want       []string
	}{
		// robfig alone skips this run: 02:30 does not exist on 8 March.
		"NY daily in the skipped hour runs once, at the transition": {
			cron: "30 2 * * *", zone: "America/New_York", from: "2026-03-07T00:00:00Z", to: "2026-03-10T00:00:00Z",
			want: []string{"2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"},
		},
		// robfig alone runs this twice: 01:30 EDT and 01:30 EST.
		"NY daily in the repeated hour runs once, at the first occurrence": {
			cron: "30 1 * * *", zone: "America/New_York", from: "2026-10-31T00:00:00Z", to: "2026-11-03T00:00:00Z",
			want: []string{"2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		},
		"Berlin daily in the skipped hour": {
			cron: "30 2 * * *", zone: "Europe/Berlin", from: "2026-03-28T00:00:00Z", to: "2026-03-31T00:00:00Z",
			want: []string{"2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"},
		},
		"Berlin daily in the repeated hour": {
			cron: "30 2 * * *", zone: "Europe/Berlin", from: "2026-10-24T00:00:00Z", to: "2026-10-27T00:00:00Z",
			want: []string{"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"},
		},
		"Berlin daily away from the transitions is unaffected": {
			cron: "0 4 * * *", zone: "Europe/Berlin", from: "2026-03-28T00:00:00Z", to: "2026-03-31T00:00:00Z",
			want: []string{"2026-03-28T04:00:00+01:00", "2026-03-29T04:00:00+02:00", "2026-03-30T04:00:00+02:00"},
		},
		// Two wall-clock times inside the gap both fall on the transition: one run.
		"two times in the skipped hour share one run": {
			cron: "0,30 2 * * *", zone: "America/New_York", from: "2026-03-08T00:00:00Z", to: "2026-03-09T12:00:00Z",
			want: []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:00:00-04:00", "2026-03-09T02:30:00-04:00"},
		},
		"hourly across spring-forward: 01:00 then 03:00, an hour apart": {
			cron: "0 * * * *", zone: "America/New_York", from: "2026-03-08T05:30:00Z", to: "2026-03-08T08:30:00Z",
			want: []string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"},
		},
		"hourly across fall-back: 01:00 twice, an hour apart": {
			cron: "0 * * * *", zone: "America/New_York", from: "2026-11-01T04:30:00Z", to: "2026-11-01T07:30:00Z",
			want: []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"},
		},
		"quarter-hours of a fixed hour follow the real clock": {
			cron: "*/30 1 * * *", zone: "America/New_York", from: "2026-11-01T00:00:00Z", to: "2026-11-01T12:00:00Z",
			want: []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := mustParse(t, schedule.Spec{Cron: tt.cron, TimeZone: tt.zone})
			got, truncated := s.FireTimesBetween(at(t, tt.from), at(t, tt.to), 100)
			if truncated {
				t.Fatal("truncated")
			}
			if diff := cmp.Diff(tt.want, formatted(got)); diff != "" {
				t.Errorf("fire times (-want +got):\n%s", diff)
			}
		})
	}
}

// An hourly schedule runs every 3600 seconds through a whole year of both zones: 8760
// runs in 2026, 23 on each spring-forward day and 25 on each fall-back day.
func TestHourlyAcrossAYear(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Berlin"} {
		t.Run(zone, func(t *testing.T) {
			l := loc(t, zone)
			s := mustParse(t, schedule.Spec{Cron: "0 * * * *", TimeZone: zone})
			from, to := time.Date(2026, 1, 1, 0, 0, 0, 0, l), time.Date(2027, 1, 1, 0, 0, 0, 0, l)
			got, _ := s.FireTimesBetween(from, to, 10000)
			if len(got) != 8760 {
				t.Fatalf("%d runs in 2026, want 8760", len(got))
			}
			perDay := map[string]int{}
			for i, ft := range got {
				perDay[ft.Format("2006-01-02")]++
				if i > 0 && ft.Sub(got[i-1]) != time.Hour {
					t.Fatalf("run %d at %s is %s after the previous one, want 1h", i, ft, ft.Sub(got[i-1]))
				}
			}
			want23, want25 := "2026-03-08", "2026-11-01"
			if zone == "Europe/Berlin" {
				want23, want25 = "2026-03-29", "2026-10-25"
			}
			for day, n := range perDay {
				want := 24
				switch day {
				case want23:
					want = 23
				case want25:
					want = 25
				}
				if n != want {
					t.Errorf("%s: %d runs, want %d", day, n, want)
				}
			}
		})
	}
}

// A fixed daily time runs once on every local day of the year, whatever the daylight
// saving, at any minute of the night.
func TestDailyOncePerLocalDay(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/Berlin"} {
		for _, expr := range []string{"0 0 * * *", "30 1 * * *", "30 2 * * *", "0 3 * * *", "59 23 * * *"} {
			t.Run(zone+" "+expr, func(t *testing.T) {
				l := loc(t, zone)
				s := mustParse(t, schedule.Spec{Cron: expr, TimeZone: zone})
				got, _ := s.FireTimesBetween(time.Date(2026, 1, 1, 0, 0, 0, 0, l), time.Date(2027, 1, 1, 0, 0, 0, 0, l), 1000)
				days := map[string]int{}
				for i, ft := range got {
					days[ft.In(l).Format("2006-01-02")]++
					if i > 0 && !ft.After(got[i-1]) {
						t.Fatalf("not increasing: %s after %s", ft, got[i-1])
					}
				}
				if len(got) != 365 || len(days) != 365 {
					t.Errorf("%d runs on %d distinct days, want 365 on 365", len(got), len(days))
				}
			})
		}
	}
}

// Asked from inside the repeated hour, a fixed time that already ran at its first
// occurrence is not run again.
func TestNextAfterFromInsideTheRepeatedHour(t *testing.T) {
	s := mustParse(t, schedule.Spec{Cron: "30 1 * * *", TimeZone: "America/New_York"})
	for _, from := range []string{"2026-11-01T06:15:00Z", "2026-11-01T06:45:00Z"} { // 01:15 and 01:45 EST
		got, ok := s.NextAfter(at(t, from))
		if !ok || got.Format(time.RFC3339) != "2026-11-02T01:30:00-05:00" {
			t.Errorf("NextAfter(%s) = %s, %v; want 2026-11-02T01:30:00-05:00", from, got, ok)
		}
	}
	// Asked from inside the gap, the skipped 02:30 still runs at the transition.
	sp := mustParse(t, schedule.Spec{Cron: "30 2 * * *", TimeZone: "America/New_York"})
	got, ok := sp.NextAfter(at(t, "2026-03-08T06:59:59Z")) // 01:59:59 EST
	if !ok || got.Format(time.RFC3339) != "2026-03-08T03:00:00-04:00" {
		t.Errorf("NextAfter(01:59:59 EST) = %s, want 03:00 EDT", got)
	}
	got, ok = sp.NextAfter(got)
	if !ok || got.Format(time.RFC3339) != "2026-03-09T02:30:00-04:00" {
		t.Errorf("NextAfter(03:00 EDT) = %s, want the next day's 02:30", got)
	}
}

func TestFireTimesBetween(t *testing.T) {
	s := mustParse(t, schedule.Spec{Cron: "0 * * * *"})
	from, to := at(t, "2026-01-01T00:00:00Z"), at(t, "2026-01-01T05:00:00Z")
	got, truncated := s.FireTimesBetween(from, to, 100)
	want := []string{"2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z"}
	if diff := cmp.Diff(want, formatted(got)); diff != "" || truncated {
		t.Errorf("[from, to) (-want +got):\n%s (truncated %v)", diff, truncated)
	}
	got, truncated = s.FireTimesBetween(from, to, 2)
	if diff := cmp.Diff(want[:2], formatted(got)); diff != "" || !truncated {
		t.Errorf("limited (-want +got):\n%s (truncated %v, want true)", diff, truncated)
	}
	if got, _ := s.FireTimesBetween(to, from, 10); len(got) != 0 {
		t.Errorf("empty range gave %v", got)
	}
}

func TestJitter(t *testing.T) {
	nominal := at(t, "2026-01-01T02:00:00Z")
	a := mustParse(t, schedule.Spec{Name: "nightly", Cron: "@daily", Jitter: 10 * time.Minute})
	again := mustParse(t, schedule.Spec{Name: "nightly", Cron: "@daily", Jitter: 10 * time.Minute})
	b := mustParse(t, schedule.Spec{Name: "hourly-eval", Cron: "@daily", Jitter: 10 * time.Minute})
	if a.Jitter(nominal) != again.Jitter(nominal) {
		t.Errorf("jitter differs between two computations: %s, %s", a.Jitter(nominal), again.Jitter(nominal))
	}
	distinct := map[time.Duration]bool{}
	for i := range 50 {
		n := nominal.Add(time.Duration(i) * 24 * time.Hour)
		j := a.Jitter(n)
		if j < 0 || j >= 10*time.Minute || j%time.Millisecond != 0 {
			t.Fatalf("jitter %s outside [0, 10m) or finer than a millisecond", j)
		}
		if a.FireTime(n) != n.Add(j) {
			t.Errorf("FireTime = %s, want nominal + jitter", a.FireTime(n))
		}
		distinct[j] = true
	}
	if len(distinct) < 40 {
		t.Errorf("only %d distinct jitters over 50 nights", len(distinct))
	}
	if a.Jitter(nominal) == b.Jitter(nominal) && a.Jitter(nominal.Add(time.Hour)) == b.Jitter(nominal.Add(time.Hour)) {
		t.Errorf("two schedules get the same jitter")
	}
	none := mustParse(t, schedule.Spec{Name: "x", Cron: "@daily"})
	if none.Jitter(nominal) != 0 {
		t.Errorf("jitter without Spec.Jitter = %s", none.Jitter(nominal))
	}
}

func TestDecide(t *testing.T) {
	start := schedule.Decision{Action: schedule.ActionStart}
	skip := schedule.Decision{Action: schedule.ActionSkip}
	buffer := schedule.Decision{Action: schedule.ActionBuffer}
	tests := map[string]struct {
		policy            schedule.OverlapPolicy
		running, buffered int
		want              schedule.Decision
	}{
		"idle starts (skip)":            {policy: schedule.Skip, want: start},
		"idle starts (bufferAll)":       {policy: schedule.BufferAll, want: start},
		"idle starts (cancelOther)":     {policy: schedule.CancelOther, want: start},
		"empty policy is skip":          {policy: "", running: 1, want: skip},
		"skip while running":            {policy: schedule.Skip, running: 1, want: skip},
		"skip with only a backfill":     {policy: schedule.Skip, buffered: 2, want: start},
		"bufferOne buffers the first":   {policy: schedule.BufferOne, running: 1, want: buffer},
		"bufferOne drops the second":    {policy: schedule.BufferOne, running: 1, buffered: 1, want: skip},
		"bufferAll buffers":             {policy: schedule.BufferAll, running: 1, buffered: 7, want: buffer},
		"bufferAll is bounded":          {policy: schedule.BufferAll, running: 1, buffered: schedule.MaxBuffered, want: skip},
		"cancelOther cancels":           {policy: schedule.CancelOther, running: 2, want: schedule.Decision{Action: schedule.ActionBuffer, CancelRunning: true}},
		"cancelOther replaces a waiter": {policy: schedule.CancelOther, running: 1, buffered: 1, want: schedule.Decision{Action: schedule.ActionBuffer, CancelRunning: true, DropBuffered: true}},
		"allowAll starts alongside":     {policy: schedule.AllowAll, running: 3, buffered: 1, want: start},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, schedule.Decide(tt.policy, tt.running, tt.buffered)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
	if schedule.StartBuffered(1) || !schedule.StartBuffered(0) {
		t.Error("StartBuffered: a buffered run starts only when none runs")
	}
	for _, p := range append(schedule.OverlapPolicies, "") {
		if !p.Valid() {
			t.Errorf("%q not valid", p)
		}
	}
	if schedule.OverlapPolicy("sometimes").Valid() {
		t.Error("unknown policy is valid")
	}
}

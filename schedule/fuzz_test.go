package schedule

import (
	"errors"
	"testing"
	"time"
)

// FuzzParseCron parses arbitrary cron expressions and time zones. Parse never panics
// and its errors wrap one of its sentinels; a schedule it accepts fires strictly after
// the time it is asked about, so stepping through its fire times always advances.
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{
		"0 2 * * *", "*/10 * * * * *", "@daily", "@every 6h", "@every 1s", "@every 90x",
		"0 0 30 2 *", "TZ=UTC 0 * * * *", "", "* * * * * * *", "60 * * * *", "0-59/0 * * * *",
		"@every", "5-1 * * * *", "0 0 29 2 *", "MON-FRI", "0 12 * * MON-FRI", "*/7 */3 1,15 * *",
	} {
		f.Add(s, "")
	}
	f.Add("0 2 * * *", "Asia/Shanghai")
	f.Add("30 2 * * *", "America/New_York")
	f.Add("* * * * *", "Nowhere/Land")
	f.Add("0 0 * * *", "../../etc/passwd")
	f.Fuzz(func(t *testing.T, expr, tz string) {
		s, err := Parse(Spec{Name: "fuzz", Cron: expr, TimeZone: tz})
		if err != nil {
			if !errors.Is(err, ErrInvalidCron) && !errors.Is(err, ErrUnknownTimeZone) && !errors.Is(err, ErrInvalidBounds) {
				t.Fatalf("Parse(%q, %q): %v wraps no sentinel", expr, tz, err)
			}
			return
		}
		at := time.Date(2026, 3, 8, 1, 59, 0, 0, time.UTC)
		for range 3 {
			next, ok := s.NextAfter(at)
			if !ok {
				return
			}
			if !next.After(at) {
				t.Fatalf("%q in %q: NextAfter(%v) = %v, not after", expr, tz, at, next)
			}
			at = next
		}
	})
}

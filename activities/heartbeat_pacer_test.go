package activities

import (
	"testing"
	"time"
)

// Below the cap the pacer's intervals average the budget's share, so that the process
// heartbeats at its budget, each within 5 % of it; at the cap no interval passes it.
func TestHeartbeatPacerKeepsTheBudgetOnAverage(t *testing.T) {
	const draws = 20000
	for _, tc := range []struct {
		name   string
		active int64
		cap    time.Duration
		want   time.Duration // the interval before jitter
	}{
		{"below the budget: every second", 50, 20 * time.Second, time.Second},
		{"past the budget: active/budget", 200, 20 * time.Second, 2 * time.Second},
		{"at the cap", 4000, 20 * time.Second, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &heartbeatPacer{budget: 100, cap: tc.cap}
			now := time.Unix(0, 0)
			var sum time.Duration
			for range draws {
				p.schedule(now, tc.active)
				iv := p.next.Sub(now)
				if iv > tc.cap {
					t.Fatalf("interval %s past the cap %s", iv, tc.cap)
				}
				if lo, hi := tc.want-tc.want/20, tc.want+tc.want/20; iv < lo || iv > hi {
					t.Fatalf("interval %s outside %s..%s", iv, lo, hi)
				}
				sum += iv
				now = p.next
			}
			mean := sum / draws
			// Below the cap the mean is the interval itself (within 0.3 %, far more
			// than 20,000 uniform draws of ±5 % stray); at the cap it is under it.
			if tc.want < tc.cap {
				if d := mean - tc.want; d < -tc.want/300 || d > tc.want/300 {
					t.Errorf("mean interval %s, want %s: the rate is %.1f%% off the budget", mean, tc.want, 100*(float64(tc.want)/float64(mean)-1))
				}
			} else if mean > tc.cap {
				t.Errorf("mean interval %s past the cap %s", mean, tc.cap)
			}
		})
	}
}

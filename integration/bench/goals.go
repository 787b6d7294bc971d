package main

import (
	"fmt"
	"time"
)

// Issue 38's goals. Each bench mode checks the figures it measured against them and
// prints the table at its end (printGoals), so that `task bench:all` shows every row
// as a cost or a ratio beside its goal. No test asserts them: they are measures of
// this machine, not pass or fail conditions of the suite.

// goalRow is one figure against its goal.
type goalRow struct {
	what     string // what the figure measures
	measured string
	goal     string
	met      bool
}

var goalRows []goalRow

// atMostDur records a duration whose goal is an upper bound.
func atMostDur(what string, got, goal time.Duration) {
	goalRows = append(goalRows, goalRow{what, got.Round(100 * time.Microsecond).String(), "≤ " + goal.String(), got <= goal})
}

// atMostRatio records a ratio whose goal is an upper bound.
func atMostRatio(what string, got, goal float64) {
	goalRows = append(goalRows, goalRow{what, fmt.Sprintf("%.2fx", got), fmt.Sprintf("≤ %.2fx", goal), got <= goal})
}

// atLeastRatio records a ratio whose goal is a lower bound.
func atLeastRatio(what string, got, goal float64) {
	goalRows = append(goalRows, goalRow{what, fmt.Sprintf("%.2fx", got), fmt.Sprintf("≥ %.2fx", goal), got >= goal})
}

// printGoals prints the figures recorded so far against their goals, and forgets them.
func printGoals() {
	if len(goalRows) == 0 {
		return
	}
	fmt.Printf("\nagainst issue 38's goals (docs/performance.md):\n")
	fmt.Printf("%-66s %12s %12s  %s\n", "figure", "measured", "goal", "")
	for _, g := range goalRows {
		verdict := "met"
		if !g.met {
			verdict = "NOT met"
		}
		fmt.Printf("%-66s %12s %12s  %s\n", g.what, g.measured, g.goal, verdict)
	}
	goalRows = nil
}

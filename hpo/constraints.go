package hpo

import "math"

// Constraints (Optuna's constraints_func, BoTorch's outcome constraints): a Completed
// trial may carry, in Trial.Constraints, one number per constraint, its violation: a
// value at or below zero satisfies the constraint, a positive one breaks it by that
// much (a trial over a memory budget of 16 GiB that used 18 has violation 2). A trial
// that breaks any constraint is infeasible:
//
//   - Best and ParetoFront consider feasible trials only;
//   - tpe (and bohb's model) rank infeasible trials after every feasible Completed
//     one, by their total violation, so they never shape the good density (Optuna's
//     constrained TPE);
//   - cmaes ranks them the same way within a generation;
//   - nsga2 uses constrained domination (Deb 2000): a feasible trial dominates an
//     infeasible one, and of two infeasible ones the smaller total violation dominates;
//   - gp multiplies expected improvement by the probability that every constraint holds,
//     each constraint modelled by a GP of its own, and improves on the best feasible
//     value (Gardner et al. 2014; Optuna's GPSampler does the same);
//   - random and grid draw as without constraints.
//
// A trial without Constraints is feasible, so a history without constraints samples
// exactly as before.

// Violation returns a trial's total violation: the sum of its positive constraint
// values (0 for a feasible trial); a NaN constraint value counts as +Inf (it could not
// be measured).
func Violation(t *Trial) float64 {
	sum := 0.0
	for _, c := range t.Constraints {
		switch {
		case math.IsNaN(c):
			return math.Inf(1)
		case c > 0:
			sum += c
		}
	}
	return sum
}

// Feasible reports whether a trial satisfies every constraint it carries.
func Feasible(t *Trial) bool { return Violation(t) == 0 }

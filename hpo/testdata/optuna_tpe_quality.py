"""Optuna 3.1's TPESampler on the problems of BenchmarkQualityRecord (hpo/quality_record_test.go):
Branin, Hartmann-6 and Rosenbrock-10 as hpo/quality_test.go and hpo/quality_all_test.go define
them, 100 sequential trials, seeds 1..N, the best value of each run.

It writes the JSON that the benchmark's -hpo.compare reads (problem -> sampler -> best per seed):

    /usr/bin/python3 hpo/testdata/optuna_tpe_quality.py 20 > hpo/testdata/optuna_tpe_quality.json

Samplers: optuna-tpe (the defaults) and optuna-tpe-mv (multivariate=True). Debian's python3-optuna
3.1 has no GP sampler (GPSampler came in Optuna 3.6), so there is no Optuna GP column.
"""
import json
import math
import sys

import optuna

TRIALS = 100


def branin(t):
    x1 = t.suggest_float("x1", -5.0, 10.0)
    x2 = t.suggest_float("x2", 0.0, 15.0)
    b = 5.1 / (4 * math.pi * math.pi)
    c = 5 / math.pi
    s = 1 / (8 * math.pi)
    return (x2 - b * x1 * x1 + c * x1 - 6.0) ** 2 + 10 * (1 - s) * math.cos(x1) + 10


A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
ALPHA = [1.0, 1.2, 3.0, 3.2]


def hartmann6(t):
    x = [t.suggest_float("x%d" % (j + 1), 0.0, 1.0) for j in range(6)]
    total = 0.0
    for i in range(4):
        inner = sum(A[i][j] * (x[j] - P[i][j] * 1e-4) ** 2 for j in range(6))
        total += ALPHA[i] * math.exp(-inner)
    return -total


def rosenbrock10(t):
    x = [t.suggest_float("x%02d" % j, -5.0, 10.0) for j in range(10)]
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(9))


PROBLEMS = {"Branin (2-d)": branin, "Hartmann-6 (6-d)": hartmann6, "Rosenbrock (10-d)": rosenbrock10}
SAMPLERS = {
    "optuna-tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "optuna-tpe-mv": lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True),
}


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    out = {}
    for pname, f in PROBLEMS.items():
        out[pname] = {}
        for sname, make in SAMPLERS.items():
            bests = []
            for seed in range(1, seeds + 1):
                study = optuna.create_study(sampler=make(seed), direction="minimize")
                study.optimize(f, n_trials=TRIALS)
                bests.append(study.best_value)
            out[pname][sname] = bests
            print("optuna %s %s %s: median %.4f" % (optuna.__version__, pname, sname, sorted(bests)[len(bests) // 2]), file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

"""The baseline of BenchmarkCMAESGrowingHistory (hpo/cmaes_memo_test.go): Optuna's
CmaEsSampler suggesting an experiment trial after trial, 500 trials of 16 floats in
[0, 1] valued by the same sphere function around 0.3, with the in-memory storage.

It prints the mean process CPU time per suggestion over the last 50 trials: the time of
study.ask() and the 16 suggest_float calls (where the sampler samples), not tell().

    /usr/bin/python3 hpo/testdata/optuna_cmaes_bench.py [runs]     # Debian's python3-optuna 3.1
"""
import sys
import time

import optuna

TRIALS, LAST, PARAMS = 500, 50, 16


def run(seed):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.CmaEsSampler(seed=seed), direction="minimize")
    spent = 0.0
    for i in range(TRIALS):
        t0 = time.process_time()
        trial = study.ask()
        xs = [trial.suggest_float("p%02d" % k, 0.0, 1.0) for k in range(PARAMS)]
        t1 = time.process_time()
        if i >= TRIALS - LAST:
            spent += t1 - t0
        study.tell(trial, sum((x - 0.3) ** 2 for x in xs))
    return spent * 1e3 / LAST


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for r in range(runs):
        print("optuna %s CmaEsSampler trials=%d params=%d: %.4f cpu-ms/suggestion" % (optuna.__version__, TRIALS, PARAMS, run(7 + r)))

"""The PyStan 3 side of bench_nuts_stan.py; runs in the anchors' own virtual environment, never in bayeskern's.

Usage: python _stan_side.py DATA.json OUT.json (with "gradient_only": k in DATA, times k gradients instead of
sampling; with "repeats": r, samples r times with seeds 1..r and reports each run's draws and timings). The Stan program is the BKE pseudolikelihood of bayeskern's
``bke_model`` (D = 1, exact convention, Lebesgue measure, fixed tau2, Gamma(1, 1) prior on the lengthscale),
written here for Stan with every constant kept, so that its log density can be compared with NumPyro's.
"""

import json
import re
import sys
import time

import numpy as np
import stan

PROGRAM = """
data {
  int<lower=1> n;
  int<lower=1> m;
  vector[n] x;
  vector[m] z;
  real<lower=0> tau2;
}
transformed data {
  matrix[n, m] diff = rep_matrix(x, m) - rep_matrix(z', n);
  matrix[n, m] log_diff2 = log(square(diff));
  matrix[m, m] dz2;
  for (k in 1:m) for (l in 1:m) dz2[k, l] = square(z[k] - z[l]);
}
parameters {
  real<lower=0> theta;
}
model {
  matrix[n, m] r2 = square(diff) / square(theta);
  matrix[n, m] K = exp(-0.5 * r2);
  row_vector[m] mu = rep_row_vector(1.0 / n, n) * K;
  real e2 = sum(square(K - rep_matrix(mu, n)));
  matrix[m, m] S = sqrt(pi()) * theta * exp(-dz2 / (4 * square(theta))) + diag_matrix(rep_vector(tau2 / n, m));
  matrix[m, m] L = cholesky_decompose(S);
  real volume = 0;
  for (i in 1:n) volume += 0.5 * log_sum_exp(-r2[i] + log_diff2[i]);
  volume -= 2 * n * log(theta);
  target += gamma_lpdf(theta | 1, 1);
  target += -0.5 * (2 * sum(log(diagonal(L))) + dot_self(mdivide_left_tri_low(L, mu'))
                    + e2 / tau2 + m * log(n) + m * (n - 1) * log(tau2) + m * n * log(2 * pi()));
  target += volume;
}
"""


def main():
    data = json.load(open(sys.argv[1]))
    stan_data = {"n": len(data["x"]), "m": len(data["z"]), "x": data["x"], "z": data["z"], "tau2": data["tau2"]}
    start = time.perf_counter()
    posterior = stan.build(PROGRAM, data=stan_data, random_seed=1)
    build = time.perf_counter() - start
    log_density = [posterior.log_prob([float(np.log(t))], adjust_transform=True) for t in data["check_thetas"]]
    if data.get("gradient_only"):   # seconds per gradient of the log density (CPU time of one process)
        posterior.grad_log_prob([0.0])
        start = time.process_time()
        for k in range(data["gradient_only"]):
            posterior.grad_log_prob([0.01 * k])
        json.dump({"log_density": log_density, "gradient_seconds": (time.process_time() - start)
                   / data["gradient_only"]}, open(sys.argv[2], "w"))
        return
    runs = []
    for seed in range(1, data.get("repeats", 1) + 1):   # seeds 1, 2, ...: httpstan caches a fit by its seed
        posterior = stan.build(PROGRAM, data=stan_data, random_seed=seed)
        start = time.perf_counter()
        fit = posterior.sample(num_chains=data["chains"], num_warmup=data["warmup"], num_samples=data["samples"])
        wall = time.perf_counter() - start
        warm, sampling = [], []
        for output in fit.stan_outputs:
            text = output.decode()
            found = re.search(r"Elapsed Time: ([0-9.e+-]+) seconds \(Warm-up\).*?([0-9.e+-]+) seconds \(Sampling\)",
                              text, re.S)
            warm.append(float(found.group(1)))
            sampling.append(float(found.group(2)))
        runs.append({"theta": np.asarray(fit["theta"]).reshape(-1, data["chains"]).T.tolist(),   # (chains, draws)
                     "chain_warmup_seconds": warm, "chain_sampling_seconds": sampling, "wall_seconds": wall,
                     "n_leapfrog": float(np.mean(fit["n_leapfrog__"]))})
    json.dump({"runs": runs, "build_seconds": build, "log_density": log_density}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()

"""MMD two-sample statistic and the BKE lengthscale posterior with the rows spread over processes.

Every process runs this same script; each memory-maps the .npy files and reads only its own share of the rows.
Launch (see the cluster guide in the docs):

    python two_sample_and_lengthscale.py --x P.npy --y Q.npy --coordinator host:port --num-processes 2 --process-id 0
    srun python two_sample_and_lengthscale.py --x P.npy --y Q.npy       # SLURM: the launcher sets the rest
"""

import argparse
import time

import jax
import numpy as np

import bayeskern as bk
from bayeskern import distributed
from bayeskern.sharding import load_rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--x", required=True, help=".npy file of the sample of P (n, d)")
    parser.add_argument("--y", required=True, help=".npy file of the sample of Q (m, d)")
    parser.add_argument("--held-out", type=int, default=10, help="rows of X held out as inducing points")
    parser.add_argument("--samples", type=int, default=300, help="NUTS draws per chain (as many warm-up steps)")
    parser.add_argument("--coordinator", help="host:port of process 0 (manual launch)")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    args = parser.parse_args(argv)

    distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    bk.enable_x64()
    from bayeskern.inference import run_nuts
    from bayeskern.models import bke_model

    start = time.perf_counter()
    X, Y = load_rows(args.x), load_rows(args.y)  # each process reads only its rows
    kernel = bk.RBF(1.0)
    mmd2 = float(bk.mmd2_unbiased(X, Y, kernel))
    # inducing points: the first rows of X's file (small, read by every process); the rest enter the likelihood
    Z = np.array(np.load(args.x, mmap_mode="r")[:args.held_out])
    X_rest = load_rows(args.x, start=args.held_out)
    mcmc = run_nuts(bke_model, X_rest, Z, key=jax.random.key(0), num_chains=2, num_warmup=args.samples,
                    num_samples=args.samples)
    if jax.process_index() == 0:
        ell = mcmc.draws()["lengthscale"]
        print(f"processes: {jax.process_count()}, rows of X: {X.num_rows}, rows of Y: {Y.num_rows}")
        print(f"MMD^2 (unbiased): {mmd2:.6f}")
        print(f"lengthscale posterior: mean {ell.mean():.4f}, sd {ell.std():.4f}, "
              f"R-hat {mcmc.diagnostics.max_rhat:.3f}")
        print(f"wall time: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()

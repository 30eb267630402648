"""Bad input gets a clear error at the entry point, naming the argument; numerical failure is raised or flagged.

Each row feeds one public entry point one class of bad input (wrong type, complex or ragged data, non-finite
values, wrong shape or dimension, counts that are not integers, non-positive scales, empty grids, foreign files,
inputs far outside the training data) and states the error class and a message fragment that names the argument.
"""

import warnings

import jax
import numpy as np
import pytest

import bayeskern as bk
import bayeskern.inference  # noqa: F401  (bk.inference.bkl_fit below)
from bayeskern import compression, jdl, kbr
from bayeskern.kernels import kernel_matvec, kernel_sum

RNG = np.random.default_rng(0)
X = RNG.standard_normal((40, 2))
Y = RNG.standard_normal((30, 2)) + 0.5
KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def fits():
    bk.enable_x64()
    return {"jdl": jdl.fit_jdl(X, X[:, :1] ** 2, bk.RBF(1.0), bk.RBF(1.0), 1e-3, constraint="normalised"),
            "kbf": kbr.KernelBayesFilter.build(X, X, 1.0, 1.0, 1e-3, 1e-3)}


# (id, call, error, message fragment naming the argument)
CASES = [
    ("string data", lambda f: bk.mmd2_unbiased([["a", "b"]] * 3, Y, bk.RBF(1.0)), TypeError, "X must hold real"),
    ("object data", lambda f: bk.mmd2_biased(X, np.array([object()] * 3), bk.RBF(1.0)), TypeError, "Y must hold"),
    ("complex data", lambda f: bk.mmd2_unbiased(X + 1j, Y, bk.RBF(1.0)), TypeError, "X must be real"),
    ("ragged data", lambda f: bk.hsic_unbiased([[1.0, 2.0], [1.0]], Y, bk.RBF(1.0), bk.RBF(1.0)), ValueError,
     "X is not a rectangular"),
    ("NaN data", lambda f: bk.mmd2_unbiased(np.where(X > 2, np.nan, X), Y, bk.RBF(1.0)), ValueError, "X contains"),
    ("3-d points", lambda f: kernel_sum(bk.RBF(1.0), np.ones((4, 2, 2))), ValueError, "X must have shape"),
    ("dimension mismatch", lambda f: bk.mmd2_unbiased(X, Y[:, :1], bk.RBF(1.0)), ValueError, "same dimension"),
    ("unpaired HSIC", lambda f: bk.hsic_biased(X, Y, bk.RBF(1.0), bk.RBF(1.0)), ValueError, "X and Y"),
    ("block_size 0", lambda f: bk.mmd2_unbiased(X, Y, bk.RBF(1.0), block_size=0), ValueError, "block_size"),
    ("block_size float", lambda f: kernel_matvec(bk.RBF(1.0), X, X, np.ones(40), block_size=2.5), TypeError,
     "block_size must be an integer"),
    ("n_permutations 2.5", lambda f: bk.mmd_test(X, Y, bk.RBF(1.0), key=KEY, n_permutations=2.5), TypeError,
     "n_permutations must be an integer"),
    ("n_permutations 0", lambda f: bk.hsic_test(X, X, key=KEY, n_permutations=0), ValueError, "n_permutations"),
    ("key not a key", lambda f: bk.mmd_test(X, Y, bk.RBF(1.0), key=3), TypeError, "key must be a JAX PRNG key"),
    ("key an array", lambda f: bk.hsic_test(X, X, key=np.zeros(2)), TypeError, "key must be a JAX PRNG key"),
    ("tiny lengthscale", lambda f: bk.RBF(1e-200), ValueError, "lengthscale"),
    ("NaN lengthscale", lambda f: bk.Matern32(np.nan), ValueError, "lengthscale"),
    ("non-PSD covariance", lambda f: bk.mmd2_gaussians(np.zeros(2), -np.eye(2), np.ones(2), np.eye(2), 1.0),
     ValueError, "cov_p is not positive semidefinite"),
    ("asymmetric covariance", lambda f: bk.mmd2_gaussians(np.zeros(2), np.eye(2), np.ones(2), [[1, 0.5], [0, 1]],
                                                          1.0), ValueError, "cov_q must be symmetric"),
    ("mean lengths", lambda f: bk.mmd2_gaussians(np.zeros(2), np.eye(2), np.ones(3), np.eye(2), 1.0), ValueError,
     "mean_p and mean_q"),
    ("NaN Gram", lambda f: kbr.cme_weights(np.full((5, 5), np.nan), np.eye(5), 0.1), ValueError, "G_X contains"),
    ("non-square Gram", lambda f: kbr.cme_weights(np.ones((5, 4)), np.eye(5), 0.1), ValueError, "G_X must be a square matrix"),
    ("Gram rows", lambda f: kbr.kbr_iw_weights(np.eye(5), np.ones(5), np.ones((4, 2)), 0.1), ValueError, "G_Xq"),
    ("non-PD Kalman noise", lambda f: kbr.kalman_filter(X[:, :1], np.eye(1), -np.eye(1), np.eye(1), np.zeros(1),
                                                        np.eye(1)), ValueError, "Q is not positive semidefinite"),
    ("Kalman m0 shape", lambda f: kbr.kalman_filter(X, np.eye(2), np.eye(2), np.eye(2), np.zeros(3), np.eye(2)),
     ValueError, "m0 must have shape"),
    ("KBF NaN observations", lambda f: kbr.KernelBayesFilter.build(np.where(X > 2, np.nan, X), X, 1.0, 1.0, 1e-3,
                                                                   1e-3), ValueError, "X contains"),
    ("KBF unpaired", lambda f: kbr.KernelBayesFilter.build(X, X[:-1], 1.0, 1.0, 1e-3, 1e-3), ValueError, "X and Z"),
    ("KBF test dimension", lambda f: f["kbf"].filter(X[:5, :1]), ValueError, "X_test must hold observations"),
    ("filter_mse shapes", lambda f: kbr.filter_mse(np.zeros((10, 2)), np.zeros((10, 1))), ValueError,
     "means and Z_true"),
    ("empty grid", lambda f: kbr.tune_kbf(X, X, c_grid=()), ValueError, "c_grid"),
    ("JDL lam inf", lambda f: jdl.fit_jdl(X, X, bk.RBF(1.0), bk.RBF(1.0), np.inf), ValueError, "lam must be positive"),
    ("JDL lam 0", lambda f: jdl.fit_cme(X, X, bk.RBF(1.0), bk.RBF(1.0), 0.0), ValueError, "lam must be positive"),
    ("JDL query dimension", lambda f: f["jdl"].conditional_expectation(np.zeros((3, 5))), ValueError, "x_query"),
    ("jmmd2 dimensions", lambda f: compression.jmmd2((X, X[:, :1]), (X[:5, :1], X[:5, :1]), bk.RBF(1.0),
                                                     bk.RBF(1.0)), ValueError, r"data\[0\] and cset\[0\]"),
    ("compression num_steps", lambda f: compression.ackip(X, X[:, 0], 5, key=KEY, lam_c=1e-2, num_steps=0,
                                                          progress_bar=False), ValueError, "num_steps"),
    ("compression m", lambda f: compression.jkh(X, X[:, 0], 40, key=KEY, progress_bar=False), ValueError, "m must"),
    ("inducing count float", lambda f: bk.bke.hold_out_inducing(X, KEY, m=5.5), TypeError, "m must be an integer"),
    ("compression key", lambda f: compression.ackip(X, X[:, 0], 5, key=0, lam_c=1e-2, progress_bar=False), TypeError,
     "key must be a JAX PRNG key"),
    ("BKL key missing", lambda f: bk.inference.bkl_fit(X, Y, key=None), TypeError, "key must be a JAX PRNG key"),
    ("dataset size float", lambda f: bk.datasets.normal_vs_laplace(2.5), TypeError, "n must be an integer"),
    ("filter state", lambda f: f["kbf"].update(None, X[0]), TypeError, "state must be a FilterState"),
    ("spd_solve not PD", lambda f: bk.linalg.spd_solve(-np.eye(3), np.ones(3)), bk.CholeskyError, "not positive"),
    ("gram_factor NaN", lambda f: kbr.gram_factor(np.full((3, 3), np.nan)), ValueError, "G contains"),
    ("witness dimensions", lambda f: bk.witness(X, Y[:, :1], bk.RBF(1.0)), ValueError, "same dimension"),
    ("posterior_mean atoms", lambda f: kbr.posterior_mean(np.ones((5, 2)), np.ones((4, 2))), ValueError,
     "W must have shape"),
    ("select_lambda empty", lambda f: compression.select_lambda(X, X[:, 0], X[:0], X[:0, 0], bk.RBF(1.0), bk.RBF(1.0),
                                                                size=5, key=KEY), ValueError, "x_val is empty"),
    ("generator key", lambda f: kbr.data.circle_dynamics(10, 0), TypeError, "key must be a JAX PRNG key"),
    ("generator size", lambda f: compression.data.heteroscedastic(-1, KEY), ValueError, "n must be >= 1"),
    ("Nystrom dimension", lambda f: kbr.nystrom_features(bk.RBF(1.0), X[:5])(Y[:, :1]), ValueError,
     "X and the landmarks"),
    ("diagnose input", lambda f: bk.inference.diagnose("junk"), TypeError, "idata must be an arviz InferenceData"),
    ("save to a missing folder", lambda f: f["jdl"].save("/nonexistent-folder/m.npz"), FileNotFoundError,
     "does not exist"),
    ("complex V", lambda f: kernel_matvec(bk.RBF(1.0), X, X, np.ones(40) + 1j), TypeError, "V must be real"),
    ("row shards to a test", lambda f: bk.mmd_test(bk.sharding.shard_rows(X), Y, bk.RBF(1.0), key=KEY), TypeError,
     "mmd_test takes X on one process"),
]


@pytest.mark.parametrize("call, error, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gets_a_clear_error_naming_the_argument(fits, call, error, fragment):
    with pytest.raises(error, match=fragment):
        call(fits)


def test_foreign_and_truncated_files_are_refused(tmp_path):
    np.savez(tmp_path / "foreign.npz", a=np.ones(3))
    with pytest.raises(bk.FileFormatError, match="not a bayeskern save"):
        bk.load(tmp_path / "foreign.npz")
    model = jdl.fit_jdl(X, X[:, :1], bk.RBF(1.0), bk.RBF(1.0), 1e-3, constraint="normalised")
    model.save(tmp_path / "model.npz")
    data = (tmp_path / "model.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(bk.FileFormatError):
        bk.load(tmp_path / "cut.npz")


def test_a_filter_flags_observations_outside_the_training_range(fits):
    with pytest.warns(kbr.OutOfRangeWarning, match="3 of 5 observations lie outside the training range"):
        fits["kbf"].filter(np.vstack([X[:2], X[:3] + 100.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kbr.OutOfRangeWarning)
        fits["kbf"].filter(X[:5])  # in range: no warning


def test_float32_grams_are_solved_in_float64(fits):
    W = kbr.cme_weights(np.eye(5, dtype=np.float32), np.eye(5, dtype=np.float32), 0.1)
    assert W.dtype == np.float64


KILLED_WRITER = """
import sys, time
from bayeskern.fitted import write_atomic

def slow(f):
    f.write(b"new contents, first half ")
    f.flush()
    print("writing", flush=True)
    time.sleep(60)  # killed here
    f.write(b"second half")

write_atomic(sys.argv[1], slow)
"""


@pytest.mark.parametrize("existing", [True, False], ids=["old file", "no file"])
def test_a_writer_killed_mid_way_leaves_the_old_file_or_none(tmp_path, existing):
    import signal
    import subprocess
    import sys

    path = tmp_path / "result.npz"
    if existing:
        path.write_bytes(b"old contents")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"  # the temporary file holds half of the new contents
    proc.send_signal(signal.SIGKILL)  # no cleanup runs
    proc.wait(timeout=30)
    assert (path.read_bytes() == b"old contents") if existing else not path.exists()


def _cli_files(tmp_path):
    rng = np.random.default_rng(3)
    files = {"x": rng.standard_normal((60, 2)), "y": rng.standard_normal((60, 1)), "short": rng.standard_normal((50, 1)),
             "x1": rng.standard_normal((20, 1)), "nan": np.where(rng.random((60, 1)) < 0.1, np.nan, 0.0)}
    paths = {}
    for name, value in files.items():
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], value)
    paths["text"] = str(tmp_path / "text.csv")
    (tmp_path / "text.csv").write_text("a,b\nc,d\n")
    paths["file"] = str(tmp_path / "a_file")
    (tmp_path / "a_file").write_text("")
    return paths


# (id, argv with {placeholders} for the files above, message fragment naming what is wrong)
CLI_CASES = [
    ("demo --out is a file", ["demo", "--out", "{file}"], "--out"),
    ("demo bad permutations", ["demo", "--permutations", "0"], "--permutations"),
    ("two-sample text file", ["two-sample", "{x}", "{text}"], "text.csv"),
    ("two-sample dimensions", ["two-sample", "{x}", "{y}"], "columns"),
    ("independence unpaired", ["independence", "{x}", "{short}"], "rows"),
    ("filter test dimension", ["filter", "{x}", "{x}", "{x1}"], "X_TEST has 1 columns"),
    ("compress m", ["compress", "{x}", "{y}", "--m", "0"], "--m"),
    ("jdl non-finite", ["jdl", "{x}", "{nan}"], "nan.npy contains NaN or inf"),
    ("jdl lam", ["jdl", "{x}", "{y}", "--lam", "-1"], "--lam"),
]


@pytest.mark.parametrize("argv, fragment", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_every_cli_subcommand_gives_a_one_line_error(tmp_path, capsys, argv, fragment):
    from bayeskern.cli import main

    paths = _cli_files(tmp_path)
    argv = [a.format(**paths) for a in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bayeskern: error")]
    assert len(err) == 1 and fragment in err[0], err

import json
import subprocess
import sys

import arviz as az
import jax
import numpy as np
import pandas as pd
import pytest

from bayeskern import compression as bc
from bayeskern import kbr
from bayeskern.cli import main
from bayeskern.jdl import load_model


def _summary(folder):
    return json.loads((folder / "summary.json").read_text())


def test_demo_runs_bkl_mmd_and_witness_posterior(tmp_path, capsys):
    argv = ["demo", "--n", "100", "--permutations", "49", "--chains", "2", "--warmup", "100", "--samples", "100"]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["n_x"] == summary["n_y"] == 100 and summary["n_permutations"] == 49
    assert 0 < summary["p_value"] <= 1 and summary["lengthscale"] > 0
    assert summary["lengthscale_rule"].startswith("BKL") and "m = 10" in summary["lengthscale_rule"]
    assert summary["lengthscale"] < summary["median_heuristic_lengthscale"]
    nuts = summary["nuts"]
    assert nuts["chains"] == 2 and nuts["divergences"] == 0
    assert nuts["lengthscale_80pct"][0] < nuts["lengthscale_mean"] < nuts["lengthscale_80pct"][1]
    assert 0 <= summary["witness_band_excludes_zero_fraction"] <= 1
    assert (tmp_path / "two_sample.png").stat().st_size > 10_000
    assert "p_value" in capsys.readouterr().out
    posterior = az.from_netcdf(tmp_path / "posterior.nc")  # the NUTS posterior, as arviz netCDF
    theta = posterior.posterior["lengthscale"].values
    assert theta.shape == (2, 100) and np.mean(theta) == pytest.approx(nuts["lengthscale_mean"], rel=1e-12)
    assert "diverging" in posterior.sample_stats


def test_two_sample_reads_csv_and_npy(tmp_path):
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "x.csv", rng.standard_normal((60, 2)), delimiter=",", header="a,b", comments="")
    np.save(tmp_path / "y.npy", rng.standard_normal((50, 2)) + 1.5)
    out = tmp_path / "out"
    assert main(["two-sample", str(tmp_path / "x.csv"), str(tmp_path / "y.npy"), "--permutations", "49",
                 "--lengthscale", "1.5", "--out", str(out)]) == 0  # BKL runs in the demo test (suite time)
    summary = json.loads((out / "summary.json").read_text())
    # the smallest p-value there is: 110 rows laid out on 110 blocks give the observed labelling and 109 shifts
    assert summary["dimension"] == 2 and summary["p_value"] == 1 / 110 and summary["reject_at_0.05"]
    assert summary["lengthscale_rule"] == "user" and summary["lengthscale"] == 1.5
    assert "posterior at lengthscale" in summary["witness"]  # 2-D: closed-form witness posterior at that value
    median = tmp_path / "median"
    assert main(["two-sample", str(tmp_path / "x.csv"), str(tmp_path / "y.npy"), "--permutations", "49",
                 "--kernel", "median", "--witness", "none", "--out", str(median)]) == 0
    summary = json.loads((median / "summary.json").read_text())
    assert summary["lengthscale_rule"].startswith("median") and summary["witness"] == "not computed"
    assert (out / "two_sample.png").exists()


def test_bad_files_give_one_line_errors(tmp_path, capsys):
    (tmp_path / "bad.csv").write_text("a,b\n1,x\n2,3\n")
    np.save(tmp_path / "y3.npy", np.ones((5, 3)))
    np.save(tmp_path / "y2.npy", np.arange(10.0).reshape(5, 2))
    cases = [
        ([str(tmp_path / "missing.csv"), str(tmp_path / "y2.npy")], "no such file"),
        ([str(tmp_path / "bad.csv"), str(tmp_path / "y2.npy")],
         f"X: columns ['b'] of {tmp_path / 'bad.csv'} do not hold numbers; choose the numeric ones with --columns"),
        ([str(tmp_path / "y2.npy"), str(tmp_path / "y3.npy")], "same dimension"),
        ([str(tmp_path / "y2.npy"), str(tmp_path / "y2.npy"), "--permutations", "0"], "--permutations must be >= 1"),
        ([str(tmp_path / "y2.npy"), str(tmp_path / "y2.npy"), "--tau2", "-1"], "--tau2 must be positive"),
    ]
    # the installed entry point, in a fresh interpreter: exit status 2 and one line on stderr, no traceback
    proc = subprocess.run([sys.executable, "-m", "bayeskern.cli", "two-sample", *cases[0][0], "--out", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and cases[0][1] in lines[0], proc.stderr
    for argv, message in cases[1:]:  # the same handler, in process (suite time)
        _assert_one_line_error(["two-sample", *argv, "--out", str(tmp_path)], message, capsys)


def test_tables_with_names_dates_and_labels_are_read_by_their_columns(tmp_path, capsys):
    """--columns picks columns by header name or 0-based position in CSV, text and .npy files; --y-columns picks the
    second file's (both variables of an independence test in one table); what cannot be read is named."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(120)
    table = pd.DataFrame({"date": pd.date_range("2020-01-01", periods=120).astype(str), "id": np.arange(120),
                          "x": x, "y": x**2 + 0.3 * rng.standard_normal(120), "group": ["a", "b"] * 60})
    table.to_csv(tmp_path / "p.csv", index=False)
    shifted = table.assign(x=table["x"] + 2.0)
    shifted.to_csv(tmp_path / "q.csv", index=False)
    np.savetxt(tmp_path / "q.txt", shifted[["id", "x"]].to_numpy())          # no header: positions only
    args = ["--kernel", "median", "--witness", "none", "--permutations", "49"]
    for y_file, y_columns, out in (("q.csv", [], "names"), ("q.txt", ["--y-columns", "1"], "positions")):
        assert main(["two-sample", str(tmp_path / "p.csv"), str(tmp_path / y_file), "--columns", "x", *y_columns,
                     *args, "--out", str(tmp_path / out)]) == 0
        summary = _summary(tmp_path / out)
        assert summary["dimension"] == 1 and summary["n_x"] == summary["n_y"] == 120 and summary["reject_at_0.05"]
    both = tmp_path / "both"
    assert main(["independence", str(tmp_path / "p.csv"), str(tmp_path / "p.csv"), "--columns", "2",
                 "--y-columns", "y", "--permutations", "99", "--out", str(both)]) == 0
    summary = _summary(both)
    assert summary["n"] == 120 and summary["dim_y"] == 1 and summary["reject_at_0.05"]
    np.save(tmp_path / "q.npy", shifted[["x", "y"]].to_numpy())
    assert main(["two-sample", str(tmp_path / "q.npy"), str(tmp_path / "q.npy"), "--columns", "0", *args,
                 "--out", str(tmp_path / "npy")]) == 0
    assert _summary(tmp_path / "npy")["p_value"] == 1.0
    table.loc[7, "y"] = np.nan
    table.to_csv(tmp_path / "holes.csv", index=False)
    p, holes = str(tmp_path / "p.csv"), str(tmp_path / "holes.csv")
    for argv, message in (
        ([p, p, "--columns", "x,w"], f"--columns: X ({p}) has no column 'w' (columns: ['date', 'id', 'x', 'y', "
                                     "'group'], or positions 0-4)"),
        ([p, p, "--columns", "x", "--y-columns", "9"], "--y-columns: Y"),
        ([p, p, "--columns", "x,group"], f"X: columns ['group'] of {p} do not hold numbers"),
        ([holes, holes, "--columns", "x,y"], f"X: columns ['y'] of {holes} have empty cells"),
    ):
        _assert_one_line_error(["two-sample", *argv, *args, "--out", str(tmp_path / "bad")], message, capsys)


def _assert_one_line_error(argv, message, capsys):
    capsys.readouterr()
    assert main(argv) == 2  # any other exception would propagate here as a traceback
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bayeskern: error: ") and message in lines[0], lines


def test_independence_detects_dependence_and_offers_the_gamma_null(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((150, 1))
    np.save(tmp_path / "x.npy", x)
    np.savetxt(tmp_path / "y.csv", np.hstack([x**2 + 0.3 * rng.standard_normal((150, 1)), rng.standard_normal((150, 1))]),
               delimiter=",")
    np.save(tmp_path / "z.npy", rng.standard_normal((150, 2)))
    out = tmp_path / "dep"
    assert main(["independence", str(tmp_path / "x.npy"), str(tmp_path / "y.csv"), "--permutations", "99",
                 "--out", str(out)]) == 0
    s = _summary(out)
    assert s["p_value"] == 0.01 and s["reject_at_0.05"] and s["n"] == 150 and s["dim_y"] == 2
    assert s["lengthscale_rule"].startswith("median") and s["lengthscale_x"] > 0 and s["lengthscale_y"] > 0
    assert (out / "independence.png").exists()
    indep = tmp_path / "indep"
    assert main(["independence", str(tmp_path / "x.npy"), str(tmp_path / "z.npy"), "--permutations", "0",
                 "--out", str(indep)]) == 0
    s = _summary(indep)
    assert s["null"] == "Gamma approximation" and s["p_value"] > 0.05 and "n_permutations" not in s


def test_outputs_are_never_overwritten_without_force_and_are_written_whole(tmp_path, capsys):
    rng = np.random.default_rng(2)
    np.save(tmp_path / "x.npy", rng.standard_normal((60, 1)))
    np.save(tmp_path / "y.npy", rng.standard_normal((60, 1)))
    out = tmp_path / "out"
    argv = ["independence", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--permutations", "0", "--out", str(out)]
    assert main(argv) == 0
    first = (out / "summary.json").read_bytes()
    (out / "notes.txt").write_text("a file of the user's")
    _assert_one_line_error(argv, "already holds summary.json, independence.png; pass --force", capsys)
    assert (out / "summary.json").read_bytes() == first  # refused before any work: nothing touched
    assert main(argv + ["--seed", "1", "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["independence.png", "notes.txt", "summary.json"]  # no temp files
    (tmp_path / "a_file").write_text("")
    _assert_one_line_error(argv[:-1] + [str(tmp_path / "a_file")], "is a file, not a folder", capsys)


def _sequence_files(tmp_path, T, T_test, seed):
    """Rotation dynamics saved as x/z (training), xt/zt (test) .npy files; returns the sequence and the CLI's three
    positional files."""
    seq = kbr.data.circle_dynamics(T, jax.random.key(seed), T_test=T_test)
    for name, value in zip(("x", "z", "xt", "zt"), seq):
        np.save(tmp_path / f"{name}.npy", np.asarray(value))
    return seq, [str(tmp_path / f"{name}.npy") for name in ("x", "z", "xt")]


def test_filter_tunes_filters_and_saves_a_filter_that_loads_exactly(tmp_path):
    seq, files = _sequence_files(tmp_path, 120, 40, 0)
    out = tmp_path / "out"
    assert main(["filter", *files, "--z-test", str(tmp_path / "zt.npy"), "--validation", "40", "--out", str(out)]) == 0
    s = _summary(out)
    assert s["training_steps"] == 120 and s["test_steps"] == 40 and len(s["validation_mse"]) == 15
    raw = kbr.filter_mse(seq.X_test, seq.Z_test)
    assert s["test_mse"] < raw  # the filter beats the raw observations
    filtered = np.loadtxt(out / "filtered.csv", delimiter=",", skiprows=1)
    loaded = kbr.load_filter(out / "filter.npz")
    np.testing.assert_array_equal(filtered, np.asarray(loaded.filter(seq.X_test)))
    assert s["test_mse"] == pytest.approx(kbr.filter_mse(filtered, seq.Z_test), rel=1e-12)
    assert (out / "filter.png").exists() and not (out / "posterior.nc").exists()


@pytest.mark.slow  # suite time: the README executes compress_split + NUTS + posterior predictive filtering
def test_filter_with_nuts_writes_bands_and_a_netcdf_posterior(tmp_path):
    seq, files = _sequence_files(tmp_path, 80, 30, 1)
    out = tmp_path / "nuts"
    assert main(["filter", *files, "--z-test", str(tmp_path / "zt.npy"), "--validation", "30", "--nuts", "--chains",
                 "1", "--warmup", "15", "--samples", "10", "--max-tree-depth", "3", "--landmarks", "10",
                 "--draws", "5", "--out", str(out)]) == 0
    s = _summary(out)["nuts"]
    assert s["posterior_draws_filtered"] == 5 and 0 <= s["band_coverage"] <= 1 and s["landmarks"] == 10
    table = np.loadtxt(out / "filtered.csv", delimiter=",", skiprows=1)
    assert table.shape == (30, 8) and np.all(table[:, 4:6] <= table[:, 6:8])  # lower <= upper band
    posterior = az.from_netcdf(out / "posterior.nc").posterior
    assert posterior["log_lam"].shape == (1, 10) and "z_val_hat" in posterior


def test_compress_writes_a_set_that_beats_a_random_subset(tmp_path):
    x, y = bc.data.heteroscedastic(300, jax.random.key(0))
    np.save(tmp_path / "x.npy", np.asarray(x))
    np.savetxt(tmp_path / "y.csv", np.asarray(y), delimiter=",")
    out = tmp_path / "jkh"  # ACKIP, the default method, runs in the README (suite time)
    assert main(["compress", str(tmp_path / "x.npy"), str(tmp_path / "y.csv"), "--method", "jkh", "--m", "12",
                 "--quiet", "--out", str(out)]) == 0
    s = _summary(out)
    assert s["m"] == 12 and s["n"] == 300 and s["method"] == "jkh"
    table = np.loadtxt(out / "compressed.csv", delimiter=",", skiprows=1)
    result = bc.load_result(out / "compressed.npz")
    np.testing.assert_array_equal(table, np.hstack([result.x_original, result.y_original]))
    assert s["jmmd2_compressed"] < s["jmmd2_random_subset"]  # herding targets JMMD^2
    labels = tmp_path / "labels.csv"
    np.savetxt(labels, (np.asarray(x)[:, 0] > 0).astype(int))
    out = tmp_path / "labels"
    assert main(["compress", str(tmp_path / "x.npy"), str(labels), "--labels", "--method", "jkh", "--m", "6",
                 "--quiet", "--out", str(out)]) == 0
    assert _summary(out)["response"] == "class labels"


def test_jdl_validates_fits_and_reads_off_conditional_means(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.uniform(-2, 2, (250, 1))
    y = np.sin(2 * x) + 0.2 * rng.standard_normal((250, 1))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    out = tmp_path / "out"
    assert main(["jdl", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--out", str(out)]) == 0
    s = _summary(out)
    assert s["normalisation_error"] <= 1e-12 and s["constraint"] == "grid" and s["undefined_conditionals"] == 0
    assert s["validation"].startswith("45 ") and s["queries_with_negative_weights"] == 0.0
    scores = np.loadtxt(out / "validation.csv", delimiter=",", skiprows=1)
    assert scores.shape == (45, 4) and scores[np.nanargmin(scores[:, 3]), 2] == s["lam"]   # the best row was used
    table = np.loadtxt(out / "conditional.csv", delimiter=",", skiprows=1)
    assert table.shape == (200, 3)
    truth = np.sin(2 * table[:, 0])  # E[Y | x]: tracked, shrunk a little by the positivity constraint
    assert np.corrcoef(table[:, 1], truth)[0, 1] > 0.97 and np.sqrt(np.mean((table[:, 1] - truth) ** 2)) < 0.25
    model = load_model(out / "model.npz")
    np.testing.assert_array_equal(np.asarray(model.conditional_expectation(table[:, :1]).mean)[:, 0], table[:, 1])


def test_jdl_held_out_loss_equals_the_estimation_loss_minus_v():
    """The validation score is E(h) on the held-out pairs, minus v (their number)."""
    from bayeskern import RBF
    from bayeskern.jdl import fit_jdl, held_out_ratio_loss

    rng = np.random.default_rng(3)
    x = rng.standard_normal((60, 1))
    y = x + 0.5 * rng.standard_normal((60, 1))
    model = fit_jdl(x[:40], y[:40], RBF(1.0), RBF(1.0), 1e-3, constraint="normalised")
    xv, yv = x[40:], y[40:]
    v = len(xv)
    h = np.array([[float(model.density_ratio(xv[i:i + 1], yv[j:j + 1])[0]) - 1 for j in range(v)] for i in range(v)])
    loss = np.sum((v * np.eye(v) - 1 - h) ** 2) / v**2
    assert held_out_ratio_loss(model, xv, yv) == pytest.approx(loss - v, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("argv, message", [
    (["independence", "{a}", "{b}"], "rows must be paired"),
    (["compress", "{a}", "{a}", "--m", "40"], "must be smaller than"),
    (["compress", "{a}", "{a}", "--labels", "--m", "5"], "integer class labels"),
    (["jdl", "{a}", "{a}", "--tol", "2"], "--tol must lie in (0, 1)"),
    (["filter", "{a}", "{a}", "{c}"], "X_TEST has 3 columns"),
    (["filter", "{a}", "{b}", "{a}"], "rows must be paired"),
])
def test_new_subcommands_give_one_line_errors(tmp_path, argv, message, capsys):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.standard_normal((30, 2)))
    np.save(tmp_path / "b.npy", rng.standard_normal((20, 2)))
    np.save(tmp_path / "c.npy", rng.standard_normal((20, 3)))
    argv = [a.format(a=tmp_path / "a.npy", b=tmp_path / "b.npy", c=tmp_path / "c.npy") for a in argv]
    _assert_one_line_error([*argv, "--out", str(tmp_path)], message, capsys)


def test_every_subcommand_explains_its_options():
    from bayeskern.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == {"demo", "two-sample", "independence", "filter", "forecast", "compress",
                                  "jdl"}
    for name, command in sub.choices.items():
        assert command.description, name
        for action in command._actions:
            assert action.help, f"{name}: option {action.dest} has no help"


def _press_ctrl_c_on_call(monkeypatch, module, name, call):
    """Make ``module.name`` raise KeyboardInterrupt on its ``call``-th call, as a Ctrl-C arriving then would."""
    original, calls = getattr(module, name), [0]

    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] == call:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)


def test_interrupted_compression_keeps_the_set_so_far(tmp_path, monkeypatch, capsys):
    import bayeskern.optim

    x, y = bc.data.heteroscedastic(200, jax.random.key(1))
    np.save(tmp_path / "x.npy", np.asarray(x))
    np.save(tmp_path / "y.npy", np.asarray(y))
    _press_ctrl_c_on_call(monkeypatch, bayeskern.optim, "_round", 3)   # ACKIP runs rounds of 50 steps
    out = tmp_path / "out"
    assert main(["compress", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--m", "8", "--steps", "500",
                 "--quiet", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "ACKIP interrupted" in err and "after 100 of 500 steps" in err and "compressed.csv, compressed.npz" in err
    result = bc.load_result(out / "compressed.npz")
    assert result.m == 8 and result.objective.shape == (101,) and not (out / "summary.json").exists()
    np.testing.assert_array_equal(np.loadtxt(out / "compressed.csv", delimiter=",", skiprows=1),
                                  np.hstack([result.x_original, result.y_original]))


def test_interrupted_jdl_validation_keeps_the_scores_so_far(tmp_path, monkeypatch, capsys):
    import bayeskern.jdl.fit

    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (120, 1))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.sin(x) + 0.1 * rng.standard_normal((120, 1)))
    _press_ctrl_c_on_call(monkeypatch, bayeskern.jdl.fit, "fit_jdl", 7)
    out = tmp_path / "out"
    assert main(["jdl", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--out", str(out)]) == 130
    assert "6 of 45 settings scored so far" in capsys.readouterr().err
    assert np.loadtxt(out / "validation.csv", delimiter=",", skiprows=1).shape == (6, 4)
    assert not (out / "model.npz").exists()


def test_interrupted_nuts_in_the_filter_keeps_the_draws_so_far(tmp_path, monkeypatch, capsys):
    """The second chunk of the NUTS run (warm-up, then a chunk of 100 draws) ends with a Ctrl-C: posterior.nc holds
    the 100 draws, the fitted filter is kept, and no predictive output is written."""
    import bayeskern.inference.nuts as nuts

    class Bar(nuts.tqdm):
        updates = 0

        def update(self, n=1):
            Bar.updates += 1
            if Bar.updates == 2:
                raise KeyboardInterrupt
            return super().update(n)

    monkeypatch.setattr(nuts, "tqdm", Bar)
    _, files = _sequence_files(tmp_path, 60, 10, 2)
    out = tmp_path / "out"
    assert main(["filter", *files, "--validation", "24", "--nuts", "--chains", "1", "--warmup", "5", "--samples",
                 "1000", "--max-tree-depth", "2", "--landmarks", "5", "--out", str(out)]) == 130
    assert "holds the 100 draws per chain finished so far (of 1000)" in capsys.readouterr().err
    assert az.from_netcdf(out / "posterior.nc").posterior["log_lam"].shape == (1, 100)
    assert (out / "filter.npz").exists() and not (out / "filtered.csv").exists()


def test_both_tests_offer_the_bayesian_aggregate(tmp_path, capsys):
    rng = np.random.default_rng(3)
    x = rng.uniform(-np.pi, np.pi, (120, 1))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.sin(6 * x) + 0.2 * rng.standard_normal((120, 1)))
    np.save(tmp_path / "q.npy", rng.laplace(0.0, 1.5, (100, 1)))
    out = tmp_path / "hsic"
    assert main(["independence", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--kernel", "bayes",
                 "--permutations", "99", "--out", str(out)]) == 0
    s = _summary(out)
    assert s["kernel"] == "bayes aggregate" and s["reject_at_0.05"] and len(s["kernels"]) == 5
    evidence = [np.log(k["weight"] / k["p_value"]) for k in s["kernels"]]
    assert evidence == sorted(evidence, reverse=True)   # strongest kernel pair first
    two = tmp_path / "mmd"
    assert main(["two-sample", str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--kernel", "bayes",
                 "--permutations", "99", "--out", str(two)]) == 0
    s = _summary(two)
    assert s["kernel"] == "bayes aggregate" and 0 < s["p_value"] <= 1 and "mmd2_unbiased" not in s
    assert s["lengthscale"] > 0 and "posterior at lengthscale" in s["witness"]
    assert sum(k["weight"] for k in s["kernels"]) <= 1 + 1e-12 and (two / "two_sample.png").exists()
    _assert_one_line_error(["independence", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--kernel", "bayes",
                            "--permutations", "0", "--out", str(tmp_path / "g")], "--kernel bayes needs", capsys)

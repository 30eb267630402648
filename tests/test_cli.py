import json
import subprocess
import sys

import numpy as np

from bayeskern.cli import main


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


def test_two_sample_reads_csv_and_npy(tmp_path):
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "x.csv", rng.standard_normal((60, 2)), delimiter=",", header="a,b", comments="")
    np.save(tmp_path / "y.npy", rng.standard_normal((50, 2)) + 1.5)
    out = tmp_path / "out"
    assert main(["two-sample", str(tmp_path / "x.csv"), str(tmp_path / "y.npy"), "--permutations", "49",
                 "--inducing", "10", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dimension"] == 2 and summary["p_value"] == 1 / 50 and summary["reject_at_0.05"]
    assert summary["lengthscale_rule"].startswith("BKL")
    assert "posterior at lengthscale" in summary["witness"]  # 2-D: closed-form witness posterior at the BKL value
    median = tmp_path / "median"
    assert main(["two-sample", str(tmp_path / "x.csv"), str(tmp_path / "y.npy"), "--permutations", "49",
                 "--kernel", "median", "--witness", "none", "--out", str(median)]) == 0
    summary = json.loads((median / "summary.json").read_text())
    assert summary["lengthscale_rule"].startswith("median") and summary["witness"] == "not computed"
    assert (out / "two_sample.png").exists()


def test_bad_files_give_one_line_errors(tmp_path):
    (tmp_path / "bad.csv").write_text("a,b\n1,x\n2,3\n")
    np.save(tmp_path / "y3.npy", np.ones((5, 3)))
    np.save(tmp_path / "y2.npy", np.arange(10.0).reshape(5, 2))
    cases = [
        ([str(tmp_path / "missing.csv"), str(tmp_path / "y2.npy")], "no such file"),
        ([str(tmp_path / "bad.csv"), str(tmp_path / "y2.npy")], "cannot read"),
        ([str(tmp_path / "y2.npy"), str(tmp_path / "y3.npy")], "same dimension"),
        ([str(tmp_path / "y2.npy"), str(tmp_path / "y2.npy"), "--permutations", "0"], "--permutations must be >= 1"),
        ([str(tmp_path / "y2.npy"), str(tmp_path / "y2.npy"), "--tau2", "-1"], "--tau2 must be positive"),
    ]
    for argv, message in cases:
        proc = subprocess.run([sys.executable, "-m", "bayeskern.cli", "two-sample", *argv, "--out", str(tmp_path)],
                              capture_output=True, text=True)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], proc.stderr

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_sample_quickstart_runs_and_detects_both_effects(tmp_path):
    mmd, hsic = _load("two_sample_quickstart").main(tmp_path, n=400)
    assert mmd.reject(0.05) and hsic.reject(0.05)
    assert (tmp_path / "two_sample_quickstart.png").stat().st_size > 10_000

"""The fitted-object protocol: every fitted class saves and loads bit for bit; foreign or damaged files are refused."""

import dataclasses
import json
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import bke, compression, jdl, kbr
from bayeskern.fitted import FileFormatError
from bayeskern.inference import MCMCResult, Type2Result, fit_type2, run_nuts
from bayeskern.kernels import RBF
from bayeskern.models import bke_model


def _identical(a, b):
    """Same classes and settings everywhere (pytree structure) and every leaf equal bit for bit, of the same kind."""
    assert type(a) is type(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert type(x) is type(y), (type(x), type(y))
        if isinstance(x, (np.ndarray, jax.Array, np.generic)):
            assert x.dtype == y.dtype and np.shape(x) == np.shape(y)
            assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
        else:
            assert x == y


@pytest.fixture(scope="module")
def fitted_objects():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 1))
    Y = np.sin(2 * X) + 0.1 * rng.standard_normal((60, 1))
    objects = {}
    X_rest, Z = bke.hold_out_inducing(X, jax.random.key(1), 5)
    objects["type2"] = fit_type2(X_rest, Z, 1.0, grid=np.geomspace(0.05, 5, 21))
    objects["mcmc"] = run_nuts(bke_model, X_rest, Z, key=jax.random.key(2), num_chains=2, num_warmup=30,
                               num_samples=30, progress_bar=False, rhat_max=10.0, min_ess=1)
    seq = kbr.data.circle_dynamics(40, jax.random.key(3), T_test=5)
    kbf = kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=1e-3, eta=1e-4)
    objects["filter"] = kbf
    objects["tune"] = kbr.TuneResult(kbf, 1.0, 1e-3, 1e-4, {(1.0, 1e-3): 0.25})
    objects["filter_state"] = kbf.update(kbf.initial_state(), seq.X_test[0])[0]
    bases = jdl.jdl_bases(X, Y, RBF(0.5), RBF(0.5), tol=1e-4)
    objects["jdl"] = jdl.fit_jdl(None, None, None, None, 1e-3, constraint="normalised", bases=bases)
    objects["jpdl"] = jdl.fit_jpdl(X, Y, 3, 1e-2)
    objects["cme"] = jdl.fit_cme(None, None, None, None, 1e-3, bases=bases)
    objects["klr"] = jdl.fit_klr(X, (Y[:, 0] > 0).astype(float), RBF(0.5), 1e-2)
    objects["compression"] = compression.jkh(X, Y, 6, key=jax.random.key(4), lam_c=1e-2, progress_bar=False)
    objects["embedding_posterior"] = bke.embedding_posterior(X[:20], RBF(0.7), 1.0)
    objects["witness"] = bke.witness_posterior(X[:20], X[20:40] + 0.5, RBF(0.7), grid=np.linspace(-2, 2, 7))
    objects["embedding"] = bk.mean_embedding(X[:10], RBF(0.7))
    objects["conditional"] = objects["jdl"].conditional_expectation(X[:4])
    return objects


def test_every_fitted_class_round_trips_bit_for_bit(fitted_objects, tmp_path):
    expected = {bk.kbr.KernelBayesFilter, kbr.FilterState, kbr.TuneResult, jdl.JointDistributionModel, jdl.LowRankCME,
                jdl.LowRankKLR, compression.CompressionResult, MCMCResult, Type2Result, bke.EmbeddingPosterior,
                bke.WitnessPosterior, bk.KernelEmbedding, bk.ConditionalExpectation}
    assert {type(obj) for obj in fitted_objects.values()} == expected
    for name, obj in fitted_objects.items():
        assert dataclasses.is_dataclass(obj) and dataclasses.fields(obj)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, dataclasses.fields(obj)[0].name, None)
        obj.save(tmp_path / f"{name}.npz")
        back = bk.load(tmp_path / f"{name}.npz")
        _identical(back, obj)
        assert back == obj and hash(back) == hash(obj)  # plain equality of the object and its saved copy
    assert fitted_objects["jpdl"].basis_x.__class__.__name__ == "PolynomialBasis"


def test_loaded_objects_work_as_the_originals(fitted_objects, tmp_path):
    mcmc = fitted_objects["mcmc"]
    mcmc.save(tmp_path / "run.npz")
    back = bk.load(tmp_path / "run.npz")
    assert back.diagnostics == mcmc.diagnostics and back.backend == mcmc.backend
    assert set(back.idata.groups()) == set(mcmc.idata.groups())
    np.testing.assert_array_equal(back.idata.sample_stats["energy"], mcmc.idata.sample_stats["energy"])
    jdl_model = fitted_objects["jdl"]
    jdl_model.save(tmp_path / "jdl.npz")
    q = np.linspace(-1, 1, 5)[:, None]
    np.testing.assert_array_equal(jdl.load_model(tmp_path / "jdl.npz").conditional_expectation(q).mean,
                                  jdl_model.conditional_expectation(q).mean)
    with pytest.raises(FileFormatError, match="holds a JointDistributionModel, not a KernelBayesFilter"):
        kbr.load_filter(tmp_path / "jdl.npz")


def test_foreign_damaged_and_newer_files_are_refused(fitted_objects, tmp_path):
    np.savez(tmp_path / "plain.npz", x=np.arange(3))
    with pytest.raises(FileFormatError, match="not a bayeskern save"):
        bk.load(tmp_path / "plain.npz")
    np.save(tmp_path / "array.npy", np.arange(3))
    with pytest.raises(FileFormatError, match="plain .npy array"):
        bk.load(tmp_path / "array.npy")
    good = tmp_path / "good.npz"
    fitted_objects["cme"].save(good)
    data = good.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(FileFormatError, match="truncated or damaged"):
        bk.load(tmp_path / "cut.npz")

    def rewrite(name, change):
        with zipfile.ZipFile(good) as archive:
            entries = {n: archive.read(n) for n in archive.namelist()}
        header = json.loads(np.load(good)["__bayeskern__"].tobytes().decode())
        change(header)
        payload = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        arrays = {n[:-4]: np.load(good)[n[:-4]] for n in entries if n != "__bayeskern__.npy"}
        np.savez(tmp_path / name, __bayeskern__=payload, **arrays)
        return tmp_path / name

    foreign = rewrite("foreign.npz", lambda h: h["object"].update({"object": "Popen"}))
    with pytest.raises(FileFormatError, match="'Popen', which is not a bayeskern fitted class"):
        bk.load(foreign)
    kernel = rewrite("kernel.npz", lambda h: h["object"]["fields"]["kernel_x"].update({"kernel": "os.system"}))
    with pytest.raises(FileFormatError, match="not a bayeskern kernel"):
        bk.load(kernel)
    other = rewrite("other.npz", lambda h: h["object"]["fields"].update({"F2": h["object"]["fields"].pop("F")}))
    with pytest.raises(FileFormatError, match="does not describe a LowRankCME"):
        bk.load(other)
    newer = rewrite("newer.npz", lambda h: h.update({"format_version": 99}))
    with pytest.raises(FileFormatError, match="file format 99"):
        bk.load(newer)
    assert type(bk.load(rewrite("same.npz", lambda h: None))) is jdl.LowRankCME  # the rewriting itself is sound


def test_saves_are_atomic_and_values_that_are_not_data_are_refused(fitted_objects, tmp_path):
    path = tmp_path / "f.npz"
    fitted_objects["klr"].save(path)
    before = path.read_bytes()
    broken = dataclasses.replace(fitted_objects["klr"], lam=object())  # fails half-way through encoding
    with pytest.raises(TypeError, match="cannot save a value of type object"):
        broken.save(path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["f.npz"]
    plain = tmp_path / "plain"
    plain.write_bytes(b"")  # a file made the ordinary way: the atomic save gets the same permissions
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_loading_float64_files_needs_x64(fitted_objects, tmp_path):
    fitted_objects["cme"].save(tmp_path / "c.npz")
    bk.enable_x64(False)
    try:
        with pytest.raises(RuntimeError, match="enable_x64"):
            bk.load(tmp_path / "c.npz")
    finally:
        bk.enable_x64()
    assert jnp.asarray(1.0).dtype == jnp.float64


def test_equality_compares_classes_settings_and_arrays(fitted_objects):
    jdl_model, cme = fitted_objects["jdl"], fitted_objects["cme"]
    assert jdl_model == jdl_model and jdl_model != cme
    other = dataclasses.replace(jdl_model, H=jdl_model.H.at[0, 0].add(1e-12))
    assert other != jdl_model  # one coefficient changed
    assert dataclasses.replace(jdl_model, H=jdl_model.H.astype(np.float32)) != jdl_model  # same values, other dtype
    assert RBF(0.5) == RBF(0.5) and RBF(0.5) != RBF(0.6) and RBF(0.5) != bk.Matern32(0.5)
    assert len({RBF(0.5), RBF(0.5), RBF(0.6)}) == 2


def test_certificates_say_none_where_a_quantity_does_not_apply(fitted_objects):
    """No NaN placeholders: a normalised fit has no positivity margin, an unconstrained one no multipliers."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 1))
    Y = X**2 + 0.1 * rng.standard_normal((40, 1))
    fits = {c: jdl.fit_jdl(X, Y, RBF(0.5), RBF(0.5), 1e-3, constraint=c)
            for c in ("unconstrained", "normalised", "data_box")}
    expected = {"unconstrained": (None, None, None), "normalised": (float, None, None),
                "data_box": (float, float, float)}
    for constraint, model in fits.items():
        got = (model.solution.mu, model.solution.nu, model.solution.positivity)
        for value, kind in zip(got, expected[constraint]):
            assert value is None if kind is None else (isinstance(value, float) and np.isfinite(value)), \
                (constraint, got)
    assert fitted_objects["jpdl"].solution.positivity is None  # unconstrained JPDL
    sos = jdl.fit_jpdl(X, Y, 2, 1e-2, constraint="sos").solution  # the interior-point program reports no multipliers
    assert sos.mu is None and sos.nu is None and isinstance(sos.positivity, float) and np.isfinite(sos.positivity)

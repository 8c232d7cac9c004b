"""Which exp: every transform equals the library's own output, in this process, on this host.

numpy 2.x runs its own float64 exp on AVX-512 CPUs (last bit differs from glibc's for ~5% of
inputs); LightGBM and scipy.special.expit (sklearn's sigmoid) call libm's exp, sklearn's softmax
and log link call np.exp, XGBoost's survival:aft takes exp in double, XGBClassifier's multi:softmax
predict_proba numpy's float32 exp. So expected values are
never stored: each test asks the library in-process, and test_other_numpy_dispatch reruns this
module with numpy's AVX-512 code switched off (NPY_DISABLE_CPU_FEATURES), so one machine checks
both of numpy's dispatches.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import treecomp
from treecomp import interp, outputs

lgb = pytest.importorskip("lightgbm")
xgb = pytest.importorskip("xgboost")
ensemble = pytest.importorskip("sklearn.ensemble")

RNG = np.random.default_rng(20261123)
X_TRAIN = RNG.normal(size=(600, 5))
# wide rows: margins far from 0, where sigmoids and exps round most differently
X_TEST = np.concatenate([RNG.normal(size=(240, 5)) * 3, X_TRAIN[:40]])
Y_CLASS = (X_TRAIN[:, 0] + RNG.normal(size=600) > 0).astype(int) + (X_TRAIN[:, 1] > 0.5)
Y_POS = np.exp(0.7 * X_TRAIN[:, 0] + 0.3 * RNG.normal(size=600))


def _lgb(objective, y, **kw):
    cls = lgb.LGBMClassifier if objective in ("binary", "multiclass") else lgb.LGBMRegressor
    return cls(objective=objective, n_estimators=12, num_leaves=7, verbose=-1, **kw).fit(X_TRAIN, y)


def _xgb_aft():
    d = xgb.DMatrix(X_TRAIN)
    d.set_float_info("label_lower_bound", Y_POS)
    d.set_float_info("label_upper_bound", Y_POS * 1.5)
    return xgb.train({"objective": "survival:aft", "max_depth": 3, "base_score": 1.5}, d, 12)


MODELS = {
    "lgb-binary": lambda: _lgb("binary", Y_CLASS > 0),
    "lgb-multiclass": lambda: _lgb("multiclass", Y_CLASS),
    "lgb-multiclass-9": lambda: _lgb("multiclass", (np.abs(X_TRAIN[:, 2]) * 4).astype(int) % 9),
    "lgb-poisson": lambda: _lgb("poisson", np.round(Y_POS)),
    "lgb-gamma": lambda: _lgb("gamma", Y_POS),
    "lgb-tweedie": lambda: _lgb("tweedie", Y_POS),
    "gb-binary": lambda: ensemble.GradientBoostingClassifier(n_estimators=8, max_depth=2).fit(X_TRAIN, Y_CLASS > 0),
    "gb-exponential": lambda: ensemble.GradientBoostingClassifier(
        loss="exponential", n_estimators=8, max_depth=2).fit(X_TRAIN, Y_CLASS > 0),
    "gb-multiclass": lambda: ensemble.GradientBoostingClassifier(n_estimators=8, max_depth=2).fit(X_TRAIN, Y_CLASS),
    "hgb-binary": lambda: ensemble.HistGradientBoostingClassifier(max_iter=8).fit(X_TRAIN, Y_CLASS > 0),
    "hgb-multiclass": lambda: ensemble.HistGradientBoostingClassifier(max_iter=8).fit(X_TRAIN, Y_CLASS),
    "hgb-poisson": lambda: ensemble.HistGradientBoostingRegressor(loss="poisson", max_iter=8).fit(X_TRAIN, Y_POS),
    "hgb-gamma": lambda: ensemble.HistGradientBoostingRegressor(loss="gamma", max_iter=8).fit(X_TRAIN, Y_POS),
    "xgb-aft": _xgb_aft,
    # predict_proba: scipy's float32 softmax of the margins (numpy's float32 exp, pairwise sum)
    "xgb-softmax-9": lambda: xgb.XGBClassifier(
        objective="multi:softmax", n_estimators=6, max_depth=3, n_jobs=1).fit(
        X_TRAIN, (np.abs(X_TRAIN[:, 2]) * 4).astype(int) % 9),
}
_CACHE: dict = {}


def model(name):
    if name not in _CACHE:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _CACHE[name] = MODELS[name]()
    return _CACHE[name]


def library_outputs(m) -> dict[str, np.ndarray]:
    """What the library returns, computed now, in this process."""
    if isinstance(m, xgb.Booster):
        return {"predict": m.predict(xgb.DMatrix(X_TEST))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = {"predict": m.predict(X_TEST)}
        if hasattr(m, "predict_proba"):
            out["predict_proba"] = m.predict_proba(X_TEST)
    return out


def check(name: str, predictor_or_fn) -> None:
    m = model(name)
    for method, want in library_outputs(m).items():
        got = predictor_or_fn(method)
        assert got.dtype == want.dtype and got.shape == want.shape, (method, got.dtype, got.shape)
        bad = np.flatnonzero((got != want).reshape(len(want), -1).any(axis=1))
        assert bad.size == 0, f"{name} {method}: {bad.size} rows differ, e.g. row {bad[:3]}: " \
                              f"{got[bad[:3]]!r} vs {want[bad[:3]]!r}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_interpreter_equals_library(name):
    f = treecomp.parse(model(name))
    check(name, lambda method: getattr(interp, method)(f, X_TEST))


@pytest.mark.parametrize("isa", ["auto", "llvm", "numpy"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_arrays_paths_equal_library(name, isa):
    """The C kernel (native transform), and both compiler-free fallbacks (Python transform)."""
    p = treecomp.compile(model(name), backend="arrays", isa=isa)
    check(name, lambda method: getattr(p, method)(X_TEST))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_single_rows_equal_library(name):
    """One row at a time: the small-batch entry and its own transforms."""
    p = treecomp.compile(model(name), backend="arrays")

    def rows(method):
        return np.concatenate([getattr(p, method)(X_TEST[i:i + 1]) for i in range(len(X_TEST))])
    check(name, rows)


@pytest.mark.parametrize("backend", ["c", "llvm"])
@pytest.mark.parametrize("name", ["lgb-multiclass-9", "lgb-poisson", "lgb-binary", "gb-multiclass",
                                  "hgb-poisson", "hgb-binary", "xgb-aft"])
def test_codegen_backends_equal_library(name, backend):
    p = treecomp.compile(model(name), backend=backend)
    check(name, lambda method: getattr(p, method)(X_TEST))


def test_exp_lib_is_set_per_library():
    assert treecomp.parse(model("lgb-poisson")).exp_lib == "libm"
    assert treecomp.parse(model("hgb-binary")).exp_lib == "libm"        # scipy's expit
    assert treecomp.parse(model("hgb-poisson")).exp_lib == "numpy"      # LogLink: np.exp
    assert treecomp.parse(model("gb-multiclass")).exp_lib == "numpy"    # extmath.softmax
    assert treecomp.parse(model("xgb-aft")).transform == "exp64"


def test_libm_exp_is_the_c_library_exp():
    x = np.concatenate([RNG.normal(0, 8, 20000), [709.78, 709.79, -745.2, -746.0, 0.0, -0.0,
                                                  np.inf, -np.inf, np.nan, 1e-300, 5e-324]])
    want = np.array([math.exp(v) if v < 709.79 or v != v else math.inf for v in x.tolist()])
    for got in (outputs.libm_exp(x), np.concatenate([outputs.libm_exp(x[i:i + 3]) for i in range(0, len(x), 3)])):
        np.testing.assert_array_equal(got, want)
    assert outputs._libm_exp_jit() is not None  # the vectorised loop, not math.exp per value


def test_numpy_exp_lib_uses_numpy():
    """exp_lib="numpy" is the user's np.exp, whatever it dispatches to."""
    f = treecomp.parse(model("hgb-poisson"))
    raw = RNG.normal(0, 5, (5000, 1))
    np.testing.assert_array_equal(outputs.transform(f, raw), np.exp(raw))
    np.testing.assert_array_equal(outputs.transform(f.replace(exp_lib="libm"), raw), outputs.libm_exp(raw))


def _avx512_dispatch_targets() -> list[str]:
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return [t for t in __cpu_dispatch__ if __cpu_features__.get(t) and ("V4" in t or "AVX512" in t)]


@pytest.mark.skipif(os.environ.get("TREECOMP_TEST_NUMPY_DISPATCH") == "off", reason="already the rerun")
def test_other_numpy_dispatch():
    """Rerun the library comparisons with numpy's AVX-512 loops off (on an AVX-512 host this
    makes np.exp glibc's; elsewhere it is the same dispatch, and the rerun checks it again),
    with the scikit-learn outputs computed by numpy in the calling process (AdaBoost's softmax,
    IsolationForest's power, HGB's one-row softmax)."""
    targets = _avx512_dispatch_targets()
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(targets), TREECOMP_TEST_NUMPY_DISPATCH="off",
               TREECOMP_TEST_PARENT_CACHE=os.environ["TREECOMP_CACHE_DIR"])
    probe = ("import numpy as np, math; x = np.random.default_rng(1).normal(0, 5, 20000); "
             "print(int(np.sum(np.exp(x) != np.array([math.exp(v) for v in x.tolist()]))))")
    differ = int(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                check=True, timeout=60).stdout)
    assert differ == 0, "with its AVX-512 loops off numpy's exp should be the C library's"
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          __file__, os.path.join(os.path.dirname(__file__), "test_frontend_sklearn_more.py"),
                          "-k", "interpreter or (arrays_paths and not llvm) or single_rows "
                          # sklearn's AdaBoost softmax (np.exp) and IsolationForest (np.power)
                          "or isolation_forest_bit_exact or adaboost_bit_exact or hgb_many_classes "
                          # AdaBoostRegressor: numpy's argsort (AVX-512 sort) and cumsum
                          "or adaboost_regressor_ties "
                          "or base_margins"],
                         env=env, capture_output=True, text=True, timeout=400,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert " passed" in res.stdout and "failed" not in res.stdout


def test_xgb_aft_takes_exp_in_double():
    """survival:aft's (float)exp((double)margin) differs from expf for ~0.2% of margins: enough
    distinct margins here that expf would be caught (asserted), and treecomp must not be."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 8)).astype(np.float32)
    y = np.exp(X[:, 0] + 0.5 * rng.normal(size=3000))
    d = xgb.DMatrix(X)
    d.set_float_info("label_lower_bound", y)
    d.set_float_info("label_upper_bound", y * 1.3)
    b = xgb.train({"objective": "survival:aft", "max_depth": 6, "eta": 0.3}, d, 60)
    Xt = rng.normal(size=(20000, 8)).astype(np.float32) * 2
    want = b.predict(xgb.DMatrix(Xt))
    margin = b.predict(xgb.DMatrix(Xt), output_margin=True)
    assert np.any(outputs._expf(margin) != want), "no margin tells expf from exp in double"
    f = treecomp.parse(b)
    np.testing.assert_array_equal(interp.predict(f, Xt), want)
    for isa in ("auto", "numpy"):
        np.testing.assert_array_equal(treecomp.compile(f, backend="arrays", isa=isa).predict(Xt), want)


# -- host-evaluated base scores -----------------------------------------------------------------
# sklearn's GradientBoostingClassifier computes its initial margins at predict time, from the
# init estimator's class priors through the link: multiclass log(p / gmean(p)) with np.log /
# np.exp (numpy's AVX-512 code on AVX-512 hosts), binary scipy.special.logit (libm). Priors
# 3:3:4 are ones whose multinomial logit differs in the last bit between numpy's two dispatches.
# IsolationForest divides by n_estimators * c(max_samples), c with np.log, at predict time:
# max_samples 9171 is one whose c differs between them.
_GB_PRIORS = {"multi": np.repeat([0, 1, 2], [30, 30, 40]), "binary": np.repeat([0, 1], [37, 63])}
_CROSS = r"""
import pickle, sys, warnings
import numpy as np
import treecomp
from sklearn.ensemble._gb import _init_raw_predictions
from sklearn.ensemble._iforest import _average_path_length
from sklearn.base import is_classifier
d, mode = sys.argv[1], sys.argv[2]
models, X = pickle.load(open(f"{d}/models.pkl", "rb"))

# every artifact kind for the multiclass model; the others through fewer (their base or
# denominator reaches every kernel the same way)
KINDS = {"multi": ("-c.so", "-arrays.so", ".tc", "-llvm.pkl", ".ir"), "binary": ("-c.so", ".tc"),
         "iforest": (".tc", ".ir")}

def save(name, m):
    f = treecomp.parse(m)
    for kind in KINDS[name]:
        path = f"{d}/{mode}-{name}{kind}"
        if kind == ".ir":
            f.save(path)
        elif kind == "-llvm.pkl":
            open(path, "wb").write(pickle.dumps(treecomp.compile(f, backend="llvm")))
        else:
            treecomp.compile(f, backend="c" if kind == "-c.so" else "arrays").save(path)

def check(name, m, other):
    loaded = []
    for kind in KINDS[name]:
        path = f"{d}/{other}-{name}{kind}"
        loaded.append(treecomp.compile(treecomp.Forest.load(path), backend="arrays") if kind == ".ir"
                      else pickle.loads(open(path, "rb").read()) if kind == "-llvm.pkl"
                      else treecomp.load(path))
    methods = ("score_samples", "decision_function", "predict") if name == "iforest" else \
        ("predict_proba", "decision_function", "predict")
    for p in loaded:
        for method in methods:
            want, got = getattr(m, method)(X), getattr(p, method)(X)
            assert got.dtype == want.dtype and np.array_equal(got, want), (name, p, method)
            for i in (0, 1):
                assert np.array_equal(getattr(p, method)(X[i:i + 1]), want[i:i + 1]), (name, p, method)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for name, m in sorted(models.items()):
        if mode == "check":
            check(name, m, "parent")
        else:
            save(name, m)
        if name == "iforest":  # what sklearn divides by, computed in this process
            init = _average_path_length([m._max_samples])
        else:
            init = _init_raw_predictions(X[:1], m.init_, m._loss, is_classifier(m))
        print(name, init.tobytes().hex())
"""


def test_base_margins_are_sklearns_links():
    """outputs.base_margins equals sklearn's own link of the priors in this process, for every
    prior of up to 5 classes with counts 1..6 (multiclass, numpy's log / exp: its "libm" variant
    equals it where numpy runs no AVX-512 code) and for binary priors (scipy.special.logit and
    0.5 * it: libm's log / log1p, on both sides of its 0.3 / 0.65 switch)."""
    import itertools
    from types import SimpleNamespace
    from scipy.special import logit
    from sklearn._loss.link import HalfLogitLink, LogitLink, MultinomialLogit
    eps = np.finfo(np.float64).eps
    link, n, libm_differs = MultinomialLogit(), 0, 0
    for k in (3, 4, 5):
        for counts in itertools.combinations_with_replacement(range(1, 7), k):
            c = np.array(counts, np.float64)
            p = np.clip((c / c.sum())[None, :], eps, 1 - eps)[0]
            f = SimpleNamespace(base_link="multinomial_logit", base_score=p)
            want = link.link(p[None, :])[0]
            np.testing.assert_array_equal(outputs.base_margins(f), want)
            libm_differs += not np.array_equal(outputs.base_margins(f, "libm"), want)
            n += 1
    assert libm_differs == 0 or _avx512_dispatch_targets(), "numpy's baseline log / exp are libm's"
    p = np.concatenate([np.linspace(0.001, 0.999, 4001), np.linspace(0.2999, 0.3001, 201),
                        np.linspace(0.6499, 0.6501, 201), [eps, 1 - eps, 0.3, 0.65, 0.5]])
    assert not np.array_equal(logit(p), np.log(p / (1 - p)))  # the log1p band matters
    for name, sk in (("logit", LogitLink()), ("half_logit", HalfLogitLink())):
        want = sk.link(p)
        got = [outputs.base_margins(SimpleNamespace(base_link=name, base_score=[v]))[0] for v in p.tolist()]
        np.testing.assert_array_equal(got, want)


def test_base_score_is_evaluated_on_the_predicting_host(tmp_path):
    """A GradientBoostingClassifier / IsolationForest parsed and compiled under one numpy
    dispatch and loaded under the other (c and arrays .so, .tc, a pickled LLVM kernel, the IR
    file) predicts what scikit-learn predicts in the loading process: its initial margins (the
    forest's denominator) are evaluated there."""
    import pickle
    models = {name: ensemble.GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0)
              .fit(X_TRAIN[:len(y)], y) for name, y in _GB_PRIORS.items()}
    # small trees (fast to compile) with the max_samples of 9171 (what sklearn divides by)
    models["iforest"] = ensemble.IsolationForest(n_estimators=2, max_samples=64, random_state=0).fit(X_TRAIN)
    models["iforest"]._max_samples = 9171
    with open(tmp_path / "models.pkl", "wb") as fh:
        pickle.dump((models, X_TEST[:50]), fh)
    script = tmp_path / "cross.py"
    script.write_text(_CROSS)
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(_avx512_dispatch_targets()))

    def run(mode, environ):
        res = subprocess.run([sys.executable, str(script), str(tmp_path), mode], env=environ,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
        return dict(line.split() for line in res.stdout.splitlines())
    here = run("parent", dict(os.environ))  # compiles and saves under this process's dispatch
    there = run("check", env)               # loads them under the other dispatch
    if _avx512_dispatch_targets():  # an AVX-512 host: the two dispatches disagree here
        assert here["multi"] != there["multi"], "priors 3:3:4 should tell numpy's dispatches apart"
        assert here["iforest"] != there["iforest"], "so should c(9171)"
    assert here["binary"] == there["binary"]  # scipy's logit: libm's log, whatever numpy runs

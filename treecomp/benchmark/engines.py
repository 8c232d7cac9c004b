"""The engines the benchmark measures: one adapter per way of predicting, one interface for all.

Every engine is a :class:`Strategy` with a name (usable with ``--strategies``), a label, a group
(``baseline``, ``treecomp``, ``library``, ``external``) and three methods, called by the runner
(:mod:`treecomp.benchmark.runner`) in this order:

- ``prepare(ctx)``: build or convert the case's model (``ctx`` is a :class:`CaseContext`);
  returns its compile figures (``compile_s``, ``compile_rss_mib``, ``artifact_bytes``, ...), or
  raises :class:`~treecomp.benchmark.measure.Skip` when the engine cannot run here;
- ``run(X, n_threads)``: the timed call (inside ``threads(k)``, a context manager that sets
  the thread count of engines whose count is process-wide);
- ``outputs(X, kinds)``: the engine's answer in each of the library's output forms it can
  produce (``raw``, ``proba``, ``predict``), for the exactness check.

The engines (:func:`strategies` lists them in report order):

- ``walker``: treecomp.interp.walk_raw, a pure-Python node-by-node walk, the baseline of the
  "x walker" ratios (the plots' reference where no library object was given). It is timed on a
  subsample sized to the time budget and scaled to ns/row; its latency at large batch sizes is
  extrapolated from that per-row figure (marked ``~`` in the report).
- ``interp``: treecomp.interp.predict_raw, the vectorised numpy reference interpreter.
- every backend in ``treecomp.backends.names()`` (``c``, and ``llvm`` / ``arrays`` where they
  exist), plus ``arrays-float`` (``layout="heap"``: the float walks, without the byte walks that
  ``auto`` picks) and ``arrays-naive`` (the arrays backend with ``layout="naive"``: the "native naive
  walk") when the arrays backend exists (:class:`Backend`: a cold compile in a process of its
  own, then the artifact loaded in-process). A backend that raises is a skipped row with the
  reason.
- ``library``: the source library's own predict (XGBoost ``inplace_predict``, scikit-learn
  ``predict_proba`` / ``predict``, LightGBM ``Booster.predict``), at 1 thread and at all cores.
- ``tl2cgen``, ``onnxruntime``, ``lleaves``, ``daal4py``: other tree compilers / runtimes, when
  installed (never installed by the benchmark); otherwise a skipped row saying so.

For SHAP contributions, :func:`shap_engines` gives the libraries' and oneDAL's TreeSHAP calls
beside treecomp's (timed by :func:`treecomp.benchmark.runner.measure_shap`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .measure import (Settings, Skip, bounded_children, call_bounded, compile_in_subprocess, log,
                      peak_rss)

# llvmlite < 0.45 (LLVM 15; lleaves needs it, see bench/compare-env.sh) parses the `ptr` type of
# treecomp's LLVM IR only in contexts made after LLVMLITE_ENABLE_OPAQUE_POINTERS=1 was set, and
# reads the variable once, when llvmlite is first imported: so it is set here, before any
# strategy imports llvmlite. lleaves 1.3 works in that mode too. llvmlite >= 0.45 has opaque
# pointers only and ignores the variable. Compile subprocesses inherit it.
os.environ.setdefault("LLVMLITE_ENABLE_OPAQUE_POINTERS", "1")


@contextlib.contextmanager
def _env(name: str, value: str):
    """Environment variable `name` set to `value` over the with-block."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


# -- what an engine is given -------------------------------------------------------------------
@dataclass
class CaseContext:
    """One case as the engines see it: the case (:class:`treecomp.benchmark.cases.BenchCase`),
    its parsed forest (None where treecomp cannot parse it) saved at `ir_path`, a scratch
    folder, the run's settings, the core count, and the backends' one-time setup figures."""

    case: Any
    forest: Any
    ir_path: Path
    tmp: Path
    settings: Settings
    n_cores: int
    setup: dict        # per backend strategy: its one-time setup figures (shared by all cases)


# -- strategies ---------------------------------------------------------------------------------
class Strategy:
    """One way of predicting. Subclasses fill in prepare / run / outputs."""

    name = "?"
    label = "?"
    group = "treecomp"          # baseline | treecomp | library | external
    threaded = True             # has a meaningful all-cores figure
    slow = False                # measured on a subsample sized to the time budget

    def prepare(self, ctx: "CaseContext") -> dict:
        """Build / convert; returns compile figures. Raises Skip when it cannot run here."""
        return {}

    def threads(self, k: int) -> Any:
        """A context manager around every timed block run with k threads (see LibraryPredict,
        Daal4py)."""
        return contextlib.nullcontext()

    def run(self, X: np.ndarray, n_threads: int) -> Any:
        """The timed call: the engine's prediction on X with n_threads threads."""
        raise NotImplementedError

    def outputs(self, X: np.ndarray, kinds: list[str]) -> dict[str, Any]:
        """The strategy's answer on X in each of the library's output forms it can produce."""
        raise NotImplementedError


def from_raw(head: Any, raw: np.ndarray, kinds: list[str]) -> dict[str, Any]:
    """Raw margins of a forest (`head`: its Forest or Head) in each output form of `kinds`, as
    treecomp.outputs turns them (the baselines' answers for the exactness check)."""
    from treecomp import outputs
    res = {}
    for k in kinds:
        if k == "raw":
            res[k] = outputs.raw_output(head, raw)
        elif k == "proba" and head.is_classifier:
            res[k] = outputs.predict_proba(head, raw)
        elif k == "predict":
            res[k] = outputs.predict_values(head, raw)
    return res


class Walker(Strategy):
    name, label, group, threaded, slow = "walker", "python walker", "baseline", False, True

    def run(self, X, n_threads):
        from treecomp import interp
        return interp.walk_raw(self.forest, X)

    def prepare(self, ctx):
        self.forest = ctx.forest
        return {}

    def outputs(self, X, kinds):
        return from_raw(self.forest, self.run(X, 1), kinds)


class Interp(Walker):
    name, label, group, threaded, slow = "interp", "numpy interpreter", "baseline", False, True

    def run(self, X, n_threads):
        from treecomp import interp
        return interp.predict_raw(self.forest, X)


def seed_forest():
    """A one-split forest: building it makes a backend do its once-per-machine work."""
    from treecomp.ir import Forest, Tree
    tree = Tree(left=[1, -1, -1], right=[2, -1, -1], feature=[0, -1, -1], threshold=[0.5, 0, 0],
                default_left=[True, False, False], value=[0.0, 1.0, 2.0])
    return Forest(trees=(tree,), n_features=1, n_outputs=1, tree_output=[0], base_score=[0.0])


class Backend(Strategy):
    """A treecomp backend: cold compile in a subprocess, then the artifact loaded in-process.

    "Cold" means a fresh, empty artifact cache for the model. A backend's once-per-machine
    work (the arrays backend's generic kernel, built once per machine and compiler whatever
    the model) is done once per benchmark run in a seed cache, timed as the backend's "setup",
    and that seed cache is copied into every fresh cache, so per-model compile times count only
    per-model work.
    """

    def __init__(self, name: str, backend: str, options: dict | None = None, label: str | None = None):
        self.name, self.backend, self.options = name, backend, dict(options or {})
        self.label = label or f"treecomp {name}"
    def _setup(self, ctx) -> Path:
        # keyed by backend, not strategy: "arrays" and "arrays-naive" share one generic kernel
        seed = ctx.tmp / f"seed-{self.backend}"
        if seed.exists():
            return seed
        seed.mkdir(parents=True)
        ir = ctx.tmp / "seed.tcir"
        if not ir.exists():
            seed_forest().save(ir)
        try:
            figs = compile_in_subprocess(ir, self.backend, self.options, seed,
                                          ctx.settings.compile_timeout_s)
            ctx.setup[self.backend] = {"setup_s": figs["compile_s"], "files": len(list(seed.iterdir()))}
            log(f"  {self.backend}: one-time setup (trivial model, empty cache) {figs['compile_s']:.2f} s")
        except Skip as exc:
            ctx.setup[self.backend] = {"error": str(exc)}
        return seed

    def prepare(self, ctx):
        from treecomp import backends
        from treecomp.loader import Predictor
        seed = self._setup(ctx)
        cache = ctx.tmp / f"cache-{ctx.case.name}-{self.name}"
        if cache.exists():
            shutil.rmtree(cache)
        shutil.copytree(seed, cache)
        figs = compile_in_subprocess(ctx.ir_path, self.backend, self.options, cache,
                                      ctx.settings.compile_timeout_s)
        with _env("TREECOMP_CACHE_DIR", str(cache)):
            t0 = time.perf_counter()
            try:
                kernel = backends.get(self.backend).build(ctx.forest, **self.options)
            except Exception as exc:  # noqa: BLE001 - the row says why
                raise Skip(f"{type(exc).__name__}: {exc}") from None
            figs["load_s"] = time.perf_counter() - t0
        self.predictor = Predictor(kernel)
        # timed: what the libraries' timed calls return (probabilities, transformed values)
        self._call = self.predictor.predict_proba if self.predictor.head.is_classifier \
            else self.predictor.predict
        return figs

    def run(self, X, n_threads):
        return self._call(X, n_threads=n_threads)

    def outputs(self, X, kinds):
        p, res = self.predictor, {}  # the Predictor's own answers (native inverse links included)
        for k in kinds:
            if k == "raw":
                res[k] = p.decision_function(X)
            elif k == "proba" and p.head.is_classifier:
                res[k] = p.predict_proba(X)
            elif k == "predict":
                res[k] = p.predict(X)
        return res


class LibraryPredict(Strategy):
    name, group = "library", "library"

    def prepare(self, ctx):
        if ctx.case.library is None:
            raise Skip("a bare model file: no library object to call (pass a pickle to measure it)")
        self.lib = ctx.case.library
        self.label = f"{self.lib.name} ({self.lib.call})"
        return {}

    def threads(self, k):
        return self.lib.threads(k)

    def run(self, X, n_threads):
        return self.lib.predict(X)   # the thread count is set by self.threads around the timing

    def outputs(self, X, kinds):
        return {k: self.lib.outputs[k](X) for k in kinds if k in self.lib.outputs}


def top_module(obj: Any) -> str:
    """The library a model object comes from: "xgboost", "sklearn", "lightgbm" or "?"."""
    for cls in type(obj).__mro__:
        top = (cls.__module__ or "").split(".")[0]
        if top in ("xgboost", "sklearn", "lightgbm"):
            return top
    return "?"


def need(module: str, what: str):
    """`module` imported, or Skip saying `what` is not installed, or installed but failing to
    import (and why)."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        if getattr(exc, "name", None) == module.split(".")[0]:
            raise Skip(f"{what} is not installed") from None
        raise Skip(f"{what} is installed but fails to import: {type(exc).__name__}: {exc}"
                   " (bench/compare-env.sh builds an environment where it imports)") from None
    except Exception as exc:  # noqa: BLE001 - e.g. daal4py 2024.7 against scikit-learn 1.9
        raise Skip(f"{what} is installed but fails to import: {type(exc).__name__}: {exc}"
                   " (bench/compare-env.sh builds an environment where it imports)") from None


def dist_version(*dists: str) -> str | None:
    """The installed version of the first of these distributions that is installed."""
    from importlib import metadata
    for d in dists:
        try:
            return metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    return None


def external_model(ctx: CaseContext) -> Any:
    """The case's library model object, or Skip where there is none (a bare model file)."""
    if ctx.case.library is None or ctx.case.library.model is None:
        raise Skip("needs the library's model object")
    return ctx.case.library.model


class TL2cgen(Strategy):
    """Treelite + TL2cgen: the model exported as C, compiled with gcc, loaded as a Predictor."""

    name, label, group = "tl2cgen", "TL2cgen", "external"

    def prepare(self, ctx):
        tl2cgen = need("tl2cgen", "tl2cgen")
        treelite = need("treelite", "treelite (needed by tl2cgen)")
        model = external_model(ctx)
        lib = top_module(model)
        with peak_rss() as mem:
            t0 = time.perf_counter()
            if lib == "xgboost":
                booster = model.get_booster() if hasattr(model, "get_booster") else model
                tl = treelite.frontend.from_xgboost(booster)
            elif lib == "lightgbm":
                tl = treelite.frontend.from_lightgbm(model.booster_ if hasattr(model, "booster_") else model)
            else:
                tl = treelite.sklearn.import_model(model)
            path = ctx.tmp / f"tl2cgen-{ctx.case.name}.so"
            with bounded_children(ctx.settings.compile_timeout_s, "TL2cgen's gcc build"):
                tl2cgen.export_lib(tl, toolchain="gcc", libpath=str(path),
                                   params={"parallel_comp": os.cpu_count() or 1})
            compile_s = time.perf_counter() - t0
        self.tl2cgen = tl2cgen
        self.preds = {1: tl2cgen.Predictor(str(path), nthread=1),
                      ctx.n_cores: tl2cgen.Predictor(str(path), nthread=ctx.n_cores)}
        return {"compile_s": compile_s, "compile_rss_mib": mem["mib"],
                "artifact_bytes": path.stat().st_size}

    def _dm(self, X):
        return self.tl2cgen.DMatrix(X, dtype="float32" if X.dtype == np.float32 else "float64")

    def run(self, X, n_threads):
        return self.preds.get(n_threads, self.preds[1]).predict(self._dm(X))

    def outputs(self, X, kinds):
        p = self.preds[1]
        res = {}
        if "raw" in kinds:
            res["raw"] = p.predict(self._dm(X), pred_margin=True)
        for k in ("proba", "predict"):
            if k in kinds and not (k == "predict" and "proba" in kinds):
                v = np.asarray(p.predict(self._dm(X)))
                if k == "proba" and v.size == len(X):
                    # a binary classifier: TL2cgen 1.0 gives P(class 1) only, shaped (n, 1, 1);
                    # the libraries' predict_proba is (1 - p, p), in p's dtype
                    v = v.reshape(len(X))
                    v = np.stack((1 - v, v), axis=1)
                res[k] = v
        return res


class OnnxRuntime(Strategy):
    """skl2onnx / onnxmltools conversion, run by ONNX Runtime's CPU provider."""

    name, label, group = "onnxruntime", "ONNX Runtime", "external"

    def prepare(self, ctx):
        ort = need("onnxruntime", "onnxruntime")
        model = external_model(ctx)
        lib = top_module(model)
        d = ctx.forest.n_features
        with peak_rss() as mem:
            t0 = time.perf_counter()
            if lib == "sklearn":
                skl2onnx = need("skl2onnx", "skl2onnx")
                opts = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None
                onx = skl2onnx.to_onnx(model, ctx.case.X[:1].astype(np.float32), options=opts)
            else:
                need("onnxmltools", "onnxmltools")
                from onnxmltools.convert.common.data_types import FloatTensorType
                types = [("X", FloatTensorType([None, d]))]
                if lib == "xgboost":
                    from onnxmltools import convert_xgboost
                    onx = convert_xgboost(model, initial_types=types)
                elif lib == "lightgbm":
                    from onnxmltools import convert_lightgbm
                    onx = convert_lightgbm(model, initial_types=types, zipmap=False)
                else:
                    raise Skip(f"no ONNX converter for {type(model).__name__}")
            data = onx.SerializeToString()
            self.sessions = {}
            for k in sorted({1, ctx.n_cores}):
                so = ort.SessionOptions()
                so.log_severity_level = 3   # errors only: onnxmltools' label shape warns per call
                so.intra_op_num_threads = k
                so.inter_op_num_threads = 1
                self.sessions[k] = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            compile_s = time.perf_counter() - t0
        self.input = self.sessions[1].get_inputs()[0].name
        self.clf = hasattr(model, "predict_proba")
        return {"compile_s": compile_s, "compile_rss_mib": mem["mib"], "artifact_bytes": len(data)}

    def run(self, X, n_threads):
        s = self.sessions.get(n_threads, self.sessions[1])
        return s.run(None, {self.input: np.asarray(X, np.float32)})

    def outputs(self, X, kinds):
        out = self.run(X, 1)
        res = {}
        if "predict" in kinds:
            res["predict"] = np.asarray(out[0]).reshape(len(X), -1).squeeze(1) \
                if np.asarray(out[0]).size == len(X) else out[0]
        if "proba" in kinds and self.clf and len(out) > 1:
            p = out[1]
            if isinstance(p, list):  # a ZipMap output: list of {class: proba}
                p = np.array([list(r.values()) for r in p])
            res["proba"] = p
        return res


def lleaves_build(model_file: str, obj: str, raw_score: bool, finline: bool) -> dict:
    """lleaves' compile of `model_file` into the object file `obj` (which lleaves then loads as
    its cache), run in a process of its own by :func:`_lleaves_bounded`: its figures."""
    import lleaves
    with peak_rss() as mem:
        t0 = time.perf_counter()
        lleaves.Model(model_file=model_file).compile(cache=obj, raw_score=raw_score,
                                                     finline=finline)
        compile_s = time.perf_counter() - t0
    return {"compile_s": compile_s, "compile_rss_mib": mem["mib"]}


def _lleaves_bounded(model_file: str, obj: Path, raw_score: bool, finline: bool,
                     limit: float) -> dict:
    """lleaves_build in a forked process, stopped after `limit` s (lleaves' LLVM build runs in
    the calling thread and cannot be stopped there: a 255-leaf LightGBM model of 300 trees took
    over 8 minutes)."""
    try:
        return call_bounded(lleaves_build, (str(model_file), str(obj), raw_score, finline), limit,
                            "lleaves' compile" + (" (raw margins)" if raw_score else ""))
    except Skip as exc:
        if "PassManagerBuilder" in str(exc):
            raise Skip(f"lleaves needs llvmlite<0.45 (installed: {dist_version('llvmlite')}): "
                       f"{exc}; use bench/compare-env.sh") from None
        raise


class Lleaves(Strategy):
    """lleaves: LightGBM text models compiled through LLVM (llvmlite), in-process.

    Checked with lleaves 1.3.0 on llvmlite 0.44 (LLVM 15). lleaves builds its passes with
    llvmlite's legacy PassManagerBuilder, which llvmlite 0.45 removed: on a newer llvmlite its
    compile fails with AttributeError, reported here as a skip naming the pin. Its defaults are
    kept (as a user would run it): code for the host CPU (treecomp's default is generic x86-64),
    float64 arithmetic, input converted to float64 by lleaves itself (a copy for float32 rows,
    inside the timed call, as for any lleaves user). `predict(X, n_jobs=k)` runs k threads of
    its ThreadPoolExecutor (n_jobs=1: the calling thread). The objective (sigmoid / softmax) is
    compiled into the model; raw margins need a second model compiled with raw_score=True, which
    is built, untimed, only for the exactness check, with finline=False: inlining changes no
    arithmetic (lleaves sets no fast-math flags; same margins bit for bit, checked) and the
    build is ~2.5x shorter (a 500-tree model takes minutes with inlining).
    Not bit-exact in general: lleaves sums each block of `fblocksize` (default 34) trees from
    0.0 and then adds the block's sum to the row's total, where LightGBM adds tree by tree; with
    at most 34 trees (one block) the margins are LightGBM's bit for bit.
    """

    name, label, group = "lleaves", "lleaves", "external"

    def prepare(self, ctx):
        lleaves = need("lleaves", "lleaves")
        lib = ctx.case.library
        if lib is None or not lib.model_file:
            raise Skip("lleaves only compiles LightGBM models")
        self.label = f"lleaves {dist_version('lleaves') or '?'}"
        self.lleaves, self.model_file = lleaves, lib.model_file
        self.obj = ctx.tmp / f"lleaves-{ctx.case.name}.o"
        self.obj_raw = ctx.tmp / f"lleaves-{ctx.case.name}-raw.o"
        self.limit = ctx.settings.compile_timeout_s
        for obj in (self.obj, self.obj_raw):
            if obj.exists():
                obj.unlink()                      # a cache hit would skip the compile
        figs = _lleaves_bounded(lib.model_file, self.obj, False, True, self.limit)
        self.m = lleaves.Model(model_file=lib.model_file)
        self.m.compile(cache=str(self.obj))       # loads the object file the build wrote
        self.m_raw = None
        self.clf = hasattr(lib.model, "predict_proba")
        return {**figs, "artifact_bytes": self.obj.stat().st_size if self.obj.exists() else None}

    def run(self, X, n_threads):
        return self.m.predict(X, n_jobs=n_threads)

    def outputs(self, X, kinds):
        res = {}
        if "raw" in kinds:
            if self.m_raw is None:
                try:
                    _lleaves_bounded(self.model_file, self.obj_raw, True, False, self.limit)
                    self.m_raw = self.lleaves.Model(model_file=self.model_file)
                    self.m_raw.compile(cache=str(self.obj_raw), raw_score=True, finline=False)
                except Skip as exc:
                    log(f"  lleaves: no raw margins: {exc}")
                    self.m_raw = False
            if self.m_raw:
                res["raw"] = self.m_raw.predict(X, n_jobs=1)
        p = self.run(X, 1)
        if "proba" in kinds and self.clf and p.ndim == 1:
            res["proba"] = np.vstack((1.0 - p, p)).transpose()  # LGBMClassifier's own layout
        elif "proba" in kinds and self.clf:
            res["proba"] = p
        elif "predict" in kinds and not self.clf:
            res["predict"] = p
        return res


class Daal4py(Strategy):
    """daal4py (oneDAL) model builders for gradient-boosted models.

    Checked with daal4py from scikit-learn-intelex 2026.2.0 (the daal4py package ships inside
    that wheel since 2025; the last separate daal4py wheel is 2024.7, older than scikit-learn
    1.9). `mb.convert_model(booster)` builds a oneDAL GBT model ("compile"); predictions run in
    the rows' dtype (float32 rows: oneDAL's fptype="float"; float64 rows: "double"), the rows
    being passed as the case gives them, as a user would. oneDAL's thread count is process-wide,
    set with `daalinit(k)` around each timed block. It offers class probabilities, labels and
    regression values, no raw margin, so exactness is checked on those. Not bit-exact: against
    LightGBM (float64 sums) float32 rows give probabilities ~4e-7 apart and even float64 rows
    ~1e-8; against XGBoost about half the rows differ by 1 ulp of the float32 probability.
    """

    name, label, group = "daal4py", "daal4py", "external"

    def prepare(self, ctx):
        d4p = need("daal4py", "daal4py")
        model = external_model(ctx)
        lib = top_module(model)
        if lib not in ("xgboost", "lightgbm"):
            raise Skip("daal4py's model builders convert XGBoost and LightGBM models")
        src = model.get_booster() if hasattr(model, "get_booster") else (
            model.booster_ if hasattr(model, "booster_") else model)
        ver = dist_version("scikit-learn-intelex", "daal4py")
        self.label = f"daal4py (scikit-learn-intelex {ver})" if ver else "daal4py"
        with peak_rss() as mem:
            t0 = time.perf_counter()
            self.m = d4p.mb.convert_model(src)
            compile_s = time.perf_counter() - t0
        self.d4p = d4p
        self.all_threads = d4p.num_threads()
        self.clf = hasattr(model, "predict_proba")
        return {"compile_s": compile_s, "compile_rss_mib": mem["mib"]}

    @contextlib.contextmanager
    def threads(self, k):
        self.d4p.daalinit(int(k))
        try:
            yield
        finally:
            self.d4p.daalinit(self.all_threads)

    def run(self, X, n_threads):
        return self.m.predict_proba(X) if self.clf else self.m.predict(X)

    def outputs(self, X, kinds):
        res = {}
        if "proba" in kinds and self.clf:
            res["proba"] = self.m.predict_proba(X)
        if "predict" in kinds:
            res["predict"] = self.m.predict(X)
        return res


# -- SHAP contributions --------------------------------------------------------------------------
def shap_engines(model: Any, lib: Any, X: np.ndarray) -> tuple[list, list]:
    """(name, label, call) of every TreeSHAP engine besides treecomp that runs here on `model`,
    each call single-threaded; and (name, note) for those that do not."""
    engines, skipped = [], []
    top = top_module(model)
    if top == "xgboost":
        import xgboost as xgb
        booster = model.get_booster() if hasattr(model, "get_booster") else model
        dm = xgb.DMatrix(X, nthread=1)
        engines.append(("library", f"{lib.name} Booster.predict(pred_contribs=True)",
                        lambda: booster.predict(dm, pred_contribs=True)))
    else:
        booster = model.booster_ if hasattr(model, "booster_") else model
        engines.append(("library", f"{lib.name} Booster.predict(pred_contrib=True)",
                        lambda: booster.predict(X, pred_contrib=True, num_threads=1)))
    try:
        d4p = need("daal4py", "daal4py")
        m = d4p.mb.convert_model(booster)
        ver = dist_version("scikit-learn-intelex", "daal4py")
        engines.append(("daal4py", f"daal4py{f' (scikit-learn-intelex {ver})' if ver else ''} "
                        "mb.convert_model(booster).predict(X, pred_contribs=True)",
                        lambda: m.predict(X, pred_contribs=True)))
    except Skip as exc:
        skipped.append(("daal4py", str(exc)))
    except Exception as exc:  # noqa: BLE001 - a conversion this version refuses
        skipped.append(("daal4py", f"{type(exc).__name__}: {exc}"[:300]))
    return engines, skipped


# -- all of them --------------------------------------------------------------------------------
def strategies(selected: list[str] | None = None) -> list[Strategy]:
    """All strategies, in report order (filtered by name when `selected` is given)."""
    from treecomp import backends
    out: list[Strategy] = [Walker(), Interp()]
    names = backends.names()
    for b in names:
        out.append(Backend(b, b))
    if "arrays" in names:
        # the float walks the byte walks replaced (heap where a tree allows, node tables
        # otherwise): what quantisation buys, measured side by side
        out.append(Backend("arrays-float", "arrays", {"layout": "heap"}, "treecomp arrays, float walks"))
        out.append(Backend("arrays-naive", "arrays", {"layout": "naive"}, "treecomp arrays, native naive walk"))
    out.append(LibraryPredict())
    out += [TL2cgen(), OnnxRuntime(), Lleaves(), Daal4py()]
    if selected:
        known = {s.name for s in out}
        unknown = [s for s in selected if s not in known]
        if unknown:
            raise ValueError(f"unknown strategies {unknown}; available: {', '.join(s.name for s in out)}")
        out = [s for s in out if s.name in selected]
    return out

"""The `treecomp` command line: it only parses arguments and calls the Python API.

Every failure the user can fix prints ONE line ``Error: ...`` on stderr, never a traceback.
Exit status (documented in ``treecomp --help``):

- 0: success;
- 1: the work failed (a missing, malformed or unsupported model / data / artifact file, an
  output that cannot be written, a model that cannot do what was asked such as ``--proba`` on
  a regressor, a toolchain failure; the compiler's own output follows a CompileError's line);
- 2: a bad command line (unknown option, bad option value, conflicting options, an output name
  whose suffix does not match what would be written);
- 141 (128 + SIGPIPE): stdout was closed early (``treecomp inspect m | head -1``): quietly.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import click
import numpy as np

from .version import __version__
from .platform import ELF_MAGIC  # the first bytes of a shared library (what -o x.so writes)

ARTIFACT_WARNING = ("A .so artifact is loaded to be described, which runs its code: only "
                    "inspect artifacts you trust.")
PICKLE_WARNING = ("Model files ending in .pkl/.pickle/.joblib are unpickled, which EXECUTES code "
                  "from the file: only use files you trust.")

# shown in the help of the commands that read a model (keep in step with treecomp.parse;
# tests/test_cli.py checks every suffix frontends/__init__.py names appears here)
MODEL_FILES_HELP = """\b
Model files (LightGBM, XGBoost and treecomp IR files are recognised by their
content, whatever their name; pickles only by these suffixes):
  .pkl .pickle .joblib  a pickled fitted estimator: scikit-learn trees and
                        forests, XGBoost / LightGBM sklearn wrappers or Boosters
  .json .ubj            XGBoost model file (Booster.save_model / save_model;
                        also .model / .bin from older versions)
  .txt                  LightGBM text model (Booster.save_model, model_to_string;
                        often named .model)
  .tcir                 treecomp IR file (Forest.save)"""

EXIT_CODES_HELP = """\b
Exit status: 0 success; 1 the work failed (bad or unsupported file, unwritable
output, --proba on a regressor, ...); 2 bad command line (options, conflicting
flags, output suffix); 141 stdout closed early (e.g. piped into head).
Errors are one line on stderr, starting with "Error:"."""

# artifact suffix -> what it must contain; backend -> its artifact suffix
ARTIFACT_SUFFIXES = {".so": ("a shared library", "--backend c, llvm or arrays"),
                     ".tc": ("a table file", "--backend arrays")}
#: backend -> the artifact suffixes it writes (the first: what a mismatched name is told to use)
BACKEND_SUFFIX = {"c": (".so",), "llvm": (".so",), "arrays": (".tc", ".so")}
PREDICTION_SUFFIXES = {".npy": "np.save", ".csv": "comma-separated text",
                       ".txt": "comma-separated text"}
# inverse links that turn margins into probabilities: a forest with one of these but no class
# labels is a classification objective read without its labels (a LightGBM / XGBoost Booster
# file predicts probabilities, like Booster.predict)
PROBABILITY_TRANSFORMS = ("sigmoid", "sigmoid2", "softmax", "softmax_seq")


class Failure(click.ClickException):
    """The work failed (exit 1): `message` is the one line; `detail` (a toolchain's output)
    follows it, indented."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return "; ".join(lines)


def _os_message(exc: OSError) -> str:
    """An OSError as a sentence naming the user's path ("No such file or directory: x.npy")."""
    if exc.strerror and exc.filename is not None:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc)


def _friendly(fn: Callable) -> Callable:
    """Turn expected failures (TreecompError, ValueError, TypeError, OSError, KeyError) into a
    one-line error and exit code 1; a broken stdout pipe passes through (see _Main)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .errors import CompileError, TreecompError
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            raise
        except (TreecompError, ValueError, TypeError, OSError, KeyError) as exc:
            if isinstance(exc, OSError) and not isinstance(exc, TreecompError):
                text = _os_message(exc)
            elif isinstance(exc, KeyError) and exc.args:
                text = str(exc.args[0])
            else:
                text = str(exc)
            lines = text.strip().splitlines() or [type(exc).__name__]
            detail = "\n".join("  " + ln for ln in lines[1:40]) if isinstance(exc, CompileError) else ""
            raise Failure(lines[0] if detail else _one_line(text) or type(exc).__name__,
                          detail) from None
    wrapper.friendly = True  # type: ignore[attr-defined]  (tests check every command has it)
    return wrapper


def _quiet_broken_pipe() -> None:
    """stdout was closed (`| head`): point it at /dev/null so the interpreter's final flush
    cannot fail again, and exit 141 (128 + SIGPIPE, what a shell shows for a killed writer)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (CliRunner), or closed
        pass
    sys.exit(141)


class _Main(click.Group):
    """The `treecomp` group: one-line errors for usage errors too, and a quiet exit when stdout
    is closed early."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _quiet_broken_pipe()

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:  # `treecomp --help | head -1`
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            _quiet_broken_pipe()
            raise  # not reached

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _error(_one_line(exc.format_message()) + where)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            _error(_one_line(exc.format_message()))
            detail = getattr(exc, "detail", "")
            if detail:
                click.echo(detail, err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            _error("aborted")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


def _error(line: str) -> None:
    try:
        click.echo(f"Error: {line}", err=True)
    except BrokenPipeError:  # stderr closed too: nothing left to tell
        pass


class ProgressPrinter:
    """The CLI's `progress` callback (toolchain.DEFAULT_PROGRESS, and api.compile's).

    A message that counts steps says ``k/n`` (toolchain's "compiled x.c (3/12)", the llvm
    backend's "compiled module 3/12", the arrays kernel's "compiled 2/3 parts"). On a terminal
    (stderr a TTY) those redraw one bar line in place, and other messages print above it; on
    anything else every message is a plain ``  ... msg`` line. Called from the compile threads
    too: one lock."""

    STEP = re.compile(r"(?<![\w/.])(\d+)/(\d+)(?![\w/])")
    WIDTH = 24

    def __init__(self, stream: Any = None):
        self._stream, self._lock, self._bar = stream, threading.Lock(), ""

    @property
    def stream(self) -> Any:
        return self._stream if self._stream is not None else sys.stderr

    def _tty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError):  # a closed or unusual stream: plain lines
            return False

    def __call__(self, msg: str) -> None:
        msg = str(msg)
        with self._lock:
            if not self._tty():
                click.echo(f"  ... {msg}", file=self.stream)
                return
            step = [m for m in self.STEP.finditer(msg) if 0 < int(m.group(2))]
            out = self.stream
            cols = shutil.get_terminal_size((80, 20)).columns
            if not step:  # a plain message above the bar (which is redrawn under it)
                click.echo("\r\x1b[K" + f"  ... {msg}"[:cols - 1], file=out)
                if self._bar:
                    click.echo(self._bar, file=out, nl=False)
                return
            k, n = int(step[-1].group(1)), int(step[-1].group(2))
            k = min(k, n)
            fill = self.WIDTH * k // n
            bar = f"  [{'#' * fill}{'.' * (self.WIDTH - fill)}] {msg}"[:cols - 1]
            click.echo("\r\x1b[K" + bar, file=out, nl=k == n)
            self._bar = "" if k == n else "\r\x1b[K" + bar
            out.flush()

    def close(self) -> None:
        """End a bar left unfinished (a failed build), so that what follows starts a line."""
        with self._lock:
            if self._bar:
                click.echo("", file=self.stream)
                self._bar = ""


_progress = ProgressPrinter()


def _check_writable(path: str) -> None:
    """Refuse an output whose directory is missing, naming the user's path (not a temp file)."""
    p = Path(path)
    d = p.parent
    if not d.exists():
        raise Failure(f"cannot write {path}: directory {d} does not exist")
    if not d.is_dir():
        raise Failure(f"cannot write {path}: {d} is not a directory")
    if p.is_dir():
        raise Failure(f"cannot write {path}: it is a directory")


def _write(path: str, writer: Callable[[], None]) -> None:
    """Run `writer` (which writes `path`), reporting an OSError with the user's path."""
    from .errors import WriteError
    _check_writable(path)
    try:
        writer()
    except WriteError as exc:
        cause = exc.__cause__
        why = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(exc)
        raise Failure(f"cannot write {path}: {why}") from None
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise Failure(f"cannot write {path}: {exc.strerror or exc}") from None


def _bad_suffix(path: str) -> str:
    suffix = Path(path).suffix
    return f"{path}: unsupported suffix {suffix!r}" if suffix else f"{path} has no suffix"


def _plain(obj: Any) -> Any:
    """numpy scalars / arrays as plain Python values, so they print as `0`, not `np.int64(0)`."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    return obj


def _kind(transform: str, is_classifier: bool) -> str:
    if transform == "iforest":
        return "outlier detector (predict gives -1 / 1)"
    if is_classifier:
        return "classifier"
    if transform in PROBABILITY_TRANSFORMS:
        return "classifier without class labels (a Booster's objective: predict gives probabilities)"
    return "regressor"


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="treecomp")
def main() -> None:
    """treecomp: compile decision-tree ensembles into fast, exact predictors."""
    from . import toolchain
    toolchain.DEFAULT_PROGRESS = _progress  # first-use builds (the arrays kernel's) say so


@main.command("compile", epilog=PICKLE_WARNING, help=(
    "Compile MODEL into an artifact (.so or .tc) that `treecomp predict` and treecomp.load "
    "read.\n\n" + MODEL_FILES_HELP))
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
              help="Artifact to write; its suffix must match: .so (a self-contained shared "
                   "library: --backend c, llvm or arrays) or .tc (a table file: --backend "
                   "arrays). With --backend auto the suffix decides between the two. Another "
                   "suffix, or one that does not match --backend, is a usage error (exit 2).")
@click.option("--backend", type=click.Choice(["auto", "c", "llvm", "arrays"]), default="auto",
              show_default=True)
@click.option("--native", is_flag=True, help="Tune for this CPU (the artifact may not run elsewhere).")
@click.option("--emit-source", type=click.Path(file_okay=False), default=None,
              help="Also write the generated C source files to this directory (c backend).")
@click.option("--header", "header", type=click.Path(dir_okay=False), default=None,
              help="Also write the C ABI header (treecomp.h) to this path.")
@click.option("--ir", "with_ir", is_flag=True,
              help="Embed the model's IR, so that treecomp.load(...).apply / .contributions "
                   "work (~90 bytes a node; not in an llvm .so).")
@_friendly
def compile_cmd(model, output, backend, native, emit_source, header, with_ir):
    from . import api, backends, parse
    # the output's suffix names what is written: check it before any work
    suffix = Path(output).suffix.lower()
    if suffix not in ARTIFACT_SUFFIXES:
        raise click.BadParameter(
            _bad_suffix(output) + "; use "
            + " or ".join(f"{s} ({what}: {how})" for s, (what, how) in ARTIFACT_SUFFIXES.items()),
            param_hint="'-o' / '--output'")
    if backend != "auto" and suffix not in BACKEND_SUFFIX[backend]:
        want = BACKEND_SUFFIX[backend][0]
        raise click.BadParameter(
            f"--backend {backend} writes {ARTIFACT_SUFFIXES[want][0]}: "
            f"name the output {Path(output).with_suffix(want).name}, not "
            f"{Path(output).name}", param_hint="'-o' / '--output'")
    if emit_source and (backend not in ("c", "auto") or suffix != ".so"):
        raise click.UsageError("--emit-source is only available with --backend c (a .so output)")
    _check_writable(output)
    if header:
        _check_writable(header)
    t0 = time.perf_counter()
    forest = parse(model)
    if emit_source and forest.is_linear:
        raise click.UsageError("--emit-source: a linear_tree model's .so links the leaf-finding "
                               "code with its linear leaves' tables (treecomp/backends/linear_so.py); "
                               "its sources are not emitted")
    if suffix == ".so":  # linking a .so needs the C compiler: say so before compiling
        from . import toolchain
        from .errors import CompileError
        try:
            toolchain.find_compiler()
        except CompileError as exc:
            raise toolchain.so_needs_compiler(exc) from None
    if backend != "auto":
        name = backend
    elif suffix == ".tc":
        name = "arrays"
    else:  # a .so must be a shared library: the arrays .so, or a code generator's
        name = backends.choose(forest, "so")
    opts = {"native": True} if native else {}
    if with_ir:
        opts["ir"] = True
    click.echo(f"parsed {forest.n_trees} trees in {time.perf_counter() - t0:.2f}s; "
               f"compiling with the {name} backend", err=True)
    if emit_source:
        if name != "c":
            raise click.UsageError(f"--emit-source is only available with --backend c "
                                   f"(--backend auto chose {name})")
        from .backends import c
        Path(emit_source).mkdir(parents=True, exist_ok=True)
        for fname, text in c.emit(forest, c.options(**opts)).items():
            (Path(emit_source) / fname).write_text(text)
    try:
        pred = api.compile(forest, backend=name, progress=_progress, **opts)
        _write(output, lambda: pred.save(output))
    finally:
        _progress.close()
    if header:
        _write(header, lambda: write_header(header))
    click.echo(f"wrote {output} ({pred.backend} backend, {Path(output).stat().st_size} bytes) "
               f"in {time.perf_counter() - t0:.2f}s")


def write_header(path: str) -> None:
    from .toolchain import RUNTIME_DIR
    shutil.copyfile(RUNTIME_DIR / "treecomp.h", path)


@main.command("header")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default="treecomp.h", show_default=True)
@_friendly
def header_cmd(output):
    """Write the C ABI header that every artifact honours."""
    _write(output, lambda: write_header(output))
    click.echo(f"wrote {output}")


def _save_predictions(output: str, y: np.ndarray) -> None:
    suffix = Path(output).suffix.lower()
    if suffix == ".npy":
        if y.dtype == object:  # labels of a pickled classifier (strings): a plain numpy array
            y = np.array(y.tolist())
            if y.dtype == object:
                raise Failure(f"cannot write {output}: these predictions are Python objects, "
                              "which .npy cannot hold without pickling; use .csv")

        def writer() -> None:
            with open(output, "wb") as fh:  # np.save(path) would append .npy to other names
                np.save(fh, y, allow_pickle=False)
    else:
        fmt = "%.17g" if y.dtype.kind in "fiub" else "%s"

        def writer() -> None:
            np.savetxt(output, y, delimiter=",", fmt=fmt)
    _write(output, writer)


@main.command("predict")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
              help="Predictions to write, by suffix: .npy (np.save, exactly this path) or "
                   ".csv / .txt (comma-separated text, one row per line).")
@click.option("--proba", is_flag=True, help="Class probabilities (classifiers).")
@click.option("--raw", is_flag=True, help="Raw margins (decision_function).")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads, an integer >= 1 (default: all cores).")
@click.option("--header/--no-header", "header", default=None,
              help="Text DATA: the first line is a header / is data (default: decided from "
                   "the line, refusing what is ambiguous).")
@click.option("--delimiter", default=",", show_default=True, metavar="CHAR",
              help="Text DATA: the character between fields ('tab' for a tab; ' ': spaces).")
@_friendly
def predict_cmd(artifact, data, output, proba, raw, threads, header, delimiter):
    """Predict DATA with a compiled ARTIFACT (.so or .tc from `treecomp compile`).

    \b
    DATA is .npy (a 2-D array) or .csv / .txt: delimited numbers, one row per
    line, as pandas DataFrame.to_csv and numpy.savetxt write them. Columns are
    taken in order. The first line is a header when its cells are the model's
    feature names, 0..n-1 (pandas' labels of unnamed columns) or other names
    (then a model with feature names must be given exactly its names, in its
    order); numbers are data; ascending whole numbers or numbers beside text
    are ambiguous: say which with --header / --no-header. After a header, an
    extra first column under an empty cell is pandas' index and is left out.
    Lines starting with # before the data are comments. Empty fields (how
    pandas writes NaN) and "nan" are missing values. A file whose lines do not
    split into the model's columns is refused, naming the delimiter it seems
    to use.
    """
    if proba and raw:
        raise click.UsageError("--proba and --raw are mutually exclusive")
    suffix = Path(output).suffix.lower()
    if suffix not in PREDICTION_SUFFIXES:
        raise click.BadParameter(
            _bad_suffix(output) + "; use "
            + ", ".join(f"{s} ({what})" for s, what in PREDICTION_SUFFIXES.items()),
            param_hint="'-o' / '--output'")
    from . import datafile
    try:
        delimiter = datafile.delimiter_char(delimiter)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--delimiter'") from None
    _check_writable(output)
    pred = _load(artifact, n_threads=threads)
    if proba and not pred.head.is_classifier:
        if pred.head.transform in PROBABILITY_TRANSFORMS:
            raise Failure("--proba needs a classifier with class labels; this model has none (a "
                          "Booster's objective): its plain predictions already are probabilities")
        raise Failure("--proba needs a classifier; this model is a regressor")
    X = datafile.read_rows(data, pred.n_features, pred.head.feature_names, header=header,
                           delimiter=delimiter, note=lambda msg: click.echo(f"note: {msg}", err=True))
    if proba:
        y = pred.predict_proba(X)
    elif raw:
        y = pred.decision_function(X)
    else:
        y = pred.predict(X)
    if isinstance(y, list):
        y = np.concatenate(y, axis=1)
    y = np.asarray(y)
    _save_predictions(output, y)
    click.echo(f"wrote {output}: {y.shape} {y.dtype}")


@main.command("inspect", epilog=PICKLE_WARNING + " " + ARTIFACT_WARNING, help=(
    "Describe MODEL: trees, depth and leaf histograms, features, objective; or describe a "
    "compiled artifact (.so, .tc: recognised by content) from its own metadata: backend, "
    "the treecomp that wrote it, trees, features, outputs.\n\n" + MODEL_FILES_HELP))
@click.argument("model", type=click.Path(dir_okay=False))
@_friendly
def inspect_cmd(model):
    from . import outputs, parse
    kind = _artifact_kind(model)
    if kind is not None:
        _inspect_artifact(model, kind)
        return
    f = parse(model)
    s = {k: _plain(v) for k, v in f.stats().items()}
    depths = np.array([t.max_depth for t in f.trees])
    leaves = np.array([t.n_leaves for t in f.trees])
    click.echo(f"model:      {f.provenance or '?'}")
    click.echo(f"kind:       {_kind(f.transform, f.is_classifier)}; transform {f.transform}; "
               f"decision {f.decision}")
    if f.is_classifier:
        for c in f.classes:
            c = _plain(list(c))
            click.echo(f"classes:    {c[:20]}{' ...' if len(c) > 20 else ''}")
    click.echo(f"trees:      {s['n_trees']} ({s['n_nodes']} nodes, {s['n_leaves']} leaves)"
               f"{', averaged' if f.average else ''}")
    click.echo(f"features:   {f.n_features}"
               + (f" ({', '.join(map(str, f.feature_names[:10]))}{' ...' if f.n_features > 10 else ''})"
                  if f.feature_names else ""))
    used = np.unique(np.concatenate([t.feature[t.feature >= 0] for t in f.trees] or [np.zeros(0, int)]))
    click.echo(f"used:       {len(used)} features in splits; categorical splits: {s['categorical']}")
    if f.category_hashes:
        cols = ", ".join(f"{c} ({len(h)} values)" for c, h in f.category_hashes[:10])
        click.echo(f"categories: columns read by CatBoost's category hash (one-hot): {cols}"
                   f"{' ...' if len(f.category_hashes) > 10 else ''}")
    if f.pandas_categories not in ("reject", "values"):
        names = f.feature_names
        cols = ", ".join(f"{names[c] if names and f.pandas_categories != 'lightgbm' else c} "
                         f"({len(v)} {k})" for c, k, v in f.category_values[:10])
        click.echo(f"categories: DataFrame categories re-coded as {f.pandas_categories} does: "
                   f"{cols or 'none (the frame may have no category column)'}"
                   f"{' ...' if len(f.category_values) > 10 else ''}")
    click.echo(f"outputs:    {f.n_outputs} raw margin(s), base "
               f"{_plain(np.round(outputs.base_margins(f), 6).ravel()[:10])}"
               + (f" ({f.base_link} of {_plain(np.round(f.base_score, 6)[:10])}, evaluated "
                  "where it predicts)" if f.base_link != "identity" else ""))
    click.echo(f"arithmetic: input {f.input_dtype} (conversion rule {f.input_rule!r}), "
               f"x {f.comparison} threshold, sum in {f.accumulate_dtype}")
    click.echo(f"digest:     {f.digest()}")
    click.echo("depth histogram:")
    for d, n in zip(*np.unique(depths, return_counts=True)):
        click.echo(f"  depth {int(d):4d}: {int(n):6d} trees {'#' * int(np.ceil(40 * n / len(depths)))}")
    click.echo("leaves per tree:")
    edges = np.unique(np.geomspace(1, max(2, leaves.max() + 1), 8).astype(int))
    hist, edges = np.histogram(leaves, bins=edges)
    for lo, hi, n in zip(edges[:-1], edges[1:], hist):
        click.echo(f"  {int(lo):6d}-{int(hi) - 1:<6d}: {int(n):6d} trees "
                   f"{'#' * int(np.ceil(40 * n / len(leaves)))}")


def _artifact_kind(path: str) -> str | None:
    """"so" for a shared library, a backend's artifact kind for its file (backends.
    kind_of_artifact: "arrays" for a .tc), by the file's first bytes; None for anything else
    (a model file, or a file parse will report)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return None
    if head[:4] == ELF_MAGIC:
        return "so"
    from .backends import kind_of_artifact
    return kind_of_artifact(head)


def _load(path: str, n_threads: int | None = None) -> Any:
    """treecomp.load, its ArtifactError naming the file where the loader's message does not."""
    from . import load
    from .errors import ArtifactError
    try:
        return load(path, n_threads=n_threads)
    except ArtifactError as exc:
        name = Path(path).name
        if name in str(exc):
            raise
        raise ArtifactError(f"{name}: {exc}") from None


def _inspect_artifact(path: str, kind: str) -> None:
    """What a compiled artifact says about itself, loaded through treecomp.load (a .so's
    treecomp_meta_json, a .tc file's header: Predictor.metadata)."""
    pred = _load(path)
    m, h = pred.metadata, pred.head
    what = {"so": "a shared library", "arrays": "a table file"}.get(kind, f"a {kind} artifact")
    click.echo(f"artifact:   {Path(path).name} ({what}, {Path(path).stat().st_size} bytes)")
    isa = m.get("isa")
    click.echo(f"backend:    {m['backend']}"
               + (f"; instruction set in this process: {isa}" if isa else ""))
    version = m.get("treecomp_version")
    click.echo("written by: " + (f"treecomp {version}" if version else
                                 "a treecomp that did not record its version"))
    click.echo(f"kind:       {_kind(h.transform, h.is_classifier)}; transform {h.transform}; "
               f"decision {h.decision}")
    if h.is_classifier:
        for c in h.classes:
            c = _plain(list(c))
            click.echo(f"classes:    {c[:20]}{' ...' if len(c) > 20 else ''}")
    click.echo(f"trees:      {h.n_trees}")
    names = h.feature_names
    click.echo(f"features:   {h.n_features}"
               + (f" ({', '.join(map(str, names[:10]))}{' ...' if h.n_features > 10 else ''})"
                  if names else ""))
    if h.category_hashes:
        cols = ", ".join(f"{c} ({len(v)} values)" for c, v in h.category_hashes[:10])
        click.echo(f"categories: columns read by CatBoost's category hash (one-hot): {cols}"
                   f"{' ...' if len(h.category_hashes) > 10 else ''}")
    click.echo(f"outputs:    {h.n_outputs} raw margin(s)"
               + (f"; base {h.base_link} of {_plain(list(h.base_score[:10]))}, evaluated where "
                  "it predicts" if h.base_link != "identity" else ""))
    click.echo(f"arithmetic: input {h.input_dtype}, sum in {h.accumulate_dtype}")
    click.echo(f"digest:     {h.digest}")
    click.echo("(tree depths and leaves are not kept in an artifact: `treecomp inspect` on the "
               "model file shows them)")


def _bench_usage_error(run: Any, args: list[str]) -> str | None:
    """treecomp.benchmark parses its own arguments with argparse (usage + error on stderr,
    exit 2): check them first with its stderr captured, to report the error as one line like
    the rest."""
    import contextlib
    import io
    parse_args = getattr(run, "parse_args", None)
    if parse_args is None or any(a in ("-h", "--help") for a in args):
        return None
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
            parse_args(list(args))
    except SystemExit as exc:
        if exc.code in (0, None):
            return None
        lines = [ln.strip() for ln in buf.getvalue().splitlines() if ln.strip()]
        msg = lines[-1] if lines else "bad arguments"
        for prefix in ("treecomp bench: error: ", "error: "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        return msg
    return None


@main.command("bench", add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
@_friendly
def bench_cmd(ctx):
    """Benchmark every strategy; writes a report to ./treecomp-bench or --output-dir DIR
    (see `treecomp bench --help` for options)."""
    from .benchmark import runner as run  # light: libraries, engines, matplotlib load on use
    bad = _bench_usage_error(run, list(ctx.args))
    if bad is not None:
        raise click.UsageError(bad, ctx=ctx)
    sys.exit(run.main(list(ctx.args)))


if __name__ == "__main__":  # pragma: no cover
    main()

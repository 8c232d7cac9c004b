"""The `treecomp` command line: it only parses arguments and calls the Python API.

Errors the user can fix (bad files, unsupported models, bad arguments) print one line and exit
with status 1 (2 for usage errors); nothing prints a traceback.
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from pathlib import Path

import click
import numpy as np

from . import __version__

PICKLE_WARNING = ("Model files ending in .pkl/.pickle/.joblib are unpickled, which EXECUTES code "
                  "from the file: only use files you trust.")


def _friendly(fn):
    """Turn expected failures into a one-line error and exit code 1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from .errors import TreecompError
        try:
            return fn(*args, **kwargs)
        except (TreecompError, ValueError, TypeError, OSError, KeyError) as exc:
            msg = str(exc).strip().splitlines()
            first = msg[0] if msg else type(exc).__name__
            detail = "\n".join(msg[1:12])
            raise click.ClickException(first + ("\n" + detail if detail else "")) from None
    return wrapper


def _progress(msg: str) -> None:
    click.echo(f"  ... {msg}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="treecomp")
def main() -> None:
    """treecomp: compile decision-tree ensembles into fast, exact predictors."""


@main.command("compile", epilog=PICKLE_WARNING)
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True,
              help="Artifact to write (.so for c/llvm, .tc for arrays; with --backend auto the "
                   "suffix decides between a shared library and a table file).")
@click.option("--backend", type=click.Choice(["auto", "c", "llvm", "arrays"]), default="auto",
              show_default=True)
@click.option("--native", is_flag=True, help="Tune for this CPU (the artifact may not run elsewhere).")
@click.option("--emit-source", type=click.Path(file_okay=False), default=None,
              help="Also write the generated C source files to this directory (c backend).")
@click.option("--header", "header", type=click.Path(dir_okay=False), default=None,
              help="Also write the C ABI header (treecomp.h) to this path.")
@_friendly
def compile_cmd(model, output, backend, native, emit_source, header):
    """Compile MODEL (.pkl/.joblib estimator, XGBoost .json/.ubj, ...) into an artifact."""
    from . import api, backends, parse
    t0 = time.perf_counter()
    forest = parse(model)
    # auto honours the artifact the user named: a .so must be a shared library (c / llvm)
    suffix = Path(output).suffix.lower()
    artifact = "so" if suffix == ".so" else None
    name = backends.choose(forest, artifact) if backend == "auto" else backend
    if backend == "auto" and suffix == ".tc":
        name = "arrays"
    opts = {"native": True} if native else {}
    click.echo(f"parsed {forest.n_trees} trees in {time.perf_counter() - t0:.2f}s; "
               f"compiling with the {name} backend", err=True)
    if emit_source:
        if name != "c":
            raise click.UsageError("--emit-source is only available with --backend c")
        from .backends import c
        Path(emit_source).mkdir(parents=True, exist_ok=True)
        for fname, text in c.emit(forest, c.options(**opts)).items():
            (Path(emit_source) / fname).write_text(text)
    pred = api.compile(forest, backend=name, progress=_progress, **opts)
    pred.save(output)
    if header:
        write_header(header)
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
    write_header(output)
    click.echo(f"wrote {output}")


def read_data(path: str) -> np.ndarray:
    p = Path(path)
    if p.suffix.lower() == ".npy":
        return np.load(p, allow_pickle=False)
    if p.suffix.lower() in (".csv", ".txt"):
        with open(p) as f:
            first = f.readline()
        try:
            [float(v) for v in first.strip().split(",")]
            skip = 0
        except ValueError:
            skip = 1  # a header row
        return np.loadtxt(p, delimiter=",", skiprows=skip, ndmin=2)
    raise ValueError(f"unsupported data file {p.name}: use .npy or .csv")


@main.command("predict")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.argument("data", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="Predictions (.npy or .csv).")
@click.option("--proba", "kind", flag_value="proba", help="Class probabilities (classifiers).")
@click.option("--raw", "kind", flag_value="raw", help="Raw margins.")
@click.option("--threads", type=int, default=None, help="Threads (default: all cores).")
@_friendly
def predict_cmd(artifact, data, output, kind, threads):
    """Predict DATA (.npy or .csv, one row per line) with a compiled ARTIFACT."""
    from . import load
    pred = load(artifact, n_threads=threads)
    X = read_data(data)
    if kind == "proba":
        y = pred.predict_proba(X)
    elif kind == "raw":
        y = pred.decision_function(X)
    else:
        y = pred.predict(X)
    if isinstance(y, list):
        y = np.concatenate(y, axis=1)
    if output.lower().endswith(".csv"):
        np.savetxt(output, y, delimiter=",", fmt="%s" if y.dtype == object else "%.17g")
    else:
        np.save(output, y, allow_pickle=False)
    click.echo(f"wrote {output}: {y.shape} {y.dtype}")


@main.command("inspect", epilog=PICKLE_WARNING)
@click.argument("model", type=click.Path(dir_okay=False))
@_friendly
def inspect_cmd(model):
    """Describe MODEL: trees, depth and leaf histograms, features, objective."""
    from . import parse
    f = parse(model)
    s = f.stats()
    depths = np.array([t.max_depth for t in f.trees])
    leaves = np.array([t.n_leaves for t in f.trees])
    kind = "classifier" if f.is_classifier else "regressor"
    click.echo(f"model:      {f.provenance or '?'}")
    click.echo(f"kind:       {kind}; transform {f.transform}; decision {f.decision}")
    if f.is_classifier:
        for c in f.classes:
            click.echo(f"classes:    {list(c)[:20]}{' ...' if len(c) > 20 else ''}")
    click.echo(f"trees:      {s['n_trees']} ({s['n_nodes']} nodes, {s['n_leaves']} leaves)"
               f"{', averaged' if f.average else ''}")
    click.echo(f"features:   {f.n_features}"
               + (f" ({', '.join(f.feature_names[:10])}{' ...' if f.n_features > 10 else ''})"
                  if f.feature_names else ""))
    used = np.unique(np.concatenate([t.feature[t.feature >= 0] for t in f.trees] or [np.zeros(0, int)]))
    click.echo(f"used:       {len(used)} features in splits; categorical splits: {s['categorical']}")
    click.echo(f"outputs:    {f.n_outputs} raw margin(s), base {np.round(f.base_score, 6).tolist()[:10]}")
    click.echo(f"arithmetic: input {f.input_dtype}, x {f.comparison} threshold, sum in {f.accumulate_dtype}")
    click.echo(f"digest:     {f.digest()}")
    click.echo("depth histogram:")
    for d, n in zip(*np.unique(depths, return_counts=True)):
        click.echo(f"  depth {d:4d}: {n:6d} trees {'#' * int(np.ceil(40 * n / len(depths)))}")
    click.echo("leaves per tree:")
    edges = np.unique(np.geomspace(1, max(2, leaves.max() + 1), 8).astype(int))
    hist, edges = np.histogram(leaves, bins=edges)
    for lo, hi, n in zip(edges[:-1], edges[1:], hist):
        click.echo(f"  {lo:6d}-{hi - 1:<6d}: {n:6d} trees {'#' * int(np.ceil(40 * n / len(leaves)))}")


@main.command("bench", add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def bench_cmd(ctx):
    """Benchmark every strategy (see `treecomp bench --help` for options)."""
    try:
        import bench.run as run
    except ImportError:
        root = Path(__file__).resolve().parent.parent
        if (root / "bench" / "run.py").is_file():
            sys.path.insert(0, str(root))
            import bench.run as run
        else:
            raise click.ClickException("the benchmarks live in the source checkout (bench/); "
                                       "run this from a clone of treecomp") from None
    sys.exit(run.main(list(ctx.args)))


if __name__ == "__main__":  # pragma: no cover
    main()

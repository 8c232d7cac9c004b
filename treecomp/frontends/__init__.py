"""`parse(model_or_path) -> Forest`: the one entry point to every frontend.

Frontends register by library: an object is dispatched on the top-level module and class name
of its type (walking the MRO, so subclasses work), and the library's frontend module is imported
only then, so reading an XGBoost file never imports scikit-learn and vice versa. Each frontend
module exposes ``PARSERS: dict[class name, callable]``.
"""

from __future__ import annotations

import importlib
import os
import pickle
import pickletools
from pathlib import Path
from typing import Any, Callable

from ..errors import InvalidModelError, UnsupportedModelError
from ..ir import Forest

_FRONTENDS = {
    "sklearn": "treecomp.frontends.sklearn",
    "xgboost": "treecomp.frontends.xgboost",
    "lightgbm": "treecomp.frontends.lightgbm",
    "catboost": "treecomp.frontends.catboost",
    "onnx": "treecomp.frontends.onnx",
}

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
XGBOOST_SUFFIXES = (".json", ".ubj")
LIGHTGBM_SUFFIXES = (".txt",)
IR_SUFFIXES = (".tcir",)
CATBOOST_SUFFIXES = (".cbm",)
ONNX_SUFFIXES = (".onnx",)


def _frontend(lib: str):
    return importlib.import_module(_FRONTENDS[lib])


def supported_models() -> list[str]:
    """Every model class (as 'library.Class') and file kind that parse() accepts, and for a
    frontend whose models are read only in part, which features ('library features: ...')."""
    names = []
    for lib in _FRONTENDS:
        try:
            mod = _frontend(lib)
            names += [f"{lib}.{c}" for c in mod.PARSERS]
            if getattr(mod, "FEATURES", None):
                names.append(f"{lib} features: {mod.FEATURES}")
        except ImportError:  # pragma: no cover - a frontend's own import failed
            names.append(f"{lib}.*")
    return names + [f"files: {', '.join(PICKLE_SUFFIXES + XGBOOST_SUFFIXES + LIGHTGBM_SUFFIXES + CATBOOST_SUFFIXES + IR_SUFFIXES + ONNX_SUFFIXES)}"]


def _parser_for(model: Any) -> Callable[[Any], Forest] | None:
    for cls in type(model).__mro__:
        lib = (cls.__module__ or "").split(".")[0]
        if lib in _FRONTENDS:
            mod = _frontend(lib)
            # REFUSED: models recognised only to say why they cannot be compiled (not listed)
            fn = mod.PARSERS.get(cls.__name__) or getattr(mod, "REFUSED", {}).get(cls.__name__)
            if fn is not None:
                return fn
    return None


def parse(model_or_path: Any) -> Forest:
    """Parse a fitted model object, or a model file, into the treecomp IR.

    Files: .pkl/.pickle/.joblib (pickled estimators; loading a pickle EXECUTES CODE from the
    file, so only load files you trust), XGBoost JSON / UBJSON model files (read without
    xgboost), LightGBM text models (read without lightgbm), CatBoost JSON / .cbm models (read without
    catboost), ONNX models (ai.onnx.ml tree ensembles; needs the onnx package) and treecomp IR
    files; these are recognised by content whatever their name (.json/.ubj/.model/.bin,
    .txt/.model, .onnx, .tcir).
    """
    if isinstance(model_or_path, Forest):
        return model_or_path
    if isinstance(model_or_path, (str, os.PathLike)):
        return parse_file(model_or_path)
    fn = _parser_for(model_or_path)
    if fn is None:
        raise unsupported_type_error(model_or_path)
    return fn(model_or_path)


def unsupported_type_error(model: Any) -> UnsupportedModelError:
    """The error for an object no frontend reads: its type, what is supported in one sentence,
    and for a wrapper around a supported model (a scikit-learn Pipeline, a search) what to pass."""
    t = type(model)
    msg = (f"unsupported model type {t.__module__}.{t.__qualname__}: treecomp compiles fitted "
           "tree ensembles from scikit-learn, XGBoost, LightGBM and CatBoost, ONNX tree "
           "ensembles, and their model files (treecomp.supported_models() lists them)")
    hint = _wrapper_hint(model)
    return UnsupportedModelError(f"{msg}; {hint}" if hint else msg)


def _wrapper_hint(model: Any) -> str:
    mod = (type(model).__module__ or "").split(".")[0]
    if mod != "sklearn":
        return ""
    steps = getattr(model, "steps", None)
    if isinstance(steps, list) and steps and all(isinstance(s, tuple) and len(s) == 2 for s in steps):
        last = steps[-1][1]
        before = [name for name, _ in steps[:-1]]
        what = f"a {type(last).__name__}" if last not in (None, "passthrough") else "none"
        return (f"for a Pipeline, pass its last step (pipeline[-1], here {what}): treecomp "
                "compiles that step alone, without the steps before it"
                + (f" ({', '.join(map(str, before[:5]))}{', ...' if len(before) > 5 else ''})"
                   if before else "")
                + ", so apply them first (pipeline[:-1].transform(X)) and predict on their output")
    best = getattr(model, "best_estimator_", None)
    if best is not None:
        return f"for a {type(model).__name__}, pass its best_estimator_ (here a {type(best).__name__})"
    return ""


def _sniff(head: bytes) -> str | None:
    """The model format of a file from its first bytes: "lightgbm", "xgboost", "catboost",
    "ir", "onnx", "pickle" or None. Names lie (XGBoost 3.x writes UBJSON to .model / .bin, LightGBM text
    models are often called .model), content does not."""
    first_line = head.split(b"\n", 1)[0].split(b"\r", 1)[0]
    if first_line.strip() == b"tree":
        return "lightgbm"
    if head[:4] == b"PK\x03\x04":
        return "ir"  # a zip archive: treecomp's IR format
    if head[:4] == b"CBM1" or _frontend("catboost").is_catboost_json(head):
        return "catboost"  # .cbm, or CatBoost's JSON export (features_info / oblivious_trees)
    if head.lstrip(b" \t\r\n")[:1] == b"{":
        return "xgboost"  # JSON or UBJSON
    if _frontend("onnx").sniff(head):
        return "onnx"  # a protobuf ModelProto
    if _frontend("xgboost").legacy_binary_objective(head) is not None:
        return "xgboost"
    if len(head) > 1 and head[0] == 0x80 and 2 <= head[1] <= 5:  # pickle protocol 2-5
        return "pickle"
    return None


#: first bytes of what load_pickle reads besides plain pickles: joblib's compressed files
#: (zlib, gzip, bz2, xz, lzma, lz4) and its old "ZF" format
_COMPRESSED = (b"\x78", b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00", b"\x5d\x00\x00", b"\x04\x22\x4d\x18",
               b"ZF")
#: the first byte of a pickle is one of its opcodes (protocol 2+: PROTO, 0x80)
_PICKLE_OPCODES = frozenset(op.code.encode("latin-1") for op in pickletools.opcodes)


def looks_like_pickle(head: bytes) -> bool:
    """Whether a file starting with `head` may be a pickle or a joblib file: its first byte is a
    pickle opcode or a compressor's magic. False says for sure that it is not one."""
    return head[:1] in _PICKLE_OPCODES or head.startswith(_COMPRESSED)


def parse_file(path: str | os.PathLike) -> Forest:
    """Parse a model file (what :func:`parse` does with a path). A str is always a path: one
    naming no file that holds a model's text instead (a line break, or a JSON object) gets an
    error saying so."""
    p = Path(path)
    try:
        found = p.is_file()
    except OSError:  # a name too long, say: no such file either
        found = False
    if not found:
        if isinstance(path, str) and ("\n" in path or path.lstrip()[:1] == "{"):
            raise UnsupportedModelError(
                f"treecomp reads a str as a model file's path, and this one holds text (it starts "
                f"with {path[:24]!r}): write the model's text to a file and pass its path, or pass "
                "the library's model object (for LightGBM text: lightgbm.Booster(model_str=text))")
        shown = str(p) if len(str(p)) <= 200 else f"{str(p)[:200]}... ({len(str(p))} characters)"
        raise FileNotFoundError(f"model file not found: {shown}")
    suffix = p.suffix.lower()
    with open(p, "rb") as f:
        head = f.read(4096)
    if not head:
        raise InvalidModelError(f"{p.name} is empty")
    kind = _sniff(head)
    if suffix in PICKLE_SUFFIXES:
        # content before names: a model file saved under a pickle's name is read as what it is
        # (no pickle starts like one: "{", "tree", "CBM1", a zip, a protobuf), and what is
        # neither a pickle nor a known model gets an error saying so, not the unpickler's
        if kind in (None, "pickle") or head[:1] == b"\x80":
            if not looks_like_pickle(head):
                raise InvalidModelError(
                    f"{p.name} is not a pickle (it starts with {head[:16]!r}) nor a model file "
                    "treecomp recognises: " + _KNOWN_FILES)
            return parse(load_pickle(p))
    if kind == "lightgbm":
        return _frontend("lightgbm").parse_lightgbm_file(p)
    if kind == "xgboost":
        return _frontend("xgboost").parse_xgboost_file(p)
    if kind == "catboost":
        return _frontend("catboost").parse_catboost_file(p)
    if kind == "ir":
        return Forest.load(p)
    if kind == "onnx" or (kind is None and suffix in ONNX_SUFFIXES):
        return _frontend("onnx").parse_onnx_file(p)
    if kind == "pickle":
        raise UnsupportedModelError(
            f"{p.name} looks like a Python pickle; treecomp unpickles only files named "
            f"{', '.join(PICKLE_SUFFIXES)} (unpickling runs code from the file: only load files "
            "you trust)")
    # unrecognised content: a known suffix gets that format's own error
    if suffix in XGBOOST_SUFFIXES:
        return _frontend("xgboost").parse_xgboost_file(p)
    if suffix in LIGHTGBM_SUFFIXES:
        return _frontend("lightgbm").parse_lightgbm_file(p)
    if suffix in IR_SUFFIXES:
        return Forest.load(p)
    if suffix in CATBOOST_SUFFIXES:
        return _frontend("catboost").parse_catboost_file(p)
    raise UnsupportedModelError(
        f"cannot tell the model format of {p.name} from its content (it starts with "
        f"{head[:16]!r}); " + _KNOWN_FILES)


_KNOWN_FILES = ("treecomp reads XGBoost JSON / UBJSON model files, LightGBM text models, CatBoost "
                "JSON / .cbm models, ONNX models, treecomp IR files (by content, any name) and "
                "pickles named " + ", ".join(PICKLE_SUFFIXES))


#: the treecomp extra that installs a library whose objects a pickle may hold
EXTRAS = {"sklearn": "sklearn", "joblib": "sklearn", "xgboost": "xgboost", "lightgbm": "lightgbm",
          "catboost": "catboost", "onnx": "onnx"}


def install_hint(module: str) -> str:
    """How to install `module` (a dotted name: its top-level package counts): the treecomp
    extra that brings it, else the package itself."""
    top = module.split(".")[0]
    if top in EXTRAS:
        return f"pip install 'treecomp[{EXTRAS[top]}]'"
    return f"install the package that provides {top!r} (pip install {top})"


def load_pickle(path: Path) -> Any:
    """Unpickle a model file (joblib when installed: it reads plain pickles too).

    Unpickling runs code from the file: only load files you trust.
    """
    try:
        try:
            import joblib
        except ImportError:
            with open(path, "rb") as f:
                return pickle.load(f)
        return joblib.load(path)
    except ModuleNotFoundError as exc:
        raise UnsupportedModelError(
            f"{path.name} needs the module {exc.name!r} to unpickle: "
            f"{install_hint(exc.name or '')}") from None
    except Exception as exc:  # noqa: BLE001 - unpickling can raise anything; report it clearly
        raise InvalidModelError(f"cannot unpickle {path.name}: {type(exc).__name__}: {exc}") from None

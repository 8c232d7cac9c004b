#!/usr/bin/env bash
# The benchmark with the external engines (lleaves, daal4py/oneDAL, ONNX Runtime, TL2cgen) in
# the same process as treecomp. Those engines pin versions that clash with treecomp's main
# environment (lleaves needs llvmlite<0.45; daal4py lives in scikit-learn-intelex), so they get a
# venv of their own, built from bench/requirements-compare.txt, with treecomp installed editable
# from this checkout.
#
#   bench/compare-env.sh                 the comparison cases (lgbm-binary, xgb-binary), full size
#   bench/compare-env.sh [bench args]    any `treecomp bench` arguments, e.g. --quick --cases tiny
#   bench/compare-env.sh --test          treecomp's LLVM / arrays backend tests in that venv
#   bench/compare-env.sh --setup         only create / update the venv
#
# Environment: TREECOMP_COMPARE_VENV (where the venv lives; default
# ${XDG_CACHE_HOME:-~/.cache}/treecomp/compare-venv), PYTHON (the interpreter that creates it:
# CPython 3.10-3.13, as llvmlite 0.44 has wheels for no other; default python3.11, else python3).
# The venv is rebuilt when requirements-compare.txt changes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQ="$ROOT/bench/requirements-compare.txt"
VENV="${TREECOMP_COMPARE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/treecomp/compare-venv}"
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"

stamp="$(sha256sum "$REQ" | cut -c1-16)"
if [[ ! -x "$VENV/bin/python" || "$(cat "$VENV/.treecomp-req" 2>/dev/null)" != "$stamp" ]]; then
    ver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    case "$ver" in
        3.10|3.11|3.12|3.13) ;;
        *) echo "compare-env: $PY is Python $ver; llvmlite 0.44 (lleaves) needs 3.10-3.13: set PYTHON" >&2
           exit 2 ;;
    esac
    echo "compare-env: building $VENV with $PY ($ver)" >&2
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -r "$REQ"
    # treecomp's own requirements (numpy, llvmlite>=0.42, click) are pinned above already
    "$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT"
    "$VENV/bin/python" -m pip check >&2
    echo "$stamp" > "$VENV/.treecomp-req"
fi

# llvmlite 0.44 makes typed-pointer LLVM contexts unless this is set before it is imported;
# treecomp's IR uses opaque `ptr` (lleaves works in either mode). See treecomp/benchmark/engines.py.
export LLVMLITE_ENABLE_OPAQUE_POINTERS=1
cd "$ROOT"

case "${1:-}" in
    --setup)
        exec "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import daal4py, lleaves, llvmlite, treecomp  # noqa: F401 - they must import together
print("compare-env ready:", ", ".join(f"{d} {md.version(d)}" for d in (
    "treecomp", "llvmlite", "lleaves", "scikit-learn-intelex", "scikit-learn", "xgboost-cpu",
    "lightgbm", "onnxruntime", "tl2cgen", "numpy")))
EOF
        ;;
    --test)
        shift
        exec "$VENV/bin/python" -m pytest -q tests/test_backend_llvm.py tests/test_backend_arrays.py "$@" ;;
    "")
        exec "$VENV/bin/python" -m treecomp.benchmark --cases lgbm-binary,xgb-binary \
            --strategies library,c,llvm,arrays,lleaves,daal4py,onnxruntime,tl2cgen \
            --out "$ROOT/bench/out/compare" ;;
    *)
        exec "$VENV/bin/python" -m treecomp.benchmark "$@" ;;
esac

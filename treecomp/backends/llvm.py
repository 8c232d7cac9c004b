"""The LLVM backend: a Forest becomes LLVM IR, compiled in-process by llvmlite (no C compiler).

Two ways out of the same (position-independent) object code:
- **JIT** (what ``treecomp.compile(model, backend="llvm")`` returns): the object files are linked
  in-process by LLVM's ORC JIT (JITLink) and ``treecomp_predict`` is called through ctypes (GIL
  released during the call). No compiler, no linker. See LLVMKernel for why ORC, not MCJIT.
- **Shared library** (``Predictor.save(path)``): the same object files are linked into a .so by
  ``toolchain.link_objects`` (needs the system linker through ``cc``; without one it raises
  CompileError). The .so has exactly the ABI of ``runtime/treecomp.h`` and
  ``treecomp_backend()`` returns "llvm", so ``treecomp.load`` and C programs use it unchanged.

Shape of the generated code: c.py's three tree shapes, instruction for instruction where it
matters (one function per tree or per kernel; rows processed tree-major over blocks):
- Trees of depth <= ``heap_max_depth`` without categorical splits are constant tables (c.py's
  ``heap_tables``: padded to a complete tree in heap order) walked by one branch-free kernel per
  (depth, leaf width, NaN mode): ``i = 2i + 1 + right(x[f[i]], t[i])``, ``interleave`` rows
  at a time so their loads overlap, fully unrolled. Compile time is flat in the number of trees.
- Bigger trees (> ``goto_max_nodes`` nodes, no categorical splits) are node tables
  {fn, t, l, r} walked by a loop per row (c.py's TC_WALK_KERNEL). Tables are emitted as byte
  strings in C struct layout, which LLVM parses ~10x faster than per-element constants.
- The rest (categorical, or deep but small) get one function each, one basic block per node,
  walking one row; the module's unit function loops over the rows of a block, tree by tree::

    define internal void @tc<digest>.t7(ptr noalias %p, ptr noalias %q) {   ; tree 7
    n0: %a0 = getelementptr inbounds float, ptr %p, i64 3
        %v0 = load float, ptr %a0
        %c0 = fcmp ogt float %v0, 0x4008000000000000   ; x <= t goes left; NaN left (false)
        br i1 %c0, label %n2, label %n1
    n1: ...  fcmp ugt ...                               ; NaN right: "unordered or greater"
    n5: br label %T                                     ; a leaf
    T:  %lv0 = phi double [0x3FB999999999999A, %n5], ...  ; the reached leaf's value
        q[o] = q[o] + %lv0
    }

- Single-leaf trees get no function: a run of them is one call adding its constants to each row
  one by one (c.const_run; leading ones fold into the base score, c.folded_base). A unit's
  steps are grouped into noinline functions of at most ``_FANOUT`` steps (thousands of row loops
  in one function overflowed the stack of LLVM's ScalarEvolution).
- ``treecomp_predict`` (built with llvmlite.ir) checks its arguments like c.py, then per block
  of ``block_rows`` rows: cast rows to the comparison dtype if needed, set margins to the base
  score, call every unit, divide by n_trees when averaging, apply the transform if asked.

Floating-point choices (the same as the C backend, so the two are bit-identical):
- Rows are cast to the library's comparison precision (fptrunc rounds to nearest, like numpy)
  one block at a time into a scratch buffer when the caller's dtype differs.
- Thresholds come from passes.comparison_thresholds and are written exactly (hex constants in
  basic-block code, the values' own bytes in tables).
- NaN routing is folded into the compare: the right branch is taken on ``fcmp ogt``/``oge``
  (ordered: false for NaN, so NaN goes left) when default_left, else on ``fcmp ugt``/``uge``
  (true for NaN, so NaN goes right); no isnan on the hot path. The heap kernel uses the same
  predicates per c.py's NaN MODE 0/1, and for MODE 2 ``(x > t) | (isnan(x) & nan_right)``.
- Categorical splits: the valid-id test of forest.category_rule with ordered compares (NaN is
  never valid), category = fptosi (C's truncating cast), then a bit test in a constant global
  bitset; invalid ids branch per NaN ? default_left : cat_other_left.
- No fast-math flags anywhere: LLVM never fuses (no ``contract``) or reassociates, so each leaf
  is added to its margin once, trees in model order, from the base score; averaging divides
  once at the end. The transform calls libm's ``exp`` (resolved in-process by the JIT, by
  ``-lm`` in a .so); float32 margins take exp in double and round, as c.py does.

Options (``DEFAULTS``) and their cost. Measured on this 2-core box while other jobs kept its
load average near 10 (wall times are 2-3x CPU times), random forests over 50 features,
single-threaded predict_raw on float32 rows (median of 5), C backend (gcc -O3) on the same
forest for reference:
  500 complete depth-6 trees, defaults (heap kernel), 100k rows:
      cold compile 0.8-1.3 s (0.33 s CPU in-process), cached 0.06 s; 6.7-8.5 us/row
      (C: 2.7-3.4 s, 10-12.8 us/row);  opt=0: 0.4 s, 13 us/row;  opt=3: 0.6 s, 7.2 us/row
  500 such trees, heap_max_depth=0 (basic blocks, opt 2): 13 s (7.5 s CPU), 27 us/row
  100 such trees, basic blocks, opt 0/1/2/3: 0.33/1.46/1.90/2.38 s CPU, 7.5/6.1/4.8/3.6 us/row
  5000 such trees, defaults: 5.4 s (2.7 s CPU), peak RSS 254 MB, 94 us/row
      (C: 38 s, 222 us/row); with heap_max_depth=0: 297 s (~140 s CPU), peak RSS 347 MB
  50 random depth-18 trees (252k nodes, node tables), 20k rows: 1.1 s, 3.3 us/row
      (C: 12.6 s, 3.4 us/row)
- ``opt`` 0-3: 0 = no IR passes + LLVM's fast instruction selector (fastest build, slowest
  code); 1 = no IR passes, codegen -O1; 2 (default) = SROA + SimplifyCFG (turns leaf pairs into
  selects) + InstCombine, codegen -O2: the emitted IR needs little else, and builds stay well
  inside budget; 3 = the full O3 module pipeline + codegen -O3: ~25% longer builds of
  basic-block trees for up to ~25% faster code there; the heap kernel gains little.
- ``native``: use every feature of this CPU (``get_host_cpu_name``); artifacts may then not
  run elsewhere and the host CPU joins the cache key. Default False: generic x86-64.
- ``block_rows`` (64), ``heap_max_depth`` (8), ``interleave`` (8), ``goto_max_nodes`` (1024):
  as in c.py. Basic-block code costs ~0.1-0.15 ms of LLVM time per node at opt 2.
- ``nodes_per_module``: trees are split into LLVM modules of about this many node-equivalents
  (a table node counts 1/16, a basic-block node 1); modules compile in ``jobs`` threads, each
  in its own LLVM context, into separate object files. This bounds memory for 5000+ trees.

Cache: each object file is cached (``toolchain.cached(key, ".o")``, key = backend, IR digest,
options, llvmlite version, triple, part number, host CPU when native); a second compile of the
same model links the cached objects into the JIT without running any code generation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import json
import os
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..version import __version__
from .. import outputs, platform, toolchain
from ..errors import ArtifactError, CompileError, InvalidModelError
from ..ir import Forest, Head, Tree, head_of
from ..native import BASE_SYMBOL, kernel_error, set_base
from ..passes import comparison_thresholds
from .c import bitset_layout, const_run, folded_base, heap_depth, steps

NAME = "llvm"
KIND = "llvm"
#: first bytes of a pickled / saved JIT artifact (object code + head), see `to_bytes`
MAGIC = b"TREECOMP-LLVM\x00"
#: 2: the file ends with the sha256 of everything before it (checked before anything is parsed
#: or reaches the JIT linker, which a damaged object file can crash)
_CONTAINER_VERSION = 2

DEFAULTS: dict[str, Any] = {
    "opt": 2,                   # 0-3, see the module docstring
    "native": False,            # tune for this CPU (artifacts may not run elsewhere)
    "block_rows": 64,           # rows per tree-major block
    "heap_max_depth": 8,        # trees up to this depth without categorical splits use the
                                # branch-free complete-tree kernel (as in c.py); others get
                                # one basic block per node
    "interleave": 8,            # rows walked together through a branch-free tree
    "goto_max_nodes": 1024,     # other trees up to this size get one basic block per node;
                                # larger ones (no categorical splits) a node table walked by a
                                # loop, as in c.py (codegen costs ~0.1 ms per basic block)
    "nodes_per_module": 16000,  # split trees into LLVM modules / object files of ~this size
    "jobs": None,               # threads compiling modules in parallel (default: all cores)
    "ir": False,                # pickles carry the model's IR (apply / contributions once
                                # unpickled); a .so linked from the objects does not
}


def options(**overrides: Any) -> dict[str, Any]:
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown LLVM backend option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    opts = {**DEFAULTS, **{k: v for k, v in overrides.items() if v is not None}}
    if opts["opt"] not in (0, 1, 2, 3):
        raise ValueError(f"opt must be 0, 1, 2 or 3, got {opts['opt']!r}")
    if int(opts["block_rows"]) < 1:
        raise ValueError("block_rows must be >= 1")
    if int(opts["nodes_per_module"]) < 1:
        raise ValueError("nodes_per_module must be >= 1")
    if not 1 <= int(opts["interleave"]) <= 64:
        raise ValueError("interleave must be between 1 and 64")
    if int(opts["goto_max_nodes"]) < 0:
        raise ValueError("goto_max_nodes must be >= 0")
    if not 0 <= int(opts["heap_max_depth"]) <= 20:
        raise ValueError("heap_max_depth must be between 0 and 20 (tables grow as 2^depth)")
    opts["native"] = bool(opts["native"])
    return opts


# -- llvmlite set-up ----------------------------------------------------------------------------
_INIT_LOCK = threading.Lock()


@functools.cache
def _llvm():
    """llvmlite.binding, with the native target ready and libm's exp visible to the JIT."""
    try:
        import llvmlite
        import llvmlite.binding as llvm
    except ImportError as exc:  # pragma: no cover - llvmlite is a core dependency
        raise CompileError(f"the llvm backend needs llvmlite: {exc}") from None
    # llvmlite < 0.45 (LLVM 15; lleaves pins it) parses the opaque `ptr` of this module's IR
    # only in contexts made with opaque pointers on, which it decides once, from
    # LLVMLITE_ENABLE_OPAQUE_POINTERS, when first imported; llvmlite >= 0.45 has no such switch.
    if getattr(llvmlite, "opaque_pointers_enabled", True) is False:
        raise CompileError(f"the llvm backend needs opaque pointers: with llvmlite "
                           f"{llvmlite.__version__}, set LLVMLITE_ENABLE_OPAQUE_POINTERS=1 in the "
                           "environment before llvmlite is first imported (or use llvmlite >= 0.45)")
    with _INIT_LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
    return llvm


@functools.cache
def _libm_address(name: str) -> int | None:
    """libm's `name` (exp, expf): the JIT resolves undefined symbols in-process, and the
    interpreter may not have loaded libm globally, so it is handed to the JIT explicitly."""
    for lib in ("libm.so.6", None, ctypes.util.find_library("m")):
        try:
            return ctypes.cast(getattr(ctypes.CDLL(lib), name), ctypes.c_void_p).value
        except (OSError, TypeError, AttributeError):
            continue
    return None


def _llvmlite_version() -> str:
    import llvmlite
    return llvmlite.__version__


def _cpu(opts: dict[str, Any]) -> tuple[str, str]:
    llvm = _llvm()
    if opts["native"]:
        return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    return "x86-64" if llvm.get_process_triple().startswith("x86_64") else "generic", ""


def _target_machine(opts: dict[str, Any]):
    llvm = _llvm()
    cpu, features = _cpu(opts)
    target = llvm.Target.from_triple(llvm.get_process_triple())
    # reloc="pic", small code model: the same object code goes into a .so and into the JIT
    # (JITLink keeps each object's sections together, so 32-bit PC-relative references reach).
    return target.create_target_machine(cpu=cpu, features=features, opt=min(int(opts["opt"]), 3),
                                        reloc="pic", codemodel="default")


# -- code generation: trees (textual IR, see _emit_tree for why) -------------------------------
def _hex(v: float) -> str:
    """An LLVM IR floating constant: the double bit pattern (exact for float32 values too)."""
    return "0x" + struct.pack(">d", float(v)).hex().upper()


_HEXDIGITS = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def _blob(name: str, data: np.ndarray) -> str:
    """A constant global holding `data`'s bytes (host byte order and C struct layout, which is
    the JIT target's): an i8 string parses ~10x faster than per-element IR constants and ends
    up byte-identical in the object file. Escaped as \\XX with numpy (no per-byte Python)."""
    raw = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
    esc = np.empty((raw.size, 3), np.uint8)
    esc[:, 0] = ord("\\")
    esc[:, 1] = _HEXDIGITS[raw >> 4]
    esc[:, 2] = _HEXDIGITS[raw & 15]
    align = max(data.dtype.alignment, 4)
    return (f"@{name} = internal unnamed_addr constant [{raw.size} x i8] "
            f'c"{esc.tobytes().decode()}", align {align}\n')


def _node_dtype(forest: Forest, table: bool) -> np.dtype:
    """c.py's tc_node {fn, t} / tc_cnode {fn, t, l, r} as a numpy struct with C alignment."""
    fields = [("fn", np.uint32), ("t", np.dtype(forest.input_dtype))]
    if table:
        fields += [("l", np.int32), ("r", np.int32)]
    return np.dtype(fields, align=True)


def _leaf_blob(name: str, vals: np.ndarray, forest: Forest) -> str:
    # leaf values rounded to the accumulation dtype, as the interpreter does
    return _blob(name, np.asarray(vals, np.float64).astype(forest.accumulate_dtype))


def _types(forest: Forest) -> tuple[str, str]:
    x_t = "float" if forest.input_dtype == "float32" else "double"
    acc_t = "float" if forest.accumulate_dtype == "float32" else "double"
    return x_t, acc_t


#: leaf vectors up to this width are added with straight-line code; wider ones with a loop over
#: the outputs. Unrolled, a tree's code grows with its width times the rows walked together, and
#: LLVM's time with it, faster than linearly: a 3-node tree with 250 / 500 / 1,000 / 2,000
#: outputs took 1.0 / 2.3 / 5.0 / 12.4 s of CPU to build (2-core dev box, 2026-11-27; 479 s at
#: 5,000 were measured elsewhere). The loop's adds are the same, output by output, in tree
#: order: the margins are bit for bit the same.
UNROLL_MAX_WIDTH = 16


def _add_leaf_loop(s: str, w: int, acc_t: str, leaf_base: str, acc_base: str, pre: str) -> str:
    """IR adding the `w` leaf values at %L[leaf_base + j] to %A[acc_base + j], j = 0..w-1, as a
    loop (labels suffixed `s`); emitted at the end of block `pre`, it leaves the builder in
    block ``Le{s}``."""
    return (f"  br label %Lh{s}\n"
            f"Lh{s}:\n  %j{s} = phi i64 [0, %{pre}], [%jn{s}, %Lh{s}]\n"
            f"  %lj{s} = add nuw nsw i64 {leaf_base}, %j{s}\n"
            f"  %lq{s} = getelementptr inbounds {acc_t}, ptr %L, i64 %lj{s}\n"
            f"  %lv{s} = load {acc_t}, ptr %lq{s}\n"
            f"  %aj{s} = add nsw i64 {acc_base}, %j{s}\n"
            f"  %aq{s} = getelementptr inbounds {acc_t}, ptr %A, i64 %aj{s}\n"
            f"  %ao{s} = load {acc_t}, ptr %aq{s}\n"
            f"  %an{s} = fadd {acc_t} %ao{s}, %lv{s}\n"
            f"  store {acc_t} %an{s}, ptr %aq{s}\n"
            f"  %jn{s} = add nuw nsw i64 %j{s}, 1\n"
            f"  %jc{s} = icmp ult i64 %jn{s}, {w}\n"
            f"  br i1 %jc{s}, label %Lh{s}, label %Le{s}\n"
            f"Le{s}:\n")


def _emit_tree(i: int, tree: Tree, forest: Forest, sym: str, out: list[str]) -> None:
    """Append the IR text of tree `i`: ``@{sym}.t{i}(x, a)`` walks one row `x` and adds its
    leaf to the margins `a` (the row loop is in the module's unit function).

    Trees are written as IR text rather than through llvmlite.ir's builder: the builder costs
    ~50 us per node (object creation + string rendering), several seconds for a 500-tree model;
    text costs ~2 us per node and parses to the identical module. Nodes are visited in index
    order (parents precede children), no recursion. The function has no loop on purpose: with
    the row loop inside, LLVM's machine LICM hoists every threshold into a register for the
    whole loop, and register allocation then grows superlinearly with the tree (3 s for a
    4,000-node tree) and spills on the hot path.
    """
    x_t, acc_t = _types(forest)
    thr = comparison_thresholds(tree, forest)
    strict = forest.comparison == "<"
    o = int(forest.tree_output[i])
    w = tree.width
    left, right, feat = tree.left.tolist(), tree.right.tolist(), tree.feature.tolist()
    dl, cidx = tree.default_left.tolist(), tree.cat_index.tolist()
    nwords = tree.cat_bits.shape[1]
    nbits = _hex(32 * nwords)
    # c.bitset_layout: trailing zero words dropped, or only the nonzero words when sparse
    # (category ids in the millions would otherwise be megabytes of zeros per split)
    layouts = []
    for k in range(tree.cat_bits.shape[0]):
        layout, idx, words = bitset_layout(tree.cat_bits[k])
        layouts.append((layout, len(words)))
        if layout != "empty":
            out.append(_blob(f"{sym}.c{i}.{k}", np.asarray(words, np.uint32)))
        if layout == "sparse":
            out.append(_blob(f"{sym}.ci{i}.{k}", np.asarray(idx, np.uint32)))
    # valid category ids per forest.category_rule (ordered compares: NaN is never valid); the
    # category is trunc(x) (fptosi), so "trunc" makes (-1, 0) category 0 like C's (int)x
    rule = forest.category_rule
    if rule not in ("nonneg", "trunc", "integral"):
        raise CompileError(f"category_rule {rule!r} is not supported by the llvm backend "
                           "(supported: nonneg, trunc, integral)")
    lower = "ogt -1.0" if rule == "trunc" else "oge 0.0"
    integral = rule == "integral"
    # NaN left: right iff an ordered "not left" compare holds; NaN right: iff unordered-or.
    pred_nan_left = "oge" if strict else "ogt"
    pred_nan_right = "uge" if strict else "ugt"
    start = len(out)  # where a wide tree's leaf table goes (before the function)
    out.append(f"define internal void @{sym}.t{i}(ptr noalias nocapture readonly %p, "
               f"ptr noalias nocapture %q) #0 {{\n")
    value = tree.value
    if acc_t == "float":
        value = value.astype(np.float32).astype(np.float64)  # leaf values rounded to acc dtype
    leaves: list[int] = []
    app = out.append
    for nd in range(tree.n_nodes):
        l = left[nd]
        if l < 0:
            app(f"n{nd}:\n  br label %T\n")
            leaves.append(nd)
            continue
        f, r = feat[nd], right[nd]
        k = cidx[nd]
        if k < 0:
            pred = pred_nan_left if dl[nd] else pred_nan_right
            app(f"n{nd}:\n  %a{nd} = getelementptr inbounds {x_t}, ptr %p, i64 {f}\n"
                f"  %v{nd} = load {x_t}, ptr %a{nd}\n"
                f"  %c{nd} = fcmp {pred} {x_t} %v{nd}, {_hex(thr[nd])}\n"
                f"  br i1 %c{nd}, label %n{r}, label %n{l}\n")
            continue
        # categorical: valid iff 0 <= v < 32*n_words (ordered compares: NaN is not valid);
        # category = trunc(v); bit set -> left; invalid -> NaN ? default_left : cat_other_left
        other = bool(tree.cat_other_left[k])
        nan_to = l if dl[nd] else r
        other_to = l if other else r
        app(f"n{nd}:\n  %a{nd} = getelementptr inbounds {x_t}, ptr %p, i64 {f}\n"
            f"  %v{nd} = load {x_t}, ptr %a{nd}\n"
            f"  %g{nd} = fcmp {lower.split()[0]} {x_t} %v{nd}, {lower.split()[1]}\n"
            f"  %h{nd} = fcmp olt {x_t} %v{nd}, {nbits}\n"
            f"  %ok{nd} = and i1 %g{nd}, %h{nd}\n"
            f"  br i1 %ok{nd}, label %n{nd}.c, label %n{nd}.o\n"
            f"n{nd}.c:\n  %i{nd} = fptosi {x_t} %v{nd} to i32\n")
        if integral:  # a fractional value is no category (the fraction test, as c.py: v == (int)v)
            app(f"  %ib{nd} = sitofp i32 %i{nd} to {x_t}\n"
                f"  %ie{nd} = fcmp oeq {x_t} %v{nd}, %ib{nd}\n"
                f"  br i1 %ie{nd}, label %n{nd}.b, label %n{nd}.o\n"
                f"n{nd}.b:\n")
        layout, nw = layouts[k]
        if layout == "empty":
            app(f"  br label %n{r}\n")
        elif layout == "sparse":
            app(f"  %bt{nd} = call i1 @{sym}.sb(ptr @{sym}.ci{i}.{k}, ptr @{sym}.c{i}.{k}, "
                f"i32 {nw}, i32 %i{nd})\n"
                f"  br i1 %bt{nd}, label %n{l}, label %n{r}\n")
        if layout != "dense":
            app(f"n{nd}.o:\n")
        elif nw < nwords:  # ids past the stored words are valid categories with a zero bit
            app(f"  %in{nd} = icmp ult i32 %i{nd}, {32 * nw}\n"
                f"  br i1 %in{nd}, label %n{nd}.w, label %n{r}\n"
                f"n{nd}.w:\n")
        if layout == "dense":
            app(f"  %wi{nd} = lshr i32 %i{nd}, 5\n"
                f"  %wx{nd} = zext i32 %wi{nd} to i64\n"
                f"  %wp{nd} = getelementptr inbounds i32, ptr @{sym}.c{i}.{k}, i64 %wx{nd}\n"
                f"  %wv{nd} = load i32, ptr %wp{nd}\n"
                f"  %bi{nd} = and i32 %i{nd}, 31\n"
                f"  %sh{nd} = lshr i32 %wv{nd}, %bi{nd}\n"
                f"  %bt{nd} = trunc i32 %sh{nd} to i1\n"
                f"  br i1 %bt{nd}, label %n{l}, label %n{r}\n"
                f"n{nd}.o:\n")
        if nan_to == other_to:
            app(f"  br label %n{nan_to}\n")
        else:
            app(f"  %u{nd} = fcmp uno {x_t} %v{nd}, 0.0\n"
                f"  br i1 %u{nd}, label %n{nan_to}, label %n{other_to}\n")
    if w > UNROLL_MAX_WIDTH:  # the reached leaf's row of a constant table, added in a loop
        out.insert(start, _leaf_blob(f"{sym}.L{i}", tree.value[leaves].ravel(), forest))
        inc = ", ".join(f"[{k}, %n{nd}]" for k, nd in enumerate(leaves))
        app(f"T:\n  %li = phi i64 {inc}\n  %lb = mul nuw nsw i64 %li, {w}\n"
            "  br label %Tl\nTl:\n")
        body = _add_leaf_loop("", w, acc_t, "%lb", str(o), "Tl")
        app(body.replace("ptr %L,", f"ptr @{sym}.L{i},").replace("ptr %A,", "ptr %q,"))
        app("  ret void\n}\n\n")
        return
    app("T:\n")
    for j in range(w):  # phis first: LLVM requires them grouped at the top of the block
        inc = ", ".join(f"[{_hex(value[nd, j])}, %n{nd}]" for nd in leaves)
        app(f"  %lv{j} = phi {acc_t} {inc}\n")
    for j in range(w):
        app(f"  %ap{j} = getelementptr inbounds {acc_t}, ptr %q, i64 {o + j}\n"
            f"  %old{j} = load {acc_t}, ptr %ap{j}\n"
            f"  %new{j} = fadd {acc_t} %old{j}, %lv{j}\n"
            f"  store {acc_t} %new{j}, ptr %ap{j}\n")
    app("  ret void\n}\n\n")


def _heap_depth(tree: Tree, opts: dict[str, Any]) -> int:
    """The complete-tree depth a tree is compiled at, or 0 for one-block-per-node code."""
    return heap_depth(tree, int(opts["heap_max_depth"]))


def _sparse_bit_fn(sym: str) -> str:
    """``@{sym}.sb(I, W, m, c)``: bit c of a sparse bitset (c.tc_sparse_bit): binary search
    for word c >> 5 among the m sorted word indices I; an absent word is zero."""
    return (f"define internal i1 @{sym}.sb(ptr nocapture readonly %I, ptr nocapture readonly %W, "
            "i32 %m, i32 %c) #0 {\n"
            "e:\n  %w = lshr i32 %c, 5\n  br label %L\n"
            "L:\n  %lo = phi i32 [0, %e], [%lo2, %B]\n  %hi = phi i32 [%m, %e], [%hi2, %B]\n"
            "  %go = icmp slt i32 %lo, %hi\n  br i1 %go, label %B, label %D\n"
            "B:\n  %d = sub i32 %hi, %lo\n  %h = lshr i32 %d, 1\n  %mid = add i32 %lo, %h\n"
            "  %mx = zext i32 %mid to i64\n  %ip = getelementptr inbounds i32, ptr %I, i64 %mx\n"
            "  %iv = load i32, ptr %ip\n  %lt = icmp ult i32 %iv, %w\n  %mp1 = add i32 %mid, 1\n"
            "  %lo2 = select i1 %lt, i32 %mp1, i32 %lo\n  %hi2 = select i1 %lt, i32 %hi, i32 %mid\n"
            "  br label %L\n"
            "D:\n  %in = icmp slt i32 %lo, %m\n  br i1 %in, label %F, label %Z\n"
            "F:\n  %lx = zext i32 %lo to i64\n  %jp = getelementptr inbounds i32, ptr %I, i64 %lx\n"
            "  %jv = load i32, ptr %jp\n  %eq = icmp eq i32 %jv, %w\n  br i1 %eq, label %G, label %Z\n"
            "G:\n  %wp = getelementptr inbounds i32, ptr %W, i64 %lx\n  %wv = load i32, ptr %wp\n"
            "  %b = and i32 %c, 31\n  %s = lshr i32 %wv, %b\n  %t = trunc i32 %s to i1\n  ret i1 %t\n"
            "Z:\n  ret i1 false\n}\n\n")


def _const_fn(forest: Forest, sym: str) -> str:
    """``@{sym}.k(K, V, m, n, A)``: c.tc_const, a run of m constant trees: A[r, K[j]] += V[j]
    for j in order (each tree still adds at its own position: no pre-summing), constant by
    constant over the n rows (independent adds, not one dependent chain per row)."""
    _, acc_t = _types(forest)
    return (f"define internal void @{sym}.k(ptr noalias nocapture readonly %K, "
            "ptr noalias nocapture readonly %V, i64 %m, i64 %n, ptr noalias nocapture %A) #0 {\n"
            "e:\n  %ne = icmp sgt i64 %n, 0\n  %me = icmp sgt i64 %m, 0\n  %go = and i1 %ne, %me\n"
            "  br i1 %go, label %J, label %x\n"
            "J:\n  %j = phi i64 [0, %e], [%jn, %D]\n"
            "  %kp = getelementptr inbounds i32, ptr %K, i64 %j\n  %kv = load i32, ptr %kp\n"
            "  %kx = zext i32 %kv to i64\n"
            f"  %vp = getelementptr inbounds {acc_t}, ptr %V, i64 %j\n  %v = load {acc_t}, ptr %vp\n"
            "  br label %L\n"
            "L:\n  %r = phi i64 [0, %J], [%rn, %L]\n"
            f"  %ab = mul nsw i64 %r, {forest.n_outputs}\n  %ai = add nsw i64 %ab, %kx\n"
            f"  %ap = getelementptr inbounds {acc_t}, ptr %A, i64 %ai\n  %ao = load {acc_t}, ptr %ap\n"
            f"  %an = fadd {acc_t} %ao, %v\n  store {acc_t} %an, ptr %ap\n"
            "  %rn = add nuw nsw i64 %r, 1\n  %rm = icmp slt i64 %rn, %n\n"
            "  br i1 %rm, label %L, label %D\n"
            "D:\n  %jn = add nuw nsw i64 %j, 1\n  %more = icmp slt i64 %jn, %m\n"
            "  br i1 %more, label %J, label %x\n"
            "x:\n  ret void\n}\n\n")


def _emit_heap_tables(i: int, tree: Tree, forest: Forest, depth: int, sym: str,
                      out: list[str]) -> tuple[int, int, int]:
    """Append tree `i` as constant tables for a heap kernel; returns the kernel's (D, W, MODE).

    Exactly c.py's layout (c.heap_tables pads the tree to a complete one; pass-through slots
    have threshold +inf and repeat their leaf in both subtrees, so their direction never
    matters and the NaN mode is chosen from the tree's real splits alone).
    """
    from .c import heap_tables

    thr = comparison_thresholds(tree, forest)
    feat, t, nan_right, leaf_src = heap_tables(tree, thr, depth)
    mode = _nan_mode(tree)
    nodes = np.zeros(len(feat), _node_dtype(forest, table=False))
    nodes["fn"] = feat.astype(np.uint32) | (nan_right.astype(np.uint32) << np.uint32(31))
    nodes["t"] = t
    out.append(_blob(f"{sym}.T{i}", nodes))
    out.append(_leaf_blob(f"{sym}.L{i}", tree.value[leaf_src].ravel(), forest))
    return depth, tree.width, mode


def _right_ir(s: str, v: str, t: str, fn: str, mode: int, x_t: str, strict: bool) -> str:
    """IR computing ``%rt{s}`` (i1): value `v` goes right at a table node with threshold `t`
    and word `fn` (bit 31: NaN goes right); NaN per MODE as c.py's TC_RIGHT0/1/2."""
    gt, ugt = ("oge", "uge") if strict else ("ogt", "ugt")
    if mode == 0:   # no node sends NaN right: an ordered compare is false for NaN
        return f"  %rt{s} = fcmp {gt} {x_t} {v}, {t}\n"
    if mode == 1:   # every node does: unordered-or compare
        return f"  %rt{s} = fcmp {ugt} {x_t} {v}, {t}\n"
    return (f"  %gt{s} = fcmp {gt} {x_t} {v}, {t}\n"
            f"  %un{s} = fcmp uno {x_t} {v}, 0.0\n"
            f"  %nb{s} = lshr i32 {fn}, 31\n"
            f"  %nr{s} = trunc i32 %nb{s} to i1\n"
            f"  %na{s} = and i1 %un{s}, %nr{s}\n"
            f"  %rt{s} = or i1 %gt{s}, %na{s}\n")


def _emit_table_tree(i: int, tree: Tree, forest: Forest, sym: str, out: list[str]) -> tuple[int, int]:
    """Append tree `i` as a node table for a walk kernel (big trees); returns (W, MODE).

    c.py's tc_cnode layout: {fn = feature | nan_right << 31, t, l, r}; a leaf has l = -1 and
    its leaf index in r. Built vectorised, no recursion.
    """
    thr = comparison_thresholds(tree, forest)
    leaf = tree.left < 0
    nodes = np.zeros(tree.n_nodes, _node_dtype(forest, table=True))
    nodes["fn"] = (np.where(leaf, 0, tree.feature).astype(np.uint32)
                   | ((~tree.default_left & ~leaf).astype(np.uint32) << np.uint32(31)))
    nodes["t"] = np.where(leaf, 0, thr)
    nodes["l"] = tree.left
    nodes["r"] = np.where(leaf, np.cumsum(leaf) - 1, tree.right)
    out.append(_blob(f"{sym}.T{i}", nodes))
    out.append(_leaf_blob(f"{sym}.L{i}", tree.value[leaf].ravel(), forest))
    return tree.width, _nan_mode(tree)


def _nan_mode(tree: Tree) -> int:
    dr = ~tree.default_left[tree.left >= 0]
    return 0 if not dr.any() else (1 if dr.all() else 2)


def _emit_walk_kernel(forest: Forest, sym: str, w: int, mode: int, out: list[str]) -> None:
    """Append ``@{sym}.w{W}_{MODE}(T, L, X, n, acc)``: c.py's TC_WALK_KERNEL in IR (a loop per
    row from node 0 until a leaf, child picked with a select)."""
    x_t, acc_t = _types(forest)
    node_t = f"{{ i32, {x_t}, i32, i32 }}"
    body = [f"define internal void @{sym}.w{w}_{mode}(ptr noalias nocapture readonly %T, "
            "ptr noalias nocapture readonly %L, ptr noalias nocapture readonly %X, i64 %n, "
            "ptr noalias nocapture %A) #0 {\n"
            "e:\n  %ne = icmp sgt i64 %n, 0\n  br i1 %ne, label %R, label %x\n"
            "R:\n  %r = phi i64 [0, %e], [%rn, %D]\n"
            f"  %ro = mul nsw i64 %r, {forest.n_features}\n"
            f"  %xr = getelementptr inbounds {x_t}, ptr %X, i64 %ro\n"
            "  br label %W\n"
            "W:\n  %i = phi i32 [0, %R], [%nx, %S]\n"
            "  %ix = zext i32 %i to i64\n"
            f"  %lp = getelementptr inbounds {node_t}, ptr %T, i64 %ix, i32 2\n"
            "  %l = load i32, ptr %lp\n"
            "  %leaf = icmp slt i32 %l, 0\n  br i1 %leaf, label %D, label %S\n"
            f"S:\n  %fp = getelementptr inbounds {node_t}, ptr %T, i64 %ix, i32 0\n"
            "  %fn = load i32, ptr %fp\n"
            f"  %tp = getelementptr inbounds {node_t}, ptr %T, i64 %ix, i32 1\n"
            f"  %t = load {x_t}, ptr %tp\n"
            "  %fm = and i32 %fn, 2147483647\n  %fx = zext i32 %fm to i64\n"
            f"  %vp = getelementptr inbounds {x_t}, ptr %xr, i64 %fx\n"
            f"  %v = load {x_t}, ptr %vp\n",
            _right_ir("", "%v", "%t", "%fn", mode, x_t, forest.comparison == "<"),
            f"  %rp = getelementptr inbounds {node_t}, ptr %T, i64 %ix, i32 3\n"
            "  %rc = load i32, ptr %rp\n"
            "  %nx = select i1 %rt, i32 %rc, i32 %l\n  br label %W\n"
            f"D:\n  %dp = getelementptr inbounds {node_t}, ptr %T, i64 %ix, i32 3\n"
            "  %li = load i32, ptr %dp\n  %lx = zext i32 %li to i64\n"
            f"  %lb = mul nuw nsw i64 %lx, {w}\n"
            f"  %ab = mul nsw i64 %r, {forest.n_outputs}\n"]
    if w > UNROLL_MAX_WIDTH:  # a loop over the leaf's values; the row loop's latch after it
        body[0] = body[0].replace("[%rn, %D]", "[%rn, %Le]")
        body.append("  br label %Lp\nLp:\n" + _add_leaf_loop("", w, acc_t, "%lb", "%ab", "Lp"))
        w = 0
    for j in range(w):
        body.append(f"  %lj{j} = add nuw nsw i64 %lb, {j}\n"
                    f"  %lq{j} = getelementptr inbounds {acc_t}, ptr %L, i64 %lj{j}\n"
                    f"  %lv{j} = load {acc_t}, ptr %lq{j}\n"
                    f"  %aj{j} = add nsw i64 %ab, {j}\n"
                    f"  %aq{j} = getelementptr inbounds {acc_t}, ptr %A, i64 %aj{j}\n"
                    f"  %ao{j} = load {acc_t}, ptr %aq{j}\n"
                    f"  %an{j} = fadd {acc_t} %ao{j}, %lv{j}\n"
                    f"  store {acc_t} %an{j}, ptr %aq{j}\n")
    body.append("  %rn = add nuw nsw i64 %r, 1\n  %more = icmp slt i64 %rn, %n\n"
                "  br i1 %more, label %R, label %x\nx:\n  ret void\n}\n\n")
    out.append("".join(body))


def _emit_heap_kernel(forest: Forest, sym: str, depth: int, w: int, mode: int, il: int,
                      out: list[str]) -> None:
    """Append ``@{sym}.h{D}_{W}_{MODE}(T, L, X, n, acc)``: c.py's TC_HEAP_KERNEL in IR.

    `il` rows walk the tree together (their independent loads overlap); each level is one
    branch-free step i = 2i + 1 + right(v, node). The walk is fully unrolled here (D x IL
    steps), so no loop pass is needed to get the registers-only code C gets from -O3.
    """
    x_t, acc_t = _types(forest)
    nf, no = forest.n_features, forest.n_outputs
    strict = forest.comparison == "<"
    node_t = f"{{ i32, {x_t} }}"
    first_leaf = (1 << depth) - 1
    app = out.append
    wide = w > UNROLL_MAX_WIDTH
    # the blocks the row loops come back from (wide leaves end each row in a loop of their own)
    b_latch, r_latch = ("Bl", "Rl") if wide else ("Bb", "Rb")

    def right(s: str, v: str, t: str, fn: str) -> None:
        app(_right_ir(s, v, t, fn, mode, x_t, strict))

    def rows(tag: str, ks: list[int], r: str) -> None:
        """Walk rows r + k (k in ks) through the tree and add their leaves."""
        for k in ks:
            app(f"  %rk{tag}{k} = add nuw nsw i64 {r}, {k}\n"
                f"  %ro{tag}{k} = mul nsw i64 %rk{tag}{k}, {nf}\n"
                f"  %xr{tag}{k} = getelementptr inbounds {x_t}, ptr %X, i64 %ro{tag}{k}\n")
        for d in range(depth):
            for k in ks:
                s = f"{tag}{d}_{k}"
                if d == 0:  # the root: node 0 was loaded once in the entry block
                    fn, t, fx = "%fn0", "%tt0", "%fx0"
                else:
                    prev = f"%i{tag}{d - 1}_{k}"
                    app(f"  %ix{s} = zext i32 {prev} to i64\n"
                        f"  %np{s} = getelementptr inbounds {node_t}, ptr %T, i64 %ix{s}\n"
                        f"  %fn{s} = load i32, ptr %np{s}\n"
                        f"  %tp{s} = getelementptr inbounds {node_t}, ptr %T, i64 %ix{s}, i32 1\n"
                        f"  %tt{s} = load {x_t}, ptr %tp{s}\n"
                        f"  %fm{s} = and i32 %fn{s}, 2147483647\n"
                        f"  %fx{s} = zext i32 %fm{s} to i64\n")
                    fn, t, fx = f"%fn{s}", f"%tt{s}", f"%fx{s}"
                app(f"  %vp{s} = getelementptr inbounds {x_t}, ptr %xr{tag}{k}, i64 {fx}\n"
                    f"  %v{s} = load {x_t}, ptr %vp{s}\n")
                right(s, f"%v{s}", t, fn)
                app(f"  %rz{s} = zext i1 %rt{s} to i32\n")
                if d == 0:
                    app(f"  %i{s} = add nuw i32 %rz{s}, 1\n")
                else:
                    app(f"  %sh{s} = shl nuw i32 {prev}, 1\n"
                        f"  %s1{s} = or i32 %sh{s}, 1\n"
                        f"  %i{s} = add nuw i32 %s1{s}, %rz{s}\n")
        for k in ks:
            s = f"{tag}l{k}"
            app(f"  %li{s} = sub nuw i32 %i{tag}{depth - 1}_{k}, {first_leaf}\n"
                f"  %lx{s} = zext i32 %li{s} to i64\n"
                f"  %lb{s} = mul nuw nsw i64 %lx{s}, {w}\n"
                f"  %ab{s} = mul nsw i64 %rk{tag}{k}, {no}\n")
            if wide:  # a loop over the leaf's values (UNROLL_MAX_WIDTH)
                app(f"  br label %Lp{s}\nLp{s}:\n"
                    + _add_leaf_loop(s, w, acc_t, f"%lb{s}", f"%ab{s}", f"Lp{s}"))
                continue
            for j in range(w):
                app(f"  %lj{s}_{j} = add nuw nsw i64 %lb{s}, {j}\n"
                    f"  %lp{s}_{j} = getelementptr inbounds {acc_t}, ptr %L, i64 %lj{s}_{j}\n"
                    f"  %lv{s}_{j} = load {acc_t}, ptr %lp{s}_{j}\n"
                    f"  %aj{s}_{j} = add nsw i64 %ab{s}, {j}\n"
                    f"  %ap{s}_{j} = getelementptr inbounds {acc_t}, ptr %A, i64 %aj{s}_{j}\n"
                    f"  %ao{s}_{j} = load {acc_t}, ptr %ap{s}_{j}\n"
                    f"  %an{s}_{j} = fadd {acc_t} %ao{s}_{j}, %lv{s}_{j}\n"
                    f"  store {acc_t} %an{s}_{j}, ptr %ap{s}_{j}\n")

    app(f"define internal void @{sym}.h{depth}_{w}_{mode}(ptr noalias nocapture readonly %T, "
        "ptr noalias nocapture readonly %L, ptr noalias nocapture readonly %X, i64 %n, "
        "ptr noalias nocapture %A) #0 {\n"
        "e:\n  %fn0 = load i32, ptr %T\n"
        f"  %tp0 = getelementptr inbounds {node_t}, ptr %T, i64 0, i32 1\n"
        f"  %tt0 = load {x_t}, ptr %tp0\n"
        "  %fm0 = and i32 %fn0, 2147483647\n  %fx0 = zext i32 %fm0 to i64\n"
        "  br label %B\n"
        f"B:\n  %r = phi i64 [0, %e], [%rn, %{b_latch}]\n"
        f"  %rn = add nuw nsw i64 %r, {il}\n"
        "  %full = icmp sle i64 %rn, %n\n  br i1 %full, label %Bb, label %R\n"
        "Bb:\n")
    rows("b", list(range(il)), "%r")
    app(("  br label %Bl\nBl:\n" if wide else "") + "  br label %B\n"
        f"R:\n  %q = phi i64 [%r, %B], [%qn, %{r_latch}]\n"
        "  %more = icmp slt i64 %q, %n\n  br i1 %more, label %Rb, label %x\n"
        "Rb:\n")
    rows("r", [0], "%q")
    app(("  br label %Rl\nRl:\n" if wide else "")
        + "  %qn = add nuw nsw i64 %q, 1\n  br label %R\nx:\n  ret void\n}\n\n")


#: at most this many steps (tree calls, row loops) per generated function: LLVM's analyses
#: recurse along long chains of loops (ScalarEvolution overflowed the stack on 3,000 row loops
#: in one function), so bigger units become a tree of small noinline functions
_FANOUT = 32


def _chunk_text(forest: Forest, trees: list[int], sym: str, u: int, opts: dict[str, Any]) -> str:
    """IR text of a module defining ``@{sym}.u{u}(X, n, acc)``, which runs trees `trees`."""
    x_t, acc_t = _types(forest)
    out: list[str] = []
    calls: list[str] = []   # one self-contained snippet per step, in model order
    kernels: set[tuple[int, int, int]] = set()
    walkers: set[tuple[int, int]] = set()
    need_const = need_sparse = False
    for kind, what in steps(forest, trees):
        if kind == "const":
            idx, vals = const_run(forest, what)
            s = what[0]
            out.append(_blob(f"{sym}.K{s}", idx))
            out.append(_blob(f"{sym}.V{s}", vals))
            calls.append(f"  call void @{sym}.k(ptr @{sym}.K{s}, ptr @{sym}.V{s}, i64 {len(idx)}, "
                         "i64 %n, ptr %A)\n")
            need_const = True
            continue
        i, tree = what, forest.trees[what]
        o = int(forest.tree_output[i])
        depth = _heap_depth(tree, opts)
        if not depth and _is_table(tree, opts):
            w, m = _emit_table_tree(i, tree, forest, sym, out)
            walkers.add((w, m))
            calls.append(f"  %A{i} = getelementptr inbounds {acc_t}, ptr %A, i64 {o}\n"
                         f"  call void @{sym}.w{w}_{m}(ptr @{sym}.T{i}, ptr @{sym}.L{i}, "
                         f"ptr %X, i64 %n, ptr %A{i})\n")
        elif depth:
            d, w, m = _emit_heap_tables(i, tree, forest, depth, sym, out)
            kernels.add((d, w, m))
            calls.append(f"  %A{i} = getelementptr inbounds {acc_t}, ptr %A, i64 {o}\n"
                         f"  call void @{sym}.h{d}_{w}_{m}(ptr @{sym}.T{i}, ptr @{sym}.L{i}, "
                         f"ptr %X, i64 %n, ptr %A{i})\n")
        else:
            _emit_tree(i, tree, forest, sym, out)
            need_sparse |= tree.has_categorical
            calls.append(f"  br label %s{i}\ns{i}:\n  br label %h{i}\n"
                         f"h{i}:\n  %r{i} = phi i64 [0, %s{i}], [%rn{i}, %b{i}]\n"
                         f"  %c{i} = icmp slt i64 %r{i}, %n\n"
                         f"  br i1 %c{i}, label %b{i}, label %d{i}\n"
                         f"b{i}:\n  %xo{i} = mul nsw i64 %r{i}, {forest.n_features}\n"
                         f"  %xp{i} = getelementptr inbounds {x_t}, ptr %X, i64 %xo{i}\n"
                         f"  %ao{i} = mul nsw i64 %r{i}, {forest.n_outputs}\n"
                         f"  %ap{i} = getelementptr inbounds {acc_t}, ptr %A, i64 %ao{i}\n"
                         f"  call void @{sym}.t{i}(ptr %xp{i}, ptr %ap{i})\n"
                         f"  %rn{i} = add nuw nsw i64 %r{i}, 1\n"
                         f"  br label %h{i}\nd{i}:\n")
    for d, w, m in sorted(kernels):
        _emit_heap_kernel(forest, sym, d, w, m, int(opts["interleave"]), out)
    for w, m in sorted(walkers):
        _emit_walk_kernel(forest, sym, w, m, out)
    if need_const:
        out.append(_const_fn(forest, sym))
    if need_sparse:
        out.append(_sparse_bit_fn(sym))
    sig = "(ptr noalias %X, i64 %n, ptr noalias %A)"
    level = 0
    while len(calls) > _FANOUT:  # group the steps into noinline functions, level by level
        grouped = []
        for g in range(0, len(calls), _FANOUT):
            name = f"@{sym}.u{u}.g{level}_{g // _FANOUT}"
            out.append(f"define internal void {name}{sig} #0 {{\ne:\n")
            out.extend(calls[g:g + _FANOUT])
            out.append("  ret void\n}\n\n")
            grouped.append(f"  call void {name}(ptr %X, i64 %n, ptr %A)\n")
        calls, level = grouped, level + 1
    out.append(f"define hidden void @{sym}.u{u}{sig} #1 {{\ne:\n")
    out.extend(calls)
    out.append("  ret void\n}\n\n"
               # noinline keeps functions at one tree: the optimiser's cost grows faster than
               # linearly with function size, and a call per tree per block costs nothing.
               'attributes #0 = { noinline nounwind "frame-pointer"="none" }\n'
               'attributes #1 = { nounwind }\n')
    return "".join(out)


def _is_table(tree: Tree, opts: dict[str, Any]) -> bool:
    """A big tree that is walked from a node table instead of compiled to basic blocks."""
    return tree.n_nodes > int(opts["goto_max_nodes"]) and not tree.has_categorical


def _cost(tree: Tree, opts: dict[str, Any]) -> int:
    """Compile cost of a tree in node-equivalents: tables are ~free, basic blocks are not."""
    if tree.n_nodes == 1 or _heap_depth(tree, opts) or _is_table(tree, opts):
        return tree.n_nodes // 16 + 1
    return tree.n_nodes


def _parts(forest: Forest, opts: dict[str, Any]) -> list[list[int]]:
    limit = int(opts["nodes_per_module"])
    parts, cur, size = [], [], 0
    for i, t in enumerate(forest.trees):
        c = _cost(t, opts)
        if cur and size + c > limit:
            parts.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += c
    parts.append(cur)
    return parts


# -- code generation: the entry point and metadata (llvmlite.ir) -------------------------------
def _main_text(forest: Forest, sym: str, n_parts: int, block: int, triple: str,
               entry_prefix: str = "") -> str:
    """IR text of the module with the treecomp.h entry points (built with llvmlite.ir), named
    entry_prefix + treecomp_* (a prefix: linked into a linear-leaf .so, backends/linear_so.py)."""
    import llvmlite.ir as ir

    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    f32, f64, ptr = ir.FloatType(), ir.DoubleType(), ir.PointerType()
    x_ty = f32 if forest.input_dtype == "float32" else f64
    acc_ty = f32 if forest.accumulate_dtype == "float32" else f64
    xbits = 32 if x_ty is f32 else 64
    accbits = 32 if acc_ty is f32 else 64
    nf, no = forest.n_features, forest.n_outputs

    mod = ir.Module(name=f"treecomp.{sym}")
    mod.triple = triple

    def export(fn):
        fn.attributes.add("nounwind")
        return fn

    def const_fn(name: str, ret: ir.Type, value: ir.Value) -> None:
        fn = export(ir.Function(mod, ir.FunctionType(ret, []), name=entry_prefix + name))
        ir.IRBuilder(fn.append_basic_block("e")).ret(value)

    def cstring(name: str, text: str) -> None:
        data = bytearray(text.encode()) + b"\0"
        g = ir.GlobalVariable(mod, ir.ArrayType(i8, len(data)), name=f"{sym}.s.{name}")
        g.initializer = ir.Constant(ir.ArrayType(i8, len(data)), data)
        g.global_constant = True
        g.linkage = "private"
        const_fn(name, ptr, g)

    head = head_of(forest)
    const_fn("treecomp_abi_version", i32, i32(1))
    cstring("treecomp_version", __version__)
    cstring("treecomp_digest", forest.digest())
    cstring("treecomp_backend", NAME)
    const_fn("treecomp_n_features", i32, i32(nf))
    const_fn("treecomp_n_outputs", i32, i32(no))
    const_fn("treecomp_out_dtype", i32, i32(accbits))
    const_fn("treecomp_n_classes", i32, i32(sum(head.n_classes)))
    cstring("treecomp_meta_json", head.to_json(backend=NAME, treecomp_version=__version__))

    base_vals = folded_base(forest).tolist()  # leading constant trees included (c.folded_base)
    # with a base_link, the exported writable treecomp_base the loader sets (c._base_decl)
    settable = forest.base_link != "identity"
    base = ir.GlobalVariable(mod, ir.ArrayType(acc_ty, no),
                             name=BASE_SYMBOL if settable else f"{sym}.base")
    base.initializer = ir.Constant(ir.ArrayType(acc_ty, no), [acc_ty(v) for v in base_vals])
    base.global_constant = not settable
    if not settable:
        base.linkage = "private"

    unit_ty = ir.FunctionType(ir.VoidType(), [ptr, i64, ptr])
    units = []
    for u in range(n_parts):
        fn = ir.Function(mod, unit_ty, name=f"{sym}.u{u}")
        fn.visibility = "hidden"
        units.append(fn)
    malloc = ir.Function(mod, ir.FunctionType(ptr, [i64]), name="malloc")
    free = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr]), name="free")
    exp = ir.Function(mod, ir.FunctionType(f64, [f64]), name="exp")
    expf = ir.Function(mod, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), name="expf")

    fn = export(ir.Function(mod, ir.FunctionType(i32, [ptr, i32, i64, ptr, i32]),
                            name=entry_prefix + "treecomp_predict"))
    X, x_dtype, n_rows, out, flags = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def loop(n: ir.Value, body: Callable[[ir.Value], None], start: ir.Value | None = None,
             step: int = 1) -> None:
        """for (i = start; i < n; i += step) body(i)  (i64)."""
        pre = b.block
        head_b = fn.append_basic_block("loop")
        body_b = fn.append_basic_block("body")
        end_b = fn.append_basic_block("end")
        b.branch(head_b)
        b.position_at_end(head_b)
        i = b.phi(i64)
        i.add_incoming(start if start is not None else i64(0), pre)
        b.cbranch(b.icmp_signed("<", i, n), body_b, end_b)
        b.position_at_end(body_b)
        body(i)
        nxt = b.add(i, i64(step))
        i.add_incoming(nxt, b.block)
        b.branch(head_b)
        b.position_at_end(end_b)

    # argument checks, exactly those of the C backend
    bad_dtype = b.and_(b.icmp_signed("!=", x_dtype, i32(32)), b.icmp_signed("!=", x_dtype, i32(64)))
    null = ir.Constant(ptr, None)
    some = b.icmp_signed(">", n_rows, i64(0))
    nullp = b.or_(b.icmp_unsigned("==", X, null), b.icmp_unsigned("==", out, null))
    # ONNX Runtime's transforms are not emitted here: TREECOMP_TRANSFORM is then refused (EINVAL);
    # the Predictor applies them in numpy (treecomp.outputs), the c backend in C
    known = 0 if forest.transform.endswith("_ort") else outputs.accepted_flags(forest)
    bad = b.or_(b.or_(bad_dtype, b.icmp_signed("<", n_rows, i64(0))),
                b.or_(b.and_(some, nullp), b.icmp_unsigned("!=", b.and_(flags, i32(~known & 0xFFFFFFFF)), i32(0))))
    with b.if_then(bad, likely=False):
        b.ret(i32(-1))
    convert = b.icmp_signed("!=", x_dtype, i32(xbits))
    buf_size = block * nf * (4 if x_ty is f32 else 8)
    # malloc only when converting (a plain branch keeps the common path call-free)
    buf_slot = b.alloca(ptr)
    b.store(null, buf_slot)
    with b.if_then(convert):
        m = b.call(malloc, [i64(buf_size)])
        with b.if_then(b.icmp_unsigned("==", m, null), likely=False):
            b.ret(i32(-1))
        b.store(m, buf_slot)

    def block_body(r0: ir.Value) -> None:
        left = b.sub(n_rows, r0)
        nb = b.select(b.icmp_signed("<", left, i64(block)), left, i64(block))
        bufp = b.load(buf_slot, typ=ptr)
        direct = b.gep(X, [b.mul(r0, i64(nf))], source_etype=x_ty, inbounds=True)
        pre = b.block
        conv_b = fn.append_basic_block("convert")
        join_b = fn.append_basic_block("converted")
        b.cbranch(convert, conv_b, join_b)
        b.position_at_end(conv_b)
        count = b.mul(nb, i64(nf))
        src_ty = f64 if x_ty is f32 else f32  # the caller's dtype when it differs from ours
        src = b.gep(X, [b.mul(r0, i64(nf))], source_etype=src_ty, inbounds=True)

        def cast_one(k: ir.Value) -> None:
            v = b.load(b.gep(src, [k], source_etype=src_ty, inbounds=True), typ=src_ty)
            # round to nearest (fptrunc), like numpy's astype; fpext is exact
            c = b.fptrunc(v, x_ty) if x_ty is f32 else b.fpext(v, x_ty)
            b.store(c, b.gep(bufp, [k], source_etype=x_ty, inbounds=True))

        loop(count, cast_one)
        conv_end = b.block
        b.branch(join_b)
        b.position_at_end(join_b)
        xb = b.phi(ptr)
        xb.add_incoming(direct, pre)
        xb.add_incoming(bufp, conv_end)
        ab = b.gep(out, [b.mul(r0, i64(no))], source_etype=acc_ty, inbounds=True)

        def init_row(r: ir.Value) -> None:
            row = b.gep(ab, [b.mul(r, i64(no))], source_etype=acc_ty, inbounds=True)

            def init_one(k: ir.Value) -> None:
                v = b.load(b.gep(base, [i64(0), k], source_etype=base.value_type, inbounds=True), typ=acc_ty)
                b.store(v, b.gep(row, [k], source_etype=acc_ty, inbounds=True))
            loop(i64(no), init_one)

        loop(nb, init_row)
        for unit in units:
            b.call(unit, [xb, nb, ab])
        if forest.average:
            def avg_one(k: ir.Value) -> None:
                p = b.gep(ab, [k], source_etype=acc_ty, inbounds=True)
                b.store(b.fdiv(b.load(p, typ=acc_ty), acc_ty(forest.n_trees)), p)
            loop(b.mul(nb, i64(no)), avg_one)
        if known and (forest.transform != "identity" or forest.output_divisor != 1):
            with b.if_then(b.icmp_unsigned("!=", b.and_(flags, i32(1)), i32(0))):
                loop(nb, lambda r: _transform_row(b, forest, acc_ty, (exp, expf), loop,
                                                  b.gep(ab, [b.mul(r, i64(no))], source_etype=acc_ty,
                                                        inbounds=True)))

    loop(n_rows, block_body, step=block)
    b.call(free, [b.load(buf_slot, typ=ptr)])
    b.ret(i32(0))
    return str(mod)


def _transform_row(b, forest: Forest, acc_ty, exps, loop, a) -> None:
    """The inverse link on one row `a` of margins, in the same arithmetic as c.py.

    float32 margins (XGBoost) follow XGBoost 3.2's src/common/math.h with libm's expf:
    sigmoid = 1 / ((expf(min(-x, 88.7f)) + 1) + 1e-16f); softmax sums expf in double."""
    import llvmlite.ir as ir
    exp, expf = exps
    i64 = ir.IntType(64)
    f64 = ir.DoubleType()
    no = forest.n_outputs
    is32 = isinstance(acc_ty, ir.FloatType)
    xgb32 = is32 and forest.transform in ("sigmoid", "exp", "softmax")

    def ex(v):
        if xgb32:
            return b.call(expf, [v])
        if is32:  # exp in double, rounded once
            return b.fptrunc(b.call(exp, [b.fpext(v, f64)]), acc_ty)
        return b.call(exp, [v])

    def at(k):
        return b.gep(a, [k], source_etype=acc_ty, inbounds=True)

    one = acc_ty(1.0)
    t = forest.transform
    if forest.output_divisor != 1:  # LightGBM's GBDT::Predict: output[k] /= num_iteration
        def div_first(k):
            p = at(k)
            b.store(b.fdiv(b.load(p, typ=acc_ty), acc_ty(forest.output_divisor)), p)
        loop(i64(no), div_first)
    if t == "identity":
        return
    if t in ("sigmoid", "sigmoid2", "exp", "exp64"):
        def one_k(k):
            p = at(k)
            v = b.load(p, typ=acc_ty)
            if t in ("exp", "exp64"):  # exp64 (survival:aft): exp in double, rounded once
                r = ex(v)
            elif xgb32 and t == "sigmoid":
                nv = b.fneg(v)
                cap = acc_ty(88.7)
                nv = b.select(b.fcmp_ordered("<", cap, nv), cap, nv)
                r = b.fdiv(one, b.fadd(b.fadd(ex(nv), one), acc_ty(1e-16)))
            else:
                arg = b.fneg(v) if t == "sigmoid" else b.fneg(b.fmul(v, acc_ty(2.0)))
                r = b.fdiv(one, b.fadd(one, ex(arg)))
            b.store(r, p)
        loop(i64(no), one_k)
        return
    if t not in ("softmax", "softmax_seq"):
        raise CompileError(f"transform {t!r} is not supported by the llvm backend")
    # softmax / softmax_seq: max-subtract, exp, sequential sum, divide (c.py's order; numpy's
    # pairwise sum for >= 8 classes may differ in the last bits, the Predictor uses numpy's)
    first = b.load(at(i64(0)), typ=acc_ty)
    pre = b.block
    fn = pre.function
    # running max and sum live in phis of explicit loops
    hb, bb, eb = (fn.append_basic_block(s) for s in ("mx", "mxb", "mxe"))
    b.branch(hb)
    b.position_at_end(hb)
    k = b.phi(i64)
    m = b.phi(acc_ty)
    k.add_incoming(i64(1), pre)
    m.add_incoming(first, pre)
    b.cbranch(b.icmp_signed("<", k, i64(no)), bb, eb)
    b.position_at_end(bb)
    v = b.load(at(k), typ=acc_ty)
    m2 = b.select(b.fcmp_ordered(">", v, m), v, m)
    k.add_incoming(b.add(k, i64(1)), bb)
    m.add_incoming(m2, bb)
    b.branch(hb)
    b.position_at_end(eb)
    pre = b.block
    hb, bb, eb = (fn.append_basic_block(s) for s in ("sm", "smb", "sme"))
    b.branch(hb)
    b.position_at_end(hb)
    k = b.phi(i64)
    sum_ty = f64 if xgb32 else acc_ty  # XGBoost sums float32 exps in double
    s = b.phi(sum_ty)
    k.add_incoming(i64(0), pre)
    s.add_incoming(sum_ty(0.0), pre)
    b.cbranch(b.icmp_signed("<", k, i64(no)), bb, eb)
    b.position_at_end(bb)
    p = at(k)
    e = ex(b.fsub(b.load(p, typ=acc_ty), m))
    b.store(e, p)
    k.add_incoming(b.add(k, i64(1)), bb)
    s.add_incoming(b.fadd(s, b.fpext(e, f64) if xgb32 else e), bb)
    b.branch(hb)
    b.position_at_end(eb)
    total = b.fptrunc(s, acc_ty) if xgb32 else s

    def div_k(k):
        p = at(k)
        b.store(b.fdiv(b.load(p, typ=acc_ty), total), p)
    loop(i64(no), div_k)


# -- compilation ----------------------------------------------------------------------------------
def _optimise(mod, tm, level: int) -> None:
    """The IR passes of `opt` level `level` (new pass manager; see the module docstring)."""
    llvm = _llvm()
    if level <= 1:
        return
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pb = llvm.create_pass_builder(tm, pto)
    if level >= 3:
        pm = pb.getModulePassManager()
    else:
        pm = llvm.create_new_module_pass_manager()
        if not hasattr(pm, "add_sroa_pass"):
            # llvmlite 0.44 (LLVM 15, what lleaves needs) binds no SROA in its new pass
            # manager; its legacy pass manager runs the same three passes.
            legacy = llvm.create_module_pass_manager()
            legacy.add_sroa_pass()
            legacy.add_cfg_simplification_pass()
            legacy.add_instruction_combining_pass()
            legacy.run(mod)
            return
        pm.add_sroa_pass()
        pm.add_simplify_cfg_pass()
        pm.add_instruction_combine_pass()
    pm.run(mod, pb)


def _compile_text(texts: list[str], opts: dict[str, Any]) -> bytes:
    """IR texts -> one object (own LLVM context, so several compile in parallel threads)."""
    llvm = _llvm()
    tm = _target_machine(opts)
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(texts[0], context=ctx)
        for t in texts[1:]:
            mod.link_in(llvm.parse_assembly(t, context=ctx))
    except RuntimeError as exc:  # a bug in this module, never the user's model
        raise CompileError(f"LLVM rejected the generated IR: {exc}") from None
    mod.triple = llvm.get_process_triple()
    mod.data_layout = str(tm.target_data)
    try:
        mod.verify()
    except RuntimeError as exc:
        raise CompileError(f"LLVM rejected the generated IR: {exc}") from None
    _optimise(mod, tm, int(opts["opt"]))
    obj = tm.emit_object(mod)
    mod.close()
    return obj


def _symbol_prefix(forest: Forest) -> str:
    # Unique per model: objects of different models never clash in one process.
    return f"tc{forest.digest()[:16]}"


def _cache_key(forest: Forest, opts: dict[str, Any]) -> str:
    cpu = _cpu(opts) if opts["native"] else None
    keyed = {k: v for k, v in opts.items() if k not in ("jobs", "ir")}  # nor the bytes
    return toolchain.cache_key(NAME, forest.digest(), sorted(keyed.items()), _llvmlite_version(),
                               _llvm().get_process_triple(), cpu)


def compile_objects(forest: Forest, progress: Callable[[str], None] | None = None,
                    entry_prefix: str = "", **overrides: Any) -> list[bytes]:
    """The object files of `forest` (from the cache, or compiled and cached); entry_prefix:
    see _main_text."""
    opts = options(**overrides)
    key = _cache_key(forest, opts) + (f"-{entry_prefix}" if entry_prefix else "")
    sym = _symbol_prefix(forest)
    parts = _parts(forest, opts)
    n = len(parts)

    def texts(u: int) -> list[str]:
        t = [_chunk_text(forest, parts[u], sym, u, opts)]
        if u == 0:  # the entry points travel with the first part: a small model is one object
            t.append(_main_text(forest, sym, n, int(opts["block_rows"]), _llvm().get_process_triple(),
                                entry_prefix))
        return t

    def one(u: int) -> Path:
        def write(path: Path) -> None:
            path.write_bytes(_compile_text(texts(u), opts))
            if progress:
                progress(f"compiled module {u + 1}/{n}")
        return toolchain.cached(f"{key}-{u}of{n}", ".o", write)

    jobs = max(1, min(int(opts["jobs"] or os.cpu_count() or 1), n))
    if jobs == 1:
        paths = [one(u) for u in range(n)]
    else:
        with ThreadPoolExecutor(jobs) as pool:
            paths = list(pool.map(one, range(n)))
    return [p.read_bytes() for p in paths]


# -- the kernel -----------------------------------------------------------------------------------
_JIT = None
_JIT_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """Locks another parent thread held at a fork would never be released in the child."""
    global _INIT_LOCK, _JIT_LOCK
    _INIT_LOCK, _JIT_LOCK = threading.Lock(), threading.Lock()
    LLVMKernel._count_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _jit():
    """The process-wide ORC JIT (JITLink). Kernels hold resource trackers into it; it is never
    closed, so a tracker can never outlive the session that disposes it."""
    global _JIT
    platform.check_platform("JIT-compiling with llvmlite")
    llvm = _llvm()
    with _JIT_LOCK:
        if _JIT is None:
            _JIT = llvm.create_lljit_compiler(use_jit_link=True)
            _JIT._owned = True  # never disposed, not even by a stray close() (trackers need it)
        return _JIT


_PREDICT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                            ctypes.c_void_p, ctypes.c_uint32)
_CSTR = ctypes.CFUNCTYPE(ctypes.c_char_p)


class LLVMKernel:
    """Object code linked in-process by LLVM's ORC JIT (LLJIT with JITLink), kept alive with
    the kernel.

    Why LLJIT rather than MCJIT: the object code is position independent with the small code
    model (it must be, to be linked into a .so), i.e. 32-bit PC-relative references between
    sections. JITLink lays out each object in one contiguous allocation and builds its own GOT
    and stubs, so those always reach. MCJIT's default memory manager allocates sections
    separately (and does not range-check PC32 relocations in release builds), and llvmlite's
    contiguous memory manager aborts on the GOT that calls to malloc/exp need.
    """

    kind = KIND
    backend = NAME
    _count = 0
    _count_lock = threading.Lock()

    def __init__(self, objects: list[bytes], native_cpu: str | None = None,
                 settable_base: bool = False, ir: Any = None):
        llvm = _llvm()
        #: the model's IR: a Forest (built from one) or its IR file's bytes (loaded), or None
        self._ir = ir
        self._objects = list(objects)
        self._native_cpu = native_cpu  # set when the code uses this CPU's features
        with LLVMKernel._count_lock:
            LLVMKernel._count += 1
            name = f"treecomp-{os.getpid()}-{LLVMKernel._count}"
        builder = llvm.JITLibraryBuilder()
        for data in self._objects:
            builder.add_object_img(data)
        builder.add_current_process()
        for sym in ("exp", "expf"):
            addr = _libm_address(sym)
            if addr:
                builder.import_symbol(sym, addr)
        builder.export_symbol("treecomp_predict").export_symbol("treecomp_meta_json")
        if settable_base:  # the head's base_link: its margins are written below
            builder.export_symbol(BASE_SYMBOL)
        try:
            # the tracker owns this kernel's code; the JIT itself lives as long as the process
            jit = _jit()
            with _JIT_LOCK:
                self._tracker = builder.link(jit, name)
        except RuntimeError as exc:
            raise ArtifactError(f"cannot load LLVM object code: {exc}") from None
        addr, meta = self._tracker["treecomp_predict"], self._tracker["treecomp_meta_json"]
        if not addr or not meta:
            raise ArtifactError("LLVM object code without treecomp_predict / treecomp_meta_json")
        self._predict = _PREDICT(addr)
        self.meta_json = _CSTR(meta)().decode()
        self.head: Head = Head.from_json(self.meta_json)
        if settable_base != (self.head.base_link != "identity"):
            raise ArtifactError("LLVM object code whose treecomp_base does not match its meta JSON")
        if settable_base:
            set_base(self.head, self._tracker[BASE_SYMBOL])
        #: the code's TREECOMP_TRANSFORM is the library's own arithmetic (see native.SharedLibrary)
        self.native_transform = outputs.native_transform(self.head) != 0
        #: for loader's small-batch entry (runtime/pyentry.c): function, tables, isa, kind
        self.entry = (addr, 0, 0, 0)

    def run(self, X: np.ndarray, out: np.ndarray, flags: int = 0) -> None:
        rc = self._predict(X.ctypes.data, X.dtype.itemsize * 8, X.shape[0], out.ctypes.data, flags)
        if rc != 0:
            raise kernel_error(rc, "the LLVM kernel's treecomp_predict")

    def ir_bytes(self) -> bytes | None:
        """The model's IR file (ir.Forest.to_bytes) this kernel carries, or None."""
        if self._ir is not None and not isinstance(self._ir, bytes):
            self._ir = self._ir.to_bytes()
        return self._ir

    def to_bytes(self) -> bytes:
        """MAGIC, a length-prefixed JSON header (head, triple, object sizes, IR size), the
        objects, the IR file (optional), the sha256 of all that."""
        ir = self.ir_bytes()
        header = json.dumps({"version": _CONTAINER_VERSION, "head": self.meta_json,
                             "triple": _llvm().get_process_triple(), "native_cpu": self._native_cpu,
                             "objects": [len(o) for o in self._objects],
                             **({"ir": len(ir)} if ir is not None else {})}).encode()
        data = b"".join([MAGIC, struct.pack("<I", len(header)), header, *self._objects, ir or b""])
        return data + hashlib.sha256(data).digest()

    def save(self, path: str | os.PathLike) -> None:
        """Link the object code into a shared library at `path` (needs the system linker)."""
        objects = {f"part{u}.o": o for u, o in enumerate(self._objects)}
        try:
            toolchain.find_compiler()
        except CompileError as exc:
            raise toolchain.so_needs_compiler(exc) from None
        try:
            toolchain.publish(Path(path).resolve(),
                              lambda p: toolchain.link_objects(objects, p, seal=True))
        except CompileError as exc:
            raise CompileError(f"saving an LLVM-compiled model as a .so needs a linker: {exc} "
                               "(a Predictor still pickles without one)") from None


def load_bytes(data: bytes) -> LLVMKernel:
    """A kernel from `LLVMKernel.to_bytes()` output (re-JITs the object code, no codegen):
    ArtifactError, before anything is parsed or reaches the JIT, unless its digest matches."""
    try:
        if not data.startswith(MAGIC):
            raise ValueError("bad magic")
        if len(data) < len(MAGIC) + 36 or hashlib.sha256(data[:-32]).digest() != data[-32:]:
            raise ValueError("its bytes do not match the digest it ends with (truncated, "
                             "damaged or altered; or written by an older treecomp: recompile)")
        data = data[:-32]
        (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
        start = len(MAGIC) + 4
        header = json.loads(data[start:start + hlen])
        if not isinstance(header, dict):
            raise ValueError("the header is not a JSON object")
        if header.get("version") != _CONTAINER_VERSION:
            raise ArtifactError(f"LLVM artifact version {header.get('version')} is not supported "
                                f"(this treecomp reads version {_CONTAINER_VERSION}): recompile "
                                "the model")
        pos, objects = start + hlen, []
        for size in header["objects"]:
            if type(size) is not int or size < 1:
                raise ValueError("bad object size")
            objects.append(data[pos:pos + size])
            pos += size
        ir = None
        if "ir" in header:
            n = header["ir"]
            if type(n) is not int or n < 0:
                raise ValueError("bad IR size")
            ir, pos = data[pos:pos + n], pos + n
        if pos != len(data) or any(len(o) == 0 for o in objects):
            raise ValueError("truncated")
        triple, cpu, head_json = header["triple"], header.get("native_cpu"), header["head"]
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise ArtifactError(f"corrupt LLVM artifact: {exc}") from None
    if triple != _llvm().get_process_triple():
        raise ArtifactError(f"this LLVM artifact was compiled for {triple}, "
                            f"not for this machine ({_llvm().get_process_triple()})")
    if cpu and cpu != _llvm().get_host_cpu_name():
        raise ArtifactError(f"this LLVM artifact was compiled with native=True for a {cpu} CPU; "
                            f"this one is a {_llvm().get_host_cpu_name()}: recompile the model")
    try:
        settable = Head.from_json(head_json).base_link != "identity"
    except (InvalidModelError, TypeError, ValueError) as exc:
        raise ArtifactError(f"corrupt LLVM artifact: {exc}") from None
    return LLVMKernel(objects, native_cpu=cpu, settable_base=settable, ir=ir)


def build(forest: Forest, progress: Callable[[str], None] | None = None, **overrides: Any) -> LLVMKernel:
    """Compile `forest` (or take its object code from the cache) and JIT it in-process."""
    opts = options(**overrides)
    native_cpu = _cpu(opts)[0] if opts["native"] else None
    return LLVMKernel(compile_objects(forest, progress=progress, **opts), native_cpu=native_cpu,
                      settable_base=forest.base_link != "identity",
                      ir=forest if opts["ir"] else None)

"""The arrays backend's compiler-free walkers: one llvmlite JIT walker and a numpy walker.

Used where no native kernel runs (no prebuilt kernel matching the sources and no C compiler), or
when forced (isa "llvm" / "numpy"). Shape: the llvmlite walker takes one explicit-children node
table (the compact nodes, then every heap tree's slots; leaf = ~index) and walks a row at a time,
trees in order (~30 us/row on the 500-tree benchmark, about the naive layout's speed); the numpy
walker walks the ArraysKernel's own tables tree by tree over all rows. Floating point: rows cast
to the input dtype (round to nearest), comparisons as the C kernel's (NaN by its nan_right bit),
each leaf value added once with an IEEE add in the accumulation dtype, no fast-math: bit-exact.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from ... import platform
from ...errors import CompileError, UnsupportedModelError
from .tables import CATEGORY_RULES, FF_CAT, FF_FEAT, FF_NANR, excl_cumsum


# -- the generic walker JIT-compiled by llvmlite -------------------------------------------------
_WALK_IR = r"""
define void @tc_arrays_walk(i64 %n, ptr noalias %X, ptr noalias %out, i64 %T, i64 %nf, i64 %no,
    ptr %root, ptr %leafoff, ptr %tout, ptr %twidth, ptr %ff, ptr %thr, ptr %cat, ptr %cl,
    ptr %cr, ptr %words, ptr %woff, ptr %nbits, ptr %other, ptr %lv, i32 %strict, i32 %rule) {
entry:
  %st = icmp ne i32 %strict, 0
  %isTrunc = icmp eq i32 %rule, 1
  %isIntg = icmp eq i32 %rule, 2
  br label %rowhead
rowhead:
  %r = phi i64 [0, %entry], [%r1, %rowend]
  %rc = icmp slt i64 %r, %n
  br i1 %rc, label %rowbody, label %exit
rowbody:
  %xo = mul i64 %r, %nf
  %xrow = getelementptr XT, ptr %X, i64 %xo
  %ao = mul i64 %r, %no
  %arow = getelementptr AT, ptr %out, i64 %ao
  br label %treehead
treehead:
  %t = phi i64 [0, %rowbody], [%t1, %leafdone]
  %tc = icmp slt i64 %t, %T
  br i1 %tc, label %treebody, label %rowend
treebody:
  %rp = getelementptr i64, ptr %root, i64 %t
  %root0 = load i64, ptr %rp
  br label %walk
walk:
  %nd = phi i64 [%root0, %treebody], [%next, %step]
  %isint = icmp sge i64 %nd, 0
  br i1 %isint, label %node, label %leaf
node:
  %ffp = getelementptr i32, ptr %ff, i64 %nd
  %f = load i32, ptr %ffp
  %feat32 = and i32 %f, 1073741823
  %feat = zext i32 %feat32 to i64
  %vp = getelementptr XT, ptr %xrow, i64 %feat
  %v = load XT, ptr %vp
  %isnan = fcmp uno XT %v, %v
  br i1 %isnan, label %nanstep, label %notnan
nanstep:
  %nanr = icmp slt i32 %f, 0
  br label %step
notnan:
  %catbit = and i32 %f, 1073741824
  %iscat = icmp ne i32 %catbit, 0
  br i1 %iscat, label %catnode, label %numnode
numnode:
  %tp = getelementptr XT, ptr %thr, i64 %nd
  %th = load XT, ptr %tp
  %ge = fcmp oge XT %v, %th
  %gt = fcmp ogt XT %v, %th
  %gr = select i1 %st, i1 %ge, i1 %gt
  br label %step
catnode:
  %sp = getelementptr i32, ptr %cat, i64 %nd
  %s32 = load i32, ptr %sp
  %s = sext i32 %s32 to i64
  %nbp = getelementptr i32, ptr %nbits, i64 %s
  %nb32 = load i32, ptr %nbp
  %nbf = sitofp i32 %nb32 to XT
  %ltn = fcmp olt XT %v, %nbf
  %gtm1 = fcmp ogt XT %v, -1.0
  %ge0 = fcmp oge XT %v, 0.0
  %lo = select i1 %isTrunc, i1 %gtm1, i1 %ge0
  %valid0 = and i1 %lo, %ltn
  br i1 %valid0, label %catvalid, label %catinvalid
catvalid:
  %c = fptosi XT %v to i32
  %cb = sitofp i32 %c to XT
  %integral = fcmp oeq XT %cb, %v
  %notint = xor i1 %integral, true
  %bad = and i1 %isIntg, %notint
  br i1 %bad, label %catinvalid, label %catbits
catbits:
  %wop = getelementptr i64, ptr %woff, i64 %s
  %wo = load i64, ptr %wop
  %c5 = lshr i32 %c, 5
  %c5e = zext i32 %c5 to i64
  %wi = add i64 %wo, %c5e
  %wp = getelementptr i32, ptr %words, i64 %wi
  %w = load i32, ptr %wp
  %c31 = and i32 %c, 31
  %sh = lshr i32 %w, %c31
  %bit = and i32 %sh, 1
  %grc = icmp eq i32 %bit, 0
  br label %step
catinvalid:
  %op = getelementptr i8, ptr %other, i64 %s
  %o8 = load i8, ptr %op
  %gri = icmp eq i8 %o8, 0
  br label %step
step:
  %g = phi i1 [%gr, %numnode], [%grc, %catbits], [%gri, %catinvalid], [%nanr, %nanstep]
  %clp = getelementptr i32, ptr %cl, i64 %nd
  %crp = getelementptr i32, ptr %cr, i64 %nd
  %chp = select i1 %g, ptr %crp, ptr %clp
  %ch = load i32, ptr %chp
  %next = sext i32 %ch to i64
  br label %walk
leaf:
  %leafi = xor i64 %nd, -1
  %wdp = getelementptr i32, ptr %twidth, i64 %t
  %wd32 = load i32, ptr %wdp
  %wd = sext i32 %wd32 to i64
  %toutp = getelementptr i32, ptr %tout, i64 %t
  %o32 = load i32, ptr %toutp
  %oo = sext i32 %o32 to i64
  %lop = getelementptr i64, ptr %leafoff, i64 %t
  %lo0 = load i64, ptr %lop
  %lm = mul i64 %leafi, %wd
  %lb = add i64 %lo0, %lm
  br label %jhead
jhead:
  %j = phi i64 [0, %leaf], [%j1, %jbody]
  %jc = icmp slt i64 %j, %wd
  br i1 %jc, label %jbody, label %leafdone
jbody:
  %li = add i64 %lb, %j
  %lvp = getelementptr AT, ptr %lv, i64 %li
  %val = load AT, ptr %lvp
  %ai = add i64 %oo, %j
  %ap = getelementptr AT, ptr %arow, i64 %ai
  %acc = load AT, ptr %ap
  %sum = fadd AT %acc, %val
  store AT %sum, ptr %ap
  %j1 = add i64 %j, 1
  br label %jhead
leafdone:
  %t1 = add i64 %t, 1
  br label %treehead
rowend:
  %r1 = add i64 %r, 1
  br label %rowhead
exit:
  ret void
}
"""

_JIT: dict[tuple[str, str], Any] = {}
_JIT_LOCK = threading.Lock()


def llvm_walker(x_dtype: str, acc_dtype: str):
    """The JIT-compiled generic walker for one dtype pair (built once per process; no C
    compiler needed). A row at a time, trees in order, explicit-children node tables: the
    compiler-free path, slower than the C kernel but native. No fast-math flags: each leaf
    value is added once with an IEEE fadd, exactly as in the C kernel."""
    key = (x_dtype, acc_dtype)
    with _JIT_LOCK:
        fn = _JIT.get(key)
        if fn is not None:
            return fn
        platform.check_platform("JIT-compiling the arrays walker")
        try:
            import llvmlite.binding as llvm
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
        except Exception as exc:  # pragma: no cover - llvmlite is a core dependency
            raise CompileError(f"the arrays backend's compiler-free kernel needs llvmlite: {exc}") from None
        ty = {"float32": "float", "float64": "double"}
        text = _WALK_IR.replace("XT", ty[x_dtype]).replace("AT", ty[acc_dtype])
        try:
            mod = llvm.parse_assembly(text)
            mod.verify()
            tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
            engine = llvm.create_mcjit_compiler(mod, tm)
            engine.finalize_object()
        except RuntimeError as exc:
            raise CompileError(f"LLVM rejected the arrays walker: {exc}") from None
        proto = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                 *([ctypes.c_void_p] * 14), ctypes.c_int32, ctypes.c_int32)
        fn = proto(engine.get_function_address("tc_arrays_walk"))
        fn._engine = engine  # keep the JIT'd code alive with the function
        _JIT[key] = fn
        return fn


def have_llvm() -> bool:
    try:
        llvm_walker("float32", "float64")
        return True
    except CompileError:
        return False


# -- the kernel's tables walked without the C kernel ---------------------------------------------
def llvm_tables(k) -> tuple[dict[str, np.ndarray], tuple]:
    """One explicit-children node table for the llvmlite walker of kernel `k`: the compact nodes, then the
    heap trees' slots (children 2i+1, 2i+2; slots past the last level are leaves). Returns the
    arrays (the caller keeps them alive) and their addresses, the walker's table arguments."""
    A = k.tables.arrays
    heap = A["tree_layout"] == 0
    nint = A["tree_nint"]
    C, H = len(A["c_ff"]), len(A["h_ff"])
    if C + H >= 1 << 31:
        raise UnsupportedModelError("the llvmlite walker supports at most 2^31 - 1 nodes")
    hstart = excl_cumsum(np.where(heap, nint, 0))
    slot_n = np.repeat(nint[heap], nint[heap])
    local = np.arange(H, dtype=np.int64) - np.repeat(hstart[:-1][heap], nint[heap])
    base = C + np.repeat(hstart[:-1][heap], nint[heap])

    def child(c):
        return np.where(c < slot_n, base + c, ~(c - slot_n))
    c_left_g, c_right_g = k.children_global()  # (copied below: not kept on the kernel)
    keep = {
        "root": np.where(heap, np.where(nint > 0, C + hstart[:-1], -1), k.tree_node).astype(np.int64),
        "leafoff": k.tree_leaf.astype(np.int64),
        "tout": A["tree_out"], "twidth": A["tree_width"],
        "ff": np.concatenate([A["c_ff"], A["h_ff"]]),
        "thr": np.concatenate([A["c_thr"], A["h_thr"]]),
        "cat": np.concatenate([A["c_cat"], np.full(H, -1, np.int32)]),
        "cl": np.concatenate([c_left_g, child(2 * local + 1)]).astype(np.int32),
        "cr": np.concatenate([c_right_g, child(2 * local + 2)]).astype(np.int32),
        "words": A["cat_words"], "woff": k.cat_off.astype(np.int64), "nbits": k.cat_nbits,
        "other": A["cat_other_left"], "lv": A["leaf_values"]}
    keep = {name: np.ascontiguousarray(v) for name, v in keep.items()}
    return keep, tuple(v.ctypes.data for v in keep.values())


def run_llvm(k, X: np.ndarray, out: np.ndarray) -> None:
    m, A = k.tables.meta, k.tables.arrays
    x = np.ascontiguousarray(X, dtype=k.tables.x_dtype)  # round to nearest, like numpy
    out[...] = A["base"]
    k.llvm_walk(x.shape[0], x.ctypes.data, out.ctypes.data, m["n_trees"], m["n_features"],
               m["n_outputs"], *k.llvm_args, int(k.strict),
               CATEGORY_RULES.index(m["category_rule"]))
    if m["average"]:
        out /= k.tables.acc_dtype.type(m["n_trees"])


def run_numpy(k, X: np.ndarray) -> np.ndarray:
    """The same tables walked with numpy (when not even llvmlite works): tree by tree, all rows
    at once, a level (heap) or an active set (compact) per step."""
    m, A = k.tables.meta, k.tables.arrays
    x = X.astype(k.tables.x_dtype)  # round to nearest, like the library's conversion
    n, adt = x.shape[0], k.tables.acc_dtype
    rows = np.arange(n)
    acc = np.empty((n, m["n_outputs"]), adt)
    acc[:] = A["base"]
    nint, w = A["tree_nint"], A["tree_width"]
    c_ff = A["c_ff"].view(np.uint32)
    with np.errstate(invalid="ignore"):
        for t in range(m["n_trees"]):
            if A["tree_layout"][t] == 0:
                off, first = int(k.tree_node[t]), int(nint[t])
                ff, th = A["h_ff"][off:off + first].view(np.uint32), A["h_thr"][off:off + first]
                idx = np.zeros(n, np.int64)
                for _ in range(int(A["tree_depth"][t])):
                    f = ff[idx]
                    v = x[rows, f & FF_FEAT]
                    gr = _num_right(k, v, th[idx], f)
                    idx = 2 * idx + 1 + gr
                leaf = idx - first
            else:
                leaf = _walk_compact(k, x, int(k.tree_node[t]), c_ff)
            wt = int(w[t])
            o = int(A["tree_out"][t])
            vals = A["leaf_values"][k.tree_leaf[t] + leaf[:, None] * wt + np.arange(wt)]
            acc[:, o:o + wt] += vals
    if m["average"]:
        acc /= adt.type(m["n_trees"])
    return acc


def _num_right(k, v: np.ndarray, t: np.ndarray, f: np.ndarray) -> np.ndarray:
    gr = (v >= t) if k.strict else (v > t)
    return gr | (np.isnan(v) & ((f & FF_NANR) != 0))


def _walk_compact(k, x: np.ndarray, root: int, c_ff: np.ndarray) -> np.ndarray:
    A = k.tables.arrays
    n = x.shape[0]
    node = np.full(n, root, np.int64)
    active = np.arange(n) if root >= 0 else np.arange(0)
    while active.size:
        nd = node[active]
        f = c_ff[nd]
        v = x[active, f & FF_FEAT]
        gr = _num_right(k, v, A["c_thr"][nd], f)
        cat = (f & FF_CAT) != 0
        if cat.any():
            s = A["c_cat"][nd[cat]]
            vc = v[cat]
            nbits = k.cat_nbits[s]
            rule = k.tables.meta["category_rule"]
            valid = ((vc > -1) if rule == "trunc" else (vc >= 0)) & (vc < nbits)
            if rule == "integral":
                valid &= vc == np.trunc(vc)
            c = np.where(valid, vc, 0).astype(np.int64)
            bit = (A["cat_words"][k.cat_off[s] + (c >> 5)] >> (c & 31).astype(np.uint32)) & 1
            left = np.where(valid, bit.astype(bool), A["cat_other_left"][s].astype(bool))
            left = np.where(np.isnan(vc), (f[cat] & FF_NANR) == 0, left)
            gr[cat] = ~left
        nxt = np.where(gr, k.c_right_global[nd], k.c_left_global[nd]).astype(np.int64)
        node[active] = nxt
        active = active[nxt >= 0]
    return ~node


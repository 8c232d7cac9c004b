"""The arrays backend's byte walks as LLVM vector IR (isa "llvm-vec"): the C kernel's algorithm
where no C kernel runs (no prebuilt one that matches and no C compiler), on any CPU LLVM targets.

What it runs: the same packed tables as the C kernel (kernel.ArraysKernel.pack_arrays, the
ctypes struct native.CTables, whose field offsets this module reads), for the two byte-walk
layouts: the quantised heap walk (``quant``: every tree a heap of depth <= 8) and the interval
sweep (``bitvec``: trees of <= 128 leaves, categorical nodes included; the C kernel's biased sweep
of trees of 129-255 leaves is not here: those go to the walker). Tables of other layouts
(float heaps, compact trees, naive) have no byte walk; ArraysKernel runs them through the
llvmlite walker (walkers.py) instead.

Shape (one generic kernel per (input dtype of the tables, accumulation dtype), not per model:
a model costs only its tables; the kernel is JIT-compiled once per process, its object code
cached by content in toolchain's cache): rows in blocks; per block

- the quantiser: each column's bins (the count of the column's sorted thresholds a value goes
  right of, by a branch-free binary search over the power-of-two table q_thr, QL rows a vector,
  each step a gather), NaN's code per column, category codes, the copied columns of the other
  NaN direction (q_src), exactly as quant_impl.c's quantise writes them (bins XOR 0x80);
- the heap walk of each tree over G rows a vector (G = 64 with AVX-512 BW, 32 elsewhere): at
  level l every node's column bytes are loaded and compared, by a saturating byte subtract, with
  the node's threshold byte; the 2^l differences are muxed down to each row's own node by
  selects on the earlier levels' decisions (the oldest first), and one compare says go right;
  the leaf slot is the decisions' bits;
- the interval sweep of each tree over two G-row groups at once: per node (sorted by interval
  start) go right = byte compare (or the code's bit in the node's 256-bit category set), and
  pos = max(pos, hi) where the row goes right and lo <= pos (QuickScorer); the exit leaf is pos;
- the leaves: each row's leaf value gathered and added to its margin (one output, scalar
  leaves), else leaf indices stored and added row by row; trees in order, then the division by
  n_trees when averaging. Margins start at the tables' base.

Exactness: the same bins as the C kernel (the same tables, the same compares: right at u when
u < x, u <= x for strict "<"; NaN thresholds (padding) never), the same node decisions (byte
compares of the same biased bytes), the same leaves, one IEEE add per leaf in the accumulation
dtype, trees in model order, no fast-math flags (LLVM may not reassociate or contract): bit for
bit what the C kernel and the interpreter compute. Rows are read in the caller's dtype and cast
to the tables' (fptrunc: round to nearest, as numpy's astype).

Three flavours of the IR (FLAVOURS, host_flavour): "generic" is portable vector IR (no target
intrinsics): LLVM lowers the same module to AVX2, AVX-512, NEON or SVE for the host it is
compiled for (``llvmlite.binding.get_host_cpu_name`` and its features). Where the host has
AVX-512 F, BW and VBMI, "avx512vbmi" replaces the steps generic IR has no fast form for by x86
intrinsics, as the C kernel's AVX-512 unit does them (quant_impl.c): a heap level's
thresholds looked up by the rows' node indices (vpermb) after muxing the column bytes, two
groups at once; a whole group's leaves from the tree's byte planes (vpermb + unpacks, no
gathers); the quantiser's search below the 15 pivots by per-column level tables (vpermps /
vpermi2pd, no gathers of thresholds); the sweep's masked byte max and categorical set bytes by
vpermb. Where it has AVX2 but not that set (AVX2-only CPUs, AVX-512 without VBMI: Skylake-X),
"avx2" does the same steps as the C kernel's AVX2 unit, 32 rows a group: thresholds and leaf
planes by vpshufb 16 bytes a lookup and vpblendvb by the index's bits, the quantiser's level
tables by vpermps 8 rows a vector (float64 tables: a float32 first guess, then exact double
compares), category sets by vpshufb, four sweep groups at once (a tree without categorical
nodes in a loop without their branch); compiled without AVX-512 or other extensions past
AVX2 (flavour_features), so that the code is the same on every host that runs it. Same bins,
same compares, same leaf slots and values, the same adds in the same order: every flavour is
bit for bit the C kernel. $TREECOMP_LLVM_VEC_GENERIC=1 forces "generic",
$TREECOMP_LLVM_VEC_FLAVOUR=<flavour> one the CPU runs (tests run all three on an AVX-512 VBMI
host); the flavour is in the IR text, so in the object cache's key.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ... import platform, toolchain
from ...errors import CompileError
from ...native import kernel_error
from .native import CTables

#: the kernel's own version: part of the object cache key with the IR text itself
VERSION = 3

_TY = {"float32": "float", "float64": "double"}


def _off(name: str) -> int:
    return getattr(CTables, name).offset


class _Fn:
    """A text IR function body under construction: fresh SSA names, lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.n = 0

    def tmp(self, stem: str = "t") -> str:
        self.n += 1
        return f"%_{stem}{self.n}"

    def __call__(self, text: str) -> None:
        self.lines.append("  " + text)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def emit(self, expr: str, stem: str = "t") -> str:
        v = self.tmp(stem)
        self.lines.append(f"  {v} = {expr}")
        return v


def _splat(f: _Fn, ty: str, n: int, val: str) -> str:
    ins = f.emit(f"insertelement <{n} x {ty}> poison, {ty} {val}, i64 0")
    return f.emit(f"shufflevector <{n} x {ty}> {ins}, <{n} x {ty}> poison, <{n} x i32> zeroinitializer")


def _iota(n: int, ty: str = "i64") -> str:
    return "<" + ", ".join(f"{ty} {i}" for i in range(n)) + ">"


def _const_vec(n: int, ty: str, val: Any) -> str:
    return "<" + ", ".join(f"{ty} {val}" for _ in range(n)) + ">"


def _field(f: _Fn, name: str, ty: str) -> str:
    p = f.emit(f"getelementptr i8, ptr %T, i64 {_off(name)}")
    return f.emit(f"load {ty}, ptr {p}", name)


def _gather(ty: str, n: int) -> str:
    return f"llvm.masked.gather.v{n}{_vt(ty)}.v{n}p0"


def _vt(ty: str) -> str:
    return {"float": "f32", "double": "f64", "i8": "i8", "i32": "i32", "i64": "i64"}[ty]


# -- the quantiser -------------------------------------------------------------------------------
def _col_head(f: _Fn, xin: str, QL: int, G: int, back: str = "%sub",
              grp_extra: tuple[str, ...] = (), xt: str | None = None) -> str:
    """The column functions' shared loop head: over row groups g (q + g * gs) and QL-row
    vectors s of each, the rows' values gathered from x (rows nf values apart, lanes past nb
    masked to 0). `back`: the block that closes the s loop (its phi's back edge); grp_extra:
    lines for the group's block. Returns the gathered <QL x xin> value, or with `xt` that value
    in the tables' dtype (fptrunc: round to nearest, as numpy's astype)."""
    xs = 4 if xin == "float" else 8
    f("br label %grp")
    f.label("grp")
    f("%g = phi i64 [0, %entry], [%g1, %subend]")
    f("%qg0 = mul i64 %g, %gs")
    f("%qg = getelementptr i8, ptr %q, i64 %qg0")
    for line in grp_extra:
        f(line)
    f("br label %sub")
    f.label("sub")
    f(f"%s = phi i32 [0, %grp], [%s1, {back}]")
    f("%s64 = zext i32 %s to i64")
    f(f"%row0a = mul i64 %g, {G}")
    f(f"%row0b = mul i64 %s64, {QL}")
    f("%row0 = add i64 %row0a, %row0b")
    rows = f.emit(f"add <{QL} x i64> {_splat(f, 'i64', QL, '%row0')}, {_iota(QL)}")
    mask = f.emit(f"icmp slt <{QL} x i64> {rows}, {_splat(f, 'i64', QL, '%nb')}")
    idx = f.emit(f"mul <{QL} x i64> {rows}, {_splat(f, 'i64', QL, '%nf')}")
    ptrs = f.emit(f"getelementptr {xin}, ptr %x, <{QL} x i64> {idx}")
    v = f.emit(f"call <{QL} x {xin}> @{_gather(xin, QL)}(<{QL} x ptr> {ptrs}, i32 {xs}, "
               f"<{QL} x i1> {mask}, <{QL} x {xin}> zeroinitializer)")
    if xt is None or xt == xin:
        return v
    if xin == "double":
        return f.emit(f"fptrunc <{QL} x double> {v} to <{QL} x float>")
    return f.emit(f"fpext <{QL} x float> {v} to <{QL} x double>")


def _col_store(f: _Fn, QL: int, G: int, code: str) -> None:
    """The column functions' shared loop tail: the QL codes `code` stored at %sp (the vector's
    place: _col_addr), then both loops closed."""
    f(f"store <{QL} x i8> {code}, ptr %sp, align 1")
    f("%s1 = add i32 %s, 1")
    f(f"%sm = icmp ult i32 %s1, {G // QL}")
    f("br i1 %sm, label %sub, label %subend")
    f.label("subend")
    f("%g1 = add i64 %g, 1")
    f("%gm = icmp ult i64 %g1, %ng")
    f("br i1 %gm, label %grp, label %exit")
    f.label("exit")
    f("ret void")


def _col_addr(f: _Fn, QL: int) -> None:
    """%so, %sp: the offset and address of vector s's codes in group g's column."""
    f(f"%so = mul i64 %s64, {QL}")
    f("%sp = getelementptr i8, ptr %qg, i64 %so")


def _bin_code(f: _Fn, QL: int, xt: str, bins: str, v: str, nanc: str = "%nanc") -> str:
    """A quantiser column's byte codes: the <QL x i32> bin counts `bins` as biased bytes (bin
    XOR 0x80, as quant_impl.c's quantise writes them), the column's NaN code (`nanc`) where the
    value `v` (<QL x xt>) is NaN."""
    b = f.emit(f"trunc <{QL} x i32> {bins} to <{QL} x i8>")
    bx = f.emit(f"xor <{QL} x i8> {b}, {_const_vec(QL, 'i8', -128)}")
    nan = f.emit(f"fcmp uno <{QL} x {xt}> {v}, {v}")
    return f.emit(f"select <{QL} x i1> {nan}, <{QL} x i8> {_splat(f, 'i8', QL, nanc)}, "
                  f"<{QL} x i8> {bx}")


def _quant_fn(name: str, f: _Fn) -> str:
    """The text of a quantiser column function `name` with the body `f`."""
    return (f"define internal void @{name}(ptr noalias %x, i64 %nf, i64 %nb, ptr noalias %u, "
            f"i32 %P, i8 %nanc, ptr noalias %q, i64 %gs, i64 %ng) {{\n" + "\n".join(f.lines) + "\n}\n")


def _quant_col(xin: str, xt: str, strict: bool, QL: int, G: int) -> str:
    """define @qcol_<xin>_<strict>(x, nf, nb, u, P, nanc, q, gs, ng): one numeric column's bins
    for rows 0..nb (x: the first row's feature, rows nf values apart), into q + g * gs, QL rows a
    vector. P: the table's length (a power of two >= 2; NaN padding after the thresholds)."""
    f = _Fn()
    name = f"qcol_{xin}_{int(strict)}"
    cmp = "oge" if strict else "ogt"
    ts = 4 if xt == "float" else 8
    f.label("entry")
    h0 = f.emit("lshr i32 %P, 1")
    # the first four levels of the search without gathers: with P >= 16, the 15 pivots
    # u[i * P/16 - 1] (i = 1..15), splatted once per column; a row passes a prefix of them (u is
    # sorted, its NaN padding last), so their count times P/16 is where the search stands after
    # four levels; the gathers take it from h = P/32
    big = f.emit("icmp uge i32 %P, 16")
    stp = f.emit("lshr i32 %P, 4")
    pivots = []
    for i in range(1, 16):
        ix = f.emit(f"mul i32 {stp}, {i}")
        ix1 = f.emit(f"sub i32 {ix}, 1")
        ixs = f.emit(f"select i1 {big}, i32 {ix1}, i32 0")
        ixz = f.emit(f"zext i32 {ixs} to i64")
        pp = f.emit(f"getelementptr {xt}, ptr %u, i64 {ixz}")
        pv = f.emit(f"load {xt}, ptr {pp}")
        pivots.append(_splat(f, xt, QL, pv))
    stv = _splat(f, "i32", QL, stp)
    h32 = f.emit("lshr i32 %P, 5")
    hs = f.emit(f"select i1 {big}, i32 {h32}, i32 {h0}")
    v = _col_head(f, xin, QL, G, back="%store", xt=xt)
    f(f"%v = bitcast <{QL} x {xt}> {v} to <{QL} x {xt}>")
    cnt = "zeroinitializer"
    for pv in pivots:
        c = f.emit(f"fcmp {cmp} <{QL} x {xt}> %v, {pv}")
        cz = f.emit(f"zext <{QL} x i1> {c} to <{QL} x i32>")
        cnt = cz if cnt == "zeroinitializer" else f.emit(f"add <{QL} x i32> {cnt}, {cz}")
    pc = f.emit(f"mul <{QL} x i32> {cnt}, {stv}")
    f(f"%p0 = select i1 {big}, <{QL} x i32> {pc}, <{QL} x i32> zeroinitializer")
    f(f"%hz = icmp eq i32 {hs}, 0")
    f("br i1 %hz, label %done, label %step")
    f.label("step")
    f(f"%h = phi i32 [{hs}, %sub], [%h1, %step]")
    f(f"%p = phi <{QL} x i32> [%p0, %sub], [%pn, %step]")
    hm1 = f.emit("sub i32 %h, 1")
    ix = f.emit(f"add <{QL} x i32> %p, {_splat(f, 'i32', QL, hm1)}")
    tp = f.emit(f"getelementptr {xt}, ptr %u, <{QL} x i32> {ix}")
    t = f.emit(f"call <{QL} x {xt}> @{_gather(xt, QL)}(<{QL} x ptr> {tp}, i32 {ts}, "
               f"<{QL} x i1> {_const_vec(QL, 'i1', 'true')}, <{QL} x {xt}> poison)")
    r = f.emit(f"fcmp {cmp} <{QL} x {xt}> %v, {t}")
    hv = _splat(f, "i32", QL, "%h")
    add = f.emit(f"select <{QL} x i1> {r}, <{QL} x i32> {hv}, <{QL} x i32> zeroinitializer")
    f(f"%pn = add <{QL} x i32> %p, {add}")
    f("%h1 = lshr i32 %h, 1")
    f("%more = icmp ne i32 %h1, 0")
    f("br i1 %more, label %step, label %done")
    f.label("done")
    f(f"%pf = phi <{QL} x i32> [%p0, %sub], [%pn, %step]")
    code = _bin_code(f, QL, xt, "%pf", "%v")
    f("br label %store")
    f.label("store")
    _col_addr(f, QL)
    _col_store(f, QL, G, code)
    return _quant_fn(name, f)


def _cat_col(xin: str, QL: int, G: int) -> str:
    """define @ccol_<xin>(x, nf, nb, rule, q, gs, ng): a category-code column (quant_impl.c's
    q_kind): a valid value below 254 is its code (truncated, as the float walk casts), any other
    value 254, NaN 255; valid: rule 1 (trunc) v > -1, else v >= 0; rule 2 (integral) also
    v == (int)v. Computed in the input's own dtype, as the C kernel does (its TC_XT)."""
    f = _Fn()
    f.label("entry")
    v = _col_head(f, xin, QL, G)
    V = f"<{QL} x {xin}>"
    gtm1 = f.emit(f"fcmp ogt {V} {v}, {_const_vec(QL, xin, '-1.0')}")
    ge0 = f.emit(f"fcmp oge {V} {v}, zeroinitializer")
    istr = f.emit("icmp eq i32 %rule, 1")
    lo = f.emit(f"select i1 {istr}, <{QL} x i1> {gtm1}, <{QL} x i1> {ge0}")
    lt = f.emit(f"fcmp olt {V} {v}, {_const_vec(QL, xin, '254.0')}")
    valid0 = f.emit(f"and <{QL} x i1> {lo}, {lt}")
    # clamp before the cast: fptosi of a value outside i32 would be poison
    vc = f.emit(f"select <{QL} x i1> {valid0}, {V} {v}, {V} zeroinitializer")
    ci = f.emit(f"fptosi {V} {vc} to <{QL} x i32>")
    cb = f.emit(f"sitofp <{QL} x i32> {ci} to {V}")
    integ = f.emit(f"fcmp oeq {V} {cb}, {vc}")
    isint = f.emit("icmp eq i32 %rule, 2")
    need = f.emit(f"select i1 {isint}, <{QL} x i1> {integ}, <{QL} x i1> {_const_vec(QL, 'i1', 'true')}")
    valid = f.emit(f"and <{QL} x i1> {valid0}, {need}")
    c8 = f.emit(f"trunc <{QL} x i32> {ci} to <{QL} x i8>")
    code = f.emit(f"select <{QL} x i1> {valid}, <{QL} x i8> {c8}, <{QL} x i8> {_const_vec(QL, 'i8', -2)}")
    nan = f.emit(f"fcmp uno {V} {v}, {v}")
    code2 = f.emit(f"select <{QL} x i1> {nan}, <{QL} x i8> {_const_vec(QL, 'i8', -1)}, <{QL} x i8> {code}")
    _col_addr(f, QL)
    _col_store(f, QL, G, code2)
    return (f"define internal void @ccol_{xin}(ptr noalias %x, i64 %nf, i64 %nb, i32 %rule, "
            f"ptr noalias %q, i64 %gs, i64 %ng) {{\n" + "\n".join(f.lines) + "\n}\n")


def _copy_col(xin: str, QL: int, G: int) -> str:
    """define @scol_<xin>(x, nf, nb, src, nanc, q, gs, ng): a column with the same bins as an
    earlier one (src) but NaN's code nanc (quant_impl.c's q_src)."""
    f = _Fn()
    f.label("entry")
    v = _col_head(f, xin, QL, G, grp_extra=("%sg = getelementptr i8, ptr %src, i64 %qg0",))
    _col_addr(f, QL)
    f("%pp = getelementptr i8, ptr %sg, i64 %so")
    p = f.emit(f"load <{QL} x i8>, ptr %pp, align 1")
    nan = f.emit(f"fcmp uno <{QL} x {xin}> {v}, {v}")
    code = f.emit(f"select <{QL} x i1> {nan}, <{QL} x i8> {_splat(f, 'i8', QL, '%nanc')}, <{QL} x i8> {p}")
    _col_store(f, QL, G, code)
    return (f"define internal void @scol_{xin}(ptr noalias %x, i64 %nf, i64 %nb, ptr %src, "
            f"i8 %nanc, ptr %q, i64 %gs, i64 %ng) {{\n" + "\n".join(f.lines) + "\n}\n")


#: the avx512vbmi quantiser's column functions: level-2 tables per column (P = 16 (n + 1))
PERM_TABLES = (1, 3, 7, 15)


def _quant_col_perm(xin: str, xt: str, strict: bool, G: int, NJ: int) -> str:
    """define @qcolp_<xin>_<strict>_<NJ>(x, nf, nb, u, P, nanc, q, gs, ng): _quant_col for a
    column of P = 16 (NJ + 1) thresholds (g = P / 16 a group), 16 rows a vector, without
    gathers of thresholds (avx512vbmi flavour; quant_impl.c's tc_qlanes8 in 16 lanes): b1 =
    how many of the 15 pivots u[g i - 1] send the row right (every threshold of the first b1
    groups does, the next pivot not: u[P - 1] is NaN padding), then b2 = how many of group b1's
    first g - 1 thresholds do, each looked up per lane from table j (u[g b + j], b = 0..15) by
    the row's b1 (vpermps; float64 thresholds: vpermi2pd of the table's two halves). The bin
    b1 g + b2 is the count of thresholds that send the row right: what the binary search of
    _quant_col finds (u sorted, NaN last, the same compares)."""
    QL = 16
    f = _Fn()
    name = f"qcolp_{xin}_{int(strict)}_{NJ}"
    cmp = "oge" if strict else "ogt"
    g1 = NJ + 1
    f.label("entry")
    pivots = []
    for i in range(1, 16):
        pp = f.emit(f"getelementptr {xt}, ptr %u, i64 {i * g1 - 1}")
        pivots.append(_splat(f, xt, QL, f.emit(f"load {xt}, ptr {pp}")))
    tables = []
    for j in range(NJ):
        if xt == "float":
            idx = "<" + ", ".join(f"i64 {g1 * b + j}" for b in range(16)) + ">"
            tp = f.emit(f"getelementptr float, ptr %u, <16 x i64> {idx}")
            tables.append(f.emit(f"call <16 x float> @{_gather('float', 16)}(<16 x ptr> {tp}, i32 4, "
                                 f"<16 x i1> {_const_vec(16, 'i1', 'true')}, <16 x float> poison)"))
        else:
            halves = []
            for h in range(2):
                idx = "<" + ", ".join(f"i64 {g1 * b + j}" for b in range(8 * h, 8 * h + 8)) + ">"
                tp = f.emit(f"getelementptr double, ptr %u, <8 x i64> {idx}")
                halves.append(f.emit(f"call <8 x double> @{_gather('double', 8)}(<8 x ptr> {tp}, "
                                     f"i32 8, <8 x i1> {_const_vec(8, 'i1', 'true')}, "
                                     f"<8 x double> poison)"))
            tables.append(halves)
    v = _col_head(f, xin, QL, G, xt=xt)
    VX = f"<{QL} x {xt}>"

    def count(thresholds: list[str]) -> str:
        cnt = ""
        for t in thresholds:
            c = f.emit(f"fcmp {cmp} {VX} {v}, {t}")
            cz = f.emit(f"zext <{QL} x i1> {c} to <{QL} x i32>")
            cnt = cz if not cnt else f.emit(f"add <{QL} x i32> {cnt}, {cz}")
        return cnt
    b1 = count(pivots)
    looked = []
    if xt == "float":
        for t in tables:
            looked.append(f.emit(f"call <16 x float> @llvm.x86.avx512.permvar.sf.512(<16 x float> {t}, "
                                 f"<16 x i32> {b1})"))
    else:
        ix = []
        for h in range(2):
            sel = "<" + ", ".join(f"i32 {8 * h + i}" for i in range(8)) + ">"
            half = f.emit(f"shufflevector <16 x i32> {b1}, <16 x i32> poison, <8 x i32> {sel}")
            ix.append(f.emit(f"zext <8 x i32> {half} to <8 x i64>"))
        for lo, hi in tables:
            r = [f.emit(f"call <8 x double> @llvm.x86.avx512.vpermi2var.pd.512(<8 x double> {lo}, "
                        f"<8 x i64> {ix[h]}, <8 x double> {hi})") for h in range(2)]
            looked.append(f.emit(f"shufflevector <8 x double> {r[0]}, <8 x double> {r[1]}, "
                                 f"<16 x i32> {_iota(16, 'i32')}"))
    b2 = count(looked)
    p1 = f.emit(f"mul <{QL} x i32> {b1}, {_const_vec(QL, 'i32', g1)}")
    pf = f.emit(f"add <{QL} x i32> {p1}, {b2}")
    code = _bin_code(f, QL, xt, pf, v)
    _col_addr(f, QL)
    _col_store(f, QL, G, code)
    return _quant_fn(name, f)


#: the avx2 quantiser's column functions: one per table length P (derived.quant_tables makes
#: P a power of two from 16 to 256; any other: the generic search)
AVX2_TABLES = (16, 32, 64, 128, 256)


def _quant_col_avx2(xin: str, xt: str, strict: bool, G: int, P: int) -> str:
    """define @qcola_<xin>_<strict>_<P>(x, nf, nb, u, P, nanc, q, gs, ng, u32, twin, nanc2):
    _quant_col for a
    column of P thresholds (a power of two, 16 .. 256, NaN padding last), 8 rows a vector (avx2
    flavour; quant_impl.c's tc_qlanes8): b1 = how many of the 7 pivots u[g1 i + g1 - 1] (g1 = P / 8) send the row right, b2 = how
    many of group b1's every g2-th thresholds (g2 = max(g1 / 8, 1)) do, each looked up per
    lane from table j (u[g1 b + g2 j + g2 - 1], b = 0..7) by b1 (vpermps), then a binary search
    of the g2 left by gathers (P = 128: one step, 256: two). The bin is the count of thresholds
    that send the row right: what the binary search of _quant_col finds (u sorted, NaN last,
    the same compares). float64 tables: that count in float32 (u32: the thresholds rounded,
    the row rounded, right when below: a prefix of the exact count, rounding being monotone)
    is a first guess, then up by exact double compares, one gather a step (usually none), at
    most to P - 1 (as quant_impl.c's tc_qlanes8 with d64). twin: the next column is this one's
    copy for the other NaN direction (q_src): its codes are written too (NaN's code nanc2, the
    same bins), from the values in hand (quant_impl.c's q_src copy reads them again)."""
    QL = 8
    f = _Fn()
    name = f"qcola_{xin}_{int(strict)}_{P}"
    cmp = "oge" if strict else "ogt"
    d64 = xt == "double"
    gcmp = "ogt" if d64 else cmp                 # the (first guess's) compare
    us = "%u32" if d64 else "%u"                 # the thresholds the guess counts
    VF = f"<{QL} x float>"
    if P not in AVX2_TABLES:
        raise ValueError(f"no avx2 quantiser column for P={P}")
    f.label("entry")
    g1 = P // 8
    g2 = max(g1 // 8, 1)
    nj = g1 // g2 - 1
    pivots = []
    for i in [g1 * i + g1 - 1 for i in range(7)]:
        pp = f.emit(f"getelementptr float, ptr {us}, i64 {i}")
        pivots.append(_splat(f, "float", QL, f.emit(f"load float, ptr {pp}")))
    tables = []
    for j in range(nj):
        idx = "<" + ", ".join(f"i64 {g1 * b + g2 * j + g2 - 1}" for b in range(8)) + ">"
        tp = f.emit(f"getelementptr float, ptr {us}, <8 x i64> {idx}")
        tables.append(f.emit(f"call {VF} @{_gather('float', 8)}(<8 x ptr> {tp}, i32 4, "
                             f"<8 x i1> {_const_vec(8, 'i1', 'true')}, {VF} poison)"))
    v = _col_head(f, xin, QL, G, back="%store", xt=xt)
    vf = f.emit(f"fptrunc <{QL} x double> {v} to {VF}") if d64 else v

    def count(thresholds: list[str]) -> str:
        cnt = "zeroinitializer"
        for t in thresholds:
            c = f.emit(f"fcmp {gcmp} {VF} {vf}, {t}")
            cz = f.emit(f"zext <{QL} x i1> {c} to <{QL} x i32>")
            cnt = cz if cnt == "zeroinitializer" else f.emit(f"add <{QL} x i32> {cnt}, {cz}")
        return cnt
    b1 = count(pivots)
    b2 = count([f.emit(f"call {VF} @llvm.x86.avx2.permps({VF} {t}, <8 x i32> {b1})")
                for t in tables])
    p1 = f.emit(f"mul <{QL} x i32> {b1}, {_const_vec(QL, 'i32', g1)}")
    if g2 > 1:
        b2 = f.emit(f"mul <{QL} x i32> {b2}, {_const_vec(QL, 'i32', g2)}")
    p = f.emit(f"add <{QL} x i32> {p1}, {b2}")
    h = g2 // 2
    while h:
        ix = f.emit(f"add <{QL} x i32> {p}, {_const_vec(QL, 'i32', h - 1)}")
        tp = f.emit(f"getelementptr float, ptr {us}, <{QL} x i32> {ix}")
        t = f.emit(f"call {VF} @{_gather('float', QL)}(<{QL} x ptr> {tp}, i32 4, "
                   f"<{QL} x i1> {_const_vec(QL, 'i1', 'true')}, {VF} poison)")
        r = f.emit(f"fcmp {gcmp} {VF} {vf}, {t}")
        add = f.emit(f"select <{QL} x i1> {r}, <{QL} x i32> {_const_vec(QL, 'i32', h)}, "
                     f"<{QL} x i32> zeroinitializer")
        p = f.emit(f"add <{QL} x i32> {p}, {add}")
        h //= 2
    if d64:  # the climb: while a lane's next threshold (below P - 1) sends it right, one up
        VD = f"<{QL} x double>"
        f(f"%p0 = add <{QL} x i32> {p}, zeroinitializer")
        f("br label %climb")
        f.label("climb")
        f(f"%p = phi <{QL} x i32> [%p0, %sub], [%pn, %climb]")
        tp = f.emit(f"getelementptr double, ptr %u, <{QL} x i32> %p")
        t = f.emit(f"call {VD} @{_gather('double', QL)}(<{QL} x ptr> {tp}, i32 8, "
                   f"<{QL} x i1> {_const_vec(QL, 'i1', 'true')}, {VD} poison)")
        r0 = f.emit(f"fcmp {cmp} {VD} {v}, {t}")
        below = f.emit(f"icmp slt <{QL} x i32> %p, {_const_vec(QL, 'i32', P - 1)}")
        r = f.emit(f"and <{QL} x i1> {r0}, {below}")
        f(f"%pn = add <{QL} x i32> %p, {f.emit(f'zext <{QL} x i1> {r} to <{QL} x i32>')}")
        rb = f.emit(f"bitcast <{QL} x i1> {r} to i{QL}")
        f(f"%up = icmp ne i{QL} {rb}, 0")
        f("br i1 %up, label %climb, label %climbed")
        f.label("climbed")
        p = "%p"
    code = _bin_code(f, QL, xt, p, v)
    code2 = _bin_code(f, QL, xt, p, v, "%nanc2")
    f("br label %store")
    f.label("store")
    _col_addr(f, QL)
    # the twin's codes first, at its column (G bytes on) or, without a twin, where this
    # column's own codes then overwrite them (no store past the block's columns)
    sp2 = f.emit(f"getelementptr i8, ptr %sp, i64 {G}")
    sp2 = f.emit(f"select i1 %twin, ptr {sp2}, ptr %sp")
    f(f"store <{QL} x i8> {code2}, ptr {sp2}, align 1")
    _col_store(f, QL, G, code)
    return (f"define internal void @{name}(ptr noalias %x, i64 %nf, i64 %nb, ptr noalias %u, "
            f"i32 %P, i8 %nanc, ptr noalias %q, i64 %gs, i64 %ng, ptr noalias %u32, i1 %twin, "
            f"i8 %nanc2) {{\n" + "\n".join(f.lines) + "\n}\n")


def _quantise(xin: str, xt: str, G: int, flavour: str = "generic") -> str:
    """define @quant_<xin>(T, X, r0, nb, qb, gs, ng): every column of the block's rows."""
    f = _Fn()
    f.label("entry")
    nf = f.emit(f"sext i32 {_field(f, 'n_features', 'i32')} to i64")
    ncols = _field(f, "q_ncols", "i32")
    strict = _field(f, "strict", "i32")
    rule = _field(f, "cat_rule", "i32")
    feat = _field(f, "q_feat", "ptr")
    nanc = _field(f, "q_nanc", "ptr")
    qoff = _field(f, "q_off", "ptr")
    qlen = _field(f, "q_len", "ptr")
    qsrc = _field(f, "q_src", "ptr")
    qthr = _field(f, "q_thr", "ptr")
    kind = _field(f, "q_kind", "ptr")
    f(f"%st = icmp ne i32 {strict}, 0")
    xo = f.emit(f"mul i64 %r0, {nf}")
    f(f"%xb = getelementptr {xin}, ptr %X, i64 {xo}")
    f(f"%none = icmp sle i32 {ncols}, 0")
    f("br i1 %none, label %exit, label %col")
    f.label("col")
    f("%c = phi i32 [0, %entry], [%c1, %next]" + (", [%c2, %next2]" if flavour == "avx2" else ""))
    f("%c64 = sext i32 %c to i64")
    fp = f.emit(f"getelementptr i32, ptr {feat}, i64 %c64")
    fv = f.emit(f"load i32, ptr {fp}")
    f64_ = f.emit(f"sext i32 {fv} to i64")
    f(f"%x = getelementptr {xin}, ptr %xb, i64 {f64_}")
    f(f"%qc0 = mul i64 %c64, {G}")
    f("%q = getelementptr i8, ptr %qb, i64 %qc0")
    kp = f.emit(f"getelementptr i8, ptr {kind}, i64 %c64")
    kv = f.emit(f"load i8, ptr {kp}")
    f(f"%iscat = icmp ne i8 {kv}, 0")
    f("br i1 %iscat, label %cat, label %notcat")
    f.label("cat")
    f(f"call void @ccol_{xin}(ptr %x, i64 {nf}, i64 %nb, i32 {rule}, ptr %q, i64 %gs, i64 %ng)")
    f("br label %next")
    f.label("notcat")
    np_ = f.emit(f"getelementptr i8, ptr {nanc}, i64 %c64")
    nv = f.emit(f"load i8, ptr {np_}")
    f(f"%nc = xor i8 {nv}, -128")
    sp = f.emit(f"getelementptr i32, ptr {qsrc}, i64 %c64")
    f(f"%src = load i32, ptr {sp}")
    f("%hassrc = icmp sge i32 %src, 0")
    f("br i1 %hassrc, label %copy, label %bins")
    f.label("copy")
    s64 = f.emit("sext i32 %src to i64")
    so = f.emit(f"mul i64 {s64}, {G}")
    spp = f.emit(f"getelementptr i8, ptr %qb, i64 {so}")
    f(f"call void @scol_{xin}(ptr %x, i64 {nf}, i64 %nb, ptr {spp}, i8 %nc, ptr %q, i64 %gs, i64 %ng)")
    f("br label %next")
    f.label("bins")
    op = f.emit(f"getelementptr i64, ptr {qoff}, i64 %c64")
    ov = f.emit(f"load i64, ptr {op}")
    u = f.emit(f"getelementptr {xt}, ptr {qthr}, i64 {ov}")
    lp = f.emit(f"getelementptr i32, ptr {qlen}, i64 %c64")
    P = f.emit(f"load i32, ptr {lp}")
    args = f"ptr %x, i64 {nf}, i64 %nb, ptr {u}, i32 {P}, i8 %nc, ptr %q, i64 %gs, i64 %ng"
    if flavour == "avx2":  # P = 2 .. 256: the level tables (_quant_col_avx2)
        if xt == "double":  # (the first guess's float32 thresholds: none, the generic search)
            t32 = _field(f, "q_thr32", "ptr")
            u32 = f.emit(f"getelementptr float, ptr {t32}, i64 {ov}")
            f(f"%hast32 = icmp ne ptr {t32}, null")
            f("br i1 %hast32, label %avsw, label %gen")
            f.label("avsw")
        else:
            u32 = "null"
        # the next column, when it is this one's twin (q_src: the other NaN direction), is
        # written by the same pass (_quant_col_avx2) and skipped (%next2)
        f("%tc1 = add i32 %c, 1")
        f(f"%tin = icmp slt i32 %tc1, {ncols}")
        f("%tci = select i1 %tin, i32 %tc1, i32 %c")
        f("%tc64 = sext i32 %tci to i64")
        tsp = f.emit(f"getelementptr i32, ptr {qsrc}, i64 %tc64")
        tsrc = f.emit(f"icmp eq i32 {f.emit(f'load i32, ptr {tsp}')}, %c")
        tkp = f.emit(f"getelementptr i8, ptr {kind}, i64 %tc64")
        tnum = f.emit(f"icmp eq i8 {f.emit(f'load i8, ptr {tkp}')}, 0")
        f(f"%twin = and i1 %tin, {f.emit(f'and i1 {tsrc}, {tnum}')}")
        tnp = f.emit(f"getelementptr i8, ptr {nanc}, i64 %tc64")
        f(f"%nc2 = xor i8 {f.emit(f'load i8, ptr {tnp}')}, -128")
        cases = " ".join(f"i32 {P_}, label %at{P_}" for P_ in AVX2_TABLES)
        f(f"switch i32 {P}, label %gen [{cases}]")
        for P_ in AVX2_TABLES:
            f.label(f"at{P_}")
            f(f"br i1 %st, label %ats{P_}, label %atn{P_}")
            for lab, st in ((f"ats{P_}", 1), (f"atn{P_}", 0)):
                f.label(lab)
                f(f"call void @qcola_{xin}_{st}_{P_}({args}, ptr {u32}, i1 %twin, i8 %nc2)")
                f("br i1 %twin, label %next2, label %next")
        f.label("gen")
    if flavour == "avx512vbmi":  # P = 32 .. 256: the level tables (_quant_col_perm)
        cases = " ".join(f"i32 {16 * (nj + 1)}, label %pt{nj}" for nj in PERM_TABLES)
        f(f"switch i32 {P}, label %gen [{cases}]")
        for nj in PERM_TABLES:
            f.label(f"pt{nj}")
            f(f"br i1 %st, label %pts{nj}, label %ptn{nj}")
            for lab, st in ((f"pts{nj}", 1), (f"ptn{nj}", 0)):
                f.label(lab)
                f(f"call void @qcolp_{xin}_{st}_{nj}({args})")
                f("br label %next")
        f.label("gen")
    f("br i1 %st, label %bs, label %bn")
    f.label("bs")
    f(f"call void @qcol_{xin}_1(ptr %x, i64 {nf}, i64 %nb, ptr {u}, i32 {P}, i8 %nc, ptr %q, i64 %gs, i64 %ng)")
    f("br label %next")
    f.label("bn")
    f(f"call void @qcol_{xin}_0(ptr %x, i64 {nf}, i64 %nb, ptr {u}, i32 {P}, i8 %nc, ptr %q, i64 %gs, i64 %ng)")
    f("br label %next")
    f.label("next")
    f("%c1 = add i32 %c, 1")
    f(f"%cm = icmp slt i32 %c1, {ncols}")
    f("br i1 %cm, label %col, label %exit")
    if flavour == "avx2":
        f.label("next2")
        f("%c2 = add i32 %c, 2")
        f(f"%cm2 = icmp slt i32 %c2, {ncols}")
        f("br i1 %cm2, label %col, label %exit")
    f.label("exit")
    f("ret void")
    return (f"define internal void @quant_{xin}(ptr noalias %T, ptr noalias %X, i64 %r0, i64 %nb, "
            f"ptr noalias %qb, i64 %gs, i64 %ng) {{\n" + "\n".join(f.lines) + "\n}\n")


# -- the leaves ----------------------------------------------------------------------------------
def _add_leaves(f: _Fn, at: str, G: int, k8: str, g: str, sfx: str, nxt: str) -> None:
    """Emit the leaves of group `g`'s G rows at leaf positions k8 (<G x i8>): gathered and
    added to acc + g * G where %fused (one output, scalar leaves; a partial group by masked
    loads and stores), else stored as int32 into lidx + g * G. Expects %lv, %acc, %lidx, %nb,
    %fused; labels end in `sfx`; branches to label `nxt` at the end."""
    k32 = f.emit(f"zext <{G} x i8> {k8} to <{G} x i32>")
    r0 = f.emit(f"mul i64 {g}, {G}")
    f(f"br i1 %fused, label %addl{sfx}, label %storel{sfx}")
    f.label(f"storel{sfx}")
    lp = f.emit(f"getelementptr i32, ptr %lidx, i64 {r0}")
    f(f"store <{G} x i32> {k32}, ptr {lp}, align 4")
    f(f"br label %{nxt}")
    f.label(f"addl{sfx}")
    ptrs = f.emit(f"getelementptr {at}, ptr %lv, <{G} x i32> {k32}")
    sz = 4 if at == "float" else 8
    vals = f.emit(f"call <{G} x {at}> @{_gather(at, G)}(<{G} x ptr> {ptrs}, i32 {sz}, "
                  f"<{G} x i1> {_const_vec(G, 'i1', 'true')}, <{G} x {at}> poison)")
    ap = f.emit(f"getelementptr {at}, ptr %acc, i64 {r0}")
    rend = f.emit(f"add i64 {r0}, {G}")
    full = f.emit(f"icmp sle i64 {rend}, %nb")
    f(f"br i1 {full}, label %addfull{sfx}, label %addpart{sfx}")
    f.label(f"addfull{sfx}")
    a = f.emit(f"load <{G} x {at}>, ptr {ap}, align {sz}")
    s = f.emit(f"fadd <{G} x {at}> {a}, {vals}")
    f(f"store <{G} x {at}> {s}, ptr {ap}, align {sz}")
    f(f"br label %{nxt}")
    f.label(f"addpart{sfx}")
    rows = f.emit(f"add <{G} x i64> {_splat(f, 'i64', G, r0)}, {_iota(G)}")
    m = f.emit(f"icmp slt <{G} x i64> {rows}, {_splat(f, 'i64', G, '%nb')}")
    a2 = f.emit(f"call <{G} x {at}> @llvm.masked.load.v{G}{_vt(at)}.p0(ptr {ap}, i32 {sz}, "
                f"<{G} x i1> {m}, <{G} x {at}> poison)")
    s2 = f.emit(f"fadd <{G} x {at}> {a2}, {vals}")
    f(f"call void @llvm.masked.store.v{G}{_vt(at)}.p0(<{G} x {at}> {s2}, ptr {ap}, i32 {sz}, "
      f"<{G} x i1> {m})")
    f(f"br label %{nxt}")


# -- x86 AVX-512 VBMI steps (flavour "avx512vbmi") ---------------------------------------------
_PERMB = "llvm.x86.avx512.permvar.qi.512"       # vpermb: (table, index) -> table[index & 63]
_PERMI2B = "llvm.x86.avx512.vpermi2var.qi.512"  # vpermi2b: (lo, index, hi) -> (lo ++ hi)[index & 127]
#: 1 << i at byte i of every 8 (vpshufb's table: it looks up within each 16-byte lane)
_POW2 = "<" + ", ".join(f"i8 {(1 << (i % 8)) - 256 if i % 8 == 7 else 1 << (i % 8)}" for i in range(64)) + ">"


def _first_bytes(f: _Fn, ptr: str, n: int) -> str:
    """The first n (<= 64) bytes at ptr as a <64 x i8>, zeros after (a masked load: never reads
    past them; quant_impl.c's tc_zfirst)."""
    if n >= 64:
        return f.emit(f"load <64 x i8>, ptr {ptr}, align 1")
    mask = "<" + ", ".join(f"i1 {'true' if i < n else 'false'}" for i in range(64)) + ">"
    return f.emit(f"call <64 x i8> @llvm.masked.load.v64i8.p0(ptr {ptr}, i32 1, <64 x i1> {mask}, "
                  f"<64 x i8> zeroinitializer)")


def _lut(f: _Fn, table: list[str], k: str) -> str:
    """Each row's entry of a byte table (64 bytes a register: 1, 2 or 4 of them; every index k
    below the table's length): vpermb, vpermi2b, or two vpermi2b and a select by index bit 7
    (quant_impl.c's tc_zlut)."""
    V = "<64 x i8>"
    if len(table) == 1:
        return f.emit(f"call {V} @{_PERMB}({V} {table[0]}, {V} {k})")
    lo = f.emit(f"call {V} @{_PERMI2B}({V} {table[0]}, {V} {k}, {V} {table[1]})")
    if len(table) == 2:
        return lo
    hi = f.emit(f"call {V} @{_PERMI2B}({V} {table[2]}, {V} {k}, {V} {table[3]})")
    top = f.emit(f"icmp slt {V} {k}, zeroinitializer")
    return f.emit(f"select <64 x i1> {top}, {V} {hi}, {V} {lo}")


def _unpack_mask(n: int, lane: int, hi: bool) -> list[int]:
    """x86 unpack{lo,hi} as a shufflevector mask over two <n x T> vectors (lane: elements per
    128-bit lane): within each lane, the low (high) halves of a and b interleaved."""
    out = []
    for base in range(0, n, lane):
        for i in range(lane // 2):
            j = base + i + (lane // 2 if hi else 0)
            out += [j, n + j]
    return out


def _plane_network(w: int, B: int = 64) -> list[tuple[int, int, int, bool, int, int]]:
    """The unpack steps that turn w (4 or 8) byte planes of B bytes (64: AVX-512, 32: AVX2)
    into w vectors of values (quant_impl.c's tc_zleaf32 / tc_zleaf64, tc_qleaf32 /
    tc_qleaf64): (dst, a, b, hi, element bits, elements) over numbered vectors, planes 0..w-1
    first; the outputs are the last w numbers, in order."""
    steps = []
    n8, n16, n32 = B, B // 2, B // 4
    if w == 4:  # 4, 5: bytes 0-1 lo / hi; 6, 7: bytes 2-3; 8-11: the four float vectors
        steps += [(4, 0, 1, False, 8, n8), (5, 0, 1, True, 8, n8),
                  (6, 2, 3, False, 8, n8), (7, 2, 3, True, 8, n8),
                  (8, 4, 6, False, 16, n16), (9, 4, 6, True, 16, n16),
                  (10, 5, 7, False, 16, n16), (11, 5, 7, True, 16, n16)]
        return steps
    wv = [8 + i for i in range(8)]    # w[2b], w[2b + 1]: planes 2b, 2b + 1 lo / hi
    for b in range(4):
        steps += [(wv[2 * b], 2 * b, 2 * b + 1, False, 8, n8),
                  (wv[2 * b + 1], 2 * b, 2 * b + 1, True, 8, n8)]
    dv = [16 + i for i in range(8)]
    for dst, a, b, hi in ((0, 0, 2, False), (1, 4, 6, False), (2, 0, 2, True), (3, 4, 6, True),
                          (4, 1, 3, False), (5, 5, 7, False), (6, 1, 3, True), (7, 5, 7, True)):
        steps.append((dv[dst], wv[a], wv[b], hi, 16, n16))
    for s_ in range(4):
        steps += [(24 + 2 * s_, dv[2 * s_], dv[2 * s_ + 1], False, 32, n32),
                  (25 + 2 * s_, dv[2 * s_], dv[2 * s_ + 1], True, 32, n32)]
    return steps


def plane_order(w: int, B: int = 64) -> list[int]:
    """Where the unpack network of w byte planes of B bytes puts each input byte position: the
    output value slot (vector * (B / w) + lane) of position i, checked to hold bytes 0..w-1 of
    one position in order. Permuting the leaf slots by this order first (vpermb; AVX2: a
    constant shuffle) makes the outputs rows 0..B-1 in order."""
    vecs: dict[int, list[tuple[int, int]]] = {p: [(i, p) for i in range(B)] for p in range(w)}
    steps = _plane_network(w, B)
    for dst, a, b, hi, bits, n in steps:
        eb = bits // 8
        ea = [tuple(vecs[a][i * eb:(i + 1) * eb]) for i in range(n)]
        eb_ = [tuple(vecs[b][i * eb:(i + 1) * eb]) for i in range(n)]
        both = ea + eb_
        vecs[dst] = [x for m in _unpack_mask(n, 128 // bits, hi) for x in both[m]]
    outs = [d for d, *_ in steps][-w:]
    order = [-1] * B
    per = B // w
    for q, d in enumerate(outs):
        for j in range(per):
            val = vecs[d][j * w:(j + 1) * w]
            pos = {i for i, _ in val}
            if len(pos) != 1 or [b for _, b in val] != list(range(w)):
                raise AssertionError("the leaf plane network does not assemble whole values")
            order[pos.pop()] = q * per + j
    if sorted(order) != list(range(B)):
        raise AssertionError("the leaf plane network loses rows")
    return order


def _plane_leaves(f: _Fn, at: str, k: str, L: int, r0: str, B: int = 64) -> None:
    """A whole B-row group's leaves (slots k) from the tree's byte planes at %lb (L bytes
    each: the value's w bytes, arrays derived.leaf_planes) added to %acc + r0: k permuted
    (plane_order), each plane looked up (B 64: vpermb; 32: vpshufb, _lut32), the planes
    interleaved by unpacks into values in row order, one add per row."""
    w = 4 if at == "float" else 8
    order = plane_order(w, B)
    V = f"<{B} x i8>"
    if B == 64:
        perm = "<" + ", ".join(f"i8 {o}" for o in order) + ">"
        kp = f.emit(f"call {V} @{_PERMB}({V} {k}, {V} {perm})")
    else:
        perm = "<" + ", ".join(f"i32 {o}" for o in order) + ">"
        kp = f.emit(f"shufflevector {V} {k}, {V} poison, <{B} x i32> {perm}")
    vecs: dict[int, str] = {}
    for b in range(w):
        bp = f.emit(f"getelementptr i8, ptr %lb, i64 {b * L}")
        if B == 32:
            vecs[b] = _lut32(f, _tables16(f, bp, L), kp)
            continue
        if L <= 64:
            table = [_first_bytes(f, bp, L)]
        else:
            table = []
            for h in range(L // 64):
                hp = f.emit(f"getelementptr i8, ptr {bp}, i64 {64 * h}")
                table.append(f.emit(f"load {V}, ptr {hp}, align 1"))
        vecs[b] = _lut(f, table, kp)
    steps = _plane_network(w, B)
    for dst, a, b, hi, bits, n in steps:
        T = f"<{n} x i{bits}>"
        va = vecs[a] if bits == 8 else f.emit(f"bitcast {V} {vecs[a]} to {T}")
        vb = vecs[b] if bits == 8 else f.emit(f"bitcast {V} {vecs[b]} to {T}")
        mask = "<" + ", ".join(f"i32 {m}" for m in _unpack_mask(n, 128 // bits, hi)) + ">"
        r = f.emit(f"shufflevector {T} {va}, {T} {vb}, <{n} x i32> {mask}")
        vecs[dst] = r if bits == 8 else f.emit(f"bitcast {T} {r} to {V}")
    per = B // w
    sz = w
    for q, d in enumerate([d for d, *_ in steps][-w:]):
        VT = f"<{per} x {at}>"
        val = f.emit(f"bitcast {V} {vecs[d]} to {VT}")
        ro = f.emit(f"add i64 {r0}, {q * per}")
        ap = f.emit(f"getelementptr {at}, ptr %acc, i64 {ro}")
        a = f.emit(f"load {VT}, ptr {ap}, align {sz}")
        s_ = f.emit(f"fadd {VT} {a}, {val}")
        f(f"store {VT} {s_}, ptr {ap}, align {sz}")


# -- x86 AVX2 steps (flavour "avx2") -----------------------------------------------------------
_PSHUFB = "llvm.x86.avx2.pshuf.b"     # vpshufb: (table, index) -> table[index & 15] per 16-byte lane
_PBLENDVB = "llvm.x86.avx2.pblendvb"  # vpblendvb: (a, b, mask) -> b where the mask byte's bit 7


def _tables16(f: _Fn, ptr: str, n: int) -> list[str]:
    """A byte table of n entries at ptr (n a power of two) as max(1, n / 16) 16-byte pieces,
    each in both lanes of a <32 x i8> (vbroadcasti128); below 16 entries a masked load of the
    first n bytes, zeros after (never reads past them)."""
    out = []
    for i in range(max(1, n // 16)):
        p = ptr if i == 0 else f.emit(f"getelementptr i8, ptr {ptr}, i64 {16 * i}")
        if n >= 16:
            x = f.emit(f"load <16 x i8>, ptr {p}, align 1")
        else:
            mask = "<" + ", ".join(f"i1 {'true' if j < n else 'false'}" for j in range(16)) + ">"
            x = f.emit(f"call <16 x i8> @llvm.masked.load.v16i8.p0(ptr {p}, i32 1, <16 x i1> {mask}, "
                       f"<16 x i8> zeroinitializer)")
        out.append(f.emit(f"shufflevector <16 x i8> {x}, <16 x i8> poison, <32 x i32> "
                          f"<{', '.join(f'i32 {j % 16}' for j in range(32))}>"))
    return out


def _lut32(f: _Fn, table: list[str], k: str) -> str:
    """Each of 32 rows' entry of a byte table (_tables16: 1, 2, 4, 8 or 16 pieces of 16; every
    index k below the table's length): vpshufb of each piece by k & 15, then blends by bits 4..7
    of k (vpblendvb reads bit 7 of each byte: a 16-bit shift brings bit b there; bits that cross
    from the low byte never reach bit 7 of the high one), as quant_impl.c's tc_qplane."""
    V = "<32 x i8>"
    k4 = f.emit(f"and {V} {k}, {_const_vec(32, 'i8', 15)}")
    cur = [f.emit(f"call {V} @{_PSHUFB}({V} {t}, {V} {k4})") for t in table]
    b = 4
    while len(cur) > 1:
        if b == 7:
            m = k
        else:
            kw = f.emit(f"bitcast {V} {k} to <16 x i16>")
            sh = f.emit(f"shl <16 x i16> {kw}, {_const_vec(16, 'i16', 7 - b)}")
            m = f.emit(f"bitcast <16 x i16> {sh} to {V}")
        cur = [f.emit(f"call {V} @{_PBLENDVB}({V} {cur[i]}, {V} {cur[i + 1]}, {V} {m})")
               for i in range(0, len(cur), 2)]
        b += 1
    return cur[0]


#: 1 << i at byte i of every 8 (vpshufb's table for a category code's bit)
_POW2_32 = "<" + ", ".join(f"i8 {(1 << (i % 8)) - 256 if i % 8 == 7 else 1 << (i % 8)}" for i in range(32)) + ">"


def _cat_right32(f: _Fn, c: str, sets: list[str]) -> str:
    """Go right at a categorical node for 32 category codes c: the code's bit in the node's
    256-bit set (sets: its two 16-byte halves, _tables16) is clear; byte c >> 3 by two vpshufb
    and a blend by bit 4 of it, bit c & 7 by a vpshufb (quant_impl.c's tc_cat_right)."""
    V = "<32 x i8>"
    idx = f.emit(f"lshr {V} {c}, {_const_vec(32, 'i8', 3)}")
    byte = _lut32(f, sets, idx)
    sh = f.emit(f"and {V} {c}, {_const_vec(32, 'i8', 7)}")
    pw = f.emit(f"call {V} @{_PSHUFB}({V} {_POW2_32}, {V} {sh})")
    b1 = f.emit(f"and {V} {byte}, {pw}")
    return f.emit(f"icmp eq {V} {b1}, zeroinitializer")


# -- the heap walk -------------------------------------------------------------------------------
def _heap_levels(f: _Fn, D: int, G: int, qgs: list[str], thr: dict[int, list[str]],
                 lut: Any = None) -> list[str]:
    """The D levels of a heap tree for the groups whose bytes start at qgs (each node's column
    offset read once for all of them): each group's leaf slots (<G x i8>). lut (the x86
    flavours: _lut, _lut32): the row's node's column byte muxed down, its threshold looked up
    from thr[l] by the row's node index; else each node's byte difference muxed down."""
    vbmi = lut is not None
    V = f"<{G} x i8>"
    scale = {16: ("lshr", 1), 32: None, 64: ("shl", 1)}[G]
    ks = ["zeroinitializer"] * len(qgs)
    decisions: list[list[str]] = [[] for _ in qgs]
    for l in range(D):
        o = (1 << l) - 1
        diffs: list[list[Any]] = [[] for _ in qgs]
        for i in range(1 << l):
            s = o + i
            cp = f.emit(f"getelementptr i32, ptr %co, i64 {s}")
            c = f.emit(f"load i32, ptr {cp}")
            if scale and scale[0] == "lshr":
                c = f.emit(f"{scale[0]} i32 {c}, {scale[1]}")
            c64 = f.emit(f"zext i32 {c} to i64")
            # G = 64: the column's offset * 2 as an i16 index (x86: a scaled address, no shift)
            et = "i16" if G == 64 else "i8"
            ts = None
            if not (vbmi and l):
                tp = f.emit(f"getelementptr i8, ptr %tb, i64 {s}")
                t = f.emit(f"load i8, ptr {tp}")
                ts = _splat(f, "i8", G, t)
            for gi, qg in enumerate(qgs):
                vp = f.emit(f"getelementptr {et}, ptr {qg}, i64 {c64}")
                v = f.emit(f"load {V}, ptr {vp}, align {G}")
                if vbmi and l:  # the column bytes only: muxed below, then one compare
                    diffs[gi].append(v)
                elif l == 0:
                    diffs[gi].append((v, ts))
                else:
                    diffs[gi].append(f.emit(f"call {V} @llvm.ssub.sat.v{G}i8({V} {v}, {V} {ts})"))
        for gi in range(len(qgs)):
            dec, k = decisions[gi], ks[gi]
            if l == 0:
                r = f.emit(f"icmp sgt {V} {diffs[gi][0][0]}, {diffs[gi][0][1]}")
            else:
                cur = diffs[gi]
                for j in range(l):  # the oldest decision first: pairs differing in bit j of the path
                    half = len(cur) // 2
                    cur = [f.emit(f"select <{G} x i1> {dec[j]}, {V} {cur[m + half]}, {V} {cur[m]}")
                           for m in range(half)]
                if vbmi:  # the row's node's column byte against its threshold (vpermb by k)
                    t = lut(f, thr[l], k)
                    r = f.emit(f"icmp sgt {V} {cur[0]}, {t}")
                else:
                    r = f.emit(f"icmp sgt {V} {cur[0]}, zeroinitializer")
            dec.append(r)
            bit = f.emit(f"zext <{G} x i1> {r} to {V}")
            if k == "zeroinitializer":
                k = bit
            else:
                k2 = f.emit(f"add {V} {k}, {k}")
                k = f.emit(f"or {V} {k2}, {bit}")
            ks[gi] = k
    return [k if k != "zeroinitializer" else f.emit(f"add {V} zeroinitializer, zeroinitializer")
            for k in ks]


def _heap_leaves(f: _Fn, at: str, G: int, D: int, k: str, g: str, sfx: str, nxt: str,
                 vbmi: bool) -> None:
    """Group g's leaves at slots k: from the tree's byte planes (the x86 flavours, a whole
    group of a fused tree whose tables have planes), else _add_leaves; then to label nxt."""
    if vbmi:
        L = max(16, 1 << D)
        r0 = f.emit(f"mul i64 {g}, {G}")
        rend = f.emit(f"add i64 {r0}, {G}")
        full = f.emit(f"icmp sle i64 {rend}, %nb")
        haslb = f.emit("icmp ne ptr %lb, null")
        pl = f.emit(f"and i1 {full}, {haslb}")
        pl2 = f.emit(f"and i1 {pl}, %fused")
        f(f"br i1 {pl2}, label %planes{sfx}, label %gathered{sfx}")
        f.label(f"planes{sfx}")
        _plane_leaves(f, at, k, L, r0, G)
        f(f"br label %{nxt}")
        f.label(f"gathered{sfx}")
    _add_leaves(f, at, G, k, g, sfx, nxt)


#: avx512vbmi: the heap walk takes two groups at once (trees of depth <= 6)
HEAP_PAIRS = True


def _heap(D: int, at: str, G: int, flavour: str = "generic") -> str:
    """define @heap<D>(qb, gs, ng, co, tb, lv, acc, lidx, nb, fused, lb): one heap tree of depth
    D over ng groups of G rows. Generic: at level l each node's byte difference (saturating
    subtract of its threshold) is muxed down to the row's node. avx512vbmi: the row's node's
    column byte is muxed down instead and its threshold looked up by the row's node index (one
    vpermb of the level's <= 64 thresholds, quant_impl.c's tc_zlevel2), two groups at once
    (each node's offset read once, two independent chains; zheap_d), the leaves of a whole
    group from the tree's byte planes lb (when not null: tc_zleaf32 / tc_zleaf64). avx2: the
    same with 32-row groups, a group at a time, as the C kernel's AVX2 walk (qheap_d): the
    thresholds by vpshufb 16 a lookup and blends by the index's bits (tc_qlevel, tc_qplane),
    the leaves from the byte planes likewise (tc_qleaf32 / tc_qleaf64). The same signed byte
    compare (ssub.sat(v, t) > 0 iff v > t), the same leaf slots and values."""
    f = _Fn()
    vbmi = flavour in ("avx512vbmi", "avx2")
    lut = {"avx512vbmi": _lut, "avx2": _lut32}.get(flavour)
    f.label("entry")
    thr: dict[int, list[str]] = {}
    if flavour == "avx2":  # each level's thresholds, 16 a piece, once per tree
        for l in range(1, D):
            tp = f.emit(f"getelementptr i8, ptr %tb, i64 {(1 << l) - 1}")
            thr[l] = _tables16(f, tp, 1 << l)
    elif vbmi:  # each level's thresholds, once per tree
        for l in range(1, D):
            n = 1 << l
            tp = f.emit(f"getelementptr i8, ptr %tb, i64 {n - 1}")
            if n <= 64:
                thr[l] = [_first_bytes(f, tp, n)]
            else:
                thr[l] = []
                for h in range(n // 64):
                    hp = f.emit(f"getelementptr i8, ptr {tp}, i64 {64 * h}")
                    thr[l].append(f.emit(f"load <64 x i8>, ptr {hp}, align 1"))
    if flavour == "avx512vbmi" and HEAP_PAIRS and D <= 6:  # (deeper: a group at a time, as zheap_deep)
        f("%any2 = icmp uge i64 %ng, 2")
        f("br i1 %any2, label %pair, label %single")
        f.label("pair")
        f("%gp = phi i64 [0, %entry], [%gp2, %pnext]")
        f("%gpb = add i64 %gp, 1")
        f("%qpo = mul i64 %gp, %gs")
        f("%qpa = getelementptr i8, ptr %qb, i64 %qpo")
        f("%qpb = getelementptr i8, ptr %qpa, i64 %gs")
        ka, kb = _heap_levels(f, D, G, ["%qpa", "%qpb"], thr, lut)
        _heap_leaves(f, at, G, D, ka, "%gp", "pa", "pmid", vbmi)
        f.label("pmid")
        _heap_leaves(f, at, G, D, kb, "%gpb", "pb", "pnext", vbmi)
        f.label("pnext")
        f("%gp2 = add i64 %gp, 2")
        f("%gp4 = add i64 %gp, 4")
        f("%pm = icmp ule i64 %gp4, %ng")
        f("br i1 %pm, label %pair, label %single")
        f.label("single")  # the last group when ng is odd
        f("%gs0 = phi i64 [0, %entry], [%gp2, %pnext]")
        f("%one = icmp ult i64 %gs0, %ng")
        f("br i1 %one, label %grp, label %exit")
        start = "[%gs0, %single]"
    else:  # (the thresholds above stay in the entry block)
        f("br label %grp")
        start = "[0, %entry]"
    f.label("grp")
    f(f"%g = phi i64 {start}, [%g1, %gnext]")
    f("%qo = mul i64 %g, %gs")
    f("%qg = getelementptr i8, ptr %qb, i64 %qo")
    (k,) = _heap_levels(f, D, G, ["%qg"], thr, lut)
    _heap_leaves(f, at, G, D, k, "%g", "", "gnext", vbmi)
    f.label("gnext")
    f("%g1 = add i64 %g, 1")
    f("%gm = icmp ult i64 %g1, %ng")
    f("br i1 %gm, label %grp, label %exit")
    f.label("exit")
    f("ret void")
    return (f"define internal void @heap{D}(ptr noalias %qb, i64 %gs, i64 %ng, ptr noalias %co, "
            f"ptr noalias %tb, ptr noalias %lv, ptr noalias %acc, ptr noalias %lidx, i64 %nb, "
            f"i1 %fused, ptr noalias %lb) {{\n" + "\n".join(f.lines) + "\n}\n")


# -- the interval sweep --------------------------------------------------------------------------
def _sweep(at: str, G: int, NG: int, flavour: str = "generic", name: str = "sweep") -> str:
    """define @sweep(qb, gs, ng, co, tb, lo1, hi, cat, sets, nn, lv, acc, lidx, nb, fused): one
    tree's interval sweep (nn >= 1 nodes sorted by interval start), NG groups of G rows at once
    while NG groups are left, the rest (NG > 1) by @sweep1 (the same, a group at a time: a
    short batch sweeps only the groups that hold its rows). avx512vbmi: pos = select(right and lo <= pos,
    umax(pos, hi), pos), the shape x86 lowers to a masked compare and a masked byte max
    (quant_impl.c's tc_zsweep_g); the same positions as umax(pos, select(.., hi, 0)) (pos >= 0);
    a categorical node's set byte by vpermb instead of a gather. avx2: the set's bit by vpshufb
    (tc_cat_right), no gathers."""
    f = _Fn()
    vbmi = flavour == "avx512vbmi"
    avx2 = flavour == "avx2"
    V = f"<{G} x i8>"
    scale = {16: ("lshr", 1), 32: None, 64: ("shl", 1)}[G]
    f.label("entry")
    if avx2:  # whether the tree has a categorical node: else the loop without their branch
        f("br label %scan")
        f.label("scan")
        f("%si = phi i64 [0, %entry], [%si1, %scan]")
        f("%sa = phi i1 [false, %entry], [%sa1, %scan]")
        sp_ = f.emit("getelementptr i32, ptr %cat, i64 %si")
        sc = f.emit(f"icmp sge i32 {f.emit(f'load i32, ptr {sp_}')}, 0")
        f(f"%sa1 = or i1 %sa, {sc}")
        f("%si1 = add i64 %si, 1")
        f("%sm = icmp ult i64 %si1, %nn")
        f("br i1 %sm, label %scan, label %scanned")
        f.label("scanned")
    f(f"%any = icmp uge i64 %ng, {NG}")
    f("br i1 %any, label %chunk, label %tail")
    f.label("chunk")
    f(f"%c0 = phi i64 [0, %{'scanned' if avx2 else 'entry'}], [%cn, %cnext]")
    f("%qo = mul i64 %c0, %gs")
    f("%q0 = getelementptr i8, ptr %qb, i64 %qo")
    if avx2:
        f("br i1 %sa1, label %node, label %nnode")
        # numeric nodes only: r = v > t, pos = max(pos, select(r and pos > lo - 1, hi, 0)),
        # no branch in the loop (no phi of i1 vectors: LLVM turned that into a shift and a
        # compare a group)
        f.label("nnode")
        f("%ni = phi i64 [0, %chunk], [%ni1, %nnode]")
        for j in range(NG):
            f(f"%npos{j} = phi {V} [zeroinitializer, %chunk], [%nposn{j}, %nnode]")
        cp_ = f.emit("getelementptr i32, ptr %co, i64 %ni")
        c64_ = f.emit(f"zext i32 {f.emit(f'load i32, ptr {cp_}')} to i64")
        tp_ = f.emit("getelementptr i8, ptr %tb, i64 %ni")
        ts_ = _splat(f, "i8", G, f.emit(f"load i8, ptr {tp_}"))
        lp_ = f.emit("getelementptr i8, ptr %lo1, i64 %ni")
        lo_ = _splat(f, "i8", G, f.emit(f"load i8, ptr {lp_}"))
        hp_ = f.emit("getelementptr i8, ptr %hi, i64 %ni")
        hi_ = _splat(f, "i8", G, f.emit(f"load i8, ptr {hp_}"))
        for j in range(NG):
            base = f.emit(f"getelementptr i8, ptr %q0, i64 {c64_}")
            if j:
                base = f.emit(f"getelementptr i8, ptr {base}, i64 {f.emit(f'mul i64 %gs, {j}')}")
            v_ = f.emit(f"load {V}, ptr {base}, align {G}")
            r_ = f.emit(f"icmp sgt {V} {v_}, {ts_}")
            le_ = f.emit(f"icmp sgt {V} %npos{j}, {lo_}")
            both_ = f.emit(f"and <{G} x i1> {r_}, {le_}")
            hv_ = f.emit(f"select <{G} x i1> {both_}, {V} {hi_}, {V} zeroinitializer")
            f(f"%nposn{j} = call {V} @llvm.umax.v{G}i8({V} %npos{j}, {V} {hv_})")
        f("%ni1 = add i64 %ni, 1")
        f("%nim = icmp ult i64 %ni1, %nn")
        f("br i1 %nim, label %nnode, label %leaves")
    else:
        f("br label %node")
    f.label("node")
    f("%i = phi i64 [0, %chunk], [%i1, %merge]")
    for j in range(NG):
        f(f"%pos{j} = phi {V} [zeroinitializer, %chunk], [%pn{j}, %merge]")
    cp = f.emit("getelementptr i32, ptr %co, i64 %i")
    c = f.emit(f"load i32, ptr {cp}")
    if scale:
        c = f.emit(f"{scale[0]} i32 {c}, {scale[1]}")
    c64 = f.emit(f"zext i32 {c} to i64")
    vs = []
    for j in range(NG):
        base = f.emit(f"getelementptr i8, ptr %q0, i64 {c64}")
        if j:
            gj = f.emit(f"mul i64 %gs, {j}")
            base = f.emit(f"getelementptr i8, ptr {base}, i64 {gj}")
        vs.append(f.emit(f"load {V}, ptr {base}, align {G}"))
    kp = f.emit("getelementptr i32, ptr %cat, i64 %i")
    f(f"%ct = load i32, ptr {kp}")
    f("%iscat = icmp sge i32 %ct, 0")
    f("br i1 %iscat, label %catn, label %numn")
    f.label("numn")
    tp = f.emit("getelementptr i8, ptr %tb, i64 %i")
    t = f.emit(f"load i8, ptr {tp}")
    ts = _splat(f, "i8", G, t)
    for j in range(NG):
        f(f"%rn{j} = icmp sgt {V} {vs[j]}, {ts}")
    f("br label %merge")
    f.label("catn")
    ct64 = f.emit("sext i32 %ct to i64")
    so = f.emit(f"mul i64 {ct64}, 32")
    sp = f.emit(f"getelementptr i8, ptr %sets, i64 {so}")
    if vbmi:  # the node's 32-byte set in a register; each row's byte c >> 3 by vpermb
        st = _first_bytes(f, sp, 32)
    if avx2:  # its two 16-byte halves, each in both lanes
        sets2 = _tables16(f, sp, 32)
    for j in range(NG):
        if avx2:
            f(f"%rc{j} = or <{G} x i1> {_cat_right32(f, vs[j], sets2)}, zeroinitializer")
            continue
        byi = f.emit(f"lshr {V} {vs[j]}, {_const_vec(G, 'i8', 3)}")
        if vbmi:
            by = f.emit(f"call {V} @{_PERMB}({V} {st}, {V} {byi})")
            sh = f.emit(f"and {V} {vs[j]}, {_const_vec(G, 'i8', 7)}")
            pw = f.emit(f"call {V} @llvm.x86.avx512.pshuf.b.512({V} {_POW2}, {V} {sh})")
            b1 = f.emit(f"and {V} {by}, {pw}")  # bit c & 7 of the byte, by vpshufb of 1 << i
            f(f"%rc{j} = icmp eq {V} {b1}, zeroinitializer")
            continue
        byz = f.emit(f"zext {V} {byi} to <{G} x i32>")
        bp = f.emit(f"getelementptr i8, ptr {sp}, <{G} x i32> {byz}")
        by = f.emit(f"call {V} @{_gather('i8', G)}(<{G} x ptr> {bp}, i32 1, "
                    f"<{G} x i1> {_const_vec(G, 'i1', 'true')}, {V} poison)")
        sh = f.emit(f"and {V} {vs[j]}, {_const_vec(G, 'i8', 7)}")
        bit = f.emit(f"lshr {V} {by}, {sh}")
        b1 = f.emit(f"and {V} {bit}, {_const_vec(G, 'i8', 1)}")
        f(f"%rc{j} = icmp eq {V} {b1}, zeroinitializer")
    f("br label %merge")
    f.label("merge")
    rs = [f.emit(f"phi <{G} x i1> [%rn{j}, %numn], [%rc{j}, %catn]") for j in range(NG)]
    lp = f.emit("getelementptr i8, ptr %lo1, i64 %i")
    lo = _splat(f, "i8", G, f.emit(f"load i8, ptr {lp}"))
    hp = f.emit("getelementptr i8, ptr %hi, i64 %i")
    hi = _splat(f, "i8", G, f.emit(f"load i8, ptr {hp}"))
    for j, r in enumerate(rs):
        le = f.emit(f"icmp sgt {V} %pos{j}, {lo}")
        both = f.emit(f"and <{G} x i1> {r}, {le}")
        if vbmi:
            mx = f.emit(f"call {V} @llvm.umax.v{G}i8({V} %pos{j}, {V} {hi})")
            f(f"%pn{j} = select <{G} x i1> {both}, {V} {mx}, {V} %pos{j}")
            continue
        hv = f.emit(f"select <{G} x i1> {both}, {V} {hi}, {V} zeroinitializer")
        f(f"%pn{j} = call {V} @llvm.umax.v{G}i8({V} %pos{j}, {V} {hv})")
    f("%i1 = add i64 %i, 1")
    f("%im = icmp ult i64 %i1, %nn")
    f("br i1 %im, label %node, label %leaves")
    f.label("leaves")
    for j in range(NG if avx2 else 0):  # the two loops' positions
        f(f"%pf{j} = phi {V} [%pn{j}, %merge], [%nposn{j}, %nnode]")
    # the chunk's groups' leaves, those holding a row
    for j in range(NG):
        f(f"%g{j} = add i64 %c0, {j}")
        f(f"%in{j} = icmp ult i64 %g{j}, %ng")
        nxt = f"lg{j + 1}pre" if j + 1 < NG else "cnext"
        f(f"br i1 %in{j}, label %lg{j}, label %cnext")
        f.label(f"lg{j}")
        _add_leaves(f, at, G, f"%pf{j}" if avx2 else f"%pn{j}", f"%g{j}", str(j), nxt)
        if j + 1 < NG:
            f.label(nxt)
    f.label("cnext")
    f(f"%cn = add i64 %c0, {NG}")
    f(f"%cn2 = add i64 %cn, {NG}")
    f("%cm = icmp ule i64 %cn2, %ng")
    f("br i1 %cm, label %chunk, label %tail")
    f.label("tail")  # fewer than NG groups left: a group at a time
    f(f"%ct0 = phi i64 [0, %{'scanned' if avx2 else 'entry'}], [%cn, %cnext]")
    if NG > 1:
        f("%left = icmp ult i64 %ct0, %ng")
        f("br i1 %left, label %rest, label %exit")
        f.label("rest")
        f("%tq = mul i64 %ct0, %gs")
        f("%tqb = getelementptr i8, ptr %qb, i64 %tq")
        f("%tng = sub i64 %ng, %ct0")
        f(f"%tr = mul i64 %ct0, {G}")
        f(f"%tacc = getelementptr {at}, ptr %acc, i64 %tr")
        f("%tlidx = getelementptr i32, ptr %lidx, i64 %tr")
        f("%tnb = sub i64 %nb, %tr")
        f("call void @sweep1(ptr %tqb, i64 %gs, i64 %tng, ptr %co, ptr %tb, ptr %lo1, ptr %hi, "
          "ptr %cat, ptr %sets, i64 %nn, ptr %lv, ptr %tacc, ptr %tlidx, i64 %tnb, i1 %fused)")
    f("br label %exit")
    f.label("exit")
    f("ret void")
    return (f"define internal void @{name}(ptr noalias %qb, i64 %gs, i64 %ng, ptr noalias %co, "
            f"ptr noalias %tb, ptr noalias %lo1, ptr noalias %hi, ptr noalias %cat, "
            f"ptr noalias %sets, i64 %nn, ptr noalias %lv, ptr noalias %acc, ptr noalias %lidx, "
            f"i64 %nb, i1 %fused) {{\n" + "\n".join(f.lines) + "\n}\n")


# -- the driver ----------------------------------------------------------------------------------
#: rows per block when the tables say 0 (auto): as the C kernel's byte walks (kernel.auto_block_rows)
DEFAULT_BLOCK = 512


def _driver(xt: str, at: str, G: int, NG: int) -> str:
    """tcv_scratch(T, n): the bytes of scratch tcv_run needs for n rows; tcv_run(T, X, x_bits, n,
    out, scratch): the kernel (0, or -1 for bad arguments), out: n rows of n_outputs margins."""
    CH = G * NG
    blk = f"""
define internal i64 @blockrows(ptr %T, i64 %n) {{
entry:
  %bp = getelementptr i8, ptr %T, i64 {_off('block_rows')}
  %b32 = load i32, ptr %bp
  %b0 = sext i32 %b32 to i64
  %pos = icmp sgt i64 %b0, 0
  %b1 = select i1 %pos, i64 %b0, i64 {DEFAULT_BLOCK}
  %nn = icmp sgt i64 %n, 0
  %n1 = select i1 %nn, i64 %n, i64 1
  %lt = icmp slt i64 %n1, %b1
  %b2 = select i1 %lt, i64 %n1, i64 %b1
  %b3 = add i64 %b2, {CH - 1}
  %b4 = udiv i64 %b3, {CH}
  %b5 = mul i64 %b4, {CH}
  ret i64 %b5
}}

define internal i64 @gstride(ptr %T) {{
entry:
  %cp = getelementptr i8, ptr %T, i64 {_off('q_ncols')}
  %c = load i32, ptr %cp
  %c64 = sext i32 %c to i64
  %pos = icmp sgt i64 %c64, 0
  %c1 = select i1 %pos, i64 %c64, i64 1
  %gs = mul i64 %c1, {G}
  ret i64 %gs
}}

define i64 @tcv_scratch(ptr %T, i64 %n) {{
entry:
  %B = call i64 @blockrows(ptr %T, i64 %n)
  %gs = call i64 @gstride(ptr %T)
  %ng = udiv i64 %B, {G}
  %qn = mul i64 %ng, %gs
  %li = mul i64 %B, 4
  %a = add i64 %qn, %li
  %b = add i64 %a, 256
  ret i64 %b
}}
"""
    f = _Fn()
    f.label("entry")
    f("%xok = icmp eq i32 %xbits, 32")
    f("%xok2 = icmp eq i32 %xbits, 64")
    f("%xgood = or i1 %xok, %xok2")
    f("%nneg = icmp slt i64 %n, 0")
    f("%bad = or i1 %nneg, %isnull")
    f("%xbad = xor i1 %xgood, true")
    f("%bad2 = or i1 %bad, %xbad")
    f("br i1 %bad2, label %fail, label %start")
    f.label("fail")
    f("ret i32 -1")
    f.label("start")
    f("%empty = icmp eq i64 %n, 0")
    f("br i1 %empty, label %done, label %setup")
    f.label("setup")
    f("%B = call i64 @blockrows(ptr %T, i64 %n)")
    f("%gs = call i64 @gstride(ptr %T)")
    f(f"%ngmax = udiv i64 %B, {G}")
    f("%sc = ptrtoint ptr %scratch to i64")
    f("%sc1 = add i64 %sc, 63")
    f("%sc2 = and i64 %sc1, -64")
    f("%sc3 = sub i64 %sc2, %sc")
    f("%qb = getelementptr i8, ptr %scratch, i64 %sc3")
    f("%qn = mul i64 %ngmax, %gs")
    f("%lo = add i64 %qn, 64")
    f("%lidx = getelementptr i8, ptr %qb, i64 %lo")
    no = f.emit(f"sext i32 {_field(f, 'n_outputs', 'i32')} to i64")
    f(f"%no = add i64 {no}, 0")
    f(f"%nt = add i64 {_field(f, 'n_trees', 'i64')}, 0")
    f(f"%quant = icmp ne i32 {_field(f, 'quant', 'i32')}, 0")
    f(f"%avg = icmp ne i32 {_field(f, 'average', 'i32')}, 0")
    f(f"%base = getelementptr i8, ptr {_field(f, 'base', 'ptr')}, i64 0")
    for name in ("tree_depth", "tree_node", "tree_leaf", "tree_out", "tree_width", "h_qcol",
                 "h_qthr", "leaf_values", "bv_nint", "bv_lo1", "bv_hi", "bv_leaf", "h_qcat",
                 "q_cat", "q_leafb", "q_leafb_off"):
        f(f"%{name} = getelementptr i8, ptr {_field(f, name, 'ptr')}, i64 0")
    # the heap trees' leaf byte planes (null where the tables have none): a tree's at
    # q_leafb + q_leafb_off[t]; without them the offsets are read from a zero on the stack
    f("%lbz = alloca i64")
    f("store i64 0, ptr %lbz")
    f("%haslb = icmp ne ptr %q_leafb, null")
    f("%lbop = select i1 %haslb, ptr %q_leafb_off, ptr %lbz")
    f(f"%ntf = sitofp i64 %nt to {at}")
    f("%one = icmp eq i64 %no, 1")
    f("br label %block")
    # ---- per block
    f.label("block")
    f("%r0 = phi i64 [0, %setup], [%r0n, %blockend]")
    f("%left = sub i64 %n, %r0")
    f("%short = icmp slt i64 %left, %B")
    f("%nb = select i1 %short, i64 %left, i64 %B")
    f(f"%ng0 = add i64 %nb, {G - 1}")
    f(f"%ng = udiv i64 %ng0, {G}")
    f("%abo = mul i64 %r0, %no")
    f(f"%ab = getelementptr {at}, ptr %out, i64 %abo")
    f("%nbno = mul i64 %nb, %no")
    f("br label %init")
    f.label("init")
    f("%ii = phi i64 [0, %block], [%ii1, %init]")
    f("%ik = urem i64 %ii, %no")
    f(f"%ibp = getelementptr {at}, ptr %base, i64 %ik")
    f(f"%ibv = load {at}, ptr %ibp")
    f(f"%iap = getelementptr {at}, ptr %ab, i64 %ii")
    f(f"store {at} %ibv, ptr %iap")
    f("%ii1 = add i64 %ii, 1")
    f("%im = icmp ult i64 %ii1, %nbno")
    f("br i1 %im, label %init, label %quantb")
    f.label("quantb")
    f("%x32 = icmp eq i32 %xbits, 32")
    f("br i1 %x32, label %q32, label %q64")
    f.label("q32")
    f("call void @quant_float(ptr %T, ptr %X, i64 %r0, i64 %nb, ptr %qb, i64 %gs, i64 %ng)")
    f("br label %trees")
    f.label("q64")
    f("call void @quant_double(ptr %T, ptr %X, i64 %r0, i64 %nb, ptr %qb, i64 %gs, i64 %ng)")
    f("br label %trees")
    # ---- per tree
    f.label("trees")
    f("%ntz = icmp sle i64 %nt, 0")
    f("br i1 %ntz, label %avgq, label %tree")
    f.label("tree")
    f("%t = phi i64 [0, %trees], [%t1, %tnext]")
    f("%twp = getelementptr i32, ptr %tree_width, i64 %t")
    f("%tw32 = load i32, ptr %twp")
    f("%tw = sext i32 %tw32 to i64")
    f("%top = getelementptr i32, ptr %tree_out, i64 %t")
    f("%to32 = load i32, ptr %top")
    f("%to = sext i32 %to32 to i64")
    f("%tnp = getelementptr i64, ptr %tree_node, i64 %t")
    f("%tn = load i64, ptr %tnp")
    f("%tlp = getelementptr i64, ptr %tree_leaf, i64 %t")
    f("%tl = load i64, ptr %tlp")
    f("%w1 = icmp eq i64 %tw, 1")
    f("%fused = and i1 %one, %w1")
    f("br i1 %quant, label %qtree, label %btree")
    f.label("qtree")
    f("%tdp = getelementptr i32, ptr %tree_depth, i64 %t")
    f("%td = load i32, ptr %tdp")
    f("%co = getelementptr i32, ptr %h_qcol, i64 %tn")
    f("%tb = getelementptr i8, ptr %h_qthr, i64 %tn")
    f(f"%qlv = getelementptr {at}, ptr %leaf_values, i64 %tl")
    f("%lbi = select i1 %haslb, i64 %t, i64 0")
    f("%lbopp = getelementptr i64, ptr %lbop, i64 %lbi")
    f("%lbo = load i64, ptr %lbopp")
    f("%lbt0 = getelementptr i8, ptr %q_leafb, i64 %lbo")
    f("%lbt = select i1 %haslb, ptr %lbt0, ptr null")
    cases = " ".join(f"i32 {d}, label %hd{d}" for d in range(1, 9))
    f(f"switch i32 %td, label %hd0 [{cases}]")
    for d in range(9):
        f.label(f"hd{d}")
        f(f"call void @heap{d}(ptr %qb, i64 %gs, i64 %ng, ptr %co, ptr %tb, ptr %qlv, ptr %ab, "
          "ptr %lidx, i64 %nb, i1 %fused, ptr %lbt)")
        f("br label %leaves")
    f.label("btree")
    f("%nnp = getelementptr i64, ptr %bv_nint, i64 %t")
    f("%nn = load i64, ptr %nnp")
    f(f"%blv = getelementptr {at}, ptr %bv_leaf, i64 %tl")
    f("%nnz = icmp sle i64 %nn, 0")
    f("br i1 %nnz, label %bleaf, label %bsweep")
    f.label("bsweep")
    f("%bco = getelementptr i32, ptr %h_qcol, i64 %tn")
    f("%btb = getelementptr i8, ptr %h_qthr, i64 %tn")
    f("%blo = getelementptr i8, ptr %bv_lo1, i64 %tn")
    f("%bhi = getelementptr i8, ptr %bv_hi, i64 %tn")
    f("%bct = getelementptr i32, ptr %h_qcat, i64 %tn")
    f("call void @sweep(ptr %qb, i64 %gs, i64 %ng, ptr %bco, ptr %btb, ptr %blo, ptr %bhi, "
      "ptr %bct, ptr %q_cat, i64 %nn, ptr %blv, ptr %ab, ptr %lidx, i64 %nb, i1 %fused)")
    f("br label %leaves")
    f.label("bleaf")  # a single leaf: every row's index 0, added below
    f("br label %zl")
    f.label("zl")
    f("%zr = phi i64 [0, %bleaf], [%zr1, %zl]")
    f("%zp = getelementptr i32, ptr %lidx, i64 %zr")
    f("store i32 0, ptr %zp")
    f("%zr1 = add i64 %zr, 1")
    f("%zm = icmp ult i64 %zr1, %nb")
    f("br i1 %zm, label %zl, label %slow")
    f.label("leaves")
    f("%lvv = phi ptr [%qlv, %hd0], " + ", ".join(f"[%qlv, %hd{d}]" for d in range(1, 9))
      + ", [%blv, %bsweep]")
    f("br i1 %fused, label %tnext, label %slow")
    # ---- leaf indices added row by row (several outputs, vector leaves, single-leaf trees)
    f.label("slow")
    f("%slv = phi ptr [%lvv, %leaves], [%blv, %zl]")
    f("br label %srow")
    f.label("srow")
    f("%sr = phi i64 [0, %slow], [%sr1, %srowend]")
    f("%slp = getelementptr i32, ptr %lidx, i64 %sr")
    f("%sl32 = load i32, ptr %slp")
    f("%sl = zext i32 %sl32 to i64")
    f("%slw = mul i64 %sl, %tw")
    f(f"%svp = getelementptr {at}, ptr %slv, i64 %slw")
    f("%sao = mul i64 %sr, %no")
    f("%sao2 = add i64 %sao, %to")
    f(f"%sap = getelementptr {at}, ptr %ab, i64 %sao2")
    f("br label %sj")
    f.label("sj")
    f("%j = phi i64 [0, %srow], [%j1, %sj]")
    f(f"%vjp = getelementptr {at}, ptr %svp, i64 %j")
    f(f"%vj = load {at}, ptr %vjp")
    f(f"%ajp = getelementptr {at}, ptr %sap, i64 %j")
    f(f"%aj = load {at}, ptr %ajp")
    f(f"%sj2 = fadd {at} %aj, %vj")
    f(f"store {at} %sj2, ptr %ajp")
    f("%j1 = add i64 %j, 1")
    f("%jm = icmp slt i64 %j1, %tw")
    f("br i1 %jm, label %sj, label %srowend")
    f.label("srowend")
    f("%sr1 = add i64 %sr, 1")
    f("%srm = icmp ult i64 %sr1, %nb")
    f("br i1 %srm, label %srow, label %tnext")
    f.label("tnext")
    f("%t1 = add i64 %t, 1")
    f("%tm = icmp slt i64 %t1, %nt")
    f("br i1 %tm, label %tree, label %avgq")
    # ---- averaging, next block
    f.label("avgq")
    f("br i1 %avg, label %avgl, label %blockend")
    f.label("avgl")
    f("%ai = phi i64 [0, %avgq], [%ai1, %avgl]")
    f(f"%aip = getelementptr {at}, ptr %ab, i64 %ai")
    f(f"%aiv = load {at}, ptr %aip")
    f(f"%aid = fdiv {at} %aiv, %ntf")
    f(f"store {at} %aid, ptr %aip")
    f("%ai1 = add i64 %ai, 1")
    f("%aim = icmp ult i64 %ai1, %nbno")
    f("br i1 %aim, label %avgl, label %blockend")
    f.label("blockend")
    f("%r0n = add i64 %r0, %nb")
    f("%more = icmp slt i64 %r0n, %n")
    f("br i1 %more, label %block, label %done")
    f.label("done")
    f("ret i32 0")
    body = "\n".join(f.lines).replace("%isnull", "%nullx")
    run = ("define i32 @tcv_run(ptr noalias %T, ptr noalias %X, i32 %xbits, i64 %n, "
           "ptr noalias %out, ptr noalias %scratch) {\n" + body + "\n}\n")
    # %nullx: a NULL buffer with rows to do
    run = run.replace("  %bad = or i1 %nneg, %nullx",
                      "  %xn = icmp eq ptr %X, null\n  %on = icmp eq ptr %out, null\n"
                      "  %sn = icmp eq ptr %scratch, null\n  %n0 = or i1 %xn, %on\n"
                      "  %n1 = or i1 %n0, %sn\n  %npos = icmp sgt i64 %n, 0\n"
                      "  %nullx = and i1 %n1, %npos\n  %bad = or i1 %nneg, %nullx")
    return blk + run


def module_ir(x_dtype: str, acc_dtype: str, G: int, NG: int = 2, QL: int = 16,
              flavour: str = "generic") -> str:
    """The whole kernel module for tables of input dtype `x_dtype` and accumulation dtype
    `acc_dtype`, G rows a byte vector (16, 32 or 64), NG groups a sweep, QL rows a quantiser
    vector; flavour (FLAVOURS): "generic" IR only, or "avx512vbmi" with x86 intrinsics for the
    hot steps (G 64, QL 16)."""
    if G not in (16, 32, 64) or G % QL:
        raise ValueError(f"unsupported vector shape G={G}, QL={QL}")
    if (flavour not in FLAVOURS or (flavour == "avx512vbmi" and (G, QL) != (64, 16))
            or (flavour == "avx2" and G != 32)):
        raise ValueError(f"unsupported llvm-vec flavour {flavour!r} for G={G}, QL={QL}")
    xt, at = _TY[x_dtype], _TY[acc_dtype]
    parts = [f"; treecomp arrays byte walks, llvm-vec kernel v{VERSION}: x {x_dtype}, acc {acc_dtype}, "
             f"G {G}, NG {NG}, QL {QL}, flavour {flavour}\n"]
    for xin in ("float", "double"):
        parts += [_quant_col(xin, xt, False, QL, G), _quant_col(xin, xt, True, QL, G),
                  _cat_col(xin, QL, G), _copy_col(xin, QL, G), _quantise(xin, xt, G, flavour)]
        if flavour == "avx512vbmi":
            parts += [_quant_col_perm(xin, xt, st, G, nj) for st in (False, True)
                      for nj in PERM_TABLES]
        if flavour == "avx2":
            parts += [_quant_col_avx2(xin, xt, st, G, P_) for st in (False, True)
                      for P_ in AVX2_TABLES]
    parts += [_heap(d, at, G, flavour) for d in range(9)]
    parts.append(_sweep(at, G, NG, flavour))
    if NG > 1:
        parts.append(_sweep(at, G, 1, flavour, "sweep1"))
    parts.append(_driver(xt, at, G, NG))
    return "\n".join(parts)


# -- JIT-compiled once per process, object code cached per machine -----------------------------
class VecKernel:
    """The JIT-compiled kernel for one (input dtype, accumulation dtype): ``scratch(T, n)`` (bytes
    of scratch a call of n rows needs) and ``run(T, X, x_bits, n, out, scratch)`` (ctypes
    functions: the GIL is released during the call), with the shape it was compiled for."""

    def __init__(self, engine: Any, shape: tuple[int, int, int], origin: str,
                 flavour: str = "generic"):
        self._engine = engine  # the JIT'd code lives as long as this object
        self.shape = shape
        #: the IR flavour it was compiled from (FLAVOURS)
        self.flavour = flavour
        #: "compiled" (this process ran LLVM) or "cached" (object code from toolchain's cache)
        self.origin = origin
        self.scratch = _SCRATCH(engine.get_function_address("tcv_scratch"))
        self.run = _RUN(engine.get_function_address("tcv_run"))


_SCRATCH = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)
_RUN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                        ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)
_KERNELS: dict[tuple, VecKernel] = {}
_LOCK = threading.Lock()
#: why the kernel cannot be had here (set by the first failed attempt; None: not tried or fine)
ERROR: str | None = None


def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


#: the IR's flavours: "generic" (portable vector IR: LLVM lowers it for any CPU), "avx2" (x86
#: AVX2 intrinsics for the steps generic IR has no fast form for: a heap level's thresholds and
#: the leaves' byte planes by vpshufb 16 bytes a lookup and vpblendvb by the index's bits, the
#: quantiser's level tables by vpermps, the sweep's category sets by vpshufb; 32-row groups),
#: chosen where the host has AVX2 but not the AVX-512 VBMI set, and "avx512vbmi" (vpermb byte
#: lookups of a level's thresholds and of the leaves' byte planes, vpermps / vpermi2pd lookups of
#: the quantiser's level tables; 64-row groups), chosen where the host has AVX-512 F, BW and VBMI
FLAVOURS = ("generic", "avx2", "avx512vbmi")
#: set to 1, the generic IR on every host (tests run every flavour on an AVX-512 VBMI host)
ENV_GENERIC = "TREECOMP_LLVM_VEC_GENERIC"
#: set to a flavour (FLAVOURS), that flavour where the host runs it (avx2: AVX2; avx512vbmi:
#: AVX-512 F, BW, VBMI), else the host's own; $TREECOMP_LLVM_VEC_GENERIC=1 still wins
ENV_FLAVOUR = "TREECOMP_LLVM_VEC_FLAVOUR"
#: the CPU features each x86 flavour needs
_NEEDS = {"avx2": {"+avx2"}, "avx512vbmi": {"+avx512f", "+avx512bw", "+avx512vbmi"}}


def host_flavour(features: str | None = None) -> str:
    """The IR flavour for this host (FLAVOURS): "avx512vbmi" where the CPU has AVX-512 F, BW
    and VBMI, "avx2" where it has AVX2, else "generic"; $TREECOMP_LLVM_VEC_GENERIC=1 makes it
    "generic", $TREECOMP_LLVM_VEC_FLAVOUR names one (where the CPU runs it)."""
    if os.environ.get(ENV_GENERIC, "") not in ("", "0"):
        return "generic"
    if features is None:
        try:
            features = _llvm().get_host_cpu_features().flatten()
        except Exception:  # llvmlite missing, or no feature list on this host: portable IR
            return "generic"
    flags = set(features.split(","))
    forced = os.environ.get(ENV_FLAVOUR, "")
    if forced == "generic":
        return "generic"
    if forced in _NEEDS and _NEEDS[forced] <= flags:
        return forced
    for flavour in ("avx512vbmi", "avx2"):
        if _NEEDS[flavour] <= flags:
            return flavour
    return "generic"


#: the avx512vbmi flavour's sweep: groups at once (independent chains through pos; the C
#: kernel's AVX-512 sweep takes 4 too). Measured (thread CPU time, one process, lgbm-binary,
#: 2026-11-28, shared Zen 4 guest): 4 groups 0.94x-0.97x the C kernel's speed, 2 0.76x-0.78x
VBMI_SWEEP_GROUPS = 4
#: the avx2 flavour's sweep: 32-row groups at once (the C kernel's AVX2 sweep takes 4)
AVX2_SWEEP_GROUPS = 4


def host_shape(features: str | None = None, flavour: str = "generic") -> tuple[int, int, int]:
    """(G, NG, QL) for this host and IR flavour: 64-row byte vectors where AVX-512 BW makes
    them one register, else 32 (two NEON / SSE registers, one AVX2 one); the sweep takes two
    groups at once (four in the x86 flavours); the quantiser 16 rows a vector (avx2: 8, an
    AVX2 register of float32)."""
    if flavour == "avx2":
        return 32, AVX2_SWEEP_GROUPS, 8
    if features is None:
        features = _llvm().get_host_cpu_features().flatten()
    flags = set(features.split(","))
    if "+avx512bw" in flags:
        return 64, VBMI_SWEEP_GROUPS if flavour == "avx512vbmi" else 2, 16
    return 32, 2, 16


#: vector extensions past AVX2 (x86-64-v3) that LLVM would otherwise use for the avx2 flavour's
#: code where the host has them (GFNI byte shifts, VEX VNNI, ...)
_PAST_AVX2 = ("avx512", "avx10", "gfni", "vaes", "vpclmulqdq", "avxvnni", "avxifma",
              "avxneconvert", "amx")


def flavour_features(features: str, flavour: str) -> str:
    """The target features the kernel of `flavour` is compiled with: the host's, but for the
    avx2 flavour without AVX-512 and the other vector extensions past AVX2 (_PAST_AVX2: its IR
    is written for 256-bit registers; what LLVM makes of it is then the same instructions on an
    AVX2-only host, on an AVX-512 host without VBMI, and here)."""
    if flavour != "avx2":
        return features
    return ",".join("-" + x[1:] if x.startswith("+") and x[1:].startswith(_PAST_AVX2) else x
                    for x in features.split(","))


def target() -> tuple[str, str, str]:
    """(triple, cpu, features) the kernel is compiled for: this host's."""
    llvm = _llvm()
    return (llvm.get_process_triple(), llvm.get_host_cpu_name(),
            llvm.get_host_cpu_features().flatten())


def _optimise(mod: Any, tm: Any) -> None:
    """A short pass list: the IR is written near its final shape (no loops to vectorise); these
    fold the splats and field loads and hoist what each loop does not change."""
    llvm = _llvm()
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pb = llvm.create_pass_builder(tm, pto)
    pm = llvm.create_new_module_pass_manager()
    for name in ("add_instruction_combine_pass", "add_simplify_cfg_pass", "add_licm_pass",
                 "add_early_cse_pass", "add_instruction_combine_pass"):
        add = getattr(pm, name, None)
        if add is not None:
            add()
    pm.run(mod, pb)


def vec_kernel(x_dtype: str, acc_dtype: str, shape: tuple[int, int, int] | None = None,
               flavour: str | None = None, features: str | None = None) -> VecKernel:
    """The kernel for tables of `x_dtype` and `acc_dtype` (float32 / float64), compiled for this
    host once per process (flavour: host_flavour() unless given); its object code is cached per
    machine (toolchain.cached: key = the IR text, llvmlite's version, the target), so a later
    process only loads it. CompileError when llvmlite cannot build it. `features`: target
    features instead of the host's (flavour_features(...): e.g. the generic IR as an AVX2-only
    host compiles it; never more than the host has)."""
    global ERROR
    trip, cpu, feats = target()
    flavour = flavour or host_flavour(feats)
    if shape is None:
        shape = host_shape(feats, flavour)
    if flavour == "avx512vbmi" and (shape[0], shape[2]) != (64, 16):
        flavour = "generic"  # the intrinsics' steps are written for 64-row groups
    if flavour == "avx2" and shape[0] != 32:
        flavour = "generic"  # and these for 32-row groups
    feats = flavour_features(features or feats, flavour)
    key = (x_dtype, acc_dtype, shape, flavour, feats)
    with _LOCK:
        k = _KERNELS.get(key)
        if k is not None:
            return k
        try:
            k = _compile(x_dtype, acc_dtype, shape, trip, cpu, feats, flavour)
        except CompileError as exc:
            ERROR = str(exc)
            raise
        _KERNELS[key] = k
        return k


def _compile(x_dtype: str, acc_dtype: str, shape: tuple[int, int, int], trip: str, cpu: str,
             feats: str, flavour: str = "generic") -> VecKernel:
    platform.check_platform("JIT-compiling the llvm-vec kernel")
    try:
        import llvmlite
        llvm = _llvm()
        text = module_ir(x_dtype, acc_dtype, *shape, flavour=flavour)
        mod = llvm.parse_assembly(text)
        mod.verify()
        tm = llvm.Target.from_triple(trip).create_target_machine(cpu=cpu, features=feats, opt=2)
    except Exception as exc:  # llvmlite missing or too old, a target LLVM lacks
        raise CompileError(f"the arrays backend's llvm-vec kernel cannot be built here: "
                           f"{type(exc).__name__}: {exc}") from None
    ckey = toolchain.cache_key("arrays-llvm-vec", VERSION, hashlib.sha256(text.encode()).hexdigest(),
                               llvmlite.__version__, trip, cpu, feats)  # (+ platform.host_key)
    made: dict[str, Any] = {}

    def build(path: Path) -> None:  # a cache miss: compile here, keep the object code
        _optimise(mod, tm)
        got: list[bytes] = []
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.set_object_cache(notify_func=lambda m, data: got.append(bytes(data)))
        engine.finalize_object()
        if not got:
            raise CompileError("LLVM produced no object code for the llvm-vec kernel")
        made["engine"] = engine
        path.write_bytes(got[0])

    try:
        path = toolchain.cached(ckey, ".o", build)
        if "engine" in made:
            return VecKernel(made["engine"], shape, "compiled", flavour)
        data = path.read_bytes()
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.set_object_cache(getbuffer_func=lambda m: data)
        engine.finalize_object()
        return VecKernel(engine, shape, "cached", flavour)
    except CompileError:
        raise
    except RuntimeError as exc:
        raise CompileError(f"LLVM rejected the llvm-vec kernel: {exc}") from None


_AVAILABLE: bool | None = None


def available() -> bool:
    """Whether llvmlite loads and targets this host (cheap: no kernel is compiled; isa="auto"
    asks this, and ArraysKernel falls back to the llvmlite walker should the kernel itself then
    fail to build)."""
    global _AVAILABLE, ERROR
    if _AVAILABLE is None:
        try:
            platform.check_platform("JIT-compiling the llvm-vec kernel")
            llvm = _llvm()
            trip, cpu, feats = target()
            llvm.Target.from_triple(trip).create_target_machine(cpu=cpu, features=feats, opt=2)
            _AVAILABLE = True
        except Exception as exc:  # llvmlite missing, broken, or without this target
            ERROR = f"llvmlite does not target this host: {type(exc).__name__}: {exc}"
            _AVAILABLE = False
    return _AVAILABLE


def run(k: VecKernel, tables: Any, X: Any, out: Any) -> None:
    """The kernel over rows X (C-contiguous float32 / float64) into out (n rows of margins in
    the accumulation dtype), with the packed tables `tables` (a ctypes reference to a
    native.CTables); scratch from numpy, per call (calls from several threads are safe)."""
    n = X.shape[0]
    need = k.scratch(tables, n)
    buf = np.empty(need + 64, np.uint8)
    rc = k.run(tables, X.ctypes.data, X.dtype.itemsize * 8, n, out.ctypes.data, buf.ctypes.data)
    if rc != 0:
        raise kernel_error(rc, "the arrays llvm-vec kernel")

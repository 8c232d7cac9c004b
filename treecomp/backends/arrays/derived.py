"""Tables derived from the arrays backend's validated tables each time a kernel loads.

Shape: the byte walks' columns (one per feature, chunk of <= 255 distinct thresholds and NaN
direction: q_feat / q_off / q_len / q_thr ..., each heap slot's column and threshold byte
h_qcol / h_qthr), the quantiser's level tables (64 floats per column), the heap leaves as byte
planes, the interval walk's per-node leaf intervals (bitvec_tables), the AVX-512 one-row walks'
trees-in-lanes tables (zrow_lanes, interval_lanes) and the deep path's 16-byte records plus
top heaps (deep_tables). Floating point: no arithmetic on values; thresholds are
only sorted and compared (-0.0 == 0.0 is one threshold), float64 thresholds also rounded to
float32 as the quantiser's first guess, float32 thresholds mapped to order-preserving int32 keys.
Everything is vectorised numpy (no per-node Python loops) over tables that validate() checked;
see runtime/kernels/quant_impl.c and arrays_impl.c for the walks that read them.

What a file stores, and why: the derived tables themselves are not stored (the C kernels index
with most of them, so a stored copy would need every index of every table checked against how
each walk uses it, and it could disagree with the thresholds it encodes). Only the results of
their two sorts are, the only steps above linear time (on 5,000 depth-8 trees the threshold
sort was most of a 0.6 s load): the distinct (feature, threshold) pairs of the splits and each
split's index among them (distinct_thresholds: "q_ufeat", "q_uthr", "q_uid"), and the interval
walk's node order (bitvec_tables: "bv_order"). Each is used only where a linear-time check, no
sort, proves it is exactly what the sort gives (distinct_thresholds, sort_order), else the
file is refused; everything is then derived from it as without it, so the derived tables are
the ones a sort gives (up to the sign of a zero threshold, which no comparison sees) and agree
with the thresholds whatever the file says. A file without them (formats 1 and 2, or a
caller's tables) is sorted as before.
"""

from __future__ import annotations

import numpy as np

from .tables import FF_CAT, FF_FEAT, FF_NANR, bad_table, excl_cumsum

#: thresholds per quantisation column: bins 0..255 fit a byte
QUANT_CHUNK = 255



def quant_chunk_size(n_thresholds: np.ndarray) -> np.ndarray:
    """Per feature of n distinct thresholds, how many a column takes: all of them up to
    QUANT_CHUNK, else chunks of one fewer, whose bins leave byte 255 free as a NaN code should
    the feature's nodes send NaN both ways (merge_nan_columns; XGBoost's hist method gives up to
    256 thresholds: as 255 + 1 they took three columns of the column mux, as 254 + 2 two)."""
    return np.where(n_thresholds > QUANT_CHUNK, QUANT_CHUNK - 1, QUANT_CHUNK)



def sort_order(order: np.ndarray | None, keys: tuple[np.ndarray, ...],
               what: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """np.lexsort(keys) (the last key primary; stable: equal keys by index) and the keys along
    it. The permutation is taken from `order` where it is exactly the sort's (checked in linear
    time, no sort: every index in range and, along it, the keys nondecreasing and equal keys in
    rising index order; strictly rising (keys, index) pairs also make every index appear once),
    computed where `order` is None; ArtifactError for an order that is not the sort's (a file's:
    format.SORTS). Keys hold no NaN (their order would be the sort's choice)."""
    n = len(keys[0])
    if order is None:
        order = np.lexsort(keys)
        return order, [k[order] for k in keys]
    if order.ndim != 1 or order.dtype.kind not in "iu" or len(order) != n:
        raise bad_table(f"the stored {what} order has the wrong length or type")
    if n and (int(order.min()) < 0 or int(order.max()) >= n):
        raise bad_table(f"the stored {what} order is not a permutation (an index out of range)")
    ok = order[1:] > order[:-1]                  # equal keys: in index order (stable)
    along = []
    for k in keys:                               # least significant first
        ks = k[order]
        along.append(ks)
        a, b = ks[:-1], ks[1:]
        ok &= b == a
        ok |= b > a
    if not ok.all():
        raise bad_table(f"the stored {what} order is not the sort of the {what} keys")
    return order, along


# -- the quantised walk's tables (derived from the heap tables when loading) --------------------
def distinct_thresholds(f: np.ndarray, t: np.ndarray,
                        stored: dict[str, np.ndarray] | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (feature, threshold) pairs of the real slots (features `f`, thresholds `t`,
    no NaN), sorted by feature then threshold (-0.0 == 0.0: one threshold), and each slot's
    index among them: (uf, ut, uid). The one sort of the byte walks' tables (on 5,000 depth-8
    trees most of a load), or, from a file (`stored`: "q_ufeat", "q_uthr", "q_uid", what this
    returned when it was written), checked in linear time without a sort to be exactly that
    result: the pairs strictly rising, every slot's pair the one its index names, every pair
    some slot's (ArtifactError otherwise). Only a zero's sign may differ from a sort's choice,
    which no comparison sees. Gathers from the small table of distinct pairs, no random access
    across the slots."""
    n = len(f)
    if stored is None:
        order = np.lexsort((t, f))
        fs, ts = f[order], t[order]
        new = np.ones(n, bool)
        np.not_equal(fs[1:], fs[:-1], out=new[1:])
        new[1:] |= ts[1:] != ts[:-1]
        uid = np.empty(n, np.int32 if n < 1 << 31 else np.int64)
        uid[order] = np.cumsum(new, dtype=uid.dtype) - 1
        return fs[new].astype(np.int32), ts[new], uid

    def bad(why: str) -> Exception:
        return bad_table(f"the stored distinct thresholds {why}")
    try:
        uf, ut, uid = stored["q_ufeat"], stored["q_uthr"], stored["q_uid"]
    except KeyError:
        raise bad("are incomplete") from None
    U = len(uf)
    if uid.ndim != 1 or len(uid) != n or uid.dtype.kind != "i" or uf.dtype != np.int32 \
            or ut.dtype != t.dtype or len(ut) != U or (U == 0) != (n == 0):
        raise bad("have the wrong shape or type")
    if n and (int(uid.min()) < 0 or int(uid.max()) >= U):
        raise bad("name a pair that is not there")
    rise = uf[1:] > uf[:-1]
    rise |= (uf[1:] == uf[:-1]) & (ut[1:] > ut[:-1])  # (NaN: never rising, never matched)
    if not rise.all():
        raise bad("are not strictly rising")
    if not (np.array_equal(uf.view(np.uint32)[uid], f) and np.array_equal(ut[uid], t)):
        raise bad("disagree with the thresholds")
    if n and not np.all(np.bincount(uid, minlength=U)):
        raise bad("hold a pair no split has")
    return uf, ut, uid


# -- the quantised walk's tables (derived from the heap tables when loading) --------------------
def quant_tables(h_ff: np.ndarray, h_thr: np.ndarray,
                 cat_sets: np.ndarray | None = None,
                 stored: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The column and node tables of the byte walks (runtime/kernels/quant_impl.c).

    Derived from the (validated) heap tables every time a kernel is loaded (vectorised, linear
    time but for the sort of the split thresholds: distinct_thresholds, whose result a file
    stores (`stored`, checked there) and the result's "sorted" holds, for the file).
    A column is (feature, chunk of consecutive distinct thresholds (quant_chunk_size), NaN
    direction); a node's byte is its threshold's index within its column; padding slots
    (threshold NaN) get 255, which no bin exceeds. NaN's bin (q_nanc) is the column's count
    (right of every node) or 0 (left of every node; 255 after merge_nan_columns); a column may
    copy another's bins (q_src), only NaN's differs.

    Categorical entries (the interval walk only; cat_sets: one row of 32 bytes per entry, see
    cat_byte_sets) read a column of category codes instead (q_kind 1, one per feature: the
    category for a valid value below 254, 254 for any other value, 255 for NaN); h_qcat is the
    entry's row in q_cat (-1 for numeric entries).
    """
    ff = h_ff.view(np.uint32)
    is_cat = (ff & FF_CAT) != 0
    real = ~np.isnan(h_thr) & ~is_cat
    every = bool(real.all())                        # (complete trees: no padding slot)
    ffr = ff if every else ff[real]
    t = h_thr if every else h_thr[real]
    f = ffr & np.uint32(FF_FEAT)
    H = len(h_ff)
    if not len(t) and not is_cat.any():
        return {}
    uf32, ut, inv = distinct_thresholds(f, t, stored)
    sorted_ = {"q_ufeat": uf32, "q_uthr": ut, "q_uid": inv}
    uf = uf32.astype(np.int64)
    fnew = np.ones(len(uf), bool)
    fnew[1:] = uf[1:] != uf[:-1]
    ffirst = np.flatnonzero(fnew)                  # each feature's first (uf is sorted)
    nthr = np.diff(np.append(ffirst, len(uf)))     # per feature
    rank = np.arange(len(uf)) - np.repeat(ffirst, nthr)
    size = np.repeat(quant_chunk_size(nthr), nthr)
    chunk, j = rank // size, rank % size
    # groups: distinct (feature, chunk), in sorted order (gkey rises along uf)
    gkey = uf * (1 << 24) + chunk
    gnew = np.ones(len(gkey), bool)
    gnew[1:] = gkey[1:] != gkey[:-1]
    gstart = np.flatnonzero(gnew)
    gcount = np.diff(np.append(gstart, len(gkey)))
    # columns: the (group, NaN direction) pairs some real slot has, in that order (no sort: a
    # slot's pair as the number 2 group + direction, marked present). Per distinct threshold
    # 2 group and its byte j (< 255) packed, so a slot gathers both at once
    v = (((np.cumsum(gnew) - 1) * 2) << 8 | j)[inv]
    skey = (v >> 8) + (ffr >> np.uint32(31))        # + NaN goes right
    present = np.bincount(skey, minlength=2 * len(gstart)) > 0
    ckeys = np.flatnonzero(present)
    if len(ckeys) >= 1 << 26:  # the kernel addresses columns as int32 byte offsets (col * 32)
        return {}
    slot_col = (np.cumsum(present, dtype=np.int32) - 1)[skey]
    slot_j = (v & 255).astype(np.uint8)
    g, c_nanr = ckeys >> 1, ckeys & 1
    c_f, c_chunk = uf[gstart[g]], chunk[gstart[g]]
    count = gcount[g]
    # a power of two > count (NaN padding after the thresholds), at least 16 (the AVX2
    # quantiser compares 16 at a time)
    P = np.maximum(16, np.int64(1) << np.ceil(np.log2(count + 1)).astype(np.int64))
    off = excl_cumsum(P)
    q_thr = np.full(int(off[-1]), np.nan, h_thr.dtype)
    idx = np.repeat(off[:-1], count) + (np.arange(int(count.sum())) - np.repeat(excl_cumsum(count)[:-1], count))
    q_thr[idx] = ut[np.repeat(gstart[g], count) + (idx - np.repeat(off[:-1], count))]
    if every:
        h_qcol, h_qthr = slot_col, slot_j
    else:
        h_qcol = np.zeros(H, np.int32)
        h_qthr = np.full(H, 255, np.uint8)
        h_qcol[real] = slot_col
        h_qthr[real] = slot_j
    # columns are sorted by (feature, chunk, NaN direction): the two directions are neighbours,
    # the second (NaN right) a copy of the first's bins (q_src) but for NaN's code (q_nanc)
    ncols = len(ckeys)
    same = np.zeros(ncols, bool)
    same[1:] = (c_f[1:] == c_f[:-1]) & (c_chunk[1:] == c_chunk[:-1])
    src = np.where(same, np.arange(ncols) - 1, -1)
    kind = np.zeros(ncols, np.uint8)
    h_qcat = np.full(H, -1, np.int32)
    q_cat = np.zeros((0, 32), np.uint8)
    if is_cat.any():  # category-code columns after the bin columns, one per feature
        cf = (ff[is_cat] & FF_FEAT).astype(np.int64)
        ufeat, cinv = np.unique(cf, return_inverse=True)
        h_qcol[is_cat] = ncols + cinv
        h_qthr[is_cat] = 0
        h_qcat[is_cat] = np.arange(int(is_cat.sum()))
        q_cat = np.ascontiguousarray(cat_sets[is_cat], np.uint8)
        n = len(ufeat)
        c_f = np.concatenate([c_f, ufeat])
        c_nanr = np.concatenate([c_nanr, np.zeros(n, np.int64)])
        src, kind = np.concatenate([src, np.full(n, -1)]), np.concatenate([kind, np.ones(n, np.uint8)])
        count = np.concatenate([count, np.zeros(n, np.int64)])
        P = np.concatenate([P, np.full(n, 16, np.int64)])       # an unused all-NaN table
        off = excl_cumsum(P)
        q_thr = np.concatenate([q_thr, np.full(16 * n, np.nan, h_thr.dtype)])
    return {"q_feat": c_f.astype(np.int32), "q_nanc": np.where(c_nanr == 1, count, 0).astype(np.uint8),
            "q_src": src.astype(np.int32),
            "q_off": off[:-1].astype(np.int64), "q_len": P.astype(np.int32),
            "q_count": count.astype(np.int32), "q_kind": kind, "q_thr": q_thr,
            "h_qcol": h_qcol, "h_qthr": h_qthr, "h_qcat": h_qcat, "q_cat": q_cat.reshape(-1),
            "sorted": sorted_}


def merge_nan_columns(q: dict[str, np.ndarray], max_cols: int) -> tuple[dict[str, np.ndarray], int, bool]:
    """The heap byte walk's columns for the column mux (quant_impl.c, tc_qlevelc): a feature
    whose nodes send NaN both ways has two columns (same bins, NaN's code 0 or the count); where
    its count is below 255 they become one column whose NaN code is 255 (no bin's: right of every
    node) and, after all such columns, a copy of its bins with NaN 0 for the node mux's NaN-left
    nodes. The column mux then covers only the first `n_mux` columns: a NaN-left node's column
    index byte there (h_qcix) carries bit 7, and the mux sends a row with code 255 left at it.

    Returns (tables, n_mux, merged); tables unchanged (n_mux: all columns) where nothing merges
    or the merged columns still exceed max_cols."""
    src, count, n = q["q_src"], q["q_count"], len(q["q_src"])
    b = np.flatnonzero((src >= 0) & (count <= 254))    # NaN-right columns that merge
    a = src[b]                                          # their NaN-left twins
    if not len(b) or n - len(a) > max_cols:
        return q, n, False
    base = np.ones(n, bool)
    base[a] = False
    order = np.concatenate([np.flatnonzero(base), a])  # new column i is old column order[i]
    new = np.empty(n, np.int64)
    new[order] = np.arange(n)
    n_mux = n - len(a)
    nanc = q["q_nanc"].copy()
    nanc[b] = 255
    srcn = np.where(src >= 0, new[np.maximum(src, 0)], -1)
    srcn[b] = -1                                        # merged: its own bins
    srcn[a] = new[b]                                    # the twins copy them
    out = dict(q)
    for k in ("q_feat", "q_off", "q_len", "q_count", "q_kind"):
        out[k] = q[k][order]
    out["q_nanc"], out["q_src"] = nanc[order], srcn[order].astype(np.int32)
    out["h_qcol"] = new[q["h_qcol"]].astype(np.int32)
    # the column mux's index: the merged column; bit 7 at the nodes that send NaN left there
    # (padding slots, threshold byte 255: 0)
    mux = np.arange(n)
    mux[a] = b
    flag = np.zeros(n, np.int64)
    flag[a] = 0x80
    old = q["h_qcol"]
    out["h_qcix"] = np.where(q["h_qthr"] == 255, 0, new[mux[old]] | flag[old]).astype(np.uint8)
    return out, n_mux, True


#: category codes of the byte walks: a valid category below this is itself; other values 254,
#: NaN 255 (quant_impl.c)
CAT_CODES = 254


def cat_byte_sets(A: dict[str, np.ndarray], nodes: np.ndarray) -> np.ndarray | None:
    """Each compact node's 256-bit "goes left" set over category codes (32 bytes, bit c of byte
    c >> 3): the node's own bits below its set size, cat_other_left for codes from there up to
    254 (invalid values), default_left for 255 (NaN). None if some set is larger than the codes
    and disagrees with cat_other_left above them (values >= 254 would then be misread)."""
    c_ff = A["c_ff"].view(np.uint32)[nodes]
    out = np.zeros((len(nodes), 32), np.uint8)
    cat = np.flatnonzero((c_ff & FF_CAT) != 0)
    if not len(cat):
        return out
    sets = A["c_cat"][nodes][cat].astype(np.int64)
    nw = A["cat_nwords"].astype(np.int64)[sets]
    woff = excl_cumsum(A["cat_nwords"].astype(np.int64))[:-1][sets]
    other = A["cat_other_left"][sets].astype(bool)

    def words(k: int) -> np.ndarray:  # word k of every set (0 past a set's end)
        has = nw > k
        return np.where(has, A["cat_words"][np.where(has, woff + k, 0)], 0).astype(np.uint32)
    W = np.stack([words(k) for k in range(8)], axis=1)                  # codes 0..255
    bits = np.unpackbits(W.view(np.uint8), axis=1, bitorder="little").astype(bool)
    # codes >= 254 stand for every value >= 254: a set reaching there must send them all
    # where invalid values go
    big = nw * 32 > CAT_CODES
    if big.any():
        want = np.where(other, np.uint32(0xFFFFFFFF), np.uint32(0))
        tail = bits[big, CAT_CODES:256] != other[big, None]
        if tail.any() or any(np.any((words(k) != want)[big & (nw > k)]) for k in range(8, int(nw.max()))):
            return None
    nbits = np.minimum(32 * nw, CAT_CODES)
    bits = np.where(np.arange(256)[None, :] >= nbits[:, None], other[:, None], bits)
    bits[:, CAT_CODES] = other
    bits[:, 255] = (c_ff[cat] & FF_NANR) == 0
    out[cat] = np.packbits(bits, axis=1, bitorder="little")
    return out


#: the interval walk's positions are signed bytes: lo - 1 >= -1 and hi <= 127 as they are for
#: trees of up to this many leaves; trees of up to 255 leaves take them biased (interval_bias)
INTERVAL_UNBIASED_LEAVES = 128


def interval_bias(nleaf: np.ndarray) -> int:
    """What the interval walk adds to its positions (bv_lo1, bv_hi, the sweep's start): 0 where
    every tree has <= 128 leaves, else -127 (trees of <= 255 leaves: lo - 1 in [-128, 126],
    positions in [-127, 127]; quant_impl.c's bvtree takes the leaf as pos + 127)."""
    return 0 if not len(nleaf) or int(nleaf.max()) <= INTERVAL_UNBIASED_LEAVES else -127


def bitvec_tables(A: dict[str, np.ndarray], order: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The interval walk's tables (quant_impl.c), derived from the (validated) compact tables
    when loading; every tree has <= 255 leaves (positions, lo - 1 and hi fit a signed byte, as
    they are up to 128 leaves, biased by interval_bias beyond: "bv_bias").

    Leaves are numbered left to right (in order); a node's left subtree holds the leaves
    [lo, hi). A row that goes right at a node cannot end in [lo, hi) (QuickScorer's leaf
    masks), and its exit leaf is the first leaf that no such interval covers: every leaf left of
    it lies in the left subtree of the node where its path and the exit path part, where the
    row went right; no node on the exit path covers the exit leaf. With each tree's nodes
    sorted by lo, a single sweep (pos = max(pos, hi) where the row goes right and lo <= pos)
    finds that first uncovered leaf.

    Returns "order" (compact node index, each tree's nodes sorted by lo: the one sort here;
    `order`, a file's, is used where sort_order finds it is exactly that sort's), "bv_lo1"
    (lo - 1) and "bv_hi" in that order, and "bv_leaf": the leaf vectors in left-to-right order.
    """
    # (temporaries of 8 bytes a node, each freed once used: peak memory of huge models)
    nint, nleaf = A["tree_nint"].astype(np.int64), A["tree_nleaf"].astype(np.int64)
    T, C = len(nint), len(A["c_ff"])
    coff = excl_cumsum(nint)
    cl, cr = A["c_left"], A["c_right"]                      # int32: ~child is the leaf index
    base = np.repeat(coff[:-1], nint)                       # global index of each tree's node 0
    gl, gr = np.where(cl >= 0, cl + base, -1), np.where(cr >= 0, cr + base, -1)
    del base
    # the levels top-down (children have larger indices than parents, so this terminates)
    frontier = coff[:-1][nint > 0]
    levels = []
    while frontier.size:
        levels.append(frontier)
        kids = np.concatenate([gl[frontier], gr[frontier]])
        frontier = kids[kids >= 0]
    nl = np.zeros(C, np.int64)                              # leaves below each node, bottom-up
    for fr in reversed(levels):
        nl[fr] = np.where(gl[fr] >= 0, nl[np.maximum(gl[fr], 0)], 1) + \
            np.where(gr[fr] >= 0, nl[np.maximum(gr[fr], 0)], 1)
    # a corrupt file could share a child between parents (validate only bounds each index):
    # every node reached exactly once and every leaf counted once, or the positions below
    # could leave the tree's leaves
    seen = np.concatenate(levels) if levels else np.zeros(0, np.int64)
    roots = coff[:-1][nint > 0]
    if len(seen) != C or np.any(np.bincount(seen, minlength=C) != 1) or np.any(nl[roots] != nleaf[nint > 0]):
        raise bad_table("a tree's nodes do not form a tree")
    del seen
    nl_left = np.where(gl >= 0, nl[np.maximum(gl, 0)], 1)
    del nl
    lo = np.zeros(C, np.int64)                              # first leaf below each node, top-down
    for fr in levels:
        a, b = gl[fr], gr[fr]
        lo[a[a >= 0]] = lo[fr[a >= 0]]
        lo[b[b >= 0]] = (lo[fr] + nl_left[fr])[b >= 0]
    del gl, gr, levels, frontier
    tree_of = np.repeat(np.arange(T), nint)
    order = sort_order(order, (lo, tree_of), "interval node")[0]
    # a leaf child's position: its parent's lo, plus the parent's left leaves if it is the right one
    loff = excl_cumsum(nleaf)
    leaf_pos = np.zeros(int(loff[-1]), np.int64)
    for child, right in ((cl, False), (cr, True)):
        is_leaf = child < 0
        leaf_pos[loff[tree_of[is_leaf]] + ~child[is_leaf]] = lo[is_leaf] + (nl_left[is_leaf] if right else 0)
    del tree_of, is_leaf
    bias = interval_bias(nleaf)
    bv_lo1 = (lo[order] - 1 + bias).astype(np.int8)
    bv_hi = ((lo + nl_left)[order] + bias).astype(np.int8)
    del lo, nl_left
    # leaf vectors to their positions (width w each; a one-leaf tree keeps its leaf 0)
    w = A["tree_width"].astype(np.int64)
    bv_leaf = np.zeros_like(A["leaf_values"])  # every entry is written (validate): zeros anyway
    if T and (w == 1).all():  # (one value a leaf: leaf i of the tree at loff moves to loff + pos)
        leaf_pos += np.repeat(loff[:-1], nleaf)
        bv_leaf[leaf_pos] = A["leaf_values"]
        return {"order": order, "bv_lo1": bv_lo1, "bv_hi": bv_hi, "bv_leaf": bv_leaf, "bv_bias": bias}
    leaf_tree = np.repeat(np.arange(T), nleaf)
    iw = w[leaf_tree]
    voff = excl_cumsum(nleaf * w)[leaf_tree]
    rank = np.arange(int(loff[-1])) - loff[leaf_tree]
    del leaf_tree
    j = np.arange(int(iw.sum())) - np.repeat(excl_cumsum(iw)[:-1], iw)
    src = np.repeat(voff + rank * iw, iw) + j
    del rank
    dst = np.repeat(voff + leaf_pos * iw, iw) + j
    del voff, leaf_pos, iw, j
    bv_leaf[dst] = A["leaf_values"][src]
    return {"order": order, "bv_lo1": bv_lo1, "bv_hi": bv_hi, "bv_leaf": bv_leaf, "bv_bias": bias}


def interval_masks(lo1: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per node of the interval walk (bitvec_tables' order) its left subtree's leaves [lo, hi)
    as bits of a uint64 (trees of <= 64 leaves), padded by 8 zeros: a row's exit leaf is the
    lowest bit no right-going node's mask covers (quant_impl.c, zbvrows_w1)."""
    def below(k: np.ndarray) -> np.ndarray:  # bits [0, k), k in [0, 64]
        low = (np.uint64(1) << np.minimum(k, 63).astype(np.uint64)) - np.uint64(1)
        return np.where(k >= 64, np.uint64(0xFFFFFFFFFFFFFFFF), low)
    m = below(hi.astype(np.int64)) & ~below(lo1.astype(np.int64) + 1)
    return np.concatenate([m, np.zeros(8, np.uint64)])


#: the AVX-512 few-row interval walk's categorical decisions (category_rows): at most this many
#: categorical nodes (a row's decision bits live on the kernel's stack: CAT_ROWS_MAX / 8 bytes)
#: and this many bytes of table
CAT_ROWS_MAX = 8192
CAT_ROWS_MAX_BYTES = 1 << 20


def code_rows(corder: np.ndarray, sets: np.ndarray, nct: int, W: int) -> np.ndarray:
    """Per category-code column j (< nct) and code c a row of W bytes whose bit k is set where
    categorical node k (k-th of corder / sets: its column's rank among the code columns, its
    32-byte set of left-going codes) reads column j and sends code c right; (nct * 256 * W,)."""
    right = np.unpackbits(sets, axis=1, bitorder="little") == 0  # (nodes, 256)
    catd = np.zeros((nct, 256, W), np.uint8)
    for j in range(nct):
        bits = np.packbits((right & (corder == j)[:, None]).T, axis=1, bitorder="little")
        catd[j, :, :bits.shape[1]] = bits
    return catd.reshape(-1)


def category_rows(h_qcol: np.ndarray, h_qcat: np.ndarray, q_kind: np.ndarray, q_cat: np.ndarray,
                  tree_node: np.ndarray, nint: np.ndarray) -> dict[str, np.ndarray] | None:
    """The AVX-512 few-row interval walk's categorical decisions (quant_impl.c, zbvrows_w1),
    by category code rather than by node: "bv_catd", per category-code column (q_kind 1, in
    column order) and code c (0..255) a row of W bytes whose bit k is set where categorical
    node k (h_qcat's numbering: node order, so a tree's categorical nodes are consecutive) reads
    that column and its set (q_cat) sends code c right (bit c clear, as tc_zcat_right); W a
    multiple of 64 with >= 16 bytes past the last node's (the walk's unaligned 8-byte loads).
    A row's decisions are the OR of its codes' rows, one per column; a tree's are that bit
    string's bits [k0, k0 + its categorical node count), deposited at its categorical nodes'
    positions, "bv_catk": per tree a 64-bit mask of them (trees of <= 64 nodes; bit i: node
    tree_node + i). None where the nodes' numbering is not so, or past CAT_ROWS_MAX nodes or
    CAT_ROWS_MAX_BYTES of table."""
    ncat = len(q_cat) // 32
    kind = np.asarray(q_kind) == 1
    nct = int(kind.sum())
    if ncat == 0 or nct == 0 or ncat > CAT_ROWS_MAX:
        return None
    W = ((ncat + 7) // 8 + 16 + 63) // 64 * 64
    if nct * 256 * W > CAT_ROWS_MAX_BYTES:
        return None
    is_cat = h_qcat >= 0
    nodes = np.flatnonzero(is_cat)
    if len(nodes) != ncat or np.any(h_qcat[nodes] != np.arange(ncat)):
        return None
    ordinal = np.cumsum(kind) - 1                       # a category column's rank among them
    col = h_qcol[nodes]
    if np.any(col < 0) or np.any(col >= len(kind)) or not np.all(kind[col]):
        return None
    catd = code_rows(ordinal[col], q_cat.reshape(ncat, 32), nct, W)
    T = len(nint)
    catk = np.zeros(T, np.uint64)
    tn = np.asarray(tree_node, np.int64)
    if np.any(np.diff(tn) < 0):
        return None
    tree = np.searchsorted(tn, nodes, side="right") - 1
    pos = nodes - tn[tree]
    if np.any(pos >= 64) or np.any(pos >= np.asarray(nint, np.int64)[tree]):
        return None
    np.bitwise_or.at(catk, tree, np.left_shift(np.uint64(1), pos.astype(np.uint64)))
    return {"bv_catd": catd, "bv_catk": catk}


def oblivious_heaps(h_qcol: np.ndarray, h_qthr: np.ndarray, heap: np.ndarray,
                    nint: np.ndarray) -> np.ndarray:
    """Per tree 1 where it is a heap whose every level's slots read one column and one threshold
    byte (CatBoost's symmetric trees, frontends/catboost.py), else 0: the AVX-512 byte walk then
    compares each level's column once against a broadcast byte (quant_impl.c, zobl) instead of
    selecting every row's node. Same column, same byte at every slot of a level: the same
    decisions as the heap walk, exactly. Vectorised over the trees of each depth (heap trees'
    slots lie in tree order: the arrays backend's hoff), levels compared as column blocks."""
    n = np.where(heap, nint, 0).astype(np.int64)
    T = len(n)
    out = np.zeros(T, np.uint8)
    if not len(h_qcol) or not T:
        return out
    start = excl_cumsum(n)
    ok = heap & (n > 0)
    depth = np.zeros(T, np.int64)
    depth[ok] = np.frexp(n[ok] + 1)[1] - 1          # n = 2^D - 1
    depths = np.flatnonzero(np.bincount(depth[ok], minlength=1))
    for D in (int(d) for d in depths):
        trees = np.flatnonzero(ok & (depth == D))
        S = (1 << D) - 1
        if len(trees) == T and int(start[-1]) == T * S:  # every tree this deep: a reshape
            c, b = h_qcol[:T * S].reshape(T, S), h_qthr[:T * S].reshape(T, S)
        else:
            idx = start[trees][:, None] + np.arange(S)[None, :]
            c, b = h_qcol[idx], h_qthr[idx]
        same = np.ones(len(trees), bool)
        for lv in range(D):
            a, e = (1 << lv) - 1, (1 << (lv + 1)) - 1
            same &= (c[:, a:e] == c[:, a:a + 1]).all(1) & (b[:, a:e] == b[:, a:a + 1]).all(1)
        out[trees] = same
    return out


def quant_levels(q_thr: np.ndarray, q_off: np.ndarray, q_len: np.ndarray) -> np.ndarray:
    """The quantiser's level tables, 64 floats per column (quant_impl.c, tc_qlanes8): of the
    float32 thresholds, or of float64 thresholds rounded to float32 (the first guess there).

    For a column of P sorted thresholds u (P a power of two >= 16, NaN padding after them),
    g1 = P / 8 and g2 = max(g1 / 8, 1): entries 0..6 are u[g1 i + g1 - 1] (level 1; 7 is
    unused), entry 8 + 8 j + b is u[g1 b + g2 j + g2 - 1] for j < g1 / g2 - 1 (level 2: table j,
    permuted by each row's level-1 count b), NaN elsewhere (never compared).
    """
    off, P = q_off.astype(np.int64), q_len.astype(np.int64)
    g1 = P // 8
    g2 = np.maximum(g1 // 8, 1)
    lv = np.full((len(off), 64), np.nan, np.float32)
    lv[:, :7] = q_thr[off[:, None] + g1[:, None] * np.arange(1, 8) - 1]
    j, b = np.arange(7)[None, :, None], np.arange(8)[None, None, :]
    o, g1_, g2_ = off[:, None, None], g1[:, None, None], g2[:, None, None]
    used = j < g1_ // g2_ - 1
    idx = np.where(used, o + g1_ * b + g2_ * j + g2_ - 1, 0)
    lv[:, 8:] = np.where(used, q_thr[idx], np.float32(np.nan)).reshape(len(off), 56)
    return lv.reshape(-1)


def leaf_planes(leaf_values: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float32 / float64 heap leaves (one per slot) as byte planes for the AVX2 quantised walk:
    per tree, L = max(16, 2^D) leaves (repeated below 16), plane p = byte p of every leaf, the
    value's 4 or 8 planes in order. Returns (bytes, per-tree offset). Vectorised over the trees
    of each depth: their (leaves, bytes) blocks transposed (all trees as deep and D >= 4: one
    transpose of the whole table)."""
    w = leaf_values.dtype.itemsize
    d = depth.astype(np.int64)
    n = np.int64(1) << d
    L = np.maximum(16, n)
    off = excl_cumsum(w * L)
    out = np.empty(int(off[-1]), np.uint8)
    b8 = leaf_values.view(np.uint8).reshape(-1, w)
    depths = np.flatnonzero(np.bincount(d, minlength=1))
    if len(depths) == 1 and int(n[0]) >= 16 and len(b8) == len(d) * int(n[0]):
        out[:] = b8.reshape(len(d), int(n[0]), w).transpose(0, 2, 1).reshape(-1)
        return out, off[:-1].astype(np.int64)
    loff = excl_cumsum(n)
    for D in (int(x) for x in depths):
        trees = np.flatnonzero(d == D)
        nn, LL = 1 << D, max(16, 1 << D)
        src = loff[trees][:, None] + (np.arange(LL) % nn)[None, :]
        block = b8[src].transpose(0, 2, 1).reshape(len(trees), w * LL)
        out[off[trees][:, None] + np.arange(w * LL)[None, :]] = block
    return out, off[:-1].astype(np.int64)



#: the heap byte walk muxes a level's bytes by column instead of by node (tc_qlevelc) where
#: the level has more nodes than the model has columns, up to this many columns
QCIX_MAX_COLS = 64
#: the AVX-512 few-row walk looks a row's bytes up in a 128-byte table (h_qc7, quant_impl.c
#: zrows_w1): without the column mux, models of up to this many columns
ZROW_MAX_COLS = 128

QUANT_ARRAYS = ("q_feat", "q_nanc", "q_off", "q_len", "q_count", "q_src", "q_thr", "h_qcol", "h_qthr")


HEAP_PAD = 64
#: tc_drec (arrays.c): the deep path's records, children as byte offsets
_DREC = np.dtype([("ff", "<i4"), ("tk", "<i4"), ("l", "<i4"), ("r", "<i4")])
#: deepest top heap of the deep path, and how full its levels must be (padding below leaves).
#: The AVX2 heap walk looks levels 0..5 up in registers and gathers below; on rf-deep (same
#: process, ns/row): complete levels only (K = 4..6) 472, K = 6 with half-full levels 453,
#: K = 7 466, K = 8 483 (the gathers cost more than the lockstep rounds they save)
DEEP_TOP_MAX = 6
DEEP_TOP_FULL = 0.5
#: rows walked in lockstep by the deep path (TC_DG in arrays_impl.c)
DEEP_GROUP = 8


def float_keys(v: np.ndarray) -> np.ndarray:
    """int32 keys of float32 values whose signed order is the values' order (arrays_impl.c,
    fkey): -0.0 is read as +0.0, then negative values get their magnitude bits flipped."""
    b = np.ascontiguousarray(v, np.float32).view(np.uint32).copy()
    b[b == 0x80000000] = 0
    return np.where(b >> 31 != 0, b ^ np.uint32(0x7FFFFFFF), b).astype(np.uint32).view(np.int32)


def deep_tables(A: dict[str, np.ndarray], c_left_g: np.ndarray, c_right_g: np.ndarray,
                 nf: int, top_max: int) -> dict | None:
    """The derived tables of the kernel's deep path for compact trees (arrays_impl.c, deep_s),
    or None where it does not apply (float64 input, no eligible tree, too many records or
    features for int32 byte offsets).

    Built from validated tables at load time, vectorised (a few numpy passes per top level, no
    sort), and never stored. Records: the compact internal nodes in c_nodes
    order, then from a power of two on one self-looping record per leaf of every compact tree
    (a gap of at most as many unused records); children are byte
    offsets, ff is the feature's byte offset in a feature-major group of DEEP_GROUP rows, the
    threshold is its order key (float_keys; NaN-goes-right bits in a separate array). A tree
    takes the path when it has no categorical split and no NaN threshold (a NaN has no key);
    its top heap covers the levels that are at least DEEP_TOP_FULL full (at most DEEP_TOP_MAX),
    padded below leaves above its depth K.

    Record order matters (all records shuffled: 1.5x slower on rf-deep) but the IR's preorder,
    left child next to its parent, is as good as a profile-guided one: hot child first by visit
    counts of 5,000 sample rows gave 1.02x slower on rf-deep and on 20 trees of ~20k nodes.
    """
    if A["c_thr"].dtype != np.float32:
        return None
    lay, nint, nleaf = A["tree_layout"], A["tree_nint"], A["tree_nleaf"]
    T = len(lay)
    C = len(A["c_ff"])
    compact = (lay == 1) & (nint > 0)
    if not compact.any():
        return None
    coff = excl_cumsum(np.where(lay == 1, nint, 0))
    loff = excl_cumsum(np.where(compact, nleaf, 0))
    # leaf records start at a power of two L (in records) above the internal ones and end
    # below 2L: a record is a leaf iff its byte offset has bit log2(16 L) set, so the lockstep
    # walk tests "all rows finished" with one AND per row (the gap is never touched)
    L = 1 << max(int(C), int(loff[-1]), 1).bit_length()
    n_rec = L + int(loff[-1])
    if 2 * L * _DREC.itemsize >= 1 << 31:  # byte offsets are int32
        return None
    ctrees = np.flatnonzero(lay == 1)
    ctree = np.repeat(ctrees, nint[ctrees])                        # tree of each compact record
    ff = A["c_ff"]
    slow = np.zeros(T, bool)  # categorical splits or NaN thresholds: the slot walk (compact_s)
    is_cat = (ff.view(np.uint32) & FF_CAT) != 0
    slow[ctree[is_cat | np.isnan(A["c_thr"])]] = True
    fast = compact & ~slow
    if not fast.any():
        return None
    leaf0 = L + loff[:-1]                                          # record of leaf 0 of tree t

    def rec_of(ch: np.ndarray) -> np.ndarray:                      # child code -> record index
        return np.where(ch >= 0, ch, leaf0[ctree] + ~ch)
    if nf * 4 * DEEP_GROUP >= 1 << 31:  # ff is a byte offset into a group of rows
        return None
    recs = np.zeros(n_rec, _DREC)
    recs["ff"][:C] = (ff.view(np.uint32) & FF_FEAT).astype(np.int64) * (4 * DEEP_GROUP)
    nanr = np.zeros(n_rec, np.uint8)
    nanr[:C] = (ff.view(np.uint32) & FF_NANR) != 0
    recs["tk"][:C] = float_keys(A["c_thr"])
    recs["l"][:C] = rec_of(c_left_g.astype(np.int64)) * _DREC.itemsize
    recs["r"][:C] = rec_of(c_right_g.astype(np.int64)) * _DREC.itemsize
    self_off = np.arange(L, n_rec, dtype=np.int64) * _DREC.itemsize
    recs["l"][L:] = self_off
    recs["r"][L:] = self_off

    # top levels of every fast tree at once: (tree, heap position, record) per level, leaves
    # not expanded
    ft = np.flatnonzero(fast)
    tr, pos, rec = ft, np.zeros(len(ft), np.int64), coff[:-1][ft]
    levels = []
    n_inner = np.zeros((T, top_max + 1), np.int64)  # internal nodes per tree and level
    for d in range(top_max + 1):
        levels.append((tr, pos, rec))
        inner = rec < L
        np.add.at(n_inner[:, d], tr[inner], 1)
        if d == top_max:
            break
        tr, pos, rec = tr[inner], pos[inner], rec[inner]
        tr = np.concatenate([tr, tr])
        rec = np.concatenate([recs["l"][rec], recs["r"][rec]]).astype(np.int64) // _DREC.itemsize
        pos = np.concatenate([2 * pos + 1, 2 * pos + 2])
    # K: every level above it at least DEEP_TOP_FULL full (a cheap heap step replaces a lockstep
    # round); a leaf above K becomes padding (NaN threshold, NaN goes left: every row goes left)
    # down to the leftmost exit below it, which holds the leaf
    full = n_inner >= DEEP_TOP_FULL * (np.int64(1) << np.arange(top_max + 1))
    K = np.where(fast, np.argmin(np.concatenate([full[:, :top_max], np.zeros((T, 1), bool)], 1), 1), 0)
    K = np.maximum(np.where(fast, 1, 0), K)   # the root is internal: at least one level
    topoff = excl_cumsum(np.where(fast, (np.int64(1) << K) - 1, 0))
    exitoff = excl_cumsum(np.where(fast, np.int64(1) << K, 0))
    top_ff = np.zeros(int(topoff[-1]) + HEAP_PAD, np.int32)
    # padding: feature 0, NaN goes left, key above every non-NaN key: every row goes left
    top_tk = np.full(int(topoff[-1]) + HEAP_PAD, np.iinfo(np.int32).max, np.int32)
    exits = np.full(int(exitoff[-1]), -1, np.int64)
    for d, (tr, pos, rec) in enumerate(levels):
        Kt = K[tr]
        inner = (d < Kt) & (rec < L)
        top_ff[topoff[tr[inner]] + pos[inner]] = ff[rec[inner]]
        top_tk[topoff[tr[inner]] + pos[inner]] = recs["tk"][rec[inner]]
        # exits: a node at depth K, or a leaf above it (every exit slot below it)
        at = (d == Kt) | ((d < Kt) & (rec >= L))
        span = np.int64(1) << (Kt[at] - d)
        first = ((pos[at] + 1) * span - 1) - ((np.int64(1) << Kt[at]) - 1)
        slot = np.repeat(exitoff[tr[at]] + first, span) + (
            np.arange(int(span.sum())) - np.repeat(excl_cumsum(span)[:-1], span))
        exits[slot] = np.repeat(rec[at] * _DREC.itemsize, span)
    if np.any(exits < 0):  # every exit slot is covered: a bug, not bad input
        raise AssertionError("deep path: incomplete top heap")
    return {"d_recs": recs, "d_topd": K.astype(np.int32), "d_topoff": topoff[:-1],
            "d_exitoff": exitoff[:-1], "d_leaf0": leaf0.astype(np.int64), "d_top_ff": top_ff,
            "d_top_tk": top_tk, "d_exit": exits.astype(np.int32), "d_nint": L, "d_nanr": nanr}


def zrow_slots(c7: np.ndarray, thr: np.ndarray, node: np.ndarray, depth: np.ndarray,
               use: np.ndarray, starts: tuple[int, ...]) -> np.ndarray:
    """Per tree 128 bytes a window of its heap's slots, 64-byte aligned (quant_impl.c, zslots,
    zrows_w1): for each window start s, slots [s, s + 64) of the tree's 2^depth - 1, their row-table
    indices (h_qc7), then their biased thresholds (h_qthr), each padded to 64 bytes with zeros
    (never compared); trees not in `use` all zeros. One window (0,) for trees of depth <= 6,
    four (0, 63, 127, 191) for depth 7 and 8: each load then lies in one cache line (a heap
    tree's slots mostly straddle two)."""
    n, W = len(node), len(starts)
    buf = np.zeros(n * W * 128 + 64, np.uint8)
    a = (-buf.ctypes.data) % 64
    zq = buf[a:a + n * W * 128].reshape(n, W, 2, 64)
    nslot = (np.int64(1) << depth.astype(np.int64)) - 1
    k = np.arange(64)
    for w, st in enumerate(starts):
        # window 0 of a deep tree: 63 slots (the next window starts at 63), as the kernel's masks
        end = np.minimum(nslot, starts[w + 1] if w + 1 < W else nslot)
        live = use[:, None] & (node[:, None] >= 0) & (st + k[None, :] < end[:, None])
        idx = np.where(live, node[:, None] + st + k[None, :], 0)
        zq[:, w, 0] = np.where(live, c7[idx], 0)
        zq[:, w, 1] = np.where(live, thr.view(np.uint8)[idx], 0)
    return zq.reshape(-1)


#: the lanes walk takes its last level from zrow_records' records in forests at least this deep
#: (the deepest tree's depth, up to 8; quant_impl.c, zlanes): one row of the 500-tree depth-6
#: XGBoost model, walk and adds 1.20x; 500 XGBoost trees of depth 5: 0.99x, of depth 4 / 3:
#: 0.72x / 0.79x (bench/row_pieces.py's pieces, Zen 4, 2026-11-28)
ZREC_DEPTH = 6
#: the deepest forests the lanes walk takes (levels 0-6 in lanes, level 7 from records)
ZLANES_MAX_DEPTH = 8


def zrow_records(c7: np.ndarray, thr: np.ndarray, node: np.ndarray, depth: np.ndarray,
                 leaf0: np.ndarray, values: np.ndarray, dm: int) -> np.ndarray:
    """The lanes walk's last level with its leaves (quant_impl.c, zlanes with h_zr), for the
    forests of zrow_lanes walked over dm levels (every tree's depth <= dm): per tree and node k
    of level dm - 1 (heap slot 2^(dm - 1) - 1 + k), a record of 16 bytes (float32 leaf values;
    32 for float64): the slot's row-table index (h_qc7) and biased threshold (h_qthr) in bytes 0
    and 1 (0 and 127 past a tree's slots: always left), then the two leaf values the slot's
    decision picks between, at 8 (left) and 8 + the value's size (right): leaf (2 k + d) >>
    (dm - depth) of the tree's 2^depth in heap order. So one row reads per tree one record, one
    cache line, for its last level and its leaf, not the level's slots for 64 trees and a line
    of the tree's leaf table; 64-byte aligned, 2^(dm - 1) records a tree."""
    n, K = len(node), 1 << (dm - 1)
    isz = values.dtype.itemsize
    rz = 16 if isz == 4 else 32
    buf = np.zeros(n * K * rz + 64, np.uint8)
    a = (-buf.ctypes.data) % 64
    rec = buf[a:a + n * K * rz].reshape(n, K, rz)
    k = np.arange(K, dtype=np.int64)
    slot = (K - 1) + k
    d = depth.astype(np.int64)
    live = (node[:, None] >= 0) & (slot[None, :] < ((np.int64(1) << d) - 1)[:, None])
    idx = np.where(live, node.astype(np.int64)[:, None] + slot[None, :], 0)
    rec[:, :, 0] = np.where(live, c7[idx], 0)
    rec[:, :, 1] = np.where(live, thr.view(np.uint8)[idx], 0x7F)
    sh = (dm - d)[:, None]
    base = leaf0.astype(np.int64)[:, None]
    for side in (0, 1):
        v = values[base + ((2 * k[None, :] + side) >> sh)]
        rec[:, :, 8 + side * isz:8 + (side + 1) * isz] = v.view(np.uint8).reshape(n, K, isz)
    return rec.reshape(-1)


#: forests of fewer heaps walk one row eight trees at a time, not 64 in lanes (quant_impl.c,
#: TC_ZLANES_TAIL: a last group of fewer than 32 trees does too); no table below this
ZLANES_MIN_TREES = 32


def zrow_lanes(c7: np.ndarray, thr: np.ndarray, node: np.ndarray, depth: np.ndarray,
               nslots: int = 63) -> np.ndarray:
    """The one-row walk with 64 trees in a vector's lanes (quant_impl.c, zlanes), for forests
    whose every tree is a heap of depth <= 8 (ZLANES_MAX_DEPTH): per group of 64 consecutive
    trees (the last one padded), nslots slots of 128 bytes, 64-byte aligned: slot s's row-table index (h_qc7) for each
    of the group's 64 trees, then their biased thresholds (h_qthr). A slot past a tree's
    2^depth - 1 (and every slot of a padding lane) holds index 0 and threshold 127, which no
    byte exceeds: the row goes left there, so a tree of depth D < 6 ends at its leaf << (6 - D).
    nslots: a group's slots, 63 (levels 0-5) or 127 (levels 0-6, for forests of depth 8, whose
    last level comes from zrow_records)."""
    n = len(node)
    groups = (n + 63) // 64
    buf = np.zeros(groups * nslots * 128 + 64, np.uint8)
    a = (-buf.ctypes.data) % 64
    zt = buf[a:a + groups * nslots * 128].reshape(groups, nslots, 2, 64)
    zt[:, :, 1, :] = 0x7F
    s = np.arange(nslots)
    live = (node[:, None] >= 0) & (s[None, :] < ((np.int64(1) << depth.astype(np.int64)) - 1)[:, None])
    idx = np.where(live, node.astype(np.int64)[:, None] + s[None, :], 0)
    t = np.arange(n)
    g, lane = (t // 64)[:, None], (t % 64)[:, None]
    zt[g, s[None, :], 0, lane] = np.where(live, c7[idx], 0)
    zt[g, s[None, :], 1, lane] = np.where(live, thr.view(np.uint8)[idx], 0x7F)
    return zt.reshape(-1)


#: the one-row interval walk with 64 trees in lanes (interval_lanes) for forests of at least
#: this many trees (a group costs its longest tree's nodes however few trees it holds)
BV_LANES_MIN_TREES = 32
#: interval_lanes fills its table this many trees at a time
LANES_CHUNK = 4096


def interval_lanes(c7: np.ndarray, thr: np.ndarray, lo1: np.ndarray, hi: np.ndarray,
                   node: np.ndarray, nint: np.ndarray, h_qcat: np.ndarray | None = None,
                   q_kind: np.ndarray | None = None, q_cat: np.ndarray | None = None,
                   catw: int = 0) -> dict[str, np.ndarray]:
    """The AVX-512 one-row interval walk with 64 trees in a vector's lanes (quant_impl.c,
    zbvlanes), for interval-walk forests of <= 128 leaves a tree, <= 128 columns: "bv_zl", per
    group of 64 consecutive trees (the last one padded) as many node slots as its largest tree
    has internal nodes, 256 bytes each, 64-byte aligned: slot k's row-table index (c7: the
    node's column), biased threshold (thr), lo - 1 (lo1) and hi of the k-th node
    (bitvec_tables' order: sorted by lo) of each of the group's 64 trees. Slots past a tree's
    nodes (and every slot of a padding lane) hold index 0, threshold 127 (no byte exceeds it:
    the row never goes right there) and lo - 1 = 127 (no position exceeds it): they never move
    the sweep's position. "bv_zlo": per group its first slot (groups + 1 entries).

    Categorical nodes (h_qcat >= 0; catw: category_rows' row width, which their count fixes):
    threshold 127 in the table (the byte compare never sends the row right there), and their
    decisions as category_rows gives them, numbered in (slot, lane) order instead: "bv_zcatd"
    (code_rows), "bv_zcatk" per slot the mask of its categorical lanes, "bv_zk0" per slot its
    first categorical node's number (a slot's are consecutive)."""
    if len(lo1) and int(lo1.min()) < -1:  # positions biased (interval_bias): the walk starts at 0
        raise ValueError("interval_lanes takes trees of <= 128 leaves (unbiased positions)")
    n = len(node)
    groups = (n + 63) // 64
    nint = nint.astype(np.int64)
    padded = np.zeros(groups * 64, np.int64)
    padded[:n] = nint
    zlo = np.zeros(groups + 1, np.int64)
    np.cumsum(padded.reshape(groups, 64).max(axis=1), out=zlo[1:])
    total = int(zlo[-1])
    buf = np.zeros(total * 256 + 64, np.uint8)
    a = (-buf.ctypes.data) % 64
    zl = buf[a:a + total * 256].reshape(total, 4, 64)
    zl[:, 1, :] = 0x7F
    zl[:, 2, :] = 0x7F
    cats = h_qcat is not None and q_kind is not None and q_cat is not None
    cslot, clane, csrc = [], [], []
    node = node.astype(np.int64)
    for c0 in range(0, n, LANES_CHUNK):  # (chunks of trees: bounded temporaries on huge models)
        c1 = min(n, c0 + LANES_CHUNK)
        cn = nint[c0:c1]
        t = np.repeat(np.arange(c0, c1, dtype=np.int64), cn)
        s = np.arange(len(t), dtype=np.int64) - np.repeat(excl_cumsum(cn)[:-1], cn)
        src = node[t] + s
        slot, lane = zlo[t // 64] + s, t % 64
        del t, s
        zl[slot, 0, lane] = c7[src]
        zl[slot, 1, lane] = thr.view(np.uint8)[src]
        zl[slot, 2, lane] = lo1.view(np.uint8)[src]
        zl[slot, 3, lane] = hi.view(np.uint8)[src]
        if cats:
            cat = h_qcat[src] >= 0
            cslot.append(slot[cat]), clane.append(lane[cat]), csrc.append(src[cat])
    out = {"bv_zl": zl.reshape(-1), "bv_zlo": zlo}
    if cats and sum(len(x) for x in csrc):  # (<= CAT_ROWS_MAX nodes: category_rows)
        slot, lane, src = np.concatenate(cslot), np.concatenate(clane), np.concatenate(csrc)
        zl[slot, 1, lane] = 0x7F
        order = np.lexsort((lane, slot))               # (slot, lane) order
        slot, lane, src = slot[order], lane[order], src[order]
        kind = np.asarray(q_kind) == 1
        ordinal = np.cumsum(kind) - 1
        ncat = len(q_cat) // 32
        out["bv_zcatd"] = code_rows(ordinal[c7[src]], q_cat.reshape(ncat, 32)[h_qcat[src]],
                                    int(kind.sum()), catw)
        catk = np.zeros(total, np.uint64)
        np.bitwise_or.at(catk, slot, np.left_shift(np.uint64(1), lane.astype(np.uint64)))
        out["bv_zcatk"] = catk
        out["bv_zk0"] = np.searchsorted(slot, np.arange(total), side="left").astype(np.int64)
    return out

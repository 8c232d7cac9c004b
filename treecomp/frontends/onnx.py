"""The ONNX frontend: ``ai.onnx.ml`` tree ensembles (.onnx files, ``onnx.ModelProto``) -> Forest.

Reads TreeEnsembleRegressor / TreeEnsembleClassifier (ai.onnx.ml opsets 1 and 3) and TreeEnsemble
(ai.onnx.ml opset 5) and reproduces what ONNX Runtime's CPU kernels return, as checked against
onnxruntime 1.32 (tests/test_frontend_onnx.py: SessionOptions with intra_op_num_threads=1, so
ORT adds the trees of a row one after another; with more threads it splits the trees of small
batches across threads and merges partial sums, which changes the float32 rounding).

The graph must be the ensemble node alone, fed by the graph's one float tensor input, plus the
nodes converters add after it: ZipMap (probabilities as a list of dicts: a Predictor returns the
(n, n_classes) array in classlabels order instead; its predict gives a one-target regressor's
(n, 1) scores as (n,), as scikit-learn's predict does, predict_raw as (n, 1)), and Cast / Identity that change nothing
(a Cast to the type its input already has), and arithmetic on the float scores that changes no
bit (onnxmltools' LightGBM classifier ends in Mul(probabilities, 1.0)): Mul / Div by 1.0, Add
-0.0, Sub +0.0, a float32 constant (initializer or Constant node) of a shape that does not
grow the output. Any other node is refused, naming its op.

ONNX Runtime's arithmetic (tree_ensemble_common.h, tree_ensemble_aggregator.h, ml_common.h):
- Trees: a tree starts at every node whose nodes_treeids differs from the previous node's (so
  a tree is a run of consecutive nodes, rooted at the first); children are looked up by
  (tree id, node id). Thresholds and leaf weights are float32 (the float attributes); the row
  stays float32 and ``x <mode> threshold`` decides the TRUE branch. NaN fails every comparison
  but BRANCH_NEQ (NaN != t), so it takes the FALSE branch unless
  nodes_missing_value_tracks_true is 1 (then TRUE). IR mapping, one comparison ``x <= t``
  for the whole forest: LT / GTE use the largest float32 below t; GT / GTE swap the branches;
  EQ / NEQ and BRANCH_MEMBER (opset 5) become categorical splits over the listed values, which
  must be non-negative integers (else refused). ORT unrolls a set of fewer than 31 values in
  [0, 30] into BRANCH_EQ nodes: exact float equality (2.5 is no member of {2, 3}, -0.0 is one
  of {0}; IR category_rule "integral"); a bigger set (a "bigset") looks up the value cast to
  int32, toward zero (3.9 and 3.0000002 are members of {3, 38}, -0.5 of {0, 38}; category_rule
  "trunc"). A forest with both kinds is refused.
- Scores: float32, starting at 0, every tree's leaf weights added in tree order (a leaf adds
  each of its (target, weight) pairs); then AVERAGE divides by the number of trees; then the
  base values are added (``base_values``; absent means no addition). The IR starts from 0 and
  adds the base values as a last single-leaf tree, which is the same float32 sum. With two or
  more targets ORT writes 0 for a target no tree scored on a row, its base value dropped: a
  non-zero base value is refused unless some tree scores its target at every leaf (sufficient,
  not necessary: trees that only together score it on every row are refused too; converters
  write every target at every leaf, or one target per tree at all its leaves). AVERAGE with
  non-zero base values is refused (the IR divides after its last tree); MIN / MAX are refused.
- post_transform (float32, glibc expf): LOGISTIC ``v = 1/(1+expf(-|x|)); x < 0 ? 1-v : v``;
  SOFTMAX max over -FLT_MAX and the scores, expf(x - max) summed in float in order, divided;
  SOFTMAX_ZERO the same but scores within 1e-7 of 0 become ``x * expf(-max)`` and are not
  summed. They are applied to two or more outputs only: a one-target regressor and the
  one-score binary classifier ignore every transform but PROBIT (refused: ORT's erfinv is
  an approximation built on logf / sqrtf).
- Classifiers (always summed, whatever aggregate_function says): with three or more classes
  the label is the first class of highest score (classes that no tree scored for a row are
  skipped, so every class must get a score on every row: from base_values or from a tree that
  writes it at every leaf). Two classes with weights for class 0 only (what skl2onnx writes):
  one score s = sum + base_values[0]; if no weight is negative the label is classes[s > 0.5]
  and the probabilities [1 - s, s]; otherwise the label is classes[s > 0] and the
  probabilities [logistic(-s), logistic(s)] (LOGISTIC) or [-s, s] -- the IR holds [-s, s] as
  two outputs (float negation is exact). Other two-class layouts (weights for class 1 only,
  for both classes, two base values) follow rules ORT documents as vague: refused.

Refused with UnsupportedModelError: other inputs than one float tensor, double thresholds
(``*_as_tensor``), MIN / MAX, PROBIT, the two-class layouts above, a node reachable twice,
duplicate (leaf, target) weights. Corrupt or hostile files raise InvalidModelError.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidModelError, UnsupportedModelError
from ..ir import Forest, Tree, leaf_tree

_F32 = np.float32
_ML = "ai.onnx.ml"
_ENSEMBLES = ("TreeEnsembleRegressor", "TreeEnsembleClassifier", "TreeEnsemble")
#: nodes a converter puts after the ensemble that change no value
_PASSTHROUGH = {("ZipMap", _ML), ("Cast", ""), ("Identity", "")}
#: arithmetic that changes no bit of a float tensor when its other operand is this constant
#: everywhere (x * 1, x / 1, x + -0.0, x - +0.0: exact for every float, -0.0 and NaN included;
#: x + 0.0 is not: -0.0 + 0.0 is +0.0); Mul and Add take the constant on either side
_IDENTITY_ARITH = {"Mul": 1.0, "Div": 1.0, "Add": -0.0, "Sub": 0.0}
_COMMUTATIVE = ("Mul", "Add")
#: opset-3 node modes; opset 5 numbers them 0..6 in this order (6: BRANCH_MEMBER)
_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ",
          "BRANCH_MEMBER")
_LEAF = -1
_TRANSFORMS = {"NONE": "identity", "LOGISTIC": "logistic_ort", "SOFTMAX": "softmax_ort",
               "SOFTMAX_ZERO": "softmax_zero_ort"}
_V5_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
_V5_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
#: categorical values (EQ / NEQ / MEMBER) must be integers below this (bitset size bound)
_MAX_CATEGORY = 1 << 16
#: sanity bounds against corrupt files
_MAX_OUTPUTS = 1 << 20
#: a tree's dense leaf values (nodes x the targets it spans) may exceed its weights and nodes
#: this many times over, plus _DENSE_SLACK values: more is a sparse claim the IR would inflate
#: (a 1 kB file naming targets 0 and 2^20 - 1 at a few leaves: megabytes per node)
_DENSE_RATIO, _DENSE_SLACK = 16, 4096
#: how many bytes a .onnx file may have (protobuf's own limit is 2 GiB)
_MAX_BYTES = 1 << 31


def sniff(head: bytes) -> bool:
    """Whether a file that starts with `head` looks like a serialised onnx ModelProto: field 1
    (ir_version, a small varint) followed by another ModelProto field."""
    return (len(head) > 2 and head[0] == 0x08 and 1 <= head[1] <= 0x7F
            and head[2] in (0x12, 0x1A, 0x22, 0x28, 0x32, 0x3A, 0x42, 0x72))


def _onnx():
    try:
        import onnx
    except ImportError:
        raise UnsupportedModelError("reading ONNX models needs the onnx package: "
                                    "pip install 'treecomp[onnx]'") from None
    return onnx


def parse_onnx_file(path: str | os.PathLike) -> Forest:
    p = Path(path)
    if p.stat().st_size >= _MAX_BYTES:
        raise InvalidModelError(f"{p.name}: an ONNX model of 2 GiB or more is not a protobuf")
    onnx = _onnx()
    try:
        model = onnx.ModelProto.FromString(p.read_bytes())
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise InvalidModelError(f"{p.name} is not an ONNX model: {type(exc).__name__}: "
                                f"{str(exc)[:200]}") from None
    return parse_model(model, source=f"file {p.name}")


def parse_model(model: Any, source: str = "ModelProto") -> Forest:
    """An ``onnx.ModelProto`` holding one ai.onnx.ml tree ensemble."""
    try:
        return _parse(model, source)
    except (InvalidModelError, UnsupportedModelError):
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError,
            UnicodeDecodeError) as exc:
        raise InvalidModelError(f"malformed ONNX tree ensemble ({type(exc).__name__}: "
                                f"{str(exc)[:200]})") from None


# -- the graph --------------------------------------------------------------------------------
def _parse(model: Any, source: str) -> Forest:
    onnx = _onnx()
    g = model.graph
    inits = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    ens = [n for n in g.node if n.op_type in _ENSEMBLES and n.domain == _ML]
    other = sorted({f"{n.domain or 'ai.onnx'}.{n.op_type}" for n in g.node
                    if (n.op_type, n.domain) not in _PASSTHROUGH
                    and not (n.domain == "" and (n.op_type in _IDENTITY_ARITH or n.op_type == "Constant"))
                    and not (n.op_type in _ENSEMBLES and n.domain == _ML)})
    if len(ens) != 1 or other:
        raise UnsupportedModelError(
            "treecomp reads an ONNX graph that is one ai.onnx.ml TreeEnsembleRegressor / "
            "TreeEnsembleClassifier / TreeEnsemble node, plus what converters put after it that "
            "changes no value (ZipMap, Identity, a Cast to the same type, Mul / Div by 1, Add "
            f"-0.0, Sub 0.0); this graph has {len(ens)} ensemble node(s)"
            + (f" and the ops {', '.join(other[:10])}" if other else ""))
    node = ens[0]
    if len(inputs) != 1 or list(node.input) != [inputs[0].name]:
        raise UnsupportedModelError("the tree ensemble must read the graph's one input directly")
    tt = inputs[0].type.tensor_type if inputs[0].type.HasField("tensor_type") else None
    if tt is None or tt.elem_type != onnx.TensorProto.FLOAT:
        what = onnx.TensorProto.DataType.Name(tt.elem_type) if tt is not None and \
            tt.elem_type in onnx.TensorProto.DataType.values() else "a non-tensor"
        raise UnsupportedModelError(f"ONNX model input of type {what}: treecomp reads float "
                                    "(tensor(float)) inputs only")
    dims = list(tt.shape.dim) if tt.HasField("shape") else None
    if dims is not None and len(dims) != 2:
        raise UnsupportedModelError(f"ONNX model input of rank {len(dims)}: expected (rows, features)")
    declared = dims[1].dim_value if dims and dims[1].HasField("dim_value") else None
    _check_after(g, node, onnx)

    made = {o for n in g.node for o in n.output}
    lost = [o.name for o in g.output if o.name not in made]
    if lost:
        raise InvalidModelError(f"ONNX graph output {lost[0][:40]!r} is not computed by any node")
    domains = [o.domain for o in model.opset_import]
    if domains.count(_ML) != 1:
        raise InvalidModelError("the ONNX model must import the ai.onnx.ml opset exactly once")
    ml = {o.domain: o.version for o in model.opset_import}[_ML]
    if not 1 <= ml <= 5:
        raise UnsupportedModelError(f"ai.onnx.ml opset {ml}: treecomp (and ONNX Runtime 1.32) "
                                    "read opsets 1 to 5")
    if ml == 5 and node.op_type != "TreeEnsemble":
        raise InvalidModelError(f"{node.op_type} is deprecated at ai.onnx.ml opset 5 (ONNX Runtime "
                                "refuses it): use opset 3, or TreeEnsemble")
    try:  # the operator's schema at the model's ai.onnx.ml version: ORT refuses other attributes
        schema = onnx.defs.get_schema(node.op_type, ml, _ML).attributes
    except Exception:  # noqa: BLE001 - onnx.defs.SchemaError: no such version
        raise InvalidModelError(f"ONNX {node.op_type} does not exist at ai.onnx.ml opset {ml}") from None
    attrs = {}
    for a in node.attribute:
        if a.name not in schema or schema[a.name].type != a.type:
            raise InvalidModelError(f"ONNX {node.op_type}: attribute {a.name[:40]!r} is not one of the "
                                    "operator's (or has another type)")
        if a.name in attrs:
            raise InvalidModelError(f"ONNX {node.op_type}: attribute {a.name!r} appears twice")
        if a.type == onnx.AttributeProto.TENSOR and a.t.data_location == onnx.TensorProto.EXTERNAL:
            raise UnsupportedModelError(f"ONNX {node.op_type}: attribute {a.name!r} is stored in "
                                        "an external file; load it into the model first")
        attrs[a.name] = onnx.helper.get_attribute_value(a)
    if node.op_type == "TreeEnsemble":
        if ml < 5:
            raise InvalidModelError(f"TreeEnsemble needs ai.onnx.ml opset 5, the model imports {ml}")
        e = _v5(attrs, onnx)
    else:
        e = _v3(attrs, node.op_type == "TreeEnsembleClassifier")
    return _forest(e, declared, f"onnx {source}: {node.op_type} (ai.onnx.ml opset {ml})")


def _check_after(g: Any, node: Any, onnx: Any) -> None:
    """The nodes after the ensemble only reformat its outputs (ZipMap) or copy them (Identity, a
    Cast to the type they already have)."""
    # element types of the ensemble's outputs: label int64 / string, scores float
    types: dict[str, int] = {}
    outs = list(node.output)
    if node.op_type == "TreeEnsembleClassifier":
        if len(outs) >= 1:
            types[outs[0]] = -1  # int64 or string: decided by classlabels_*, checked below
        if len(outs) >= 2:
            types[outs[1]] = onnx.TensorProto.FLOAT
    elif outs:
        types[outs[0]] = onnx.TensorProto.FLOAT
    labels_string = any(a.name == "classlabels_strings" and len(a.strings) for a in node.attribute)
    if -1 in types.values():
        k = next(k for k, v in types.items() if v == -1)
        types[k] = onnx.TensorProto.STRING if labels_string else onnx.TensorProto.INT64
    # walk from the ensemble's outputs to the nodes that read them (each node read once: linear)
    readers: dict[str, list[int]] = {}
    others = [k for k, n in enumerate(g.node) if not (n.op_type in _ENSEMBLES and n.domain == _ML)]
    consts = _constants(g, onnx)
    const_of: dict[int, tuple[str, int]] = {}  # arithmetic node -> (constant name, its position)
    for k in others:
        n = g.node[k]
        if n.op_type == "Constant" and n.domain == "":
            continue  # read as an arithmetic node's operand below, or an orphan
        if n.op_type in _IDENTITY_ARITH and n.domain == "":
            if len(n.input) != 2:
                raise UnsupportedModelError(f"ONNX {n.op_type} node with {len(n.input)} inputs "
                                            "after the tree ensemble")
            at = [j for j in (1, 0) if n.input[j] in consts and (j == 1 or n.op_type in _COMMUTATIVE)]
            if not at or n.input[1 - at[0]] in consts:
                raise UnsupportedModelError(
                    f"ONNX {n.op_type} after the tree ensemble: treecomp reads {n.op_type} of the "
                    "ensemble's output by a constant "
                    + ("(either operand) " if n.op_type in _COMMUTATIVE else "(the second operand) ")
                    + "that changes no value")
            const_of[k] = (n.input[at[0]], at[0])
            readers.setdefault(n.input[1 - at[0]], []).append(k)
            continue
        if len(n.input) != 1:
            raise UnsupportedModelError(f"ONNX {n.op_type} node with {len(n.input)} inputs after "
                                        "the tree ensemble")
        readers.setdefault(n.input[0], []).append(k)
    width = _output_width(node)
    todo, seen = list(types), set()
    while todo:
        name = todo.pop()
        for k in readers.get(name, ()):
            if k in seen:
                continue
            seen.add(k)
            n, src = g.node[k], types[name]
            if k in const_of:
                cname, _ = const_of[k]
                _check_identity(n.op_type, consts[cname], src, width, onnx)
                if cname in consts and consts[cname][1] is not None:
                    seen.add(consts[cname][1])  # the Constant node it came from
            if n.op_type == "Cast":
                to = next((a.i for a in n.attribute if a.name == "to"), None)
                if to != src:
                    what = onnx.TensorProto.DataType.Name(to) if to in onnx.TensorProto.DataType.values() else to
                    raise UnsupportedModelError(f"ONNX Cast of the ensemble's output to {what}: "
                                                "only casts that keep the type are read")
            for o in n.output:
                if o in types:
                    raise InvalidModelError(f"ONNX graph: {o[:40]!r} is computed twice")
                types[o] = -2 if n.op_type == "ZipMap" else src  # ZipMap: a sequence of maps
                todo.append(o)
    orphans = [g.node[k].op_type for k in others if k not in seen]
    if orphans:
        raise UnsupportedModelError(f"ONNX nodes {orphans[:5]} do not read the tree ensemble's outputs")


def _constants(g: Any, onnx: Any) -> dict[str, tuple[Any, int | None]]:
    """Constant tensors by name: the graph's initializers and its Constant nodes' values
    (TensorProto, or the node index for a Constant node: (tensor, node index or None))."""
    out: dict[str, tuple[Any, int | None]] = {i.name: (i, None) for i in g.initializer}
    for k, n in enumerate(g.node):
        if n.op_type != "Constant" or n.domain != "" or len(n.output) != 1 or len(n.attribute) != 1:
            continue
        a = n.attribute[0]
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            out[n.output[0]] = (a.t, k)
        elif a.name == "value_float" and a.type == onnx.AttributeProto.FLOAT:
            out[n.output[0]] = (onnx.helper.make_tensor("c", onnx.TensorProto.FLOAT, [], [a.f]), k)
        elif a.name == "value_floats" and a.type == onnx.AttributeProto.FLOATS:
            out[n.output[0]] = (onnx.helper.make_tensor("c", onnx.TensorProto.FLOAT, [len(a.floats)],
                                                        list(a.floats)), k)
    return out


def _output_width(node: Any) -> int | None:
    """Columns of the ensemble's float output (classes or targets), None where unknown."""
    for a in node.attribute:
        if node.op_type == "TreeEnsembleClassifier" and a.name in ("classlabels_int64s",
                                                                     "classlabels_strings"):
            if len(a.ints) or len(a.strings):
                return len(a.ints) or len(a.strings)
        if node.op_type != "TreeEnsembleClassifier" and a.name == "n_targets":
            return int(a.i)
    return None


def _check_identity(op: str, const: tuple[Any, int | None], src: int, width: int | None,
                    onnx: Any) -> None:
    """UnsupportedModelError unless `op` of a float tensor (rows, width) by the constant changes
    no bit and no shape: float32 elements all equal to the operation's identity (its sign too,
    for the zeros), a shape that broadcasts to (rows, width) without growing it."""
    t = const[0]
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise UnsupportedModelError(f"ONNX {op} after the tree ensemble by a constant stored in an "
                                    "external file")
    if src != onnx.TensorProto.FLOAT or t.data_type != onnx.TensorProto.FLOAT:
        what = onnx.TensorProto.DataType.Name(t.data_type) if t.data_type in \
            onnx.TensorProto.DataType.values() else t.data_type
        raise UnsupportedModelError(f"ONNX {op} after the tree ensemble of a {what} constant, or "
                                    "of its labels or ZipMap's maps: treecomp reads float "
                                    "arithmetic on the scores only")
    dims = list(t.dims)
    if len(dims) > 2 or (len(dims) == 2 and dims[0] != 1) or \
            any(d != 1 and (width is None or d != width) for d in dims[-1:]):
        raise UnsupportedModelError(f"ONNX {op} after the tree ensemble by a constant of shape "
                                    f"{dims}: it would change the output's shape")
    try:
        v = onnx.numpy_helper.to_array(t).astype(np.float32).reshape(-1)
    except Exception as exc:  # noqa: BLE001 - a malformed TensorProto
        raise InvalidModelError(f"ONNX {op} constant: {type(exc).__name__}: {str(exc)[:100]}") from None
    want = _IDENTITY_ARITH[op]
    if v.size == 0 or not np.all((v == want) & (np.signbit(v) == (math.copysign(1.0, want) < 0))):
        raise UnsupportedModelError(
            f"ONNX {op} after the tree ensemble by {v[:4].tolist()}: treecomp reads arithmetic "
            f"that changes no value only ({op} by {want!r})")


def _ints(v: Any, name: str) -> np.ndarray:
    a = np.asarray(v if v is not None else [], dtype=np.int64)
    if a.ndim != 1:
        raise InvalidModelError(f"ONNX attribute {name} must be a list of integers")
    return a


def _floats(v: Any, name: str) -> np.ndarray:
    a = np.asarray(v if v is not None else [], dtype=np.float64).astype(_F32)
    if a.ndim != 1:
        raise InvalidModelError(f"ONNX attribute {name} must be a list of floats")
    return a


def _tensor(v: Any, name: str, onnx: Any, kind: str) -> np.ndarray:
    """A tensor attribute (opset 5) as a flat array; `kind` "f": float32 only, "u8": uint8."""
    if v is None:
        return np.zeros(0, _F32 if kind == "f" else np.uint8)
    try:
        a = onnx.numpy_helper.to_array(v)
    except Exception as exc:  # noqa: BLE001 - a malformed TensorProto
        raise InvalidModelError(f"ONNX attribute {name}: {type(exc).__name__}: {str(exc)[:100]}") from None
    if kind == "f" and a.dtype != _F32:
        raise UnsupportedModelError(f"ONNX TreeEnsemble {name} of {a.dtype}: treecomp reads float "
                                    "tensors (float inputs) only")
    if kind == "u8" and a.dtype != np.uint8:
        raise InvalidModelError(f"ONNX TreeEnsemble {name} must be a uint8 tensor, got {a.dtype}")
    return a.reshape(-1)


def _csr(n: int, node: np.ndarray, target: np.ndarray, weight: np.ndarray) -> dict:
    """Leaf weights grouped by node (entries of node j: wptr[j] .. wptr[j + 1], in the order
    ORT adds them); `node` must be sorted."""
    return {"wptr": np.r_[0, np.cumsum(np.bincount(node, minlength=n))].astype(np.int64),
            "w_target": target.astype(np.int64), "w_value": weight.astype(_F32)}


class _Ensemble:
    """The ensemble as ORT builds it: flat node arrays (ORT's node order) plus leaf weights."""

    def __init__(self, **kw: Any):
        self.__dict__.update(kw)


def _v3(a: dict, classifier: bool) -> _Ensemble:
    for k in a:
        if k.endswith("_as_tensor"):
            raise UnsupportedModelError(f"ONNX attribute {k} (double thresholds / weights) is not "
                                        "supported; treecomp reads the float attributes")
    for k in ("nodes_treeids", "nodes_nodeids", "nodes_modes", "nodes_truenodeids",
              "nodes_falsenodeids", "nodes_featureids", "nodes_values"):
        if k not in a:
            raise InvalidModelError(f"ONNX tree ensemble without {k}")
    p = "class_" if classifier else "target_"
    tree, nid = _ints(a["nodes_treeids"], "nodes_treeids"), _ints(a["nodes_nodeids"], "nodes_nodeids")
    n = len(tree)
    raw_modes = a["nodes_modes"]
    arrays = {"nodes_nodeids": nid, "nodes_modes": raw_modes,
              "nodes_truenodeids": _ints(a["nodes_truenodeids"], "t"),
              "nodes_falsenodeids": _ints(a["nodes_falsenodeids"], "f"),
              "nodes_featureids": _ints(a["nodes_featureids"], "nodes_featureids"),
              "nodes_values": _floats(a["nodes_values"], "nodes_values")}
    bad = [k for k, v in arrays.items() if len(v) != n]
    if bad or n == 0:
        raise InvalidModelError(f"ONNX tree ensemble: {', '.join(bad) or 'nodes'} must have one "
                                f"entry per node ({n})")
    names, inv = np.unique(np.array(raw_modes, dtype=object), return_inverse=True)
    names = [m.decode("utf-8", "replace") if isinstance(m, bytes) else str(m) for m in names]
    unknown = sorted(m for m in names if m not in _MODES[:6] and m != "LEAF")
    if unknown:
        raise InvalidModelError(f"ONNX tree ensemble: unknown node mode(s) {unknown[:5]}")
    mode = np.array([_LEAF if m == "LEAF" else _MODES.index(m) for m in names], np.int64)[inv.reshape(-1)]
    tracks = _ints(a.get("nodes_missing_value_tracks_true"), "nodes_missing_value_tracks_true")
    miss = np.zeros(n, bool)
    miss[:min(n, len(tracks))] = tracks[:n] == 1  # ORT reads only the first n, as 1 or not
    # children: (tree id, node id) -> index, by binary search over sorted keys (ORT refuses
    # duplicate nodes, missing children and a node that is its own child)
    for name, v in (("nodes_treeids", tree), ("nodes_nodeids", nid)):
        if v.min() < 0 or v.max() >= 1 << 31:
            raise InvalidModelError(f"ONNX tree ensemble: {name} outside [0, 2^31)")
    keys = (tree << 31) | nid
    by_key = np.argsort(keys, kind="stable")
    skeys = keys[by_key]
    dup = np.flatnonzero(skeys[1:] == skeys[:-1])
    if dup.size:
        i = int(by_key[dup[0]])
        raise InvalidModelError(f"ONNX tree ensemble: node {int(nid[i])} of tree {int(tree[i])} appears twice")

    def lookup(t: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Index of node (t, ids), -1 where there is none."""
        ok = (ids >= 0) & (ids < 1 << 31)
        k = (t << 31) | np.where(ok, ids, 0)
        pos = np.minimum(np.searchsorted(skeys, k), n - 1)
        return np.where(ok & (skeys[pos] == k), by_key[pos], -1)

    internal = np.flatnonzero(mode != _LEAF)
    true_c = np.full(n, -1, np.int64)
    false_c = np.full(n, -1, np.int64)
    for ids, out, what in ((arrays["nodes_truenodeids"], true_c, "true"),
                           (arrays["nodes_falsenodeids"], false_c, "false")):
        out[internal] = lookup(tree[internal], ids[internal])
        bad = internal[(out[internal] < 0) | (out[internal] == internal)]
        if bad.size:
            i = int(bad[0])
            raise InvalidModelError(f"ONNX tree ensemble: the {what} child {int(ids[i])} of node "
                                    f"{int(nid[i])} in tree {int(tree[i])} is missing or itself")
    # leaf weights, in ORT's order: sorted by (tree id, node id), then file order
    w_ids = _ints(a.get(p + "ids"), p + "ids")
    w_nodes, w_trees = _ints(a.get(p + "nodeids"), p + "nodeids"), _ints(a.get(p + "treeids"), p + "treeids")
    w = _floats(a.get(p + "weights"), p + "weights")
    if not (len(w_ids) == len(w_nodes) == len(w_trees) == len(w)):
        raise InvalidModelError(f"ONNX tree ensemble: {p}ids / nodeids / treeids / weights differ in length")
    if len(w) and (w_trees.min() < 0 or w_trees.max() >= 1 << 31):
        raise InvalidModelError(f"ONNX tree ensemble: {p}treeids outside [0, 2^31)")
    at = lookup(w_trees, w_nodes) if len(w) else np.zeros(0, np.int64)
    if np.any(at < 0):
        k = int(np.flatnonzero(at < 0)[0])
        raise InvalidModelError(f"ONNX tree ensemble: a weight names node {int(w_nodes[k])} of "
                                f"tree {int(w_trees[k])}, which does not exist")
    keep = mode[at] == _LEAF  # ORT ignores weights on internal nodes (old onnxmltools wrote some)
    order = np.lexsort((np.arange(len(w)), at))
    order = order[keep[order]]
    roots = np.flatnonzero(np.r_[True, tree[1:] != tree[:-1]])
    if classifier:
        ls, li = a.get("classlabels_strings"), a.get("classlabels_int64s")
        if ls:
            labels = np.array([s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in ls],
                              dtype=object)
        else:
            labels = _ints(li, "classlabels_int64s")
        n_out = len(labels)
    else:
        labels, n_out = None, int(a.get("n_targets", 0))
    post = a.get("post_transform", b"NONE")
    agg = a.get("aggregate_function", b"SUM")
    return _Ensemble(mode=mode, feature=arrays["nodes_featureids"], threshold=arrays["nodes_values"],
                     members=None, miss=miss, true_c=true_c, false_c=false_c,
                     **_csr(n, at[order], w_ids[order], w[order]),
                     roots=roots, n_out=n_out, labels=labels,
                     base=_floats(a.get("base_values"), "base_values"),
                     post=post.decode() if isinstance(post, bytes) else str(post),
                     agg=agg.decode() if isinstance(agg, bytes) else str(agg),
                     ids_written={int(i) for i in w_ids.tolist()}, all_positive=not np.any(w < 0))


def _v5(a: dict, onnx: Any) -> _Ensemble:
    """TreeEnsemble (opset 5) in ORT's own reading (tree_ensemble_attribute.h convert_to_v3):
    node arrays indexed by node, leaves by leaf (nodes_trueleafs / falseleafs say which a child
    id indexes), tree_roots the root nodes; a root whose two children are the same leaf is read
    as the leaf *at the root's index* (ORT's rule, kept)."""
    ints = {k: _ints(a.get(k), k) for k in (
        "leaf_targetids", "nodes_falseleafs", "nodes_falsenodeids", "nodes_featureids",
        "nodes_missing_value_tracks_true", "nodes_trueleafs", "nodes_truenodeids", "tree_roots")}
    splits = _tensor(a.get("nodes_splits"), "nodes_splits", onnx, "f")
    lw = _tensor(a.get("leaf_weights"), "leaf_weights", onnx, "f")
    mv = _tensor(a.get("membership_values"), "membership_values", onnx, "f")
    modes = _tensor(a.get("nodes_modes"), "nodes_modes", onnx, "u8").astype(np.int64)
    nn = len(ints["nodes_featureids"])
    for k in ("nodes_falseleafs", "nodes_falsenodeids", "nodes_trueleafs", "nodes_truenodeids"):
        if len(ints[k]) != nn:
            raise InvalidModelError(f"ONNX TreeEnsemble: {k} must have one entry per node ({nn})")
    if len(modes) != nn or len(splits) != nn:
        raise InvalidModelError(f"ONNX TreeEnsemble: nodes_modes / nodes_splits must have one entry per node ({nn})")
    nl = len(lw)
    if len(ints["leaf_targetids"]) != nl:
        raise InvalidModelError("ONNX TreeEnsemble: leaf_targetids and leaf_weights differ in length")
    if np.any(modes > 6):
        raise InvalidModelError(f"ONNX TreeEnsemble: unknown node mode {int(modes.max())}")
    # MEMBER nodes' sets: membership_values, NaN-separated, in node order
    members: dict[int, np.ndarray] = {}
    if np.any(modes == 6):
        cuts = np.flatnonzero(np.isnan(mv))
        starts = np.r_[0, cuts + 1]
        for k, i in enumerate(np.flatnonzero(modes == 6).tolist()):
            if k >= len(starts) or starts[k] > len(mv):
                raise InvalidModelError("ONNX TreeEnsemble: membership_values has fewer sets than "
                                        "BRANCH_MEMBER nodes")
            end = cuts[k] if k < len(cuts) else len(mv)
            members[i] = mv[starts[k]:end]
            if members[i].size == 0:
                raise InvalidModelError(f"ONNX TreeEnsemble: BRANCH_MEMBER node {i} has an empty set")
    # one flat array: nodes 0..nn-1, then leaves nn..nn+nl-1
    n = nn + nl
    mode = np.r_[modes, np.full(nl, _LEAF)]
    tc, fc = ints["nodes_truenodeids"], ints["nodes_falsenodeids"]
    tl, fl = ints["nodes_trueleafs"] != 0, ints["nodes_falseleafs"] != 0
    limit_t = np.where(tl, nl, nn)
    limit_f = np.where(fl, nl, nn)
    if np.any((tc < 0) | (tc >= limit_t) | (fc < 0) | (fc >= limit_f)):
        raise InvalidModelError("ONNX TreeEnsemble: a child index is out of range")
    true_c = np.r_[np.where(tl, tc + nn, tc), np.full(nl, -1)]
    false_c = np.r_[np.where(fl, fc + nn, fc), np.full(nl, -1)]
    miss = np.zeros(n, bool)
    trk = ints["nodes_missing_value_tracks_true"]
    if len(trk):
        if len(trk) != nn:
            raise InvalidModelError("ONNX TreeEnsemble: nodes_missing_value_tracks_true must have one "
                                    "entry per node")
        miss[:nn] = trk == 1  # ORT honours 1 only (2 or -1 are not "true"), as in opset 3
    roots = []
    for r in ints["tree_roots"].tolist():
        if not 0 <= r < nn:
            raise InvalidModelError(f"ONNX TreeEnsemble: tree root {r} is out of range")
        if tc[r] == fc[r] and tl[r] and fl[r]:  # ORT: a one-leaf tree, leaf index = root index
            if r >= nl:
                raise InvalidModelError(f"ONNX TreeEnsemble: one-leaf tree {r} has no leaf {r}")
            roots.append(nn + r)
        else:
            roots.append(r)
    tids = ints["leaf_targetids"]
    agg, post = int(a.get("aggregate_function", 1)), int(a.get("post_transform", 0))
    if not (0 <= agg < 4 and 0 <= post < 5):
        raise InvalidModelError(f"ONNX TreeEnsemble: aggregate_function={agg}, post_transform={post}")
    return _Ensemble(mode=mode, feature=np.r_[ints["nodes_featureids"], np.zeros(nl, np.int64)],
                     threshold=np.r_[splits, np.zeros(nl, _F32)], members=members, miss=miss,
                     true_c=true_c, false_c=false_c, **_csr(n, nn + np.arange(nl), tids, lw),
                     roots=np.array(roots, np.int64),
                     n_out=int(a.get("n_targets", 0)), labels=None, base=np.zeros(0, _F32),
                     post=_V5_TRANSFORMS[post], agg=_V5_AGGREGATES[agg],
                     ids_written={int(t) for t in tids.tolist()}, all_positive=not np.any(lw < 0))


# -- the forest -------------------------------------------------------------------------------
def _below(t: np.float32) -> np.float32:
    """The largest float32 below t (x < t  <=>  x <= _below(t) for every float32 x)."""
    return np.nextafter(_F32(t), _F32(-np.inf))


def _forest(e: _Ensemble, declared: int | None, prov: str) -> Forest:
    K = e.n_out
    if not 1 <= K <= _MAX_OUTPUTS:
        raise InvalidModelError(f"ONNX tree ensemble with {K} targets / classes")
    if e.ids_written and (min(e.ids_written) < 0 or max(e.ids_written) >= K):
        raise InvalidModelError(f"ONNX tree ensemble: a target / class id is outside [0, {K})")
    if e.labels is None:
        # n_targets is only a number in the file: outputs no leaf and no base value writes are
        # constants ORT still allocates and transforms (2^20 of them from a 516-byte file)
        backed = max(max(e.ids_written) + 1 if e.ids_written else 0, len(e.base))
        if K > backed:
            raise UnsupportedModelError(
                f"ONNX tree ensemble claims n_targets={K}, but its leaves and base_values write "
                f"targets below {backed} only: outputs no tree writes are not supported")
    if len(e.roots) == 0:
        raise InvalidModelError("ONNX tree ensemble without trees")
    if e.post == "PROBIT":
        raise UnsupportedModelError("ONNX post_transform PROBIT is not supported (ORT's erfinv "
                                    "approximation over logf / sqrtf is not reproduced)")
    if e.post not in _TRANSFORMS:
        raise InvalidModelError(f"ONNX post_transform {e.post[:30]!r} is unknown")
    classifier = e.labels is not None
    agg = "SUM" if classifier else e.agg  # ORT's classifier kernel always sums
    if agg in ("MIN", "MAX"):
        raise UnsupportedModelError(f"ONNX aggregate_function {agg} is not supported")
    if agg not in ("SUM", "AVERAGE"):
        raise InvalidModelError(f"ONNX aggregate_function {agg[:30]!r} is unknown")
    base = e.base
    if len(base) not in (0, K) and not (classifier and K == 2 and len(base) <= 2):
        raise InvalidModelError(f"ONNX base_values has {len(base)} values for {K} outputs")
    thr = e.threshold
    if np.any(np.isnan(thr[(e.mode >= 0) & (e.mode <= 3)])):
        raise UnsupportedModelError("ONNX tree ensemble with a NaN threshold")

    # how leaves map to IR outputs, and the labels
    neg_pair = False  # two-class, one score s: the IR keeps [-s, s]
    transform = _TRANSFORMS[e.post]
    decision, classes = "none", ()
    n_out = K
    if classifier:
        if K < 2:
            raise UnsupportedModelError("ONNX classifier with fewer than two classes")
        if K == 2:
            if e.ids_written != {0} or len(base) == 2:
                raise UnsupportedModelError(
                    "ONNX two-class TreeEnsembleClassifier with weights for class ids "
                    f"{sorted(e.ids_written)} and {len(base)} base value(s): treecomp reads the "
                    "layout converters write (weights for class 0 only, at most one base value)")
            base = base[:1]
            if e.all_positive:  # label classes[s > 0.5], probabilities [1 - s, s], no transform
                n_out, transform, decision = 1, "identity", "proba_gt_half"
            else:  # label classes[s > 0], probabilities [T(-s), T(s)] (T: LOGISTIC or none)
                neg_pair, n_out, decision = True, 2, "argmax_raw"
                transform = "logistic_ort" if e.post == "LOGISTIC" else "identity"
        else:
            decision = "argmax_raw"
            if len(base) == K and np.any((base == 0) & np.signbit(base)):
                raise UnsupportedModelError("ONNX classifier base_values of -0.0")
        classes = (e.labels,)
    elif K == 1:
        transform = "identity"  # ORT applies no transform (but PROBIT) to one target

    feature_max = int(e.feature.max()) if len(e.feature) else 0
    if e.feature.min() < 0:
        raise InvalidModelError("ONNX tree ensemble: negative feature index")
    if declared is not None and feature_max >= declared:
        raise InvalidModelError(f"ONNX tree ensemble uses feature {feature_max}, the input has "
                                f"{declared}")
    n_features = declared if declared else feature_max + 1

    trees, outs, scored, rules = [], [], np.zeros(K, bool), set()
    newid = np.full(len(e.mode), -1, np.int64)
    for r in e.roots.tolist():
        t, o, always, used = _tree(e, r, neg_pair, newid)
        trees.append(t)
        outs.append(o)
        scored |= always
        rules |= used
    if len(rules) > 1:
        raise UnsupportedModelError(
            "ONNX TreeEnsemble mixing exact equality tests (BRANCH_EQ / NEQ, sets of < 31 values "
            "in [0, 30]) with bigger BRANCH_MEMBER sets (ORT truncates the value to an integer "
            "there) is not supported")
    if classifier and K > 2 and len(base) != K and not scored.all():
        raise UnsupportedModelError(
            f"ONNX classifier: class {int(np.flatnonzero(~scored)[0])} gets no score on some rows "
            "(no base_values, no tree that scores it at every leaf): ORT then leaves it out of "
            "the argmax, which treecomp does not reproduce")
    if not classifier and K > 1 and len(base) == K and np.any((base != 0) & ~scored):
        # ORT 1.32's regressor writes has_score ? score + base : 0 per target and row
        raise UnsupportedModelError(
            f"ONNX regressor: target {int(np.flatnonzero((base != 0) & ~scored)[0])} has a "
            "non-zero base value but no tree that scores it at every leaf: ORT then drops the "
            "base value on the rows no tree scores it for, which treecomp does not reproduce")
    average = agg == "AVERAGE"
    if len(base) and np.any(base != 0):
        if average:
            raise UnsupportedModelError("ONNX AVERAGE with non-zero base_values is not supported")
        bvec = np.r_[-base, base] if neg_pair else base
        trees.append(leaf_tree(bvec.astype(np.float64)))  # added after the trees, as ORT adds it
        outs.append(0)
    return Forest(trees=tuple(trees), n_features=n_features, n_outputs=n_out,
                  tree_output=np.array(outs, np.int32), base_score=np.zeros(n_out),
                  input_dtype="float32", comparison="<=", accumulate_dtype="float32",
                  average=average, transform=transform, decision=decision, classes=classes,
                  category_rule=rules.pop() if rules else "integral", allow_nan=True, exp_lib="libm",
                  provenance=f"{prov}, {len(e.roots)} trees, {e.post}, {agg}")


def _tree(e: _Ensemble, root: int, neg_pair: bool, newid: np.ndarray):
    """The IR tree rooted at flat node `root` (renumbered breadth-first, level by level), its
    first output, which outputs it scores at every leaf, and the category rules it needs.
    `newid` (one entry per flat node, -1 where unvisited) is shared by all trees: a node reached
    a second time, from this tree or an earlier one, is refused."""
    levels, level = [], np.array([root], np.int64)
    if newid[root] >= 0:
        raise UnsupportedModelError("ONNX tree ensemble: a tree's root is a node of another tree")
    newid[root] = 0
    count = 1
    while level.size:
        levels.append(level)
        inner = level[e.mode[level] != _LEAF]
        kids = np.stack([e.true_c[inner], e.false_c[inner]], axis=1).reshape(-1)
        fresh = count + np.arange(kids.size)
        seen = np.any(newid[kids] >= 0)
        newid[kids] = fresh
        if seen or np.any(newid[kids] != fresh):  # reached before, or twice in this level
            raise UnsupportedModelError("ONNX tree ensemble: a node is reachable twice (shared "
                                        "subtree, cycle, or a tree id split into two runs)")
        count += kids.size
        level = kids
    order = np.concatenate(levels)
    n = len(order)
    m = e.mode[order]
    inner = m != _LEAF
    tc = np.where(inner, newid[np.maximum(e.true_c[order], 0)], -1)
    fc = np.where(inner, newid[np.maximum(e.false_c[order], 0)], -1)
    # numeric splits: LEQ / LT (x <= t' is the TRUE branch), GTE / GT (it is the FALSE branch);
    # LT / GTE compare with the largest float32 below t
    numeric = inner & (m <= 3)
    thr = e.threshold[order].astype(_F32)
    below = numeric & ((m == 1) | (m == 2))
    if np.any(below & (thr == -np.inf)):
        raise UnsupportedModelError("ONNX BRANCH_LT / BRANCH_GTE at -inf")
    thr = np.where(below, np.nextafter(thr, _F32(-np.inf)), thr)
    threshold = np.where(numeric, thr, _F32(0)).astype(np.float64)
    # categorical splits (EQ / MEMBER: members go TRUE; NEQ: members go FALSE) go left on members
    true_left = np.where(numeric, (m == 0) | (m == 1), m != 5)
    left = np.where(true_left, tc, fc)
    right = np.where(true_left, fc, tc)
    nan_true = e.miss[order] | (m == 5)  # NaN != t holds
    dleft = inner & (nan_true == true_left)
    feature = np.where(inner, e.feature[order], -1)
    cats, rules = {}, set()
    cat_nodes = np.flatnonzero(inner & (m >= 4))
    if cat_nodes.size:
        sets = []
        for j in cat_nodes.tolist():
            mj = int(m[j])
            vals = np.array([e.threshold[order[j]]], _F32) if mj in (4, 5) else e.members[int(order[j])]
            if np.any(np.isnan(vals)) or np.any(vals < 0) or np.any(vals >= _MAX_CATEGORY) \
                    or np.any(vals != np.trunc(vals)):
                raise UnsupportedModelError(
                    f"ONNX {_MODES[mj]} on values {vals[:5].tolist()}: treecomp reads equality and "
                    f"membership tests of non-negative integers below {_MAX_CATEGORY} only")
            # ORT unrolls a set of < 31 values in [0, 30] into BRANCH_EQ nodes (exact equality);
            # a bigger set is a "bigset": the value cast to int32 (toward zero) is looked up
            rules.add("trunc" if mj == 6 and not (len(vals) < 31 and vals.max() <= 30) else "integral")
            sets.append(vals.astype(np.int64))
        n_words = max(int(v.max()) // 32 + 1 for v in sets)
        bits = np.zeros((len(sets), n_words), np.uint32)
        for r, v in enumerate(sets):
            np.bitwise_or.at(bits[r], v >> 5, np.uint32(1) << (v & 31).astype(np.uint32))
        cat_index = np.full(n, -1, np.int32)
        cat_index[cat_nodes] = np.arange(len(sets), dtype=np.int32)
        cats = {"cat_index": cat_index, "cat_bits": bits,
                "cat_other_left": np.zeros(len(sets), bool)}  # invalid: not equal / no member
    # leaves: their (target, weight) entries, in ORT's order
    leaf_pos = np.flatnonzero(~inner)
    g = order[leaf_pos]
    starts, counts = e.wptr[g], e.wptr[g + 1] - e.wptr[g]
    if np.any(counts == 0):
        raise InvalidModelError("ONNX tree ensemble: a leaf has no weight (ORT: 'Target is missing')")
    ent = np.repeat(starts - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(counts.sum())
    at = np.repeat(leaf_pos, counts)
    t, w = e.w_target[ent], e.w_value[ent]
    if np.unique(at * (int(t.max()) + 1) + t).size != t.size:
        raise UnsupportedModelError("ONNX tree ensemble: a leaf with two weights for one target "
                                    "(ORT adds them one by one)")
    always = np.bincount(t, minlength=e.n_out)[:e.n_out] == len(leaf_pos)
    span = 2 if neg_pair else int(t.max()) - int(t.min()) + 1
    if n * span > _DENSE_RATIO * (t.size + n) + _DENSE_SLACK:
        raise UnsupportedModelError(
            f"ONNX tree ensemble: a tree of {n} nodes writes {t.size} weights spread over targets "
            f"{int(t.min())}..{int(t.max())}: {n * span} dense leaf values for so few weights "
            "(sparse multi-target leaves) are not supported")
    if neg_pair:
        lo, value = 0, np.zeros((n, 2))
        value[at, 0], value[at, 1] = -w, w
    else:
        lo = int(t.min())
        value = np.zeros((n, int(t.max()) - lo + 1))
        value[at, t - lo] = w
    return (Tree(left=left, right=right, feature=feature, threshold=threshold, default_left=dleft,
                 value=value, **cats), lo, always, rules)


PARSERS = {"ModelProto": parse_model}

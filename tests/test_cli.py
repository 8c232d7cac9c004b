"""The command line: compile / predict / inspect / header, and one-line errors."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import treecomp
from treecomp import interp, toolchain
from treecomp.cli import main

pytestmark = pytest.mark.skipif(not toolchain.have_compiler(), reason="no C compiler")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    X, y = make_classification(n_samples=300, n_features=6, n_classes=3, n_informative=4, random_state=0)
    m = RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0).fit(X, y)
    d = tmp_path_factory.mktemp("cli")
    path = d / "model.pkl"
    path.write_bytes(pickle.dumps(m))
    return path, m, X


def test_compile_predict_round_trip(model_file, tmp_path):
    path, m, X = model_file
    r = CliRunner()
    out = tmp_path / "m.so"
    res = r.invoke(main, ["compile", str(path), "-o", str(out), "--backend", "c",
                          "--emit-source", str(tmp_path / "src"), "--header", str(tmp_path / "treecomp.h")])
    assert res.exit_code == 0, res.output
    assert out.is_file() and (tmp_path / "src" / "model.c").is_file() and (tmp_path / "treecomp.h").is_file()
    np.save(tmp_path / "x.npy", X)
    res = r.invoke(main, ["predict", str(out), str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")])
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), m.predict(X))
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c,d,e,f", comments="")
    res = r.invoke(main, ["predict", str(out), str(tmp_path / "x.csv"), "-o", str(tmp_path / "p.npy"), "--proba"])
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), m.predict_proba(X.astype(np.float32)))


def test_inspect(model_file):
    path, m, _ = model_file
    res = CliRunner().invoke(main, ["inspect", str(path)])
    assert res.exit_code == 0, res.output
    assert "trees:      5" in res.output and "RandomForestClassifier" in res.output
    assert "depth histogram" in res.output


@pytest.mark.parametrize("args, needle", [
    (["compile", "missing.pkl", "-o", "x.so"], "not found"),
    (["predict", "missing.so", "x.npy", "-o", "y.npy"], "not found"),
    (["compile", "{bad}", "-o", "x.so"], "cannot unpickle"),
    (["compile", "{txt}", "-o", "x.so"], "unknown model file type"),
])
def test_errors_are_one_line(args, needle, tmp_path):
    (tmp_path / "bad.pkl").write_bytes(b"\x80\x04garbage")
    (tmp_path / "model.xyz").write_text("hello")
    args = [a.format(bad=tmp_path / "bad.pkl", txt=tmp_path / "model.xyz") for a in args]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1
    assert needle in res.output and "Traceback" not in res.output


def test_bad_data_file(model_file, tmp_path):
    path, _, _ = model_file
    out = tmp_path / "m.so"
    assert CliRunner().invoke(main, ["compile", str(path), "-o", str(out), "--backend", "c"]).exit_code == 0
    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    res = CliRunner().invoke(main, ["predict", str(out), str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy")])
    assert res.exit_code == 1 and "features" in res.output


def test_entry_point_installed():
    res = subprocess.run([sys.executable, "-m", "treecomp.cli", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and treecomp.__version__ in res.stdout


def test_auto_backend_follows_the_artifact_suffix(model_file, tmp_path):
    """The model is quantisable (auto -> arrays in Python), yet `-o m.so` must be a real shared
    library; `-o m.tc` a table file; saving an arrays predictor as .so is refused."""
    path, m, X = model_file
    f = treecomp.parse(str(path))
    assert treecomp.backends.choose(f) == "arrays" and treecomp.backends.choose(f, "so") == "c"
    r = CliRunner()
    for name, magic in (("m.so", b"\x7fELF"), ("m.tc", b"TCARRAYS")):
        res = r.invoke(main, ["compile", str(path), "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        assert (tmp_path / name).read_bytes()[:len(magic)] == magic
        np.testing.assert_array_equal(treecomp.load(tmp_path / name).predict(X), m.predict(X))
    with pytest.raises(ValueError, match="table file"):
        treecomp.compile(m, backend="arrays").save(tmp_path / "x.so")

"""Rows from a data file, for the command line (`treecomp predict`) and the benchmark (`--data`):
a ``.npy`` array, or text (``.csv`` / ``.txt``) as pandas ``DataFrame.to_csv`` and
``numpy.savetxt`` write it.

A text file's first line is taken as a header only where that is certain; a row is never
dropped or added on a guess (the predictions would then shift against the user's rows):

- a first line whose cells are the model's feature names, or ``0 .. n-1`` (what ``to_csv`` writes
  for a frame of unnamed columns, ``pd.DataFrame(array)``), is a header;
- a first line holding a cell that is not a number is a header (column names). If the model has
  feature names they must be its cells, in the model's order, as for a DataFrame given to
  ``Predictor.predict`` (scikit-learn and XGBoost refuse renamed or reordered columns too);
  otherwise columns are read by position;
- a first line of numbers is data, unless it reads as column labels (distinct ascending
  integers other than ``0 .. n-1``, or numbers beside text): that is ambiguous and refused, and
  the caller states it (``header=True`` / ``False``: the command line's ``--header`` /
  ``--no-header``);
- leading lines starting with ``#`` are comments (``np.savetxt(header=...)`` writes its header
  so, and ``np.loadtxt`` skips them).

After a header, one column more than the model's features, whose header cell is empty (pandas'
unnamed index) or beside the model's names / ``0 .. n-1``, is the index ``to_csv(index=True)``
writes, and is left out. Any other column count is an error that says so, and names the
delimiter the line seems to use when it is not the one given (a ``;``-separated file read as
comma-separated has one column). Empty fields (how pandas writes NaN) and ``nan`` are missing
values.
"""

from __future__ import annotations

import csv
import re
import warnings
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

#: the suffixes read as delimited text (the rest: .npy, or refused)
TEXT_SUFFIXES = (".csv", ".txt")
SUFFIXES = (".npy",) + TEXT_SUFFIXES
#: delimiters recognised when a line does not split into the model's columns, for the error
DELIMITER_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar", " ": "space"}
#: how the command line spells the choices a caller can state (the errors name them)
HEADER_OPTIONS = "--header / --no-header"
DELIMITER_OPTION = "--delimiter"

_INT = re.compile(r"[+-]?\d+\Z")


def read_rows(path: str | Path, n_features: int, feature_names: Sequence[str] | None = None,
              header: bool | None = None, delimiter: str = ",",
              note: Callable[[str], None] | None = None) -> np.ndarray:
    """The rows of a data file as a 2-D array (text: float64) for a model of `n_features`
    features named `feature_names` (None: a model without names).

    header: None decides as the module docstring says (refusing what is ambiguous), True reads
    the first line as a header, False as data. delimiter: one character (" ": runs of spaces).
    note(msg) is told what was inferred beyond the obvious (a numeric header, a dropped index
    column). FileNotFoundError for a missing file, ValueError for anything else that is wrong.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        return np.load(p, allow_pickle=False)
    if suffix not in TEXT_SUFFIXES:
        raise ValueError(f"unsupported data file {p.name}: use .npy, or .csv / .txt (delimited "
                         "text, comma-separated unless told otherwise)")
    return _Reader(p, n_features, feature_names, delimiter_char(delimiter), note).read(header)


def delimiter_char(text: str) -> str:
    """The delimiter a user names: one character, or "tab" / a backslash-t for a tab;
    ValueError for what cannot separate numbers (a digit, a sign, a point, a quote)."""
    d = {"tab": "\t", "\\t": "\t"}.get(text, text)
    if len(d) != 1 or d in "\"\r\n.+-_" or d.isalnum():
        raise ValueError(f"delimiter {text!r} is not usable: give one character such as ',' ';' "
                         "'|', 'tab' or a space")
    return d


class _Reader:
    def __init__(self, path: Path, n: int, names: Sequence[str] | None, delimiter: str,
                 note: Callable[[str], None] | None):
        self.path, self.name, self.n = path, path.name, int(n)
        self.names = [str(s) for s in names] if names is not None else None
        self.delim, self.note = delimiter, note or (lambda msg: None)

    # -- lines and fields ------------------------------------------------------------------
    def _lines(self) -> list[tuple[int, str]]:
        """(line number, text) of every line that is not blank, leading # comments left out."""
        try:
            text = self.path.read_text(encoding="utf-8-sig")  # a byte-order mark (Excel) too
        except UnicodeDecodeError as exc:
            raise ValueError(f"{self.name} is not UTF-8 text (byte {exc.start}): write the "
                             "numbers as plain text") from None
        lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        k = 0
        while k < len(lines) and lines[k][1].lstrip().startswith("#"):
            k += 1
        return lines[k:]

    def _fields(self, line: str, lineno: int) -> list[str]:
        if self.delim == " ":  # runs of spaces (and tabs), as np.loadtxt reads them
            return line.split()
        try:
            rows = list(csv.reader([line], delimiter=self.delim, strict=True))
        except csv.Error as exc:
            raise ValueError(f"{self.name}: line {lineno}: {exc}") from None
        return rows[0] if rows else []

    # -- the header --------------------------------------------------------------------------
    def _labels(self, cells: list[str]) -> str | None:
        """What these cells are when they are the model's column labels: "names" (its feature
        names), "range" (0 .. n-1, pandas' labels of unnamed columns), else None."""
        if self.names is not None and (cells == self.names or [c.strip() for c in cells] == self.names):
            return "names"
        if [c.strip() for c in cells] == [str(i) for i in range(self.n)]:
            return "range"
        return None

    @staticmethod
    def _kind(cell: str) -> str:
        c = cell.strip()
        if not c:
            return "empty"
        if _INT.match(c):
            return "int"
        try:
            float(c)
        except ValueError:
            return "text"
        return "number"

    def _ambiguous(self, why: str) -> ValueError:
        return ValueError(f"{self.name}: cannot tell whether the first line is a header or data "
                          f"({why}): say which with {HEADER_OPTIONS}")

    def _decide(self, cells: list[str], header: bool | None) -> tuple[bool, bool]:
        """(the first line is a header, the first column is pandas' index)."""
        n = self.n
        whole, tail = self._labels(cells), (self._labels(cells[1:]) if len(cells) == n + 1 else None)
        first = cells[0].strip() if cells else ""
        kinds = [self._kind(c) for c in cells]
        if header is None:
            if whole or tail:
                header = True
            elif "text" in kinds:
                if "number" in kinds:
                    bad = next(c for c, k in zip(cells, kinds) if k == "text")
                    raise self._ambiguous(f"it holds numbers beside text such as {bad.strip()!r}")
                header = True
            else:
                body = [c.strip() for c in (cells[1:] if kinds and kinds[0] == "empty" else cells)]
                ints = [int(c) for c in body] if all(_INT.match(c) for c in body) else None
                if ints is not None and len(ints) >= 2 and all(a < b for a, b in zip(ints, ints[1:])):
                    shown = ",".join(cells[:6]) + (",..." if len(cells) > 6 else "")
                    raise self._ambiguous(f"{shown}: ascending whole numbers, which could be a "
                                          "frame's column labels")
                header = False
        if not header:
            return False, False
        index = len(cells) == n + 1 and (first == "" or tail is not None)
        if self.names is not None:
            got = cells[1:] if index else cells
            if not self._labels(got) and "text" in [self._kind(c) for c in got]:
                shown = [c.strip() for c in got]
                raise ValueError(
                    f"{self.name}: the header's column names {shown[:10]}"
                    f"{' ...' if len(shown) > 10 else ''} are not the model's feature names "
                    f"{self.names[:10]}{' ...' if len(self.names) > 10 else ''} in its order: "
                    "write the model's columns in its order under its names, or leave the "
                    "header line out to read the columns by position")
        if whole == "range" or (index and tail == "range"):
            self.note(f"{self.name}: its first line ({','.join(cells[:4])}"
                      f"{',...' if len(cells) > 4 else ''}) is read as column labels, as pandas "
                      "writes an unnamed frame's (--no-header reads it as data)")
        if index:
            self.note(f"{self.name}: its first column is read as pandas' index "
                      "(DataFrame.to_csv(index=True)) and left out")
        return True, index

    # -- widths --------------------------------------------------------------------------------
    def _width_error(self, line: str, lineno: int, got: int, want: int, what: str) -> ValueError:
        msg = (f"{self.name}: line {lineno} has {got} {DELIMITER_NAMES.get(self.delim, repr(self.delim))}"
               f"-separated field{'s' if got != 1 else ''}; {what}")
        for d, dname in DELIMITER_NAMES.items():
            if d == self.delim:
                continue
            k = len(line.split()) if d == " " else len(line.split(d))
            if k in (self.n, self.n + 1) and k > 1:
                return ValueError(msg + f". The line looks {dname}-separated: pass "
                                        f"{DELIMITER_OPTION} {d!r}" + (" (or write it with "
                                        "commas: pandas to_csv(sep=','))" if self.delim == "," else ""))
        if got == self.n + 1 and want == self.n:
            msg += (". Is the first column an index (pandas to_csv(index=True))? Write the file "
                    "with to_csv(index=False)")
        return ValueError(msg)

    # -- the whole file ----------------------------------------------------------------------
    def read(self, header: bool | None) -> np.ndarray:
        lines = self._lines()
        if not lines:
            raise ValueError(f"{self.name} has no data rows")
        lineno, line = lines[0]
        cells = self._fields(line, lineno)
        want = f"the model takes {self.n} feature{'s' if self.n != 1 else ''}"
        if len(cells) not in (self.n, self.n + 1):  # wrong whatever the line is
            raise self._width_error(line, lineno, len(cells), self.n, want)
        has_header, index = self._decide(cells, header)
        width = self.n + (1 if index else 0)
        want += " after the index column" if index else ""
        if len(cells) != width:
            raise self._width_error(line, lineno, len(cells), width, want)
        data = lines[1:] if has_header else lines
        if not data:
            hint = f"; {HEADER_OPTIONS.split(' / ')[1]} reads it as data" if header is None else ""
            raise ValueError(f"{self.name} has no data rows (only a header line{hint})")
        X = self._fast(data, width)
        if X is None:
            X = self._slow(data, width, want, index)
        return np.ascontiguousarray(X[:, 1:]) if index and X.shape[1] == width else X

    def _fast(self, data: list[tuple[int, str]], width: int) -> np.ndarray | None:
        """numpy's C reader, for files of plain numbers and empty fields (read as nan), else
        None (a quoted field, stray text, a wrong width: _slow names what is wrong)."""
        lines = [t for _, t in data]
        if self.delim != " ":  # an empty field (at a line's start, between delimiters, at its end)
            d = re.escape(self.delim)
            empty = re.compile(rf"(?:(?<=^)|(?<={d}))(?={d}|$)", re.M)
            lines = empty.sub("nan", "\n".join(lines)).split("\n")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                X = np.loadtxt(lines, delimiter=None if self.delim == " " else self.delim,
                               comments=None, quotechar='"', ndmin=2, dtype=np.float64)
        except (ValueError, UserWarning):
            return None
        return X if X.shape == (len(data), width) else None

    def _slow(self, data: list[tuple[int, str]], width: int, want: str, index: bool) -> np.ndarray:
        """Field by field: empty fields read as NaN; the first wrong line or value named. An
        index column (left out) is not read."""
        if self.delim == " ":
            split = [line.split() for _, line in data]
        else:
            try:
                split = list(csv.reader([line for _, line in data], delimiter=self.delim, strict=True))
            except csv.Error:  # name the line
                split = [self._fields(line, lineno) for lineno, line in data]
        rows = []
        for (lineno, line), r in zip(data, split):
            if len(r) != width:
                raise self._width_error(line, lineno, len(r), width, want)
            rows.append(r[1:] if index else r)
        cells = np.char.strip(np.array(rows, dtype=str))
        cells[cells == ""] = "nan"
        try:
            return cells.astype(np.float64)
        except ValueError:  # name the first bad value (or take what Python's float reads)
            pass
        out = np.empty(cells.shape, np.float64)
        for i, ((lineno, _), r) in enumerate(zip(data, cells.tolist())):
            for j, v in enumerate(r):
                try:
                    out[i, j] = float(v)
                except ValueError:
                    raise ValueError(f"{self.name}: line {lineno}, column {j + 1 + index}: {v!r} is "
                                     "not a number (empty fields and nan read as missing "
                                     "values)") from None
        return out

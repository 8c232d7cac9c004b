/*
 * numparse.c -- JSON number arrays checked and converted in one pass (treecomp._numparse).
 *
 * The bulk of an XGBoost JSON model is comma-separated numbers ("left_children":[1,3,-1,...]).
 * treecomp.frontends.jsonarrays finds those array bodies; this module checks every byte of
 * them against JSON's number grammar (RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)
 * and converts each number in the same pass, writing straight into the caller's array.
 * Python's side is treecomp/numparse.py (the documented functions); no numpy headers needed:
 * arrays come in through the buffer protocol.
 *
 *   scan(data, spans, counts, flags) -> None
 *       spans: int64 pairs (a, b), 0 <= a <= b <= len(data): the bodies data[a:b]. For each:
 *       counts[i] = its commas + 1 when every byte is one of "-+.0123456789eE," else -1;
 *       flags[i] = 1 when it holds '.', 'e' or 'E' (json.loads would make floats), else 0.
 *   parse(data, spans, out, kind) -> int
 *       the numbers of every span, in order, into out (kind 0 int64, 1 int32, 2 float64,
 *       3 float32); returns 0 when every span is a non-empty list of JSON numbers of the kind
 *       and they fill out exactly, 1 when not (out is then garbage), 2 (kind 1) when some
 *       integer does not fit int32. Integers: no fraction, no exponent, at most 18
 *       characters (the sign included). Floats: a fraction or an exponent (else json.loads
 *       gives an int), converted to the float64 float(token) gives: exactly (mantissa of at
 *       most 19 significant digits and <= 2^53, |power of ten| <= 22: both exact doubles,
 *       so one multiply or divide is correctly rounded), else by CPython's own correctly
 *       rounded, locale-independent PyOS_string_to_double; float32 is that float64 rounded
 *       to nearest (a C cast, as numpy's astype; beyond float32's range: inf).
 *   source_hash() -> str: the sha256 of this file as setup.py embedded it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <stdint.h>
#include <string.h>

#ifndef TC_SOURCE_HASH
#define TC_SOURCE_HASH ""
#endif

/* the exact fast path needs every double operation rounded once, in double */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define NP_FAST 1
#else
#define NP_FAST 0
#endif

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

enum { K_I64 = 0, K_I32 = 1, K_F64 = 2, K_F32 = 3 };
enum { OK = 0, BAD = 1, WIDE = 2, FAIL = -1 /* a Python exception is set */ };

static int get_spans(Py_buffer *data, Py_buffer *spans, Py_ssize_t *n) {
  if (spans->len % 16) {
    PyErr_SetString(PyExc_ValueError, "spans must be int64 pairs");
    return -1;
  }
  *n = spans->len / 16;
  const char *s = (const char *)spans->buf;
  for (Py_ssize_t i = 0; i < *n; i++) {
    int64_t ab[2];
    memcpy(ab, s + 16 * i, 16);
    if (ab[0] < 0 || ab[0] > ab[1] || ab[1] > (int64_t)data->len) {
      PyErr_SetString(PyExc_ValueError, "a span lies outside the data");
      return -1;
    }
  }
  return 0;
}

static int64_t span_at(Py_buffer *spans, Py_ssize_t i, int which) {
  int64_t v;
  memcpy(&v, (const char *)spans->buf + 16 * i + 8 * which, 8);
  return v;
}

/* commas, any byte outside "-+.0123456789eE,", any '.' / 'e' / 'E' in p[0:n]: blocks of 64
   bytes with byte-wide accumulators (branch-free compares the compiler vectorises) */
__attribute__((optimize("O3"))) static void scan_bytes(const unsigned char *p, int64_t n,
                                                       int64_t *commas, int *other, int *fl) {
  int64_t cm = 0;
  unsigned char bad = 0, f = 0;
  while (n >= 64) {
    unsigned char c8 = 0;
    for (int i = 0; i < 64; i++) {
      unsigned char c = p[i];
      unsigned char e = (unsigned char)((c | 0x20) == 'e');
      unsigned char ok = (unsigned char)(((unsigned char)(c - '+') < 4) | ((unsigned char)(c - '0') < 10) | e);
      bad |= (unsigned char)(ok ^ 1);
      c8 += (unsigned char)(c == ',');
      f |= (unsigned char)((c == '.') | e);
    }
    cm += c8;
    p += 64;
    n -= 64;
  }
  for (int64_t i = 0; i < n; i++) {
    unsigned char c = p[i];
    unsigned char e = (unsigned char)((c | 0x20) == 'e');
    unsigned char ok = (unsigned char)(((unsigned char)(c - '+') < 4) | ((unsigned char)(c - '0') < 10) | e);
    bad |= (unsigned char)(ok ^ 1);
    cm += c == ',';
    f |= (unsigned char)((c == '.') | e);
  }
  *commas = cm;
  *other = bad != 0;
  *fl = f != 0;
}

static PyObject *np_scan(PyObject *self, PyObject *args) {
  Py_buffer data, spans, counts, flags;
  if (!PyArg_ParseTuple(args, "y*y*w*w*", &data, &spans, &counts, &flags)) return NULL;
  PyObject *ret = NULL;
  Py_ssize_t n;
  if (get_spans(&data, &spans, &n) < 0) goto done;
  if (counts.len != 8 * n || flags.len != n) {
    PyErr_SetString(PyExc_ValueError, "counts / flags do not match spans");
    goto done;
  }
  const unsigned char *d = (const unsigned char *)data.buf;
  for (Py_ssize_t i = 0; i < n; i++) {
    int64_t a = span_at(&spans, i, 0), b = span_at(&spans, i, 1);
    int64_t commas = 0;
    int other = 0, fl = 0;
    scan_bytes(d + a, b - a, &commas, &other, &fl);
    int64_t cnt = other ? -1 : commas + 1;
    memcpy((char *)counts.buf + 8 * i, &cnt, 8);
    ((unsigned char *)flags.buf)[i] = (unsigned char)fl;
  }
  ret = Py_None;
  Py_INCREF(ret);
done:
  PyBuffer_Release(&data);
  PyBuffer_Release(&spans);
  PyBuffer_Release(&counts);
  PyBuffer_Release(&flags);
  return ret;
}

/* float(token) for p[0:len] (a checked JSON number): CPython's correctly rounded conversion */
static int slow_double(const unsigned char *p, size_t len, double *out) {
  char small[64];
  char *buf = len < sizeof small ? small : (char *)PyMem_Malloc(len + 1);
  if (!buf) {
    PyErr_NoMemory();
    return FAIL;
  }
  memcpy(buf, p, len);
  buf[len] = 0;
  char *end = NULL;
  double v = PyOS_string_to_double(buf, &end, NULL);
  int bad = end != buf + len;
  if (buf != small) PyMem_Free(buf);
  if (v == -1.0 && PyErr_Occurred()) return FAIL;
  if (bad) {
    PyErr_SetString(PyExc_RuntimeError, "numparse: PyOS_string_to_double stopped early");
    return FAIL;
  }
  *out = v;
  return OK;
}

/* One span's numbers: integers (kind 0/1) or floats (2/3) into out from index *pos; returns
   OK / BAD / WIDE / FAIL. */
static int parse_span(const unsigned char *p, const unsigned char *end, char *out, int kind,
                      Py_ssize_t cap, Py_ssize_t *pos) {
  const int floats = kind >= K_F64;
  Py_ssize_t k = *pos;
  if (p == end) return BAD;
  for (;;) { /* one number, then ',' or the end */
    const unsigned char *tok = p;
    int neg = 0;
    if (*p == '-') {
      neg = 1;
      if (++p == end) return BAD;
    }
    if ((unsigned)(*p - '0') > 9) return BAD;
    uint64_t m = 0;
    int64_t sig = 0;  /* significant digits in m (leading zeros not counted) */
    int64_t frac = 0; /* digits after the '.' */
    if (*p == '0') {
      p++;
      if (p != end && (unsigned)(*p - '0') <= 9) return BAD; /* a leading zero */
    } else {
      while (p != end && (unsigned)(*p - '0') <= 9) {
        if (sig < 19) m = m * 10 + (uint64_t)(*p - '0');
        sig++;
        p++;
      }
    }
    int is_float = 0;
    int64_t e = 0;
    int e_big = 0; /* an exponent beyond 10^6: the slow path (e is then not its value) */
    if (p != end && *p == '.') {
      is_float = 1;
      if (++p == end || (unsigned)(*p - '0') > 9) return BAD;
      while (p != end && (unsigned)(*p - '0') <= 9) {
        if (sig || *p != '0') {
          if (sig < 19) m = m * 10 + (uint64_t)(*p - '0');
          sig++;
        }
        frac++;
        p++;
      }
    }
    if (p != end && (*p == 'e' || *p == 'E')) {
      is_float = 1;
      int eneg = 0;
      if (++p == end) return BAD;
      if (*p == '-' || *p == '+') {
        eneg = *p == '-';
        if (++p == end) return BAD;
      }
      if ((unsigned)(*p - '0') > 9) return BAD;
      while (p != end && (unsigned)(*p - '0') <= 9) {
        if (e < 1000000)
          e = e * 10 + (*p - '0');
        else
          e_big = 1;
        p++;
      }
      if (eneg) e = -e;
    }
    if (p != end && *p != ',') return BAD;
    if (is_float != floats) return BAD;
    if (k >= cap) return BAD; /* more numbers than the caller counted */
    if (!floats) {
      if (p - tok > 18) return BAD; /* what the int64 path takes */
      int64_t v = neg ? -(int64_t)m : (int64_t)m;
      if (kind == K_I64) {
        memcpy(out + 8 * k, &v, 8);
      } else {
        if (v < INT32_MIN || v > INT32_MAX) return WIDE;
        int32_t w = (int32_t)v;
        memcpy(out + 4 * k, &w, 4);
      }
    } else {
      double v;
      int64_t e10 = e - frac;
      if (NP_FAST && !e_big && sig <= 19 && m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
        double dm = (double)m; /* exact */
        v = e10 < 0 ? dm / POW10[-e10] : dm * POW10[e10];
        if (neg) v = -v;
      } else if (slow_double(tok, (size_t)(p - tok), &v) != OK) {
        return FAIL;
      }
      if (kind == K_F64) {
        memcpy(out + 8 * k, &v, 8);
      } else {
        float f = (float)v;
        memcpy(out + 4 * k, &f, 4);
      }
    }
    k++;
    if (p == end) break;
    p++; /* the ',' */
    if (p == end) return BAD; /* a trailing ',' */
  }
  *pos = k;
  return OK;
}

static PyObject *np_parse(PyObject *self, PyObject *args) {
  Py_buffer data, spans, out;
  int kind;
  if (!PyArg_ParseTuple(args, "y*y*w*i", &data, &spans, &out, &kind)) return NULL;
  PyObject *ret = NULL;
  Py_ssize_t n;
  if (get_spans(&data, &spans, &n) < 0) goto done;
  if (kind < K_I64 || kind > K_F32) {
    PyErr_SetString(PyExc_ValueError, "kind must be 0 (int64), 1 (int32), 2 (float64) or 3 (float32)");
    goto done;
  }
  const Py_ssize_t size = (kind == K_I32 || kind == K_F32) ? 4 : 8;
  if (out.len % size) {
    PyErr_SetString(PyExc_ValueError, "out's size is not a multiple of the kind's");
    goto done;
  }
  const Py_ssize_t cap = out.len / size;
  const unsigned char *d = (const unsigned char *)data.buf;
  Py_ssize_t pos = 0;
  int rc = OK;
  for (Py_ssize_t i = 0; i < n && rc == OK; i++)
    rc = parse_span(d + span_at(&spans, i, 0), d + span_at(&spans, i, 1), (char *)out.buf, kind,
                    cap, &pos);
  if (rc == FAIL) goto done;
  if (rc == OK && pos != cap) rc = BAD;
  ret = PyLong_FromLong(rc);
done:
  PyBuffer_Release(&data);
  PyBuffer_Release(&spans);
  PyBuffer_Release(&out);
  return ret;
}

static PyObject *np_source_hash(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(TC_SOURCE_HASH);
}

static PyMethodDef methods[] = {
    {"scan", np_scan, METH_VARARGS, "scan(data, spans, counts, flags): count and classify spans"},
    {"parse", np_parse, METH_VARARGS, "parse(data, spans, out, kind) -> 0 ok, 1 invalid, 2 wide"},
    {"source_hash", np_source_hash, METH_NOARGS, "sha256 of the numparse.c it was built from"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_numparse",
                                    "JSON number arrays checked and converted in one pass", -1,
                                    methods};

PyMODINIT_FUNC PyInit__numparse(void) {
  return PyModule_Create(&module);
}

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

/* =============================================================================================
 * LightGBM text models (treecomp.frontends.lightgbm): tree blocks and space-separated numbers
 *
 *   lgbm_blocks(data, start, bounds, sized, keys) -> (rc, after, spans, names)
 *       the trees of a LightGBM text model as treecomp.frontends.lightgbm's Python reader
 *       (_split_model_text, _tree_block) finds them: sized=1: tree i's "Tree=" line at
 *       bounds[i], its block ending before bounds[i + 1] (tree_sizes); sized=0: consecutive
 *       "Tree=" blocks from offset `start`. A block: at most 22 key=value lines up to an empty
 *       line. For tree i and keys[k] (a tuple of bytes), spans[i, k] = the (a, b) offsets of
 *       the value of its last line with that key, (-1, -1) when none; names[i] = the offsets
 *       of its "Tree=" line's text after the '=' (both int64, as bytes). rc 0: `after` the
 *       offset where the trees end; rc 1: something the Python reader words as an error (a
 *       line without '=', a block without its empty line, a tree_sizes offset not at a
 *       "Tree=" line): nothing is decided, the Python reader reads the file.
 *   lgbm_ints(data, spans, out, state) -> None
 *       integer fields as LightGBM's Atoi reads a whole value (" *[+-]?[0-9]+ *"): state[i] 0
 *       no value (a < 0), 1 out[i] holds it (at most 18 characters for sign and digits),
 *       2 anything else (the Python reader decides).
 *   lgbm_numbers(data, spans, counts, out, kind) -> int
 *       for each span (a, b) with counts[i] > 0: exactly counts[i] numbers separated by single
 *       spaces, appended to out (kind 0 int64, 1 int32, 2 float64): integers [+-]?[0-9]+ of at
 *       most 18 digits (int32: that fit), floats [+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?
 *       converted to the double float(token) gives (correctly rounded: exact arithmetic where
 *       mantissa and power of ten are exact, else a wider long double quotient or product
 *       that is not a halfway case between two doubles, else CPython's PyOS_string_to_double).
 *       Returns 0 when every span was read and out is full, 1 otherwise (a span absent, even
 *       with count 0; anything else, "inf" / "nan" included: the Python reader decides).
 * ============================================================================================= */
#include <math.h>

#define LG_MAX_KEYS 32
#define LG_MAX_LINES 22 /* LightGBM's Tree(const char*) reads at most 22 key=value lines */

static Py_ssize_t lg_line_end(const char *d, Py_ssize_t len, Py_ssize_t pos) {
  if (pos >= len) return len;
  const char *nl = (const char *)memchr(d + pos, '\n', (size_t)(len - pos));
  Py_ssize_t e = nl ? nl - d : len;
  const char *cr = (const char *)memchr(d + pos, '\r', (size_t)(e - pos));
  return cr ? cr - d : e;
}

static Py_ssize_t lg_skip_newline(const char *d, Py_ssize_t len, Py_ssize_t pos) {
  if (pos < len && d[pos] == '\r') pos++;
  if (pos < len && d[pos] == '\n') pos++;
  return pos;
}

typedef struct {
  int n;
  const char *key[LG_MAX_KEYS];
  Py_ssize_t len[LG_MAX_KEYS];
} lg_keys;

/* one tree's block from pos: 0 and *end at the empty line (or after 22 lines), 1 when the
   Python reader raises (pos reaches limit before the empty line, a line without '=') */
static int lg_block(const char *d, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t limit,
                    const lg_keys *keys, int64_t *sp, Py_ssize_t *end_out) {
  for (int line = 0; line < LG_MAX_LINES; line++) {
    if (pos >= limit) return 1;
    if (d[pos] == '\r' || d[pos] == '\n') break;
    Py_ssize_t end = lg_line_end(d, len, pos);
    const char *eq = (const char *)memchr(d + pos, '=', (size_t)(end - pos));
    if (!eq) return 1;
    Py_ssize_t klen = eq - (d + pos);
    for (int k = 0; k < keys->n; k++) {
      if (keys->len[k] == klen && memcmp(keys->key[k], d + pos, (size_t)klen) == 0) {
        sp[2 * k] = (eq - d) + 1;
        sp[2 * k + 1] = end;
        break;
      }
    }
    pos = lg_skip_newline(d, len, end);
  }
  *end_out = pos;
  return 0;
}

static int lg_is_tree_line(const char *d, Py_ssize_t pos, Py_ssize_t end) {
  return end - pos >= 5 && memcmp(d + pos, "Tree=", 5) == 0;
}

/* growable int64 output (lgbm_blocks' spans and names) */
typedef struct {
  int64_t *v;
  Py_ssize_t n, cap;
} lg_vec;

static int64_t *lg_grow(lg_vec *v, Py_ssize_t k) {
  if (v->n + k > v->cap) {
    Py_ssize_t cap = v->cap ? v->cap : 1024;
    while (cap < v->n + k) cap *= 2;
    int64_t *w = (int64_t *)PyMem_Realloc(v->v, (size_t)cap * 8);
    if (!w) {
      PyErr_NoMemory();
      return NULL;
    }
    v->v = w;
    v->cap = cap;
  }
  int64_t *out = v->v + v->n;
  v->n += k;
  return out;
}

static PyObject *lg_blocks(PyObject *self, PyObject *args) {
  Py_buffer data, bounds;
  Py_ssize_t start;
  int sized;
  PyObject *keyt;
  if (!PyArg_ParseTuple(args, "y*ny*iO!", &data, &start, &bounds, &sized, &PyTuple_Type, &keyt))
    return NULL;
  PyObject *ret = NULL;
  lg_vec sp = {NULL, 0, 0}, nm = {NULL, 0, 0};
  lg_keys keys;
  keys.n = (int)PyTuple_GET_SIZE(keyt);
  if (keys.n < 1 || keys.n > LG_MAX_KEYS) {
    PyErr_SetString(PyExc_ValueError, "lgbm_blocks: 1 to 32 keys");
    goto done;
  }
  for (int k = 0; k < keys.n; k++) {
    PyObject *o = PyTuple_GET_ITEM(keyt, k);
    if (!PyBytes_Check(o)) {
      PyErr_SetString(PyExc_TypeError, "lgbm_blocks: keys must be bytes");
      goto done;
    }
    keys.key[k] = PyBytes_AS_STRING(o);
    keys.len[k] = PyBytes_GET_SIZE(o);
  }
  const char *d = (const char *)data.buf;
  const Py_ssize_t len = data.len;
  Py_ssize_t n = 0, pos, after = 0;
  int rc = 0;
  if (start < 0 || start > len || bounds.len % 8) {
    PyErr_SetString(PyExc_ValueError, "lgbm_blocks: start outside the data, or bounds not int64");
    goto done;
  }
  if (sized) {
    const Py_ssize_t nb = bounds.len / 8;
    const int64_t *bd = (const int64_t *)bounds.buf;
    if (nb < 1) {
      PyErr_SetString(PyExc_ValueError, "lgbm_blocks: no bounds");
      goto done;
    }
    for (Py_ssize_t i = 0; i < nb; i++) {
      if (bd[i] < 0 || bd[i] > len || (i && bd[i] < bd[i - 1])) {
        PyErr_SetString(PyExc_ValueError, "lgbm_blocks: bounds outside the data or decreasing");
        goto done;
      }
    }
    for (Py_ssize_t i = 0; rc == 0 && i < nb - 1; i++) {
      Py_ssize_t b = (Py_ssize_t)bd[i], end = lg_line_end(d, len, b), stop;
      if (!lg_is_tree_line(d, b, end)) {
        rc = 1;
        break;
      }
      int64_t *name = lg_grow(&nm, 2), *s = lg_grow(&sp, 2 * keys.n);
      if (!name || !s) goto done;
      name[0] = b + 5;
      name[1] = end;
      for (int k = 0; k < 2 * keys.n; k++) s[k] = -1;
      rc = lg_block(d, len, lg_skip_newline(d, len, end), (Py_ssize_t)bd[i + 1], &keys, s, &stop);
      n++;
    }
    after = (Py_ssize_t)bd[nb - 1];
  } else {
    pos = start;
    while (rc == 0 && pos < len) {
      Py_ssize_t end = lg_line_end(d, len, pos);
      if (end > pos) {
        if (!lg_is_tree_line(d, pos, end)) break;
        int64_t *name = lg_grow(&nm, 2), *s = lg_grow(&sp, 2 * keys.n);
        if (!name || !s) goto done;
        name[0] = pos + 5;
        name[1] = end;
        for (int k = 0; k < 2 * keys.n; k++) s[k] = -1;
        rc = lg_block(d, len, lg_skip_newline(d, len, end), len, &keys, s, &pos);
        n++;
      }
      pos = lg_skip_newline(d, len, pos);
    }
    after = pos;
  }
  if (rc) {
    ret = Py_BuildValue("iny#y#", rc, (Py_ssize_t)0, "", (Py_ssize_t)0, "", (Py_ssize_t)0);
  } else {
    /* (no tree: NULL buffers, which y# would make None) */
    ret = Py_BuildValue("iny#y#", rc, after, sp.v ? (const char *)sp.v : "", sp.n * 8,
                        nm.v ? (const char *)nm.v : "", nm.n * 8);
  }
done:
  PyMem_Free(sp.v);
  PyMem_Free(nm.v);
  PyBuffer_Release(&data);
  PyBuffer_Release(&bounds);
  return ret;
}

static PyObject *lg_ints(PyObject *self, PyObject *args) {
  Py_buffer data, spans, out, state;
  if (!PyArg_ParseTuple(args, "y*y*w*w*", &data, &spans, &out, &state)) return NULL;
  PyObject *ret = NULL;
  const Py_ssize_t n = spans.len / 16;
  if (spans.len % 16 || out.len != 8 * n || state.len != n) {
    PyErr_SetString(PyExc_ValueError, "lgbm_ints: spans / out / state sizes disagree");
    goto done;
  }
  const char *d = (const char *)data.buf;
  for (Py_ssize_t i = 0; i < n; i++) {
    int64_t a = span_at(&spans, i, 0), b = span_at(&spans, i, 1), v = 0;
    unsigned char st = 0;
    if (a >= 0) {
      st = 2;
      if (a <= b && b <= (int64_t)data.len) {
        const char *p = d + a, *e = d + b;
        while (p != e && *p == ' ') p++;
        const char *tok = p;
        int neg = 0;
        if (p != e && (*p == '+' || *p == '-')) neg = *p++ == '-';
        const char *dig = p;
        uint64_t m = 0;
        while (p != e && (unsigned)(*p - '0') <= 9 && p - tok < 19) m = m * 10 + (uint64_t)(*p++ - '0');
        const char *tend = p;
        while (p != e && *p == ' ') p++;
        if (p == e && tend > dig && tend - tok <= 18) {
          v = neg ? -(int64_t)m : (int64_t)m;
          st = 1;
        }
      }
    }
    memcpy((char *)out.buf + 8 * i, &v, 8);
    ((unsigned char *)state.buf)[i] = st;
  }
  ret = Py_None;
  Py_INCREF(ret);
done:
  PyBuffer_Release(&data);
  PyBuffer_Release(&spans);
  PyBuffer_Release(&out);
  PyBuffer_Release(&state);
  return ret;
}

/* long double wider than double, its operations correctly rounded (x87's precision control
   at 64 bits, or a 113-bit quad): checked once a call, it decides the quotient path */
static int lg_wide_ok(void) {
#if LDBL_MANT_DIG >= 64
  volatile long double one = 1.0L, tiny = 0x1p-63L;
  return (long double)(one + tiny) != one;
#else
  return 0;
#endif
}

#if LDBL_MANT_DIG >= 64
static const long double LG_POW10L[28] = {
    1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
    1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
    1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L}; /* each exact: 5^27 < 2^63 */
#endif

/* m * 10^e10 (m < 10^19, exact; e10 in [-27, 27]) rounded to double as the exact value
   would be: 0 and *out, or 1 (a halfway case, or no wide long double: the caller converts) */
static int lg_wide(uint64_t m, int64_t e10, int wide, double *out) {
#if LDBL_MANT_DIG >= 64
  if (!wide) return 1;
  long double r = e10 < 0 ? (long double)m / LG_POW10L[-e10] : (long double)m * LG_POW10L[e10];
  /* r is the exact value rounded once, to 64 (or 113) bits: it rounds to the same double as
     the exact value unless r is the midpoint of two doubles (then the exact value may lie
     on either side of it). A midpoint has 54 significant bits: exact in long double. */
#if LDBL_MANT_DIG == 64 && (defined(__x86_64__) || defined(__i386__))
  /* x87 extended: the 64-bit significand (integer bit explicit) in the first 8 bytes; r is
     normal and so is the double (10^-27 <= r < 10^46): a midpoint iff the 11 bits below the
     double's 53 are 10000000000 */
  uint64_t bits;
  memcpy(&bits, &r, 8);
  if ((bits & 0x7FF) == 0x400) return 1;
  *out = (double)r;
#else
  double v = (double)r;
  if ((long double)v != r) {
    double w = nextafter(v, r > (long double)v ? INFINITY : -INFINITY);
    if (((long double)v + (long double)w) * 0.5L == r) return 1;
  }
  *out = v;
#endif
  return 0;
#else
  (void)m;
  (void)e10;
  (void)wide;
  return 1;
#endif
}

/* one token of the float grammar at p (stops at ' ' or e): 0 and *out, 1 not the grammar,
   FAIL (a Python exception) */
static int lg_float(const char *p, const char *e, const char **next, int wide, double *out) {
  const char *tok = p;
  int neg = 0;
  if (p != e && (*p == '+' || *p == '-')) neg = *p++ == '-';
  uint64_t m = 0;
  int64_t sig = 0, frac = 0, digits = 0, ex = 0;
  int ebig = 0;
  while (p != e && (unsigned)(*p - '0') <= 9) {
    if (sig || *p != '0') {
      if (sig < 19) m = m * 10 + (uint64_t)(*p - '0');
      sig++;
    }
    digits++;
    p++;
  }
  if (p != e && *p == '.') {
    p++;
    while (p != e && (unsigned)(*p - '0') <= 9) {
      if (sig || *p != '0') {
        if (sig < 19) m = m * 10 + (uint64_t)(*p - '0');
        sig++;
      }
      frac++;
      digits++;
      p++;
    }
  }
  if (!digits) return 1;
  if (p != e && (*p == 'e' || *p == 'E')) {
    int eneg = 0;
    p++;
    if (p != e && (*p == '+' || *p == '-')) eneg = *p++ == '-';
    if (p == e || (unsigned)(*p - '0') > 9) return 1;
    while (p != e && (unsigned)(*p - '0') <= 9) {
      if (ex < 1000000)
        ex = ex * 10 + (*p - '0');
      else
        ebig = 1;
      p++;
    }
    if (eneg) ex = -ex;
  }
  if (p != e && *p != ' ') return 1;
  *next = p;
  int64_t e10 = ex - frac; /* (m's power of ten where sig <= 19; else the slow path) */
  double v;
  if (m == 0) {
    v = 0.0; /* (every digit zero, whatever the exponent) */
  } else if (NP_FAST && !ebig && sig <= 19 && m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
    double dm = (double)m; /* exact, and so is the power of ten: one rounding */
    v = e10 < 0 ? dm / POW10[-e10] : dm * POW10[e10];
  } else if (ebig || sig > 19 || e10 < -27 || e10 > 27 || lg_wide(m, e10, wide, &v)) {
    if (slow_double((const unsigned char *)tok, (size_t)(p - tok), &v) != OK) return FAIL;
    *out = v; /* (the sign is in the token) */
    return 0;
  }
  *out = neg ? -v : v;
  return 0;
}

static PyObject *lg_numbers(PyObject *self, PyObject *args) {
  Py_buffer data, spans, counts, out;
  int kind;
  if (!PyArg_ParseTuple(args, "y*y*y*w*i", &data, &spans, &counts, &out, &kind)) return NULL;
  PyObject *ret = NULL;
  const Py_ssize_t n = spans.len / 16;
  if (kind != K_I64 && kind != K_I32 && kind != K_F64) {
    PyErr_SetString(PyExc_ValueError, "lgbm_numbers: kind must be 0 (int64), 1 (int32) or 2 (float64)");
    goto done;
  }
  const Py_ssize_t size = kind == K_I32 ? 4 : 8;
  if (spans.len % 16 || counts.len != 8 * n || out.len % size) {
    PyErr_SetString(PyExc_ValueError, "lgbm_numbers: spans / counts / out sizes disagree");
    goto done;
  }
  const Py_ssize_t cap = out.len / size;
  const char *d = (const char *)data.buf;
  char *o = (char *)out.buf;
  const int wide = kind == K_F64 && lg_wide_ok();
  Py_ssize_t k = 0;
  int rc = 0;
  for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
    int64_t a = span_at(&spans, i, 0), b = span_at(&spans, i, 1), c;
    memcpy(&c, (const char *)counts.buf + 8 * i, 8);
    if (a < 0 || a > b || b > (int64_t)data.len || c < 0) {
      rc = 1;
      break;
    }
    if (c == 0) continue; /* (LightGBM does not read the line then) */
    if (c > cap - k) {
      rc = 1;
      break;
    }
    const char *p = d + a, *e = d + b;
    const Py_ssize_t stop = k + (Py_ssize_t)c;
    for (;;) {
      if (k == stop) {
        rc = 1; /* more numbers than counted */
        break;
      }
      if (kind == K_F64) {
        double v;
        int r = lg_float(p, e, &p, wide, &v);
        if (r == FAIL) goto done;
        if (r) {
          rc = 1;
          break;
        }
        memcpy(o + 8 * k, &v, 8);
      } else {
        int neg = 0;
        if (p != e && (*p == '+' || *p == '-')) neg = *p++ == '-';
        const char *dig = p;
        uint64_t m = 0;
        while (p != e && (unsigned)(*p - '0') <= 9 && p - dig < 19) m = m * 10 + (uint64_t)(*p++ - '0');
        if (p == dig || p - dig > 18 || (p != e && *p != ' ')) {
          rc = 1;
          break;
        }
        int64_t v = neg ? -(int64_t)m : (int64_t)m;
        if (kind == K_I64) {
          memcpy(o + 8 * k, &v, 8);
        } else {
          if (v < INT32_MIN || v > INT32_MAX) {
            rc = 1;
            break;
          }
          int32_t w = (int32_t)v;
          memcpy(o + 4 * k, &w, 4);
        }
      }
      k++;
      if (p == e) break;
      p++; /* the ' ' */
      if (p == e) {
        rc = 1; /* a trailing space */
        break;
      }
    }
    if (rc == 0 && k != stop) rc = 1; /* fewer numbers than counted */
  }
  if (rc == 0 && k != cap) rc = 1;
  ret = PyLong_FromLong(rc);
done:
  PyBuffer_Release(&data);
  PyBuffer_Release(&spans);
  PyBuffer_Release(&counts);
  PyBuffer_Release(&out);
  return ret;
}

static PyObject *np_source_hash(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(TC_SOURCE_HASH);
}

static PyMethodDef methods[] = {
    {"scan", np_scan, METH_VARARGS, "scan(data, spans, counts, flags): count and classify spans"},
    {"parse", np_parse, METH_VARARGS, "parse(data, spans, out, kind) -> 0 ok, 1 invalid, 2 wide"},
    {"lgbm_blocks", lg_blocks, METH_VARARGS,
     "lgbm_blocks(data, start, bounds, sized, keys) -> (rc, after, spans, names)"},
    {"lgbm_ints", lg_ints, METH_VARARGS, "lgbm_ints(data, spans, out, state): Atoi fields"},
    {"lgbm_numbers", lg_numbers, METH_VARARGS,
     "lgbm_numbers(data, spans, counts, out, kind) -> 0 ok, 1 left to Python"},
    {"source_hash", np_source_hash, METH_NOARGS, "sha256 of the numparse.c it was built from"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_numparse",
                                    "JSON number arrays checked and converted in one pass", -1,
                                    methods};

PyMODINIT_FUNC PyInit__numparse(void) {
  return PyModule_Create(&module);
}

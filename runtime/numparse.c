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
 *
 * Further sections below, each with its own description: JSON documents (find_arrays,
 * strip), UBJSON (ubj_decode, addresses), tree shapes (tree_shapes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <stdio.h>
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
__attribute__((optimize("O3"), noinline)) static void scan_bytes(const unsigned char *p, int64_t n,
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

static const uint64_t U64_POW10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* The run of decimal digits at p when it is 1 to 7 long and its 8 bytes lie before end, its
   value in *v: the run's length; 0 otherwise (no digit, 8 or more, too near the end, or a
   big-endian host): the caller reads digit by digit then. (SWAR: each byte's digit value as
   byte ^ '0'; a byte is no digit where that, or that + 6, has its high nibble set; a carry
   out of such a byte only reaches the bytes after it, past the run.) */
static inline int swar_digits(const unsigned char *p, const unsigned char *end, uint64_t *v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
  if (end - p < 8) return 0;
  uint64_t x;
  memcpy(&x, p, 8);
  x ^= 0x3030303030303030ULL;
  const uint64_t other = (x | (x + 0x0606060606060606ULL)) & 0xF0F0F0F0F0F0F0F0ULL;
  if (!other) return 0; /* 8 digits or more */
  const int run = __builtin_ctzll(other) >> 3;
  if (run == 0) return 0;
  /* the run's digits in the high bytes, the first highest-but-(run-1): leading zero bytes */
  uint64_t y = x << (8 * (8 - run));
  y = (y * 10 + (y >> 8)) & 0x00FF00FF00FF00FFULL;
  y = (y * 100 + (y >> 16)) & 0x0000FFFF0000FFFFULL;
  y = (y * 10000 + (y >> 32)) & 0x00000000FFFFFFFFULL;
  *v = y;
  return run;
#else
  (void)p;
  (void)end;
  (void)v;
  return 0;
#endif
}

/* decimal digits of v (0 for 0), v < 10^8 */
static inline int64_t decimal_digits(uint64_t v) {
  int64_t n = 0;
  while (v) {
    v /= 10;
    n++;
  }
  return n;
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
    int run;
    if (*p == '0') {
      p++;
      if (p != end && (unsigned)(*p - '0') <= 9) return BAD; /* a leading zero */
    } else if ((run = swar_digits(p, end, &m)) > 0) { /* (1-7 digits: the common case) */
      sig = run;
      p += run;
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
      uint64_t v;
      if ((run = swar_digits(p, end, &v)) > 0) {
        /* the loop below, at once: leading zeros (while m is 0) are no significant digits,
           so v's own digits are those counted; m takes them while they fit 19 digits (when
           they do not, sig > 19 sends the number to the slow path, which does not read m) */
        if (sig == 0) {
          m = v;
          sig = decimal_digits(v);
        } else {
          if (sig + run <= 19) m = m * U64_POW10[run] + v;
          sig += run;
        }
        frac += run;
        p += run;
      }
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

/* ---------------------------------------------------------------------------------------
 * JSON documents (treecomp.frontends.jsonarrays' native path): the number arrays under
 * given keys found, and the document rebuilt around them.
 *
 *   find_arrays(data, keys, min_bytes) -> (spans, key_index, counts, flags)
 *       what re.finditer(b'"(' + b"|".join(keys) + b')":\[', data) finds (the keys tried in
 *       their order, matches not overlapping), keeping each match whose quote follows '{' or
 *       ',': the body data[a:b] from after its '[' to the first ']' after it, when that is at
 *       least min_bytes long and holds only "-+.0123456789eE,". Returned as bytes: spans
 *       int64 (a, b) pairs, key_index int32 (the key's position in keys), counts int64 (the
 *       body's commas + 1), flags uint8 (1 where it holds '.', 'e' or 'E'); in document order.
 *   strip(data, spans) -> bytes
 *       data with each span data[a:b] (int64 pairs, in order, not overlapping) replaced by
 *       the JSON string "\u0000tc<i>" (i its index).
 * --------------------------------------------------------------------------------------- */

typedef struct {
  char *buf;
  Py_ssize_t len, cap;
} np_grow;

static int grow_put(np_grow *g, const void *p, Py_ssize_t n) {
  if (g->len + n > g->cap) {
    Py_ssize_t cap = g->cap ? g->cap : 4096;
    while (cap < g->len + n) cap *= 2;
    char *b = (char *)PyMem_Realloc(g->buf, (size_t)cap);
    if (!b) {
      PyErr_NoMemory();
      return -1;
    }
    g->buf = b;
    g->cap = cap;
  }
  memcpy(g->buf + g->len, p, (size_t)n);
  g->len += n;
  return 0;
}

static PyObject *np_find_arrays(PyObject *self, PyObject *args) {
  Py_buffer data;
  PyObject *keys;
  Py_ssize_t min_bytes;
  if (!PyArg_ParseTuple(args, "y*O!n", &data, &PyTuple_Type, &keys, &min_bytes)) return NULL;
  PyObject *ret = NULL;
  np_grow spans = {0}, kidx = {0}, counts = {0}, flags = {0};
  const Py_ssize_t nk = PyTuple_GET_SIZE(keys);
  for (Py_ssize_t j = 0; j < nk; j++) {
    if (!PyBytes_Check(PyTuple_GET_ITEM(keys, j))) {
      PyErr_SetString(PyExc_TypeError, "find_arrays: keys must be bytes");
      goto done;
    }
  }
  const unsigned char *d = (const unsigned char *)data.buf;
  const Py_ssize_t n = data.len;
  Py_ssize_t pos = 0;
  while (pos < n) {
    const unsigned char *q = (const unsigned char *)memchr(d + pos, '"', (size_t)(n - pos));
    if (!q) break;
    const Py_ssize_t s = q - d;
    Py_ssize_t key = -1, after = 0;
    for (Py_ssize_t j = 0; j < nk && key < 0; j++) {
      PyObject *k = PyTuple_GET_ITEM(keys, j);
      const Py_ssize_t kl = PyBytes_GET_SIZE(k);
      if (kl + 4 <= n - s && memcmp(d + s + 1, PyBytes_AS_STRING(k), (size_t)kl) == 0 &&
          d[s + 1 + kl] == '"' && d[s + 2 + kl] == ':' && d[s + 3 + kl] == '[') {
        key = j;
        after = s + 4 + kl;
      }
    }
    if (key < 0) {
      pos = s + 1;
      continue;
    }
    pos = after; /* (finditer goes on after the match, kept or not) */
    if (s == 0 || (d[s - 1] != '{' && d[s - 1] != ',')) continue;
    const unsigned char *close = (const unsigned char *)memchr(d + after, ']', (size_t)(n - after));
    if (!close || (close - d) - after < min_bytes) continue;
    const int64_t a = after, b = close - d;
    int64_t commas = 0;
    int other = 0, fl = 0;
    scan_bytes(d + a, b - a, &commas, &other, &fl);
    if (other) continue;
    const int64_t ab[2] = {a, b}, cnt = commas + 1;
    const int32_t ki = (int32_t)key;
    const unsigned char f = (unsigned char)fl;
    if (grow_put(&spans, ab, 16) < 0 || grow_put(&kidx, &ki, 4) < 0 ||
        grow_put(&counts, &cnt, 8) < 0 || grow_put(&flags, &f, 1) < 0)
      goto done;
  }
  ret = Py_BuildValue("(y#y#y#y#)", spans.buf ? spans.buf : "", spans.len, kidx.buf ? kidx.buf : "",
                      kidx.len, counts.buf ? counts.buf : "", counts.len,
                      flags.buf ? flags.buf : "", flags.len);
done:
  PyMem_Free(spans.buf);
  PyMem_Free(kidx.buf);
  PyMem_Free(counts.buf);
  PyMem_Free(flags.buf);
  PyBuffer_Release(&data);
  return ret;
}

static PyObject *np_strip(PyObject *self, PyObject *args) {
  Py_buffer data, spans;
  if (!PyArg_ParseTuple(args, "y*y*", &data, &spans)) return NULL;
  PyObject *ret = NULL;
  Py_ssize_t ns;
  if (get_spans(&data, &spans, &ns) < 0) goto done;
  /* the result's size: the data less the spans, plus each placeholder */
  Py_ssize_t size = data.len;
  int64_t prev = 0;
  for (Py_ssize_t i = 0; i < ns; i++) {
    const int64_t a = span_at(&spans, i, 0), b = span_at(&spans, i, 1);
    if (a < prev) {
      PyErr_SetString(PyExc_ValueError, "strip: spans must be in order and not overlap");
      goto done;
    }
    char tmp[48];
    size += snprintf(tmp, sizeof tmp, "\"\\u0000tc%zd\"", i) - (b - a);
    prev = b;
  }
  ret = PyBytes_FromStringAndSize(NULL, size);
  if (!ret) goto done;
  char *o = PyBytes_AS_STRING(ret);
  const char *d = (const char *)data.buf;
  prev = 0;
  for (Py_ssize_t i = 0; i < ns; i++) {
    const int64_t a = span_at(&spans, i, 0), b = span_at(&spans, i, 1);
    memcpy(o, d + prev, (size_t)(a - prev));
    o += a - prev;
    char tmp[48];
    const int k = snprintf(tmp, sizeof tmp, "\"\\u0000tc%zd\"", i);
    memcpy(o, tmp, (size_t)k);
    o += k;
    prev = b;
  }
  memcpy(o, d + prev, (size_t)(data.len - prev));
done:
  PyBuffer_Release(&data);
  PyBuffer_Release(&spans);
  return ret;
}

/* ---------------------------------------------------------------------------------------
 * UBJSON (treecomp.frontends.ubjson's native decoder) and buffer addresses.
 *
 *   ubj_decode(data, strict, alloc) -> (value,) or None
 *       decodes one UBJSON value filling all of data, the forms XGBoost's writers use: Z T F
 *       i U I l L d D S C, arrays '[' (uncounted, '#'-counted, and '$'-typed numeric with a
 *       '#' count) and uncounted objects. None (nothing raised) on anything else or anything
 *       wrong: no-op 'N', 'H', typed arrays of non-numbers, counted / typed objects, a
 *       length not 'L' under strict, duplicate keys, bad UTF-8, truncation, trailing bytes,
 *       nesting deeper than UBJ_MAX_DEPTH, ...: the Python decoder then decides (and words
 *       the error). Two passes: the first checks the structure and counts the typed arrays'
 *       elements per group (the key of the object member holding the array, and its element
 *       marker); alloc(groups) (groups: a list of (marker, total count)) returns
 *       (raw, ro): per group a native-order 1-D array of that many elements (raw, filled
 *       here) and a read-only view of it (ro); the second pass builds the value, each typed
 *       array a read-only slice of its group's ro, the groups' arrays in document order.
 *   addresses(seq, out) -> None
 *       out (int64, 2 per item): each item's buffer address and its length in bytes; every
 *       item a C-contiguous 1-D buffer of one format (the first's), else ValueError.
 * Never reads outside data; no recursion (an explicit stack); allocations bounded by the
 * input's size.
 * --------------------------------------------------------------------------------------- */

#define UBJ_MAX_DEPTH 512
#define UBJ_MAX_GROUPS 64
#define UBJ_KEY_MAX 64
#define UBJ_CACHE 1024

typedef struct {
  char marker;
  int key_len; /* -1: no key (an array's element, the top value, or the shared overflow group) */
  char key[UBJ_KEY_MAX];
  int64_t total;  /* elements (pass 1) */
  int64_t cursor; /* elements written (pass 2) */
  char *raw;      /* pass 2: the group's native array */
  PyObject *ro;   /* pass 2: its read-only view */
} ubj_group;

typedef struct {
  PyObject *obj;       /* the dict / list (pass 2) */
  int is_object;
  int64_t remaining;   /* -1: uncounted */
  const unsigned char *key; /* the pending member's key bytes (objects) */
  Py_ssize_t key_len;
  PyObject *key_str;   /* pass 2 */
} ubj_frame;

typedef struct {
  const unsigned char *d;
  Py_ssize_t n, pos;
  int strict, build;
  ubj_group groups[UBJ_MAX_GROUPS];
  int n_groups;
  struct {
    PyObject *str;
    Py_ssize_t len;
    unsigned char bytes[UBJ_KEY_MAX];
  } cache[UBJ_CACHE];
} ubj_state;

static int ubj_itemsize(unsigned char m) {
  switch (m) {
  case 'i': case 'U': return 1;
  case 'I': return 2;
  case 'l': case 'd': return 4;
  case 'L': case 'D': return 8;
  default: return 0;
  }
}

/* a big-endian integer of marker m at p (ubj_itemsize(m) bytes there) */
static int64_t ubj_int(unsigned char m, const unsigned char *p) {
  switch (m) {
  case 'i': return (int8_t)p[0];
  case 'U': return p[0];
  case 'I': return (int16_t)(uint16_t)((p[0] << 8) | p[1]);
  case 'l': return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
  default: {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
  }
  }
}

static uint32_t ubj_u32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t ubj_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
  return v;
}

/* a length / count: an integer marker and its value, >= 0, 'L' only under strict; -1: bail */
static int64_t ubj_length(ubj_state *s) {
  if (s->pos >= s->n) return -1;
  unsigned char m = s->d[s->pos];
  if (m != 'i' && m != 'U' && m != 'I' && m != 'l' && m != 'L') return -1;
  if (s->strict && m != 'L') return -1;
  int k = ubj_itemsize(m);
  if (s->n - s->pos - 1 < k) return -1;
  int64_t v = ubj_int(m, s->d + s->pos + 1);
  if (v < 0) return -1;
  s->pos += 1 + k;
  return v;
}

/* a string's bytes (its length read first): 0, or -1 to bail */
static int ubj_str_bytes(ubj_state *s, const unsigned char **p, Py_ssize_t *len) {
  int64_t k = ubj_length(s);
  if (k < 0 || k > s->n - s->pos) return -1;
  *p = s->d + s->pos;
  *len = (Py_ssize_t)k;
  s->pos += (Py_ssize_t)k;
  return 0;
}

/* a key's str (new reference), through a small cache: NULL with no exception set: bail */
static PyObject *ubj_key(ubj_state *s, const unsigned char *p, Py_ssize_t len) {
  if (len > UBJ_KEY_MAX) {
    PyObject *r = PyUnicode_DecodeUTF8((const char *)p, len, "strict");
    if (!r) PyErr_Clear();
    return r;
  }
  uint32_t h = 2166136261u;
  for (Py_ssize_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
  h = (h ^ (uint32_t)len) & (UBJ_CACHE - 1);
  if (s->cache[h].str && s->cache[h].len == len && memcmp(s->cache[h].bytes, p, (size_t)len) == 0) {
    Py_INCREF(s->cache[h].str);
    return s->cache[h].str;
  }
  PyObject *r = PyUnicode_DecodeUTF8((const char *)p, len, "strict");
  if (!r) {
    PyErr_Clear();
    return NULL;
  }
  Py_XDECREF(s->cache[h].str);
  s->cache[h].str = r;
  Py_INCREF(r);
  s->cache[h].len = len;
  memcpy(s->cache[h].bytes, p, (size_t)len);
  return r;
}

/* the group of a typed array of marker `marker` under `key` (NULL: none): the group of that
   key and marker; once UBJ_MAX_GROUPS - 8 groups exist, keys without one share a group a
   marker (as arrays without a key do). Pass 1 creates groups, pass 2 only finds them (the
   same ones: the same rule over the same document); -1: none. */
static int ubj_group_of(ubj_state *s, unsigned char marker, const unsigned char *key, Py_ssize_t key_len) {
  int kl = key && key_len <= UBJ_KEY_MAX ? (int)key_len : -1;
  for (int g = 0; g < s->n_groups; g++) {
    ubj_group *G = &s->groups[g];
    if (G->marker == (char)marker && G->key_len == kl && (kl <= 0 || memcmp(G->key, key, (size_t)kl) == 0))
      return g;
  }
  if (s->n_groups >= UBJ_MAX_GROUPS - 8) kl = -1;
  if (kl < 0) {
    for (int g = 0; g < s->n_groups; g++)
      if (s->groups[g].marker == (char)marker && s->groups[g].key_len < 0) return g;
  }
  if (s->build || s->n_groups >= UBJ_MAX_GROUPS) return -1; /* (the latter cannot happen) */
  ubj_group *G = &s->groups[s->n_groups];
  memset(G, 0, sizeof *G);
  G->marker = (char)marker;
  G->key_len = kl;
  if (kl > 0) memcpy(G->key, key, (size_t)kl);
  return s->n_groups++;
}

/* a typed array's elements (count of marker m at s->pos) into its group; pass 2: its view
   (new reference) in *out. 0, -1 bail, -2 a Python error. */
static int ubj_typed(ubj_state *s, unsigned char m, int64_t count, const unsigned char *key,
                     Py_ssize_t key_len, PyObject **out) {
  int size = ubj_itemsize(m);
  if (count > (s->n - s->pos) / size) return -1;
  int g = ubj_group_of(s, m, key, key_len);
  if (g < 0) return -1;
  ubj_group *G = &s->groups[g];
  const unsigned char *p = s->d + s->pos;
  s->pos += (Py_ssize_t)(count * size);
  if (!s->build) {
    G->total += count;
    return 0;
  }
  if (G->cursor + count > G->total) return -1; /* (the passes disagree: cannot happen) */
  char *dst = G->raw + G->cursor * size;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  memcpy(dst, p, (size_t)(count * size));
#else
  if (size == 1) {
    memcpy(dst, p, (size_t)count);
  } else if (size == 2) {
    for (int64_t i = 0; i < count; i++) {
      uint16_t v = (uint16_t)((p[2 * i] << 8) | p[2 * i + 1]);
      memcpy(dst + 2 * i, &v, 2);
    }
  } else if (size == 4) {
    for (int64_t i = 0; i < count; i++) {
      uint32_t v = ubj_u32(p + 4 * i);
      memcpy(dst + 4 * i, &v, 4);
    }
  } else {
    for (int64_t i = 0; i < count; i++) {
      uint64_t v = ubj_u64(p + 8 * i);
      memcpy(dst + 8 * i, &v, 8);
    }
  }
#endif
  PyObject *a = PyLong_FromLongLong(G->cursor), *b = PyLong_FromLongLong(G->cursor + count);
  PyObject *sl = a && b ? PySlice_New(a, b, NULL) : NULL;
  Py_XDECREF(a);
  Py_XDECREF(b);
  if (!sl) return -2;
  *out = PyObject_GetItem(G->ro, sl);
  Py_DECREF(sl);
  if (!*out) return -2;
  G->cursor += count;
  return 0;
}

/* One pass over the document. Returns 0 with *result (pass 2: a new reference), -1 bail,
   -2 a Python error. */
static int ubj_walk(ubj_state *s, PyObject **result) {
  ubj_frame stack[UBJ_MAX_DEPTH];
  int depth = 0;
  int rc = -1;
  PyObject *value = NULL;
  *result = NULL;
  for (;;) {
    ubj_frame *top = depth ? &stack[depth - 1] : NULL;
    if (top) {
      /* the container ends? */
      int ends = 0;
      if (top->remaining == 0) {
        ends = 1;
      } else if (top->remaining < 0) {
        if (s->pos >= s->n) goto out;
        if (s->d[s->pos] == (top->is_object ? '}' : ']')) {
          s->pos++;
          ends = 1;
        }
      }
      if (ends) {
        value = top->obj; /* (pass 2: the frame's reference moves to value) */
        top->obj = NULL;
        Py_CLEAR(top->key_str);
        depth--;
        goto attach;
      }
      if (top->remaining > 0) top->remaining--;
      if (top->is_object) {
        Py_CLEAR(top->key_str);
        if (ubj_str_bytes(s, &top->key, &top->key_len) < 0) goto out;
        if (s->build) {
          top->key_str = ubj_key(s, top->key, top->key_len);
          if (!top->key_str) goto out;
        }
      }
    }
    if (s->pos >= s->n) goto out;
    {
      unsigned char m = s->d[s->pos++];
      int size;
      switch (m) {
      case 'Z': case 'T': case 'F':
        if (s->build) {
          value = m == 'Z' ? Py_None : m == 'T' ? Py_True : Py_False;
          Py_INCREF(value);
        }
        break;
      case 'i': case 'U': case 'I': case 'l': case 'L':
        size = ubj_itemsize(m);
        if (s->n - s->pos < size) goto out;
        if (s->build && !(value = PyLong_FromLongLong(ubj_int(m, s->d + s->pos)))) goto error;
        s->pos += size;
        break;
      case 'd': case 'D':
        size = ubj_itemsize(m);
        if (s->n - s->pos < size) goto out;
        if (s->build) {
          double v;
          if (m == 'd') {
            uint32_t u = ubj_u32(s->d + s->pos);
            float f;
            memcpy(&f, &u, 4);
            v = f;
          } else {
            uint64_t u = ubj_u64(s->d + s->pos);
            memcpy(&v, &u, 8);
          }
          if (!(value = PyFloat_FromDouble(v))) goto error;
        }
        s->pos += size;
        break;
      case 'C':
        if (s->pos >= s->n) goto out;
        if (!s->strict && s->d[s->pos] > 127) goto out;
        if (s->build) {
          value = s->strict ? PyLong_FromLong((signed char)s->d[s->pos])
                            : PyUnicode_FromStringAndSize((const char *)s->d + s->pos, 1);
          if (!value) goto error;
        }
        s->pos++;
        break;
      case 'S': {
        const unsigned char *p;
        Py_ssize_t len;
        if (ubj_str_bytes(s, &p, &len) < 0) goto out;
        if (s->build && !(value = PyUnicode_DecodeUTF8((const char *)p, len, "strict"))) {
          PyErr_Clear();
          goto out;
        }
        break;
      }
      case '[': {
        if (s->pos < s->n && s->d[s->pos] == '$') {
          if (s->n - s->pos < 2) goto out;
          unsigned char t = s->d[s->pos + 1];
          if (!ubj_itemsize(t) || s->n - s->pos < 3 || s->d[s->pos + 2] != '#') goto out;
          s->pos += 3;
          int64_t count = ubj_length(s);
          if (count < 0) goto out;
          int r = ubj_typed(s, t, count, top && top->is_object ? top->key : NULL,
                            top && top->is_object ? top->key_len : 0, &value);
          if (r == -1) goto out;
          if (r == -2) goto error;
          break;
        }
        int64_t count = -1;
        if (s->pos < s->n && s->d[s->pos] == '#') {
          s->pos++;
          count = ubj_length(s);
          if (count < 0 || count > s->n - s->pos) goto out;
        }
        if (depth >= UBJ_MAX_DEPTH - 1) goto out;
        ubj_frame *f = &stack[depth];
        memset(f, 0, sizeof *f);
        f->remaining = count;
        if (s->build && !(f->obj = PyList_New(0))) goto error;
        depth++;
        continue;
      }
      case '{': {
        if (s->pos < s->n && (s->d[s->pos] == '$' || s->d[s->pos] == '#')) goto out;
        if (depth >= UBJ_MAX_DEPTH - 1) goto out;
        ubj_frame *f = &stack[depth];
        memset(f, 0, sizeof *f);
        f->is_object = 1;
        f->remaining = -1;
        if (s->build && !(f->obj = PyDict_New())) goto error;
        depth++;
        continue;
      }
      default:
        goto out; /* 'N', 'H', ']', '}', unknown */
      }
    }
  attach:
    if (!depth) break;
    if (s->build) {
      ubj_frame *p = &stack[depth - 1];
      if (p->is_object) {
        Py_ssize_t before = PyDict_GET_SIZE(p->obj);
        int r = PyDict_SetItem(p->obj, p->key_str, value);
        Py_CLEAR(value);
        if (r < 0) goto error;
        if (PyDict_GET_SIZE(p->obj) == before) goto out; /* a duplicate key */
      } else {
        int r = PyList_Append(p->obj, value);
        Py_CLEAR(value);
        if (r < 0) goto error;
      }
    }
  }
  if (s->pos != s->n) goto out;
  *result = value;
  value = NULL;
  rc = 0;
  goto out;
error:
  rc = -2;
out:
  Py_XDECREF(value);
  while (depth > 0) {
    depth--;
    Py_XDECREF(stack[depth].obj);
    Py_XDECREF(stack[depth].key_str);
  }
  return rc;
}

static PyObject *np_ubj_decode(PyObject *self, PyObject *args) {
  Py_buffer data;
  int strict;
  PyObject *alloc;
  if (!PyArg_ParseTuple(args, "y*pO", &data, &strict, &alloc)) return NULL;
  PyObject *ret = NULL, *groups = NULL, *got = NULL, *result = NULL;
  Py_buffer raw[UBJ_MAX_GROUPS];
  int n_raw = 0;
  ubj_state *s = (ubj_state *)PyMem_Calloc(1, sizeof(ubj_state));
  if (!s) {
    PyErr_NoMemory();
    goto done;
  }
  s->d = (const unsigned char *)data.buf;
  s->n = data.len;
  s->strict = strict;
  int rc = ubj_walk(s, &result);
  if (rc == -2) goto done;
  if (rc == -1) {
    ret = Py_None;
    Py_INCREF(ret);
    goto done;
  }
  if (!(groups = PyList_New(s->n_groups))) goto done;
  for (int g = 0; g < s->n_groups; g++) {
    PyObject *t = Py_BuildValue("(C L)", s->groups[g].marker, (long long)s->groups[g].total);
    if (!t) goto done;
    PyList_SET_ITEM(groups, g, t);
  }
  if (!(got = PyObject_CallFunctionObjArgs(alloc, groups, NULL))) goto done;
  PyObject *raws, *ros;
  if (!PyArg_ParseTuple(got, "OO", &raws, &ros) || !PyList_Check(raws) || !PyList_Check(ros) ||
      PyList_GET_SIZE(raws) != s->n_groups || PyList_GET_SIZE(ros) != s->n_groups) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "alloc must return two lists, one array a group");
    goto done;
  }
  for (int g = 0; g < s->n_groups; g++) {
    if (PyObject_GetBuffer(PyList_GET_ITEM(raws, g), &raw[g], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    n_raw++;
    if (raw[g].len != s->groups[g].total * ubj_itemsize((unsigned char)s->groups[g].marker)) {
      PyErr_SetString(PyExc_ValueError, "alloc's arrays do not match the groups");
      goto done;
    }
    s->groups[g].raw = (char *)raw[g].buf;
    s->groups[g].ro = PyList_GET_ITEM(ros, g);
    s->groups[g].cursor = 0;
  }
  int n_groups = s->n_groups;
  s->pos = 0;
  s->build = 1;
  rc = ubj_walk(s, &result);
  if (rc == -2) goto done;
  if (rc == -1 || s->n_groups != n_groups) {
    Py_CLEAR(result);
    ret = Py_None;
    Py_INCREF(ret);
    goto done;
  }
  for (int g = 0; g < n_groups; g++) {
    if (s->groups[g].cursor != s->groups[g].total) {
      Py_CLEAR(result);
      ret = Py_None;
      Py_INCREF(ret);
      goto done;
    }
  }
  ret = PyTuple_Pack(1, result);
done:
  Py_XDECREF(result);
  for (int g = 0; g < n_raw; g++) PyBuffer_Release(&raw[g]);
  if (s) {
    for (int i = 0; i < UBJ_CACHE; i++) Py_XDECREF(s->cache[i].str);
    PyMem_Free(s);
  }
  Py_XDECREF(got);
  Py_XDECREF(groups);
  PyBuffer_Release(&data);
  return ret;
}

static PyObject *np_addresses(PyObject *self, PyObject *args) {
  PyObject *seq;
  Py_buffer out;
  if (!PyArg_ParseTuple(args, "Ow*", &seq, &out)) return NULL;
  PyObject *ret = NULL;
  PyObject *fast = PySequence_Fast(seq, "addresses needs a sequence");
  if (!fast) goto done;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (out.len != 16 * n) {
    PyErr_SetString(PyExc_ValueError, "out must hold two int64 an item");
    goto done;
  }
  char fmt0[16] = "";
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_buffer b;
    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, i), &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
      goto done;
    const char *fmt = b.format ? b.format : "B";
    int same = b.ndim == 1 && strlen(fmt) < sizeof fmt0 && (i == 0 || strcmp(fmt, fmt0) == 0);
    if (same && i == 0) strcpy(fmt0, fmt);
    int64_t v[2] = {(int64_t)(intptr_t)b.buf, (int64_t)b.len};
    PyBuffer_Release(&b);
    if (!same) {
      PyErr_SetString(PyExc_ValueError, "addresses: the items must be 1-D buffers of one format");
      goto done;
    }
    memcpy((char *)out.buf + 16 * i, v, 16);
  }
  ret = Py_None;
  Py_INCREF(ret);
done:
  Py_XDECREF(fast);
  PyBuffer_Release(&out);
  return ret;
}

/* ---------------------------------------------------------------------------------------
 * Tree shapes (treecomp.ir.build_trees, the XGBoost frontend): forest-wide child arrays.
 *
 *   tree_shapes(sizes, left, right, wide, status, depth) -> None
 *       sizes: int64, every one >= 1, summing to the length of left and right (int64 where
 *       wide, else int32), tree i's nodes the slice after trees 0..i-1, child ids local to it.
 *       status[i] (uint8): 0 where tree i is "canonical": every node a leaf (both children
 *       -1) or internal with both children in (its id, n), and every node but the root the
 *       child of exactly one node; 1 where some child is < -1 or >= n, or one child of a node
 *       is negative and the other not; 2 where the children are in range but the tree is not
 *       canonical. depth[i] (int64): the tree's depth where canonical (root 0), else 0.
 * --------------------------------------------------------------------------------------- */

static PyObject *np_tree_shapes(PyObject *self, PyObject *args) {
  Py_buffer sizes, left, right, status, depth;
  int wide;
  if (!PyArg_ParseTuple(args, "y*y*y*pw*w*", &sizes, &left, &right, &wide, &status, &depth)) return NULL;
  PyObject *ret = NULL;
  int32_t *d = NULL;
  unsigned char *seen = NULL;
  const Py_ssize_t T = sizes.len / 8, w = wide ? 8 : 4;
  if (sizes.len % 8 || left.len % w || left.len != right.len || status.len != T || depth.len != 8 * T) {
    PyErr_SetString(PyExc_ValueError, "tree_shapes: arrays of mismatched sizes");
    goto done;
  }
  const int64_t total = left.len / w;
  int64_t sum = 0, most = 0;
  for (Py_ssize_t i = 0; i < T; i++) {
    int64_t n;
    memcpy(&n, (const char *)sizes.buf + 8 * i, 8);
    if (n < 1 || n > total - sum) {
      PyErr_SetString(PyExc_ValueError, "tree_shapes: sizes must be >= 1 and sum to the nodes");
      goto done;
    }
    sum += n;
    if (n > most) most = n;
  }
  if (sum != total) {
    PyErr_SetString(PyExc_ValueError, "tree_shapes: sizes must be >= 1 and sum to the nodes");
    goto done;
  }
  d = (int32_t *)PyMem_Malloc((size_t)(most ? most : 1) * sizeof(int32_t));
  seen = (unsigned char *)PyMem_Malloc((size_t)(most ? most : 1));
  if (!d || !seen) {
    PyErr_NoMemory();
    goto done;
  }
  const char *L = (const char *)left.buf, *R = (const char *)right.buf;
  int64_t off = 0;
  for (Py_ssize_t i = 0; i < T; i++) {
    int64_t n;
    memcpy(&n, (const char *)sizes.buf + 8 * i, 8);
    unsigned char st = 0;
    int32_t deepest = 0;
    int64_t n_int = 0, n_seen = 0;
    memset(seen, 0, (size_t)n);
    memset(d, 0, (size_t)n * sizeof(int32_t));
    for (int64_t j = 0; j < n; j++) {
      int64_t l, r;
      if (wide) {
        memcpy(&l, L + 8 * (off + j), 8);
        memcpy(&r, R + 8 * (off + j), 8);
      } else {
        int32_t a, b;
        memcpy(&a, L + 4 * (off + j), 4);
        memcpy(&b, R + 4 * (off + j), 4);
        l = a;
        r = b;
      }
      if (l < -1 || r < -1 || l >= n || r >= n || ((l < 0) != (r < 0))) {
        st = 1;
        break;
      }
      if (l < 0) continue;
      n_int++;
      if (st) continue; /* (not canonical: the range checks go on) */
      if (l <= j || r <= j || l == r) {
        st = 2;
        continue;
      }
      n_seen += !seen[l] + !seen[r];
      seen[l] = seen[r] = 1;
      /* (children come after their parent: d[j] is final when j is read, if j is reached) */
      d[l] = d[r] = d[j] + 1;
      if (d[l] > deepest) deepest = d[l];
    }
    if (!st && (2 * n_int != n - 1 || n_seen != n - 1)) st = 2;
    ((unsigned char *)status.buf)[i] = st;
    int64_t dep = st ? 0 : deepest;
    memcpy((char *)depth.buf + 8 * i, &dep, 8);
    off += n;
  }
  ret = Py_None;
  Py_INCREF(ret);
done:
  PyMem_Free(d);
  PyMem_Free(seen);
  PyBuffer_Release(&sizes);
  PyBuffer_Release(&left);
  PyBuffer_Release(&right);
  PyBuffer_Release(&status);
  PyBuffer_Release(&depth);
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
    {"find_arrays", np_find_arrays, METH_VARARGS, "find_arrays(data, keys, min_bytes) -> (spans, key_index, counts, flags)"},
    {"strip", np_strip, METH_VARARGS, "strip(data, spans) -> the data with placeholders for the spans"},
    {"ubj_decode", np_ubj_decode, METH_VARARGS, "ubj_decode(data, strict, alloc) -> (value,) or None"},
    {"addresses", np_addresses, METH_VARARGS, "addresses(seq, out): buffer addresses and sizes"},
    {"tree_shapes", np_tree_shapes, METH_VARARGS, "tree_shapes(sizes, left, right, wide, status, depth)"},
    {"lgbm_blocks", lg_blocks, METH_VARARGS,
     "lgbm_blocks(data, start, bounds, sized, keys) -> (rc, after, spans, names)"},
    {"lgbm_ints", lg_ints, METH_VARARGS, "lgbm_ints(data, spans, out, state): Atoi fields"},
    {"lgbm_numbers", lg_numbers, METH_VARARGS,
     "lgbm_numbers(data, spans, counts, out, kind) -> 0 ok, 1 left to Python"},
    {"source_hash", np_source_hash, METH_NOARGS, "sha256 of the numparse.c it was built from"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_numparse",
                                    "model files' numbers and structure (treecomp.numparse)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__numparse(void) {
  return PyModule_Create(&module);
}

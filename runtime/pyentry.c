/*
 * pyentry.c -- the Predictor's entry point for small batches: a CPython extension that checks
 * the input array, calls the kernel and returns the library's output (or labels) as a new
 * numpy array. A single row through ctypes costs ~10k instructions for the foreign call and
 * as many again in Python (argument checks, buffer addresses, a copy); this costs a few hundred.
 *
 * Built at install time as treecomp._tc_entry (setup.py), or on first use by treecomp.loader
 * (system C compiler, this interpreter's and numpy's headers, cached per machine) when the
 * package has none built from this file; where it cannot be built, the Predictor keeps its
 * ctypes path.
 *
 *     run(X, cfg, flags, mode, classes) -> ndarray | None
 *
 * X: any object; cfg: a packed tc_entry_cfg (loader._EntryCfg); flags: TREECOMP_RAW /
 * TREECOMP_TRANSFORM | PAIRS (loader); mode: what to return (OUT_* / LAB_* below); classes: the
 * label array for LAB_* modes. Returns None, computing nothing, unless X is an exact
 * numpy.ndarray, 2-D, C-contiguous, aligned, native byte order, float32 or float64, with 1 to
 * max_rows rows of n_features values (and no NaN when the model rejects NaN): the caller's
 * general path then converts, checks and reports. Labels follow numpy's rules exactly: the
 * threshold decisions compare in the output dtype (NaN -> class 0); argmax takes the first
 * maximum, a NaN counting as the maximum (np.argmax).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* the .so ABI (treecomp.h) and the arrays kernel's entry (runtime/kernels/arrays.c) */
typedef int32_t (*tc_so_fn)(const void *, int32_t, int64_t, void *, uint32_t);
typedef int32_t (*tc_arrays_fn)(const void *, const void *, int32_t, int64_t, void *, int32_t,
                                int32_t);

typedef struct { /* mirrored by loader._EntryCfg */
  uint64_t fn;   /* treecomp_predict, or tc_arrays_predict when ctx != 0 */
  uint64_t ctx;  /* the arrays kernel's tables */
  int64_t n_features, n_outputs, max_rows;
  int32_t isa, tkind; /* arrays: ISA index; the transform kind TREECOMP_TRANSFORM maps to */
  int32_t acc_bits, allow_nan;
} tc_entry_cfg;

#define TC_TRANSFORM 1
#define TC_PAIRS 0x100

/* set_error_factory(callable): code -> exception instance (treecomp.loader.kernel_error), so a
   failed kernel call raises the KernelError naming its treecomp.h code; a RuntimeError before */
static PyObject *error_factory = NULL;

static void kernel_failed(int32_t rc) {
  if (error_factory) {
    PyObject *exc = PyObject_CallFunction(error_factory, "i", (int)rc);
    if (exc) {  /* else the factory's own exception stands */
      PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
      Py_DECREF(exc);
    }
    return;
  }
  PyErr_Format(PyExc_RuntimeError, "treecomp kernel failed with code %d%s", (int)rc,
               rc == -2 ? " (out of memory)" : "");
}
enum { OUT_2D, OUT_1D, LAB_GE0, LAB_GT0, LAB_GT_HALF, LAB_ARGMAX, MODE_END };

/* np.argmax over one row: the first maximum; the first NaN wins outright */
#define ARGMAX(T)                                                \
  static npy_intp argmax_##T(const T *v, npy_intp w) {           \
    npy_intp best = 0;                                           \
    T m = v[0];                                                  \
    if (isnan(m)) return 0;                                      \
    for (npy_intp j = 1; j < w; j++)                             \
      if (!(v[j] <= m)) {                                        \
        m = v[j];                                                \
        best = j;                                                \
        if (isnan(m)) break;                                     \
      }                                                          \
    return best;                                                 \
  }
ARGMAX(float)
ARGMAX(double)

/* any +/-inf, or a value beyond float's largest (it may become inf as float); NaN is not */
static int has_big(const PyArrayObject *A, npy_intp count) {
  if (PyArray_TYPE(A) == NPY_FLOAT32) {
    const float *p = (const float *)PyArray_DATA((PyArrayObject *)A);
    for (npy_intp i = 0; i < count; ++i) if (fabsf(p[i]) > FLT_MAX) return 1;  /* not NaN */
  } else {
    const double *p = (const double *)PyArray_DATA((PyArrayObject *)A);
    for (npy_intp i = 0; i < count; ++i) if (fabs(p[i]) > (double)FLT_MAX) return 1;
  }
  return 0;
}

static int has_nan(const PyArrayObject *A, npy_intp count) {
  if (PyArray_TYPE(A) == NPY_FLOAT32) {
    const float *x = (const float *)PyArray_DATA((PyArrayObject *)A);
    for (npy_intp i = 0; i < count; i++)
      if (isnan(x[i])) return 1;
  } else {
    const double *x = (const double *)PyArray_DATA((PyArrayObject *)A);
    for (npy_intp i = 0; i < count; i++)
      if (isnan(x[i])) return 1;
  }
  return 0;
}

static PyObject *entry_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  tc_entry_cfg c;
  if (nargs != 5 || !PyBytes_CheckExact(args[1]) || PyBytes_GET_SIZE(args[1]) != sizeof c) {
    PyErr_SetString(PyExc_TypeError, "run(X, cfg: bytes, flags: int, mode: int, classes)");
    return NULL;
  }
  memcpy(&c, PyBytes_AS_STRING(args[1]), sizeof c);
  const long flags = PyLong_AsLong(args[2]), mode = PyLong_AsLong(args[3]);
  if ((flags == -1 || mode == -1) && PyErr_Occurred()) return NULL;
  if ((flags & ~(long)(TC_TRANSFORM | TC_PAIRS)) || mode < 0 || mode >= MODE_END || !c.fn
      || ((flags & TC_PAIRS) && (c.n_outputs != 1 || mode != OUT_2D)) || (mode >= LAB_GE0 && !PyArray_Check(args[4]))
      || (mode == OUT_1D && c.n_outputs != 1)) {
    PyErr_SetString(PyExc_ValueError, "treecomp entry: bad flags, mode or classes");
    return NULL;
  }
  PyObject *X = args[0];
  if (!PyArray_CheckExact(X)) Py_RETURN_NONE;
  PyArrayObject *A = (PyArrayObject *)X;
  const int tn = PyArray_TYPE(A);
  if (PyArray_NDIM(A) != 2 || (tn != NPY_FLOAT32 && tn != NPY_FLOAT64)
      || !PyArray_IS_C_CONTIGUOUS(A) || !PyArray_ISBEHAVED_RO(A))
    Py_RETURN_NONE;
  const npy_intp n = PyArray_DIM(A, 0);
  if (PyArray_DIM(A, 1) != c.n_features || n < 1 || n > c.max_rows) Py_RETURN_NONE;
  /* allow_nan bit 0: NaN accepted; bit 1: +/-inf (or a double beyond float's range) refused in
   * some feature: such a batch takes the Python path, which checks exactly and raises */
  if (!(c.allow_nan & 1) && has_nan(A, n * c.n_features)) Py_RETURN_NONE;
  if ((c.allow_nan & 2) && has_big(A, n * c.n_features)) Py_RETURN_NONE;

  const npy_intp width = (flags & TC_PAIRS) ? 2 : c.n_outputs;
  const int acc = c.acc_bits == 64 ? NPY_FLOAT64 : NPY_FLOAT32;
  const size_t acc_size = c.acc_bits == 64 ? 8 : 4;
  PyObject *res = NULL;
  void *op;
  double stack[512];
  if (mode <= OUT_1D) { /* the outputs are the result: written in place */
    npy_intp dims[2] = {n, width};
    res = PyArray_SimpleNew(mode == OUT_1D ? 1 : 2, dims, acc);
    if (!res) return NULL;
    op = PyArray_DATA((PyArrayObject *)res);
  } else if ((size_t)(n * width) * acc_size <= sizeof stack) {
    op = stack;
  } else if (!(op = PyMem_Malloc((size_t)(n * width) * acc_size))) {
    return PyErr_NoMemory();
  }

  int32_t rc;
  const void *xp = PyArray_DATA(A);
  const int32_t bits = tn == NPY_FLOAT64 ? 64 : 32, tf = (int32_t)(flags & TC_TRANSFORM);
  Py_BEGIN_ALLOW_THREADS
  if (c.ctx)
    rc = ((tc_arrays_fn)(uintptr_t)c.fn)((const void *)(uintptr_t)c.ctx, xp, bits, n, op, c.isa,
                                         c.tkind * tf);
  else
    rc = ((tc_so_fn)(uintptr_t)c.fn)(xp, bits, n, op, (uint32_t)tf);
  Py_END_ALLOW_THREADS
  if (rc != 0) {
    kernel_failed(rc);
    goto fail;
  }
  if (flags & TC_PAIRS) /* p at [0, n) -> rows (1 - p, p), from the end (in p's dtype, as numpy) */
    for (npy_intp i = n - 1; i >= 0; i--) {
      if (acc == NPY_FLOAT32) {
        float *o = (float *)op, p = o[i];
        o[2 * i] = 1.0f - p, o[2 * i + 1] = p;
      } else {
        double *o = (double *)op, p = o[i];
        o[2 * i] = 1.0 - p, o[2 * i + 1] = p;
      }
    }
  if (mode <= OUT_1D) return res;

  /* labels: class indices as numpy computes them, then classes.take(indices) */
  PyObject *idx = PyArray_SimpleNew(1, (npy_intp[]){n}, NPY_INTP);
  if (!idx) goto fail;
  npy_intp *ix = (npy_intp *)PyArray_DATA((PyArrayObject *)idx);
  for (npy_intp i = 0; i < n; i++) {
    if (acc == NPY_FLOAT32) {
      const float *v = (const float *)op + i * width;
      ix[i] = mode == LAB_GE0 ? v[0] >= 0.0f : mode == LAB_GT0 ? v[0] > 0.0f
            : mode == LAB_GT_HALF ? v[0] > 0.5f : argmax_float(v, width);
    } else {
      const double *v = (const double *)op + i * width;
      ix[i] = mode == LAB_GE0 ? v[0] >= 0.0 : mode == LAB_GT0 ? v[0] > 0.0
            : mode == LAB_GT_HALF ? v[0] > 0.5 : argmax_double(v, width);
    }
  }
  if (op != stack) PyMem_Free(op);
  /* classes.take(ix): copied here for a 1-D contiguous array of plain values (no references
   * to count) whose every index is in range (~0.2 us less than PyArray_TakeFrom for one row);
   * numpy's take otherwise */
  PyArrayObject *C = (PyArrayObject *)args[4];
  PyArray_Descr *cd = PyArray_DESCR(C);
  int fast = PyArray_NDIM(C) == 1 && PyArray_IS_C_CONTIGUOUS(C) && !PyDataType_REFCHK(cd);
  for (npy_intp i = 0; fast && i < n; i++) fast = ix[i] >= 0 && ix[i] < PyArray_DIM(C, 0);
  if (fast) {
    Py_INCREF(cd); /* stolen below */
    res = PyArray_NewFromDescr(&PyArray_Type, cd, 1, (npy_intp[]){n}, NULL, NULL, 0, NULL);
    if (res) {
      const npy_intp sz = PyArray_ITEMSIZE(C);
      char *dst = PyArray_BYTES((PyArrayObject *)res);
      const char *src = PyArray_BYTES(C);
      for (npy_intp i = 0; i < n; i++) memcpy(dst + i * sz, src + ix[i] * sz, (size_t)sz);
    }
  } else {
    res = PyArray_TakeFrom(C, idx, 0, NULL, NPY_RAISE);
  }
  Py_DECREF(idx);
  return res;

fail:
  if (mode <= OUT_1D)
    Py_XDECREF(res);
  else if (op != stack)
    PyMem_Free(op);
  return NULL;
}

/* native_ns(X, cfg, flags, reps) -> float: ns per single-row kernel call, timed in C over
 * `reps` calls cycling through X's rows (distinct rows: one row repeated would let the branch
 * predictors learn its path). What a single row costs with no Python in between: the
 * benchmark's "kernel" column. */
static PyObject *entry_native_ns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  tc_entry_cfg c;
  if (nargs != 4 || !PyBytes_CheckExact(args[1]) || PyBytes_GET_SIZE(args[1]) != sizeof c
      || !PyArray_CheckExact(args[0])) {
    PyErr_SetString(PyExc_TypeError, "native_ns(X: ndarray, cfg: bytes, flags: int, reps: int)");
    return NULL;
  }
  memcpy(&c, PyBytes_AS_STRING(args[1]), sizeof c);
  PyArrayObject *A = (PyArrayObject *)args[0];
  const long flags = PyLong_AsLong(args[2]), reps = PyLong_AsLong(args[3]);
  if (PyErr_Occurred()) return NULL;
  const int tn = PyArray_TYPE(A);
  if (PyArray_NDIM(A) != 2 || (tn != NPY_FLOAT32 && tn != NPY_FLOAT64) || !PyArray_ISCARRAY_RO(A)
      || PyArray_DIM(A, 1) != c.n_features || PyArray_DIM(A, 0) < 1 || PyArray_DIM(A, 0) > c.max_rows
      || reps < 1 || (flags & ~(long)TC_TRANSFORM) || !c.fn) {
    PyErr_SetString(PyExc_ValueError, "native_ns: bad input, flags or reps");
    return NULL;
  }
  const npy_intp n = PyArray_DIM(A, 0);
  double out[4096];
  if ((size_t)c.n_outputs > sizeof out / sizeof out[0]) {
    PyErr_SetString(PyExc_ValueError, "native_ns: too many outputs");
    return NULL;
  }
  const char *x0 = (const char *)PyArray_DATA(A);
  const npy_intp stride = PyArray_STRIDE(A, 0);
  const int32_t bits = tn == NPY_FLOAT64 ? 64 : 32, tf = (int32_t)flags;
  int32_t rc = 0;
  struct timespec t0, t1;
  Py_BEGIN_ALLOW_THREADS
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long r = 0; r < reps && rc == 0; r++) {
    const void *xp = x0 + (r % n) * stride;
    rc = c.ctx ? ((tc_arrays_fn)(uintptr_t)c.fn)((const void *)(uintptr_t)c.ctx, xp, bits, 1, out,
                                                  c.isa, c.tkind * tf)
               : ((tc_so_fn)(uintptr_t)c.fn)(xp, bits, 1, out, (uint32_t)tf);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  Py_END_ALLOW_THREADS
  if (rc != 0) {
    kernel_failed(rc);
    return NULL;
  }
  return PyFloat_FromDouble(((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec))
                            / (double)reps);
}

static PyObject *entry_cfg_size(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return PyLong_FromLong((long)sizeof(tc_entry_cfg));
}

/* source_hash() -> str: the sha256 of this file as the package build (setup.py) embedded it
 * (-DTC_SOURCE_HASH); "" when built at run time. treecomp.loader uses the package's prebuilt
 * entry only when it matches the pyentry.c next to it. */
#ifndef TC_SOURCE_HASH
#define TC_SOURCE_HASH ""
#endif
static PyObject *entry_source_hash(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return PyUnicode_FromString(TC_SOURCE_HASH);
}

static PyObject *entry_set_error_factory(PyObject *self, PyObject *factory) {
  if (!PyCallable_Check(factory)) {
    PyErr_SetString(PyExc_TypeError, "set_error_factory needs a callable");
    return NULL;
  }
  Py_INCREF(factory);
  Py_XSETREF(error_factory, factory);
  Py_RETURN_NONE;
}

static PyMethodDef entry_methods[] = {
    {"run", (PyCFunction)(void (*)(void))entry_run, METH_FASTCALL,
     "run(X, cfg, flags, mode, classes) -> ndarray | None: see runtime/pyentry.c"},
    {"native_ns", (PyCFunction)(void (*)(void))entry_native_ns, METH_FASTCALL,
     "native_ns(X, cfg, flags, reps) -> ns per single-row kernel call over X's rows, timed in C"},
    {"cfg_size", entry_cfg_size, METH_NOARGS, "sizeof(tc_entry_cfg)"},
    {"source_hash", entry_source_hash, METH_NOARGS, "sha256 of the pyentry.c it was built from"},
    {"set_error_factory", entry_set_error_factory, METH_O,
     "set_error_factory(f): a failed kernel call raises f(code), an exception instance"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef entry_module = {PyModuleDef_HEAD_INIT, "_tc_entry",
                                          "treecomp's small-batch entry point", -1, entry_methods};

PyMODINIT_FUNC PyInit__tc_entry(void) {
  import_array();
  return PyModule_Create(&entry_module);
}

/* dlprof._native: the C API of libdlprof (include/dlprof/dlprof.h) for
 * Python, at the cost of a C call.
 *
 * The module never links libdlprof. At import it looks the API up in the
 * process (dlsym(RTLD_DEFAULT)): found when libdlprof.so was preloaded
 * (DLPROF_SAMPLE=1 LD_PRELOAD=..., or `dlprof run`), absent otherwise. Absent,
 * every function is a no-op and enabled() is False, so that a program
 * annotated with `import dlprof` runs unchanged without the profiler.
 *
 * Built against the stable ABI (Py_LIMITED_API, 3.10+): one binary for every
 * CPython from 3.10 on.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* The C API's signatures, as in include/dlprof/dlprof.h: pip builds this
 * file without the repository's include folder. The CMake build compiles it
 * with the header (DLPROF_API_HEADER) and -Werror=incompatible-pointer-types,
 * so that the two cannot drift apart (check_signatures below). */
#ifdef DLPROF_API_HEADER
#include <dlprof/dlprof.h>
typedef dlprof_buffer_stats dlprof_buffer_stats_v1;
#else
typedef struct dlprof_buffer dlprof_buffer;
typedef struct dlprof_buffer_stats_v1 {
  uint64_t capacity;
  uint64_t snapshots;
  double mean_occupancy;
  double empty_fraction;
  double full_fraction;
} dlprof_buffer_stats_v1;
#endif

static struct {
  int (*enabled)(void);
  uint32_t (*stage_intern)(const char*);
  void (*stage_enter)(uint32_t);
  void (*stage_exit)(void);
  dlprof_buffer* (*buffer_create)(const char*, uint64_t);
  void (*buffer_set_size)(dlprof_buffer*, uint64_t);
  int (*buffer_stats_get)(const dlprof_buffer*, dlprof_buffer_stats_v1*);
  void (*step_begin)(void);
  void (*step_end)(void);
  void (*wait_begin)(void);
  void (*wait_end)(void);
  void (*set_worker)(int);
  int (*flush)(int);
} api;

static int api_found = 0;

#ifdef DLPROF_API_HEADER
__attribute__((unused)) static void check_signatures(void) {
  __typeof__(&dlprof_enabled) enabled = api.enabled;
  __typeof__(&dlprof_stage_intern) stage_intern = api.stage_intern;
  __typeof__(&dlprof_stage_enter) stage_enter = api.stage_enter;
  __typeof__(&dlprof_stage_exit) stage_exit = api.stage_exit;
  __typeof__(&dlprof_buffer_create) buffer_create = api.buffer_create;
  __typeof__(&dlprof_buffer_set_size) buffer_set_size = api.buffer_set_size;
  __typeof__(&dlprof_buffer_stats_get) buffer_stats_get = api.buffer_stats_get;
  __typeof__(&dlprof_step_begin) step_begin = api.step_begin;
  __typeof__(&dlprof_step_end) step_end = api.step_end;
  __typeof__(&dlprof_wait_begin) wait_begin = api.wait_begin;
  __typeof__(&dlprof_wait_end) wait_end = api.wait_end;
  __typeof__(&dlprof_set_worker) set_worker = api.set_worker;
  __typeof__(&dlprof_flush) flush = api.flush;
  (void)enabled, (void)stage_intern, (void)stage_enter, (void)stage_exit, (void)buffer_create;
  (void)buffer_set_size, (void)buffer_stats_get, (void)step_begin, (void)step_end;
  (void)wait_begin, (void)wait_end, (void)set_worker, (void)flush;
}
#endif

static int noop_enabled(void) { return 0; }
static uint32_t noop_intern(const char* name) { (void)name; return 0; }
static void noop_enter(uint32_t id) { (void)id; }
static void noop_void(void) {}
static dlprof_buffer* noop_buffer_create(const char* name, uint64_t capacity) {
  (void)name, (void)capacity;
  return NULL;
}
static void noop_set_size(dlprof_buffer* b, uint64_t size) { (void)b, (void)size; }
static int noop_stats(const dlprof_buffer* b, dlprof_buffer_stats_v1* out) {
  (void)b;
  memset(out, 0, sizeof(*out));
  return -1;
}
static void noop_set_worker(int id) { (void)id; }
static int noop_flush(int timeout_ms) { (void)timeout_ms; return -1; }

/* All or nothing: a process with half an API (another library exporting one
 * of these names) gets the no-ops. */
static void resolve_api(void) {
#define DLPROF_FIND(field, symbol) *(void**)(&api.field) = dlsym(RTLD_DEFAULT, symbol)
  DLPROF_FIND(enabled, "dlprof_enabled");
  DLPROF_FIND(stage_intern, "dlprof_stage_intern");
  DLPROF_FIND(stage_enter, "dlprof_stage_enter");
  DLPROF_FIND(stage_exit, "dlprof_stage_exit");
  DLPROF_FIND(buffer_create, "dlprof_buffer_create");
  DLPROF_FIND(buffer_set_size, "dlprof_buffer_set_size");
  DLPROF_FIND(buffer_stats_get, "dlprof_buffer_stats_get");
  DLPROF_FIND(step_begin, "dlprof_step_begin");
  DLPROF_FIND(step_end, "dlprof_step_end");
  DLPROF_FIND(wait_begin, "dlprof_wait_begin");
  DLPROF_FIND(wait_end, "dlprof_wait_end");
  DLPROF_FIND(set_worker, "dlprof_set_worker");
  DLPROF_FIND(flush, "dlprof_flush");
#undef DLPROF_FIND
  api_found = api.enabled && api.stage_intern && api.stage_enter && api.stage_exit &&
              api.buffer_create && api.buffer_set_size && api.buffer_stats_get &&
              api.step_begin && api.step_end && api.wait_begin && api.wait_end &&
              api.set_worker && api.flush;
  if (!api_found) {
    api.enabled = noop_enabled;
    api.stage_intern = noop_intern;
    api.stage_enter = noop_enter;
    api.stage_exit = noop_void;
    api.buffer_create = noop_buffer_create;
    api.buffer_set_size = noop_set_size;
    api.buffer_stats_get = noop_stats;
    api.step_begin = api.step_end = api.wait_begin = api.wait_end = noop_void;
    api.set_worker = noop_set_worker;
    api.flush = noop_flush;
  }
}

/* ---- Stage: a reusable, re-entrant context manager for one stage id ---- */

typedef struct {
  PyObject_HEAD
  uint32_t id;
  PyObject* name;
} StageObject;

static int Stage_init(PyObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"name", NULL};
  PyObject* name = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "U", kwlist, &name)) return -1;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name, NULL);
  if (utf8 == NULL) return -1;
  StageObject* s = (StageObject*)self;
  PyObject* old = s->name;
  Py_INCREF(name);
  s->name = name;
  Py_XDECREF(old);
  s->id = api.stage_intern(utf8);
  return 0;
}

static void Stage_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  Py_CLEAR(((StageObject*)self)->name);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type);
}

static PyObject* Stage_enter(PyObject* self, PyObject* unused) {
  (void)unused;
  api.stage_enter(((StageObject*)self)->id);
  Py_INCREF(self);
  return self;
}

static PyObject* Stage_exit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self, (void)args, (void)nargs;
  api.stage_exit();
  Py_RETURN_FALSE;  /* exceptions go on */
}

static PyObject* Stage_get_name(PyObject* self, void* closure) {
  (void)closure;
  PyObject* name = ((StageObject*)self)->name;
  if (name == NULL) Py_RETURN_NONE;
  Py_INCREF(name);
  return name;
}

static PyObject* Stage_get_id(PyObject* self, void* closure) {
  (void)closure;
  return PyLong_FromUnsignedLong(((StageObject*)self)->id);
}

static PyMethodDef Stage_methods[] = {
    {"__enter__", Stage_enter, METH_NOARGS, "Enters the stage (pushes it on this thread's stage stack)."},
    {"__exit__", (PyCFunction)(void (*)(void))Stage_exit, METH_FASTCALL, "Leaves the stage."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Stage_getset[] = {
    {"name", Stage_get_name, NULL, "The stage's name.", NULL},
    {"id", Stage_get_id, NULL, "The stage's id in this process (0: profiling off).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Stage_slots[] = {
    {Py_tp_init, Stage_init},
    {Py_tp_dealloc, Stage_dealloc},
    {Py_tp_methods, Stage_methods},
    {Py_tp_getset, Stage_getset},
    {Py_tp_doc, "StageBase(name): enter and exit one named stage; reusable and re-entrant."},
    {0, NULL},
};

static PyType_Spec Stage_spec = {
    "dlprof._native.StageBase", sizeof(StageObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, Stage_slots,
};

/* ---- Span: step() and wait() as context managers ---- */

typedef struct {
  PyObject_HEAD
  int kind; /* 0 step, 1 wait */
} SpanObject;

static PyObject* Span_enter(PyObject* self, PyObject* unused) {
  (void)unused;
  if (((SpanObject*)self)->kind == 0) api.step_begin(); else api.wait_begin();
  Py_INCREF(self);
  return self;
}

static PyObject* Span_exit(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)args, (void)nargs;
  if (((SpanObject*)self)->kind == 0) api.step_end(); else api.wait_end();
  Py_RETURN_FALSE;
}

static void Span_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type);
}

static PyMethodDef Span_methods[] = {
    {"__enter__", Span_enter, METH_NOARGS, "Begins the step or wait."},
    {"__exit__", (PyCFunction)(void (*)(void))Span_exit, METH_FASTCALL, "Ends it."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Span_slots[] = {
    {Py_tp_dealloc, Span_dealloc},
    {Py_tp_methods, Span_methods},
    {Py_tp_doc, "A training step or a wait for data, as a context manager."},
    {0, NULL},
};

static PyType_Spec Span_spec = {
    "dlprof._native.Span", sizeof(SpanObject), 0, Py_TPFLAGS_DEFAULT, Span_slots,
};

/* ---- module functions ---- */

static PyObject* m_available(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  return PyBool_FromLong(api_found);
}

static PyObject* m_enabled(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  return PyBool_FromLong(api.enabled());
}

static PyObject* m_intern(PyObject* m, PyObject* name) {
  (void)m;
  const char* utf8 = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
  if (utf8 == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "stage name must be a str");
    return NULL;
  }
  return PyLong_FromUnsignedLong(api.stage_intern(utf8));
}

static PyObject* m_enter(PyObject* m, PyObject* id) {
  (void)m;
  unsigned long v = PyLong_AsUnsignedLong(id);
  if (v == (unsigned long)-1 && PyErr_Occurred()) return NULL;
  api.stage_enter((uint32_t)v);
  Py_RETURN_NONE;
}

static PyObject* m_exit(PyObject* m, PyObject* unused) {
  (void)m, (void)unused;
  api.stage_exit();
  Py_RETURN_NONE;
}

#define DLPROF_VOID_CALL(fn)                                  \
  static PyObject* m_##fn(PyObject* m, PyObject* unused) {   \
    (void)m, (void)unused;                                    \
    api.fn();                                                 \
    Py_RETURN_NONE;                                           \
  }
DLPROF_VOID_CALL(step_begin)
DLPROF_VOID_CALL(step_end)
DLPROF_VOID_CALL(wait_begin)
DLPROF_VOID_CALL(wait_end)
#undef DLPROF_VOID_CALL

static PyObject* m_set_worker(PyObject* m, PyObject* id) {
  (void)m;
  long v = PyLong_AsLong(id);
  if (v == -1 && PyErr_Occurred()) return NULL;
  if (v < 0 || v > 1000000) {
    PyErr_SetString(PyExc_ValueError, "worker id must be from 0 to 1000000");
    return NULL;
  }
  api.set_worker((int)v);
  Py_RETURN_NONE;
}

static PyObject* m_flush(PyObject* m, PyObject* timeout) {
  (void)m;
  long ms = PyLong_AsLong(timeout);
  if (ms == -1 && PyErr_Occurred()) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = api.flush((int)(ms < 0 ? 0 : ms > 3600000 ? 3600000 : ms));
  Py_END_ALLOW_THREADS
  return PyBool_FromLong(rc == 0);
}

/* A buffer is an opaque handle: its address as an int (0 when off). The
 * buffer lives as long as the process (include/dlprof/dlprof.h). */
static PyObject* m_buffer_create(PyObject* m, PyObject* const* args, Py_ssize_t nargs) {
  (void)m;
  if (nargs != 2 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "buffer_create(name: str, capacity: int)");
    return NULL;
  }
  const char* name = PyUnicode_AsUTF8AndSize(args[0], NULL);
  if (name == NULL) return NULL;
  unsigned long long capacity = PyLong_AsUnsignedLongLong(args[1]);
  if (capacity == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  return PyLong_FromVoidPtr(api.buffer_create(name, capacity));
}

static PyObject* m_buffer_set_size(PyObject* m, PyObject* const* args, Py_ssize_t nargs) {
  (void)m;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "buffer_set_size(handle, size)");
    return NULL;
  }
  void* b = PyLong_AsVoidPtr(args[0]);
  if (b == NULL && PyErr_Occurred()) return NULL;
  unsigned long long size = PyLong_AsUnsignedLongLong(args[1]);
  if (size == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  api.buffer_set_size((dlprof_buffer*)b, size);
  Py_RETURN_NONE;
}

static PyObject* m_buffer_stats(PyObject* m, PyObject* handle) {
  (void)m;
  void* b = PyLong_AsVoidPtr(handle);
  if (b == NULL && PyErr_Occurred()) return NULL;
  dlprof_buffer_stats_v1 st;
  if (b == NULL || api.buffer_stats_get((const dlprof_buffer*)b, &st) != 0) Py_RETURN_NONE;
  return Py_BuildValue("{s:K,s:K,s:d,s:d,s:d}", "capacity", (unsigned long long)st.capacity,
                       "snapshots", (unsigned long long)st.snapshots, "mean_occupancy",
                       st.mean_occupancy, "empty_fraction", st.empty_fraction, "full_fraction",
                       st.full_fraction);
}

static PyMethodDef module_methods[] = {
    {"available", m_available, METH_NOARGS, "True when libdlprof is in this process."},
    {"enabled", m_enabled, METH_NOARGS, "True when this process is being profiled."},
    {"intern", m_intern, METH_O, "intern(name) -> stage id (0 when off)."},
    {"enter", m_enter, METH_O, "enter(stage_id): pushes a stage on this thread's stack."},
    {"exit", m_exit, METH_NOARGS, "exit(): pops this thread's innermost stage."},
    {"step_begin", m_step_begin, METH_NOARGS, "Begins a training step."},
    {"step_end", m_step_end, METH_NOARGS, "Ends a training step."},
    {"wait_begin", m_wait_begin, METH_NOARGS, "The loop starts waiting for data."},
    {"wait_end", m_wait_end, METH_NOARGS, "The loop has its data."},
    {"set_worker", m_set_worker, METH_O, "set_worker(id): this process is data worker id."},
    {"flush", m_flush, METH_O, "flush(timeout_ms) -> bool: writes what was recorded."},
    {"buffer_create", (PyCFunction)(void (*)(void))m_buffer_create, METH_FASTCALL,
     "buffer_create(name, capacity) -> handle (0 when off)."},
    {"buffer_set_size", (PyCFunction)(void (*)(void))m_buffer_set_size, METH_FASTCALL,
     "buffer_set_size(handle, size)."},
    {"buffer_stats", m_buffer_stats, METH_O, "buffer_stats(handle) -> dict or None."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject* m) {
  resolve_api();
  PyObject* stage = PyType_FromSpec(&Stage_spec);
  if (stage == NULL || PyModule_AddObject(m, "StageBase", stage) < 0) {
    Py_XDECREF(stage);
    return -1;
  }
  PyObject* span_type = PyType_FromSpec(&Span_spec);
  if (span_type == NULL) return -1;
  /* The two spans are singletons: entering one is a C call, no allocation. */
  const char* names[2] = {"STEP", "WAIT"};
  for (int kind = 0; kind < 2; ++kind) {
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)span_type, Py_tp_alloc);
    PyObject* span = alloc((PyTypeObject*)span_type, 0);
    if (span == NULL) {
      Py_DECREF(span_type);
      return -1;
    }
    ((SpanObject*)span)->kind = kind;
    if (PyModule_AddObject(m, names[kind], span) < 0) {
      Py_DECREF(span);
      Py_DECREF(span_type);
      return -1;
    }
  }
  Py_DECREF(span_type);
  return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "dlprof._native",
    "libdlprof's C API, looked up in the process (no-ops without it).", 0, module_methods,
    module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModuleDef_Init(&module_def); }

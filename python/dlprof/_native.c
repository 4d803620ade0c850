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

#include <structmember.h>

#include <dlfcn.h>
#include <stddef.h>
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

/* Py_XSETREF without the non-limited header. */
#define Py_XSETREF_COMPAT(dst, src) \
  do {                             \
    PyObject* old_ = (dst);        \
    (dst) = (src);                 \
    Py_XDECREF(old_);              \
  } while (0)

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

/* libdlprof's audit hook (core/python_exec_hook.cc), added to the interpreter
 * once per process: it notes the names of the code exec() runs (a module's,
 * at import) so that samples of it are named after the code is freed. Both
 * functions are looked up (PySys_AddAuditHook is not in the stable ABI);
 * libdlprof gives the hook only where it samples Python frames, and only
 * once. Adding it raises "sys.addaudithook" to the hooks already there: a
 * program's own, added by its sitecustomize or a .pth file, sees it. One
 * that refuses it with an Exception is obeyed by CPython (the hook is not
 * added, the error cleared); one that raises SystemExit or
 * KeyboardInterrupt is obeyed here too, and its error is not passed on:
 * the program did not add a hook, and failing this import ended its start
 * ("init_import_site: Failed to import the site module"). */
typedef int (*audit_hook_fn)(const char* event, PyObject* args, void* data);

static void add_exec_hook(void) {
  void* (*get_hook)(void);
  int (*add_hook)(audit_hook_fn, void*);
  if (!api_found) return;
  *(void**)(&get_hook) = dlsym(RTLD_DEFAULT, "dlprof_python_exec_hook");
  *(void**)(&add_hook) = dlsym(RTLD_DEFAULT, "PySys_AddAuditHook");
  if (get_hook == NULL || add_hook == NULL) return;
  void* hook = get_hook();
  if (hook == NULL) return;
  audit_hook_fn fn;
  memcpy(&fn, &hook, sizeof(fn));
  if (add_hook(fn, NULL) < 0) PyErr_Clear();
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

/* ---- Wrapper: a function run inside a stage, or as the loop's wait ----
 *
 * The automatic torch annotations (dlprof/_torch.py) wrap torch's fetchers,
 * collate functions, DataLoader iterators and datapipes. A wrapper written
 * in Python is a frame of its own: it shows in every traceback and moves
 * every warnings.warn(stacklevel=N) that passes through it. These wrappers
 * are C calls, which make no Python frame. Each is a descriptor, so that it
 * works as a method (bound to the instance) as well as a function. */

enum { WRAP_STAGE, WRAP_SWAP, WRAP_LOOP, WRAP_ITER };

typedef struct {
  PyObject_HEAD
  PyObject* func;   /* the original */
  PyObject* aux;    /* WRAP_LOOP: ready(it) -> (handle, size) or None;
                       WRAP_ITER: stage_of(datapipe) -> stage id */
  PyObject* bound;  /* the instance, when got through a class */
  PyObject* dict;   /* __wrapped__, __name__, ... (functools.update_wrapper) */
  int mode;
  uint32_t id, back_id;
} WrapperObject;

/* The training loop's state, per thread: a step is open. */
static _Thread_local int loop_in_step = 0;

static PyObject* wrapper_type = NULL;
static PyObject* staged_iter_type = NULL;
static PyObject* generator_type = NULL;

static PyObject* call_func(WrapperObject* w, PyObject* args, PyObject* kwargs) {
  if (w->bound == NULL) return PyObject_Call(w->func, args, kwargs);
  /* (self, *args): a new tuple, as a bound method would make. */
  Py_ssize_t n = PyTuple_Size(args);
  PyObject* full = PyTuple_New(n + 1);
  if (full == NULL) return NULL;
  Py_INCREF(w->bound);
  PyTuple_SetItem(full, 0, w->bound);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* a = PyTuple_GetItem(args, i);
    Py_INCREF(a);
    PyTuple_SetItem(full, i + 1, a);
  }
  PyObject* r = PyObject_Call(w->func, full, kwargs);
  Py_DECREF(full);
  return r;
}

/* ready(it) -> (buffer handle, batches ready), or None: the DataLoader
 * buffer's size. Its errors are dropped (the program never sees them). */
static void set_ready_size(WrapperObject* w) {
  if (w->aux == NULL || w->bound == NULL) return;
  PyObject* r = PyObject_CallFunctionObjArgs(w->aux, w->bound, NULL);
  if (r == NULL) {
    PyErr_Clear();
    return;
  }
  if (PyTuple_Check(r) && PyTuple_Size(r) == 2) {
    void* handle = PyLong_AsVoidPtr(PyTuple_GetItem(r, 0));
    unsigned long long size = PyLong_AsUnsignedLongLong(PyTuple_GetItem(r, 1));
    if (PyErr_Occurred()) {
      PyErr_Clear();
    } else if (handle != NULL) {
      api.buffer_set_size((dlprof_buffer*)handle, size);
    }
  }
  Py_DECREF(r);
}

static PyObject* staged_iter_new(PyObject* it, uint32_t id);

static PyObject* Wrapper_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  WrapperObject* w = (WrapperObject*)self;
  PyObject* r;
  switch (w->mode) {
    case WRAP_STAGE:
      api.stage_enter(w->id);
      r = call_func(w, args, kwargs);
      api.stage_exit();
      return r;
    case WRAP_SWAP: /* collate: fetch's sibling, called with fetch innermost */
      api.stage_exit();
      api.stage_enter(w->id);
      r = call_func(w, args, kwargs);
      api.stage_exit();
      api.stage_enter(w->back_id);
      return r;
    case WRAP_LOOP:
      /* A step runs from one __next__ to the next. The __next__ that ends
       * an epoch leaves its step and wait open (the reader drops spans that
       * never end): joining the workers is not a step spent waiting. */
      if (loop_in_step) api.step_end();
      api.step_begin();
      set_ready_size(w);
      api.wait_begin();
      r = call_func(w, args, kwargs);
      if (r == NULL && PyErr_ExceptionMatches(PyExc_StopIteration)) {
        loop_in_step = 0;
        return NULL;
      }
      api.wait_end();
      loop_in_step = 1;
      if (r != NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        set_ready_size(w);
        PyErr_Restore(type, value, tb);
      }
      return r;
    case WRAP_ITER: {
      /* __iter__ runs now, as without dlprof; a generator it returns runs
       * each next() inside the datapipe's stage. Other iterators (a
       * datapipe that is its own iterator) are returned as they are. */
      r = call_func(w, args, kwargs);
      if (r == NULL || w->bound == NULL || w->aux == NULL || generator_type == NULL ||
          (PyObject*)Py_TYPE(r) != generator_type) {
        return r;
      }
      PyObject* sid = PyObject_CallFunctionObjArgs(w->aux, w->bound, NULL);
      unsigned long id = sid ? PyLong_AsUnsignedLong(sid) : 0;
      Py_XDECREF(sid);
      if (PyErr_Occurred() || id == 0) {
        PyErr_Clear();
        return r;
      }
      PyObject* staged = staged_iter_new(r, (uint32_t)id);
      Py_DECREF(r);
      return staged;
    }
  }
  PyErr_SetString(PyExc_SystemError, "dlprof wrapper: bad mode");
  return NULL;
}

static PyObject* wrapper_copy(WrapperObject* w, PyObject* bound) {
  PyTypeObject* type = Py_TYPE((PyObject*)w);
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  WrapperObject* c = (WrapperObject*)alloc(type, 0);
  if (c == NULL) return NULL;
  c->func = w->func;
  Py_XINCREF(c->func);
  c->aux = w->aux;
  Py_XINCREF(c->aux);
  c->bound = bound;
  Py_XINCREF(bound);
  c->dict = w->dict;
  Py_XINCREF(c->dict);
  c->mode = w->mode;
  c->id = w->id;
  c->back_id = w->back_id;
  return (PyObject*)c;
}

static PyObject* Wrapper_get(PyObject* self, PyObject* obj, PyObject* type) {
  (void)type;
  WrapperObject* w = (WrapperObject*)self;
  if (obj == NULL || obj == Py_None || w->bound != NULL) {
    Py_INCREF(self);
    return self;
  }
  return wrapper_copy(w, obj);
}

/* What the wrapper does not have is the original's: __code__, __defaults__,
 * __globals__, ... (inspect.isgeneratorfunction, co_filename). */
static PyObject* Wrapper_getattro(PyObject* self, PyObject* name) {
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(((WrapperObject*)self)->func, name);
}

static int Wrapper_traverse(PyObject* self, visitproc visit, void* arg) {
  WrapperObject* w = (WrapperObject*)self;
  Py_VISIT(w->func);
  Py_VISIT(w->aux);
  Py_VISIT(w->bound);
  Py_VISIT(w->dict);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int Wrapper_clear(PyObject* self) {
  WrapperObject* w = (WrapperObject*)self;
  Py_CLEAR(w->func);
  Py_CLEAR(w->aux);
  Py_CLEAR(w->bound);
  Py_CLEAR(w->dict);
  return 0;
}

static void Wrapper_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Wrapper_clear(self);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type);
}

/* __class__ is the original's (as wrapt's proxies do): isinstance(w,
 * types.FunctionType), inspect.isfunction, getsourcefile and signature see
 * the function they would see without dlprof. */
static PyObject* Wrapper_get_class(PyObject* self, void* closure) {
  (void)closure;
  PyObject* type = (PyObject*)Py_TYPE(((WrapperObject*)self)->func);
  Py_INCREF(type);
  return type;
}

static PyGetSetDef Wrapper_getset[] = {
    {"__class__", Wrapper_get_class, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Wrapper_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(WrapperObject, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Wrapper_slots[] = {
    {Py_tp_call, Wrapper_call},
    {Py_tp_descr_get, Wrapper_get},
    {Py_tp_getattro, Wrapper_getattro},
    {Py_tp_traverse, Wrapper_traverse},
    {Py_tp_clear, Wrapper_clear},
    {Py_tp_dealloc, Wrapper_dealloc},
    {Py_tp_members, Wrapper_members},
    {Py_tp_getset, Wrapper_getset},
    {Py_tp_doc, "A function run inside a dlprof stage (dlprof/_torch.py)."},
    {0, NULL},
};

static PyType_Spec Wrapper_spec = {
    "dlprof._native.Wrapper", sizeof(WrapperObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, Wrapper_slots,
};

/* wrap(func, mode, id=0, back_id=0, aux=None) */
static PyObject* m_wrap(PyObject* m, PyObject* const* args, Py_ssize_t nargs) {
  (void)m;
  if (nargs < 2 || nargs > 5 || !PyCallable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "wrap(func, mode, id=0, back_id=0, aux=None)");
    return NULL;
  }
  long mode = PyLong_AsLong(args[1]);
  unsigned long id = nargs > 2 ? PyLong_AsUnsignedLong(args[2]) : 0;
  unsigned long back = nargs > 3 ? PyLong_AsUnsignedLong(args[3]) : 0;
  if (PyErr_Occurred()) return NULL;
  if (mode < WRAP_STAGE || mode > WRAP_ITER) {
    PyErr_SetString(PyExc_ValueError, "wrap: unknown mode");
    return NULL;
  }
  PyObject* aux = nargs > 4 && args[4] != Py_None ? args[4] : NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)wrapper_type, Py_tp_alloc);
  WrapperObject* w = (WrapperObject*)alloc((PyTypeObject*)wrapper_type, 0);
  if (w == NULL) return NULL;
  Py_INCREF(args[0]);
  w->func = args[0];
  Py_XINCREF(aux);
  w->aux = aux;
  w->mode = (int)mode;
  w->id = (uint32_t)id;
  w->back_id = (uint32_t)back;
  return (PyObject*)w;
}

/* ---- StagedIter: a generator's next() inside a stage ---- */

typedef struct {
  PyObject_HEAD
  PyObject* it;
  uint32_t id;
} StagedIterObject;

static PyObject* staged_iter_new(PyObject* it, uint32_t id) {
  allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject*)staged_iter_type, Py_tp_alloc);
  StagedIterObject* s = (StagedIterObject*)alloc((PyTypeObject*)staged_iter_type, 0);
  if (s == NULL) return NULL;
  Py_INCREF(it);
  s->it = it;
  s->id = id;
  return (PyObject*)s;
}

static PyObject* StagedIter_iter(PyObject* self) {
  Py_INCREF(self);
  return self;
}

static PyObject* StagedIter_next(PyObject* self) {
  StagedIterObject* s = (StagedIterObject*)self;
  api.stage_enter(s->id);
  PyObject* r = PyIter_Next(s->it);
  api.stage_exit();
  return r;  /* NULL without an exception: exhausted */
}

/* Everything else (send, throw, close, gi_frame, ...) is the generator's. */
static PyObject* StagedIter_getattro(PyObject* self, PyObject* name) {
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  PyErr_Clear();
  return PyObject_GetAttr(((StagedIterObject*)self)->it, name);
}

static int StagedIter_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(((StagedIterObject*)self)->it);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int StagedIter_clear(PyObject* self) {
  Py_CLEAR(((StagedIterObject*)self)->it);
  return 0;
}

static void StagedIter_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  StagedIter_clear(self);
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(self);
  Py_DECREF(type);
}

static PyType_Slot StagedIter_slots[] = {
    {Py_tp_iter, StagedIter_iter},
    {Py_tp_iternext, StagedIter_next},
    {Py_tp_getattro, StagedIter_getattro},
    {Py_tp_traverse, StagedIter_traverse},
    {Py_tp_clear, StagedIter_clear},
    {Py_tp_dealloc, StagedIter_dealloc},
    {Py_tp_doc, "A datapipe's generator whose every next() runs inside its stage."},
    {0, NULL},
};

static PyType_Spec StagedIter_spec = {
    "dlprof._native.StagedIter", sizeof(StagedIterObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, StagedIter_slots,
};

static PyObject* m_set_generator_type(PyObject* m, PyObject* type) {
  (void)m;
  Py_INCREF(type);
  Py_XSETREF_COMPAT(generator_type, type);
  Py_RETURN_NONE;
}

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
    {"wrap", (PyCFunction)(void (*)(void))m_wrap, METH_FASTCALL,
     "wrap(func, mode, id=0, back_id=0, aux=None): func run inside a stage (dlprof/_torch.py)."},
    {"set_generator_type", m_set_generator_type, METH_O, "The type of generators (types.GeneratorType)."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject* m) {
  resolve_api();
  add_exec_hook();
  PyObject* stage = PyType_FromSpec(&Stage_spec);
  if (stage == NULL || PyModule_AddObject(m, "StageBase", stage) < 0) {
    Py_XDECREF(stage);
    return -1;
  }
  wrapper_type = PyType_FromSpec(&Wrapper_spec);
  staged_iter_type = PyType_FromSpec(&StagedIter_spec);
  if (wrapper_type == NULL || staged_iter_type == NULL) return -1;
  Py_INCREF(wrapper_type);
  if (PyModule_AddObject(m, "Wrapper", wrapper_type) < 0) {
    Py_DECREF(wrapper_type);
    return -1;
  }
  if (PyModule_AddIntConstant(m, "WRAP_STAGE", WRAP_STAGE) < 0 ||
      PyModule_AddIntConstant(m, "WRAP_SWAP", WRAP_SWAP) < 0 ||
      PyModule_AddIntConstant(m, "WRAP_LOOP", WRAP_LOOP) < 0 ||
      PyModule_AddIntConstant(m, "WRAP_ITER", WRAP_ITER) < 0) {
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

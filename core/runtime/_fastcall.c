/* loom.runtime._fastcall: the native half of the per-call fast path (see fast_path.py).
 *
 * A FastCall object calls one compiled function of the native ABI
 *     int32_t fn(const uint64_t *words, const char **error)
 * on numpy arrays and Python scalars whose layout it has been taught.  Python's
 * FastPath.learn teaches it a layout after a call passed the full argument
 * check: per argument the array's dtype object, dimensions and strides (or the
 * scalar's type and value), the packed words of that call, and the pairs of
 * arguments whose memory must not overlap.  A call whose arguments match a
 * learned layout only needs the data pointers: each is checked for alignment,
 * each written array for its writeable flag, the disjoint pairs for overlap,
 * and the function runs with the GIL released.  Anything else (another layout,
 * a loom.nd array, a misaligned or read-only array, keyword arguments) goes to
 * the Python fallback, which runs the full check and raises its errors.
 *
 * numpy arrays are read through the fixed leading fields of numpy's array
 * object, which numpy keeps stable across releases as part of its C ABI; the
 * Python side checks them with probe() before trusting this module, so no
 * numpy headers are needed to build it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX, the type of a __slots__ member */
#include <stdint.h>
#include <string.h>

/* The leading fields of numpy's PyArrayObject (PyArrayObject_fields in ndarraytypes.h). */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} ArrayFields;

#define ARRAY_WRITEABLE 0x0400 /* NPY_ARRAY_WRITEABLE */
#define MAX_ENTRIES 16         /* as fast_path._MEMO_LIMIT: a full memo starts over */
#define STACK_WORDS 32

typedef int32_t (*native_fn)(const uint64_t *, const char **);

static PyTypeObject *ndarray_type; /* numpy.ndarray, set by init() */
static PyTypeObject *nd_type;      /* loom.runtime.NDArray, set by init() */
static Py_ssize_t nd_data_offset;  /* where an NDArray keeps its numpy view (None off the CPU) */

/* The numpy array an argument's memory is read through: itself, a CPU loom.nd array's numpy view,
 * else NULL (anything else, a device array). */
static inline const ArrayFields *host_array(PyObject *a) {
    PyTypeObject *t = Py_TYPE(a);
    if (t == ndarray_type) return (const ArrayFields *)a;
    if (t == nd_type) {
        PyObject *view = *(PyObject **)((char *)a + nd_data_offset);
        if (view != NULL && Py_TYPE(view) == ndarray_type) return (const ArrayFields *)view;
    }
    return NULL;
}

/* One learned layout.  Per argument k: key[k] is the array's dtype object or the scalar's
 * value (a strong reference); kind[k] the type of the argument (numpy's or loom.nd's array
 * type; unused for scalars); ndim[k] is the array's rank, -1 for a scalar; its dimensions
 * then strides start at dims + offset[k]. */
typedef struct {
    PyObject **key;
    PyTypeObject **kind;
    int *ndim;
    Py_ssize_t *offset;
    Py_ssize_t *dims;
    uint64_t *words;
    Py_ssize_t *pairs; /* (i, bytes of i, j, bytes of j) per pair that must not overlap */
    Py_ssize_t npairs;
} Entry;

typedef struct {
    PyObject_HEAD
    native_fn fn;
    Py_ssize_t nargs;   /* parameters (arguments of a call) */
    Py_ssize_t nwords;  /* ABI words: one per parameter, then the symbolic variables */
    Py_ssize_t *align;  /* per parameter: the alignment its pointer needs, 0 for a scalar */
    char *written;      /* per parameter: whether the function writes it */
    PyObject *fallback; /* fallback(*args): the checked Python call */
    PyObject *on_error; /* on_error(address of the error message or 0): raises */
    PyObject *owner;    /* keeps the compiled code alive */
    Entry entries[MAX_ENTRIES];
    int nentries;
} FastCall;

static void entry_clear(Entry *e, Py_ssize_t nargs) {
    if (e->key != NULL) {
        for (Py_ssize_t k = 0; k < nargs; k++) Py_XDECREF(e->key[k]);
    }
    PyMem_Free(e->key);
    PyMem_Free(e->kind);
    PyMem_Free(e->ndim);
    PyMem_Free(e->offset);
    PyMem_Free(e->dims);
    PyMem_Free(e->words);
    PyMem_Free(e->pairs);
    memset(e, 0, sizeof(Entry));
}

static void clear_entries(FastCall *self) {
    for (int i = 0; i < self->nentries; i++) entry_clear(&self->entries[i], self->nargs);
    self->nentries = 0;
}

/* Whether scalar `v` is the learned value `want`: same exact type; floats compare by bits
 * (0.0 and -0.0 pack differently), ints and bools by value. */
static int same_scalar(PyObject *v, PyObject *want) {
    if (v == want) return 1;
    if (Py_TYPE(v) != Py_TYPE(want)) return 0;
    if (PyFloat_CheckExact(v)) {
        double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(want);
        return memcmp(&a, &b, sizeof(double)) == 0;
    }
    if (PyLong_CheckExact(v)) {
        int r = PyObject_RichCompareBool(v, want, Py_EQ);
        if (r < 0) PyErr_Clear();
        return r == 1;
    }
    return 0; /* bools are singletons: identity was checked above */
}

static int matches(const FastCall *self, const Entry *e, PyObject *const *args) {
    for (Py_ssize_t k = 0; k < self->nargs; k++) {
        PyObject *a = args[k];
        int nd = e->ndim[k];
        if (nd < 0) {
            if (!same_scalar(a, e->key[k])) return 0;
            continue;
        }
        if (Py_TYPE(a) != e->kind[k]) return 0;
        const ArrayFields *arr = host_array(a);
        if (arr == NULL || arr->descr != e->key[k] || arr->nd != nd) return 0;
        const Py_ssize_t *dims = e->dims + e->offset[k];
        size_t bytes = (size_t)nd * sizeof(Py_ssize_t);
        if (nd && (memcmp(arr->dimensions, dims, bytes) != 0 || memcmp(arr->strides, dims + nd, bytes) != 0))
            return 0;
    }
    return 1;
}

/* Fill the data pointers into `words`; 0 when a pointer is misaligned, a written array is
 * read-only or two arguments that must not overlap do. */
static int fill_pointers(const FastCall *self, const Entry *e, PyObject *const *args, uint64_t *words) {
    for (Py_ssize_t k = 0; k < self->nargs; k++) {
        Py_ssize_t align = self->align[k];
        if (align == 0) continue;
        const ArrayFields *arr = host_array(args[k]); /* not NULL: matches() said so */
        uintptr_t ptr = (uintptr_t)arr->data;
        if (ptr % (uintptr_t)align) return 0;
        if (self->written[k] && !(arr->flags & ARRAY_WRITEABLE)) return 0;
        words[k] = (uint64_t)ptr;
    }
    for (Py_ssize_t p = 0; p < e->npairs; p++) {
        const Py_ssize_t *q = e->pairs + 4 * p;
        uint64_t lo_i = words[q[0]], lo_j = words[q[2]];
        if (lo_i < lo_j + (uint64_t)q[3] && lo_j < lo_i + (uint64_t)q[1]) return 0;
    }
    return 1;
}

static PyObject *run(FastCall *self, uint64_t *words) {
    const char *error = NULL;
    int32_t rc;
    native_fn fn = self->fn;
    Py_BEGIN_ALLOW_THREADS
    rc = fn(words, &error);
    Py_END_ALLOW_THREADS
    if (rc == 0) Py_RETURN_NONE;
    PyObject *r = PyObject_CallFunction(self->on_error, "K", (unsigned long long)(uintptr_t)error);
    if (r != NULL) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_RuntimeError, "loom: a native function failed and its error handler returned");
    }
    return NULL;
}

static PyObject *fastcall_call(FastCall *self, PyObject *args, PyObject *kwargs) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n == self->nargs && (kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0)) {
        PyObject *const *items = &PyTuple_GET_ITEM(args, 0);
        for (int i = 0; i < self->nentries; i++) {
            const Entry *e = &self->entries[i];
            if (!matches(self, e, items)) continue;
            uint64_t stack[STACK_WORDS];
            uint64_t *words = self->nwords <= STACK_WORDS ? stack : PyMem_Malloc(self->nwords * sizeof(uint64_t));
            if (words == NULL) return PyErr_NoMemory();
            memcpy(words, e->words, self->nwords * sizeof(uint64_t));
            PyObject *r = NULL;
            int ok = fill_pointers(self, e, items, words);
            if (ok) r = run(self, words);
            if (words != stack) PyMem_Free(words);
            if (ok) return r;
            break; /* a layout matched but its pointers did not pass: the full check says why */
        }
    }
    return PyObject_Call(self->fallback, args, kwargs);
}

/* learn(args, words, pairs) -> bool: remember the layout of `args` (a call that passed the full
 * check) with its packed `words` and disjoint `pairs` ((i, bytes, j, bytes)...).  False, with
 * nothing learned, for arguments this module does not read (anything but numpy arrays and
 * CPU loom.nd arrays for pointer parameters, exact int, bool or float scalars). */
static PyObject *fastcall_learn(FastCall *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3 || !PyTuple_Check(argv[0]) || !PyList_Check(argv[1]) || !PyTuple_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "learn(args: tuple, words: list, pairs: tuple)");
        return NULL;
    }
    PyObject *args = argv[0], *wlist = argv[1], *pairs = argv[2];
    if (PyTuple_GET_SIZE(args) != self->nargs || PyList_GET_SIZE(wlist) != self->nwords) Py_RETURN_FALSE;
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < self->nargs; k++) {
        PyObject *a = PyTuple_GET_ITEM(args, k);
        if (self->align[k]) {
            const ArrayFields *arr = host_array(a);
            if (arr == NULL) Py_RETURN_FALSE;
            total += 2 * (Py_ssize_t)arr->nd;
        } else if (!PyLong_CheckExact(a) && !PyFloat_CheckExact(a) && !PyBool_Check(a)) {
            Py_RETURN_FALSE;
        }
    }
    if (self->nentries == MAX_ENTRIES) clear_entries(self);
    Entry e;
    memset(&e, 0, sizeof(Entry));
    Py_ssize_t npairs = PyTuple_GET_SIZE(pairs);
    e.key = PyMem_Calloc(self->nargs + 1, sizeof(PyObject *));
    e.kind = PyMem_Calloc(self->nargs + 1, sizeof(PyTypeObject *));
    e.ndim = PyMem_Calloc(self->nargs + 1, sizeof(int));
    e.offset = PyMem_Calloc(self->nargs + 1, sizeof(Py_ssize_t));
    e.dims = PyMem_Calloc(total + 1, sizeof(Py_ssize_t));
    e.words = PyMem_Calloc(self->nwords + 1, sizeof(uint64_t));
    e.pairs = PyMem_Calloc(4 * npairs + 1, sizeof(Py_ssize_t));
    if (!e.key || !e.kind || !e.ndim || !e.offset || !e.dims || !e.words || !e.pairs) {
        entry_clear(&e, self->nargs);
        return PyErr_NoMemory();
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t k = 0; k < self->nargs; k++) {
        PyObject *a = PyTuple_GET_ITEM(args, k);
        if (self->align[k]) {
            const ArrayFields *arr = host_array(a);
            e.kind[k] = Py_TYPE(a); /* numpy's or loom.nd's type: both live as long as this module */
            e.key[k] = Py_NewRef(arr->descr);
            e.ndim[k] = arr->nd;
            e.offset[k] = at;
            memcpy(e.dims + at, arr->dimensions, arr->nd * sizeof(Py_ssize_t));
            memcpy(e.dims + at + arr->nd, arr->strides, arr->nd * sizeof(Py_ssize_t));
            at += 2 * arr->nd;
        } else {
            e.key[k] = Py_NewRef(a);
            e.ndim[k] = -1;
        }
    }
    for (Py_ssize_t w = 0; w < self->nwords; w++) {
        e.words[w] = (uint64_t)PyLong_AsUnsignedLongLongMask(PyList_GET_ITEM(wlist, w));
        if (PyErr_Occurred()) goto fail;
    }
    for (Py_ssize_t p = 0; p < npairs; p++) {
        PyObject *q = PyTuple_GET_ITEM(pairs, p);
        if (!PyTuple_Check(q) || PyTuple_GET_SIZE(q) != 4) {
            PyErr_SetString(PyExc_TypeError, "learn: each pair is (i, bytes of i, j, bytes of j)");
            goto fail;
        }
        for (int f = 0; f < 4; f++) {
            e.pairs[4 * p + f] = PyLong_AsSsize_t(PyTuple_GET_ITEM(q, f));
            if (PyErr_Occurred()) goto fail;
        }
        if (e.pairs[4 * p] < 0 || e.pairs[4 * p] >= self->nargs || e.pairs[4 * p + 2] < 0 ||
            e.pairs[4 * p + 2] >= self->nargs) {
            PyErr_SetString(PyExc_ValueError, "learn: a pair names a parameter out of range");
            goto fail;
        }
    }
    e.npairs = npairs;
    self->entries[self->nentries++] = e;
    Py_RETURN_TRUE;
fail:
    entry_clear(&e, self->nargs);
    return NULL;
}

static PyObject *fastcall_forget(FastCall *self, PyObject *unused) {
    clear_entries(self);
    Py_RETURN_NONE;
}

static PyObject *fastcall_learned(FastCall *self, void *closure) {
    return PyLong_FromLong(self->nentries);
}

/* FastCall(address, alignments, written, fallback, on_error, owner, nwords) */
static int fastcall_init(FastCall *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"address", "alignments", "written", "fallback", "on_error", "owner", "nwords", NULL};
    unsigned long long address;
    PyObject *alignments, *written, *fallback, *on_error, *owner;
    Py_ssize_t nwords;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KO!O!OOOn", names, &address, &PyTuple_Type, &alignments,
                                     &PyTuple_Type, &written, &fallback, &on_error, &owner, &nwords))
        return -1;
    if (self->align != NULL) {
        PyErr_SetString(PyExc_TypeError, "FastCall is initialized once");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(alignments);
    if (address == 0 || PyTuple_GET_SIZE(written) != n || nwords < n || !PyCallable_Check(fallback) ||
        !PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_ValueError, "FastCall: a function address, one alignment and one written flag "
                                          "per parameter, nwords >= parameters, callable fallback and on_error");
        return -1;
    }
    self->align = PyMem_Calloc(n + 1, sizeof(Py_ssize_t));
    self->written = PyMem_Calloc(n + 1, 1);
    if (self->align == NULL || self->written == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *a = PyTuple_GET_ITEM(alignments, k);
        Py_ssize_t v = a == Py_None ? 0 : PyLong_AsSsize_t(a);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || (a != Py_None && v == 0)) {
            PyErr_SetString(PyExc_ValueError, "FastCall: alignments are positive ints or None (scalars)");
            return -1;
        }
        self->align[k] = v;
        int w = PyObject_IsTrue(PyTuple_GET_ITEM(written, k));
        if (w < 0) return -1;
        self->written[k] = (char)w;
    }
    self->fn = (native_fn)(uintptr_t)address;
    self->nargs = n;
    self->nwords = nwords;
    self->fallback = Py_NewRef(fallback);
    self->on_error = Py_NewRef(on_error);
    self->owner = Py_NewRef(owner);
    return 0;
}

static int fastcall_traverse(FastCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->fallback);
    Py_VISIT(self->on_error);
    Py_VISIT(self->owner);
    for (int i = 0; i < self->nentries; i++) {
        for (Py_ssize_t k = 0; k < self->nargs; k++) Py_VISIT(self->entries[i].key[k]);
    }
    return 0;
}

static int fastcall_clear(FastCall *self) {
    clear_entries(self);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->on_error);
    Py_CLEAR(self->owner);
    return 0;
}

static void fastcall_dealloc(FastCall *self) {
    PyObject_GC_UnTrack(self);
    fastcall_clear(self);
    PyMem_Free(self->align);
    PyMem_Free(self->written);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef fastcall_methods[] = {
    {"learn", (PyCFunction)(void (*)(void))fastcall_learn, METH_FASTCALL,
     "learn(args, words, pairs) -> bool: remember a checked call's layout"},
    {"forget", (PyCFunction)fastcall_forget, METH_NOARGS, "forget every learned layout"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef fastcall_getset[] = {
    {"learned", (getter)fastcall_learned, NULL, "how many layouts are learned", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loom.runtime._fastcall.FastCall",
    .tp_basicsize = sizeof(FastCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A native function called on learned argument layouts (see loom.runtime.fast_path)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)fastcall_init,
    .tp_call = (ternaryfunc)fastcall_call,
    .tp_traverse = (traverseproc)fastcall_traverse,
    .tp_clear = (inquiry)fastcall_clear,
    .tp_dealloc = (destructor)fastcall_dealloc,
    .tp_methods = fastcall_methods,
    .tp_getset = fastcall_getset,
};

/* init(numpy.ndarray, loom.runtime.NDArray, NDArray._data): the array types this module reads, and the
 * slot where a loom.nd array keeps its numpy view. */
static PyObject *module_init(PyObject *mod, PyObject *args) {
    PyObject *np_type, *loom_type, *member;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyType_Type, &np_type, &PyType_Type, &loom_type, &member)) return NULL;
    if (Py_TYPE(member) != &PyMemberDescr_Type || ((PyMemberDescrObject *)member)->d_member->type != T_OBJECT_EX ||
        ((PyMemberDescrObject *)member)->d_common.d_type != (PyTypeObject *)loom_type) {
        PyErr_SetString(PyExc_TypeError, "init: the third argument is the __slots__ member of the loom.nd type");
        return NULL;
    }
    PyTypeObject *old_np = ndarray_type, *old_nd = nd_type;
    ndarray_type = (PyTypeObject *)Py_NewRef(np_type);
    nd_type = (PyTypeObject *)Py_NewRef(loom_type);
    nd_data_offset = ((PyMemberDescrObject *)member)->d_member->offset;
    Py_XDECREF(old_np);
    Py_XDECREF(old_nd);
    Py_RETURN_NONE;
}

/* probe(array) -> (data, nd, shape, strides, descr, writeable): the fields as this module reads
 * them (of a loom.nd array: of its numpy view), for the Python side to compare with numpy's. */
static PyObject *module_probe(PyObject *mod, PyObject *a) {
    const ArrayFields *arr = ndarray_type != NULL ? host_array(a) : NULL;
    if (arr == NULL) {
        PyErr_SetString(PyExc_TypeError, "probe takes a numpy.ndarray or a CPU loom.nd array, after init()");
        return NULL;
    }
    PyObject *shape = PyTuple_New(arr->nd), *strides = PyTuple_New(arr->nd);
    if (shape == NULL || strides == NULL) {
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        return NULL;
    }
    for (int k = 0; k < arr->nd; k++) {
        PyTuple_SET_ITEM(shape, k, PyLong_FromSsize_t(arr->dimensions[k]));
        PyTuple_SET_ITEM(strides, k, PyLong_FromSsize_t(arr->strides[k]));
    }
    return Py_BuildValue("(KiNNOO)", (unsigned long long)(uintptr_t)arr->data, arr->nd, shape, strides,
                         arr->descr, (arr->flags & ARRAY_WRITEABLE) ? Py_True : Py_False);
}

static PyMethodDef module_methods[] = {
    {"init", module_init, METH_VARARGS, "init(numpy.ndarray, loom.runtime.NDArray, NDArray._data)"},
    {"probe", module_probe, METH_O, "probe(array): the array's fields as read here"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fastcall_module = {
    PyModuleDef_HEAD_INIT, "loom.runtime._fastcall", "The native per-call fast path of compiled functions.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__fastcall(void) {
    if (PyType_Ready(&FastCallType) < 0) return NULL;
    PyObject *m = PyModule_Create(&fastcall_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObject(m, "FastCall", Py_NewRef((PyObject *)&FastCallType)) < 0) {
        Py_DECREF(&FastCallType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* loom.driver._tree_state: the size and modification time of every file below some folders.
 *
 * The build cache keys every build on the state of Loom's and its plugins' source
 * files (about 300), which a cache hit in a fresh process must read first.  In
 * Python that walk costs 0.6-1.2 ms.  start() runs it on a native thread (no GIL, no
 * Python: a Python thread would wait for the GIL the caller holds) while the build
 * cache writes down the schedule; Walker.result() collects it (build_cache._CodeState).
 * build_cache._tree_text is the same function in Python, and the fallback where this
 * extension was not built; tests compare the two.
 *
 * tree_text(folders) -> (text, newest_mtime_ns, newest_path), what start(folders).result() gives.  For each folder in turn,
 * text holds "[folder]\n" and then one "path:size:mtime_ns\n" line per file below it,
 * sorted by path (bytes).  Names starting with "." and "__pycache__" are skipped; a real
 * folder is walked, a symbolic link to one is stat()ed like a file (as DirEntry.is_dir(
 * follow_symlinks=False) and DirEntry.stat() do).  A path is the folder and the names
 * below it joined by "/".  newest_* name the file modified last (0 and "" when none).
 * Any failure raises OSError naming the path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64
#define PATH_CAP 8192

typedef struct {
    char *path;
    long long size, mtime;
} Entry;

typedef struct {
    Entry *items;
    size_t count, cap;
    int err;              /* errno of the first failure; 0 when none */
    char where[PATH_CAP]; /* its path */
    int too_deep;
} Walk;

static void fail(Walk *w, const char *path, int err) {
    if (w->err == 0) {
        w->err = err;
        snprintf(w->where, sizeof(w->where), "%s", path);
    }
}

static int add(Walk *w, const char *path, const struct stat *st) {
    if (w->count == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 512;
        Entry *grown = realloc(w->items, cap * sizeof(Entry));
        if (grown == NULL)
            return -1;
        w->items = grown;
        w->cap = cap;
    }
    char *copy = strdup(path);
    if (copy == NULL)
        return -1;
    w->items[w->count].path = copy;
    w->items[w->count].size = (long long)st->st_size;
    w->items[w->count].mtime = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    w->count++;
    return 0;
}

/* Walks the open folder dfd (closing it), whose path is path[0:len]; 0, or -1 with w->err set. */
static int walk(Walk *w, int dfd, char *path, size_t len, int depth) {
    DIR *dir = fdopendir(dfd);
    if (dir == NULL) {
        fail(w, path, errno);
        close(dfd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    for (errno = 0; rc == 0 && (e = readdir(dir)) != NULL; errno = 0) {
        const char *name = e->d_name;
        if (name[0] == '.' || strcmp(name, "__pycache__") == 0)
            continue;
        size_t n = strlen(name);
        if (len + 1 + n + 1 > PATH_CAP) {
            fail(w, path, ENAMETOOLONG);
            rc = -1;
            break;
        }
        path[len] = '/';
        memcpy(path + len + 1, name, n + 1);
        struct stat st;
        int is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN) { /* some file systems do not fill d_type */
            if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                fail(w, path, errno);
                rc = -1;
                break;
            }
            is_dir = S_ISDIR(st.st_mode);
        }
        if (is_dir) {
            if (depth >= MAX_DEPTH) {
                w->too_deep = 1;
                fail(w, path, ELOOP);
                rc = -1;
                break;
            }
            int sub = openat(dirfd(dir), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                fail(w, path, errno);
                rc = -1;
                break;
            }
            rc = walk(w, sub, path, len + 1 + n, depth + 1);
            continue;
        }
        if (fstatat(dirfd(dir), name, &st, 0) != 0) {
            fail(w, path, errno);
            rc = -1;
            break;
        }
        if (add(w, path, &st) != 0) {
            fail(w, path, ENOMEM);
            rc = -1;
        }
    }
    if (rc == 0 && errno != 0) {
        path[len] = '\0';
        fail(w, path, errno);
        rc = -1;
    }
    closedir(dir);
    path[len] = '\0';
    return rc;
}

static int by_path(const void *a, const void *b) { return strcmp(((const Entry *)a)->path, ((const Entry *)b)->path); }

typedef struct {
    char *data;
    size_t len, cap;
} Text;

static int append(Text *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 1 << 16;
        while (t->len + n + 1 > cap)
            cap *= 2;
        char *grown = realloc(t->data, cap);
        if (grown == NULL)
            return -1;
        t->data = grown;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = '\0';
    return 0;
}

/* One folder: its header and sorted lines appended to text; newest updated.  GIL released. */
static int one_folder(Walk *w, const char *folder, Text *text, long long *newest, char *newest_path) {
    char path[PATH_CAP];
    size_t len = strlen(folder);
    if (len + 1 > sizeof(path)) {
        fail(w, folder, ENAMETOOLONG);
        return -1;
    }
    memcpy(path, folder, len + 1);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        fail(w, path, errno);
        return -1;
    }
    while (len > 0 && path[len - 1] == '/') /* joined as os.path.join does: "a/" + "b" is "a/b" */
        path[--len] = '\0';
    if (walk(w, dfd, path, len, 0) != 0)
        return -1;
    qsort(w->items, w->count, sizeof(Entry), by_path);
    if (append(text, "[", 1) || append(text, folder, strlen(folder)) || append(text, "]\n", 2))
        goto no_memory;
    for (size_t k = 0; k < w->count; k++) {
        Entry *e = &w->items[k];
        char numbers[64];
        int n = snprintf(numbers, sizeof(numbers), ":%lld:%lld\n", e->size, e->mtime);
        if (append(text, e->path, strlen(e->path)) || append(text, numbers, (size_t)n))
            goto no_memory;
        if (e->mtime > *newest) {
            *newest = e->mtime;
            snprintf(newest_path, PATH_CAP, "%s", e->path);
        }
    }
    return 0;
no_memory:
    fail(w, folder, ENOMEM);
    return -1;
}

/* A walk over some folders on its own native thread: started by start(), collected by result(). */
typedef struct {
    PyObject_HEAD
    char **folders;
    Py_ssize_t count;
    pthread_t thread;
    int running; /* started and not joined yet */
    Walk walk;
    Text text;
    long long newest;
    char newest_path[PATH_CAP];
} Walker;

static void *run(void *arg) { /* no Python here: the GIL is not held */
    Walker *self = arg;
    Walk *w = &self->walk;
    if (append(&self->text, "", 0) != 0)
        fail(w, "", ENOMEM);
    for (Py_ssize_t k = 0; k < self->count && w->err == 0; k++) {
        one_folder(w, self->folders[k], &self->text, &self->newest, self->newest_path);
        for (size_t i = 0; i < w->count; i++)
            free(w->items[i].path);
        w->count = 0;
    }
    free(w->items);
    w->items = NULL;
    return NULL;
}

static void join(Walker *self) {
    if (self->running) {
        Py_BEGIN_ALLOW_THREADS
        pthread_join(self->thread, NULL);
        Py_END_ALLOW_THREADS
        self->running = 0;
    }
}

static void walker_dealloc(Walker *self) {
    join(self);
    for (Py_ssize_t k = 0; k < self->count; k++)
        free(self->folders[k]);
    free(self->folders);
    free(self->text.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *walker_result(Walker *self, PyObject *Py_UNUSED(ignored)) {
    join(self);
    Walk *w = &self->walk;
    if (w->err == ELOOP && w->too_deep)
        return PyErr_Format(PyExc_OSError, "%s: folders nested more than %d deep", w->where, MAX_DEPTH);
    if (w->err != 0) {
        errno = w->err;
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, w->where);
    }
    return Py_BuildValue("(O&LO&)", PyUnicode_DecodeFSDefault, self->text.data, self->newest,
                         PyUnicode_DecodeFSDefault, self->newest_path);
}

static PyMethodDef walker_methods[] = {
    {"result", (PyCFunction)walker_result, METH_NOARGS,
     "result() -> (text, newest_mtime_ns, newest_path), waiting for the walk; OSError when it failed."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loom.driver._tree_state.Walker",
    .tp_basicsize = sizeof(Walker),
    .tp_dealloc = (destructor)walker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A walk over folders on a native thread (see start()).",
    .tp_methods = walker_methods,
};

static PyObject *start(PyObject *Py_UNUSED(module), PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "start() takes a sequence of folder paths");
    if (seq == NULL)
        return NULL;
    Walker *self = PyObject_New(Walker, &WalkerType);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    self->count = 0;
    self->running = 0;
    memset(&self->walk, 0, sizeof(self->walk));
    memset(&self->text, 0, sizeof(self->text));
    self->newest = 0;
    self->newest_path[0] = '\0';
    self->folders = calloc((size_t)n + 1, sizeof(char *));
    if (self->folders == NULL) {
        Py_DECREF(seq);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, k), &b)) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return NULL;
        }
        self->folders[k] = strdup(PyBytes_AS_STRING(b));
        Py_DECREF(b);
        if (self->folders[k] == NULL) {
            Py_DECREF(seq);
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        self->count = k + 1;
    }
    Py_DECREF(seq);
    int err = pthread_create(&self->thread, NULL, run, self);
    if (err != 0) { /* no thread to be had: walk here, without the GIL all the same */
        Py_BEGIN_ALLOW_THREADS
        run(self);
        Py_END_ALLOW_THREADS
    } else
        self->running = 1;
    return (PyObject *)self;
}

static PyObject *tree_text(PyObject *module, PyObject *arg) {
    PyObject *walker = start(module, arg);
    if (walker == NULL)
        return NULL;
    PyObject *result = walker_result((Walker *)walker, NULL);
    Py_DECREF(walker);
    return result;
}

static PyMethodDef methods[] = {
    {"start", start, METH_O, "start(folders) -> Walker: tree_text(folders) begun on a native thread."},
    {"tree_text", tree_text, METH_O,
     "tree_text(folders) -> (text, newest_mtime_ns, newest_path): every file below the folders, one line each."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "loom.driver._tree_state",
    .m_doc = "The size and modification time of every file below some folders (the build cache's code state).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__tree_state(void) {
    if (PyType_Ready(&WalkerType) < 0)
        return NULL;
    return PyModule_Create(&module);
}

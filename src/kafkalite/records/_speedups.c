/*
 * kafkalite.records._speedups: optional C accelerator for the producer's per-record hot path.
 * Owns RecordBuffer (the records of one v2 batch, encoded as they arrive, with the 61-byte batch
 * header reserved in front), now_ms() and murmur2(). kafkalite.records.builder holds the pure-Python
 * twins; both must produce byte-identical output (tests/unit/records/test_records_speedups.py).
 * Written for kafkalite against the CPython C API; set KAFKALITE_NO_SPEEDUPS=1 to use the fallback.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define HEADER_SIZE 61

/* ------------------------------------------------------------------ varints */

static inline uint64_t zz_of(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline Py_ssize_t zz_len(int64_t v) {
    uint64_t u = zz_of(v);
    Py_ssize_t n = 1;
    while (u > 0x7F) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline char *zz_put(char *p, int64_t v) {
    uint64_t u = zz_of(v);
    while (u > 0x7F) {
        *p++ = (char)((u & 0x7F) | 0x80);
        u >>= 7;
    }
    *p++ = (char)u;
    return p;
}

/* ------------------------------------------------------------------ fields */

/* A key, value or header value: NULL pointer with len -1 for None. */
typedef struct {
    const char *ptr;
    Py_ssize_t len;
    Py_buffer view;
    int has_view;
} Field;

static int field_get(PyObject *obj, Field *f) {
    f->has_view = 0;
    if (obj == Py_None) {
        f->ptr = NULL;
        f->len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(obj)) {
        f->ptr = PyBytes_AS_STRING(obj);
        f->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (PyObject_GetBuffer(obj, &f->view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    f->has_view = 1;
    f->ptr = (const char *)f->view.buf;
    f->len = f->view.len;
    return 0;
}

static void field_release(Field *f) {
    if (f->has_view) {
        PyBuffer_Release(&f->view);
        f->has_view = 0;
    }
}

static inline Py_ssize_t field_size(const Field *f) {
    return f->len < 0 ? 1 : zz_len(f->len) + f->len;
}

static inline char *field_put(char *p, const Field *f) {
    p = zz_put(p, f->len);
    if (f->len > 0) {
        memcpy(p, f->ptr, (size_t)f->len);
        p += f->len;
    }
    return p;
}

/* Headers: a sequence of (str key, bytes-like or None value) pairs, held as Fields. */
typedef struct {
    PyObject *seq; /* PySequence_Fast of the headers, or NULL */
    Py_ssize_t n;
    Field *keys;
    Field *values;
    Py_ssize_t got; /* how many pairs hold buffers */
} Headers;

static void headers_release(Headers *h) {
    for (Py_ssize_t i = 0; i < h->got; i++) {
        field_release(&h->values[i]);
    }
    PyMem_Free(h->keys);
    PyMem_Free(h->values);
    Py_XDECREF(h->seq);
    h->seq = NULL;
    h->keys = h->values = NULL;
    h->n = h->got = 0;
}

/* Returns the encoded size of the header count and pairs, or -1 with an exception set. */
static Py_ssize_t headers_get(PyObject *obj, Headers *h) {
    h->seq = NULL;
    h->n = h->got = 0;
    h->keys = h->values = NULL;
    if (obj == Py_None) {
        return 1;
    }
    h->seq = PySequence_Fast(obj, "headers must be an iterable of (str, bytes | None) pairs");
    if (h->seq == NULL) {
        return -1;
    }
    h->n = PySequence_Fast_GET_SIZE(h->seq);
    if (h->n == 0) {
        return 1;
    }
    h->keys = PyMem_Calloc((size_t)h->n, sizeof(Field));
    h->values = PyMem_Calloc((size_t)h->n, sizeof(Field));
    if (h->keys == NULL || h->values == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t size = zz_len(h->n);
    PyObject **items = PySequence_Fast_ITEMS(h->seq);
    for (Py_ssize_t i = 0; i < h->n; i++) {
        PyObject *pair = items[i];
        if (!PyTuple_Check(pair) && !PyList_Check(pair)) {
            PyErr_SetString(PyExc_TypeError, "a header is a (str, bytes | None) pair");
            return -1;
        }
        if (PySequence_Fast_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_ValueError, "a header is a (str, bytes | None) pair");
            return -1;
        }
        PyObject *k = PySequence_Fast_ITEMS(pair)[0];
        PyObject *v = PySequence_Fast_ITEMS(pair)[1];
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(PyExc_TypeError, "a header key is a str");
            return -1;
        }
        Py_ssize_t klen;
        const char *kp = PyUnicode_AsUTF8AndSize(k, &klen);
        if (kp == NULL) {
            return -1;
        }
        h->keys[i].ptr = kp;
        h->keys[i].len = klen;
        if (field_get(v, &h->values[i]) < 0) {
            return -1;
        }
        h->got = i + 1;
        size += zz_len(klen) + klen + field_size(&h->values[i]);
    }
    return size;
}

static char *headers_put(char *p, const Headers *h) {
    p = zz_put(p, h->n);
    for (Py_ssize_t i = 0; i < h->n; i++) {
        p = field_put(p, &h->keys[i]);
        p = field_put(p, &h->values[i]);
    }
    return p;
}

/* ------------------------------------------------------------------ buffer pool */

/* Freed batch buffers of at least POOL_MIN bytes are kept for the next batches (as the Java client's
 * BufferPool keeps batch.size buffers): a fresh large allocation is a fresh mmap whose every page
 * faults on first touch. Guarded by the GIL; at most POOL_SLOTS buffers, POOL_MAX_BYTES in all. */
#define POOL_SLOTS 8
#define POOL_MIN (32 * 1024)
#define POOL_MAX_BYTES (16 * 1024 * 1024)

static char *pool_buf[POOL_SLOTS];
static Py_ssize_t pool_cap[POOL_SLOTS];
static int pool_n = 0;
static Py_ssize_t pool_bytes = 0;

/* A buffer of at least *capacity bytes (a pooled one when it is no more than twice as large);
 * *capacity is updated to the real size. */
static char *pool_get(Py_ssize_t *capacity) {
    for (int i = pool_n - 1; i >= 0; i--) {
        if (pool_cap[i] >= *capacity && pool_cap[i] / 2 <= *capacity) {
            char *b = pool_buf[i];
            *capacity = pool_cap[i];
            pool_bytes -= pool_cap[i];
            pool_n--;
            pool_buf[i] = pool_buf[pool_n];
            pool_cap[i] = pool_cap[pool_n];
            return b;
        }
    }
    return PyMem_Malloc((size_t)*capacity);
}

static void pool_put(char *buf, Py_ssize_t cap) {
    if (buf == NULL) {
        return;
    }
    if (cap >= POOL_MIN && pool_n < POOL_SLOTS && pool_bytes + cap <= POOL_MAX_BYTES) {
        pool_buf[pool_n] = buf;
        pool_cap[pool_n] = cap;
        pool_n++;
        pool_bytes += cap;
        return;
    }
    PyMem_Free(buf);
}

/* ------------------------------------------------------------------ RecordBuffer */

typedef struct {
    PyObject_HEAD
    char *buf;
    Py_ssize_t len; /* bytes in use, the reserved header included */
    Py_ssize_t cap;
    Py_ssize_t exports;
    long long count;
    long long base_ts;
    long long max_ts;
    int sealed; /* set by seal(): no more records (the batch was drained or dropped) */
} RecordBuffer;

static int rb_reserve(RecordBuffer *self, Py_ssize_t extra) {
    if (self->len + extra <= self->cap) {
        return 0;
    }
    if (extra > PY_SSIZE_T_MAX / 2 - self->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cap = self->cap * 2;
    if (cap < self->len + extra) {
        cap = self->len + extra;
    }
    char *nb = PyMem_Realloc(self->buf, (size_t)cap);
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->buf = nb;
    self->cap = cap;
    return 0;
}

static int rb_init(RecordBuffer *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"capacity", NULL};
    Py_ssize_t capacity = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n:RecordBuffer", kwlist, &capacity)) {
        return -1;
    }
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "RecordBuffer is exported");
        return -1;
    }
    if (capacity < HEADER_SIZE + 64) {
        capacity = HEADER_SIZE + 64;
    }
    pool_put(self->buf, self->cap);
    self->buf = pool_get(&capacity);
    if (self->buf == NULL) {
        self->cap = self->len = 0;
        PyErr_NoMemory();
        return -1;
    }
    memset(self->buf, 0, HEADER_SIZE);
    self->cap = capacity;
    self->len = HEADER_SIZE;
    self->count = 0;
    self->base_ts = -1;
    self->max_ts = -1;
    self->sealed = 0;
    return 0;
}

static void rb_dealloc(RecordBuffer *self) {
    pool_put(self->buf, self->cap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Append one record; limit < 0 means no limit. Returns the offset delta, -1 when the record does
 * not fit under limit (nothing written), or -2 with an exception set. */
static long long rb_append(RecordBuffer *self, PyObject *key, PyObject *value, long long ts,
                           PyObject *headers, Py_ssize_t limit) {
    Field k, v;
    Headers h;
    long long result = -2;
    if (field_get(key, &k) < 0) {
        return -2;
    }
    if (field_get(value, &v) < 0) {
        field_release(&k);
        return -2;
    }
    Py_ssize_t hsize = headers_get(headers, &h);
    if (hsize < 0) {
        goto done;
    }
    long long delta = self->count;
    long long base = delta ? self->base_ts : ts;
    long long td;
    if (__builtin_sub_overflow(ts, base, &td)) {
        PyErr_SetString(PyExc_OverflowError, "timestamp delta does not fit an int64");
        goto done;
    }
    Py_ssize_t n = 1 + zz_len(td) + zz_len(delta) + field_size(&k) + field_size(&v) + hsize;
    Py_ssize_t total = zz_len(n) + n;
    if (limit >= 0 && self->len + total > limit) {
        result = -1;
        goto done;
    }
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "cannot append while the buffer is exported");
        goto done;
    }
    if (rb_reserve(self, total) < 0) {
        goto done;
    }
    char *p = self->buf + self->len;
    p = zz_put(p, n);
    *p++ = 0; /* attributes */
    p = zz_put(p, td);
    p = zz_put(p, delta);
    p = field_put(p, &k);
    p = field_put(p, &v);
    p = headers_put(p, &h);
    self->len = p - self->buf;
    if (!delta) {
        self->base_ts = ts;
    }
    if (ts > self->max_ts) {
        self->max_ts = ts;
    }
    self->count = delta + 1;
    result = delta;
done:
    headers_release(&h);
    field_release(&k);
    field_release(&v);
    return result;
}

PyDoc_STRVAR(rb_append_doc,
             "append(key, value, timestamp, headers=None) -> int\n\n"
             "Append one record (key and value bytes-like or None); returns its offset delta.");

static PyObject *rb_append_meth(RecordBuffer *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "append(key, value, timestamp, headers=None)");
        return NULL;
    }
    if (self->sealed) {
        PyErr_SetString(PyExc_BufferError, "cannot append to a sealed buffer");
        return NULL;
    }
    long long ts = PyLong_AsLongLong(args[2]);
    if (ts == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long long r = rb_append(self, args[0], args[1], ts, nargs > 3 ? args[3] : Py_None, -1);
    if (r < 0) {
        return NULL;
    }
    return PyLong_FromLongLong(r);
}

PyDoc_STRVAR(rb_try_append_doc,
             "try_append(key, value, timestamp, limit) -> int\n\n"
             "Append one record without headers if the buffer (header included) stays within limit\n"
             "bytes; returns its offset delta, or -1 (nothing written) when it would not fit or the\n"
             "buffer is sealed. Atomic under the GIL: the producer's send() calls it without a lock.");

static PyObject *rb_try_append_meth(RecordBuffer *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "try_append(key, value, timestamp, limit)");
        return NULL;
    }
    if (self->sealed) {
        return PyLong_FromLong(-1);
    }
    long long ts = PyLong_AsLongLong(args[2]);
    if (ts == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[3]);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (limit < 0) {
        limit = 0;
    }
    long long r = rb_append(self, args[0], args[1], ts, Py_None, limit);
    if (r == -2) {
        return NULL;
    }
    return PyLong_FromLongLong(r);
}

static PyObject *rb_seal(RecordBuffer *self, PyObject *Py_UNUSED(ignored)) {
    self->sealed = 1;
    Py_RETURN_NONE;
}

static PyObject *rb_view(RecordBuffer *self, PyObject *Py_UNUSED(ignored)) {
    return PyMemoryView_FromObject((PyObject *)self);
}

static PyObject *rb_getvalue(RecordBuffer *self, PyObject *Py_UNUSED(ignored)) {
    return PyBytes_FromStringAndSize(self->buf, self->len);
}

static PyMethodDef rb_methods[] = {
    {"append", (PyCFunction)(void (*)(void))rb_append_meth, METH_FASTCALL, rb_append_doc},
    {"try_append", (PyCFunction)(void (*)(void))rb_try_append_meth, METH_FASTCALL,
     rb_try_append_doc},
    {"seal", (PyCFunction)rb_seal, METH_NOARGS,
     "Take no more records: try_append() returns -1 and append() raises BufferError after it."},
    {"view", (PyCFunction)rb_view, METH_NOARGS,
     "A writable memoryview of the whole buffer, header included (appends fail while it lives)."},
    {"getvalue", (PyCFunction)rb_getvalue, METH_NOARGS,
     "A bytes copy of the whole buffer, header included."},
    {NULL, NULL, 0, NULL},
};

static PyObject *rb_get_count(RecordBuffer *self, void *c) { return PyLong_FromLongLong(self->count); }
static PyObject *rb_get_size(RecordBuffer *self, void *c) { return PyLong_FromSsize_t(self->len); }
static PyObject *rb_get_base_ts(RecordBuffer *self, void *c) {
    return PyLong_FromLongLong(self->base_ts);
}
static PyObject *rb_get_max_ts(RecordBuffer *self, void *c) {
    return PyLong_FromLongLong(self->max_ts);
}
static PyObject *rb_get_sealed(RecordBuffer *self, void *c) { return PyBool_FromLong(self->sealed); }

static PyGetSetDef rb_getset[] = {
    {"count", (getter)rb_get_count, NULL, "records appended", NULL},
    {"size", (getter)rb_get_size, NULL, "bytes in use, the 61-byte header included", NULL},
    {"base_timestamp", (getter)rb_get_base_ts, NULL, "first record's timestamp (-1: none)", NULL},
    {"max_timestamp", (getter)rb_get_max_ts, NULL, "largest timestamp (-1: none)", NULL},
    {"sealed", (getter)rb_get_sealed, NULL, "whether seal() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static int rb_getbuffer(RecordBuffer *self, Py_buffer *view, int flags) {
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->buf, self->len, 0, flags) < 0) {
        return -1;
    }
    self->exports++;
    return 0;
}

static void rb_releasebuffer(RecordBuffer *self, Py_buffer *view) { self->exports--; }

static PyBufferProcs rb_as_buffer = {
    (getbufferproc)rb_getbuffer,
    (releasebufferproc)rb_releasebuffer,
};

static PyTypeObject RecordBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkalite.records._speedups.RecordBuffer",
    .tp_basicsize = sizeof(RecordBuffer),
    .tp_dealloc = (destructor)rb_dealloc,
    .tp_as_buffer = &rb_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordBuffer(capacity=0): the records of one v2 batch, encoded as they arrive,\n"
              "after 61 reserved bytes for the batch header (filled in by the batch builder).",
    .tp_methods = rb_methods,
    .tp_getset = rb_getset,
    .tp_init = (initproc)rb_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ functions */

static PyObject *now_ms(PyObject *m, PyObject *Py_UNUSED(ignored)) {
    struct timespec t;
    if (clock_gettime(CLOCK_REALTIME, &t) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong((long long)t.tv_sec * 1000 + t.tv_nsec / 1000000);
}

static PyObject *murmur2(PyObject *m, PyObject *arg) {
    Field f;
    if (arg == Py_None) {
        PyErr_SetString(PyExc_TypeError, "murmur2 needs bytes, not None");
        return NULL;
    }
    if (field_get(arg, &f) < 0) {
        return NULL;
    }
    const uint32_t M = 0x5BD1E995u;
    const unsigned char *d = (const unsigned char *)f.ptr;
    Py_ssize_t len = f.len;
    uint32_t h = 0x9747B28Cu ^ (uint32_t)len;
    Py_ssize_t n4 = len >> 2;
    for (Py_ssize_t i = 0; i < n4; i++) {
        const unsigned char *q = d + i * 4;
        uint32_t k = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) |
                     ((uint32_t)q[3] << 24);
        k *= M;
        k ^= k >> 24;
        k *= M;
        h = (h * M) ^ k;
    }
    const unsigned char *tail = d + n4 * 4;
    switch (len & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= M;
    }
    h ^= h >> 13;
    h *= M;
    h ^= h >> 15;
    field_release(&f);
    return PyLong_FromLong((long)(int32_t)h);
}

static PyMethodDef module_methods[] = {
    {"now_ms", (PyCFunction)now_ms, METH_NOARGS, "Wall-clock time in milliseconds (record CreateTime)."},
    {"murmur2", (PyCFunction)murmur2, METH_O,
     "Kafka's murmur2 (seed 0x9747b28c) of bytes as a signed 32-bit int."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkalite.records._speedups",
    .m_doc = "Optional C accelerator for record batch building (RecordBuffer, now_ms, murmur2).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    if (PyType_Ready(&RecordBufferType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&RecordBufferType);
    if (PyModule_AddObject(m, "RecordBuffer", (PyObject *)&RecordBufferType) < 0) {
        Py_DECREF(&RecordBufferType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

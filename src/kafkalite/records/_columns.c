/*
 * kafkalite.records._columns: optional C accelerator for reading v2 records into Arrow column buffers.
 * ColumnBuilder decodes the (decompressed) records section of v2 batches straight into the buffers of
 * Arrow arrays (validity bitmaps, int32 offsets, data; int64 offsets and microsecond timestamps; the
 * headers as list<struct<key: string, value: binary>>), so no Python object is made per record.
 * kafkalite.spark.columnar holds the pure-Python twin (Columns); both must give the same rows
 * (tests/unit/spark/test_spark_columns.py). Written for kafkalite against the CPython C API.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ growable buffers */

typedef struct {
    char *p;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) {
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) {
        return -1;
    }
    if (n > 0) {
        memcpy(b->p + b->len, src, (size_t)n);
    }
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) {
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static PyObject *buf_bytes(const Buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len); }

/* A validity bitmap of `n` bits (Arrow's LSB order); bits are set as items are appended. */
static int bits_put(Buf *b, Py_ssize_t n, int valid) {
    if ((n & 7) == 0) {
        char zero = 0;
        if (buf_put(b, &zero, 1) < 0) {
            return -1;
        }
    }
    if (valid) {
        b->p[n >> 3] |= (char)(1 << (n & 7));
    }
    return 0;
}

/* A binary (or string) Arrow column: validity bitmap, n + 1 int32 offsets, data. */
typedef struct {
    Buf valid;
    Buf offs;
    Buf data;
    Py_ssize_t n;
    Py_ssize_t nulls;
} BinCol;

static int bin_init(BinCol *c) {
    int32_t zero = 0;
    return buf_put(&c->offs, &zero, 4);
}

/* ptr == NULL: a null. */
static int bin_put(BinCol *c, const char *ptr, Py_ssize_t len) {
    if (bits_put(&c->valid, c->n, ptr != NULL) < 0) {
        return -1;
    }
    if (ptr == NULL) {
        c->nulls++;
    } else if (buf_put(&c->data, ptr, len) < 0) {
        return -1;
    }
    if (c->data.len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column chunk holds more than 2 GiB");
        return -1;
    }
    int32_t end = (int32_t)c->data.len;
    c->n++;
    return buf_put(&c->offs, &end, 4);
}

static void bin_free(BinCol *c) {
    buf_free(&c->valid);
    buf_free(&c->offs);
    buf_free(&c->data);
}

/* (validity bytes or None when there is no null, offsets, data, null count) */
static PyObject *bin_tuple(const BinCol *c) {
    PyObject *valid = c->nulls ? buf_bytes(&c->valid) : Py_NewRef(Py_None);
    PyObject *offs = buf_bytes(&c->offs);
    PyObject *data = buf_bytes(&c->data);
    PyObject *out = NULL;
    if (valid && offs && data) {
        out = Py_BuildValue("(OOOn)", valid, offs, data, c->nulls);
    }
    Py_XDECREF(valid);
    Py_XDECREF(offs);
    Py_XDECREF(data);
    return out;
}

/* ------------------------------------------------------------------ ColumnBuilder */

typedef struct {
    PyObject_HEAD
    int with_headers;
    Py_ssize_t n;
    int64_t last_offset;
    BinCol key;
    BinCol value;
    Buf offsets; /* int64 */
    Buf stamps;  /* int64 microseconds */
    Buf types;   /* int32 */
    /* headers: list validity + int32 list offsets, then the struct's key and value children */
    Buf h_valid;
    Buf h_offs;
    Py_ssize_t h_nulls;
    BinCol h_key;
    BinCol h_value;
} ColumnBuilder;

static void cb_clear(ColumnBuilder *self) {
    bin_free(&self->key);
    bin_free(&self->value);
    buf_free(&self->offsets);
    buf_free(&self->stamps);
    buf_free(&self->types);
    buf_free(&self->h_valid);
    buf_free(&self->h_offs);
    bin_free(&self->h_key);
    bin_free(&self->h_value);
    self->key.n = self->key.nulls = self->value.n = self->value.nulls = 0;
    self->h_key.n = self->h_key.nulls = self->h_value.n = self->h_value.nulls = 0;
    self->n = self->h_nulls = 0;
    self->last_offset = -1;
}

static int cb_init(ColumnBuilder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"include_headers", NULL};
    int with_headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p", kwlist, &with_headers)) {
        return -1;
    }
    cb_clear(self);
    self->with_headers = with_headers;
    int32_t zero = 0;
    if (bin_init(&self->key) < 0 || bin_init(&self->value) < 0 || bin_init(&self->h_key) < 0 ||
        bin_init(&self->h_value) < 0 || buf_put(&self->h_offs, &zero, 4) < 0) {
        return -1;
    }
    return 0;
}

static void cb_dealloc(ColumnBuilder *self) {
    cb_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* One row's fixed columns. */
static int cb_row(ColumnBuilder *self, int64_t offset, int64_t ts_ms, int32_t ts_type) {
    int64_t us = (int64_t)((uint64_t)ts_ms * 1000u); /* wraps as Arrow's unchecked multiply does */
    if (buf_put(&self->offsets, &offset, 8) < 0 || buf_put(&self->stamps, &us, 8) < 0 ||
        buf_put(&self->types, &ts_type, 4) < 0) {
        return -1;
    }
    self->n++;
    self->last_offset = offset;
    return 0;
}

/* The end of one row's headers (after `count` headers were appended, or a null list). */
static int cb_headers_end(ColumnBuilder *self, Py_ssize_t row, int present) {
    if (bits_put(&self->h_valid, row, present) < 0) {
        return -1;
    }
    if (!present) {
        self->h_nulls++;
    }
    if (self->h_key.n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column chunk holds too many headers");
        return -1;
    }
    int32_t end = (int32_t)self->h_key.n;
    return buf_put(&self->h_offs, &end, 4);
}

/* A zig-zag varint at *pos of d[0:end); -1 with ValueError set when it is cut short or too long. */
static inline int read_varint(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    while (1) {
        if (p >= end) {
            PyErr_SetString(PyExc_ValueError, "a record is cut short (varint past its end)");
            return -1;
        }
        unsigned char b = d[p++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            break;
        }
        shift += 7;
        if (shift > 63) {
            PyErr_SetString(PyExc_ValueError, "a record's varint is too long");
            return -1;
        }
    }
    *pos = p;
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

/* A length-prefixed field at *pos: *ptr NULL for a null (negative length). */
static inline int read_field(const unsigned char *d, Py_ssize_t end, Py_ssize_t *pos,
                             const char **ptr, Py_ssize_t *len) {
    int64_t n;
    if (read_varint(d, end, pos, &n) < 0) {
        return -1;
    }
    if (n < 0) {
        *ptr = NULL;
        *len = -1;
        return 0;
    }
    if (n > end - *pos) {
        PyErr_SetString(PyExc_ValueError, "a record's field runs past the record");
        return -1;
    }
    *ptr = (const char *)d + *pos;
    *len = (Py_ssize_t)n;
    *pos += (Py_ssize_t)n;
    return 0;
}

PyDoc_STRVAR(cb_add_v2_doc,
             "add_v2(records, count, base_offset, base_timestamp, max_timestamp, timestamp_type, "
             "start, until) -> int\n\nDecode `count` records of a v2 batch's (decompressed) records "
             "section, keeping offsets in [start, until); timestamp_type 1 (LogAppendTime) stamps "
             "every row with max_timestamp. Returns the rows added; ValueError if malformed.");

static PyObject *cb_add_v2(ColumnBuilder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "add_v2 takes 8 arguments");
        return NULL;
    }
    long long vals[7];
    for (int i = 0; i < 7; i++) {
        vals[i] = PyLong_AsLongLong(args[i + 1]);
        if (vals[i] == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    long long count = vals[0], base = vals[1], base_ts = vals[2], max_ts = vals[3];
    int32_t ts_type = (int32_t)vals[4];
    long long start = vals[5], until = vals[6];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len;
    Py_ssize_t p = 0;
    Py_ssize_t added = 0;
    for (long long i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta;
        if (read_varint(d, size, &p, &length) < 0) {
            goto fail;
        }
        if (length < 0 || length > size - p) {
            PyErr_SetString(PyExc_ValueError, "a record runs past its batch");
            goto fail;
        }
        Py_ssize_t rec_end = p + (Py_ssize_t)length;
        p += 1; /* record attributes (unused) */
        if (read_varint(d, rec_end, &p, &ts_delta) < 0 || read_varint(d, rec_end, &p, &off_delta) < 0) {
            goto fail;
        }
        int64_t offset = (int64_t)base + off_delta;
        if (offset < start || offset >= until) {
            p = rec_end;
            continue;
        }
        const char *kp, *vp;
        Py_ssize_t kl, vl;
        if (read_field(d, rec_end, &p, &kp, &kl) < 0 || read_field(d, rec_end, &p, &vp, &vl) < 0) {
            goto fail;
        }
        int64_t nh;
        if (read_varint(d, rec_end, &p, &nh) < 0) {
            goto fail;
        }
        if (nh < 0 || nh > rec_end - p) {
            PyErr_SetString(PyExc_ValueError, "a record's header count is out of range");
            goto fail;
        }
        if (self->with_headers) {
            for (int64_t h = 0; h < nh; h++) {
                const char *hk, *hv;
                Py_ssize_t hkl, hvl;
                if (read_field(d, rec_end, &p, &hk, &hkl) < 0 || read_field(d, rec_end, &p, &hv, &hvl) < 0) {
                    goto fail;
                }
                if (hk == NULL) {
                    PyErr_SetString(PyExc_ValueError, "a header key is null");
                    goto fail;
                }
                if (bin_put(&self->h_key, hk, hkl) < 0 || bin_put(&self->h_value, hv, hvl) < 0) {
                    goto fail;
                }
            }
            if (cb_headers_end(self, self->n, nh > 0) < 0) {
                goto fail;
            }
        }
        if (bin_put(&self->key, kp, kl) < 0 || bin_put(&self->value, vp, vl) < 0 ||
            cb_row(self, offset, ts_type ? (int64_t)max_ts : (int64_t)base_ts + ts_delta, ts_type) < 0) {
            goto fail;
        }
        added++;
        p = rec_end;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(added);
fail:
    PyBuffer_Release(&view);
    return NULL;
}

/* A bytes-like object or None as (ptr, len); view filled when a buffer was taken. */
static int opt_buffer(PyObject *obj, Py_buffer *view, const char **ptr, Py_ssize_t *len) {
    view->obj = NULL;
    if (obj == Py_None) {
        *ptr = NULL;
        *len = -1;
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    *ptr = (const char *)view->buf;
    *len = view->len;
    return 0;
}

static void opt_release(Py_buffer *view) {
    if (view->obj != NULL) {
        PyBuffer_Release(view);
    }
}

PyDoc_STRVAR(cb_add_doc, "add(offset, timestamp, timestamp_type, key, value, headers) -> None\n\n"
                         "Append one decoded record (legacy batches); headers is a sequence of "
                         "(str, bytes | None) pairs or None.");

static PyObject *cb_add(ColumnBuilder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "add takes 6 arguments");
        return NULL;
    }
    long long offset = PyLong_AsLongLong(args[0]);
    long long ts = PyLong_AsLongLong(args[1]);
    long ts_type = PyLong_AsLong(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer kv, vv;
    const char *kp, *vp;
    Py_ssize_t kl, vl;
    if (opt_buffer(args[3], &kv, &kp, &kl) < 0) {
        return NULL;
    }
    if (opt_buffer(args[4], &vv, &vp, &vl) < 0) {
        opt_release(&kv);
        return NULL;
    }
    int rc = 0;
    if (self->with_headers) {
        Py_ssize_t nh = 0;
        PyObject *seq = NULL;
        if (args[5] != Py_None) {
            seq = PySequence_Fast(args[5], "headers must be a sequence of (str, bytes | None) pairs");
            if (seq == NULL) {
                rc = -1;
            } else {
                nh = PySequence_Fast_GET_SIZE(seq);
            }
        }
        for (Py_ssize_t i = 0; rc == 0 && i < nh; i++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
            PyObject *hk = NULL, *hv = NULL;
            if (!PyArg_ParseTuple(pair, "UO", &hk, &hv)) {
                rc = -1;
                break;
            }
            Py_ssize_t hkl;
            const char *hkp = PyUnicode_AsUTF8AndSize(hk, &hkl);
            Py_buffer hvv;
            const char *hvp;
            Py_ssize_t hvl;
            if (hkp == NULL || opt_buffer(hv, &hvv, &hvp, &hvl) < 0) {
                rc = -1;
                break;
            }
            rc = (bin_put(&self->h_key, hkp, hkl) < 0 || bin_put(&self->h_value, hvp, hvl) < 0) ? -1 : 0;
            opt_release(&hvv);
        }
        Py_XDECREF(seq);
        if (rc == 0) {
            rc = cb_headers_end(self, self->n, nh > 0);
        }
    }
    if (rc == 0) {
        rc = (bin_put(&self->key, kp, kl) < 0 || bin_put(&self->value, vp, vl) < 0 ||
              cb_row(self, offset, ts, (int32_t)ts_type) < 0)
                 ? -1
                 : 0;
    }
    opt_release(&kv);
    opt_release(&vv);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(cb_buffers_doc,
             "buffers() -> tuple\n\n(rows, key, value, offsets, timestamps, timestamp_types, headers): "
             "key and value as (validity or None, int32 offsets, data, null count); offsets and "
             "timestamps (microseconds) as int64 bytes, timestamp types as int32 bytes; headers None "
             "unless include_headers, else (list validity or None, int32 list offsets, list null count, "
             "header keys, header values) with the keys and values as above.");

static PyObject *cb_buffers(ColumnBuilder *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *key = bin_tuple(&self->key);
    PyObject *value = bin_tuple(&self->value);
    PyObject *offsets = buf_bytes(&self->offsets);
    PyObject *stamps = buf_bytes(&self->stamps);
    PyObject *types = buf_bytes(&self->types);
    PyObject *headers = NULL;
    PyObject *out = NULL;
    if (self->with_headers) {
        PyObject *hv = self->h_nulls ? buf_bytes(&self->h_valid) : Py_NewRef(Py_None);
        PyObject *ho = buf_bytes(&self->h_offs);
        PyObject *hk = bin_tuple(&self->h_key);
        PyObject *hval = bin_tuple(&self->h_value);
        if (hv && ho && hk && hval) {
            headers = Py_BuildValue("(OOnOO)", hv, ho, self->h_nulls, hk, hval);
        }
        Py_XDECREF(hv);
        Py_XDECREF(ho);
        Py_XDECREF(hk);
        Py_XDECREF(hval);
    } else {
        headers = Py_NewRef(Py_None);
    }
    if (key && value && offsets && stamps && types && headers) {
        out = Py_BuildValue("(nOOOOOO)", self->n, key, value, offsets, stamps, types, headers);
    }
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(offsets);
    Py_XDECREF(stamps);
    Py_XDECREF(types);
    Py_XDECREF(headers);
    return out;
}

static Py_ssize_t cb_len(ColumnBuilder *self) { return self->n; }

static PyObject *cb_get_last_offset(ColumnBuilder *self, void *c) {
    return PyLong_FromLongLong(self->last_offset);
}

static PyObject *cb_get_offsets(ColumnBuilder *self, void *c) {
    PyObject *out = PyList_New(self->n);
    if (out == NULL) {
        return NULL;
    }
    const int64_t *o = (const int64_t *)self->offsets.p;
    for (Py_ssize_t i = 0; i < self->n; i++) {
        PyObject *v = PyLong_FromLongLong(o[i]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* A binary column as a list of bytes / None. */
static PyObject *bin_list(const BinCol *c) {
    PyObject *out = PyList_New(c->n);
    if (out == NULL) {
        return NULL;
    }
    const int32_t *o = (const int32_t *)c->offs.p;
    for (Py_ssize_t i = 0; i < c->n; i++) {
        PyObject *v;
        if (c->nulls && !(c->valid.p[i >> 3] & (1 << (i & 7)))) {
            v = Py_NewRef(Py_None);
        } else {
            v = PyBytes_FromStringAndSize(c->data.p + o[i], o[i + 1] - o[i]);
            if (v == NULL) {
                Py_DECREF(out);
                return NULL;
            }
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *cb_get_keys(ColumnBuilder *self, void *c) { return bin_list(&self->key); }

static PyObject *cb_get_values(ColumnBuilder *self, void *c) { return bin_list(&self->value); }

static PyObject *cb_get_include_headers(ColumnBuilder *self, void *c) {
    return PyBool_FromLong(self->with_headers);
}

static PyMethodDef cb_methods[] = {
    {"add_v2", (PyCFunction)(void (*)(void))cb_add_v2, METH_FASTCALL, cb_add_v2_doc},
    {"add", (PyCFunction)(void (*)(void))cb_add, METH_FASTCALL, cb_add_doc},
    {"buffers", (PyCFunction)cb_buffers, METH_NOARGS, cb_buffers_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cb_getset[] = {
    {"last_offset", (getter)cb_get_last_offset, NULL, "offset of the last row (-1: none)", NULL},
    {"offsets", (getter)cb_get_offsets, NULL, "the rows' offsets as a list (for checks, not speed)", NULL},
    {"keys", (getter)cb_get_keys, NULL, "the rows' keys as a list (for checks, not speed)", NULL},
    {"values", (getter)cb_get_values, NULL, "the rows' values as a list (for checks, not speed)", NULL},
    {"include_headers", (getter)cb_get_include_headers, NULL, "whether headers are kept", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods cb_as_sequence = {
    .sq_length = (lenfunc)cb_len,
};

static PyTypeObject ColumnBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkalite.records._columns.ColumnBuilder",
    .tp_basicsize = sizeof(ColumnBuilder),
    .tp_dealloc = (destructor)cb_dealloc,
    .tp_as_sequence = &cb_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ColumnBuilder(include_headers=False): rows of v2 record batches as Arrow column buffers.",
    .tp_methods = cb_methods,
    .tp_getset = cb_getset,
    .tp_init = (initproc)cb_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkalite.records._columns",
    .m_doc = "Optional C accelerator decoding v2 records into Arrow column buffers (ColumnBuilder).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__columns(void) {
    if (PyType_Ready(&ColumnBuilderType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&ColumnBuilderType);
    if (PyModule_AddObject(m, "ColumnBuilder", (PyObject *)&ColumnBuilderType) < 0) {
        Py_DECREF(&ColumnBuilderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

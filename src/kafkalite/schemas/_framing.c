/* kafkalite.schemas._framing: the optional C twin of produce validation's record walk
 * (broker/apis/data/_schema_validation.py: _value_prefixes_pass). For uncompressed v2 batches it
 * reads each record's value framing (magic byte and 4-byte schema id) and checks it against the
 * prefixes already judged good; the Python function is the reference and the fallback. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define V2_HEADER 61
#define MAX_FAST 16

/* a zigzag varint at *pos (< end); -1 on a torn or over-long one */
static int read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, long long *out) {
    unsigned long long result = 0;
    int shift = 0;
    while (*pos < end && shift < 64) {
        unsigned char b = buf[(*pos)++];
        result |= (unsigned long long)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = (long long)(result >> 1) ^ -(long long)(result & 1);
            return 0;
        }
        shift += 7;
    }
    return -1;
}

static PyObject *value_prefixes_pass(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *ok;
    if (!PyArg_ParseTuple(args, "y*O", &view, &ok))
        return NULL;
    if (!PyAnySet_Check(ok)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "ok must be a set of bytes");
        return NULL;
    }
    /* up to MAX_FAST good prefixes compared with memcmp; more go through the set */
    unsigned char fast[MAX_FAST][5];
    Py_ssize_t nfast = 0, nok = PySet_GET_SIZE(ok);
    int use_set = nok > MAX_FAST;
    if (!use_set) {
        Py_ssize_t i = 0;
        PyObject *key;
        Py_hash_t hash;
        while (_PySet_NextEntry(ok, &i, &key, &hash)) {
            if (PyBytes_Check(key) && PyBytes_GET_SIZE(key) == 5)
                memcpy(fast[nfast++], PyBytes_AS_STRING(key), 5);
        }
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *answer = Py_True;
    while (pos < end) {
        if (end - pos < V2_HEADER || buf[pos + 16] != 2 || (buf[pos + 22] & 0x07)) {
            answer = Py_None;
            goto done;
        }
        Py_ssize_t batch_len = ((Py_ssize_t)buf[pos + 8] << 24) | (buf[pos + 9] << 16) |
                               (buf[pos + 10] << 8) | buf[pos + 11];
        Py_ssize_t batch_end = pos + 12 + batch_len;
        if (batch_len < 0 || batch_end > end) {
            answer = Py_None;
            goto done;
        }
        Py_ssize_t p = pos + V2_HEADER;
        while (p < batch_end) {
            long long length, skip, klen, vlen;
            if (read_varint(buf, batch_end, &p, &length) < 0 || length < 0) goto bad;
            Py_ssize_t nxt = p + (Py_ssize_t)length;
            if (nxt > batch_end) goto bad;
            Py_ssize_t q = p + 1; /* past the attributes byte */
            if (read_varint(buf, nxt, &q, &skip) < 0) goto bad; /* timestamp delta */
            if (read_varint(buf, nxt, &q, &skip) < 0) goto bad; /* offset delta */
            if (read_varint(buf, nxt, &q, &klen) < 0) goto bad;
            if (klen > 0) q += (Py_ssize_t)klen;
            if (q > nxt || read_varint(buf, nxt, &q, &vlen) < 0) goto bad;
            if (vlen < 5 || q + 5 > nxt) goto bad;
            int found = 0;
            if (use_set) {
                PyObject *prefix = PyBytes_FromStringAndSize((const char *)buf + q, 5);
                if (prefix == NULL) {
                    PyBuffer_Release(&view);
                    return NULL;
                }
                found = PySet_Contains(ok, prefix);
                Py_DECREF(prefix);
                if (found < 0) {
                    PyBuffer_Release(&view);
                    return NULL;
                }
            } else {
                for (Py_ssize_t i = 0; i < nfast && !found; i++)
                    found = memcmp(fast[i], buf + q, 5) == 0;
            }
            if (!found) goto bad;
            p = nxt;
        }
        pos = batch_end;
    }
    goto done;
bad:
    answer = Py_False;
done:
    PyBuffer_Release(&view);
    Py_INCREF(answer);
    return answer;
}

static PyMethodDef methods[] = {
    {"value_prefixes_pass", value_prefixes_pass, METH_VARARGS,
     "value_prefixes_pass(blob, ok) -> True | False | None: every record's value framing is in ok "
     "(True), one is not or the batch is torn (False), a batch is compressed or legacy (None)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_framing",
    "C twin of produce validation's record walk (see kafkalite.broker.apis.data).", -1, methods,
};

PyMODINIT_FUNC PyInit__framing(void) { return PyModule_Create(&module); }

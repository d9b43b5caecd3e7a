/* Read the few attributes skillgauge wants straight from an encoded Export request.

   Parsing a request with protobuf's classes costs a Python object for every attribute that
   is looked at, and parsing attributes as a map still builds a table per span.  A Scanner
   walks the wire format once, in C, and keeps only declared keys: per span its ids, the
   values of the declared attribute keys (a lone string decoded; anything else left as its
   encoded AnyValue, which `collector.spans.decoded_value` reads), and the declared fields
   of its span events.  Keys are the caller's own str objects, so a span with no declared
   key costs no allocation beyond its ids.

   Anything this walk does not expect (a wire type other than the schema's, a group, a
   truncated field) makes `spans` return None: the caller then parses with protobuf, which
   accepts what is valid and raises on what is not.  It never raises on input.

   As protobuf's map<string, bytes> reading of a KeyValue does, a key written twice keeps its
   last value, and so does a KeyValue's key or value field written twice. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const char *bytes; /* the str's UTF-8, alive as long as str */
    Py_ssize_t len;
    PyObject *str;
    uint64_t hash;
} Key;

typedef struct {
    Key *slots; /* open addressing; an empty slot has str == NULL */
    size_t mask;
    Py_ssize_t min_len, max_len;
} KeyTable;

typedef struct {
    Key name;
    Key *keys; /* sorted, as the caller gave them */
    Py_ssize_t count;
} EventFields;

typedef struct {
    PyObject_HEAD
    KeyTable span_keys;
    KeyTable resource_keys;
    Key *prefixes;
    Py_ssize_t prefix_count;
    EventFields *events;
    Py_ssize_t event_count;
} Scanner;

enum { PREFIXED = 1, UNDECODED = 2 };

/* -- the wire format ------------------------------------------------------------------- */

static int varint(const uint8_t **at, const uint8_t *end, uint64_t *out) {
    uint64_t value = 0;
    const uint8_t *p = *at;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
        uint8_t byte = *p++;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *at = p;
            *out = value;
            return 1;
        }
    }
    return 0;
}

/* One field: its number, wire type and, for a length-delimited one, its bytes.  Fixed-size
   and varint fields are skipped here.  0: the input ends inside the field, or holds a
   group or a wire type that does not exist. */
typedef struct {
    uint32_t number;
    int wire;
    const uint8_t *data;
    Py_ssize_t len;
} Field;

static int next_field(const uint8_t **at, const uint8_t *end, Field *field) {
    uint64_t tag, len;
    if (!varint(at, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1FFFFFFF)
        return 0;
    field->number = (uint32_t)(tag >> 3);
    field->wire = (int)(tag & 7);
    field->data = NULL;
    field->len = 0;
    switch (field->wire) {
    case 0:
        return varint(at, end, &len);
    case 1:
        if (end - *at < 8) return 0;
        *at += 8;
        return 1;
    case 5:
        if (end - *at < 4) return 0;
        *at += 4;
        return 1;
    case 2:
        if (!varint(at, end, &len) || len > (uint64_t)(end - *at)) return 0;
        field->data = *at;
        field->len = (Py_ssize_t)len;
        *at += len;
        return 1;
    default:
        return 0;
    }
}

/* -- keys -------------------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int key_init(Key *key, PyObject *str) {
    if (!PyUnicode_Check(str)) {
        PyErr_SetString(PyExc_TypeError, "keys must be str");
        return -1;
    }
    key->bytes = PyUnicode_AsUTF8AndSize(str, &key->len);
    if (key->bytes == NULL) return -1;
    Py_INCREF(str);
    key->str = str;
    key->hash = fnv1a(key->bytes, key->len);
    return 0;
}

static int table_init(KeyTable *table, PyObject *keys) {
    PyObject *seq = PySequence_Fast(keys, "keys must be a sequence of str");
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t size = 8;
    while (size < (size_t)n * 2) size <<= 1;
    table->slots = PyMem_Calloc(size, sizeof(Key));
    if (table->slots == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    table->mask = size - 1;
    table->min_len = PY_SSIZE_T_MAX;
    table->max_len = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Key key;
        if (key_init(&key, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        size_t slot = (size_t)key.hash & table->mask;
        while (table->slots[slot].str != NULL) {
            Key *other = &table->slots[slot];
            if (other->len == key.len && memcmp(other->bytes, key.bytes, key.len) == 0) break;
            slot = (slot + 1) & table->mask;
        }
        Py_XDECREF(table->slots[slot].str); /* a key given twice */
        table->slots[slot] = key;
        if (key.len < table->min_len) table->min_len = key.len;
        if (key.len > table->max_len) table->max_len = key.len;
    }
    Py_DECREF(seq);
    return 0;
}

static void table_free(KeyTable *table) {
    if (table->slots == NULL) return;
    for (size_t i = 0; i <= table->mask; i++) Py_XDECREF(table->slots[i].str);
    PyMem_Free(table->slots);
    table->slots = NULL;
}

static Key *lookup(const KeyTable *table, const uint8_t *bytes, Py_ssize_t len) {
    if (len < table->min_len || len > table->max_len) return NULL;
    size_t slot = (size_t)fnv1a((const char *)bytes, len) & table->mask;
    for (;;) {
        Key *key = &table->slots[slot];
        if (key->str == NULL) return NULL;
        if (key->len == len && memcmp(key->bytes, bytes, len) == 0) return key;
        slot = (slot + 1) & table->mask;
    }
}

static int has_prefix(const Scanner *self, const uint8_t *bytes, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < self->prefix_count; i++) {
        const Key *p = &self->prefixes[i];
        if (len >= p->len && memcmp(bytes, p->bytes, p->len) == 0) return 1;
    }
    return 0;
}

/* -- values ------------------------------------------------------------------------------ */

/* An encoded AnyValue: the str when it is a lone string field of valid UTF-8 (as
   `collector.spans.decoded_value` reads it), else its bytes, and *flags gets UNDECODED. */
static PyObject *value_of(const uint8_t *data, Py_ssize_t len, int *flags) {
    if (len >= 2 && data[0] == 0x0A) {
        const uint8_t *at = data + 1, *end = data + len;
        uint64_t size;
        if (varint(&at, end, &size) && size == (uint64_t)(end - at)) {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)at, (Py_ssize_t)size, NULL);
            if (text != NULL) return text;
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return NULL;
            PyErr_Clear();
        }
    }
    *flags |= UNDECODED;
    return PyBytes_FromStringAndSize((const char *)data, len);
}

/* One KeyValue: its key and value bytes, the last of each when written twice.  0: malformed
   or unexpected. */
static int key_value(const uint8_t *at, const uint8_t *end, Field *key, Field *value) {
    Field field;
    key->data = value->data = (const uint8_t *)"";
    key->len = value->len = 0;
    while (at < end) {
        if (!next_field(&at, end, &field)) return 0;
        if (field.number == 1 || field.number == 2) {
            if (field.wire != 2) return 0;
            *(field.number == 1 ? key : value) = field;
        }
    }
    return 1;
}

/* The declared keys among a repeated KeyValue field's entries, added to *values (made when
   the first is found).  0 on malformed input; -1 on a Python error. */
static int collect(const Scanner *self, const KeyTable *table, int prefixes, const uint8_t *data,
                   Py_ssize_t len, PyObject **values, int *flags) {
    Field key, value;
    if (!key_value(data, data + len, &key, &value)) return 0;
    PyObject *name = NULL;
    Key *known = lookup(table, key.data, key.len);
    if (known != NULL) {
        name = known->str;
        Py_INCREF(name);
    } else if (prefixes && has_prefix(self, key.data, key.len)) {
        name = PyUnicode_DecodeUTF8((const char *)key.data, key.len, NULL);
        if (name == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
            PyErr_Clear();
            return 0;
        }
        *flags |= PREFIXED;
    } else {
        return 1;
    }
    if (*values == NULL && (*values = PyDict_New()) == NULL) {
        Py_DECREF(name);
        return -1;
    }
    PyObject *decoded = value_of(value.data, value.len, flags);
    int failed = decoded == NULL || PyDict_SetItem(*values, name, decoded) < 0;
    Py_DECREF(name);
    Py_XDECREF(decoded);
    return failed ? -1 : 1;
}

/* -- span events ----------------------------------------------------------------------------- */

static const EventFields *event_fields(const Scanner *self, const uint8_t *name, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < self->event_count; i++) {
        const Key *n = &self->events[i].name;
        if (n->len == len && memcmp(n->bytes, name, len) == 0) return &self->events[i];
    }
    return NULL;
}

/* One event's declared fields, appended to *found as (position, name, key, value) in key
   order.  0 on malformed input; -1 on a Python error. */
static int event(const Scanner *self, Py_ssize_t position, const uint8_t *at, const uint8_t *end,
                 PyObject **found, int *flags) {
    Field field, name = {0, 2, (const uint8_t *)"", 0};
    const uint8_t *start = at;
    while (at < end) { /* the name first: it may follow the attributes */
        if (!next_field(&at, end, &field)) return 0;
        if (field.number == 2) {
            if (field.wire != 2) return 0;
            name = field;
        } else if (field.number == 3 && field.wire != 2) {
            return 0;
        }
    }
    const EventFields *wanted = event_fields(self, name.data, name.len);
    if (wanted == NULL) return 1;
    Field values[8];
    int present[8] = {0};
    Py_ssize_t count = wanted->count < 8 ? wanted->count : 8;
    for (at = start; at < end;) {
        next_field(&at, end, &field);
        if (field.number != 3) continue;
        Field key, value;
        if (!key_value(field.data, field.data + field.len, &key, &value)) return 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            const Key *k = &wanted->keys[i];
            if (k->len == key.len && memcmp(k->bytes, key.data, key.len) == 0) {
                values[i] = value;
                present[i] = 1;
            }
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!present[i]) continue;
        if (*found == NULL && (*found = PyList_New(0)) == NULL) return -1;
        PyObject *decoded = value_of(values[i].data, values[i].len, flags);
        if (decoded == NULL) return -1;
        PyObject *item = Py_BuildValue("(nOON)", position, wanted->name.str, wanted->keys[i].str, decoded);
        if (item == NULL || PyList_Append(*found, item) < 0) {
            Py_XDECREF(item);
            return -1;
        }
        Py_DECREF(item);
    }
    return 1;
}

/* -- spans ------------------------------------------------------------------------------------ */

static PyObject *empty_bytes;

static PyObject *id_bytes(const Field *field) {
    if (field->len == 0) {
        Py_INCREF(empty_bytes);
        return empty_bytes;
    }
    return PyBytes_FromStringAndSize((const char *)field->data, field->len);
}

/* One span, appended to spans as (resource, trace_id, span_id, values, flags, events).
   0 on malformed input; -1 on a Python error. */
static int span(const Scanner *self, Py_ssize_t resource, const uint8_t *at, const uint8_t *end,
                PyObject *spans) {
    Field field, trace_id = {0, 2, NULL, 0}, span_id = {0, 2, NULL, 0};
    PyObject *values = NULL, *events = NULL;
    int flags = 0, ok = 1;
    Py_ssize_t position = 0;
    while (ok == 1 && at < end) {
        if (!next_field(&at, end, &field)) {
            ok = 0;
            break;
        }
        switch (field.number) {
        case 1:
        case 2:
        case 9:
        case 11:
            if (field.wire != 2) {
                ok = 0;
                break;
            }
            if (field.number == 1)
                trace_id = field;
            else if (field.number == 2)
                span_id = field;
            else if (field.number == 9)
                ok = collect(self, &self->span_keys, 1, field.data, field.len, &values, &flags);
            else if (self->event_count)
                ok = event(self, position++, field.data, field.data + field.len, &events, &flags);
            else
                position++;
            break;
        default:
            break;
        }
    }
    if (ok != 1) {
        Py_XDECREF(values);
        Py_XDECREF(events);
        return ok;
    }
    PyObject *item = Py_BuildValue("(nNNNiN)", resource, id_bytes(&trace_id), id_bytes(&span_id),
                                   values ? values : Py_NewRef(Py_None), flags,
                                   events ? events : Py_NewRef(Py_None));
    if (item == NULL) return -1;
    int failed = PyList_Append(spans, item) < 0;
    Py_DECREF(item);
    return failed ? -1 : 1;
}

/* The length-delimited field `number` of the message in [*at, end): 1 with the next
   occurrence in *field, 2 at the end, 0 on malformed input or another wire type. */
static int next_of(const uint8_t **at, const uint8_t *end, uint32_t number, Field *field) {
    while (*at < end) {
        if (!next_field(at, end, field)) return 0;
        if (field->number == number) return field->wire == 2 ? 1 : 0;
    }
    return 2;
}

/* One ResourceSpans: its resource's declared attributes appended to resources, its spans
   to spans.  0 on malformed input; -1 on a Python error. */
static int resource_spans(const Scanner *self, const uint8_t *start, const uint8_t *end,
                          PyObject *resources, PyObject *spans) {
    Py_ssize_t index = PyList_GET_SIZE(resources);
    PyObject *values = NULL;
    Field resource, attribute, scope, one;
    const uint8_t *at = start, *in;
    int flags = 0, ok = 1, more = 2;
    while (ok == 1 && (more = next_of(&at, end, 1, &resource)) == 1) { /* Resource, merged */
        in = resource.data;
        while (ok == 1 && (more = next_of(&in, resource.data + resource.len, 1, &attribute)) == 1)
            ok = collect(self, &self->resource_keys, 0, attribute.data, attribute.len, &values, &flags);
        if (more == 0) ok = 0;
    }
    if (ok == 1 && more == 0) ok = 0;
    if (ok == 1 && PyList_Append(resources, values ? values : Py_None) < 0) ok = -1;
    Py_XDECREF(values);
    for (at = start; ok == 1 && (more = next_of(&at, end, 2, &scope)) == 1;) { /* ScopeSpans */
        in = scope.data;
        while (ok == 1 && (more = next_of(&in, scope.data + scope.len, 2, &one)) == 1)
            ok = span(self, index, one.data, one.data + one.len, spans);
        if (more == 0) ok = 0;
    }
    if (ok == 1 && more == 0) ok = 0;
    return ok;
}

static PyObject *Scanner_spans(Scanner *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *resources = PyList_New(0), *spans = PyList_New(0), *result = NULL;
    int ok = resources != NULL && spans != NULL ? 1 : -1;
    const uint8_t *at = view.buf, *end = at + view.len;
    Field field;
    while (ok == 1 && at < end) {
        if (!next_field(&at, end, &field)) {
            ok = 0;
        } else if (field.number == 1) {
            ok = field.wire != 2 ? 0 : resource_spans(self, field.data, field.data + field.len, resources, spans);
        }
    }
    PyBuffer_Release(&view);
    if (ok == 1)
        result = PyTuple_Pack(2, resources, spans);
    else if (ok == 0)
        result = Py_NewRef(Py_None);
    Py_XDECREF(resources);
    Py_XDECREF(spans);
    return result;
}

/* -- the type ---------------------------------------------------------------------------------- */

static int keys_init(Key **keys, Py_ssize_t *count, PyObject *given) {
    PyObject *seq = PySequence_Fast(given, "expected a sequence of str");
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    *keys = PyMem_Calloc(n ? n : 1, sizeof(Key));
    if (*keys == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (key_init(&(*keys)[i], PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        *count = i + 1;
    }
    Py_DECREF(seq);
    return 0;
}

static void keys_free(Key *keys, Py_ssize_t count) {
    if (keys == NULL) return;
    for (Py_ssize_t i = 0; i < count; i++) Py_XDECREF(keys[i].str);
    PyMem_Free(keys);
}

static void Scanner_clear(Scanner *self) {
    table_free(&self->span_keys);
    table_free(&self->resource_keys);
    keys_free(self->prefixes, self->prefix_count);
    self->prefixes = NULL;
    for (Py_ssize_t i = 0; i < self->event_count; i++) {
        Py_XDECREF(self->events[i].name.str);
        keys_free(self->events[i].keys, self->events[i].count);
    }
    PyMem_Free(self->events);
    self->events = NULL;
    self->event_count = 0;
}

static int Scanner_init(Scanner *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"span_keys", "resource_keys", "prefixes", "event_fields", NULL};
    PyObject *span_keys, *resource_keys, *prefixes, *fields;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO!:Scanner", names, &span_keys, &resource_keys,
                                     &prefixes, &PyDict_Type, &fields))
        return -1;
    Scanner_clear(self);
    if (table_init(&self->span_keys, span_keys) < 0 || table_init(&self->resource_keys, resource_keys) < 0 ||
        keys_init(&self->prefixes, &self->prefix_count, prefixes) < 0)
        return -1;
    self->events = PyMem_Calloc(PyDict_GET_SIZE(fields) + 1, sizeof(EventFields));
    if (self->events == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *name, *keys;
    Py_ssize_t pos = 0;
    while (PyDict_Next(fields, &pos, &name, &keys)) {
        EventFields *e = &self->events[self->event_count];
        if (key_init(&e->name, name) < 0) return -1;
        self->event_count++;
        if (keys_init(&e->keys, &e->count, keys) < 0) return -1;
        if (e->count > 8) {
            PyErr_SetString(PyExc_ValueError, "at most 8 fields per event name");
            return -1;
        }
    }
    return 0;
}

static void Scanner_dealloc(Scanner *self) {
    Scanner_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Scanner_methods[] = {
    {"spans", (PyCFunction)Scanner_spans, METH_O,
     "spans(request) -> (resources, spans) or None: see collector/wire_scan.pyi"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "collector.wire_scan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Declared attributes read from an encoded Export request (see the module doc).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};


/* -- marker search ---------------------------------------------------------------------------

   Detection asks of each prompt text which of a few groups of marker substrings it holds
   (catalogs, tool blocks, injected bodies: 13 markers).  `in` searches once per marker; a
   Markers object searches for all of them in one pass (Horspool's algorithm for a set of
   patterns: the window is as long as the shortest marker, and the character at its end
   says how far it may move on), and stops once every group is found.  Markers are ASCII. */

#define MAX_MARKERS 32

typedef struct {
    PyObject_HEAD
    Py_ssize_t count, window;
    const char *text[MAX_MARKERS];
    Py_ssize_t len[MAX_MARKERS];
    uint32_t group_of[MAX_MARKERS]; /* the bit of the marker's group */
    uint32_t in_group[32];          /* group bit -> its markers */
    uint32_t all_groups;
    uint32_t ends[256];  /* markers whose first `window` characters end with this one */
    uint8_t shift[256];  /* how far the window may move when it ends with this character */
    PyObject *keep;      /* the marker strs, alive as long as their UTF-8 is used */
} Markers;

static int Markers_init(Markers *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"groups", NULL};
    PyObject *groups;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!:Markers", names, &PyTuple_Type, &groups)) return -1;
    Py_ssize_t ngroups = PyTuple_GET_SIZE(groups);
    if (ngroups == 0 || ngroups > 32) {
        PyErr_SetString(PyExc_ValueError, "1 to 32 groups of markers");
        return -1;
    }
    Py_XSETREF(self->keep, Py_NewRef(groups));
    self->count = 0;
    self->window = PY_SSIZE_T_MAX;
    self->all_groups = 0;
    memset(self->in_group, 0, sizeof self->in_group);
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        PyObject *group = PyTuple_GET_ITEM(groups, g);
        if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) == 0) {
            PyErr_SetString(PyExc_TypeError, "each group is a non-empty tuple of str");
            return -1;
        }
        self->all_groups |= 1u << g;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(group); i++) {
            PyObject *marker = PyTuple_GET_ITEM(group, i);
            if (!PyUnicode_Check(marker) || !PyUnicode_IS_ASCII(marker) || PyUnicode_GET_LENGTH(marker) == 0) {
                PyErr_SetString(PyExc_ValueError, "markers are non-empty ASCII str");
                return -1;
            }
            if (self->count == MAX_MARKERS) {
                PyErr_SetString(PyExc_ValueError, "at most 32 markers");
                return -1;
            }
            Py_ssize_t k = self->count++;
            self->text[k] = (const char *)PyUnicode_1BYTE_DATA(marker);
            self->len[k] = PyUnicode_GET_LENGTH(marker);
            self->group_of[k] = 1u << g;
            self->in_group[g] |= 1u << k;
            if (self->len[k] < self->window) self->window = self->len[k];
        }
    }
    Py_ssize_t w = self->window < 255 ? self->window : 255;
    self->window = w;
    memset(self->ends, 0, sizeof self->ends);
    memset(self->shift, (int)w, sizeof self->shift);
    for (Py_ssize_t k = 0; k < self->count; k++) {
        const uint8_t *m = (const uint8_t *)self->text[k];
        self->ends[m[w - 1]] |= 1u << k;
        for (Py_ssize_t j = 0; j < w - 1; j++) {
            uint8_t d = (uint8_t)(w - 1 - j);
            if (d < self->shift[m[j]]) self->shift[m[j]] = d;
        }
    }
    return 0;
}

/* The search over one kind of str data (UCS1, UCS2 or UCS4). */
#define MARKERS_SEARCH(TYPE)                                                             \
    static uint32_t search_##TYPE(const Markers *self, const TYPE *s, Py_ssize_t n) {    \
        uint32_t found = 0, live = (self->count == 32) ? 0xFFFFFFFFu : ((1u << self->count) - 1); \
        Py_ssize_t w = self->window;                                                     \
        for (Py_ssize_t i = 0; i + w <= n;) {                                            \
            TYPE c = s[i + w - 1];                                                       \
            if (sizeof(TYPE) > 1 && c > 255) {                                         \
                i += w;                                                                  \
                continue;                                                                \
            }                                                                            \
            uint32_t candidates = self->ends[c] & live;                                  \
            while (candidates) {                                                         \
                int k = __builtin_ctz(candidates);                                       \
                candidates &= candidates - 1;                                            \
                Py_ssize_t len = self->len[k];                                           \
                if (i + len > n) continue;                                               \
                const uint8_t *m = (const uint8_t *)self->text[k];                       \
                Py_ssize_t j = 0;                                                        \
                while (j < len && s[i + j] == m[j]) j++;                                 \
                if (j == len) {                                                          \
                    uint32_t g = self->group_of[k];                                      \
                    found |= g;                                                          \
                    live &= ~self->in_group[__builtin_ctz(g)];                           \
                    candidates &= live;                                                  \
                    if (found == self->all_groups) return found;                         \
                }                                                                        \
            }                                                                            \
            i += self->shift[c];                                                         \
        }                                                                                \
        return found;                                                                    \
    }

MARKERS_SEARCH(Py_UCS1)
MARKERS_SEARCH(Py_UCS2)
MARKERS_SEARCH(Py_UCS4)

static PyObject *Markers_found(Markers *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    if (self->count == 0) {
        PyErr_SetString(PyExc_ValueError, "Markers was not initialised");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    uint32_t found;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        found = search_Py_UCS1(self, PyUnicode_1BYTE_DATA(text), n);
        break;
    case PyUnicode_2BYTE_KIND:
        found = search_Py_UCS2(self, PyUnicode_2BYTE_DATA(text), n);
        break;
    default:
        found = search_Py_UCS4(self, PyUnicode_4BYTE_DATA(text), n);
        break;
    }
    return PyLong_FromUnsignedLong(found);
}

static void Markers_dealloc(Markers *self) {
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Markers_methods[] = {
    {"found", (PyCFunction)Markers_found, METH_O,
     "found(text) -> int: bit g set when text holds a marker of group g"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MarkersType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "collector.wire_scan.Markers",
    .tp_basicsize = sizeof(Markers),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Which groups of ASCII marker substrings a str holds, in one pass.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Markers_init,
    .tp_dealloc = (destructor)Markers_dealloc,
    .tp_methods = Markers_methods,
};

static struct PyModuleDef module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "wire_scan",
    .m_doc = "Declared attributes read from encoded OTLP trace requests.",
    .m_size = -1,
};

static int add_type(PyObject *m, const char *name, PyTypeObject *type) {
    if (PyType_Ready(type) < 0) return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit_wire_scan(void) {
    empty_bytes = PyBytes_FromStringAndSize("", 0);
    if (empty_bytes == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (add_type(m, "Scanner", &ScannerType) < 0 || add_type(m, "Markers", &MarkersType) < 0 ||
        PyModule_AddIntConstant(m, "PREFIXED", PREFIXED) < 0 ||
        PyModule_AddIntConstant(m, "UNDECODED", UNDECODED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

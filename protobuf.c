/* protobuf.c - the protocol buffers wire format, read with bounds checks (see protobuf.h). */
#include "protobuf.h"

#include "gemma3.h"
#include "util.h"

int g3_pb_varint(g3_pb_reader *r, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: truncated varint", r->label, r->what);
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return GEMMA3_OK;
        }
    }
    return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: varint longer than 10 bytes", r->label, r->what);
}

int g3_pb_key(g3_pb_reader *r, uint32_t *field, int *wire) {
    *field = 0;
    if (r->p == r->end) return GEMMA3_OK;
    uint64_t key;
    int rc = g3_pb_varint(r, &key);
    if (rc) return rc;
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: invalid field number %llu", r->label, r->what,
                        (unsigned long long)(key >> 3));
    *field = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    return GEMMA3_OK;
}

int g3_pb_bytes(g3_pb_reader *r, const uint8_t **data, size_t *n) {
    uint64_t len;
    int rc = g3_pb_varint(r, &len);
    if (rc) return rc;
    if (len > (uint64_t)(r->end - r->p))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: length %llu runs past the end (%zu bytes left)",
                        r->label, r->what, (unsigned long long)len, (size_t)(r->end - r->p));
    *data = r->p;
    *n = (size_t)len;
    r->p += len;
    return GEMMA3_OK;
}

/* Little-endian, whatever the host. */
int g3_pb_fixed32(g3_pb_reader *r, uint32_t *v) {
    if (r->end - r->p < 4)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: truncated fixed32", r->label, r->what);
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
         (uint32_t)r->p[3] << 24;
    r->p += 4;
    return GEMMA3_OK;
}

int g3_pb_skip(g3_pb_reader *r, uint32_t field, int wire) {
    uint64_t v;
    const uint8_t *d;
    size_t n;
    switch (wire) {
    case G3_PB_VARINT: return g3_pb_varint(r, &v);
    case G3_PB_LEN: return g3_pb_bytes(r, &d, &n);
    case G3_PB_I32:
        if (r->end - r->p < 4) break;
        r->p += 4;
        return GEMMA3_OK;
    case G3_PB_I64:
        if (r->end - r->p < 8) break;
        r->p += 8;
        return GEMMA3_OK;
    default:
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: field %u has unsupported wire type %d",
                        r->label, r->what, field, wire);
    }
    return g3_error(GEMMA3_ERR_FORMAT, "%s: %s: field %u truncated", r->label, r->what, field);
}

int g3_pb_expect(g3_pb_reader *r, uint32_t field, int wire, int want, const char *name) {
    if (wire == want) return GEMMA3_OK;
    return g3_error(GEMMA3_ERR_FORMAT, "%s: %s.%s (field %u): wire type %d, expected %d",
                    r->label, r->what, name, field, wire, want);
}

int g3_pb_int_field(g3_pb_reader *r, uint32_t field, int wire, const char *name, int64_t *out) {
    int rc = g3_pb_expect(r, field, wire, G3_PB_VARINT, name);
    uint64_t v;
    if (!rc) rc = g3_pb_varint(r, &v);
    if (!rc) *out = (int64_t)v;
    return rc;
}

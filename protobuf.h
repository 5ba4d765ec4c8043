/* protobuf.h - a bounds-checked reader for the protocol buffers wire format: varints, fixed32 and
 * length-delimited fields, one message at a time. It knows no schema: the caller loops over
 * g3_pb_key, switches on the field numbers of its own message and reads or skips each value.
 * Every read is checked against the end of the message being read, and every failure records a
 * message naming the source (`label`) and the message (`what`). */
#ifndef G3_PROTOBUF_H
#define G3_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

/* The wire types this reader understands (groups, 3 and 4, are refused). */
enum g3_pb_wire { G3_PB_VARINT = 0, G3_PB_I64 = 1, G3_PB_LEN = 2, G3_PB_I32 = 5 };

/* A cursor over one message, [p, end). */
typedef struct g3_pb_reader {
    const uint8_t *p, *end;
    const char *label; /* the source, for messages: a file name */
    const char *what;  /* the message being read ("ModelProto", "pieces"...) */
} g3_pb_reader;

/* A reader over the n bytes at data: a whole buffer or the payload of a length-delimited field. */
static inline g3_pb_reader g3_pb_message(const uint8_t *data, size_t n, const char *label,
                                         const char *what) {
    return (g3_pb_reader){data, data + n, label, what};
}

/* Reads the next field's key: its number into *field and wire type into *wire. *field = 0 at the
 * end of the message (0 is not a valid field number). */
int g3_pb_key(g3_pb_reader *r, uint32_t *field, int *wire);

/* Values. Each returns GEMMA3_OK or GEMMA3_ERR_FORMAT (truncated, overlong, or past the end). */
int g3_pb_varint(g3_pb_reader *r, uint64_t *v);
int g3_pb_fixed32(g3_pb_reader *r, uint32_t *v);
/* The payload of a length-delimited field: *data points into the buffer, *n bytes long. */
int g3_pb_bytes(g3_pb_reader *r, const uint8_t **data, size_t *n);

/* Steps over the value of a field this caller does not use. */
int g3_pb_skip(g3_pb_reader *r, uint32_t field, int wire);

/* Refuses a field whose wire type is not `want`; `name` is the field's name for the message. */
int g3_pb_expect(g3_pb_reader *r, uint32_t field, int wire, int want, const char *name);

/* A varint field (checked to be one) into an int64: negative int32 values arrive as 10-byte
 * varints and come out negative. */
int g3_pb_int_field(g3_pb_reader *r, uint32_t field, int wire, const char *name, int64_t *out);

#endif

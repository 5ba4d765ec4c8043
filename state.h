/* state.h - saved session state (gemma3_session_save / _load in gemma3.h): the file format's
 * constants and the 64-bit hash its fingerprint and checksums use. The format itself is
 * described at the top of state.c. */
#ifndef G3_STATE_H
#define G3_STATE_H

#include <stddef.h>
#include <stdint.h>

#define G3_STATE_MAGIC "G3STATE\n" /* 8 bytes */
#define G3_STATE_VERSION 1u
#define G3_STATE_N_FIELDS 17       /* u64 fingerprint and contents fields in the header */
/* magic, u32 version, u32 field count, the fields, u64 hash of the header before it */
#define G3_STATE_HEADER_BYTES (8 + 4 + 4 + 8 * G3_STATE_N_FIELDS + 8)

/* XXH64 (Yann Collet's xxHash, 64-bit), fed in pieces of any size. */
typedef struct g3_hasher {
    uint64_t acc[4];
    uint64_t total;      /* bytes fed */
    unsigned char buf[32];
    size_t n_buf;        /* bytes in buf, < 32 */
    uint64_t seed;
} g3_hasher;

void g3_hash64_init(g3_hasher *h, uint64_t seed);
void g3_hash64_update(g3_hasher *h, const void *data, size_t len);
uint64_t g3_hash64_digest(const g3_hasher *h);
uint64_t g3_hash64(const void *data, size_t len, uint64_t seed);

#endif

/* Attention of new tokens over a paged KV cache, read in place (one CPU thread).

   The torch path of a decode step gathers every sequence's blocks into one contiguous tensor
   and then runs scaled-dot-product attention over it: the cache is read, written again and
   read once more, every step, for every layer. This kernel reads each key and value once,
   straight from its block, and uses it for every query head while it is in cache (a key slot
   holds all key heads side by side; query heads map to key heads in groups, as in GQA).

   The cache holds float32 (`paged_attention_f32`) or bfloat16 (`paged_attention_bf16`: half the
   bytes to read, each widened to float32 as it is loaded); queries, scores, softmax and outputs
   are float32 either way.

   Layouts (row-major, contiguous):
     q, out     rows × q_heads × head_dim, rows = batch × tokens (the query tokens of sequence b
                are rows b·tokens … b·tokens + tokens - 1)
     keys,      num_blocks × block_size × kv_heads × head_dim
     values
     tables     batch × width block ids; key position p of sequence b is in block
                tables[b·width + p / block_size], slot p % block_size
     positions  rows; query row r attends key positions 0 … positions[r]

   Softmax is computed in two passes over a row's scores (maximum, then exponentials and sum),
   in float32. Every row is computed on its own, so a sequence's result does not depend on
   which other sequences share the batch.

   Returns 0, or -1 when a position lies beyond its table (width × block_size keys) and
   -2 when scratch memory cannot be allocated; `out` is then unspecified. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Element i of a cache tensor as float32; `bf16` is a constant at every call site, so each
   kernel compiles its own loads (a bfloat16 is the top half of a float32's bits). */
static inline __attribute__((always_inline)) float load(const void *restrict base, int64_t i, const int bf16) {
    if (!bf16) return ((const float *)base)[i];
    const uint32_t bits = (uint32_t)((const uint16_t *)base)[i] << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Blocks lie anywhere in the pool, so the hardware prefetcher, which follows one page, does not
   see the next block coming: ask for it, a cache line at a time, while this one is read. */
static inline void prefetch_block(const char *start, int64_t bytes) {
    for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(start + i, 0, 3);
}

/* All query heads of one row over its keys; `head_dim` is a constant where the caller passes one,
   so the loops over it compile to straight vector code. */
static inline __attribute__((always_inline)) void attend_row(
    const float *restrict query, const char *restrict keys, const char *restrict values,
    const int64_t *restrict table, float *restrict result, float *restrict scores, int64_t count,
    int64_t q_heads, int64_t kv_heads, const int64_t head_dim, int64_t block_size, int64_t max_keys,
    float scale, const int bf16) {
    const int64_t group = q_heads / kv_heads;
    const int64_t slot_stride = kv_heads * head_dim;
    const int64_t block_bytes = block_size * slot_stride * (bf16 ? 2 : 4);
    /* Scores, key by key: a key slot's heads are adjacent, so each is read once, in order. */
    for (int64_t first = 0, block = 0; first < count; first += block_size, block++) {
        const char *key_block = keys + table[block] * block_bytes;
        const int64_t last = first + block_size < count ? first + block_size : count;
        if (last < count) prefetch_block(keys + table[block + 1] * block_bytes, block_bytes);
        for (int64_t p = first; p < last; p++) {
            const int64_t slot = (p - first) * slot_stride;
            for (int64_t kv = 0, h = 0; kv < kv_heads; kv++) {
                for (int64_t g = 0; g < group; g++, h++) {
                    const float *a = query + h * head_dim;
                    float sum = 0.0f;
                    for (int64_t d = 0; d < head_dim; d++)
                        sum += a[d] * load(key_block, slot + kv * head_dim + d, bf16);
                    scores[h * max_keys + p] = sum * scale;
                }
            }
        }
    }
    /* Softmax weights in place, normalised. */
    for (int64_t h = 0; h < q_heads; h++) {
        float *row = scores + h * max_keys;
        float highest = row[0];
        for (int64_t p = 1; p < count; p++) highest = fmaxf(highest, row[p]);
        float total = 0.0f;
        for (int64_t p = 0; p < count; p++) {
            row[p] = expf(row[p] - highest);
            total += row[p];
        }
        const float inverse = 1.0f / total;
        for (int64_t p = 0; p < count; p++) row[p] *= inverse;
    }
    /* Weighted sum of the values, in the same order. */
    for (int64_t i = 0; i < q_heads * head_dim; i++) result[i] = 0.0f;
    for (int64_t first = 0, block = 0; first < count; first += block_size, block++) {
        const char *value_block = values + table[block] * block_bytes;
        const int64_t last = first + block_size < count ? first + block_size : count;
        if (last < count) prefetch_block(values + table[block + 1] * block_bytes, block_bytes);
        for (int64_t p = first; p < last; p++) {
            const int64_t slot = (p - first) * slot_stride;
            for (int64_t kv = 0, h = 0; kv < kv_heads; kv++) {
                for (int64_t g = 0; g < group; g++, h++) {
                    const float weight = scores[h * max_keys + p];
                    float *acc = result + h * head_dim;
                    for (int64_t d = 0; d < head_dim; d++)
                        acc[d] += weight * load(value_block, slot + kv * head_dim + d, bf16);
                }
            }
        }
    }
}

/* Every row of the batch, with the head sizes models use as compile-time constants. */
static inline __attribute__((always_inline)) int attend_all(
    const float *restrict q, const void *restrict keys, const void *restrict values,
    const int64_t *restrict tables, const int64_t *restrict positions, float *restrict out,
    int64_t batch, int64_t tokens, int64_t width, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
    int64_t block_size, float scale, const int bf16) {
    const int64_t max_keys = width * block_size;
    float *scores = malloc(sizeof(float) * (size_t)(q_heads * max_keys));
    if (scores == NULL) return -2;
    for (int64_t row = 0; row < batch * tokens; row++) {
        const int64_t count = positions[row] + 1;
        if (count < 1 || count > max_keys) {
            free(scores);
            return -1;
        }
        const float *query = q + row * q_heads * head_dim;
        const int64_t *table = tables + (row / tokens) * width;
        float *result = out + row * q_heads * head_dim;
#define ATTEND(dim)                                                                                    \
    attend_row(query, keys, values, table, result, scores, count, q_heads, kv_heads, dim, block_size, \
               max_keys, scale, bf16)
        if (head_dim == 32)
            ATTEND(32);
        else if (head_dim == 64)
            ATTEND(64);
        else if (head_dim == 128)
            ATTEND(128);
        else
            ATTEND(head_dim);
#undef ATTEND
    }
    free(scores);
    return 0;
}

int paged_attention_f32(const float *restrict q, const float *restrict keys, const float *restrict values,
                        const int64_t *restrict tables, const int64_t *restrict positions,
                        float *restrict out, int64_t batch, int64_t tokens, int64_t width,
                        int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t block_size,
                        float scale) {
    return attend_all(q, keys, values, tables, positions, out, batch, tokens, width, q_heads, kv_heads,
                      head_dim, block_size, scale, 0);
}

int paged_attention_bf16(const float *restrict q, const uint16_t *restrict keys,
                         const uint16_t *restrict values, const int64_t *restrict tables,
                         const int64_t *restrict positions, float *restrict out, int64_t batch,
                         int64_t tokens, int64_t width, int64_t q_heads, int64_t kv_heads,
                         int64_t head_dim, int64_t block_size, float scale) {
    return attend_all(q, keys, values, tables, positions, out, batch, tokens, width, q_heads, kv_heads,
                      head_dim, block_size, scale, 1);
}

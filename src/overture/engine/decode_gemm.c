/* The GEMMs of a decode step, for few rows (float32, one CPU thread): dense projections and the
   routed experts.

   A decode step multiplies one row per sequence by every weight matrix: tens of rows, and about
   eight per expert. Library GEMMs run such shapes well below the core's arithmetic rate
   (measured on a 32 × 256 by 256 × 4,096 LM head: 683 µs in torch, 409 µs here) and the routed
   experts add a dozen torch ops a layer (sort the rows by expert, gather them, two grouped
   GEMMs, SwiGLU, sum them back). Here:

   - `linear_f32`: out = x · w for a row-major x (count × depth) and a transposed weight w
     (depth × width).
   - `routed_experts_f32`: a MoE layer's experts in one call: rows grouped by expert with a
     counting sort, for each expert the gate/up GEMM, SwiGLU, the down GEMM, and the
     gate-weighted sum into each token's output row (a token's experts summed in expert order).

   Layouts of `routed_experts_f32` (row-major, contiguous):
     x          tokens × dim
     indices,   tokens × top_k: the chosen experts of each token and their gate weights
     weights
     gate_up_t  experts × dim × 2·hidden: each expert's gate rows then up rows, transposed
                (column j < hidden is the gate's output j, column hidden + j the up's)
     down_t     experts × hidden × dim: each expert's down projection, transposed
     out        tokens × dim, overwritten

   GEMMs are sums of rank-one updates: for each contraction index k in order, a broadcast input
   element times a row of the transposed weight, accumulated in registers over tiles of 4 rows ×
   64 (or 16) columns; columns past the last multiple of 16 one element at a time. An output
   element is computed by the same instructions in the same order whatever rows share its tile,
   expert or batch, so a row's result does not depend on the others.

   Both return 0; -1 when an expert index is outside 0 … experts - 1 (`out` is then
   unspecified); -2 when scratch memory cannot be allocated. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef float vec __attribute__((vector_size(64)));

static inline vec load(const float *p) {
    vec v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vec v) { memcpy(p, &v, sizeof v); }

/* out[r][n0 … n0 + 16·V) = Σ_k rows[r][k] · w[k][n0 …], for R rows; R and V constant at each use. */
#define TILE(R, V)                                                                                   \
    static inline __attribute__((always_inline)) void tile_##R##x##V(                               \
        const float *const *rows, const float *w, int64_t depth, int64_t width, int64_t n0,          \
        float *const *out) {                                                                         \
        vec acc[R][V];                                                                               \
        for (int r = 0; r < R; r++)                                                                  \
            for (int v = 0; v < V; v++) acc[r][v] = (vec){0};                                        \
        for (int64_t k = 0; k < depth; k++) {                                                        \
            vec b[V];                                                                                \
            for (int v = 0; v < V; v++) b[v] = load(w + k * width + n0 + 16 * v);                    \
            for (int r = 0; r < R; r++) {                                                            \
                const float a = rows[r][k];                                                          \
                for (int v = 0; v < V; v++) acc[r][v] += a * b[v];                                   \
            }                                                                                        \
        }                                                                                            \
        for (int r = 0; r < R; r++)                                                                  \
            for (int v = 0; v < V; v++) store(out[r] + n0 + 16 * v, acc[r][v]);                      \
    }

TILE(4, 4)
TILE(1, 4)
TILE(4, 1)
TILE(1, 1)

/* Columns n0 … width - 1 (fewer than 16), one element at a time. */
static void tail_columns(const float *const *rows, int64_t count, const float *w, int64_t depth,
                         int64_t width, int64_t n0, float *const *out) {
    for (int64_t r = 0; r < count; r++)
        for (int64_t n = n0; n < width; n++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < depth; k++) acc += rows[r][k] * w[k * width + n];
            out[r][n] = acc;
        }
}

/* out[r] = rows[r] · w for `count` rows; w is depth × width. Columns outside, rows inside: a
   tile's columns of w are read from memory once and stay in cache for every group of rows. */
static void gemm_rows(const float *const *rows, int64_t count, const float *w, int64_t depth,
                      int64_t width, float *const *out) {
    int64_t n = 0;
    for (; n + 64 <= width; n += 64) {
        int64_t r = 0;
        for (; r + 4 <= count; r += 4) tile_4x4(rows + r, w, depth, width, n, out + r);
        for (; r < count; r++) tile_1x4(rows + r, w, depth, width, n, out + r);
    }
    for (; n + 16 <= width; n += 16) {
        int64_t r = 0;
        for (; r + 4 <= count; r += 4) tile_4x1(rows + r, w, depth, width, n, out + r);
        for (; r < count; r++) tile_1x1(rows + r, w, depth, width, n, out + r);
    }
    if (n < width) tail_columns(rows, count, w, depth, width, n, out);
}

/* out = x · w for `count` contiguous rows of x (count × depth); w is depth × width. */
int linear_f32(const float *restrict x, const float *restrict w, float *restrict out, int64_t count,
               int64_t depth, int64_t width) {
    const float **rows = malloc(sizeof *rows * (size_t)(count ? count : 1));
    float **targets = malloc(sizeof *targets * (size_t)(count ? count : 1));
    if (!rows || !targets) {
        free(rows);
        free(targets);
        return -2;
    }
    for (int64_t r = 0; r < count; r++) {
        rows[r] = x + r * depth;
        targets[r] = out + r * width;
    }
    gemm_rows(rows, count, w, depth, width, targets);
    free(rows);
    free(targets);
    return 0;
}

int routed_experts_f32(const float *restrict x, const int64_t *restrict indices,
                       const float *restrict weights, const float *restrict gate_up_t,
                       const float *restrict down_t, float *restrict out, int64_t tokens,
                       int64_t top_k, int64_t dim, int64_t hidden, int64_t experts) {
    const int64_t pairs = tokens * top_k;
    for (int64_t p = 0; p < pairs; p++)
        if (indices[p] < 0 || indices[p] >= experts) return -1;
    memset(out, 0, sizeof(float) * (size_t)(tokens * dim));
    if (pairs == 0) return 0;
    /* Pairs grouped by expert: expert e's are sorted[start[e] … start[e + 1]), in token order
       (a counting sort); then per pair its input row, its SwiGLU hidden row, its output row. */
    int64_t *start = calloc(2 * (size_t)experts + 1, sizeof *start);
    int64_t *sorted = malloc(sizeof *sorted * (size_t)pairs);
    const float **inputs = malloc(sizeof *inputs * (size_t)pairs);
    float **hidden_rows = malloc(sizeof *hidden_rows * (size_t)pairs);
    float **output_rows = malloc(sizeof *output_rows * (size_t)pairs);
    float *hidden_buffer = malloc(sizeof(float) * (size_t)(pairs * 2 * hidden));
    float *output_buffer = malloc(sizeof(float) * (size_t)(pairs * dim));
    int status = 0;
    if (!start || !sorted || !inputs || !hidden_rows || !output_rows || !hidden_buffer || !output_buffer) {
        status = -2;
        goto done;
    }
    int64_t *fill = start + experts + 1;
    for (int64_t p = 0; p < pairs; p++) start[indices[p] + 1]++;
    for (int64_t e = 0; e < experts; e++) start[e + 1] += start[e];
    for (int64_t e = 0; e < experts; e++) fill[e] = start[e];
    for (int64_t p = 0; p < pairs; p++) sorted[fill[indices[p]]++] = p;
    for (int64_t i = 0; i < pairs; i++) {
        inputs[i] = x + (sorted[i] / top_k) * dim;
        hidden_rows[i] = hidden_buffer + i * 2 * hidden;
        output_rows[i] = output_buffer + i * dim;
    }
    for (int64_t e = 0; e < experts; e++) {
        const int64_t first = start[e], count = start[e + 1] - start[e];
        if (count == 0) continue;
        gemm_rows(inputs + first, count, gate_up_t + e * dim * 2 * hidden, dim, 2 * hidden,
                  hidden_rows + first);
        for (int64_t i = first; i < first + count; i++) {
            float *h = hidden_rows[i];
            for (int64_t j = 0; j < hidden; j++) h[j] = h[j] / (1.0f + expf(-h[j])) * h[hidden + j];
        }
        gemm_rows((const float *const *)(hidden_rows + first), count, down_t + e * hidden * dim, hidden,
                  dim, output_rows + first);
        for (int64_t i = first; i < first + count; i++) {
            const int64_t p = sorted[i];
            const float gate = weights[p];
            float *restrict target = out + (p / top_k) * dim;
            const float *restrict y = output_rows[i];
            for (int64_t d = 0; d < dim; d++) target[d] += gate * y[d];
        }
    }
done:
    free(start);
    free(sorted);
    free(inputs);
    free(hidden_rows);
    free(output_rows);
    free(hidden_buffer);
    free(output_buffer);
    return status;
}

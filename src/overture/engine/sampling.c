/* A batch's next tokens sampled from float32 logits, with their logprobs (one CPU thread).

   The same rule as `overture.engine.sampling` without top-k or top-p: row r's logits are divided
   by its temperature (1 for a greedy row, temperature 0); its logprobs are the log-softmax of
   those; a greedy row takes the first largest logit; any other row takes the token whose interval
   of the cumulative distribution holds its uniform number u (u clamped below 1 - 2^-23, scaled by
   the distribution's total, the first token whose cumulative mass exceeds it), so a token of
   probability zero is never drawn. torch spends most of a batch-32 step's sampling on a cumulative
   sum over the whole vocabulary and on separate passes for each op; this is three passes a row
   (scale and maximum, exponentials and their sum, the walk to u's token by blocks of 16).

   Every row is computed on its own, so a row's token does not depend on the rest of the batch.
   `scratch` holds `vocab` floats. Returns 0. */

#include <math.h>
#include <stdint.h>

#define WALK_BLOCK 16

static int64_t inverse_cdf(const float *restrict weights, int64_t vocab, float target) {
    float mass = 0.0f;
    for (int64_t first = 0; first < vocab; first += WALK_BLOCK) {
        const int64_t last = first + WALK_BLOCK < vocab ? first + WALK_BLOCK : vocab;
        float block = 0.0f;
        for (int64_t i = first; i < last; i++) block += weights[i];
        if (mass + block <= target) {
            mass += block;
            continue;
        }
        for (int64_t i = first; i < last; i++) {
            mass += weights[i];
            if (mass > target && weights[i] > 0.0f) return i;
        }
    }
    /* Rounding left u's mass past the end: the last token that has any. */
    for (int64_t i = vocab - 1; i > 0; i--)
        if (weights[i] > 0.0f) return i;
    return 0;
}

int sample_rows_f32(const float *restrict logits, const float *restrict temperatures,
                    const float *restrict uniforms, int64_t rows, int64_t vocab,
                    int64_t *restrict tokens, float *restrict logprobs, float *restrict scratch) {
    for (int64_t r = 0; r < rows; r++) {
        const float *row = logits + r * vocab;
        const int greedy = temperatures[r] == 0.0f;
        const float divisor = greedy ? 1.0f : temperatures[r];
        float highest = row[0] / divisor;
        for (int64_t i = 0; i < vocab; i++) {
            scratch[i] = row[i] / divisor;
            highest = fmaxf(highest, scratch[i]);
        }
        int64_t token = 0;
        if (greedy)
            while (scratch[token] != highest) token++;
        float total = 0.0f;
        for (int64_t i = 0; i < vocab; i++) {
            scratch[i] = expf(scratch[i] - highest);
            total += scratch[i];
        }
        if (!greedy) {
            float u = uniforms[r] < 0.0f ? 0.0f : uniforms[r];
            const float below_one = 1.0f - 0x1p-23f;
            if (u > below_one) u = below_one;
            token = inverse_cdf(scratch, vocab, u * total);
        }
        tokens[r] = token;
        logprobs[r] = row[token] / divisor - highest - logf(total);
    }
    return 0;
}

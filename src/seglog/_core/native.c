/* madvise and MADV_* are not in strict C11 headers */
#define _DEFAULT_SOURCE 1

#include "native.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#include <immintrin.h>
#define SEGLOG_X86 1
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define SEGLOG_ARM_CRC 1
#endif

/* CRC32C comes in tiers, the fastest one the CPU has chosen once at run time (crc_init, at the end).
 * GB/s on Zen 4 (EPYC) for 64 KiB in cache and 1 GiB from memory, which order them:
 *   software   2   2  slice-by-8 tables, any CPU
 *   sse42     26  15  the SSE4.2 crc32 instruction over three interleaved streams (armv8: the ARMv8
 *                     CRC32C instructions, same code)
 *   pclmul    31  30  carry-less multiplication (PCLMULQDQ) folding 8 x 128-bit lanes, beside three
 *                     crc32 streams (15 and 15 alone)
 *   avx512    58  28  the folding over 4 x 512-bit registers (VPCLMULQDQ on AVX-512)
 * Every tier computes the same function: `crc` is a previous result (0 to start), and the pre- and
 * post-inversion of CRC32C happen inside. The vector tiers hand inputs too short to amortise their set-up
 * to the sse42 path. */

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static void crc_init_once(void);

/* Slice-by-8 tables for the software path, built by crc_init. */
static uint32_t crc_table[8][256];

static void build_crc_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xff] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
}

uint32_t seglog_crc32c_software(uint32_t crc, const void *data, size_t length) {
    crc_init_once();
    const uint8_t *p = (const uint8_t *)data;
    crc = ~crc;
    while (length && ((uintptr_t)p & 7)) {
        crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;
        crc = crc_table[7][word & 0xff] ^ crc_table[6][(word >> 8) & 0xff] ^
              crc_table[5][(word >> 16) & 0xff] ^ crc_table[4][(word >> 24) & 0xff] ^
              crc_table[3][(word >> 32) & 0xff] ^ crc_table[2][(word >> 40) & 0xff] ^
              crc_table[1][(word >> 48) & 0xff] ^ crc_table[0][word >> 56];
        p += 8;
        length -= 8;
    }
    while (length--) crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* Combining CRCs of adjacent blocks: the CRC instruction has a latency of ~3 cycles but a throughput of
 * one per cycle, so three independent streams over three blocks run ~3x faster than one. The CRC of the
 * concatenation is crc(A) shifted past len(B) zero bytes, xor crc(B); the shift is a linear operator over
 * GF(2), tabulated once for each block length (Mark Adler's construction). */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc_shift_long[4][256];
static uint32_t crc_shift_short[4][256];

static uint32_t gf2_matrix_times(const uint32_t *matrix, uint32_t vector) {
    uint32_t sum = 0;
    while (vector) {
        if (vector & 1) sum ^= *matrix;
        vector >>= 1;
        matrix++;
    }
    return sum;
}

static void gf2_matrix_square(uint32_t *square, const uint32_t *matrix) {
    for (int n = 0; n < 32; n++) square[n] = gf2_matrix_times(matrix, matrix[n]);
}

/* The operator that appends `length` zero bytes (a power of two) to a CRC. */
static void crc_zeros_operator(uint32_t *even, size_t length) {
    uint32_t odd[32], row = 1;
    odd[0] = CRC32C_POLY_REFLECTED;
    for (int n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_matrix_square(even, odd); /* two zero bits */
    gf2_matrix_square(odd, even); /* four zero bits */
    do {
        gf2_matrix_square(even, odd);
        length >>= 1;
        if (length == 0) return;
        gf2_matrix_square(odd, even);
        length >>= 1;
    } while (length);
    memcpy(even, odd, sizeof(odd));
}

static void crc_zeros_table(uint32_t table[4][256], size_t length) {
    uint32_t op[32];
    crc_zeros_operator(op, length);
    for (uint32_t n = 0; n < 256; n++) {
        table[0][n] = gf2_matrix_times(op, n);
        table[1][n] = gf2_matrix_times(op, n << 8);
        table[2][n] = gf2_matrix_times(op, n << 16);
        table[3][n] = gf2_matrix_times(op, n << 24);
    }
}

static void build_crc_shift_tables(void) {
    crc_zeros_table(crc_shift_long, CRC_LONG);
    crc_zeros_table(crc_shift_short, CRC_SHORT);
}

static inline uint32_t crc_shift(uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^
           table[3][crc >> 24];
}

#if defined(SEGLOG_X86)
#define CRC_U8(c, b) _mm_crc32_u8((uint32_t)(c), (b))
#define CRC_U64(c, w) _mm_crc32_u64((c), (w))
/* clang 18 and later want the crc32 feature named beside sse4.2 in a target attribute; GCC and clang 14
 * to 17 accept the name, older clang does not know it. */
#if defined(__clang__) && __clang_major__ < 14
#define CRC_FEATURES "sse4.2"
#else
#define CRC_FEATURES "sse4.2,crc32"
#endif
#define CRC_TARGET __attribute__((target(CRC_FEATURES)))
#elif defined(SEGLOG_ARM_CRC)
#define CRC_U8(c, b) __crc32cb((uint32_t)(c), (b))
#define CRC_U64(c, w) __crc32cd((uint32_t)(c), (w))
#define CRC_TARGET
#endif

#if defined(SEGLOG_X86) || defined(SEGLOG_ARM_CRC)
static inline uint64_t load64(const uint8_t *p) {
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

/* The CRC register (not inverted) carried over `length` bytes, one stream. */
CRC_TARGET static inline uint64_t crc_one_stream(uint64_t c, const uint8_t *p, size_t length) {
    for (; length >= 8; p += 8, length -= 8) c = CRC_U64(c, load64(p));
    while (length--) c = CRC_U8(c, *p++);
    return c;
}

/* Three streams over the next 3 * `block` bytes, folded into c0. Inlined per block size, so the loop
 * bound is a constant. */
CRC_TARGET static inline uint64_t crc_three_streams(uint64_t c0, const uint8_t *p, size_t block,
                                                    uint32_t shift[4][256]) {
    uint64_t c1 = 0, c2 = 0;
    for (const uint8_t *end = p + block; p < end; p += 8) {
        c0 = CRC_U64(c0, load64(p));
        c1 = CRC_U64(c1, load64(p + block));
        c2 = CRC_U64(c2, load64(p + 2 * block));
    }
    c0 = crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c1;
    return crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c2;
}

/* The sse42 (x86) or armv8 tier. Needs crc_init's shift tables. */
CRC_TARGET static uint32_t crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t c0 = ~crc;
    while (length && ((uintptr_t)p & 7)) {
        c0 = CRC_U8(c0, *p++);
        length--;
    }
    for (; length >= 3 * CRC_LONG; p += 3 * CRC_LONG, length -= 3 * CRC_LONG)
        c0 = crc_three_streams(c0, p, CRC_LONG, crc_shift_long);
    for (; length >= 3 * CRC_SHORT; p += 3 * CRC_SHORT, length -= 3 * CRC_SHORT)
        c0 = crc_three_streams(c0, p, CRC_SHORT, crc_shift_short);
    return ~(uint32_t)crc_one_stream(c0, p, length);
}
#endif

#if defined(SEGLOG_X86)
/* Polynomials mod P in CRC32C's reflected bit order: bit 31 of a uint32_t is the coefficient of x^0 and
 * bit 0 that of x^31, which is how message bits arrive (the low bit of the first byte is the top
 * coefficient). */

/* a * b mod P. */
static uint32_t crc_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (int degree = 0; degree < 32; degree++) {
        if (a & (0x80000000u >> degree)) product ^= b;
        b = (b >> 1) ^ ((b & 1) ? CRC32C_POLY_REFLECTED : 0); /* b *= x (x^32 = P's other terms) */
    }
    return product;
}

/* x^n mod P, by square and multiply. */
static uint32_t crc_x_power(unsigned n) {
    uint32_t result = 0x80000000u, square = 0x40000000u; /* x^0, x^1 */
    for (; n; n >>= 1) {
        if (n & 1) result = crc_multiply(result, square);
        square = crc_multiply(square, square);
    }
    return result;
}

/* Folding (Gopal et al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction",
 * Intel, 2009). A 128-bit lane holds 16 message bytes; in the reflected order its bit m is the coefficient
 * of x^(127-m), so with L the low qword (first 8 bytes) and H the high one the lane is L x^64 + H. Carrying
 * the lane d bits further along the message multiplies it by x^d:
 *     (L x^64 + H) x^d  =  L (x^(d+64) mod P) + H (x^d mod P)   (mod P),
 * a sum of two 64 x 32-bit carry-less products of at most 95 bits, which fits a lane and is xored into the
 * lane d bits further on. PCLMULQDQ multiplies bit i by bit j into bit i+j; with a qword's bit i standing
 * for x^(63-i) and a constant stored as (x^e mod P in reflected order) << 1, whose bit j then stands for
 * x^(32-j), bit m of the product stands for x^(95-m) = x^(127-m) / x^32. Read as a lane, the product is
 * Q x^e x^32, so the multipliers are x^(d+32) for L and x^(d-32) for H. */
typedef struct {
    uint64_t low, high; /* (x^(d+32) mod P) << 1 and (x^(d-32) mod P) << 1, reflected */
} crc_fold_pair;

/* Shifting a 32-bit CRC register r past n more bytes is r x^(8n) mod P. The carry-less product of r and
 * k = x^(8n-33) mod P (both reflected, in the low 32 bits) is a qword Q = r k x in the reflected order (the
 * product lands one bit low, as above), and crc32 of Q from a zero register gives Q x^32 = r x^(8n). */
typedef struct {
    uint64_t piece, stream0, stream1, stream2; /* x^(8n-33) mod P for n = 3S+V, 2S+V, S+V and V bytes */
} crc_piece_shifts;

/* The pclmul tier runs three crc32 streams beside the carry-less multiplier, a separate unit (the idea of
 * Corsix's "fast-crc32"): a piece of the input is three streams of S bytes, then V bytes folded by the
 * vector unit, all in step, one round at a time. The piece's CRC is each stream's register shifted past
 * what follows it, xored with the vector part's. S : V follows the measured speeds of the two units on Zen 4
 * (crc32 ~26 GB/s, 128-bit folding ~15); 16 rounds make 5 KiB pieces, long enough that combining costs a
 * few percent (32 measured the same, 8 ~15% slower).
 * The avx512 tier does not do this: beside 512-bit folding the streams took 58 GB/s to 70 in cache, but from
 * memory 28 down to 13 (20 with prefetching), and reads of a log mostly come from memory. */
#define PCLMUL_ROUNDS 16
#define PCLMUL_STREAM_QWORDS 8 /* per stream and round, beside 128 vector bytes: one per lane */
#define PCLMUL_STREAM (PCLMUL_ROUNDS * 8 * PCLMUL_STREAM_QWORDS)
#define PCLMUL_VECTOR (PCLMUL_ROUNDS * 128)
#define PCLMUL_PIECE (3 * PCLMUL_STREAM + PCLMUL_VECTOR)

/* Computed by crc_init with crc_x_power, for each distance the kernels use. */
static struct {
    crc_fold_pair d128, d256, d512, d1024, d2048;
    /* One pair per 128-bit lane of a 512-bit register, folding lanes 0, 1 and 2 onto lane 3 (d = 384, 256,
     * 128); lane 3 is kept as it is, so its pair is zero. Laid out as the register is. */
    crc_fold_pair lanes[4];
    crc_piece_shifts pclmul_piece;
} crc_fold;

static crc_fold_pair fold_pair(unsigned d) {
    crc_fold_pair pair = {(uint64_t)crc_x_power(d + 32) << 1, (uint64_t)crc_x_power(d - 32) << 1};
    return pair;
}

static crc_piece_shifts piece_shifts(unsigned stream, unsigned vector) {
    crc_piece_shifts shifts = {crc_x_power(8 * (3 * stream + vector) - 33),
                               crc_x_power(8 * (2 * stream + vector) - 33),
                               crc_x_power(8 * (stream + vector) - 33), crc_x_power(8 * vector - 33)};
    return shifts;
}

static void build_crc_fold_constants(void) {
    crc_fold.d128 = fold_pair(128);
    crc_fold.d256 = fold_pair(256);
    crc_fold.d512 = fold_pair(512);
    crc_fold.d1024 = fold_pair(1024);
    crc_fold.d2048 = fold_pair(2048);
    crc_fold.lanes[0] = fold_pair(384);
    crc_fold.lanes[1] = fold_pair(256);
    crc_fold.lanes[2] = fold_pair(128);
    crc_fold.lanes[3].low = crc_fold.lanes[3].high = 0;
    crc_fold.pclmul_piece = piece_shifts(PCLMUL_STREAM, PCLMUL_VECTOR);
}

/* A lane reduced to the CRC register: its CRC from a zero register is L x^64 + H times x^32 mod P, which
 * is what two crc32 instructions compute. */
CRC_TARGET static inline uint64_t crc_of_lane(uint64_t low, uint64_t high) {
    return CRC_U64(CRC_U64(0, low), high);
}

#define PCLMUL_TARGET __attribute__((target(CRC_FEATURES ",pclmul")))

/* Below these many bytes the vector tiers call the sse42 path: set-up and final reduction cost more than
 * they save. The loads are unaligned: on Zen 4 that measured as fast as aligning the start with crc32 on
 * large inputs, and faster below a few KiB, where the prefix costs up to ~30 cycles. */
#define AVX512_MIN 64

PCLMUL_TARGET static inline __m128i fold_pair_128(crc_fold_pair pair) {
    return _mm_set_epi64x((long long)pair.high, (long long)pair.low);
}

PCLMUL_TARGET static inline __m128i fold_128(__m128i x, __m128i pair, __m128i data) {
    __m128i low = _mm_clmulepi64_si128(x, pair, 0x00), high = _mm_clmulepi64_si128(x, pair, 0x11);
    return _mm_xor_si128(_mm_xor_si128(low, high), data);
}

PCLMUL_TARGET static inline __m128i load128(const uint8_t *p) {
    return _mm_loadu_si128((const __m128i *)p);
}

PCLMUL_TARGET static inline uint64_t crc_shift_clmul(uint64_t r, uint64_t k) {
    __m128i product = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)r), _mm_cvtsi64_si128((long long)k), 0);
    return CRC_U64(0, (uint64_t)_mm_cvtsi128_si64(product));
}

/* One round of the three crc32 streams, `qwords` from each; s points into the first. */
#define CRC_STREAMS_ROUND(c0, c1, c2, s, stride, qwords)                \
    for (int q = 0; q < (qwords); q++, (s) += 8) {                    \
        c0 = CRC_U64(c0, load64(s));                                  \
        c1 = CRC_U64(c1, load64((s) + (stride)));                     \
        c2 = CRC_U64(c2, load64((s) + 2 * (stride)));                 \
    }

/* The CRC register (from zero) of the three streams and the vector part, each shifted past what follows. */
PCLMUL_TARGET static inline uint64_t crc_combine_piece(const crc_piece_shifts *shifts, uint64_t c0, uint64_t c1,
                                                      uint64_t c2, uint64_t vector) {
    return crc_shift_clmul(c0, shifts->stream0) ^ crc_shift_clmul(c1, shifts->stream1) ^
           crc_shift_clmul(c2, shifts->stream2) ^ vector;
}

/* A piece of the pclmul tier: eight 128-bit lanes, 128 bytes a round. Each fold waits on the previous one
 * of its lane (latency ~4-7 cycles) while the eight lanes are independent, which keeps the multiplier busy.
 * Four short streams per piece defeat the hardware prefetcher (10 GB/s from memory, against 30 with this),
 * so each round prefetches its share of the next piece. Prefetching past the end of the input is harmless. */
#define PCLMUL_PREFETCH_LINES ((PCLMUL_PIECE / PCLMUL_ROUNDS + 63) / 64)

PCLMUL_TARGET static inline uint64_t crc_piece_pclmul(const uint8_t *p) {
    const uint8_t *s = p, *v = p + 3 * PCLMUL_STREAM, *ahead = p + PCLMUL_PIECE;
    uint64_t c0 = 0, c1 = 0, c2 = 0;
    __m128i x[8];
    for (int i = 0; i < 8; i++) x[i] = load128(v + 16 * i);
    const __m128i d1024 = fold_pair_128(crc_fold.d1024);
    for (int round = 1; round < PCLMUL_ROUNDS; round++) {
        for (int line = 0; line < PCLMUL_PREFETCH_LINES; line++)
            _mm_prefetch((const char *)ahead + 64 * line, _MM_HINT_T0);
        ahead += PCLMUL_PIECE / PCLMUL_ROUNDS;
        v += 128;
        /* One qword of each stream beside each lane's fold: interleaved in the source, clang schedules
         * the loop 7% faster (GCC the same). */
        for (int i = 0; i < 8; i++, s += 8) {
            x[i] = fold_128(x[i], d1024, load128(v + 16 * i));
            c0 = CRC_U64(c0, load64(s));
            c1 = CRC_U64(c1, load64(s + PCLMUL_STREAM));
            c2 = CRC_U64(c2, load64(s + 2 * PCLMUL_STREAM));
        }
    }
    CRC_STREAMS_ROUND(c0, c1, c2, s, PCLMUL_STREAM, PCLMUL_STREAM_QWORDS)

    /* Eight lanes onto the last, as a tree: three folds deep rather than seven. */
    const __m128i d512 = fold_pair_128(crc_fold.d512), d256 = fold_pair_128(crc_fold.d256);
    for (int i = 0; i < 4; i++) x[i + 4] = fold_128(x[i], d512, x[i + 4]);
    x[6] = fold_128(x[4], d256, x[6]);
    x[7] = fold_128(x[5], d256, x[7]);
    x[7] = fold_128(x[6], fold_pair_128(crc_fold.d128), x[7]);
    uint64_t vector = crc_of_lane((uint64_t)_mm_cvtsi128_si64(x[7]), (uint64_t)_mm_extract_epi64(x[7], 1));
    return crc_combine_piece(&crc_fold.pclmul_piece, c0, c1, c2, vector);
}

/* The pclmul tier: whole pieces, then the sse42 path for the rest. 128-bit folding alone is slower than the
 * crc32 streams on Zen 4 (15 against 23 GB/s) and no faster on Intel cores before Ice Lake; beside them it
 * adds its speed to theirs. Pieces are independent: each starts from a zero register, and the running CRC
 * is shifted past the piece and xored in. */
PCLMUL_TARGET static uint32_t crc32c_pclmul(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t c = (uint32_t)~crc;
    for (; length >= PCLMUL_PIECE; p += PCLMUL_PIECE, length -= PCLMUL_PIECE)
        c = crc_shift_clmul(c, crc_fold.pclmul_piece.piece) ^ crc_piece_pclmul(p);
    return crc32c_hardware(~(uint32_t)c, p, length);
}

/* 512-bit vectors need the "evex512" feature named in clang 18 to 21 (setup.py finds out whether the
 * compiler wants it); the AVX-512 tier is left out when the compiler cannot build it. */
#if defined(SEGLOG_TARGET_EVEX512)
#define AVX512_TARGET __attribute__((target(CRC_FEATURES ",pclmul,avx2,avx512f,avx512vl,vpclmulqdq,evex512")))
#else
#define AVX512_TARGET __attribute__((target(CRC_FEATURES ",pclmul,avx2,avx512f,avx512vl,vpclmulqdq")))
#endif

#if !defined(SEGLOG_NO_AVX512)
#define SEGLOG_AVX512 1

AVX512_TARGET static inline __m512i fold_pair_512(crc_fold_pair pair) {
    return _mm512_broadcast_i32x4(fold_pair_128(pair));
}

/* Four lanes at once; 0x96 is the truth table of a ^ b ^ c. */
AVX512_TARGET static inline __m512i fold_512(__m512i x, __m512i pair, __m512i data) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, pair, 0x00),
                                     _mm512_clmulepi64_epi128(x, pair, 0x11), data, 0x96);
}

AVX512_TARGET static inline __m512i load512(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }

/* 16 bytes at a time onto lane r, then the rest with crc32; returns the finished (inverted) CRC. */
PCLMUL_TARGET static inline uint32_t crc_finish_128(__m128i r, const uint8_t *p, size_t length) {
    const __m128i d128 = fold_pair_128(crc_fold.d128);
    for (; length >= 16; p += 16, length -= 16) r = fold_128(r, d128, load128(p));
    uint64_t c = crc_of_lane((uint64_t)_mm_cvtsi128_si64(r), (uint64_t)_mm_extract_epi64(r, 1));
    return ~(uint32_t)crc_one_stream(c, p, length);
}

/* Four lanes to one: lanes 0-2 folded onto lane 3 with one multiplication pair each (the register of pairs
 * is laid out like x), lane 3 taken as it is (mask 0xC0: qwords 6 and 7), then the four lanes xored. */
AVX512_TARGET static inline __m128i reduce_512(__m512i x) {
    const __m512i lanes = _mm512_loadu_si512((const void *)crc_fold.lanes);
    __m512i y = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, lanes, 0x00),
                                          _mm512_clmulepi64_epi128(x, lanes, 0x11),
                                          _mm512_maskz_mov_epi64(0xC0, x), 0x96);
    __m256i half = _mm256_xor_si256(_mm512_castsi512_si256(y), _mm512_extracti64x4_epi64(y, 1));
    return _mm_xor_si128(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
}

/* Four consecutive registers onto the last. */
AVX512_TARGET static inline __m512i reduce_4x512(__m512i x0, __m512i x1, __m512i x2, __m512i x3) {
    const __m512i d1024 = fold_pair_512(crc_fold.d1024);
    x2 = fold_512(x0, d1024, x2);
    x3 = fold_512(x1, d1024, x3);
    return fold_512(x2, fold_pair_512(crc_fold.d512), x3);
}

/* The avx512 tier: four registers of four lanes, 256 bytes a round, from 64 bytes up. */
AVX512_TARGET static uint32_t crc32c_avx512(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    if (length < AVX512_MIN) return crc32c_hardware(crc, data, length);
    uint32_t c = ~crc;

    const __m512i d512 = fold_pair_512(crc_fold.d512);
    __m512i x0 = _mm512_xor_si512(load512(p), _mm512_maskz_set1_epi32(1, (int)c));
    if (length >= 256) {
        __m512i x1 = load512(p + 64), x2 = load512(p + 128), x3 = load512(p + 192);
        p += 256;
        length -= 256;
        const __m512i d2048 = fold_pair_512(crc_fold.d2048);
        for (; length >= 256; p += 256, length -= 256) {
            x0 = fold_512(x0, d2048, load512(p));
            x1 = fold_512(x1, d2048, load512(p + 64));
            x2 = fold_512(x2, d2048, load512(p + 128));
            x3 = fold_512(x3, d2048, load512(p + 192));
        }
        x0 = reduce_4x512(x0, x1, x2, x3);
    } else {
        p += 64;
        length -= 64;
    }
    for (; length >= 64; p += 64, length -= 64) x0 = fold_512(x0, d512, load512(p));
    return crc_finish_128(reduce_512(x0), p, length);
}
#endif /* !SEGLOG_NO_AVX512 */

/* What the CPU has and the OS enables, from CPUID and XCR0. */
static uint64_t read_xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

#define CPUID1_ECX_PCLMULQDQ (1u << 1)
#define CPUID1_ECX_SSE42 (1u << 20)
#define CPUID1_ECX_OSXSAVE (1u << 27) /* the OS uses XSAVE, so XGETBV can be asked */
#define CPUID7_EBX_AVX512F (1u << 16)
#define CPUID7_EBX_AVX512VL (1u << 31)
#define CPUID7_ECX_VPCLMULQDQ (1u << 10)
/* XCR0: the OS saves SSE (bit 1), AVX (2), opmask (5), ZMM0-15 upper halves (6) and ZMM16-31 (7). */
#define XCR0_AVX512_STATE 0xE6u

static int x86_has(int tier);
#endif /* SEGLOG_X86 */

/* The tiers this build has, slowest first; crc_init picks the last one the CPU can run. */
typedef uint32_t (*crc_function)(uint32_t crc, const void *data, size_t length);
static const struct {
    const char *name;
    crc_function function;
} crc_tiers[] = {
    {"software", seglog_crc32c_software},
#if defined(SEGLOG_X86)
    {"sse42", crc32c_hardware},
    {"pclmul", crc32c_pclmul},
#if defined(SEGLOG_AVX512)
    {"avx512", crc32c_avx512},
#endif
#elif defined(SEGLOG_ARM_CRC)
    {"armv8", crc32c_hardware},
#endif
};
#define CRC_TIER_COUNT ((int)(sizeof(crc_tiers) / sizeof(crc_tiers[0])))

#if defined(SEGLOG_X86)
static int x86_has(int tier) {
    unsigned eax, ebx, ecx1, edx, ecx7 = 0, ebx7 = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx1, &edx)) return 0;
    if (__get_cpuid_max(0, NULL) >= 7) __get_cpuid_count(7, 0, &eax, &ebx7, &ecx7, &edx);
    const char *name = crc_tiers[tier].name;
    int sse42 = (ecx1 & CPUID1_ECX_SSE42) != 0;
    int pclmul = sse42 && (ecx1 & CPUID1_ECX_PCLMULQDQ);
    if (strcmp(name, "sse42") == 0) return sse42;
    if (strcmp(name, "pclmul") == 0) return pclmul;
    if (strcmp(name, "avx512") == 0)
        return pclmul && (ecx1 & CPUID1_ECX_OSXSAVE) && (ebx7 & CPUID7_EBX_AVX512F) &&
               (ebx7 & CPUID7_EBX_AVX512VL) && (ecx7 & CPUID7_ECX_VPCLMULQDQ) &&
               (read_xcr0() & XCR0_AVX512_STATE) == XCR0_AVX512_STATE;
    return 0;
}
#endif

static unsigned crc_available;       /* bit t: tier t runs here; written once, by crc_init */
static int crc_selected_tier;        /* likewise */
static crc_function crc_selected;    /* NULL until crc_init is done; read and written atomically */
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    build_crc_table();
    build_crc_shift_tables();
#if defined(SEGLOG_X86)
    build_crc_fold_constants();
#endif
    crc_available = 1; /* software */
    for (int tier = 1; tier < CRC_TIER_COUNT; tier++) {
#if defined(SEGLOG_X86)
        if (x86_has(tier)) crc_available |= 1u << tier;
#else
        crc_available |= 1u << tier; /* the ARMv8 instructions are in the compile target */
#endif
    }
    for (int tier = 0; tier < CRC_TIER_COUNT; tier++)
        if (crc_available & (1u << tier)) crc_selected_tier = tier;
    __atomic_store_n(&crc_selected, crc_tiers[crc_selected_tier].function, __ATOMIC_RELEASE);
}

static void crc_init_once(void) {
    if (__atomic_load_n(&crc_selected, __ATOMIC_ACQUIRE) == NULL) pthread_once(&crc_once, crc_init);
}

uint32_t seglog_crc32c(uint32_t crc, const void *data, size_t length) {
    crc_function function = __atomic_load_n(&crc_selected, __ATOMIC_ACQUIRE);
    if (__builtin_expect(function == NULL, 0)) {
        pthread_once(&crc_once, crc_init);
        function = crc_selected;
    }
    return function(crc, data, length);
}

int seglog_crc32c_hardware_available(void) {
    crc_init_once();
    return crc_selected_tier > 0;
}

int seglog_crc32c_tier_count(void) { return CRC_TIER_COUNT; }

const char *seglog_crc32c_tier_name(int tier) {
    return tier >= 0 && tier < CRC_TIER_COUNT ? crc_tiers[tier].name : NULL;
}

int seglog_crc32c_tier_available(int tier) {
    crc_init_once();
    return tier >= 0 && tier < CRC_TIER_COUNT && (crc_available & (1u << tier)) != 0;
}

int seglog_crc32c_selected_tier(void) {
    crc_init_once();
    return crc_selected_tier;
}

uint32_t seglog_crc32c_tier(int tier, uint32_t crc, const void *data, size_t length) {
    if (!seglog_crc32c_tier_available(tier)) tier = 0;
    return crc_tiers[tier].function(crc, data, length);
}

int32_t seglog_murmur2(const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    size_t blocks = length / 4;
    for (size_t i = 0; i < blocks; i++) {
        uint32_t k = (uint32_t)p[4 * i] | ((uint32_t)p[4 * i + 1] << 8) | ((uint32_t)p[4 * i + 2] << 16) |
                     ((uint32_t)p[4 * i + 3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = p + (length & ~(size_t)3);
    switch (length & 3) {
        case 3:
            h ^= (uint32_t)tail[2] << 16; /* fall through */
        case 2:
            h ^= (uint32_t)tail[1] << 8; /* fall through */
        case 1:
            h ^= (uint32_t)tail[0];
            h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

void seglog_release_fence(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
void seglog_acquire_fence(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int seglog_populate_write(void *address, size_t length) {
#if defined(__linux__)
    return madvise(address, length, MADV_POPULATE_WRITE);
#else
    (void)address;
    (void)length;
    return -1;
#endif
}

/* A mapping the thread faults in: [0, done) is done, up to `wanted` is asked for. */
typedef struct {
    uint8_t *base;
    size_t length, done, wanted;
} prefault_range;

#define UNMAP_QUEUE 8

struct seglog_prefaulter {
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    pthread_cond_t idle;
    prefault_range active; /* the writer's segment, `ahead` bytes ahead of the writer */
    prefault_range spare;  /* the next segment, its first `step` bytes, once the active one is served */
    size_t ahead, step;
    uint8_t *busy; /* the mapping the thread is faulting in, outside the mutex (NULL: none) */
    struct { void *address; size_t length; } unmaps[UNMAP_QUEUE]; /* maps handed over to unmap */
    int pending_unmaps, stop, supported;
    int fd;         /* the active mapping's file (a dup, -1: none): its pages are made by writing zeros */
    int busy_fd;    /* the file the thread's step is writing zeros to (-1: none) */
};

/* Zeros for fill(): written up to FILL_VECTORS times by one pwritev. */
static const uint8_t fill_zeros[64 << 10];
#define FILL_VECTORS 16

/* Make the pages of [from, to) of `fd`'s file, mapped at `base`, by writing zeros there, then map them
 * writable: faulting them in instead would have the kernel's read-around make and zero read_ahead_kb of
 * page cache around the first (8 MiB on the test machine: 2.7 ms against 0.3 ms for 1 MiB written so).
 * For blocks allocated past what the writer wrote, which hold zeros already. Returns 0, or -1 (errno) if
 * a write failed, after which the pages are faulted in as without a file. */
static int fill(seglog_prefaulter *p, int fd, uint8_t *base, size_t from, size_t to) {
    struct iovec vectors[FILL_VECTORS];
    for (int i = 0; i < FILL_VECTORS; i++) {
        vectors[i].iov_base = (void *)fill_zeros;
        vectors[i].iov_len = sizeof fill_zeros;
    }
    size_t position = from;
    while (position < to) {
        size_t left = to - position, count = 0;
        for (; count < FILL_VECTORS && left; count++) {
            vectors[count].iov_len = left < sizeof fill_zeros ? left : sizeof fill_zeros;
            left -= vectors[count].iov_len;
        }
        ssize_t written = pwritev(fd, vectors, (int)count, (off_t)position);
        for (size_t i = 0; i < count; i++) vectors[i].iov_len = sizeof fill_zeros;
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) break;
        position += (size_t)written;
    }
    uint8_t *first = (uint8_t *)((uintptr_t)(base + from) & ~(uintptr_t)4095);
    if (p->supported) seglog_populate_write(first, (size_t)(base + to - first));
    return position < to ? -1 : 0;
}

/* One step on `r` (the mutex held, released during the madvise). On the active mapping, with its file, the
 * pages are made by fill(): safe because the writer never writes past `done` without first claiming the
 * range (seglog_prefaulter_reach), which waits for a step in it to end. */
static void prefault_step(seglog_prefaulter *p, prefault_range *r) {
    uint8_t *base = r->base;
    size_t from = r->done, to = r->wanted < from + p->step ? r->wanted : from + p->step;
    int fd = r == &p->active ? p->fd : -1;
    p->busy = base;
    p->busy_fd = fd;
    pthread_mutex_unlock(&p->mutex);
    int rc = fd >= 0 ? fill(p, fd, base, from, to) : seglog_populate_write(base + from, to - from);
    int error = errno;
    pthread_mutex_lock(&p->mutex);
    p->busy = NULL;
    p->busy_fd = -1;
    pthread_cond_broadcast(&p->idle);
    if (rc != 0 && error == EINVAL && fd < 0) p->supported = 0; /* kernel older than 5.14 */
    if (r->base == base && r->done == from) __atomic_store_n(&r->done, to, __ATOMIC_RELAXED);
}

static int wants_work(const prefault_range *r) { return r->base != NULL && r->done < r->wanted; }

/* Unmap the oldest map handed over (the mutex held, released during the munmap). */
static void unmap_one(seglog_prefaulter *p) {
    void *address = p->unmaps[0].address;
    size_t length = p->unmaps[0].length;
    p->pending_unmaps--;
    memmove(&p->unmaps[0], &p->unmaps[1], p->pending_unmaps * sizeof(p->unmaps[0]));
    pthread_mutex_unlock(&p->mutex);
    munmap(address, length);
    pthread_mutex_lock(&p->mutex);
}

static void *prefaulter_run(void *arg) {
    seglog_prefaulter *p = (seglog_prefaulter *)arg;
    pthread_mutex_lock(&p->mutex);
    while (!p->stop) {
        if ((p->supported || p->fd >= 0) && wants_work(&p->active)) {
            prefault_step(p, &p->active);
        } else if (p->pending_unmaps) {
            unmap_one(p);
        } else if (p->supported && wants_work(&p->spare)) {
            prefault_step(p, &p->spare);
        } else {
            pthread_cond_wait(&p->wake, &p->mutex);
        }
    }
    while (p->pending_unmaps) unmap_one(p);
    pthread_mutex_unlock(&p->mutex);
    return NULL;
}

seglog_prefaulter *seglog_prefaulter_new(size_t ahead, size_t step) {
    seglog_prefaulter *p = calloc(1, sizeof(seglog_prefaulter));
    if (p == NULL) return NULL;
    p->ahead = ahead;
    p->step = step;
    p->supported = 1;
    p->fd = p->busy_fd = -1;
    pthread_mutex_init(&p->mutex, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->idle, NULL);
    if (pthread_create(&p->thread, NULL, prefaulter_run, p) != 0) {
        pthread_mutex_destroy(&p->mutex);
        pthread_cond_destroy(&p->wake);
        pthread_cond_destroy(&p->idle);
        free(p);
        return NULL;
    }
    return p;
}

static size_t ahead_of(const seglog_prefaulter *p, size_t position, size_t length) {
    return position + p->ahead < length ? position + p->ahead : length;
}

/* Wait until the thread is not inside `base`: the caller may unmap it next. */
static void leave(seglog_prefaulter *p, const uint8_t *base) {
    while (base != NULL && p->busy == base) pthread_cond_wait(&p->idle, &p->mutex);
}

void seglog_prefaulter_target(seglog_prefaulter *p, uint8_t *base, size_t length, size_t start) {
    seglog_prefaulter_target_file(p, base, length, start, -1);
}

void seglog_prefaulter_target_file(seglog_prefaulter *p, uint8_t *base, size_t length, size_t start, int fd) {
    /* From the page after `start`: the one holding it holds the writer's bytes, which a fill would zero. */
    size_t done = (start + 4095) & ~(size_t)4095;
    /* Close-on-exec, as Python's own descriptors are (-1 on failure too: pages are then faulted in, not filled) */
    int copy = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    pthread_mutex_lock(&p->mutex);
    if (base != NULL && base == p->active.base) { /* the same mapping, longer: nothing will unmap the old */
        done = p->active.done > done ? p->active.done : done;
    } else {
        leave(p, p->active.base);
    }
    if (base != p->active.base) { /* a new file: the old one closed once no step writes to it */
        while (p->fd >= 0 && p->busy_fd == p->fd) pthread_cond_wait(&p->idle, &p->mutex);
        if (p->fd >= 0) close(p->fd);
        p->fd = copy;
    } else if (copy >= 0) { /* the same file, which a step of the thread may be writing to */
        close(copy);
    }
    if (base != NULL && base == p->spare.base) { /* the spare became the active segment: keep its progress */
        done = p->spare.done > done ? p->spare.done : done;
        p->spare.base = NULL;
    }
    p->active.base = base;
    p->active.length = length;
    p->active.done = done;
    p->active.wanted = ahead_of(p, start, length);
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mutex);
}

void seglog_prefaulter_spare(seglog_prefaulter *p, uint8_t *base, size_t length) {
    pthread_mutex_lock(&p->mutex);
    leave(p, p->spare.base);
    p->spare.base = base;
    p->spare.length = length;
    p->spare.done = 0;
    p->spare.wanted = p->step < length ? p->step : length;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mutex);
}

/* Stop faulting in `base`, the active mapping or the spare. */
static void forget(seglog_prefaulter *p, const uint8_t *base) {
    if (p->active.base == base) p->active.base = NULL;
    if (p->spare.base == base) p->spare.base = NULL;
}

void seglog_prefaulter_release(seglog_prefaulter *p, uint8_t *base) {
    pthread_mutex_lock(&p->mutex);
    forget(p, base);
    leave(p, base);
    pthread_mutex_unlock(&p->mutex);
}

void seglog_prefaulter_unmap(seglog_prefaulter *p, void *address, size_t length) {
    pthread_mutex_lock(&p->mutex);
    forget(p, address); /* the thread unmaps it after any step it is taking in it: no need to wait, */
    /* but for a step writing zeros to its file: the caller trims the file next, which a write past the
     * trim would extend again (a closed segment's log longer than its batches) */
    while (p->busy == (uint8_t *)address && p->busy_fd >= 0) pthread_cond_wait(&p->idle, &p->mutex);
    if (p->pending_unmaps == UNMAP_QUEUE) { /* the thread is behind: unmap here rather than wait */
        leave(p, address);
        pthread_mutex_unlock(&p->mutex);
        munmap(address, length);
        return;
    }
    p->unmaps[p->pending_unmaps].address = address;
    p->unmaps[p->pending_unmaps].length = length;
    p->pending_unmaps++;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mutex);
}

void seglog_prefaulter_advance(seglog_prefaulter *p, size_t position) {
    /* The thread is woken when a whole step more is wanted (or the end of the mapping): a wakeup per small
     * batch costs the writer more than the faults it saves. `wanted` and `length` change only in calls from
     * the writer, which its own lock serialises, so they are read here without the mutex. */
    prefault_range *r = &p->active;
    size_t wanted = ahead_of(p, position, r->length);
    if (wanted <= r->wanted || (wanted < r->wanted + p->step && wanted < r->length)) return;
    pthread_mutex_lock(&p->mutex);
    r->wanted = wanted;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mutex);
}

void seglog_prefaulter_reach(seglog_prefaulter *p, size_t position, size_t end) {
    prefault_range *r = &p->active;
    if (end <= __atomic_load_n(&r->done, __ATOMIC_RELAXED)) return; /* the common case: no lock */
    pthread_mutex_lock(&p->mutex);
    uint8_t *base = r->base;
    while (base != NULL && p->busy == base && p->busy_fd >= 0 && end > r->done) {
        pthread_cond_wait(&p->idle, &p->mutex); /* a step writing zeros in the range: after it */
    }
    size_t from = r->done > position ? r->done : position;
    int fd = p->fd;
    if (base == NULL || from >= end || end > r->length) {
        pthread_mutex_unlock(&p->mutex);
        return;
    }
    size_t claimed = (end + 4095) & ~(size_t)4095;
    r->done = claimed < r->length ? claimed : r->length;
    if (r->wanted < r->done) r->wanted = r->done;
    pthread_mutex_unlock(&p->mutex);
    if (fd >= 0) fill(p, fd, base, from, end); /* (p->fd changes only in target, this writer's own call) */
}

void seglog_prefaulter_free(seglog_prefaulter *p) {
    pthread_mutex_lock(&p->mutex);
    p->stop = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mutex);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mutex);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->idle);
    if (p->fd >= 0) close(p->fd);
    free(p);
}

/* madvise and MADV_* are not in strict C11 headers */
#define _DEFAULT_SOURCE 1

#include "native.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <nmmintrin.h>
#define SEGLOG_X86 1
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#define SEGLOG_ARM_CRC 1
#endif

#define CRC32C_POLY_REFLECTED 0x82F63B78u

/* Slice-by-8 tables for the software path, built once (idempotent, so a race only repeats work). */
static uint32_t crc_table[8][256];
static volatile int crc_table_ready = 0;

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
    crc_table_ready = 1;
}

uint32_t seglog_crc32c_software(uint32_t crc, const void *data, size_t length) {
    if (!crc_table_ready) build_crc_table();
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

static volatile int crc_shift_ready = 0;

static void build_crc_shift_tables(void) {
    crc_zeros_table(crc_shift_long, CRC_LONG);
    crc_zeros_table(crc_shift_short, CRC_SHORT);
    crc_shift_ready = 1;
}

static inline uint32_t crc_shift(uint32_t table[4][256], uint32_t crc) {
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^
           table[3][crc >> 24];
}

#if defined(SEGLOG_X86)
#define CRC_U8(c, b) _mm_crc32_u8((uint32_t)(c), (b))
#define CRC_U64(c, w) _mm_crc32_u64((c), (w))
#define CRC_TARGET __attribute__((target("sse4.2")))
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

CRC_TARGET static uint32_t crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t c0 = ~crc;
    if (!crc_shift_ready) build_crc_shift_tables();
    while (length && ((uintptr_t)p & 7)) {
        c0 = CRC_U8(c0, *p++);
        length--;
    }
    for (; length >= 3 * CRC_LONG; p += 3 * CRC_LONG, length -= 3 * CRC_LONG)
        c0 = crc_three_streams(c0, p, CRC_LONG, crc_shift_long);
    for (; length >= 3 * CRC_SHORT; p += 3 * CRC_SHORT, length -= 3 * CRC_SHORT)
        c0 = crc_three_streams(c0, p, CRC_SHORT, crc_shift_short);
    while (length >= 8) {
        c0 = CRC_U64(c0, load64(p));
        p += 8;
        length -= 8;
    }
    while (length--) c0 = CRC_U8(c0, *p++);
    return ~(uint32_t)c0;
}
#endif

#if defined(SEGLOG_X86)
int seglog_crc32c_hardware_available(void) { return __builtin_cpu_supports("sse4.2"); }

#elif defined(SEGLOG_ARM_CRC)
int seglog_crc32c_hardware_available(void) { return 1; }

#else
int seglog_crc32c_hardware_available(void) { return 0; }
#endif

uint32_t seglog_crc32c(uint32_t crc, const void *data, size_t length) {
#if defined(SEGLOG_X86) || defined(SEGLOG_ARM_CRC)
    static int hardware = -1;
    if (hardware < 0) hardware = seglog_crc32c_hardware_available();
    if (hardware) return crc32c_hardware(crc, data, length);
#endif
    return seglog_crc32c_software(crc, data, length);
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

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
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

int seglog_populate_read(const void *address, size_t length) {
#if defined(__linux__)
    return madvise((void *)address, length, MADV_POPULATE_READ);
#else
    (void)address;
    (void)length;
    return -1;
#endif
}

struct seglog_prefaulter {
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    pthread_cond_t idle;
    uint8_t *base;
    size_t length, done, wanted, ahead, step;
    int busy, stop, supported;
};

static void *prefaulter_run(void *arg) {
    seglog_prefaulter *p = (seglog_prefaulter *)arg;
    pthread_mutex_lock(&p->mutex);
    while (!p->stop) {
        if (p->base != NULL && p->supported && p->done < p->wanted) {
            uint8_t *base = p->base;
            size_t from = p->done, to = p->wanted < from + p->step ? p->wanted : from + p->step;
            p->busy = 1;
            pthread_mutex_unlock(&p->mutex);
            int rc = seglog_populate_write(base + from, to - from);
            int error = errno;
            pthread_mutex_lock(&p->mutex);
            p->busy = 0;
            pthread_cond_broadcast(&p->idle);
            if (rc != 0 && error == EINVAL) p->supported = 0; /* kernel older than 5.14 */
            if (p->base == base && p->done == from) p->done = to;
            continue;
        }
        pthread_cond_wait(&p->wake, &p->mutex);
    }
    pthread_mutex_unlock(&p->mutex);
    return NULL;
}

seglog_prefaulter *seglog_prefaulter_new(size_t ahead, size_t step) {
    seglog_prefaulter *p = calloc(1, sizeof(seglog_prefaulter));
    if (p == NULL) return NULL;
    p->ahead = ahead;
    p->step = step;
    p->supported = 1;
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

void seglog_prefaulter_target(seglog_prefaulter *p, uint8_t *base, size_t length, size_t start) {
    pthread_mutex_lock(&p->mutex);
    while (p->busy) pthread_cond_wait(&p->idle, &p->mutex); /* the old mapping may be unmapped next */
    p->base = base;
    p->length = length;
    p->done = start & ~(size_t)4095;
    p->wanted = start + p->ahead < length ? start + p->ahead : length;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mutex);
}

void seglog_prefaulter_advance(seglog_prefaulter *p, size_t position) {
    size_t wanted;
    pthread_mutex_lock(&p->mutex);
    wanted = position + p->ahead < p->length ? position + p->ahead : p->length;
    if (wanted > p->wanted) {
        p->wanted = wanted;
        pthread_cond_signal(&p->wake);
    }
    pthread_mutex_unlock(&p->mutex);
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
    free(p);
}

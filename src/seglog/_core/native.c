#include "native.h"

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

#if defined(SEGLOG_X86)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hardware(uint32_t crc, const void *data,
                                                                    size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t c = ~crc;
    while (length && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        length -= 8;
    }
    while (length--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

int seglog_crc32c_hardware_available(void) { return __builtin_cpu_supports("sse4.2"); }

#elif defined(SEGLOG_ARM_CRC)
static uint32_t crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    uint32_t c = ~crc;
    while (length && ((uintptr_t)p & 7)) {
        c = __crc32cb(c, *p++);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __crc32cd(c, word);
        p += 8;
        length -= 8;
    }
    while (length--) c = __crc32cb(c, *p++);
    return ~c;
}

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

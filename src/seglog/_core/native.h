/* seglog's small C layer: what Cython cannot say portably (CPU feature dispatch, fences, madvise). */
#ifndef SEGLOG_NATIVE_H
#define SEGLOG_NATIVE_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C (Castagnoli), the checksum of every record batch. `crc` is the value returned by a previous
 * call (0 to start); the hardware instruction is used where the CPU has it. */
uint32_t seglog_crc32c(uint32_t crc, const void *data, size_t length);
uint32_t seglog_crc32c_software(uint32_t crc, const void *data, size_t length);
int seglog_crc32c_hardware_available(void);

/* The implementations ("tiers") of seglog_crc32c in this build, slowest first, so tests and benchmarks can
 * run each one the CPU has: tier 0 is "software"; x86-64 adds "sse42", "pclmul", "avx512", ARMv8 "armv8".
 * seglog_crc32c runs the selected one, the fastest available. seglog_crc32c_tier runs tier 0 in place of a
 * tier the CPU lacks. */
int seglog_crc32c_tier_count(void);
const char *seglog_crc32c_tier_name(int tier); /* NULL past the count */
int seglog_crc32c_tier_available(int tier);
int seglog_crc32c_selected_tier(void);
uint32_t seglog_crc32c_tier(int tier, uint32_t crc, const void *data, size_t length);

/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), so a key lands on the same partition
 * as with Kafka's default partitioner, in every process and every version. */
int32_t seglog_murmur2(const void *data, size_t length);

/* Publish the batch bytes before the index entry that makes them visible to readers in other processes. */
void seglog_release_fence(void);
void seglog_acquire_fence(void);

/* Fault in writable pages of a shared file mapping without changing their contents, so the writer's
 * copy does not stop on a page fault. Returns 0 on success, -1 if the kernel cannot (older than 5.14). */
int seglog_populate_write(void *address, size_t length);

/* A background thread that keeps the pages ahead of a writer faulted in (MADV_POPULATE_WRITE; for an active
 * mapping given its file, made by writing zeros into the file first, see native.c's fill()), so the
 * writer's copy runs at memory speed instead of taking a fault per 4 KiB. It never touches Python objects
 * or the GIL: a Python thread would need the GIL between steps and starve behind a busy producer. */
typedef struct seglog_prefaulter seglog_prefaulter;
seglog_prefaulter *seglog_prefaulter_new(size_t ahead, size_t step);
/* Follow a new mapping from `start`; returns once the thread has left the old one (at once if it is the
 * same mapping, its allocated part grown). If it is the spare, or the same mapping, the pages already
 * faulted in count. */
void seglog_prefaulter_target(seglog_prefaulter *p, uint8_t *base, size_t length, size_t start);
/* The same, with the mapping's file `fd` (-1: none, or for the same mapping, its file kept), which this
 * duplicates: its pages are then made by writing zeros into its blocks past `start` (which must hold
 * zeros, or bytes no one reads) rather than faulted in, see native.c's fill(). */
void seglog_prefaulter_target_file(seglog_prefaulter *p, uint8_t *base, size_t length, size_t start, int fd);
/* The mapping of the next segment: its first `step` bytes are faulted in whenever the active one needs
 * nothing, so that after a roll the writer starts on faulted pages while the thread gets ahead again (no
 * more: a spare a writer closes before it rolls is thrown away). */
void seglog_prefaulter_spare(seglog_prefaulter *p, uint8_t *base, size_t length);
/* Unmap [address, address + length), a map the caller hands over, from the thread: unmapping a segment
 * of faulted-in pages takes milliseconds (every page table entry of it), which a roll or a close need not
 * wait for. If it is the active mapping or the spare, it stops being one at once, without waiting for the
 * thread to finish a step in it. Done before seglog_prefaulter_free returns. */
void seglog_prefaulter_unmap(seglog_prefaulter *p, void *address, size_t length);
/* Stop faulting in `base` (the active mapping or the spare); returns once the thread has left it, for a
 * caller that unmaps it itself. */
void seglog_prefaulter_release(seglog_prefaulter *p, uint8_t *base);
/* The writer is at `position`: fault in up to `position + ahead`, waking the thread once a whole `step`
 * more is wanted. Called only by the writer (under its lock), as `target` is. */
void seglog_prefaulter_advance(seglog_prefaulter *p, size_t position);
/* The writer is about to write [position, end) of the active mapping: the part the thread has not reached is
 * made here and now (after its step in it, if it is taking one), and the thread moves on past `end`, so it
 * never writes zeros where the writer writes. Called by the writer before every write into the active
 * mapping, under its lock, as `target` is; without a lock when the thread is ahead. */
void seglog_prefaulter_reach(seglog_prefaulter *p, size_t position, size_t end);
void seglog_prefaulter_free(seglog_prefaulter *p);

#endif

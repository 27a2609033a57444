/* locksim's clock shim for real runs: preloaded into a redis-server whose clock a
 * fault plan moves (LD_PRELOAD), it shifts the process's wall clock (CLOCK_REALTIME,
 * gettimeofday, time) by what the runner writes into a small file, as an NTP step, a
 * fast clock or NTP's slew would; the monotonic clock is left alone, as a step leaves
 * it. Debian's libfaketime cannot be preloaded into Debian's redis-server (jemalloc
 * calls clock_gettime while libfaketime's own start-up allocates: it dies, libfaketime
 * issue #130); this shim allocates nothing and calls no libc function that could:
 * raw system calls only.
 *
 * The file (LOCKSIM_CLOCK_FILE) holds three little-endian int64: the offset in ns, the
 * rate error in parts per billion, and the real wall-clock instant (ns) from which the
 * rate counts. The shifted time is real + offset + (real - anchor) * rate / 1e9. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *ctl;
static int attached;

static void attach(void) {
    if (__atomic_exchange_n(&attached, 1, __ATOMIC_ACQ_REL)) return;
    const char *path = getenv("LOCKSIM_CLOCK_FILE");
    if (!path) return;
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return;
    long m = syscall(SYS_mmap, 0, 4096, PROT_READ, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (m != -1 && m != 0) __atomic_store_n(&ctl, (volatile int64_t *)m, __ATOMIC_RELEASE);
}

static int64_t shift(int64_t real_ns) {
    attach();
    volatile int64_t *c = __atomic_load_n(&ctl, __ATOMIC_ACQUIRE);
    if (!c) return 0;
    int64_t off = __atomic_load_n(&c[0], __ATOMIC_ACQUIRE);
    int64_t rate = __atomic_load_n(&c[1], __ATOMIC_ACQUIRE);
    int64_t anchor = __atomic_load_n(&c[2], __ATOMIC_ACQUIRE);
    if (rate != 0 && real_ns > anchor)
        off += (int64_t)((__int128)(real_ns - anchor) * rate / 1000000000);
    return off;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    long r = syscall(SYS_clock_gettime, id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
        ns += shift(ns);
        ts->tv_sec = ns / 1000000000;
        ts->tv_nsec = ns % 1000000000;
    }
    return (int)r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    int r = clock_gettime(CLOCK_REALTIME, &ts);
    (void)tz;
    if (r == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return r;
}

time_t time(time_t *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}

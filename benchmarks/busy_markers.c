/* Benchmark workload: threads that write trace_marker lines and sleep
 * briefly, producing print, sched, irq and timer events at a high rate.
 * usage: busy_markers THREADS SECONDS */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd;
static double seconds;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg) {
    long id = (long)arg;
    char buf[64];
    double end = now() + seconds;
    struct timespec nap = {0, 1000};
    for (long i = 0; now() < end; i++) {
        int n = snprintf(buf, sizeof buf, "txn_end vm=bench vcpu=%ld n=%ld\n", id, i);
        if (write(fd, buf, n) < 0) return NULL;
        if (i % 8 == 0) nanosleep(&nap, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    seconds = argc > 2 ? atof(argv[2]) : 1.0;
    fd = open("/sys/kernel/tracing/trace_marker", O_WRONLY);
    if (fd < 0) { perror("trace_marker"); return 1; }
    pthread_t t[64];
    if (threads > 64) threads = 64;
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return 0;
}

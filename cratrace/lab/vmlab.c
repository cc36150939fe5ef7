/* cratrace workload lab: processes that look and behave like KVM VMs.
 *
 * Each "VM" is a process whose argv reads `qemu-system-x86_64 -name
 * guest=<vm>` and whose vCPU threads are named `CPU <n>/KVM`. A vCPU loops:
 * compute burst, take the VM's spin lock (test-and-test-and-set spinning
 * with the pause instruction), hold it for a critical section, release,
 * mark a transaction end, then sleep (standing in for I/O). Oversubscribed
 * on a small machine, a lock holder gets preempted while its siblings spin:
 * real lock-holder preemption. Annotations go to trace_marker:
 *   txn_end vm=<vm> vcpu=<n>
 *   spin_begin vm=<vm> vcpu=<n> lock=<id>
 *   spin_end vm=<vm> vcpu=<n> lock=<id> spins=<count>
 *
 * usage: vmlab VMS VCPUS[,VCPUS...] BURST_US HOLD_US SLEEP_US DURATION_S [count|cpu|wall [spin|pv [shared|own [VMM [MARKERS]]]]]
 *        (re-executes itself once per VM with argv[0] the VMM's name)
 * VMM names the processes and threads as a VMM does: qemu (the default:
 * qemu-system-x86_64 -name guest=VM, threads `CPU n/KVM`), firecracker
 * (`--id VM`, `fc_vcpu n`), cloud-hypervisor (a `vmm` thread creates the
 * `vcpuN` threads), crosvm (`crosvm_vcpuN`) or kvmtool (lkvm, `kvm-vcpu-N`).
 * MARKERS is how the guests annotate: lab (the default, above), bare
 * (`txn_end n=K`, `spin_begin`, `spin_end`: no vm/vcpu fields), rtapp
 * (rt-app's `rtapp_loop: event=end thread_loop=K phase=0 phase_loop=0`),
 * free (free text) or none.
 * Bursts and critical sections are counted loops calibrated to thread CPU
 * time (count, the default), thread CPU time read in the loop (cpu) or
 * wall time (wall).
 * The VM processes share the lab's session (shared, the default), or each
 * starts one of its own (own): with autogroups on and no CPU cgroups, the
 * kernel then schedules each VM as a group, as libvirt's per-VM cgroups do.
 * The lock spins until it is free (spin, the default: a guest with native
 * spinlocks), or behaves like a KVM guest's paravirtual spinlock (pv):
 * spin SPIN_THRESHOLD times (Linux's pv qspinlock value), then sleep on a
 * futex until the holder's unlock wakes one waiter (pv_wait halts the vCPU,
 * pv_kick is the KVM_HC_KICK_CPU hypercall), then spin again.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int marker_fd = -1;
static const char *vm_name;
enum { VMM_QEMU, VMM_FIRECRACKER, VMM_CLOUD_HYPERVISOR, VMM_CROSVM, VMM_KVMTOOL };
static const char *const VMM_NAMES[] = {"qemu", "firecracker", "cloud-hypervisor", "crosvm", "kvmtool"};
/* argv[0], the option naming the VM, the process's comm */
static const char *const VMM_ARGV0[] = {"qemu-system-x86_64", "firecracker", "cloud-hypervisor", "crosvm", "lkvm"};
static const char *const VMM_NAME_FLAG[] = {"-name", "--id", "--api-socket", "run", "--name"};
static const char *const VMM_COMM[] = {"qemu-system-x86", "firecracker", "cloud-hyperviso", "crosvm", "lkvm"};
static int vmm;
enum { MARK_LAB, MARK_BARE, MARK_RTAPP, MARK_FREE, MARK_NONE };
static const char *const MARKER_STYLES[] = {"lab", "bare", "rtapp", "free", "none"};
static int markers;
static long burst_us, hold_us, sleep_us;
static double end_time;
/* 0 free, 1 held, 2 held with sleepers (pv mode only) */
static atomic_int lock_word;
static int pv_lock;
#define SPIN_THRESHOLD (1L << 15)
static volatile sig_atomic_t stop;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Compute for `us` of this thread's CPU time (a guest's burst is a fixed
 * amount of work: preempted, it finishes later), or of wall time with
 * WORK_CLOCK=wall (the burst shrinks when preempted; kept to compare), or
 * for a fixed count of loop iterations calibrated to `us` (WORK_CLOCK=count).
 * The first two read their clock in the loop, a system call every couple
 * of microseconds that runs the host scheduler's accounting each time; a
 * KVM vCPU computing in guest mode enters the host kernel only on exits
 * and interrupts, as the counted loop does. */
enum { WORK_CPU, WORK_WALL, WORK_COUNT };
static int work_clock;
static double loops_per_us;

static void spin_loops(unsigned long n) {
    volatile unsigned long x = 0;
    for (; n; n--) x++;
}

/* Loop iterations per microsecond of this thread's CPU time (preemption
 * during the measurement does not count): the fastest of 7 rounds of about
 * 10 ms. On a shared virtual machine the same loop runs up to 2x slower
 * while the host's other load shares the core; the fastest round is the
 * core's own speed, so a burst is `us` of work at full speed and takes
 * longer on a contended host, as a guest's work does. Measured once in
 * the parent, before the VMs start competing. */
static void calibrate(void) {
    unsigned long n = 1UL << 20;
    for (;;) {  /* grow one round to >= 10 ms */
        double t0 = cpu_now();
        spin_loops(n);
        if (cpu_now() - t0 >= 0.01) break;
        n *= 2;
    }
    for (int i = 0; i < 7; i++) {
        double t0 = cpu_now();
        spin_loops(n);
        double rate = n / ((cpu_now() - t0) * 1e6);
        if (rate > loops_per_us) loops_per_us = rate;
    }
}

static void busy_us(long us) {
    if (work_clock == WORK_COUNT) {
        spin_loops((unsigned long)(us * loops_per_us));
        return;
    }
    double (*clock)(void) = work_clock == WORK_WALL ? now : cpu_now;
    double until = clock() + us / 1e6;
    volatile unsigned long x = 0;
    while (clock() < until) x++;
}

static void write_marker(const char *buf, int n) {
    if (marker_fd >= 0 && n > 0 && write(marker_fd, buf, n) < 0) { /* tracing off: keep running */ }
}

/* The marker lines of one event in the chosen style: what is a spin
 * episode's begin (0), its end (1, with the spins) or a transaction's end
 * (2, with the vCPU's count of them). */
static void mark(int what, long vcpu, long arg) {
    if (marker_fd < 0 || markers == MARK_NONE) return;
    char buf[160];
    int n = 0;
    switch (markers) {
    case MARK_LAB:
        n = what == 0   ? snprintf(buf, sizeof buf, "spin_begin vm=%s vcpu=%ld lock=0\n", vm_name, vcpu)
            : what == 1 ? snprintf(buf, sizeof buf, "spin_end vm=%s vcpu=%ld lock=0 spins=%ld\n", vm_name, vcpu, arg)
                        : snprintf(buf, sizeof buf, "txn_end vm=%s vcpu=%ld\n", vm_name, vcpu);
        break;
    case MARK_BARE:
        n = what == 0   ? snprintf(buf, sizeof buf, "spin_begin\n")
            : what == 1 ? snprintf(buf, sizeof buf, "spin_end\n")
                        : snprintf(buf, sizeof buf, "txn_end n=%ld\n", arg);
        break;
    case MARK_RTAPP:
        if (what == 2) n = snprintf(buf, sizeof buf, "rtapp_loop: event=end thread_loop=%ld phase=0 phase_loop=0\n", arg);
        break;
    case MARK_FREE:
        if (what == 2) n = snprintf(buf, sizeof buf, "request %ld done by worker %ld, all fine\n", arg, vcpu);
        break;
    }
    write_marker(buf, n);
}

static void futex(int op, int val) {
    syscall(SYS_futex, (int *)&lock_word, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/* Take the VM's lock, marking the episode when it is contended. A pv
 * waiter that has slept once takes the lock as 2 so that its own unlock
 * wakes the next sleeper. */
static void lock_acquire(long id) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&lock_word, &expected, 1)) return;
    mark(0, id, 0);
    long spins = 0;
    int taken_as = 1;
    for (;;) {
        long budget = pv_lock ? SPIN_THRESHOLD : LONG_MAX;
        for (; budget > 0; budget--) {
            if (atomic_load_explicit(&lock_word, memory_order_relaxed) == 0) {
                expected = 0;
                if (atomic_compare_exchange_strong(&lock_word, &expected, taken_as)) goto taken;
            }
            relax();
            spins++;
        }
        /* pv: announce a sleeper and halt until an unlock wakes us */
        taken_as = 2;
        if (atomic_exchange(&lock_word, 2) == 0) goto taken;
        futex(FUTEX_WAIT, 2);
    }
taken:
    mark(1, id, spins);
}

static void lock_release(void) {
    if (atomic_exchange(&lock_word, 0) == 2) futex(FUTEX_WAKE, 1);
}

static void name_vcpu_thread(long id) {
    char name[16];
    switch (vmm) {
    case VMM_FIRECRACKER: snprintf(name, sizeof name, "fc_vcpu %ld", id); break;
    case VMM_CLOUD_HYPERVISOR: snprintf(name, sizeof name, "vcpu%ld", id); break;
    case VMM_CROSVM: snprintf(name, sizeof name, "crosvm_vcpu%ld", id); break;
    case VMM_KVMTOOL: snprintf(name, sizeof name, "kvm-vcpu-%ld", id); break;
    default: snprintf(name, sizeof name, "CPU %ld/KVM", id);
    }
    prctl(PR_SET_NAME, name);
}

static void *vcpu(void *arg) {
    long id = (long)arg;
    name_vcpu_thread(id);
    struct timespec nap = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
    long done = 0;
    while (!stop && now() < end_time) {
        busy_us(burst_us);
        lock_acquire(id);
        busy_us(hold_us);
        lock_release();
        mark(2, id, ++done);
        if (sleep_us > 0) nanosleep(&nap, NULL);
    }
    return NULL;
}

/* VM v's vCPU count from VCPUS: one number for every VM, or a comma list
 * (one per VM, the last repeating for the rest). */
static int vcpus_of(const char *list, int v) {
    int n = atoi(list);
    for (const char *p = list; v > 0; v--) {
        p = strchr(p, ',');
        if (!p) break;
        n = atoi(++p);
    }
    return n;
}

static void on_signal(int sig) { (void)sig; stop = 1; }

static int vm_vcpus;

/* Start the VM's vCPU threads and wait for them. */
static void *start_vcpus(void *arg) {
    (void)arg;
    pthread_t t[256];
    for (long i = 0; i < vm_vcpus; i++) pthread_create(&t[i], NULL, vcpu, (void *)i);
    for (int i = 0; i < vm_vcpus; i++) pthread_join(t[i], NULL);
    return NULL;
}

static void *vmm_thread(void *arg) {
    prctl(PR_SET_NAME, "vmm");
    return start_vcpus(arg);
}

static int run_vm(int vcpus, double duration) {
    prctl(PR_SET_NAME, VMM_COMM[vmm]);
    marker_fd = open("/sys/kernel/tracing/trace_marker", O_WRONLY);
    end_time = now() + duration;
    vm_vcpus = vcpus > 256 ? 256 : vcpus;
    if (vmm == VMM_CLOUD_HYPERVISOR) {
        /* Cloud Hypervisor's vCPU threads are created by its `vmm` thread */
        pthread_t t;
        pthread_create(&t, NULL, vmm_thread, NULL);
        pthread_join(t, NULL);
    } else {
        start_vcpus(NULL);
    }
    return 0;
}

static int index_of(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

int main(int argc, char **argv) {
    /* No SA_RESTART: the parent's waitpid must return EINTR on SIGTERM so
     * it can pass the stop on to its VM processes (signal() would restart
     * it, leaving the VMs running until their own deadline). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* child form: VMM-ARGV0 NAME-FLAG NAME VCPUS BURST HOLD SLEEP DURATION lab CLOCK LOCK SESSION LOOPS_PER_US VMM MARKERS */
    if (argc == 15 && strcmp(argv[8], "lab") == 0) {
        if (strcmp(argv[11], "own") == 0) setsid();
        vmm = index_of(VMM_NAMES, 5, argv[13]);
        markers = index_of(MARKER_STYLES, 5, argv[14]);
        vm_name = strncmp(argv[2], "guest=", 6) == 0 ? argv[2] + 6 : argv[2];
        work_clock = strcmp(argv[9], "wall") == 0 ? WORK_WALL : strcmp(argv[9], "count") == 0 ? WORK_COUNT : WORK_CPU;
        pv_lock = strcmp(argv[10], "pv") == 0;
        loops_per_us = atof(argv[12]);
        burst_us = atol(argv[4]); hold_us = atol(argv[5]); sleep_us = atol(argv[6]);
        return run_vm(atoi(argv[3]), atof(argv[7]));
    }
    int clock_ok = argc < 8 || strcmp(argv[7], "cpu") == 0 || strcmp(argv[7], "wall") == 0 || strcmp(argv[7], "count") == 0;
    int lock_ok = argc < 9 || strcmp(argv[8], "spin") == 0 || strcmp(argv[8], "pv") == 0;
    int session_ok = argc < 10 || strcmp(argv[9], "shared") == 0 || strcmp(argv[9], "own") == 0;
    int vmm_ok = argc < 11 || index_of(VMM_NAMES, 5, argv[10]) >= 0;
    int markers_ok = argc < 12 || index_of(MARKER_STYLES, 5, argv[11]) >= 0;
    if (argc < 7 || argc > 12 || !clock_ok || !lock_ok || !session_ok || !vmm_ok || !markers_ok) {
        fprintf(stderr, "usage: vmlab VMS VCPUS[,VCPUS...] BURST_US HOLD_US SLEEP_US DURATION_S [count|cpu|wall [spin|pv [shared|own [qemu|firecracker|cloud-hypervisor|crosvm|kvmtool [lab|bare|rtapp|free|none]]]]]\n");
        return 2;
    }
    const char *work_clock = argc >= 8 ? argv[7] : "count";
    const char *lock_mode = argc >= 9 ? argv[8] : "spin";
    const char *session = argc >= 10 ? argv[9] : "shared";
    const char *vmm_name = argc >= 11 ? argv[10] : "qemu";
    const char *marker_style = argc >= 12 ? argv[11] : "lab";
    int v_mm = index_of(VMM_NAMES, 5, vmm_name);
    int vms = atoi(argv[1]);
    char rate[32] = "0";
    if (strcmp(work_clock, "count") == 0) {
        calibrate();
        snprintf(rate, sizeof rate, "%.3f", loops_per_us);
    }
    pid_t pids[64];
    if (vms > 64) vms = 64;
    for (int v = 0; v < vms; v++) {
        char name[64];
        snprintf(name, sizeof name, v_mm == VMM_QEMU ? "guest=vm%d" : "vm%d", v);
        pids[v] = fork();
        if (pids[v] == 0) {
            char vcpus[16];
            snprintf(vcpus, sizeof vcpus, "%d", vcpus_of(argv[2], v));
            char *args[] = {(char *)VMM_ARGV0[v_mm], (char *)VMM_NAME_FLAG[v_mm], name, vcpus, argv[3], argv[4], argv[5], argv[6], "lab", (char *)work_clock, (char *)lock_mode, (char *)session, rate, (char *)vmm_name, (char *)marker_style, NULL};
            execv("/proc/self/exe", args);
            _exit(127);
        }
    }
    int rc = 0;
    for (int v = 0; v < vms; v++) {
        int st;
        while (waitpid(pids[v], &st, 0) < 0) {
            if (stop) for (int k = 0; k < vms; k++) kill(pids[k], SIGTERM);
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st)) rc = 1;
    }
    return rc;
}

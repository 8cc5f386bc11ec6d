/*
 * A fake libnvidia-ml.so.1 for governor's tests: the real nvidia-ml-py (pynvml) loads it and
 * runs its own marshalling, versioned symbols, buffer conventions and error mapping over it.
 *
 * Written for this project from the NVML C API as nvidia-ml-py calls it (function names,
 * argument order, struct layouts, return codes); no code from NVIDIA or anyone else.
 *
 * Configuration (read when nvmlInit takes the reference count from 0 to 1):
 *   FAKE_NVML_CONFIG  a text file of "key = value" lines ('#' starts a comment); an empty
 *       file is the two built-in GPUs. Unset, the library acts like a machine whose NVIDIA
 *       driver is not loaded (nvmlInit: NVML_ERROR_DRIVER_NOT_LOADED), so a test process that
 *       loaded the fake once does not show GPUs to tests that did not ask for them.
 *       gpus = 2                       number of GPUs (1..8), built-in A100-SXM4 then T4...
 *       init_error = 9                 nvmlInit fails with this nvmlReturn_t
 *       unprivileged = 1               setters return NVML_ERROR_NO_PERMISSION (non-root)
 *       not_supported = nvmlX,nvmlY    functions returning NVML_ERROR_NOT_SUPPORTED (all GPUs)
 *       gpu.N.name / uuid / serial / pci (domain:bus:device.function) / pci_device_id
 *       gpu.N.minor                    the /dev/nvidia<minor> number (default: N)
 *       gpu.N.clocks.<mem MHz> = lo:hi:step   one line per memory clock (first line replaces
 *                                             the built-in table)
 *       gpu.N.power_mw, gpu.N.instant_mw, gpu.N.average_mw (-1: field not available)
 *       gpu.N.energy_mj (counter at the state's epoch), gpu.N.temperature_c,
 *       gpu.N.utilisation_pct, gpu.N.reasons, gpu.N.graphics_mhz (unlocked clock)
 *       gpu.N.power_limits = min:max:default   (mW)
 *       gpu.N.mig = MIG-uuid,MIG-uuid     MIG mode on, with these instances
 *       gpu.N.not_supported = nvmlX,...
 *   FAKE_NVML_FAULTS  a text file of faults, read again on every call on a GPU, so a test can
 *       switch them on and off while a process runs (absent or empty: no fault):
 *           gpu.N.lost = 1             every call on GPU N returns NVML_ERROR_GPU_IS_LOST
 *                                      (the GPU fell off the bus; 0 or no line: it is back)
 *           gpu.N.flaky = K[:code]     every K-th call on GPU N (counted in each process)
 *                                      returns code (default NVML_ERROR_TIMEOUT)
 *   <FAKE_NVML_STATE>.hang<N>  while this file exists, every call on GPU N blocks (a wedged
 *       driver); removing it lets the calls finish. Other GPUs are answered meanwhile, unless
 *       the file's first word is "global" (then the hung call holds the library lock).
 *   FAKE_NVML_STATE   a text file holding what setters change (locked clocks, power limits)
 *       and the energy epoch, shared by every process under flock(2):
 *           fake-nvml-state 1
 *           epoch_ms 1764000000000
 *           gpu <uuid> gpu_locked=<min>,<max> mem_locked=<min>,<max> power_limit_mw=<mW> writes=<n>
 *       (0,0 = not locked). Without it the state lives in this process only.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_UNKNOWN = 999,
};

enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
enum { NVML_TEMPERATURE_GPU = 0 };
enum { NVML_VALUE_TYPE_UNSIGNED_INT = 1 };
enum { NVML_FI_DEV_POWER_AVERAGE = 185, NVML_FI_DEV_POWER_INSTANT = 186 };

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

#define MAX_GPUS 8
#define MAX_MIG 7
#define MAX_MEM 6
#define TEXT 96

struct fake_gpu {
    char name[TEXT], uuid[TEXT], serial[30];
    unsigned int domain, bus, dev, pci_device_id, pci_subsystem_id;
    unsigned int minor; /* /dev/nvidia<minor>: what Slurm's gres.conf File= names */
    int n_mem;
    unsigned int mem[MAX_MEM], gfx_lo[MAX_MEM], gfx_hi[MAX_MEM], gfx_step[MAX_MEM];
    int clocks_from_config;
    unsigned int power_mw, graphics_mhz, temperature_c, util_pct;
    int instant_mw, average_mw; /* -1: the field is not available */
    unsigned long long energy_mj, reasons, mem_total;
    unsigned int limit_min_mw, limit_max_mw, limit_default_mw;
    int n_mig;
    char mig_uuid[MAX_MIG][TEXT];
    char not_supported[1024];
    unsigned int profiles_requested[8], profiles_enforced[8]; /* workload power profile masks */
    int has_profiles;                                          /* 0: NOT_SUPPORTED (pre-Blackwell) */
};

struct gpu_state {
    unsigned int gpu_lo, gpu_hi, mem_lo, mem_hi, limit_mw, writes;
};

/* A handle is a pointer into this table: [gpu][0] is the GPU, [gpu][1 + k] its k-th MIG. */
struct nvmlDevice_st {
    int gpu, mig;
};
typedef struct nvmlDevice_st *nvmlDevice_t;

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_init_count;
static int g_ngpus;
static int g_unprivileged;
static int g_init_error;
static char g_not_supported[1024];
static struct fake_gpu g_gpu[MAX_GPUS];
static struct gpu_state g_state[MAX_GPUS];
static long long g_epoch_ms;
static struct nvmlDevice_st g_handles[MAX_GPUS][1 + MAX_MIG];

#define LOCK() pthread_mutex_lock(&g_mutex)
#define UNLOCK() pthread_mutex_unlock(&g_mutex)
#define RETURN(code)      \
    do {                  \
        nvmlReturn_t r__ = (code); \
        UNLOCK();         \
        return r__;       \
    } while (0)

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* -- configuration -------------------------------------------------------------------------- */
static void set_clocks(struct fake_gpu *g, int i, unsigned mem, unsigned lo, unsigned hi, unsigned step) {
    g->mem[i] = mem;
    g->gfx_lo[i] = lo;
    g->gfx_hi[i] = hi;
    g->gfx_step[i] = step;
}

static void default_gpu(int i, struct fake_gpu *g) {
    memset(g, 0, sizeof *g);
    g->domain = 0;
    g->instant_mw = -1;
    g->average_mw = -1;
    g->reasons = 0x1 | 0x4; /* idle, sw power cap */
    g->temperature_c = 33 + i;
    g->util_pct = 5;
    g->energy_mj = 123456789ULL + 1000000ULL * i;
    g->minor = (unsigned)i;
    snprintf(g->serial, sizeof g->serial, "13200000000%02d", i + 1);
    if (i % 2 == 0) {
        snprintf(g->name, TEXT, "NVIDIA A100-SXM4-80GB");
        snprintf(g->uuid, TEXT, "GPU-a100%04x-2222-3333-4444-555555555555", i);
        g->bus = 0x07 + 0x40 * i;
        g->pci_device_id = 0x20B210DE;
        g->pci_subsystem_id = 0x147F10DE;
        g->n_mem = 1;
        set_clocks(g, 0, 1593, 210, 1410, 15);
        g->graphics_mhz = 1410;
        g->power_mw = 67000;
        g->instant_mw = 71000;
        g->average_mw = 69000;
        g->limit_min_mw = 100000;
        g->limit_max_mw = 400000;
        g->limit_default_mw = 400000;
        g->mem_total = 80ULL << 30;
    } else {
        snprintf(g->name, TEXT, "Tesla T4");
        snprintf(g->uuid, TEXT, "GPU-7e540%03x-aaaa-bbbb-cccc-dddddddddddd", i);
        g->bus = 0x3B + 0x40 * (i - 1);
        g->pci_device_id = 0x1EB810DE;
        g->pci_subsystem_id = 0x12A210DE;
        g->n_mem = 2;
        set_clocks(g, 0, 5001, 300, 1590, 15);
        set_clocks(g, 1, 405, 300, 585, 15);
        g->graphics_mhz = 1590;
        g->power_mw = 27000;
        g->limit_min_mw = 60000;
        g->limit_max_mw = 70000;
        g->limit_default_mw = 70000;
        g->mem_total = 15ULL << 30;
    }
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1])) *--end = '\0';
    return s;
}

static void copy_text(char *dst, size_t size, const char *src) { snprintf(dst, size, "%s", src); }

static int parse_pci(const char *text, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *fn) {
    int used = -1;
    *domain = 0;
    *fn = 0;
    if (sscanf(text, "%x:%x:%x.%x%n", domain, bus, dev, fn, &used) == 4 && text[used] == '\0')
        return 1;
    used = -1;
    *fn = 0;
    if (sscanf(text, "%x:%x:%x%n", domain, bus, dev, &used) == 3 && text[used] == '\0') return 1;
    used = -1;
    *domain = 0;
    if (sscanf(text, "%x:%x.%x%n", bus, dev, fn, &used) == 3 && text[used] == '\0') return 1;
    return 0;
}

static void config_line(char *key, char *value) {
    if (strcmp(key, "gpus") == 0) {
        int n = atoi(value);
        g_ngpus = n < 0 ? 0 : (n > MAX_GPUS ? MAX_GPUS : n);
        return;
    }
    if (strcmp(key, "init_error") == 0) { g_init_error = atoi(value); return; }
    if (strcmp(key, "unprivileged") == 0) { g_unprivileged = atoi(value); return; }
    if (strcmp(key, "not_supported") == 0) {
        copy_text(g_not_supported, sizeof g_not_supported, value);
        return;
    }
    int n = -1, used = 0;
    if (sscanf(key, "gpu.%d.%n", &n, &used) != 1 || used == 0 || n < 0 || n >= MAX_GPUS) {
        fprintf(stderr, "fake-nvml: unknown config key %s\n", key);
        return;
    }
    struct fake_gpu *g = &g_gpu[n];
    const char *k = key + used;
    unsigned a, b, c, d;
    if (strcmp(k, "name") == 0) copy_text(g->name, TEXT, value);
    else if (strcmp(k, "uuid") == 0) copy_text(g->uuid, TEXT, value);
    else if (strcmp(k, "serial") == 0) copy_text(g->serial, sizeof g->serial, value);
    else if (strcmp(k, "pci") == 0 && parse_pci(value, &a, &b, &c, &d)) {
        g->domain = a;
        g->bus = b;
        g->dev = c;
    } else if (strcmp(k, "minor") == 0) g->minor = (unsigned)strtoul(value, NULL, 0);
    else if (strcmp(k, "pci_device_id") == 0) g->pci_device_id = (unsigned)strtoul(value, NULL, 0);
    else if (strncmp(k, "clocks.", 7) == 0) {
        unsigned mem = (unsigned)strtoul(k + 7, NULL, 10);
        if (!g->clocks_from_config) {
            g->clocks_from_config = 1;
            g->n_mem = 0;
        }
        if (g->n_mem < MAX_MEM && sscanf(value, "%u:%u:%u", &a, &b, &c) == 3 && c > 0) {
            set_clocks(g, g->n_mem, mem, a, b, c);
            g->n_mem++;
        }
    } else if (strcmp(k, "power_mw") == 0) g->power_mw = (unsigned)strtoul(value, NULL, 0);
    else if (strcmp(k, "instant_mw") == 0) g->instant_mw = atoi(value);
    else if (strcmp(k, "average_mw") == 0) g->average_mw = atoi(value);
    else if (strcmp(k, "energy_mj") == 0) g->energy_mj = strtoull(value, NULL, 0);
    else if (strcmp(k, "temperature_c") == 0) g->temperature_c = (unsigned)atoi(value);
    else if (strcmp(k, "utilisation_pct") == 0) g->util_pct = (unsigned)atoi(value);
    else if (strcmp(k, "reasons") == 0) g->reasons = strtoull(value, NULL, 0);
    else if (strcmp(k, "graphics_mhz") == 0) g->graphics_mhz = (unsigned)atoi(value);
    else if (strcmp(k, "power_limits") == 0 && sscanf(value, "%u:%u:%u", &a, &b, &c) == 3) {
        g->limit_min_mw = a;
        g->limit_max_mw = b;
        g->limit_default_mw = c;
    } else if (strcmp(k, "mig") == 0) {
        g->n_mig = 0;
        char *save = NULL;
        for (char *tok = strtok_r(value, ",", &save); tok && g->n_mig < MAX_MIG;
             tok = strtok_r(NULL, ",", &save)) {
            copy_text(g->mig_uuid[g->n_mig++], TEXT, trim(tok));
        }
    } else if (strcmp(k, "not_supported") == 0) copy_text(g->not_supported, sizeof g->not_supported, value);
    else if (strcmp(k, "power_profiles") == 0) {
        /* "requested_ids/enforced_ids", each a comma list of NVML_POWER_PROFILE_* numbers */
        char *slash = strchr(value, '/');
        g->has_profiles = 1;
        memset(g->profiles_requested, 0, sizeof g->profiles_requested);
        memset(g->profiles_enforced, 0, sizeof g->profiles_enforced);
        for (int part = 0; part < 2; part++) {
            char *text = part == 0 ? value : (slash ? slash + 1 : NULL);
            if (part == 0 && slash) *slash = '\0';
            if (text == NULL) break;
            unsigned int *mask = part == 0 ? g->profiles_requested : g->profiles_enforced;
            char *save = NULL;
            for (char *tok = strtok_r(text, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                unsigned int id = (unsigned)atoi(trim(tok));
                if (*trim(tok) && id < 255) mask[id / 32] |= 1u << (id % 32);
            }
        }
    } else fprintf(stderr, "fake-nvml: unknown or malformed config line %s = %s\n", key, value);
}

static void load_config(void) {
    g_ngpus = 2;
    g_unprivileged = 0;
    g_init_error = 0;
    g_not_supported[0] = '\0';
    for (int i = 0; i < MAX_GPUS; i++) {
        default_gpu(i, &g_gpu[i]);
        for (int k = 0; k <= MAX_MIG; k++) {
            g_handles[i][k].gpu = i;
            g_handles[i][k].mig = k - 1;
        }
    }
    const char *path = getenv("FAKE_NVML_CONFIG");
    if (!path || !*path) {
        g_init_error = NVML_ERROR_DRIVER_NOT_LOADED;
        return;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "fake-nvml: cannot read FAKE_NVML_CONFIG %s: %s\n", path, strerror(errno));
        g_init_error = NVML_ERROR_UNKNOWN;
        return;
    }
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        config_line(trim(line), trim(eq + 1));
    }
    fclose(f);
}

static int listed(const char *list, const char *fn) {
    size_t n = strlen(fn);
    for (const char *p = list; (p = strstr(p, fn)) != NULL; p += n) {
        int starts = p == list || p[-1] == ',' || isspace((unsigned char)p[-1]);
        int ends = p[n] == '\0' || p[n] == ',' || isspace((unsigned char)p[n]);
        if (starts && ends) return 1;
    }
    return 0;
}

static int unsupported(int gpu, const char *fn) {
    return listed(g_not_supported, fn) || listed(g_gpu[gpu].not_supported, fn);
}

/* -- state shared between processes ------------------------------------------------------------- */
static void default_state(void) {
    for (int i = 0; i < MAX_GPUS; i++) {
        memset(&g_state[i], 0, sizeof g_state[i]);
        g_state[i].limit_mw = g_gpu[i].limit_default_mw;
    }
}

static void parse_state(const char *text) {
    default_state();
    const char *line = text;
    while (line && *line) {
        char uuid[TEXT];
        struct gpu_state s;
        long long epoch;
        if (sscanf(line, "epoch_ms %lld", &epoch) == 1) {
            g_epoch_ms = epoch;
        } else if (sscanf(line, "gpu %95s gpu_locked=%u,%u mem_locked=%u,%u power_limit_mw=%u writes=%u",
                          uuid, &s.gpu_lo, &s.gpu_hi, &s.mem_lo, &s.mem_hi, &s.limit_mw,
                          &s.writes) == 7) {
            for (int i = 0; i < g_ngpus; i++)
                if (strcmp(g_gpu[i].uuid, uuid) == 0) g_state[i] = s;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
}

/* Open and flock the state file, and load it. Returns the fd, -1 without a state file. */
static int state_open(int exclusive) {
    const char *path = getenv("FAKE_NVML_STATE");
    if (!path || !*path) return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "fake-nvml: cannot open FAKE_NVML_STATE %s: %s\n", path, strerror(errno));
        return -1;
    }
    flock(fd, exclusive ? LOCK_EX : LOCK_SH);
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        char *buf = calloc(1, (size_t)st.st_size + 1);
        if (buf && pread(fd, buf, (size_t)st.st_size, 0) == st.st_size) parse_state(buf);
        free(buf);
    } else {
        default_state();
    }
    return fd;
}

static void state_write(int fd) {
    if (fd < 0) return;
    char buf[4096];
    int len = snprintf(buf, sizeof buf, "fake-nvml-state 1\nepoch_ms %lld\n", g_epoch_ms);
    for (int i = 0; i < g_ngpus && len < (int)sizeof buf; i++) {
        const struct gpu_state *s = &g_state[i];
        len += snprintf(buf + len, sizeof buf - (size_t)len,
                        "gpu %s gpu_locked=%u,%u mem_locked=%u,%u power_limit_mw=%u writes=%u\n",
                        g_gpu[i].uuid, s->gpu_lo, s->gpu_hi, s->mem_lo, s->mem_hi, s->limit_mw,
                        s->writes);
    }
    if (ftruncate(fd, 0) == 0 && pwrite(fd, buf, (size_t)len, 0) == len) fsync(fd);
}

static void state_close(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd);
}

/* Refresh g_state from the file (if any) for a read. */
static void state_refresh(void) { state_close(state_open(0)); }

/* -- injected faults (FAKE_NVML_FAULTS) --------------------------------------------------------- */
static unsigned long g_calls[MAX_GPUS]; /* calls on each GPU in this process, for gpu.N.flaky */

/* The fault of this call on GPU gpu (NVML_SUCCESS: none). The file is small and read on every
 * call, so a fault switched on or off by the test takes effect on the next call. */
/* A wedged GPU: while the file <FAKE_NVML_STATE>.hang<N> exists, every call on GPU N blocks
 * (polled every 5 ms), as a real driver does on a GPU in a bad state. The library lock is let
 * go while it waits, so other GPUs' calls in this process are answered; a file whose first
 * word is "global" keeps the lock instead, so every call in this process blocks behind it (a
 * driver whose hung call holds a library-wide lock). Called with the library lock held. */
static void wait_while_hung(int gpu) {
    const char *state = getenv("FAKE_NVML_STATE");
    if (!state || !*state || gpu < 0 || gpu >= MAX_GPUS) return;
    char path[4096];
    snprintf(path, sizeof path, "%s.hang%d", state, gpu);
    for (;;) {
        FILE *f = fopen(path, "r");
        if (!f) return;
        char word[16] = "";
        int global = fscanf(f, "%15s", word) == 1 && strcmp(word, "global") == 0;
        fclose(f);
        if (!global) UNLOCK();
        usleep(5000);
        if (!global) LOCK();
    }
}

static nvmlReturn_t injected_fault(int gpu) {
    wait_while_hung(gpu);
    const char *path = getenv("FAKE_NVML_FAULTS");
    if (!path || !*path || gpu < 0 || gpu >= MAX_GPUS) return NVML_SUCCESS;
    FILE *f = fopen(path, "r");
    if (!f) return NVML_SUCCESS;
    int lost = 0;
    unsigned long every = 0;
    int code = NVML_ERROR_TIMEOUT;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        int n = -1, used = 0;
        if (sscanf(line, " gpu.%d.%n", &n, &used) != 1 || n != gpu || used == 0) continue;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        if (strncmp(line + used, "lost", 4) == 0) lost = atoi(eq + 1);
        else if (strncmp(line + used, "flaky", 5) == 0) {
            char *colon = strchr(eq + 1, ':');
            every = strtoul(eq + 1, NULL, 10);
            if (colon) code = atoi(colon + 1);
        }
    }
    fclose(f);
    if (lost) return NVML_ERROR_GPU_IS_LOST;
    g_calls[gpu]++;
    if (every > 0 && g_calls[gpu] % every == 0) return code;
    return NVML_SUCCESS;
}

/* -- argument checks ---------------------------------------------------------------------------- */
static nvmlReturn_t check_device(nvmlDevice_t device, int *gpu, int *mig) {
    if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    uintptr_t p = (uintptr_t)device, base = (uintptr_t)&g_handles[0][0];
    if (device == NULL || p < base || p >= base + sizeof g_handles ||
        (p - base) % sizeof(struct nvmlDevice_st) != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->gpu >= g_ngpus || device->mig >= g_gpu[device->gpu].n_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *gpu = device->gpu;
    *mig = device->mig;
    return injected_fault(device->gpu);
}

/* A GPU handle (not a MIG instance) for function fn. */
static nvmlReturn_t check_gpu(nvmlDevice_t device, const char *fn, int *gpu) {
    int mig;
    nvmlReturn_t r = check_device(device, gpu, &mig);
    if (r != NVML_SUCCESS) return r;
    if (mig >= 0 || unsupported(*gpu, fn)) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

static nvmlReturn_t put_text(char *buf, unsigned int length, const char *text) {
    if (buf == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

static int in_graphics_table(const struct fake_gpu *g, unsigned mhz) {
    for (int m = 0; m < g->n_mem; m++)
        if (mhz >= g->gfx_lo[m] && mhz <= g->gfx_hi[m] && (mhz - g->gfx_lo[m]) % g->gfx_step[m] == 0)
            return 1;
    return 0;
}

static int mem_index(const struct fake_gpu *g, unsigned mhz) {
    for (int m = 0; m < g->n_mem; m++)
        if (g->mem[m] == mhz) return m;
    return -1;
}

static unsigned top_mem(const struct fake_gpu *g) {
    unsigned top = 0;
    for (int m = 0; m < g->n_mem; m++)
        if (g->mem[m] > top) top = g->mem[m];
    return top;
}

/* -- init and errors ---------------------------------------------------------------------------- */
static nvmlReturn_t do_init(void) {
    LOCK();
    if (g_init_count == 0) {
        load_config();
        if (g_init_error) RETURN(g_init_error);
        g_epoch_ms = now_ms();
        default_state();
        int fd = state_open(1);
        if (fd >= 0) {
            state_write(fd); /* fills in new GPUs and the epoch of a new file */
            state_close(fd);
        }
    }
    g_init_count++;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlInit(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return do_init();
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    LOCK();
    if (g_init_count <= 0) RETURN(NVML_ERROR_UNINITIALIZED);
    g_init_count--;
    RETURN(NVML_SUCCESS);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_NOT_READY: return "System is not ready";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

/* Marks this library as the fake, so a test can tell it from a real driver. */
EXPORT int fakeNvmlIsFake(void) { return 1; }

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    LOCK();
    if (g_init_count <= 0) RETURN(NVML_ERROR_UNINITIALIZED);
    RETURN(put_text(version, length, "550.54.15"));
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    LOCK();
    if (g_init_count <= 0) RETURN(NVML_ERROR_UNINITIALIZED);
    RETURN(put_text(version, length, "12.550.54.15"));
}

/* -- finding devices ---------------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    LOCK();
    if (g_init_count <= 0) RETURN(NVML_ERROR_UNINITIALIZED);
    if (count == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *count = (unsigned)g_ngpus;
    RETURN(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    LOCK();
    if (g_init_count <= 0) RETURN(NVML_ERROR_UNINITIALIZED);
    if (device == NULL || index >= (unsigned)g_ngpus) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (injected_fault((int)index) == NVML_ERROR_GPU_IS_LOST) RETURN(NVML_ERROR_GPU_IS_LOST);
    *device = &g_handles[index][0];
    RETURN(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    LOCK();
    if (g_init_count <= 0) RETURN(NVML_ERROR_UNINITIALIZED);
    if (uuid == NULL || device == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < g_ngpus; i++) {
        if (strcmp(g_gpu[i].uuid, uuid) == 0) {
            *device = &g_handles[i][0];
            RETURN(NVML_SUCCESS);
        }
        for (int k = 0; k < g_gpu[i].n_mig; k++) {
            if (strcmp(g_gpu[i].mig_uuid[k], uuid) == 0) {
                *device = &g_handles[i][1 + k];
                RETURN(NVML_SUCCESS);
            }
        }
    }
    RETURN(NVML_ERROR_NOT_FOUND);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    LOCK();
    if (g_init_count <= 0) RETURN(NVML_ERROR_UNINITIALIZED);
    if (pciBusId == NULL || device == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    unsigned domain, bus, dev, fn;
    if (!parse_pci(pciBusId, &domain, &bus, &dev, &fn)) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < g_ngpus; i++) {
        const struct fake_gpu *g = &g_gpu[i];
        if (g->domain == domain && g->bus == bus && g->dev == dev && fn == 0) {
            *device = &g_handles[i][0];
            RETURN(NVML_SUCCESS);
        }
    }
    RETURN(NVML_ERROR_NOT_FOUND);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    LOCK();
    int gpu, mig;
    nvmlReturn_t r = check_device(device, &gpu, &mig);
    if (r != NVML_SUCCESS) RETURN(r);
    if (index == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (mig >= 0) RETURN(NVML_ERROR_NOT_SUPPORTED);
    *index = (unsigned)gpu;
    RETURN(NVML_SUCCESS);
}

/* nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) */
EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetMinorNumber", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (minorNumber == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *minorNumber = g_gpu[gpu].minor;
    RETURN(NVML_SUCCESS);
}

/* -- MIG ---------------------------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
    LOCK();
    int gpu, mig;
    nvmlReturn_t r = check_device(device, &gpu, &mig);
    if (r != NVML_SUCCESS) RETURN(r);
    if (isMigDevice == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *isMigDevice = mig >= 0;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                 nvmlDevice_t *device) {
    LOCK();
    int gpu, mig;
    nvmlReturn_t r = check_device(migDevice, &gpu, &mig);
    if (r != NVML_SUCCESS) RETURN(r);
    if (device == NULL || mig < 0) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *device = &g_handles[gpu][0];
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetMigMode", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (current == NULL || pending == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *current = *pending = g_gpu[gpu].n_mig > 0;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetMaxMigDeviceCount", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (count == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *count = MAX_MIG;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                        nvmlDevice_t *migDevice) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetMigDeviceHandleByIndex", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (migDevice == NULL || index >= MAX_MIG) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (index >= (unsigned)g_gpu[gpu].n_mig) RETURN(NVML_ERROR_NOT_FOUND);
    *migDevice = &g_handles[gpu][1 + index];
    RETURN(NVML_SUCCESS);
}

/* -- identity ----------------------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    LOCK();
    int gpu, mig;
    nvmlReturn_t r = check_device(device, &gpu, &mig);
    if (r != NVML_SUCCESS) RETURN(r);
    if (unsupported(gpu, "nvmlDeviceGetName")) RETURN(NVML_ERROR_NOT_SUPPORTED);
    char text[TEXT + 16];
    snprintf(text, sizeof text, "%s%s", g_gpu[gpu].name, mig >= 0 ? " MIG 1g.10gb" : "");
    RETURN(put_text(name, length, text));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    LOCK();
    int gpu, mig;
    nvmlReturn_t r = check_device(device, &gpu, &mig);
    if (r != NVML_SUCCESS) RETURN(r);
    if (unsupported(gpu, "nvmlDeviceGetUUID")) RETURN(NVML_ERROR_NOT_SUPPORTED);
    RETURN(put_text(uuid, length, mig >= 0 ? g_gpu[gpu].mig_uuid[mig] : g_gpu[gpu].uuid));
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetSerial", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    RETURN(put_text(serial, length, g_gpu[gpu].serial));
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    LOCK();
    int gpu, mig;
    nvmlReturn_t r = check_device(device, &gpu, &mig);
    if (r != NVML_SUCCESS) RETURN(r);
    if (pci == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (unsupported(gpu, "nvmlDeviceGetPciInfo_v3")) RETURN(NVML_ERROR_NOT_SUPPORTED);
    const struct fake_gpu *g = &g_gpu[gpu];
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", g->domain, g->bus, g->dev);
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", g->domain, g->bus, g->dev);
    pci->domain = g->domain;
    pci->bus = g->bus;
    pci->device = g->dev;
    pci->pciDeviceId = g->pci_device_id;
    pci->pciSubSystemId = g->pci_subsystem_id;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    LOCK();
    int gpu, mig;
    nvmlReturn_t r = check_device(device, &gpu, &mig);
    if (r != NVML_SUCCESS) RETURN(r);
    if (memory == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (unsupported(gpu, "nvmlDeviceGetMemoryInfo")) RETURN(NVML_ERROR_NOT_SUPPORTED);
    unsigned long long total = g_gpu[gpu].mem_total;
    if (mig >= 0) total /= 8; /* a 1g slice */
    memory->total = total;
    memory->used = total / 100;
    memory->free = total - memory->used;
    RETURN(NVML_SUCCESS);
}

/* -- telemetry ---------------------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetPowerUsage", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (power == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *power = g_gpu[gpu].power_mw;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetTotalEnergyConsumption", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (energy == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    state_refresh(); /* the epoch */
    long long elapsed_ms = now_ms() - g_epoch_ms;
    if (elapsed_ms < 0) elapsed_ms = 0;
    *energy = g_gpu[gpu].energy_mj + (unsigned long long)elapsed_ms * g_gpu[gpu].power_mw / 1000ULL;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetFieldValues", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (values == NULL || valuesCount <= 0) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    long long stamp_us = now_ms() * 1000;
    for (int i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *v = &values[i];
        int mw = -1;
        if (v->fieldId == NVML_FI_DEV_POWER_INSTANT) mw = g_gpu[gpu].instant_mw;
        else if (v->fieldId == NVML_FI_DEV_POWER_AVERAGE) mw = g_gpu[gpu].average_mw;
        v->timestamp = stamp_us;
        v->latencyUsec = 0;
        if (mw < 0) {
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        v->nvmlReturn = NVML_SUCCESS;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->value.ullVal = 0;
        v->value.uiVal = (unsigned)mw;
    }
    RETURN(NVML_SUCCESS);
}

static unsigned current_mem(int gpu) {
    const struct gpu_state *s = &g_state[gpu];
    return s->mem_hi ? s->mem_hi : top_mem(&g_gpu[gpu]);
}

static unsigned current_graphics(int gpu) {
    const struct fake_gpu *g = &g_gpu[gpu];
    const struct gpu_state *s = &g_state[gpu];
    unsigned mhz = g->graphics_mhz;
    int m = mem_index(g, current_mem(gpu));
    if (m >= 0 && mhz > g->gfx_hi[m]) mhz = g->gfx_hi[m];
    if (s->gpu_hi) {
        if (mhz > s->gpu_hi) mhz = s->gpu_hi;
        if (mhz < s->gpu_lo) mhz = s->gpu_lo;
    }
    return mhz;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetClockInfo", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (clock == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    state_refresh();
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM: *clock = current_graphics(gpu); break;
    case NVML_CLOCK_MEM: *clock = current_mem(gpu); break;
    case NVML_CLOCK_VIDEO: *clock = current_graphics(gpu) * 9 / 10; break;
    default: RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetMaxClockInfo", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (clock == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fake_gpu *g = &g_gpu[gpu];
    unsigned top = 0;
    for (int m = 0; m < g->n_mem; m++)
        if (g->gfx_hi[m] > top) top = g->gfx_hi[m];
    if (type == NVML_CLOCK_MEM) *clock = top_mem(g);
    else if (type == NVML_CLOCK_GRAPHICS || type == NVML_CLOCK_SM) *clock = top;
    else RETURN(NVML_ERROR_INVALID_ARGUMENT);
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, int type, unsigned int *clock) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetDefaultApplicationsClock", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (clock == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fake_gpu *g = &g_gpu[gpu];
    if (type == NVML_CLOCK_MEM) *clock = top_mem(g);
    else if (type == NVML_CLOCK_GRAPHICS || type == NVML_CLOCK_SM) *clock = g->graphics_mhz;
    else RETURN(NVML_ERROR_INVALID_ARGUMENT);
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetTemperature", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (temp == NULL || sensor != NVML_TEMPERATURE_GPU) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *temp = g_gpu[gpu].temperature_c;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetUtilizationRates", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (util == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    util->gpu = g_gpu[gpu].util_pct;
    util->memory = g_gpu[gpu].util_pct / 2;
    RETURN(NVML_SUCCESS);
}

static nvmlReturn_t reasons(nvmlDevice_t device, const char *fn, unsigned long long *out) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, fn, &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (out == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    state_refresh();
    unsigned long long bits = g_gpu[gpu].reasons;
    if (g_state[gpu].gpu_hi && g_state[gpu].gpu_hi < g_gpu[gpu].graphics_mhz) bits |= 0x2;
    *out = bits;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *r) {
    return reasons(device, "nvmlDeviceGetCurrentClocksEventReasons", r);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r) {
    return reasons(device, "nvmlDeviceGetCurrentClocksThrottleReasons", r);
}

/* -- supported clocks: count in/out, INSUFFICIENT_SIZE with the needed count ------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int *count,
                                                       unsigned int *clocksMHz) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetSupportedMemoryClocks", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (count == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fake_gpu *g = &g_gpu[gpu];
    unsigned n = (unsigned)g->n_mem;
    if (*count < n || (n > 0 && clocksMHz == NULL)) {
        *count = n;
        RETURN(n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
    }
    /* highest first, as the driver lists them */
    unsigned sorted[MAX_MEM];
    memcpy(sorted, g->mem, sizeof sorted);
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = i + 1; j < n; j++)
            if (sorted[j] > sorted[i]) {
                unsigned t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    memcpy(clocksMHz, sorted, n * sizeof(unsigned));
    *count = n;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memoryClockMHz,
                                                         unsigned int *count, unsigned int *clocksMHz) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetSupportedGraphicsClocks", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (count == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const struct fake_gpu *g = &g_gpu[gpu];
    int m = mem_index(g, memoryClockMHz);
    if (m < 0) RETURN(NVML_ERROR_NOT_FOUND);
    unsigned n = (g->gfx_hi[m] - g->gfx_lo[m]) / g->gfx_step[m] + 1;
    if (*count < n || clocksMHz == NULL) {
        *count = n;
        RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned i = 0; i < n; i++) clocksMHz[i] = g->gfx_lo[m] + (n - 1 - i) * g->gfx_step[m];
    *count = n;
    RETURN(NVML_SUCCESS);
}

/* -- power limits (mW) -------------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *minLimit,
                                                                 unsigned int *maxLimit) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetPowerManagementLimitConstraints", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (minLimit == NULL || maxLimit == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *minLimit = g_gpu[gpu].limit_min_mw;
    *maxLimit = g_gpu[gpu].limit_max_mw;
    RETURN(NVML_SUCCESS);
}

/* nvmlWorkloadPowerProfileCurrentProfiles_v1_t: version, then three 255-bit masks. */
typedef struct {
    unsigned int version;
    unsigned int perfProfilesMask[8], requestedProfilesMask[8], enforcedProfilesMask[8];
} nvmlWorkloadPowerProfileCurrentProfiles_v1_t;
#define NVML_WORKLOAD_CURRENT_PROFILES_V1 0x1000064u

EXPORT nvmlReturn_t nvmlDeviceWorkloadPowerProfileGetCurrentProfiles(
    nvmlDevice_t device, nvmlWorkloadPowerProfileCurrentProfiles_v1_t *current) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceWorkloadPowerProfileGetCurrentProfiles", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (current == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (current->version != NVML_WORKLOAD_CURRENT_PROFILES_V1) RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (!g_gpu[gpu].has_profiles) RETURN(NVML_ERROR_NOT_SUPPORTED);
    for (int i = 0; i < 8; i++) {
        current->perfProfilesMask[i] = 0xffffffffu;
        current->requestedProfilesMask[i] = g_gpu[gpu].profiles_requested[i];
        current->enforcedProfilesMask[i] = g_gpu[gpu].profiles_enforced[i];
    }
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int *limit) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetPowerManagementDefaultLimit", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (limit == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *limit = g_gpu[gpu].limit_default_mw;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetPowerManagementLimit", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (limit == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    state_refresh();
    *limit = g_state[gpu].limit_mw;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    LOCK();
    int gpu;
    nvmlReturn_t r = check_gpu(device, "nvmlDeviceGetEnforcedPowerLimit", &gpu);
    if (r != NVML_SUCCESS) RETURN(r);
    if (limit == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    state_refresh();
    *limit = g_state[gpu].limit_mw;
    RETURN(NVML_SUCCESS);
}

/* -- setters: handle, then permission, then values; every success is written to the state ------ */
#define BEGIN_SET(fn)                                                   \
    LOCK();                                                             \
    int gpu;                                                            \
    nvmlReturn_t r = check_gpu(device, fn, &gpu);                       \
    if (r != NVML_SUCCESS) RETURN(r);                                   \
    if (g_unprivileged) RETURN(NVML_ERROR_NO_PERMISSION);               \
    const struct fake_gpu *g = &g_gpu[gpu];                             \
    (void)g;

#define COMMIT(change)                 \
    do {                               \
        int fd = state_open(1);        \
        change;                        \
        g_state[gpu].writes++;         \
        state_write(fd);               \
        state_close(fd);               \
    } while (0)

EXPORT nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int minGpuClockMHz,
                                                 unsigned int maxGpuClockMHz) {
    BEGIN_SET("nvmlDeviceSetGpuLockedClocks");
    if (minGpuClockMHz > maxGpuClockMHz || !in_graphics_table(g, minGpuClockMHz) ||
        !in_graphics_table(g, maxGpuClockMHz))
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    COMMIT((g_state[gpu].gpu_lo = minGpuClockMHz, g_state[gpu].gpu_hi = maxGpuClockMHz));
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
    BEGIN_SET("nvmlDeviceResetGpuLockedClocks");
    COMMIT((g_state[gpu].gpu_lo = 0, g_state[gpu].gpu_hi = 0));
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned int minMemClockMHz,
                                                    unsigned int maxMemClockMHz) {
    BEGIN_SET("nvmlDeviceSetMemoryLockedClocks");
    if (minMemClockMHz > maxMemClockMHz || mem_index(g, minMemClockMHz) < 0 ||
        mem_index(g, maxMemClockMHz) < 0)
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    COMMIT((g_state[gpu].mem_lo = minMemClockMHz, g_state[gpu].mem_hi = maxMemClockMHz));
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device) {
    BEGIN_SET("nvmlDeviceResetMemoryLockedClocks");
    COMMIT((g_state[gpu].mem_lo = 0, g_state[gpu].mem_hi = 0));
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit) {
    BEGIN_SET("nvmlDeviceSetPowerManagementLimit");
    if (limit < g->limit_min_mw || limit > g->limit_max_mw) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    COMMIT(g_state[gpu].limit_mw = limit);
    RETURN(NVML_SUCCESS);
}

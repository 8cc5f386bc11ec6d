// The host side of the CPU emulation: a command loop on stdin (one command a line, one reply
// a line on stdout) over the configurations compiled into this binary (emu_entries[]).
//   alloc ID BYTES ITEMSIZE | write ID PATH | read ID PATH | copy DST SRC | free ID
//   launch NAME GX GY GZ BX BY BZ ORDER SEED NARGS (p ID | i INT | d REAL)...
// ORDER: 0 forward, 1 reversed, 2 shuffled by SEED (a new shuffle at every barrier).
// Each array has guards on both sides filled with signalling NaNs of its item size: an
// out-of-bounds read spoils the result, and a launch that writes into a guard (arithmetic
// quiets a NaN, so even a NaN written there differs) fails.
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "cuda_cpu.h"

extern const emu::Entry emu_entries[];
extern const int emu_entry_count;

uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace {

const size_t kGuard = 4096;
const size_t kStack = 256 * 1024;

enum State { kRunnable, kAtBarrier, kDone };

struct Fiber {
    void* sp = nullptr;
    std::unique_ptr<char[]> stack;  // not zeroed: pages are touched only as deep as used
    State state = kRunnable;
    uint3 idx{0, 0, 0};
};

void* scheduler_sp = nullptr;
Fiber* current = nullptr;
const emu::Arg* current_args = nullptr;
emu::Call current_call = nullptr;
std::vector<Fiber> fibers;

}  // namespace

#if defined(__x86_64__)
// switch stacks: save callee-saved registers on the old stack, store its pointer in *from,
// load `to` and restore its registers; `ret` continues the other side
extern "C" void emu_switch(void** from, void* to);
asm(R"(
.text
.globl emu_switch
.type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size emu_switch, .-emu_switch
)");
#else
#error "the CPU emulation's fibers are written for x86-64"
#endif

namespace {

[[noreturn]] void fiber_main() {
    current_call(current_args);
    current->state = kDone;
    emu_switch(&current->sp, scheduler_sp);
    std::abort();  // a finished fiber is never resumed
}

void start_fiber(Fiber& f) {
    if (!f.stack) f.stack.reset(new char[kStack]);
    uintptr_t top = reinterpret_cast<uintptr_t>(f.stack.get() + kStack);
    top &= ~static_cast<uintptr_t>(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;                                  // keeps the return slot 16-aligned
    *--sp = reinterpret_cast<void*>(&fiber_main);     // where `ret` goes
    for (int r = 0; r < 6; ++r) *--sp = nullptr;      // rbp rbx r12-r15
    f.sp = sp;
    f.state = kRunnable;
}

std::string run_block(unsigned threads, int order, std::mt19937& rng) {
    if (fibers.size() < threads) fibers.resize(threads);
    for (unsigned t = 0; t < threads; ++t) {
        Fiber& f = fibers[t];
        f.idx.x = t % blockDim.x;
        f.idx.y = (t / blockDim.x) % blockDim.y;
        f.idx.z = t / (blockDim.x * blockDim.y);
        start_fiber(f);
    }
    std::vector<unsigned> schedule(threads);
    for (unsigned t = 0; t < threads; ++t) schedule[t] = order == 1 ? threads - 1 - t : t;
    for (int phase = 0;; ++phase) {
        if (order == 2) std::shuffle(schedule.begin(), schedule.end(), rng);
        for (unsigned t : schedule) {
            Fiber& f = fibers[t];
            if (f.state != kRunnable) continue;
            current = &f;
            threadIdx = f.idx;
            emu_switch(&scheduler_sp, f.sp);
        }
        unsigned waiting = 0, done = 0;
        for (unsigned t = 0; t < threads; ++t) {
            if (fibers[t].state == kAtBarrier) ++waiting;
            if (fibers[t].state == kDone) ++done;
        }
        if (waiting == 0) return "";
        if (done != 0) {
            std::ostringstream msg;
            msg << "__syncthreads() reached by " << waiting << " of " << threads
                << " threads (the others returned) in block (" << blockIdx.x << ","
                << blockIdx.y << "," << blockIdx.z << "), barrier " << phase + 1;
            return msg.str();
        }
        for (unsigned t = 0; t < threads; ++t) fibers[t].state = kRunnable;
    }
}

struct Buffer {
    std::vector<unsigned char> bytes;  // guard, data, guard
    std::vector<unsigned char> guard;  // what each guard holds
    size_t size = 0;
    unsigned char* data() { return bytes.data() + kGuard; }
};

std::vector<unsigned char> guard_pattern(int itemsize) {
    std::vector<unsigned char> out(kGuard, 0xFF);
    if (itemsize == 4) {
        const uint32_t nan = 0x7FA00001u;  // a signalling float NaN
        for (size_t k = 0; k < kGuard; k += 4) std::memcpy(&out[k], &nan, 4);
    } else if (itemsize == 8) {
        const uint64_t nan = 0x7FF4000000000001ull;  // a signalling double NaN
        for (size_t k = 0; k < kGuard; k += 8) std::memcpy(&out[k], &nan, 8);
    }
    return out;
}

std::map<long long, Buffer> buffers;

std::string guards_intact() {
    for (auto& kv : buffers) {
        Buffer& b = kv.second;
        const bool before = std::memcmp(b.bytes.data(), b.guard.data(), kGuard) != 0;
        const bool after = std::memcmp(b.data() + b.size, b.guard.data(), kGuard) != 0;
        if (before || after) {
            std::ostringstream msg;
            msg << "a write outside array " << kv.first << " (" << (before ? "before" : "after")
                << " it)";
            return msg.str();
        }
    }
    return "";
}

std::string launch(std::istringstream& in) {
    std::string name;
    unsigned g[3], b[3];
    int order = 0, nargs = 0;
    unsigned seed = 0;
    in >> name >> g[0] >> g[1] >> g[2] >> b[0] >> b[1] >> b[2] >> order >> seed >> nargs;
    if (!in) return "bad launch line";
    const emu::Entry* entry = nullptr;
    for (int k = 0; k < emu_entry_count; ++k)
        if (name == emu_entries[k].name) entry = &emu_entries[k];
    if (entry == nullptr) return "no kernel " + name + " in this binary";
    if (nargs != entry->nargs) return "kernel " + name + " takes " + std::to_string(entry->nargs) + " arguments";
    std::vector<emu::Arg> args(nargs);
    for (int k = 0; k < nargs; ++k) {
        std::string kind;
        in >> kind;
        args[k] = emu::Arg{nullptr, 0, 0.0};
        if (kind == "p") {
            long long id;
            in >> id;
            auto it = buffers.find(id);
            if (it == buffers.end()) return "argument " + std::to_string(k) + ": no array";
            args[k].p = it->second.data();
        } else if (kind == "i") {
            in >> args[k].i;
        } else if (kind == "d") {
            std::string text;
            in >> text;
            args[k].d = std::strtod(text.c_str(), nullptr);
        } else {
            return "argument " + std::to_string(k) + ": kind " + kind;
        }
    }
    if (!in) return "bad arguments";
    unsigned threads = b[0] * b[1] * b[2];
    if (threads == 0 || threads > 1024) return "threads per block " + std::to_string(threads);
    blockDim = dim3{b[0], b[1], b[2]};
    gridDim = dim3{g[0], g[1], g[2]};
    current_args = args.data();
    current_call = entry->call;
    std::mt19937 rng(seed);
    for (unsigned z = 0; z < g[2]; ++z)
        for (unsigned y = 0; y < g[1]; ++y)
            for (unsigned x = 0; x < g[0]; ++x) {
                blockIdx = uint3{x, y, z};
                std::string err = run_block(threads, order, rng);
                if (!err.empty()) return err;
            }
    return guards_intact();
}

std::string command(const std::string& line) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "launch") return launch(in);
    long long id = 0;
    if (verb == "alloc") {
        size_t size = 0;
        int itemsize = 1;
        in >> id >> size >> itemsize;
        Buffer& b = buffers[id];
        b.size = size;
        b.guard = guard_pattern(itemsize);
        b.bytes.assign(size + 2 * kGuard, 0);
        std::memcpy(b.bytes.data(), b.guard.data(), kGuard);
        std::memcpy(b.data() + size, b.guard.data(), kGuard);
        return "";
    }
    if (verb == "copy") {
        long long src;
        in >> id >> src;
        if (!buffers.count(src)) return "no array " + std::to_string(src);
        buffers[id] = buffers[src];
        return "";
    }
    if (verb == "free") {
        in >> id;
        buffers.erase(id);
        return "";
    }
    std::string path;
    in >> id >> path;
    auto it = buffers.find(id);
    if (it == buffers.end()) return "no array " + std::to_string(id);
    Buffer& b = it->second;
    if (verb == "write" || verb == "read") {
        FILE* fh = std::fopen(path.c_str(), verb == "write" ? "rb" : "wb");
        if (fh == nullptr) return "cannot open " + path;
        size_t n = verb == "write" ? std::fread(b.data(), 1, b.size, fh)
                                   : std::fwrite(b.data(), 1, b.size, fh);
        std::fclose(fh);
        return n == b.size ? "" : "short " + verb + " of " + path;
    }
    return "unknown command " + verb;
}

}  // namespace

namespace emu {
void barrier() {
    current->state = kAtBarrier;
    emu_switch(&current->sp, scheduler_sp);
}
}  // namespace emu

int main() {
    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.empty()) continue;
        std::string err = command(line);
        std::cout << (err.empty() ? "ok" : "error " + err) << "\n" << std::flush;
    }
    return 0;
}

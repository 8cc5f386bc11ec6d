// CUDA's execution model on a CPU, for checking kernel results without a GPU.
//
// A launch runs its blocks one at a time; a block's threads are fibers (one stack each)
// switched by hand on this one OS thread. Between two __syncthreads() every thread of the
// block runs its stretch to the barrier before any thread goes past it; the order in which
// the threads run their stretches is the launch's schedule (forward, reversed, or shuffled
// by a seed), so a race a serial schedule would hide shows up as a result that depends on
// the schedule. __shared__ arrays are static: one copy, which the block running now owns.
// Not modelled: warps (lock-step, shuffles, votes), the memory model (every write is
// visible at once), atomics, dynamic shared memory, streams.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
};

// what the kernels use of CUDA C
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float min(float a, float b) { return a < b ? a : b; }
inline float max(float a, float b) { return a > b ? a : b; }
inline double min(double a, double b) { return a < b ? a : b; }
inline double max(double a, double b) { return a > b ? a : b; }

// the running thread's coordinates: set by the scheduler before it switches to a fiber
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

namespace emu {
void barrier();
}  // namespace emu

inline void __syncthreads() { emu::barrier(); }

namespace emu {
// one kernel argument as the host hands it over (cuLaunchKernel's void** in spirit)
struct Arg {
    void* p;
    long long i;
    double d;
};
typedef void (*Call)(const Arg* args);
struct Entry {
    const char* name;
    Call call;
    int nargs;
};
}  // namespace emu

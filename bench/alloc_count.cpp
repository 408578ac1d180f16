// alloc_count: counts heap allocations of a process it is preloaded into
// (LD_PRELOAD=libtroupe_alloc_count.so), for bench/allocs.sh: allocations per
// warm request of troupe against the minimal Beast server, the same counter
// for both. malloc, calloc, realloc (a growth that moves or a new block),
// aligned_alloc, posix_memalign and memalign are counted — operator new goes
// through malloc. On SIGUSR2 the count so far is written (one decimal line) to
// the file named by ALLOC_COUNT_FILE, appended; only async-signal-safe calls.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdlib>

namespace {

std::atomic<unsigned long long> allocations{0};

using malloc_fn = void* (*)(std::size_t);
using calloc_fn = void* (*)(std::size_t, std::size_t);
using realloc_fn = void* (*)(void*, std::size_t);
using memalign_fn = int (*)(void**, std::size_t, std::size_t);
using aligned_fn = void* (*)(std::size_t, std::size_t);

malloc_fn real_malloc = nullptr;
calloc_fn real_calloc = nullptr;
realloc_fn real_realloc = nullptr;
memalign_fn real_posix_memalign = nullptr;
aligned_fn real_aligned_alloc = nullptr;
aligned_fn real_memalign = nullptr;
void (*real_free)(void*) = nullptr;

// dlsym may itself call calloc before real_calloc is known: a small static arena serves it.
alignas(16) char bootstrap[4096];
std::size_t bootstrap_used = 0;
bool resolving = false;

void resolve() {
  if (real_malloc || resolving)
    return;
  resolving = true;
  real_malloc = reinterpret_cast<malloc_fn>(dlsym(RTLD_NEXT, "malloc"));
  real_calloc = reinterpret_cast<calloc_fn>(dlsym(RTLD_NEXT, "calloc"));
  real_realloc = reinterpret_cast<realloc_fn>(dlsym(RTLD_NEXT, "realloc"));
  real_posix_memalign = reinterpret_cast<memalign_fn>(dlsym(RTLD_NEXT, "posix_memalign"));
  real_aligned_alloc = reinterpret_cast<aligned_fn>(dlsym(RTLD_NEXT, "aligned_alloc"));
  real_memalign = reinterpret_cast<aligned_fn>(dlsym(RTLD_NEXT, "memalign"));
  real_free = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_NEXT, "free"));
  resolving = false;
}

bool from_bootstrap(const void* p) {
  return p >= bootstrap && p < bootstrap + sizeof bootstrap;
}

void write_count(int) {
  const char* path = getenv("ALLOC_COUNT_FILE");  // read-only environment access
  if (!path)
    return;
  char digits[32];
  int n = 0;
  auto v = allocations.load(std::memory_order_relaxed);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  char line[33];
  for (int i = 0; i < n; ++i)
    line[i] = digits[n - 1 - i];
  line[n] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0)
    return;
  (void)!write(fd, line, static_cast<std::size_t>(n + 1));
  close(fd);
}

struct installer {
  installer() {
    resolve();
    std::signal(SIGUSR2, write_count);
  }
} install;

}  // namespace

extern "C" {

void* malloc(std::size_t size) {
  resolve();
  if (!real_malloc)
    return nullptr;
  allocations.fetch_add(1, std::memory_order_relaxed);
  return real_malloc(size);
}

void* calloc(std::size_t n, std::size_t size) {
  if (!real_calloc) {
    if (resolving) {  // dlsym's own allocation
      auto bytes = (n * size + 15) & ~std::size_t{15};
      if (bootstrap_used + bytes > sizeof bootstrap)
        return nullptr;
      void* p = bootstrap + bootstrap_used;
      bootstrap_used += bytes;
      return p;
    }
    resolve();
  }
  allocations.fetch_add(1, std::memory_order_relaxed);
  return real_calloc(n, size);
}

void* realloc(void* p, std::size_t size) {
  resolve();
  if (from_bootstrap(p)) {  // never grown in place: copied out to the real heap
    void* q = malloc(size);
    if (q)
      for (std::size_t i = 0; i < size && static_cast<char*>(p) + i < bootstrap + sizeof bootstrap; ++i)
        static_cast<char*>(q)[i] = static_cast<char*>(p)[i];
    return q;
  }
  void* q = real_realloc(p, size);
  if (q != p)
    allocations.fetch_add(1, std::memory_order_relaxed);
  return q;
}

void free(void* p) {
  if (!p || from_bootstrap(p))
    return;
  resolve();
  if (real_free)  // null only while dlsym runs: what it frees then is left (bytes, once)
    real_free(p);
}

int posix_memalign(void** out, std::size_t align, std::size_t size) {
  resolve();
  allocations.fetch_add(1, std::memory_order_relaxed);
  return real_posix_memalign(out, align, size);
}

void* aligned_alloc(std::size_t align, std::size_t size) {
  resolve();
  allocations.fetch_add(1, std::memory_order_relaxed);
  return real_aligned_alloc(align, size);
}

void* memalign(std::size_t align, std::size_t size) {
  resolve();
  allocations.fetch_add(1, std::memory_order_relaxed);
  return real_memalign(align, size);
}

}  // extern "C"

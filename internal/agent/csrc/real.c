/*
 * real.c: finding the allocator the agent wraps.
 *
 * dlsym may itself allocate (for its error state), and the first malloc of
 * a process can come before the agent's constructor runs. While the real
 * functions are being looked up, allocations are served from a small static
 * bootstrap buffer; its blocks are never given to the real allocator.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

struct mt_real mt_real;

_Alignas(64) uint8_t mt_bootstrap[MT_BOOTSTRAP_SIZE];
static size_t bootstrap_used;
/* The thread looking the functions up; its nested allocations use the
 * bootstrap buffer. The agent has no thread-local variables: a TLS module
 * would make libc allocate a larger thread vector for every thread of the
 * program, and the agent must not change what it measures. */
static pid_t resolving_tid;
static mt_lock_t resolve_lock;

/* Each bootstrap block is preceded by 16 bytes holding its size. */
void *mt_bootstrap_alloc(size_t size, size_t align)
{
	if (align < 16)
		align = 16;
	size_t start = (bootstrap_used + 16 + align - 1) & ~(align - 1);
	if (start + size > sizeof mt_bootstrap || size > sizeof mt_bootstrap) {
		mt_warn("the agent's bootstrap buffer is exhausted", NULL);
		return NULL;
	}
	bootstrap_used = start + size;
	*(size_t *)(mt_bootstrap + start - 16) = size;
	return mt_bootstrap + start;
}

size_t mt_bootstrap_size(const void *p) { return *(const size_t *)((const uint8_t *)p - 16); }

static void *next(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (f == NULL) {
		mt_warn("the agent cannot find ", name);
	}
	return f;
}

/* mt_resolve looks the real functions up once. While it runs, allocation
 * calls it makes find mt_real.free still NULL and use the bootstrap
 * buffer; other threads wait for it. */
void mt_resolve(void)
{
	if (__atomic_load_n(&mt_real.free, __ATOMIC_ACQUIRE) != NULL)
		return;
	pid_t me = (pid_t)syscall(SYS_gettid);
	if (__atomic_load_n(&resolving_tid, __ATOMIC_ACQUIRE) == me)
		return;
	mt_lock(&resolve_lock);
	if (__atomic_load_n(&mt_real.free, __ATOMIC_ACQUIRE) != NULL) {
		mt_unlock(&resolve_lock);
		return;
	}
	__atomic_store_n(&resolving_tid, me, __ATOMIC_RELEASE);
	struct mt_real r;
	r.malloc = next("malloc");
	r.calloc = next("calloc");
	r.realloc = next("realloc");
	r.posix_memalign = next("posix_memalign");
	r.aligned_alloc = next("aligned_alloc");
	r.memalign = next("memalign");
	r.valloc = next("valloc");
	r.pvalloc = next("pvalloc");
	r.dlclose = next("dlclose");
	r._exit = next("_exit");
	r._Exit = next("_Exit");
	r.execve = next("execve");
	r.execvpe = next("execvpe");
	r.fexecve = next("fexecve");
	r.posix_spawn = next("posix_spawn");
	r.posix_spawnp = next("posix_spawnp");
	r.system = next("system");
	r.popen = next("popen");
	r.free = next("free");
	if (r.malloc == NULL || r.free == NULL || r.calloc == NULL || r.realloc == NULL) {
		static const char msg[] = "memtrail: agent cannot find the C allocator; aborting\n";
		(void)!write(2, msg, sizeof msg - 1);
		abort();
	}
	/* Before any hook is called with them: the program's own allocator
	 * replaces libc's where its entries can be patched. */
	mt_entry_patch(&r);
	/* free last, with release: its being set means all are set. */
	void (*f)(void *) = r.free;
	r.free = NULL;
	mt_real = r;
	__atomic_store_n(&mt_real.free, f, __ATOMIC_RELEASE);
	__atomic_store_n(&resolving_tid, 0, __ATOMIC_RELEASE);
	mt_unlock(&resolve_lock);
}

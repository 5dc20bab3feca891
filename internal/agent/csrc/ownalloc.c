/*
 * ownalloc.c: finding a program that brings its own allocator.
 *
 * The dynamic linker binds every reference to malloc to the first
 * definition in its lookup order: the executable's, then the preloaded
 * agent's. A program that defines and exports malloc itself (chromium's
 * allocator shim, a statically linked jemalloc), or a library preloaded
 * before the agent, thus takes the place of the agent's hooks, and the
 * allocations made through it are never seen. Where it can, the agent
 * patches the executable's functions to pass through its hooks
 * (entrypatch.c); where it cannot, it says so: it looks each function it hooks up
 * the way the dynamic linker binds it, and names the object whose
 * definition wins where that is not the agent.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>

#include "agent.h"

/* The allocation functions hooks.c exports, as the linker names them. */
static const char *const hooked[] = {
	"malloc",
	"free",
	"calloc",
	"realloc",
	"reallocarray",
	"posix_memalign",
	"aligned_alloc",
	"memalign",
	"valloc",
	"pvalloc",
	"_Znwm",
	"_Znam",
	"_ZnwmRKSt9nothrow_t",
	"_ZnamRKSt9nothrow_t",
	"_ZnwmSt11align_val_t",
	"_ZnamSt11align_val_t",
	"_ZnwmSt11align_val_tRKSt9nothrow_t",
	"_ZnamSt11align_val_tRKSt9nothrow_t",
	"_ZdlPv",
	"_ZdaPv",
	"_ZdlPvm",
	"_ZdaPvm",
	"_ZdlPvSt11align_val_t",
	"_ZdaPvSt11align_val_t",
	"_ZdlPvmSt11align_val_t",
	"_ZdaPvmSt11align_val_t",
	"_ZdlPvRKSt9nothrow_t",
	"_ZdaPvRKSt9nothrow_t",
	"_ZdlPvSt11align_val_tRKSt9nothrow_t",
	"_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

const char *const *mt_hooked_names(size_t *n)
{
	*n = sizeof hooked / sizeof hooked[0];
	return hooked;
}

/* mt_is_definition says whether f, what the dynamic linker binds a name
 * to, is a function some object defines. A program linked without -pie
 * that takes the address of a function it imports (gcc's cc1 takes free's)
 * has the name stand for its own PLT entry, which defines nothing: calls
 * through it reach the definition, the agent's hook among them. */
int mt_is_definition(void *f)
{
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	return f != NULL && dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) && sym != NULL &&
	       info.dli_saddr == f && sym->st_shndx != SHN_UNDEF;
}

/* The answer, found once per program image: a fork child inherits it, and
 * does not call into the dynamic linker, whose lock another thread of its
 * parent may have held at the fork. */
static char found[2048];
static size_t found_len;
static int found_done;

/* put adds one string, prefix then s; it returns 0 if it does not fit. */
static int put(const char *prefix, const char *s)
{
	size_t a = strlen(prefix), b = strlen(s);
	if (found_len + a + b + 1 > sizeof found)
		return 0;
	memcpy(found + found_len, prefix, a);
	memcpy(found + found_len + a, s, b);
	found[found_len + a + b] = 0;
	found_len += a + b + 1;
	return 1;
}

/* mt_own_allocator returns, in the format of mt_hello's own_alloc (see
 * protocol.h), the hooked functions whose definitions in the process's
 * global scope are not the agent's, and sets *len to its length (0: none).
 * It runs when the process connects, with the calling thread busy. */
const char *mt_own_allocator(size_t *len)
{
	Dl_info self, exe;
	/* Without its own object's base the agent cannot tell its functions
	 * from others: it then says nothing rather than name them all. */
	if (!found_done && dladdr((void *)mt_own_allocator, &self)) {
		found_done = 1;
		/* The loader names the executable as it was started (argv[0]),
		 * or not at all: it is known by its program headers. */
		if (!dladdr((void *)getauxval(AT_PHDR), &exe))
			exe.dli_fbase = NULL;
		/* First, so that a recorder reads it before any object: the
		 * process is recorded through the patched functions, which did
		 * not see what the program's allocator did before the patch. */
		if (mt_entry_patched())
			put("!", "");
		const void *object = NULL;
		for (size_t i = 0; i < sizeof hooked / sizeof hooked[0]; i++) {
			void *f = dlsym(RTLD_DEFAULT, hooked[i]);
			Dl_info info;
			if (!mt_is_definition(f) || !dladdr(f, &info) || info.dli_fbase == self.dli_fbase)
				continue;
			/* Calls to them jump to the agent's hooks (entrypatch.c). */
			if (info.dli_fbase == exe.dli_fbase && mt_entry_patched())
				continue;
			if (info.dli_fbase != object) {
				const char *path = info.dli_fname != NULL ? info.dli_fname : "";
				if (info.dli_fbase == exe.dli_fbase)
					path = "";
				if (!put("@", path))
					break;
				object = info.dli_fbase;
			}
			if (!put("", hooked[i]))
				break;
		}
	}
	*len = found_len;
	return found;
}

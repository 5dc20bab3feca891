/*
 * exec.c: keeping the agent in the programs a recorded process starts.
 *
 * A process that runs another program with an environment of its own
 * making (execve with a fresh envp, env -i, posix_spawn with a custom
 * environment), or after taking the variables out of its own (clearenv,
 * unsetenv), would drop LD_PRELOAD and MEMTRAIL_SOCK, and the new program
 * would go unrecorded. These wrappers put the two back, from the agent's
 * own copies of their values. The new array lives in memory mapped for it,
 * not in the traced heap; if the exec fails it is unmapped again.
 *
 * libc's execv, execvp, execl*, system and popen reach the kernel through
 * its internal execve and posix_spawn, which no preloaded library can
 * wrap: so they are wrapped too. system and popen run a shell with the
 * process's own environment, which they give no way to replace: there the
 * variables are put back into the process's environment itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

extern char **environ;

static char agent_path[4096];

/* own_path finds the file the agent was loaded from. It is first called
 * when the process connects, not in a vfork child about to exec. */
const char *mt_own_path(void)
{
	if (agent_path[0] == 0) {
		Dl_info info;
		if (dladdr((void *)mt_own_path, &info) && info.dli_fname != NULL && strlen(info.dli_fname) < sizeof agent_path)
			strcpy(agent_path, info.dli_fname);
	}
	return agent_path;
}

/* has_agent reports whether an LD_PRELOAD value names the agent. */
static int has_agent(const char *preload, const char *agent)
{
	size_t n = strlen(agent);
	for (const char *p = preload; (p = strstr(p, agent)) != NULL; p += n) {
		int starts = p == preload || p[-1] == ':' || p[-1] == ' ';
		int ends = p[n] == 0 || p[n] == ':' || p[n] == ' ';
		if (starts && ends)
			return 1;
	}
	return 0;
}

struct fixed_env {
	char **envp;
	size_t size;
};

/* fix_env returns envp with the agent's two variables, in a mapping when
 * they had to be added (release it with unfix_env). */
static struct fixed_env fix_env(char *const envp[])
{
	struct fixed_env f = {(char **)envp, 0};
	const char *agent = mt_own_path();
	if (mt_proc.sock_path_len == 0 || agent[0] == 0)
		return f;
	size_t count = 0, strings = 0;
	const char *preload = NULL;
	int has_sock = 0;
	/* The kernel takes a null envp for an empty one; clearenv leaves
	 * environ null. */
	for (; envp != NULL && envp[count] != NULL; count++) {
		if (strncmp(envp[count], "LD_PRELOAD=", 11) == 0)
			preload = envp[count] + 11;
		else if (strncmp(envp[count], "MEMTRAIL_SOCK=", 14) == 0)
			has_sock = 1;
	}
	int preload_ok = preload != NULL && has_agent(preload, agent);
	if (preload_ok && has_sock)
		return f;
	strings = strlen(agent) + (preload ? strlen(preload) : 0) + strlen(mt_proc.sock_env) + 64;
	size_t size = (count + 3) * sizeof(char *) + strings;
	char **out = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (out == MAP_FAILED)
		return f;
	char *text = (char *)(out + count + 3);
	size_t n = 0;
	for (size_t i = 0; i < count; i++) {
		if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0 && !preload_ok)
			continue;
		if (strncmp(envp[i], "MEMTRAIL_SOCK=", 14) == 0)
			continue;
		out[n++] = envp[i];
	}
	if (!preload_ok) {
		out[n++] = text;
		text = stpcpy(stpcpy(text, "LD_PRELOAD="), agent);
		if (preload != NULL && preload[0] != 0)
			text = stpcpy(stpcpy(text, ":"), preload);
		text++;
	}
	out[n++] = text;
	text = stpcpy(stpcpy(text, "MEMTRAIL_SOCK="), mt_proc.sock_env);
	out[n] = NULL;
	f.envp = out;
	f.size = size;
	return f;
}

static void unfix_env(struct fixed_env f)
{
	if (f.size)
		munmap(f.envp, f.size);
}

/* Scripts may name an interpreter that is itself a script: the kernel
 * follows four levels more (BINPRM_MAX_RECURSION). */
#define MAX_INTERPRETERS 5

/* is_static says whether the program at path, or the interpreter its #!
 * line names (followed as the kernel does), is a statically linked ELF
 * file: one with no PT_INTERP, which the loader never sees and so never
 * preloads the agent into. It reads the files with system calls and
 * buffers on the stack: the agent never allocates from the heap it
 * traces.
 * Anything it cannot read or make sense of is not static: the exec will
 * say what is wrong with it. */
static int is_static(const char *path)
{
	char interp[256];
	for (int level = 0; level < MAX_INTERPRETERS; level++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 0;
		union {
			Elf64_Ehdr ehdr;
			char line[sizeof interp + 2];
		} head;
		ssize_t n = pread(fd, &head, sizeof head, 0);
		if (n >= 2 && head.line[0] == '#' && head.line[1] == '!') {
			close(fd);
			/* The interpreter is the first word after #!, up to a
			 * blank or the end of the line. */
			size_t i = 2, len = 0;
			while (i < (size_t)n && (head.line[i] == ' ' || head.line[i] == '\t'))
				i++;
			while (i < (size_t)n && head.line[i] != ' ' && head.line[i] != '\t' && head.line[i] != '\n' &&
			       head.line[i] != 0 && len < sizeof interp - 1)
				interp[len++] = head.line[i++];
			if (len == 0 || len == sizeof interp - 1)
				return 0;
			interp[len] = 0;
			path = interp;
			continue;
		}
		int no_interp = 0;
		if (n >= (ssize_t)sizeof head.ehdr && memcmp(head.ehdr.e_ident, ELFMAG, SELFMAG) == 0 &&
		    head.ehdr.e_ident[EI_CLASS] == ELFCLASS64 && head.ehdr.e_phentsize == sizeof(Elf64_Phdr) &&
		    (head.ehdr.e_type == ET_EXEC || head.ehdr.e_type == ET_DYN)) {
			no_interp = 1;
			Elf64_Phdr ph[16];
			for (size_t done = 0; done < head.ehdr.e_phnum && no_interp;) {
				size_t want = head.ehdr.e_phnum - done < 16 ? head.ehdr.e_phnum - done : 16;
				ssize_t got = pread(fd, ph, want * sizeof ph[0], (off_t)(head.ehdr.e_phoff + done * sizeof ph[0]));
				if (got != (ssize_t)(want * sizeof ph[0])) {
					no_interp = 0;
					break;
				}
				for (size_t i = 0; i < want; i++) {
					if (ph[i].p_type == PT_INTERP)
						no_interp = 0;
				}
				done += want;
			}
		}
		close(fd);
		return no_interp;
	}
	return 0;
}

/* search_path finds file in PATH as execvp does, into buf: the first
 * entry where it is an executable file. A name with a slash is taken as
 * it is. It returns NULL if it finds none. */
static const char *search_path(const char *file, char *buf, size_t cap)
{
	if (strchr(file, '/') != NULL)
		return file;
	const char *dirs = getenv("PATH");
	if (dirs == NULL)
		dirs = "/bin:/usr/bin";
	size_t flen = strlen(file);
	for (const char *d = dirs;; d++) {
		const char *end = strchrnul(d, ':');
		size_t dlen = (size_t)(end - d);
		if (dlen + flen + 2 <= cap) {
			/* An empty entry is the current directory. */
			size_t off = 0;
			if (dlen > 0) {
				memcpy(buf, d, dlen);
				buf[dlen] = '/';
				off = dlen + 1;
			}
			memcpy(buf + off, file, flen + 1);
			if (access(buf, X_OK) == 0)
				return buf;
		}
		if (*end == 0)
			return NULL;
		d = end;
	}
}

/* static_program returns the program an exec of path (looked up in PATH
 * first with search, into buf) runs, if it is statically linked
 * (is_static), else NULL. */
static const char *static_program(const char *path, int search, char *buf, size_t cap)
{
	if (search && path != NULL)
		path = search_path(path, buf, cap);
	return path != NULL && is_static(path) ? path : NULL;
}

/* emit_spawn tells the recorder, in t's ring, that child runs the
 * statically linked program at path (len bytes): the child never says
 * hello. t is busy. */
static void emit_spawn(struct mt_thread *t, pid_t child, const char *path, size_t len)
{
	uint64_t rec[5 + MT_EXEC_PATH / 8];
	unsigned n = 5 + (unsigned)(len + 7) / 8;
	rec[0] = MT_REC_SPAWN | (uint64_t)n << 8;
	rec[1] = mt_seq();
	rec[2] = mt_tsc();
	rec[3] = (uint64_t)(uint32_t)child;
	rec[4] = len;
	memset(&rec[5], 0, (len + 7) / 8 * 8);
	memcpy(&rec[5], path, len);
	mt_emit(t, rec, n);
}

/* mt_spawn_flush tells the recorder of the program a vfork child of t's
 * thread exec'd, and sets t back to normal. t is busy. It runs in the
 * parent, once vfork has returned (the child exec'd), or in the next
 * vfork child of the thread, which runs while the parent waits, and so
 * may write to the parent thread's ring. */
void mt_spawn_flush(struct mt_thread *t)
{
	pid_t child = (pid_t)__atomic_load_n(&t->spawn_pid, __ATOMIC_ACQUIRE);
	if (child == 0)
		return;
	emit_spawn(t, child, t->spawn_path, t->spawn_len);
	__atomic_store_n(&t->spawn_pid, 0, __ATOMIC_RELAXED);
	t->gen = mt_proc.gen;
}

/* Noted by exec_begin: */
enum { EXEC_NOTED = 1, EXEC_NOTED_VFORK = 2 };

/* vfork_begin is exec_begin in a vfork child, which shares its parent's
 * memory and runs on the stack of its parent's thread, which waits until
 * the child has exec'd or exited. The child is not recorded, and its new
 * image connects on its own, unless the program is statically linked:
 * then the note goes into the state of the parent's thread, for the
 * parent to send once it runs again (mt_spawn_flush). */
static int vfork_begin(const char *path, int search)
{
	struct mt_thread *t = mt_self();
	if (t == NULL || t->busy || (t->gen != mt_proc.gen && __atomic_load_n(&t->spawn_pid, __ATOMIC_ACQUIRE) == 0))
		return 0;
	char found[4096];
	if ((path = static_program(path, search, found, sizeof found)) == NULL)
		return 0;
	/* An earlier vfork child of the thread exec'd too, and the parent
	 * has not entered the agent since. */
	t->busy = 1;
	mt_spawn_flush(t);
	t->busy = 0;
	size_t len = strnlen(path, MT_EXEC_PATH - 1);
	memcpy(t->spawn_path, path, len);
	t->spawn_len = (uint32_t)len;
	__atomic_store_n(&t->spawn_pid, (uint32_t)syscall(SYS_getpid), __ATOMIC_RELEASE);
	t->gen = ~mt_proc.gen;
	return EXEC_NOTED_VFORK;
}

/* exec_begin notes in the region that the process is about to exec path
 * (NULL if not known; looked up in PATH first with search): if the pid
 * ends with it still set, the new image never connected (the loader
 * dropped the agent), and the recorder says so; it notes too whether the
 * new program is statically linked, which explains why. A vfork child, a
 * pid of its own in its parent's memory, must not note it for the
 * parent: it notes a static program for its parent's thread to send
 * (vfork_begin). It returns what it noted. */
static int exec_begin(const char *path, int search)
{
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) != MT_STATE_ACTIVE)
		return 0;
	if ((pid_t)syscall(SYS_getpid) != mt_proc.pid)
		return vfork_begin(path, search);
	char found[4096];
	uint64_t pending = 1;
	if ((path = static_program(path, search, found, sizeof found)) != NULL) {
		size_t len = strnlen(path, MT_EXEC_PATH - 1);
		memcpy(mt_proc.hdr->exec_path, path, len);
		mt_proc.hdr->exec_path[len] = 0;
		pending = MT_EXEC_STATIC;
	}
	__atomic_store_n(&mt_proc.hdr->exec_pending, pending, __ATOMIC_RELEASE);
	return EXEC_NOTED;
}

/* exec_failed takes the note back: the exec returned. */
static void exec_failed(int noted)
{
	if (noted == EXEC_NOTED) {
		__atomic_store_n(&mt_proc.hdr->exec_pending, 0, __ATOMIC_RELEASE);
	} else if (noted == EXEC_NOTED_VFORK) {
		struct mt_thread *t = mt_self();
		__atomic_store_n(&t->spawn_pid, 0, __ATOMIC_RELEASE);
		t->gen = mt_proc.gen;
	}
}

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[], char *const envp[])
{
	mt_resolve();
	struct fixed_env f = fix_env(envp);
	int noted = exec_begin(path, 0);
	int r = mt_real.execve(path, argv, f.envp);
	exec_failed(noted);
	unfix_env(f);
	return r;
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[], char *const envp[])
{
	mt_resolve();
	struct fixed_env f = fix_env(envp);
	int noted = exec_begin(file, 1);
	int r = mt_real.execvpe(file, argv, f.envp);
	exec_failed(noted);
	unfix_env(f);
	return r;
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[], char *const envp[])
{
	mt_resolve();
	struct fixed_env f = fix_env(envp);
	char self[32] = "/proc/self/fd/";
	self[14 + mt_decimal((unsigned)fd, self + 14)] = 0;
	int noted = exec_begin(fd >= 0 ? self : NULL, 0);
	int r = mt_real.fexecve(fd, argv, f.envp);
	exec_failed(noted);
	unfix_env(f);
	return r;
}

/* spawned tells the recorder that child, which posix_spawn has just
 * started running path (looked up in PATH first with search), runs a
 * statically linked program, if it does: the child runs libc's code
 * between its clone and its exec, never the agent's, so neither it nor
 * its new image ever says hello, and without this the recorder would
 * never hear of it. libc reports a failed exec as posix_spawn's error,
 * so a child spawned is one that exec'd. */
static void spawned(pid_t child, const char *path, int search)
{
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) != MT_STATE_ACTIVE || (pid_t)syscall(SYS_getpid) != mt_proc.pid)
		return;
	char found[4096];
	if ((path = static_program(path, search, found, sizeof found)) == NULL)
		return;
	struct mt_thread *t = mt_enter();
	if (t == NULL)
		return;
	emit_spawn(t, child, path, strnlen(path, MT_EXEC_PATH - 1));
	mt_leave(t);
}

__attribute__((visibility("default"))) int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
						       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	mt_resolve();
	struct fixed_env f = fix_env(envp);
	/* The caller may not want the pid; the recorder does. */
	pid_t child = 0;
	int r = mt_real.posix_spawn(&child, path, fa, attr, argv, f.envp);
	unfix_env(f);
	if (r == 0) {
		if (pid != NULL)
			*pid = child;
		spawned(child, path, 0);
	}
	return r;
}

__attribute__((visibility("default"))) int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
							const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	mt_resolve();
	struct fixed_env f = fix_env(envp);
	pid_t child = 0;
	int r = mt_real.posix_spawnp(&child, file, fa, attr, argv, f.envp);
	unfix_env(f);
	if (r == 0) {
		if (pid != NULL)
			*pid = child;
		spawned(child, file, 1);
	}
	return r;
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* The execl family takes its arguments as a list ending in a null
 * pointer: they are gathered into an array on the stack, as libc does. */
#define ARGV_FROM_LIST(argv, arg0, last)                          \
	size_t argc = 1;                                          \
	va_list ap;                                               \
	va_start(ap, last);                                       \
	while (va_arg(ap, char *) != NULL)                        \
		argc++;                                           \
	va_end(ap);                                               \
	char *argv[argc + 1];                                     \
	argv[0] = (char *)(arg0);                                 \
	va_start(ap, last);                                       \
	for (size_t i = 1; i <= argc; i++)                        \
		argv[i] = va_arg(ap, char *);

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
	ARGV_FROM_LIST(argv, arg, arg)
	va_end(ap);
	return execve(path, argv, environ);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
	ARGV_FROM_LIST(argv, arg, arg)
	va_end(ap);
	return execvpe(file, argv, environ);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
	ARGV_FROM_LIST(argv, arg, arg)
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}

/* fix_own_env puts the agent's variables back into the process's own
 * environment. The array it maps stays: the process owns it now, and
 * setenv copies rather than frees an environ it did not make. */
static void fix_own_env(void)
{
	struct fixed_env f = fix_env(environ);
	if (f.size)
		environ = f.envp;
}

__attribute__((visibility("default"))) int system(const char *command)
{
	mt_resolve();
	if (command != NULL)
		fix_own_env();
	return mt_real.system(command);
}

__attribute__((visibility("default"))) FILE *popen(const char *command, const char *mode)
{
	mt_resolve();
	fix_own_env();
	return mt_real.popen(command, mode);
}

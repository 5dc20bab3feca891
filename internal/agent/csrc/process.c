/*
 * process.c: connecting a process to the recorder, thread slots, and
 * writing records into the rings.
 *
 * A process connects once (at start, after exec, or in a fork child): it
 * sends a hello on the recorder's socket and receives a memfd with its
 * region. After that it holds no file descriptor at all, so programs that
 * close or dup2 over every descriptor cannot disturb it; all further
 * communication goes through the shared region. The recorder notices the
 * process's death on its own (pidfd), so everything published in the rings
 * survives a crash or SIGKILL.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

struct mt_process mt_proc = {.enter_key = MT_ENTER_NONE};

static mt_lock_t init_lock;
static mt_lock_t free_threads_lock;
static struct mt_thread *free_threads;
pthread_key_t mt_thread_key;
struct mt_thread *mt_self_cache[MT_SELF_CACHE];
static int thread_key_ready;
static int once_per_image_done;
static char hello_buf[MT_MAX_HELLO];

/*
 * Threads that are setting up their agent state (or connecting the
 * process), by tid. Until a thread's state exists, this is how the
 * allocations libc makes on the agent's behalf are recognized and passed
 * through unrecorded. The agent keeps per-thread state under a pthread key
 * rather than in thread-local variables: a TLS module would make libc
 * allocate a larger thread vector for every thread of the program.
 */
#define MAX_SETUP 64
static pid_t in_setup[MAX_SETUP];

/* mt_decimal writes v in decimal to out (room for 10 digits), without
 * libc's formatting, which may allocate, and returns how many digits. */
size_t mt_decimal(unsigned v, char *out)
{
	char rev[10];
	size_t n = 0;
	do
		rev[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (size_t i = 0; i < n; i++)
		out[i] = rev[n - 1 - i];
	return n;
}

/* stderr_was_closed is set when the program image started with fd 2
 * closed: a file it opens later may take fd 2, and the agent's messages
 * must not go into it. A fork child inherits it with the descriptors. */
static int stderr_was_closed;
static int stderr_checked;

/* A message says which process it is about, by pid and program, as the
 * recorder's do: many processes of a run share one stderr. It is built
 * on the stack (a thread's may be small: the program's path is cut to
 * fit), never the heap, and written at once, so that lines of processes
 * warning together do not mix. */
void mt_warn(const char *what, const char *detail)
{
	if (stderr_was_closed)
		return;
	char line[2048];
	size_t n = 0;
	const size_t cap = sizeof line - 1; /* room for the newline */
#define PUT(s, len)                                                  \
	do {                                                         \
		size_t l_ = (len) < cap - n ? (len) : cap - n;        \
		memcpy(line + n, (s), l_);                            \
		n += l_;                                              \
	} while (0)
	PUT("memtrail: process ", 18);
	char pid[10];
	PUT(pid, mt_decimal((unsigned)syscall(SYS_getpid), pid));
	PUT(" (", 2);
	ssize_t e = readlink("/proc/self/exe", line + n, (cap - n) / 2);
	if (e > 0)
		n += (size_t)e;
	else
		PUT("?", 1);
	PUT("): ", 3);
	PUT(what, strlen(what));
	if (detail != NULL)
		PUT(detail, strlen(detail));
#undef PUT
	line[n++] = '\n';
	(void)!write(2, line, n);
}

static pid_t gettid_raw(void) { return (pid_t)syscall(SYS_gettid); }

static int setup_begin(pid_t tid)
{
	for (int i = 0; i < MAX_SETUP; i++) {
		if (__atomic_load_n(&in_setup[i], __ATOMIC_RELAXED) == tid)
			return -1;
	}
	for (int i = 0; i < MAX_SETUP; i++) {
		pid_t expect = 0;
		if (__atomic_compare_exchange_n(&in_setup[i], &expect, tid, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return i;
	}
	return -1;
}

static void setup_end(int i) { __atomic_store_n(&in_setup[i], 0, __ATOMIC_RELEASE); }

/* read_file reads a small /proc file into buf without touching the heap. */
static size_t read_file(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t n = 0;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	return n;
}

/* find_socket_path takes MEMTRAIL_SOCK (<key>:<socket>) from the
 * environment. getenv may not work yet when the first allocation comes
 * from the dynamic loader, so the process's initial environment is read
 * from /proc as a fallback. */
static int find_socket_path(void)
{
	if (mt_proc.sock_path_len)
		return 1;
	const char *v = getenv("MEMTRAIL_SOCK");
	char env[65536];
	if (v == NULL) {
		size_t n = read_file("/proc/self/environ", env, sizeof env - 1);
		env[n] = 0;
		for (size_t i = 0; i < n; i += strlen(env + i) + 1) {
			if (strncmp(env + i, "MEMTRAIL_SOCK=", 14) == 0) {
				v = env + i + 14;
				break;
			}
		}
	}
	if (v == NULL || *v == 0)
		return 0;
	size_t all = strlen(v);
	if (all <= MT_KEY_LEN + 1 || v[MT_KEY_LEN] != ':' || all >= sizeof mt_proc.sock_env) {
		mt_warn("MEMTRAIL_SOCK is not <key>:<socket>; this process is not recorded", NULL);
		return 0;
	}
	size_t len = all - MT_KEY_LEN - 1;
	if (len >= sizeof mt_proc.sock_path)
		return 0;
	memcpy(mt_proc.key, v, MT_KEY_LEN);
	memcpy(mt_proc.sock_path, v + MT_KEY_LEN + 1, len);
	memcpy(mt_proc.sock_env, v, all);
	/* A leading '@' names a socket in the abstract namespace. */
	if (mt_proc.sock_path[0] == '@')
		mt_proc.sock_path[0] = 0;
	mt_proc.sock_path_len = len;
	return 1;
}

static int append(size_t *off, const void *p, size_t n)
{
	if (*off + n > sizeof hello_buf)
		n = sizeof hello_buf - *off;
	memcpy(hello_buf + *off, p, n);
	*off += n;
	return (int)n;
}

/* leader_exit_sp is where the process's main thread was in its stack
 * when it ended its thread (pthread_exit) while others ran on; 0 while it
 * runs. Its stack stays mapped, but nothing below that point is in use any
 * more, and the thread, a zombie, answers no signal: the leak scan takes
 * its stack from there up, as memcheck does from where it ended. The
 * destructors run last, from the frame of libc's that called main, so
 * little of main's stack is left above it. */
static uint64_t leader_exit_sp;

/* fork_parent is the pid of the process that forked last, set in the
 * parent before the fork: the child inherits it. */
static uint32_t fork_parent;

/* connect_recorder says hello and maps the region it is given. */
static int connect_recorder(int flags, uint64_t fork_token)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_un addr;
	memset(&addr, 0, sizeof addr);
	addr.sun_family = AF_UNIX;
	memcpy(addr.sun_path, mt_proc.sock_path, mt_proc.sock_path_len);
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + mt_proc.sock_path_len);
	if (mt_proc.sock_path[0] != 0)
		alen++; /* a filesystem path includes its NUL */
	int r;
	do
		r = connect(fd, (struct sockaddr *)&addr, alen);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		close(fd);
		return 0;
	}
	struct timeval tv = {.tv_sec = 30};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

	/* A fork child names the process that forked it, which may have
	 * ended already: then getppid() is the recorder, its new parent. */
	uint32_t ppid = (flags & MT_HELLO_FORK) != 0 ? fork_parent : (uint32_t)getppid();
	struct mt_hello h = {.magic = MT_HELLO_MAGIC, .version = MT_PROTOCOL_VERSION,
			     .pid = (uint32_t)getpid(), .ppid = ppid, .flags = (uint32_t)flags,
			     .fork_token = fork_token};
	memcpy(h.key, mt_proc.key, MT_KEY_LEN);
	size_t off = sizeof h;
	char tmp[4096];
	size_t n = read_file("/proc/self/cmdline", tmp, sizeof tmp);
	h.cmdline_len = (uint32_t)append(&off, tmp, n);
	ssize_t e = readlink("/proc/self/exe", tmp, sizeof tmp);
	h.exe_len = (uint32_t)append(&off, tmp, e > 0 ? (size_t)e : 0);
	if (getcwd(tmp, sizeof tmp) != NULL)
		h.cwd_len = (uint32_t)append(&off, tmp, strlen(tmp));
	size_t own_len;
	const char *own = mt_own_allocator(&own_len);
	h.own_alloc_len = (uint32_t)append(&off, own, own_len);
	memcpy(hello_buf, &h, sizeof h);
	if (send(fd, hello_buf, off, MSG_NOSIGNAL) != (ssize_t)off) {
		close(fd);
		return 0;
	}

	struct mt_welcome w;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof w};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	do
		r = (int)recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	close(fd);
	int memfd = -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&memfd, CMSG_DATA(c), sizeof memfd);
	if (r != (int)sizeof w || w.magic != MT_HELLO_MAGIC || w.status != 0 || memfd < 0) {
		if (memfd >= 0)
			close(memfd);
		return 0;
	}
	void *region = mmap(NULL, w.region_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	close(memfd);
	if (region == MAP_FAILED)
		return 0;
	struct mt_header *hdr = region;
	if (hdr->magic != MT_REGION_MAGIC || hdr->version != MT_PROTOCOL_VERSION) {
		munmap(region, w.region_size);
		return 0;
	}
	mt_proc.region = region;
	mt_proc.region_size = w.region_size;
	mt_proc.hdr = hdr;
	mt_proc.slots = (struct mt_slot *)((uint8_t *)region + MT_HEADER_SIZE);
	mt_proc.rings = (uint8_t *)region + hdr->rings_offset;
	mt_proc.nodes = (struct mt_node *)((uint8_t *)region + hdr->nodes_offset);
	mt_proc.max_frames = hdr->max_frames;
	__atomic_store_n(&mt_calls_window, hdr->calls_window, __ATOMIC_RELAXED);
	if (mt_proc.max_frames > MT_MAX_FRAMES_LIMIT)
		mt_proc.max_frames = MT_MAX_FRAMES_LIMIT;
	return 1;
}

static void thread_exit(void *arg);
static void on_exit_handler(int status, void *arg);
static void before_fork(void);
static void after_fork_parent(void);
static void after_fork_child(void);

/* set_state sets the process's state, and with it the key of mt_enter's
 * fast path. */
static void set_state(int state)
{
	__atomic_store_n(&mt_proc.enter_key, state == MT_STATE_ACTIVE ? (uint64_t)mt_proc.gen : MT_ENTER_NONE,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&mt_proc.state, state, __ATOMIC_RELEASE);
}

/* mt_process_init connects this process. It runs with the caller's busy
 * flag set, so allocations made by libc on its behalf are not recorded. */
void mt_process_init(int flags, uint64_t fork_token)
{
	mt_lock(&init_lock);
	if (mt_proc.state != MT_STATE_UNINIT) {
		mt_unlock(&init_lock);
		return;
	}
	mt_resolve();
	if (!stderr_checked) {
		/* The first allocation of an image comes before its main. */
		int saved = errno;
		stderr_checked = 1;
		stderr_was_closed = fcntl(2, F_GETFD) < 0 && errno == EBADF;
		errno = saved;
	}
	int state = MT_STATE_OFF;
	if (find_socket_path()) {
		if (connect_recorder(flags, fork_token))
			state = MT_STATE_ACTIVE;
		else
			mt_warn("the agent could not reach the recorder; this process is not recorded", NULL);
	}
	mt_proc.pid = getpid();
	/* Without it, every thread takes its numbers with a locked
	 * instruction (see mt_seq_of). */
	mt_proc.membarrier_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	/* PREFETCHW is CPUID 0x80000001 ECX bit 8: some x86-64 CPUs
	 * without it fault on it rather than ignore it. */
	unsigned eax, ebx, ecx, edx;
	mt_proc.prefetchw = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 8)) != 0;
	if (!thread_key_ready) {
		thread_key_ready = pthread_key_create(&mt_thread_key, thread_exit) == 0;
	}
	if (!thread_key_ready)
		state = MT_STATE_OFF;
	if (state == MT_STATE_ACTIVE && !once_per_image_done) {
		once_per_image_done = 1;
		mt_own_path();
		on_exit(on_exit_handler, NULL);
		pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	}
	if (state == MT_STATE_ACTIVE)
		mt_usable_setup();
	set_state(state);
	mt_unlock(&init_lock);
}

/* before_fork marks the point in the parent's history the child's heap
 * will be a copy of. The number is taken here, before libc locks its heap
 * for the fork, and published by after_fork_parent. */
static void before_fork(void)
{
	fork_parent = (uint32_t)getpid();
	struct mt_thread *t = mt_enter();
	if (t == NULL)
		return;
	t->fork_seq = mt_seq() + 1;
	mt_leave(t);
}

static void after_fork_parent(void)
{
	struct mt_thread *t = mt_enter();
	if (t == NULL)
		return;
	if (t->fork_seq != 0) {
		uint64_t rec[3] = {MT_REC_FORK | 3 << 8, t->fork_seq - 1, mt_tsc()};
		mt_emit(t, rec, 3);
		t->fork_seq = 0;
	}
	mt_leave(t);
}

/* after_fork_child starts the child afresh: it has its own region, call
 * stack tree and module ids, and must never write to its parent's region. */
static void after_fork_child(void)
{
	struct mt_thread *t = thread_key_ready ? pthread_getspecific(mt_thread_key) : NULL;
	uint64_t token = 0;
	set_state(MT_STATE_UNINIT); /* first: the region below is the parent's */
	if (t != NULL) {
		token = t->fork_seq;
		t->fork_seq = 0;
		t->busy = 0;
		t->spawn_pid = 0; /* the parent's to tell (mt_spawn_flush) */
	}
	init_lock.v = 0;
	free_threads_lock.v = 0;
	mt_stack_after_fork();
	if (mt_proc.region != NULL)
		munmap(mt_proc.region, mt_proc.region_size);
	mt_proc.region = NULL;
	mt_proc.hdr = NULL;
	mt_calls_window = 0;
	mt_proc.gen++;
	mt_proc.seq_owner = 0; /* the child's first thread to attach is its only one */
	mt_proc.membarrier_ok = 0;
	leader_exit_sp = 0; /* the child's main thread is the one that forked */
	mt_modules_after_fork();
	mt_stacks_reset();
	memset(in_setup, 0, sizeof in_setup);
	memset(mt_self_cache, 0, sizeof mt_self_cache);
	int guard = setup_begin(gettid_raw());
	mt_process_init(MT_HELLO_FORK, token);
	if (guard >= 0)
		setup_end(guard);
}

/* seq_join makes sure thread t, attaching, may take sequence numbers: the
 * first thread to attach becomes the sole one, which takes them without a
 * locked instruction (mt_seq_of); the next one ends that before it takes
 * its first. It returns 0 if it cannot be ended safely. */
static int seq_join(struct mt_thread *t)
{
	uintptr_t owner = 0;
	if (!mt_proc.membarrier_ok ||
	    __atomic_compare_exchange_n(&mt_proc.seq_owner, &owner, (uintptr_t)t, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 1;
	/* The owner's state may be t itself: a thread that exited gave it
	 * up, and this thread took it over (states are handed on whole, and
	 * never freed). */
	if (owner == MT_SEQ_SHARED || owner == (uintptr_t)t)
		return 1;
	__atomic_store_n(&mt_proc.seq_owner, MT_SEQ_SHARED, __ATOMIC_SEQ_CST);
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		return 0;
	struct mt_thread *sole = (struct mt_thread *)owner;
	while (__atomic_load_n(&sole->in_seq, __ATOMIC_ACQUIRE))
		sched_yield(); /* a few instructions, unless it was preempted there */
	return 1;
}

/* attach gives a thread a ring slot in the current process. */
static int attach(struct mt_thread *t)
{
	struct mt_header *hdr = mt_proc.hdr;
	uint32_t slot = hdr->nslots;
	for (uint32_t i = 0; i < hdr->nslots; i++) {
		uint32_t expect = MT_SLOT_FREE;
		if (__atomic_load_n(&mt_proc.slots[i].state, __ATOMIC_RELAXED) == MT_SLOT_FREE &&
		    __atomic_compare_exchange_n(&mt_proc.slots[i].state, &expect, MT_SLOT_OWNED, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			slot = i;
			break;
		}
	}
	if (slot == hdr->nslots || !seq_join(t)) {
		/* More live threads than slots (or, against all odds, no
		 * safe way to share the sequence counter): this thread goes
		 * unrecorded, and the trace says how many events that cost. */
		if (slot != hdr->nslots)
			__atomic_store_n(&mt_proc.slots[slot].state, MT_SLOT_FREE, __ATOMIC_RELEASE);
		__atomic_fetch_add(&hdr->dropped, 1, __ATOMIC_RELAXED);
		return 0;
	}
	t->gen = mt_proc.gen;
	t->slot = slot;
	t->same_tsc = ~(uint64_t)0; /* the ring's first allocation or free is written whole */
	t->ctl = &mt_proc.slots[slot];
	uint64_t size = slot == 0 ? hdr->first_ring_size : hdr->ring_size;
	uint64_t off = slot == 0 ? 0 : hdr->first_ring_size + (uint64_t)(slot - 1) * hdr->ring_size;
	t->ring = (uint64_t *)(mt_proc.rings + off);
	t->ring_mask = size - 1;
	t->ring_limit = 0;
	t->tid = (uint64_t)gettid_raw();
	t->depth = 0;
	t->top = NULL;
	t->listed = t->frame; /* no words listed */
	t->check_end = t->check;
	memset(t->recent, 0, sizeof t->recent); /* node ids of another process */
	mt_calls_reset(t);
	t->ctl->tid = (uint32_t)t->tid;
	t->internal = 1;
	mt_stack_setup(t, t->tid == (uint64_t)getpid()); /* pthread_getattr_np allocates */
	t->internal = 0;
	uint64_t rec[4] = {MT_REC_THREAD | 4 << 8, mt_seq(), mt_tsc(), t->tid};
	mt_emit(t, rec, 4);
	return 1;
}

/* thread_setup creates the state of a thread's first event. */
static struct mt_thread *thread_setup(void)
{
	mt_lock(&free_threads_lock);
	struct mt_thread *t = free_threads;
	if (t != NULL)
		free_threads = t->next_free;
	mt_unlock(&free_threads_lock);
	if (t == NULL)
		t = mt_arena_alloc(sizeof *t);
	if (t == NULL)
		return NULL;
	t->busy = 1;
	t->gen = 0;
	__atomic_store_n(&t->tp, mt_thread_pointer(), __ATOMIC_RELAXED);
	if (pthread_setspecific(mt_thread_key, t) != 0 || !attach(t)) {
		__atomic_store_n(&t->tp, 0, __ATOMIC_RELAXED);
		pthread_setspecific(mt_thread_key, NULL);
		mt_lock(&free_threads_lock);
		t->next_free = free_threads;
		free_threads = t;
		mt_unlock(&free_threads_lock);
		return NULL;
	}
	return t;
}

static void release_thread(struct mt_thread *t)
{
	if (__atomic_load_n(&t->spawn_pid, __ATOMIC_ACQUIRE) != 0 && (pid_t)syscall(SYS_getpid) == mt_proc.pid &&
	    __atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) == MT_STATE_ACTIVE)
		mt_spawn_flush(t);
	if (t->gen == mt_proc.gen && __atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) == MT_STATE_ACTIVE) {
		mt_calls_end(t);
		mt_stack_record(t);
		uint64_t rec[3] = {MT_REC_THREAD_END | 3 << 8, mt_seq(), mt_tsc()};
		mt_emit(t, rec, 3);
		__atomic_store_n(&t->ctl->state, MT_SLOT_DONE, __ATOMIC_RELEASE);
	}
	t->gen = 0;
	t->spawn_pid = 0;
}

/* thread_exit runs as the key's destructor when a thread exits. The
 * thread may still allocate afterwards (other destructors): it then sets
 * up again. */
static void thread_exit(void *arg)
{
	struct mt_thread *t = arg;
	t->busy = 1;
	if (gettid_raw() == mt_proc.pid) {
		volatile uint64_t here = 0;
		__atomic_store_n(&leader_exit_sp, (uint64_t)(uintptr_t)&here, __ATOMIC_RELEASE);
	}
	release_thread(t);
	__atomic_store_n(&t->tp, 0, __ATOMIC_RELAXED); /* its cache entry no longer holds (mt_self) */
	mt_lock(&free_threads_lock);
	t->next_free = free_threads;
	free_threads = t;
	mt_unlock(&free_threads_lock);
}

/* enter_slow is mt_enter for a thread without state, or a process not
 * connected yet. */
static struct mt_thread *enter_slow(void)
{
	int guard = setup_begin(gettid_raw());
	if (guard < 0)
		return NULL; /* a nested call during setup */
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) == MT_STATE_UNINIT)
		mt_process_init(MT_HELLO_START, 0);
	struct mt_thread *t = NULL;
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) == MT_STATE_ACTIVE) {
		t = pthread_getspecific(mt_thread_key);
		if (t == NULL)
			t = thread_setup();
		else if (t->busy)
			t = NULL;
	}
	setup_end(guard);
	return t;
}

/* mt_enter_miss is mt_enter past its fast path: out of line, so that what
 * it keeps across its calls takes no register the hooks would save. */
struct mt_thread *mt_enter_miss(const void *hook_frame)
{
	if (__atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE) == MT_STATE_ACTIVE)
		return mt_enter_slow(mt_self(), hook_frame);
	return mt_enter_slow(NULL, hook_frame);
}

/* mt_enter_slow is mt_enter for every case but the common one: a thread
 * with state in a recording process. */
struct mt_thread *mt_enter_slow(struct mt_thread *t, const void *hook_frame)
{
	int state = __atomic_load_n(&mt_proc.state, __ATOMIC_ACQUIRE);
	if (state == MT_STATE_OFF)
		return NULL;
	if (state == MT_STATE_ACTIVE && t != NULL) {
		/* Busy, stopped, or set up in the parent of a fork. */
		if (t->busy && !mt_own_abandoned(t, hook_frame)) {
			/* Unless the agent itself caused it, this is a signal
			 * handler that interrupted the agent: the event cannot
			 * be recorded, but it is counted. */
			if (!t->internal)
				__atomic_fetch_add(&mt_proc.hdr->dropped, 1, __ATOMIC_RELAXED);
			return NULL;
		}
		if (__atomic_load_n(&mt_proc.hdr->disabled, __ATOMIC_RELAXED)) {
			/* The recorder asked to stop (it cannot write any more). */
			set_state(MT_STATE_OFF);
			return NULL;
		}
		t->busy = 1;
		if (__atomic_load_n(&t->spawn_pid, __ATOMIC_ACQUIRE) != 0) {
			/* A vfork child of this thread noted the static
			 * program it exec'd (exec.c): it has, if this is the
			 * parent, running again. In the child itself, between
			 * the note and its exec, nothing is recorded. */
			if ((pid_t)syscall(SYS_getpid) != mt_proc.pid) {
				t->busy = 0;
				return NULL;
			}
			mt_spawn_flush(t);
		}
		if (t->gen == mt_proc.gen || attach(t))
			return t;
		t->busy = 0;
		return NULL;
	}
	return enter_slow();
}


static void disable(void)
{
	set_state(MT_STATE_OFF);
	mt_warn("the recorder is gone; recording stopped, the program continues", NULL);
}

/* wait_for_space waits while the ring is full. The recorder drains on the
 * other core; if it has died, recording stops and the program runs on. */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int wait_for_space(struct mt_thread *t, uint64_t need)
{
	struct mt_header *hdr = mt_proc.hdr;
	uint64_t size = t->ring_mask + 1;
	uint64_t start = now_ns();
	int ok = 1;
	__atomic_fetch_add(&hdr->waits, 1, __ATOMIC_RELAXED);
	for (unsigned spins = 0;; spins++) {
		uint64_t used = t->ctl->write - __atomic_load_n(&t->ctl->read, __ATOMIC_ACQUIRE);
		if (used + need <= size)
			break;
		if (__atomic_load_n(&hdr->disabled, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&mt_proc.state, __ATOMIC_RELAXED) != MT_STATE_ACTIVE) {
			ok = 0;
			break;
		}
		/* The recorder hands space back half the ring at a
		 * time: rather than spin (which would take its core on a small
		 * machine), sleep until it has. It wakes a thread that says it
		 * waits when it moves read on; the 2 ms bound is for looking
		 * again at whether it is still alive. */
		if (spins < 16) {
			__builtin_ia32_pause();
		} else {
			uint32_t *word = (uint32_t *)&t->ctl->read; /* its low half */
			uint32_t seen = __atomic_load_n(word, __ATOMIC_SEQ_CST);
			__atomic_store_n(&t->ctl->waiting, 1, __ATOMIC_SEQ_CST);
			used = t->ctl->write - __atomic_load_n(&t->ctl->read, __ATOMIC_SEQ_CST);
			if (used + need > size) {
				struct timespec ts = {0, 2000000};
				syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
			}
			__atomic_store_n(&t->ctl->waiting, 0, __ATOMIC_RELAXED);
			if (spins % 64 == 0 && kill((pid_t)hdr->recorder_pid, 0) < 0 && errno == ESRCH) {
				disable();
				ok = 0;
				break;
			}
		}
	}
	__atomic_fetch_add(&hdr->wait_ns, now_ns() - start, __ATOMIC_RELAXED);
	return ok;
}

/* mt_put_wrapped is mt_put for a record that wraps around the ring's
 * end. */
void mt_put_wrapped(struct mt_thread *t, uint64_t w, const uint64_t *words, unsigned n)
{
	uint64_t mask = t->ring_mask / 8, at = mt_ring_at(t, w) / 8;
	volatile uint64_t *ring = t->ring;
	for (unsigned i = 0; i < n; i++)
		ring[(at + i) & mask] = words[i];
	__atomic_store_n(&t->ctl->write, w + (uint64_t)n * 8, __ATOMIC_RELEASE);
}

/* mt_emit_wait is mt_reserve when the ring seems full. */
int mt_emit_wait(struct mt_thread *t, uint64_t bytes)
{
	struct mt_slot *ctl = t->ctl;
	uint64_t size = t->ring_mask + 1;
	t->ring_limit = __atomic_load_n(&ctl->read, __ATOMIC_ACQUIRE) + size;
	if (ctl->write + bytes > t->ring_limit) {
		if (!wait_for_space(t, bytes)) {
			__atomic_fetch_add(&mt_proc.hdr->dropped, 1, __ATOMIC_RELAXED);
			return 0;
		}
		t->ring_limit = __atomic_load_n(&ctl->read, __ATOMIC_ACQUIRE) + size;
	}
	return 1;
}

/* scanned is the generation of the process whose exit was scanned: a
 * process is scanned once, at its first exit (an exit handler that calls
 * _exit would be a second). */
static uint64_t scanned;

/*
 * Stopping the other threads for the scan. memcheck scans every thread's
 * stack from its stack pointer up, and its registers, with the threads
 * stopped; a stack scanned whole would take stale pointers below the
 * stack pointer for roots. So before the scan the exiting thread sends
 * each other thread a signal whose handler notes its stack pointer and
 * waits, like a garbage collector's stop-the-world: the kernel saves the
 * interrupted registers in the signal frame, above that stack pointer, so
 * scanning the stack from there covers them. The signal is one whose
 * default action is to ignore it and that the program does not handle
 * (SIGURG, else SIGWINCH), so one delivered late (to a thread that blocked
 * it) does nothing; if the program handles both, the threads run on.
 * Threads that do not answer within stop_wait_ns (the signal blocked, or
 * the thread exiting) are scanned whole.
 */
#define MT_MAX_STOPPED 160 /* a SCAN record holds their stack pointers */
static const uint64_t stop_wait_ns = 100000000ull;
static uint64_t stopped_sp[MT_MAX_STOPPED];
static uint32_t stopped;

/* wait_scan_done waits for the recorder to end the scan. The wait is
 * bounded: a recorder that never answers (busy elsewhere for a minute, or
 * gone) costs the program no more than that, and its trace then says the
 * scan did not happen. */
static void wait_scan_done(void)
{
	struct mt_header *hdr = mt_proc.hdr;
	uint64_t start = now_ns();
	uint32_t *word = (uint32_t *)&hdr->scan_done;
	for (unsigned i = 1; __atomic_load_n(word, __ATOMIC_ACQUIRE) == 0; i++) {
		struct timespec ts = {0, 10000000};
		syscall(SYS_futex, word, FUTEX_WAIT, 0, &ts, NULL, 0);
		if (__atomic_load_n(&hdr->disabled, __ATOMIC_RELAXED) || now_ns() - start > 60000000000ull)
			break;
		if (i % 16 == 0 && kill((pid_t)hdr->recorder_pid, 0) < 0 && errno == ESRCH)
			break;
	}
}

static void stop_handler(int sig, siginfo_t *info, void *ctx)
{
	(void)sig;
	(void)info;
	(void)ctx;
	int saved = errno;
	volatile uint64_t here = 0;
	uint32_t i = __atomic_fetch_add(&stopped, 1, __ATOMIC_ACQ_REL);
	if (i < MT_MAX_STOPPED)
		__atomic_store_n(&stopped_sp[i], (uint64_t)(uintptr_t)&here, __ATOMIC_RELEASE);
	if (__atomic_load_n(&mt_proc.hdr->scan_done, __ATOMIC_ACQUIRE) == 0)
		wait_scan_done();
	errno = saved;
}

/* A directory entry as getdents64 gives it. */
struct mt_dirent {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* stop_others signals every other thread of the process (listed from
 * /proc/self/task with raw system calls: nothing is allocated) and waits
 * for them to stop; it returns the signal used (0: none), and sets *old to
 * its former action and *sent to the threads signalled. */
static __attribute__((noinline)) int stop_others(struct sigaction *old, uint32_t *sent)
{
	static const int candidates[] = {SIGURG, SIGWINCH};
	int sig = 0;
	for (unsigned i = 0; i < sizeof candidates / sizeof candidates[0] && sig == 0; i++) {
		if (sigaction(candidates[i], NULL, old) == 0 && !(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_DFL)
			sig = candidates[i];
	}
	/* glibc fills old->sa_mask, 128 bytes, from a copy on its own stack
	 * of which the kernel wrote only the first 8: the rest is whatever an
	 * earlier call left there, and old lies in leak_scan's frame, which
	 * the recorder scans, so a stale pointer there kept a lost block
	 * reachable in some runs. Keep only the signals (memset, as
	 * sigemptyset too clears only the words of the signals). */
	sigset_t mask;
	memset(&mask, 0, sizeof mask);
	for (int s = 1; s < NSIG; s++)
		if (sigismember(&old->sa_mask, s) == 1)
			sigaddset(&mask, s);
	old->sa_mask = mask;
	if (sig == 0)
		return 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = stop_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) != 0)
		return 0;
	__atomic_store_n(&stopped, 0, __ATOMIC_RELEASE);
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return sig;
	pid_t self = (pid_t)syscall(SYS_gettid), pid = getpid();
	char buf[4096] __attribute__((aligned(8)));
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct mt_dirent *d = (struct mt_dirent *)(buf + off);
			off += d->reclen;
			pid_t tid = (pid_t)atoi(d->name);
			if (tid == pid && __atomic_load_n(&leader_exit_sp, __ATOMIC_ACQUIRE) != 0)
				continue; /* it has ended (see leader_exit_sp) */
			if (tid > 0 && tid != self && syscall(SYS_tgkill, pid, tid, sig) == 0)
				(*sent)++;
		}
	}
	close(fd);
	uint64_t start = now_ns();
	while (__atomic_load_n(&stopped, __ATOMIC_ACQUIRE) < *sent && now_ns() - start < stop_wait_ns) {
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	return sig;
}

/* What leak_scan keeps on its stack, in one struct it zeroes first: the
 * recorder scans the stack from regs up, and a hole between separate
 * locals would hold whatever an earlier call left there, a stale pointer
 * that keeps a lost block reachable (it did, now and then, in the tests). */
struct scan_frame {
	/* Every general register, as memcheck and LeakSanitizer scan them:
	 * a block may be kept only by a value in a callee-saved register. */
	uint64_t regs[16];
	struct sigaction old;
	uint64_t rec[7 + MT_MAX_STOPPED + 2 * MT_MAX_MAPS]; /* 255 words, the most a record has */
};

/*
 * leak_scan holds the process while the recorder scans its memory for
 * leaks (see record/leakscan.go). The recorder reads the memory from
 * outside; what the agent gives it is this thread's registers, stored in
 * regs on the stack, the stack pointer below which its stack is not in
 * use, and those of the other threads, stopped (see stop_others).
 */
static __attribute__((noinline)) void leak_scan(struct mt_thread *t)
{
	struct mt_header *hdr = mt_proc.hdr;
	if (!__atomic_load_n(&hdr->leak_scan, __ATOMIC_RELAXED) || scanned == mt_proc.gen + 1)
		return;
	scanned = mt_proc.gen + 1;
	__atomic_store_n(&hdr->scan_done, 0, __ATOMIC_RELEASE);
	struct scan_frame f;
	__builtin_memset(&f, 0, sizeof f);
	uint32_t sent = 0;
	int sig = stop_others(&f.old, &sent);
	__asm__ volatile("mov %%rax, 0(%0)\n\tmov %%rbx, 8(%0)\n\tmov %%rcx, 16(%0)\n\tmov %%rdx, 24(%0)\n\t"
			 "mov %%rsi, 32(%0)\n\tmov %%rdi, 40(%0)\n\tmov %%rbp, 48(%0)\n\tmov %%r8, 56(%0)\n\t"
			 "mov %%r9, 64(%0)\n\tmov %%r10, 72(%0)\n\tmov %%r11, 80(%0)\n\tmov %%r12, 88(%0)\n\t"
			 "mov %%r13, 96(%0)\n\tmov %%r14, 104(%0)\n\tmov %%r15, 112(%0)\n\tmov %%rsp, 120(%0)"
			 : : "r"(f.regs) : "memory");
	uint32_t n = __atomic_load_n(&stopped, __ATOMIC_ACQUIRE), m = __atomic_load_n(&mt_nmaps, __ATOMIC_ACQUIRE);
	if (n > MT_MAX_STOPPED)
		n = MT_MAX_STOPPED;
	if (m > MT_MAX_MAPS)
		m = MT_MAX_MAPS;
	uint64_t *rec = f.rec;
	rec[1] = mt_seq();
	rec[2] = mt_tsc();
	rec[3] = (uint64_t)(uintptr_t)f.regs;
	rec[4] = n;
	unsigned k = 5;
	for (uint32_t i = 0; i < n; i++)
		rec[k++] = __atomic_load_n(&stopped_sp[i], __ATOMIC_ACQUIRE);
	uint64_t leader_sp = __atomic_load_n(&leader_exit_sp, __ATOMIC_ACQUIRE);
	if (leader_sp != 0 && gettid_raw() != mt_proc.pid) {
		/* The main thread ended before this one: it counts as stopped
		 * there. (If it is this one, pthread_exit found no other
		 * thread left, and its registers are below.) */
		rec[k++] = leader_sp;
		rec[4]++;
	}
	uint64_t *nmaps = &rec[k++];
	for (uint32_t i = 0; i < m; i++) {
		uintptr_t addr = __atomic_load_n(&mt_maps[i].addr, __ATOMIC_ACQUIRE);
		if (addr != 0) {
			rec[k++] = addr;
			rec[k++] = mt_maps[i].size;
			(*nmaps)++;
		}
	}
	rec[0] = MT_REC_SCAN | (uint64_t)k << 8;
	mt_emit(t, rec, k);
	wait_scan_done();
	/* A thread that has not answered yet may still: then the handler,
	 * which returns at once now, stays. */
	if (sig != 0 && __atomic_load_n(&stopped, __ATOMIC_ACQUIRE) >= sent)
		sigaction(sig, &f.old, NULL);
	/* The registers must be in memory until the scan is over. */
	__asm__ volatile("" : : "r"(f.regs) : "memory");
}

static void on_exit_handler(int status, void *arg)
{
	(void)arg;
	struct mt_thread *t = mt_enter();
	if (t == NULL)
		return;
	mt_calls_end(t);
	mt_stack_record(t);
	uint64_t rec[4] = {MT_REC_EXIT | 4 << 8, mt_seq(), mt_tsc(), (uint64_t)(uint32_t)status};
	mt_emit(t, rec, 4);
	leak_scan(t);
	mt_leave(t);
}

void mt_record_exit(int status)
{
	on_exit_handler(status, NULL);
}

__attribute__((constructor(101))) static void agent_init(void)
{
	struct mt_thread *t = mt_enter();
	if (t != NULL)
		mt_leave(t);
}

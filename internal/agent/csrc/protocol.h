/*
 * protocol.h: what the agent and the recorder share.
 *
 * The recorder gives each recorded process one memory region (a memfd both
 * map). The region holds a header, one ring buffer per thread slot and the
 * call-stack node table. The Go side mirrors these definitions in
 * internal/record/protocol.go; a test compiles this header and checks that
 * both agree.
 *
 * Layout of a region, offsets in bytes:
 *   0                      struct mt_header
 *   MT_HEADER_SIZE         nslots * struct mt_slot (ring control words)
 *   rings_offset           first_ring_size bytes of ring data for slot 0, then
 *                          (nslots - 1) * ring_size bytes for the others
 *   nodes_offset           node_capacity * struct mt_node
 */
#ifndef MEMTRAIL_PROTOCOL_H
#define MEMTRAIL_PROTOCOL_H

#include <stdint.h>

#define MT_REGION_MAGIC 0x314d485354544d4dULL /* "MMTTSHM1" */
#define MT_PROTOCOL_VERSION 10
#define MT_HELLO_MAGIC 0x4f4c4548u /* "HELO" */
#define MT_HEADER_SIZE 4096
#define MT_EXEC_STATIC 2
#define MT_EXEC_PATH 1024
#define MT_MAX_HELLO 16384

/* The recorder's key for one run, MT_KEY_LEN hex digits. The agent finds
 * it in its environment, MEMTRAIL_SOCK=<key>:<socket>, and sends it in
 * every hello: the recorder welcomes no process that does not know it. */
#define MT_KEY_LEN 32

/* Hello flags: why the agent connects. */
#define MT_HELLO_START 1 /* a new program image (start or exec) */
#define MT_HELLO_FORK 2  /* the child of a fork */

/* Slot states. */
#define MT_SLOT_FREE 0
#define MT_SLOT_OWNED 1
#define MT_SLOT_DONE 2 /* its thread exited; the recorder frees it once drained */

/*
 * Ring records are sequences of 64-bit words. Word 0 holds the kind in its
 * low 8 bits and the record's length in words in the next 8 bits; the rest
 * depends on the kind:
 *
 *   ALLOC    w0: api<<16 | stack<<24   w1 seq  w2 tsc  w3 addr  w4 size  w5 stack in use
 *   FREE     w0: api<<16 | stack<<24   w1 seq  w2 tsc  w3 addr  w4 stack in use
 *            then, with mt_header.free_pointers, the words of the block
 *            that may point to a block, as in POINTERS
 *   ALLOC_SAME  w0: api<<16 | stack<<24   w1 seq  w2 addr  w3 size
 *   FREE_SAME   w0: api<<16 | stack<<24   w1 seq  w2 addr
 *            an ALLOC or a FREE whose tsc and stack in use are those of
 *            the latest ALLOC or FREE record of the same ring (of any
 *            length; never one of these two): a thread in a loop of
 *            allocations writes a third less to its ring. The first
 *            allocation or free a thread records in a ring is a whole
 *            ALLOC or FREE.
 *   REALLOC  w0: api<<16 | stack<<24   w1 seq of the release of the old block
 *            w2 seq of the new block   w3 tsc  w4 old addr  w5 new addr  w6 size
 *            w7 stack in use
 *   SKIP     w1 seq  (a sequence number taken by an operation that failed)
 *   MODULE   w1 seq  w2 tsc  w3 module id  w4 base  w5 nsegments
 *            then 4 words per segment (vaddr, memsz, offset, flags),
 *            then w: build-id length, build-id bytes padded to words,
 *            then w: path length, path bytes padded to words
 *   UNLOAD   w1 seq  w2 tsc  w3 module id
 *   THREAD   w1 seq  w2 tsc  w3 tid
 *   EXIT     w1 seq  w2 tsc  w3 exit status   (the program called exit)
 *   THREAD_END w1 seq  w2 tsc                  (its thread is exiting)
 *   FORK     w1 seq  w2 tsc    (the process forked; the child's hello
 *            carries seq+1 as its fork token: the child's heap is the
 *            parent's as of this point)
 *   STACK    w1 seq  w2 tsc  w3 high-water mark  w4 stack size   (the
 *            thread's deepest stack use, in bytes from its base, found by
 *            painting; sent as it ends or the process exits)
 *   CALLS    w1 seq  w2 tsc of the latest call counted  w3 the most stack
 *            in use at a call counted  w4 the stack in use at the latest
 *            w5 calls counted   (function entries and returns since the
 *            thread's previous CALLS record, with -stack-calls)
 *   DEEPEST  w0: stack<<24  w1 seq  w2 tsc  w3 stack in use  w4 frame
 *            sizes n, then n 32-bit frame sizes, two a word, the first in
 *            the low half, innermost first   (the call stack of the
 *            thread's deepest function entry so far, with -stack-calls)
 *   SCAN     w1 seq  w2 tsc  w3 the exiting thread's stack pointer, below
 *            which nothing of its stack is in use, and above which its
 *            registers are saved  w4 n, then n words: the same for other
 *            threads, stopped for the scan, and for the main thread where
 *            it ended if it ended first; then m, and m pairs of words:
 *            the address and size of the agent's own mappings, which are
 *            no roots   (the process exits normally and
 *            mt_header.leak_scan is set: the agent waits, in the exiting
 *            thread, until the recorder sets mt_header.scan_done)
 *   POINTERS w1 seq  w2 the address of a block about to be released
 *            w3... the words of the block that may point to a block, each
 *            as its index in the block << 48 | its value (an index of
 *            0xffff or more as 0xffff)   (with mt_header.free_pointers
 *            set, before the FREE record of that release, for the words
 *            that do not fit in it: what the block held when it was freed)
 *   SPAWN    w1 seq  w2 tsc  w3 pid  w4 path length, then the path's bytes
 *            padded to words, at most MT_EXEC_PATH-1   (posix_spawn or
 *            posix_spawnp started child pid running the program at path,
 *            or a vfork child pid exec'd it, and it is statically linked,
 *            or its script's interpreter is: the child never says hello,
 *            and is not recorded)
 *
 * A tsc word is the time-stamp counter, or mt_header.clock when
 * mt_header.coarse is set.
 *
 * The stack in use is the thread's stack base (the highest address of its
 * stack) minus the stack pointer of the allocator's caller, in bytes; 0 if
 * it is not known (the thread runs on another stack).
 *
 * The stack field is the id of the innermost node of the event's call stack
 * (0: none). Sequence numbers come from mt_header.seq: every operation
 * takes one (a realloc takes two), so the recorder can restore the order in
 * which things happened across threads and knows when one is still missing.
 */
#define MT_REC_ALLOC 1
#define MT_REC_FREE 2
#define MT_REC_REALLOC 3
#define MT_REC_SKIP 4
#define MT_REC_MODULE 5
#define MT_REC_UNLOAD 6
#define MT_REC_THREAD 7
#define MT_REC_EXIT 8
#define MT_REC_THREAD_END 9
#define MT_REC_FORK 10
#define MT_REC_STACK 11
#define MT_REC_CALLS 12
#define MT_REC_DEEPEST 13
#define MT_REC_SCAN 14
#define MT_REC_POINTERS 15
#define MT_REC_SPAWN 16
#define MT_REC_ALLOC_SAME 17
#define MT_REC_FREE_SAME 18

#define MT_STACK_SHIFT 24
#define MT_API_SHIFT 16

/* API numbers: the same as trace.API in internal/trace/spec.go. */
enum mt_api {
	MT_API_MALLOC = 1,
	MT_API_CALLOC,
	MT_API_REALLOC,
	MT_API_REALLOCARRAY,
	MT_API_FREE,
	MT_API_POSIX_MEMALIGN,
	MT_API_ALIGNED_ALLOC,
	MT_API_MEMALIGN,
	MT_API_VALLOC,
	MT_API_PVALLOC,
	MT_API_NEW,
	MT_API_NEW_NOTHROW,
	MT_API_NEW_ALIGNED,
	MT_API_NEW_ALIGNED_NOTHROW,
	MT_API_NEW_ARRAY,
	MT_API_NEW_ARRAY_NOTHROW,
	MT_API_NEW_ARRAY_ALIGNED,
	MT_API_NEW_ARRAY_ALIGNED_NOTHROW,
	MT_API_DELETE,
	MT_API_DELETE_SIZED,
	MT_API_DELETE_ALIGNED,
	MT_API_DELETE_SIZED_ALIGNED,
	MT_API_DELETE_NOTHROW,
	MT_API_DELETE_ALIGNED_NOTHROW,
	MT_API_DELETE_ARRAY,
	MT_API_DELETE_ARRAY_SIZED,
	MT_API_DELETE_ARRAY_ALIGNED,
	MT_API_DELETE_ARRAY_SIZED_ALIGNED,
	MT_API_DELETE_ARRAY_NOTHROW,
	MT_API_DELETE_ARRAY_ALIGNED_NOTHROW,
};
/* One function of the program that is several APIs at once, as chromium's
 * free is its operator delete (entrypatch.c): the trace's unknown API,
 * which belongs to no family, so it makes no mismatched free. */
#define MT_API_SHARED 0

/* A node of the call-stack tree: the frame at return address
 * module base + offset, called from the stack named by parent. A node of
 * module MT_MODULE_CUT (no module has id 0) stands for the frames of a
 * stack beyond the depth limit, as the root of the frames kept; its
 * offset is how many there were (0: more than MT_MAX_FRAMES_LIMIT, not
 * counted). */
#define MT_MODULE_CUT 0

/* The most frames of a stack the agent keeps (mt_header.max_frames). */
#define MT_MAX_FRAMES_LIMIT 1024
struct mt_node {
	uint32_t parent;
	uint32_t module;
	uint64_t offset;
};

/* Ring control words of one thread slot; each counter on its own line so
 * the agent and the recorder do not fight over a cache line. */
struct mt_slot {
	uint32_t state;
	uint32_t tid;
	uint8_t pad0[56];
	uint64_t write; /* bytes written, only ever increases (agent) */
	uint8_t pad1[56];
	uint64_t read; /* bytes consumed (recorder) */
	/* Nonzero while the slot's thread sleeps for space on the low half
	 * of read (a futex): the recorder wakes it when it moves read on. */
	uint32_t waiting;
	uint8_t pad2[52];
};

struct mt_header {
	uint64_t magic;
	uint32_t version;
	uint32_t nslots;
	uint64_t region_size;
	uint64_t ring_size; /* bytes per ring, a power of two */
	uint64_t rings_offset;
	uint64_t nodes_offset;
	uint64_t node_capacity;
	uint32_t max_frames;
	uint32_t recorder_pid;
	/* Counters written by the agent, each on its own cache line. */
	uint64_t seq __attribute__((aligned(64))); /* next sequence number */
	uint64_t node_count __attribute__((aligned(64))); /* node ids handed out */
	uint64_t dropped __attribute__((aligned(64))); /* events not recorded */
	uint64_t disabled;   /* nonzero: the agent stopped recording */
	uint64_t nodes_lost; /* stacks cut short because the node table was full */
	/* Event times. With coarse set, the agent stamps events with clock,
	 * a time-stamp counter value the recorder moves on at least every
	 * clock_period ticks while it runs, instead of reading the counter
	 * for every event: the resolution of a trace's times (1 ms by
	 * default) is far coarser than the counter, and reading it is a fifth
	 * of what recording an event costs the program. */
	uint64_t coarse;
	uint64_t clock_period;
	/* The ring of slot 0, which a process's first thread takes, is this
	 * big; the others are ring_size. */
	uint64_t first_ring_size;
	/* How often the program's threads waited for ring space, and how
	 * long in all (ns): the cost of a recorder that did not keep up. */
	uint64_t waits;
	uint64_t wait_ns;
	/* Nonzero (memtrail run -stack-calls): the agent's function entry and
	 * return hooks measure the stack, and sum it up in CALLS records, one
	 * per thread for every this many time-stamp counter ticks in which it
	 * made calls. Zero: the hooks return at once. */
	uint64_t calls_window;
	/* Nonzero: at a normal exit the agent sends SCAN and holds the
	 * process until the recorder has scanned its memory for leaks and
	 * set scan_done (a futex on its low half). */
	uint64_t leak_scan;
	uint64_t scan_done;
	/* Nonzero (memtrail run -leak-origins): before each free, the agent
	 * sends the words of the block that look like pointers to blocks
	 * (POINTERS), so that a block lost at exit can be traced to the free
	 * that dropped its last pointer. */
	uint64_t free_pointers;
	/* Nonzero (tests): every stack is unwound whole, without reusing the
	 * outer part of the thread's previous one. */
	uint64_t full_unwind;
	/* Nonzero while the process is in an exec (agent): if it is still
	 * set when the pid ends, the new image never connected. It is
	 * MT_EXEC_STATIC when the agent saw that the new program, or its
	 * script's interpreter, is statically linked, so that the loader
	 * cannot preload the agent into it; exec_path then names the
	 * program exec'd, cut to fit and NUL-terminated. */
	uint64_t exec_pending;
	uint64_t clock __attribute__((aligned(64)));
	char exec_path[MT_EXEC_PATH] __attribute__((aligned(64)));
};

/* Hello: the agent's first message on the recorder's socket. The strings
 * follow the fixed part: cmdline (NUL-separated, as /proc/self/cmdline),
 * then exe, then cwd, then own_alloc, with the lengths given here.
 *
 * own_alloc names the allocation functions the agent hooks whose
 * definition the dynamic linker binds calls to is not the agent's (the
 * program brings its own allocator): NUL-terminated strings, each either
 * '@' and the path of the object that defines the functions that follow
 * ("@" alone: the executable), or a function's (mangled) name; first,
 * "!" if the agent patched the executable's own functions to pass through
 * its hooks (the default; not with memtrail run -patch-own-allocator=false).
 * Empty: every call
 * reaches the agent, through no patch. */
struct mt_hello {
	uint32_t magic;
	uint32_t version;
	uint32_t pid;
	uint32_t ppid;
	uint32_t flags;
	uint32_t cmdline_len;
	uint32_t exe_len;
	uint32_t cwd_len;
	uint32_t own_alloc_len;
	uint64_t fork_token; /* a fork child: the parent's FORK sequence + 1 */
	char key[MT_KEY_LEN];
};

/* The recorder's answer; it carries the region's memfd as SCM_RIGHTS. */
struct mt_welcome {
	uint32_t magic;
	uint32_t status; /* 0: record; 1: do not record this process */
	uint64_t region_size;
};

#endif

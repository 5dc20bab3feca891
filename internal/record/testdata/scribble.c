/*
 * scribble: a program that overwrites memtrail's buffer in its own memory,
 * as a wild write of a buggy program (or a hostile one) would. It forks a
 * child that allocates and exits untouched, then finds the region the
 * agent shares with the recorder in /proc/self/maps, waits until the
 * recorder has read everything it published, damages the region as
 * argv[1] says, allocates on, and exits with status 3.
 *
 *   indexes     its ring's write index set far beyond the ring
 *   length0     a record of 0 words published
 *   lengthhuge  a record that says it is longer than what was published
 *   random      random bytes published over its ring
 *   module      a module record with a huge count of segments
 *   deepest     a deepest-stack record with a huge count of frame sizes
 *   node        an allocation whose call stack is a node not in the table
 *   seqhole     a sequence number taken for no record
 *   fifo PATH   a module whose file is PATH, a FIFO it makes there
 *   pointers    more words of a 64-byte block, about to be freed, than it
 *               holds (-leak-origins)
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"

void *volatile sink;

static char *find_region(void)
{
	static char maps[1 << 16];
	int fd = open("/proc/self/maps", O_RDONLY);
	size_t n = 0;
	for (ssize_t k; fd >= 0 && (k = read(fd, maps + n, sizeof maps - 1 - n)) > 0;)
		n += (size_t)k;
	maps[n] = 0;
	for (char *line = maps; line && *line;) {
		char *end = strchr(line, '\n');
		if (end)
			*end = 0;
		if (strstr(line, "memfd:memtrail")) {
			unsigned long start = strtoul(line, NULL, 16);
			struct mt_header *h = (struct mt_header *)start;
			if (h->magic == MT_REGION_MAGIC)
				return (char *)start;
		}
		line = end ? end + 1 : NULL;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "indexes";
	void *before = malloc(1000);
	pid_t pid = fork();
	if (pid == 0) {
		void *x = malloc(2000);
		void *y = malloc(3000);
		free(x);
		free(before);
		sink = y;
		exit(5);
	}
	int status;
	waitpid(pid, &status, 0);
	void *a = malloc(4000);
	free(a);

	char *region = find_region();
	if (region == NULL) {
		fprintf(stderr, "scribble: no memtrail region in /proc/self/maps\n");
		return 2;
	}
	struct mt_header *hdr = (struct mt_header *)region;
	struct mt_slot *slots = (struct mt_slot *)(region + MT_HEADER_SIZE), *slot = NULL;
	uint32_t index = 0, tid = (uint32_t)syscall(SYS_gettid);
	for (uint32_t i = 0; i < hdr->nslots; i++) {
		if (slots[i].state == MT_SLOT_OWNED && slots[i].tid == tid) {
			index = i;
			slot = &slots[i];
			break;
		}
	}
	if (slot == NULL) {
		fprintf(stderr, "scribble: no slot of thread %u\n", tid);
		return 2;
	}
	uint64_t size = index == 0 ? hdr->first_ring_size : hdr->ring_size;
	uint64_t *ring = (uint64_t *)(region + hdr->rings_offset +
				      (index == 0 ? 0 : hdr->first_ring_size + (index - 1) * hdr->ring_size));
	uint64_t mask = size / 8 - 1;
	void *block = malloc(64); /* live, for mode pointers */
	/* Everything before the damage is the recorder's: the fork above
	 * included, so the child has its place. */
	for (int i = 0; i < 10000 && __atomic_load_n(&slot->read, __ATOMIC_ACQUIRE) != slot->write; i++)
		usleep(1000);

	/* From here to the store of write, nothing may allocate: the agent
	 * would publish in between. */
	uint64_t w = slot->write, rec[8] = {0};
	unsigned n = 0;
	if (strcmp(mode, "fifo") == 0) {
		/* mkfifo does not allocate: the record goes right after. */
		const char *path = argc > 2 ? argv[2] : "";
		size_t len = strlen(path);
		if (mkfifo(path, 0600) != 0 || len > 64) {
			perror("scribble: mkfifo");
			return 2;
		}
		uint64_t m[20] = {0};
		unsigned k = 6 + 1 + 1 + (unsigned)(len + 7) / 8;
		m[0] = MT_REC_MODULE | (uint64_t)k << 8;
		m[1] = __atomic_fetch_add(&hdr->seq, 1, __ATOMIC_SEQ_CST);
		m[3] = 99, m[4] = 0x400000, m[5] = 0; /* no segments, no build ID */
		m[7] = len;
		memcpy(&m[8], path, len);
		for (unsigned i = 0; i < k; i++)
			ring[(w / 8 + i) & mask] = m[i];
		__atomic_store_n(&slot->write, w + k * 8, __ATOMIC_RELEASE);
	} else if (strcmp(mode, "pointers") == 0) {
		/* Records of 255 words, 400 of them: less than the ring. */
		for (unsigned r = 0; r < 400; r++, w += 255 * 8) {
			ring[w / 8 & mask] = MT_REC_POINTERS | 255ull << 8;
			ring[(w / 8 + 1) & mask] = __atomic_fetch_add(&hdr->seq, 1, __ATOMIC_SEQ_CST);
			ring[(w / 8 + 2) & mask] = (uint64_t)(uintptr_t)block;
			for (unsigned i = 3; i < 255; i++)
				ring[(w / 8 + i) & mask] = (uint64_t)(uintptr_t)block;
		}
		__atomic_store_n(&slot->write, w, __ATOMIC_RELEASE);
	} else if (strcmp(mode, "seqhole") == 0) {
		__atomic_fetch_add(&hdr->seq, 1, __ATOMIC_SEQ_CST);
	} else if (strcmp(mode, "indexes") == 0) {
		__atomic_store_n(&slot->write, 1ull << 62, __ATOMIC_RELEASE);
	} else if (strcmp(mode, "random") == 0) {
		uint64_t x = 0x9e3779b97f4a7c15ull;
		for (unsigned i = 0; i < 1024; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			ring[(w / 8 + i) & mask] = x;
		}
		__atomic_store_n(&slot->write, w + 1024 * 8, __ATOMIC_RELEASE);
	} else {
		rec[1] = __atomic_fetch_add(&hdr->seq, 1, __ATOMIC_SEQ_CST);
		n = 6;
		if (strcmp(mode, "length0") == 0) {
			rec[0] = MT_REC_ALLOC;
		} else if (strcmp(mode, "lengthhuge") == 0) {
			rec[0] = MT_REC_ALLOC | 255ull << 8;
		} else if (strcmp(mode, "module") == 0) {
			n = 8;
			rec[0] = MT_REC_MODULE | (uint64_t)n << 8;
			rec[3] = 99, rec[4] = 0x400000, rec[5] = 1ull << 40;
		} else if (strcmp(mode, "deepest") == 0) {
			rec[0] = MT_REC_DEEPEST | (uint64_t)n << 8;
			rec[3] = 4096, rec[4] = 1ull << 30;
		} else if (strcmp(mode, "node") == 0) {
			rec[0] = MT_REC_ALLOC | (uint64_t)n << 8 | (uint64_t)MT_API_MALLOC << MT_API_SHIFT |
				 (uint64_t)0xfffffff0 << MT_STACK_SHIFT;
			rec[3] = 0x12340, rec[4] = 16;
		} else {
			fprintf(stderr, "scribble: no mode %s\n", mode);
			return 2;
		}
		for (unsigned i = 0; i < n; i++)
			ring[(w / 8 + i) & mask] = rec[i];
		__atomic_store_n(&slot->write, w + n * 8, __ATOMIC_RELEASE);
	}

	/* The program goes on: it must not wait for the recorder for good. */
	for (int i = 0; i < 100000; i++) {
		sink = malloc(64);
		free(sink);
	}
	printf("done\n");
	return 3;
}

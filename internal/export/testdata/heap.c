/* The program the exporters' tests record: a few call stacks with
 * different shapes, all deterministic, and no stdio (whose buffers would
 * add allocations of libc's own). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TABLE_ROWS 200
#define ROW_BYTES 4096

static void *kept[10];

/* Inlined into its callers even at -O0, so that their stacks have an
 * inlined frame. */
static inline __attribute__((always_inline)) void *new_row(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}

/* leak_some keeps 10 blocks of 1000 bytes until the end. */
void leak_some(void)
{
	for (int i = 0; i < 10; i++)
		kept[i] = malloc(1000);
}

/* build_table makes the peak: 200 rows of 4 KiB live at once. */
void build_table(void)
{
	void *rows[TABLE_ROWS];
	for (int i = 0; i < TABLE_ROWS; i++)
		rows[i] = new_row(ROW_BYTES);
	for (int i = 0; i < TABLE_ROWS; i++)
		free(rows[i]);
}

/* churn makes temporary allocations. */
void churn(void)
{
	for (int i = 0; i < 1000; i++) {
		char *p = malloc(64);
		p[0] = (char)i;
		free(p);
	}
}

/* grow moves a buffer with realloc, then frees it. */
void grow(void)
{
	char *buf = malloc(100);
	buf = realloc(buf, 200);
	buf = realloc(buf, 400000);
	buf[0] = 1;
	free(buf);
}

/* pause_ms lets the recorder's clock move, so that the phases of the run
 * fall in different steps of the timeline. */
static void pause_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000};
	nanosleep(&ts, NULL);
}

int main(void)
{
	leak_some();
	pause_ms(5);
	build_table();
	pause_ms(5);
	churn();
	pause_ms(5);
	grow();
	return 0;
}

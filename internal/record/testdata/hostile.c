/* A program that is rude to its environment: it allocates before main,
 * installs signal handlers, closes every descriptor and dup2s over them. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

void *volatile early;
void *volatile sink;

__attribute__((constructor)) static void before_main(void) { early = malloc(321); }

static void on_signal(int sig) { (void)sig; }

int main(void)
{
	signal(SIGUSR1, on_signal);
	signal(SIGPIPE, SIG_IGN);
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	int null = open("/dev/null", O_RDWR);
	for (int fd = 3; fd < 64; fd++)
		dup2(null, fd);
	raise(SIGUSR1);
	for (int i = 0; i < 100; i++)
		sink = malloc(i + 1), free(sink);
	sink = malloc(77);
	return 0;
}

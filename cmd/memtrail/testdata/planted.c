/* planted.c: what another user puts where memtrail might look for its
 * agent. Loaded into a program, it leaves a marker file to say so. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void planted(void)
{
	const char *marker = getenv("MEMTRAIL_TEST_MARKER");
	if (marker != NULL)
		close(open(marker, O_WRONLY | O_CREAT, 0644));
}

/* Built with -static: a program the loader never runs, so that memtrail
 * cannot preload its agent into it. Exits with 7. */
#include <stdlib.h>

void *volatile sink;

int main(void)
{
	sink = malloc(10);
	return 7;
}

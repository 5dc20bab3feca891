/* evil.c: a program whose source file name, from a #line directive, holds
 * terminal escape sequences that retitle the window (OSC 0, ended by BEL)
 * and turn what follows red (SGR 31). A report that wrote the name raw
 * would send them to the terminal. */
#include <stdlib.h>
#include <string.h>

#line 1 "evil\x1b]0;pwned\x07\x1b[31m.c"
struct node {
	struct node *next;
	char name[24];
};

struct node *make_node(struct node *next)
{
	struct node *n = malloc(sizeof *n);
	n->next = next;
	strcpy(n->name, "node");
	return n;
}

int main(void)
{
	struct node *list = NULL;
	for (int i = 0; i < 10; i++)
		list = make_node(list);
	char *big = malloc(1 << 16);
	big = realloc(big, 1 << 17);
	free(big);
	for (int i = 0; i < 5; i++) {
		struct node *next = list->next;
		free(list);
		list = next;
	}
	return 0;
}

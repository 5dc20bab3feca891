// A plain C program: functions that allocate, at lines the tests find by
// the @markers in the comments.
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *next;
	char name[24];
};

__attribute__((noinline)) struct node *new_node(const char *name) {
	struct node *n = malloc(sizeof *n); /* @new_node.malloc */
	strncpy(n->name, name, sizeof n->name - 1);
	n->name[sizeof n->name - 1] = 0;
	n->next = NULL;
	return n;
}

__attribute__((noinline)) struct node *push(struct node *list, const char *name) {
	struct node *n = new_node(name); /* @push.new_node */
	n->next = list;
	return n;
}

__attribute__((noinline)) void free_list(struct node *list) {
	while (list) {
		struct node *next = list->next;
		free(list); /* @free_list.free */
		list = next;
	}
}

int main(int argc, char **argv) {
	struct node *list = NULL;
	for (int i = 0; i < argc; i++)
		list = push(list, argv[i]); /* @main.push */
	free_list(list); /* @main.free_list */
	return 0;
}

// Types for TestTypes. The program prints each type Types must find as
// "size name", with the size the compiler gives it; the types it must
// leave out are in the DWARF too (each is used), so that leaving them out
// is tested. No header is included: its types would be in the DWARF.
int printf(const char *, ...);

typedef struct {
	int color;
	int data[50];
} widget; // an anonymous struct named by a typedef

struct node {
	struct node *next;
	long key;
	char tag[3];
};
typedef struct node node_t;
typedef const volatile node_t cv_node; // through const, volatile, typedef

union value {
	int i;
	double d;
	char bytes[12];
};

enum color { RED, BLUE };
typedef enum color color_t; // the enum itself is no struct: only its typedef

typedef int matrix[3][4];     // an array: no DW_AT_byte_size, worked out
typedef widget widget_pair[2];
typedef unsigned short u16;   // a base type

struct flex {
	int n;
	int items[]; // a flexible array member: the struct still has a size
};

// Left out.
typedef struct node *node_ptr;       // a pointer
typedef int (*callback)(int);        // a pointer to a function
struct opaque;                       // a declaration
typedef struct opaque opaque_t;      // of a declaration: no size
typedef int open_array[];            // no size
struct { int x; } anonymous;         // anonymous, no typedef
struct empty {};                     // size 0 (a GNU C extension)
typedef struct _Reserved { char c[7]; } kept_t; // _Reserved is reserved; kept_t is not
typedef struct __reserved2 { char c[9]; } __reserved2_t;

static void show(const char *name, unsigned long size) { printf("%lu %s\n", size, name); }

int main(void)
{
	struct local { short a, b, c; } l = {0}; // local: named as it is
	widget w = {0};
	node_t n = {0};
	cv_node *cvn = &n;
	union value v = {0};
	color_t c = BLUE;
	matrix m = {{0}};
	widget_pair wp = {{0}};
	u16 s = 0;
	struct flex f = {0};
	node_ptr np = &n;
	callback cb = 0;
	opaque_t *op = 0;
	open_array *oa = 0;
	struct empty e;
	kept_t k = {{0}};
	__reserved2_t r = {{0}};
	(void)cvn; (void)cb; (void)op; (void)oa; (void)e; (void)np;

	show("widget", sizeof w);
	show("node", sizeof(struct node));
	show("node_t", sizeof n);
	show("cv_node", sizeof(cv_node));
	show("value", sizeof v);
	show("color_t", sizeof c);
	show("matrix", sizeof m);
	show("widget_pair", sizeof wp);
	show("u16", sizeof s);
	show("flex", sizeof f);
	show("local", sizeof l);
	show("kept_t", sizeof k);
	return (int)sizeof r == 0;
}

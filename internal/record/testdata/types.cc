// Types for TestTypes: a C-style typedef of an anonymous struct, a struct
// that points to itself, a union and a class in a namespace. The program
// prints each as "exe size name", with the size the compiler gives it,
// then loads the library argv[1], which prints its own. No header is
// included: a header's types would be in the DWARF too.
extern "C" {
int printf(const char *, ...);
void *dlopen(const char *, int);
void *dlsym(void *, const char *);
}

typedef struct {
	int color;
	int data[50];
} widget;

struct node {
	node *next;
	long key;
};

union value {
	long i;
	double d;
	char bytes[20];
};

namespace shapes {
class Polygon {
public:
	explicit Polygon(int n) : sides(n) {}
	virtual ~Polygon() {}
	int sides;
	double points[8];
};
} // namespace shapes

static void show(const char *name, unsigned long size) { printf("exe %lu %s\n", size, name); }

int main(int argc, char **argv)
{
	widget *w = new widget();
	node *n = new node();
	value *v = new value();
	shapes::Polygon *p = new shapes::Polygon(3);
	show("widget", sizeof *w);
	show("node", sizeof *n);
	show("value", sizeof *v);
	show("shapes::Polygon", sizeof *p);
	delete w;
	delete n;
	delete v;
	delete p;
	if (argc < 2)
		return 0;
	void *lib = dlopen(argv[1], 2 /* RTLD_NOW */);
	if (lib == 0)
		return 1;
	void (*make)(void) = (void (*)(void))dlsym(lib, "make_state");
	make();
	return 0;
}

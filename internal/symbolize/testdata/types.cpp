// C++ types for TestTypes, printed as in types.c. No header is included.
extern "C" int printf(const char *, ...);

typedef struct {
	int a[3];
} widget; // in C++ the anonymous struct takes the typedef's name

namespace geo {

class Shape {
public:
	virtual ~Shape() {}
	struct Inner;
	typedef unsigned long size_type; // a member typedef: left out
	double x, y;
	size_type n;
};

struct Shape::Inner { // defined outside, nested in DWARF
	int q[7];
};

namespace {
struct Hidden {
	char c; // size 1 with data: kept
};
} // namespace

template <typename T>
struct Box {
	T v;
};

typedef Box<char> CharBox;

struct Tag {}; // an empty class: left out

} // namespace geo

static void show(const char *name, unsigned long size) { printf("%lu %s\n", size, name); }

int main()
{
	widget *w = new widget();
	geo::Shape *s = new geo::Shape();
	geo::Shape::Inner *in = new geo::Shape::Inner();
	geo::Hidden h = {'h'};
	geo::Box<long> bl = {1};
	geo::CharBox bc = {'c'};
	geo::Tag tag;
	geo::Shape::size_type n = 0;
	(void)tag;

	show("widget", sizeof *w);
	show("geo::Shape", sizeof *s);
	show("geo::Shape::Inner", sizeof *in);
	show("geo::(anonymous namespace)::Hidden", sizeof h);
	show("geo::Box<long int>", sizeof bl); // as GCC spells it
	show("geo::Box<char>", sizeof bc);
	show("geo::CharBox", sizeof bc);
	delete w;
	delete s;
	delete in;
	return (int)n;
}

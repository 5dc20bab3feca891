/*
 * Blocks kept at exit only through a pointer into their interior, of the
 * shapes memcheck's leak-check heuristics (--leak-check-heuristics, all by
 * default) take for pointers to the start, and of shapes they do not, in
 * the way argv[1] says. Like leaks.c, the program prints nothing and
 * clears the stack it used below main's frame before it exits.
 *
 * The standard library is the old one (copy-on-write strings, whose
 * pointer is to the characters after a 24-byte header): "cow" exits 0
 * when this g++ has it, 1 when it does not.
 *
 * Sizes are distinct so that a wrong class shows in the bytes.
 */
#define _GLIBCXX_USE_CXX11_ABI 0
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

/* An element with a destructor: new[] puts the count of elements before
 * them and returns the address after it, 8 bytes into the block. */
struct Counted {
	long v[2];
	~Counted() { v[0] = 0; }
};

/* Two polymorphic bases: a Both seen as a Right is a pointer 16 bytes
 * into the block, at Right's vtable pointer; the block starts with
 * Both's. */
struct Left {
	long l = 1;
	virtual ~Left() {}
};
struct Right {
	long r = 2;
	virtual ~Right() {}
};
struct Both : Left, Right {
	long b = 3;
};

/* A Right inside a plain struct: the word at the pointer is a vtable
 * pointer, but the block's first word is not. */
struct Plain {
	long n = 7, m = 8;
	Right right;
};

Counted *kept_array;
Right *kept_right;
void **kept_holder;
std::string *kept_string;
char *kept_inner;
Right *kept_plain;
char *kept_possibly;

/* lose forgets p: the compiler cannot keep it anywhere. */
static void lose(void *volatile *p) { *p = nullptr; }

/* new[] of 6 elements with a destructor, held by a global through the
 * pointer new[] returned: newarray. */
static void newarray() { kept_array = new Counted[6]; }

/* A Both held by a global as a Right: multipleinheritance. */
static void multiple() { kept_right = new Both; }

/* A block whose first 8 bytes are the length of the rest, held through
 * the address after them by a block a global points to: length64. */
static void length64()
{
	char *b = static_cast<char *>(malloc(8 + 56));
	*reinterpret_cast<uint64_t *>(b) = 56;
	kept_holder = static_cast<void **>(calloc(1, 24));
	kept_holder[0] = b + 8;
}

/* A copy-on-write string on the heap: the string (8 bytes) holds a
 * pointer 24 bytes into its buffer, after its length, capacity and
 * reference count: stdstring. */
static void stdstring() { kept_string = new std::string("a string of thirty characters!"); }

/* Interior pointers the heuristics refuse, all possibly lost: 8 bytes
 * into a block whose first word is no count of its elements nor length
 * of its rest; at a vtable pointer inside a block that does not start
 * with one. */
static void nomatch()
{
	char *b = static_cast<char *>(malloc(80));
	*reinterpret_cast<uint64_t *>(b) = 1000;
	kept_inner = b + 8;
	kept_plain = &(new Plain)->right;
}

/* Heuristic pointers held only by blocks that are not reachable: from a
 * possibly lost block the array is possibly lost too; from a lost block
 * the object is indirectly lost. */
static void fromlost()
{
	void **possibly = static_cast<void **>(calloc(1, 120));
	possibly[0] = new Counted[4];
	kept_possibly = reinterpret_cast<char *>(possibly) + 40;
	void **lost = static_cast<void **>(calloc(1, 136));
	lost[0] = static_cast<Right *>(new Both);
	void *volatile l = lost;
	lost = nullptr;
	lose(&l);
}

/* clear_stack overwrites the stack below the caller's frame, where the
 * functions above left the addresses they handled. */
static void clear_stack()
{
	volatile char buf[16384];
	memset(const_cast<char *>(buf), 0, sizeof buf);
}

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "all";
	if (strcmp(how, "cow") == 0)
		return _GLIBCXX_USE_CXX11_ABI != 0;
	if (strcmp(how, "newarray") == 0)
		newarray();
	else if (strcmp(how, "multipleinheritance") == 0)
		multiple();
	else if (strcmp(how, "length64") == 0)
		length64();
	else if (strcmp(how, "stdstring") == 0)
		stdstring();
	else if (strcmp(how, "nomatch") == 0)
		nomatch();
	else if (strcmp(how, "fromlost") == 0)
		fromlost();
	else {
		newarray();
		multiple();
		length64();
		stdstring();
		nomatch();
		fromlost();
	}
	clear_stack();
	exit(0);
}

// C++ operators in all their forms, and the standard library on top.
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

struct alignas(64) Aligned {
	char bytes[64];
};

struct Widget {
	int values[10];
};

static Widget *leaked;

int main()
{
	Widget *w = new Widget;
	delete w;
	Widget *ws = new Widget[3];
	delete[] ws;
	Aligned *a = new Aligned;
	delete a;
	Aligned *as = new Aligned[2];
	delete[] as;
	Widget *nt = new (std::nothrow) Widget;
	delete nt;
	int *arr = new (std::nothrow) int[7];
	delete[] arr;
	void *raw = ::operator new(33);
	::operator delete(raw, 33);
	std::vector<int> v;
	for (int i = 0; i < 100; i++)
		v.push_back(i);
	std::string s(100, 'x');
	leaked = new Widget;
	try {
		throw std::string("an exception object comes from malloc");
	} catch (const std::string &) {
	}
	return 0;
}

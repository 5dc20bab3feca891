// boxes.cc: a C++ program whose allocating functions are templates, so
// that their names are full of < and >, which the UI must show as text.
// It keeps 100 Box<int> and frees 50 Box<Pair<char, long>>.
#include <cstddef>

template <typename T> struct Box {
	T value;
	char pad[100];
};

template <typename A, typename B> struct Pair {
	A a;
	B b;
};

template <typename T> Box<T> *make_box()
{
	return new Box<T>();
}

Box<int> *kept[100];

int main()
{
	for (int i = 0; i < 100; i++)
		kept[i] = make_box<int>();
	for (int i = 0; i < 50; i++)
		delete make_box<Pair<char, long> >();
	return 0;
}

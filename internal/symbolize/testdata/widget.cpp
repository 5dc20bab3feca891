// C++: a namespace, a class with methods, a template and the standard
// library, to check demangled names.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ns {

class Widget {
public:
	static Widget *make(const char *name);
	void add(int v);
	size_t size() const { return values_.size(); }

private:
	std::string name_;
	std::vector<int> values_;
};

Widget *Widget::make(const char *name) {
	Widget *w = new Widget(); /* @Widget::make.new */
	w->name_ = name;
	return w;
}

void Widget::add(int v) {
	values_.push_back(v); /* @Widget::add.push_back */
}

template <typename T>
T *allocate_array(size_t n) {
	return new T[n]; /* @allocate_array.new */
}

namespace detail {
std::map<std::string, int> *index_words(const std::vector<std::string> &words) {
	auto *m = new std::map<std::string, int>(); /* @index_words.new */
	for (const auto &w : words)
		(*m)[w]++; /* @index_words.insert */
	return m;
}
// A lambda and a local class: their code belongs to functions that DWARF
// declares inside class types.
std::vector<std::unique_ptr<int>> boxes(int n) {
	struct Boxer {
		std::unique_ptr<int> box(int v) { return std::make_unique<int>(v); /* @Boxer::box.make_unique */ }
	};
	std::vector<std::unique_ptr<int>> out;
	auto push = [&out](std::unique_ptr<int> p) { out.push_back(std::move(p)); /* @boxes.lambda.push_back */ };
	for (int i = 0; i < n; i++)
		push(Boxer().box(i));
	return out;
}
} // namespace detail

} // namespace ns

int main(int argc, char **argv) {
	ns::Widget *w = ns::Widget::make("w"); /* @main.make */
	for (int i = 0; i < argc * 100; i++)
		w->add(i);
	double *d = ns::allocate_array<double>(w->size()); /* @main.allocate_array */
	std::vector<std::string> words(argv, argv + argc);
	auto *m = ns::detail::index_words(words);
	auto u = std::make_unique<std::vector<long>>(10);
	auto b = ns::detail::boxes(argc);
	std::printf("%zu %zu %p %zu %zu\n", w->size(), m->size(), (void *)d, u->size(), b.size());
	delete[] d;
	delete m;
	delete w;
	return 0;
}

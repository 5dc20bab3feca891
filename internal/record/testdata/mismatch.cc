// Blocks released through the wrong API: new[] with free, malloc with
// delete, new with delete[]. glibc lets these pass (they are all malloc
// underneath); memtrail must report each with both stacks.
#include <cstdlib>

struct Point {
	int x, y;
};

__attribute__((noinline)) static void release_with_free(int *p) { std::free(p); }

int main()
{
	int *numbers = new int[16];
	release_with_free(numbers);

	Point *p = static_cast<Point *>(std::malloc(sizeof(Point)));
	delete p;

	char *c = new char;
	delete[] c;
	return 0;
}

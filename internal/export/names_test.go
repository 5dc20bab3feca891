package export

import "testing"

// TestCollapsedName checks that no function name breaks a collapsed
// stack: ';' separates frames and a newline ends the stack.
func TestCollapsedName(t *testing.T) {
	for name, want := range map[string]string{
		"main": "main",
		"std::vector<int, std::allocator<int> >::push_back(int const&)": "std::vector<int, std::allocator<int> >::push_back(int const&)",
		"odd;name":              "odd:name",
		"multi\nline\r\nname\r": "multi line name ",
	} {
		if got := collapsedName(name); got != want {
			t.Errorf("collapsedName(%q) = %q, want %q", name, got, want)
		}
	}
}

package report

import "testing"

// TestPlural writes counts with their nouns, as the reports and memtrail
// run -stats do.
func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		noun string
		want string
	}{
		{0, "block", "0 blocks"},
		{1, "block", "1 block"},
		{8644711, "event", "8,644,711 events"},
		{1, "process", "1 process"},
		{3, "process", "3 processes"},
	} {
		if got := Plural(c.n, c.noun); got != c.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}

package report

import "testing"

// TestDurationIn writes durations known to a unit.
func TestDurationIn(t *testing.T) {
	for _, c := range []struct {
		ns, unit uint64
		want     string
	}{
		{5_820_000, 1_000_000, "6 ms"},
		{68_040_000, 1_000_000, "68 ms"},
		{1_234_000_000, 1_000_000, "1.23 s"},
		{5_820_000, 100_000, "5.8 ms"},
		{5_823_000, 10_000, "5.82 ms"},
		{5_823_456, 1, "5.82 ms"},
		{250_000, 250_000, "0.25 ms"},
		{9_000, 1000, "9 µs"},
	} {
		if got := durationIn(c.ns, c.unit); got != c.want {
			t.Errorf("durationIn(%d, %d) = %q, want %q", c.ns, c.unit, got, c.want)
		}
	}
}

package analysis

import "testing"

// TestPrefault checks that prefault changes nothing in what it maps, over
// whole pages, parts of pages and nothing.
func TestPrefault(t *testing.T) {
	buf := make([]byte, 5*4096+100)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, r := range [][2]int{{0, len(buf)}, {1, 4097}, {100, 200}, {3, 3}, {4095, 3 * 4096}} {
		prefault(buf[r[0]:r[1]])
	}
	for i := range buf {
		if buf[i] != byte(i*7) {
			t.Fatalf("byte %d changed to %d", i, buf[i])
		}
	}
	prefault(nil)
}

package trace

import "testing"

// TestAllZero puts a byte that is not 0 at every place of slices of
// every length around the eight bytes allZero takes at a time.
func TestAllZero(t *testing.T) {
	for n := range 20 {
		p := make([]byte, n)
		if !allZero(p) {
			t.Errorf("%d zeros: not all zero", n)
		}
		for i := range p {
			for _, b := range []byte{1, 0x80} {
				p[i] = b
				if allZero(p) {
					t.Errorf("%d bytes, 0x%x at %d: all zero", n, b, i)
				}
			}
			p[i] = 0
		}
	}
}

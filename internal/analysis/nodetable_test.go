package analysis

import (
	"math/rand"
	"testing"
)

// TestNodeTable checks nodeTable against a map, with IDs in order as a
// trace gives them, IDs set twice, and IDs far past the others (a damaged
// trace's) that go to the map and move to the slice once it reaches them;
// and that the slice stays within its bound.
func TestNodeTable(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var tab nodeTable
	want := map[uint64]stackNode{}
	var wentToMap []uint64
	set := func(id uint64) {
		n := stackNode{parent: r.Uint64(), module: uint64(r.Intn(3)), offset: r.Uint64()}
		tab.set(id, n)
		want[id] = n
		if _, ok := tab.sparse[id]; ok {
			wentToMap = append(wentToMap, id)
		}
	}
	next := uint64(1)
	for i := range 20000 {
		switch r.Intn(20) {
		case 0: // far past the others: the slice reaches some later
			set(next + uint64(r.Intn(1<<(14+10*r.Intn(2)))) + 3000)
		case 1: // again
			set(uint64(r.Intn(int(next))) + 1)
		default:
			set(next)
			next++
		}
		if len(tab.dense) > 2*(tab.inDense+denseSlack) {
			t.Fatalf("after %d sets: %d slots for %d nodes", i+1, len(tab.dense), tab.inDense)
		}
	}
	check := func(tab *nodeTable) {
		t.Helper()
		if tab.len() != len(want) {
			t.Fatalf("len %d, want %d", tab.len(), len(want))
		}
		seen := 0
		for id, n := range tab.all {
			if w, ok := want[id]; !ok || w != n {
				t.Fatalf("all yields %d: %+v, want %+v (%v)", id, n, w, ok)
			}
			seen++
		}
		if seen != len(want) {
			t.Fatalf("all yields %d nodes, want %d", seen, len(want))
		}
		for id, w := range want {
			if n, ok := tab.get(id); !ok || n != w {
				t.Fatalf("get(%d) = %+v, %v, want %+v", id, n, ok, w)
			}
		}
		for _, id := range []uint64{0, next + 1<<30, 1 << 63} {
			if _, ok := want[id]; ok {
				continue
			}
			if n, ok := tab.get(id); ok {
				t.Fatalf("get(%d) = %+v, want none", id, n)
			}
		}
	}
	check(&tab)
	moved := 0
	for _, id := range wentToMap {
		if id < uint64(len(tab.dense)) {
			moved++
		}
	}
	if len(tab.sparse) == 0 || moved == 0 {
		t.Fatalf("%d IDs in the map, %d moved from it: the test does not test them", len(tab.sparse), moved)
	}
	c := tab.clone()
	tab.set(1, stackNode{parent: 12345})
	tab.set(next+1<<40, stackNode{parent: 6789})
	check(&c)
}

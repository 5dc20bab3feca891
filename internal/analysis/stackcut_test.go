package analysis

import (
	"math/rand"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// walkCut is cut without a memo: one walk from id to its root.
func walkCut(t *stackTree, id uint64) bool {
	for depth := 0; id != 0 && depth < maxDepth; depth++ {
		n, ok := t.nodes.get(id)
		if !ok {
			return false
		}
		if n.parent == 0 {
			return n.module == trace.ModuleCut
		}
		id = n.parent
	}
	return false
}

// TestCutMemo checks cut, whose walks share what earlier ones found,
// against one walk a stack, on random trees with cut and uncut roots,
// missing nodes, cycles, and chains around the depth bound, asked in a
// random order.
func TestCutMemo(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for round := range 8 {
		tree := newStackTree(nil, 1)
		next := uint64(1)
		var ids []uint64
		add := func(parent, module uint64) uint64 {
			id := next
			next++
			tree.nodes.set(id, stackNode{parent: parent, module: module})
			ids = append(ids, id)
			return id
		}
		// Roots, cut (module 0) and not.
		for i := range 6 {
			add(0, uint64(i%2))
		}
		for i := range 3000 {
			switch {
			case i%1000 == 999: // a chain to around the depth bound
				id := ids[r.Intn(len(ids))]
				for range maxDepth - 3 + r.Intn(6) {
					id = add(id, 1)
				}
			case r.Intn(10) == 0: // a parent that is missing
				add(next+1<<40, 1)
			default:
				add(ids[r.Intn(len(ids))], 1)
			}
		}
		// A cycle, and a branch into it.
		a := add(0, 1)
		b := add(a, 1)
		tree.nodes.set(a, stackNode{parent: b, module: 1})
		add(b, 1)

		memo := newCutMemo(tree)
		// All the nodes are asked, but only a few of each chain: one
		// walk each would take long.
		var asked []uint64
		for _, id := range ids {
			if id <= 3000 || r.Intn(100) == 0 {
				asked = append(asked, id)
			}
		}
		asked = append(asked, 0, next+5)
		r.Shuffle(len(asked), func(i, j int) { asked[i], asked[j] = asked[j], asked[i] })
		cuts := 0
		for _, id := range asked {
			want := walkCut(tree, id)
			if got := tree.cut(id, memo); got != want {
				t.Fatalf("round %d: cut(%d) = %v, want %v", round, id, got, want)
			}
			if want {
				cuts++
			}
		}
		if cuts == 0 || cuts == len(asked) {
			t.Fatalf("round %d: %d of %d stacks cut: the test tells nothing", round, cuts, len(asked))
		}
	}
}

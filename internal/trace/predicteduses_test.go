package trace

import (
	"math/rand"
	"testing"
)

// TestPredictedUses checks predictedUses, which looks a stack up only
// when it is not the one before, against predict and update event by
// event: runs of one stack, stacks of no slot (0), stacks that share a
// slot, and stacks known in another process.
func TestPredictedUses(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	stacks := []uint64{0, 1, 2, 1 + stackUseSlots, 2 + 2*stackUseSlots, 77}
	for round := range 200 {
		var want stackUsePredictor
		for range 20 { // what earlier events left, of this process and another
			want.update(uint64(1+r.Intn(2)), stacks[r.Intn(len(stacks))], uint64(r.Intn(1000)))
		}
		got := want
		events := make([]Event, 1+r.Intn(300))
		stack := stacks[r.Intn(len(stacks))]
		for i := range events {
			if r.Intn(4) == 0 {
				stack = stacks[r.Intn(len(stacks))]
			}
			events[i].Stack = stack
		}
		const process = 1
		got.predictedUses(events, process)
		for i, e := range events {
			use := want.predict(process, e.Stack)
			want.update(process, e.Stack, use)
			if e.StackInUse != use {
				t.Fatalf("round %d: event %d (stack %d) used %d, want %d", round, i, e.Stack, e.StackInUse, use)
			}
		}
		if got.prev != want.prev || got.slots != want.slots {
			t.Fatalf("round %d: the predictor's state differs after the events", round)
		}
	}
}

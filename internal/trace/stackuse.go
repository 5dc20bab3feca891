package trace

// stackUsePredictor predicts the stack in use of each event of a block
// from the events before it in the block, the same way in the Writer and
// in the Reader (docs/format.md, Stack use):
//
//  1. An event with a call stack that an earlier event of its process had
//     is predicted to use what that event used: the same chain of calls
//     has the same frames. A direct-mapped table of stackUseSlots
//     entries, indexed by the stack ID's low bits, remembers the latest
//     event of each stack.
//  2. Any other event is predicted to use what its thread's previous
//     event of the block used (0 for the first).
//
// Its state starts afresh in every block.
type stackUsePredictor struct {
	prev   uint64    // what the current thread's previous event used
	thread threadKey // the current thread
	// threads holds what the previous event of each thread of the block
	// used, and threads[current] is the current thread's (out of date:
	// prev has it). A block has a few threads most often, so context goes
	// through them; byThread indexes them once there are more than
	// maxScannedThreads, as hashing a key of two words on every switch
	// costs more than going through a few.
	threads  []threadPrev
	current  int
	byThread map[threadKey]int
	slots    [stackUseSlots]stackUseSlot
}

type threadKey struct{ process, thread uint64 }

type threadPrev struct {
	key  threadKey
	prev uint64
}

type stackUseSlot struct{ process, stack, use uint64 }

// stackUseSlots is the size of the table of step 1: a power of two.
const stackUseSlots = 4096

func (p *stackUsePredictor) reset() {
	p.prev, p.thread = 0, threadKey{}
	// The thread before any Context record is the zero key, as any other.
	p.threads, p.current = append(p.threads[:0], threadPrev{}), 0
	clear(p.byThread)
	clear(p.slots[:])
}

// context makes the thread of the following events current.
func (p *stackUsePredictor) context(process, thread uint64) {
	k := threadKey{process, thread}
	if k == p.thread {
		return
	}
	if len(p.threads) == 0 { // a predictor that was never reset
		p.threads = append(p.threads, threadPrev{key: p.thread})
	}
	p.threads[p.current].prev = p.prev
	i := p.indexOf(k)
	p.current, p.thread, p.prev = i, k, p.threads[i].prev
}

// indexOf returns the index of thread k in threads, adding it if it is
// not there.
func (p *stackUsePredictor) indexOf(k threadKey) int {
	if len(p.threads) <= maxScannedThreads {
		for i := range p.threads {
			if p.threads[i].key == k {
				return i
			}
		}
	} else if i, ok := p.byThread[k]; ok {
		return i
	}
	p.threads = append(p.threads, threadPrev{key: k})
	i := len(p.threads) - 1
	switch {
	case i == maxScannedThreads: // from now on, the map
		if p.byThread == nil {
			p.byThread = make(map[threadKey]int)
		}
		for j := range p.threads {
			p.byThread[p.threads[j].key] = j
		}
	case i > maxScannedThreads:
		p.byThread[k] = i
	}
	return i
}

// predict returns the prediction of the stack in use of an event of the
// current thread with the given stack.
func (p *stackUsePredictor) predict(process, stack uint64) uint64 {
	if stack != 0 {
		if s := &p.slots[stack&(stackUseSlots-1)]; s.stack == stack && s.process == process {
			return s.use
		}
	}
	return p.prev
}

// update notes what an event of the current thread with the given stack
// used.
func (p *stackUsePredictor) update(process, stack, use uint64) {
	p.prev = use
	if stack != 0 {
		p.slots[stack&(stackUseSlots-1)] = stackUseSlot{process, stack, use}
	}
}

// predictedUses sets the stack in use of events of process, whose
// stacks are decoded, to what is predicted for them, as where their codes
// are all 0, and notes them as update does: predict and update in one,
// with the slot of a stack that is found left as it is.
func (p *stackUsePredictor) predictedUses(events []Event, process uint64) {
	prev := p.prev
	// The stack of the latest event looked up: its slot holds prev
	// until another stack is, so an event of the same stack, as where a
	// program repeats a call, uses prev without a look.
	last := uint64(0)
	for k := range events {
		e := &events[k]
		if stack := e.Stack; stack != 0 && stack != last {
			last = stack
			s := &p.slots[stack&(stackUseSlots-1)]
			if s.stack == stack && s.process == process {
				prev = s.use
			} else {
				*s = stackUseSlot{process, stack, prev}
			}
		}
		e.StackInUse = prev
	}
	p.prev = prev
}

// repeats reports whether an event of the current thread with the given
// stack used what the latest event of its stack did, as most do, and
// notes the event if so: its code is then 0, and its slot stays as it
// is. It is small enough to be inlined; code does the rest.
func (p *stackUsePredictor) repeats(process, stack, use uint64) bool {
	if s := &p.slots[stack&(stackUseSlots-1)]; s.stack == stack && stack != 0 && s.use == use && s.process == process {
		p.prev = use
		return true
	}
	return false
}

// code returns the code of the stack in use of an event of the current
// thread (stackUseCode against predict's prediction) and notes it as
// update does: the Writer's predict and update in one.
func (p *stackUsePredictor) code(process, stack, use uint64) uint64 {
	predicted := p.predict(process, stack)
	p.update(process, stack, use)
	return stackUseCode(use, predicted)
}

package trace

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// readAhead reads and decodes the blocks of a trace in the background for
// a Reader, on every core, and hands them over in file order:
//
//  1. One goroutine (run) reads the blocks one after the other, checks
//     them and decompresses their streams (source.next), and starts two
//     goroutines for each sound one.
//  2. Those decode the block, batch by batch, while the Reader takes the
//     batches of the blocks before it: blocks decode on their own (all
//     their state starts afresh in each), so several can be decoded at
//     once. The first goroutine (decodeRecords) decodes all but the
//     addresses of the events, and the second (decode) their addresses
//     and handles, a few batches behind: the halves cost about the same,
//     so a block keeps two cores busy.
//  3. The Reader takes the blocks in order from blocks, and the batches
//     of each block in order from the block's channel.
//
// The Reader's caller is what takes the time: the analysis's replay costs
// more per event than both halves of decoding together. So the decoding
// goroutines share GOMAXPROCS-1 cores at most (decodeTokens): with more
// runnable goroutines than cores, Go's scheduler gives the caller no more
// than the others, and it waited for a core for much of its run.
//
// Memory stays bounded: at most maxBlocks blocks are read and not yet
// taken to their end by the Reader (the slots), and each half of a block's
// decoding goes at most batchesAhead batches ahead of the next step.
//
// No goroutine waits on the Reader once it is dropped: the Reader stops
// the readAhead when it comes to the end of the trace, and a cleanup stops
// it when the Reader becomes unreachable before that. (The goroutines hold
// no reference to the Reader.)
type readAhead struct {
	src      *source
	blocks   chan *blockJob // in file order; closed after the last
	slots    chan struct{}  // a token for each block read and not yet done with
	done     chan struct{}  // closed to stop the goroutines
	stopOnce sync.Once
	unitHint atomic.Uint64 // see blockDecoder.unit
	ended    atomic.Bool   // a block held End: what follows does not count
	buffers  chan []byte   // spare buffers for decoded streams
	// tokens holds a token for each core the decoding goroutines may
	// use at once. A goroutine holds one only while it decodes a batch,
	// never while it waits on a channel, so that no two wait on each
	// other.
	tokens chan struct{}
}

// blockJob is a block read ahead, and the damage read before it, if any.
type blockJob struct {
	fetched
	batches chan *batch // its batches, in order, if it was found; closed after the last
	sound   uint32      // its number among the sound blocks, if it was found
}

// batchesAhead is how many batches each half of a block's decoding goes
// ahead of the next step (the other half, or the Reader), at most.
const batchesAhead = 8

// maxBlocks returns how many blocks may be read and not yet done with: the
// one the Reader takes batches from, and one for every two other cores to
// decode (a block keeps two busy), but at least one and at most three
// ahead. Each takes several MiB, and on a machine of many cores the
// Reader's caller, not decoding, is what takes the time.
func maxBlocks() int { return max(2, min(4, runtime.GOMAXPROCS(0)/2+1)) }

// decodeTokens returns how many goroutines may decode batches at once:
// every core but the one the Reader's caller needs, and at least one.
func decodeTokens() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// withToken runs f while it holds a token, and reports false, without
// running it, if the readAhead stops first.
func (p *readAhead) withToken(f func()) bool {
	select {
	case p.tokens <- struct{}{}:
	case <-p.done:
		return false
	}
	f()
	<-p.tokens
	return true
}

// newReadAhead reads the blocks of src, which comes after sound blocks
// of its trace, where the time unit was unit.
func newReadAhead(src *source, sound uint32, unit uint64) *readAhead {
	n := maxBlocks()
	p := &readAhead{
		src:     src,
		blocks:  make(chan *blockJob, n),
		slots:   make(chan struct{}, n),
		done:    make(chan struct{}),
		buffers: make(chan []byte, n),
		tokens:  make(chan struct{}, decodeTokens()),
	}
	p.unitHint.Store(unit)
	go p.run(sound)
	return p
}

// stop stops the goroutines, which drop what they hold.
func (p *readAhead) stop() {
	p.stopOnce.Do(func() { close(p.done) })
}

// run reads the blocks of the file one after the other, and starts the
// decoding of each sound one.
func (p *readAhead) run(sound uint32) {
	defer close(p.blocks)
	for !p.ended.Load() {
		select {
		case p.slots <- struct{}{}:
		case <-p.done:
			return
		}
		job := &blockJob{fetched: p.src.next(p.buffer())}
		if job.found {
			sound++
			job.sound = sound
			job.batches = make(chan *batch, batchesAhead)
			go p.decode(job, sound)
		} else {
			p.putBuffer(job.buf)
		}
		select {
		case p.blocks <- job:
		case <-p.done:
			return
		}
		if job.err != nil || job.atEnd {
			return
		}
	}
}

// decode decodes the block of job, the sound-th sound block of the file,
// batch by batch: the addresses of the events of the batches that
// decodeRecords decodes the rest of.
func (p *readAhead) decode(job *blockJob, sound uint32) {
	defer close(job.batches)
	decoded := make(chan *batch, batchesAhead)
	skip := make(chan struct{}) // closed when damage skips the rest of the block
	go p.decodeRecords(job, sound, decoded, skip)
	a := newAddressDecoder(&job.fetched)
	damaged := false
	for b := range decoded {
		if damaged {
			putBatch(b)
			continue
		}
		sound := true
		if !p.withToken(func() { sound = a.decode(b) }) {
			return
		}
		if !sound {
			damaged = true
			close(skip)
		}
		if b.hasEnd {
			p.ended.Store(true)
		}
		select {
		case job.batches <- b:
		case <-p.done:
			return
		}
	}
	// The streams are decoded: their memory can take the next block's.
	a.heaps.recycle()
	p.putBuffer(job.buf)
	job.buf, job.streams = nil, streamSet{}
}

// decodeRecords decodes the block of job, the sound-th sound block of the
// file, but for the addresses of its events, batch by batch, and sends
// the batches to decoded, which it closes after the last. It stops early
// if skip is closed.
func (p *readAhead) decodeRecords(job *blockJob, sound uint32, decoded chan<- *batch, skip <-chan struct{}) {
	defer close(decoded)
	r := newBlockDecoder(&job.fetched, sound, &p.unitHint)
	for more := true; more; {
		b := getBatch()
		if !p.withToken(func() { more = r.fill(b) }) {
			return
		}
		select {
		case decoded <- b:
		case <-skip:
			putBatch(b)
			return
		case <-p.done:
			return
		}
	}
}

// doneWith says that the Reader has taken all it needs of a block, which
// lets another block be read.
func (p *readAhead) doneWith(*blockJob) { <-p.slots }

// buffer returns a buffer to decode a block's streams into.
func (p *readAhead) buffer() []byte {
	select {
	case b := <-p.buffers:
		return b
	default:
		return nil
	}
}

func (p *readAhead) putBuffer(b []byte) {
	if b == nil {
		return
	}
	select {
	case p.buffers <- b:
	default:
	}
}

// batchPool holds batches the Readers are done with: they hold hundreds of
// KiB, and allocating them anew for every batch would cost as much as
// decoding them.
var batchPool sync.Pool // of *batch

func getBatch() *batch {
	if b, ok := batchPool.Get().(*batch); ok {
		return b
	}
	return new(batch)
}

func putBatch(b *batch) {
	b.reset()
	batchPool.Put(b)
}

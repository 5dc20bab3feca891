package analysis

// addrMap maps addresses to values. It is the replay's hot path: every
// event looks an address up, and Go's map spends most of the analysis
// time there. It uses open addressing with linear probing, and deletes by
// shifting the following entries back, so that no tombstones pile up.
// Each key sits beside its value, so that a lookup costs one cache miss,
// not one in the keys and another in the values. Address 0 is never a
// key: no block lives there.
type addrMap[V any] struct {
	entries []addrEntry[V] // key 0: empty
	n       int
	mask    uint64
}

type addrEntry[V any] struct {
	key uint64
	val V
}

func (m *addrMap[V]) slot(addr uint64) uint64 {
	// Fibonacci hashing: addresses differ in their middle bits.
	return (addr * 0x9e3779b97f4a7c15) >> 32 & m.mask
}

// find returns the value of addr in the map, or nil; it is valid until
// the map changes.
func (m *addrMap[V]) find(addr uint64) *V {
	if m.n > 0 {
		for i := m.slot(addr); ; i = (i + 1) & m.mask {
			e := &m.entries[i]
			switch e.key {
			case addr:
				return &e.val
			case 0:
				return nil
			}
		}
	}
	return nil
}

// entry returns the value of addr in the map, adding a zero one if there
// is none (existed is false then); it is valid until the map changes.
func (m *addrMap[V]) entry(addr uint64) (v *V, existed bool) {
	if (m.n+1)*4 > len(m.entries)*3 {
		m.grow()
	}
	for i := m.slot(addr); ; i = (i + 1) & m.mask {
		e := &m.entries[i]
		switch e.key {
		case addr:
			return &e.val, true
		case 0:
			e.key = addr
			m.n++
			return &e.val, false
		}
	}
}

// put sets the value of addr.
func (m *addrMap[V]) put(addr uint64, v V) {
	if (m.n+1)*4 > len(m.entries)*3 {
		m.grow()
	}
	for i := m.slot(addr); ; i = (i + 1) & m.mask {
		e := &m.entries[i]
		switch e.key {
		case addr:
			e.val = v
			return
		case 0:
			e.key, e.val = addr, v
			m.n++
			return
		}
	}
}

// remove deletes addr, if it is there.
func (m *addrMap[V]) remove(addr uint64) {
	if m.n == 0 {
		return
	}
	i := m.slot(addr)
	for m.entries[i].key != addr {
		if m.entries[i].key == 0 {
			return
		}
		i = (i + 1) & m.mask
	}
	// Move back each following entry that may not stay after the hole.
	for j := (i + 1) & m.mask; m.entries[j].key != 0; j = (j + 1) & m.mask {
		home := m.slot(m.entries[j].key)
		if (j-home)&m.mask >= (j-i)&m.mask {
			m.entries[i] = m.entries[j]
			i = j
		}
	}
	m.entries[i] = addrEntry[V]{}
	m.n--
}

func (m *addrMap[V]) len() int { return m.n }

func (m *addrMap[V]) grow() {
	size := max(1024, 2*len(m.entries))
	old := m.entries
	m.entries, m.mask, m.n = make([]addrEntry[V], size), uint64(size-1), 0
	for _, e := range old {
		if e.key != 0 {
			m.put(e.key, e.val)
		}
	}
}

// each calls f for every entry, in no particular order.
func (m *addrMap[V]) each(f func(addr uint64, v V)) {
	for _, e := range m.entries {
		if e.key != 0 {
			f(e.key, e.val)
		}
	}
}

// update calls f on every value, which it may change.
func (m *addrMap[V]) update(f func(*V)) {
	for i := range m.entries {
		if m.entries[i].key != 0 {
			f(&m.entries[i].val)
		}
	}
}

// clone returns a copy of m.
func (m *addrMap[V]) clone() addrMap[V] {
	c := *m
	c.entries = append([]addrEntry[V](nil), m.entries...)
	return c
}

package analysis

// addrMap maps addresses to values. It is the replay's hot path: every
// event looks an address up, and Go's map spends most of the analysis
// time there. It uses open addressing with linear probing, and deletes by
// shifting the following entries back, so that no tombstones pile up.
// Address 0 is never a key: no block lives there.
type addrMap[V any] struct {
	keys []uint64 // 0: empty
	vals []V
	n    int
	mask uint64
}

func (m *addrMap[V]) slot(addr uint64) uint64 {
	// Fibonacci hashing: addresses differ in their middle bits.
	return (addr * 0x9e3779b97f4a7c15) >> 32 & m.mask
}

// get returns the value of addr.
func (m *addrMap[V]) get(addr uint64) (V, bool) {
	if m.n > 0 {
		for i := m.slot(addr); ; i = (i + 1) & m.mask {
			switch m.keys[i] {
			case addr:
				return m.vals[i], true
			case 0:
				var zero V
				return zero, false
			}
		}
	}
	var zero V
	return zero, false
}

// put sets the value of addr.
func (m *addrMap[V]) put(addr uint64, v V) {
	if (m.n+1)*4 > len(m.keys)*3 {
		m.grow()
	}
	for i := m.slot(addr); ; i = (i + 1) & m.mask {
		switch m.keys[i] {
		case addr:
			m.vals[i] = v
			return
		case 0:
			m.keys[i], m.vals[i] = addr, v
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
	for m.keys[i] != addr {
		if m.keys[i] == 0 {
			return
		}
		i = (i + 1) & m.mask
	}
	// Move back each following entry that may not stay after the hole.
	var zero V
	for j := (i + 1) & m.mask; m.keys[j] != 0; j = (j + 1) & m.mask {
		home := m.slot(m.keys[j])
		if (j-home)&m.mask >= (j-i)&m.mask {
			m.keys[i], m.vals[i] = m.keys[j], m.vals[j]
			i = j
		}
	}
	m.keys[i], m.vals[i] = 0, zero
	m.n--
}

func (m *addrMap[V]) len() int { return m.n }

func (m *addrMap[V]) grow() {
	size := max(1024, 2*len(m.keys))
	old, oldVals := m.keys, m.vals
	m.keys, m.vals, m.mask, m.n = make([]uint64, size), make([]V, size), uint64(size-1), 0
	for i, k := range old {
		if k != 0 {
			m.put(k, oldVals[i])
		}
	}
}

// each calls f for every entry, in no particular order.
func (m *addrMap[V]) each(f func(addr uint64, v V)) {
	for i, k := range m.keys {
		if k != 0 {
			f(k, m.vals[i])
		}
	}
}

// update calls f on every value, which it may change.
func (m *addrMap[V]) update(f func(*V)) {
	for i, k := range m.keys {
		if k != 0 {
			f(&m.vals[i])
		}
	}
}

// clone returns a copy of m.
func (m *addrMap[V]) clone() addrMap[V] {
	c := *m
	c.keys = append([]uint64(nil), m.keys...)
	c.vals = append([]V(nil), m.vals...)
	return c
}

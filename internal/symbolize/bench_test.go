package symbolize

import (
	"os"
	"sync"
	"testing"
)

// benchTargets are big objects found on a Debian machine with gcc: the
// compiler proper and the Python interpreter (stripped: names from
// .dynsym only, 28k and 1.7k of them), and the C library (DWARF 5, zlib
// compressed, in a separate file from libc6-dbg when installed).
var benchTargets = []struct{ name, path string }{
	{"cc1", "/usr/lib/gcc/x86_64-linux-gnu/12/cc1"},
	{"python3.11", "/usr/bin/python3.11"},
	{"libc", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
}

var benchCallSites struct {
	sync.Mutex
	pcs map[string][]uint64
}

// callSitePCs returns the pcs of all call sites of path, disassembled once
// per test binary run.
func callSitePCs(b *testing.B, path string) []uint64 {
	benchCallSites.Lock()
	defer benchCallSites.Unlock()
	if pcs, ok := benchCallSites.pcs[path]; ok {
		return pcs
	}
	var pcs []uint64
	for _, in := range callSitesOf(disassemble(b, path)) {
		pcs = append(pcs, in.pc)
	}
	if benchCallSites.pcs == nil {
		benchCallSites.pcs = map[string][]uint64{}
	}
	benchCallSites.pcs[path] = pcs
	return pcs
}

// BenchmarkFrames symbolizes every call site of big objects. "cold" opens
// the object each time, as the recorder does once per module at the end of
// a recording; "warm" reuses it, with every compilation unit loaded.
func BenchmarkFrames(b *testing.B) {
	for _, target := range benchTargets {
		b.Run(target.name, func(b *testing.B) {
			path := target.path
			if _, err := os.Stat(path); err != nil {
				b.Skip(err)
			}
			pcs := callSitePCs(b, path)
			symbolizeAll := func(o *Object) (known int) {
				for _, pc := range pcs {
					if o.Frames(pc) != nil {
						known++
					}
				}
				return known
			}

			b.Run("cold", func(b *testing.B) {
				known := 0
				for b.Loop() {
					o, err := Open(path, nil)
					if err != nil {
						b.Fatal(err)
					}
					known = symbolizeAll(o)
					o.Close()
				}
				reportRate(b, len(pcs), known)
			})
			b.Run("warm", func(b *testing.B) {
				o, err := Open(path, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer o.Close()
				symbolizeAll(o)
				known := 0
				for b.Loop() {
					known = symbolizeAll(o)
				}
				reportRate(b, len(pcs), known)
			})
		})
	}
}

func reportRate(b *testing.B, addresses, known int) {
	b.ReportMetric(float64(addresses)*float64(b.N)/b.Elapsed().Seconds(), "addrs/s")
	b.ReportMetric(float64(addresses), "addrs")
	b.ReportMetric(float64(known)/float64(addresses)*100, "%known")
}

// BenchmarkTypes collects the types of the C library's DWARF (which the
// recorder does not do: it is a system library, but the biggest DWARF at
// hand), reporting the rate in MiB of .debug_info a second.
func BenchmarkTypes(b *testing.B) {
	path := "/usr/lib/x86_64-linux-gnu/libc.so.6"
	o, err := Open(path, nil)
	if err != nil {
		b.Skip(err)
	}
	defer o.Close()
	if o.dwarf == nil {
		b.Skip("no DWARF for ", path)
	}
	types := 0
	for b.Loop() {
		types = len(o.Types(0))
	}
	b.ReportMetric(float64(len(o.dwarf.info))*float64(b.N)/(1<<20)/b.Elapsed().Seconds(), "MiB/s")
	b.ReportMetric(float64(types), "types")
}

package record

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrail/memtrail/internal/trace"
)

// TestProtocolMatchesC compiles the agent's protocol header and checks that
// the recorder's mirror of it agrees on every constant and offset.
func TestProtocolMatchesC(t *testing.T) {
	header, err := filepath.Abs("../agent/csrc/protocol.h")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		c       string
		goValue uint64
	}{
		{"MT_REGION_MAGIC", regionMagic}, {"MT_PROTOCOL_VERSION", protocolVersion},
		{"MT_HELLO_MAGIC", helloMagic}, {"MT_HEADER_SIZE", headerSize}, {"MT_MAX_HELLO", maxHello}, {"MT_KEY_LEN", keyLen},
		{"MT_HELLO_START", helloStart}, {"MT_HELLO_FORK", helloFork},
		{"MT_SLOT_FREE", slotFree}, {"MT_SLOT_OWNED", slotOwned}, {"MT_SLOT_DONE", slotDone},
		{"MT_REC_ALLOC", recAlloc}, {"MT_REC_FREE", recFree}, {"MT_REC_REALLOC", recRealloc},
		{"MT_REC_SKIP", recSkip}, {"MT_REC_MODULE", recModule}, {"MT_REC_UNLOAD", recUnload},
		{"MT_REC_THREAD", recThread}, {"MT_REC_EXIT", recExit}, {"MT_REC_THREAD_END", recThreadEnd},
		{"MT_REC_FORK", recFork}, {"MT_REC_STACK", recStack},
		{"MT_REC_CALLS", recCalls}, {"MT_REC_DEEPEST", recDeepest}, {"MT_REC_SCAN", recScan}, {"MT_REC_POINTERS", recPointers}, {"MT_REC_SPAWN", recSpawn}, {"MT_REC_ALLOC_SAME", recAllocSame}, {"MT_REC_FREE_SAME", recFreeSame}, {"MT_STACK_SHIFT", stackShift}, {"MT_MODULE_CUT", trace.ModuleCut}, {"MT_MAX_FRAMES_LIMIT", MaxFramesLimit}, {"MT_API_SHIFT", apiShift},
		{"offsetof(struct mt_header, magic)", hdrMagic}, {"offsetof(struct mt_header, version)", hdrVersion},
		{"offsetof(struct mt_header, nslots)", hdrNslots}, {"offsetof(struct mt_header, region_size)", hdrRegionSize},
		{"offsetof(struct mt_header, ring_size)", hdrRingSize}, {"offsetof(struct mt_header, rings_offset)", hdrRingsOffset},
		{"offsetof(struct mt_header, nodes_offset)", hdrNodesOffset}, {"offsetof(struct mt_header, node_capacity)", hdrNodeCapacity},
		{"offsetof(struct mt_header, max_frames)", hdrMaxFrames}, {"offsetof(struct mt_header, recorder_pid)", hdrRecorderPid},
		{"offsetof(struct mt_header, seq)", hdrSeq}, {"offsetof(struct mt_header, node_count)", hdrNodeCount},
		{"offsetof(struct mt_header, dropped)", hdrDropped}, {"offsetof(struct mt_header, disabled)", hdrDisabled},
		{"offsetof(struct mt_header, nodes_lost)", hdrNodesLost}, {"offsetof(struct mt_header, coarse)", hdrCoarse},
		{"offsetof(struct mt_header, clock_period)", hdrClockPeriod},
		{"offsetof(struct mt_header, first_ring_size)", hdrFirstRing},
		{"offsetof(struct mt_header, waits)", hdrWaits}, {"offsetof(struct mt_header, wait_ns)", hdrWaitNs},
		{"offsetof(struct mt_header, calls_window)", hdrCallsWindow}, {"offsetof(struct mt_header, clock)", hdrClock},
		{"offsetof(struct mt_header, leak_scan)", hdrLeakScan}, {"offsetof(struct mt_header, scan_done)", hdrScanDone},
		{"offsetof(struct mt_header, free_pointers)", hdrFreePointers},
		{"offsetof(struct mt_header, full_unwind)", hdrFullUnwind},
		{"offsetof(struct mt_header, exec_pending)", hdrExecPending},
		{"offsetof(struct mt_header, exec_path)", hdrExecPath}, {"MT_EXEC_STATIC", execStatic}, {"MT_EXEC_PATH", execPathBytes},
		{"sizeof(struct mt_header) <= MT_HEADER_SIZE", 1},
		{"offsetof(struct mt_slot, state)", slotState}, {"offsetof(struct mt_slot, tid)", slotTid},
		{"offsetof(struct mt_slot, write)", slotWrite}, {"offsetof(struct mt_slot, read)", slotRead},
		{"offsetof(struct mt_slot, waiting)", slotWaiting},
		{"sizeof(struct mt_slot)", slotBytes},
		{"offsetof(struct mt_node, parent)", nodeParent}, {"offsetof(struct mt_node, module)", nodeModule},
		{"offsetof(struct mt_node, offset)", nodeOffset}, {"sizeof(struct mt_node)", nodeBytes},
		{"sizeof(struct mt_hello)", helloFixed}, {"offsetof(struct mt_hello, fork_token)", helloForkToken},
		{"offsetof(struct mt_hello, key)", helloKey}, {"offsetof(struct mt_hello, own_alloc_len)", helloOwnAlloc},
		{"sizeof(struct mt_welcome)", welcomeBytes},
		{"MT_API_MALLOC", uint64(trace.APIMalloc)}, {"MT_API_FREE", uint64(trace.APIFree)},
		{"MT_API_PVALLOC", uint64(trace.APIPvalloc)}, {"MT_API_NEW", uint64(trace.APINew)},
		{"MT_API_NEW_ARRAY", uint64(trace.APINewArray)}, {"MT_API_DELETE", uint64(trace.APIDelete)},
		{"MT_API_DELETE_ALIGNED_NOTHROW", uint64(trace.APIDeleteAlignedNothrow)},
		{"MT_API_DELETE_ARRAY", uint64(trace.APIDeleteArray)},
		{"MT_API_DELETE_ARRAY_ALIGNED_NOTHROW", uint64(trace.APIDeleteArrayAlignedNothrow)},
	}
	var prog strings.Builder
	fmt.Fprintf(&prog, "#include <stddef.h>\n#include <stdio.h>\n#include %q\nint main(void) {\n", header)
	for _, c := range checks {
		fmt.Fprintf(&prog, "\tprintf(\"%%llu\\n\", (unsigned long long)(%s));\n", c.c)
	}
	prog.WriteString("\treturn 0;\n}\n")
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	os.WriteFile(src, []byte(prog.String()), 0o644)
	if out, err := exec.Command("cc", "-o", filepath.Join(dir, "p"), src).CombinedOutput(); err != nil {
		t.Fatalf("compiling: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(dir, "p")).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(out))
	for i, c := range checks {
		if lines[i] != fmt.Sprint(c.goValue) {
			t.Errorf("%s is %s in C, %d in Go", c.c, lines[i], c.goValue)
		}
	}
}

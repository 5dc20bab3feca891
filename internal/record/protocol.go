package record

// The agent–recorder protocol, mirrored from internal/agent/csrc/protocol.h.
// TestProtocolMatchesC compiles the header and checks every value here.

const (
	regionMagic     = 0x314d485354544d4d
	protocolVersion = 10
	helloMagic      = 0x4f4c4548
	headerSize      = 4096
	execStatic      = 2
	execPathBytes   = 1024
	maxHello        = 16384
	keyLen          = 32

	helloStart = 1
	helloFork  = 2

	slotFree  = 0
	slotOwned = 1
	slotDone  = 2

	recAlloc     = 1
	recFree      = 2
	recRealloc   = 3
	recSkip      = 4
	recModule    = 5
	recUnload    = 6
	recThread    = 7
	recExit      = 8
	recThreadEnd = 9
	recFork      = 10
	recStack     = 11
	recCalls     = 12
	recDeepest   = 13
	recScan      = 14
	recPointers  = 15
	recSpawn     = 16
	recAllocSame = 17
	recFreeSame  = 18

	stackShift = 24
	apiShift   = 16
)

// Offsets of the fields of struct mt_header.
const (
	hdrMagic        = 0
	hdrVersion      = 8
	hdrNslots       = 12
	hdrRegionSize   = 16
	hdrRingSize     = 24
	hdrRingsOffset  = 32
	hdrNodesOffset  = 40
	hdrNodeCapacity = 48
	hdrMaxFrames    = 56
	hdrRecorderPid  = 60
	hdrSeq          = 64
	hdrNodeCount    = 128
	hdrDropped      = 192
	hdrDisabled     = 200
	hdrNodesLost    = 208
	hdrCoarse       = 216
	hdrClockPeriod  = 224
	hdrFirstRing    = 232
	hdrWaits        = 240
	hdrWaitNs       = 248
	hdrCallsWindow  = 256
	hdrLeakScan     = 264
	hdrScanDone     = 272
	hdrFreePointers = 280
	hdrFullUnwind   = 288
	hdrExecPending  = 296
	hdrClock        = 320
	hdrExecPath     = 384
)

// struct mt_slot and struct mt_node.
const (
	slotState   = 0
	slotTid     = 4
	slotWrite   = 64
	slotRead    = 128
	slotWaiting = 136
	slotBytes   = 192

	nodeParent = 0
	nodeModule = 4
	nodeOffset = 8
	nodeBytes  = 16
)

// struct mt_hello and struct mt_welcome.
const (
	helloFixed     = 80
	helloOwnAlloc  = 32
	helloForkToken = 40
	helloKey       = 48
	welcomeBytes   = 16
)

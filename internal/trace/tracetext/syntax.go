package tracetext

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memtrail/memtrail/internal/trace"
)

// syntax is the text form of one record kind.
type syntax struct {
	name   string
	kind   trace.Kind
	record string // the trace.Record field holding the value; "" for events
	fields []field
}

// field maps a key of the text form to a field of the record's struct.
type field struct {
	key    string
	name   string // Go field name
	always bool   // written even when zero
	hex    bool   // a number written in hex: addresses and offsets
}

var syntaxes = []syntax{
	{"info", trace.KindInfo, "Info", []field{
		opt("start", "StartUnixNano"), req("time-unit", "TimeUnit"),
		opt("hostname", "Hostname"), opt("recorder", "Recorder"),
		opt("max-frames", "MaxFrames"), opt("command", "Command")}},
	{"process", trace.KindProcessStart, "Process", []field{
		req("id", "ID"), req("pid", "PID"), opt("ppid", "PPID"),
		opt("parent", "Parent"), opt("time", "Time"), opt("exe", "Exe"),
		opt("args", "Args"), opt("cwd", "Cwd")}},
	{"process-end", trace.KindProcessEnd, "ProcessEnd", []field{
		req("id", "ID"), req("time", "Time"), req("how", "How"),
		req("code", "Code"), opt("lost", "Lost")}},
	{"thread", trace.KindThread, "Thread", []field{
		req("process", "Process"), req("index", "Index"),
		req("tid", "TID"), opt("time", "Time")}},
	{"thread-end", trace.KindThreadEnd, "ThreadEnd", []field{
		req("process", "Process"), req("index", "Index"), opt("time", "Time")}},
	{"object", trace.KindObject, "Object", []field{
		req("id", "ID"), req("path", "Path"), opt("build-id", "BuildID")}},
	{"module", trace.KindModule, "Module", []field{
		req("process", "Process"), req("id", "ID"), req("object", "Object"),
		hexField("base", "Base"), opt("time", "Time"), opt("segments", "Segments")}},
	{"module-unload", trace.KindModuleUnload, "ModuleUnload", []field{
		req("process", "Process"), req("id", "ID"), opt("time", "Time")}},
	{"node", trace.KindStackNode, "StackNode", []field{
		req("process", "Process"), req("id", "ID"), req("parent", "Parent"),
		req("module", "Module"), hexField("offset", "Offset")}},
	{"string", trace.KindString, "String", []field{
		req("id", "ID"), req("value", "Value")}},
	{"symbol", trace.KindSymbol, "Symbol", []field{
		req("object", "Object"), hexField("offset", "Offset"), req("frames", "Frames")}},
	{"object-status", trace.KindObjectStatus, "ObjectStatus", []field{
		req("object", "Object"), req("status", "Status"), opt("message", "Message")}},
	{"type", trace.KindType, "Type", []field{
		req("object", "Object"), req("size", "Size"), req("name", "Name")}},
	{"alloc", trace.KindAlloc, "", eventFields(addrField, sizeField)},
	{"free", trace.KindFree, "", eventFields(addrField)},
	{"realloc", trace.KindRealloc, "", eventFields(oldField, addrField, sizeField)},
	{"lost", trace.KindLost, "Lost", []field{
		req("process", "Process"), req("count", "Count"), opt("reason", "Reason")}},
	{"thread-stack", trace.KindThreadStack, "ThreadStack", []field{
		req("process", "Process"), req("index", "Index"), req("time", "Time"),
		req("high-water", "HighWater"), opt("size", "Size")}},
	{"stack-calls", trace.KindStackCalls, "StackCalls", []field{
		req("process", "Process"), req("thread", "Thread"), req("time", "Time"),
		req("max", "Max"), req("level", "Level"), opt("calls", "Calls")}},
	{"deepest-stack", trace.KindDeepestStack, "DeepestStack", []field{
		req("process", "Process"), req("thread", "Thread"), req("time", "Time"),
		req("bytes", "Bytes"), req("stack", "Stack"), opt("frame-sizes", "FrameSizes")}},
	{"leak-scan", trace.KindLeakScan, "LeakScan", []field{
		req("process", "Process"), req("time", "Time"), opt("duration", "Duration"), opt("error", "Error"),
		opt("definitely-bytes", "DefinitelyLostBytes"), opt("definitely-blocks", "DefinitelyLostBlocks"),
		opt("indirectly-bytes", "IndirectlyLostBytes"), opt("indirectly-blocks", "IndirectlyLostBlocks"),
		opt("possibly-bytes", "PossiblyLostBytes"), opt("possibly-blocks", "PossiblyLostBlocks"),
		opt("reachable-bytes", "StillReachableBytes"), opt("reachable-blocks", "StillReachableBlocks")}},
	{"leak-blocks", trace.KindLeakBlocks, "LeakBlocks", []field{
		req("process", "Process"), req("blocks", "Blocks")}},
	{"fork", trace.KindFork, "Fork", []field{
		req("process", "Process"), req("child", "Child"), opt("time", "Time")}},
	{"end", trace.KindEnd, "End", []field{
		req("time", "Time"), req("events", "Events")}},
}

// eventFields returns the fields of an event kind: those all events have
// around the given ones.
func eventFields(middle ...field) []field {
	fields := []field{
		req("process", "Process"), req("thread", "Thread"),
		req("time", "Time"), req("api", "API")}
	fields = append(fields, middle...)
	return append(fields, req("stack", "Stack"), opt("stack-use", "StackInUse"))
}

var (
	oldField  = hexField("old", "OldAddr")
	addrField = hexField("addr", "Addr")
	sizeField = req("size", "Size")
)

// opt is a field left out when zero, req one always written, and hexField
// an address or offset, always written, in hex.
func opt(key, name string) field      { return field{key: key, name: name} }
func req(key, name string) field      { return field{key: key, name: name, always: true} }
func hexField(key, name string) field { return field{key: key, name: name, always: true, hex: true} }

// aliases are other names accepted for record kinds: those of trace.Kind.
var aliases = map[string]string{"process-start": "process", "stack-node": "node"}

func syntaxByName(name string) (*syntax, bool) {
	if alias, ok := aliases[name]; ok {
		name = alias
	}
	for i := range syntaxes {
		if syntaxes[i].name == name {
			return &syntaxes[i], true
		}
	}
	return nil, false
}

func syntaxByKind(k trace.Kind) (*syntax, bool) {
	for i := range syntaxes {
		if syntaxes[i].kind == k {
			return &syntaxes[i], true
		}
	}
	return nil, false
}

// value returns the struct rec holds for this kind, allocating it if
// create is set and rec has none.
func (s *syntax) value(rec *trace.Record, create bool) (reflect.Value, bool) {
	if s.record == "" {
		return reflect.ValueOf(&rec.Event).Elem(), true
	}
	ptr := reflect.ValueOf(rec).Elem().FieldByName(s.record)
	if ptr.IsNil() {
		if !create {
			return reflect.Value{}, false
		}
		ptr.Set(reflect.New(ptr.Type().Elem()))
	}
	return ptr.Elem(), true
}

func formatRecord(b *strings.Builder, rec trace.Record) {
	s, ok := syntaxByKind(rec.Kind)
	if !ok {
		fmt.Fprintf(b, "# %v record has no text form", rec.Kind)
		return
	}
	b.WriteString(s.name)
	v, ok := s.value(&rec, false)
	if !ok {
		b.WriteString(" # no value")
		return
	}
	for _, f := range s.fields {
		fv := v.FieldByName(f.name)
		if fv.IsZero() && !f.always {
			continue
		}
		fmt.Fprintf(b, " %s=%s", f.key, formatValue(fv, f.hex))
	}
}

var (
	apiType      = reflect.TypeFor[trace.API]()
	howType      = reflect.TypeFor[trace.EndHow]()
	statusType   = reflect.TypeFor[trace.SymbolStatus]()
	framesType   = reflect.TypeFor[[]trace.Frame]()
	segmentsType = reflect.TypeFor[[]trace.Segment]()
	stringsType  = reflect.TypeFor[[]string]()
	bytesType    = reflect.TypeFor[[]byte]()
	uintsType    = reflect.TypeFor[[]uint64]()
	leakType     = reflect.TypeFor[[]trace.LeakBlock]()
)

func formatValue(v reflect.Value, hex bool) string {
	switch v.Type() {
	case apiType:
		return formatName(apiNames, v.Uint())
	case howType:
		return formatName(howNames, v.Uint())
	case statusType:
		return formatName(statusNames, v.Uint())
	case framesType:
		return formatFrames(v.Interface().([]trace.Frame))
	case segmentsType:
		return formatSegments(v.Interface().([]trace.Segment))
	case leakType:
		return formatLeakBlocks(v.Interface().([]trace.LeakBlock))
	case stringsType:
		return formatList(v.Interface().([]string))
	case bytesType:
		return formatHexBytes(v.Bytes())
	case uintsType:
		var ss []string
		for _, n := range v.Interface().([]uint64) {
			ss = append(ss, strconv.FormatUint(n, 10))
		}
		return "[" + strings.Join(ss, " ") + "]"
	}
	switch v.Kind() {
	case reflect.Uint64:
		return formatUint(v.Uint(), hex)
	case reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.String:
		return quote(v.String())
	}
	panic(fmt.Sprintf("tracetext: no text form for %v", v.Type()))
}

func setValue(v reflect.Value, text token) error {
	if v.Type() == stringsType {
		v.Set(reflect.ValueOf(text.strings()))
		return nil
	}
	if v.Type() == uintsType {
		var ns []uint64
		for _, s := range text.strings() {
			n, err := parseUint(s)
			if err != nil {
				return err
			}
			ns = append(ns, n)
		}
		v.Set(reflect.ValueOf(ns))
		return nil
	}
	if text.isList {
		return fmt.Errorf("a list is not a value of this field")
	}
	var x any
	var err error
	switch v.Type() {
	case apiType:
		x, err = parseAPI(text.text)
	case howType:
		x, err = parseName(howNames, text.text, func(n uint64) any { return trace.EndHow(n) })
	case statusType:
		x, err = parseName(statusNames, text.text, func(n uint64) any { return trace.SymbolStatus(n) })
	case framesType:
		x, err = parseFrames(text.text)
	case segmentsType:
		x, err = parseSegments(text.text)
	case leakType:
		x, err = parseLeakBlocks(text.text)
	case bytesType:
		x, err = parseHexBytes(text.text)
	default:
		return setScalar(v, text.text)
	}
	if err != nil {
		return err
	}
	v.Set(reflect.ValueOf(x))
	return nil
}

func setScalar(v reflect.Value, text string) error {
	switch v.Kind() {
	case reflect.Uint64:
		n, err := parseUint(text)
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Int64:
		n, err := strconv.ParseInt(text, 0, 64)
		if err != nil {
			return fmt.Errorf("bad number %q", text)
		}
		v.SetInt(n)
	case reflect.String:
		v.SetString(text)
	default:
		panic(fmt.Sprintf("tracetext: no text form for %v", v.Type()))
	}
	return nil
}

func formatUint(n uint64, hex bool) string {
	if hex {
		return "0x" + strconv.FormatUint(n, 16)
	}
	return strconv.FormatUint(n, 10)
}

func parseUint(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return n, nil
}

// quote returns s bare if it can be read back that way, else as a Go string
// literal.
func quote(s string) string {
	if s == "" || !utf8.ValidString(s) || strings.ContainsAny(s, "\"[]#\\") {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

func formatList(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = quote(s)
	}
	return "[" + strings.Join(quoted, " ") + "]"
}

func formatHexBytes(b []byte) string {
	if len(b) == 0 {
		return `""`
	}
	return hex.EncodeToString(b)
}

func parseHexBytes(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("bad hex bytes %q", s)
	}
	return b, nil
}

func formatFrames(frames []trace.Frame) string {
	parts := make([]string, len(frames))
	for i, f := range frames {
		parts[i] = fmt.Sprintf("%d:%d:%d", f.Function, f.File, f.Line)
	}
	return quote(strings.Join(parts, ";"))
}

func parseFrames(s string) ([]trace.Frame, error) {
	var frames []trace.Frame
	for _, part := range splitNonEmpty(s, ";") {
		n, err := parseTuple(part, 3)
		if err != nil {
			return nil, fmt.Errorf("bad frame %q: want function:file:line", part)
		}
		frames = append(frames, trace.Frame{Function: n[0], File: n[1], Line: n[2]})
	}
	return frames, nil
}

func formatSegments(segs []trace.Segment) string {
	parts := make([]string, len(segs))
	for i, s := range segs {
		parts[i] = fmt.Sprintf("0x%x:0x%x:0x%x:%s", s.Vaddr, s.Memsz, s.Offset, formatFlags(s.Flags))
	}
	return quote(strings.Join(parts, ";"))
}

func parseSegments(s string) ([]trace.Segment, error) {
	var segs []trace.Segment
	for _, part := range splitNonEmpty(s, ";") {
		i := strings.LastIndexByte(part, ':')
		n, err := parseTuple(part[:max(i, 0)], 3)
		flags, ferr := parseFlags(part[i+1:])
		if i < 0 || err != nil || ferr != nil {
			return nil, fmt.Errorf("bad segment %q: want vaddr:memsz:offset:flags", part)
		}
		segs = append(segs, trace.Segment{Vaddr: n[0], Memsz: n[1], Offset: n[2], Flags: flags})
	}
	return segs, nil
}

// leakClassLetters name the lost classes in a leak-blocks record's
// blocks: definitely, indirectly and possibly lost.
var leakClassLetters = map[trace.LeakClass]string{trace.DefinitelyLost: "d", trace.IndirectlyLost: "i", trace.PossiblyLost: "p"}

// formatLeakBlocks writes blocks as addr:class, with :leader after an
// indirectly lost one: "0x1000:d;0x2000:i:0x1000;0x3000:p".
func formatLeakBlocks(blocks []trace.LeakBlock) string {
	parts := make([]string, len(blocks))
	for i, b := range blocks {
		letter, ok := leakClassLetters[b.Class]
		if !ok {
			letter = strconv.Itoa(int(b.Class))
		}
		parts[i] = fmt.Sprintf("0x%x:%s", b.Addr, letter)
		if b.Class == trace.IndirectlyLost {
			parts[i] += fmt.Sprintf(":0x%x", b.Leader)
		}
	}
	return quote(strings.Join(parts, ";"))
}

func parseLeakBlocks(s string) ([]trace.LeakBlock, error) {
	var blocks []trace.LeakBlock
	for _, part := range splitNonEmpty(s, ";") {
		f := strings.Split(part, ":")
		bad := fmt.Errorf("bad leak block %q: want addr:d, addr:i:leader or addr:p", part)
		if len(f) < 2 || len(f) > 3 {
			return nil, bad
		}
		addr, err := parseUint(f[0])
		if err != nil {
			return nil, bad
		}
		b := trace.LeakBlock{Addr: addr}
		for c, letter := range leakClassLetters {
			if f[1] == letter {
				b.Class = c
			}
		}
		if b.Class == trace.StillReachable || (b.Class == trace.IndirectlyLost) != (len(f) == 3) {
			return nil, bad
		}
		if len(f) == 3 {
			if b.Leader, err = parseUint(f[2]); err != nil {
				return nil, bad
			}
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// formatFlags writes segment flags as ls -l does permissions.
func formatFlags(f uint64) string {
	if f&^(trace.SegmentRead|trace.SegmentWrite|trace.SegmentExec) != 0 {
		return strconv.FormatUint(f, 10)
	}
	b := []byte("---")
	if f&trace.SegmentRead != 0 {
		b[0] = 'r'
	}
	if f&trace.SegmentWrite != 0 {
		b[1] = 'w'
	}
	if f&trace.SegmentExec != 0 {
		b[2] = 'x'
	}
	return string(b)
}

func parseFlags(s string) (uint64, error) {
	if len(s) == 3 && strings.Trim(s, "rwx-") == "" {
		var f uint64
		for i, bit := range []uint64{trace.SegmentRead, trace.SegmentWrite, trace.SegmentExec} {
			if s[i] == "rwx"[i] {
				f |= bit
			} else if s[i] != '-' {
				return 0, fmt.Errorf("bad flags %q", s)
			}
		}
		return f, nil
	}
	return parseUint(s)
}

// parseTuple parses n numbers separated by ':'.
func parseTuple(s string, n int) ([]uint64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != n {
		return nil, fmt.Errorf("want %d numbers", n)
	}
	nums := make([]uint64, n)
	for i, p := range parts {
		var err error
		if nums[i], err = parseUint(p); err != nil {
			return nil, err
		}
	}
	return nums, nil
}

// splitNonEmpty splits s at sep, leaving out empty parts: a trailing
// separator is harmless.
func splitNonEmpty(s, sep string) []string {
	var parts []string
	for _, part := range strings.Split(s, sep) {
		if strings.TrimSpace(part) != "" {
			parts = append(parts, part)
		}
	}
	return parts
}

// Names of enum values in the text form: short, and free of spaces.
var (
	apiNames = []string{
		trace.APIUnknown: "unknown", trace.APIMalloc: "malloc", trace.APICalloc: "calloc",
		trace.APIRealloc: "realloc", trace.APIReallocArray: "reallocarray", trace.APIFree: "free",
		trace.APIPosixMemalign: "posix_memalign", trace.APIAlignedAlloc: "aligned_alloc",
		trace.APIMemalign: "memalign", trace.APIValloc: "valloc", trace.APIPvalloc: "pvalloc",
		trace.APINew: "new", trace.APINewNothrow: "new-nothrow", trace.APINewAligned: "new-aligned",
		trace.APINewAlignedNothrow: "new-aligned-nothrow", trace.APINewArray: "new[]",
		trace.APINewArrayNothrow: "new[]-nothrow", trace.APINewArrayAligned: "new[]-aligned",
		trace.APINewArrayAlignedNothrow: "new[]-aligned-nothrow", trace.APIDelete: "delete",
		trace.APIDeleteSized: "delete-sized", trace.APIDeleteAligned: "delete-aligned",
		trace.APIDeleteSizedAligned: "delete-sized-aligned", trace.APIDeleteNothrow: "delete-nothrow",
		trace.APIDeleteAlignedNothrow: "delete-aligned-nothrow", trace.APIDeleteArray: "delete[]",
		trace.APIDeleteArraySized: "delete[]-sized", trace.APIDeleteArrayAligned: "delete[]-aligned",
		trace.APIDeleteArraySizedAligned: "delete[]-sized-aligned", trace.APIDeleteArrayNothrow: "delete[]-nothrow",
		trace.APIDeleteArrayAlignedNothrow: "delete[]-aligned-nothrow", trace.APILost: "lost",
	}
	howNames = []string{
		trace.EndUnknown: "unknown", trace.EndExited: "exited", trace.EndSignaled: "signaled",
		trace.EndExec: "exec", trace.EndRunning: "running",
		trace.EndExecUnrecorded: "exec-unrecorded",
	}
	statusNames = []string{
		trace.SymbolsFull: "full", trace.SymbolsNoDebug: "no-debug", trace.SymbolsMissing: "missing",
		trace.SymbolsMismatch: "mismatch", trace.SymbolsStripped: "stripped",
	}
)

func formatName(names []string, n uint64) string {
	if n < uint64(len(names)) {
		return names[n]
	}
	return strconv.FormatUint(n, 10)
}

func parseName(names []string, s string, convert func(uint64) any) (any, error) {
	for i, name := range names {
		if s == name {
			return convert(uint64(i)), nil
		}
	}
	n, err := strconv.ParseUint(s, 0, 8)
	if err != nil {
		return nil, fmt.Errorf("unknown name %q", s)
	}
	return convert(n), nil
}

// parseAPI also accepts the names trace.API's String method gives.
func parseAPI(s string) (trace.API, error) {
	for a := range trace.API(len(apiNames)) {
		if s == a.String() {
			return a, nil
		}
	}
	a, err := parseName(apiNames, s, func(n uint64) any { return trace.API(n) })
	if err != nil {
		return 0, err
	}
	return a.(trace.API), nil
}

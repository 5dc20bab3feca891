package record

import (
	"bytes"
	"slices"
	"strings"

	"github.com/memtrail/memtrail/internal/trace"
)

// ownAllocator is an object that defines allocation functions the agent
// hooks, in place of the agent's: the dynamic linker binds every call to
// them to it (see internal/agent/csrc/ownalloc.c).
type ownAllocator struct {
	object     string // its path; the executable's for the program itself
	executable bool
	funcs      []string // as the linker names them
}

// parseOwnAlloc decodes the own_alloc strings of a hello (see
// protocol.h), grouped by object in the order they first come, and
// whether the agent patched the executable's own functions. exe is the
// program's path, which the agent does not send.
func parseOwnAlloc(b []byte, exe string) (objects []ownAllocator, patched bool) {
	cur := -1
	for _, s := range bytes.Split(bytes.TrimSuffix(b, []byte{0}), []byte{0}) {
		switch {
		case len(s) == 0:
		case s[0] == '!' && cur < 0:
			patched = true
		case s[0] == '@':
			path, executable := string(s[1:]), len(s) == 1
			if executable {
				path = exe
			}
			cur = slices.IndexFunc(objects, func(o ownAllocator) bool { return o.object == path })
			if cur < 0 {
				objects = append(objects, ownAllocator{object: path, executable: executable})
				cur = len(objects) - 1
			}
		case cur >= 0:
			objects[cur].funcs = append(objects[cur].funcs, string(s))
		}
	}
	return slices.DeleteFunc(objects, func(o ownAllocator) bool { return len(o.funcs) == 0 }), patched
}

// patchedWarning is the message of the Warning record of a process that
// the agent recorded through the program's own allocation functions,
// patched: the report says so, and why some of its frees are uncertain
// (see trace.LostOwnAllocator).
const patchedWarning = "the program's own allocation functions were patched to pass through memtrail: " +
	trace.LostOwnAllocator + "; frees of them are uncertain, and blocks counted in use at exit, and in the leak classes, may have been freed unseen"

// operatorNames gives the C++ operators the agent hooks the names a
// reader knows them by; their variants (nothrow, aligned, sized) share one.
var operatorNames = map[string]string{
	"_Znwm": "operator new", "_ZnwmRKSt9nothrow_t": "operator new", "_ZnwmSt11align_val_t": "operator new",
	"_ZnwmSt11align_val_tRKSt9nothrow_t": "operator new",
	"_Znam":                              "operator new[]", "_ZnamRKSt9nothrow_t": "operator new[]", "_ZnamSt11align_val_t": "operator new[]",
	"_ZnamSt11align_val_tRKSt9nothrow_t": "operator new[]",
	"_ZdlPv":                             "operator delete", "_ZdlPvm": "operator delete", "_ZdlPvSt11align_val_t": "operator delete",
	"_ZdlPvmSt11align_val_t": "operator delete", "_ZdlPvRKSt9nothrow_t": "operator delete",
	"_ZdlPvSt11align_val_tRKSt9nothrow_t": "operator delete",
	"_ZdaPv":                              "operator delete[]", "_ZdaPvm": "operator delete[]", "_ZdaPvSt11align_val_t": "operator delete[]",
	"_ZdaPvmSt11align_val_t": "operator delete[]", "_ZdaPvRKSt9nothrow_t": "operator delete[]",
	"_ZdaPvSt11align_val_tRKSt9nothrow_t": "operator delete[]",
}

// warning says what the calls to o's functions mean for the trace: the
// message of the process's Warning record. patching says whether the
// agent was asked to patch the executable's functions: it lists those it
// could not patch (it patches all of them or none).
func (o ownAllocator) warning(patching bool) string {
	var names []string
	for _, f := range o.funcs {
		if n, ok := operatorNames[f]; ok {
			f = n
		}
		if !slices.Contains(names, f) {
			names = append(names, f)
		}
	}
	list := names[0]
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	who, them := "the program", "them"
	if !o.executable {
		who = o.object + ", loaded before memtrail's agent,"
	}
	if len(names) == 1 {
		them = "it"
	}
	how := " itself: "
	if o.executable && patching {
		how = " itself, in a way memtrail cannot patch: "
	}
	msg := who + " defines " + list + how + "calls to " + them + " do not pass through memtrail and are not recorded"
	if onlyOperators(o.funcs) {
		// As with a statically linked libstdc++ (gcc's cc1): what the
		// operators allocate through malloc is seen, as malloc's.
		msg += "; what they allocate through malloc is recorded as malloc and free"
	}
	if o.executable && !patching {
		msg += " (memtrail run -patch-own-allocator=false left them alone)"
	}
	return msg
}

// onlyOperators says whether funcs are all C++ operators: a program that
// defines those but calls the C library's malloc and free.
func onlyOperators(funcs []string) bool {
	for _, f := range funcs {
		if _, ok := operatorNames[f]; !ok {
			return false
		}
	}
	return true
}

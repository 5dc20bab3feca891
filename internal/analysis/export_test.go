package analysis

import (
	"fmt"
	"reflect"
)

// SameModels reports whether two models say the same, as the cache would
// keep them, however they were made.
func SameModels(a, b *Model) bool {
	ca, cb := *a, *b
	ca.stopped, cb.stopped = false, false
	return reflect.DeepEqual(cachedModelOf(&ca), cachedModelOf(&cb))
}

// Join analyzes the window of opts by putting it together from parts,
// if it can (see Windows).
func (w *Windows) Join(opts Options) (*Model, bool, error) { return w.join(opts) }

// DiffModels lists the exported fields in which two models differ, as the
// cache would keep them, for the message of a failed comparison.
func DiffModels(a, b *Model) string {
	ca, cb := cachedModelOf(a), cachedModelOf(b)
	va, vb := reflect.ValueOf(ca).Elem(), reflect.ValueOf(cb).Elem()
	return diffValue("", va, vb)
}

func diffValue(path string, a, b reflect.Value) string {
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return ""
	}
	switch a.Kind() {
	case reflect.Struct:
		out := ""
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			out += diffValue(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i))
		}
		return out
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: len %d vs %d\n", path, a.Len(), b.Len())
		}
		out := ""
		for i := range a.Len() {
			out += diffValue(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i))
			if len(out) > 2000 {
				return out
			}
		}
		return out
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return fmt.Sprintf("%s: nil %v vs %v\n", path, a.IsNil(), b.IsNil())
		}
		return diffValue(path, a.Elem(), b.Elem())
	}
	return fmt.Sprintf("%s: %v vs %v\n", path, a.Interface(), b.Interface())
}

// HeldBytes returns how many bytes the checkpoints hold together.
func HeldBytes(cps []*Checkpoint) uint64 { return heldBytes(cps) }

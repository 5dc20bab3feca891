package analysis

import "reflect"

// SameModels reports whether two models say the same, as the cache would
// keep them, however they were made.
func SameModels(a, b *Model) bool {
	ca, cb := *a, *b
	ca.stopped, cb.stopped = false, false
	return reflect.DeepEqual(cachedModelOf(&ca), cachedModelOf(&cb))
}

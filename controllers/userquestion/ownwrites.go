package userquestion

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWriteTTL bounds the memory ownWrites keeps for writes that nothing
// looks at again, or whose objects were deleted. A remembered write never
// goes wrong with age (any later change gives the object a new
// resourceVersion); the watch brings a write to the cache in milliseconds.
const ownWriteTTL = 30 * time.Second

// ownWrites lets the controller read its own writes. Between a status
// write and the watch event that brings it to the cache, a look at the
// question (another of its events, or a reply's) would see the version
// before the write and write it again: a conflicting status update, or a
// reply outcome patched twice. While the cache still holds the version a
// write replaced, ownWrites hands out the written object instead.
type ownWrites struct {
	mu        sync.Mutex
	objects   map[types.UID]ownWrite
	lastSweep time.Time
}

type ownWrite struct {
	// replaced are the resourceVersions the write stands in for: the one
	// it replaced, and those of the controller's earlier writes over that
	// one which the cache may hold meanwhile.
	replaced []string
	written  client.Object
	at       time.Time
}

func newOwnWrites() *ownWrites {
	return &ownWrites{objects: map[types.UID]ownWrite{}}
}

// record notes that the object at resourceVersion replaced was written as
// written (the API server's answer), which it keeps, trimmed as the cache
// would keep it. A write that changed nothing keeps its resourceVersion,
// and no watch event follows it: nothing to record.
func (w *ownWrites) record(replaced string, written client.Object, now time.Time) {
	w.put(replaced, written, now, false)
}

// recordOver notes a write made over prev, an object as the controller
// read it: from the cache, or one of its own writes that latest handed
// out, in which case the cache still holds the version that write
// replaced, and the new write stands in for that version now.
//
// A write over the cached version that an earlier own write replaced
// stands in for both versions: the cache may show the earlier write before
// this one.
func (w *ownWrites) recordOver(prev, written client.Object, now time.Time) {
	w.put(prev.GetResourceVersion(), written, now, true)
}

// put records written over the version rv; over: also over the versions
// an earlier own write of the object stands in for, when rv is one of
// them or that write itself.
func (w *ownWrites) put(rv string, written client.Object, now time.Time, over bool) {
	if written.GetResourceVersion() == rv {
		return
	}
	_, _ = trimForCache(written)
	w.mu.Lock()
	defer w.mu.Unlock()
	replaced := []string{rv}
	if o, ok := w.objects[written.GetUID()]; over && ok && (o.written.GetResourceVersion() == rv || slices.Contains(o.replaced, rv)) {
		replaced = append(slices.Clone(o.replaced), o.written.GetResourceVersion())
	}
	w.objects[written.GetUID()] = ownWrite{replaced: replaced, written: written, at: now}
	w.sweep(now)
}

// latest returns a copy of what the controller wrote over cached when the
// cache has not yet seen that write, and otherwise cached itself.
func latest[T client.Object](w *ownWrites, cached T, now time.Time) T {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sweep(now)
	o, ok := w.objects[cached.GetUID()]
	if !ok {
		return cached
	}
	if !slices.Contains(o.replaced, cached.GetResourceVersion()) {
		// The cache has the write, or a later version: it is the truth.
		delete(w.objects, cached.GetUID())
		return cached
	}
	written, ok := o.written.DeepCopyObject().(T)
	if !ok {
		return cached
	}
	return written
}

// sweep forgets, now and then, the writes older than ownWriteTTL: those
// of objects deleted since, and those nothing looked at again.
func (w *ownWrites) sweep(now time.Time) {
	if now.Sub(w.lastSweep) < ownWriteTTL/2 {
		return
	}
	for uid, o := range w.objects {
		if now.Sub(o.at) > ownWriteTTL {
			delete(w.objects, uid)
		}
	}
	w.lastSweep = now
}

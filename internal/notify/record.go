package notify

import (
	"encoding/json"
	"maps"
	"slices"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Record is what was sent about a question, per channel: the keys of the
// events (Due.Key) each channel was sent. It lives in the question's
// hitl.dev/notified annotation, as JSON ({"ops-webhook":["asked",
// "reminder-50"]}), so that a restarted notifier neither loses nor
// repeats a notification.
type Record map[string][]string

// RecordOf reads q's record; a missing or unreadable annotation is an
// empty record (what was sent is then sent again: at least once).
func RecordOf(q *hitlv1.UserQuestion) Record {
	r := Record{}
	if v, ok := q.Annotations[hitlv1.NotifiedAnnotation]; ok {
		_ = json.Unmarshal([]byte(v), &r)
	}
	return r
}

// Has reports whether key was sent to ch.
func (r Record) Has(ch, key string) bool { return slices.Contains(r[ch], key) }

// Add notes that key was sent to ch.
func (r Record) Add(ch, key string) {
	if !r.Has(ch, key) {
		r[ch] = append(r[ch], key)
	}
}

// Merge adds what o records.
func (r Record) Merge(o Record) {
	for ch, keys := range o {
		for _, k := range keys {
			r.Add(ch, k)
		}
	}
}

// Clone copies r.
func (r Record) Clone() Record {
	out := make(Record, len(r))
	for ch, keys := range r {
		out[ch] = slices.Clone(keys)
	}
	return out
}

// Equal reports whether r and o record the same.
func (r Record) Equal(o Record) bool {
	return maps.EqualFunc(r, o, func(a, b []string) bool {
		return len(a) == len(b) && !slices.ContainsFunc(a, func(k string) bool { return !slices.Contains(b, k) })
	})
}

// String is the annotation's value: JSON with the channels sorted.
func (r Record) String() string {
	b, _ := json.Marshal(map[string][]string(r)) // maps marshal with sorted keys
	return string(b)
}

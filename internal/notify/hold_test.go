package notify

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func heldKey(name string) recordKey {
	return recordKey{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, UID: types.UID(name + "-uid")}
}

// Out of a burst a delivery's record is not held back at all.
func TestHoldBackHoldsNothingOutOfABurst(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	h := newHoldBack(time.Second, 10*time.Second)
	if held, _ := h.add(heldKey("a"), t0); held {
		t.Error("a record was held back though no question had ever come")
	}
	h.arrived(t0)
	if held, _ := h.add(heldKey("b"), t0.Add(time.Second)); held {
		t.Error("a record was held back a whole quiet period after the last question came")
	}
}

// While questions keep arriving the records wait, in the order they were
// first held, and all go once no new question came for the quiet period.
func TestHoldBackReleasesOnceQuestionsStopArriving(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	h := newHoldBack(time.Second, 10*time.Second)
	h.arrived(t0)
	held, first := h.add(heldKey("a"), t0.Add(10*time.Millisecond))
	if !held || !first {
		t.Fatalf("the first record during a burst: held %v, first %v; want both", held, first)
	}
	for i, name := range []string{"b", "a", "c"} {
		at := t0.Add(time.Duration(i+1) * 300 * time.Millisecond)
		h.arrived(at)
		if held, first := h.add(heldKey(name), at); !held || first {
			t.Fatalf("record of %s: held %v, first %v; want held, not first", name, held, first)
		}
	}
	last := t0.Add(900 * time.Millisecond)
	out, next := h.release(last.Add(999*time.Millisecond), false)
	if len(out) != 0 {
		t.Errorf("released %v while questions still came", out)
	}
	if !next.Equal(last.Add(time.Second)) {
		t.Errorf("next look at %v, want the end of the quiet period, %v", next, last.Add(time.Second))
	}
	out, next = h.release(last.Add(time.Second), false)
	want := []recordKey{heldKey("a"), heldKey("b"), heldKey("c")}
	if len(out) != len(want) || out[0] != want[0] || out[1] != want[1] || out[2] != want[2] {
		t.Errorf("released %v once questions stopped coming, want %v (each once, in order)", out, want)
	}
	if !next.IsZero() {
		t.Errorf("next look at %v with nothing held", next)
	}
}

// Questions that never stop coming hold a record back recordHoldMax at
// most: the oldest go, the others wait.
func TestHoldBackReleasesWhatWaitedLongestInAnEndlessStream(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	h := newHoldBack(time.Second, 10*time.Second)
	for i := range 120 { // a question every 100 ms for 12 s
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		h.arrived(at)
		if i%10 == 0 { // a record every second
			h.add(heldKey(string(rune('a'+i/10))), at)
		}
	}
	now := t0.Add(11900 * time.Millisecond)
	out, next := h.release(now, false)
	// Held at 0, 1 s and 2 s ... 11 s: those of 0 and 1 s waited 10 s.
	if len(out) != 2 || out[0] != heldKey("a") || out[1] != heldKey("b") {
		t.Errorf("released %v, want the records held 10 s or more (a, b)", out)
	}
	if want := t0.Add(12 * time.Second); !next.Equal(want) {
		t.Errorf("next look at %v, want %v (when c has waited 10 s, before the quiet period ends)", next, want)
	}
}

// A stopping notifier releases everything held, and holds nothing back
// after.
func TestHoldBackCloseReleasesAll(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	h := newHoldBack(time.Second, 10*time.Second)
	h.arrived(t0)
	h.add(heldKey("a"), t0)
	h.add(heldKey("b"), t0)
	if out := h.close(); len(out) != 2 {
		t.Errorf("close released %v, want a and b", out)
	}
	h.arrived(t0.Add(time.Millisecond))
	if held, _ := h.add(heldKey("c"), t0.Add(time.Millisecond)); held {
		t.Error("a record was held back by a stopping notifier")
	}
}

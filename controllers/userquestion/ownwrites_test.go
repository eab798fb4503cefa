package userquestion

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func questionAt(rv string, state hitlv1.QuestionState) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "agents", UID: "uid-q", ResourceVersion: rv,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "hitl"}}},
		Status: hitlv1.UserQuestionStatus{State: state},
	}
}

func TestOwnWritesStandInUntilTheCacheHasThem(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w := newOwnWrites()
	w.record("10", questionAt("11", hitlv1.StateSettled), now)

	got := latest(w, questionAt("10", hitlv1.StateOpen), now)
	if got.Status.State != hitlv1.StateSettled || got.ResourceVersion != "11" {
		t.Fatalf("a cache still at the replaced version read %s at %s, want the written Settled at 11", got.Status.State, got.ResourceVersion)
	}
	if got.ManagedFields != nil {
		t.Errorf("the written object is kept untrimmed: managedFields %v", got.ManagedFields)
	}
	got.Status.State = hitlv1.StateCancelled
	if again := latest(w, questionAt("10", hitlv1.StateOpen), now); again.Status.State != hitlv1.StateSettled {
		t.Errorf("a caller's change to what latest returned reached the record: %s", again.Status.State)
	}

	cached := questionAt("11", hitlv1.StateSettled)
	if got := latest(w, cached, now); got != cached {
		t.Errorf("a cache that has the write was not read as it is")
	}
	if w.len() != 0 {
		t.Errorf("%d writes still remembered once the cache has them", w.len())
	}
	if got := latest(w, questionAt("10", hitlv1.StateOpen), now); got.Status.State != hitlv1.StateOpen {
		t.Errorf("a forgotten write still stands in: %s", got.Status.State)
	}
}

func TestOwnWritesLaterVersionsWin(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w := newOwnWrites()
	w.record("10", questionAt("11", hitlv1.StateSettled), now)
	// Someone else wrote after hitl: the cache's version is neither.
	cached := questionAt("12", hitlv1.StateSettled)
	if got := latest(w, cached, now); got != cached {
		t.Errorf("a later version in the cache lost to hitl's older write: %s", got.ResourceVersion)
	}
}

func TestOwnWritesIgnoreWritesThatChangedNothing(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w := newOwnWrites()
	// A no-op update keeps the resourceVersion: the cache already has it.
	w.record("10", questionAt("10", hitlv1.StateOpen), now)
	if w.len() != 0 {
		t.Errorf("a write that changed nothing was remembered")
	}
}

func TestOwnWritesForgetOldWrites(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w := newOwnWrites()
	w.record("10", questionAt("11", hitlv1.StateSettled), now)
	other := questionAt("20", hitlv1.StateSettled)
	other.UID = "uid-other"
	w.record("19", other, now.Add(ownWriteTTL/2))
	if w.len() != 2 {
		t.Fatalf("%d writes remembered, want 2", w.len())
	}
	w.record("30", func() *hitlv1.UserQuestion {
		q := questionAt("31", hitlv1.StateSettled)
		q.UID = "uid-third"
		return q
	}(), now.Add(ownWriteTTL+time.Second))
	if w.len() != 2 {
		t.Errorf("%d writes remembered after the first one's TTL, want the 2 younger ones", w.len())
	}
	if got := latest(w, questionAt("10", hitlv1.StateOpen), now.Add(ownWriteTTL+time.Second)); got.Status.State != hitlv1.StateOpen {
		t.Errorf("a write past its TTL still stands in")
	}
}

// len is how many writes wait for the cache.
func (w *ownWrites) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.objects)
}

// A write over what latest handed out stands in for the version the cache
// still holds, and for the earlier write, which the cache may show first.
func TestOwnWritesRecordOverAnOwnWrite(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w := newOwnWrites()
	w.record("10", questionAt("11", hitlv1.StateSettled), now)
	handed := latest(w, questionAt("10", hitlv1.StateOpen), now)
	w.recordOver(handed, questionAt("12", hitlv1.StateSettled), now)
	if got := latest(w, questionAt("10", hitlv1.StateOpen), now); got.ResourceVersion != "12" {
		t.Errorf("the cache still at 10 read %s, want the later write, 12", got.ResourceVersion)
	}
	if got := latest(w, questionAt("11", hitlv1.StateSettled), now); got.ResourceVersion != "12" {
		t.Errorf("a cache that has the first write, 11, but not the second read %s, want 12", got.ResourceVersion)
	}
	if cached := questionAt("12", hitlv1.StateSettled); latest(w, cached, now) != cached {
		t.Errorf("a cache that has the second write was not read as it is")
	}

	w = newOwnWrites()
	w.record("10", questionAt("11", hitlv1.StateSettled), now)
	w.recordOver(questionAt("10", hitlv1.StateOpen), questionAt("12", hitlv1.StateSettled), now)
	if got := latest(w, questionAt("10", hitlv1.StateOpen), now); got.ResourceVersion != "12" {
		t.Errorf("a write over the cached 10: the cache still at 10 read %s, want 12", got.ResourceVersion)
	}
}

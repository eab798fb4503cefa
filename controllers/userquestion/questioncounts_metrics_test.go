package userquestion

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func countedQuestion(name string, state hitlv1.QuestionState) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Status:     hitlv1.UserQuestionStatus{State: state},
	}
}

func TestQuestionCountsHandlers(t *testing.T) {
	c := newQuestionCounts()
	want := func(open, continued, settled, cancelled int) {
		t.Helper()
		got, synced := c.snapshot()
		w := map[hitlv1.QuestionState]int{hitlv1.StateOpen: open, hitlv1.StateContinued: continued, hitlv1.StateSettled: settled, hitlv1.StateCancelled: cancelled}
		if !synced || !maps.Equal(got, w) {
			t.Fatalf("counts = %v (synced %v), want %v", got, synced, w)
		}
	}
	want(0, 0, 0, 0)
	a, b := countedQuestion("a", ""), countedQuestion("b", hitlv1.StateOpen)
	c.OnAdd(a, true)
	c.OnAdd(b, true)
	want(2, 0, 0, 0) // no state yet is Open
	c.OnUpdate(a, a) // a resync
	want(2, 0, 0, 0)
	a2 := countedQuestion("a", hitlv1.StateContinued)
	c.OnUpdate(a, a2)
	want(1, 1, 0, 0)
	a3 := countedQuestion("a", hitlv1.StateSettled)
	c.OnUpdate(a2, a3)
	want(1, 0, 1, 0)
	b2 := countedQuestion("b", hitlv1.StateCancelled)
	c.OnUpdate(b, b2)
	want(0, 0, 1, 1)
	c.OnDelete(a3)
	want(0, 0, 0, 1)
	c.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: b2})
	want(0, 0, 0, 0)
	c.OnAdd("not a question", false)
	c.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/x"})
	want(0, 0, 0, 0)
}

// TestQuestionCountsInformer runs the counts on a real informer, with
// resyncs every second (the least it allows) and a watch that loses deletions, so
// that the informer relists and hands over tombstones: the counts must
// always come back to those of its store.
func TestQuestionCountsInformer(t *testing.T) {
	source := fcache.NewFakeControllerSource()
	defer source.Shutdown()
	informer := toolscache.NewSharedIndexInformer(source, &hitlv1.UserQuestion{}, time.Second, toolscache.Indexers{})
	c := newQuestionCounts()
	reg, err := informer.AddEventHandlerWithResyncPeriod(c, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.synced = reg.HasSynced
	states := []hitlv1.QuestionState{"", hitlv1.StateOpen, hitlv1.StateContinued, hitlv1.StateSettled, hitlv1.StateCancelled}
	for i := range 50 {
		source.Add(countedQuestion(fmt.Sprintf("q-%d", i), states[i%len(states)]))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("no sync")
	}
	matches := func(what string) {
		t.Helper()
		var got, want map[hitlv1.QuestionState]int
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			want = map[hitlv1.QuestionState]int{hitlv1.StateOpen: 0, hitlv1.StateContinued: 0, hitlv1.StateSettled: 0, hitlv1.StateCancelled: 0}
			for _, o := range informer.GetStore().List() {
				want[o.(*hitlv1.UserQuestion).State()]++
			}
			var synced bool
			if got, synced = c.snapshot(); synced && maps.Equal(got, want) {
				return
			}
		}
		t.Fatalf("%s: counts %v, the store holds %v", what, got, want)
	}
	matches("initial list")

	for i := range 50 {
		source.Modify(countedQuestion(fmt.Sprintf("q-%d", i), states[(i+1)%len(states)]))
	}
	matches("updates")
	for i := range 10 {
		source.Delete(countedQuestion(fmt.Sprintf("q-%d", i), states[(i+1)%len(states)])) // its last state
	}
	matches("deletes")
	time.Sleep(1500 * time.Millisecond)
	matches("a resync")
	// Changes the watch never delivers: the relist after ResetWatch finds
	// them, and hands the missed deletions over as tombstones.
	for i := 10; i < 20; i++ {
		source.DeleteDropWatch(countedQuestion(fmt.Sprintf("q-%d", i), ""))
	}
	for i := 20; i < 30; i++ {
		source.ModifyDropWatch(countedQuestion(fmt.Sprintf("q-%d", i), hitlv1.StateSettled))
	}
	for i := 50; i < 55; i++ {
		source.AddDropWatch(countedQuestion(fmt.Sprintf("q-%d", i), hitlv1.StateCancelled))
	}
	source.ResetWatch()
	for deadline := time.Now().Add(5 * time.Second); len(informer.GetStore().List()) != 35; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the store holds %d questions after the relist, want 35", len(informer.GetStore().List()))
		}
	}
	matches("relist")
	got, _ := c.snapshot()
	if got[hitlv1.StateSettled] < 10 || got[hitlv1.StateCancelled] < 5 {
		t.Fatalf("counts %v after the relist miss its changes", got)
	}
}

package userquestion

import (
	"context"
	"fmt"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// questionStates are the states hitl_questions reports, each always.
var questionStates = [...]hitlv1.QuestionState{hitlv1.StateOpen, hitlv1.StateContinued, hitlv1.StateSettled, hitlv1.StateCancelled}

// questionCounts counts the questions of the controller's cache by state,
// from the events of the question informer, so that a scrape of
// hitl_questions reads a few numbers instead of making a pass over the
// cache.
//
// It keeps nothing per question: the informer hands its handlers every
// change to its store, in order, each with what the store held. An add is
// an object the store did not hold (the initial list, a relist's new
// objects, and, for a handler added late, the objects already stored); an
// update has the stored object as old (a resync's and a relist's updates
// included, where old and new may be the same); a delete has the last
// state of the object (the watch's DELETED event carries it, and the
// watch brought every change before it), or a DeletedFinalStateUnknown
// holding the stored object when a relist found it gone. Counting what is
// added, moving an update from the old object's state to the new one's
// and uncounting what is deleted keeps the counts those of the store,
// resyncs and relists included.
type questionCounts struct {
	mu     sync.Mutex
	counts map[hitlv1.QuestionState]int
	synced func() bool
}

// countQuestions counts the questions of informers' question informer.
func countQuestions(ctx context.Context, informers cache.Informers) (*questionCounts, error) {
	informer, err := informers.GetInformer(ctx, &hitlv1.UserQuestion{})
	if err != nil {
		return nil, fmt.Errorf("getting the question informer: %w", err)
	}
	c := newQuestionCounts()
	registration, err := informer.AddEventHandler(c)
	if err != nil {
		return nil, fmt.Errorf("counting questions by state: %w", err)
	}
	c.synced = registration.HasSynced
	return c, nil
}

func newQuestionCounts() *questionCounts {
	return &questionCounts{counts: make(map[hitlv1.QuestionState]int, len(questionStates))}
}

// questionState is the state of a question as the informer hands it, or
// false for anything else.
func questionState(obj any) (hitlv1.QuestionState, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	q, ok := obj.(*hitlv1.UserQuestion)
	if !ok || q == nil {
		return "", false
	}
	return q.State(), true
}

// move moves a question out of one state's count and into another's;
// either may be "".
func (c *questionCounts) move(from, to hitlv1.QuestionState) {
	if from == to {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if from != "" {
		if c.counts[from]--; c.counts[from] == 0 && !isQuestionState(from) {
			delete(c.counts, from)
		}
	}
	if to != "" {
		c.counts[to]++
	}
}

func isQuestionState(s hitlv1.QuestionState) bool {
	for _, known := range questionStates {
		if s == known {
			return true
		}
	}
	return false
}

// OnAdd counts a question the informer stored.
func (c *questionCounts) OnAdd(obj any, _ bool) {
	if s, ok := questionState(obj); ok {
		c.move("", s)
	}
}

// OnUpdate moves a question from its old state's count to its new one's.
func (c *questionCounts) OnUpdate(oldObj, newObj any) {
	before, _ := questionState(oldObj)
	after, _ := questionState(newObj)
	c.move(before, after)
}

// OnDelete uncounts a question the informer removed, tombstones included.
func (c *questionCounts) OnDelete(obj any) {
	if s, ok := questionState(obj); ok {
		c.move(s, "")
	}
}

// snapshot returns the counts by state, every state included, and whether
// the informer has handed over its initial list (until then the counts
// are of part of the cache).
func (c *questionCounts) snapshot() (map[hitlv1.QuestionState]int, bool) {
	out := make(map[hitlv1.QuestionState]int, len(questionStates))
	for _, s := range questionStates {
		out[s] = 0
	}
	c.mu.Lock()
	for s, n := range c.counts {
		out[s] = n // a state this version does not know shows too
	}
	c.mu.Unlock()
	return out, c.synced == nil || c.synced()
}

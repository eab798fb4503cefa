package controllers

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
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
// It keeps the state it last counted for each question, so that each
// event moves one question's count: an add or an update counts the
// question in its new state (out of the one it was counted in, if any), a
// delete, or a tombstone (a DeletedFinalStateUnknown, from a relist that
// found the question gone), uncounts it from the state it was counted in,
// whatever the deleted object says. A resync, a relist's updates, an add of
// a question already counted, a delete of one never counted: none of them
// can count a question twice or make a count negative.
type questionCounts struct {
	mu     sync.Mutex
	states map[types.NamespacedName]hitlv1.QuestionState
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
	return &questionCounts{
		states: map[types.NamespacedName]hitlv1.QuestionState{},
		counts: make(map[hitlv1.QuestionState]int, len(questionStates)),
	}
}

// set counts the question at key in state, or uncounts it when gone.
func (c *questionCounts) set(key types.NamespacedName, state hitlv1.QuestionState, gone bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was, counted := c.states[key]
	switch {
	case gone:
		if !counted {
			return
		}
		delete(c.states, key)
	case counted && was == state:
		return
	default:
		c.states[key] = state
		c.counts[state]++
	}
	if counted {
		if c.counts[was]--; c.counts[was] == 0 && !isQuestionState(was) {
			delete(c.counts, was)
		}
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
	if q, ok := obj.(*hitlv1.UserQuestion); ok {
		c.set(types.NamespacedName{Namespace: q.Namespace, Name: q.Name}, q.State(), false)
	}
}

// OnUpdate counts a question in its new state.
func (c *questionCounts) OnUpdate(_, newObj any) { c.OnAdd(newObj, false) }

// OnDelete uncounts a question the informer removed, tombstones included.
func (c *questionCounts) OnDelete(obj any) {
	switch o := obj.(type) {
	case *hitlv1.UserQuestion:
		c.set(types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, "", true)
	case toolscache.DeletedFinalStateUnknown:
		if q, ok := o.Obj.(*hitlv1.UserQuestion); ok {
			c.OnDelete(q)
		} else if ns, name, err := toolscache.SplitMetaNamespaceKey(o.Key); err == nil {
			c.set(types.NamespacedName{Namespace: ns, Name: name}, "", true)
		}
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

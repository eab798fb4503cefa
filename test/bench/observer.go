// The observer: the agents' watch, which times every workload's
// transitions as agents see them.

package main

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// observer is the agents' view: one watch on every question of the
// namespace, recording when each state was first seen.
type observer struct {
	mu       sync.Mutex
	seen     map[string]map[hitlv1.QuestionState]time.Time
	deadline map[string]time.Time
	writes   map[string]int       // status changes seen per question
	decided  map[string]time.Time // the controller's settlement time (status.settlement.at)
	closed   map[string]time.Time // the controller's time the window closed (status.continuedAt)
	waiters  map[waitKey][]chan time.Time
	onAdd    func(*hitlv1.UserQuestion) // when set, called (without blocking) with every question as it is first seen
}

type waitKey struct {
	name  string
	state hitlv1.QuestionState
}

func newObserver() *observer {
	return &observer{seen: map[string]map[hitlv1.QuestionState]time.Time{}, deadline: map[string]time.Time{},
		writes: map[string]int{}, decided: map[string]time.Time{}, closed: map[string]time.Time{}, waiters: map[waitKey][]chan time.Time{}}
}

// run watches until ctx ends, resuming from the last resourceVersion: the
// questions of namespace ("" for every namespace) that have the labels.
func (o *observer) run(ctx context.Context, c client.WithWatch, namespace string, labels ...string) error {
	selector := client.MatchingLabels{}
	for i := 0; i+1 < len(labels); i += 2 {
		selector[labels[i]] = labels[i+1]
	}
	var list hitlv1.UserQuestionList
	if err := c.List(ctx, &list, client.InNamespace(namespace), selector); err != nil {
		return err
	}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &hitlv1.UserQuestionList{}, client.InNamespace(namespace), selector,
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				q, ok := ev.Object.(*hitlv1.UserQuestion)
				if !ok {
					continue
				}
				rv = q.ResourceVersion
				if ev.Type == watch.Added {
					o.mu.Lock()
					onAdd := o.onAdd
					o.mu.Unlock()
					if onAdd != nil {
						onAdd(q)
					}
				}
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					o.record(q, time.Now())
				}
			}
		}
	}()
	return nil
}

func (o *observer) record(q *hitlv1.UserQuestion, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writes[q.Name]++
	if q.Status.Deadline != nil {
		o.deadline[q.Name] = q.Status.Deadline.Time
	}
	state := q.Status.State
	if state == "" {
		return
	}
	if c := q.Status.ContinuedAt; c != nil {
		if _, ok := o.closed[q.Name]; !ok {
			o.closed[q.Name] = c.Time
		}
	}
	if s := q.Status.Settlement; s != nil {
		if _, ok := o.decided[q.Name]; !ok {
			o.decided[q.Name] = s.At.Time
		}
	}
	states := o.seen[q.Name]
	if states == nil {
		states = map[hitlv1.QuestionState]time.Time{}
		o.seen[q.Name] = states
	}
	if _, ok := states[state]; ok {
		return
	}
	states[state] = at
	k := waitKey{q.Name, state}
	for _, ch := range o.waiters[k] {
		ch <- at
	}
	delete(o.waiters, k)
}

// respond sets (nil: clears) the function called with every question the
// watch sees added; it must not block the watch.
func (o *observer) respond(f func(*hitlv1.UserQuestion)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.onAdd = f
}

// wait returns when the question was first seen in the state.
func (o *observer) wait(ctx context.Context, name string, state hitlv1.QuestionState) (time.Time, error) {
	o.mu.Lock()
	if at, ok := o.seen[name][state]; ok {
		o.mu.Unlock()
		return at, nil
	}
	ch := make(chan time.Time, 1)
	k := waitKey{name, state}
	o.waiters[k] = append(o.waiters[k], ch)
	o.mu.Unlock()
	select {
	case at := <-ch:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

func (o *observer) seenAt(name string, state hitlv1.QuestionState) (time.Time, time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.seen[name][state]
	return at, o.deadline[name], ok
}

// decidedAt is when the controller settled the question, by its clock:
// the time its reconcile took after reading the question, its replies and
// the answer to its access review.
func (o *observer) decidedAt(name string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.decided[name]
	return at, ok
}

// continuedAt is when the controller closed the question's window, by its
// clock (status.continuedAt), and its deadline.
func (o *observer) continuedAt(name string) (at, deadline time.Time, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok = o.closed[name]
	return at, o.deadline[name], ok
}

func (o *observer) writeCount(names []string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, name := range names {
		n += o.writes[name]
	}
	return n
}

package answerer

import (
	"context"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Pauses before listing again after a watch failed; they double while the
// failures repeat, so that an unreachable API server is not hammered.
const (
	minRetryPause = 100 * time.Millisecond
	maxRetryPause = 30 * time.Second
)

// Event is a change to one of the watched questions.
type Event struct {
	// Type is watch.Added, watch.Modified or watch.Deleted.
	Type watch.EventType
	// Question is the question as of the change; for Deleted, the last
	// state known of it.
	Question *hitlv1.UserQuestion
}

// Watch streams the questions of the answerer's agents in its namespace.
// The server selects them by the hitl.dev/agent label. The stream starts
// with every current question as an Added event, then follows the changes.
// When the API server closes the watch, Watch resumes from the last
// version it saw; when that version has expired (410 Gone) or the watch
// failed, it lists again and sends only what changed in between, Deleted
// included. The channel is closed when ctx ends. The error is the initial
// list's (for example, RBAC does not let the user list questions).
func (a *Answerer) Watch(ctx context.Context) (<-chan Event, error) {
	sel, err := a.selector()
	if err != nil {
		return nil, err
	}
	s := &stream{a: a, selector: sel, known: map[string]*hitlv1.UserQuestion{}, out: make(chan Event)}
	list, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	go s.run(ctx, list)
	return s.out, nil
}

// selector selects the answerer's agents, or any agent when it names none.
func (a *Answerer) selector() (labels.Selector, error) {
	op, values := selection.In, a.agents
	if len(values) == 0 {
		op, values = selection.Exists, nil
	}
	req, err := labels.NewRequirement(hitlv1.AgentLabel, op, values)
	if err != nil {
		return nil, fmt.Errorf("selecting the questions of agents %v: %w", a.agents, err)
	}
	return labels.NewSelector().Add(*req), nil
}

// stream is one Watch: what it has sent, and where its watch resumes.
type stream struct {
	a        *Answerer
	selector labels.Selector
	// known holds, by name, the last state sent of each question that exists.
	known map[string]*hitlv1.UserQuestion
	// rv is the resourceVersion the next watch starts from.
	rv  string
	out chan Event
}

// run sends the first list, then follows the watch until ctx ends.
func (s *stream) run(ctx context.Context, list *hitlv1.UserQuestionList) {
	defer close(s.out)
	if !s.replace(ctx, list) {
		return
	}
	pause := minRetryPause
	for ctx.Err() == nil {
		if err := s.follow(ctx); err == nil {
			pause = minRetryPause
			continue
		}
		// What the failed or expired watch missed is unknown: start again
		// from a fresh list.
		if !s.relist(ctx, &pause) {
			return
		}
	}
}

// relist lists again, retrying after growing pauses until it succeeds, and
// sends what changed. It reports false when ctx ended first.
func (s *stream) relist(ctx context.Context, pause *time.Duration) bool {
	for {
		if !sleep(ctx, s.a.Clock, *pause) {
			return false
		}
		*pause = min(2*(*pause), maxRetryPause)
		if list, err := s.list(ctx); err == nil {
			return s.replace(ctx, list)
		}
	}
}

func (s *stream) list(ctx context.Context) (*hitlv1.UserQuestionList, error) {
	list := &hitlv1.UserQuestionList{}
	if err := s.a.client.List(ctx, list, s.options(nil)...); err != nil {
		return nil, apiError(err, "listing the questions of agents %v", s.a.agents)
	}
	return list, nil
}

// follow watches from s.rv and sends each change until the watch ends. It
// returns nil when the API server closed the watch (resume from s.rv), and
// an error when the watch could not start, expired or failed.
func (s *stream) follow(ctx context.Context) error {
	w, err := s.a.client.Watch(ctx, &hitlv1.UserQuestionList{},
		s.options(&metav1.ListOptions{ResourceVersion: s.rv, AllowWatchBookmarks: true})...)
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		q, ok := ev.Object.(*hitlv1.UserQuestion)
		if !ok {
			continue
		}
		s.rv = q.ResourceVersion
		if ev.Type == watch.Bookmark {
			continue // it only moves the resourceVersion on
		}
		if !s.send(ctx, ev.Type, q) {
			return ctx.Err()
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// replace sends what a fresh list changes against what was sent before:
// Added for a new question, Modified for a changed one, Deleted for one
// that is gone, and Deleted then Added for one recreated under its name.
func (s *stream) replace(ctx context.Context, list *hitlv1.UserQuestionList) bool {
	listed := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		q := &list.Items[i]
		listed[q.Name] = true
		old, known := s.known[q.Name]
		switch {
		case known && old.UID != q.UID:
			if !s.send(ctx, watch.Deleted, old) || !s.send(ctx, watch.Added, q) {
				return false
			}
		case known && old.ResourceVersion != q.ResourceVersion:
			if !s.send(ctx, watch.Modified, q) {
				return false
			}
		case !known:
			if !s.send(ctx, watch.Added, q) {
				return false
			}
		}
	}
	for _, name := range s.gone(listed) {
		if !s.send(ctx, watch.Deleted, s.known[name]) {
			return false
		}
	}
	s.rv = list.ResourceVersion
	return true
}

// gone returns, in name order, the known questions a list no longer holds.
func (s *stream) gone(listed map[string]bool) []string {
	var names []string
	for name := range s.known {
		if !listed[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// send records and delivers one event; it reports false when ctx ended
// before the receiver took it.
func (s *stream) send(ctx context.Context, typ watch.EventType, q *hitlv1.UserQuestion) bool {
	if typ == watch.Deleted {
		delete(s.known, q.Name)
	} else {
		s.known[q.Name] = q
	}
	// The receiver owns what it gets; the stream keeps its own copy.
	select {
	case s.out <- Event{Type: typ, Question: q.DeepCopy()}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *stream) options(raw *metav1.ListOptions) []client.ListOption {
	opts := []client.ListOption{client.InNamespace(s.a.namespace), client.MatchingLabelsSelector{Selector: s.selector}}
	if raw != nil {
		opts = append(opts, &client.ListOptions{Raw: raw})
	}
	return opts
}

// sleep waits for d on c; it reports false when ctx ended first.
func sleep(ctx context.Context, c clock.Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

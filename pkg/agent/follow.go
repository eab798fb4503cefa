package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// Reconnection backoff: a watch that cannot be re-established, or that the
// server ends at once, is retried after a growing pause, so that an
// unavailable API server is not hammered.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
	// healthyWatch is how long a watch must last, when it delivered
	// nothing, for its end to count as an ordinary server timeout.
	healthyWatch = time.Second
)

// selector scopes reads to the agent's own questions, on the server: its
// namespace and its hitl.dev/agent label, and one name when name is set.
func (a *Agent) selector(name string) *client.ListOptions {
	o := &client.ListOptions{
		Namespace:     a.namespace,
		LabelSelector: labels.SelectorFromSet(labels.Set{hitlv1.AgentLabel: a.name}),
	}
	if name != "" {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name)
	}
	return o
}

// follower lists the questions a selector picks and then watches them. A
// watch that ends is resumed from the last resourceVersion seen; when that
// version has expired (or the watch reports any error) it lists again, so
// handlers see a question again and must be idempotent.
type follower struct {
	a *Agent
	// name selects one question; empty, all the agent's questions.
	name string
	// synced gets every list after the first one (which the caller makes
	// with list and handles itself).
	synced func(items []hitlv1.UserQuestion) (done bool, err error)
	// changed gets every added, modified or deleted question.
	changed func(ev watch.EventType, q *hitlv1.UserQuestion) (done bool, err error)

	// backoff is the next pause before watching again; it is reset
	// whenever a watch delivers, so that a rare expiry is handled at once.
	backoff time.Duration
}

// list reads the selected questions.
func (f *follower) list(ctx context.Context) (*hitlv1.UserQuestionList, error) {
	return f.a.list(ctx, f.name)
}

// list reads the agent's questions, or the one named, with a consistent
// read (no resourceVersion: the API server reads from etcd).
func (a *Agent) list(ctx context.Context, name string) (*hitlv1.UserQuestionList, error) {
	var l hitlv1.UserQuestionList
	if err := a.c.List(ctx, &l, a.selector(name)); err != nil {
		return nil, apiError(err, "listing the questions of agent %s in %s", a.name, a.namespace)
	}
	return &l, nil
}

// watchEnd is how one watch ended, and so what follow does next.
type watchEnd int

const (
	// endDone: a handler is done or failed, or ctx ended.
	endDone watchEnd = iota
	// endResume: the server ended a healthy watch (its request timeout);
	// resume at once from the last resourceVersion.
	endResume
	// endRetry: the watch could not start or ended at once; resume from
	// the last resourceVersion after a pause.
	endRetry
	// endRelist: the resourceVersion expired or the watch reported an
	// error; list again.
	endRelist
)

// follow watches from resourceVersion rv until a handler is done or fails,
// ctx ends, or the API server refuses the agent for good.
func (f *follower) follow(ctx context.Context, rv string) error {
	f.backoff = minBackoff
	needList := false
	for {
		if needList {
			next, done, err := f.relist(ctx)
			if done || (err != nil && !transient(err)) {
				return err
			}
			if err == nil {
				rv, needList = next, false
			} else {
				ctrl.LoggerFrom(ctx).V(1).Info("Listing questions failed; retrying", "error", err)
			}
		}
		if !needList {
			end, next, err := f.watchOnce(ctx, rv)
			rv = next
			switch end {
			case endDone:
				return err
			case endResume:
				continue
			case endRelist:
				needList = true
			}
		}
		if err := pause(ctx, f.backoff); err != nil {
			return err
		}
		f.backoff = min(2*f.backoff, maxBackoff)
	}
}

// relist lists again and hands the list to synced; it returns the list's
// resourceVersion.
func (f *follower) relist(ctx context.Context) (rv string, done bool, err error) {
	l, err := f.list(ctx)
	if err != nil {
		return "", false, err
	}
	done, err = f.synced(l.Items)
	return l.ResourceVersion, done || err != nil, err
}

// watchOnce runs one watch from rv to its end, and returns how it ended and
// the last resourceVersion it saw.
func (f *follower) watchOnce(ctx context.Context, rv string) (watchEnd, string, error) {
	o := f.a.selector(f.name)
	o.Raw = &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}
	w, err := f.a.c.Watch(ctx, &hitlv1.UserQuestionList{}, o)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return endDone, rv, ctx.Err()
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return endRelist, rv, nil
	case transient(err):
		ctrl.LoggerFrom(ctx).V(1).Info("Watching questions failed; retrying", "error", err)
		return endRetry, rv, nil
	default:
		return endDone, rv, apiError(err, "watching the questions of agent %s in %s", f.a.name, f.a.namespace)
	}
	defer w.Stop()
	start, delivered := time.Now(), false
	for {
		select {
		case <-ctx.Done():
			return endDone, rv, ctx.Err()
		case ev, open := <-w.ResultChan():
			if !open {
				if delivered || time.Since(start) >= healthyWatch {
					return endResume, rv, nil
				}
				return endRetry, rv, nil
			}
			delivered = true
			end, next, err := f.handle(ctx, ev, rv)
			if end != endResume {
				return end, next, err
			}
			rv = next
		}
	}
}

// handle hands one watch event to changed. It returns endResume to go on
// watching from the returned resourceVersion.
func (f *follower) handle(ctx context.Context, ev watch.Event, rv string) (watchEnd, string, error) {
	switch ev.Type {
	case watch.Error:
		ctrl.LoggerFrom(ctx).V(1).Info("Watching questions ended with an error; listing again", "error", apierrors.FromObject(ev.Object))
		return endRelist, rv, nil
	case watch.Bookmark:
		if m, err := meta.Accessor(ev.Object); err == nil {
			rv = m.GetResourceVersion()
		}
		f.backoff = minBackoff
		return endResume, rv, nil
	}
	q, ok := ev.Object.(*hitlv1.UserQuestion)
	if !ok {
		return endRelist, rv, nil
	}
	f.backoff = minBackoff
	if done, err := f.changed(ev.Type, q); done || err != nil {
		return endDone, q.ResourceVersion, err
	}
	return endResume, q.ResourceVersion, nil
}

// transient reports whether a failed read is worth retrying: the API server
// was unreachable, overloaded or failing, rather than refusing the agent.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}

// pause waits d, or returns ctx.Err() when ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting to watch again: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

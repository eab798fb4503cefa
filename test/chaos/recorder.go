package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// version is one version of an object as the recorder's watch saw it.
type version[T any] struct {
	At      time.Time `json:"at"`
	Deleted bool      `json:"deleted,omitempty"`
	Object  T         `json:"object"`
}

// recorder keeps every version of every question, reply and claim in the
// workload's namespace, and of the leader-election Lease, from watches
// that resume from the last version seen (and list again when that
// version is too old), through API server restarts.
type recorder struct {
	mu        sync.Mutex
	questions map[string][]version[*hitlv1.UserQuestion]
	replies   map[string][]version[*hitlv1.QuestionReply]
	claims    map[string][]version[*hitlv1.QuestionClaim]
	wg        sync.WaitGroup
	// Relists counts the lists after a watch could not resume.
	Relists int
}

func newRecorder() *recorder {
	return &recorder{
		questions: map[string][]version[*hitlv1.UserQuestion]{},
		replies:   map[string][]version[*hitlv1.QuestionReply]{},
		claims:    map[string][]version[*hitlv1.QuestionClaim]{},
	}
}

func (r *recorder) start(ctx context.Context, c client.WithWatch, namespace string) {
	kinds := []struct {
		list   client.ObjectList
		record func(o client.Object, at time.Time, deleted bool)
	}{
		{&hitlv1.UserQuestionList{}, func(o client.Object, at time.Time, deleted bool) {
			r.questions[o.GetName()] = appendVersion(r.questions[o.GetName()], o.(*hitlv1.UserQuestion), at, deleted)
		}},
		{&hitlv1.QuestionReplyList{}, func(o client.Object, at time.Time, deleted bool) {
			r.replies[o.GetName()] = appendVersion(r.replies[o.GetName()], o.(*hitlv1.QuestionReply), at, deleted)
		}},
		{&hitlv1.QuestionClaimList{}, func(o client.Object, at time.Time, deleted bool) {
			r.claims[o.GetName()] = appendVersion(r.claims[o.GetName()], o.(*hitlv1.QuestionClaim), at, deleted)
		}},
	}
	for _, k := range kinds {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			follow(ctx, r, c, namespace, k.list, k.record)
		}()
	}
}

// appendVersion adds a version unless it is the last one again (a relist
// repeats what was seen).
func appendVersion[T client.Object](vs []version[T], o T, at time.Time, deleted bool) []version[T] {
	if n := len(vs); n > 0 && vs[n-1].Object.GetResourceVersion() == o.GetResourceVersion() && vs[n-1].Deleted == deleted {
		return vs
	}
	return append(vs, version[T]{At: at, Deleted: deleted, Object: o})
}

func (r *recorder) wait() { r.wg.Wait() }

// follow lists and watches one kind until ctx ends.
func follow(ctx context.Context, r *recorder, c client.WithWatch, namespace string, list client.ObjectList,
	record func(client.Object, time.Time, bool)) {
	rv := ""
	seen := map[string]bool{}
	for ctx.Err() == nil {
		if rv == "" {
			l := list.DeepCopyObject().(client.ObjectList)
			if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			items, err := meta.ExtractList(l)
			if err != nil {
				return
			}
			now := time.Now()
			listed := map[string]bool{}
			r.mu.Lock()
			for _, item := range items {
				o := item.(client.Object)
				listed[o.GetName()] = true
				seen[o.GetName()] = true
				record(o, now, false)
			}
			r.Relists++
			r.mu.Unlock()
			// What was seen and is gone was deleted while not watched.
			for name := range seen {
				if !listed[name] {
					delete(seen, name)
				}
			}
			rv = l.GetResourceVersion()
		}
		w, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(namespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				rv = ""
			}
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == 410 || st.Reason == metav1.StatusReasonExpired || st.Reason == metav1.StatusReasonGone) {
					rv = ""
				}
				break
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type == watch.Bookmark {
				continue
			}
			r.mu.Lock()
			seen[o.GetName()] = ev.Type != watch.Deleted
			record(o, now, ev.Type == watch.Deleted)
			r.mu.Unlock()
		}
		w.Stop()
	}
}

// quiesce waits until every reply has an outcome and no question is left
// with a settled reply unapplied, as far as a fresh list shows, or until
// timeout: what is left is then reported by the checks.
func (r *recorder) quiesce(ctx context.Context, c client.Client, namespace string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var replies hitlv1.QuestionReplyList
		if err := c.List(ctx, &replies, client.InNamespace(namespace)); err == nil {
			pending := 0
			for _, rp := range replies.Items {
				if rp.Status.Outcome == "" {
					pending++
				}
			}
			if pending == 0 {
				// Let the watches deliver the last versions.
				sleep(ctx, 2*time.Second)
				return
			}
			fmt.Fprintf(os.Stderr, "chaos: %d replies without an outcome yet\n", pending)
		}
		sleep(ctx, time.Second)
	}
}

// Package userquestion holds hitl's question lifecycle controller: it moves
// each UserQuestion through Open, Continued, Settled and Cancelled, and gives
// each QuestionReply its outcome. Decide (decide.go) is the pure rule;
// Reconcile gathers its inputs and writes its decision.
package userquestion

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/controllers/claimreads"
	"github.com/hitl-dev/hitl/controllers/closer"
	"github.com/hitl-dev/hitl/controllers/provenance"
)

// Cache indexes.
const (
	// ReplyQuestionIndex indexes replies by spec.questionRef.name.
	ReplyQuestionIndex = "spec.questionRef.name"
	// claimQuestionIndex indexes claims by spec.questionRef.name.
	claimQuestionIndex = "claim.question"
)

// scheduledPriority is the work queue priority of scheduled looks
// (deadlines, claim expiries, TTLs); events enqueue with priority 0.
const scheduledPriority = 10

// conflictRetry is how soon a question whose write lost a race is looked at
// again; the newer version is usually in the cache by then.
const conflictRetry = 20 * time.Millisecond

// countedOutcomeDelay is how soon a question whose new votes decided
// nothing is looked at again to write their replies' Counted outcome: late
// enough to leave the question to the votes sent with them.
const countedOutcomeDelay = 100 * time.Millisecond

// eventWait is how soon an expired question whose events are still queued
// is looked at again.
const eventWait = 100 * time.Millisecond

// Reconciler owns the life of UserQuestions.
type Reconciler struct {
	client.Client
	// APIReader reads around the cache, to confirm that a question is
	// really missing before its replies are rejected.
	APIReader client.Reader
	// Clock is the time source for deadlines, claims and settlements.
	Clock clock.Clock
	// Recorder records the events users see.
	Recorder EventRecorder
	// ClaimReads reads the claims from the API server before a window
	// closes; SetupWithManager sets claimreads.New(APIReader, Clock) when
	// nil.
	ClaimReads ClaimReader
	// ClaimFenceNamespace, when set, is where the claims reads write their
	// fence (claimreads.Fence), the manager's own namespace; empty reads
	// the claims from the API server.
	ClaimFenceNamespace string
	// Closer closes windows off the workers; SetupWithManager sets
	// closer.New(Clock, workers) when nil. Without one, windows close on
	// the worker.
	Closer WindowCloser
	// VoteGather is how long a vote that decides nothing waits, on a
	// governed question, for the votes sent with it before it is written
	// (see gatherer); zero writes each vote at once.
	VoteGather time.Duration
	// OpenGather is how long a new question waits for a reply before its
	// Open status is written (see gatherer.holdOpen); zero writes it at
	// once.
	OpenGather time.Duration

	claims *claimTracker
	// gather holds back the votes that decide nothing.
	gather *gatherer
	// provenance reads the GitOps engines' objects behind new replies.
	provenance provenance.Reader
	// grants remembers recent "allowed" answers of the authorizer.
	grants *grantCache
	// own stands in for the cache until it has the controller's writes.
	own *ownWrites
	// statusWrites counts the status writes in flight.
	statusWrites atomic.Int32
}

// StatusWritesInFlight is how many question status writes are under way.
func (r *Reconciler) StatusWritesInFlight() int { return int(r.statusWrites.Load()) }

// +kubebuilder:rbac:groups=hitl.dev,resources=userquestions,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=hitl.dev,resources=userquestions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hitl.dev,resources=questionreplies,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=hitl.dev,resources=questionreplies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hitl.dev,resources=questionclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=hitl.dev,resources=approvalpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=kustomize.toolkit.fluxcd.io,resources=kustomizations,verbs=get
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get
// +kubebuilder:rbac:groups=hitl.dev,resources=agents,verbs=manage
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the indexes and the controller, reconciling up
// to workers questions at once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	ctx := context.Background()
	if err := indexRepliesByQuestion(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &hitlv1.QuestionClaim{}, claimQuestionIndex,
		func(o client.Object) []string { return []string{o.(*hitlv1.QuestionClaim).Spec.QuestionRef.Name} }); err != nil {
		return fmt.Errorf("indexing claims by question: %w", err)
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.claims = newClaimTracker()
	if r.ClaimReads == nil {
		reads := claimreads.New(r.APIReader, r.Clock)
		if r.ClaimFenceNamespace != "" {
			informer, err := mgr.GetCache().GetInformer(ctx, &hitlv1.QuestionClaim{})
			if err != nil {
				return fmt.Errorf("the claims informer: %w", err)
			}
			fence, err := claimreads.NewFence(mgr.GetClient(), mgr.GetCache(), informer, r.ClaimFenceNamespace)
			if err != nil {
				return err
			}
			reads.UseFence(fence)
		}
		r.ClaimReads = reads
	}
	r.grants = newGrantCache()
	r.own = newOwnWrites()
	r.gather = newGatherer()
	r.provenance = provenance.NewReader(r.APIReader)
	if r.Closer == nil {
		r.Closer = closer.New(r.Clock, workers)
	}
	questions, err := countQuestions(ctx, mgr.GetCache())
	if err != nil {
		return err
	}
	registerMetrics(&collectorSource{questions: questions, claims: r.claims, clock: r.Clock})

	return ctrl.NewControllerManagedBy(mgr).
		Named("userquestion").
		// Every change, the controller's own status writes included: a
		// decision made on a cache that had not yet seen the previous write
		// is looked at again when it has, so nothing stays stale.
		Watches(&hitlv1.UserQuestion{}, overdueFirst(r.Clock)).
		// A reply's spec is immutable: its arrival and its deletion matter.
		Watches(&hitlv1.QuestionReply{}, handler.EnqueueRequestsFromMapFunc(replyQuestion),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		// Every renewal of a claim is observed, to judge its liveness.
		Watches(&hitlv1.QuestionClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimQuestion)).
		// Hands the closer the queue that closes return their questions to.
		WatchesRawSource(r.Closer.Source()).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, RateLimiter: retryLimiter()}).
		Complete(r)
}

// overdueFirst enqueues a question on its own events, as For would, but
// ahead of other work when it is Open past its deadline: after a restart,
// the deadlines that passed while the controller was down are written
// before the thousands of unchanged questions the initial list brings.
// A timed question's deadline is also set then, when the question is first
// seen, rather than only once it has been looked at (and written Open):
// while the API server is slow and new questions pile up in the queue, a
// window that falls due before its question's first look goes ahead of
// them at its deadline instead of waiting its turn.
func overdueFirst(clk clock.Clock) handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
		pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
		if uq, isQuestion := o.(*hitlv1.UserQuestion); ok && isQuestion && overdue(uq, clk.Now()) {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(scheduledPriority)}, req)
			return
		}
		q.Add(req)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
			atDeadline(clk, q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
	}
}

// atDeadline puts an Open timed question in the queue again at its
// deadline, ahead of other work. (Adding it now with a delay would not do:
// the queue merges the two adds of a question into one, at once and ahead.)
func atDeadline(clk clock.Clock, q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	uq, ok := o.(*hitlv1.UserQuestion)
	if !ok || uq.State() != hitlv1.StateOpen || uq.DeletionTimestamp != nil {
		return
	}
	deadline, timed := uq.Deadline()
	wait := deadline.Sub(clk.Now())
	if !timed || wait <= 0 {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(uq)}
	pq, isPriority := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !isPriority {
		q.AddAfter(req, wait)
		return
	}
	ahead := func() { pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(scheduledPriority)}, req) }
	if d, ok := clk.(clock.WithDelayedExecution); ok {
		d.AfterFunc(wait, ahead)
		return
	}
	time.AfterFunc(wait, ahead)
}

// overdue reports whether q is still Open with its deadline passed.
func overdue(q *hitlv1.UserQuestion, now time.Time) bool {
	return q.State() == hitlv1.StateOpen && q.DeletionTimestamp == nil && q.Status.Deadline != nil && !now.Before(q.Status.Deadline.Time)
}

func replyQuestion(_ context.Context, o client.Object) []reconcile.Request {
	r := o.(*hitlv1.QuestionReply)
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Spec.QuestionRef.Name}}}
}

func (r *Reconciler) claimQuestion(_ context.Context, o client.Object) []reconcile.Request {
	c := o.(*hitlv1.QuestionClaim)
	if c.Namespace == r.ClaimFenceNamespace && claimreads.IsFence(c) {
		return nil // the manager's own, which claims nothing
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Spec.QuestionRef.Name}}}
}

// Reconcile reads a question, its replies and its claims, decides the next
// status, and writes it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	q := &hitlv1.UserQuestion{}
	if err := r.Get(ctx, req.NamespacedName, q); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading question: %w", err)
		}
		r.claims.forget(req.NamespacedName)
		r.gather.forget(req.NamespacedName)
		return ctrl.Result{}, r.rejectOrphans(ctx, req.NamespacedName)
	}
	if q.DeletionTimestamp != nil {
		r.claims.forget(req.NamespacedName)
		r.gather.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if r.Closer != nil && r.Closer.Owns(req.NamespacedName) {
		// Its window is being closed; the close looks at it again when done.
		return ctrl.Result{}, nil
	}
	q = latest(r.own, q, r.Clock.Now())

	replies, err := r.repliesOf(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	var claimList hitlv1.QuestionClaimList
	if err := r.List(ctx, &claimList, client.InNamespace(q.Namespace), client.MatchingFields{claimQuestionIndex: q.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing claims: %w", err)
	}
	refused, sources, err := r.judgeAuthors(ctx, q, replies)
	if err != nil {
		return ctrl.Result{}, err
	}
	var policies []hitlv1.ApprovalPolicy
	if q.Status.State == "" && q.Status.Approval == nil {
		if policies, err = r.policiesOf(ctx, q); err != nil {
			return ctrl.Result{}, err
		}
	}
	now := r.Clock.Now()
	claims, heldUntil := r.claims.observe(q, claimList.Items, now)

	in := Inputs{Question: q, Replies: replies, Claims: claims, HeldUntil: heldUntil, Now: now, Refused: refused, Policies: policies, Sources: sources}
	d := Decide(in)
	// Gathering is measured in real time, as the requeue that ends it is:
	// a test's fake clock may stand still.
	if wait := r.gather.hold(req.NamespacedName, q, &d, time.Now(), r.VoteGather); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if wait := r.gather.holdOpen(req.NamespacedName, q, &d, time.Now(), r.OpenGather); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	finish := func(ctx context.Context) (ctrl.Result, error) { return r.finish(ctx, in, d, claimList.Items) }
	if d.Transition == hitlv1.StateContinued && r.Closer != nil {
		// The window closes: the rest waits on the API server, off the
		// worker.
		if started, err := r.Closer.Start(ctx, req.NamespacedName, finish); started || err != nil {
			return ctrl.Result{}, err
		}
	}
	return finish(ctx)
}

// finish carries out a decision: it confirms a close against the claims
// the API server holds, deletes an expired question, or writes the
// question's status and its replies' outcomes, and says when the question
// needs another look.
func (r *Reconciler) finish(ctx context.Context, in Inputs, d Decision, claims []hitlv1.QuestionClaim) (ctrl.Result, error) {
	q, replies := in.Question, in.Replies
	if d.Transition == hitlv1.StateContinued {
		var err error
		if d, err = r.confirmClose(ctx, in, d); err != nil {
			return ctrl.Result{}, err
		}
	}
	if d.Expired {
		if r.Recorder.Pending(q.UID) {
			// Its last events are still being written: they go first.
			return ctrl.Result{RequeueAfter: eventWait}, nil
		}
		return ctrl.Result{}, r.expire(ctx, q, replies, claims)
	}
	deferred, err := r.apply(ctx, q, replies, d, in.Now)
	if err != nil {
		if apierrors.IsConflict(err) {
			statusConflicts.Inc()
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	if deferred {
		return ctrl.Result{RequeueAfter: countedOutcomeDelay}, nil
	}
	if err := r.adopt(ctx, q, replies); err != nil {
		return ctrl.Result{}, err
	}
	if d.RequeueAfter == 0 {
		return ctrl.Result{}, nil
	}
	// A due deadline goes ahead of the work that events bring (new
	// questions, replies, renewals), so that it is written on time.
	return ctrl.Result{RequeueAfter: d.RequeueAfter, Priority: ptr.To(scheduledPriority)}, nil
}

// confirmClose checks a window that the cache says has closed against the
// claims the API server holds: the cache may have missed a claim or its
// renewal (its watch broken by an API server restart, or behind). The
// window closes at the time of a read of the claims sent once it was due
// to close (its deadline, the expiry of the claims the cache knows, the
// end of those it saw go) and at most two seconds before, which the other
// windows due by then share; a claim or renewal found there
// counts as observed when the read returned. When that read shows a claim
// holding the window, a read sent now decides.
func (r *Reconciler) confirmClose(ctx context.Context, in Inputs, d Decision) (Decision, error) {
	q := in.Question
	due := d.Status.Deadline.Time
	if in.HeldUntil.After(due) {
		due = in.HeldUntil
	}
	for _, c := range in.Claims {
		if c.ExpiresAt.After(due) {
			due = c.ExpiresAt
		}
	}
	now := in.Now
	for _, since := range []time.Time{due, now} {
		read, err := r.ClaimReads.Since(ctx, since)
		if err != nil {
			return Decision{}, err
		}
		in.Claims, in.HeldUntil = r.claims.observe(q, read.Of(client.ObjectKeyFromObject(q)), r.Clock.Now())
		in.Now = read.At()
		if d = Decide(in); d.Transition == hitlv1.StateContinued || !read.At().Before(now) {
			break
		}
	}
	return d, nil
}

// judgeAuthors checks the new replies' authors (refusals) and reads where
// those a GitOps engine applied came from (sourcesOf). Both wait on the API
// server, so the engines' objects are read while the grants are checked.
func (r *Reconciler) judgeAuthors(ctx context.Context, q *hitlv1.UserQuestion, replies []hitlv1.QuestionReply) (map[string]Refusal, map[string]*hitlv1.ReplySource, error) {
	marked := false
	for i := range replies {
		marked = marked || needsSource(&replies[i])
	}
	if !marked {
		refused, err := r.refusals(ctx, q, replies)
		return refused, nil, err
	}
	var (
		sources    map[string]*hitlv1.ReplySource
		sourcesErr error
		read       = make(chan struct{})
	)
	go func() {
		defer close(read)
		sources, sourcesErr = r.sourcesOf(ctx, replies)
	}()
	refused, err := r.refusals(ctx, q, replies)
	<-read
	if err != nil {
		return nil, nil, err
	}
	return refused, sources, sourcesErr
}

// needsSource reports whether reply is new and carries a GitOps engine's
// mark: its source is read when it is judged.
func needsSource(reply *hitlv1.QuestionReply) bool {
	return reply.Status.Outcome == "" && reply.DeletionTimestamp == nil && provenance.EngineOf(reply) != nil
}

// sourcesOf reads where the new replies that carry a GitOps engine's mark
// came from, by name. A reply judged already keeps the source written
// with its outcome, and is not read again.
func (r *Reconciler) sourcesOf(ctx context.Context, replies []hitlv1.QuestionReply) (map[string]*hitlv1.ReplySource, error) {
	var out map[string]*hitlv1.ReplySource
	for i := range replies {
		reply := &replies[i]
		if !needsSource(reply) {
			continue
		}
		src, err := r.provenance.Of(ctx, reply)
		if err != nil {
			return nil, fmt.Errorf("reading where reply %s came from: %w", reply.Name, err)
		}
		if src != nil {
			if out == nil {
				out = map[string]*hitlv1.ReplySource{}
			}
			out[reply.Name] = src
		}
	}
	return out, nil
}

// repliesOf lists the replies naming a question, in creation order, but
// those final and adopted, which decide nothing more (see
// indexRepliesByQuestion).
func (r *Reconciler) repliesOf(ctx context.Context, question types.NamespacedName) ([]hitlv1.QuestionReply, error) {
	var list hitlv1.QuestionReplyList
	if err := r.List(ctx, &list, client.InNamespace(question.Namespace), client.MatchingFields{ReplyQuestionIndex: question.Name}); err != nil {
		return nil, fmt.Errorf("listing replies: %w", err)
	}
	now := r.Clock.Now()
	for i := range list.Items {
		list.Items[i] = *latest(r.own, &list.Items[i], now)
	}
	hitlv1.SortReplyOrder(list.Items)
	return list.Items, nil
}

// apply writes a decision: first the question's status, guarded by the
// resourceVersion it was decided on, then the replies' outcomes, which
// follow from it. When only replies change, the unchanged status is still
// written, as a fence: a stale read then fails instead of rejecting a reply
// with the wrong reason. Refusals, which no status decides, need none.
//
// The outcomes of votes that decided nothing are deferred (deferred is
// true): the question's status records them, and the next look, soon,
// writes their Counted. Written now, they would keep the question from
// the next vote, which may be the one that decides.
func (r *Reconciler) apply(ctx context.Context, q *hitlv1.UserQuestion, replies []hitlv1.QuestionReply, d Decision, now time.Time) (deferred bool, err error) {
	if fenced(d.Replies) || !equality.Semantic.DeepEqual(q.Status, d.Status) {
		next := q.DeepCopy()
		next.Status = d.Status
		r.statusWrites.Add(1)
		err := r.Status().Update(ctx, next)
		r.statusWrites.Add(-1)
		// Events held back while status writes were busy may go now.
		r.Recorder.Wake()
		if err != nil {
			return false, fmt.Errorf("writing the question's status: %w", err)
		}
		r.own.record(q.ResourceVersion, next, now)
		r.recordVotes(q, &q.Status, &next.Status)
		if onlyCounts(q, &d) {
			return true, nil
		}
	}
	if d.Transition != "" {
		r.recordTransition(q, &d.Status, now)
	}
	if len(d.Replies) == 0 {
		return false, nil
	}
	byName := make(map[string]*hitlv1.QuestionReply, len(replies))
	for i := range replies {
		byName[replies[i].Name] = &replies[i]
	}
	for _, c := range d.Replies {
		if err := r.writeOutcome(ctx, q, byName[c.Name], c, now); err != nil {
			return false, err
		}
	}
	return false, nil
}

// fenced reports whether some of the changes follow from the question's
// status.
func fenced(changes []ReplyChange) bool {
	for _, c := range changes {
		if !c.Alone {
			return true
		}
	}
	return false
}

func (r *Reconciler) recordTransition(q *hitlv1.UserQuestion, st *hitlv1.UserQuestionStatus, now time.Time) {
	transitionsTotal.WithLabelValues(string(st.State)).Inc()
	switch st.State {
	case hitlv1.StateContinued:
		// Measured when the write returned: a close may wait for a slot
		// and for the API server after it was decided.
		lateness := r.Clock.Now().Sub(st.Deadline.Time)
		continuedLateness.Observe(lateness.Seconds())
		r.Recorder.Eventf(q, nil, corev1.EventTypeNormal, string(hitlv1.StateContinued), "Continue",
			"The window closed unanswered %s after its deadline; the question stays answerable", lateness.Round(time.Millisecond))
	case hitlv1.StateSettled:
		s := st.Settlement
		settleSeconds.WithLabelValues(strconv.FormatBool(s.Late)).Observe(now.Sub(q.CreationTimestamp.Time).Seconds())
		when := "inside its window"
		if s.Late {
			when = "late, admitted by the agent"
		}
		r.Recorder.Eventf(q, nil, corev1.EventTypeNormal, string(hitlv1.StateSettled), "Settle",
			"Settled by reply %s from %s, %s", s.Reply, username(s.AnsweredBy), when)
		if st.Approval != nil {
			if st.Approval.Count(st.Votes).Approved {
				quorumsTotal.Inc()
			} else {
				vetoesTotal.Inc()
			}
		}
	case hitlv1.StateCancelled:
		r.Recorder.Eventf(q, nil, corev1.EventTypeNormal, string(hitlv1.StateCancelled), "Cancel", "The agent cancelled the ask")
	}
}

// writeOutcome patches a reply's status with its new outcome.
func (r *Reconciler) writeOutcome(ctx context.Context, q *hitlv1.UserQuestion, reply *hitlv1.QuestionReply, c ReplyChange, now time.Time) error {
	next := reply.DeepCopy()
	next.Status.Outcome, next.Status.Reason, next.Status.Message = c.Outcome, c.Reason, c.Message
	if c.Source != nil {
		next.Status.Source = c.Source
	}
	setReplyConditions(&next.Status, reply.Generation, now)
	// Guarded by the version the decision read: a deposed leader that
	// wakes from a hang with this write in hand, or a decision made on a
	// copy of the reply older than another's outcome, fails with a
	// conflict instead of overwriting a newer outcome. A whole status is
	// written, not a patch: the API server takes a status update for less
	// than a patch, which it must first apply to the stored object, and
	// keeps the stored metadata and spec either way.
	if err := r.Status().Update(ctx, next); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the outcome of reply %s: %w", reply.Name, err)
	}
	r.own.record(reply.ResourceVersion, next, now)
	repliesTotal.WithLabelValues(string(c.Outcome), string(c.Reason)).Inc()
	if c.Outcome == hitlv1.OutcomeRejected || c.Outcome == hitlv1.OutcomeClosed {
		var related runtime.Object
		if q != nil {
			related = q
		}
		// A closed reply did nothing wrong: it came too late, or for a
		// question that is gone.
		kind, action := corev1.EventTypeWarning, "Reject"
		if c.Outcome == hitlv1.OutcomeClosed {
			kind, action = corev1.EventTypeNormal, "Close"
		}
		r.Recorder.Eventf(reply, related, kind, string(c.Reason), action, "%s", c.Message)
	}
	return nil
}

// rejectOrphans rejects the unprocessed replies of a question that does not
// exist, once the API server confirms it is missing (the cache may lag).
func (r *Reconciler) rejectOrphans(ctx context.Context, question types.NamespacedName) error {
	replies, err := r.repliesOf(ctx, question)
	if err != nil {
		return err
	}
	var pending []*hitlv1.QuestionReply
	for i := range replies {
		if replies[i].Status.Outcome == "" && replies[i].DeletionTimestamp == nil {
			pending = append(pending, &replies[i])
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if err := r.APIReader.Get(ctx, question, &hitlv1.UserQuestion{}); !apierrors.IsNotFound(err) {
		// It exists (the cache will catch up and bring it here), or the
		// read failed and is retried.
		return err
	}
	now := r.Clock.Now()
	for _, reply := range pending {
		c := ReplyChange{Name: reply.Name, Outcome: hitlv1.OutcomeClosed, Reason: hitlv1.CodeNotAnswerable,
			Message: fmt.Sprintf("%s: question %s (spec.questionRef.name) does not exist", hitlv1.CodeNotAnswerable, question.Name)}
		if err := r.writeOutcome(ctx, nil, reply, c, now); err != nil {
			return err
		}
	}
	return nil
}

// expire deletes a question whose TTL after finishing has passed, with its
// replies and claims (also where no garbage collector runs).
func (r *Reconciler) expire(ctx context.Context, q *hitlv1.UserQuestion, replies []hitlv1.QuestionReply, claims []hitlv1.QuestionClaim) error {
	adopted, err := r.adoptedReplies(ctx, q)
	if err != nil {
		return err
	}
	for _, reply := range append(replies, adopted...) {
		if err := client.IgnoreNotFound(r.Delete(ctx, &reply, client.Preconditions{UID: &reply.UID})); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting reply %s of an expired question: %w", reply.Name, err)
		}
	}
	for i := range claims {
		if err := client.IgnoreNotFound(r.Delete(ctx, &claims[i])); err != nil {
			return fmt.Errorf("deleting claim %s of an expired question: %w", claims[i].Name, err)
		}
	}
	policy := metav1.DeletePropagationBackground
	if err := client.IgnoreNotFound(r.Delete(ctx, q, &client.DeleteOptions{PropagationPolicy: &policy,
		Preconditions: &metav1.Preconditions{UID: &q.UID}})); err != nil {
		return fmt.Errorf("deleting the expired question: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted a finished question after its TTL", "question", klog.KObj(q))
	return nil
}

// adoptedReplies lists from the API server the final replies of q that
// were adopted, which the cache's index of replies leaves out (see
// indexRepliesByQuestion): those labelled with its name that name it. It
// is read once per question, when its TTL has passed.
func (r *Reconciler) adoptedReplies(ctx context.Context, q *hitlv1.UserQuestion) ([]hitlv1.QuestionReply, error) {
	var list hitlv1.QuestionReplyList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(q.Namespace), client.MatchingLabels{hitlv1.QuestionLabel: q.Name}); err != nil {
		return nil, fmt.Errorf("listing the replies of an expired question: %w", err)
	}
	out := list.Items[:0]
	for _, reply := range list.Items {
		// A label is anyone's to write: only a reply that names the
		// question, and is final and adopted, is one the index left out.
		if reply.Spec.QuestionRef.Name == q.Name && finalOutcome(reply.Status.Outcome) && adopted(&reply) {
			out = append(out, reply)
		}
	}
	return out, nil
}

func username(u *hitlv1.UserInfo) string {
	if u == nil || u.Username == "" {
		return "an unknown user"
	}
	return u.Username
}

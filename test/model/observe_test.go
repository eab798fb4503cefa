package model_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/model"
)

// sent is what the test wrote in a reply's spec.
type sent struct {
	answers []hitlv1.AnswerItem
	by      string
}

// recorder watches every version of every question and reply of the
// namespace, keeps the latest (and the last one of each deleted object)
// for the comparisons with the model, and checks the invariants of SPEC §1
// on each version as it arrives.
type recorder struct {
	t0 time.Time
	// users are the usernames of the model's identities.
	users map[string]string

	mu            sync.Mutex
	questions     map[string]*hitlv1.UserQuestion
	replies       map[string]*hitlv1.QuestionReply
	goneQuestions map[string]*hitlv1.UserQuestion
	goneReplies   map[string]*hitlv1.QuestionReply
	// lost are objects that went while a watch was being restarted: their
	// last version is unknown.
	lost map[string]bool
	// sent holds every reply the test created, by UID, and sending the
	// one being created under each name until its UID is known; uids are
	// the UIDs of the replies made under each name, in order. testDeleted
	// are the names whose last reply the test itself deleted.
	sent        map[types.UID]sent
	sending     map[string]sent
	uids        map[string][]types.UID
	testDeleted map[string]bool

	violations []string
	// versions counts the versions checked, relists the watch restarts
	// that needed a new list.
	versions, relists int
	listed            map[string]bool
}

func newRecorder(t0 time.Time, users map[string]string) *recorder {
	return &recorder{t0: t0, users: users, sending: map[string]sent{}, uids: map[string][]types.UID{},
		questions: map[string]*hitlv1.UserQuestion{}, replies: map[string]*hitlv1.QuestionReply{},
		goneQuestions: map[string]*hitlv1.UserQuestion{}, goneReplies: map[string]*hitlv1.QuestionReply{},
		lost: map[string]bool{}, listed: map[string]bool{}, sent: map[types.UID]sent{}, testDeleted: map[string]bool{}}
}

// start watches questions and replies in ns until ctx ends. It returns
// once both watches are established.
func (r *recorder) start(ctx context.Context, c client.WithWatch, ns string) error {
	for _, list := range []client.ObjectList{&hitlv1.UserQuestionList{}, &hitlv1.QuestionReplyList{}} {
		ready := make(chan error, 1)
		go r.watch(ctx, c, ns, list, ready)
		if err := <-ready; err != nil {
			return err
		}
	}
	return nil
}

// watch lists, then watches from the list's resourceVersion, and watches
// again from the last version seen when the watch ends; only when that
// version has expired does it list again.
func (r *recorder) watch(ctx context.Context, c client.WithWatch, ns string, list client.ObjectList, ready chan<- error) {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			l := list.DeepCopyObject().(client.ObjectList)
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				if ready != nil {
					ready <- err
					return
				}
				time.Sleep(100 * time.Millisecond)
				continue
			}
			r.relist(l)
			rv = l.GetResourceVersion()
		}
		w, err := c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if ready != nil {
				ready <- err
				return
			}
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if ready != nil {
			ready <- nil
			ready = nil
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if err := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rv = ""
				}
				break
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type != watch.Bookmark {
				r.observe(ev.Type, o)
			}
		}
		w.Stop()
	}
}

// relist replaces the recorder's view with a full list, after a watch
// could not be resumed: objects missing from it went unseen.
func (r *recorder) relist(l client.ObjectList) {
	seen := map[string]bool{}
	_ = meta.EachListItem(l, func(o runtime.Object) error {
		obj := o.(client.Object)
		seen[obj.GetName()] = true
		r.observe(watch.Modified, obj)
		return nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed[fmt.Sprintf("%T", l)] {
		r.relists++
	}
	r.listed[fmt.Sprintf("%T", l)] = true
	switch l.(type) {
	case *hitlv1.UserQuestionList:
		for name := range r.questions {
			if !seen[name] {
				r.lost["uq/"+name] = true
				r.goneQuestions[name] = r.questions[name]
				delete(r.questions, name)
			}
		}
	case *hitlv1.QuestionReplyList:
		for name := range r.replies {
			if !seen[name] {
				r.lost["qr/"+name] = true
				r.goneReplies[name] = r.replies[name]
				delete(r.replies, name)
			}
		}
	}
}

func (r *recorder) observe(typ watch.EventType, o client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	deleted := typ == watch.Deleted
	switch obj := o.(type) {
	case *hitlv1.UserQuestion:
		track(r, r.questions, r.goneQuestions, obj, deleted, r.checkQuestion)
	case *hitlv1.QuestionReply:
		track(r, r.replies, r.goneReplies, obj, deleted, r.checkReply)
	}
}

// track checks a new version of an object against the one seen before (nil
// for the first) and records it as live or gone. A version seen already
// (a relist) is skipped. The caller holds r.mu.
func track[T client.Object](r *recorder, live, gone map[string]T, obj T, deleted bool, check func(prev, obj T, deleted bool)) {
	prev, seen := live[obj.GetName()]
	if seen && prev.GetResourceVersion() == obj.GetResourceVersion() && !deleted {
		return
	}
	r.versions++
	check(prev, obj, deleted)
	if deleted {
		gone[obj.GetName()] = obj
		delete(live, obj.GetName())
	} else {
		live[obj.GetName()] = obj
	}
}

func (r *recorder) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func terminal(s hitlv1.QuestionState) bool {
	return s == hitlv1.StateSettled || s == hitlv1.StateCancelled
}

// checkQuestion checks one version of a question, alone and against the
// version before it.
func (r *recorder) checkQuestion(prev, q *hitlv1.UserQuestion, deleted bool) {
	st := &q.Status
	at := fmt.Sprintf("question %s (resourceVersion %s, state %q)", q.Name, q.ResourceVersion, st.State)

	// The deadline is the one SPEC §6 gives, and never moves.
	if q.Spec.Timeout == nil {
		if st.Deadline != nil {
			r.violate("%s: a blocking question has deadline %s", at, st.Deadline)
		}
	} else if st.Deadline != nil {
		var askedAt *time.Time
		if q.Spec.AskedAt != nil {
			askedAt = &q.Spec.AskedAt.Time
		}
		if want := model.WindowStart(q.CreationTimestamp.Time, askedAt).Add(q.Spec.Timeout.Duration); !st.Deadline.Time.Equal(want) {
			r.violate("%s: deadline %s, want %s", at, st.Deadline.Time, want)
		}
	}
	// No transition to Continued before the deadline: continuedAt is the
	// fake time of a clock step, at or after the deadline.
	if st.ContinuedAt != nil {
		switch {
		case st.Deadline == nil:
			r.violate("%s: continuedAt without a deadline", at)
		case st.ContinuedAt.Time.Before(st.Deadline.Time):
			r.violate("%s: continued at %s, before its deadline %s", at, st.ContinuedAt.Time, st.Deadline.Time)
		}
		if off := st.ContinuedAt.Time.Sub(r.t0); off%model.Slot != 0 {
			r.violate("%s: continued at %s, which is no time the fake clock showed", at, st.ContinuedAt.Time)
		}
	}
	if st.State == hitlv1.StateContinued && st.ContinuedAt == nil {
		r.violate("%s: Continued without continuedAt", at)
	}
	if st.QueuedReply != nil {
		if st.State != hitlv1.StateContinued {
			r.violate("%s: a queued reply on a question that is not Continued", at)
		}
		if s, ok := r.batch(st.QueuedReply.Name, st.QueuedReply.UID); !ok || !sameAnswers(s.answers, st.QueuedReply.Answers) {
			r.violate("%s: queued answers %v are not reply %s's batch", at, st.QueuedReply.Answers, st.QueuedReply.Name)
		}
	}
	// status.answers is the batch of the reply that settled the question.
	switch s := st.Settlement; {
	case s != nil:
		if st.State != hitlv1.StateSettled {
			r.violate("%s: a settlement on a question that is not Settled", at)
		}
		if b, ok := r.batch(s.Reply, s.ReplyUID); !ok || !sameAnswers(b.answers, st.Answers) {
			r.violate("%s: answers %v are not the batch of reply %s", at, st.Answers, s.Reply)
		}
		if s.Late != (st.ContinuedAt != nil) {
			r.violate("%s: settlement.late is %v but continuedAt is %v", at, s.Late, st.ContinuedAt)
		}
	case st.State == hitlv1.StateSettled:
		r.violate("%s: Settled without a settlement", at)
	case len(st.Answers) > 0:
		r.violate("%s: answers without a settlement", at)
	}

	if prev != nil {
		was := prev.Status.State
		// A question is settled at most once.
		if prev.Status.Settlement != nil && !equality.Semantic.DeepEqual(prev.Status.Settlement, st.Settlement) {
			r.violate("%s: settlement changed from %s to %s", at, settlementString(prev.Status.Settlement), settlementString(st.Settlement))
		}
		if terminal(was) && st.State != was {
			r.violate("%s: left %s", at, was)
		}
		if was == hitlv1.StateContinued && st.State == hitlv1.StateOpen {
			r.violate("%s: went back from Continued to Open", at)
		}
		if was != "" && st.State == "" {
			r.violate("%s: lost its state", at)
		}
		if d := prev.Status.Deadline; d != nil && (st.Deadline == nil || !d.Time.Equal(st.Deadline.Time)) {
			r.violate("%s: deadline moved from %s to %v", at, d.Time, st.Deadline)
		}
		if c := prev.Status.ContinuedAt; c != nil && (st.ContinuedAt == nil || !c.Time.Equal(st.ContinuedAt.Time)) {
			r.violate("%s: continuedAt moved from %s to %v", at, c.Time, st.ContinuedAt)
		}
	}
	// Only a TTL deletes a question in this test, and only a finished one.
	if deleted && (!terminal(st.State) || q.Spec.TTLSecondsAfterFinished == nil) {
		ttl := "none"
		if t := q.Spec.TTLSecondsAfterFinished; t != nil {
			ttl = fmt.Sprint(*t)
		}
		r.violate("%s: deleted while %q (ttl %s)", at, st.State, ttl)
	}
}

func settlementString(s *hitlv1.Settlement) string {
	if s == nil {
		return "none"
	}
	by := "nobody"
	if s.AnsweredBy != nil {
		by = s.AnsweredBy.Username
	}
	return fmt.Sprintf("{reply %s by %s, late %v, at %s}", s.Reply, by, s.Late, s.At.Time.Format(time.RFC3339Nano))
}

func final(o hitlv1.ReplyOutcome) bool {
	return o == hitlv1.OutcomeApplied || o == hitlv1.OutcomeAdmitted || o == hitlv1.OutcomeRejected || o == hitlv1.OutcomeCounted ||
		o == hitlv1.OutcomeClosed
}

// checkReply checks that a reply reaches exactly one final outcome:
// Applied, Admitted, Counted, Rejected and Closed never change, and Queued
// changes only to Admitted, or to Closed when its question is cancelled.
// A Rejected reply has a reason, a Closed one NOT_ANSWERABLE, the others
// none.
func (r *recorder) checkReply(prev, reply *hitlv1.QuestionReply, deleted bool) {
	st := &reply.Status
	at := fmt.Sprintf("reply %s (resourceVersion %s, outcome %q)", reply.Name, reply.ResourceVersion, st.Outcome)
	switch st.Outcome {
	case hitlv1.OutcomeRejected:
		if st.Reason == "" {
			r.violate("%s: no reason", at)
		}
	case hitlv1.OutcomeClosed:
		if st.Reason != hitlv1.CodeNotAnswerable {
			r.violate("%s: reason %q, want %s", at, st.Reason, hitlv1.CodeNotAnswerable)
		}
		// Final and healthy: written with its conditions, Ready and never
		// Stalled.
		if c := meta.FindStatusCondition(st.Conditions, hitlv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(hitlv1.OutcomeClosed) {
			r.violate("%s: condition Ready %+v, want True, reason Closed", at, c)
		}
		if meta.FindStatusCondition(st.Conditions, hitlv1.ConditionStalled) != nil {
			r.violate("%s: condition Stalled on a Closed reply", at)
		}
	default:
		if st.Reason != "" {
			r.violate("%s: reason %q", at, st.Reason)
		}
	}
	if prev != nil {
		was := prev.Status
		switch {
		case final(was.Outcome) && (st.Outcome != was.Outcome || st.Reason != was.Reason):
			r.violate("%s: final outcome %s/%s changed to %s/%s", at, was.Outcome, was.Reason, st.Outcome, st.Reason)
		case was.Outcome == hitlv1.OutcomeQueued && st.Outcome != hitlv1.OutcomeQueued &&
			st.Outcome != hitlv1.OutcomeAdmitted && st.Outcome != hitlv1.OutcomeClosed:
			r.violate("%s: Queued changed to %q", at, st.Outcome)
		}
	}
	// A reply the controller deletes (with its question, after the TTL)
	// has its outcome written first.
	if deleted && !r.testDeleted[reply.Name] && !final(st.Outcome) {
		r.violate("%s: deleted by the controller before its final outcome", at)
	}
}

// sameAnswers compares two batches item by item, an absent list being
// equal to an empty one.
func sameAnswers(a, b []hitlv1.AnswerItem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Custom != b[i].Custom || len(a[i].Selected) != len(b[i].Selected) {
			return false
		}
		for j := range a[i].Selected {
			if a[i].Selected[j] != b[i].Selected[j] {
				return false
			}
		}
	}
	return true
}

// compare lists every difference between the model and the objects as the
// watches last saw them.
func (r *recorder) compare(m *model.Model) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	for _, name := range m.QuestionNames() {
		want := m.Questions[name]
		got, exists := r.questions[name]
		if want.Deleted {
			if exists {
				add("question %s: exists (%s), want deleted after its TTL", name, got.Status.State)
				continue
			}
			gone, seen := r.goneQuestions[name]
			if !seen {
				add("question %s: deletion not seen yet", name)
				continue
			}
			if !r.lost["uq/"+name] {
				diffs = append(diffs, r.questionDiff(m, want, gone, "last version before deletion: ")...)
			}
			continue
		}
		if !exists {
			add("question %s: missing, want %s", name, want.State)
			continue
		}
		diffs = append(diffs, r.questionDiff(m, want, got, "")...)
	}
	for name := range r.questions {
		if _, known := m.Questions[name]; !known {
			add("question %s: exists, unknown to the model", name)
		}
	}

	for _, name := range m.ReplyNames() {
		want := m.Replies[name]
		got, exists := r.replies[name]
		if want.Deleted {
			if exists {
				add("reply %s: exists (%s/%s), want deleted", name, got.Status.Outcome, got.Status.Reason)
				continue
			}
			gone, seen := r.goneReplies[name]
			if !seen {
				add("reply %s: deletion not seen yet", name)
				continue
			}
			if !r.lost["qr/"+name] && (gone.Status.Outcome != want.Outcome || gone.Status.Reason != want.Reason) {
				add("reply %s: deleted as %s/%s, want %s/%s", name, gone.Status.Outcome, gone.Status.Reason, want.Outcome, want.Reason)
			}
			continue
		}
		if !exists {
			add("reply %s: missing, want %s/%s", name, want.Outcome, want.Reason)
			continue
		}
		if got.Status.Outcome != want.Outcome || got.Status.Reason != want.Reason {
			add("reply %s (to %s): %q/%q, want %q/%q", name, want.Question, got.Status.Outcome, got.Status.Reason, want.Outcome, want.Reason)
		}
	}
	for name := range r.replies {
		if _, known := m.Replies[name]; !known {
			add("reply %s: exists, unknown to the model", name)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// freshDiff compares a question from a fresh list with the model's
// prediction.
func (r *recorder) freshDiff(m *model.Model, want *model.Question, got *hitlv1.UserQuestion) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.questionDiff(m, want, got, "fresh list: ")
}

// questionDiff compares one question with the model's prediction: its
// state and status, what its agent wrote in its spec (and nobody else
// could), and the UIDs of the replies it follows. The caller holds r.mu.
func (r *recorder) questionDiff(m *model.Model, want *model.Question, got *hitlv1.UserQuestion, prefix string) []string {
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf("question %s: %s", want.Name, prefix)+fmt.Sprintf(format, args...))
	}
	st := &got.Status
	if want.Pending() {
		// Asked in a policy race window: the rule the controller fixed
		// must be one of the candidates, and says which state of the
		// policies its cache held.
		if st.State == "" {
			add("not looked at yet; its rule is one of %d candidates", len(want.Candidates))
			return diffs
		}
		gotRule := approvalString(st.Approval)
		i := slices.IndexFunc(want.Candidates, func(c model.Candidate) bool { return c.Rule.String() == gotRule })
		if i < 0 {
			var cands []string
			for _, c := range want.Candidates {
				cands = append(cands, c.Rule.String())
			}
			add("approval %s, want one of %v", gotRule, cands)
			return diffs
		}
		m.FixRule(want.Name, i)
	}
	diffs = append(diffs, r.votesDiff(want, got, prefix)...)
	if st.State != want.State {
		add("state %q, want %q", st.State, want.State)
	}
	switch {
	case want.Timed && st.Deadline == nil:
		add("no deadline, want %s", want.Deadline)
	case want.Timed && !st.Deadline.Time.Equal(want.Deadline):
		add("deadline %s, want %s", st.Deadline.Time, want.Deadline)
	case !want.Timed && st.Deadline != nil:
		add("deadline %s on a blocking question", st.Deadline.Time)
	}
	switch {
	case want.Continued && st.ContinuedAt == nil:
		add("no continuedAt, want %s (slot %d)", m.At(want.ContinuedSlot), want.ContinuedSlot)
	case want.Continued && !st.ContinuedAt.Time.Equal(m.At(want.ContinuedSlot)):
		add("continuedAt %s, want %s (slot %d)", st.ContinuedAt.Time, m.At(want.ContinuedSlot), want.ContinuedSlot)
	case !want.Continued && st.ContinuedAt != nil:
		add("continuedAt %s, want none", st.ContinuedAt.Time)
	}
	switch {
	case want.Queued == "" && st.QueuedReply != nil:
		add("queued reply %s, want none", st.QueuedReply.Name)
	case want.Queued != "" && st.QueuedReply == nil:
		add("no queued reply, want %s", want.Queued)
	case want.Queued != "" && st.QueuedReply.Name != want.Queued:
		add("queued reply %s, want %s", st.QueuedReply.Name, want.Queued)
	case want.Queued != "" && !st.QueuedReply.QueuedAt.Time.Equal(m.At(want.QueuedSlot)):
		add("queuedAt %s, want %s (slot %d)", st.QueuedReply.QueuedAt.Time, m.At(want.QueuedSlot), want.QueuedSlot)
	case want.Queued != "" && st.QueuedReply.UID != r.uid(want.Queued, want.QueuedGen):
		add("queued reply %s has UID %s, want %s (reply %d of that name)", want.Queued, st.QueuedReply.UID, r.uid(want.Queued, want.QueuedGen), want.QueuedGen)
	}
	switch s := st.Settlement; {
	case want.Settlement == nil && s != nil:
		add("settled by %s, want no settlement", s.Reply)
	case want.Settlement != nil && s == nil:
		add("no settlement, want reply %s (late %v)", want.Settlement.Reply, want.Settlement.Late)
	case want.Settlement != nil:
		if s.Reply != want.Settlement.Reply || s.Late != want.Settlement.Late {
			add("settled by %s (late %v), want %s (late %v)", s.Reply, s.Late, want.Settlement.Reply, want.Settlement.Late)
		}
		if wantAt := m.At(want.Settlement.Slot); !s.At.Time.Equal(wantAt) {
			add("settled at %s, want %s (slot %d)", s.At.Time, wantAt, want.Settlement.Slot)
		}
		if uid := r.uid(want.Settlement.Reply, want.Settlement.Gen); s.ReplyUID != uid {
			add("settled by reply UID %s, want %s (reply %d of name %s)", s.ReplyUID, uid, want.Settlement.Gen, s.Reply)
		}
	}
	if want.Settlement == nil && len(st.Answers) > 0 {
		add("answers %v, want none", st.Answers)
	}
	spec := &got.Spec
	if spec.Cancelled != want.Cancelled || spec.AdmittedReply != want.Admitted {
		add("spec.cancelled %v and spec.admittedReply %q, want %v and %q", spec.Cancelled, spec.AdmittedReply, want.Cancelled, want.Admitted)
	}
	if asker := r.users[want.AskedBy]; spec.AskedBy == nil || spec.AskedBy.Username != asker {
		add("spec.askedBy %v, want %s", spec.AskedBy, asker)
	}
	if by, taken := got.Labels[takenLabel]; taken {
		add("labelled %s=%s by an identity that did not ask it", takenLabel, by)
	}
	if gotClaims, wantClaims := st.Claims, m.ListedClaims(want.Name); !want.Deleted && !equality.Semantic.DeepEqual(normClaims(gotClaims), normClaims(wantClaims)) {
		add("claims %v, want %v", gotClaims, wantClaims)
	} else if !want.Deleted && int(st.ClaimCount) != len(wantClaims) {
		add("claimCount %d, want %d", st.ClaimCount, len(wantClaims))
	}
	return diffs
}

func normClaims(c []hitlv1.ClaimHolder) []hitlv1.ClaimHolder {
	if len(c) == 0 {
		return nil
	}
	return c
}

// settledBy checks what the model cannot know alone: the answers and the
// answerer of the reply a question was settled (or queued) with.
func (r *recorder) settledBy() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var diffs []string
	for name, q := range r.questions {
		if s := q.Status.Settlement; s != nil {
			if b, _ := r.batch(s.Reply, s.ReplyUID); s.AnsweredBy == nil || s.AnsweredBy.Username != b.by {
				diffs = append(diffs, fmt.Sprintf("question %s: settlement.answeredBy %v, want %s", name, s.AnsweredBy, b.by))
			}
		}
		if qr := q.Status.QueuedReply; qr != nil {
			if b, _ := r.batch(qr.Name, qr.UID); qr.AnsweredBy == nil || qr.AnsweredBy.Username != b.by {
				diffs = append(diffs, fmt.Sprintf("question %s: queuedReply.answeredBy %v, want %s", name, qr.AnsweredBy, b.by))
			}
		}
	}
	sort.Strings(diffs)
	return diffs
}

func (r *recorder) takeViolations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.violations
	r.violations = nil
	return v
}

// batch is what the test sent in the reply of that name and UID; a
// question may name a reply whose creation has not returned yet. The
// caller holds r.mu.
func (r *recorder) batch(name string, uid types.UID) (sent, bool) {
	if s, ok := r.sent[uid]; ok {
		return s, true
	}
	s, ok := r.sending[name]
	return s, ok
}

// uid is the UID of the gen-th reply made under name. The caller holds
// r.mu.
func (r *recorder) uid(name string, gen int) types.UID {
	if uids := r.uids[name]; gen >= 1 && gen <= len(uids) {
		return uids[gen-1]
	}
	return ""
}

// noteSending records a reply the test is creating, before it does: a
// deleted reply's name may be used again, for a new reply.
func (r *recorder) noteSending(name string, s sent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sending[name] = s
	delete(r.testDeleted, name)
	delete(r.lost, "qr/"+name)
}

// noteSent records that the reply being created under name was, with uid.
func (r *recorder) noteSent(name string, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent[uid] = r.sending[name]
	r.uids[name] = append(r.uids[name], uid)
	delete(r.sending, name)
}

// noteRefused records that the reply being created under name was
// refused.
func (r *recorder) noteRefused(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sending, name)
}

func (r *recorder) noteDeleting(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.testDeleted[name] = true
}

func (r *recorder) counts() (versions, relists int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.versions, r.relists
}

// approvalString is status.approval in the form of model.Rule.String.
func approvalString(e *hitlv1.EffectiveApproval) string {
	if e == nil {
		return (*model.Rule)(nil).String()
	}
	r := &model.Rule{Approvals: int(e.Approvals), Veto: e.Veto, ExcludeRequester: e.ExcludeRequester}
	for _, s := range e.From {
		r.From = append(r.From, model.Set{Name: s.Name, Groups: s.Groups, Users: s.Users, Minimum: int(s.Minimum)})
	}
	for _, p := range e.Policies {
		r.Policies = append(r.Policies, model.PolicyRef{Name: p.Name, Gen: p.Generation})
	}
	return r.String()
}

// votesDiff compares a question's rule, votes, tally and deciding votes
// with the model's. The caller holds r.mu.
func (r *recorder) votesDiff(want *model.Question, got *hitlv1.UserQuestion, prefix string) []string {
	var diffs []string
	add := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf("question %s: %s", want.Name, prefix)+fmt.Sprintf(format, args...))
	}
	st := &got.Status
	if st.State == "" {
		return nil // not looked at yet: the state differs
	}
	if g, w := approvalString(st.Approval), want.Rule.String(); g != w {
		add("approval %s, want %s", g, w)
	}
	if st.Tally != want.Tally() {
		add("tally %q, want %q", st.Tally, want.Tally())
	}
	if g, w := r.votesString(st.Votes), r.modelVotes(want.Votes); g != w {
		add("votes %s, want %s", g, w)
	}
	if s, ws := st.Settlement, want.Settlement; s != nil && ws != nil {
		if g, w := r.votesString(s.Votes), r.modelVotes(ws.Votes); g != w {
			add("settlement.votes %s, want %s", g, w)
		}
	}
	return diffs
}

func (r *recorder) votesString(votes []hitlv1.Vote) string {
	var parts []string
	for _, v := range votes {
		sets := slices.Clone(v.Sets)
		sort.Strings(sets)
		parts = append(parts, fmt.Sprintf("%s(%s) by %s %s %v", v.Reply, v.ReplyUID, v.By.Username, v.Choice, sets))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (r *recorder) modelVotes(votes []model.Vote) string {
	var parts []string
	for _, v := range votes {
		choice := hitlv1.VoteReject
		if v.Approve {
			choice = hitlv1.VoteApprove
		}
		sets := v.Sets
		if sets == nil {
			sets = []string{}
		}
		parts = append(parts, fmt.Sprintf("%s(%s) by %s %s %v", v.Reply, r.uid(v.Reply, v.Gen), r.users[v.By], choice, sets))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

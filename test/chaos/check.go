package main

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// violation is a broken promise, with the histories that show it.
type violation struct {
	Rule    string   `json:"rule"`
	Object  string   `json:"object"`
	Message string   `json:"message"`
	History []string `json:"history,omitempty"`
}

// history is what the checks read: every recorded version, and what the
// clients were told.
type history struct {
	questions map[string][]version[*hitlv1.UserQuestion]
	replies   map[string][]version[*hitlv1.QuestionReply]
	claims    map[string][]version[*hitlv1.QuestionClaim]
	views     clientViews
	events    []event
	writes    []write
	// claimDeleted is when each QuestionClaim's deletion reached the API
	// server; claimWritten when each of its writes completed.
	claimDeleted map[string]time.Time
	claimWritten map[string][]time.Time
	end          time.Time
}

// checker checks a history; violations are added to rep.
type checker struct {
	h   history
	rep *report
	l   leadership
	// finalReply is each reply's last recorded version.
	repliesOf map[string][]string
}

func checkAll(rep *report, rec *recorder, views clientViews, tl *timeline, audit auditLog) {
	rec.mu.Lock()
	h := history{questions: rec.questions, replies: rec.replies, claims: rec.claims, views: views,
		events: tl.all(), writes: audit.writes, claimDeleted: audit.claimDeleted,
		claimWritten: audit.claimWritten, end: time.Now()}
	rep.Relists = rec.Relists
	rec.mu.Unlock()
	rep.Timeline = h.events
	check(rep, h)
}

func check(rep *report, h history) {
	c := &checker{h: h, rep: rep, l: leadershipOf(h.events, h.end), repliesOf: map[string][]string{}}
	for name, vs := range h.replies {
		q := vs[len(vs)-1].Object.Spec.QuestionRef.Name
		c.repliesOf[q] = append(c.repliesOf[q], name)
	}
	rep.Ops, rep.ClientErrors, rep.ErrorSamples = h.views.Ops, h.views.Errors, h.views.ErrorSamples
	rep.Objects = map[string]int{"questions": len(h.questions), "replies": len(h.replies), "claims": len(h.claims)}
	rep.Outcomes, rep.States = map[string]int{}, map[string]int{}
	for _, name := range sortedKeys(h.replies) {
		c.reply(name)
	}
	for _, name := range sortedKeys(h.questions) {
		c.question(name)
	}
	c.clients()
	c.failovers()
	c.deposed()
	sort.SliceStable(rep.Violations, func(i, j int) bool { return rep.Violations[i].Object < rep.Violations[j].Object })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (c *checker) violate(rule, object, format string, args ...any) {
	c.rep.Violations = append(c.rep.Violations, violation{Rule: rule, Object: object,
		Message: fmt.Sprintf(format, args...), History: c.historyOf(object)})
}

// historyOf is the question's history and its replies', or a reply's
// and its question's.
func (c *checker) historyOf(object string) []string {
	kind, name, _ := strings.Cut(object, "/")
	question := name
	if kind == "reply" {
		if vs := c.h.replies[name]; len(vs) > 0 {
			question = vs[0].Object.Spec.QuestionRef.Name
		}
	}
	var out []string
	for _, v := range c.h.questions[question] {
		out = append(out, describeQuestion(v))
	}
	for _, r := range c.repliesOf[question] {
		for _, v := range c.h.replies[r] {
			out = append(out, describeReply(v))
		}
	}
	for name, vs := range c.h.claims {
		if len(vs) > 0 && vs[0].Object.Spec.QuestionRef.Name == question {
			for _, v := range vs {
				qc := v.Object
				out = append(out, fmt.Sprintf("%s claim %s rv=%s deleted=%t holder=%s renew=%s duration=%ds", stamp(v.At), name,
					qc.ResourceVersion, v.Deleted, holderOf(qc), microStamp(qc.Spec.RenewTime), qc.Spec.DurationSeconds))
			}
		}
	}
	// What the harness did around then.
	if len(c.h.questions[question]) > 0 {
		from := c.h.questions[question][0].At.Add(-10 * time.Second)
		to := c.h.questions[question][len(c.h.questions[question])-1].At.Add(5 * time.Second)
		for _, e := range c.h.events {
			if !e.At.Before(from) && e.At.Before(to) {
				out = append(out, fmt.Sprintf("%s event %s %s %s", stamp(e.At), e.Replica, e.Kind, e.Detail))
			}
		}
	}
	sort.Strings(out)
	return out
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

// holderOf is a claim's stamped holder, "" when it has none.
func holderOf(qc *hitlv1.QuestionClaim) string {
	if qc.Spec.Holder == nil {
		return ""
	}
	return qc.Spec.Holder.Username
}

func describeQuestion(v version[*hitlv1.UserQuestion]) string {
	q := v.Object
	s := fmt.Sprintf("%s question %s rv=%s deleted=%t state=%s", stamp(v.At), q.Name, q.ResourceVersion, v.Deleted, q.Status.State)
	if q.Status.Deadline != nil {
		s += " deadline=" + stamp(q.Status.Deadline.Time)
	}
	if q.Status.ContinuedAt != nil {
		s += " continuedAt=" + stamp(q.Status.ContinuedAt.Time)
	}
	if q.Status.QueuedReply != nil {
		s += " queued=" + q.Status.QueuedReply.Name
	}
	if q.Spec.AdmittedReply != "" {
		s += " admitted=" + q.Spec.AdmittedReply
	}
	if st := q.Status.Settlement; st != nil {
		s += fmt.Sprintf(" settledBy=%s late=%t answers=%v", st.Reply, st.Late, q.Status.Answers)
	}
	if q.Spec.Cancelled {
		s += " cancelled"
	}
	return s
}

func describeReply(v version[*hitlv1.QuestionReply]) string {
	r := v.Object
	return fmt.Sprintf("%s reply %s rv=%s deleted=%t outcome=%s reason=%s answers=%v", stamp(v.At), r.Name, r.ResourceVersion,
		v.Deleted, r.Status.Outcome, r.Status.Reason, r.Spec.Answers)
}

func microStamp(t *metav1.MicroTime) string {
	if t == nil {
		return "-"
	}
	return stamp(t.Time)
}

func lastReply(vs []version[*hitlv1.QuestionReply]) (*hitlv1.QuestionReply, bool) {
	v := vs[len(vs)-1]
	return v.Object, v.Deleted
}

func lastQuestion(vs []version[*hitlv1.UserQuestion]) *hitlv1.UserQuestion {
	if len(vs) == 0 {
		return nil
	}
	return vs[len(vs)-1].Object
}

// reply checks that the reply reached exactly one final outcome, by legal
// steps, and that its question agrees.
func (c *checker) reply(name string) {
	vs := c.h.replies[name]
	obj := "reply/" + name
	outcome := hitlv1.ReplyOutcome("")
	for _, v := range vs {
		next := v.Object.Status.Outcome
		if next == outcome || next == "" && v.Deleted {
			continue
		}
		// none → any outcome (the recorder may have missed a Queued
		// version), Queued → Admitted, or Closed when its question is
		// cancelled; Applied, Admitted, Rejected, Counted and Closed are
		// final.
		legal := outcome == "" || outcome == hitlv1.OutcomeQueued && (next == hitlv1.OutcomeAdmitted || next == hitlv1.OutcomeClosed)
		if !legal {
			c.violate("reply-outcome-changed", obj, "outcome went from %s to %s", outcome, next)
		}
		outcome = next
	}
	r, deleted := lastReply(vs)
	c.rep.Outcomes[string(r.Status.Outcome)+map[bool]string{true: " (withdrawn)", false: ""}[deleted]]++
	q := lastQuestion(c.h.questions[r.Spec.QuestionRef.Name])
	switch {
	case deleted && r.Status.Outcome != hitlv1.OutcomeQueued:
		c.violate("reply-lost", obj, "deleted with outcome %q: only a queued reply is withdrawn", r.Status.Outcome)
	case deleted:
		if q != nil && q.Status.QueuedReply != nil && q.Status.QueuedReply.Name == name {
			c.violate("withdrawal-lost", obj, "withdrawn, but question %s still queues it", q.Name)
		}
	case r.Status.Outcome == "":
		c.violate("reply-lost", obj, "no outcome at the end of the run")
	case q == nil:
		// An orphan: its question is gone.
		if r.Status.Outcome != hitlv1.OutcomeClosed || r.Status.Reason != hitlv1.CodeNotAnswerable {
			c.violate("reply-outcome", obj, "outcome %s %s for a question never seen, want Closed %s", r.Status.Outcome, r.Status.Reason, hitlv1.CodeNotAnswerable)
		}
	case r.Status.Outcome == hitlv1.OutcomeApplied || r.Status.Outcome == hitlv1.OutcomeAdmitted:
		st := q.Status.Settlement
		if q.Status.State != hitlv1.StateSettled || st == nil || st.Reply != name {
			c.violate("reply-outcome", obj, "%s, but question %s is %s settled by %v", r.Status.Outcome, q.Name, q.Status.State, settledBy(q))
		} else if st.Late != (r.Status.Outcome == hitlv1.OutcomeAdmitted) {
			c.violate("reply-outcome", obj, "%s, but the settlement says late=%t", r.Status.Outcome, st.Late)
		}
	case r.Status.Outcome == hitlv1.OutcomeQueued:
		if q.Status.State != hitlv1.StateCancelled && (q.Status.QueuedReply == nil || q.Status.QueuedReply.Name != name || q.Status.State != hitlv1.StateContinued) {
			c.violate("reply-outcome", obj, "Queued, but question %s is %s and queues %v", q.Name, q.Status.State, q.Status.QueuedReply)
		}
	case r.Status.Outcome == hitlv1.OutcomeCounted:
		c.counted(obj, r, q)
	case r.Status.Outcome == hitlv1.OutcomeRejected:
		switch r.Status.Reason {
		case hitlv1.CodeDuplicateVote:
			c.rep.Approvals.DuplicateVotes++
		case hitlv1.CodeSelfApproval:
			c.rep.Approvals.SelfApprovals++
		}
		if settledBy(q) == name {
			c.violate("reply-outcome", obj, "Rejected, but question %s is settled by it", q.Name)
		}
		// NOT_ANSWERABLE is Closed now, but for a vote past the votes a
		// governed question records (MaxVotes): the question is open.
		if r.Status.Reason == hitlv1.CodeNotAnswerable && !c.heldMaxVotes(q.Name) {
			c.violate("reply-outcome", obj, "Rejected %s, but question %s never held %d votes: a reply to a finished or gone question is Closed",
				hitlv1.CodeNotAnswerable, q.Name, hitlv1.MaxVotes)
		}
	case r.Status.Outcome == hitlv1.OutcomeClosed:
		c.closed(obj, r, q)
	}
}

// closed checks a Closed reply: NOT_ANSWERABLE, for a question finished
// (Settled, Cancelled, or being cancelled) or gone (deleted, or another
// question of the same name than the one the reply was made for), that it
// neither settled nor counts a vote on.
func (c *checker) closed(obj string, r *hitlv1.QuestionReply, q *hitlv1.UserQuestion) {
	if r.Status.Reason != hitlv1.CodeNotAnswerable {
		c.violate("reply-outcome", obj, "Closed with reason %q, want %s", r.Status.Reason, hitlv1.CodeNotAnswerable)
	}
	vs := c.h.questions[q.Name]
	if !vs[len(vs)-1].Deleted && !madeForAnother(r, q) && !q.Status.State.Terminal() && !q.Spec.Cancelled {
		c.violate("reply-outcome", obj, "Closed, but question %s is %s, not cancelled, and not gone", q.Name, q.Status.State)
	}
	if settledBy(q) == r.Name {
		c.violate("reply-outcome", obj, "Closed, but question %s is settled by it", q.Name)
	}
	if slices.ContainsFunc(q.Status.Votes, func(v hitlv1.Vote) bool { return v.Reply == r.Name && (v.ReplyUID == "" || v.ReplyUID == r.UID) }) {
		c.violate("reply-outcome", obj, "Closed, but question %s counts its vote: %v", q.Name, voters(q.Status.Votes))
	}
}

// madeForAnother reports whether reply r was made for another question of
// q's name: it names another UID, was created before q, or another
// question owns it.
func madeForAnother(r *hitlv1.QuestionReply, q *hitlv1.UserQuestion) bool {
	if q.UID == "" {
		return false
	}
	if uid := r.Spec.QuestionRef.UID; uid != "" && uid != q.UID || r.CreationTimestamp.Before(&q.CreationTimestamp) {
		return true
	}
	return slices.ContainsFunc(r.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "UserQuestion" && o.UID != q.UID })
}

// heldMaxVotes reports whether a version of the question held the most
// votes a governed question records.
func (c *checker) heldMaxVotes(question string) bool {
	return slices.ContainsFunc(c.h.questions[question], func(v version[*hitlv1.UserQuestion]) bool {
		return v.Object.Status.Approval != nil && len(v.Object.Status.Votes) >= hitlv1.MaxVotes
	})
}

func settledBy(q *hitlv1.UserQuestion) string {
	if q.Status.Settlement == nil {
		return ""
	}
	return q.Status.Settlement.Reply
}

// question checks that the question was settled at most once, with the
// batch of the reply it names, that its window closed neither early nor
// while it was claimed, and measures how late it closed.
func (c *checker) question(name string) {
	vs := c.h.questions[name]
	obj := "question/" + name
	var settled *hitlv1.UserQuestion
	var terminal hitlv1.QuestionState
	var continued *version[*hitlv1.UserQuestion]
	settledBys := map[string]bool{}
	for i, v := range vs {
		q := v.Object
		if v.Deleted {
			continue
		}
		s := q.Status.State
		if terminal != "" && s != terminal {
			c.violate("terminal-left", obj, "went from %s to %s", terminal, s)
		}
		if s.Terminal() {
			terminal = s
		}
		if s == hitlv1.StateSettled {
			settledBys[settledBy(q)] = true
			if settled == nil {
				settled = q
			} else if !reflect.DeepEqual(settled.Status.Answers, q.Status.Answers) || !reflect.DeepEqual(settled.Status.Settlement, q.Status.Settlement) {
				c.violate("settled-twice", obj, "settled by %s, then by %s", describeQuestion(version[*hitlv1.UserQuestion]{Object: settled}), describeQuestion(v))
			}
		}
		if s == hitlv1.StateContinued && continued == nil {
			continued = &vs[i]
		}
	}
	if len(settledBys) > 1 {
		c.violate("settled-twice", obj, "settled by %d different replies: %v", len(settledBys), sortedKeys(settledBys))
	}
	last := lastQuestion(vs)
	c.rep.States[string(last.Status.State)]++
	c.settlement(obj, last)
	c.approvals(name)
	if continued != nil {
		c.window(obj, name, continued)
		if last.Status.State == hitlv1.StateSettled && last.Status.Settlement != nil && !last.Status.Settlement.Late {
			c.violate("settled-in-window-after-it-closed", obj, "Continued, then settled with late=false")
		}
	}
	c.settleLatency(name)
	// Exactly one winner among the replies.
	winners := 0
	for _, r := range c.repliesOf[name] {
		rp, deleted := lastReply(c.h.replies[r])
		if !deleted && (rp.Status.Outcome == hitlv1.OutcomeApplied || rp.Status.Outcome == hitlv1.OutcomeAdmitted) {
			winners++
		}
	}
	if winners > 1 {
		c.violate("two-winners", obj, "%d replies were applied or admitted", winners)
	}
	if last.Status.State == hitlv1.StateSettled && winners == 0 {
		c.violate("settled-without-reply", obj, "Settled, but no reply to it was applied or admitted")
	}
}

// settlement checks that a settled question's answers are the batch of
// the reply it names.
func (c *checker) settlement(obj string, q *hitlv1.UserQuestion) {
	if q.Status.State != hitlv1.StateSettled {
		return
	}
	st := q.Status.Settlement
	if st == nil {
		c.violate("settlement", obj, "Settled without status.settlement")
		return
	}
	vs := c.h.replies[st.Reply]
	if len(vs) == 0 {
		c.violate("settlement", obj, "settled by reply %s, which was never seen", st.Reply)
		return
	}
	r, _ := lastReply(vs)
	if !sameBatch(r.Spec.Answers, q.Status.Answers) {
		c.violate("settlement", obj, "status.answers %v are not the batch %v of reply %s", q.Status.Answers, r.Spec.Answers, st.Reply)
	}
}

func sameBatch(a, b []hitlv1.AnswerItem) bool {
	norm := func(items []hitlv1.AnswerItem) []hitlv1.AnswerItem {
		out := make([]hitlv1.AnswerItem, len(items))
		for i, it := range items {
			out[i] = hitlv1.AnswerItem{ID: it.ID, Custom: it.Custom, Selected: append([]string{}, it.Selected...)}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// window checks the close of a timed question's window and measures its
// lateness.
func (c *checker) window(obj, name string, v *version[*hitlv1.UserQuestion]) {
	q := v.Object
	if q.Spec.Timeout == nil || q.Status.Deadline == nil {
		c.violate("continued-without-window", obj, "Continued, but it has no window")
		return
	}
	deadline := q.Status.Deadline.Time
	at := v.At
	if q.Status.ContinuedAt != nil {
		at = q.Status.ContinuedAt.Time
	}
	if at.Before(deadline) || v.At.Before(deadline) {
		c.violate("early", obj, "Continued at %s (seen %s), before its deadline %s", stamp(at), stamp(v.At), stamp(deadline))
	}
	due := deadline
	claimed := false
	// The controller dates a close at the moment it sent its read of the
	// claims, and the API server serves that read from a moment between
	// then and the Continued write: a claim deleted in between was
	// rightly absent from the read.
	written := c.statusWrittenAfter(name, at, v.At)
	for claim, cvs := range c.h.claims {
		if len(cvs) == 0 || !cvs[0].Object.Holds(q) {
			continue
		}
		claimed = true
		// The last renewal written before the window closed keeps the
		// claim live for its duration from then, at least.
		for _, cv := range cvs {
			qc := cv.Object
			if cv.Deleted || qc.Spec.RenewTime == nil || !qc.Spec.RenewTime.Time.Before(at) {
				continue
			}
			deleted := deletedAt(cvs)
			if d, ok := c.h.claimDeleted[claim]; ok && (deleted.IsZero() || d.Before(deleted)) {
				deleted = d
			}
			if !deleted.IsZero() && deleted.Before(written) {
				continue
			}
			// The claim holds the window only once its write reached the
			// API server (a claim sent just before the deadline may
			// arrive after the window closed): by the audit log when it
			// has the write, else when the recorder saw it.
			if !c.visibleBefore(claim, cv, at) {
				continue
			}
			live := qc.Spec.RenewTime.Add(hitlv1.ClaimDuration(qc))
			if live.After(at.Add(50 * time.Millisecond)) {
				c.violate("closed-while-claimed", obj, "Continued at %s while claim %s, renewed at %s, was live until %s",
					stamp(at), claim, stamp(qc.Spec.RenewTime.Time), stamp(live))
			}
			if live.After(due) {
				due = live
			}
		}
	}
	if claimed {
		c.rep.lateness.claimed = append(c.rep.lateness.claimed, at.Sub(due))
		return
	}
	c.rep.lateness.raw = append(c.rep.lateness.raw, at.Sub(deadline))
	from, ok := c.l.servingAt(deadline)
	if !ok {
		return
	}
	late := at.Sub(from)
	c.rep.lateness.fromLeader = append(c.rep.lateness.fromLeader, late)
	if from.After(deadline) {
		c.rep.lateness.afterTakeover = append(c.rep.lateness.afterTakeover, late)
	}
	// A leader has 5 s of serving to close a window: a leader hung or
	// killed just after the deadline leaves the rest to the next one.
	if served := c.l.served(deadline, at); served > 5*time.Second {
		c.violate("late", obj, "Continued %s after its deadline %s, %s of it while a leader served (from %s)",
			at.Sub(deadline).Round(time.Millisecond), stamp(deadline), served.Round(time.Millisecond), stamp(from))
	}
}

// statusWrittenAfter is when the API server received the first status
// write of the question by a replica at or after t, or seen when the audit
// log has none.
func (c *checker) statusWrittenAfter(name string, t, seen time.Time) time.Time {
	first := seen
	for _, w := range c.h.writes {
		if w.Resource == "userquestions/status" && w.Name == name && w.Code < 300 && !w.ReceivedAt.Before(t) && w.ReceivedAt.Before(first) {
			first = w.ReceivedAt
		}
	}
	return first
}

// visibleBefore reports whether the write of this version of a claim
// completed before t: the first completed QuestionClaim write at or after
// the version's renewTime (the answerer stamps it just before sending).
func (c *checker) visibleBefore(claim string, v version[*hitlv1.QuestionClaim], t time.Time) bool {
	writes := c.h.claimWritten[claim]
	if len(writes) == 0 {
		return v.At.Before(t)
	}
	for _, w := range writes {
		if !w.Before(v.Object.Spec.RenewTime.Time) {
			return w.Before(t)
		}
	}
	return false
}

func deletedAt[T any](vs []version[T]) time.Time {
	for _, v := range vs {
		if v.Deleted {
			return v.At
		}
	}
	return time.Time{}
}

// settleLatency measures, for a question settled in its window, the time
// from the winning reply's send to the first version seen Settled.
func (c *checker) settleLatency(name string) {
	vs := c.h.questions[name]
	for _, v := range vs {
		if v.Object.Status.State != hitlv1.StateSettled || v.Object.Status.Settlement == nil || v.Object.Status.Settlement.Late {
			continue
		}
		for _, rv := range c.h.views.Replies {
			if rv.Reply == v.Object.Status.Settlement.Reply && !rv.Sent.IsZero() {
				c.rep.settle = append(c.rep.settle, v.At.Sub(rv.Sent))
			}
		}
		return
	}
}

// clients checks what the SDKs told the agents and answerers against what
// was recorded.
func (c *checker) clients() {
	for _, a := range c.h.views.Asks {
		q := lastQuestion(c.h.questions[a.Question])
		obj := "question/" + a.Question
		if a.Err != "" || q == nil {
			continue
		}
		switch {
		case a.Pending:
			if q.Status.State == hitlv1.StateSettled && q.Status.Settlement != nil && !q.Status.Settlement.Late {
				c.violate("told-pending-but-settled-in-window", obj, "the agent was told pending, but the question settled in its window")
			}
			// Seen Continued, or seen after it with the time its window
			// closed: the Continued version itself may have come and gone
			// while the recorder's watch was broken by an API server
			// restart (then Settled late, or Cancelled, before it listed).
			seen := false
			for _, v := range c.h.questions[a.Question] {
				seen = seen || v.Object.Status.State == hitlv1.StateContinued || v.Object.Status.ContinuedAt != nil
			}
			if !seen {
				c.violate("told-pending-never-continued", obj, "the agent was told pending, but the question was never seen Continued")
			}
		default:
			if q.Status.State != hitlv1.StateSettled || !sameBatch(a.Answers, q.Status.Answers) {
				c.violate("told-other-answer", obj, "the agent was told %v, the question is %s with %v", a.Answers, q.Status.State, q.Status.Answers)
			}
		}
	}
	for _, a := range c.h.views.Admits {
		q := lastQuestion(c.h.questions[a.Question])
		if a.Err != "" || q == nil {
			continue
		}
		if q.Status.State != hitlv1.StateSettled || settledBy(q) != a.Reply || !sameBatch(a.Answers, q.Status.Answers) {
			c.violate("told-other-answer", "question/"+a.Question, "admitting %s returned %v, the question is %s by %s with %v",
				a.Reply, a.Answers, q.Status.State, settledBy(q), q.Status.Answers)
		}
	}
	withdrawn := map[string]bool{}
	for _, name := range c.h.views.Withdrawn {
		withdrawn[name] = true
	}
	for _, rv := range c.h.views.Replies {
		if rv.Err != "" || rv.Reply == "" {
			continue
		}
		vs := c.h.replies[rv.Reply]
		if len(vs) == 0 && rv.Outcome == hitlv1.OutcomeQueued && withdrawn[rv.Reply] {
			// Created, queued and withdrawn while the recorder was not
			// watching (its watch broken by an API server restart, and
			// the reply gone by its next list): the answerer's own calls
			// account for it.
			c.rep.UnseenWithdrawn++
			continue
		}
		if len(vs) == 0 {
			c.violate("reply-lost", "reply/"+rv.Reply, "the answerer was told %s, but the reply was never seen", rv.Outcome)
			continue
		}
		r, deleted := lastReply(vs)
		// Told Queued, the reply may since be Admitted, Closed (its
		// question cancelled) or withdrawn.
		ok := r.Status.Outcome == rv.Outcome ||
			rv.Outcome == hitlv1.OutcomeQueued && (r.Status.Outcome == hitlv1.OutcomeAdmitted || r.Status.Outcome == hitlv1.OutcomeClosed || deleted)
		if !ok || (rv.Outcome == hitlv1.OutcomeRejected || rv.Outcome == hitlv1.OutcomeClosed) && r.Status.Reason != rv.Reason {
			c.violate("answerer-told-other-outcome", "reply/"+rv.Reply, "the answerer was told %s %s, the reply is %s %s",
				rv.Outcome, rv.Reason, r.Status.Outcome, r.Status.Reason)
		}
	}
}

// failovers measures, for each fault that took the leader away, the time
// to the next acquisition of the lease, to that replica's workers, and
// to its first write to a question or reply.
func (c *checker) failovers() {
	for i, e := range c.h.events {
		if e.Kind != "fault" || e.Replica == "" || e.Detail == "restart-apiserver" {
			continue
		}
		// From the moment the leader was killed or stopped.
		start := time.Time{}
		rest := c.h.events[i+1:]
		for j, n := range rest {
			if n.Replica == e.Replica && (n.Kind == "kill" || n.Kind == "stop") {
				start, rest = n.At, rest[j+1:]
				break
			}
		}
		if start.IsZero() {
			continue
		}
		f := failover{Fault: e.Detail, At: start}
		var by string
		for _, n := range rest {
			if by == "" && n.Kind == "acquired" {
				by, f.NewLeader, f.ToAcquire = n.Replica, n.Replica, ms(n.At.Sub(start))
				continue
			}
			if by != "" && n.Replica == by && n.Kind == "workers" {
				f.ToWorkers = ms(n.At.Sub(start))
				break
			}
		}
		if by == "" {
			continue
		}
		for _, w := range c.h.writes {
			if w.Replica == by && w.ReceivedAt.After(start) && w.Code < 300 &&
				(strings.HasPrefix(w.Resource, "userquestions") || strings.HasPrefix(w.Resource, "questionreplies")) {
				f.ToFirstWrite = ms(w.ReceivedAt.Sub(start))
				break
			}
		}
		c.rep.Failovers = append(c.rep.Failovers, f)
	}
}

// deposed counts the writes a replica made while another held the lease.
func (c *checker) deposed() {
	d := deposedWrites{ByResource: map[string]int{}}
	for _, w := range c.h.writes {
		if w.Resource == "leases" || !c.l.deposedAt(w.Replica, w.ReceivedAt) {
			continue
		}
		d.Total++
		d.ByResource[w.Verb+" "+w.Resource]++
		switch {
		case w.Code < 300:
			d.Succeeded++
		case w.Code == 409:
			d.Conflicts++
		}
	}
	c.rep.Deposed = d
}

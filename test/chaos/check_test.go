package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func batch(note string) []hitlv1.AnswerItem {
	return []hitlv1.AnswerItem{{ID: "go", Selected: []string{"yes"}}, {ID: "note", Custom: note}}
}

func question(rv string, timeout time.Duration) *hitlv1.UserQuestion {
	q := &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Name: "q1", ResourceVersion: rv}}
	if timeout > 0 {
		q.Spec.Timeout = &metav1.Duration{Duration: timeout}
		q.Status.Deadline = ptr.To(metav1.NewMicroTime(at(timeout.Seconds())))
	}
	q.Status.State = hitlv1.StateOpen
	return q
}

func settled(q *hitlv1.UserQuestion, rv, reply string, late bool, answers []hitlv1.AnswerItem) *hitlv1.UserQuestion {
	q = q.DeepCopy()
	q.ResourceVersion = rv
	q.Status.State = hitlv1.StateSettled
	q.Status.Settlement = &hitlv1.Settlement{Reply: reply, Late: late}
	q.Status.Answers = answers
	return q
}

func continuedAt(q *hitlv1.UserQuestion, rv string, when time.Time) *hitlv1.UserQuestion {
	q = q.DeepCopy()
	q.ResourceVersion = rv
	q.Status.State = hitlv1.StateContinued
	q.Status.ContinuedAt = ptr.To(metav1.NewMicroTime(when))
	return q
}

func reply(name, rv string, outcome hitlv1.ReplyOutcome, answers []hitlv1.AnswerItem) *hitlv1.QuestionReply {
	r := &hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	r.Spec.QuestionRef.Name = "q1"
	r.Spec.Answers = answers
	r.Status.Outcome = outcome
	return r
}

// closedReply is reply name to q1, Closed NOT_ANSWERABLE: its question
// was finished or gone.
func closedReply(name, rv string, answers []hitlv1.AnswerItem) *hitlv1.QuestionReply {
	return withReason(reply(name, rv, hitlv1.OutcomeClosed, answers), hitlv1.CodeNotAnswerable)
}

func rejectedReply(name, rv string, code hitlv1.ErrorCode, answers []hitlv1.AnswerItem) *hitlv1.QuestionReply {
	return withReason(reply(name, rv, hitlv1.OutcomeRejected, answers), code)
}

func withReason(r *hitlv1.QuestionReply, code hitlv1.ErrorCode) *hitlv1.QuestionReply {
	r.Status.Reason = code
	return r
}

// claim is a version of claim c1 on q1, held by alice, renewed at renew
// (seconds from t0) for seconds.
func claim(rv string, renew float64, seconds int32) *hitlv1.QuestionClaim {
	return &hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c1", ResourceVersion: rv, Labels: map[string]string{hitlv1.QuestionLabel: "q1"}},
		Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: "q1"}, Holder: &hitlv1.UserInfo{Username: "alice"},
			DurationSeconds: seconds, RenewTime: ptr.To(metav1.NewMicroTime(at(renew)))},
	}
}

func cv(s float64, c *hitlv1.QuestionClaim) version[*hitlv1.QuestionClaim] {
	return version[*hitlv1.QuestionClaim]{At: at(s), Object: c}
}

func deletedCV(s float64, c *hitlv1.QuestionClaim) version[*hitlv1.QuestionClaim] {
	v := cv(s, c)
	v.Deleted = true
	return v
}

func qv(s float64, q *hitlv1.UserQuestion) version[*hitlv1.UserQuestion] {
	return version[*hitlv1.UserQuestion]{At: at(s), Object: q}
}

func rv(s float64, r *hitlv1.QuestionReply) version[*hitlv1.QuestionReply] {
	return version[*hitlv1.QuestionReply]{At: at(s), Object: r}
}

// servingEvents has one replica leading with its workers from the start.
var servingEvents = []event{{At: at(-10), Replica: "manager-a", Kind: "start"}, {At: at(-9), Replica: "manager-a", Kind: "acquired"},
	{At: at(-9), Replica: "manager-a", Kind: "workers"}}

func rules(t *testing.T, h history) []string {
	t.Helper()
	if h.end.IsZero() {
		h.end = at(100)
	}
	if h.events == nil {
		h.events = servingEvents
	}
	if h.claims == nil {
		h.claims = map[string][]version[*hitlv1.QuestionClaim]{}
	}
	rep := &report{}
	check(rep, h)
	var out []string
	for _, v := range rep.Violations {
		out = append(out, v.Rule)
		t.Logf("%s %s: %s", v.Rule, v.Object, v.Message)
	}
	return out
}

func TestCheckAcceptsAGoodHistory(t *testing.T) {
	open := question("1", 5*time.Second)
	h := history{
		questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(1.2, settled(open, "3", "r1", false, batch("a")))}},
		replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "2", "", batch("a"))), rv(1.3, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))}},
		views: clientViews{
			Asks:    []askView{{Question: "q1", Timed: true, Answers: batch("a")}},
			Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeApplied, Sent: at(1)}},
		},
	}
	if got := rules(t, h); len(got) != 0 {
		t.Fatalf("violations in a good history: %v", got)
	}
}

func TestCheckFindsBrokenPromises(t *testing.T) {
	open := question("1", 5*time.Second)
	blocking := question("1", 0)
	for _, tc := range []struct {
		name string
		h    history
		want string
	}{
		{"settled twice", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, settled(blocking, "3", "r1", false, batch("a"))),
				qv(2, settled(blocking, "5", "r2", false, batch("b")))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{
				"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))},
				"r2": {rv(2, reply("r2", "6", hitlv1.OutcomeApplied, batch("b")))},
			},
		}, "settled-twice"},
		{"two winners", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{
				"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))},
				"r2": {rv(2, reply("r2", "6", hitlv1.OutcomeApplied, batch("b")))},
			},
		}, "two-winners"},
		{"answers not the reply's batch", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(1, settled(blocking, "3", "r1", false, batch("other")))}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))}},
		}, "settlement"},
		{"lost reply", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking)}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "2", "", batch("a")))}},
		}, "reply-lost"},
		{"outcome changed", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking)}},
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "2", hitlv1.OutcomeApplied, batch("a"))),
				rv(2, reply("r1", "3", hitlv1.OutcomeRejected, batch("a")))}},
		}, "reply-outcome-changed"},
		{"window closed early", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(4.9, continuedAt(open, "2", at(4.9)))}},
		}, "early"},
		{"blocking question continued", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(6, continuedAt(blocking, "2", at(6)))}},
		}, "continued-without-window"},
		{"window closed long after its deadline while a leader served", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(11, continuedAt(open, "2", at(11)))}},
		}, "late"},
		{"window closed while claimed", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(6, continuedAt(open, "2", at(6)))}},
			claims:    map[string][]version[*hitlv1.QuestionClaim]{"c1": {cv(4, claim("9", 4, 5))}},
		}, "closed-while-claimed"},
		{"window closed before its claim was released", history{
			questions:    map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(5.1, continuedAt(open, "2", at(5.01)))}},
			claims:       map[string][]version[*hitlv1.QuestionClaim]{"c1": {cv(1, claim("9", 1, 7))}},
			claimDeleted: map[string]time.Time{"c1": at(5.08)},
			writes:       []write{{Replica: "manager-a", Verb: "update", Resource: "userquestions/status", Name: "q1", Code: 200, ReceivedAt: at(5.06), At: at(5.07)}},
		}, "closed-while-claimed"},
		{"agent told another answer", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))}},
			views:     clientViews{Asks: []askView{{Question: "q1", Answers: batch("b")}}},
		}, "told-other-answer"},
		{"agent told pending for a question settled in its window", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(1, settled(open, "3", "r1", false, batch("a")))}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))}},
			views:     clientViews{Asks: []askView{{Question: "q1", Timed: true, Pending: true}}},
		}, "told-pending-but-settled-in-window"},
		{"agent told pending for a question whose window never closed", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open)}},
			views:     clientViews{Asks: []askView{{Question: "q1", Timed: true, Pending: true}}},
		}, "told-pending-never-continued"},
		{"queued reply never seen, not withdrawn", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking)}},
			views:     clientViews{Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeQueued}}},
		}, "reply-lost"},
		{"applied reply never seen, though withdrawn", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking)}},
			views: clientViews{Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeApplied}},
				Withdrawn: []string{"r1"}},
		}, "reply-lost"},
		{"answerer told another outcome", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))}},
			views:     clientViews{Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeClosed, Reason: hitlv1.CodeNotAnswerable}}},
		}, "answerer-told-other-outcome"},
		{"answerer told another reason for a Closed reply", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))},
				"r2": {rv(2, closedReply("r2", "6", batch("b")))}},
			views: clientViews{Replies: []replyView{{Question: "q1", Reply: "r2", Outcome: hitlv1.OutcomeClosed, Reason: hitlv1.CodeReplyQueued}}},
		}, "answerer-told-other-outcome"},
		{"a reply to a settled question Rejected NOT_ANSWERABLE, not Closed", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))},
				"r2": {rv(2, rejectedReply("r2", "6", hitlv1.CodeNotAnswerable, batch("b")))}},
		}, "reply-outcome"},
		{"a reply to a question never seen Rejected, not Closed", history{
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, rejectedReply("r1", "2", hitlv1.CodeNotAnswerable, batch("a")))}},
		}, "reply-outcome"},
		{"a reply to an open question Closed", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking)}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, closedReply("r1", "2", batch("a")))}},
		}, "reply-outcome"},
		{"a Closed reply that settled its question", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, closedReply("r1", "4", batch("a")))}},
		}, "reply-outcome"},
		{"a Closed reply with another reason", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))},
				"r2": {rv(2, withReason(closedReply("r2", "6", batch("b")), hitlv1.CodeBadAnswer))}},
		}, "reply-outcome"},
		{"a Closed reply that changed", history{
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))},
				"r2": {rv(2, closedReply("r2", "6", batch("b"))), rv(3, reply("r2", "7", hitlv1.OutcomeApplied, batch("b")))}},
		}, "reply-outcome-changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules(t, tc.h); !slices.Contains(got, tc.want) {
				t.Fatalf("want a %s violation, got %v", tc.want, got)
			}
		})
	}
}

// A leader that slept past its lease and woke up is deposed from the
// moment the other replica acquired the lease until it exits; no leader
// serves between the stop and the takeover.
func TestLeadershipOfAHungLeader(t *testing.T) {
	events := []event{
		{At: at(0), Replica: "a", Kind: "start"}, {At: at(0), Replica: "b", Kind: "start"},
		{At: at(1), Replica: "a", Kind: "acquired"}, {At: at(1), Replica: "a", Kind: "workers"},
		{At: at(10), Replica: "a", Kind: "stop"},
		{At: at(21), Replica: "b", Kind: "acquired"}, {At: at(21.5), Replica: "b", Kind: "workers"},
		{At: at(25), Replica: "a", Kind: "cont"}, {At: at(27), Replica: "a", Kind: "exit"},
	}
	l := leadershipOf(events, at(60))
	if !l.deposedAt("a", at(26)) || l.deposedAt("a", at(20)) || l.deposedAt("a", at(28)) || l.deposedAt("b", at(26)) {
		t.Errorf("deposed spans: %v", l.deposed)
	}
	if from, ok := l.servingAt(at(15)); !ok || !from.Equal(at(21.5)) {
		t.Errorf("serving again at %v (%t), want %v", from, ok, at(21.5))
	}
	if from, ok := l.servingAt(at(5)); !ok || !from.Equal(at(5)) {
		t.Errorf("serving at 5s: %v (%t)", from, ok)
	}
}

// A claim stamped just before the deadline but written after the window
// closed never held it; one released before the close no longer did; one
// that names another agent or has no stamped holder never held any.
func TestCheckAllowsClaimsThatDidNotHoldTheWindow(t *testing.T) {
	open := question("1", 5*time.Second)
	otherAgent := claim("3", 4, 7)
	otherAgent.Spec.Agent = "other-bot"
	unstamped := claim("3", 4, 7)
	unstamped.Spec.Holder = nil
	questions := map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(5.1, continuedAt(open, "2", at(5.01)))}}
	for name, h := range map[string]history{
		"arrived late": {questions: questions,
			claims:       map[string][]version[*hitlv1.QuestionClaim]{"c1": {cv(5.2, claim("3", 4.9, 7))}},
			claimWritten: map[string][]time.Time{"c1": {at(5.05)}}},
		"released first": {questions: questions,
			claims:       map[string][]version[*hitlv1.QuestionClaim]{"c1": {cv(1, claim("3", 1, 7)), deletedCV(5.02, claim("3", 1, 7))}},
			claimDeleted: map[string]time.Time{"c1": at(5.0)}},
		"names another agent": {questions: questions,
			claims: map[string][]version[*hitlv1.QuestionClaim]{"c1": {cv(4, otherAgent)}}},
		"has no holder": {questions: questions,
			claims: map[string][]version[*hitlv1.QuestionClaim]{"c1": {cv(4, unstamped)}}},
		// The close is dated when the controller sent its read of the
		// claims (5.01); the API server served the read after the release
		// (5.03) and before the Continued write (5.06).
		"released while the claims were read": {questions: questions,
			claims:       map[string][]version[*hitlv1.QuestionClaim]{"c1": {cv(1, claim("3", 1, 7)), deletedCV(5.08, claim("3", 1, 7))}},
			claimDeleted: map[string]time.Time{"c1": at(5.03)},
			writes:       []write{{Replica: "manager-a", Verb: "update", Resource: "userquestions/status", Name: "q1", Code: 200, ReceivedAt: at(5.06), At: at(5.07)}}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := rules(t, h); slices.Contains(got, "closed-while-claimed") {
				t.Fatalf("a claim that did not hold the window was counted: %v", got)
			}
		})
	}
}

// A leader killed with SIGKILL serves no more from the kill, not from when
// its exit is noticed.
func TestLeadershipEndsAtTheKill(t *testing.T) {
	l := leadershipOf([]event{
		{At: at(0), Replica: "a", Kind: "start"}, {At: at(1), Replica: "a", Kind: "acquired"}, {At: at(1), Replica: "a", Kind: "workers"},
		{At: at(10), Replica: "a", Kind: "kill"}, {At: at(10.5), Replica: "a", Kind: "exit"},
	}, at(60))
	if _, ok := l.servingAt(at(10.2)); ok {
		t.Fatalf("serving after the kill: %v", l.serving)
	}
}

// A reply queued and withdrawn by its answerer while the recorder's watch
// was broken (an API server restart) is never seen, and is not lost: the
// answerer's calls account for it.
func TestAReplyWithdrawnUnseenIsNotLost(t *testing.T) {
	h := history{
		questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, question("1", 0))}},
		views: clientViews{Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeQueued}},
			Withdrawn: []string{"r1"}},
	}
	if got := rules(t, h); slices.Contains(got, "reply-lost") {
		t.Fatalf("a withdrawn reply counted as lost: %v", got)
	}
}

// A question whose Continued version came and went while the recorder's
// watch was broken, and was then seen Settled late, closed its window: its
// continuedAt says so, and the agent told pending was told the truth.
func TestAWindowClosedUnseenIsSeenByItsContinuedAt(t *testing.T) {
	open := question("1", 5*time.Second)
	late := settled(open, "3", "r1", true, batch("a"))
	late.Status.ContinuedAt = ptr.To(metav1.NewMicroTime(at(5)))
	h := history{
		questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(9, late)}},
		replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(8, reply("r1", "4", hitlv1.OutcomeAdmitted, batch("a")))}},
		views:     clientViews{Asks: []askView{{Question: "q1", Timed: true, Pending: true}}},
	}
	if got := rules(t, h); slices.Contains(got, "told-pending-never-continued") {
		t.Fatalf("a window closed while the recorder was not watching counted as never closed: %v", got)
	}
}

// A leader has 5 s of serving time to close a window: one hung just after
// the deadline leaves the window to the next leader, whose time counts
// from its takeover; two leaders that each served part of the 5 s and
// more between them did not close it in time.
func TestLateCountsTheTimeALeaderServed(t *testing.T) {
	open := question("1", 5*time.Second) // deadline at 5 s
	hung := func(resume float64) []event {
		return []event{
			{At: at(-10), Replica: "manager-a", Kind: "start"}, {At: at(-9), Replica: "manager-a", Kind: "acquired"},
			{At: at(-9), Replica: "manager-a", Kind: "workers"}, {At: at(-10), Replica: "manager-b", Kind: "start"},
			{At: at(resume), Replica: "manager-a", Kind: "stop"},
			{At: at(15.4), Replica: "manager-b", Kind: "acquired"}, {At: at(15.4), Replica: "manager-b", Kind: "workers"},
		}
	}
	for name, c := range map[string]struct {
		events []event
		closed float64
		late   bool
	}{
		"hung 30 ms after the deadline, closed at the takeover":      {hung(5.03), 15.5, false},
		"hung 3 s after the deadline, closed 3 s after the takeover": {hung(8), 18.5, true},
		"served throughout, closed 6 s late":                         {servingEvents, 11, true},
	} {
		t.Run(name, func(t *testing.T) {
			h := history{events: c.events,
				questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, open), qv(c.closed, continuedAt(open, "2", at(c.closed)))}}}
			if got := slices.Contains(rules(t, h), "late"); got != c.late {
				t.Fatalf("late reported: %t, want %t", got, c.late)
			}
		})
	}
}

// A reply that comes after its question finished, or for a question that
// is gone, is Closed NOT_ANSWERABLE: a final, healthy outcome, and what
// the answerer is told. A queued reply whose question is cancelled goes
// from Queued to Closed.
func TestCheckAcceptsClosedReplies(t *testing.T) {
	blocking := question("1", 0)
	timed := question("1", 5*time.Second)
	cancelled := func(q *hitlv1.UserQuestion, rv string) *hitlv1.UserQuestion {
		q = q.DeepCopy()
		q.ResourceVersion = rv
		q.Spec.Cancelled = true
		q.Status.State = hitlv1.StateCancelled
		return q
	}
	queued := continuedAt(timed, "3", at(5))
	queued.Status.QueuedReply = &hitlv1.QueuedReply{Name: "r1"}
	beingCancelled := blocking.DeepCopy()
	beingCancelled.ResourceVersion = "2"
	beingCancelled.Spec.Cancelled = true
	for name, h := range map[string]history{
		"after the settlement": {
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, settled(blocking, "3", "r1", false, batch("a")))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, reply("r1", "4", hitlv1.OutcomeApplied, batch("a")))},
				"r2": {rv(2, reply("r2", "5", "", batch("b"))), rv(2.1, closedReply("r2", "6", batch("b")))}},
			views: clientViews{Asks: []askView{{Question: "q1", Answers: batch("a")}},
				Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeApplied},
					{Question: "q1", Reply: "r2", Outcome: hitlv1.OutcomeClosed, Reason: hitlv1.CodeNotAnswerable}}},
		},
		"racing the cancellation": {
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, cancelled(blocking, "2"))}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1.1, closedReply("r1", "4", batch("a")))}},
			views:     clientViews{Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeClosed, Reason: hitlv1.CodeNotAnswerable}}},
		},
		"while the question is being cancelled": {
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, blocking), qv(1, beingCancelled)}},
			replies:   map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1.1, closedReply("r1", "4", batch("a")))}},
		},
		"queued, then its question cancelled": {
			questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, timed), qv(5, continuedAt(timed, "2", at(5))), qv(6, queued),
				qv(8, cancelled(continuedAt(timed, "2", at(5)), "7"))}},
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(6, reply("r1", "4", hitlv1.OutcomeQueued, batch("a"))),
				rv(8.1, closedReply("r1", "8", batch("a")))}},
			views: clientViews{Asks: []askView{{Question: "q1", Timed: true, Pending: true}},
				Replies: []replyView{{Question: "q1", Reply: "r1", Outcome: hitlv1.OutcomeQueued}}},
		},
		"its question never seen": {
			replies: map[string][]version[*hitlv1.QuestionReply]{"r1": {rv(1, closedReply("r1", "2", batch("a")))}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := rules(t, h); len(got) != 0 {
				t.Fatalf("violations: %v", got)
			}
			rep := &report{}
			h.end, h.events = at(100), servingEvents
			if h.claims == nil {
				h.claims = map[string][]version[*hitlv1.QuestionClaim]{}
			}
			check(rep, h)
			if rep.Outcomes[string(hitlv1.OutcomeClosed)] != 1 {
				t.Fatalf("outcomes %v, want one Closed", rep.Outcomes)
			}
		})
	}
}

// NOT_ANSWERABLE stays Rejected for one reply only: a vote past the
// MaxVotes votes a governed question records, the question still open.
func TestCheckAcceptsAVoteRejectedPastMaxVotes(t *testing.T) {
	q := governedQuestion("1")
	var votes []hitlv1.Vote
	for i := range hitlv1.MaxVotes {
		votes = append(votes, vote(fmt.Sprintf("v%02d", i), fmt.Sprintf("user-%02d", i)))
	}
	h := history{
		questions: map[string][]version[*hitlv1.UserQuestion]{"q1": {qv(0, q), qv(1, withVotes(q, "3", votes...))}},
		replies: map[string][]version[*hitlv1.QuestionReply]{
			"r1": {rv(2, voteReply("r1", "dave", "4", hitlv1.OutcomeRejected, batch("a")))}},
	}
	h.replies["r1"][0].Object.Status.Reason = hitlv1.CodeNotAnswerable
	if got := rules(t, h); slices.Contains(got, "reply-outcome") {
		t.Fatalf("a vote past MaxVotes Rejected NOT_ANSWERABLE counted as a violation: %v", got)
	}
	h.questions["q1"] = h.questions["q1"][:1]
	if got := rules(t, h); !slices.Contains(got, "reply-outcome") {
		t.Fatalf("Rejected NOT_ANSWERABLE on a question that never held %d votes: %v", hitlv1.MaxVotes, got)
	}
}

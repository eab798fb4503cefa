package model

import (
	"testing"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// These scenarios pin the model itself to SPEC §1, so that a wrong model
// fails here, next to the rule it breaks, rather than as a mismatch with
// the controller.

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func timed(m *Model, name string, timeout time.Duration) *Question {
	created := t0.Add(3 * time.Second) // a few seconds of real time after T0
	return m.Ask(Ask{Name: name, Created: created, Timeout: &timeout})
}

func expectState(t *testing.T, m *Model, name string, want hitlv1.QuestionState) {
	t.Helper()
	if got := m.Questions[name].State; got != want {
		t.Fatalf("%s is %s, want %s\n%v", name, got, want, m.Log)
	}
}

func expectOutcome(t *testing.T, m *Model, name string, outcome hitlv1.ReplyOutcome, reason hitlv1.ErrorCode) {
	t.Helper()
	if r := m.Replies[name]; r.Outcome != outcome || r.Reason != reason {
		t.Fatalf("%s is %s/%s, want %s/%s\n%v", name, r.Outcome, r.Reason, outcome, reason, m.Log)
	}
}

func TestWindowCloses(t *testing.T) {
	m := New(t0)
	q := timed(m, "q", time.Hour)
	if q.DeadlineSlot != 3 {
		t.Fatalf("deadline slot %d, want 3: T0+3s+1h lies in the third slot", q.DeadlineSlot)
	}
	m.Step(2)
	expectState(t, m, "q", hitlv1.StateOpen)
	m.Step(1)
	expectState(t, m, "q", hitlv1.StateContinued)
	if q.ContinuedSlot != 3 {
		t.Fatalf("continued at slot %d", q.ContinuedSlot)
	}

	blocking := m.Ask(Ask{Name: "b", Created: t0.Add(time.Second)})
	m.Step(100)
	if blocking.State != hitlv1.StateOpen {
		t.Fatal("a blocking question never times out")
	}
}

func TestLateReplyQueuesAndIsAdmitted(t *testing.T) {
	m := New(t0)
	timed(m, "q", time.Hour)
	m.Step(3)
	m.Reply("r1", "q", false)
	expectOutcome(t, m, "r1", hitlv1.OutcomeRejected, hitlv1.CodeBadAnswer)
	m.Reply("r2", "q", true)
	expectOutcome(t, m, "r2", hitlv1.OutcomeQueued, "")
	m.Reply("r3", "q", false)
	expectOutcome(t, m, "r3", hitlv1.OutcomeRejected, hitlv1.CodeReplyQueued)
	if err := m.Admit("q", "r3"); err != ErrInvalid {
		t.Fatalf("admitting a reply that is not queued: %v", err)
	}
	if err := m.Admit("q", "r2"); err != nil {
		t.Fatal(err)
	}
	expectState(t, m, "q", hitlv1.StateSettled)
	expectOutcome(t, m, "r2", hitlv1.OutcomeAdmitted, "")
	if s := m.Questions["q"].Settlement; s.Reply != "r2" || !s.Late {
		t.Fatalf("settlement %+v", s)
	}
	if err := m.Admit("q", "r2"); err != nil {
		t.Fatal("setting the same admittedReply again is no change")
	}
	m.DeleteReply("r2")
	expectState(t, m, "q", hitlv1.StateSettled)
	m.Reply("r4", "q", true)
	expectOutcome(t, m, "r4", hitlv1.OutcomeRejected, hitlv1.CodeNotAnswerable)
}

func TestWithdrawnReplyLeavesTheQuestionAnswerable(t *testing.T) {
	m := New(t0)
	timed(m, "q", time.Hour)
	m.Step(3)
	m.Reply("r1", "q", true)
	m.DeleteReply("r1")
	if m.Questions["q"].Queued != "" {
		t.Fatal("the withdrawn reply is still queued")
	}
	m.Reply("r2", "q", true)
	expectOutcome(t, m, "r2", hitlv1.OutcomeQueued, "")
	if err := m.Cancel("q"); err != nil {
		t.Fatal(err)
	}
	expectState(t, m, "q", hitlv1.StateCancelled)
	expectOutcome(t, m, "r2", hitlv1.OutcomeRejected, hitlv1.CodeNotAnswerable)
	expectOutcome(t, m, "r1", hitlv1.OutcomeQueued, "")
}

func TestClaimsHoldTheWindow(t *testing.T) {
	m := New(t0)
	m.Step(4)
	m.Claim("c1", "q", "alice")
	q := timed(m, "q", time.Hour) // deadline slot 3: already past
	expectState(t, m, "q", hitlv1.StateOpen)
	if got := m.ListedClaims("q"); len(got) != 1 || got[0].Holder != "alice" {
		t.Fatalf("listed %v", got)
	}
	m.Unclaim("c1")
	expectState(t, m, "q", hitlv1.StateContinued)
	if q.ContinuedSlot != 4 {
		t.Fatalf("continued at slot %d, want 4: at once", q.ContinuedSlot)
	}

	timed(m, "p", time.Hour)
	m.Claim("c2", "p", "bob")
	m.Step(1)
	if len(m.ListedClaims("p")) != 0 {
		t.Fatal("a claim outlived a clock step")
	}
	m.Renew("c2")
	if len(m.ListedClaims("p")) != 1 {
		t.Fatal("a renewal did not make the claim live")
	}
}

func TestRestartRenewsClaimsAndDecidesWhatCameDue(t *testing.T) {
	m := New(t0)
	timed(m, "held", time.Hour)
	timed(m, "free", time.Hour)
	m.Claim("c1", "held", "alice")
	m.Stop()
	m.Step(5)
	expectState(t, m, "free", hitlv1.StateOpen) // nobody decides while down
	m.Start()
	expectState(t, m, "free", hitlv1.StateContinued)
	expectState(t, m, "held", hitlv1.StateOpen)
	if q := m.Questions["free"]; q.ContinuedSlot != 5 {
		t.Fatalf("continued at slot %d", q.ContinuedSlot)
	}
}

func TestTTL(t *testing.T) {
	m := New(t0)
	zero, half := int32(0), int32(1800)
	m.Ask(Ask{Name: "now", Created: t0.Add(time.Second), TTL: &zero})
	m.Ask(Ask{Name: "later", Created: t0.Add(time.Second), TTL: &half})
	m.Reply("r1", "now", true)
	expectOutcome(t, m, "r1", hitlv1.OutcomeApplied, "")
	if !m.Questions["now"].Deleted || !m.Replies["r1"].Deleted {
		t.Fatal("TTL 0 deletes the question and its replies once settled")
	}
	m.Claim("c1", "later", "alice")
	if err := m.Cancel("later"); err != nil {
		t.Fatal(err)
	}
	m.Reply("r2", "later", true)
	expectOutcome(t, m, "r2", hitlv1.OutcomeRejected, hitlv1.CodeNotAnswerable)
	if m.Questions["later"].Deleted {
		t.Fatal("deleted before its TTL")
	}
	m.Step(1)
	if !m.Questions["later"].Deleted || !m.Replies["r2"].Deleted || m.Claims["c1"] != nil {
		t.Fatal("TTL 1800 s deletes the question, its replies and its claims at the next step")
	}
	m.Reply("r3", "later", true)
	expectOutcome(t, m, "r3", hitlv1.OutcomeRejected, hitlv1.CodeNotAnswerable)
	if err := m.Cancel("later"); err != ErrNotFound {
		t.Fatal("a deleted question is not found")
	}
}

func TestWindowStart(t *testing.T) {
	created := t0
	inside := created.Add(400 * time.Millisecond)
	outside := created.Add(-time.Millisecond)
	if !WindowStart(created, &inside).Equal(inside) {
		t.Fatal("askedAt within the creation second is the window start")
	}
	if !WindowStart(created, &outside).Equal(created) {
		t.Fatal("askedAt outside the creation second is ignored")
	}
	late := created.Add(time.Second)
	if !WindowStart(created, &late).Equal(created) {
		t.Fatal("askedAt a full second after creation is ignored")
	}
}

// A queued reply admitted, or rejected by a cancel, while the manager is
// down and deleted before it starts again goes with the outcome its object
// showed: the manager never saw it to write the new one. The question still
// settles (or is cancelled) as if the reply had stayed.
func TestAReplyDeletedWhileTheManagerIsDownKeepsTheOutcomeItShowed(t *testing.T) {
	m := New(t0)
	timed(m, "q", time.Hour)
	timed(m, "c", time.Hour)
	m.Step(3)
	m.Reply("r1", "q", true)
	m.Reply("r2", "c", true)
	m.Stop()
	if err := m.Admit("q", "r1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Cancel("c"); err != nil {
		t.Fatal(err)
	}
	m.DeleteReply("r1")
	m.DeleteReply("r2")
	m.Start()
	expectOutcome(t, m, "r1", hitlv1.OutcomeQueued, "")
	expectOutcome(t, m, "r2", hitlv1.OutcomeQueued, "")
	expectState(t, m, "q", hitlv1.StateSettled)
	expectState(t, m, "c", hitlv1.StateCancelled)

	// Once the manager runs, a deletion after admission changes nothing.
	timed(m, "q2", time.Hour)
	m.Step(3)
	m.Reply("r3", "q2", true)
	if err := m.Admit("q2", "r3"); err != nil {
		t.Fatal(err)
	}
	m.DeleteReply("r3")
	expectOutcome(t, m, "r3", hitlv1.OutcomeAdmitted, "")
}
